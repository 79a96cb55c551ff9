// SPDX-License-Identifier: MIT
/*
 * Description: pp_poll when the readiness descriptor cannot be made (issue
 * 11, section 2, defect 8).  To sleep, pp_poll polls an eventfd per
 * pagepipe end; with the descriptor table full, eventfd(2) fails with
 * EMFILE, and today pp_poll swallows that and polls fd -1, which poll(2)
 * ignores: an end that becomes ready never wakes an infinite poll (a hang,
 * caught by the watchdog) and a timed one returns 0 though the end became
 * ready long before.  Accepted: -1 with EMFILE (fail with the errno), or 1
 * with POLLIN (poll another way).  The table is filled after the pipe is
 * made; a thread writes 100 ms into the poll.
 */
#include "helpers.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>

struct writer {
	struct pp_file *w;
};

static void *writer_main(void *arg)
{
	struct writer *wr = arg;

	t_sleep_ms(100);
	if (pp_write(wr->w, "x", 1) != 1)
		t_fail_at(__FILE__, __LINE__, "pp_write: %s", strerror(errno));
	return NULL;
}

/* Fill the descriptor table (with a low limit, so that this is quick). */
static int fill_fd_table(void)
{
	struct rlimit rl = { 64, 64 };
	int base = open("/dev/null", O_RDONLY);

	ASSERT_TRUE(base >= 0);
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	while (dup(base) >= 0)
		;
	ASSERT_EQ(errno, EMFILE);
	return base;
}

/* Give the table back: LeakSanitizer needs descriptors at exit. */
static void free_fd_table(int base)
{
	for (int fd = base; fd < 64; fd++)
		close(fd);
}

static void run(int timeout_ms)
{
	struct pp_file *e[2];
	struct writer wr;
	pthread_t th;
	struct pp_pollfd pfd;
	int r, err, base;

	t_watchdog(10, timeout_ms < 0 ?
		   "pp_poll(-1) on a read end with the descriptor table full: the write never woke it" :
		   "pp_poll(2000) on a read end with the descriptor table full");
	t_pipe2(e, 0);
	base = fill_fd_table();
	wr.w = e[1];
	ASSERT_EQ(pthread_create(&th, NULL, writer_main, &wr), 0);
	pfd = (struct pp_pollfd){ e[0], POLLIN, 0 };
	errno = 0;
	r = pp_poll(&pfd, 1, timeout_ms);
	err = errno;
	printf("pp_poll(%d) = %d (%s), revents 0x%x\n", timeout_ms, r,
	       r < 0 ? strerror(err) : "ok", pfd.revents);
	if (!((r == -1 && err == EMFILE) || (r == 1 && (pfd.revents & POLLIN))))
		t_fail_at(__FILE__, __LINE__, "pp_poll(%d) with the descriptor table full = %d "
			  "(%s) revents 0x%x; want -1 EMFILE, or 1 with POLLIN (the end became "
			  "ready after 100 ms)", timeout_ms, r, r < 0 ? strerror(err) : "ok",
			  pfd.revents);
	t_join(th, NULL, 10);
	free_fd_table(base);
	pp_close(e[0]);
	pp_close(e[1]);
	t_watchdog(0, NULL);
}

static int poll_infinite(void)
{
	if (t_under_valgrind())
		return t_skip("valgrind keeps descriptors of its own, so the table cannot be "
			      "cut to 64; plain and ASan runs cover it");
	run(-1);
	return T_EXIT_PASS;
}

static int poll_timed(void)
{
	if (t_under_valgrind())
		return t_skip("valgrind keeps descriptors of its own, so the table cannot be "
			      "cut to 64; plain and ASan runs cover it");
	run(2000);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(poll_infinite),
		T_SUBTEST(poll_timed),
	};

	return T_RUN_SUBTESTS(tests);
}
