// SPDX-License-Identifier: MIT
/*
 * Description: pp_poll(), each state also polled on a kernel pipe: POLLIN;
 * POLLOUT only while a whole slot is free (16 one-byte packets, or 16 full
 * or ragged pages, fill a 16-slot ring); POLLHUP once the last writer has
 * closed; POLLERR on a write end with no reader; the revents filter for
 * other event masks; pagepipe ends and OS descriptors in one call,
 * blocking with a timeout and woken by another thread; a NULL file gives
 * POLLNVAL; timeout 0; and no spinning when an end is ready in a direction
 * nobody asked about.
 */
#include <poll.h>
#include <stdatomic.h>

#include "helpers.h"

static char src[65536];

/*
 * The masks every state is polled with: each asks for the end's own
 * direction (the other direction is test_unasked_direction's).
 */
static const short rd_masks[] = {
	POLLIN, POLLRDNORM, POLLIN | POLLRDNORM, POLLIN | POLLOUT, POLLIN | POLLPRI | POLLRDHUP,
	POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM | POLLPRI,
};
static const short wr_masks[] = {
	POLLOUT, POLLWRNORM, POLLOUT | POLLWRNORM, POLLIN | POLLOUT, POLLOUT | POLLPRI | POLLRDHUP,
	POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM | POLLPRI,
};

/* Poll one kernel fd and one pagepipe end with timeout 0: same count and revents. */
#define SAME_POLL1(kfd, pf, ev) do {					\
	struct pollfd _kp = { (kfd), (ev), 0 };				\
	struct pp_pollfd _pp = { (pf), (ev), 0 };			\
	struct t_res _kr = T_CALL(poll(&_kp, 1, 0));			\
	struct t_res _pr = T_CALL(pp_poll(&_pp, 1, 0));			\
	if (_kr.ret != _pr.ret || _kr.err != _pr.err || _kp.revents != _pp.revents) \
		t_fail_at(__FILE__, __LINE__,				\
			  "poll(%s, events %#x): kernel %lld revents %#x, pagepipe %lld revents %#x", \
			  #kfd, (unsigned)(unsigned short)(ev), _kr.ret,	\
			  (unsigned)(unsigned short)_kp.revents, _pr.ret,	\
			  (unsigned)(unsigned short)_pp.revents);	\
} while (0)

#define SAME_POLL(kfd, pf, masks) do {					\
	for (unsigned _m = 0; _m < sizeof(masks) / sizeof(masks[0]); _m++) \
		SAME_POLL1(kfd, pf, masks[_m]);				\
} while (0)

static void same_state(int k[2], struct pp_file *p[2])
{
	SAME_POLL(k[0], p[0], rd_masks);
	SAME_POLL(k[1], p[1], wr_masks);
}

