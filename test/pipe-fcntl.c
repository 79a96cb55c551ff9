// SPDX-License-Identifier: MIT
/*
 * Description: pp_fcntl() and pp_ioctl() on pagepipe ends, each step also
 * done on a kernel pipe: F_GETFL/F_SETFL (O_NONBLOCK and the other status
 * flags), F_GETPIPE_SZ/F_SETPIPE_SZ (rounding, the capacity that follows,
 * EBUSY when the occupied slots do not fit, EINVAL), EPERM above
 * pp_pipe_get_max_size() and growing past it with pp_pipe_set_max_size(),
 * FIONREAD, the generic ioctls every descriptor has (FIONBIO, FIOCLEX),
 * unknown commands and requests, and F_GETFD/F_SETFD.
 */
#include <sys/ioctl.h>
#include <termios.h>

#include "helpers.h"

static char *src;

#define SAME_FCNTL(x, end, ...) \
	ASSERT_SAME(fcntl((x)->k[end], __VA_ARGS__), pp_fcntl((x)->p[end], __VA_ARGS__))

static void same_getfl(struct t_pair *x)
{
	SAME_FCNTL(x, 0, F_GETFL);
	SAME_FCNTL(x, 1, F_GETFL);
}

static int test_getfl_setfl(void)
{
	struct t_pair x;
	static const int extra[] = { O_APPEND, O_ASYNC, O_NOATIME, O_DIRECT,
				     O_APPEND | O_ASYNC | O_NOATIME | O_NONBLOCK };

	t_pair_open(&x, 0);
	same_getfl(&x);
	/* O_NONBLOCK on the read end only. */
	SAME_FCNTL(&x, 0, F_SETFL, O_NONBLOCK);
	same_getfl(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 1);	/* EAGAIN */
	ASSERT_SAME(write(x.k[1], "ab", 2), pp_write(x.p[1], "ab", 2));
	ASSERT_SAME_READ(x.k[0], x.p[0], 1);
	SAME_FCNTL(&x, 0, F_SETFL, 0);
	same_getfl(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 10);	/* data there: no wait */
	/* O_NONBLOCK on the write end: a full pipe gives EAGAIN. */
	SAME_FCNTL(&x, 1, F_SETFL, O_NONBLOCK);
	same_getfl(&x);
	ASSERT_SAME(write(x.k[1], src, 100000), pp_write(x.p[1], src, 100000));
	ASSERT_SAME(write(x.k[1], src, 1), pp_write(x.p[1], src, 1));
	/* Access mode and creation flags are ignored by F_SETFL. */
	SAME_FCNTL(&x, 1, F_SETFL, O_RDWR | O_CREAT | O_TRUNC | O_EXCL | O_NONBLOCK);
	same_getfl(&x);
	SAME_FCNTL(&x, 0, F_SETFL, O_WRONLY | O_CLOEXEC);
	same_getfl(&x);
	/* The other status flags a pipe keeps. */
	for (unsigned i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		SAME_FCNTL(&x, 0, F_SETFL, extra[i]);
		SAME_FCNTL(&x, 1, F_SETFL, extra[i] | O_NONBLOCK);
		same_getfl(&x);
	}
	t_pair_close(&x);
	return 0;
}

static int test_pipe_sz(void)
{
	struct t_pair x;
	static const long sizes[] = { 0, 1, 4095, 4096, 4097, 5000, 8192, 12288, 16384, 65535,
				      65536, 65537, 100000, 262144, 1048576, -1, 0x80000001L,
				      0x100000000L, 0x100001000L, 3 * 4096 };

	t_pair_open(&x, O_NONBLOCK);
	SAME_FCNTL(&x, 0, F_GETPIPE_SZ);
	SAME_FCNTL(&x, 1, F_GETPIPE_SZ);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fprintf(stderr, "F_SETPIPE_SZ %ld\n", sizes[i]);
		SAME_FCNTL(&x, i & 1, F_SETPIPE_SZ, sizes[i]);
		SAME_FCNTL(&x, 0, F_GETPIPE_SZ);
		SAME_FCNTL(&x, 1, F_GETPIPE_SZ);
	}
	t_pair_close(&x);

	/* The capacity follows: one page, then one slot more after each step. */
	t_pair_open(&x, O_NONBLOCK);
	SAME_FCNTL(&x, 1, F_SETPIPE_SZ, 0);
	ASSERT_SAME(write(x.k[1], src, 65536), pp_write(x.p[1], src, 65536));
	ASSERT_SAME(write(x.k[1], src, 1), pp_write(x.p[1], src, 1));
	SAME_FCNTL(&x, 0, F_SETPIPE_SZ, 12288);	/* 16384: 4 slots */
	SAME_FCNTL(&x, 0, F_GETPIPE_SZ);
	ASSERT_SAME(write(x.k[1], src, 65536), pp_write(x.p[1], src, 65536));
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 65536);
	t_pair_close(&x);
	return 0;
}

