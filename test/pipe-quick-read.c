// SPDX-License-Identifier: MIT
/*
 * Description: the quick read (src/pipe.c: read_in_tail) keeps how far the
 * tail slot was read on the consumer's own line and leaves the slot's
 * offset behind; every other consumer must see the slot as really read.
 * Each sub-test reads part of a page (the quick read), then runs one other
 * consumer (FIONREAD, a longer read, readv, tee, splice to a pipe and to a
 * file, a read loan, F_SETPIPE_SZ, a merge and more quick reads) beside a
 * kernel pipe doing the same, and compares counts and bytes.  The last one
 * runs a writer thread against a reader that mixes all of these at random
 * and checks every byte of the stream, with a third thread resizing.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "helpers.h"

#define SEED	7

/* Both pipes of x hold the pattern bytes [0, len) of stream SEED. */
static void put(struct t_pair *x, unsigned long long pos, size_t len)
{
	unsigned char buf[4096];

	t_fill(buf, len, pos, SEED);
	ASSERT_SAME(write(x->k[1], buf, len), pp_write(x->p[1], buf, len));
}

/* Open a pair, write 100 bytes, read 10 the same on both: the quick read. */
static void start(struct t_pair *x)
{
	t_pair_open(x, O_NONBLOCK);
	put(x, 0, 100);
	ASSERT_SAME_READ(x->k[0], x->p[0], 10);
}

/* What is left: the same bytes, then empty on both. */
static void finish(struct t_pair *x)
{
	ASSERT_SAME_READ(x->k[0], x->p[0], 65536);
	ASSERT_SAME_READ(x->k[0], x->p[0], 1);
	t_pair_close(x);
}

static int test_fionread(void)
{
	struct t_pair x;

	start(&x);
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_SAME_READ(x.k[0], x.p[0], 20);
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	finish(&x);
	return 0;
}

static int test_longer_read(void)
{
	struct t_pair x;
	struct iovec kv[2], pv[2];
	char ka[7], kb[300], pa[7], pb[300];

	start(&x);
	/* Asks for more than the slot holds: the ordinary path, after settling. */
	ASSERT_SAME_READ(x.k[0], x.p[0], 200);
	put(&x, 100, 100);
	ASSERT_SAME_READ(x.k[0], x.p[0], 3);
	kv[0] = (struct iovec){ ka, sizeof(ka) };
	kv[1] = (struct iovec){ kb, sizeof(kb) };
	pv[0] = (struct iovec){ pa, sizeof(pa) };
	pv[1] = (struct iovec){ pb, sizeof(pb) };
	ASSERT_SAME(readv(x.k[0], kv, 2), pp_readv(x.p[0], pv, 2));
	ASSERT_MEM_EQ(ka, pa, sizeof(ka));
	ASSERT_MEM_EQ(kb, pb, 97 - sizeof(ka));
	finish(&x);
	return 0;
}

static int test_merge_then_read(void)
{
	struct t_pair x;

	start(&x);
	/* Lands in the same page, past the bytes the quick read has seen. */
	put(&x, 100, 50);
	for (int i = 0; i < 12; i++)
		ASSERT_SAME_READ(x.k[0], x.p[0], 11);
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	put(&x, 150, 4000);	/* past the page: a second slot */
	ASSERT_SAME_READ(x.k[0], x.p[0], 5);
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	finish(&x);
	return 0;
}

static int test_tee(void)
{
	struct t_pair x, y;

	start(&x);
	t_pair_open(&y, O_NONBLOCK);
	ASSERT_SAME(tee(x.k[0], y.k[1], 1000, SPLICE_F_NONBLOCK),
		    pp_tee(x.p[0], y.p[1], 1000, SPLICE_F_NONBLOCK));
	ASSERT_SAME_READ(y.k[0], y.p[0], 1000);
	/* The copy took nothing: the quick read goes on where it was. */
	ASSERT_SAME_READ(x.k[0], x.p[0], 30);
	t_pair_close(&y);
	finish(&x);
	return 0;
}

