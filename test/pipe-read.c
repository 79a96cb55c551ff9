// SPDX-License-Identifier: MIT
/*
 * Description: read(2) on a pagepipe, each step also done on a kernel pipe:
 * zero-length reads, EOF when no writer is left, EAGAIN when non-blocking,
 * a blocking read that waits for data or EOF (in a thread), a read that
 * returns what is there without waiting for more, and readv across iovecs.
 */
#include <stdatomic.h>
#include <sys/uio.h>

#include "helpers.h"

static int test_zero_length(void)
{
	struct pp_file *p[2];
	int k[2];
	char kb[8], pb[8];
	struct iovec kiov[3] = { { kb, 0 }, { NULL, 0 }, { kb, 0 } };
	struct iovec piov[3] = { { pb, 0 }, { NULL, 0 }, { pb, 0 } };
	int kn = -1, pn = -1;

	/* Blocking pipe, empty, writer open: a zero-length read must not wait. */
	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	ASSERT_SAME(read(k[0], kb, 0), pp_read(p[0], pb, 0));
	ASSERT_SAME(read(k[0], NULL, 0), pp_read(p[0], NULL, 0));
	ASSERT_SAME(readv(k[0], kiov, 0), pp_readv(p[0], piov, 0));
	ASSERT_SAME(readv(k[0], NULL, 0), pp_readv(p[0], NULL, 0));
	ASSERT_SAME(readv(k[0], kiov, 3), pp_readv(p[0], piov, 3));

	/* With data: 0, and nothing is consumed. */
	ASSERT_SAME(write(k[1], "abc", 3), pp_write(p[1], "abc", 3));
	ASSERT_SAME(read(k[0], kb, 0), pp_read(p[0], pb, 0));
	ASSERT_SAME(readv(k[0], kiov, 3), pp_readv(p[0], piov, 3));
	ASSERT_SAME(ioctl(k[0], FIONREAD, &kn), pp_ioctl(p[0], FIONREAD, &pn));
	ASSERT_EQ(kn, 3);
	ASSERT_EQ(pn, 3);
	ASSERT_SAME_READ(k[0], p[0], 8);

	/* The wrong end is checked before the count. */
	ASSERT_SAME(read(k[1], kb, 0), pp_read(p[1], pb, 0));

	/* Zero-length read after EOF. */
	close(k[1]);
	pp_close(p[1]);
	ASSERT_SAME(read(k[0], kb, 0), pp_read(p[0], pb, 0));
	close(k[0]);
	pp_close(p[0]);

	/* Non-blocking and empty: 0, not EAGAIN. */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(read(k[0], kb, 0), pp_read(p[0], pb, 0));
	ASSERT_SAME(readv(k[0], kiov, 3), pp_readv(p[0], piov, 3));
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_eof(void)
{
	static const int modes[] = { 0, O_NONBLOCK, O_DIRECT, O_DIRECT | O_NONBLOCK };

	for (unsigned m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct pp_file *p[2];
		int k[2];

		t_pipe2(p, modes[m]);
		t_kpipe2(k, modes[m]);
		/* Never written, writer gone: EOF at once, blocking or not. */
		close(k[1]);
		pp_close(p[1]);
		ASSERT_SAME_READ(k[0], p[0], 10);
		ASSERT_SAME_READ(k[0], p[0], 10);
		close(k[0]);
		pp_close(p[0]);

		/* Data left behind by the last writer is read first, then EOF. */
		t_pipe2(p, modes[m]);
		t_kpipe2(k, modes[m]);
		ASSERT_SAME(write(k[1], "hello", 5), pp_write(p[1], "hello", 5));
		ASSERT_SAME(write(k[1], "world!", 6), pp_write(p[1], "world!", 6));
		close(k[1]);
		pp_close(p[1]);
		ASSERT_SAME_READ(k[0], p[0], 3);
		ASSERT_SAME_READ(k[0], p[0], 100);
		ASSERT_SAME_READ(k[0], p[0], 100);	/* packet mode: the second packet */
		ASSERT_SAME_READ(k[0], p[0], 100);
		ASSERT_SAME_READ(k[0], p[0], 100);
		{
			char kb[4], pb[4];
			struct iovec kiov = { kb, 4 }, piov = { pb, 4 };

			ASSERT_SAME(readv(k[0], &kiov, 1), pp_readv(p[0], &piov, 1));
		}
		close(k[0]);
		pp_close(p[0]);
	}
	return 0;
}

static int test_eagain(void)
{
	struct pp_file *p[2];
	int k[2];

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME_READ(k[0], p[0], 1);
	ASSERT_SAME_READ(k[0], p[0], 65536);
	ASSERT_SAME(write(k[1], "xy", 2), pp_write(p[1], "xy", 2));
	ASSERT_SAME_READ(k[0], p[0], 1);
	ASSERT_SAME_READ(k[0], p[0], 1);
	ASSERT_SAME_READ(k[0], p[0], 1);	/* drained: EAGAIN again */
	{
		char kb[4], pb[4];
		struct iovec kiov[2] = { { kb, 2 }, { kb + 2, 2 } };
		struct iovec piov[2] = { { pb, 2 }, { pb + 2, 2 } };

		ASSERT_SAME(readv(k[0], kiov, 2), pp_readv(p[0], piov, 2));
	}
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);

	/* O_NONBLOCK set later with F_SETFL on the read end only. */
	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	ASSERT_SAME(fcntl(k[0], F_SETFL, O_NONBLOCK), pp_fcntl(p[0], F_SETFL, O_NONBLOCK));
	ASSERT_SAME_READ(k[0], p[0], 10);
	ASSERT_SAME(write(k[1], "abc", 3), pp_write(p[1], "abc", 3));
	ASSERT_SAME_READ(k[0], p[0], 10);
	ASSERT_SAME_READ(k[0], p[0], 10);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* ---------------------------------------------------------------------- */

struct reader {
	int kfd;			/* kernel read end, or -1 */
	struct pp_file *pf;		/* pagepipe read end otherwise */
	size_t n;
	char buf[256];
	struct t_res res;
	atomic_int done;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	if (r->kfd >= 0)
		r->res = T_CALL(read(r->kfd, r->buf, r->n));
	else
		r->res = T_CALL(pp_read(r->pf, r->buf, r->n));
	atomic_store(&r->done, 1);
	return NULL;
}

/*
 * Start a blocking read in a thread; give it time to reach its wait; check
 * it has not returned; then `wake` (a write or a close) and collect.
 */
static void blocked_read(struct reader *r, void (*wake)(void *), void *arg)
{
	pthread_t th;

	ASSERT_EQ(pthread_create(&th, NULL, reader_main, r), 0);
	t_sleep_ms(50);
	ASSERT_EQ(atomic_load(&r->done), 0);	/* it must still be waiting */
	wake(arg);
	t_join(th, NULL, 10);
	ASSERT_EQ(atomic_load(&r->done), 1);
}

struct wake_write {
	int kfd;
	struct pp_file *pf;
	const char *data;
	size_t len;
};

static void wake_by_write(void *arg)
{
	struct wake_write *w = arg;
	ssize_t r = w->kfd >= 0 ? write(w->kfd, w->data, w->len) : pp_write(w->pf, w->data, w->len);

	ASSERT_EQ(r, (ssize_t)w->len);
}

static void wake_by_close(void *arg)
{
	struct wake_write *w = arg;

	if (w->kfd >= 0)
		ASSERT_EQ(close(w->kfd), 0);
	else
		ASSERT_EQ(pp_close(w->pf), 0);
}

static int test_blocking_waits_for_data(void)
{
	struct pp_file *p[2];
	int k[2];
	struct reader kr = { .n = 100 }, pr = { .n = 100 };
	struct wake_write kw = { .data = "hello", .len = 5 }, pw = kw;

	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	kr.kfd = k[0];
	pr.kfd = -1;
	pr.pf = p[0];
	kw.kfd = k[1];
	pw.kfd = -1;
	pw.pf = p[1];
	blocked_read(&kr, wake_by_write, &kw);
	blocked_read(&pr, wake_by_write, &pw);
	ASSERT_EQ(kr.res.ret, 5);
	ASSERT_EQ(pr.res.ret, kr.res.ret);
	ASSERT_EQ(pr.res.err, kr.res.err);
	ASSERT_MEM_EQ(pr.buf, "hello", 5);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_blocking_waits_for_eof(void)
{
	struct pp_file *p[2];
	int k[2];
	struct reader kr = { .n = 100 }, pr = { .n = 100 };
	struct wake_write kw = { 0 }, pw = { 0 };

	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	kr.kfd = k[0];
	pr.kfd = -1;
	pr.pf = p[0];
	kw.kfd = k[1];
	pw.kfd = -1;
	pw.pf = p[1];
	blocked_read(&kr, wake_by_close, &kw);
	blocked_read(&pr, wake_by_close, &pw);
	ASSERT_EQ(kr.res.ret, 0);
	ASSERT_EQ(pr.res.ret, kr.res.ret);
	ASSERT_EQ(pr.res.err, kr.res.err);
	close(k[0]);
	pp_close(p[0]);
	return 0;
}

/* A read that found data returns it at once, however much more it asked for. */
static int test_returns_what_is_there(void)
{
	static const size_t sizes[] = { 1, 100, 4095, 4096, 4097, 5000, 12289, 40000, 65536 };
	char *big = calloc(1, 65536);

	ASSERT_TRUE(big != NULL);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct pp_file *p[2];
		int k[2];

		t_pipe2(p, 0);		/* blocking: a read that waited for more would hang */
		t_kpipe2(k, 0);
		t_fill(big, sizes[i], 0, 7);
		ASSERT_SAME(write(k[1], big, sizes[i]), pp_write(p[1], big, sizes[i]));
		ASSERT_SAME_READ(k[0], p[0], 200000);
		/* Several writes of different shapes, then one big read. */
		ASSERT_SAME(write(k[1], big, 3), pp_write(p[1], big, 3));
		ASSERT_SAME(write(k[1], big, sizes[i] / 2), pp_write(p[1], big, sizes[i] / 2));
		ASSERT_SAME(write(k[1], big, 7), pp_write(p[1], big, 7));
		ASSERT_SAME_READ(k[0], p[0], 200000);
		close(k[0]);
		close(k[1]);
		pp_close(p[0]);
		pp_close(p[1]);
	}
	free(big);
	return 0;
}

/* Byte-exact reads of odd sizes across the page buffers. */
static int test_odd_sizes(void)
{
	struct pp_file *p[2];
	int k[2];
	char *src = malloc(65536);
	size_t total = 3 * 4096 + 4000 + 7;
	static const size_t chunks[] = { 1, 1000, 4095, 2, 4096, 3333, 7, 9999 };

	ASSERT_TRUE(src != NULL);
	t_fill(src, total, 0, 11);
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], src, 3 * 4096), pp_write(p[1], src, 3 * 4096));
	ASSERT_SAME(write(k[1], src + 3 * 4096, 4000), pp_write(p[1], src + 3 * 4096, 4000));
	ASSERT_SAME(write(k[1], src + 3 * 4096 + 4000, 7), pp_write(p[1], src + 3 * 4096 + 4000, 7));
	for (unsigned i = 0; i < 16; i++) {
		int kn = -1, pn = -2;

		ASSERT_SAME_READ(k[0], p[0], chunks[i % 8]);
		ASSERT_SAME(ioctl(k[0], FIONREAD, &kn), pp_ioctl(p[0], FIONREAD, &pn));
		ASSERT_EQ(kn, pn);
	}
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	free(src);
	return 0;
}

