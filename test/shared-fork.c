// SPDX-License-Identifier: MIT
/*
 * Description: one pipe shared by fork()ed processes, a kernel pipe
 * (pipe2) against a shared pagepipe (pp_pipe2 with PP_O_SHARED,
 * docs/shared-pipes.md section 7, stage 2).  Every sub-test runs the same
 * steps, with the same fork()ed peers, once on each; each process notes what
 * it saw (counts, errno, F_GETFL, F_GETPIPE_SZ, SIGPIPEs) in shared memory,
 * and the two runs' notes must be equal; bytes are checked inside each run.
 *  - eof_last_writer_any_process: EOF only once the last write end in any
 *    process is gone, by close or by the exit of the process holding it;
 *  - epipe_sigpipe_in_writer: EPIPE and a SIGPIPE in the writing process
 *    once the reader's process closed its end, or died holding it while the
 *    writer slept on a full pipe; no signal with PP_O_NOSIGPIPE;
 *  - pipe_buf_records_many_writers: four writer processes of records up to
 *    PIPE_BUF, by write and writev: none torn, lost or out of order;
 *  - block_and_wake: a reader asleep on an empty pipe, a writer asleep on a
 *    full one, each woken from the other process;
 *  - nonblock_per_open_end: O_NONBLOCK set or cleared in one process is seen
 *    in the other (a flag of the open end, as of an open file description);
 *  - packet_mode: O_DIRECT packets written in one process, read in another;
 *  - capacity_in_slots: 65536 one-byte writes (merged), or 16 packets.
 *
 * Where pp_pipe2 refuses PP_O_SHARED (EINVAL: not built), a sub-test runs
 * its kernel half, which checks this file's expectations against the
 * kernel, then skips (77) saying so.  A hang fails (t_watchdog, 10 s a
 * step, in every process).  SHARED_FORK_VERBOSE=1 prints both runs' notes.
 */
#include "helpers.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define CAP	65536		/* 16 slots of 4096 */
#define BIG	(100 * 1024)
#define SEED	41

/* ---------------------------------------------------------------------- */
/* A kernel pipe or a shared pagepipe behind the same few calls. */

struct xp;
struct xops {
	const char *name;
	int     (*open)(struct xp *x, int flags);
	ssize_t (*read)(struct xp *x, void *buf, size_t n);
	ssize_t (*readv)(struct xp *x, const struct iovec *iov, int n);
	ssize_t (*write)(struct xp *x, const void *buf, size_t n);
	ssize_t (*writev)(struct xp *x, const struct iovec *iov, int n);
	int     (*close)(struct xp *x, int end);
	int     (*fcntl)(struct xp *x, int end, int cmd, int arg);
};

struct xp {
	const struct xops *ops;
	bool live[2];
	int k[2];
	struct pp_file *p[2];
};

static int k_open(struct xp *x, int flags) { return pipe2(x->k, flags & ~PP_O_NOSIGPIPE); }
static ssize_t k_read(struct xp *x, void *b, size_t n) { return read(x->k[0], b, n); }
static ssize_t k_readv(struct xp *x, const struct iovec *v, int n) { return readv(x->k[0], v, n); }
static ssize_t k_write(struct xp *x, const void *b, size_t n) { return write(x->k[1], b, n); }
static ssize_t k_writev(struct xp *x, const struct iovec *v, int n) { return writev(x->k[1], v, n); }
static int k_close(struct xp *x, int e) { return close(x->k[e]); }
static int k_fcntl(struct xp *x, int e, int cmd, int arg) { return fcntl(x->k[e], cmd, arg); }

static int p_open(struct xp *x, int flags) { return pp_pipe2(x->p, flags | PP_O_SHARED); }
static ssize_t p_read(struct xp *x, void *b, size_t n) { return pp_read(x->p[0], b, n); }
static ssize_t p_readv(struct xp *x, const struct iovec *v, int n) { return pp_readv(x->p[0], v, n); }
static ssize_t p_write(struct xp *x, const void *b, size_t n) { return pp_write(x->p[1], b, n); }
static ssize_t p_writev(struct xp *x, const struct iovec *v, int n) { return pp_writev(x->p[1], v, n); }
static int p_close(struct xp *x, int e) { return pp_close(x->p[e]); }
static int p_fcntl(struct xp *x, int e, int cmd, int arg) { return pp_fcntl(x->p[e], cmd, arg); }

