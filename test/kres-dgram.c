// SPDX-License-Identifier: MIT
/*
 * Description: kernel-resident bytes spliced to datagram sockets.  A TCP
 * socket's or a kernel pipe's bytes spliced into a pagepipe stay in its
 * private kernel pipe; spliced out to a connected UDP socket, an AF_UNIX
 * SOCK_DGRAM or an AF_UNIX SOCK_SEQPACKET socket, each splice must give
 * the count, the datagrams and the bytes in each that the same steps give
 * with a kernel pipe in the middle: splices within one run of kernel
 * bytes, a run of kernel bytes followed by memory bytes in one splice,
 * and memory, kernel, memory in one.  The rule under test is splice.c's
 * needs_memory(): kernel bytes going to a datagram socket are read into
 * memory first, so that the splice's bytes go in one sendmsg(2), as the
 * kernel's splice_to_socket sends them.  Without it, AF_UNIX gets the
 * kernel run and the memory after it as two datagrams, and UDP loses
 * bytes in test_udp_many_kernel_bufs.
 *
 * Each splice here covers at most 16 of the kernel pipe's buffers: past
 * that, splice_to_socket sends in several sendmsg(2)s, which on AF_UNIX
 * are several datagrams, and where those split depends on how the bytes
 * lie in buffers, which differs between the two pipes.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>

#include "kres.h"
#include "kbuf.h"

enum out_kind { OUT_UDP, OUT_UNIX_DGRAM, OUT_SEQPACKET };

static const char *const out_name[] = { "udp", "unix dgram", "unix seqpacket" };

/* s[1] sends to s[0]. */
static void out_pair(enum out_kind k, int s[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	switch (k) {
	case OUT_UDP:
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		s[0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		s[1] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		ASSERT_TRUE(s[0] >= 0 && s[1] >= 0);
		ASSERT_EQ(bind(s[0], (struct sockaddr *)&a, sizeof(a)), 0);
		ASSERT_EQ(getsockname(s[0], (struct sockaddr *)&a, &al), 0);
		ASSERT_EQ(connect(s[1], (struct sockaddr *)&a, sizeof(a)), 0);
		break;
	case OUT_UNIX_DGRAM:
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, s), 0);
		break;
	case OUT_SEQPACKET:
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s), 0);
		break;
	}
}

#define MAX_DGRAMS	16
#define DGRAM_MAX	65536

struct dgrams {
	int n;
	long long size[MAX_DGRAMS];
	unsigned char *data[MAX_DGRAMS];
};

/* The datagrams waiting at fd, never waiting for more. */
static void dgrams_take(int fd, struct dgrams *d)
{
	d->n = 0;
	for (;;) {
		unsigned char *b = malloc(DGRAM_MAX);
		ssize_t r;

		ASSERT_TRUE(b != NULL);
		r = recv(fd, b, DGRAM_MAX, MSG_DONTWAIT | MSG_TRUNC);
		if (r < 0) {
			ASSERT_EQ(errno, EAGAIN);
			free(b);
			break;
		}
		ASSERT_LE(r, DGRAM_MAX);
		ASSERT_TRUE(d->n < MAX_DGRAMS);
		d->size[d->n] = r;
		d->data[d->n++] = b;
	}
}

static void dgrams_free(struct dgrams *d)
{
	for (int i = 0; i < d->n; i++)
		free(d->data[i]);
	d->n = 0;
}

#define SEED	31

/* What goes into the pipes, in order: kernel bytes from a source, or a write. */
static const struct seg {
	bool kernel;
	size_t len;
} segs[] = {
	{ true, 6000 }, { false, 700 }, { true, 5000 }, { false, 300 }, { true, 9000 },
	{ false, 50 }, { true, 2000 }, { false, 1000 },
};

/*
 * Splices out, in order.  Comments: where each starts in segs (k kernel,
 * m memory) and what it covers.
 */
static const struct step {
	size_t len;
	unsigned int flags;
} steps[] = {
	{ 4000, 0 },		/* k1: kernel only */
	{ 2700, 0 },		/* k1 -> m1: the rest of a kernel run, then memory */
	{ 1, 0 },		/* k2: one kernel byte */
	{ 4999, 0 },		/* k2 to its end */
	{ 300, 0 },		/* m2: memory only */
	{ 3000, SPLICE_F_MORE },	/* k3: corked (UDP), a datagram of its own (AF_UNIX) */
	{ 6025, 0 },		/* k3 -> m3: the corked rest, then memory */
	{ 3025, 0 },		/* m3 -> k4 -> m4: memory, kernel, memory at once */
};