static int test_readv(void)
{
	struct pp_file *p[2];
	int k[2];
	const size_t total = 20000;
	char *src = malloc(total), *kb = calloc(1, total + 64), *pb = calloc(1, total + 64);
	static const size_t lens[] = { 1, 0, 4095, 3, 0, 8192, 100, 5000 };	/* 17391 */
	struct iovec kiov[8], piov[8];
	size_t off = 0;

	ASSERT_TRUE(src && kb && pb);
	t_fill(src, total, 0, 3);
	for (unsigned i = 0; i < 8; i++) {
		kiov[i] = (struct iovec){ kb + off, lens[i] };
		piov[i] = (struct iovec){ pb + off, lens[i] };
		off += lens[i];
	}
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(write(k[1], src, 6000), pp_write(p[1], src, 6000));
	ASSERT_SAME(write(k[1], src + 6000, 14000), pp_write(p[1], src + 6000, 14000));

	/* Less than there is: fills every iovec, exactly. */
	ASSERT_SAME(readv(k[0], kiov, 8), pp_readv(p[0], piov, 8));
	ASSERT_MEM_EQ(kb, pb, off);
	ASSERT_EQ(t_check(pb, off, 0, 3), 0);

	/* More than there is: the rest, spread over the iovecs, then EAGAIN. */
	memset(kb, 0, total);
	memset(pb, 0, total);
	ASSERT_SAME(readv(k[0], kiov, 8), pp_readv(p[0], piov, 8));
	ASSERT_MEM_EQ(kb, pb, total - off);
	ASSERT_EQ(t_check(pb, total - off, off, 3), 0);
	ASSERT_SAME(readv(k[0], kiov, 8), pp_readv(p[0], piov, 8));

	/* writev across iovecs, readv back with a different split. */
	{
		struct iovec wv[4] = { { src, 10 }, { src + 10, 0 }, { src + 10, 4090 }, { src + 4100, 9000 } };

		ASSERT_SAME(writev(k[1], wv, 4), pp_writev(p[1], wv, 4));
		memset(kb, 0, total);
		memset(pb, 0, total);
		ASSERT_SAME(readv(k[0], kiov, 8), pp_readv(p[0], piov, 8));
		ASSERT_MEM_EQ(kb, pb, 13100);
		ASSERT_EQ(t_check(pb, 13100, 0, 3), 0);
	}
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	free(src);
	free(kb);
	free(pb);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_zero_length),
		T_SUBTEST(test_eof),
		T_SUBTEST(test_eagain),
		T_SUBTEST(test_blocking_waits_for_data),
		T_SUBTEST(test_blocking_waits_for_eof),
		T_SUBTEST(test_returns_what_is_there),
		T_SUBTEST(test_odd_sizes),
		T_SUBTEST(test_readv),
	};

	return T_RUN_SUBTESTS(tests);
}
