// SPDX-License-Identifier: MIT
/*
 * Description: pp_file_event_fd(), the descriptor an event loop watches:
 * it is readable exactly while the end is ready (a read end: data or no
 * writer; a write end: a free slot or no reader), checked against
 * pp_poll() and a kernel pipe in the same state after every step; it
 * works with epoll, level-triggered, and with EPOLLET gives an event each
 * time the end becomes ready; it becomes unready when the pipe is drained
 * or filled; a blocked epoll_wait is woken by another thread.
 */
#include <poll.h>
#include <sys/epoll.h>

#include "helpers.h"

static char src[65536];

static bool fd_readable(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int r = poll(&p, 1, 0);

	ASSERT_GE(r, 0);
	return r == 1 && (p.revents & POLLIN);
}

/* Ready as pp_poll() says, in the end's own direction. */
static bool end_ready(struct pp_file *f, bool reader)
{
	struct pp_pollfd p = { f, reader ? POLLIN : POLLOUT, 0 };
	int r = pp_poll(&p, 1, 0);

	ASSERT_GE(r, 0);
	return reader ? (p.revents & (POLLIN | POLLHUP)) : (p.revents & (POLLOUT | POLLERR));
}

/* Ready as the kernel says of a kernel pipe in the same state. */
static bool kfd_ready(int fd, bool reader)
{
	struct pollfd p = { fd, reader ? POLLIN : POLLOUT, 0 };
	int r = poll(&p, 1, 0);

	ASSERT_GE(r, 0);
	return reader ? (p.revents & (POLLIN | POLLHUP)) : (p.revents & (POLLOUT | POLLERR));
}

struct state {
	struct pp_file *p[2];
	int k[2];
	int efd[2];
};

/* After every step: event fds == pp_poll == kernel, for each end still open. */
#define CHECK(s, want_r, want_w) do {					\
	if ((s)->efd[0] >= 0) {						\
		ASSERT_EQ(kfd_ready((s)->k[0], true), (want_r));	\
		ASSERT_EQ(end_ready((s)->p[0], true), (want_r));	\
		ASSERT_EQ(fd_readable((s)->efd[0]), (want_r));		\
	}								\
	if ((s)->efd[1] >= 0) {						\
		ASSERT_EQ(kfd_ready((s)->k[1], false), (want_w));	\
		ASSERT_EQ(end_ready((s)->p[1], false), (want_w));	\
		ASSERT_EQ(fd_readable((s)->efd[1]), (want_w));		\
	}								\
} while (0)

static void open_state(struct state *s, int flags)
{
	t_pipe2(s->p, flags);
	t_kpipe2(s->k, flags);
	s->efd[0] = pp_file_event_fd(s->p[0]);
	s->efd[1] = pp_file_event_fd(s->p[1]);
	ASSERT_GE(s->efd[0], 0);
	ASSERT_GE(s->efd[1], 0);
	ASSERT_NE(s->efd[0], s->efd[1]);
	/* The same descriptor each time. */
	ASSERT_EQ(pp_file_event_fd(s->p[0]), s->efd[0]);
	ASSERT_EQ(pp_file_event_fd(s->p[1]), s->efd[1]);
}

#define BOTH_WRITE(s, n) \
	ASSERT_SAME(write((s)->k[1], src, (n)), pp_write((s)->p[1], src, (n)))
#define BOTH_READ(s, n) ASSERT_SAME_READ((s)->k[0], (s)->p[0], (n))

