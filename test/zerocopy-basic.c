// SPDX-License-Identifier: MIT
/*
 * Description: zero copy beyond the system calls (issue 3 §6):
 * pp_write_ref() queues caller memory by reference and runs the release
 * callback exactly once, when the last reference is gone - after the read,
 * after a tee'd copy is read too, after a splice elsewhere, on close with
 * data unread - and never before, never for nothing queued;
 * pp_read_lend()/pp_read_done() lend iovecs that point at the data itself,
 * consume only what the reader says, leave the rest; file buffers are lent
 * from scratch copies.  A threaded hand-over checks every release once.
 */
#include <stdatomic.h>

#include "helpers.h"

#define PG 4096

struct rel {
	atomic_int calls;
	void *buf;
	size_t count;
	void *arg;
};

static void on_release(void *buf, size_t count, void *arg)
{
	struct rel *r = arg;

	r->buf = buf;
	r->count = count;
	r->arg = arg;
	atomic_fetch_add(&r->calls, 1);
}

static int test_release_after_read(void)
{
	struct pp_file *p[2];
	unsigned char *mem = aligned_alloc(PG, 3 * PG), out[3 * PG];
	struct rel r = { 0 };

	ASSERT_TRUE(mem != NULL);
	t_fill(mem, 3 * PG, 0, 81);
	t_pipe2(p, 0);
	ASSERT_EQ(pp_write_ref(p[1], mem + 5, 10000, on_release, &r), 10000);
	ASSERT_EQ(atomic_load(&r.calls), 0);
	ASSERT_EQ(pp_read(p[0], out, 5000), 5000);
	ASSERT_EQ(atomic_load(&r.calls), 0);		/* not before the last byte */
	ASSERT_EQ(pp_read(p[0], out + 5000, 4999), 4999);
	ASSERT_EQ(atomic_load(&r.calls), 0);
	ASSERT_EQ(pp_read(p[0], out + 9999, 100), 1);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	ASSERT_TRUE(r.buf == mem + 5);
	ASSERT_EQ(r.count, 10000);
	ASSERT_TRUE(r.arg == &r);
	ASSERT_MEM_EQ(out, mem + 5, 10000);
	pp_close(p[0]);
	pp_close(p[1]);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	free(mem);
	return T_EXIT_PASS;
}

static int test_release_after_tee_copy(void)
{
	struct pp_file *a[2], *b[2];
	_Alignas(128) char mem[100];
	char out[100];
	struct rel r = { 0 };

	t_fill(mem, sizeof(mem), 0, 82);
	t_pipe2(a, 0);
	t_pipe2(b, 0);
	ASSERT_EQ(pp_write_ref(a[1], mem, 100, on_release, &r), 100);
	ASSERT_EQ(pp_tee(a[0], b[1], 100, 0), 100);
	ASSERT_EQ(pp_read(a[0], out, 100), 100);
	ASSERT_EQ(atomic_load(&r.calls), 0);		/* b still refers to it */
	ASSERT_MEM_EQ(out, mem, 100);
	/* A write to b after the tee goes into a new buffer, not into mem. */
	ASSERT_EQ(pp_write(b[1], "x", 1), 1);
	ASSERT_EQ(pp_read(b[0], out, 50), 50);
	ASSERT_EQ(atomic_load(&r.calls), 0);
	ASSERT_EQ(pp_read(b[0], out + 50, 50), 50);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	ASSERT_MEM_EQ(out, mem, 100);
	ASSERT_EQ(pp_read(b[0], out, 10), 1);
	ASSERT_EQ(out[0], 'x');
	pp_close(a[0]); pp_close(a[1]); pp_close(b[0]); pp_close(b[1]);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	return T_EXIT_PASS;
}