static const struct xops kops = {
	"kernel", k_open, k_read, k_readv, k_write, k_writev, k_close, k_fcntl,
};
static const struct xops pops = {
	"pagepipe", p_open, p_read, p_readv, p_write, p_writev, p_close, p_fcntl,
};

#define xread(x, b, n)		((x)->ops->read((x), (b), (n)))
#define xreadv(x, v, n)		((x)->ops->readv((x), (v), (n)))
#define xwrite(x, b, n)		((x)->ops->write((x), (b), (n)))
#define xwritev(x, v, n)	((x)->ops->writev((x), (v), (n)))
#define xfcntl(x, e, c, a)	((x)->ops->fcntl((x), (e), (c), (a)))
/* A result already in hand as a t_res, its errno still fresh. */
#define RES(n)			((struct t_res){ (n), (n) < 0 ? errno : 0 })

static void xopen(const struct xops *ops, struct xp *x, int flags)
{
	memset(x, 0, sizeof(*x));
	x->ops = ops;
	if (ops->open(x, flags) < 0)
		t_fail_at(__FILE__, __LINE__, "%s pipe2(%#x): %s", ops->name, flags, strerror(errno));
	x->live[0] = x->live[1] = true;
}

static int xclose(struct xp *x, int end)
{
	ASSERT_TRUE(x->live[end]);
	x->live[end] = false;
	return x->ops->close(x, end);
}

static void xclose_all(struct xp *x)
{
	for (int e = 0; e < 2; e++)
		if (x->live[e])
			ASSERT_EQ(xclose(x, e), 0);
}

/* ---------------------------------------------------------------------- */
/* Notes: what each process saw, in shared memory, compared run to run. */

struct note { const char *what; long long v; int err; };
struct notes { int n; struct note e[24]; };
struct run {
	struct notes parent, peer;	/* the test process; its peers, one at a time */
	int flag;			/* "I have begun" from one process to the other */
};

static void note_res(struct notes *o, const char *what, struct t_res r)
{
	if (o->n == (int)(sizeof(o->e) / sizeof(o->e[0])))
		t_fail_at(__FILE__, __LINE__, "too many notes (at \"%s\")", what);
	o->e[o->n++] = (struct note){ what, r.ret, r.err };
}

static void note(struct notes *o, const char *what, long long v)
{
	note_res(o, what, (struct t_res){ v, 0 });
}

static void notes_same(const struct notes *k, const struct notes *p, const char *who, bool verbose)
{
	for (int i = 0; i < k->n || i < p->n; i++) {
		const struct note *a = i < k->n ? &k->e[i] : NULL, *b = i < p->n ? &p->e[i] : NULL;

		if (!a || !b || strcmp(a->what, b->what))
			t_fail_at(__FILE__, __LINE__, "%s note %d: kernel \"%s\", pagepipe \"%s\"",
				  who, i, a ? a->what : "(none)", b ? b->what : "(none)");
		if (verbose || a->v != b->v || a->err != b->err)
			fprintf(a->v != b->v || a->err != b->err ? stderr : stdout,
				"    %s: %s: kernel %lld (%s), pagepipe %lld (%s)\n", who, a->what, a->v,
				a->err ? strerror(a->err) : "ok", b->v, b->err ? strerror(b->err) : "ok");
		if (a->v != b->v || a->err != b->err)
			t_fail_at(__FILE__, __LINE__, "%s: \"%s\" differs", who, a->what);
	}
}

/* ---------------------------------------------------------------------- */
/* The driver: the kernel run, then the pagepipe run, then the comparison. */

static unsigned char big[BIG + CAP];	/* t_fill(big, .., 0, SEED) where used */
static unsigned char buf[CAP + PIPE_BUF];

