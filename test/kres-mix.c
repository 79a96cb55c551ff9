// SPDX-License-Identifier: MIT
/*
 * Description: one pipe holding every kind of buffer at once, in ring
 * order (issue 12 §1: "ring order and kernel-pipe order must agree
 * whatever mix of buffer types the ring holds"): bytes from pp_write, a
 * regular file's pages, a socket splice (TCP or AF_UNIX), another write, a
 * kernel-pipe splice, vmspliced memory; then read out in chunks of odd
 * sizes, by readv, vmsplice to memory, a lending read, and spliced to a
 * file, a kernel pipe, a socket and another pagepipe, and tee'd.  Every
 * step is done on a kernel pipe too: counts and errno compared, and every
 * byte that comes out, on both sides, must be the next byte of the model
 * of what was queued (nothing lost, duplicated or reordered).  Then the
 * same with random steps and lengths from a seeded PRNG, many rounds
 * (KRES_MIX_SEED and KRES_MIX_ROUNDS override; a failure prints both).
 */
#include <sys/uio.h>

#include "kres.h"

#define FLEN		(1u << 20)	/* the source file */
#define ARENA		(1u << 20)	/* memory that writes and vmsplice take from */
#define MAXQ		(400u << 10)	/* most bytes queued at once */
#define MAXMODEL	(64u << 20)

static unsigned char *arena;		/* never written after start: vmsplice refers to it */

struct mix {
	int k[2];
	struct pp_file *p[2];
	unsigned char *model;		/* every byte queued, in order */
	size_t mlen, cur;		/* queued, consumed */
	int file;			/* FLEN pattern bytes of seed 7 */
	struct pp_file *pfile;
	int ks[2], ps[2];		/* source sockets: [0] read, [1] written */
	struct pp_file *psock;
	int ksrc[2], psrc[2];		/* source kernel pipes */
	struct pp_file *ppsrc;
	int kout, pout;			/* sink files */
	struct pp_file *ppout;
	off_t outoff;
	int kko[2], pko[2];		/* sink kernel pipes */
	struct pp_file *ppko;
	int kso[2], pso[2];		/* sink sockets: [1] written, [0] read */
	struct pp_file *ppso;
	struct t_pair y;		/* a second pipe, for splice and tee */
	unsigned char *kb, *pb;
	unsigned long long step;
	bool tcp_in, tcp_out;
};

static unsigned long long rng;

static unsigned int rnd(unsigned int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? (unsigned int)(rng % n) : 0;
}

/* A length: often a boundary, sometimes anything up to max. */
static size_t rlen(size_t max)
{
	static const size_t special[] = { 1, 2, 100, 4095, 4096, 4097, 8191, 12288, 65536 };
	size_t n;

	if (rnd(2))
		n = special[rnd(sizeof(special) / sizeof(special[0]))];
	else
		n = 1 + rnd((unsigned int)max);
	return n > max ? max : n;
}

