// SPDX-License-Identifier: MIT
/*
 * Description: every source a kernel-resident buffer can come from (TCP on
 * 127.0.0.1, an AF_UNIX stream socket pair, a kernel pipe, a FIFO, a pty)
 * spliced into a pipe, then taken out by every consumer (issue 12 §3):
 * pp_read and pp_readv with odd sizes, splice to a regular file, to a TCP
 * socket, to a kernel pipe and to another pagepipe (whole and partial),
 * tee to another pagepipe then both read, vmsplice from the read end, and
 * pp_read_lend/pp_read_done.  Differential: the same steps on a kernel
 * pipe, each side with its own source of the same kind and bytes; counts,
 * errno and FIONREAD are compared step by step where the kernel is
 * deterministic, the bytes always, byte for byte, with the kernel's and
 * with the pattern the source was fed.  Descriptors and threads are
 * counted around each scenario.
 *
 * T_SUBTEST=test_<source> runs one source; KRES_CONSUMER=<name> one consumer.
 */
#include <sys/uio.h>

#include "kres.h"

#define N	200000u		/* bytes per scenario: more than a default pipe holds */
#define BIG	((size_t)1 << 30)

static const size_t odd[] = { 1, 100, 4095, 4097, 65536 };
#define NODD	(sizeof(odd) / sizeof(odd[0]))

struct side {
	enum kres_src_kind kind;
	bool det;
	int k[2];			/* the kernel pipe */
	struct pp_file *p[2];		/* the pagepipe */
	struct kres_src ks, ps;		/* their sources */
	struct pp_file *pin;		/* pp_fdopen(ps.rfd) */
	unsigned int seed;
	unsigned char *kb, *pb;		/* what each consumer got */
};

static void grow(int kfd, struct pp_file *pf)
{
	ASSERT_SAME(fcntl(kfd, F_SETPIPE_SZ, KRES_PIPE_SZ), pp_fcntl(pf, F_SETPIPE_SZ, KRES_PIPE_SZ));
}

static void same_fionread(struct side *x)
{
	ASSERT_SAME_FIONREAD(x->k[0], x->p[0]);
}

/* Can the kernel splice out of a pty here?  (tty splice_read came and went.) */
static bool pty_splices(void)
{
	struct kres_src s;
	int k[2];
	ssize_t r;

	if (kres_src_open(&s, KS_PTY) != 0)
		return false;
	t_kpipe2(k, 0);
	ASSERT_EQ(write(s.wfd, "x", 1), 1);
	r = splice(s.rfd, NULL, k[1], NULL, 1, 0);
	if (r < 0)
		printf("splice from a pty: %s\n", strerror(errno));
	kres_src_close(&s);
	close(k[0]);
	close(k[1]);
	return r == 1;
}

/*
 * Both pipes hold exactly N bytes of stream seed from their sources, put
 * there in pieces of odd lengths (counts compared where deterministic).
 */