static int test_readiness(void)
{
	struct state s;

	open_state(&s, O_NONBLOCK);
	CHECK(&s, false, true);
	BOTH_WRITE(&s, 1);
	CHECK(&s, true, true);
	BOTH_WRITE(&s, 5000);
	CHECK(&s, true, true);
	BOTH_READ(&s, 3000);			/* part: still data */
	CHECK(&s, true, true);
	BOTH_READ(&s, 65536);			/* drained */
	CHECK(&s, false, true);
	BOTH_WRITE(&s, 65536);			/* full */
	CHECK(&s, true, false);
	BOTH_READ(&s, 100);			/* no slot freed yet */
	CHECK(&s, true, false);
	BOTH_READ(&s, 3996);			/* one slot free */
	CHECK(&s, true, true);
	BOTH_WRITE(&s, 4096);			/* full again */
	CHECK(&s, true, false);
	BOTH_READ(&s, 65536);
	CHECK(&s, false, true);

	/* The last writer goes: the read end is ready (EOF). */
	close(s.k[1]);
	pp_close(s.p[1]);
	s.efd[1] = -1;
	CHECK(&s, true, false);
	BOTH_READ(&s, 10);			/* EOF */
	CHECK(&s, true, false);
	close(s.k[0]);
	pp_close(s.p[0]);

	/* The last reader goes: the write end is ready (EPIPE), even full. */
	open_state(&s, O_NONBLOCK);
	BOTH_WRITE(&s, 65536);
	CHECK(&s, true, false);
	close(s.k[0]);
	pp_close(s.p[0]);
	s.efd[0] = -1;
	CHECK(&s, false, true);
	close(s.k[1]);
	pp_close(s.p[1]);
	return 0;
}

static int test_packets_and_resize(void)
{
	struct state s;

	open_state(&s, O_NONBLOCK | O_DIRECT);
	for (int i = 0; i < 16; i++)
		BOTH_WRITE(&s, 1);
	CHECK(&s, true, false);
	BOTH_READ(&s, 0);
	CHECK(&s, true, false);
	BOTH_READ(&s, 1);			/* a packet gone: a slot free */
	CHECK(&s, true, true);
	BOTH_WRITE(&s, 1);
	CHECK(&s, true, false);
	/* Growing a full ring makes room. */
	ASSERT_SAME(fcntl(s.k[0], F_SETPIPE_SZ, 32 * 4096), pp_fcntl(s.p[0], F_SETPIPE_SZ, 32 * 4096));
	CHECK(&s, true, true);
	for (int i = 0; i < 16; i++)
		BOTH_WRITE(&s, 1);
	CHECK(&s, true, false);
	for (int i = 0; i < 32; i++)
		BOTH_READ(&s, 100);
	CHECK(&s, false, true);
	close(s.k[0]);
	close(s.k[1]);
	pp_close(s.p[0]);
	pp_close(s.p[1]);

	/* Made after the state changed: right from the start. */
	t_pipe2(s.p, O_NONBLOCK);
	t_kpipe2(s.k, O_NONBLOCK);
	BOTH_WRITE(&s, 65536);
	s.efd[0] = pp_file_event_fd(s.p[0]);
	s.efd[1] = pp_file_event_fd(s.p[1]);
	ASSERT_GE(s.efd[0], 0);
	ASSERT_GE(s.efd[1], 0);
	CHECK(&s, true, false);
	close(s.k[0]);
	close(s.k[1]);
	pp_close(s.p[0]);
	pp_close(s.p[1]);
	return 0;
}

static int wait_events(int ep, int timeout)
{
	struct epoll_event ev[4];
	int r = epoll_wait(ep, ev, 4, timeout);

	ASSERT_GE(r, 0);
	return r;
}

static int test_epoll_level(void)
{
	struct state s;
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ASSERT_GE(ep, 0);
	open_state(&s, O_NONBLOCK);
	ev.data.u32 = 0;
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, s.efd[0], &ev), 0);
	ASSERT_EQ(wait_events(ep, 0), 0);
	BOTH_WRITE(&s, 10);
	ASSERT_EQ(wait_events(ep, 0), 1);
	ASSERT_EQ(wait_events(ep, 0), 1);	/* level: again while ready */
	BOTH_READ(&s, 5);
	ASSERT_EQ(wait_events(ep, 0), 1);
	BOTH_READ(&s, 5);
	ASSERT_EQ(wait_events(ep, 0), 0);	/* drained */

	/* The write end too. */
	ev.data.u32 = 1;
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, s.efd[1], &ev), 0);
	ASSERT_EQ(wait_events(ep, 0), 1);
	BOTH_WRITE(&s, 65536);
	{
		struct epoll_event out[4];

		ASSERT_EQ(epoll_wait(ep, out, 4, 0), 1);
		ASSERT_EQ(out[0].data.u32, 0);	/* only the read end */
	}
	close(s.k[0]);
	close(s.k[1]);
	pp_close(s.p[0]);
	pp_close(s.p[1]);
	close(ep);
	return 0;
}

