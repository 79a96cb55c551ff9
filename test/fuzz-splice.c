// SPDX-License-Identifier: MIT
/*
 * Description: libFuzzer target for pp_splice, pp_tee and pp_vmsplice.
 * The input is a program of calls with chosen ends, offsets, lengths and
 * flags, run twice: on pagepipe objects and on the kernel objects that
 * mirror them.
 *
 *   pagepipe side                        kernel side
 *   A, B: pagepipes                      kernel pipes
 *   C: pp_fdopen() of a kernel pipe      another kernel pipe
 *   a regular file: read-write,          a second file with the same
 *   read-only and O_APPEND descriptors   contents, the same three ways
 *   pp_fdopen(/dev/null)                 /dev/null
 *   an AF_UNIX stream socket pair        another socket pair
 *   a TCP pair on 127.0.0.1              another TCP pair
 *   a FIFO, both ends                    another FIFO
 *   NULL                                 -1
 *
 * Where the two sides are meant to agree (pagepipes with pagepipes,
 * files and /dev/null; any OS descriptor with any other, which pagepipe
 * hands to the kernel), return values, errno, offsets and, at the end,
 * every byte left in each pipe, socket and file must be the same; a
 * difference abort()s.  A pagepipe with a kernel pipe or a socket is a
 * different slot layout by design, so such a call only has to not crash
 * or leak, and the objects it touched are compared no more ("tainted").
 * While the library still answers ENOSYS (splice not landed yet) every
 * call of that kind taints its objects, so the target already runs.
 *
 * SPLICE_F_NONBLOCK is always added and every descriptor is non-blocking:
 * nothing may wait.  vmsplice takes its bytes from one arena that is never
 * written after start-up, since the pipes keep references to it.
 *
 * The TCP pair is never compared (tainted from the start): how many bytes
 * one splice takes from it or gives it depends on skb layout and ACK
 * timing.  It is there as a source and a sink of splices with pagepipes
 * and everything else, for crashes, leaks and lost descriptors (issue 12:
 * the kernel-resident buffers that sockets, kernel pipes and FIFOs
 * produce).  The FIFO is compared as the kernel pipe C is.
 *
 * Bits 1 and 2 of the first byte make A and B packet pipes (O_DIRECT),
 * both sides alike.
 *
 * An input whose first byte is odd runs in fault mode: FAULT arms the
 * library's fault-injection sites, nothing is compared, and what is
 * checked is no crash, no memory leak (ASan) and no descriptor leak.
 */
#define FUZZ_NAME "fuzz-splice"
#include "internal.h"
#include "fuzz.h"

#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_IO		(1u << 18)
#define SRC_LEN		(4u * MAX_IO)
#define FILE_LEN	20000u		/* each input starts with a file this long */
#define MAX_IOV		1030
#define MAX_OPS		256

static unsigned char *src;		/* written once; vmsplice'd memory lives here */
static unsigned char *kbuf, *pbuf;
static struct iovec kiov[MAX_IOV], piov[MAX_IOV];
static char kpath[64], ppath[64];	/* the two regular files */
static char fifodir[64], kfifo[96], pfifo[96];	/* the two FIFOs */
static int kfile, pfile;		/* their read-write descriptors, kept open */
static bool splice_ready, tee_ready, vmsplice_ready;

enum kind { K_PAGEPIPE, K_KPIPE, K_FILE, K_NULLDEV, K_SOCK, K_NONE };
enum stream { S_A, S_B, S_C, S_FILE, S_NULL, S_SOCK, S_TCP, S_FIFO, S_NONE, S_NR };

/* Slot order: the objects an operation picks by number. */
enum {
	O_A_R, O_A_W, O_B_R, O_B_W, O_C_R, O_C_W, O_FILE, O_FILE_RO, O_FILE_APP,
	O_NULLDEV, O_SOCK0, O_SOCK1, O_TCP0, O_TCP1, O_FIFO_R, O_FIFO_W, O_NONE, O_NR,
};

struct obj {
	enum kind kind;
	enum stream stream;
	int kfd;			/* kernel side; -1 when closed */
	struct pp_file *pf;		/* pagepipe side; NULL when closed */
	int pfd;			/* the descriptor behind pf, for OS kinds; else -1 */
};

