// SPDX-License-Identifier: MIT
/*
 * Description: fault injection on every system call of the socket and
 * kernel-pipe paths (issue 12 §3: "fault injection on each new system
 * call").  For each path (a source spliced into a pagepipe; a pagepipe
 * holding socket- and kernel-pipe-sourced bytes taken out by each
 * consumer) and each fault site of fault.c (all of them, PP_FAULT_NR: a
 * site added later is covered without touching this file), each errno,
 * the fault fires at the 1st, 2nd, 3rd or 4th check of that site during
 * one call.  That call must fail with the injected errno (EINTR: never;
 * it is retried) or return a count, never 0 while bytes are there; then,
 * the fault disarmed, the transfer is finished and the whole stream that
 * arrived must be exactly the one sent: nothing lost, duplicated or
 * reordered, nothing left in the source.  Descriptors are counted.
 *
 * Each path also says whether some fault site must fire on it (must_hit):
 * a path that makes a system call has a fault point on it.  With the
 * bytes kernel-resident every consumer does: read(2), tee(2) or splice(2)
 * on the private pipe.
 * KRES_FAULT_VERBOSE=1 prints which sites fire on which path;
 * KRES_FAULT_PATH="splice to tcp" runs one consumer path.
 */
#include <sys/uio.h>

#include "kres.h"
#include "internal.h"

#define M	(96u << 10)

static const int errs[] = { EIO, EAGAIN, ENOMEM, ECONNRESET, EINTR };
#define NERRS	(sizeof(errs) / sizeof(errs[0]))
#define NSKIPS	4

static const char *const site_names[] = {
	[PP_FAULT_ALLOC] = "ALLOC", [PP_FAULT_READ] = "READ",
	[PP_FAULT_WRITE] = "WRITE", [PP_FAULT_SPLICE] = "SPLICE",
};

static const char *site_name(int s)
{
	if (s < (int)(sizeof(site_names) / sizeof(site_names[0])) && site_names[s])
		return site_names[s];
	return "(new site)";
}

static bool verbose;

/* An allocation fails with ENOMEM and nothing else. */
static bool site_err_ok(int site, int err)
{
	return site != PP_FAULT_ALLOC || err == ENOMEM;
}

/* ---------------------------------------------------------------------- */
/* Sources into a pagepipe. */

struct src_path {
	const char *name;
	enum kres_src_kind kind;
	bool must_hit;
};

static const struct src_path src_paths[] = {
	{ "tcp -> pagepipe", KS_TCP, true },
	{ "unix -> pagepipe", KS_UNIX, true },
	{ "kpipe -> pagepipe", KS_KPIPE, true },
	{ "fifo -> pagepipe", KS_FIFO, true },
};