static void setup(struct side *x, enum kres_src_kind kind, unsigned int seed)
{
	static const size_t lens[] = { 1, 4095, 4097, 65536, 100, 30000 };
	long long kc[64], pc[64];
	int kn, pn;
	bool eof = kind != KS_PTY;	/* a pty's master reads EIO, not 0, after the slave goes */

	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->det = kres_src_det(kind);
	x->seed = seed;
	ASSERT_EQ(kres_src_open(&x->ks, kind), 0);
	ASSERT_EQ(kres_src_open(&x->ps, kind), 0);
	t_kpipe2(x->k, 0);
	t_pipe2(x->p, 0);
	grow(x->k[1], x->p[1]);
	x->pin = pp_fdopen(x->ps.rfd);
	ASSERT_TRUE(x->pin != NULL);
	/*
	 * The same large writes each side: a socket's skbs become the pipe's
	 * buffers (in Linux, and in a pagepipe's private kernel pipe), and a
	 * tee or a splice into a pipe stops when the slots run out, so after
	 * a number of bytes that depends on those buffers, and on how the
	 * feeder's writes and our splices happened to interleave.  Large skbs
	 * keep every buffer count far below the 256 slots: the counts are then
	 * the bytes there, the same each run.  (1000-byte writes fill the
	 * slots: tee counts of 193000..200000, either side, run to run.)
	 */
	kres_src_feed(&x->ks, N, 0, seed, eof, 65536);
	kres_src_feed(&x->ps, N, 0, seed, eof, 65536);
	if (x->det) {
		/* The source holds all of it before the first splice. */
		kres_src_join(&x->ks);
		kres_src_join(&x->ps);
	}
	kn = kres_fill(x->ks.rfd, x->k[1], NULL, NULL, N, lens, 6, kc, 64);
	pn = kres_fill(-1, -1, x->pin, x->p[1], N, lens, 6, pc, 64);
	if (x->det) {
		ASSERT_EQ(kn, pn);
		for (int i = 0; i < kn && i < 64; i++)
			ASSERT_EQ(kc[i], pc[i]);
	}
	kres_src_join(&x->ks);
	kres_src_join(&x->ps);
	ASSERT_EQ(t_kfionread(x->k[0]), N);
	same_fionread(x);
	ASSERT_SAME_FIONREAD(x->k[1], x->p[1]);
	if (eof) {
		/* The sources are at EOF now, for both: splice says 0. */
		ASSERT_SAME(splice(x->ks.rfd, NULL, x->k[1], NULL, 10, 0),
			    pp_splice(x->pin, NULL, x->p[1], NULL, 10, 0));
	}
	x->kb = malloc(2 * N + 4096);
	x->pb = malloc(2 * N + 4096);
	ASSERT_TRUE(x->kb && x->pb);
}

/* Both got the same n bytes, and they are stream positions [pos, pos + n). */
static void check_got(struct side *x, size_t n, unsigned long long pos)
{
	ASSERT_MEM_EQ(x->kb, x->pb, n);
	ASSERT_EQ(t_check(x->pb, n, pos, x->seed), 0);
}

/* Both pipes empty: closing the writers gives EOF to both readers. */
static void finish(struct side *x)
{
	unsigned char c;

	same_fionread(x);
	ASSERT_EQ(t_kfionread(x->k[0]), 0);
	close(x->k[1]);
	pp_close(x->p[1]);
	x->k[1] = -1;
	x->p[1] = NULL;
	ASSERT_SAME(read(x->k[0], &c, 1), pp_read(x->p[0], &c, 1));
	close(x->k[0]);
	pp_close(x->p[0]);
	pp_close(x->pin);
	kres_src_close(&x->ks);
	kres_src_close(&x->ps);
	free(x->kb);
	free(x->pb);
}

/* ---------------------------------------------------------------------- */

static void c_read(struct side *x)
{
	size_t done = 0;

	for (unsigned int i = 0; done < N; i++) {
		size_t n = odd[i % NODD];
		struct t_res k = T_CALL(read(x->k[0], x->kb + done, n));
		struct t_res p = T_CALL(pp_read(x->p[0], x->pb + done, n));

		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__, "read(%zu) at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  n, done, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret > 0);
		done += (size_t)k.ret;
		same_fionread(x);
	}
	check_got(x, N, 0);
}

static void c_readv(struct side *x)
{
	/* An empty segment in the middle changes nothing. */
	static const size_t seg[] = { 1, 100, 0, 4095, 4097, 65536 };
	size_t done = 0;

	while (done < N) {
		struct iovec ki[6], pi[6];
		size_t at = done;

		for (unsigned int i = 0; i < 6; i++) {
			ki[i] = (struct iovec){ x->kb + at, seg[i] };
			pi[i] = (struct iovec){ x->pb + at, seg[i] };
			at += seg[i];
		}
		struct t_res k = T_CALL(readv(x->k[0], ki, 6));
		struct t_res p = T_CALL(pp_readv(x->p[0], pi, 6));

		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__, "readv at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  done, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret > 0);
		done += (size_t)k.ret;
		same_fionread(x);
	}
	check_got(x, N, 0);
}