static int test_splice_pipe(void)
{
	struct t_pair x, y;

	start(&x);
	t_pair_open(&y, O_NONBLOCK);
	ASSERT_SAME(splice(x.k[0], NULL, y.k[1], NULL, 25, SPLICE_F_NONBLOCK),
		    pp_splice(x.p[0], NULL, y.p[1], NULL, 25, SPLICE_F_NONBLOCK));
	ASSERT_SAME_READ(y.k[0], y.p[0], 1000);
	ASSERT_SAME_READ(x.k[0], x.p[0], 5);
	ASSERT_SAME(splice(x.k[0], NULL, y.k[1], NULL, 1000, SPLICE_F_NONBLOCK),
		    pp_splice(x.p[0], NULL, y.p[1], NULL, 1000, SPLICE_F_NONBLOCK));
	ASSERT_SAME_READ(y.k[0], y.p[0], 1000);
	t_pair_close(&y);
	finish(&x);
	return 0;
}

static int test_splice_file(void)
{
	struct t_pair x;
	char kpath[] = "/tmp/pp-quick-k-XXXXXX", ppath[] = "/tmp/pp-quick-p-XXXXXX";
	int kfd = mkstemp(kpath), pfd = mkstemp(ppath);
	struct pp_file *out;
	char kb[200], pb[200];

	ASSERT_TRUE(kfd >= 0 && pfd >= 0);
	unlink(kpath);
	unlink(ppath);
	out = pp_fdopen(pfd);
	ASSERT_TRUE(out != NULL);
	start(&x);
	ASSERT_SAME(splice(x.k[0], NULL, kfd, NULL, 40, 0),
		    pp_splice(x.p[0], NULL, out, NULL, 40, 0));
	ASSERT_SAME(pread(kfd, kb, sizeof(kb), 0), pread(pfd, pb, sizeof(pb), 0));
	ASSERT_MEM_EQ(kb, pb, 40);
	finish(&x);
	pp_close(out);
	close(kfd);
	return 0;
}

static int test_read_lend(void)
{
	struct t_pair x;
	struct iovec iov[4];
	unsigned char kb[100];
	ssize_t n;

	start(&x);
	n = pp_read_lend(x.p[0], iov, 4, 1000);
	ASSERT_EQ(n, 90);
	ASSERT_EQ(read(x.k[0], kb, 17), 17);
	ASSERT_MEM_EQ(kb, iov[0].iov_base, 17);
	ASSERT_EQ(pp_read_done(x.p[0], 17), 0);
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_SAME_READ(x.k[0], x.p[0], 3);
	finish(&x);
	return 0;
}

static int test_resize(void)
{
	struct t_pair x;

	start(&x);
	ASSERT_SAME(fcntl(x.k[0], F_SETPIPE_SZ, 4096), pp_fcntl(x.p[0], F_SETPIPE_SZ, 4096));
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_SAME_READ(x.k[0], x.p[0], 9);
	ASSERT_SAME(fcntl(x.k[0], F_SETPIPE_SZ, 1 << 20), pp_fcntl(x.p[0], F_SETPIPE_SZ, 1 << 20));
	ASSERT_SAME_READ(x.k[0], x.p[0], 9);
	put(&x, 100, 10);
	finish(&x);
	return 0;
}

/* ---------------------------------------------------------------------- */

#define MIX_BYTES	(64ull << 20)

struct mix {
	struct pp_file *p[2];
	atomic_bool done;
	unsigned long long resizes;
};

static void *mix_writer(void *arg)
{
	struct mix *m = arg;
	unsigned char buf[4096];
	unsigned long long pos = 0;
	unsigned int r = 1;

	while (pos < MIX_BYTES) {
		size_t n;

		r = r * 1103515245 + 12345;
		/* Mostly small writes, so most land in a page being read. */
		n = (r >> 16) % 8 ? 1 + (r >> 8) % 200 : 1 + (r >> 4) % sizeof(buf);
		if (n > MIX_BYTES - pos)
			n = (size_t)(MIX_BYTES - pos);
		t_fill(buf, n, pos, SEED);
		if (t_write_full(m->p[1], buf, n) != (ssize_t)n)
			t_fail_at(__FILE__, __LINE__, "write at %llu", pos);
		pos += n;
	}
	return NULL;
}

static void *mix_resizer(void *arg)
{
	struct mix *m = arg;
	static const int sizes[] = { 16384, 65536, 8192, 131072 };

	for (unsigned int i = 0; !atomic_load(&m->done); i++) {
		/* EBUSY when the pipe holds more than fits: fine, try the next. */
		if (pp_fcntl(m->p[0], F_SETPIPE_SZ, sizes[i % 4]) >= 0)
			m->resizes++;
		usleep(200);
	}
	return NULL;
}

