// SPDX-License-Identifier: MIT
/*
 * Description: bad arguments, each also passed to the kernel wherever the
 * kernel has the same call: pp_pipe2(NULL) and unknown pp_pipe2 flags; the
 * wrong end (EBADF, checked before anything else); NULL buffers and NULL
 * iovec arrays (EFAULT, and the kernel's order of checks: it finds a bad
 * buffer only when it copies, after EOF, EAGAIN and EPIPE, and keeps the
 * partial progress made before the fault); iovcnt above IOV_MAX or
 * negative (EINVAL), iov_len above SSIZE_MAX; huge counts; a NULL struct
 * pp_file * everywhere (EBADF, POLLNVAL).
 */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/uio.h>

#include "helpers.h"

/* volatile: the compiler must not see these NULLs (-Wnonnull). */
static void *volatile null_buf;
static struct iovec *volatile null_iov;
static struct pp_file *volatile null_file;

static char *big;	/* 1 MiB of valid memory */

/* The kernel's calls through pointers, so that the compiler does not check the arguments. */
static ssize_t (*volatile kreadv)(int, const struct iovec *, int) = readv;
static ssize_t (*volatile kwritev)(int, const struct iovec *, int) = writev;

static int test_pipe2_args(void)
{
	static const int bad[] = { O_APPEND, O_RDWR, O_WRONLY, O_TRUNC, O_SYNC, O_NOCTTY, O_ASYNC,
				   O_NOATIME, O_CREAT, O_DIRECTORY, O_PATH, (int)0x80000000u,
				   O_NONBLOCK | O_APPEND, O_DIRECT | O_RDWR };
	struct pp_file *p[2] = { (void *)0x1, (void *)0x2 };
	int k[2] = { -7, -8 };
	int (*volatile kpipe2)(int *, int) = pipe2;

	ASSERT_SAME(kpipe2(NULL, 0), pp_pipe2(NULL, 0));		/* EFAULT */
	ASSERT_SAME(kpipe2(NULL, O_NONBLOCK), pp_pipe2(NULL, O_NONBLOCK));
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fprintf(stderr, "pipe2 flags %#x\n", (unsigned)bad[i]);
		ASSERT_SAME(pipe2(k, bad[i]), pp_pipe2(p, bad[i]));	/* EINVAL */
		/* Nothing is stored on failure. */
		ASSERT_EQ(k[0], -7);
		ASSERT_EQ(k[1], -8);
		ASSERT_TRUE(p[0] == (void *)0x1 && p[1] == (void *)0x2);
	}
	/* Every valid combination works. */
	for (int f = 0; f < 8; f++) {
		int flags = (f & 1 ? O_NONBLOCK : 0) | (f & 2 ? O_DIRECT : 0) | (f & 4 ? O_CLOEXEC : 0);
		struct t_pair x;

		t_pair_open(&x, flags);
		t_pair_close(&x);
	}
	return 0;
}

static int test_wrong_end(void)
{
	struct t_pair x;
	char buf[16];
	struct iovec iov = { buf, sizeof(buf) };

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], "abc", 3), pp_write(x.p[1], "abc", 3));
	ASSERT_SAME(read(x.k[1], buf, 1), pp_read(x.p[1], buf, 1));
	ASSERT_SAME(read(x.k[1], buf, 0), pp_read(x.p[1], buf, 0));
	ASSERT_SAME(kreadv(x.k[1], &iov, 1), pp_readv(x.p[1], &iov, 1));
	ASSERT_SAME(write(x.k[0], buf, 1), pp_write(x.p[0], buf, 1));
	ASSERT_SAME(write(x.k[0], buf, 0), pp_write(x.p[0], buf, 0));
	ASSERT_SAME(kwritev(x.k[0], &iov, 1), pp_writev(x.p[0], &iov, 1));
	/* EBADF comes before every other check. */
	ASSERT_SAME(read(x.k[1], null_buf, 10), pp_read(x.p[1], null_buf, 10));
	ASSERT_SAME(write(x.k[0], null_buf, 10), pp_write(x.p[0], null_buf, 10));
	ASSERT_SAME(kreadv(x.k[1], null_iov, 1), pp_readv(x.p[1], null_iov, 1));
	ASSERT_SAME(kreadv(x.k[1], &iov, -1), pp_readv(x.p[1], &iov, -1));
	ASSERT_SAME(kwritev(x.k[0], &iov, 5000), pp_writev(x.p[0], &iov, 5000));
	ASSERT_SAME(kwritev(x.k[0], null_iov, 1), pp_writev(x.p[0], null_iov, 1));
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 10);
	t_pair_close(&x);
	return 0;
}