static int test_pipe_sz_ebusy(void)
{
	struct t_pair x;

	/* T-S2: 3 one-byte packets are 3 slots; one page is 1. */
	t_pair_open(&x, O_NONBLOCK | O_DIRECT);
	for (int i = 0; i < 3; i++)
		ASSERT_SAME(write(x.k[1], src + i, 1), pp_write(x.p[1], src + i, 1));
	SAME_FCNTL(&x, 0, F_SETPIPE_SZ, 4096);		/* EBUSY */
	SAME_FCNTL(&x, 0, F_SETPIPE_SZ, 8192);		/* EBUSY */
	SAME_FCNTL(&x, 0, F_GETPIPE_SZ);
	SAME_FCNTL(&x, 0, F_SETPIPE_SZ, 16384);		/* 4 slots: fits */
	SAME_FCNTL(&x, 0, F_GETPIPE_SZ);
	t_pair_same_fionread(&x);
	for (int i = 0; i < 4; i++)
		ASSERT_SAME_READ(x.k[0], x.p[0], 10);	/* packets kept, in order */
	t_pair_close(&x);

	/* Plain: merged bytes are one slot; the data survive the resize. */
	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(write(x.k[1], src, 100), pp_write(x.p[1], src, 100));
	ASSERT_SAME(write(x.k[1], src + 100, 100), pp_write(x.p[1], src + 100, 100));
	SAME_FCNTL(&x, 1, F_SETPIPE_SZ, 4096);
	ASSERT_SAME(write(x.k[1], src + 200, 4096), pp_write(x.p[1], src + 200, 4096)); /* EAGAIN */
	ASSERT_SAME(write(x.k[1], src + 200, 10), pp_write(x.p[1], src + 200, 10));	/* merges */
	ASSERT_SAME_READ(x.k[0], x.p[0], 4096);
	/* 3 pages + a byte: 4 slots; 8192 does not fit, 16384 does. */
	SAME_FCNTL(&x, 1, F_SETPIPE_SZ, 65536);
	ASSERT_SAME(write(x.k[1], src, 3 * 4096 + 1), pp_write(x.p[1], src, 3 * 4096 + 1));
	SAME_FCNTL(&x, 1, F_SETPIPE_SZ, 8192);		/* EBUSY */
	SAME_FCNTL(&x, 1, F_SETPIPE_SZ, 16384);
	ASSERT_SAME(write(x.k[1], src, 1), pp_write(x.p[1], src, 1));	/* merges */
	ASSERT_SAME(write(x.k[1], src, 4096), pp_write(x.p[1], src, 4096)); /* EAGAIN */
	t_pair_same_fionread(&x);
	/* Partly read ring, wrapped, then compacted by a resize. */
	ASSERT_SAME_READ(x.k[0], x.p[0], 5000);
	ASSERT_SAME(write(x.k[1], src, 4096), pp_write(x.p[1], src, 4096));
	SAME_FCNTL(&x, 1, F_SETPIPE_SZ, 32768);
	ASSERT_SAME(write(x.k[1], src, 30000), pp_write(x.p[1], src, 30000));
	t_pair_same_fionread(&x);
	for (int i = 0; i < 4; i++)
		ASSERT_SAME_READ(x.k[0], x.p[0], 9000);
	t_pair_close(&x);
	return 0;
}

