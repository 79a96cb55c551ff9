// SPDX-License-Identifier: MIT
/*
 * Description: splice, tee, vmsplice and loans on ends of a pipe shared
 * across fork() (PP_O_SHARED, docs/shared-pipes.md), a kernel pipe (pipe2,
 * splice(2), tee(2), vmsplice(2)) against a shared pagepipe (pp_* calls;
 * a regular file, a socket or a kernel pipe on the other side through
 * pp_fdopen).  Every sub-test runs the same steps, with the same fork()ed
 * peers, once on each; each process notes its counts, errno, offsets and
 * FIONREAD in shared memory, and in the pagepipe run every note must equal
 * the kernel run's at once (both values printed); bytes are checked inside
 * each run.  Bytes entering a shared pipe are copied into its arena at
 * splice time, yet every count must be the kernel's.
 *  - file_to_pipe: a 200 KiB file spliced in by a peer, read here: off_in
 *    NULL advances the file offset (shared by fork), a given *off_in
 *    advances and the offset does not; offset 100; len past the room;
 *    three small splices then one into the slots left; SPLICE_F_NONBLOCK on
 *    a full pipe EAGAIN; short at EOF, 0 at and past EOF;
 *  - pipe_to_file: written here, spliced out by a peer to a file with and
 *    without off_out, partial len; EAGAIN when empty under
 *    SPLICE_F_NONBLOCK; a splice asleep on the empty pipe woken by a write
 *    from here; 0 once no writer is left;
 *  - pipe_to_socket: the same into a TCP and an AF_UNIX stream socket,
 *    200 KiB, a third process reading the socket; an offset on a socket;
 *  - pipe_to_pipe: shared -> kernel pipe -> shared, shared -> shared,
 *    shared -> threaded pagepipe -> shared, the stream read by a peer;
 *    EINVAL for one pipe as both, ESPIPE for an offset, EBADF for a wrong
 *    direction; EAGAIN into a full shared or kernel pipe, by
 *    SPLICE_F_NONBLOCK or by the output's O_NONBLOCK; 0 at EOF;
 *  - tee_between_processes: shared -> shared, shared -> threaded,
 *    threaded -> shared (kernel pipe <-> pagepipe tee is not supported): the
 *    input keeps its bytes (read by a peer), each output a copy, partial
 *    lengths; EINVAL, EBADF; EAGAIN full or empty; 0 at EOF;
 *  - vmsplice_both_ends: several iovecs from a peer that then unmaps them
 *    and exits;
 *    a partial vmsplice into two free slots from aligned and unaligned
 *    memory; EAGAIN full; a NULL base EFAULT, or the bytes before it; out of
 *    the read end into iovecs (a zero-length one among them) like readv,
 *    EFAULT leaving the bytes, EAGAIN empty, 0 at EOF;
 *  - slots_after_splice: one byte from a file, vmsplice, tee or pipe splice,
 *    then a peer's one-byte non-blocking writes until EAGAIN: how many fit
 *    says whether they merged into the spliced buffer (the kernel: 61440
 *    after the first three, a slot of their own; 65535 after a whole buffer
 *    moved pipe to pipe, which stays mergeable);
 *  - vmsplice_unmapped: vmsplice of memory that is not mapped is EFAULT
 *    (or the bytes before it), as the kernel's, never a fault in the copy;
 *  - splice_wait_holds_no_lock: a splice from an empty kernel pipe into a
 *    shared pipe waits with no lock held: a write to that pipe goes on;
 *  - endpoint_read_holds_no_lock: so does a splice from a pp_file_new()
 *    endpoint whose splice_read waits for its source, past the 2 s after
 *    which a held lock counts as a scribble (pp_file_ops: a blocking
 *    splice calls splice_read with no pipe lock held);
 *  - endpoint_failure_stops_splice: such a splice that needs two
 *    reservations stops at a buffer that fails confirm in the second: the
 *    bytes after it never follow the bytes before it;
 *  - read_lend_across_fork (pagepipe only): pp_read_lend/pp_read_done on
 *    bytes written and spliced from a file by a peer: the bytes lent are
 *    those written, a partial done leaves the rest, a write during a loan
 *    goes on, a blocking loan is woken from the peer, EAGAIN, EINVAL, 0.
 *
 * Where shared ends still refuse pp_splice (EINVAL: not built), a sub-test
 * runs its kernel half (bytes checked, notes taken), then skips (77)
 * saying so.  Files live in a mkdtemp() directory under /tmp, both unlinked
 * as soon as the file is open.  A hang fails (t_watchdog, 10 s a
 * step, in every process).  SHARED_SPLICE_VERBOSE=1 prints every note.
 * Under valgrind the EFAULT steps are left out (its wrappers answer them).
 */
#include "helpers.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define PG	4096
#define CAP	65536
#define MIB	(1 << 20)
#define FSIZE	(200 * 1024 + 123)
#define SEED	53

/* ---------------------------------------------------------------------- */
/* One end: a kernel descriptor in the kernel run, a pp_file in the other. */

static bool krun;		/* the kernel run: every pipe pipe2(), every call a system call */

struct end { int fd; struct pp_file *f; };
enum kind { SHARED, THREADED, KPIPE };

/* Every end this process opened in the run, for xclose_every(). */
static struct end *opened[16];
static int nopened;

static void opens(struct end *e)
{
	ASSERT_TRUE(nopened < 16);
	opened[nopened++] = e;
}

/* A descriptor (file, socket, kernel pipe) as end *e; xclose() closes it too. */
static void xfd(struct end *e, int fd)
{
	*e = (struct end){ fd, krun ? NULL : pp_fdopen(fd) };
	ASSERT_TRUE(krun || e->f);
	opens(e);
}

/* In the kernel run every kind is a kernel pipe; KPIPE is one in both. */
static void xpipe(struct end e[2], enum kind kind, int flags)
{
	struct pp_file *p[2];
	int k[2];

	if (krun || kind == KPIPE) {
		ASSERT_EQ(pipe2(k, flags), 0);
		xfd(&e[0], k[0]);
		xfd(&e[1], k[1]);
		return;
	}
	if (pp_pipe2(p, flags | (kind == SHARED ? PP_O_SHARED : 0)) < 0)
		t_fail_at(__FILE__, __LINE__, "pp_pipe2(%#x): %s", flags, strerror(errno));
	for (int i = 0; i < 2; i++) {
		e[i] = (struct end){ -1, p[i] };
		opens(&e[i]);
	}
}

static void xclose(struct end *e)
{
	if (e->f)
		ASSERT_EQ(pp_close(e->f), 0);
	if (e->fd >= 0)
		ASSERT_EQ(close(e->fd), 0);
	e->f = NULL;
	e->fd = -1;
}

static int sv[2] = { -1, -1 };	/* the hand-shake socketpair: sv[0] here, sv[1] in peers */

/* In a peer: close the ends it does not use, but keep (NULL: none), so that EOF and EPIPE come. */
static void xclose_every_but(const struct end *keep)
{
	for (int i = 0; i < nopened; i++)
		if (opened[i] != keep)
			xclose(opened[i]);
}