/* A NULL buffer where the kernel reaches the copy: EFAULT, nothing moved. */
static int test_null_buffer(void)
{
	struct t_pair x;
	struct iovec kv[2] = { { big, 2 }, { NULL, 10 } };

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], null_buf, 10), pp_write(x.p[1], null_buf, 10));
	ASSERT_SAME(kwritev(x.k[1], kv, 2), pp_writev(x.p[1], kv, 2));
	t_pair_same_fionread(&x);
	ASSERT_SAME(write(x.k[1], "hello", 5), pp_write(x.p[1], "hello", 5));
	ASSERT_SAME(read(x.k[0], null_buf, 10), pp_read(x.p[0], null_buf, 10));
	ASSERT_SAME(kreadv(x.k[0], kv, 2), pp_readv(x.p[0], kv, 2));
	t_pair_same_fionread(&x);				/* nothing consumed */
	ASSERT_SAME(kreadv(x.k[0], null_iov, 1), pp_readv(x.p[0], null_iov, 1));
	ASSERT_SAME(kwritev(x.k[1], null_iov, 1), pp_writev(x.p[1], null_iov, 1));
	ASSERT_SAME(kreadv(x.k[0], null_iov, 0), pp_readv(x.p[0], null_iov, 0));
	ASSERT_SAME(kwritev(x.k[1], null_iov, 0), pp_writev(x.p[1], null_iov, 0));
	/* A NULL base with length 0 is fine. */
	{
		struct iovec z[2] = { { NULL, 0 }, { big, 3 } };

		ASSERT_SAME(kreadv(x.k[0], z, 2), pp_readv(x.p[0], z, 2));
		ASSERT_SAME(kwritev(x.k[1], z, 2), pp_writev(x.p[1], z, 2));
	}
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	t_pair_close(&x);
	return 0;
}

/*
 * The kernel looks at a buffer only when it copies: with nothing to copy
 * the answer is EAGAIN, EOF or EPIPE as for a good buffer; and bytes moved
 * before the fault are returned (the partial-progress rule).  One sub-test
 * per case, so that each is reported.
 */
static int test_null_buffer_empty(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(read(x.k[0], null_buf, 10), pp_read(x.p[0], null_buf, 10));	/* EAGAIN */
	t_pair_close(&x);
	return 0;
}

static int test_null_buffer_full(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], big, 65536), pp_write(x.p[1], big, 65536));
	ASSERT_SAME(write(x.k[1], null_buf, 10), pp_write(x.p[1], null_buf, 10));	/* EAGAIN */
	t_pair_close(&x);
	return 0;
}

static int test_null_buffer_eof(void)
{
	struct t_pair x;

	t_pair_open(&x, 0);
	close(x.k[1]);
	pp_close(x.p[1]);
	ASSERT_SAME(read(x.k[0], null_buf, 10), pp_read(x.p[0], null_buf, 10));	/* 0 */
	close(x.k[0]);
	pp_close(x.p[0]);
	return 0;
}

static int test_null_buffer_epipe(void)
{
	struct t_pair x;
	int ksig, psig;

	t_sigpipe_count_start();
	t_pair_open(&x, 0);
	close(x.k[0]);
	pp_close(x.p[0]);
	ASSERT_SAME(write(x.k[1], null_buf, 10), (ksig = t_sigpipe_count(),
		    pp_write(x.p[1], null_buf, 10)));				/* EPIPE */
	psig = t_sigpipe_count() - ksig;
	ASSERT_EQ(ksig, 1);
	ASSERT_EQ(psig, ksig);
	close(x.k[1]);
	pp_close(x.p[1]);
	return 0;
}

/* A whole page is written, then the NULL iovec faults: 4096. */
static int test_null_iovec_partial_write(void)
{
	struct t_pair x;
	struct iovec v[2] = { { NULL, 0 }, { NULL, 10 } };

	v[0] = (struct iovec){ big, 4096 };
	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(kwritev(x.k[1], v, 2), pp_writev(x.p[1], v, 2));
	t_pair_same_fionread(&x);
	t_pair_close(&x);
	return 0;
}