static int test_release_after_splice(void)
{
	struct pp_file *a[2], *b[2];
	_Alignas(512) char mem[300];
	char out[300];
	struct rel r = { 0 };

	t_fill(mem, sizeof(mem), 0, 83);
	t_pipe2(a, 0);
	t_pipe2(b, 0);
	ASSERT_EQ(pp_write_ref(a[1], mem, 300, on_release, &r), 300);
	/* A partial splice shares, a whole one moves. */
	ASSERT_EQ(pp_splice(a[0], NULL, b[1], NULL, 100, 0), 100);
	ASSERT_EQ(pp_splice(a[0], NULL, b[1], NULL, 1000, 0), 200);
	ASSERT_EQ(atomic_load(&r.calls), 0);
	ASSERT_EQ(pp_read(b[0], out, 150), 150);
	ASSERT_EQ(atomic_load(&r.calls), 0);
	ASSERT_EQ(pp_read(b[0], out + 150, 150), 150);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	ASSERT_MEM_EQ(out, mem, 300);
	/* Out to a file: released once the file has the bytes. */
	{
		char path[64];
		int fd = t_tmpfile(NULL, 0, 0, path);
		struct pp_file *pf = pp_fdopen(fd);
		struct rel r2 = { 0 };

		ASSERT_EQ(pp_write_ref(a[1], mem, 300, on_release, &r2), 300);
		ASSERT_EQ(pp_splice(a[0], NULL, pf, NULL, 299, 0), 299);
		ASSERT_EQ(atomic_load(&r2.calls), 0);
		ASSERT_EQ(pp_splice(a[0], NULL, pf, NULL, 10, 0), 1);
		ASSERT_EQ(atomic_load(&r2.calls), 1);
		ASSERT_EQ(pread(fd, out, 300, 0), 300);
		ASSERT_MEM_EQ(out, mem, 300);
		pp_close(pf);
		close(fd);
		unlink(path);
	}
	pp_close(a[0]); pp_close(a[1]); pp_close(b[0]); pp_close(b[1]);
	return T_EXIT_PASS;
}

static int test_release_on_close(void)
{
	struct pp_file *p[2], *q[2];
	_Alignas(128) char mem[100];
	struct rel r = { 0 }, r2 = { 0 };

	t_pipe2(p, 0);
	ASSERT_EQ(pp_write_ref(p[1], mem, 100, on_release, &r), 100);
	pp_close(p[1]);
	ASSERT_EQ(atomic_load(&r.calls), 0);	/* unread: the reader may still read it */
	pp_close(p[0]);
	ASSERT_EQ(atomic_load(&r.calls), 1);

	/* Closing the read end first; and with a tee'd copy in a second pipe. */
	t_pipe2(p, 0);
	t_pipe2(q, 0);
	ASSERT_EQ(pp_write_ref(p[1], mem, 100, on_release, &r2), 100);
	ASSERT_EQ(pp_tee(p[0], q[1], 100, 0), 100);
	pp_close(p[0]);
	pp_close(p[1]);
	ASSERT_EQ(atomic_load(&r2.calls), 0);
	pp_close(q[1]);
	ASSERT_EQ(atomic_load(&r2.calls), 0);
	pp_close(q[0]);
	ASSERT_EQ(atomic_load(&r2.calls), 1);
	return T_EXIT_PASS;
}

static int test_release_partial_and_none(void)
{
	struct pp_file *p[2];
	size_t len = 100 * PG;
	unsigned char *mem = aligned_alloc(PG, len), *out = malloc(len);
	struct rel r = { 0 }, none = { 0 };
	ssize_t n;

	ASSERT_TRUE(mem && out);
	t_fill(mem, len, 0, 84);
	t_pipe2(p, O_NONBLOCK);
	/* Page aligned: 16 slots take 16 pages; the rest stays the caller's. */
	n = pp_write_ref(p[1], mem, len, on_release, &r);
	ASSERT_EQ(n, 16 * PG);
	/* Full: nothing queued, and no release for it. */
	ASSERT_ERRNO(pp_write_ref(p[1], mem + n, len - (size_t)n, on_release, &none), EAGAIN);
	ASSERT_EQ(pp_write_ref(p[1], mem, 0, on_release, &none), 0);
	ASSERT_EQ(t_read_full(p[0], out, (size_t)n), n);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	ASSERT_EQ(r.count, (size_t)n);
	ASSERT_MEM_EQ(out, mem, (size_t)n);
	pp_close(p[0]);
	pp_close(p[1]);
	ASSERT_EQ(atomic_load(&none.calls), 0);
	/* Errors: not a pipe, the read end, NULL memory. */
	{
		int k[2];
		struct pp_file *pk;

		t_kpipe2(k, 0);
		pk = pp_fdopen(k[1]);
		ASSERT_ERRNO(pp_write_ref(pk, mem, 10, on_release, &none), EINVAL);
		pp_close(pk);
		close(k[0]); close(k[1]);
		t_pipe2(p, 0);
		ASSERT_ERRNO(pp_write_ref(p[0], mem, 10, on_release, &none), EBADF);
		ASSERT_ERRNO(pp_write_ref(p[1], NULL, 10, on_release, &none), EFAULT);
		ASSERT_ERRNO(pp_write_ref(NULL, mem, 10, on_release, &none), EBADF);
		pp_close(p[0]);
		pp_close(p[1]);
		ASSERT_EQ(atomic_load(&none.calls), 0);
	}
	free(mem);
	free(out);
	return T_EXIT_PASS;
}

