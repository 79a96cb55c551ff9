// SPDX-License-Identifier: MIT
/*
 * Description: resize during traffic (T-RES1, the 2022 pipe_resize_ring
 * class).  F_SETPIPE_SZ grows and shrinks a pagepipe in a loop (EBUSY when
 * the data does not fit is expected and retried with another size) while
 * writer and reader threads move a checksummed byte stream through it by
 * write, splice from a file, pipe-to-pipe splice and tee.  Every byte must
 * arrive once, in order; a blocking call never fails with EAGAIN; nothing
 * hangs.
 */
#include <stdatomic.h>

#include "helpers.h"
#include "internal.h"

#define TOTAL	(1ul << 40)	/* bounded by RUN_MS instead */
#define RUN_MS	700
#define FLEN	(1u << 20)

struct ctx {
	struct pp_file *p[2];
	struct pp_file *q[2];		/* second pipe, for pipe-to-pipe */
	atomic_int stop;
	atomic_long resizes, busy;
	int file_fd;
	int mode;			/* 0 write, 1 splice file, 2 write + splice pipe->pipe, 3 + tee */
	size_t written;
	long long deadline;
};

static const int sizes[] = { 4096, 8192, 16384, 65536, 131072, 1 << 20, 4096, 12288 };

static void *resizer(void *arg)
{
	struct ctx *c = arg;
	unsigned int s = 777;

	while (!atomic_load(&c->stop)) {
		/* Read ends only: the writer and the middle close the write ends. */
		struct pp_file *f = c->mode >= 2 && (rand_r(&s) & 1) ? c->q[0] : c->p[0];
		int sz = sizes[rand_r(&s) % (sizeof(sizes) / sizeof(sizes[0]))];
		int r;

		r = pp_fcntl(f, F_SETPIPE_SZ, sz);
		if (r < 0) {
			if (errno != EBUSY)
				t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ %d: %s", sz, strerror(errno));
			atomic_fetch_add(&c->busy, 1);
		} else {
			ASSERT_GE(r, sz);
			atomic_fetch_add(&c->resizes, 1);
		}
		sched_yield();
	}
	return NULL;
}

static void *writer(void *arg)
{
	struct ctx *c = arg;
	static unsigned char buf[65536 + 4096];
	unsigned int s = 4242;
	size_t pos = 0;
	struct pp_file *in = c->mode == 1 ? pp_fdopen(c->file_fd) : NULL;

	while (pos < TOTAL && t_now_ms() < c->deadline) {
		size_t n = 1 + rand_r(&s) % 65536;
		ssize_t r;

		if (n > TOTAL - pos)
			n = TOTAL - pos;
		if (in) {
			/* The file holds the stream's first FLEN bytes, repeating. */
			off_t off = (off_t)(pos % FLEN);

			if (n > FLEN - (size_t)off)
				n = FLEN - (size_t)off;
			r = pp_splice(in, &off, c->p[1], NULL, n, 0);
		} else {
			t_fill(buf, n, pos % FLEN, 5);
			if ((pos % FLEN) + n > FLEN)
				t_fill(buf + (FLEN - pos % FLEN), n - (FLEN - pos % FLEN), 0, 5);
			r = pp_write(c->p[1], buf, n);
		}
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "blocking %s of %zu at %zu: %zd (%s)",
				  in ? "splice" : "write", n, pos, r, r < 0 ? strerrorname_np(errno) : "0");
		pos += (size_t)r;
	}
	if (in)
		pp_close(in);
	c->written = pos;
	pp_close(c->p[1]);
	return NULL;
}

/* Moves everything from p to q by splice (and tee'd copies into a sink). */
static void *middle(void *arg)
{
	struct ctx *c = arg;
	unsigned int s = 99;
	struct pp_file *sink[2];

	t_pipe2(sink, O_NONBLOCK);
	for (;;) {
		size_t n = 1 + rand_r(&s) % 100000;
		ssize_t r;

		if (c->mode == 3 && (rand_r(&s) & 1)) {
			/* A tee'd copy that is read and dropped: sharing under resize. */
			char junk[65536];

			r = pp_tee(c->p[0], sink[1], n, SPLICE_F_NONBLOCK);
			while (pp_read(sink[0], junk, sizeof(junk)) > 0)
				;
		}
		r = pp_splice(c->p[0], NULL, c->q[1], NULL, n, 0);
		if (r == 0)
			break;
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "blocking pipe->pipe splice: %s", strerrorname_np(errno));
	}
	pp_close(sink[0]);
	pp_close(sink[1]);
	pp_close(c->q[1]);
	return NULL;
}