/* A whole buffer is read into the first iovec, then the fault: 4096. */
static int test_null_iovec_partial_read(void)
{
	struct t_pair x;
	struct iovec v[2] = { { NULL, 0 }, { NULL, 10 } };

	v[0] = (struct iovec){ big, 4096 };
	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], big, 4096), pp_write(x.p[1], big, 4096));
	ASSERT_SAME(write(x.k[1], big, 10), pp_write(x.p[1], big, 10));
	ASSERT_SAME(kreadv(x.k[0], v, 2), pp_readv(x.p[0], v, 2));
	t_pair_same_fionread(&x);
	t_pair_close(&x);
	return 0;
}

static int test_iovcnt(void)
{
	struct t_pair x;
	struct iovec *v = calloc(1100, sizeof(*v));

	ASSERT_TRUE(v != NULL);
	for (int i = 0; i < 1100; i++)
		v[i] = (struct iovec){ big + i, 1 };
	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(kwritev(x.k[1], v, -1), pp_writev(x.p[1], v, -1));		/* EINVAL */
	ASSERT_SAME(kwritev(x.k[1], v, INT_MIN), pp_writev(x.p[1], v, INT_MIN));
	ASSERT_SAME(kwritev(x.k[1], v, IOV_MAX + 1), pp_writev(x.p[1], v, IOV_MAX + 1));
	ASSERT_SAME(kwritev(x.k[1], v, INT_MAX), pp_writev(x.p[1], v, INT_MAX));
	ASSERT_SAME(kwritev(x.k[1], v, IOV_MAX), pp_writev(x.p[1], v, IOV_MAX));	/* 1024 */
	ASSERT_SAME(kreadv(x.k[0], v, -1), pp_readv(x.p[0], v, -1));
	ASSERT_SAME(kreadv(x.k[0], v, IOV_MAX + 1), pp_readv(x.p[0], v, IOV_MAX + 1));
	ASSERT_SAME(kreadv(x.k[0], v, 1100), pp_readv(x.p[0], v, 1100));
	t_pair_same_fionread(&x);
	{
		char *kb = calloc(1, 1100), *pb = calloc(1, 1100);
		struct iovec *kv = calloc(IOV_MAX, sizeof(*kv)), *pv = calloc(IOV_MAX, sizeof(*pv));

		ASSERT_TRUE(kb && pb && kv && pv);
		for (int i = 0; i < IOV_MAX; i++) {
			kv[i] = (struct iovec){ kb + i, 1 };
			pv[i] = (struct iovec){ pb + i, 1 };
		}
		ASSERT_SAME(kreadv(x.k[0], kv, IOV_MAX), pp_readv(x.p[0], pv, IOV_MAX));
		ASSERT_MEM_EQ(kb, pb, IOV_MAX);
		free(kb);
		free(pb);
		free(kv);
		free(pv);
	}
	t_pair_close(&x);
	free(v);
	return 0;
}

static int test_iov_len(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], big, 10), pp_write(x.p[1], big, 10));
	{
		/* Above SSIZE_MAX: EINVAL. */
		struct iovec v[2] = { { big, (size_t)SSIZE_MAX + 1 }, { big, 1 } };

		ASSERT_SAME(kreadv(x.k[0], v, 2), pp_readv(x.p[0], v, 2));
		ASSERT_SAME(kwritev(x.k[1], v, 2), pp_writev(x.p[1], v, 2));
		v[0].iov_len = SIZE_MAX;
		ASSERT_SAME(kreadv(x.k[0], v, 2), pp_readv(x.p[0], v, 2));
		t_pair_same_fionread(&x);
	}
	{
		/* Large but addressable: capped, and short as usual. */
		struct iovec v[2] = { { big, 1u << 30 }, { big, 1u << 30 } };

		ASSERT_SAME(kreadv(x.k[0], v, 2), pp_readv(x.p[0], v, 2));
		ASSERT_SAME(kreadv(x.k[0], v, 2), pp_readv(x.p[0], v, 2));	/* EAGAIN */
	}
	t_pair_close(&x);
	return 0;
}