struct state {
	struct obj o[O_NR];
	bool tainted[S_NR];
	bool file_pages[S_NR];		/* a pipe (either kind) that may hold pages of the file */
	bool diff;
	unsigned int op;
	unsigned int seq;
};

static size_t size_arg(struct cursor *c)
{
	static const size_t special[] = {
		0, 1, 2, 100, 4095, 4096, 4097, 8192, 12288, 16384, 65535, 65536,
		65537, 131072, 262144, (size_t)1 << 31, (size_t)INT_MAX, SIZE_MAX,
		(size_t)SSIZE_MAX, (size_t)SSIZE_MAX + 1,
	};

	return fuzz_size(c, special, sizeof(special) / sizeof(special[0]), MAX_IO);
}

/* An offset for off_in/off_out: within the file, past it, negative or huge. */
static off_t off_arg(struct cursor *c)
{
	static const off_t special[] = {
		0, 1, 4095, 4096, 4097, FILE_LEN - 1, FILE_LEN, FILE_LEN + 1, 65536,
		-1, -4096, INT64_MAX, INT64_MAX - 4095, (off_t)1 << 40, (off_t)1 << 62,
	};
	unsigned int b = u8(c);

	if (b & 0x80)
		return special[(b & 0x7f) % (sizeof(special) / sizeof(special[0]))];
	return (off_t)((b & 0x7f) << 8 | u8(c));
}

static void same(const struct state *s, bool cmp, const char *what, struct res k, struct res p)
{
	fuzz_same(s->op, cmp, what, k, p);
}

static void same_bytes(const struct state *s, bool cmp, const char *what, long long n)
{
	fuzz_same_bytes(s->op, cmp, what, kbuf, pbuf, n);
}

/* ---------------------------------------------------------------------- */

static struct obj *pick(struct state *s, struct cursor *c)
{
	return &s->o[u8(c) % O_NR];
}

static const char *name(const struct state *s, const struct obj *o)
{
	static const char *const names[O_NR] = {
		"A.r", "A.w", "B.r", "B.w", "C.r", "C.w", "file", "file(ro)", "file(append)",
		"/dev/null", "sock0", "sock1", "tcp0", "tcp1", "fifo.r", "fifo.w", "NULL",
	};

	return names[o - s->o];
}

static bool is_pipe_kind(enum kind k)
{
	return k == K_PAGEPIPE || k == K_KPIPE;
}

/*
 * Should the two sides agree on a call between objects a and b (b may be
 * NULL)?  Pagepipe ends with kernel pipes or sockets: no, by design.
 * Whatever the answer, a call on a tainted object taints the others.
 */
static bool agree(struct state *s, const struct obj *a, const struct obj *b, bool ready)
{
	bool ok = s->diff && ready;

	if (b && ((a->kind == K_PAGEPIPE && (b->kind == K_KPIPE || b->kind == K_SOCK)) ||
		  (b->kind == K_PAGEPIPE && (a->kind == K_KPIPE || a->kind == K_SOCK))))
		ok = false;
	if (s->tainted[a->stream] || (b && s->tainted[b->stream]))
		ok = false;
	if (!ok) {
		if (a->stream != S_NONE && a->stream != S_NULL)
			s->tainted[a->stream] = true;
		if (b && b->stream != S_NONE && b->stream != S_NULL)
			s->tainted[b->stream] = true;
	}
	/*
	 * A pipe holding file pages holds references, not copies: once the
	 * two files may differ, so may what those pipes read.
	 */
	if (s->tainted[S_FILE])
		for (int i = 0; i < S_NR; i++)
			if (s->file_pages[i])
				s->tainted[i] = true;
	return ok;
}

static unsigned int flags_arg(struct cursor *c)
{
	unsigned int b = u8(c), fl = b & SPLICE_F_ALL;

	if ((b & 0xf0) == 0xf0)
		fl |= 0x10u << (b & 3);		/* an unknown flag: EINVAL */
	return fl | SPLICE_F_NONBLOCK;
}