static int diff(void (*fn)(const struct xops *ops, struct run *r))
{
	const char *v = getenv("SHARED_FORK_VERBOSE");
	struct run *run[2];

	for (int i = 0; i < 2; i++) {
		run[i] = mmap(NULL, sizeof(struct run), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		ASSERT_TRUE(run[i] != MAP_FAILED);
	}
	t_run = kops.name;
	fn(&kops, run[0]);
	t_run = NULL;
	alarm(0);
	if (t_shared_missing())
		return t_skip("pp_pipe2(PP_O_SHARED) gives EINVAL: shared pagepipes are not built "
			      "yet; the kernel half ran and passed, the pagepipe half did not run");
	t_run = pops.name;
	fn(&pops, run[1]);
	t_run = NULL;
	alarm(0);
	notes_same(&run[0]->parent, &run[1]->parent, "test process", v && *v == '1');
	notes_same(&run[0]->peer, &run[1]->peer, "peer", v && *v == '1');
	munmap(run[0], sizeof(struct run));
	munmap(run[1], sizeof(struct run));
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

static void run_eof(const struct xops *ops, struct run *r)
{
	struct xp x;
	int sync[2];
	long long total = 0;
	ssize_t n;
	pid_t pid;

	/*
	 * A write end in each process: the peer writes, closes its own and
	 * stays alive until this process has read EOF (so the close counts,
	 * not the exit); no EOF while this process holds one.  sync: a
	 * socket pair, a message each way.
	 */
	xopen(ops, &x, 0);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync), 0);
	if (!(pid = t_fork_peer(1, "write abc, close the write end"))) {
		ASSERT_EQ(xclose(&x, 0), 0);
		note_res(&r->peer, "write abc", T_CALL(xwrite(&x, "abc", 3)));
		note_res(&r->peer, "close its write end", T_CALL(xclose(&x, 1)));
		ASSERT_EQ(write(sync[1], "s", 1), 1);
		ASSERT_EQ(read(sync[1], buf, 1), 1);
		_exit(0);
	}
	t_step("read abc");
	note_res(&r->parent, "read abc", T_CALL(xread(&x, buf, 100)));
	ASSERT_EQ(memcmp(buf, "abc", 3), 0);
	ASSERT_EQ(read(sync[0], buf, 1), 1);
	/* Not EOF: our own write end is open.  Non-blocking, so no hang. */
	ASSERT_EQ(xfcntl(&x, 0, F_SETFL, O_NONBLOCK), 0);
	note_res(&r->parent, "read with a write end here", T_CALL(xread(&x, buf, 100)));
	ASSERT_EQ(xfcntl(&x, 0, F_SETFL, 0), 0);
	ASSERT_EQ(xclose(&x, 1), 0);
	t_step("read EOF after the last write end closed");
	note_res(&r->parent, "read after the last close", T_CALL(xread(&x, buf, 100)));
	note_res(&r->parent, "read again", T_CALL(xread(&x, buf, 100)));
	ASSERT_EQ(write(sync[0], "s", 1), 1);
	t_reap(pid, 10);
	xclose_all(&x);
	close(sync[0]);
	close(sync[1]);

	/*
	 * The classic: the peer writes more than the pipe holds and exits
	 * holding its write end (as a killed process would); this process
	 * closed its own at once and reads until EOF.
	 */
	xopen(ops, &x, 0);
	if (!(pid = t_fork_peer(1, "write 100 KiB and exit holding the write end"))) {
		ASSERT_EQ(xclose(&x, 0), 0);
		t_fill(big, BIG, 0, SEED);
		ASSERT_EQ(xwrite(&x, big, BIG), BIG);
		_exit(0);
	}
	ASSERT_EQ(xclose(&x, 1), 0);
	t_step("read 100 KiB until EOF");
	for (int i = 0;; i++) {
		/* 7000, then 64 KiB as two iovecs: sizes that cut pages. */
		struct iovec iov[2] = { { buf, CAP / 2 }, { buf + CAP / 2, CAP / 2 } };

		n = i & 1 ? xreadv(&x, iov, 2) : xread(&x, buf, 7000);
		if (n <= 0)
			break;
		ASSERT_EQ(t_check(buf, (size_t)n, (unsigned long long)total, SEED), 0);
		total += n;
	}
	note_res(&r->parent, "read at EOF", RES(n));
	note(&r->parent, "bytes read before EOF", total);
	ASSERT_EQ(total, BIG);
	ASSERT_EQ(n, 0);
	t_reap(pid, 10);
	xclose_all(&x);
}

static int eof_last_writer_any_process(void) { return diff(run_eof); }

/* ---------------------------------------------------------------------- */

/* The only read end is in a peer, which closes it and exits. */
static void reader_closes(struct xp *x, int flags)
{
	pid_t pid;

	xopen(x->ops, x, flags);
	if (!(pid = t_fork_peer(1, "close the only read end"))) {
		ASSERT_EQ(xclose(x, 1), 0);
		ASSERT_EQ(xclose(x, 0), 0);
		_exit(0);
	}
	ASSERT_EQ(xclose(x, 0), 0);
	t_reap(pid, 10);
	t_step("write with no reader");
}