/* Huge counts the kernel accepts (it caps them; the transfer is short). */
static int test_huge_count(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], big, 100), pp_write(x.p[1], big, 100));
	ASSERT_SAME(read(x.k[0], big, 1u << 30), pp_read(x.p[0], big, 1u << 30));	/* 100 */
	ASSERT_SAME(write(x.k[1], big, 1u << 30), pp_write(x.p[1], big, 1u << 30));	/* 65536 */
	ASSERT_SAME(write(x.k[1], big, INT_MAX), pp_write(x.p[1], big, INT_MAX));	/* EAGAIN */
	t_pair_same_fionread(&x);
	ASSERT_SAME(read(x.k[0], big, (size_t)INT_MAX + 1), pp_read(x.p[0], big, (size_t)INT_MAX + 1));
	ASSERT_SAME(read(x.k[0], big, (size_t)INT_MAX + 1), pp_read(x.p[0], big, (size_t)INT_MAX + 1));
	t_pair_close(&x);
	return 0;
}

/*
 * Counts no buffer can have: read(2) and write(2) check the whole range
 * with access_ok() before anything else, so SIZE_MAX, SSIZE_MAX + 1 and
 * SSIZE_MAX are EFAULT in the kernel, whatever is in the pipe; and so is
 * an iovec of SSIZE_MAX bytes.
 */
static const size_t huge_counts[] = { SIZE_MAX, (size_t)SSIZE_MAX + 1, (size_t)SSIZE_MAX };
static ssize_t (*volatile kread)(int, void *, size_t) = read;
static ssize_t (*volatile kwrite)(int, const void *, size_t) = write;

static int test_huge_count_read(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	for (unsigned i = 0; i < 3; i++) {
		fprintf(stderr, "count %#zx\n", huge_counts[i]);
		ASSERT_SAME(write(x.k[1], big, 10), pp_write(x.p[1], big, 10));
		ASSERT_SAME(kread(x.k[0], big, huge_counts[i]), pp_read(x.p[0], big, huge_counts[i]));
		t_pair_same_fionread(&x);
		ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	}
	t_pair_close(&x);
	return 0;
}

static int test_huge_count_write(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	for (unsigned i = 0; i < 3; i++) {
		fprintf(stderr, "count %#zx\n", huge_counts[i]);
		ASSERT_SAME(kwrite(x.k[1], big, huge_counts[i]), pp_write(x.p[1], big, huge_counts[i]));
		t_pair_same_fionread(&x);
	}
	t_pair_close(&x);
	return 0;
}

static int test_huge_iov_len(void)
{
	struct t_pair x;
	struct iovec v[1] = { { NULL, (size_t)SSIZE_MAX } };

	v[0].iov_base = big;
	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], big, 10), pp_write(x.p[1], big, 10));
	ASSERT_SAME(kreadv(x.k[0], v, 1), pp_readv(x.p[0], v, 1));
	t_pair_same_fionread(&x);
	t_pair_close(&x);
	return 0;
}

/* A NULL struct pp_file * is a bad descriptor everywhere, like fd -1. */
static int test_null_file(void)
{
	char buf[8];
	struct iovec iov = { buf, sizeof(buf) };
	int n;
	struct pp_pollfd pfd = { NULL, POLLIN | POLLOUT, 0 };
	struct pp_buf b = { 0 };

	ASSERT_SAME(read(-1, buf, 1), pp_read(null_file, buf, 1));
	ASSERT_SAME(read(-1, buf, 0), pp_read(null_file, buf, 0));
	ASSERT_SAME(write(-1, buf, 1), pp_write(null_file, buf, 1));
	ASSERT_SAME(write(-1, buf, 0), pp_write(null_file, buf, 0));
	ASSERT_SAME(kreadv(-1, &iov, 1), pp_readv(null_file, &iov, 1));
	ASSERT_SAME(kwritev(-1, &iov, 1), pp_writev(null_file, &iov, 1));
	ASSERT_SAME(kreadv(-1, &iov, -1), pp_readv(null_file, &iov, -1));
	ASSERT_SAME(fcntl(-1, F_GETFL), pp_fcntl(null_file, F_GETFL));
	ASSERT_SAME(fcntl(-1, F_SETFL, O_NONBLOCK), pp_fcntl(null_file, F_SETFL, O_NONBLOCK));
	ASSERT_SAME(fcntl(-1, F_GETPIPE_SZ), pp_fcntl(null_file, F_GETPIPE_SZ));
	ASSERT_SAME(fcntl(-1, F_SETPIPE_SZ, 4096), pp_fcntl(null_file, F_SETPIPE_SZ, 4096));
	ASSERT_SAME(fcntl(-1, F_GETFD), pp_fcntl(null_file, F_GETFD));
	ASSERT_SAME(ioctl(-1, FIONREAD, &n), pp_ioctl(null_file, FIONREAD, &n));
	ASSERT_SAME(close(-1), pp_close(null_file));
	ASSERT_ERRNO(pp_file_event_fd(null_file), EBADF);
	ASSERT_ERRNO(pp_file_fd(null_file), EBADF);
	ASSERT_ERRNO(pp_pipe_add_buf(null_file, &b, 0), EBADF);
	ASSERT_EQ(pp_poll(&pfd, 1, 0), 1);
	ASSERT_EQ(pfd.revents, POLLNVAL);
	return 0;
}