static void sockpair(bool tcp, int s[2])
{
	int sz = 1 << 20;

	if (tcp) {
		int t[2];

		ASSERT_EQ(t_tcp_pair(t), 0);
		s[0] = t[0];
		s[1] = t[1];
	} else {
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
	}
	setsockopt(s[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(s[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

static void mix_open(struct mix *m, bool tcp_in, bool tcp_out)
{
	char path[64];

	memset(m, 0, sizeof(*m));
	m->tcp_in = tcp_in;
	m->tcp_out = tcp_out;
	m->model = malloc(MAXMODEL);
	m->kb = malloc(MAXQ + 65536);
	m->pb = malloc(MAXQ + 65536);
	ASSERT_TRUE(m->model && m->kb && m->pb);
	t_kpipe2(m->k, O_NONBLOCK);
	t_pipe2(m->p, O_NONBLOCK);
	ASSERT_SAME(fcntl(m->k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), pp_fcntl(m->p[1], F_SETPIPE_SZ, KRES_PIPE_SZ));
	m->file = t_tmpfile(NULL, FLEN, 7, path);
	unlink(path);
	m->pfile = pp_fdopen(m->file);
	sockpair(tcp_in, m->ks);
	sockpair(tcp_in, m->ps);
	m->psock = pp_fdopen(m->ps[0]);
	t_kpipe2(m->ksrc, 0);
	t_kpipe2(m->psrc, 0);
	ASSERT_EQ(fcntl(m->ksrc[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	ASSERT_EQ(fcntl(m->psrc[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	m->ppsrc = pp_fdopen(m->psrc[0]);
	m->kout = t_tmpfile(NULL, 0, 0, path);
	unlink(path);
	m->pout = t_tmpfile(NULL, 0, 0, path);
	unlink(path);
	m->ppout = pp_fdopen(m->pout);
	t_kpipe2(m->kko, 0);
	t_kpipe2(m->pko, 0);
	ASSERT_EQ(fcntl(m->kko[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	ASSERT_EQ(fcntl(m->pko[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	m->ppko = pp_fdopen(m->pko[1]);
	sockpair(tcp_out, m->kso);
	sockpair(tcp_out, m->pso);
	m->ppso = pp_fdopen(m->pso[1]);
	t_pair_open(&m->y, O_NONBLOCK);
	ASSERT_SAME(fcntl(m->y.k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), pp_fcntl(m->y.p[1], F_SETPIPE_SZ, KRES_PIPE_SZ));
	ASSERT_TRUE(m->pfile && m->psock && m->ppsrc && m->ppout && m->ppko && m->ppso);
}

static void mix_close(struct mix *m)
{
	pp_close(m->pfile); pp_close(m->psock); pp_close(m->ppsrc);
	pp_close(m->ppout); pp_close(m->ppko); pp_close(m->ppso);
	close(m->file);
	close(m->ks[0]); close(m->ks[1]); close(m->ps[0]); close(m->ps[1]);
	close(m->ksrc[0]); close(m->ksrc[1]); close(m->psrc[0]); close(m->psrc[1]);
	close(m->kout); close(m->pout);
	close(m->kko[0]); close(m->kko[1]); close(m->pko[0]); close(m->pko[1]);
	close(m->kso[0]); close(m->kso[1]); close(m->pso[0]); close(m->pso[1]);
	t_pair_close(&m->y);
	close(m->k[0]); close(m->k[1]);
	pp_close(m->p[0]); pp_close(m->p[1]);
	free(m->model); free(m->kb); free(m->pb);
}

#define SAME_STEP(m, what, kcall, pcall) ({				\
	struct t_res _k = T_CALL(kcall), _p = T_CALL(pcall);		\
	if (_k.ret != _p.ret || _k.err != _p.err)			\
		t_fail_at(__FILE__, __LINE__,				\
			  "seed %llu step %llu %s: kernel %lld (%s), pagepipe %lld (%s)", \
			  rng_seed, (m)->step, (what), _k.ret,		\
			  _k.err ? strerror(_k.err) : "ok", _p.ret,	\
			  _p.err ? strerror(_p.err) : "ok");		\
	_k; })

static unsigned long long rng_seed;

static void queued(struct mix *m, const void *src, size_t n)
{
	ASSERT_TRUE(m->mlen + n <= MAXMODEL);
	memcpy(m->model + m->mlen, src, n);
	m->mlen += n;
}

/* Both sides got n bytes in kb/pb: they are the next n of the model. */
static void consumed(struct mix *m, const char *what, size_t n)
{
	ASSERT_LE(m->cur + n, m->mlen);
	for (size_t i = 0; i < n; i++) {
		if (m->kb[i] != m->model[m->cur + i] || m->pb[i] != m->model[m->cur + i])
			t_fail_at(__FILE__, __LINE__,
				  "seed %llu step %llu %s: byte %zu of the stream: kernel 0x%02x, pagepipe 0x%02x, queued 0x%02x",
				  rng_seed, m->step, what, m->cur + i, m->kb[i], m->pb[i], m->model[m->cur + i]);
	}
	m->cur += n;
}

static size_t avail(struct mix *m)
{
	return m->mlen - m->cur;
}

/*
 * An empty pipe: vmsplice and tee wait whatever the file's O_NONBLOCK
 * says, so those calls get SPLICE_F_NONBLOCK, and the others now and then.
 */
static unsigned int nbflag(struct mix *m)
{
	return !avail(m) || rnd(2) ? SPLICE_F_NONBLOCK : 0;
}

/* ---------------------------------------------------------------------- */
/* Producers. */

static void p_write(struct mix *m, size_t n)
{
	const unsigned char *src = arena + rnd(ARENA - (unsigned int)n);
	struct t_res r = SAME_STEP(m, "write", write(m->k[1], src, n), pp_write(m->p[1], src, n));

	ASSERT_EQ(r.ret, n);
	queued(m, src, n);
}

static void p_file(struct mix *m, size_t n)
{
	off_t at = rnd(FLEN - (unsigned int)n), ko = at, po = at;
	struct t_res r = SAME_STEP(m, "file splice", splice(m->file, &ko, m->k[1], NULL, n, 0),
				   pp_splice(m->pfile, &po, m->p[1], NULL, n, 0));
	unsigned char *tmp = malloc(n);

	ASSERT_EQ(r.ret, n);
	ASSERT_EQ(ko, po);
	ASSERT_TRUE(tmp != NULL);
	t_fill(tmp, n, (unsigned long long)at, 7);
	queued(m, tmp, n);
	free(tmp);
}

/* How much one socket splice takes is not the kernel's to promise: loop to n. */
static void sock_in(int wfd, int rfd, struct pp_file *pin, int kout, struct pp_file *pout,
		    const unsigned char *src, size_t n)
{
	size_t got = 0;

	for (size_t w = 0; w < n; ) {
		ssize_t r = write(wfd, src + w, n - w);

		ASSERT_TRUE(r > 0);
		w += (size_t)r;
	}
	while (got < n) {
		ssize_t r = pin ? pp_splice(pin, NULL, pout, NULL, n - got, 0)
				: splice(rfd, NULL, kout, NULL, n - got, 0);

		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "%s socket splice at %zu of %zu: %zd (%s)",
				  pin ? "pagepipe" : "kernel", got, n, r, r < 0 ? strerror(errno) : "EOF");
		got += (size_t)r;
	}
}

static void p_sock(struct mix *m, size_t n)
{
	const unsigned char *src = arena + rnd(ARENA - (unsigned int)n);

	sock_in(m->ks[1], m->ks[0], NULL, m->k[1], NULL, src, n);
	sock_in(m->ps[1], -1, m->psock, -1, m->p[1], src, n);
	queued(m, src, n);
}

static void p_kpipe(struct mix *m, size_t n)
{
	const unsigned char *src = arena + rnd(ARENA - (unsigned int)n);
	struct t_res r;

	ASSERT_EQ(write(m->ksrc[1], src, n), (ssize_t)n);
	ASSERT_EQ(write(m->psrc[1], src, n), (ssize_t)n);
	r = SAME_STEP(m, "kernel pipe splice", splice(m->ksrc[0], NULL, m->k[1], NULL, n, 0),
		      pp_splice(m->ppsrc, NULL, m->p[1], NULL, n, 0));
	ASSERT_EQ(r.ret, n);
	queued(m, src, n);
}

static void p_vmsplice(struct mix *m, size_t n)
{
	struct iovec iov[3];
	unsigned int nseg = 1 + rnd(3);
	size_t total = 0;
	struct t_res r;

	for (unsigned int i = 0; i < nseg; i++) {
		size_t l = i + 1 == nseg ? n - total : rnd((unsigned int)(n - total + 1));

		iov[i] = (struct iovec){ arena + rnd(ARENA - (unsigned int)n), l };
		total += l;
	}
	r = SAME_STEP(m, "vmsplice", vmsplice(m->k[1], iov, nseg, 0), pp_vmsplice(m->p[1], iov, nseg, 0));
	ASSERT_EQ(r.ret, n);
	for (unsigned int i = 0; i < nseg; i++)
		queued(m, iov[i].iov_base, iov[i].iov_len);
}

/* ---------------------------------------------------------------------- */
/* Consumers: each takes at most n bytes off the front, on both sides. */

static void c_read(struct mix *m, size_t n)
{
	struct t_res r = SAME_STEP(m, "read", read(m->k[0], m->kb, n), pp_read(m->p[0], m->pb, n));

	if (r.ret > 0)
		consumed(m, "read", (size_t)r.ret);
}

static void c_readv(struct mix *m, size_t n)
{
	size_t a = rnd((unsigned int)n + 1);
	struct iovec ki[3] = { { m->kb, a }, { m->kb + a, 0 }, { m->kb + a, n - a } };
	struct iovec pi[3] = { { m->pb, a }, { m->pb + a, 0 }, { m->pb + a, n - a } };
	struct t_res r = SAME_STEP(m, "readv", readv(m->k[0], ki, 3), pp_readv(m->p[0], pi, 3));

	if (r.ret > 0)
		consumed(m, "readv", (size_t)r.ret);
}

static void c_vmsplice(struct mix *m, size_t n)
{
	struct iovec ki = { m->kb, n }, pi = { m->pb, n };
	unsigned int fl = nbflag(m);
	struct t_res r = SAME_STEP(m, "vmsplice to memory", vmsplice(m->k[0], &ki, 1, fl),
				   pp_vmsplice(m->p[0], &pi, 1, fl));

	if (r.ret > 0)
		consumed(m, "vmsplice to memory", (size_t)r.ret);
}

static void c_file(struct mix *m, size_t n)
{
	off_t ko = m->outoff, po = m->outoff;
	struct t_res r = SAME_STEP(m, "splice to file", splice(m->k[0], NULL, m->kout, &ko, n, 0),
				   pp_splice(m->p[0], NULL, m->ppout, &po, n, 0));

	ASSERT_EQ(ko, po);
	if (r.ret > 0) {
		ASSERT_EQ(pread(m->kout, m->kb, (size_t)r.ret, m->outoff), r.ret);
		ASSERT_EQ(pread(m->pout, m->pb, (size_t)r.ret, m->outoff), r.ret);
		m->outoff = ko;
		consumed(m, "splice to file", (size_t)r.ret);
	}
}

static void drain_fd(int fd, unsigned char *buf, size_t n)
{
	for (size_t got = 0; got < n; ) {
		ssize_t r = read(fd, buf + got, n - got);

		ASSERT_TRUE(r > 0);
		got += (size_t)r;
	}
}

static void c_kpipe(struct mix *m, size_t n)
{
	struct t_res r = SAME_STEP(m, "splice to kernel pipe", splice(m->k[0], NULL, m->kko[1], NULL, n, 0),
				   pp_splice(m->p[0], NULL, m->ppko, NULL, n, 0));

	if (r.ret > 0) {
		drain_fd(m->kko[0], m->kb, (size_t)r.ret);
		drain_fd(m->pko[0], m->pb, (size_t)r.ret);
		ASSERT_EQ(t_kfionread(m->kko[0]), 0);
		ASSERT_EQ(t_kfionread(m->pko[0]), 0);
		consumed(m, "splice to kernel pipe", (size_t)r.ret);
	}
}

/*
 * To a socket, at most 64 KiB at a time into a 1 MiB send buffer that is
 * drained after each step: a blocking splice sends all it is asked.
 */
static void c_sock(struct mix *m, size_t n)
{
	/* MSG_MORE may hold TCP's last bytes back as long as it likes: Unix only. */
	unsigned int fl = !m->tcp_out && rnd(2) ? SPLICE_F_MORE : 0;
	struct t_res r;

	if (n > 65536)
		n = 65536;
	r = SAME_STEP(m, "splice to socket", splice(m->k[0], NULL, m->kso[1], NULL, n, fl),
		      pp_splice(m->p[0], NULL, m->ppso, NULL, n, fl));
	if (r.ret > 0) {
		drain_fd(m->kso[0], m->kb, (size_t)r.ret);
		drain_fd(m->pso[0], m->pb, (size_t)r.ret);
		consumed(m, "splice to socket", (size_t)r.ret);
	}
}

/* The second pipe is empty between steps; what went there is read back. */
static void c_pagepipe(struct mix *m, size_t n)
{
	struct t_res r = SAME_STEP(m, "splice to pipe", splice(m->k[0], NULL, m->y.k[1], NULL, n, 0),
				   pp_splice(m->p[0], NULL, m->y.p[1], NULL, n, 0));

	if (r.ret > 0) {
		struct t_res q = SAME_STEP(m, "read of the second pipe", read(m->y.k[0], m->kb, (size_t)r.ret + 1),
					   pp_read(m->y.p[0], m->pb, (size_t)r.ret + 1));

		ASSERT_EQ(q.ret, r.ret);
		consumed(m, "splice to pipe", (size_t)r.ret);
	}
}

/* tee: the copy is the next bytes; then the original is read as far. */
static void c_tee(struct mix *m, size_t n)
{
	unsigned int fl = nbflag(m);
	struct t_res r = SAME_STEP(m, "tee", tee(m->k[0], m->y.k[1], n, fl), pp_tee(m->p[0], m->y.p[1], n, fl));

	ASSERT_SAME_FIONREAD(m->k[0], m->p[0]);
	if (r.ret > 0) {
		struct t_res q = SAME_STEP(m, "read of the tee", read(m->y.k[0], m->kb, (size_t)r.ret + 1),
					   pp_read(m->y.p[0], m->pb, (size_t)r.ret + 1));
		size_t save = m->cur;

		ASSERT_EQ(q.ret, r.ret);
		consumed(m, "tee", (size_t)r.ret);
		m->cur = save;
		q = SAME_STEP(m, "read after tee", read(m->k[0], m->kb, (size_t)r.ret),
			      pp_read(m->p[0], m->pb, (size_t)r.ret));
		ASSERT_EQ(q.ret, r.ret);
		consumed(m, "read after tee", (size_t)r.ret);
	}
}

static void c_lend(struct mix *m, size_t n)
{
	struct iovec iov[64];
	ssize_t r;
	size_t lent = 0, take;

	if (!avail(m)) {
		/* Empty, non-blocking: the kernel's read says what a loan says. */
		SAME_STEP(m, "lend on empty", read(m->k[0], m->kb, n), pp_read_lend(m->p[0], iov, 64, n));
		return;
	}
	r = pp_read_lend(m->p[0], iov, 64, n);
	if (r <= 0)
		t_fail_at(__FILE__, __LINE__, "seed %llu step %llu: pp_read_lend(%zu) with %zu queued: %zd (%s)",
			  rng_seed, m->step, n, avail(m), r, r < 0 ? strerror(errno) : "EOF");
	ASSERT_LE(r, (ssize_t)n);
	for (int i = 0; lent < (size_t)r; i++) {
		ASSERT_TRUE(i < 64);
		memcpy(m->pb + lent, iov[i].iov_base, iov[i].iov_len);
		lent += iov[i].iov_len;
	}
	ASSERT_EQ(lent, r);
	take = rnd((unsigned int)lent + 1);
	ASSERT_EQ(pp_read_done(m->p[0], take), 0);
	if (take)
		ASSERT_EQ(read(m->k[0], m->kb, take), (ssize_t)take);
	/* The bytes lent beyond take are not consumed: check them, then rewind. */
	memcpy(m->kb + take, m->model + m->cur + take, lent - take);
	consumed(m, "lend", lent);
	m->cur -= lent - take;
}

typedef void (*step_fn)(struct mix *m, size_t n);

static const struct { const char *name; step_fn fn; } producers[] = {
	{ "write", p_write }, { "file", p_file }, { "socket", p_sock },
	{ "kpipe", p_kpipe }, { "vmsplice", p_vmsplice },
};

static const struct { const char *name; step_fn fn; } consumers[] = {
	{ "read", c_read }, { "readv", c_readv }, { "vmsplice", c_vmsplice },
	{ "file", c_file }, { "kpipe", c_kpipe }, { "socket", c_sock },
	{ "pagepipe", c_pagepipe }, { "tee", c_tee }, { "lend", c_lend },
};
#define NPROD	(sizeof(producers) / sizeof(producers[0]))
#define NCONS	(sizeof(consumers) / sizeof(consumers[0]))

/* Take everything out with consumer c in chunks of chunk; both sides empty after. */
static void drain_with(struct mix *m, step_fn c, size_t chunk)
{
	for (int guard = 0; avail(m); guard++) {
		ASSERT_TRUE(guard < 1000000);
		m->step++;
		c(m, chunk);
	}
	ASSERT_SAME_FIONREAD(m->k[0], m->p[0]);
	ASSERT_EQ(t_kfionread(m->k[0]), 0);
}

/* The order the issue names: write, file, socket, write, kernel pipe, vmsplice. */
static void queue_fixed(struct mix *m)
{
	m->step++; p_write(m, 1000);
	m->step++; p_file(m, 10000);
	m->step++; p_sock(m, 20000);
	m->step++; p_write(m, 3);
	m->step++; p_kpipe(m, 5000);
	m->step++; p_vmsplice(m, 9000);
	ASSERT_SAME_FIONREAD(m->k[0], m->p[0]);
	ASSERT_EQ(t_kfionread(m->k[0]), 1000 + 10000 + 20000 + 3 + 5000 + 9000);
}

static int fixed(bool tcp)
{
	static const size_t chunks[] = { 1, 100, 4095, 4097, 65536, 999 };
	struct kres_leak l = kres_leak_begin();
	struct mix m;

	rng = rng_seed = 1;
	mix_open(&m, tcp, tcp);
	for (unsigned int c = 0; c < NCONS; c++) {
		/* Memcheck does not know that vmsplice(2) writes the iovecs. */
		if (consumers[c].fn == c_vmsplice && t_under_valgrind())
			continue;
		for (unsigned int s = 0; s < sizeof(chunks) / sizeof(chunks[0]); s++) {
			queue_fixed(&m);
			drain_with(&m, consumers[c].fn, chunks[s]);
		}
	}
	mix_close(&m);
	kres_leak_end(l, tcp ? "fixed mix, tcp" : "fixed mix, unix");
	return T_EXIT_PASS;
}

static int test_fixed_unix(void) { return fixed(false); }
static int test_fixed_tcp(void)  { return fixed(true); }

static int test_random(void)
{
	const char *se = getenv("KRES_MIX_SEED"), *ro = getenv("KRES_MIX_ROUNDS");
	unsigned long long seed = se ? strtoull(se, NULL, 0) : 0x6b726573ull;
	unsigned int rounds = ro ? (unsigned int)atoi(ro) : 24;
	struct kres_leak l = kres_leak_begin();

	for (unsigned int round = 0; round < rounds; round++) {
		struct mix m;

		rng = rng_seed = seed + round;
		rnd(1);
		mix_open(&m, rnd(2), rnd(2));
		for (unsigned int op = 0; op < 200; op++) {
			m.step++;
			if (rnd(2) && avail(&m) < MAXQ - 65536) {
				unsigned int p = rnd(NPROD);

				producers[p].fn(&m, rlen(65536));
			} else {
				unsigned int c = rnd(NCONS);

				if (consumers[c].fn == c_vmsplice && t_under_valgrind())
					c = 0;	/* read instead: see fixed() */

				consumers[c].fn(&m, rlen(avail(&m) + 1 < 200000 ? avail(&m) + 1 : 200000));
			}
			if (!(op % 16))
				ASSERT_SAME_FIONREAD(m.k[0], m.p[0]);
		}
		{
			step_fn fn = consumers[rnd(NCONS)].fn;

			if (fn == c_vmsplice && t_under_valgrind())
				fn = c_read;
			drain_with(&m, fn, 999 + rlen(100000));
		}
		mix_close(&m);
	}
	kres_leak_end(l, "random mixes");
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_fixed_unix),
		T_SUBTEST(test_fixed_tcp),
		T_SUBTEST(test_random),
	};

	signal(SIGPIPE, SIG_IGN);
	arena = malloc(ARENA);
	ASSERT_TRUE(arena != NULL);
	t_fill(arena, ARENA, 0, 3);
	return T_RUN_SUBTESTS(tests);
}