static void op_splice(struct state *s, struct cursor *c)
{
	struct obj *in = pick(s, c), *out = pick(s, c);
	unsigned int how = u8(c);
	off_t oin = off_arg(c), oout = off_arg(c);
	off_t k_in = oin, k_out = oout, p_in = oin, p_out = oout;
	size_t len = size_arg(c);
	unsigned int flags = flags_arg(c);
	bool cmp;
	struct res k = { 0, 0 }, p;

	/*
	 * Pipe pages of the file written back into the same file: an
	 * overlapping copy, whose result depends on the order the bytes are
	 * copied in.  Both copy in order, a page (buffer) at a time, so they
	 * agree when the target is a page or more from the source
	 * (test/fidelity-kernel.c); closer than that the kernel copies in
	 * place with its memcpy and pagepipe as memmove.  The pipe may hold
	 * pages from anywhere in the file, so the harness cannot tell which
	 * case it is: every pipe holding pages of the file reads either
	 * result (agree() taints them).
	 */
	if (in->kind == K_PAGEPIPE && s->file_pages[in->stream] && out->kind == K_FILE)
		agree(s, in, out, false);
	cmp = agree(s, in, out, splice_ready);
	/* A kernel pipe holds page-cache pages: a reference too. */
	if (in->kind == K_FILE && is_pipe_kind(out->kind))
		s->file_pages[out->stream] = true;
	if (is_pipe_kind(in->kind) && is_pipe_kind(out->kind) && s->file_pages[in->stream])
		s->file_pages[out->stream] = true;
	if (trace)
		fprintf(stderr, "fuzz-splice: op %u: splice(%s, %s%lld, %s, %s%lld, %zu, 0x%x)\n", s->op,
			name(s, in), how & 1 ? "&" : "NULL:", (long long)oin, name(s, out),
			how & 2 ? "&" : "NULL:", (long long)oout, len, flags);
	if (s->diff)
		k = CALL(splice(in->kfd, how & 1 ? &k_in : NULL, out->kfd,
				how & 2 ? &k_out : NULL, len, flags));
	p = CALL(pp_splice(in->pf, how & 1 ? &p_in : NULL, out->pf,
			   how & 2 ? &p_out : NULL, len, flags));
	same(s, cmp, "splice", k, p);
	if (cmp && (k_in != p_in || k_out != p_out))
		mismatch(s, "splice offsets: kernel in %lld out %lld, pagepipe in %lld out %lld",
			 (long long)k_in, (long long)k_out, (long long)p_in, (long long)p_out);
}

static void op_tee(struct state *s, struct cursor *c)
{
	struct obj *in = pick(s, c), *out = pick(s, c);
	size_t len = size_arg(c);
	unsigned int flags = flags_arg(c);
	bool cmp;
	struct res k = { 0, 0 }, p;

	/* Pagepipes tee only with pagepipes; kernel pipes only with kernel pipes. */
	cmp = agree(s, in, out, tee_ready) &&
	      !(is_pipe_kind(in->kind) && is_pipe_kind(out->kind) && in->kind != out->kind);
	if (!cmp)
		agree(s, in, out, false);
	if (is_pipe_kind(in->kind) && is_pipe_kind(out->kind) && s->file_pages[in->stream])
		s->file_pages[out->stream] = true;
	if (trace)
		fprintf(stderr, "fuzz-splice: op %u: tee(%s, %s, %zu, 0x%x)\n", s->op,
			name(s, in), name(s, out), len, flags);
	if (s->diff)
		k = CALL(tee(in->kfd, out->kfd, len, flags));
	p = CALL(pp_tee(in->pf, out->pf, len, flags));
	same(s, cmp, "tee", k, p);
}