static int test_pollin(void)
{
	struct pp_file *p[2];
	int k[2];

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	same_state(k, p);			/* empty: write end POLLOUT only */
	ASSERT_SAME(write(k[1], "a", 1), pp_write(p[1], "a", 1));
	same_state(k, p);			/* POLLIN */
	ASSERT_SAME_READ(k[0], p[0], 1);
	same_state(k, p);			/* drained */
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_pollout_whole_slot(void)
{
	struct pp_file *p[2];
	int k[2];

	/* 16 one-byte packets fill the ring: no POLLOUT, though 16 bytes are used. */
	t_pipe2(p, O_NONBLOCK | O_DIRECT);
	t_kpipe2(k, O_NONBLOCK | O_DIRECT);
	for (int i = 0; i < 15; i++)
		ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	same_state(k, p);			/* one slot free: POLLOUT */
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	same_state(k, p);			/* full */
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));	/* EAGAIN */
	ASSERT_SAME_READ(k[0], p[0], 10);
	same_state(k, p);			/* a slot again */
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);

	/* 16 separate full pages. */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	for (int i = 0; i < 16; i++)
		ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));
	same_state(k, p);
	ASSERT_SAME_READ(k[0], p[0], 4095);	/* a slot still used by 1 byte */
	same_state(k, p);
	ASSERT_SAME_READ(k[0], p[0], 1);
	same_state(k, p);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);

	/*
	 * 15 full pages and one byte: all 16 slots used, so no POLLOUT, even
	 * though a small write would still merge into the last page.
	 */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], src, 15 * 4096), pp_write(p[1], src, 15 * 4096));
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	same_state(k, p);
	ASSERT_SAME(write(k[1], src, 100), pp_write(p[1], src, 100));	/* merges */
	ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));	/* EAGAIN */
	same_state(k, p);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_pollhup(void)
{
	struct pp_file *p[2];
	int k[2];

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], "abc", 3), pp_write(p[1], "abc", 3));
	close(k[1]);
	pp_close(p[1]);
	SAME_POLL(k[0], p[0], rd_masks);			/* POLLIN | POLLHUP */
	SAME_POLL1(k[0], p[0], 0);		/* POLLHUP even when not asked for */
	ASSERT_SAME_READ(k[0], p[0], 10);
	SAME_POLL(k[0], p[0], rd_masks);			/* POLLHUP alone */
	SAME_POLL1(k[0], p[0], 0);
	close(k[0]);
	pp_close(p[0]);
	return 0;
}

static int test_pollerr(void)
{
	struct pp_file *p[2];
	int k[2];

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], "abc", 3), pp_write(p[1], "abc", 3));
	close(k[0]);
	pp_close(p[0]);
	SAME_POLL(k[1], p[1], wr_masks);			/* POLLOUT | POLLERR */
	SAME_POLL1(k[1], p[1], 0);		/* POLLERR even when not asked for */
	close(k[1]);
	pp_close(p[1]);

	/* A full pipe whose reader went: POLLERR without POLLOUT. */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], src, 65536), pp_write(p[1], src, 65536));
	close(k[0]);
	pp_close(p[0]);
	SAME_POLL(k[1], p[1], wr_masks);
	close(k[1]);
	pp_close(p[1]);
	return 0;
}