static void run_epipe(const struct xops *ops, struct run *r)
{
	struct iovec iov[2] = { { (void *)"ab", 2 }, { (void *)"cd", 2 } };
	struct xp x = { .ops = ops };
	int sync[2];
	pid_t pid;

	t_sigpipe_count_start();
	reader_closes(&x, 0);
	note_res(&r->parent, "write, no reader", T_CALL(xwrite(&x, "x", 1)));
	note(&r->parent, "SIGPIPEs", t_sigpipe_count());
	note_res(&r->parent, "writev, no reader", T_CALL(xwritev(&x, iov, 2)));
	note(&r->parent, "SIGPIPEs", t_sigpipe_count());
	ASSERT_EQ(t_sigpipe_count(), 2);
	xclose_all(&x);

	/*
	 * The reader's process dies holding its end while this one sleeps on
	 * a full pipe: EPIPE (a pagepipe finds the death by its liveness
	 * check, within about 100 ms).
	 */
	t_sigpipe_count_start();
	xopen(ops, &x, 0);
	t_kpipe2(sync, O_CLOEXEC);
	if (!(pid = t_fork_peer(1, "die holding the read end"))) {
		ASSERT_EQ(xclose(&x, 1), 0);
		ASSERT_EQ(read(sync[0], buf, 1), 1);
		t_wait_asleep(getppid());	/* the writer, on the full pipe */
		_exit(0);
	}
	ASSERT_EQ(xclose(&x, 0), 0);
	t_fill(big, CAP + 4096, 0, SEED);
	note_res(&r->parent, "fill the pipe", T_CALL(xwrite(&x, big, CAP)));
	ASSERT_EQ(write(sync[1], "s", 1), 1);
	t_step("write to a full pipe whose reader dies");
	note_res(&r->parent, "write, reader died", T_CALL(xwrite(&x, big + CAP, 4096)));
	note(&r->parent, "SIGPIPEs", t_sigpipe_count());
	ASSERT_EQ(t_sigpipe_count(), 1);
	t_reap(pid, 10);
	xclose_all(&x);
	close(sync[0]);
	close(sync[1]);

	/* PP_O_NOSIGPIPE (no kernel counterpart): EPIPE and no signal. */
	if (ops != &pops)
		return;
	t_sigpipe_count_start();
	reader_closes(&x, PP_O_NOSIGPIPE);
	ASSERT_ERRNO(xwrite(&x, "x", 1), EPIPE);
	ASSERT_ERRNO(xwritev(&x, iov, 2), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 0);
	xclose_all(&x);
}

static int epipe_sigpipe_in_writer(void) { return diff(run_epipe); }

/* ---------------------------------------------------------------------- */

#define NWRITERS	4
#define NRECS		2000

struct rhdr { uint32_t writer, seq, len; };	/* len: the whole record */

/* Writer w's records: the same sizes and bytes in both runs. */
static void records_write(struct xp *x, uint32_t w)
{
	unsigned int seed = w * 7919u + 3;
	unsigned char rec[PIPE_BUF];

	for (uint32_t seq = 0; seq < NRECS; seq++) {
		size_t len = sizeof(struct rhdr) +
			     (size_t)rand_r(&seed) % (PIPE_BUF - sizeof(struct rhdr) + 1);
		struct rhdr h = { w, seq, (uint32_t)len };
		struct iovec iov[2] = { { rec, sizeof(h) }, { rec + sizeof(h), len - sizeof(h) } };
		ssize_t n;

		memcpy(rec, &h, sizeof(h));
		t_fill(rec + sizeof(h), len - sizeof(h), (unsigned long long)seq * PIPE_BUF, w + 1);
		n = seq & 1 ? xwritev(x, iov, 2) : xwrite(x, rec, len);
		if (n != (ssize_t)len)
			t_fail_at(__FILE__, __LINE__, "writer %u record %u: %zu bytes, wrote %zd (%s)",
				  w, seq, len, n, n < 0 ? strerror(errno) : "not atomic");
	}
}