static void op_vmsplice(struct state *s, struct cursor *c)
{
	struct obj *o = pick(s, c);
	unsigned int b = u8(c), flags = flags_arg(c);
	bool to_pipe = o->kind == K_PAGEPIPE || o->kind == K_KPIPE ?
		       (o == &s->o[O_A_W] || o == &s->o[O_B_W] || o == &s->o[O_C_W] ||
			  o == &s->o[O_FIFO_W]) : (b & 1);
	size_t cnt, sum = 0;
	bool cmp = agree(s, o, NULL, vmsplice_ready);
	struct res k = { 0, 0 }, p;

	switch (b >> 5) {
	case 0:	cnt = 0; break;
	case 1:	cnt = 1024; break;
	case 2:	cnt = 1025; break;
	default: cnt = (b & 7) + 1; break;
	}
	for (size_t i = 0; i < cnt; i++) {
		size_t len = i < 8 ? size_arg(c) : 0;
		size_t off = to_pipe ? (u16(c) * 61u) % (SRC_LEN - MAX_IO) : sum;
		unsigned int bad = i < 8 ? u8(c) : 0;

		if (sum + len > MAX_IO)
			len = MAX_IO - sum;
		if (to_pipe) {
			kiov[i] = piov[i] = (struct iovec){ src + off, len };
		} else {
			kiov[i] = (struct iovec){ kbuf + off, len };
			piov[i] = (struct iovec){ pbuf + off, len };
		}
		if (bad == 0xff)	/* no memory behind a length: EFAULT */
			kiov[i].iov_base = piov[i].iov_base = NULL;
		sum += len;
	}
	if (trace)
		fprintf(stderr, "fuzz-splice: op %u: vmsplice(%s, %zu segments, %zu bytes, 0x%x)\n",
			s->op, name(s, o), cnt, sum, flags);
	if (s->diff)
		k = CALL(vmsplice(o->kfd, kiov, cnt, flags));
	p = CALL(pp_vmsplice(o->pf, piov, cnt, flags));
	same(s, cmp, "vmsplice", k, p);
	if (!to_pipe)
		same_bytes(s, cmp && k.ret > 0, "vmsplice to user", k.ret);
}

static void op_write(struct state *s, struct cursor *c)
{
	struct obj *o = pick(s, c);
	size_t n = size_arg(c) % (MAX_IO + 1);
	const unsigned char *w = src + (size_t)(s->seq++ * 7919u) % (SRC_LEN - MAX_IO);
	bool cmp = agree(s, o, NULL, true);
	struct res k = { 0, 0 }, p;

	if (trace)
		fprintf(stderr, "fuzz-splice: op %u: write(%s, %zu)\n", s->op, name(s, o), n);
	if (s->diff)
		k = CALL(write(o->kfd, w, n));
	p = CALL(pp_write(o->pf, w, n));
	same(s, cmp, "write", k, p);
}

static void op_read(struct state *s, struct cursor *c)
{
	struct obj *o = pick(s, c);
	size_t n = size_arg(c) % (MAX_IO + 1);
	bool cmp = agree(s, o, NULL, true);
	struct res k = { 0, 0 }, p;

	if (trace)
		fprintf(stderr, "fuzz-splice: op %u: read(%s, %zu)\n", s->op, name(s, o), n);
	if (s->diff)
		k = CALL(read(o->kfd, kbuf, n));
	p = CALL(pp_read(o->pf, pbuf, n));
	same(s, cmp, "read", k, p);
	same_bytes(s, cmp, "read", k.ret);
}

static void op_lseek(struct state *s, struct cursor *c)
{
	off_t to = off_arg(c) % (FILE_LEN * 4);
	int whence = u8(c) % 3;
	struct res k = { 0, 0 }, p;
	bool cmp = agree(s, &s->o[O_FILE], NULL, true);

	if (to < 0 && whence == SEEK_SET)
		to = -to;
	if (s->diff)
		k = CALL(lseek(kfile, to, whence));
	p = CALL(lseek(pfile, to, whence));
	same(s, cmp, "lseek", k, p);
}

static void op_truncate(struct state *s, struct cursor *c)
{
	off_t to = (off_t)size_arg(c) % (FILE_LEN * 2);
	bool cmp;
	struct res k = { 0, 0 }, p;

	/*
	 * Truncating pages a pipe still holds: the kernel zeroes the tail of
	 * the page in place and drops whole pages (ENODATA), at page
	 * granularity; that has tests of its own.  Stop comparing the holders.
	 */
	for (int i = 0; i < S_NR; i++)
		if (s->file_pages[i])
			s->tainted[i] = true;
	cmp = agree(s, &s->o[O_FILE], NULL, true);

	if (s->diff)
		k = CALL(ftruncate(kfile, to));
	p = CALL(ftruncate(pfile, to));
	same(s, cmp, "ftruncate", k, p);
}

