// SPDX-License-Identifier: MIT
/*
 * Description: the largest pagepipe, as pagepipe.h, pp_pipe_set_size(3),
 * pp_pipe_set_max_size(3), pp_fcntl(3) and docs/design.md state it: the
 * limit takes a page up to 2^40; F_SETPIPE_SZ grows a pipe to 1 GiB and
 * no further (EINVAL above: its int result could not say 2 GiB);
 * pp_pipe_set_size() takes a pipe past that, EINVAL above 2^40, EPERM
 * above the limit, and F_GETPIPE_SZ then reports INT_MAX; pp_pipe_set_size
 * errors EBADF and EINVAL for a file that is not a pagepipe end.  On a
 * PP_O_SHARED end it is F_SETPIPE_SZ with a ssize_t result: sizes round
 * up to a power of two pages, EPERM past the arena's 1 MiB, EBUSY below
 * what the pipe holds (it failed with EINVAL on every shared end, which
 * made pagepipe send unable to size its pipe).
 */
#include <limits.h>

#include "helpers.h"

#define GIB	(1ul << 30)

static int test_limit(void)
{
	ASSERT_EQ(pp_pipe_set_max_size(1ul << 40), 0);
	ASSERT_EQ(pp_pipe_get_max_size(), 1ul << 40);
	ASSERT_ERRNO(pp_pipe_set_max_size((1ul << 40) + 1), EINVAL);
	ASSERT_ERRNO(pp_pipe_set_max_size(pp_page_size() - 1), EINVAL);
	ASSERT_EQ(pp_pipe_get_max_size(), 1ul << 40);
	ASSERT_EQ(pp_pipe_set_max_size(pp_page_size()), 0);
	return 0;
}

static int test_setpipe_sz_stops_at_1gib(void)
{
	struct pp_file *p[2];

	ASSERT_EQ(pp_pipe_set_max_size(1ul << 40), 0);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, (int)GIB), (int)GIB);
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), (int)GIB);
	/* Rounded up, these would be 2 GiB: refused, the pipe unchanged. */
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, (int)GIB + 1), EINVAL);
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, INT_MAX), EINVAL);
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, (unsigned int)(2 * GIB)), EINVAL);
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, (unsigned int)(2 * GIB) + 1), EINVAL);
	ASSERT_EQ(pp_fcntl(p[0], F_GETPIPE_SZ), (int)GIB);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_set_size_past_1gib(void)
{
	struct pp_file *p[2];
	char byte = 'x';

	ASSERT_EQ(pp_pipe_set_max_size(1ul << 40), 0);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pp_pipe_set_size(p[0], 2 * GIB), (ssize_t)(2 * GIB));
	ASSERT_EQ(pp_fcntl(p[0], F_GETPIPE_SZ), INT_MAX);	/* an int cannot say 2 GiB */
	ASSERT_EQ(pp_pipe_set_size(p[1], 3 * GIB), (ssize_t)(4 * GIB));	/* rounded up */
	ASSERT_ERRNO(pp_pipe_set_size(p[0], (1ul << 40) + 1), EINVAL);
	ASSERT_EQ(pp_write(p[1], &byte, 1), 1);
	ASSERT_EQ(pp_read(p[0], &byte, 1), 1);
	/* Below the limit again: growing is EPERM, shrinking is not refused. */
	ASSERT_EQ(pp_pipe_set_max_size(1ul << 20), 0);
	ASSERT_EQ(pp_pipe_set_size(p[0], 1ul << 21), (ssize_t)(1ul << 21));
	ASSERT_ERRNO(pp_pipe_set_size(p[0], 1ul << 22), EPERM);
	ASSERT_EQ(pp_pipe_set_size(p[0], 0), (ssize_t)pp_page_size());
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_set_size_errors(void)
{
	struct pp_file *p[2], *f;
	int k[2];

	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	f = pp_fdopen(k[0]);
	ASSERT_TRUE(f != NULL);
	ASSERT_ERRNO(pp_pipe_set_size(NULL, 4096), EBADF);
	ASSERT_ERRNO(pp_pipe_set_size(f, 4096), EINVAL);
	/* EBUSY: three packets need three slots. */
	ASSERT_EQ(pp_fcntl(p[1], F_SETFL, O_DIRECT), 0);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(pp_write(p[1], "abc", 3), 3);
	ASSERT_ERRNO(pp_pipe_set_size(p[0], 2 * pp_page_size()), EBUSY);
	ASSERT_EQ(pp_pipe_set_size(p[0], 3 * pp_page_size()), (ssize_t)(4 * pp_page_size()));
	pp_close(f);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_set_size_shared(void)
{
	struct pp_file *e[2];
	char b[3 * 4096] = { 0 };

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
	ASSERT_EQ(pp_pipe_set_size(e[1], 1ul << 20), 1l << 20);
	ASSERT_EQ(pp_fcntl(e[0], F_GETPIPE_SZ), 1 << 20);
	ASSERT_EQ(pp_pipe_set_size(e[0], 3 * pp_page_size()), (ssize_t)(4 * pp_page_size()));
	ASSERT_EQ(pp_fcntl(e[1], F_GETPIPE_SZ), (int)(4 * pp_page_size()));
	ASSERT_ERRNO(pp_pipe_set_size(e[1], (1ul << 20) + 1), EPERM);
	ASSERT_ERRNO(pp_pipe_set_size(e[1], 1ul << 40), EPERM);
	ASSERT_EQ(pp_write(e[1], b, sizeof(b)), (ssize_t)sizeof(b));
	ASSERT_ERRNO(pp_pipe_set_size(e[1], pp_page_size()), EBUSY);
	ASSERT_EQ(pp_fcntl(e[1], F_GETPIPE_SZ), (int)(4 * pp_page_size()));
	pp_close(e[0]);
	pp_close(e[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_limit),
		T_SUBTEST(test_setpipe_sz_stops_at_1gib),
		T_SUBTEST(test_set_size_past_1gib),
		T_SUBTEST(test_set_size_errors),
		T_SUBTEST(test_set_size_shared),
	};

	return T_RUN_SUBTESTS(tests);
}
