// SPDX-License-Identifier: MIT
/*
 * Description: the basics of a pagepipe, each step also done on a kernel
 * pipe: write and read back, EOF, EAGAIN, EPIPE, capacity in slots, the
 * merge rule, packet mode, and F_SETPIPE_SZ rounding.
 */
#include <signal.h>

#include "helpers.h"

static int test_roundtrip(void)
{
	struct pp_file *p[2];
	int k[2];
	char buf[100], kbuf[100];

	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	ASSERT_SAME(write(k[1], "hello", 5), pp_write(p[1], "hello", 5));
	ASSERT_SAME(write(k[1], "", 0), pp_write(p[1], "", 0));
	ASSERT_SAME(read(k[0], kbuf, 3), pp_read(p[0], buf, 3));
	ASSERT_SAME(read(k[0], kbuf + 3, 90), pp_read(p[0], buf + 3, 90));
	ASSERT_MEM_EQ(buf, "hello", 5);
	ASSERT_SAME(read(k[0], kbuf, 0), pp_read(p[0], buf, 0));
	ASSERT_SAME(write(k[0], "x", 1), pp_write(p[0], "x", 1));	/* EBADF */
	ASSERT_SAME(read(k[1], kbuf, 1), pp_read(p[1], buf, 1));	/* EBADF */
	close(k[1]);
	pp_close(p[1]);
	ASSERT_SAME(read(k[0], kbuf, 10), pp_read(p[0], buf, 10));	/* EOF */
	close(k[0]);
	pp_close(p[0]);
	return 0;
}

static int test_nonblock_capacity(void)
{
	struct pp_file *p[2];
	int k[2];
	char big[70000] = { 0 };

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	ASSERT_SAME(read(k[0], big, 1), pp_read(p[0], big, 1));	/* EAGAIN */
	ASSERT_SAME(write(k[1], big, 100), pp_write(p[1], big, 100));
	ASSERT_SAME(write(k[1], big, 65536), pp_write(p[1], big, 65536));
	ASSERT_SAME(write(k[1], big, 1), pp_write(p[1], big, 1));	/* merges into slot 0? */
	ASSERT_SAME(write(k[1], big, 5000), pp_write(p[1], big, 5000));
	ASSERT_SAME(ioctl(k[0], FIONREAD, &(int){0}), pp_ioctl(p[0], FIONREAD, &(int){0}));
	{
		int kn, pn;
		ioctl(k[0], FIONREAD, &kn);
		pp_ioctl(p[0], FIONREAD, &pn);
		ASSERT_EQ(kn, pn);
	}
	ASSERT_SAME(read(k[0], big, sizeof(big)), pp_read(p[0], big, sizeof(big)));
	for (int i = 0; i < 70000; i++) {
		struct t_res kr = T_CALL(write(k[1], "a", 1)), pr = T_CALL(pp_write(p[1], "a", 1));
		ASSERT_EQ(kr.ret, pr.ret);
		ASSERT_EQ(kr.err, pr.err);
		if (kr.ret < 0)
			break;
	}
	close(k[0]);
	pp_close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	ASSERT_SAME(write(k[1], "a", 1), pp_write(p[1], "a", 1));	/* EPIPE */
	ASSERT_SAME(write(k[1], "a", 0), pp_write(p[1], "a", 0));
	close(k[1]);
	pp_close(p[1]);
	return 0;
}

static int test_setsize(void)
{
	struct pp_file *p[2];
	int k[2];
	static const int sizes[] = { 0, 1, 4096, 5000, 12288, 65537, 16384, -1 };

	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ASSERT_SAME(fcntl(k[0], F_SETPIPE_SZ, sizes[i]), pp_fcntl(p[0], F_SETPIPE_SZ, sizes[i]));
		ASSERT_SAME(fcntl(k[1], F_GETPIPE_SZ), pp_fcntl(p[1], F_GETPIPE_SZ));
	}
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return 0;
}

static int test_packet(void)
{
	struct pp_file *p[2];
	int k[2];
	char kb[10], pb[10];

	t_pipe2(p, O_DIRECT | O_NONBLOCK);
	t_kpipe2(k, O_DIRECT | O_NONBLOCK);
	ASSERT_SAME(fcntl(k[1], F_GETFL), pp_fcntl(p[1], F_GETFL));
	ASSERT_SAME(fcntl(k[0], F_GETFL), pp_fcntl(p[0], F_GETFL));
	ASSERT_SAME(write(k[1], "abc", 3), pp_write(p[1], "abc", 3));
	ASSERT_SAME(write(k[1], "defg", 4), pp_write(p[1], "defg", 4));
	ASSERT_SAME(read(k[0], kb, 2), pp_read(p[0], pb, 2));
	ASSERT_SAME(read(k[0], kb, 10), pp_read(p[0], pb, 10));
	ASSERT_MEM_EQ(kb, pb, 4);
	for (int i = 0; i < 17; i++)
		ASSERT_SAME(write(k[1], "z", 1), pp_write(p[1], "z", 1));
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return 0;
}

int main(void)
{
	if (test_roundtrip() || test_nonblock_capacity() || test_setsize() || test_packet())
		return T_EXIT_FAIL;
	return T_EXIT_PASS;
}