static void op_setsize(struct state *s, struct cursor *c)
{
	static const unsigned long sizes[] = { 0, 4096, 8192, 16384, 65536, 131072, 1048576, 1u << 21 };
	struct obj *o = &s->o[O_A_R + u8(c) % 6];
	unsigned long size = sizes[u8(c) % (sizeof(sizes) / sizeof(sizes[0]))];
	bool cmp = agree(s, o, NULL, true);
	struct res k = { 0, 0 }, p;

	if (size > pp_pipe_get_max_size() && geteuid() == 0)
		size = pp_pipe_get_max_size();	/* root passes the kernel's limit */
	if (s->diff)
		k = CALL(fcntl(o->kfd, F_SETPIPE_SZ, size));
	p = CALL(pp_fcntl(o->pf, F_SETPIPE_SZ, size));
	same(s, cmp, "F_SETPIPE_SZ", k, p);
}

static void op_fionread(struct state *s, struct cursor *c)
{
	struct obj *o = &s->o[O_A_R + u8(c) % 6];
	int kn = -7, pn = -7;
	bool cmp = agree(s, o, NULL, true);
	struct res k = { 0, 0 }, p;

	if (s->diff)
		k = CALL(ioctl(o->kfd, FIONREAD, &kn));
	p = CALL(pp_ioctl(o->pf, FIONREAD, &pn));
	same(s, cmp, "FIONREAD", k, p);
	if (cmp && k.ret == 0 && kn != pn)
		mismatch(s, "FIONREAD: kernel %d, pagepipe %d", kn, pn);
}

