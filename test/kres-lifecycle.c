// SPDX-License-Identifier: MIT
/*
 * Description: the life of socket- and kernel-pipe-sourced buffers in a
 * pipe (issue 12 §1, §3), each compared with a kernel pipe:
 *  - the reader closes with them queued: the writer gets EPIPE (write and
 *    splice from the source, which then keeps its bytes);
 *  - the writer closes: the reader gets every byte, then 0;
 *  - both close with them queued, after the source itself is gone: no
 *    descriptor or thread left (ASan checks the memory);
 *  - the source closed while its bytes are in the pipe: they stay readable;
 *  - F_SETPIPE_SZ with them queued: grow, shrink, EBUSY when they do not
 *    fit (slot counts compared for kernel-pipe sources, whose layout is the
 *    kernel's; for sockets, whatever the answer, the bytes), then every
 *    byte back in order;
 *  - packets: an O_DIRECT kernel pipe spliced into the pipe (packets of 1
 *    byte to 64 KiB, across PIPE_BUF), read with small and large reads,
 *    into a plain and into a packet pipe: the kernel's boundaries kept.
 */
#include <sys/uio.h>

#include "kres.h"

struct both {
	struct t_pair x;
	struct kres_src ks, ps;
	struct pp_file *pin;
};

/* n bytes of stream seed from a source of kind k into both pipes. */
static void load(struct both *b, enum kres_src_kind k, size_t n, unsigned int seed, int pflags)
{
	memset(b, 0, sizeof(*b));
	t_pair_open(&b->x, pflags);
	ASSERT_SAME(fcntl(b->x.k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), pp_fcntl(b->x.p[1], F_SETPIPE_SZ, KRES_PIPE_SZ));
	ASSERT_EQ(kres_src_open(&b->ks, k), 0);
	ASSERT_EQ(kres_src_open(&b->ps, k), 0);
	b->pin = pp_fdopen(b->ps.rfd);
	ASSERT_TRUE(b->pin != NULL);
	kres_src_feed(&b->ks, n, 0, seed, false, 4096);
	kres_src_feed(&b->ps, n, 0, seed, false, 4096);
	if (kres_src_det(k)) {
		kres_src_join(&b->ks);
		kres_src_join(&b->ps);
	}
	kres_fill(b->ks.rfd, b->x.k[1], NULL, NULL, n, NULL, 0, NULL, 0);
	kres_fill(-1, -1, b->pin, b->x.p[1], n, NULL, 0, NULL, 0);
	kres_src_join(&b->ks);
	kres_src_join(&b->ps);
	t_pair_same_fionread(&b->x);
}

static void unload(struct both *b)
{
	if (b->pin)
		pp_close(b->pin);
	kres_src_close(&b->ks);
	kres_src_close(&b->ps);
	t_pair_close(&b->x);
}

static const enum kres_src_kind kinds[] = { KS_TCP, KS_UNIX, KS_KPIPE, KS_FIFO };
#define NKINDS	4

/* ---------------------------------------------------------------------- */

static int test_reader_closes(void)
{
	signal(SIGPIPE, SIG_IGN);
	for (unsigned int i = 0; i < NKINDS; i++) {
		struct kres_leak l = kres_leak_begin();
		struct both b;
		int ka = -1, pa = -1;

		load(&b, kinds[i], 30000, 11, 0);
		close(b.x.k[0]);
		pp_close(b.x.p[0]);
		b.x.k[0] = -1;
		b.x.p[0] = NULL;
		ASSERT_SAME(write(b.x.k[1], "x", 1), pp_write(b.x.p[1], "x", 1));
		ASSERT_ERRNO(pp_write(b.x.p[1], "x", 1), EPIPE);
		/* More bytes in the source: the splice fails before taking them. */
		ASSERT_EQ(write(b.ks.wfd, "abcdef", 6), 6);
		ASSERT_EQ(write(b.ps.wfd, "abcdef", 6), 6);
		if (kinds[i] == KS_TCP) {
			struct pollfd pf[2] = { { b.ks.rfd, POLLIN, 0 }, { b.ps.rfd, POLLIN, 0 } };

			ASSERT_EQ(poll(pf, 1, 10000), 1);
			ASSERT_EQ(poll(pf + 1, 1, 10000), 1);
		}
		ASSERT_SAME(splice(b.ks.rfd, NULL, b.x.k[1], NULL, 6, 0),
			    pp_splice(b.pin, NULL, b.x.p[1], NULL, 6, 0));
		ASSERT_SAME(splice(b.ks.rfd, NULL, b.x.k[1], NULL, 6, SPLICE_F_NONBLOCK),
			    pp_splice(b.pin, NULL, b.x.p[1], NULL, 6, SPLICE_F_NONBLOCK));
		ASSERT_EQ(ioctl(b.ks.rfd, FIONREAD, &ka), 0);
		ASSERT_EQ(ioctl(b.ps.rfd, FIONREAD, &pa), 0);
		ASSERT_EQ(ka, 6);
		ASSERT_EQ(pa, ka);
		unload(&b);
		kres_leak_end(l, kres_src_name[kinds[i]]);
	}
	return T_EXIT_PASS;
}