/*
 * The segments into a kernel pipe (kfd >= 0) or a pagepipe (pw): kernel
 * runs spliced from a fresh source of kind sk, memory runs written.
 */
static void fill(int kfd, struct pp_file *pw, enum kres_src_kind sk)
{
	unsigned long long pos = 0;
	unsigned char *buf = malloc(DGRAM_MAX);

	ASSERT_TRUE(buf != NULL);
	for (unsigned int i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
		size_t n = segs[i].len;

		if (segs[i].kernel) {
			struct kres_src s;
			struct pp_file *in;

			ASSERT_EQ(kres_src_open(&s, sk), 0);
			kres_src_feed(&s, n, pos, SEED, true, 4000);
			if (pw) {
				in = pp_fdopen(s.rfd);
				ASSERT_TRUE(in != NULL);
				kres_fill(-1, -1, in, pw, n, NULL, 0, NULL, 0);
				pp_close(in);
			} else {
				kres_fill(s.rfd, kfd, NULL, NULL, n, NULL, 0, NULL, 0);
			}
			kres_src_join(&s);
			kres_src_close(&s);
		} else {
			t_fill(buf, n, pos, SEED);
			if (pw)
				ASSERT_EQ(pp_write(pw, buf, n), (ssize_t)n);
			else
				ASSERT_EQ(write(kfd, buf, n), (ssize_t)n);
		}
		pos += n;
	}
	free(buf);
}

/*
 * One splice of len (flags) from each pipe to its own socket (ko[1],
 * pso): the same count, the same datagrams, and those are the stream's
 * bytes from pos on.  The position after them.
 */
static unsigned long long same_step(struct t_pair *x, int ko[2], int po[2], struct pp_file *pso,
				    size_t len, unsigned int flags, unsigned long long pos,
				    const char *what, unsigned int i)
{
	struct dgrams kd, pd;

	ASSERT_SAME(splice(x->k[0], NULL, ko[1], NULL, len, flags),
		    pp_splice(x->p[0], NULL, pso, NULL, len, flags));
	dgrams_take(ko[0], &kd);
	dgrams_take(po[0], &pd);
	if (kd.n != pd.n)
		t_fail_at(__FILE__, __LINE__, "%s, splice %u (%zu, flags %u): kernel %d datagrams, pagepipe %d",
			  what, i, len, flags, kd.n, pd.n);
	for (int d = 0; d < kd.n; d++) {
		if (kd.size[d] != pd.size[d])
			t_fail_at(__FILE__, __LINE__, "%s, splice %u: datagram %d: kernel %lld bytes, pagepipe %lld",
				  what, i, d, kd.size[d], pd.size[d]);
		for (long long b = 0; b < kd.size[d]; b++)
			if (kd.data[d][b] != pd.data[d][b])
				t_fail_at(__FILE__, __LINE__, "%s, splice %u: datagram %d byte %lld: kernel 0x%02x, pagepipe 0x%02x",
					  what, i, d, b, kd.data[d][b], pd.data[d][b]);
		/* And they are the stream's bytes, in order. */
		if (t_check(kd.data[d], (size_t)kd.size[d], pos, SEED))
			t_fail_at(__FILE__, __LINE__, "%s, splice %u: datagram %d: not the bytes at %llu",
				  what, i, d, pos);
		pos += (unsigned long long)kd.size[d];
	}
	dgrams_free(&kd);
	dgrams_free(&pd);
	t_pair_same_fionread(x);
	return pos;
}

