// SPDX-License-Identifier: MIT
/*
 * Description: packet mode (O_DIRECT), each step also done on a kernel
 * pipe: one write is one packet and a short read discards the rest of it;
 * writes larger than 4096 bytes are split into page-sized packets; a
 * zero-length write makes no packet; F_GETFL of each end; F_SETFL O_DIRECT
 * turning packet mode on and off on a live pipe, including what happens to
 * the last mergeable buffer when it is turned on.
 */
#include <sys/uio.h>

#include "helpers.h"

static char src[70000];

#define SAME_WRITE(x, off, n) \
	ASSERT_SAME(write((x)->k[1], src + (off), (n)), pp_write((x)->p[1], src + (off), (n)))

static int test_one_write_one_packet(void)
{
	struct t_pair x;

	t_pair_open(&x, O_DIRECT | O_NONBLOCK);
	SAME_WRITE(&x, 0, 3);
	SAME_WRITE(&x, 3, 4);
	SAME_WRITE(&x, 7, 1);
	SAME_WRITE(&x, 8, 4096);
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* 3: one packet, not 8 */
	ASSERT_SAME_READ(x.k[0], x.p[0], 2);	/* 2 of 4: the rest is gone */
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* the 1-byte packet */
	ASSERT_SAME_READ(x.k[0], x.p[0], 1);	/* 1 of 4096 */
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* EAGAIN */
	t_pair_close(&x);
	return 0;
}

static int test_large_writes_split(void)
{
	struct t_pair x;

	src[0] = 1;
	t_pair_open(&x, O_DIRECT | O_NONBLOCK);
	SAME_WRITE(&x, 0, 10000);		/* 4096 + 4096 + 1808 */
	SAME_WRITE(&x, 0, 4097);		/* 4096 + 1 */
	SAME_WRITE(&x, 0, 8192);		/* 4096 + 4096 */
	t_pair_same_fionread(&x);
	for (int i = 0; i < 8; i++)
		ASSERT_SAME_READ(x.k[0], x.p[0], 65536);
	/* 16 slots: a non-blocking 70000 takes 16 packets. */
	SAME_WRITE(&x, 0, 70000);
	SAME_WRITE(&x, 0, 1);
	for (int i = 0; i < 17; i++)
		ASSERT_SAME_READ(x.k[0], x.p[0], 5000);
	t_pair_close(&x);
	return 0;
}

static int test_zero_length_write(void)
{
	struct t_pair x;

	t_pair_open(&x, O_DIRECT | O_NONBLOCK);
	SAME_WRITE(&x, 0, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 10);	/* EAGAIN: no empty packet */
	SAME_WRITE(&x, 0, 5);
	SAME_WRITE(&x, 0, 0);
	SAME_WRITE(&x, 5, 5);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	t_pair_close(&x);
	return 0;
}

static int test_readv_writev(void)
{
	struct t_pair x;
	char kb[4000], pb[4000];
	struct iovec kv[3] = { { kb, 1000 }, { kb + 1000, 1000 }, { kb + 2000, 2000 } };
	struct iovec pv[3] = { { pb, 1000 }, { pb + 1000, 1000 }, { pb + 2000, 2000 } };
	struct iovec wv[3] = { { src, 10 }, { src + 10, 0 }, { src + 10, 20 } };

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)t_pattern(i, 5);
	t_pair_open(&x, O_DIRECT | O_NONBLOCK);
	/* One writev is one packet. */
	ASSERT_SAME(writev(x.k[1], wv, 3), pp_writev(x.p[1], wv, 3));
	SAME_WRITE(&x, 0, 3000);
	SAME_WRITE(&x, 0, 3000);
	ASSERT_SAME(readv(x.k[0], kv, 3), pp_readv(x.p[0], pv, 3));	/* 30 */
	ASSERT_MEM_EQ(kb, pb, 30);
	ASSERT_SAME(readv(x.k[0], kv, 3), pp_readv(x.p[0], pv, 3));	/* 3000 over 3 iovecs */
	ASSERT_MEM_EQ(kb, pb, 3000);
	ASSERT_SAME(readv(x.k[0], kv, 2), pp_readv(x.p[0], pv, 2));	/* 2000 of 3000 */
	ASSERT_MEM_EQ(kb, pb, 2000);
	t_pair_same_fionread(&x);
	ASSERT_SAME(readv(x.k[0], kv, 3), pp_readv(x.p[0], pv, 3));	/* EAGAIN */
	t_pair_close(&x);
	return 0;
}