/*
 * EPERM: growing past pp_pipe_get_max_size().  The kernel's own answer
 * depends on CAP_SYS_RESOURCE (CI runs as root), so pagepipe is checked
 * against its own limit here.
 */
static int test_pipe_sz_eperm(void)
{
	struct pp_file *p[2];
	size_t max = pp_pipe_get_max_size();
	unsigned long sysctl = 0;
	FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");

	if (f) {
		if (fscanf(f, "%lu", &sysctl) == 1)
			ASSERT_EQ(max, sysctl);	/* starts as the kernel's limit */
		fclose(f);
	} else {
		ASSERT_EQ(max, 1048576);
	}

	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, (int)max), (int)max);
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, (int)max + 1), EPERM);
	ASSERT_ERRNO(pp_fcntl(p[1], F_SETPIPE_SZ, (int)max * 2), EPERM);
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), (int)max);
	/* Shrinking is never refused by the limit... */
	ASSERT_EQ(pp_pipe_set_max_size(4096), 0);
	ASSERT_EQ(pp_pipe_get_max_size(), 4096);
	ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, 8192), 8192);
	/* ...nor is a size that does not grow the ring (T-S4)... */
	ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, 8192), 8192);
	/* ...but growing past it is. */
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, 16384), EPERM);
	ASSERT_EQ(pp_fcntl(p[0], F_GETPIPE_SZ), 8192);

	/* Raised, a pagepipe grows to 64 MiB, and holds that much. */
	ASSERT_EQ(pp_pipe_set_max_size(64u << 20), 0);
	ASSERT_EQ(pp_pipe_get_max_size(), 64u << 20);
	ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, 64 << 20), 64 << 20);
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 64 << 20);
	{
		size_t n = 64u << 20, done = 0;
		char *buf = malloc(1 << 20);
		int fionread = -1;

		ASSERT_TRUE(buf != NULL);
		for (size_t off = 0; off < n; off += 1 << 20) {
			t_fill(buf, 1 << 20, off, 77);
			ASSERT_EQ(pp_write(p[1], buf, 1 << 20), 1 << 20);
		}
		ASSERT_ERRNO(pp_write(p[1], buf, 1), EAGAIN);
		ASSERT_EQ(pp_ioctl(p[0], FIONREAD, &fionread), 0);
		ASSERT_EQ(fionread, 64 << 20);
		while (done < n) {
			ssize_t r = pp_read(p[0], buf, 1 << 20);

			ASSERT_GE(r, 1);
			ASSERT_EQ(t_check(buf, (size_t)r, done, 77), 0);
			done += (size_t)r;
		}
		free(buf);
	}
	pp_close(p[0]);
	pp_close(p[1]);

	/* The limit itself: a page up to 2^40. */
	ASSERT_ERRNO(pp_pipe_set_max_size(0), EINVAL);
	ASSERT_ERRNO(pp_pipe_set_max_size(4095), EINVAL);
	ASSERT_ERRNO(pp_pipe_set_max_size((1ul << 40) + 1), EINVAL);
	ASSERT_EQ(pp_pipe_get_max_size(), 64u << 20);
	ASSERT_EQ(pp_pipe_set_max_size(1ul << 31), 0);
	ASSERT_EQ(pp_pipe_set_max_size(4096), 0);
	ASSERT_EQ(pp_pipe_get_max_size(), 4096);
	return 0;
}

static int test_fionread(void)
{
	struct t_pair x;
	int *volatile null = NULL;

	t_pair_open(&x, O_NONBLOCK | O_DIRECT);
	t_pair_same_fionread(&x);
	ASSERT_SAME(write(x.k[1], src, 10), pp_write(x.p[1], src, 10));
	ASSERT_SAME(write(x.k[1], src, 5000), pp_write(x.p[1], src, 5000));
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 3);	/* discards 7 */
	t_pair_same_fionread(&x);
	ASSERT_SAME(ioctl(x.k[0], FIONREAD, null), pp_ioctl(x.p[0], FIONREAD, null));	/* EFAULT */
	ASSERT_SAME(ioctl(x.k[1], FIONREAD, null), pp_ioctl(x.p[1], FIONREAD, null));
	close(x.k[1]);
	pp_close(x.p[1]);
	{
		int kn = -1, pn = -2;

		ASSERT_SAME(ioctl(x.k[0], FIONREAD, &kn), pp_ioctl(x.p[0], FIONREAD, &pn));
		ASSERT_EQ(kn, pn);
	}
	close(x.k[0]);
	pp_close(x.p[0]);
	return 0;
}