/* Checks n bytes from a consumer against the stream at *pos and moves on. */
static void mix_check(const unsigned char *buf, ssize_t n, unsigned long long *pos, int what)
{
	if (n < 0)
		t_fail_at(__FILE__, __LINE__, "consumer %d: %s", what, strerror(errno));
	if (n && t_check(buf, (size_t)n, *pos, SEED))
		t_fail_at(__FILE__, __LINE__, "consumer %d: wrong bytes at %llu, %zd long",
			  what, *pos, n);
	*pos += (unsigned long long)n;
}

static int test_mixed_threads(void)
{
	struct mix m = { .done = false };
	struct pp_file *side[2];
	pthread_t w, rs;
	unsigned char *buf = malloc(70000);
	unsigned long long pos = 0, quick_sized = 0;
	unsigned int r = 99;

	ASSERT_TRUE(buf != NULL);
	t_pipe2(m.p, 0);
	t_pipe2(side, O_NONBLOCK);
	ASSERT_EQ(pthread_create(&w, NULL, mix_writer, &m), 0);
	ASSERT_EQ(pthread_create(&rs, NULL, mix_resizer, &m), 0);
	while (pos < MIX_BYTES) {
		ssize_t n;
		int avail;
		struct iovec iov[4];

		r = r * 1103515245 + 12345;
		switch ((r >> 16) % 16) {
		case 0:		/* FIONREAD: never more than the stream has left */
			avail = t_fionread(m.p[0]);
			if (avail < 0 || (unsigned long long)avail > MIX_BYTES - pos)
				t_fail_at(__FILE__, __LINE__, "FIONREAD %d at %llu", avail, pos);
			break;
		case 1:		/* tee: the next bytes, still in the pipe after */
			n = pp_tee(m.p[0], side[1], 1 + (r >> 4) % 5000, 0);
			if (n > 0) {
				unsigned long long at = pos;

				mix_check(buf, t_read_full(side[0], buf, (size_t)n), &at, 1);
			}
			break;
		case 2:		/* splice out: the next bytes, gone from the pipe */
			n = pp_splice(m.p[0], NULL, side[1], NULL, 1 + (r >> 4) % 5000, 0);
			if (n > 0)
				mix_check(buf, t_read_full(side[0], buf, (size_t)n), &pos, 2);
			break;
		case 3:		/* a read loan, half of it consumed */
			n = pp_read_lend(m.p[0], iov, 4, 1 + (r >> 4) % 9000);
			if (n > 0) {
				size_t take = (size_t)(n + 1) / 2, got = 0;

				for (int i = 0; got < take; i++) {
					size_t k = iov[i].iov_len < take - got ? iov[i].iov_len
									       : take - got;

					memcpy(buf + got, iov[i].iov_base, k);
					got += k;
				}
				ASSERT_EQ(pp_read_done(m.p[0], take), 0);
				mix_check(buf, (ssize_t)take, &pos, 3);
			}
			break;
		case 4:		/* a large read */
			mix_check(buf, pp_read(m.p[0], buf, 70000), &pos, 4);
			break;
		default:	/* small reads: mostly the quick one */
			n = pp_read(m.p[0], buf, 1 + (r >> 4) % 64);
			mix_check(buf, n, &pos, 5);
			quick_sized++;
			break;
		}
	}
	atomic_store(&m.done, true);
	ASSERT_EQ(pthread_join(w, NULL), 0);
	ASSERT_EQ(pthread_join(rs, NULL), 0);
	ASSERT_EQ(t_fionread(m.p[0]), 0);
	ASSERT_TRUE(quick_sized > 1000);
	/* Not asserted: a resize refused (EBUSY) or not scheduled is no fault. */
	printf("%llu small reads, %llu resizes\n", quick_sized, m.resizes);
	pp_close(m.p[0]);
	pp_close(m.p[1]);
	pp_close(side[0]);
	pp_close(side[1]);
	free(buf);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_fionread),
		T_SUBTEST(test_longer_read),
		T_SUBTEST(test_merge_then_read),
		T_SUBTEST(test_tee),
		T_SUBTEST(test_splice_pipe),
		T_SUBTEST(test_splice_file),
		T_SUBTEST(test_read_lend),
		T_SUBTEST(test_resize),
		T_SUBTEST(test_mixed_threads),
	};

	return t_run_subtests(tests, sizeof(tests) / sizeof(tests[0]));
}