static void c_file(struct side *x)
{
	char kpath[64], ppath[64];
	int kf = t_tmpfile(NULL, 0, 0, kpath), pf = t_tmpfile(NULL, 0, 0, ppath);
	struct pp_file *ppf = pp_fdopen(pf);
	size_t done = 0;
	off_t ko = 7, po = 7;

	unlink(kpath);
	unlink(ppath);
	ASSERT_TRUE(ppf != NULL);
	for (unsigned int i = 0; done < N; i++) {
		size_t n = odd[i % NODD];
		struct t_res k, p;

		/* The file's own position, and an explicit offset, in turn. */
		if (i & 1) {
			k = T_CALL(splice(x->k[0], NULL, kf, &ko, n, 0));
			p = T_CALL(pp_splice(x->p[0], NULL, ppf, &po, n, 0));
			ASSERT_EQ(ko, po);
		} else {
			k = T_CALL(splice(x->k[0], NULL, kf, NULL, n, 0));
			p = T_CALL(pp_splice(x->p[0], NULL, ppf, NULL, n, 0));
			ASSERT_EQ(lseek(kf, 0, SEEK_CUR), lseek(pf, 0, SEEK_CUR));
		}
		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__, "splice to file (%zu) at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  n, done, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret > 0);
		done += (size_t)k.ret;
		same_fionread(x);
	}
	{
		struct stat ks, ps;

		ASSERT_EQ(fstat(kf, &ks), 0);
		ASSERT_EQ(fstat(pf, &ps), 0);
		ASSERT_EQ(ks.st_size, ps.st_size);
		ASSERT_EQ(pread(kf, x->kb, (size_t)ks.st_size, 0), ks.st_size);
		ASSERT_EQ(pread(pf, x->pb, (size_t)ps.st_size, 0), ps.st_size);
		ASSERT_MEM_EQ(x->kb, x->pb, (size_t)ks.st_size);
	}
	pp_close(ppf);
	close(kf);
	close(pf);
}

struct sink {
	int fd;
	unsigned char *buf;
	size_t len;
	size_t got;
};

static void *sink_reader(void *arg)
{
	struct sink *s = arg;

	while (s->got < s->len) {
		ssize_t r = read(s->fd, s->buf + s->got, s->len - s->got);

		if (r <= 0)
			break;
		s->got += (size_t)r;
	}
	return NULL;
}

/* To TCP: how much one splice sends is the socket's business; the stream is not. */
static void c_tcp(struct side *x)
{
	int kt[2], pt[2];
	struct pp_file *pts;
	struct sink ksk, psk;
	pthread_t kth, pth;
	size_t kd = 0, pd = 0;
	unsigned char c;

	ASSERT_EQ(t_tcp_pair(kt), 0);
	ASSERT_EQ(t_tcp_pair(pt), 0);
	pts = pp_fdopen(pt[1]);
	ASSERT_TRUE(pts != NULL);
	ksk = (struct sink){ kt[0], x->kb, N, 0 };
	psk = (struct sink){ pt[0], x->pb, N, 0 };
	ASSERT_EQ(pthread_create(&kth, NULL, sink_reader, &ksk), 0);
	ASSERT_EQ(pthread_create(&pth, NULL, sink_reader, &psk), 0);
	for (unsigned int i = 0; kd < N || pd < N; i++) {
		size_t n = odd[i % NODD];
		ssize_t r;

		if (kd < N) {
			r = splice(x->k[0], NULL, kt[1], NULL, n, i & 1 ? SPLICE_F_MORE : 0);
			ASSERT_TRUE(r > 0 && (size_t)r <= n);
			kd += (size_t)r;
		}
		if (pd < N) {
			r = pp_splice(x->p[0], NULL, pts, NULL, n, i & 1 ? SPLICE_F_MORE : 0);
			if (r <= 0)
				t_fail_at(__FILE__, __LINE__, "pp_splice to TCP (%zu) at %zu: %zd (%s)",
					  n, pd, r, r < 0 ? strerror(errno) : "0");
			ASSERT_LE(r, (ssize_t)n);
			pd += (size_t)r;
		}
	}
	t_join(kth, NULL, 20);
	t_join(pth, NULL, 20);
	ASSERT_EQ(ksk.got, N);
	ASSERT_EQ(psk.got, N);
	check_got(x, N, 0);
	/* Nothing more arrives: no byte duplicated. */
	shutdown(kt[1], SHUT_WR);
	shutdown(pt[1], SHUT_WR);
	ASSERT_EQ(read(kt[0], &c, 1), 0);
	ASSERT_EQ(read(pt[0], &c, 1), 0);
	pp_close(pts);
	close(kt[0]); close(kt[1]); close(pt[0]); close(pt[1]);
}