static void run_records(const struct xops *ops, struct run *r)
{
	uint32_t next[NWRITERS] = { 0 };
	long long total = 0, nrec = 0;
	pid_t pid[NWRITERS];
	size_t have = 0;
	struct xp x;
	ssize_t n;

	xopen(ops, &x, 0);
	for (uint32_t w = 0; w < NWRITERS; w++) {
		if (!(pid[w] = t_fork_peer(1, "write records"))) {
			ASSERT_EQ(xclose(&x, 0), 0);
			records_write(&x, w);
			ASSERT_EQ(xclose(&x, 1), 0);
			_exit(0);
		}
	}
	ASSERT_EQ(xclose(&x, 1), 0);
	t_step("read records until EOF");
	for (int i = 0;; i++) {
		/* 64 KiB reads, by read and by readv; a record may end in the next. */
		struct iovec iov[2] = { { buf + have, CAP / 2 }, { buf + have + CAP / 2, CAP / 2 } };
		size_t at = 0;
		struct rhdr h;

		n = i & 1 ? xreadv(&x, iov, 2) : xread(&x, buf + have, CAP);
		if (n <= 0)
			break;
		have += (size_t)n;
		total += n;
		for (; have - at >= sizeof(h); at += h.len, nrec++, next[h.writer]++) {
			memcpy(&h, buf + at, sizeof(h));
			if (h.writer >= NWRITERS || h.len < sizeof(h) || h.len > PIPE_BUF ||
			    h.seq != next[h.writer])
				t_fail_at(__FILE__, __LINE__, "byte %lld: writer %u seq %u len %u: a "
					  "torn, interleaved or lost record", total - (long long)(have - at),
					  h.writer, h.seq, h.len);
			if (have - at < h.len)
				break;
			if (t_check(buf + at + sizeof(h), h.len - sizeof(h),
				    (unsigned long long)h.seq * PIPE_BUF, h.writer + 1))
				t_fail_at(__FILE__, __LINE__, "writer %u record %u: wrong bytes",
					  h.writer, h.seq);
		}
		memmove(buf, buf + at, have - at);
		have -= at;
	}
	note_res(&r->parent, "read at EOF", RES(n));
	note(&r->parent, "records", nrec);
	note(&r->parent, "bytes", total);
	note(&r->parent, "bytes left, not a whole record", (long long)have);
	for (int w = 0; w < NWRITERS; w++)
		ASSERT_EQ(next[w], NRECS);
	ASSERT_EQ(have, 0);
	for (int w = 0; w < NWRITERS; w++)
		t_reap(pid[w], 10);
	xclose_all(&x);
}

static int pipe_buf_records_many_writers(void) { return diff(run_records); }

/* ---------------------------------------------------------------------- */

static void run_block_wake(const struct xops *ops, struct run *r)
{
	struct xp x;
	pid_t pid;

	/*
	 * The peer's read sleeps on the empty pipe; this process writes once
	 * it sees it asleep, and 50 ms on.  r->flag is raised just before the
	 * write, so a read that returns without it never waited.
	 */
	t_fill(big, CAP + 4096, 0, SEED);
	xopen(ops, &x, 0);
	r->flag = 0;
	if (!(pid = t_fork_peer(1, "read an empty pipe"))) {
		ASSERT_EQ(xclose(&x, 1), 0);
		note_res(&r->peer, "read, woken by a write", T_CALL(xread(&x, buf, CAP)));
		note(&r->peer, "the write had begun", __atomic_load_n(&r->flag, __ATOMIC_SEQ_CST));
		ASSERT_EQ(t_check(buf, 100, 0, SEED), 0);
		ASSERT_EQ(xclose(&x, 0), 0);
		_exit(0);
	}
	ASSERT_EQ(xclose(&x, 0), 0);
	t_wait_asleep(pid);
	t_sleep_ms(50);
	__atomic_store_n(&r->flag, 1, __ATOMIC_SEQ_CST);
	note_res(&r->parent, "write to the sleeping reader", T_CALL(xwrite(&x, big, 100)));
	t_reap(pid, 10);
	xclose_all(&x);

	/*
	 * This process's write sleeps on a full pipe until the peer, seeing
	 * it asleep, reads one page; r->flag is raised just before that read.
	 */
	xopen(ops, &x, 0);
	r->flag = 0;
	note_res(&r->parent, "fill the pipe", T_CALL(xwrite(&x, big, CAP)));
	if (!(pid = t_fork_peer(1, "read one page once the writer sleeps"))) {
		ASSERT_EQ(xclose(&x, 1), 0);
		t_wait_asleep(getppid());
		t_sleep_ms(50);
		__atomic_store_n(&r->flag, 1, __ATOMIC_SEQ_CST);
		note_res(&r->peer, "read one page of a full pipe", T_CALL(xread(&x, buf, 4096)));
		ASSERT_EQ(t_check(buf, 4096, 0, SEED), 0);
		ASSERT_EQ(xclose(&x, 0), 0);
		_exit(0);
	}
	t_step("write to a full pipe");
	note_res(&r->parent, "write, woken by a read", T_CALL(xwrite(&x, big + CAP, 4096)));
	note(&r->parent, "the read had begun", __atomic_load_n(&r->flag, __ATOMIC_SEQ_CST));
	t_reap(pid, 10);
	note_res(&r->parent, "read the rest", T_CALL(xread(&x, buf, CAP)));
	ASSERT_EQ(t_check(buf, CAP, 4096, SEED), 0);
	xclose_all(&x);
}

