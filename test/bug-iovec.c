// SPDX-License-Identifier: MIT
/*
 * Description: the iovec overrun class (CVE-2015-1805, T-IOV1).  A read
 * whose source fails after k bytes returns k, has written exactly those k
 * bytes into the iovecs (nothing beyond, no segment skipped or written
 * twice), and the next read continues at byte k; the failure is reported
 * by a later read, never swallowed together with data.  Sources: file
 * buffers whose pread fails (PP_FAULT_READ) part way into a buffer and at a
 * buffer boundary, and a caller's buffer type whose ->confirm fails.  The
 * write side too: a writev that runs out of pages after k bytes returns k
 * and a writev of the rest continues the stream exactly.
 */
#include "helpers.h"
#include "internal.h"

#define LEN	(8 * 4096)
#define SEG	1000

static int queue_file(struct pp_file *w, unsigned int seed)
{
	char path[64];
	int fd = t_tmpfile(NULL, LEN, seed, path);
	struct pp_file *in = pp_fdopen(fd);
	off_t off = 0;

	unlink(path);
	ASSERT_EQ(pp_splice(in, &off, w, NULL, LEN, 0), LEN);
	pp_close(in);
	return fd;
}

/* iovecs of SEG bytes over dst, pre-filled with 0xEE. */
static int make_iov(struct iovec *iov, unsigned char *dst, size_t len)
{
	int n = 0;

	memset(dst, 0xEE, len);
	for (size_t o = 0; o < len; o += SEG, n++)
		iov[n] = (struct iovec){ dst + o, len - o < SEG ? len - o : SEG };
	return n;
}

static void check_untouched(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0xEE)
			t_fail_at(__FILE__, __LINE__, "byte %zu past the count was written", i);
}

/* Fail the (skip+1)-th pread of a readv over SEG-byte segments. */
static void fail_after_segments(long skip)
{
	static unsigned char dst[LEN], all[LEN];
	struct iovec iov[LEN / SEG + 2];
	struct pp_file *p[2];
	int fd, niov;
	size_t done;
	ssize_t n, k;

	t_pipe2(p, O_NONBLOCK);
	fd = queue_file(p[1], 7);
	niov = make_iov(iov, dst, LEN);

	/* pread per segment, split where segments cross a page */
	pp__fault_arm(PP_FAULT_READ, skip, EIO, 1);
	k = pp_readv(p[0], iov, niov);
	pp__fault_disarm_all();
	ASSERT_TRUE(k > 0);
	ASSERT_TRUE(k < LEN);
	ASSERT_EQ(t_check(dst, (size_t)k, 0, 7), 0);
	check_untouched(dst + k, LEN - (size_t)k);
	ASSERT_EQ(t_fionread(p[0]), LEN - k);	/* exactly k consumed */

	/* The next read starts at byte k (the fault is gone). */
	memcpy(all, dst, (size_t)k);
	for (done = (size_t)k; done < LEN; done += (size_t)n) {
		n = pp_read(p[0], all + done, LEN - done);
		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "skip %ld: read at %zu: %zd %s", skip, done, n,
				  n < 0 ? strerrorname_np(errno) : "EOF");
	}
	ASSERT_EQ(t_check(all, LEN, 0, 7), 0);
	ASSERT_ERRNO(pp_read(p[0], all, 1), EAGAIN);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
}

/* Inside a buffer: segment 3 of the first page fails. */
static int test_file_read_fails_inside_buffer(void)
{
	fail_after_segments(2);		/* 2 preads done: 2000 bytes */
	fail_after_segments(4);		/* 4096 = 4 whole + 96: fails at 4000 */
	return 0;
}

/* At a buffer boundary: the first pread of the second buffer fails. */
static int test_file_read_fails_at_buffer_boundary(void)
{
	/* page 0: segments 0-3 and the first 96 bytes of 4 -> 5 preads */
	fail_after_segments(5);
	return 0;
}