static void drain_kpipe(int fd, unsigned char *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = read(fd, buf + done, n - done);

		ASSERT_TRUE(r > 0);
		done += (size_t)r;
	}
	ASSERT_EQ(t_kfionread(fd), 0);
}

static void c_kpipe(struct side *x)
{
	static const size_t lens[] = { 1, 4097, 65536, 100, 4095, BIG };
	int ko[2], po[2];
	struct pp_file *pko;
	size_t kd = 0, pd = 0;

	t_kpipe2(ko, 0);
	t_kpipe2(po, 0);
	ASSERT_EQ(fcntl(ko[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	ASSERT_EQ(fcntl(po[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	pko = pp_fdopen(po[1]);
	ASSERT_TRUE(pko != NULL);
	for (unsigned int i = 0; kd < N || pd < N; i++) {
		size_t n = lens[i % 6];
		struct t_res k = { 0, 0 }, p = { 0, 0 };

		if (kd < N)
			k = T_CALL(splice(x->k[0], NULL, ko[1], NULL, n, 0));
		if (pd < N)
			p = T_CALL(pp_splice(x->p[0], NULL, pko, NULL, n, 0));
		if (x->det && (k.ret != p.ret || k.err != p.err))
			t_fail_at(__FILE__, __LINE__, "splice to kernel pipe (%zu) at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  n, kd, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret >= 0 && p.ret >= 0);
		ASSERT_TRUE(kd == N || k.ret > 0);
		ASSERT_TRUE(pd == N || p.ret > 0);
		kd += (size_t)k.ret;
		pd += (size_t)p.ret;
		if (x->det)
			same_fionread(x);
	}
	ASSERT_EQ(t_kfionread(ko[0]), N);
	ASSERT_EQ(t_kfionread(po[0]), N);
	drain_kpipe(ko[0], x->kb, N);
	drain_kpipe(po[0], x->pb, N);
	check_got(x, N, 0);
	pp_close(pko);
	close(ko[0]); close(ko[1]); close(po[0]); close(po[1]);
}

/* Read a pipe pair to the end of what it holds, in chunks; compared step by step. */
static size_t drain_pair(int kfd, struct pp_file *pf, unsigned char *kb, unsigned char *pb,
			 size_t chunk)
{
	size_t done = 0;

	for (;;) {
		int n = t_kfionread(kfd);

		ASSERT_EQ(t_fionread(pf), n);
		if (!n)
			return done;
		struct t_res k = T_CALL(read(kfd, kb + done, chunk));
		struct t_res p = T_CALL(pp_read(pf, pb + done, chunk));

		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__, "read(%zu) at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  chunk, done, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret > 0);
		ASSERT_MEM_EQ(kb + done, pb + done, (size_t)k.ret);
		done += (size_t)k.ret;
	}
}

/* To another pagepipe (kernel: another kernel pipe), whole and partial lengths. */
static void c_pagepipe(struct side *x)
{
	static const size_t lens[] = { 4097, 1, 65536, 100, 4095, 12288, BIG };
	struct t_pair y;
	size_t kd = 0, pd = 0;

	t_pair_open(&y, 0);
	grow(y.k[1], y.p[1]);
	for (unsigned int i = 0; kd < N || pd < N; i++) {
		size_t n = lens[i % 7];
		struct t_res k = { 0, 0 }, p = { 0, 0 };

		if (kd < N)
			k = T_CALL(splice(x->k[0], NULL, y.k[1], NULL, n, 0));
		if (pd < N)
			p = T_CALL(pp_splice(x->p[0], NULL, y.p[1], NULL, n, 0));
		if (x->det && (k.ret != p.ret || k.err != p.err))
			t_fail_at(__FILE__, __LINE__, "splice to pipe (%zu) at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  n, kd, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret >= 0 && p.ret >= 0);
		ASSERT_TRUE(kd == N || k.ret > 0);
		ASSERT_TRUE(pd == N || p.ret > 0);
		kd += (size_t)k.ret;
		pd += (size_t)p.ret;
		if (x->det) {
			same_fionread(x);
			t_pair_same_fionread(&y);
		}
		/* Half way, read some of the second pipe: the rest must follow it. */
		if (i == 3) {
			ASSERT_SAME_READ(y.k[0], y.p[0], 5000);
		}
	}
	t_pair_same_fionread(&y);
	ASSERT_EQ(t_kfionread(y.k[0]), N - 5000);
	ASSERT_EQ(drain_pair(y.k[0], y.p[0], x->kb, x->pb, 7777), N - 5000);
	ASSERT_EQ(t_check(x->pb, N - 5000, 5000, x->seed), 0);
	t_pair_close(&y);
}

/* tee to another pipe, then both read: each holds the whole stream. */
static void c_tee(struct side *x)
{
	struct t_pair y;
	size_t got;

	t_pair_open(&y, 0);
	grow(y.k[1], y.p[1]);
	ASSERT_SAME(tee(x->k[0], y.k[1], 1000, 0), pp_tee(x->p[0], y.p[1], 1000, 0));
	ASSERT_SAME(tee(x->k[0], y.k[1], 4097, 0), pp_tee(x->p[0], y.p[1], 4097, 0));
	ASSERT_SAME(tee(x->k[0], y.k[1], BIG, SPLICE_F_NONBLOCK), pp_tee(x->p[0], y.p[1], BIG, SPLICE_F_NONBLOCK));
	t_pair_same_fionread(&y);
	same_fionread(x);
	/* The source pipe still holds everything. */
	ASSERT_EQ(t_kfionread(x->k[0]), N);
	ASSERT_EQ(t_kfionread(y.k[0]), 1000 + 4097 + N);
	got = drain_pair(y.k[0], y.p[0], x->kb, x->pb, 65536);
	ASSERT_EQ(got, 1000 + 4097 + N);
	ASSERT_EQ(t_check(x->pb, 1000, 0, x->seed), 0);
	ASSERT_EQ(t_check(x->pb + 1000, 4097, 0, x->seed), 0);
	ASSERT_EQ(t_check(x->pb + 5097, N, 0, x->seed), 0);
	/* The original, read after its copy was: the same bytes. */
	got = drain_pair(x->k[0], x->p[0], x->kb, x->pb, 4095);
	ASSERT_EQ(got, N);
	check_got(x, N, 0);
	t_pair_close(&y);
}

/* vmsplice from the read end: a copy into user memory, like readv. */
static void c_vmsplice(struct side *x)
{
	size_t done = 0;

	while (done < N) {
		struct iovec ki[NODD], pi[NODD];
		size_t at = done;

		for (unsigned int i = 0; i < NODD; i++) {
			ki[i] = (struct iovec){ x->kb + at, odd[i] };
			pi[i] = (struct iovec){ x->pb + at, odd[i] };
			at += odd[i];
		}
		struct t_res k = T_CALL(vmsplice(x->k[0], ki, NODD, 0));
		struct t_res p = T_CALL(pp_vmsplice(x->p[0], pi, NODD, 0));

		if (k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__, "vmsplice to user at %zu: kernel %lld (%s), pagepipe %lld (%s)",
				  done, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_TRUE(k.ret > 0);
		done += (size_t)k.ret;
		same_fionread(x);
	}
	check_got(x, N, 0);
}

/*
 * A lending read has no kernel twin: what it lends must be the bytes a
 * read(2) of the kernel pipe returns next, and what pp_read_done consumes
 * must be exactly what the kernel side then reads.
 */
static void c_lend(struct side *x)
{
	size_t done = 0;

	for (unsigned int i = 0; done < N; i++) {
		struct iovec iov[64];
		size_t want = odd[i % NODD], lent = 0, consumed;
		ssize_t r = pp_read_lend(x->p[0], iov, 64, want);
		int nio = 0;

		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "pp_read_lend(%zu) at %zu: %zd (%s)", want, done, r,
				  r < 0 ? strerror(errno) : "EOF");
		ASSERT_LE(r, (ssize_t)want);
		for (; lent < (size_t)r; nio++) {
			ASSERT_TRUE(nio < 64);
			memcpy(x->pb + done + lent, iov[nio].iov_base, iov[nio].iov_len);
			lent += iov[nio].iov_len;
		}
		ASSERT_EQ(lent, r);
		if (t_check(x->pb + done, lent, done, x->seed))
			t_fail_at(__FILE__, __LINE__, "lent bytes at %zu are not the stream's", done);
		/* Consume all, half, or nothing (then the same bytes come again). */
		consumed = i % 3 == 0 ? lent : i % 3 == 1 ? (lent + 1) / 2 : 0;
		ASSERT_EQ(pp_read_done(x->p[0], consumed), 0);
		if (consumed) {
			ASSERT_EQ(read(x->k[0], x->kb + done, consumed), (ssize_t)consumed);
			ASSERT_MEM_EQ(x->kb + done, x->pb + done, consumed);
		}
		done += consumed;
		same_fionread(x);
	}
	check_got(x, N, 0);
}

struct consumer {
	const char *name;
	void (*fn)(struct side *x);
};

static const struct consumer consumers[] = {
	{ "read", c_read },
	{ "readv", c_readv },
	{ "file", c_file },
	{ "tcp", c_tcp },
	{ "kpipe", c_kpipe },
	{ "pagepipe", c_pagepipe },
	{ "tee", c_tee },
	{ "vmsplice", c_vmsplice },
	{ "lend", c_lend },
};

static int run_source(enum kres_src_kind kind)
{
	const char *only = getenv("KRES_CONSUMER");
	char what[96];

	if (kind == KS_PTY && !pty_splices())
		return t_skip("no pty, or the kernel cannot splice from one");
	for (unsigned int i = 0; i < sizeof(consumers) / sizeof(consumers[0]); i++) {
		struct kres_leak l;
		struct side x;

		if (only && *only && strcmp(only, consumers[i].name))
			continue;
		/* Memcheck does not know that vmsplice(2) writes the iovecs: all "uninitialised". */
		if (consumers[i].fn == c_vmsplice && t_under_valgrind()) {
			printf("    %s -> vmsplice: not under valgrind\n", kres_src_name[kind]);
			continue;
		}
		snprintf(what, sizeof(what), "%s -> %s", kres_src_name[kind], consumers[i].name);
		t_watchdog(15, what);
		l = kres_leak_begin();
		setup(&x, kind, 100 + i);
		consumers[i].fn(&x);
		finish(&x);
		kres_leak_end(l, what);
	}
	t_watchdog(0, NULL);
	return T_EXIT_PASS;
}

static int test_tcp(void)   { return run_source(KS_TCP); }
static int test_unix(void)  { return run_source(KS_UNIX); }
static int test_kpipe(void) { return run_source(KS_KPIPE); }
static int test_fifo(void)  { return run_source(KS_FIFO); }
static int test_pty(void)   { return run_source(KS_PTY); }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_tcp),
		T_SUBTEST(test_unix),
		T_SUBTEST(test_kpipe),
		T_SUBTEST(test_fifo),
		T_SUBTEST(test_pty),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