static int test_getfl(void)
{
	static const int flags[] = { 0, O_DIRECT, O_NONBLOCK, O_DIRECT | O_NONBLOCK,
				     O_DIRECT | O_CLOEXEC, O_DIRECT | O_NONBLOCK | O_CLOEXEC };

	for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		struct t_pair x;

		t_pair_open(&x, flags[i]);
		/* O_DIRECT belongs to the write end only. */
		ASSERT_SAME(fcntl(x.k[0], F_GETFL), pp_fcntl(x.p[0], F_GETFL));
		ASSERT_SAME(fcntl(x.k[1], F_GETFL), pp_fcntl(x.p[1], F_GETFL));
		t_pair_close(&x);
	}
	return 0;
}

/* F_SETFL O_DIRECT on a pipe made without it, and back. */
static int test_setfl_direct(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	ASSERT_SAME(fcntl(x.k[1], F_SETFL, O_DIRECT | O_NONBLOCK),
		    pp_fcntl(x.p[1], F_SETFL, O_DIRECT | O_NONBLOCK));
	ASSERT_SAME(fcntl(x.k[1], F_GETFL), pp_fcntl(x.p[1], F_GETFL));
	SAME_WRITE(&x, 0, 3);
	SAME_WRITE(&x, 3, 3);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* packets now */
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	ASSERT_SAME(fcntl(x.k[1], F_SETFL, O_NONBLOCK), pp_fcntl(x.p[1], F_SETFL, O_NONBLOCK));
	ASSERT_SAME(fcntl(x.k[1], F_GETFL), pp_fcntl(x.p[1], F_GETFL));
	SAME_WRITE(&x, 0, 3);
	SAME_WRITE(&x, 3, 3);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* merged again: 6 */

	/* On the read end O_DIRECT is shown but changes nothing. */
	ASSERT_SAME(fcntl(x.k[0], F_SETFL, O_DIRECT | O_NONBLOCK),
		    pp_fcntl(x.p[0], F_SETFL, O_DIRECT | O_NONBLOCK));
	ASSERT_SAME(fcntl(x.k[0], F_GETFL), pp_fcntl(x.p[0], F_GETFL));
	SAME_WRITE(&x, 0, 3);
	SAME_WRITE(&x, 3, 3);
	ASSERT_SAME_READ(x.k[0], x.p[0], 4);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	t_pair_close(&x);
	return 0;
}

/* A read goes through plain buffers into a packet and stops after it. */
static int test_plain_then_packets(void)
{
	struct t_pair x;

	t_pair_open(&x, O_DIRECT | O_NONBLOCK);
	SAME_WRITE(&x, 0, 3);			/* packet */
	ASSERT_SAME(fcntl(x.k[1], F_SETFL, O_NONBLOCK), pp_fcntl(x.p[1], F_SETFL, O_NONBLOCK));
	SAME_WRITE(&x, 3, 5);			/* plain: a new buffer, not merged into the packet */
	SAME_WRITE(&x, 8, 5);			/* plain: merged */
	ASSERT_SAME(fcntl(x.k[1], F_SETFL, O_NONBLOCK | O_DIRECT),
		    pp_fcntl(x.p[1], F_SETFL, O_NONBLOCK | O_DIRECT));
	SAME_WRITE(&x, 13, 4096);		/* packet */
	SAME_WRITE(&x, 13, 7);			/* packet */
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* the first packet: 3 */
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* 10 plain + 90 of the 4096 packet */
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* the 7 packet */
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	t_pair_close(&x);
	return 0;
}

/*
 * Packet mode turned on after plain writes: Linux's pipe_write() tries the
 * merge for any writer, packet or not; only the buffers it makes carry
 * PACKET instead of CAN_MERGE.  So a small packet write lands in the last
 * mergeable page, using no new slot, and a read does not stop there.
 */
static int test_setfl_direct_merges_into_plain(void)
{
	struct t_pair x;

	t_pair_open(&x, O_NONBLOCK);
	SAME_WRITE(&x, 0, 3);			/* plain, CAN_MERGE */
	ASSERT_SAME(fcntl(x.k[1], F_SETFL, O_NONBLOCK | O_DIRECT),
		    pp_fcntl(x.p[1], F_SETFL, O_NONBLOCK | O_DIRECT));
	SAME_WRITE(&x, 3, 2);			/* kernel: merged into the first page */
	t_pair_same_fionread(&x);
	SAME_WRITE(&x, 5, 65536);		/* the slots left tell whether it merged */
	t_pair_same_fionread(&x);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	t_pair_close(&x);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_one_write_one_packet),
		T_SUBTEST(test_large_writes_split),
		T_SUBTEST(test_zero_length_write),
		T_SUBTEST(test_readv_writev),
		T_SUBTEST(test_getfl),
		T_SUBTEST(test_setfl_direct),
		T_SUBTEST(test_plain_then_packets),
		T_SUBTEST(test_setfl_direct_merges_into_plain),
	};

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)t_pattern(i, 9);
	return T_RUN_SUBTESTS(tests);
}