static int test_lend_points_at_data(void)
{
	struct pp_file *p[2];
	/* Aligned so the 19 bytes never straddle a page (two buffers then). */
	_Alignas(64) char mem[64] = "zero copy hand-over";
	struct rel r = { 0 };
	struct iovec iov[4];
	ssize_t n;
	char out[64];

	t_pipe2(p, 0);
	ASSERT_EQ(pp_write_ref(p[1], mem, 19, on_release, &r), 19);
	n = pp_read_lend(p[0], iov, 4, 100);
	ASSERT_EQ(n, 19);
	ASSERT_TRUE(iov[0].iov_base == mem);	/* the caller's own memory: no copy */
	ASSERT_EQ(iov[0].iov_len, 19);
	ASSERT_EQ(pp_read_done(p[0], 5), 0);
	ASSERT_EQ(atomic_load(&r.calls), 0);
	/* The rest is still there: lend again, it starts after the consumed part. */
	n = pp_read_lend(p[0], iov, 4, 100);
	ASSERT_EQ(n, 14);
	ASSERT_TRUE(iov[0].iov_base == mem + 5);
	ASSERT_EQ(pp_read_done(p[0], 0), 0);	/* nothing consumed */
	ASSERT_EQ(pp_read(p[0], out, sizeof(out)), 14);
	ASSERT_MEM_EQ(out, "copy hand-over", 14);
	ASSERT_EQ(atomic_load(&r.calls), 1);
	pp_close(p[0]);
	pp_close(p[1]);
	return T_EXIT_PASS;
}

static int test_lend_several_buffers(void)
{
	struct pp_file *p[2];
	unsigned char src[3 * PG], out[3 * PG];
	struct iovec iov[8];
	ssize_t n;
	size_t got = 0;

	t_fill(src, sizeof(src), 0, 85);
	t_pipe2(p, 0);
	ASSERT_EQ(pp_write(p[1], src, sizeof(src)), (ssize_t)sizeof(src));
	/* Two iovecs: at most two buffers. */
	n = pp_read_lend(p[0], iov, 2, sizeof(src));
	ASSERT_EQ(n, 2 * PG);
	for (int i = 0; i < 2; i++) {
		memcpy(out + got, iov[i].iov_base, iov[i].iov_len);
		got += iov[i].iov_len;
	}
	ASSERT_MEM_EQ(out, src, 2 * PG);
	/* Consume a buffer and a half. */
	ASSERT_EQ(pp_read_done(p[0], PG + 100), 0);
	/* A count limit. */
	n = pp_read_lend(p[0], iov, 8, 10);
	ASSERT_EQ(n, 10);
	ASSERT_MEM_EQ(iov[0].iov_base, src + PG + 100, 10);
	/* Consuming more than lent consumes what was lent. */
	ASSERT_EQ(pp_read_done(p[0], 1000000), 0);
	ASSERT_EQ(t_read_full(p[0], out, 3 * PG - PG - 110), 3 * PG - PG - 110);
	ASSERT_MEM_EQ(out, src + PG + 110, 3 * PG - PG - 110);
	/* Empty and non-blocking: EAGAIN; no loan: done is EINVAL; no writers: 0. */
	ASSERT_EQ(pp_fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	ASSERT_ERRNO(pp_read_lend(p[0], iov, 8, 10), EAGAIN);
	ASSERT_ERRNO(pp_read_done(p[0], 1), EINVAL);
	ASSERT_ERRNO(pp_read_lend(p[1], iov, 8, 10), EBADF);
	ASSERT_ERRNO(pp_read_lend(p[0], iov, 0, 10), EINVAL);
	pp_close(p[1]);
	ASSERT_EQ(pp_read_lend(p[0], iov, 8, 10), 0);
	pp_close(p[0]);
	return T_EXIT_PASS;
}

static int test_lend_file_buffers(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 3 * PG, 86, path);
	struct pp_file *pf = pp_fdopen(fd), *p[2];
	struct iovec iov[4];
	ssize_t n;
	size_t got = 0;
	unsigned char out[3 * PG];
	off_t off = 100;

	t_pipe2(p, 0);
	ASSERT_EQ(pp_splice(pf, &off, p[1], NULL, 2 * PG, 0), 2 * PG);
	n = pp_read_lend(p[0], iov, 4, 3 * PG);
	ASSERT_EQ(n, 2 * PG);
	for (int i = 0; i < 4 && got < (size_t)n; i++) {
		memcpy(out + got, iov[i].iov_base, iov[i].iov_len);
		got += iov[i].iov_len;
	}
	ASSERT_EQ(got, 2 * PG);
	ASSERT_EQ(t_check(out, got, 100, 86), 0);
	ASSERT_EQ(pp_read_done(p[0], 1000), 0);
	ASSERT_EQ(t_read_full(p[0], out, 2 * PG - 1000), 2 * PG - 1000);
	ASSERT_EQ(t_check(out, 2 * PG - 1000, 1100, 86), 0);
	pp_close(pf);
	close(fd);
	unlink(path);
	pp_close(p[0]);
	pp_close(p[1]);
	return T_EXIT_PASS;
}