static void one(enum out_kind ok, enum kres_src_kind sk)
{
	char what[64];

	struct kres_leak l = kres_leak_begin();
	unsigned long long pos = 0;
	size_t kb = 0, total = 0;
	struct t_pair x;
	int ko[2], po[2];
	struct pp_file *pso;

	snprintf(what, sizeof(what), "%s from %s", out_name[ok], kres_src_name[sk]);
	printf("  %s\n", what);
	t_pair_open(&x, 0);
	ASSERT_EQ(fcntl(x.k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	ASSERT_EQ(pp_fcntl(x.p[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	fill(x.k[1], NULL, sk);
	fill(-1, x.p[1], sk);
	for (unsigned int i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
		total += segs[i].len;
		kb += segs[i].kernel ? segs[i].len : 0;
	}
	t_pair_same_fionread(&x);
	/* Else this tests the copying way, not the kernel bytes. */
	ASSERT_EQ(t_kernel_bytes(x.p[1], NULL), kb);
	out_pair(ok, ko);
	out_pair(ok, po);
	pso = pp_fdopen(po[1]);
	ASSERT_TRUE(pso != NULL);
	for (unsigned int i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		pos = same_step(&x, ko, po, pso, steps[i].len, steps[i].flags, pos, what, i);
	/* Every byte went out, in datagrams (none still corked). */
	ASSERT_EQ(pos, total);
	pp_close(pso);
	close(ko[0]); close(ko[1]); close(po[0]); close(po[1]);
	t_pair_close(&x);
	kres_leak_end(l, what);
}

/*
 * Many small kernel buffers, then memory, in one splice to UDP: the case
 * kres-partial's test_udp_datagrams found, reduced.  17 kernel pipe
 * buffers of 600 bytes are spliced into each pipe one at a time, then 40
 * bytes written.  The kernel pipe in the middle merges the write into its
 * last buffer (one spliced whole from a kernel pipe stays mergeable: the
 * difference kres-bugs documents), so its splice to UDP is 17 buffers, 16
 * then 1 in two sendmsg(2)s corked into one datagram.  The pagepipe holds
 * 17 kernel buffers and a page.  Sent as they lie, the 17 would go by
 * splice(2) with MSG_MORE and the 40 by a sendmsg(2) behind them, which
 * the corked datagram, at its limit of page fragments, refuses (EMSGSIZE
 * on Linux 6.18): a short count, and the datagram sent without them.
 */
#define RUN_BUFS	17
#define RUN_BUF_LEN	600
#define RUN_MEM_LEN	40

static int test_udp_many_kernel_bufs(void)
{
	struct kres_leak l = kres_leak_begin();
	unsigned char buf[RUN_BUF_LEN];
	unsigned long long pos = 0;
	unsigned int nb;
	struct t_pair x;
	int ko[2], po[2], ks[2], ps[2];
	struct pp_file *pso, *psrc;

	t_pair_open(&x, 0);
	ASSERT_EQ(fcntl(x.k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	ASSERT_EQ(pp_fcntl(x.p[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	t_kpipe2(ks, O_CLOEXEC);
	t_kpipe2(ps, O_CLOEXEC);
	psrc = pp_fdopen(ps[0]);
	ASSERT_TRUE(psrc != NULL);
	for (int i = 0; i < RUN_BUFS; i++) {
		t_fill(buf, RUN_BUF_LEN, pos, SEED);
		ASSERT_EQ(write(ks[1], buf, RUN_BUF_LEN), RUN_BUF_LEN);
		ASSERT_EQ(write(ps[1], buf, RUN_BUF_LEN), RUN_BUF_LEN);
		ASSERT_SAME(splice(ks[0], NULL, x.k[1], NULL, RUN_BUF_LEN, 0),
			    pp_splice(psrc, NULL, x.p[1], NULL, RUN_BUF_LEN, 0));
		pos += RUN_BUF_LEN;
	}
	pp_close(psrc);
	close(ks[0]); close(ks[1]); close(ps[0]); close(ps[1]);
	t_fill(buf, RUN_MEM_LEN, pos, SEED);
	ASSERT_SAME(write(x.k[1], buf, RUN_MEM_LEN), pp_write(x.p[1], buf, RUN_MEM_LEN));
	ASSERT_EQ(t_kernel_bytes(x.p[1], &nb), RUN_BUFS * RUN_BUF_LEN);
	ASSERT_EQ(nb, RUN_BUFS);
	t_pair_same_fionread(&x);
	out_pair(OUT_UDP, ko);
	out_pair(OUT_UDP, po);
	pso = pp_fdopen(po[1]);
	ASSERT_TRUE(pso != NULL);
	pos = same_step(&x, ko, po, pso, RUN_BUFS * RUN_BUF_LEN + RUN_MEM_LEN, 0, 0,
			"udp, many kernel buffers then memory", 0);
	ASSERT_EQ(pos, RUN_BUFS * RUN_BUF_LEN + RUN_MEM_LEN);
	pp_close(pso);
	close(ko[0]); close(ko[1]); close(po[0]); close(po[1]);
	t_pair_close(&x);
	kres_leak_end(l, "udp, many kernel buffers");
	return T_EXIT_PASS;
}

static int test_udp(void)
{
	one(OUT_UDP, KS_TCP);
	one(OUT_UDP, KS_KPIPE);
	return T_EXIT_PASS;
}

static int test_unix_dgram(void)
{
	one(OUT_UNIX_DGRAM, KS_TCP);
	one(OUT_UNIX_DGRAM, KS_KPIPE);
	return T_EXIT_PASS;
}

static int test_seqpacket(void)
{
	one(OUT_SEQPACKET, KS_TCP);
	one(OUT_SEQPACKET, KS_KPIPE);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_udp),
		T_SUBTEST(test_udp_many_kernel_bufs),
		T_SUBTEST(test_unix_dgram),
		T_SUBTEST(test_seqpacket),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