/* The same for the splice family. */
static int test_null_file_splice(void)
{
	struct pp_file *p[2];
	int k[2];
	struct iovec iov = { big, 1 };

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(splice(-1, NULL, -1, NULL, 10, 0), pp_splice(null_file, NULL, null_file, NULL, 10, 0));
	ASSERT_SAME(splice(-1, NULL, k[1], NULL, 10, 0), pp_splice(null_file, NULL, p[1], NULL, 10, 0));
	ASSERT_SAME(splice(k[0], NULL, -1, NULL, 10, 0), pp_splice(p[0], NULL, null_file, NULL, 10, 0));
	ASSERT_SAME(tee(-1, -1, 10, 0), pp_tee(null_file, null_file, 10, 0));
	ASSERT_SAME(tee(k[0], -1, 10, 0), pp_tee(p[0], null_file, 10, 0));
	ASSERT_SAME(vmsplice(-1, &iov, 1, 0), pp_vmsplice(null_file, &iov, 1, 0));
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* pp_pipe_add_buf(): its own documented checks (no kernel twin). */
static int test_add_buf_args(void)
{
	struct pp_file *p[2];
	void *page = pp_page_alloc();
	struct pp_buf b = { .page = page, .offset = 0, .len = 5, .ops = &pp_anon_buf_ops };
	char out[8];

	ASSERT_TRUE(page != NULL);
	memcpy(page, "hello", 5);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_ERRNO(pp_pipe_add_buf(p[0], &b, 0), EBADF);		/* the read end */
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], NULL, 0), EINVAL);
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &b, 0x100), EINVAL);	/* unknown flag */
	b.flags = PP_BUF_FLAG_CAN_MERGE;
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &b, 0), EINVAL);		/* only the library merges */
	b.flags = 0;
	b.offset = (unsigned)pp_page_size() - 2;
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &b, 0), EINVAL);		/* past the page */
	b.offset = 0;
	b.ops = NULL;
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &b, 0), EINVAL);
	b.ops = &pp_anon_buf_ops;
	ASSERT_EQ(pp_pipe_add_buf(p[1], &b, 0), 5);			/* the reference is the pipe's now */
	ASSERT_EQ(pp_read(p[0], out, sizeof(out)), 5);
	ASSERT_MEM_EQ(out, "hello", 5);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_pipe2_args),
		T_SUBTEST(test_wrong_end),
		T_SUBTEST(test_null_buffer),
		T_SUBTEST(test_null_buffer_empty),
		T_SUBTEST(test_null_buffer_full),
		T_SUBTEST(test_null_buffer_eof),
		T_SUBTEST(test_null_buffer_epipe),
		T_SUBTEST(test_null_iovec_partial_write),
		T_SUBTEST(test_null_iovec_partial_read),
		T_SUBTEST(test_iovcnt),
		T_SUBTEST(test_iov_len),
		T_SUBTEST(test_huge_count),
		T_SUBTEST(test_huge_count_read),
		T_SUBTEST(test_huge_count_write),
		T_SUBTEST(test_huge_iov_len),
		T_SUBTEST(test_null_file),
		T_SUBTEST(test_null_file_splice),
		T_SUBTEST(test_add_buf_args),
	};

	big = calloc(1, 1 << 20);
	if (!big)
		return T_EXIT_FAIL;
	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