static void close_obj(struct obj *o)
{
	/* TCP ends with a reset: no TIME_WAIT, or a long run runs out of ports. */
	if (o->stream == S_TCP) {
		struct linger lg = { 1, 0 };

		if (o->kfd >= 0)
			setsockopt(o->kfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		if (o->pfd >= 0)
			setsockopt(o->pfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (o->kfd >= 0)
		close(o->kfd);
	if (o->pf)
		pp_close(o->pf);
	if (o->pfd >= 0)
		close(o->pfd);
	o->kfd = o->pfd = -1;
	o->pf = NULL;
}

static void op_close(struct state *s, struct cursor *c)
{
	static const int closable[] = {
		O_A_R, O_A_W, O_B_R, O_B_W, O_C_R, O_C_W, O_SOCK1, O_TCP1, O_FIFO_W,
	};

	close_obj(&s->o[closable[u8(c) % (sizeof(closable) / sizeof(closable[0]))]]);
}

static void op_fault(struct state *s, struct cursor *c)
{
	static const int errs[] = { ENOMEM, EIO, ENOSPC, EINTR, EAGAIN, EFAULT, ENODATA };
	unsigned int site = u8(c) % PP_FAULT_NR;
	long skip = u8(c) % 16, count = u8(c) % 4;
	int err = errs[u8(c) % (sizeof(errs) / sizeof(errs[0]))];

	/*
	 * A signal interrupts a call now and then, never every time: the
	 * library retries EINTR, so an endless one (count 0) would hang it.
	 */
	if (err == EINTR && !count)
		count = 3;

	if (!s->diff)
		pp__fault_arm(site, skip, err, count);
}

enum {
	OP_SPLICE, OP_SPLICE2, OP_TEE, OP_VMSPLICE, OP_WRITE, OP_READ, OP_LSEEK,
	OP_TRUNCATE, OP_SETSIZE, OP_FIONREAD, OP_CLOSE, OP_FAULT, OP_NR,
};

/* ---------------------------------------------------------------------- */

static void fail_setup(const char *what)
{
	fprintf(stderr, "fuzz-splice: setup: %s: %s\n", what, strerror(errno));
	abort();
}

static void set_obj(struct obj *o, enum kind kind, enum stream st, int kfd, int pfd,
		    struct pp_file *pf)
{
	*o = (struct obj){ kind, st, kfd, pf, pfd };
}

/* pp_fdopen() of a descriptor the object then owns (pp_close never closes it). */
static struct pp_file *wrap(int fd, bool fault_ok)
{
	struct pp_file *f = pp_fdopen(fd);

	if (!f && !fault_ok)
		fail_setup("pp_fdopen");
	return f;
}

/*
 * A connected TCP pair on 127.0.0.1, both non-blocking: [0] accepted from
 * the listener made at start-up, [1] connected to it.
 */
static int listener = -1;
static struct sockaddr_in listen_addr;

static void tcp_pair(int fds[2])
{
	fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fds[1] < 0)
		fail_setup("tcp socket");
	if (connect(fds[1], (struct sockaddr *)&listen_addr, sizeof(listen_addr)) < 0) {
		/* Interrupted (libFuzzer's timers): it goes on; wait for it. */
		struct pollfd pfd = { fds[1], POLLOUT, 0 };
		int err = 0;
		socklen_t el = sizeof(err);

		if (errno != EINTR)
			fail_setup("tcp connect");
		while (poll(&pfd, 1, -1) < 0)
			;
		if (getsockopt(fds[1], SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
			fail_setup("tcp connect (after EINTR)");
	}
	fds[0] = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fds[0] < 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0)
		fail_setup("tcp accept");
}

/* Both ends of the FIFO at path, non-blocking (the reader first, so neither waits). */
static void fifo_open(const char *path, int fds[2])
{
	fds[0] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	fds[1] = fds[0] < 0 ? -1 : open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fds[0] < 0 || fds[1] < 0)
		fail_setup("fifo open");
}

/* Bit i of packets: pipe A (i = 0) or B (i = 1) is a packet pipe (O_DIRECT). */
static void setup(struct state *s, unsigned int packets)
{
	int k[2], p[2];
	struct pp_file *e[2];
	static unsigned char init[FILE_LEN];
	static bool init_done;

	if (!init_done) {
		for (size_t i = 0; i < FILE_LEN; i++)
			init[i] = (unsigned char)(i * 31 + 7);
		init_done = true;
	}
	for (int i = 0; i < O_NR; i++)
		set_obj(&s->o[i], K_NONE, S_NONE, -1, -1, NULL);

	/* A and B: pagepipes and kernel pipes. */
	for (int i = 0; i < 2; i++) {
		int fl = O_NONBLOCK | (packets & (1u << i) ? O_DIRECT : 0);

		if (pipe2(k, fl) < 0)
			fail_setup("pipe2");
		if (pp_pipe2(e, fl) < 0) {
			if (s->diff)
				fail_setup("pp_pipe2");
			e[0] = e[1] = NULL;
		}
		set_obj(&s->o[O_A_R + 2 * i], K_PAGEPIPE, S_A + i, k[0], -1, e[0]);
		set_obj(&s->o[O_A_W + 2 * i], K_PAGEPIPE, S_A + i, k[1], -1, e[1]);
	}
	/* C: a kernel pipe behind pp_fdopen(), and its mirror. */
	if (pipe2(k, O_NONBLOCK) < 0 || pipe2(p, O_NONBLOCK) < 0)
		fail_setup("pipe2");
	set_obj(&s->o[O_C_R], K_KPIPE, S_C, k[0], p[0], wrap(p[0], !s->diff));
	set_obj(&s->o[O_C_W], K_KPIPE, S_C, k[1], p[1], wrap(p[1], !s->diff));

	/* The files start each input the same: FILE_LEN bytes, position 0. */
	if (ftruncate(kfile, 0) < 0 || ftruncate(pfile, 0) < 0 ||
	    pwrite(kfile, init, FILE_LEN, 0) != FILE_LEN || pwrite(pfile, init, FILE_LEN, 0) != FILE_LEN ||
	    lseek(kfile, 0, SEEK_SET) < 0 || lseek(pfile, 0, SEEK_SET) < 0)
		fail_setup("file reset");
	/* kfile and pfile themselves: they stay open from input to input. */
	set_obj(&s->o[O_FILE], K_FILE, S_FILE, kfile, -1, wrap(pfile, !s->diff));
	{
		int kro = open(kpath, O_RDONLY | O_CLOEXEC), pro = open(ppath, O_RDONLY | O_CLOEXEC);
		int kap = open(kpath, O_WRONLY | O_APPEND | O_CLOEXEC);
		int pap = open(ppath, O_WRONLY | O_APPEND | O_CLOEXEC);

		if (kro < 0 || pro < 0 || kap < 0 || pap < 0)
			fail_setup("open");
		set_obj(&s->o[O_FILE_RO], K_FILE, S_FILE, kro, pro, wrap(pro, !s->diff));
		set_obj(&s->o[O_FILE_APP], K_FILE, S_FILE, kap, pap, wrap(pap, !s->diff));
	}
	{
		int kn = open("/dev/null", O_RDWR | O_CLOEXEC), pn = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (kn < 0 || pn < 0)
			fail_setup("/dev/null");
		set_obj(&s->o[O_NULLDEV], K_NULLDEV, S_NULL, kn, pn, wrap(pn, !s->diff));
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, k) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p) < 0)
		fail_setup("socketpair");
	set_obj(&s->o[O_SOCK0], K_SOCK, S_SOCK, k[0], p[0], wrap(p[0], !s->diff));
	set_obj(&s->o[O_SOCK1], K_SOCK, S_SOCK, k[1], p[1], wrap(p[1], !s->diff));

	tcp_pair(k);
	tcp_pair(p);
	set_obj(&s->o[O_TCP0], K_SOCK, S_TCP, k[0], p[0], wrap(p[0], !s->diff));
	set_obj(&s->o[O_TCP1], K_SOCK, S_TCP, k[1], p[1], wrap(p[1], !s->diff));
	s->tainted[S_TCP] = true;

	fifo_open(kfifo, k);
	fifo_open(pfifo, p);
	set_obj(&s->o[O_FIFO_R], K_KPIPE, S_FIFO, k[0], p[0], wrap(p[0], !s->diff));
	set_obj(&s->o[O_FIFO_W], K_KPIPE, S_FIFO, k[1], p[1], wrap(p[1], !s->diff));
}