/* Close every end still open and the hand-shake socket: at a run's or a peer's end. */
static void xclose_every(void)
{
	for (int i = 0; i < nopened; i++)
		xclose(opened[i]);
	nopened = 0;
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
	sv[0] = sv[1] = -1;
}

static ssize_t xread(struct end e, void *b, size_t n) { return e.f ? pp_read(e.f, b, n) : read(e.fd, b, n); }
static ssize_t xwrite(struct end e, const void *b, size_t n) { return e.f ? pp_write(e.f, b, n) : write(e.fd, b, n); }
static int xfcntl(struct end e, int cmd, int arg) { return e.f ? pp_fcntl(e.f, cmd, arg) : fcntl(e.fd, cmd, arg); }

static ssize_t xsplice(struct end in, off_t *oi, struct end out, off_t *oo, size_t len, unsigned int fl)
{
	return krun ? splice(in.fd, oi, out.fd, oo, len, fl) : pp_splice(in.f, oi, out.f, oo, len, fl);
}

static ssize_t xtee(struct end in, struct end out, size_t len, unsigned int fl)
{
	return krun ? tee(in.fd, out.fd, len, fl) : pp_tee(in.f, out.f, len, fl);
}

static ssize_t xvmsplice(struct end e, const struct iovec *iov, size_t n, unsigned int fl)
{
	return krun ? vmsplice(e.fd, iov, n, fl) : pp_vmsplice(e.f, iov, n, fl);
}

static long long xfionread(struct end e)
{
	int n = -1;

	ASSERT_EQ(e.f ? pp_ioctl(e.f, FIONREAD, &n) : ioctl(e.fd, FIONREAD, &n), 0);
	return n;
}

/* ---------------------------------------------------------------------- */
/* Notes: what each process saw, the pagepipe run's checked on the spot. */

struct note { const char *what; long long v; int err; };
struct notes { int n; struct note e[64]; };
struct run { struct notes who[3]; };
static struct run *cur, *kref;	/* this run's notes; the kernel run's, in the pagepipe run */
static bool verbose;

static long long note_at(int line, const char *what, struct t_res r)
{
	struct notes *o = &cur->who[t_peer_id];
	int i = o->n;

	if (i == (int)(sizeof(o->e) / sizeof(o->e[0])))
		t_fail_at(__FILE__, line, "too many notes (at \"%s\")", what);
	o->e[o->n++] = (struct note){ what, r.ret, r.err };
	if (kref) {
		const struct notes *k = &kref->who[t_peer_id];
		const struct note *a = i < k->n ? &k->e[i] : NULL;

		if (!a || strcmp(a->what, what))
			t_fail_at(__FILE__, line, "note %d: kernel \"%s\", pagepipe \"%s\"", i,
				  a ? a->what : "(none)", what);
		if (verbose || a->v != r.ret || a->err != r.err)
			fprintf(a->v != r.ret || a->err != r.err ? stderr : stdout,
				"    %s: %s: kernel %lld (%s), pagepipe %lld (%s)\n",
				t_peer_id ? "peer" : "test process", what, a->v, a->err ? strerror(a->err) : "ok",
				r.ret, r.err ? strerror(r.err) : "ok");
		if (a->v != r.ret || a->err != r.err)
			t_fail_at(__FILE__, line, "\"%s\" differs from the kernel's", what);
	} else if (verbose) {
		printf("    %s: %s: %s %lld (%s)\n", t_peer_id ? "peer" : "test process", what,
		       t_run ? t_run : "-", r.ret, r.err ? strerror(r.err) : "ok");
	}
	fflush(stdout);	/* a peer leaves by _exit() */
	errno = r.err;
	return r.ret;
}
#define NOTE(what, call)	note_at(__LINE__, (what), T_CALL(call))
/* A result already in hand, its errno still fresh. */
#define RES(n)			((struct t_res){ (n), (n) < 0 ? errno : 0 })
#define NOTE_RES(what, res)	note_at(__LINE__, (what), (res))

/* ---------------------------------------------------------------------- */
/* Processes: peers (helpers.h: t_fork_peer and its kin), hand-shakes. */

/* A peer keeps only its own end of the hand-shake socketpair. */
static pid_t peer(int id, const char *what)
{
	pid_t pid = t_fork_peer(id, what);

	if (pid == 0) {
		if (sv[0] >= 0)
			close(sv[0]);
		sv[0] = -1;
	}
	return pid;
}

static void peer_done(void)
{
	xclose_every();
	_exit(0);
}

/* A number over sv to the other process; a dead one fails. */
static void tell(long long v)
{
	ASSERT_EQ(send(sv[t_peer_id ? 1 : 0], &v, sizeof(v), MSG_NOSIGNAL), sizeof(v));
}

static long long hear_at(int line)
{
	long long v;
	ssize_t n;

	while ((n = recv(sv[t_peer_id ? 1 : 0], &v, sizeof(v), MSG_WAITALL)) < 0 && errno == EINTR)
		;
	if (n != sizeof(v))
		t_fail_at(__FILE__, line, "the other process is gone (recv %zd)", n);
	return v;
}
#define hear()		hear_at(__LINE__)
#define heard()		ASSERT_EQ(hear(), 1)