static int test_epoll_edge(void)
{
	struct state s;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ASSERT_GE(ep, 0);
	open_state(&s, O_NONBLOCK);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, s.efd[0], &ev), 0);
	ASSERT_EQ(wait_events(ep, 0), 0);
	BOTH_WRITE(&s, 10);			/* becomes ready: one event */
	ASSERT_EQ(wait_events(ep, 0), 1);
	ASSERT_EQ(wait_events(ep, 0), 0);	/* edge: not again */
	/* As documented: an event per becoming ready, not per write. */
	BOTH_WRITE(&s, 10);
	ASSERT_EQ(wait_events(ep, 0), 0);
	BOTH_READ(&s, 100);			/* drained */
	ASSERT_EQ(wait_events(ep, 0), 0);
	BOTH_WRITE(&s, 1);			/* ready again: an event */
	ASSERT_EQ(wait_events(ep, 0), 1);
	ASSERT_EQ(wait_events(ep, 0), 0);

	/* The write end: full, then a slot frees up. */
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_DEL, s.efd[0], NULL), 0);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, s.efd[1], &ev), 0);
	ASSERT_EQ(wait_events(ep, 0), 1);
	ASSERT_EQ(wait_events(ep, 0), 0);
	BOTH_WRITE(&s, 65536);			/* 1 + 61440: full */
	ASSERT_EQ(wait_events(ep, 0), 0);
	BOTH_READ(&s, 4097);			/* a slot free: ready */
	ASSERT_EQ(wait_events(ep, 0), 1);
	ASSERT_EQ(wait_events(ep, 0), 0);
	close(s.k[0]);
	close(s.k[1]);
	pp_close(s.p[0]);
	pp_close(s.p[1]);
	close(ep);
	return 0;
}

struct later {
	struct pp_file *f;
	bool close_it;
};

static void *later_main(void *arg)
{
	struct later *l = arg;

	t_sleep_ms(50);
	if (l->close_it)
		ASSERT_EQ(pp_close(l->f), 0);
	else
		ASSERT_EQ(pp_write(l->f, "x", 1), 1);
	return NULL;
}

static int test_epoll_woken(void)
{
	struct pp_file *p[2];
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int ep = epoll_create1(EPOLL_CLOEXEC), efd;
	struct later l;
	pthread_t th;
	char c;

	ASSERT_GE(ep, 0);
	t_pipe2(p, 0);
	efd = pp_file_event_fd(p[0]);
	ASSERT_GE(efd, 0);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);

	l = (struct later){ p[1], false };
	ASSERT_EQ(pthread_create(&th, NULL, later_main, &l), 0);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 10000), 1);
	t_join(th, NULL, 10);
	ASSERT_EQ(pp_read(p[0], &c, 1), 1);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 0), 0);

	l = (struct later){ p[1], true };
	ASSERT_EQ(pthread_create(&th, NULL, later_main, &l), 0);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 10000), 1);	/* EOF */
	t_join(th, NULL, 10);
	ASSERT_EQ(pp_read(p[0], &c, 1), 0);
	pp_close(p[0]);
	close(ep);
	return 0;
}

static int test_errors(void)
{
	int k[2];
	struct pp_file *f;

	ASSERT_ERRNO(pp_file_event_fd(NULL), EBADF);
	t_kpipe2(k, 0);
	f = pp_fdopen(k[0]);
	ASSERT_TRUE(f != NULL);
	ASSERT_ERRNO(pp_file_event_fd(f), EINVAL);	/* poll the descriptor itself */
	pp_close(f);
	close(k[0]);
	close(k[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_readiness),
		T_SUBTEST(test_packets_and_resize),
		T_SUBTEST(test_epoll_level),
		T_SUBTEST(test_epoll_edge),
		T_SUBTEST(test_epoll_woken),
		T_SUBTEST(test_errors),
	};

	return T_RUN_SUBTESTS(tests);
}