/* The first offset at or after at where either file has data; end if none. */
static off_t next_data(int a, int b, off_t at, off_t end)
{
	off_t d[2];
	int fd[2] = { a, b };

	for (int i = 0; i < 2; i++) {
		d[i] = lseek(fd[i], at, SEEK_DATA);
		/* ENXIO: no data past at.  Any other failure: look at every byte. */
		if (d[i] < 0)
			d[i] = errno == ENXIO ? end : at;
	}
	return d[0] < d[1] ? d[0] : d[1];
}

/* Compare what is left: every pipe and socket drained, and the files whole. */
static void final_compare(struct state *s)
{
	static const int readers[] = { O_A_R, O_B_R, O_C_R, O_SOCK0, O_SOCK1, O_FIFO_R };

	for (unsigned int i = 0; i < sizeof(readers) / sizeof(readers[0]); i++) {
		struct obj *o = &s->o[readers[i]];

		if (!s->diff || s->tainted[o->stream] || o->kfd < 0)
			continue;
		for (int guard = 0; guard < 1024; guard++) {
			struct res k = CALL(read(o->kfd, kbuf, MAX_IO));
			struct res p = CALL(pp_read(o->pf, pbuf, MAX_IO));

			same(s, true, "final read", k, p);
			same_bytes(s, true, "final read", k.ret);
			if (k.ret <= 0)
				break;
		}
	}
	if (s->diff && !s->tainted[S_FILE]) {
		off_t kl = lseek(kfile, 0, SEEK_END), pl = lseek(pfile, 0, SEEK_END);

		if (kl != pl)
			mismatch(s, "file sizes: kernel %lld, pagepipe %lld", (long long)kl, (long long)pl);
		/*
		 * An offset like 2^40 makes the files sparse and huge: compare
		 * only where either has data (holes read as zeros in both).
		 */
		for (off_t at = 0; at < kl; at += MAX_IO) {
			ssize_t kn, pn;

			at = next_data(kfile, pfile, at, kl);
			if (at >= kl)
				break;
			kn = pread(kfile, kbuf, MAX_IO, at);
			pn = pread(pfile, pbuf, MAX_IO, at);
			if (kn != pn)
				mismatch(s, "file pread at %lld: %zd, %zd", (long long)at, kn, pn);
			same_bytes(s, true, "file contents", kn);
		}
	}
}

static bool landed(long long r)
{
	return !(r < 0 && errno == ENOSYS);
}

