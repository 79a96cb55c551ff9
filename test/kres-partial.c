// SPDX-License-Identifier: MIT
/*
 * Description: partial and failed splices around socket and kernel-pipe
 * buffers (issue 12 §3), each compared with the same steps on a kernel
 * pipe:
 *  - a pipe spliced to a socket with a small SO_SNDBUF whose receiver
 *    stops reading: SPLICE_F_NONBLOCK (and the socket's O_NONBLOCK) give
 *    short counts then EAGAIN; the receiver resumes and gets every byte
 *    exactly once;
 *  - EOF mid-stream (the peer closes): the data, then 0;
 *  - RST mid-stream (SO_LINGER 0): the data and ECONNRESET, in the
 *    kernel's order; a reset output: ECONNRESET then EPIPE, nothing taken;
 *  - a connected UDP sink: one datagram per splice, none held back;
 *  - a kernel pipe as a sink is a pipe, not a file: O_APPEND, offsets and
 *    SIZE_MAX as the kernel has them;
 *  - an empty source with SPLICE_F_NONBLOCK, or into a pagepipe that is
 *    O_NONBLOCK: EAGAIN where the kernel says EAGAIN, and where the kernel
 *    waits (a TCP socket that is not O_NONBLOCK ignores the flag), the
 *    pagepipe waits too, and both take the byte that then comes;
 *  - a full pipe with SPLICE_F_NONBLOCK or O_NONBLOCK: EAGAIN, nothing
 *    taken from the source; a pagepipe into a full blocking kernel pipe
 *    with SPLICE_F_NONBLOCK: EAGAIN.
 * Cases marked KNOWN BUG in the output are mismatches with the kernel
 * found in today's code, kept as failures for the lead to fix.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "kres.h"

#define N	(256u << 10)

/* ---------------------------------------------------------------------- */
/*
 * A call that may block, run in a thread: either it returns by itself, or
 * the thread is seen asleep inside the kernel with the call not returned
 * (then it is blocked: a non-blocking call never sleeps).  No timing.
 */
struct bcall {
	pthread_t th;
	atomic_int tid;
	atomic_bool done;
	bool joined;
	struct t_res res;
	long long (*fn)(void *arg);
	void *arg;
};

static void *bcall_thread(void *p)
{
	struct bcall *b = p;

	atomic_store(&b->tid, (int)gettid());
	errno = 0;
	long long r = b->fn(b->arg);
	b->res = (struct t_res){ r, r < 0 ? errno : 0 };
	atomic_store(&b->done, true);
	return NULL;
}

static char task_state(int tid)
{
	char path[64], buf[512];
	FILE *f;
	char st = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		char *q = strrchr(buf, ')');

		if (q && q[1] == ' ')
			st = q[2];
	}
	fclose(f);
	return st;
}

/* Start fn(arg); true if it returned (result in b->res), false if it blocks. */
static bool bcall_start(struct bcall *b, long long (*fn)(void *), void *arg)
{
	int sleeping = 0;

	memset(b, 0, sizeof(*b));
	b->fn = fn;
	b->arg = arg;
	ASSERT_EQ(pthread_create(&b->th, NULL, bcall_thread, b), 0);
	for (long i = 0; i < 20000; i++) {
		int tid = atomic_load(&b->tid);

		if (atomic_load(&b->done)) {
			t_join(b->th, NULL, 10);
			b->joined = true;
			return true;
		}
		/* Asleep many times in a row, not just between two steps. */
		if (tid && task_state(tid) == 'S') {
			if (++sleeping >= 50 && !atomic_load(&b->done))
				return false;
		} else {
			sleeping = 0;
		}
		t_sleep_ms(1);
	}
	t_fail_at(__FILE__, __LINE__, "a call neither returned nor slept");
}

/* After something that wakes it: the call returns. */
static struct t_res bcall_finish(struct bcall *b)
{
	if (!b->joined)
		t_join(b->th, NULL, 10);
	b->joined = true;
	ASSERT_TRUE(atomic_load(&b->done));
	return b->res;
}

struct splice_args {
	int kin, kout;			/* kernel: descriptors */
	struct pp_file *pin, *pout;	/* pagepipe: files (NULL: kernel) */
	size_t len;
	unsigned int flags;
};

static long long do_splice(void *p)
{
	struct splice_args *a = p;

	if (a->pin || a->pout)
		return pp_splice(a->pin, NULL, a->pout, NULL, a->len, a->flags);
	return splice(a->kin, NULL, a->kout, NULL, a->len, a->flags);
}

/* ---------------------------------------------------------------------- */

static void sockpair(bool tcp, int s[2])
{
	if (tcp)
		ASSERT_EQ(t_tcp_pair(s), 0);
	else
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
}