static int test_writer_closes(void)
{
	unsigned char *kb = malloc(70000), *pb = malloc(70000);

	ASSERT_TRUE(kb && pb);
	for (unsigned int i = 0; i < NKINDS; i++) {
		struct kres_leak l = kres_leak_begin();
		struct both b;
		size_t done = 0;

		load(&b, kinds[i], 70000, 12, 0);
		close(b.x.k[1]);
		pp_close(b.x.p[1]);
		b.x.k[1] = -1;
		b.x.p[1] = NULL;
		for (;;) {
			struct t_res k = T_CALL(read(b.x.k[0], kb + done, 7000));
			struct t_res p = T_CALL(pp_read(b.x.p[0], pb + done, 7000));

			ASSERT_EQ(k.ret, p.ret);
			ASSERT_EQ(k.err, p.err);
			if (k.ret <= 0)
				break;
			done += (size_t)k.ret;
		}
		ASSERT_EQ(done, 70000);
		ASSERT_MEM_EQ(kb, pb, done);
		ASSERT_EQ(t_check(pb, done, 0, 12), 0);
		unload(&b);
		kres_leak_end(l, kres_src_name[kinds[i]]);
	}
	free(kb);
	free(pb);
	return T_EXIT_PASS;
}

/* The source goes first (both its ends), then both pipe ends, in either order. */
static int test_close_all_queued(void)
{
	for (unsigned int i = 0; i < NKINDS; i++) {
		for (int order = 0; order < 2; order++) {
			struct kres_leak l = kres_leak_begin();
			struct both b;

			load(&b, kinds[i], 100000, 13, 0);
			pp_close(b.pin);
			b.pin = NULL;
			kres_src_close(&b.ks);
			kres_src_close(&b.ps);
			/* A tee'd copy in a second pipe shares the buffers: closed too. */
			{
				struct pp_file *y[2];

				t_pipe2(y, 0);
				ASSERT_EQ(pp_tee(b.x.p[0], y[1], 50000, 0), 50000);
				pp_close(y[order]);
				pp_close(y[!order]);
			}
			pp_close(b.x.p[order]);
			pp_close(b.x.p[!order]);
			b.x.p[0] = b.x.p[1] = NULL;
			unload(&b);
			kres_leak_end(l, kres_src_name[kinds[i]]);
		}
	}
	return T_EXIT_PASS;
}