/* A source holding all M bytes before the call. */
static void src_ready(struct kres_src *s, enum kres_src_kind k)
{
	ASSERT_EQ(kres_src_open(s, k), 0);
	if (k == KS_TCP || k == KS_UNIX) {
		int sz = 1 << 20;

		setsockopt(s->wfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(s->rfd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	kres_src_feed(s, M, 0, 21, false, 8192);
	kres_src_join(s);
	for (int avail = 0, i = 0; avail < (int)M; i++) {
		ASSERT_TRUE(i < 10000);
		ASSERT_EQ(ioctl(s->rfd, FIONREAD, &avail), 0);
		if (avail < (int)M)
			t_sleep_ms(1);	/* loopback TCP still delivering: wait, no assertion */
	}
}

/* Returns the hits of the site on the faulted call. */
static long src_case(const struct src_path *sp, int site, int err, long skip)
{
	struct kres_src s;
	struct pp_file *p[2], *in;
	unsigned char *buf = malloc(M);
	size_t moved = 0;
	ssize_t r;
	int e, avail = -1;
	long hits;

	ASSERT_TRUE(buf != NULL);
	src_ready(&s, sp->kind);
	in = pp_fdopen(s.rfd);
	ASSERT_TRUE(in != NULL);
	t_pipe2(p, 0);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);

	pp__fault_arm((enum pp_fault_site)site, skip, err, 1);
	errno = 0;
	r = pp_splice(in, NULL, p[1], NULL, M, 0);
	e = errno;
	hits = pp__fault_hits((enum pp_fault_site)site);
	pp__fault_disarm_all();
	if (r < 0) {
		if (err == EINTR || e != err || !hits)
			t_fail_at(__FILE__, __LINE__, "%s, %s %s at check %ld: -1 %s (%ld hits)",
				  sp->name, site_name(site), strerrorname_np(err), skip + 1,
				  strerrorname_np(e), hits);
	} else {
		if (r == 0)
			t_fail_at(__FILE__, __LINE__, "%s, %s %s at check %ld: 0 (EOF) with %u bytes there",
				  sp->name, site_name(site), strerrorname_np(err), skip + 1, M);
		moved = (size_t)r;
	}
	ASSERT_EQ(t_fionread(p[0]), (int)moved);
	while (moved < M) {
		r = pp_splice(in, NULL, p[1], NULL, M - moved, 0);
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: after %s %s: %zd (%s) at %zu",
				  sp->name, site_name(site), strerrorname_np(err), r,
				  r < 0 ? strerrorname_np(errno) : "EOF", moved);
		moved += (size_t)r;
	}
	ASSERT_EQ(ioctl(s.rfd, FIONREAD, &avail), 0);
	ASSERT_EQ(avail, 0);
	ASSERT_EQ(t_fionread(p[0]), (int)M);
	ASSERT_EQ(t_read_full(p[0], buf, M), M);
	if (t_check(buf, M, 0, 21))
		t_fail_at(__FILE__, __LINE__, "%s, %s %s at check %ld: the stream differs",
			  sp->name, site_name(site), strerrorname_np(err), skip + 1);
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	kres_src_close(&s);
	free(buf);
	return hits;
}

static int test_sources(void)
{
	struct kres_leak l = kres_leak_begin();

	t_watchdog(25, "fault sources");
	for (unsigned int i = 0; i < sizeof(src_paths) / sizeof(src_paths[0]); i++) {
		long any = 0;

		for (int site = 0; site < PP_FAULT_NR; site++) {
			long h0 = 0;

			for (unsigned int e = 0; e < NERRS; e++)
				for (long skip = 0; skip < NSKIPS; skip++) {
					if (!site_err_ok(site, errs[e]))
						continue;
					long h = src_case(&src_paths[i], site, errs[e], skip);

					if (!skip)
						h0 += h;
				}
			if (verbose)
				printf("    %-22s %-8s %s\n", src_paths[i].name, site_name(site),
				       h0 ? "fires" : "-");
			if (site != PP_FAULT_ALLOC)
				any += h0;	/* a system call site, not an allocation */
		}
		if (src_paths[i].must_hit && !any)
			t_fail_at(__FILE__, __LINE__, "%s: no fault site on its system calls", src_paths[i].name);
	}
	kres_leak_end(l, "fault sources");
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/* Consumers of a pagepipe holding socket and kernel-pipe bytes. */

struct cons {
	struct pp_file *p[2];
	unsigned char *got;		/* bytes out, in order */
	size_t ngot;
	int fd[2];			/* sink: socket pair, kernel pipe; fd[0] read */
	struct pp_file *sink;		/* pp_fdopen(fd[1]), or a pagepipe's write end */
	struct pp_file *y[2];		/* a second pagepipe */
	int file;
	off_t off;
	unsigned char *tee_got;
	size_t ntee;
};

typedef ssize_t (*cons_fn)(struct cons *c, size_t len);

static ssize_t c_read(struct cons *c, size_t len)
{
	ssize_t r = pp_read(c->p[0], c->got + c->ngot, len);

	if (r > 0)
		c->ngot += (size_t)r;
	return r;
}

static ssize_t c_readv(struct cons *c, size_t len)
{
	size_t a = len / 3;
	struct iovec iov[2] = { { c->got + c->ngot, a }, { c->got + c->ngot + a, len - a } };
	ssize_t r = pp_readv(c->p[0], iov, 2);

	if (r > 0)
		c->ngot += (size_t)r;
	return r;
}

static ssize_t c_vmsplice(struct cons *c, size_t len)
{
	struct iovec iov = { c->got + c->ngot, len };
	ssize_t r = pp_vmsplice(c->p[0], &iov, 1, SPLICE_F_NONBLOCK);

	if (r > 0)
		c->ngot += (size_t)r;
	return r;
}

static ssize_t c_lend(struct cons *c, size_t len)
{
	struct iovec iov[64];
	ssize_t r = pp_read_lend(c->p[0], iov, 64, len);

	if (r <= 0)
		return r;
	for (size_t done = 0, i = 0; done < (size_t)r; i++) {
		memcpy(c->got + c->ngot + done, iov[i].iov_base, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	ASSERT_EQ(pp_read_done(c->p[0], (size_t)r), 0);
	c->ngot += (size_t)r;
	return r;
}

static ssize_t c_file(struct cons *c, size_t len)
{
	off_t at = c->off;
	ssize_t r = pp_splice(c->p[0], NULL, c->sink, &c->off, len, 0);

	if (r > 0) {
		ASSERT_EQ(c->off, at + r);
		ASSERT_EQ(pread(c->file, c->got + c->ngot, (size_t)r, at), r);
		c->ngot += (size_t)r;
	} else {
		ASSERT_EQ(c->off, at);
	}
	return r;
}

/* Sinks whose bytes are collected at the end (sockets, kernel pipe, pagepipe). */
static ssize_t c_sink(struct cons *c, size_t len)
{
	return pp_splice(c->p[0], NULL, c->sink, NULL, len < 65536 ? len : 65536, 0);
}

static ssize_t c_tee(struct cons *c, size_t len)
{
	ssize_t r = pp_tee(c->p[0], c->y[1], len, SPLICE_F_NONBLOCK);

	if (r > 0) {
		/*
		 * The fault was for the tee; the read that drops what it copied
		 * runs without (disarming keeps the count of hits).
		 */
		pp__fault_disarm_all();
		ASSERT_EQ(pp_read(c->p[0], c->got + c->ngot, (size_t)r), r);
		c->ngot += (size_t)r;
	}
	return r;
}

enum sink_kind { SK_NONE, SK_FILE, SK_UNIX, SK_TCP, SK_KPIPE, SK_PAGEPIPE, SK_TEE };

struct cons_path {
	const char *name;
	cons_fn fn;
	enum sink_kind sink;
	bool must_hit;		/* every path now makes a system call on the private pipe */
};

static const struct cons_path cons_paths[] = {
	{ "pp_read", c_read, SK_NONE, true },
	{ "pp_readv", c_readv, SK_NONE, true },
	{ "vmsplice to memory", c_vmsplice, SK_NONE, true },
	{ "lend", c_lend, SK_NONE, true },
	{ "splice to file", c_file, SK_FILE, true },
	{ "splice to unix", c_sink, SK_UNIX, true },
	{ "splice to tcp", c_sink, SK_TCP, true },
	{ "splice to kpipe", c_sink, SK_KPIPE, true },
	{ "splice to pagepipe", c_sink, SK_PAGEPIPE, true },
	{ "tee", c_tee, SK_TEE, true },
};

/* The pipe: a third from TCP, a third from a Unix socket, a third from a kernel pipe. */
static void load(struct pp_file *w)
{
	static const enum kres_src_kind k[3] = { KS_TCP, KS_UNIX, KS_KPIPE };
	size_t part = M / 3, at = 0;

	for (int i = 0; i < 3; i++) {
		size_t n = i == 2 ? M - at : part;
		struct kres_src s;
		struct pp_file *in;

		ASSERT_EQ(kres_src_open(&s, k[i]), 0);
		kres_src_feed(&s, n, at, 21, true, 8192);
		in = pp_fdopen(s.rfd);
		kres_fill(-1, -1, in, w, n, NULL, 0, NULL, 0);
		kres_src_join(&s);
		pp_close(in);
		kres_src_close(&s);
		at += n;
	}
}

static void cons_open(struct cons *c, enum sink_kind sk)
{
	char path[64];
	int sz = 4 << 20;

	memset(c, 0, sizeof(*c));
	c->fd[0] = c->fd[1] = c->file = -1;
	c->got = malloc(2 * M);
	c->tee_got = malloc(2 * M);
	ASSERT_TRUE(c->got && c->tee_got);
	t_pipe2(c->p, 0);
	ASSERT_EQ(pp_fcntl(c->p[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	load(c->p[1]);
	/* Consumers never wait: the pipe is non-blocking once loaded. */
	ASSERT_EQ(pp_fcntl(c->p[0], F_SETFL, O_NONBLOCK), 0);
	switch (sk) {
	case SK_NONE:
		break;
	case SK_FILE:
		c->file = t_tmpfile(NULL, 0, 0, path);
		unlink(path);
		c->sink = pp_fdopen(c->file);
		break;
	case SK_UNIX:
	case SK_TCP:
		if (sk == SK_TCP)
			ASSERT_EQ(t_tcp_pair(c->fd), 0);
		else
			ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->fd), 0);
		setsockopt(c->fd[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(c->fd[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
		c->sink = pp_fdopen(c->fd[1]);
		break;
	case SK_KPIPE:
		t_kpipe2(c->fd, 0);
		ASSERT_EQ(fcntl(c->fd[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		c->sink = pp_fdopen(c->fd[1]);
		break;
	case SK_PAGEPIPE:
	case SK_TEE:
		t_pipe2(c->y, O_NONBLOCK);
		ASSERT_EQ(pp_fcntl(c->y[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		c->sink = sk == SK_PAGEPIPE ? c->y[1] : NULL;
		break;
	}
	if (sk != SK_NONE && sk != SK_PAGEPIPE && sk != SK_TEE)
		ASSERT_TRUE(c->sink != NULL);
}

/* What went to a socket, kernel pipe or second pagepipe: collected now. */
static void cons_collect(struct cons *c, enum sink_kind sk)
{
	unsigned char *dst = sk == SK_TEE ? c->tee_got : c->got;
	size_t *n = sk == SK_TEE ? &c->ntee : &c->ngot;

	switch (sk) {
	case SK_UNIX:
	case SK_TCP:
		shutdown(c->fd[1], SHUT_WR);
		for (ssize_t r; (r = read(c->fd[0], dst + *n, 2 * M - *n)) > 0; )
			*n += (size_t)r;
		break;
	case SK_KPIPE: {
		int left = t_kfionread(c->fd[0]);

		ASSERT_TRUE(*n + (size_t)left <= 2 * M);
		ASSERT_EQ(read(c->fd[0], dst + *n, (size_t)left), left);
		*n += (size_t)left;
		break;
	}
	case SK_PAGEPIPE:
	case SK_TEE:
		for (ssize_t r; (r = pp_read(c->y[0], dst + *n, 2 * M - *n)) > 0; )
			*n += (size_t)r;
		break;
	default:
		break;
	}
}

static void cons_close(struct cons *c)
{
	if (c->sink && c->sink != c->y[1])
		pp_close(c->sink);
	if (c->y[0]) {
		pp_close(c->y[0]);
		pp_close(c->y[1]);
	}
	for (int i = 0; i < 2; i++)
		if (c->fd[i] >= 0)
			close(c->fd[i]);
	if (c->file >= 0)
		close(c->file);
	pp_close(c->p[0]);
	pp_close(c->p[1]);
	free(c->got);
	free(c->tee_got);
}

static long cons_case(const struct cons_path *cp, int site, int err, long skip)
{
	struct cons c;
	ssize_t r;
	int e;
	long hits;

	cons_open(&c, cp->sink);
	/* A first piece without a fault, so that the faulted call starts mid-buffer. */
	ASSERT_TRUE(cp->fn(&c, 1000) > 0);
	pp__fault_arm((enum pp_fault_site)site, skip, err, 1);
	errno = 0;
	r = cp->fn(&c, M);
	e = errno;
	hits = pp__fault_hits((enum pp_fault_site)site);
	pp__fault_disarm_all();
	if (r < 0 && (err == EINTR || e != err || !hits))
		t_fail_at(__FILE__, __LINE__, "%s, %s %s at check %ld: -1 %s (%ld hits)",
			  cp->name, site_name(site), strerrorname_np(err), skip + 1,
			  strerrorname_np(e), hits);
	if (r == 0)
		t_fail_at(__FILE__, __LINE__, "%s, %s %s at check %ld: 0 with bytes queued",
			  cp->name, site_name(site), strerrorname_np(err), skip + 1);
	for (int guard = 0; t_fionread(c.p[0]) > 0; guard++) {
		ASSERT_TRUE(guard < 100000);
		r = cp->fn(&c, M);
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: after %s %s: %zd (%s)", cp->name,
				  site_name(site), strerrorname_np(err), r,
				  r < 0 ? strerrorname_np(errno) : "EOF");
	}
	cons_collect(&c, cp->sink);
	if (c.ngot != M || t_check(c.got, M, 0, 21))
		t_fail_at(__FILE__, __LINE__, "%s, %s %s at check %ld: %zu bytes out of %u, or not the stream",
			  cp->name, site_name(site), strerrorname_np(err), skip + 1, c.ngot, M);
	if (cp->sink == SK_TEE && (c.ntee != M || t_check(c.tee_got, M, 0, 21)))
		t_fail_at(__FILE__, __LINE__, "tee, %s %s at check %ld: the copy has %zu bytes of %u, or not the stream",
			  site_name(site), strerrorname_np(err), skip + 1, c.ntee, M);
	cons_close(&c);
	return hits;
}

static int test_consumers(void)
{
	struct kres_leak l = kres_leak_begin();

	t_watchdog(28, "fault consumers");
	signal(SIGPIPE, SIG_IGN);
	for (unsigned int i = 0; i < sizeof(cons_paths) / sizeof(cons_paths[0]); i++) {
		const char *only = getenv("KRES_FAULT_PATH");
		long any = 0;

		if (only && *only && strcmp(only, cons_paths[i].name))
			continue;
		/*
		 * Memcheck does not see the library's fault-safe copy to user
		 * memory (a system call writing our own memory) as a write.
		 */
		if (cons_paths[i].fn == c_vmsplice && t_under_valgrind())
			continue;

		for (int site = 0; site < PP_FAULT_NR; site++) {
			long h0 = 0;

			for (unsigned int e = 0; e < NERRS; e++)
				for (long skip = 0; skip < NSKIPS; skip++) {
					if (!site_err_ok(site, errs[e]))
						continue;
					long h = cons_case(&cons_paths[i], site, errs[e], skip);

					if (!skip)
						h0 += h;
				}
			if (verbose)
				printf("    %-22s %-8s %s\n", cons_paths[i].name, site_name(site),
				       h0 ? "fires" : "-");
			if (site != PP_FAULT_ALLOC)
				any += h0;	/* a system call site, not an allocation */
		}
		if (cons_paths[i].must_hit && !any)
			t_fail_at(__FILE__, __LINE__, "%s: no fault site on its system calls", cons_paths[i].name);
	}
	kres_leak_end(l, "fault consumers");
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_sources),
		T_SUBTEST(test_consumers),
	};

	verbose = getenv("KRES_FAULT_VERBOSE") != NULL;
	return T_RUN_SUBTESTS(tests);
}