/* Read exactly n bytes of stream seed from position pos; then nothing more is there. */
static void recv_exact(int fd, size_t n, unsigned long long pos, unsigned int seed)
{
	unsigned char *buf = malloc(65536);
	size_t got = 0;

	ASSERT_TRUE(buf != NULL);
	while (got < n) {
		size_t want = n - got < 65536 ? n - got : 65536;
		ssize_t r = read(fd, buf, want);

		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "receiver at %zu of %zu: %zd (%s)", got, n, r,
				  r < 0 ? strerror(errno) : "EOF");
		if (t_check(buf, (size_t)r, pos + got, seed))
			t_fail_at(__FILE__, __LINE__, "receiver: wrong bytes at %zu", got);
		got += (size_t)r;
	}
	free(buf);
}

struct receiver {
	int fd;
	size_t n;
	unsigned int seed;
};

static void *receiver_thread(void *p)
{
	struct receiver *r = p;

	recv_exact(r->fd, r->n, 0, r->seed);
	return NULL;
}

/*
 * Fill the pipe (a kernel pipe kfd, or the pagepipe pw) with n bytes of
 * stream seed, half from a socket source and half from a kernel pipe
 * source: the buffers the new type is for.
 */
static void fill_from_sources(int kfd, struct pp_file *pw, size_t n, unsigned int seed, bool tcp)
{
	struct kres_src s1, s2;
	struct pp_file *in;
	size_t half = n / 2;

	ASSERT_EQ(kres_src_open(&s1, tcp ? KS_TCP : KS_UNIX), 0);
	ASSERT_EQ(kres_src_open(&s2, KS_KPIPE), 0);
	kres_src_feed(&s1, half, 0, seed, true, 7000);
	if (pw) {
		in = pp_fdopen(s1.rfd);
		kres_fill(-1, -1, in, pw, half, NULL, 0, NULL, 0);
		pp_close(in);
	} else {
		kres_fill(s1.rfd, kfd, NULL, NULL, half, NULL, 0, NULL, 0);
	}
	kres_src_join(&s1);
	kres_src_feed(&s2, n - half, half, seed, true, 65536);
	kres_src_join(&s2);
	if (pw) {
		in = pp_fdopen(s2.rfd);
		kres_fill(-1, -1, in, pw, n - half, NULL, 0, NULL, 0);
		pp_close(in);
	} else {
		kres_fill(s2.rfd, kfd, NULL, NULL, n - half, NULL, 0, NULL, 0);
	}
	kres_src_close(&s1);
	kres_src_close(&s2);
}

/*
 * Small SO_SNDBUF, receiver not reading.  how: 0 SPLICE_F_NONBLOCK, 1 the
 * socket O_NONBLOCK, 2 the pipe O_NONBLOCK.  Each side, separately: splice
 * until EAGAIN (counts are the socket's business), the rest stays in the
 * pipe; then the receiver reads and the sender finishes.
 */
static struct t_res stall_one(bool pagepipe, bool tcp, int how, size_t *sent_out, bool *blocked)
{
	/* TCP through 4 KiB buffers crawls (delayed ACKs): less of it. */
	const size_t SN = tcp ? 64u << 10 : N;
	struct splice_args a;	/* here: a call still blocked after the loop uses it */
	struct bcall b;
	int k[2] = { -1, -1 }, s[2], sz = 4096;
	struct pp_file *p[2] = { NULL, NULL }, *ps = NULL;
	struct receiver rc;
	pthread_t th;
	size_t sent = 0;
	struct t_res last = { 0, 0 };
	unsigned int fl = how == 0 ? SPLICE_F_NONBLOCK : 0;