static void sync_pair(void)
{
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* In the test process once its peers are forked: EOF on sv when they die. */
static void forked(void)
{
	close(sv[1]);
	sv[1] = -1;
}

static unsigned char big[FSIZE + CAP];	/* t_fill(big, .., 0, SEED) */
static unsigned char buf[MIB];

/* Read exactly n bytes and check them: stream (or file) position pos. */
#define read_check(r, n, pos)	read_check_at(__LINE__, (r), (n), (pos))
static void read_check_at(int line, struct end r, size_t n, unsigned long long pos)
{
	for (size_t got = 0; got < n;) {
		size_t want = n - got < sizeof(buf) ? n - got : sizeof(buf);
		ssize_t k = xread(r, buf, want);

		if (k <= 0)
			t_fail_at(__FILE__, line, "read at %zu of %zu: %zd (%s)", got, n, k,
				  k ? strerror(errno) : "EOF");
		if (t_check(buf, (size_t)k, pos + got, SEED))
			t_fail_at(__FILE__, line, "bytes %llu..%llu differ", pos + got, pos + got + k);
		got += (size_t)k;
	}
}

/*
 * The splicing peer hands over: "read n bytes, from position pos", and
 * waits until they are read, so that each of its splices meets a pipe
 * whose contents are known.  n < 0 ends.
 */
static void hand(long long pos, long long n)
{
	tell(pos);
	tell(n);
	if (n >= 0)
		heard();
}

static void take_all(struct end r)
{
	long long pos, n;

	while (pos = hear(), (n = hear()) >= 0) {
		t_step("read what the peer spliced");
		read_check(r, (size_t)n, (unsigned long long)pos);
		tell(1);
	}
}

/*
 * A file of len pattern bytes (seed SEED), made in a mkdtemp() directory
 * under /tmp and unlinked at once with the directory: nothing is left
 * behind, whatever exits how.
 */
static int tfile(size_t len)
{
	char dir[64] = "/tmp/pp-shared-splice-XXXXXX", path[64];
	int fd;

	if (!mkdtemp(dir))
		t_fail_at(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
	fd = t_tmpfile(dir, len, SEED, path);
	ASSERT_EQ(unlink(path), 0);
	ASSERT_EQ(rmdir(dir), 0);
	return fd;
}

/* ---------------------------------------------------------------------- */
/* The driver: the kernel run, then the pagepipe run. */

static bool shared_splice_missing(void)
{
	struct pp_file *s[2], *t[2];
	ssize_t n;
	int e;

	t_pipe2(t, 0);
	if (pp_pipe2(s, PP_O_SHARED) < 0)
		t_fail_at(__FILE__, __LINE__, "pp_pipe2(PP_O_SHARED): %s", strerror(errno));
	ASSERT_EQ(pp_write(s[1], "x", 1), 1);
	n = pp_splice(s[0], NULL, t[1], NULL, 1, SPLICE_F_NONBLOCK);
	e = errno;
	pp_close(s[0]);
	pp_close(s[1]);
	pp_close(t[0]);
	pp_close(t[1]);
	if (n < 0 && e == EINVAL)
		return true;
	ASSERT_EQ(n, 1);
	return false;
}

#define NOT_BUILT "pp_splice on PP_O_SHARED ends gives EINVAL: shared splice not built yet"

static int diff(void (*fn)(void))
{
	struct run *run[2];

	for (int i = 0; i < 2; i++) {
		run[i] = mmap(NULL, sizeof(struct run), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		ASSERT_TRUE(run[i] != MAP_FAILED);
	}
	t_fill(big, sizeof(big), 0, SEED);
	krun = true;
	t_run = "kernel";
	cur = run[0];
	fn();
	t_run = NULL;
	alarm(0);
	if (shared_splice_missing())
		return t_skip(NOT_BUILT "; the kernel half ran and passed, the pagepipe half did not run");
	krun = false;
	t_run = "pagepipe";
	cur = run[1];
	kref = run[0];
	fn();
	t_run = NULL;
	alarm(0);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(run[1]->who[i].n, run[0]->who[i].n);
	munmap(run[0], sizeof(struct run));
	munmap(run[1], sizeof(struct run));
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

static void run_file_to_pipe(void)
{
	int fd = tfile(FSIZE);
	long long n, pos, r;
	struct end p[2], file;
	off_t off;
	pid_t pid;

	t_step("splice a file into the pipe");
	xpipe(p, SHARED, 0);
	sync_pair();
	if (!(pid = peer(1, "splice the file into the pipe"))) {
		xclose(&p[0]);
		xfd(&file, fd);
		/* off_in NULL: the file offset, shared with the test process, advances. */
		hand(0, NOTE("splice 100, off_in NULL", xsplice(file, NULL, p[1], NULL, 100, 0)));
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		hand(100, NOTE("splice 1 MiB at offset 100 into the empty pipe",
			       xsplice(file, NULL, p[1], NULL, MIB, 0)));
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		/* *off_in advances; the file offset does not. */
		off = 70000;
		hand(70000, NOTE("splice 5000, *off_in 70000", xsplice(file, &off, p[1], NULL, 5000, 0)));
		NOTE("*off_in", off);
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		off = FSIZE - 10;
		hand(FSIZE - 10, NOTE("splice 1000, 10 bytes before EOF", xsplice(file, &off, p[1], NULL, 1000, 0)));
		NOTE("*off_in", off);
		NOTE("splice at EOF", xsplice(file, &off, p[1], NULL, 1000, 0));
		off = FSIZE + 100;
		NOTE("splice past EOF", xsplice(file, &off, p[1], NULL, 1000, 0));
		NOTE("*off_in", off);
		/* Three small splices, then one larger than the slots left; then full. */
		pos = lseek(fd, 0, SEEK_CUR);
		n = 0;
		for (int i = 0; i < 3; i++)
			n += NOTE("splice 1000", xsplice(file, NULL, p[1], NULL, 1000, 0));
		n += NOTE("splice 1 MiB into the slots left", xsplice(file, NULL, p[1], NULL, MIB, 0));
		NOTE("splice into the full pipe, SPLICE_F_NONBLOCK",
		     xsplice(file, NULL, p[1], NULL, 10, SPLICE_F_NONBLOCK));
		NOTE("FIONREAD of the write end", xfionread(p[1]));
		hand(pos, n);
		/* The rest, the test process draining after each. */
		for (int i = 0; (r = xsplice(file, NULL, p[1], NULL, MIB, 0)) > 0 && i < 10; i++)
			hand(lseek(fd, 0, SEEK_CUR) - r, NOTE("splice 1 MiB", r));
		NOTE_RES("splice at EOF, off_in NULL", RES(r));
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		hand(0, -1);
		peer_done();
	}
	forked();
	xclose(&p[1]);
	take_all(p[0]);
	t_step("read EOF");
	NOTE("read at EOF", xread(p[0], buf, 100));
	NOTE("file offset seen here", lseek(fd, 0, SEEK_CUR));
	t_reap(pid, 10);
	xclose_every();
	close(fd);
}

static int file_to_pipe(void) { return diff(run_file_to_pipe); }

/* ---------------------------------------------------------------------- */

/* len bytes of the file at off are the stream's bytes at pos. */
static void file_check(int fd, off_t off, size_t len, unsigned long long pos)
{
	ASSERT_EQ(pread(fd, buf, len, off), (ssize_t)len);
	ASSERT_EQ(t_check(buf, len, pos, SEED), 0);
}

static void run_pipe_to_file(void)
{
	int fd = tfile(0);
	long long total = 0, n;
	struct end p[2], file;
	struct stat st;
	off_t off;
	pid_t pid;

	t_step("splice the pipe out to a file");
	xpipe(p, SHARED, 0);
	sync_pair();
	if (!(pid = peer(1, "splice the pipe out to the file"))) {
		xclose(&p[1]);
		xfd(&file, fd);
		heard();
		NOTE("splice 3000, off_out NULL", xsplice(p[0], NULL, file, NULL, 3000, 0));
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		off = 100000;
		NOTE("splice 4000, *off_out 100000", xsplice(p[0], NULL, file, &off, 4000, 0));
		NOTE("*off_out", off);
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		NOTE("splice 1 MiB: what is left", xsplice(p[0], NULL, file, NULL, MIB, 0));
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		NOTE("splice the empty pipe, SPLICE_F_NONBLOCK",
		     xsplice(p[0], NULL, file, NULL, 100, SPLICE_F_NONBLOCK));
		tell(1);
		t_step("splice until EOF, woken by the test process");
		while ((n = xsplice(p[0], NULL, file, NULL, MIB, 0)) > 0)
			total += n;
		NOTE_RES("splice, empty, no writer left", RES(n));
		NOTE("bytes spliced after the first 10000", total);
		NOTE("file offset", lseek(fd, 0, SEEK_CUR));
		peer_done();
	}
	forked();
	xclose(&p[0]);
	NOTE("write 10000", xwrite(p[1], big, 10000));
	tell(1);
	heard();
	/* The file: [0, 3000) and [3000, 6000) by offset, [100000, 104000) by *off_out. */
	file_check(fd, 0, 3000, 0);
	file_check(fd, 3000, 3000, 7000);
	file_check(fd, 100000, 4000, 3000);
	t_wait_asleep(pid);
	NOTE("write 10000 to the sleeping splice", xwrite(p[1], big + 10000, 10000));
	xclose(&p[1]);
	t_reap(pid, 10);
	file_check(fd, 6000, 10000, 10000);
	ASSERT_EQ(fstat(fd, &st), 0);
	NOTE("file size", st.st_size);
	xclose_every();
	close(fd);
}

static int pipe_to_file(void) { return diff(run_pipe_to_file); }

/* ---------------------------------------------------------------------- */

/* s[1] is spliced into, s[0] read by a second peer. */
static void to_socket(int s[2])
{
	long long total = 0, n;
	struct end p[2], sock;
	pid_t pid[2];
	off_t off = 0;

	t_step("splice the pipe out to a socket");
	xpipe(p, SHARED, 0);
	sync_pair();
	if (!(pid[0] = peer(1, "splice the pipe out to the socket"))) {
		xclose(&p[1]);
		close(s[0]);
		xfd(&sock, s[1]);
		heard();
		NOTE("splice 1000 to the socket", xsplice(p[0], NULL, sock, NULL, 1000, 0));
		NOTE("splice 1 MiB: the 4000 left", xsplice(p[0], NULL, sock, NULL, MIB, 0));
		NOTE("splice the empty pipe, SPLICE_F_NONBLOCK",
		     xsplice(p[0], NULL, sock, NULL, 100, SPLICE_F_NONBLOCK));
		NOTE("an offset on the socket", xsplice(p[0], NULL, sock, &off, 100, SPLICE_F_NONBLOCK));
		tell(1);
		t_step("splice to the socket until EOF");
		while ((n = xsplice(p[0], NULL, sock, NULL, MIB, 0)) > 0)
			total += n;
		NOTE_RES("splice, empty, no writer left", RES(n));
		NOTE("bytes spliced", total);
		peer_done();
	}
	if (!(pid[1] = peer(2, "read the socket"))) {
		xclose_every_but(NULL);
		close(s[1]);
		while ((n = read(s[0], buf, sizeof(buf))) > 0) {
			ASSERT_EQ(t_check(buf, (size_t)n, (unsigned long long)total, SEED), 0);
			total += n;
		}
		NOTE_RES("read the socket at EOF", RES(n));
		NOTE("bytes through the socket", total);
		close(s[0]);
		peer_done();
	}
	forked();
	xclose(&p[0]);
	close(s[0]);
	close(s[1]);
	NOTE("write 5000", xwrite(p[1], big, 5000));
	tell(1);
	heard();
	t_step("write the rest through the splicing peer");
	NOTE("write the rest of 200 KiB", xwrite(p[1], big + 5000, FSIZE - 5000));
	xclose(&p[1]);
	t_reap(pid[0], 10);
	t_reap(pid[1], 10);
	xclose_every();
}

static void run_pipe_to_socket(void)
{
	int s[2];

	if (t_tcp_pair(s) < 0)
		t_fail_at(__FILE__, __LINE__, "a TCP pair on 127.0.0.1: %s", strerror(errno));
	to_socket(s);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	to_socket(s);
}

static int pipe_to_socket(void) { return diff(run_pipe_to_socket); }

/* ---------------------------------------------------------------------- */

static void run_pipe_to_pipe(void)
{
	struct end s1[2], s2[2], t[2], k[2];
	off_t off = 0;
	pid_t pid;

	t_step("splice between pipes");
	xpipe(s1, SHARED, 0);
	xpipe(s2, SHARED, 0);
	xpipe(t, THREADED, 0);
	xpipe(k, KPIPE, 0);
	sync_pair();
	if (!(pid = peer(1, "write S1, read S2"))) {
		NOTE("write 20000 to S1", xwrite(s1[1], big, 20000));
		xclose_every_but(&s2[0]);
		tell(1);
		heard();
		t_step("read S2");
		read_check(s2[0], 20000, 0);
		tell(1);
		heard();	/* S2 was full while the test process needed it */
		t_step("read S2 until EOF");
		read_check(s2[0], CAP, 20000);
		NOTE("read S2 at EOF", xread(s2[0], buf, 100));
		peer_done();
	}
	forked();
	xclose(&s2[0]);
	heard();
	NOTE("S1 -> kernel pipe, 5000", xsplice(s1[0], NULL, k[1], NULL, 5000, 0));
	NOTE("kernel pipe -> S2, 1 MiB", xsplice(k[0], NULL, s2[1], NULL, MIB, 0));
	NOTE("S1 -> S2, 7000", xsplice(s1[0], NULL, s2[1], NULL, 7000, 0));
	NOTE("S1 -> threaded, 1 MiB", xsplice(s1[0], NULL, t[1], NULL, MIB, 0));
	NOTE("FIONREAD of S1", xfionread(s1[0]));
	NOTE("threaded -> S2, 1 MiB", xsplice(t[0], NULL, s2[1], NULL, MIB, 0));
	NOTE("FIONREAD of S2", xfionread(s2[1]));
	tell(1);
	/* Refusals, with bytes in S1 so that nothing would wait. */
	NOTE("write 100 to S1", xwrite(s1[1], big + 20000 + CAP, 100));
	NOTE("S1 -> S1", xsplice(s1[0], NULL, s1[1], NULL, 10, 0));
	NOTE("S1 -> S2, off_in", xsplice(s1[0], &off, s2[1], NULL, 10, 0));
	NOTE("S1 -> S2, off_out", xsplice(s1[0], NULL, s2[1], &off, 10, 0));
	NOTE("kernel pipe -> S1, off_in", xsplice(k[0], &off, s1[1], NULL, 10, 0));
	NOTE("S1's write end -> S2", xsplice(s1[1], NULL, s2[1], NULL, 10, 0));
	NOTE("S1 -> a read end", xsplice(s1[0], NULL, t[0], NULL, 10, 0));
	NOTE("S1 -> kernel pipe's read end", xsplice(s1[0], NULL, k[0], NULL, 10, 0));
	NOTE("FIONREAD of S1", xfionread(s1[0]));
	/* Full outputs. */
	heard();	/* the peer has read S2 */
	NOTE("fill S2", xwrite(s2[1], big + 20000, CAP));
	NOTE("S1 -> full S2, SPLICE_F_NONBLOCK", xsplice(s1[0], NULL, s2[1], NULL, 10, SPLICE_F_NONBLOCK));
	NOTE("write 10 to the kernel pipe", xwrite(k[1], big, 10));
	NOTE("kernel pipe -> full S2, SPLICE_F_NONBLOCK",
	     xsplice(k[0], NULL, s2[1], NULL, 10, SPLICE_F_NONBLOCK));
	NOTE("fill the kernel pipe", xwrite(k[1], big, CAP - 10));
	NOTE("S1 -> full kernel pipe, SPLICE_F_NONBLOCK",
	     xsplice(s1[0], NULL, k[1], NULL, 10, SPLICE_F_NONBLOCK));
	NOTE("S2's write end O_NONBLOCK", xfcntl(s2[1], F_SETFL, O_NONBLOCK));
	NOTE("S1 -> full S2, O_NONBLOCK", xsplice(s1[0], NULL, s2[1], NULL, 10, 0));
	NOTE("S2's write end blocking", xfcntl(s2[1], F_SETFL, 0));
	tell(1);
	NOTE("empty threaded -> S1, SPLICE_F_NONBLOCK",
	     xsplice(t[0], NULL, s1[1], NULL, 10, SPLICE_F_NONBLOCK));
	NOTE("S1 -> threaded", xsplice(s1[0], NULL, t[1], NULL, MIB, 0));
	read_check(t[0], 100, 20000 + CAP);
	xclose(&s1[1]);
	NOTE("empty S1, no writer -> threaded", xsplice(s1[0], NULL, t[1], NULL, 10, 0));
	xclose(&s2[1]);
	t_reap(pid, 10);
	xclose_every();
}

static int pipe_to_pipe(void) { return diff(run_pipe_to_pipe); }

/* ---------------------------------------------------------------------- */

static void run_tee(void)
{
	struct end s1[2], s2[2], t[2];
	pid_t pid;

	t_step("tee between pipes");
	xpipe(s1, SHARED, 0);
	xpipe(s2, SHARED, 0);
	xpipe(t, THREADED, 0);
	sync_pair();
	if (!(pid = peer(1, "write S1, read S2 and S1"))) {
		xclose(&s2[1]);
		xclose(&t[0]);
		xclose(&t[1]);
		NOTE("write 10000 to S1", xwrite(s1[1], big, 10000));
		tell(1);
		heard();
		t_step("read S2: 5000, 10000, 3000 of the same stream");
		read_check(s2[0], 5000, 0);
		read_check(s2[0], 10000, 0);
		read_check(s2[0], 3000, 0);
		tell(1);
		heard();
		t_step("read S2, then S1, whose bytes the tees left");
		read_check(s2[0], CAP, 10000);
		NOTE("FIONREAD of S1", xfionread(s1[0]));
		read_check(s1[0], 10000, 0);
		xclose(&s1[1]);
		tell(1);
		t_step("read S2 at EOF");
		NOTE("read S2 at EOF", xread(s2[0], buf, 100));
		peer_done();
	}
	forked();
	xclose(&s2[0]);
	heard();
	NOTE("tee S1 -> S2, 5000", xtee(s1[0], s2[1], 5000, 0));
	NOTE("tee S1 -> S2, 1 MiB", xtee(s1[0], s2[1], MIB, 0));
	NOTE("tee S1 -> threaded, 1 MiB", xtee(s1[0], t[1], MIB, 0));
	NOTE("tee threaded -> S2, 3000", xtee(t[0], s2[1], 3000, 0));
	NOTE("FIONREAD of S1", xfionread(s1[0]));
	NOTE("FIONREAD of S2", xfionread(s2[1]));
	read_check(t[0], 10000, 0);
	NOTE("tee S1 -> S1", xtee(s1[0], s1[1], 10, 0));
	NOTE("tee S1's write end -> S2", xtee(s1[1], s2[1], 10, 0));
	NOTE("tee S1 -> a read end", xtee(s1[0], t[0], 10, 0));
	tell(1);
	heard();	/* S2 read */
	NOTE("fill S2", xwrite(s2[1], big + 10000, CAP));
	NOTE("tee S1 -> full S2, SPLICE_F_NONBLOCK", xtee(s1[0], s2[1], 100, SPLICE_F_NONBLOCK));
	tell(1);
	heard();	/* S2 and S1 read, the peer's S1 write end closed */
	NOTE("tee empty S1 (a writer here) -> S2, SPLICE_F_NONBLOCK",
	     xtee(s1[0], s2[1], 100, SPLICE_F_NONBLOCK));
	xclose(&s1[1]);
	NOTE("tee empty S1, no writer -> S2", xtee(s1[0], s2[1], 100, 0));
	xclose(&s2[1]);
	t_reap(pid, 10);
	xclose_every();
}

static int tee_between_processes(void) { return diff(run_tee); }

/* ---------------------------------------------------------------------- */

static void run_vmsplice(void)
{
	static unsigned char b[20000];
	bool vg = t_under_valgrind();
	struct iovec iov[4];
	struct end p[2];
	long long n;
	pid_t pid;

	/* Into the write end, from a peer that unmaps its memory and exits. */
	t_step("vmsplice into the write end");
	xpipe(p, SHARED, 0);
	sync_pair();
	if (!(pid = peer(1, "vmsplice into the write end"))) {
		/* mmap: munmap leaves the bytes alone, which the kernel still refers to. */
		unsigned char *mem = mmap(NULL, 24 * PG, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_TRUE(mem != MAP_FAILED);
		xclose(&p[0]);
		t_fill(mem, 24 * PG, 0, SEED);
		iov[0] = (struct iovec){ mem, 100 };
		iov[1] = (struct iovec){ mem + 100, 0 };
		iov[2] = (struct iovec){ mem + 100, 5000 };
		iov[3] = (struct iovec){ mem + 5100, 3000 };
		hand(0, NOTE("vmsplice 4 iovecs, 8100 bytes", xvmsplice(p[1], iov, 4, 0)));
		if (!vg) {
			iov[0] = (struct iovec){ NULL, 100 };
			NOTE("vmsplice a NULL base", xvmsplice(p[1], iov, 1, 0));
			iov[0] = (struct iovec){ mem + 8100, 100 };
			iov[1] = (struct iovec){ NULL, 100 };
			hand(8100, NOTE("vmsplice 100 bytes, then a NULL base", xvmsplice(p[1], iov, 2, 0)));
		}
		/* Two slots free: unaligned memory, then aligned. */
		NOTE("write 14 pages", xwrite(p[1], mem, 14 * PG));
		iov[0] = (struct iovec){ mem + 14 * PG + 100, 5 * PG };
		n = NOTE("vmsplice 5 pages at page offset 100, 2 slots free", xvmsplice(p[1], iov, 1, 0));
		NOTE("vmsplice, full pipe, SPLICE_F_NONBLOCK", xvmsplice(p[1], iov, 1, SPLICE_F_NONBLOCK));
		hand(0, 14 * PG);
		hand(14 * PG + 100, n);
		NOTE("write 14 pages", xwrite(p[1], mem, 14 * PG));
		iov[0] = (struct iovec){ mem + 14 * PG, 5 * PG };
		n = NOTE("vmsplice 5 aligned pages, 2 slots free", xvmsplice(p[1], iov, 1, 0));
		hand(0, 14 * PG);
		hand(14 * PG, n);
		iov[0].iov_len = PG;
		NOTE("vmsplice 1 page", xvmsplice(p[1], iov, 1, 0));
		hand(0, -1);
		munmap(mem, 24 * PG);	/* the pipe's bytes outlive the memory and the process */
		peer_done();
	}
	forked();
	xclose(&p[1]);
	take_all(p[0]);
	t_reap(pid, 10);
	read_check(p[0], PG, 14 * PG);
	NOTE("read at EOF", xread(p[0], buf, 100));
	xclose_every();

	/* Out of the read end: a copy into the iovecs, like readv. */
	xpipe(p, SHARED, 0);
	sync_pair();
	if (!(pid = peer(1, "write for vmsplice out of the read end"))) {
		xclose(&p[0]);
		NOTE("write 10000", xwrite(p[1], big, 10000));
		tell(1);
		heard();
		NOTE("write 100", xwrite(p[1], big + 10000, 100));
		heard();
		peer_done();
	}
	forked();
	xclose(&p[1]);
	iov[0] = (struct iovec){ b, 100 };
	iov[1] = (struct iovec){ b + 100, 0 };
	iov[2] = (struct iovec){ b + 200, 6000 };
	iov[3] = (struct iovec){ b + 6200, 10000 };
	heard();
	t_step("vmsplice out of the read end");
	NOTE("vmsplice out, 4 iovecs", xvmsplice(p[0], iov, 4, 0));
	ASSERT_EQ(t_check(b, 100, 0, SEED), 0);
	ASSERT_EQ(t_check(b + 200, 6000, 100, SEED), 0);
	ASSERT_EQ(t_check(b + 6200, 3900, 6100, SEED), 0);
	NOTE("vmsplice out, empty, SPLICE_F_NONBLOCK", xvmsplice(p[0], iov, 4, SPLICE_F_NONBLOCK));
	tell(1);
	if (!vg) {
		iov[0] = (struct iovec){ NULL, 100 };
		t_step("vmsplice out to a NULL base");
		NOTE("vmsplice out to a NULL base", xvmsplice(p[0], iov, 1, 0));
		iov[0] = (struct iovec){ b, 100 };
	}
	read_check(p[0], 100, 10000);
	tell(1);
	t_step("vmsplice out at EOF");
	NOTE("vmsplice out at EOF", xvmsplice(p[0], iov, 4, 0));
	t_reap(pid, 10);
	xclose_every();
}

static int vmsplice_both_ends(void) { return diff(run_vmsplice); }

/* ---------------------------------------------------------------------- */

/* One byte by way of source, then one-byte writes by a peer until EAGAIN. */
static void slots_after(int source)
{
	static const char *const what[] = { "splice 1 byte from a file", "vmsplice 1 byte",
					    "tee 1 byte from another pipe", "splice 1 byte from another pipe" };
	/* mmap, unmapped only once drained: a kernel pipe refers to vmspliced memory. */
	unsigned char *mem = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long long drained = 0, *count;
	struct end p[2], q[2], file;
	struct iovec iov = { mem, 1 };
	struct t_res last;
	ssize_t n;
	pid_t pid;

	t_step("one byte, then one-byte writes");
	ASSERT_TRUE(mem != MAP_FAILED);
	count = mmap(NULL, sizeof(*count), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(count != MAP_FAILED);
	*count = 0;
	t_fill(mem, PG, 0, SEED);
	xpipe(p, SHARED, O_NONBLOCK);
	if (source == 0) {
		xfd(&file, tfile(PG));
		NOTE(what[source], xsplice(file, NULL, p[1], NULL, 1, 0));
		xclose(&file);
	} else if (source == 1) {
		NOTE(what[source], xvmsplice(p[1], &iov, 1, 0));
	} else {
		xpipe(q, SHARED, 0);
		ASSERT_EQ(xwrite(q[1], mem, 1), 1);
		NOTE(what[source], source == 2 ? xtee(q[0], p[1], 1, 0) : xsplice(q[0], NULL, p[1], NULL, 1, 0));
		xclose(&q[0]);
		xclose(&q[1]);
	}
	if (!(pid = peer(1, "one-byte writes until EAGAIN"))) {
		xclose(&p[0]);
		while ((n = xwrite(p[1], "z", 1)) == 1 && *count <= 2 * CAP)
			++*count;
		last = RES(n);
		NOTE("one-byte writes that fit", *count);
		NOTE_RES("the write after", last);
		NOTE("FIONREAD of the write end", xfionread(p[1]));
		peer_done();
	}
	xclose(&p[1]);
	t_reap(pid, 10);
	t_step("drain");
	while ((n = xread(p[0], buf, CAP)) > 0 && drained <= 2 * CAP) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != (drained + i ? 'z' : t_pattern(0, SEED)))
				t_fail_at(__FILE__, __LINE__, "byte %lld: 0x%02x", drained + i, buf[i]);
		drained += n;
	}
	last = RES(n);
	NOTE("bytes drained", drained);
	NOTE_RES("read at EOF", last);
	ASSERT_EQ(drained, *count + 1);
	xclose_every();
	munmap(count, sizeof(*count));
	munmap(mem, PG);
}

static void run_slots(void)
{
	for (int s = 0; s < 4; s++)
		slots_after(s);
}

static int slots_after_splice(void) { return diff(run_slots); }

/* ---------------------------------------------------------------------- */

/* The bytes of a loan: iovecs filling n bytes, equal to the stream at pos. */
static void lent_check(const struct iovec *iov, int cnt, ssize_t n, unsigned long long pos)
{
	size_t got = 0;

	for (int i = 0; i < cnt && got < (size_t)n; i++) {
		ASSERT_TRUE(iov[i].iov_base != NULL);
		ASSERT_EQ(t_check(iov[i].iov_base, iov[i].iov_len, pos + got, SEED), 0);
		got += iov[i].iov_len;
	}
	ASSERT_EQ(got, n);
}

static int read_lend_across_fork(void)
{
	struct iovec iov[8];
	struct end p[2], file;
	off_t off = 100;
	ssize_t n;
	pid_t pid;
	int fd;

	if (shared_splice_missing())
		return t_skip(NOT_BUILT " (no kernel counterpart to run)");
	t_run = "pagepipe";
	t_fill(big, sizeof(big), 0, SEED);
	fd = tfile(3 * PG);
	xpipe(p, SHARED, 0);
	sync_pair();
	if (!(pid = peer(1, "write for the loans"))) {
		xclose(&p[0]);
		ASSERT_EQ(xwrite(p[1], big, 10000), 10000);
		tell(1);
		heard();
		/* While the test process holds a loan: writers go on. */
		ASSERT_EQ(xwrite(p[1], big + 10000, 100), 100);
		tell(1);
		heard();
		t_wait_asleep(getppid());
		ASSERT_EQ(xwrite(p[1], big + 10100, 5000), 5000);
		heard();
		xfd(&file, fd);
		ASSERT_EQ(xsplice(file, &off, p[1], NULL, 3000, 0), 3000);
		peer_done();
	}
	forked();
	xclose(&p[1]);
	heard();
	n = pp_read_lend(p[0].f, iov, 8, MIB);
	ASSERT_GE(n, 1);
	ASSERT_LE(n, 10000);
	lent_check(iov, 8, n, 0);
	tell(1);
	heard();
	ASSERT_EQ(pp_read_done(p[0].f, 50), 0);
	/* The rest is still there, from byte 50. */
	n = pp_read_lend(p[0].f, iov, 8, 10);
	ASSERT_EQ(n, 10);
	lent_check(iov, 8, n, 50);
	ASSERT_EQ(pp_read_done(p[0].f, 0), 0);
	n = pp_read_lend(p[0].f, iov, 1, MIB);
	ASSERT_GE(n, 1);
	lent_check(iov, 1, n, 50);
	ASSERT_EQ(pp_read_done(p[0].f, 1000000), 0);	/* more than lent: what was lent */
	read_check(p[0], 10100 - 50 - (size_t)n, 50 + (unsigned long long)n);
	/* Empty: EAGAIN when non-blocking, and no loan to end. */
	ASSERT_EQ(pp_fcntl(p[0].f, F_SETFL, O_NONBLOCK), 0);
	ASSERT_ERRNO(pp_read_lend(p[0].f, iov, 8, 10), EAGAIN);
	ASSERT_ERRNO(pp_read_done(p[0].f, 1), EINVAL);
	ASSERT_EQ(pp_fcntl(p[0].f, F_SETFL, 0), 0);
	/* A blocking loan, woken by the peer's write. */
	tell(1);
	t_step("a loan asleep on the empty pipe");
	n = pp_read_lend(p[0].f, iov, 8, MIB);
	ASSERT_GE(n, 1);
	lent_check(iov, 8, n, 10100);
	ASSERT_EQ(pp_read_done(p[0].f, (size_t)n), 0);
	read_check(p[0], 5000 - (size_t)n, 10100 + (unsigned long long)n);
	/* Bytes the peer spliced from the file. */
	tell(1);
	t_step("lend what the peer spliced from the file");
	for (size_t got = 0; got < 3000; got += (size_t)n) {
		n = pp_read_lend(p[0].f, iov, 8, MIB);
		ASSERT_GE(n, 1);
		lent_check(iov, 8, n, 100 + got);
		ASSERT_EQ(pp_read_done(p[0].f, (size_t)n), 0);
	}
	t_step("lend at EOF");
	ASSERT_EQ(pp_read_lend(p[0].f, iov, 8, MIB), 0);
	ASSERT_ERRNO(pp_read_lend(p[0].f, iov, 0, 10), EINVAL);
	t_reap(pid, 10);
	xclose_every();
	close(fd);
	t_run = NULL;
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/*
 * A splice that waits for its input holds no lock of the pipe: a writer of
 * the shared pipe goes on while a splice from an empty kernel pipe into it
 * waits (the kernel's splice_pipe_to_pipe waits in ipipe_prep, unlocked).
 */
static struct pp_file *wait_in_end;
static int wait_kfd[2];

static void *splice_waiter(void *arg)
{
	struct pp_file *kin = pp_fdopen(wait_kfd[0]);
	ssize_t r = kin ? pp_splice(kin, NULL, wait_in_end, NULL, 4096, 0) : -2;

	(void)arg;
	pp_close(kin);
	return (void *)(intptr_t)r;
}

static int splice_wait_holds_no_lock(void)
{
	struct pp_file *p[2];
	pthread_t th;
	void *rv;
	char b[16];

	ASSERT_EQ(pipe(wait_kfd), 0);
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	wait_in_end = p[1];
	ASSERT_EQ(pthread_create(&th, NULL, splice_waiter, NULL), 0);
	t_sleep_ms(200);	/* let it reach its wait; were it not there yet, this proves less, not wrong */
	t_watchdog(10, "a write behind a waiting splice");
	ASSERT_EQ(pp_write(p[1], "x", 1), 1);
	t_watchdog(0, NULL);
	ASSERT_EQ(write(wait_kfd[1], "abc", 3), 3);
	t_join(th, &rv, 10);
	ASSERT_EQ((long)(intptr_t)rv, 3);
	ASSERT_EQ(pp_read(p[0], b, sizeof(b)), 4);
	ASSERT_MEM_EQ(b, "xabc", 4);
	pp_close(p[0]);
	pp_close(p[1]);
	close(wait_kfd[0]);
	close(wait_kfd[1]);
	return 0;
}

/*
 * An endpoint (pp_file_new) whose splice_read waits for its source, here a
 * kernel pipe the test opens when it is done: pp_file_ops promises that a
 * blocking splice calls it with no pipe lock held.  A write to the shared
 * pipe from another thread must go through while it waits; holding the
 * writers' lock there made that write wait, and after 2 s take the live
 * holder for a scribble: EIO, the arena poisoned for every process.
 */
static int gate[2];
static atomic_int gate_waiting;

static ssize_t gated_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags)
{
	void *page;
	char c;

	(void)in;
	(void)pos;
	(void)flags;
	if (!nr_bufs || len < 3)
		return -EINVAL;
	atomic_store(&gate_waiting, 1);
	if (read(gate[0], &c, 1) != 1)
		return -EIO;
	atomic_store(&gate_waiting, 0);
	page = pp_page_alloc();
	if (!page)
		return -ENOMEM;
	memcpy(page, "abc", 3);
	bufs[0] = (struct pp_buf){ .page = page, .len = 3, .ops = &pp_anon_buf_ops };
	return 3;
}

static const struct pp_file_ops gated_ops = {
	.splice_read = gated_splice_read,
	.name = "gated",
};

/* A thread's blocking splice of len bytes from an endpoint of ops into out. */
struct endpoint_splice {
	const struct pp_file_ops *ops;
	struct pp_file *out;
	size_t len;
};

static void *endpoint_splicer(void *arg)
{
	const struct endpoint_splice *j = arg;
	struct pp_file *ep = pp_file_new(j->ops, O_RDONLY, NULL);
	ssize_t r;

	if (!ep)
		return (void *)(intptr_t)-ENOMEM;
	r = pp_splice(ep, NULL, j->out, NULL, j->len, 0);
	pp_close(ep);
	return (void *)(intptr_t)(r < 0 ? -errno : r);
}

static int endpoint_read_holds_no_lock(void)
{
	struct endpoint_splice job;
	struct pp_file *p[2];
	pthread_t th;
	void *rv;
	char b[16];

	ASSERT_EQ(pipe(gate), 0);
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	job = (struct endpoint_splice){ &gated_ops, p[1], 4096 };
	ASSERT_EQ(pthread_create(&th, NULL, endpoint_splicer, &job), 0);
	t_watchdog(20, "a write beside an endpoint's waiting splice_read");
	while (!atomic_load(&gate_waiting))
		t_sleep_ms(1);
	/* Past LOCK_STUCK_WAITS (2 s): long enough for the old way to poison. */
	t_sleep_ms(2500);
	ASSERT_EQ(pp_write(p[1], "x", 1), 1);
	ASSERT_EQ(atomic_load(&gate_waiting), 1);	/* it went by while the endpoint waited */
	ASSERT_EQ(write(gate[1], "g", 1), 1);
	t_join(th, &rv, 10);
	t_watchdog(0, NULL);
	ASSERT_EQ((long)(intptr_t)rv, 3);
	ASSERT_EQ(pp_read(p[0], b, sizeof(b)), 4);
	ASSERT_MEM_EQ(b, "xabc", 4);
	pp_close(p[0]);
	pp_close(p[1]);
	close(gate[0]);
	close(gate[1]);
	return 0;
}

/*
 * The same kind of endpoint, taking more than one reservation to place
 * what it produced, with a buffer that fails in the middle: the bytes
 * after the failure must not follow the bytes before it.  A pipe of four
 * slots, empty when the splice counts its room; the endpoint (called with
 * no lock) first writes three pages into that pipe itself, then returns
 * four 100-byte buffers A, B, C, D, with C failing its confirm (EIO).  One
 * slot is left: A goes in.  Once the pipe holds W W W A, we read two
 * pages, so the next reservation gets two slots: B, and C, which fails.
 * The splice must stop there (200 bytes); going on would queue D after B.
 */
static struct pp_file *self_out;

static int failing_confirm(struct pp_pipe *pipe, struct pp_buf *buf)
{
	(void)pipe;
	(void)buf;
	return -EIO;
}

/* An anonymous page whose confirm fails: set up by the test. */
static struct pp_buf_ops failing_anon;

static ssize_t self_filling_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
					unsigned int nr_bufs, size_t len, unsigned int flags)
{
	static char page[4096];

	(void)in;
	(void)pos;
	(void)flags;
	if (nr_bufs < 4 || len < 400)
		return -EINVAL;
	for (int i = 0; i < 3; i++) {
		memset(page, 'W', sizeof(page));
		if (pp_write(self_out, page, sizeof(page)) != (ssize_t)sizeof(page))
			return -EIO;
	}
	for (int i = 0; i < 4; i++) {
		void *pg = pp_page_alloc();

		if (!pg)
			return -ENOMEM;
		memset(pg, 'A' + i, 100);
		bufs[i] = (struct pp_buf){ .page = pg, .len = 100,
					   .ops = i == 2 ? &failing_anon : &pp_anon_buf_ops };
	}
	return 400;
}

static const struct pp_file_ops self_filling_ops = {
	.splice_read = self_filling_splice_read,
	.name = "self-filling",
};

static int endpoint_failure_stops_splice(void)
{
	struct endpoint_splice job;
	struct pp_file *p[2];
	static char got[4 * 4096 + 400];
	size_t have = 0;
	pthread_t th;
	void *rv;
	int n;

	failing_anon = pp_anon_buf_ops;
	failing_anon.confirm = failing_confirm;
	failing_anon.name = "failing";
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 4 * 4096), 4 * 4096);
	self_out = p[1];
	job = (struct endpoint_splice){ &self_filling_ops, p[1], 4 * 4096 };
	ASSERT_EQ(pthread_create(&th, NULL, endpoint_splicer, &job), 0);
	t_watchdog(20, "an endpoint's failing buffer across two reservations");
	do {
		t_sleep_ms(1);
		ASSERT_EQ(pp_ioctl(p[0], FIONREAD, &n), 0);
	} while (n < 3 * 4096 + 100);
	ASSERT_EQ(n, 3 * 4096 + 100);	/* W W W A: the pipe is full */
	ASSERT_EQ(pp_read(p[0], got, 2 * 4096), 2 * 4096);
	have = 2 * 4096;
	t_join(th, &rv, 10);
	t_watchdog(0, NULL);
	ASSERT_EQ((long)(intptr_t)rv, 200);
	ASSERT_EQ(pp_fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	for (ssize_t r; (r = pp_read(p[0], got + have, sizeof(got) - have)) > 0;)
		have += (size_t)r;
	ASSERT_EQ(have, (size_t)3 * 4096 + 200);
	for (size_t i = 0; i < 3 * 4096; i++)
		if (got[i] != 'W')
			t_fail_at(__FILE__, __LINE__, "byte %zu: %c, want W", i, got[i]);
	for (size_t i = 0; i < 200; i++)
		if (got[3 * 4096 + i] != (i < 100 ? 'A' : 'B'))
			t_fail_at(__FILE__, __LINE__, "byte %zu after the pages: %c, want %c", i,
				  got[3 * 4096 + i], i < 100 ? 'A' : 'B');
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/*
 * vmsplice of memory that is not mapped, into a shared pipe, against the
 * kernel: EFAULT for none of it, the bytes before it for a part (the
 * copy into the arena must not fault on it).
 */
static int vmsplice_unmapped(void)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pp_file *p[2];
	int k[2];
	struct iovec gone, part;

	if (t_under_valgrind())
		return t_skip("valgrind reports the unmapped address the test passes on purpose");
	ASSERT_TRUE(m != MAP_FAILED);
	memset(m, 'v', psz);
	ASSERT_EQ(munmap(m + psz, psz), 0);
	gone = (struct iovec){ m + psz, 100 };
	part = (struct iovec){ m + psz - 100, 300 };
	ASSERT_EQ(pipe(k), 0);
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	ASSERT_SAME(vmsplice(k[1], &gone, 1, 0), pp_vmsplice(p[1], &gone, 1, 0));
	ASSERT_SAME(vmsplice(k[1], &part, 1, 0), pp_vmsplice(p[1], &part, 1, 0));
	ASSERT_SAME_FIONREAD(k[0], p[0]);
	pp_close(p[0]);
	pp_close(p[1]);
	close(k[0]);
	close(k[1]);
	munmap(m, psz);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(file_to_pipe),
		T_SUBTEST(pipe_to_file),
		T_SUBTEST(pipe_to_socket),
		T_SUBTEST(pipe_to_pipe),
		T_SUBTEST(tee_between_processes),
		T_SUBTEST(vmsplice_both_ends),
		T_SUBTEST(slots_after_splice),
		T_SUBTEST(read_lend_across_fork),
		T_SUBTEST(splice_wait_holds_no_lock),
		T_SUBTEST(endpoint_read_holds_no_lock),
		T_SUBTEST(endpoint_failure_stops_splice),
		T_SUBTEST(vmsplice_unmapped),
	};
	const char *v = getenv("SHARED_SPLICE_VERBOSE");

	verbose = v && *v == '1';
	atexit(t_run_report);
	return T_RUN_SUBTESTS(tests);
}