static int test_null_file(void)
{
	struct pp_file *p[2];
	int k[2];
	struct pp_pollfd fds[3];

	fds[0] = (struct pp_pollfd){ NULL, POLLIN, 0x55 };
	ASSERT_EQ(pp_poll(fds, 1, 0), 1);
	ASSERT_EQ(fds[0].revents, POLLNVAL);
	fds[0] = (struct pp_pollfd){ NULL, 0, 0 };
	ASSERT_EQ(pp_poll(fds, 1, 1000), 1);	/* does not wait */
	ASSERT_EQ(fds[0].revents, POLLNVAL);

	/* Beside a ready end and an idle one: both ready ones are counted. */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	fds[0] = (struct pp_pollfd){ p[0], POLLIN, 0x55 };
	fds[1] = (struct pp_pollfd){ NULL, POLLIN, 0x55 };
	fds[2] = (struct pp_pollfd){ p[1], POLLOUT, 0x55 };
	ASSERT_EQ(pp_poll(fds, 3, 0), 2);
	ASSERT_EQ(fds[0].revents, 0);
	ASSERT_EQ(fds[1].revents, POLLNVAL);
	ASSERT_EQ(fds[2].revents, POLLOUT);

	/* The kernel's answer for a closed descriptor is the same POLLNVAL. */
	{
		struct pollfd kp = { k[0], POLLIN, 0 };

		close(k[0]);
		close(k[1]);
		ASSERT_EQ(poll(&kp, 1, 0), 1);
		ASSERT_EQ(kp.revents, POLLNVAL);
	}

	/* nfds 0, and a NULL array. */
	{
		/* volatile: the compiler must not see the NULL (-Wnonnull). */
		struct pollfd *volatile knull = NULL;
		struct pp_pollfd *volatile pnull = NULL;

		ASSERT_SAME(poll(knull, 0, 0), pp_poll(pnull, 0, 0));
		ASSERT_SAME(poll(knull, 1, 0), pp_poll(pnull, 1, 0));	/* EFAULT */
	}
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_timeout(void)
{
	struct pp_file *p[2], *kf;
	int k[2];
	struct pp_pollfd fds[2];

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	kf = pp_fdopen(k[0]);
	ASSERT_TRUE(kf != NULL);
	/* Nothing ready: 0 after the timeout, with revents cleared. */
	fds[0] = (struct pp_pollfd){ p[0], POLLIN, 0x55 };
	fds[1] = (struct pp_pollfd){ kf, POLLIN, 0x55 };
	ASSERT_EQ(pp_poll(fds, 2, 0), 0);
	ASSERT_EQ(fds[0].revents, 0);
	ASSERT_EQ(fds[1].revents, 0);
	ASSERT_EQ(pp_poll(fds, 2, 100), 0);
	ASSERT_EQ(fds[0].revents, 0);
	ASSERT_EQ(fds[1].revents, 0);
	ASSERT_EQ(pp_poll(fds, 1, 50), 0);
	ASSERT_EQ(pp_poll(&fds[1], 1, 50), 0);
	/* Ready: returns at once whatever the timeout. */
	ASSERT_EQ(pp_write(p[1], "x", 1), 1);
	ASSERT_EQ(pp_poll(fds, 2, -1), 1);
	ASSERT_EQ(fds[0].revents, POLLIN);
	ASSERT_EQ(fds[1].revents, 0);
	ASSERT_EQ(write(k[1], "x", 1), 1);
	ASSERT_EQ(pp_poll(fds, 2, -1), 2);
	ASSERT_EQ(fds[0].revents, POLLIN);
	ASSERT_EQ(fds[1].revents, POLLIN);
	pp_close(kf);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/*
 * An end that is ready in a direction the caller did not ask for (a read
 * end with data polled for POLLOUT or for nothing; a write end with room
 * polled for POLLIN) is not ready: poll returns 0 at the timeout, as the
 * kernel does, and must not spin for ever.
 */
struct poll_call {
	struct pp_pollfd fd;
	int timeout;
	struct t_res res;
};

static void *poll_main(void *arg)
{
	struct poll_call *c = arg;

	c->res = T_CALL(pp_poll(&c->fd, 1, c->timeout));
	return NULL;
}

static void poll_in_thread(struct poll_call *c, const char *what)
{
	pthread_t th;

	fprintf(stderr, "pp_poll(%s, timeout %d)\n", what, c->timeout);
	ASSERT_EQ(pthread_create(&th, NULL, poll_main, c), 0);
	t_join(th, NULL, 5);
}

static int test_unasked_direction(void)
{
	struct pp_file *p[2];
	int k[2];
	static const int timeouts[] = { 0, 100 };

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], "x", 1), pp_write(p[1], "x", 1));
	for (unsigned t = 0; t < 2; t++) {
		struct poll_call c;
		struct pollfd kp;

		kp = (struct pollfd){ k[0], POLLOUT, 0 };
		ASSERT_EQ(poll(&kp, 1, timeouts[t]), 0);
		c = (struct poll_call){ { p[0], POLLOUT, 0 }, timeouts[t], { 0, 0 } };
		poll_in_thread(&c, "read end with data, POLLOUT");
		ASSERT_EQ(c.res.ret, 0);
		ASSERT_EQ(c.fd.revents, 0);

		kp = (struct pollfd){ k[0], 0, 0 };
		ASSERT_EQ(poll(&kp, 1, timeouts[t]), 0);
		c = (struct poll_call){ { p[0], 0, 0 }, timeouts[t], { 0, 0 } };
		poll_in_thread(&c, "read end with data, events 0");
		ASSERT_EQ(c.res.ret, 0);

		kp = (struct pollfd){ k[1], POLLIN, 0 };
		ASSERT_EQ(poll(&kp, 1, timeouts[t]), 0);
		c = (struct poll_call){ { p[1], POLLIN, 0 }, timeouts[t], { 0, 0 } };
		poll_in_thread(&c, "write end with room, POLLIN");
		ASSERT_EQ(c.res.ret, 0);
	}
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* ---------------------------------------------------------------------- */