static int block_and_wake(void) { return diff(run_block_wake); }

/* ---------------------------------------------------------------------- */

static void run_nonblock(const struct xops *ops, struct run *r)
{
	struct xp x;
	pid_t pid;

	xopen(ops, &x, 0);
	note(&r->parent, "F_GETFL read end", xfcntl(&x, 0, F_GETFL, 0));
	note(&r->parent, "F_GETFL write end", xfcntl(&x, 1, F_GETFL, 0));

	/* The peer makes the read end non-blocking and closes its copy. */
	if (!(pid = t_fork_peer(1, "set O_NONBLOCK on the read end"))) {
		note(&r->peer, "F_GETFL read end", xfcntl(&x, 0, F_GETFL, 0));
		note_res(&r->peer, "F_SETFL O_NONBLOCK", T_CALL(xfcntl(&x, 0, F_SETFL, O_NONBLOCK)));
		note(&r->peer, "F_GETFL read end", xfcntl(&x, 0, F_GETFL, 0));
		note_res(&r->peer, "read the empty pipe", T_CALL(xread(&x, buf, 100)));
		xclose_all(&x);
		_exit(0);
	}
	t_reap(pid, 10);
	/* The flag outlives the peer's copy: it belongs to the open end. */
	note(&r->parent, "F_GETFL read end", xfcntl(&x, 0, F_GETFL, 0));
	note(&r->parent, "F_GETFL write end", xfcntl(&x, 1, F_GETFL, 0));
	t_step("read an empty pipe made non-blocking by the peer");
	note_res(&r->parent, "read the empty pipe", T_CALL(xread(&x, buf, 100)));

	/* The other way: set here on the write end, seen and cleared there. */
	ASSERT_EQ(xfcntl(&x, 1, F_SETFL, O_NONBLOCK), 0);
	t_fill(big, CAP + 1, 0, SEED);
	note_res(&r->parent, "write past the capacity", T_CALL(xwrite(&x, big, CAP + 1)));
	if (!(pid = t_fork_peer(1, "see O_NONBLOCK on the write end, clear it"))) {
		note(&r->peer, "F_GETFL write end", xfcntl(&x, 1, F_GETFL, 0));
		note_res(&r->peer, "write to the full pipe", T_CALL(xwrite(&x, "x", 1)));
		note_res(&r->peer, "F_SETFL 0", T_CALL(xfcntl(&x, 1, F_SETFL, 0)));
		xclose_all(&x);
		_exit(0);
	}
	t_reap(pid, 10);
	note(&r->parent, "F_GETFL write end", xfcntl(&x, 1, F_GETFL, 0));
	note_res(&r->parent, "read", T_CALL(xread(&x, buf, CAP)));
	ASSERT_EQ(t_check(buf, CAP, 0, SEED), 0);
	xclose_all(&x);
}

static int nonblock_per_open_end(void) { return diff(run_nonblock); }

/* ---------------------------------------------------------------------- */

