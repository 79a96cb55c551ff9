// SPDX-License-Identifier: MIT
/*
 * Description: a tee whose tee(2) of kernel-resident buffers (src/kbuf.c)
 * duplicates only part of a slot must end there.  The input's kernel
 * bytes sit in its private kernel pipe as many small kernel buffers (one
 * per message a socket received), and the output's private pipe has room
 * for fewer of them than the tee asks for, so tee(2) stops inside one of
 * the input's slots.  link_pipe() queued that part and went on to the
 * next slot, an anonymous page, so the output's stream skipped the rest of
 * the kernel slot: the bytes read from the output after the tee and the
 * same count read from the input differed where the kernel part ended
 * (test/stress-kbuf saw it once in a CI run, 0x9d against 0xe2 at byte
 * 14587 of a tee).  Both pipes must give the same bytes, and the tee's
 * count must be what the output holds of them.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sys/socket.h>

#define MSG	100
#define NMSG	32		/* the input's private pipe: 32 buffers (128 KiB) */
#define ANON	500
#define FILL	14		/* of the output's 16 slots; its private pipe: 18 of 32 left */

static int test_partial_kernel_slot(void)
{
	struct pp_file *in[2], *out[2], *sock, *kin;
	unsigned char msg[MSG], tail[ANON], filler[FILL];
	unsigned char got[NMSG * MSG + ANON], again[NMSG * MSG + ANON], skip[FILL];
	int sv[2], kp[2];
	size_t moved = 0;
	ssize_t n;

	t_pipe2(in, 0);
	t_pipe2(out, 0);
	memset(filler, 'f', sizeof(filler));

	/*
	 * Kernel buffers in the output first, a byte each, one splice each
	 * (so one kernel buffer each): its private pipe is left with fewer
	 * buffers of room than the input's slot has kernel buffers.
	 */
	ASSERT_EQ(pipe2(kp, 0), 0);
	kin = pp_fdopen(kp[0]);
	ASSERT_TRUE(kin != NULL);
	for (size_t i = 0; i < sizeof(filler); i++) {
		ASSERT_EQ(write(kp[1], &filler[i], 1), 1);
		ASSERT_EQ(pp_splice(kin, NULL, out[1], NULL, 1, 0), 1);
	}

	/* Sixteen small messages, a kernel buffer each once spliced into the input. */
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	for (int i = 0; i < NMSG; i++) {
		t_fill(msg, MSG, (unsigned long long)i * MSG, 3);
		ASSERT_EQ(send(sv[1], msg, MSG, 0), MSG);
	}
	sock = pp_fdopen(sv[0]);
	ASSERT_TRUE(sock != NULL);
	while (moved < NMSG * MSG) {
		n = pp_splice(sock, NULL, in[1], NULL, NMSG * MSG - moved, 0);
		ASSERT_TRUE(n > 0);
		moved += (size_t)n;
	}
	/* Then an anonymous page after the kernel slots. */
	t_fill(tail, ANON, NMSG * MSG, 3);
	ASSERT_EQ(pp_write(in[1], tail, ANON), ANON);

	n = pp_tee(in[0], out[1], sizeof(got), 0);
	ASSERT_TRUE(n > 0);
	/*
	 * tee(2) stopped inside the kernel slot, or this test no longer
	 * reaches the case it is about (the private pipes' sizes changed).
	 */
	ASSERT_TRUE(n < NMSG * MSG);
	/* The output: the filler, then exactly n bytes of the input's stream. */
	ASSERT_EQ(t_fionread(out[0]), (int)sizeof(filler) + (int)n);
	ASSERT_EQ(t_read_full(out[0], skip, sizeof(skip)), (ssize_t)sizeof(skip));
	ASSERT_MEM_EQ(skip, filler, sizeof(filler));
	ASSERT_EQ(t_read_full(out[0], got, (size_t)n), n);
	ASSERT_EQ(t_check(got, (size_t)n, 0, 3), 0);
	ASSERT_EQ(t_read_full(in[0], again, (size_t)n), n);
	ASSERT_MEM_EQ(again, got, (size_t)n);
	/* The input still holds the rest of its stream, in order. */
	ASSERT_EQ(t_fionread(in[0]), NMSG * MSG + ANON - (int)n);
	ASSERT_EQ(t_read_full(in[0], again, (size_t)(NMSG * MSG + ANON - n)),
		  (ssize_t)(NMSG * MSG + ANON - n));
	ASSERT_EQ(t_check(again, (size_t)(NMSG * MSG + ANON - n), (unsigned long long)n, 3), 0);

	pp_close(sock);
	pp_close(kin);
	close(sv[1]);
	close(kp[1]);
	pp_close(in[0]);
	pp_close(in[1]);
	pp_close(out[0]);
	pp_close(out[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_partial_kernel_slot),
	};

	return T_RUN_SUBTESTS(tests);
}