struct waker {
	int kfd;			/* write here, or */
	struct pp_file *pf;		/* write or close here */
	bool close_it;
	bool read_it;			/* read 4096 instead of writing */
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;
	char buf[4096];

	t_sleep_ms(50);
	if (w->kfd >= 0)
		ASSERT_EQ(write(w->kfd, "k", 1), 1);
	else if (w->close_it)
		ASSERT_EQ(pp_close(w->pf), 0);
	else if (w->read_it)
		ASSERT_EQ(pp_read(w->pf, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	else
		ASSERT_EQ(pp_write(w->pf, "p", 1), 1);
	return NULL;
}

static void start_waker(pthread_t *th, struct waker *w)
{
	ASSERT_EQ(pthread_create(th, NULL, waker_main, w), 0);
}

/* Pagepipe ends and an OS descriptor in one blocking pp_poll. */
static int test_mixed_blocking(void)
{
	struct pp_file *p[2], *kf;
	int k[2];
	struct pp_pollfd fds[3];
	struct waker w;
	pthread_t th;
	char c;

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	kf = pp_fdopen(k[0]);
	ASSERT_TRUE(kf != NULL);

	/* Woken by a write to the kernel pipe. */
	fds[0] = (struct pp_pollfd){ p[0], POLLIN, 0 };
	fds[1] = (struct pp_pollfd){ kf, POLLIN, 0 };
	w = (struct waker){ k[1], NULL, false, false };
	start_waker(&th, &w);
	ASSERT_EQ(pp_poll(fds, 2, 10000), 1);
	ASSERT_EQ(fds[0].revents, 0);
	ASSERT_EQ(fds[1].revents, POLLIN);
	t_join(th, NULL, 10);
	ASSERT_EQ(read(k[0], &c, 1), 1);

	/* Woken by a write to the pagepipe, no timeout. */
	w = (struct waker){ -1, p[1], false, false };
	start_waker(&th, &w);
	ASSERT_EQ(pp_poll(fds, 2, -1), 1);
	ASSERT_EQ(fds[0].revents, POLLIN);
	ASSERT_EQ(fds[1].revents, 0);
	t_join(th, NULL, 10);
	ASSERT_EQ(pp_read(p[0], &c, 1), 1);

	/* A writer waiting for room is woken by a reader. */
	ASSERT_EQ(pp_write(p[1], src, 65536), 65536);
	fds[2] = (struct pp_pollfd){ p[1], POLLOUT, 0 };
	w = (struct waker){ -1, p[0], false, true };
	start_waker(&th, &w);
	ASSERT_EQ(pp_poll(&fds[1], 2, 10000), 1);
	ASSERT_EQ(fds[1].revents, 0);
	ASSERT_EQ(fds[2].revents, POLLOUT);
	t_join(th, NULL, 10);

	/* Woken by the last writer closing: POLLIN | POLLHUP (data is left). */
	w = (struct waker){ -1, p[1], true, false };
	fds[0] = (struct pp_pollfd){ p[0], POLLIN, 0 };
	ASSERT_EQ(pp_read(p[0], src, 65536), 65536 - 4096);
	ASSERT_EQ(pp_poll(fds, 1, 0), 0);
	start_waker(&th, &w);
	ASSERT_EQ(pp_poll(fds, 2, 10000), 1);
	ASSERT_EQ(fds[0].revents, POLLHUP);
	t_join(th, NULL, 10);

	pp_close(kf);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_pollin),
		T_SUBTEST(test_pollout_whole_slot),
		T_SUBTEST(test_pollhup),
		T_SUBTEST(test_pollerr),
		T_SUBTEST(test_null_file),
		T_SUBTEST(test_timeout),
		T_SUBTEST(test_unasked_direction),
		T_SUBTEST(test_mixed_blocking),
	};

	return T_RUN_SUBTESTS(tests);
}