/* The bytes belong to the pipe once spliced: the source may go. */
static int test_source_gone(void)
{
	unsigned char *kb = malloc(50000), *pb = malloc(50000);

	ASSERT_TRUE(kb && pb);
	for (unsigned int i = 0; i < NKINDS; i++) {
		struct kres_leak l = kres_leak_begin();
		struct both b;

		load(&b, kinds[i], 50000, 14, 0);
		pp_close(b.pin);
		b.pin = NULL;
		kres_src_close(&b.ks);
		kres_src_close(&b.ps);
		ASSERT_EQ(read(b.x.k[0], kb, 50000), 50000);
		ASSERT_EQ(t_read_full(b.x.p[0], pb, 50000), 50000);
		ASSERT_MEM_EQ(kb, pb, 50000);
		ASSERT_EQ(t_check(pb, 50000, 0, 14), 0);
		unload(&b);
		kres_leak_end(l, kres_src_name[kinds[i]]);
	}
	free(kb);
	free(pb);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

static int test_resize_queued(void)
{
	static const int sizes[] = { 1 << 20, 65536, 16384, 4096, 131072, 8192, 1 << 19, 32768 };
	const size_t n = 30000;
	unsigned char *kb = malloc(n), *pb = malloc(n);

	ASSERT_TRUE(kb && pb);
	for (unsigned int i = 0; i < NKINDS; i++) {
		struct kres_leak l = kres_leak_begin();
		bool det = kres_src_det(kinds[i]);
		struct both b;
		size_t done = 0;

		load(&b, kinds[i], n, 15, 0);
		for (unsigned int s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct t_res k = T_CALL(fcntl(b.x.k[1], F_SETPIPE_SZ, sizes[s]));
			struct t_res p = T_CALL(pp_fcntl(b.x.p[1], F_SETPIPE_SZ, sizes[s]));

			if (det && (k.ret != p.ret || k.err != p.err))
				t_fail_at(__FILE__, __LINE__, "%s: F_SETPIPE_SZ %d: kernel %lld (%s), pagepipe %lld (%s)",
					  kres_src_name[kinds[i]], sizes[s], k.ret, strerror(k.err),
					  p.ret, strerror(p.err));
			ASSERT_TRUE(p.ret > 0 || p.err == EBUSY);
			/* 30000 bytes never fit in one or two pages. */
			if (sizes[s] <= 8192)
				ASSERT_EQ(p.err, EBUSY);
			t_pair_same_fionread(&b.x);
			/* Read a little between resizes: the ring moves under them. */
			if (s % 2) {
				ASSERT_SAME_READ(b.x.k[0], b.x.p[0], 1111);
			}
		}
		/* And the rest, in order, after all of that. */
		{
			int left = t_kfionread(b.x.k[0]);

			done = n - (size_t)left;
			ASSERT_EQ(read(b.x.k[0], kb + done, (size_t)left), left);
			ASSERT_EQ(t_read_full(b.x.p[0], pb + done, (size_t)left), left);
			ASSERT_MEM_EQ(kb + done, pb + done, (size_t)left);
			ASSERT_EQ(t_check(pb + done, (size_t)left, done, 15), 0);
		}
		unload(&b);
		kres_leak_end(l, kres_src_name[kinds[i]]);
	}
	free(kb);
	free(pb);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/*
 * Packets: an O_DIRECT kernel pipe holding packets of the sizes below is
 * spliced (len) into a kernel pipe and into a pagepipe (both opened with
 * flags), then both are read in chunks of rd: every count compared.
 */
static const size_t packets[] = { 1, 100, 4096, 5000, 4097, 7, 65536, 4095, 8192, 12000, 2, 3 };
#define NPACKETS	(sizeof(packets) / sizeof(packets[0]))

static void packet_case(int flags, size_t len, size_t rd)
{
	int ks[2], ps[2];
	struct pp_file *pin;
	struct t_pair x;
	size_t total = 0, pos = 0, moved = 0;
	unsigned char *buf = malloc(65536), *kb = malloc(200000), *pb = malloc(200000);

	ASSERT_TRUE(buf && kb && pb);
	t_kpipe2(ks, O_DIRECT);
	t_kpipe2(ps, O_DIRECT);
	ASSERT_EQ(fcntl(ks[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	ASSERT_EQ(fcntl(ps[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	for (unsigned int i = 0; i < NPACKETS; i++) {
		t_fill(buf, packets[i], total, 16);
		ASSERT_EQ(write(ks[1], buf, packets[i]), (ssize_t)packets[i]);
		ASSERT_EQ(write(ps[1], buf, packets[i]), (ssize_t)packets[i]);
		total += packets[i];
	}
	close(ks[1]);
	close(ps[1]);
	pin = pp_fdopen(ps[0]);
	ASSERT_TRUE(pin != NULL);
	t_pair_open(&x, flags);
	ASSERT_SAME(fcntl(x.k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), pp_fcntl(x.p[1], F_SETPIPE_SZ, KRES_PIPE_SZ));
	for (int guard = 0;; guard++) {
		struct t_res k = T_CALL(splice(ks[0], NULL, x.k[1], NULL, len, 0));
		struct t_res p = T_CALL(pp_splice(pin, NULL, x.p[1], NULL, len, 0));

		ASSERT_TRUE(guard < 10000);
		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__,
				  "packets into a pipe (flags 0x%x) by %zu at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  flags, len, moved, k.ret, strerror(k.err), p.ret, strerror(p.err));
		if (k.ret <= 0)
			break;
		moved += (size_t)k.ret;
		t_pair_same_fionread(&x);
	}
	ASSERT_EQ(moved, total);
	close(x.k[1]);
	pp_close(x.p[1]);
	x.k[1] = -1;
	x.p[1] = NULL;
	for (int guard = 0;; guard++) {
		size_t want = rd < 200000 - pos ? rd : 200000 - pos;
		struct t_res k = T_CALL(read(x.k[0], kb + pos, want));
		struct t_res p = T_CALL(pp_read(x.p[0], pb + pos, want));

		ASSERT_TRUE(guard < 100000);
		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__,
				  "read(%zu) of packets (pipe flags 0x%x, spliced by %zu) at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  rd, flags, len, pos, k.ret, strerror(k.err), p.ret, strerror(p.err));
		if (k.ret <= 0)
			break;
		ASSERT_MEM_EQ(kb + pos, pb + pos, (size_t)k.ret);
		pos += (size_t)k.ret;
	}
	pp_close(pin);
	close(ks[0]);
	close(ps[0]);
	t_pair_close(&x);
	free(buf);
	free(kb);
	free(pb);
}

static int test_packets(void)
{
	/* Each piece takes a slot of the target: no lengths so small that it fills. */
	static const size_t lens[] = { 1 << 20, 3000, 4096, 65536 };
	static const size_t reads[] = { 1, 50, 4096, 5000, 100000 };
	struct kres_leak l = kres_leak_begin();

	for (int f = 0; f < 2; f++)
		for (unsigned int i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			for (unsigned int j = 0; j < sizeof(reads) / sizeof(reads[0]); j++)
				packet_case(f ? O_DIRECT : 0, lens[i], reads[j]);
	kres_leak_end(l, "packets");
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_reader_closes),
		T_SUBTEST(test_writer_closes),
		T_SUBTEST(test_close_all_queued),
		T_SUBTEST(test_source_gone),
		T_SUBTEST(test_resize_queued),
		T_SUBTEST(test_packets),
	};

	return T_RUN_SUBTESTS(tests);
}