static int test_unknown_commands(void)
{
	struct t_pair x;
	struct termios tio;

	t_pair_open(&x, 0);
	for (int e = 0; e < 2; e++) {
		SAME_FCNTL(&x, e, 0x7fff);
		SAME_FCNTL(&x, e, 0x7fff, 12345);
		SAME_FCNTL(&x, e, F_GET_SEALS);
		ASSERT_SAME(ioctl(x.k[e], 0x1234, 0), pp_ioctl(x.p[e], 0x1234, 0));
		ASSERT_SAME(ioctl(x.k[e], TCGETS, &tio), pp_ioctl(x.p[e], TCGETS, &tio));
		ASSERT_SAME(ioctl(x.k[e], FIONREAD + 1, &tio), pp_ioctl(x.p[e], FIONREAD + 1, &tio));
	}
	t_pair_close(&x);
	return 0;
}

/* The ioctls the kernel handles for every descriptor, before the pipe sees them. */
static int test_generic_ioctls(void)
{
	struct t_pair x;
	int on = 1, off = 0;

	t_pair_open(&x, 0);
	ASSERT_SAME(ioctl(x.k[0], FIONBIO, &on), pp_ioctl(x.p[0], FIONBIO, &on));
	same_getfl(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 1);		/* now EAGAIN */
	ASSERT_SAME(ioctl(x.k[0], FIONBIO, &off), pp_ioctl(x.p[0], FIONBIO, &off));
	same_getfl(&x);
	ASSERT_SAME(ioctl(x.k[1], FIOCLEX), pp_ioctl(x.p[1], FIOCLEX));
	SAME_FCNTL(&x, 1, F_GETFD);
	ASSERT_SAME(ioctl(x.k[1], FIONCLEX), pp_ioctl(x.p[1], FIONCLEX));
	SAME_FCNTL(&x, 1, F_GETFD);
	t_pair_close(&x);
	return 0;
}

static int test_getfd_setfd(void)
{
	struct t_pair x;

	t_pair_open(&x, 0);
	for (int e = 0; e < 2; e++) {
		SAME_FCNTL(&x, e, F_GETFD);
		SAME_FCNTL(&x, e, F_SETFD, FD_CLOEXEC);
		SAME_FCNTL(&x, e, F_GETFD);
		SAME_FCNTL(&x, 1 - e, F_GETFD);	/* per end */
		SAME_FCNTL(&x, e, F_SETFD, 0);
		SAME_FCNTL(&x, e, F_GETFD);
		SAME_FCNTL(&x, e, F_SETFD, ~0);	/* only FD_CLOEXEC counts */
		SAME_FCNTL(&x, e, F_GETFD);
		SAME_FCNTL(&x, e, F_SETFD, 0);
		same_getfl(&x);			/* not a status flag */
	}
	t_pair_close(&x);
	return 0;
}

/* pipe2(O_CLOEXEC) sets close-on-exec on both ends, as F_GETFD reports. */
static int test_cloexec_flag(void)
{
	struct t_pair x;

	t_pair_open(&x, O_CLOEXEC);
	SAME_FCNTL(&x, 0, F_GETFD);
	SAME_FCNTL(&x, 1, F_GETFD);
	same_getfl(&x);
	t_pair_close(&x);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_getfl_setfl),
		T_SUBTEST(test_pipe_sz),
		T_SUBTEST(test_pipe_sz_ebusy),
		T_SUBTEST(test_pipe_sz_eperm),
		T_SUBTEST(test_fionread),
		T_SUBTEST(test_unknown_commands),
		T_SUBTEST(test_getfd_setfd),
		T_SUBTEST(test_generic_ioctls),
		T_SUBTEST(test_cloexec_flag),
	};

	src = malloc(1 << 18);
	if (!src)
		return T_EXIT_FAIL;
	t_fill(src, 1 << 18, 0, 13);
	return T_RUN_SUBTESTS(tests);
}