static void cleanup_files(void)
{
	unlink(kpath);
	unlink(ppath);
	unlink(kfifo);
	unlink(pfifo);
	rmdir(fifodir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("TMPDIR");
	struct pp_file *e[2];

	(void)argc; (void)argv;
	signal(SIGPIPE, SIG_IGN);
	trace = getenv("FUZZ_TRACE") != NULL;
	src = malloc(SRC_LEN);
	kbuf = malloc(MAX_IO + 4096);
	pbuf = malloc(MAX_IO + 4096);
	if (!src || !kbuf || !pbuf)
		abort();
	for (size_t i = 0; i < SRC_LEN; i++)
		src[i] = (unsigned char)((i * 2654435761u) >> 13 ^ i);
	snprintf(kpath, sizeof(kpath), "%s/pp-fuzz-k-XXXXXX", dir ? dir : "/tmp");
	snprintf(ppath, sizeof(ppath), "%s/pp-fuzz-p-XXXXXX", dir ? dir : "/tmp");
	kfile = mkostemp(kpath, O_CLOEXEC);
	pfile = mkostemp(ppath, O_CLOEXEC);
	if (kfile < 0 || pfile < 0)
		fail_setup("mkostemp");
	atexit(cleanup_files);
	snprintf(fifodir, sizeof(fifodir), "%s/pp-fuzz-fifo-XXXXXX", dir ? dir : "/tmp");
	if (!mkdtemp(fifodir))
		fail_setup("mkdtemp");
	snprintf(kfifo, sizeof(kfifo), "%s/k", fifodir);
	snprintf(pfifo, sizeof(pfifo), "%s/p", fifodir);
	if (mkfifo(kfifo, 0600) < 0 || mkfifo(pfifo, 0600) < 0)
		fail_setup("mkfifo");
	{
		socklen_t sl = sizeof(listen_addr);

		listen_addr = (struct sockaddr_in){ .sin_family = AF_INET };
		listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (listener < 0 || bind(listener, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) < 0 ||
		    listen(listener, 16) < 0 ||
		    getsockname(listener, (struct sockaddr *)&listen_addr, &sl) < 0)
			fail_setup("tcp listener");
	}

	/* Until splice lands the calls answer ENOSYS: run them, compare nothing. */
	if (pp_pipe2(e, O_NONBLOCK) < 0)
		fail_setup("pp_pipe2");
	splice_ready = landed(pp_splice(e[0], NULL, e[1], NULL, 1, SPLICE_F_NONBLOCK));
	tee_ready = landed(pp_tee(e[0], e[1], 1, SPLICE_F_NONBLOCK));
	vmsplice_ready = landed(pp_vmsplice(e[1], &(struct iovec){ src, 1 }, 1, SPLICE_F_NONBLOCK));
	pp_close(e[0]);
	pp_close(e[1]);
	if (!splice_ready || !tee_ready || !vmsplice_ready)
		fprintf(stderr, "fuzz-splice: no differential check for%s%s%s (ENOSYS)\n",
			splice_ready ? "" : " splice", tee_ready ? "" : " tee",
			vmsplice_ready ? "" : " vmsplice");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	unsigned int first = u8(&c);
	struct state s = { .diff = !(first & 1) };
	int lowest_fd = lowest_free_fd(), fd;

	setup(&s, first >> 1);
	for (s.op = 0; c.n && s.op < MAX_OPS; s.op++) {
		switch (u8(&c) % OP_NR) {
		case OP_SPLICE:
		case OP_SPLICE2:	op_splice(&s, &c); break;
		case OP_TEE:		op_tee(&s, &c); break;
		case OP_VMSPLICE:	op_vmsplice(&s, &c); break;
		case OP_WRITE:		op_write(&s, &c); break;
		case OP_READ:		op_read(&s, &c); break;
		case OP_LSEEK:		op_lseek(&s, &c); break;
		case OP_TRUNCATE:	op_truncate(&s, &c); break;
		case OP_SETSIZE:	op_setsize(&s, &c); break;
		case OP_FIONREAD:	op_fionread(&s, &c); break;
		case OP_CLOSE:		op_close(&s, &c); break;
		case OP_FAULT:		op_fault(&s, &c); break;
		}
	}
	pp__fault_disarm_all();
	final_compare(&s);
	for (int i = 0; i < O_NR; i++) {
		if (i == O_FILE) {	/* kfile and pfile stay open for the next input */
			if (s.o[i].pf)
				pp_close(s.o[i].pf);
			continue;
		}
		close_obj(&s.o[i]);
	}
	fd = lowest_free_fd();
	if (fd != lowest_fd)
		mismatch(&s, "descriptor leak: lowest free descriptor %d, was %d", fd, lowest_fd);
	return 0;
}
