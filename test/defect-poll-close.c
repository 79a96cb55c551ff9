// SPDX-License-Identifier: MIT
/*
 * Description: pp_poll must hold a reference on each file it polls (issue
 * 11, section 2, defect 1).  Linux's poll takes a reference on every file
 * it waits on (__pollwait's get_file), so a close(2) of the read end in
 * another thread during the poll does not release the pipe's reader: a
 * write still succeeds and wakes the poll.  Today pp_close frees the end
 * under the poll: the pipe loses its reader (the write fails with EPIPE),
 * and pp_poll reads the freed file when poll(2) returns (ASan:
 * heap-use-after-free in pp_poll).  The kernel's steps run first, with
 * plain poll(2), close(2) and write(2), as the reference.
 *
 * The same gap in pp_ioctl(FIONBIO/FIOCLEX) is not tested here: that call
 * does not wait, so the window is a few instructions wide and no program
 * can hit it on purpose.
 */
#include "helpers.h"

#include <poll.h>
#include <signal.h>

struct poller {
	bool kernel;
	int fd;
	struct pp_file *f;
	int ret, err;
	short revents;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;

	errno = 0;
	if (p->kernel) {
		struct pollfd pfd = { p->fd, POLLIN, 0 };

		p->ret = poll(&pfd, 1, 3000);
		p->revents = pfd.revents;
	} else {
		struct pp_pollfd pfd = { p->f, POLLIN, 0 };

		p->ret = pp_poll(&pfd, 1, 3000);
		p->revents = pfd.revents;
	}
	p->err = errno;
	return NULL;
}

static int close_read_end_during_poll(void)
{
	struct poller kp = { .kernel = true }, pp = { .kernel = false };
	struct pp_file *e[2];
	pthread_t th;
	ssize_t kw, pw;
	int kerr, perr;
	int k[2];

	signal(SIGPIPE, SIG_IGN);
	t_watchdog(20, "close of the read end during a poll");

	/* The kernel: the poll keeps the read end's file alive. */
	t_kpipe2(k, 0);
	kp.fd = k[0];
	ASSERT_EQ(pthread_create(&th, NULL, poller_main, &kp), 0);
	t_sleep_ms(200);	/* let it reach its sleep */
	ASSERT_EQ(close(k[0]), 0);
	errno = 0;
	kw = write(k[1], "x", 1);
	kerr = errno;
	t_join(th, NULL, 10);
	printf("kernel: write after the close = %zd (%s); poll = %d revents 0x%x\n",
	       kw, kw < 0 ? strerror(kerr) : "ok", kp.ret, kp.revents);
	ASSERT_EQ(kw, 1);
	ASSERT_EQ(kp.ret, 1);

	/* The pagepipe: the same steps. */
	t_pipe2(e, PP_O_NOSIGPIPE);
	pp.f = e[0];
	ASSERT_EQ(pthread_create(&th, NULL, poller_main, &pp), 0);
	t_sleep_ms(200);
	ASSERT_EQ(pp_close(e[0]), 0);
	errno = 0;
	pw = pp_write(e[1], "x", 1);
	perr = errno;
	t_join(th, NULL, 10);	/* today: pp_poll reads the freed end here */
	printf("pagepipe: write after the close = %zd (%s); poll = %d revents 0x%x\n",
	       pw, pw < 0 ? strerror(perr) : "ok", pp.ret, pp.revents);
	if (pw != kw)
		t_fail_at(__FILE__, __LINE__,
			  "write while a poll holds the closed read end: kernel %zd, pagepipe %zd (%s)",
			  kw, pw, pw < 0 ? strerror(perr) : "ok");
	ASSERT_EQ(pp.ret, 1);
	ASSERT_TRUE(pp.revents & (POLLIN | POLLNVAL));
	ASSERT_EQ(pp_close(e[1]), 0);
	return T_EXIT_PASS;
}

/*
 * Nothing is written: the poll times out after the close.  Here only a
 * sanitizer sees the defect (pp_poll reads the freed end as it returns).
 */
static int close_read_end_during_timed_poll(void)
{
	struct poller pp = { .kernel = false };
	struct pp_file *e[2];
	pthread_t th;

	t_watchdog(20, "close of the read end during a timed poll");
	t_pipe2(e, PP_O_NOSIGPIPE);
	pp.f = e[0];
	ASSERT_EQ(pthread_create(&th, NULL, poller_main, &pp), 0);
	t_sleep_ms(200);
	ASSERT_EQ(pp_close(e[0]), 0);
	t_join(th, NULL, 10);
	ASSERT_TRUE(pp.ret == 0 || pp.ret == 1);
	ASSERT_EQ(pp_close(e[1]), 0);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(close_read_end_during_poll),
		T_SUBTEST(close_read_end_during_timed_poll),
	};

	return T_RUN_SUBTESTS(tests);
}