	sockpair(tcp, s);
	ASSERT_EQ(setsockopt(s[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
	ASSERT_EQ(setsockopt(s[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)), 0);
	if (how == 1)
		ASSERT_EQ(fcntl(s[1], F_SETFL, O_NONBLOCK), 0);
	if (pagepipe) {
		t_pipe2(p, 0);
		ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		fill_from_sources(-1, p[1], SN, 5, tcp);
		if (how == 2)
			ASSERT_EQ(pp_fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
		ps = pp_fdopen(s[1]);
	} else {
		t_kpipe2(k, 0);
		ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		fill_from_sources(k[1], NULL, SN, 5, tcp);
		if (how == 2)
			ASSERT_EQ(fcntl(k[0], F_SETFL, O_NONBLOCK), 0);
	}
	/*
	 * Until a call does not move bytes: it fails (EAGAIN), or it waits
	 * (the kernel's SPLICE_F_NONBLOCK is about the pipe, not the socket).
	 */
	for (int guard = 0;; guard++) {
		/* Small steps, so that some succeed before the buffer is full. */
		a = (struct splice_args){ k[0], s[1], p[0], ps, SN - sent < 3000 ? SN - sent : 3000, fl };

		ASSERT_TRUE(guard < 100000);
		if (!bcall_start(&b, do_splice, &a)) {
			*blocked = true;
			break;
		}
		last = b.res;
		if (last.ret <= 0)
			break;
		sent += (size_t)last.ret;
		ASSERT_LE(sent, SN);
	}
	*sent_out = sent;
	if (!*blocked) {
		/* What stayed is exactly what was not sent. */
		ASSERT_EQ(pagepipe ? t_fionread(p[0]) : t_kfionread(k[0]), (int)(SN - sent));
	}
	if (*blocked || (last.ret == -1 && last.err == EAGAIN)) {
		/* The receiver resumes: the rest goes, blocking, exactly once. */
		int big = 1 << 20;

		setsockopt(s[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		rc = (struct receiver){ s[0], SN, 5 };
		ASSERT_EQ(pthread_create(&th, NULL, receiver_thread, &rc), 0);
		if (*blocked) {
			struct t_res r = bcall_finish(&b);

			ASSERT_TRUE(r.ret > 0);
			sent += (size_t)r.ret;
		}
		/* Through the pp_file: it keeps its own copy of the flags (kres-bugs.c). */
		if (how == 1)
			ASSERT_EQ(pagepipe ? pp_fcntl(ps, F_SETFL, 0) : fcntl(s[1], F_SETFL, 0), 0);
		if (how == 2)
			ASSERT_EQ(pagepipe ? pp_fcntl(p[0], F_SETFL, 0) : fcntl(k[0], F_SETFL, 0), 0);
		while (sent < SN) {
			ssize_t r = pagepipe ? pp_splice(p[0], NULL, ps, NULL, SN - sent, 0)
					     : splice(k[0], NULL, s[1], NULL, SN - sent, 0);

			if (r <= 0)
				t_fail_at(__FILE__, __LINE__, "%s: resuming at %zu: %zd (%s)",
					  pagepipe ? "pagepipe" : "kernel", sent, r,
					  r < 0 ? strerror(errno) : "0");
			sent += (size_t)r;
		}
		t_join(th, NULL, 20);
		/* Nothing duplicated: no byte after the SN. */
		shutdown(s[1], SHUT_WR);
		{
			char c;

			ASSERT_EQ(read(s[0], &c, 1), 0);
		}
	}
	if (ps)
		pp_close(ps);
	if (pagepipe) {
		pp_close(p[0]);
		pp_close(p[1]);
	} else {
		close(k[0]);
		close(k[1]);
	}
	close(s[0]);
	close(s[1]);
	return last;
}

static int stall(bool tcp)
{
	static const char *const hows[] = { "SPLICE_F_NONBLOCK", "socket O_NONBLOCK", "pipe O_NONBLOCK" };

	t_watchdog(28, "stall");
	for (int how = 0; how < 3; how++) {
		struct kres_leak l = kres_leak_begin();
		size_t ks = 0, ps = 0;
		bool kb = false, pb = false;
		struct t_res k = stall_one(false, tcp, how, &ks, &kb);
		struct t_res p = stall_one(true, tcp, how, &ps, &pb);

		printf("    %s, %s: kernel sent %zu then %s %lld (%s), pagepipe sent %zu then %s %lld (%s)\n",
		       tcp ? "tcp" : "unix", hows[how], ks, kb ? "waited" : "returned", k.ret,
		       strerror(k.err), ps, pb ? "waited" : "returned", p.ret, strerror(p.err));
		if (kb != pb || k.ret != p.ret || k.err != p.err)
			t_fail_at(__FILE__, __LINE__, "%s, %s: the stalled splice: kernel %lld (%s), pagepipe %lld (%s)",
				  tcp ? "tcp" : "unix", hows[how], k.ret, strerror(k.err), p.ret, strerror(p.err));
		/* Short counts came before it: the small buffer took something, not all. */
		ASSERT_TRUE(ks > 0 && ks < (tcp ? 64u << 10 : N));
		ASSERT_TRUE(ps > 0 && ps < (tcp ? 64u << 10 : N));
		if (!kb)
			ASSERT_TRUE(k.ret == -1 && k.err == EAGAIN);
		kres_leak_end(l, hows[how]);
	}
	return T_EXIT_PASS;
}

static int test_stall_tcp(void)  { return stall(true); }
static int test_stall_unix(void) { return stall(false); }

/* ---------------------------------------------------------------------- */

/*
 * The source's peer sends m bytes and goes (close, or RST with SO_LINGER
 * 0); only then splicing starts.  The sequence of results, on each side,
 * until 0 or an error and one call after that, compared.
 */
struct seq {
	long long total;
	struct t_res end, after;
};

static struct seq peer_gone(bool pagepipe, enum kres_src_kind kind, size_t m, bool rst)
{
	struct kres_src s;
	int k[2] = { -1, -1 };
	struct pp_file *p[2] = { NULL, NULL }, *in = NULL;
	struct seq q = { 0, { 0, 0 }, { 0, 0 } };
	unsigned char *buf = malloc(m + 1);

	ASSERT_TRUE(buf != NULL);
	ASSERT_EQ(kres_src_open(&s, kind), 0);
	kres_src_feed(&s, m, 0, 9, false, 4096);
	kres_src_join(&s);
	if (rst) {
		struct linger lg = { 1, 0 };

		ASSERT_EQ(setsockopt(s.wfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	}
	close(s.wfd);
	s.wfd = -1;
	/* Wait (no timing) until the end has reached our side. */
	{
		struct pollfd pfd = { s.rfd, POLLRDHUP, 0 };

		if (kind == KS_TCP || kind == KS_UNIX)
			ASSERT_EQ(poll(&pfd, 1, 10000), 1);
	}
	if (pagepipe) {
		t_pipe2(p, 0);
		ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		in = pp_fdopen(s.rfd);
	} else {
		t_kpipe2(k, 0);
		ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
	}
	for (int guard = 0;; guard++) {
		ASSERT_TRUE(guard < 10000);
		q.end = T_CALL(pagepipe ? pp_splice(in, NULL, p[1], NULL, 5000, 0)
				       : splice(s.rfd, NULL, k[1], NULL, 5000, 0));
		if (q.end.ret <= 0)
			break;
		q.total += q.end.ret;
	}
	q.after = T_CALL(pagepipe ? pp_splice(in, NULL, p[1], NULL, 5000, 0)
				 : splice(s.rfd, NULL, k[1], NULL, 5000, 0));
	/* What arrived is the stream's first bytes. */
	if (q.total) {
		ssize_t r = pagepipe ? t_read_full(p[0], buf, (size_t)q.total)
				     : read(k[0], buf, (size_t)q.total);

		ASSERT_EQ(r, q.total);
		ASSERT_EQ(t_check(buf, (size_t)q.total, 0, 9), 0);
	}
	if (pagepipe) {
		pp_close(in);
		pp_close(p[0]);
		pp_close(p[1]);
	} else {
		close(k[0]);
		close(k[1]);
	}
	kres_src_close(&s);
	free(buf);
	return q;
}

static void same_seq(const char *what, struct seq k, struct seq p)
{
	printf("    %s: kernel %lld bytes then %lld (%s), %lld (%s); pagepipe %lld bytes then %lld (%s), %lld (%s)\n",
	       what, k.total, k.end.ret, strerror(k.end.err), k.after.ret, strerror(k.after.err),
	       p.total, p.end.ret, strerror(p.end.err), p.after.ret, strerror(p.after.err));
	if (k.total != p.total || k.end.ret != p.end.ret || k.end.err != p.end.err ||
	    k.after.ret != p.after.ret || k.after.err != p.after.err)
		t_fail_at(__FILE__, __LINE__, "%s: the sequences differ", what);
}

static int test_eof_midstream(void)
{
	static const enum kres_src_kind kinds[] = { KS_TCP, KS_UNIX, KS_KPIPE, KS_FIFO };

	for (unsigned int i = 0; i < 4; i++) {
		struct kres_leak l = kres_leak_begin();
		size_t m = 12345 + 1000 * i;
		struct seq k = peer_gone(false, kinds[i], m, false);
		struct seq p = peer_gone(true, kinds[i], m, false);

		same_seq(kres_src_name[kinds[i]], k, p);
		ASSERT_EQ(k.total, m);
		ASSERT_EQ(k.end.ret, 0);
		kres_leak_end(l, kres_src_name[kinds[i]]);
	}
	return T_EXIT_PASS;
}

static int test_rst_midstream(void)
{
	static const size_t sizes[] = { 1, 4096, 12345, 100000 };

	for (unsigned int i = 0; i < 4; i++) {
		struct kres_leak l = kres_leak_begin();
		struct seq k = peer_gone(false, KS_TCP, sizes[i], true);
		struct seq p = peer_gone(true, KS_TCP, sizes[i], true);

		same_seq("tcp rst", k, p);
		kres_leak_end(l, "rst");
	}
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/*
 * An empty source whose descriptor is blocking.  mode 0: SPLICE_F_NONBLOCK;
 * mode 1: the pipe is O_NONBLOCK.  What the kernel does (EAGAIN, or wait
 * for data) the pagepipe must do; a waiting call is then given one byte.
 */
static struct t_res empty_one(bool pagepipe, enum kres_src_kind kind, int mode, bool *blocked)
{
	struct kres_src s;
	int k[2] = { -1, -1 };
	struct pp_file *p[2] = { NULL, NULL }, *in = NULL;
	struct splice_args a;
	struct bcall b;
	struct t_res r;

	ASSERT_EQ(kres_src_open(&s, kind), 0);
	if (pagepipe) {
		t_pipe2(p, mode == 1 ? O_NONBLOCK : 0);
		in = pp_fdopen(s.rfd);
		a = (struct splice_args){ -1, -1, in, p[1], 100, mode == 0 ? SPLICE_F_NONBLOCK : 0 };
	} else {
		t_kpipe2(k, mode == 1 ? O_NONBLOCK : 0);
		a = (struct splice_args){ s.rfd, k[1], NULL, NULL, 100, mode == 0 ? SPLICE_F_NONBLOCK : 0 };
	}
	*blocked = !bcall_start(&b, do_splice, &a);
	if (*blocked)
		ASSERT_EQ(write(s.wfd, "z", 1), 1);
	r = bcall_finish(&b);
	if (*blocked)
		ASSERT_EQ(r.ret, 1);
	/* Nothing was lost: the byte (if any) is in the pipe, or still in the source. */
	if (pagepipe) {
		ASSERT_EQ(t_fionread(p[0]), r.ret > 0 ? r.ret : 0);
		pp_close(in);
		pp_close(p[0]);
		pp_close(p[1]);
	} else {
		ASSERT_EQ(t_kfionread(k[0]), r.ret > 0 ? r.ret : 0);
		close(k[0]);
		close(k[1]);
	}
	kres_src_close(&s);
	return r;
}

static int test_empty_source(void)
{
	static const enum kres_src_kind kinds[] = { KS_TCP, KS_UNIX, KS_KPIPE, KS_FIFO };
	static const char *const modes[] = { "SPLICE_F_NONBLOCK", "pipe O_NONBLOCK" };
	int bugs = 0;

	t_watchdog(25, "empty source");
	for (unsigned int i = 0; i < 4; i++) {
		for (int mode = 0; mode < 2; mode++) {
			struct kres_leak l = kres_leak_begin();
			bool kb, pb;
			struct t_res k = empty_one(false, kinds[i], mode, &kb);
			struct t_res p = empty_one(true, kinds[i], mode, &pb);

			printf("    %s, %s: kernel %s %lld (%s), pagepipe %s %lld (%s)\n",
			       kres_src_name[kinds[i]], modes[mode], kb ? "waited, then" : "",
			       k.ret, strerror(k.err), pb ? "waited, then" : "", p.ret, strerror(p.err));
			if (kb != pb || k.ret != p.ret || k.err != p.err) {
				printf("    KNOWN BUG (issue 12): %s, %s differs from the kernel\n",
				       kres_src_name[kinds[i]], modes[mode]);
				bugs++;
			}
			kres_leak_end(l, "empty source");
		}
	}
	return bugs ? T_EXIT_FAIL : T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/* A full pipe: the source's bytes stay where they are. */
static int test_full_pipe(void)
{
	static const enum kres_src_kind kinds[] = { KS_TCP, KS_UNIX, KS_KPIPE, KS_FIFO };
	static unsigned char fill[65536];
	int bugs = 0;

	t_watchdog(25, "full pipe");
	for (unsigned int i = 0; i < 4; i++) {
		for (int mode = 0; mode < 2; mode++) {
			struct kres_leak l = kres_leak_begin();
			struct kres_src ks, ps;
			struct pp_file *pin;
			struct t_pair x;
			unsigned int fl = mode == 0 ? SPLICE_F_NONBLOCK : 0;
			int avail = -1;
			struct t_res k, p;

			ASSERT_EQ(kres_src_open(&ks, kinds[i]), 0);
			ASSERT_EQ(kres_src_open(&ps, kinds[i]), 0);
			t_pair_open(&x, mode == 1 ? O_NONBLOCK : 0);
			ASSERT_EQ(write(x.k[1], fill, sizeof(fill)), 65536);
			ASSERT_EQ(pp_write(x.p[1], fill, sizeof(fill)), 65536);
			ASSERT_EQ(write(ks.wfd, "abc", 3), 3);
			ASSERT_EQ(write(ps.wfd, "abc", 3), 3);
			if (kinds[i] == KS_TCP || kinds[i] == KS_UNIX) {
				struct pollfd pf[2] = { { ks.rfd, POLLIN, 0 }, { ps.rfd, POLLIN, 0 } };

				ASSERT_EQ(poll(pf, 1, 10000), 1);
				ASSERT_EQ(poll(pf + 1, 1, 10000), 1);
			}
			pin = pp_fdopen(ps.rfd);
			k = T_CALL(splice(ks.rfd, NULL, x.k[1], NULL, 3, fl));
			p = T_CALL(pp_splice(pin, NULL, x.p[1], NULL, 3, fl));
			printf("    full pipe, %s, %s: kernel %lld (%s), pagepipe %lld (%s)\n",
			       kres_src_name[kinds[i]], mode ? "pipe O_NONBLOCK" : "SPLICE_F_NONBLOCK",
			       k.ret, strerror(k.err), p.ret, strerror(p.err));
			if (k.ret != p.ret || k.err != p.err)
				bugs++;
			ASSERT_EQ(ioctl(ps.rfd, FIONREAD, &avail), 0);
			ASSERT_EQ(avail, 3);	/* nothing taken */
			t_pair_same_fionread(&x);
			pp_close(pin);
			t_pair_close(&x);
			kres_src_close(&ks);
			kres_src_close(&ps);
			kres_leak_end(l, "full pipe");
		}
	}
	return bugs ? T_EXIT_FAIL : T_EXIT_PASS;
}

/* A pagepipe holding socket bytes into a full kernel pipe that is blocking. */
static int test_full_kpipe_sink(void)
{
	static unsigned char fill[65536];
	struct kres_leak l = kres_leak_begin();
	struct t_pair x;
	int ko[2], po[2];
	struct pp_file *ppo;
	struct splice_args a;
	struct bcall b;
	bool blocked;

	t_watchdog(25, "full kernel pipe sink");
	t_pair_open(&x, 0);
	fill_from_sources(x.k[1], NULL, 20000, 3, false);
	fill_from_sources(-1, x.p[1], 20000, 3, false);
	t_kpipe2(ko, 0);
	t_kpipe2(po, 0);
	ASSERT_EQ(write(ko[1], fill, sizeof(fill)), 65536);
	ASSERT_EQ(write(po[1], fill, sizeof(fill)), 65536);
	ppo = pp_fdopen(po[1]);
	ASSERT_SAME(splice(x.k[0], NULL, ko[1], NULL, 100, SPLICE_F_NONBLOCK),
		    pp_splice(x.p[0], NULL, ppo, NULL, 100, SPLICE_F_NONBLOCK));
	t_pair_same_fionread(&x);
	/* The pagepipe's O_NONBLOCK: what the kernel does with its pipe's. */
	ASSERT_EQ(fcntl(x.k[0], F_SETFL, O_NONBLOCK), 0);
	ASSERT_EQ(pp_fcntl(x.p[0], F_SETFL, O_NONBLOCK), 0);
	a = (struct splice_args){ x.k[0], ko[1], NULL, NULL, 100, 0 };
	blocked = !bcall_start(&b, do_splice, &a);
	if (blocked)
		ASSERT_EQ(read(ko[0], fill, 4096), 4096);
	struct t_res k = bcall_finish(&b);
	a = (struct splice_args){ -1, -1, x.p[0], ppo, 100, 0 };
	bool pblocked = !bcall_start(&b, do_splice, &a);

	if (pblocked)
		ASSERT_EQ(read(po[0], fill, 4096), 4096);
	struct t_res p = bcall_finish(&b);

	printf("    full kernel pipe, pipe O_NONBLOCK: kernel %s%lld (%s), pagepipe %s%lld (%s)\n",
	       blocked ? "waited, then " : "", k.ret, strerror(k.err),
	       pblocked ? "waited, then " : "", p.ret, strerror(p.err));
	ASSERT_EQ(blocked, pblocked);
	ASSERT_EQ(k.ret, p.ret);
	ASSERT_EQ(k.err, p.err);
	t_pair_same_fionread(&x);
	pp_close(ppo);
	close(ko[0]); close(ko[1]); close(po[0]); close(po[1]);
	t_pair_close(&x);
	kres_leak_end(l, "full kernel pipe sink");
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/*
 * A connected UDP socket as the sink: each splice is one datagram of what
 * it moved, at once (a MSG_MORE on the last piece of a call would hold it
 * back, or merge it with the next call's); SPLICE_F_MORE corks until a
 * call without it.  The datagrams that arrive, compared.
 */
static void udp_pair(int s[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s[0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	s[1] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(s[0] >= 0 && s[1] >= 0);
	ASSERT_EQ(bind(s[0], (struct sockaddr *)&a, sizeof(a)), 0);
	ASSERT_EQ(getsockname(s[0], (struct sockaddr *)&a, &al), 0);
	ASSERT_EQ(connect(s[1], (struct sockaddr *)&a, sizeof(a)), 0);
}

/* The sizes of the datagrams waiting, -1 terminated; never waits. */
static int datagrams(int fd, long long *sizes, int max)
{
	static unsigned char buf[65536];
	int n = 0;

	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (r < 0) {
			ASSERT_EQ(errno, EAGAIN);
			break;
		}
		ASSERT_TRUE(n < max);
		sizes[n++] = r;
	}
	return n;
}

static int test_udp_datagrams(void)
{
	static const struct { size_t len; unsigned int flags; } steps[] = {
		{ 5000, 0 }, { 3000, 0 }, { 3000, 0 }, { 1000, SPLICE_F_MORE }, { 1500, 0 },
		{ 4096, 0 }, { 1, 0 }, { 20000, 0 },
	};
	struct kres_leak l = kres_leak_begin();
	struct t_pair x;
	int ku[2], pu[2];
	struct pp_file *pus;

	t_pair_open(&x, 0);
	/* Many buffers: socket, kernel pipe and written ones. */
	fill_from_sources(x.k[1], NULL, 30000, 8, false);
	fill_from_sources(-1, x.p[1], 30000, 8, false);
	for (int i = 0; i < 4; i++)
		ASSERT_SAME(write(x.k[1], "0123456789", 10), pp_write(x.p[1], "0123456789", 10));
	udp_pair(ku);
	udp_pair(pu);
	pus = pp_fdopen(pu[1]);
	ASSERT_TRUE(pus != NULL);
	for (unsigned int i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		long long kd[16], pd[16];
		int kn, pn;

		ASSERT_SAME(splice(x.k[0], NULL, ku[1], NULL, steps[i].len, steps[i].flags),
			    pp_splice(x.p[0], NULL, pus, NULL, steps[i].len, steps[i].flags));
		kn = datagrams(ku[0], kd, 16);
		pn = datagrams(pu[0], pd, 16);
		if (kn != pn)
			t_fail_at(__FILE__, __LINE__, "splice %u (%zu, flags %u): kernel %d datagrams, pagepipe %d",
				  i, steps[i].len, steps[i].flags, kn, pn);
		for (int d = 0; d < kn; d++)
			if (kd[d] != pd[d])
				t_fail_at(__FILE__, __LINE__, "splice %u: datagram %d: kernel %lld bytes, pagepipe %lld",
					  i, d, kd[d], pd[d]);
		t_pair_same_fionread(&x);
	}
	pp_close(pus);
	close(ku[0]); close(ku[1]); close(pu[0]); close(pu[1]);
	t_pair_close(&x);
	kres_leak_end(l, "udp");
	return T_EXIT_PASS;
}

/*
 * A kernel pipe is a pipe to the kernel, not a file: O_APPEND on its write
 * end changes nothing, no offset is allowed, and a len of SIZE_MAX is
 * clamped, not refused.  With kernel-pipe and socket bytes queued.
 */
static int test_kpipe_not_a_file(void)
{
	struct kres_leak l = kres_leak_begin();
	struct t_pair x;
	int ko[2], po[2];
	struct pp_file *ppo, *ppi;
	off_t off = 0;
	unsigned char kb[40000], pb[40000];

	t_pair_open(&x, 0);
	fill_from_sources(x.k[1], NULL, 20000, 4, true);
	fill_from_sources(-1, x.p[1], 20000, 4, true);
	t_kpipe2(ko, 0);
	t_kpipe2(po, 0);
	ASSERT_EQ(fcntl(ko[1], F_SETFL, O_APPEND), 0);
	ASSERT_EQ(fcntl(po[1], F_SETFL, O_APPEND), 0);
	ppo = pp_fdopen(po[1]);
	ASSERT_TRUE(ppo != NULL);
	ASSERT_SAME(splice(x.k[0], NULL, ko[1], &off, 100, 0), pp_splice(x.p[0], NULL, ppo, &off, 100, 0));
	ASSERT_SAME(splice(x.k[0], NULL, ko[1], NULL, 1000, 0), pp_splice(x.p[0], NULL, ppo, NULL, 1000, 0));
	ASSERT_SAME(splice(x.k[0], NULL, ko[1], NULL, SIZE_MAX, 0), pp_splice(x.p[0], NULL, ppo, NULL, SIZE_MAX, 0));
	ASSERT_SAME(splice(x.k[0], NULL, ko[1], NULL, SSIZE_MAX, SPLICE_F_NONBLOCK),
		    pp_splice(x.p[0], NULL, ppo, NULL, SSIZE_MAX, SPLICE_F_NONBLOCK));
	ASSERT_EQ(t_kfionread(ko[0]), 20000);
	ASSERT_EQ(t_kfionread(po[0]), 20000);
	ASSERT_EQ(read(ko[0], kb, sizeof(kb)), 20000);
	ASSERT_EQ(read(po[0], pb, sizeof(pb)), 20000);
	ASSERT_MEM_EQ(kb, pb, 20000);
	ASSERT_EQ(t_check(pb, 20000, 0, 4), 0);
	/* And from a kernel pipe, SIZE_MAX and an offset. */
	ASSERT_EQ(write(po[1], pb, 20000), 20000);
	ASSERT_EQ(write(ko[1], kb, 20000), 20000);
	ppi = pp_fdopen(po[0]);
	ASSERT_TRUE(ppi != NULL);
	ASSERT_SAME(splice(ko[0], &off, x.k[1], NULL, 10, 0), pp_splice(ppi, &off, x.p[1], NULL, 10, 0));
	ASSERT_SAME(splice(ko[0], NULL, x.k[1], NULL, SIZE_MAX, 0), pp_splice(ppi, NULL, x.p[1], NULL, SIZE_MAX, 0));
	ASSERT_SAME_READ(x.k[0], x.p[0], sizeof(kb));
	pp_close(ppi);
	pp_close(ppo);
	close(ko[0]); close(ko[1]); close(po[0]); close(po[1]);
	t_pair_close(&x);
	kres_leak_end(l, "kpipe not a file");
	return T_EXIT_PASS;
}

/*
 * The output's peer resets (SO_LINGER 0), with socket and kernel-pipe
 * bytes queued: once the reset is in, three splices to it, compared
 * (ECONNRESET, then EPIPE, in Linux), and nothing consumed from the pipe.
 */
static int test_rst_output(void)
{
	struct kres_leak l = kres_leak_begin();
	struct t_pair x;
	int ko[2], po[2];
	struct pp_file *ppo;
	struct linger lg = { 1, 0 };

	signal(SIGPIPE, SIG_IGN);
	t_pair_open(&x, 0);
	fill_from_sources(x.k[1], NULL, 30000, 6, true);
	fill_from_sources(-1, x.p[1], 30000, 6, true);
	ASSERT_EQ(t_tcp_pair(ko), 0);
	ASSERT_EQ(t_tcp_pair(po), 0);
	ppo = pp_fdopen(po[1]);
	ASSERT_TRUE(ppo != NULL);
	ASSERT_EQ(setsockopt(ko[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	ASSERT_EQ(setsockopt(po[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(ko[0]);
	close(po[0]);
	{
		struct pollfd pf[2] = { { ko[1], POLLOUT, 0 }, { po[1], POLLOUT, 0 } };

		/* The reset has arrived when the socket reports an error or hang-up. */
		for (int i = 0; i < 2; i++) {
			ASSERT_EQ(poll(pf + i, 1, 10000), 1);
			for (int j = 0; j < 10000 && !(pf[i].revents & (POLLERR | POLLHUP)); j++) {
				t_sleep_ms(1);
				ASSERT_EQ(poll(pf + i, 1, 10000), 1);
			}
			ASSERT_TRUE(pf[i].revents & (POLLERR | POLLHUP));
		}
	}
	for (int i = 0; i < 3; i++) {
		struct t_res k = T_CALL(splice(x.k[0], NULL, ko[1], NULL, 1000, 0));
		struct t_res p = T_CALL(pp_splice(x.p[0], NULL, ppo, NULL, 1000, 0));

		printf("    splice %d to a reset TCP peer: kernel %lld (%s), pagepipe %lld (%s)\n",
		       i, k.ret, strerror(k.err), p.ret, strerror(p.err));
		ASSERT_EQ(k.ret, p.ret);
		ASSERT_EQ(k.err, p.err);
		t_pair_same_fionread(&x);
	}
	ASSERT_EQ(t_kfionread(x.k[0]), 30000);
	pp_close(ppo);
	close(ko[1]);
	close(po[1]);
	t_pair_close(&x);
	kres_leak_end(l, "rst output");
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_stall_tcp),
		T_SUBTEST(test_stall_unix),
		T_SUBTEST(test_eof_midstream),
		T_SUBTEST(test_rst_midstream),
		T_SUBTEST(test_empty_source),
		T_SUBTEST(test_full_pipe),
		T_SUBTEST(test_full_kpipe_sink),
		T_SUBTEST(test_udp_datagrams),
		T_SUBTEST(test_kpipe_not_a_file),
		T_SUBTEST(test_rst_output),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