static void run_packets(const struct xops *ops, struct run *r)
{
	/* Packets of 100, 5000 (4096 + 904), 10, then 100 read short, and 10. */
	static const struct { size_t write, at, read; } p[] = {
		{ 100, 0, 4096 }, { 5000, 100, 4096 }, { 0, 4196, 4096 }, { 10, 5100, 4096 },
		{ 100, 5110, 50 }, { 10, 5210, 4096 },
	};
	const size_t np = sizeof(p) / sizeof(p[0]);
	struct xp x;
	pid_t pid;

	t_fill(big, 6000, 0, SEED);
	xopen(ops, &x, O_DIRECT);
	note(&r->parent, "F_GETFL read end", xfcntl(&x, 0, F_GETFL, 0));
	note(&r->parent, "F_GETFL write end", xfcntl(&x, 1, F_GETFL, 0));
	if (!(pid = t_fork_peer(1, "read packets"))) {
		ASSERT_EQ(xclose(&x, 1), 0);
		note(&r->peer, "F_GETFL read end", xfcntl(&x, 0, F_GETFL, 0));
		for (size_t i = 0; i < np; i++) {
			ssize_t n = xread(&x, buf, p[i].read);

			note_res(&r->peer, "read a packet", RES(n));
			if (n > 0)
				ASSERT_EQ(t_check(buf, (size_t)n, p[i].at, SEED), 0);
		}
		note_res(&r->peer, "read at EOF", T_CALL(xread(&x, buf, 4096)));
		ASSERT_EQ(xclose(&x, 0), 0);
		_exit(0);
	}
	ASSERT_EQ(xclose(&x, 0), 0);
	t_step("write packets");
	for (size_t i = 0; i < np; i++)
		if (p[i].write)
			note_res(&r->parent, "write a packet", T_CALL(xwrite(&x, big + p[i].at, p[i].write)));
	ASSERT_EQ(xclose(&x, 1), 0);
	t_reap(pid, 10);
}

static int packet_mode(void) { return diff(run_packets); }

/* ---------------------------------------------------------------------- */

/* The peer writes one byte at a time until EAGAIN; this process drains. */
static long long fill_bytewise(const struct xops *ops, struct run *r, int flags)
{
	long long drained = 0;
	struct xp x;
	ssize_t n;
	pid_t pid;

	xopen(ops, &x, O_NONBLOCK | flags);
	note(&r->parent, "F_GETPIPE_SZ read end", xfcntl(&x, 0, F_GETPIPE_SZ, 0));
	note(&r->parent, "F_GETPIPE_SZ write end", xfcntl(&x, 1, F_GETPIPE_SZ, 0));
	r->flag = 0;
	if (!(pid = t_fork_peer(1, "one-byte writes until EAGAIN"))) {
		ASSERT_EQ(xclose(&x, 0), 0);
		note(&r->peer, "F_GETPIPE_SZ write end", xfcntl(&x, 1, F_GETPIPE_SZ, 0));
		while ((n = xwrite(&x, "z", 1)) == 1 && r->flag <= 2 * CAP)
			r->flag++;
		note(&r->peer, "one-byte writes", r->flag);
		note_res(&r->peer, "the write after", RES(n));
		ASSERT_EQ(xclose(&x, 1), 0);
		_exit(0);
	}
	ASSERT_EQ(xclose(&x, 1), 0);
	t_reap(pid, 10);
	t_step("drain");
	while ((n = xread(&x, buf, CAP)) > 0 && drained <= 2 * CAP) {
		for (ssize_t i = 0; i < n; i++)
			ASSERT_EQ(buf[i], 'z');
		drained += n;
	}
	note(&r->parent, "bytes drained", drained);
	note_res(&r->parent, "read at EOF", RES(n));
	ASSERT_EQ(drained, r->flag);
	xclose_all(&x);
	return r->flag;
}

static void run_capacity(const struct xops *ops, struct run *r)
{
	ASSERT_EQ(fill_bytewise(ops, r, 0), CAP);			/* merged into 16 pages */
	ASSERT_EQ(fill_bytewise(ops, r, O_DIRECT), CAP / 4096);	/* a packet a slot */
}

static int capacity_in_slots(void) { return diff(run_capacity); }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(eof_last_writer_any_process),
		T_SUBTEST(epipe_sigpipe_in_writer),
		T_SUBTEST(pipe_buf_records_many_writers),
		T_SUBTEST(block_and_wake),
		T_SUBTEST(nonblock_per_open_end),
		T_SUBTEST(packet_mode),
		T_SUBTEST(capacity_in_slots),
	};

	atexit(t_run_report);
	return T_RUN_SUBTESTS(tests);
}
