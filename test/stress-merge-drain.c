// SPDX-License-Identifier: MIT
/*
 * Description: a writer merging small writes into the last buffer while
 * the reader drains that same buffer (issue 11, section 5).  The writer
 * makes writes of 1 to 300 bytes, so almost every write appends to the
 * page the reader is reading from (the merge rule); the reader makes reads
 * of 1 to 600 bytes, so it keeps catching up with the writer and reading
 * the last, growing buffer.  The stream is position-numbered (the byte at
 * position n is t_pattern(n)); every byte is checked, none may be lost,
 * doubled or stale.  A second round does the same with one blocking and
 * one non-blocking side each way.  Runs for PP_STRESS_SECONDS (default 2)
 * in all.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>

#define SEED	0x3e

struct side {
	struct pp_file *f;
	bool nonblock;
	long long deadline;
	unsigned long long bytes;
};

static void *writer_main(void *arg)
{
	struct side *s = arg;
	unsigned char buf[300];
	unsigned int seed = 1;

	while (t_now_ms() < s->deadline) {
		size_t n = 1 + (size_t)rand_r(&seed) % sizeof(buf);
		size_t done = 0;

		t_fill(buf, n, s->bytes, SEED);
		while (done < n) {
			ssize_t r = pp_write(s->f, buf + done, n - done);

			if (r < 0 && errno == EAGAIN && s->nonblock) {
				sched_yield();
				continue;
			}
			if (r <= 0)
				t_fail_at(__FILE__, __LINE__, "pp_write = %zd: %s", r, strerror(errno));
			done += (size_t)r;
		}
		s->bytes += n;
	}
	pp_close(s->f);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct side *s = arg;
	unsigned char buf[600];
	unsigned int seed = 2;

	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % sizeof(buf);
		ssize_t r = pp_read(s->f, buf, n);

		if (r < 0 && errno == EAGAIN && s->nonblock) {
			sched_yield();
			continue;
		}
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		if (t_check(buf, (size_t)r, s->bytes, SEED))
			t_fail_at(__FILE__, __LINE__, "wrong byte in a read of %zd at stream "
				  "position %llu", r, s->bytes);
		s->bytes += (size_t)r;
	}
	return NULL;
}

static void round_trip(int ms, bool wr_nonblock, bool rd_nonblock)
{
	struct pp_file *e[2];
	struct side w, r;
	pthread_t tw, tr;

	t_pipe2(e, 0);
	if (wr_nonblock)
		ASSERT_EQ(pp_fcntl(e[1], F_SETFL, O_NONBLOCK), 0);
	if (rd_nonblock)
		ASSERT_EQ(pp_fcntl(e[0], F_SETFL, O_NONBLOCK), 0);
	w = (struct side){ .f = e[1], .nonblock = wr_nonblock, .deadline = t_now_ms() + ms };
	r = (struct side){ .f = e[0], .nonblock = rd_nonblock };
	ASSERT_EQ(pthread_create(&tr, NULL, reader_main, &r), 0);
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, &w), 0);
	t_join(tw, NULL, ms / 1000 + 30);
	t_join(tr, NULL, 30);
	ASSERT_EQ(r.bytes, w.bytes);
	printf("%s writer, %s reader: %llu bytes\n", wr_nonblock ? "non-blocking" : "blocking",
	       rd_nonblock ? "non-blocking" : "blocking", w.bytes);
	pp_close(e[0]);
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;

	t_watchdog(ms / 1000 + 60, "merging writes while the reader drains the last buffer");
	round_trip(ms / 2, false, false);
	round_trip(ms / 4, true, false);
	round_trip(ms / 4, false, true);
	return T_EXIT_PASS;
}