/* The error after k bytes is reported by the next read, then the stream goes on. */
static int test_error_not_swallowed(void)
{
	static unsigned char dst[LEN];
	struct pp_file *p[2];
	int fd;
	ssize_t n;

	t_pipe2(p, O_NONBLOCK);
	fd = queue_file(p[1], 8);
	pp__fault_arm(PP_FAULT_READ, 1, EIO, 1);	/* the second buffer's pread */
	n = pp_read(p[0], dst, LEN);
	ASSERT_EQ(n, 4096);
	ASSERT_EQ(t_check(dst, 4096, 0, 8), 0);
	/* 4096 bytes taken, and the failed buffer is not gone with them */
	ASSERT_EQ(t_fionread(p[0]), LEN - 4096);
	pp__fault_disarm_all();
	n = pp_read(p[0], dst, LEN);
	ASSERT_EQ(n, LEN - 4096);
	ASSERT_EQ(t_check(dst, (size_t)n, 4096, 8), 0);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
	return 0;
}

/* A caller's buffer type whose confirm fails, behind good data. */
static int bad_confirm(struct pp_pipe *pipe, struct pp_buf *buf)
{
	(void)pipe;
	(void)buf;
	return -EIO;
}

static int releases;

static void bad_release(struct pp_pipe *pipe, struct pp_buf *buf)
{
	(void)pipe;
	(void)buf;
	releases++;
}

static bool bad_get(struct pp_pipe *pipe, struct pp_buf *buf)
{
	(void)pipe;
	(void)buf;
	return true;
}

static const struct pp_buf_ops bad_ops = {
	.confirm = bad_confirm,
	.release = bad_release,
	.get = bad_get,
	.name = "failing",
};

static int test_confirm_fails_after_k(void)
{
	static char page[4096] = "XXXXXXXX";
	struct pp_file *p[2];
	struct pp_buf buf = { .page = page, .len = 8, .ops = &bad_ops };
	char dst[64];

	t_pipe2(p, O_NONBLOCK);
	t_write_full(p[1], "good", 4);
	ASSERT_EQ(pp_pipe_add_buf(p[1], &buf, 0), 8);
	memset(dst, 0xEE, sizeof(dst));
	/* k = 4 good bytes, then the failing buffer: 4, nothing else written */
	ASSERT_EQ(pp_read(p[0], dst, sizeof(dst)), 4);
	ASSERT_MEM_EQ(dst, "good", 4);
	check_untouched((unsigned char *)dst + 4, sizeof(dst) - 4);
	/* the failure is not swallowed with the good bytes: the next read reports it */
	ASSERT_EQ(t_fionread(p[0]), 8);
	ASSERT_ERRNO(pp_read(p[0], dst, sizeof(dst)), EIO);
	check_untouched((unsigned char *)dst + 4, sizeof(dst) - 4);
	pp_close(p[0]);
	pp_close(p[1]);
	ASSERT_EQ(releases, 1);		/* released exactly once, whatever happened */
	return 0;
}

/* writev running out of pages after k bytes: returns k, the rest follows exactly. */
static int test_writev_fails_after_k(void)
{
	static unsigned char src[LEN], got[LEN];
	struct iovec iov[LEN / SEG + 2];
	struct pp_file *p[2];
	int niov = 0;
	size_t done = 0;
	ssize_t k;

	t_fill(src, sizeof(src), 0, 9);
	for (size_t o = 0; o < LEN; o += SEG)
		iov[niov++] = (struct iovec){ src + o, LEN - o < SEG ? LEN - o : SEG };
	t_pipe2(p, O_NONBLOCK);
	pp__fault_arm(PP_FAULT_ALLOC, 3, ENOMEM, 0);
	k = pp_writev(p[1], iov, niov);
	pp__fault_disarm_all();
	ASSERT_EQ(k, 3 * 4096);
	ASSERT_EQ(t_fionread(p[0]), k);
	/* continue from byte k: find the segment and offset it falls in */
	while (done < LEN - (size_t)k) {
		ssize_t n = pp_write(p[1], src + k + done, LEN - (size_t)k - done);
		ASSERT_TRUE(n > 0);
		done += (size_t)n;
	}
	ASSERT_EQ(pp_read(p[0], got, sizeof(got)), LEN);
	ASSERT_EQ(t_check(got, LEN, 0, 9), 0);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_file_read_fails_inside_buffer),
		T_SUBTEST(test_file_read_fails_at_buffer_boundary),
		T_SUBTEST(test_error_not_swallowed),
		T_SUBTEST(test_confirm_fails_after_k),
		T_SUBTEST(test_writev_fails_after_k),
	};

	return T_RUN_SUBTESTS(tests);
}