static void run(int mode)
{
	struct ctx c = { .mode = mode, .deadline = t_now_ms() + RUN_MS };
	pthread_t tw, tr, tm;
	static unsigned char got[100000];
	struct pp_file *rd;
	size_t pos = 0;
	unsigned int s = 31337;
	char path[64];

	t_pipe2(c.p, 0);
	if (mode >= 2)
		t_pipe2(c.q, 0);
	if (mode == 1)
		c.file_fd = t_tmpfile(NULL, FLEN, 5, path), unlink(path);
	ASSERT_EQ(pthread_create(&tw, NULL, writer, &c), 0);
	ASSERT_EQ(pthread_create(&tr, NULL, resizer, &c), 0);
	if (mode >= 2)
		ASSERT_EQ(pthread_create(&tm, NULL, middle, &c), 0);
	rd = mode >= 2 ? c.q[0] : c.p[0];
	for (;;) {
		size_t n = 1 + rand_r(&s) % sizeof(got);
		ssize_t r = pp_read(rd, got, n);

		if (r == 0)
			break;
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "blocking read at %zu: %s", pos, strerrorname_np(errno));
		for (size_t i = 0; i < (size_t)r; i++) {
			if (got[i] != t_pattern((pos + i) % FLEN, 5))
				t_fail_at(__FILE__, __LINE__, "mode %d: byte %zu: 0x%02x, want 0x%02x",
					  mode, pos + i, got[i], t_pattern((pos + i) % FLEN, 5));
		}
		pos += (size_t)r;
	}
	t_join(tw, NULL, 20);
	ASSERT_EQ(pos, c.written);	/* nothing lost, nothing extra */
	if (mode >= 2)
		t_join(tm, NULL, 20);
	atomic_store(&c.stop, 1);
	t_join(tr, NULL, 20);
	printf("mode %d: %zu bytes, %ld resizes, %ld EBUSY\n", mode, pos, atomic_load(&c.resizes), atomic_load(&c.busy));
	ASSERT_GE(atomic_load(&c.resizes), 1);
	pp_close(c.p[0]);
	if (mode >= 2)
		pp_close(c.q[0]);
	if (mode == 1)
		close(c.file_fd);
}

static int test_resize_write_read(void)
{
	run(0);
	return 0;
}

static int test_resize_splice_file(void)
{
	run(1);
	return 0;
}

static int test_resize_pipe_to_pipe(void)
{
	run(2);
	return 0;
}

static int test_resize_tee(void)
{
	run(3);
	return 0;
}

/* EBUSY leaves everything as it was; growing and shrinking keep the order. */
static int test_resize_ebusy_keeps_data(void)
{
	struct pp_file *p[2];
	static unsigned char src[65536], got[65536];

	t_pipe2(p, O_NONBLOCK);
	t_fill(src, sizeof(src), 0, 8);
	for (int i = 0; i < 8; i++)
		t_write_full(p[1], src + i * 4096, 4096);
	ASSERT_ERRNO(pp_fcntl(p[1], F_SETPIPE_SZ, 4096), EBUSY);
	ASSERT_ERRNO(pp_fcntl(p[1], F_SETPIPE_SZ, 16384), EBUSY);
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 65536);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 32768), 32768);
	ASSERT_ERRNO(pp_write(p[1], src, 1), EAGAIN);	/* 8 of 8 slots, none mergeable-full? */
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	t_write_full(p[1], src + 32768, 32768);
	ASSERT_EQ(pp_read(p[0], got, sizeof(got)), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_resize_ebusy_keeps_data),
		T_SUBTEST(test_resize_write_read),
		T_SUBTEST(test_resize_splice_file),
		T_SUBTEST(test_resize_pipe_to_pipe),
		T_SUBTEST(test_resize_tee),
	};

	return T_RUN_SUBTESTS(tests);
}