/* Thread hand-over: a producer queues chunks by reference, a consumer lends and consumes. */
#define CHUNKS	2000
#define CHUNK	3000

struct hand {
	struct pp_file *w, *r;
	unsigned char *mem;
	atomic_int released[CHUNKS];
	atomic_int bad;
};

static struct hand H;

static void chunk_release(void *buf, size_t count, void *arg)
{
	size_t i = (size_t)(uintptr_t)arg;

	if (buf != H.mem + i * CHUNK || count == 0 || count > CHUNK)
		atomic_store(&H.bad, 1);
	atomic_fetch_add(&H.released[i], 1);
}

static void *producer(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < CHUNKS; i++) {
		unsigned char *b = H.mem + i * CHUNK;
		size_t done = 0;

		/* A short queue leaves the rest ours: queue it by copy. */
		ssize_t n = pp_write_ref(H.w, b, CHUNK, chunk_release, (void *)(uintptr_t)i);
		if (n <= 0) {
			atomic_store(&H.bad, 2);
			break;
		}
		done = (size_t)n;
		if (done < CHUNK) {
			if (t_write_full(H.w, b + done, CHUNK - done) != (ssize_t)(CHUNK - done))
				atomic_store(&H.bad, 3);
		}
	}
	pp_close(H.w);
	return NULL;
}

static int test_threaded_handover(void)
{
	struct pp_file *p[2];
	pthread_t th;
	size_t total = 0, want = (size_t)CHUNKS * CHUNK;
	struct iovec iov[16];

	H.mem = malloc(want);
	ASSERT_TRUE(H.mem != NULL);
	t_fill(H.mem, want, 0, 87);
	t_pipe2(p, 0);
	H.w = p[1];
	H.r = p[0];
	ASSERT_EQ(pthread_create(&th, NULL, producer, NULL), 0);
	for (;;) {
		ssize_t n = pp_read_lend(p[0], iov, 16, 10000);
		size_t take = 0;

		ASSERT_GE(n, 0);
		if (n == 0)
			break;
		/* Check the bytes in place; consume about half each time. */
		for (int i = 0; i < 16 && take < (size_t)n; i++) {
			ASSERT_EQ(t_check(iov[i].iov_base, iov[i].iov_len, total + take, 87), 0);
			take += iov[i].iov_len;
		}
		take = (size_t)n / 2 + 1;
		ASSERT_EQ(pp_read_done(p[0], take), 0);
		total += take;
	}
	t_join(th, NULL, 30);
	ASSERT_EQ(total, want);
	ASSERT_EQ(atomic_load(&H.bad), 0);
	for (size_t i = 0; i < CHUNKS; i++)
		ASSERT_EQ(atomic_load(&H.released[i]), 1);
	pp_close(p[0]);
	free(H.mem);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_release_after_read),
		T_SUBTEST(test_release_after_tee_copy),
		T_SUBTEST(test_release_after_splice),
		T_SUBTEST(test_release_on_close),
		T_SUBTEST(test_release_partial_and_none),
		T_SUBTEST(test_lend_points_at_data),
		T_SUBTEST(test_lend_several_buffers),
		T_SUBTEST(test_lend_file_buffers),
		T_SUBTEST(test_threaded_handover),
	};

	return T_RUN_SUBTESTS(tests);
}
