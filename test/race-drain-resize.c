// SPDX-License-Identifier: MIT
/*
 * Description: message traffic through one- and two-slot pipes (the drained
 * slot and its reopen in the smallest rings) while a third thread resizes
 * the pipe between 1, 2 and 16 pages (resetting head and tail under
 * blocked, lock-free waiters) and a fourth asks FIONREAD and polls.  The
 * writer makes writes of 1 to 300 bytes and now and then a whole page;
 * the reader reads 1 to 600 bytes; both block.  Every byte is checked; a
 * lost wake-up is a hang, turned into a failure by the watchdog.  Runs for
 * PP_STRESS_SECONDS (default 2).
 */
#include "helpers.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/ioctl.h>

#define SEED	0x5d

static struct pp_file *e[2];
static long long deadline;
static atomic_bool stop;
static unsigned long long wbytes, rbytes, resizes, busy;

static void *writer_main(void *arg)
{
	static unsigned char buf[4096];
	unsigned int seed = 1;

	(void)arg;
	while (t_now_ms() < deadline) {
		size_t n = rand_r(&seed) % 16 ? 1 + (size_t)rand_r(&seed) % 300 : sizeof(buf);
		size_t done = 0;

		t_fill(buf, n, wbytes, SEED);
		while (done < n) {
			ssize_t r = pp_write(e[1], buf + done, n - done);

			if (r <= 0)
				t_fail_at(__FILE__, __LINE__, "pp_write = %zd: %s", r, strerror(errno));
			done += (size_t)r;
		}
		wbytes += n;
	}
	atomic_store(&stop, true);
	pp_close(e[1]);
	return NULL;
}

static void *reader_main(void *arg)
{
	unsigned char buf[600];
	unsigned int seed = 2;

	(void)arg;
	for (;;) {
		ssize_t r = pp_read(e[0], buf, 1 + (size_t)rand_r(&seed) % sizeof(buf));

		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		if (t_check(buf, (size_t)r, rbytes, SEED))
			t_fail_at(__FILE__, __LINE__, "wrong byte in a read of %zd at stream "
				  "position %llu", r, rbytes);
		rbytes += (size_t)r;
	}
	return NULL;
}

static void *resizer_main(void *arg)
{
	static const int sizes[] = { 4096, 8192, 65536 };
	unsigned int seed = 3;

	(void)arg;
	while (!atomic_load(&stop)) {
		int sz = sizes[rand_r(&seed) % 3];
		int r = pp_fcntl(e[0], F_SETPIPE_SZ, sz);

		if (r < 0 && errno != EBUSY)
			t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ %d: %s", sz, strerror(errno));
		if (r < 0)
			busy++;
		else
			resizes++;
		for (int i = rand_r(&seed) % 4; i; i--)
			sched_yield();
	}
	return NULL;
}

static void *watcher_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct pp_pollfd pfd = { e[0], POLLIN, 0 };
		int avail;

		if (pp_ioctl(e[0], FIONREAD, &avail) < 0 || avail < 0)
			t_fail_at(__FILE__, __LINE__, "FIONREAD: %s", strerror(errno));
		if (pp_poll(&pfd, 1, 0) < 0)
			t_fail_at(__FILE__, __LINE__, "pp_poll: %s", strerror(errno));
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	pthread_t tw, tr, tz, tx;

	t_watchdog(ms / 1000 + 60, "small pipes resized under message traffic");
	t_pipe2(e, 0);
	ASSERT_EQ(pp_fcntl(e[0], F_SETPIPE_SZ, 4096), 4096);
	deadline = t_now_ms() + ms;
	ASSERT_EQ(pthread_create(&tr, NULL, reader_main, NULL), 0);
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, NULL), 0);
	ASSERT_EQ(pthread_create(&tz, NULL, resizer_main, NULL), 0);
	ASSERT_EQ(pthread_create(&tx, NULL, watcher_main, NULL), 0);
	t_join(tw, NULL, ms / 1000 + 30);
	t_join(tr, NULL, 30);
	t_join(tz, NULL, 30);
	t_join(tx, NULL, 30);
	ASSERT_EQ(rbytes, wbytes);
	printf("%llu bytes, %llu resizes (%llu EBUSY)\n", wbytes, resizes, busy);
	pp_close(e[0]);
	return T_EXIT_PASS;
}
