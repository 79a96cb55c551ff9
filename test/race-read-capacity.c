// SPDX-License-Identifier: MIT
/*
 * Description: no read returns more than the pipe holds.  A kernel pipe's
 * read holds pipe->mutex for its whole copy, so a writer cannot refill the
 * pipe under it: through a 4096-byte pipe every read(64 KiB) returns at
 * most 4096.  pp__pipe_read() holds only the consumer lock and goes on
 * while the pipe is not empty, so a writer that refills the slot the read
 * just drained (reopen) or freed hands the same read more than the pipe's
 * capacity (test/defect-handoff-capacity sees it now and then under load).
 * A writer streams 4 KiB writes; the reader's reads are checked for size
 * and every byte.  Runs for PP_STRESS_SECONDS (default 2).
 */
#include "helpers.h"

#include <fcntl.h>
#include <stdatomic.h>

#define SEED	0x4c

static struct pp_file *e[2];
static long long deadline;
static unsigned long long wbytes, rbytes, reads, too_big;
static ssize_t biggest;

static void *writer_main(void *arg)
{
	static unsigned char buf[4096];

	(void)arg;
	while (t_now_ms() < deadline) {
		t_fill(buf, sizeof(buf), wbytes, SEED);
		if (pp_write(e[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			t_fail_at(__FILE__, __LINE__, "pp_write: %s", strerror(errno));
		wbytes += sizeof(buf);
	}
	pp_close(e[1]);
	return NULL;
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	static unsigned char buf[65536];
	pthread_t tw;

	if (pp_page_size() != 4096)
		return t_skip("page size %zu", pp_page_size());
	t_watchdog(ms / 1000 + 60, "4 KiB writes and 64 KiB reads through a 4096-byte pipe");
	t_pipe2(e, 0);
	ASSERT_EQ(pp_fcntl(e[0], F_SETPIPE_SZ, 4096), 4096);
	deadline = t_now_ms() + ms;
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, NULL), 0);
	for (;;) {
		ssize_t r = pp_read(e[0], buf, sizeof(buf));

		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		if (t_check(buf, (size_t)r, rbytes, SEED))
			t_fail_at(__FILE__, __LINE__, "wrong byte at stream position %llu", rbytes);
		rbytes += (size_t)r;
		reads++;
		if (r > 4096)
			too_big++;
		if (r > biggest)
			biggest = r;
	}
	t_join(tw, NULL, 30);
	ASSERT_EQ(rbytes, wbytes);
	printf("%llu reads, %llu bytes; %llu reads over 4096 bytes, the largest %zd\n",
	       reads, rbytes, too_big, biggest);
	ASSERT_EQ(too_big, 0ull);
	pp_close(e[0]);
	return T_EXIT_PASS;
}
