// SPDX-License-Identifier: MIT
/*
 * Description: pp_write_lend() and pp_write_done(), the write that fills
 * the pipe's own pages in place (man/pp_write_lend.3).  Every sub-test but
 * across_fork runs twice: on a threaded pipe (pp_pipe2(ends, 0)) and on a
 * shared one (PP_O_SHARED, whose pages are the arena's).
 *  - basic: a lease of 10000 bytes is 3 iovecs (4096, 4096, 1808), each
 *    the start of its own page; while it is held a reader takes the bytes
 *    written before it and then finds the pipe empty (EAGAIN, FIONREAD 0);
 *    pp_write_done(9000) queues exactly those bytes (FIONREAD, one read
 *    returns them); a filled count past the lease is clamped; done(0)
 *    queues nothing; a lease is at most 64 pages even
 *    with 1024 iovecs and a 1 MiB pipe, and at most iovcnt pages; 300
 *    leases of 16 pages of which one is filled do not run the pipe out of
 *    pages (the unfilled ones go back); errors: a second done, done with no
 *    lease (and, shared, on another copy of the write end while the
 *    original holds one) EINVAL, count 0 gives 0 and no lease, a read end
 *    EBADF, iovcnt 0, -1 or 1025 EINVAL, a NULL iovec EFAULT, a NULL file
 *    EBADF, a pp_fdopen() file EINVAL; the pipe works after all of them;
 *  - room: 15 of 16 slots full, a lease of 64 KiB lends 4096 bytes (14
 *    full: 8192; a one-page pipe: 4096); a full O_NONBLOCK pipe gives
 *    EAGAIN and no lease; a blocking lease on a full pipe sleeps (seen
 *    asleep in the kernel, not returned) until a reader thread (shared: a
 *    forked reader process) reads a page, then lends that one page;
 *  - no_merge: after done(1) the pipe still takes 15 whole-page writes;
 *    a 1-byte write after done(1) starts a new slot (then only 14 fit,
 *    where after two 1-byte writes 15 fit); the bytes read back in order;
 *  - epipe: with the read end closed a lease fails with EPIPE and raises
 *    SIGPIPE once, and not with PP_O_NOSIGPIPE; a read end closed (by
 *    another thread) while a lease is held: done still returns 0, the next
 *    lease and write are EPIPE with SIGPIPE; a lease asleep on a full
 *    pipe fails with EPIPE (and SIGPIPE) when the last reader (another
 *    thread; shared: another process) closes or exits;
 *  - across_fork (shared only): a forked child writes 4 MiB by leases of
 *    random size (1..70000 bytes, filled fully, partly or not at all) with
 *    a stamp of the byte offset; the parent reads by pp_read_lend() /
 *    pp_read_done() (consuming part of each loan) and pp_read() in turn and
 *    checks every byte; the pipe is 1 MiB from 1 MiB to 3 MiB of the
 *    stream (F_SETPIPE_SZ from the reader; the shrink back retried while
 *    EBUSY), 64 KiB otherwise;
 *  - threads: two writer threads of records built in leases (writer id,
 *    sequence, length, checksum, a payload stamped from writer and
 *    sequence; as long as the lease or less) and one reader
 *    thread (pp_read and pp_read_lend in turn) for about a second: every
 *    record whole, in order per writer, none lost, none torn (a lease
 *    whose slots were shown before its bytes is caught here, by TSan in
 *    CI as well).
 * A hang fails: t_run_subtests' timeout, t_join limits and, in forked
 * peers, t_watchdog.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define PG	4096
#define CAP	(16 * PG)
#define SEED	57

/* ---------------------------------------------------------------------- */
/* Which run a failure was in (t_run, t_run_report): threaded or shared. */

static void open_pipe(struct pp_file *p[2], bool shared, int flags)
{
	t_run = shared ? "shared" : "threaded";
	if (pp_pipe2(p, flags | (shared ? PP_O_SHARED : 0)) < 0)
		t_fail_at(__FILE__, __LINE__, "pp_pipe2(%s%#x): %s", shared ? "PP_O_SHARED | " : "",
			  flags, strerror(errno));
}

static void close_pipe(struct pp_file *p[2])
{
	for (int e = 0; e < 2; e++)
		if (p[e])
			ASSERT_EQ(pp_close(p[e]), 0);
	p[0] = p[1] = NULL;
}

static void set_nonblock(struct pp_file *f, bool on)
{
	ASSERT_EQ(pp_fcntl(f, F_SETFL, on ? O_NONBLOCK : 0), 0);
}

/* A lease's iovecs: whole pages, each page-aligned, the last cut, n bytes in all. */
static int check_lease(const struct iovec *iov, int maxcnt, ssize_t n)
{
	size_t left = (size_t)n;
	int k = 0;

	ASSERT_TRUE(n > 0);
	while (left) {
		ASSERT_TRUE(k < maxcnt);
		ASSERT_EQ((uintptr_t)iov[k].iov_base % PG, 0);
		ASSERT_EQ(iov[k].iov_len, left < PG ? left : PG);
		for (int j = 0; j < k; j++)
			ASSERT_NE(iov[j].iov_base, iov[k].iov_base);
		left -= iov[k].iov_len;
		k++;
	}
	return k;
}

/* Copy len bytes into the leased iovecs at logical offset off. */
static void lease_put(const struct iovec *iov, size_t off, const void *src, size_t len)
{
	const unsigned char *s = src;
	int k = 0;

	while (off >= iov[k].iov_len) {
		off -= iov[k].iov_len;
		k++;
	}
	while (len) {
		size_t n = iov[k].iov_len - off < len ? iov[k].iov_len - off : len;

		memcpy((unsigned char *)iov[k].iov_base + off, s, n);
		s += n;
		len -= n;
		off = 0;
		k++;
	}
}

/* Stamp len bytes of stream position pos.. into the lease from its start. */
static void lease_stamp(const struct iovec *iov, size_t len, unsigned long long pos,
			unsigned int seed)
{
	for (int k = 0; len; k++) {
		size_t n = iov[k].iov_len < len ? iov[k].iov_len : len;

		t_fill(iov[k].iov_base, n, pos, seed);
		pos += n;
		len -= n;
	}
}

/* Write whole pages with O_NONBLOCK until EAGAIN; how many went in. */
static int pages_that_fit(struct pp_file *w)
{
	unsigned char page[PG];
	int n = 0;
	ssize_t r;

	memset(page, 'P', sizeof(page));
	set_nonblock(w, true);
	while ((r = pp_write(w, page, PG)) == PG)
		ASSERT_TRUE(++n <= 256);
	ASSERT_EQ(r, -1);
	ASSERT_EQ(errno, EAGAIN);
	set_nonblock(w, false);
	return n;
}

/* A word in memory both processes see. */
static atomic_int *shared_word(void)
{
	atomic_int *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			     -1, 0);

	ASSERT_TRUE(w != MAP_FAILED);
	atomic_store(w, 0);
	return w;
}

static unsigned int rnd(unsigned long long *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (unsigned int)(*s >> 11);
}

/* ---------------------------------------------------------------------- */

static void basic_on(bool shared)
{
	struct pp_file *p[2], *q[2];
	static struct iovec iov[1024];
	static unsigned char out[300 * 1024];
	ssize_t n;
	int k[2];

	open_pipe(p, shared, 0);

	/* 10000 bytes: two whole pages and 1808 bytes of a third. */
	memset(iov, 0, sizeof(iov));
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);
	n = pp_write_lend(p[1], iov, 8, 10000);
	ASSERT_EQ(n, 10000);
	ASSERT_EQ(check_lease(iov, 8, n), 3);
	ASSERT_EQ(iov[0].iov_len, 4096);
	ASSERT_EQ(iov[1].iov_len, 4096);
	ASSERT_EQ(iov[2].iov_len, 1808);
	ASSERT_EQ(iov[3].iov_len, 0);		/* entries past the lease untouched */
	lease_stamp(iov, 10000, 0, SEED);
	/* A reader goes on meanwhile, and sees nothing of the lease before done. */
	set_nonblock(p[0], true);
	ASSERT_EQ(t_fionread(p[0]), 5);
	ASSERT_EQ(pp_read(p[0], out, sizeof(out)), 5);
	ASSERT_MEM_EQ(out, "hello", 5);
	ASSERT_ERRNO(pp_read(p[0], out, sizeof(out)), EAGAIN);
	ASSERT_EQ(t_fionread(p[0]), 0);
	set_nonblock(p[0], false);
	ASSERT_EQ(pp_write_done(p[1], 9000), 0);
	ASSERT_EQ(t_fionread(p[0]), 9000);
	ASSERT_EQ(pp_read(p[0], out, sizeof(out)), 9000);
	ASSERT_EQ(t_check(out, 9000, 0, SEED), 0);
	ASSERT_EQ(t_fionread(p[0]), 0);

	/* The lease is over: a second done, and done with no lease at all. */
	ASSERT_ERRNO(pp_write_done(p[1], 1), EINVAL);
	open_pipe(q, shared, 0);
	ASSERT_ERRNO(pp_write_done(q[1], 0), EINVAL);
	ASSERT_ERRNO(pp_write_done(q[0], 0), EBADF);
	/* Another pipe's write end holds no lease while p's does. */
	ASSERT_EQ(pp_write_lend(p[1], iov, 1, 10), 10);
	ASSERT_ERRNO(pp_write_done(q[1], 10), EINVAL);
	close_pipe(q);
	ASSERT_EQ(pp_write_done(p[1], 0), 0);	/* done(0): nothing queued */
	ASSERT_EQ(t_fionread(p[0]), 0);

	if (shared) {
		/* A copy of the same write end (export, import) holds no lease. */
		int fds[2];
		struct pp_file *copy;

		ASSERT_EQ(pp_export(p[1], fds), 0);
		copy = pp_import(fds, 0);
		ASSERT_TRUE(copy != NULL);
		close(fds[0]);
		close(fds[1]);
		n = pp_write_lend(p[1], iov, 4, 5000);
		ASSERT_EQ(n, 5000);
		ASSERT_ERRNO(pp_write_done(copy, 5000), EINVAL);
		lease_stamp(iov, 5000, 0, SEED + 1);
		ASSERT_EQ(pp_write_done(p[1], 5000), 0);
		ASSERT_EQ(pp_read(p[0], out, sizeof(out)), 5000);
		ASSERT_EQ(t_check(out, 5000, 0, SEED + 1), 0);
		ASSERT_EQ(pp_close(copy), 0);
	}

	/* filled past the lease is clamped to it. */
	n = pp_write_lend(p[1], iov, 4, 5000);
	ASSERT_EQ(n, 5000);
	ASSERT_EQ(check_lease(iov, 4, n), 2);
	lease_stamp(iov, 5000, 100, SEED);
	ASSERT_EQ(pp_write_done(p[1], SIZE_MAX), 0);
	ASSERT_EQ(t_fionread(p[0]), 5000);
	ASSERT_EQ(pp_read(p[0], out, sizeof(out)), 5000);
	ASSERT_EQ(t_check(out, 5000, 100, SEED), 0);

	/* count 0: 0, no lease. */
	ASSERT_EQ(pp_write_lend(p[1], iov, 4, 0), 0);
	ASSERT_ERRNO(pp_write_done(p[1], 0), EINVAL);

	/* At most iovcnt pages; at most 64 even with 1024 iovecs and 256 free slots. */
	n = pp_write_lend(p[1], iov, 2, 100000);
	ASSERT_EQ(n, 2 * PG);
	ASSERT_EQ(pp_write_done(p[1], 0), 0);
	n = pp_write_lend(p[1], iov, 1024, 100000);	/* 16 slots: 16 pages */
	ASSERT_EQ(n, 16 * PG);
	ASSERT_EQ(pp_write_done(p[1], 0), 0);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	n = pp_write_lend(p[1], iov, 1024, 1 << 20);
	ASSERT_EQ(n, 64 * PG);
	ASSERT_EQ(check_lease(iov, 1024, n), 64);
	lease_stamp(iov, (size_t)n, 0, SEED + 2);
	ASSERT_EQ(pp_write_done(p[1], (size_t)n), 0);
	ASSERT_EQ(t_fionread(p[0]), 64 * PG);
	ASSERT_EQ(t_read_full(p[0], out, 64 * PG), 64 * PG);
	ASSERT_EQ(t_check(out, 64 * PG, 0, SEED + 2), 0);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, CAP), CAP);

	/*
	 * The pages not filled go back: 300 leases of 16 pages, one byte
	 * each filled and read.  A shared arena has 264 pages; a leak of 15
	 * a round runs it dry within 20 rounds (ENOMEM).
	 */
	for (int i = 0; i < 300; i++) {
		n = pp_write_lend(p[1], iov, 64, CAP);
		if (n != CAP)
			t_fail_at(__FILE__, __LINE__, "round %d: pp_write_lend = %zd (%s), want %d", i,
				  n, n < 0 ? strerror(errno) : "ok", CAP);
		*(unsigned char *)iov[0].iov_base = (unsigned char)i;
		ASSERT_EQ(pp_write_done(p[1], 1), 0);
		ASSERT_EQ(pp_read(p[0], out, 10), 1);
		ASSERT_EQ(out[0], (unsigned char)i);
	}

	/* Errors, each with no lease made. */
	ASSERT_ERRNO(pp_write_lend(p[0], iov, 4, 100), EBADF);
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 0, 100), EINVAL);
	ASSERT_ERRNO(pp_write_lend(p[1], iov, -1, 100), EINVAL);
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 1025, 100), EINVAL);
	ASSERT_ERRNO(pp_write_lend(p[1], NULL, 4, 100), EFAULT);
	ASSERT_ERRNO(pp_write_lend(NULL, iov, 4, 100), EBADF);
	ASSERT_ERRNO(pp_write_done(NULL, 0), EBADF);
	ASSERT_ERRNO(pp_write_done(p[1], 0), EINVAL);
	t_kpipe2(k, 0);
	{
		struct pp_file *os = pp_fdopen(k[1]);

		ASSERT_TRUE(os != NULL);
		ASSERT_ERRNO(pp_write_lend(os, iov, 4, 100), EINVAL);
		ASSERT_ERRNO(pp_write_done(os, 0), EINVAL);
		ASSERT_EQ(pp_close(os), 0);
	}
	close(k[0]);
	close(k[1]);

	/* Nothing was left held: a write and a lease still go through. */
	ASSERT_EQ(pp_write(p[1], "xyz", 3), 3);
	ASSERT_EQ(pp_write_lend(p[1], iov, 4, 3), 3);
	memcpy(iov[0].iov_base, "abc", 3);
	ASSERT_EQ(pp_write_done(p[1], 3), 0);
	ASSERT_EQ(pp_read(p[0], out, 100), 6);
	ASSERT_MEM_EQ(out, "xyzabc", 6);
	close_pipe(p);
	t_run = NULL;
}

static int basic(void)
{
	basic_on(false);
	basic_on(true);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

struct blocked {
	struct pp_file *r;
	pid_t tid;			/* the thread that leases */
	atomic_int leasing;		/* it is about to */
	atomic_int returned;		/* its lease came back */
	atomic_int seen_returned;	/* ... before the reader read: a failure */
	bool close_instead;		/* epipe: close the read end, do not read */
};

static void *reader_after_sleep(void *arg)
{
	struct blocked *b = arg;
	unsigned char page[PG];

	while (!atomic_load(&b->leasing))
		sched_yield();
	t_wait_in_syscall(b->tid, SYS_futex, 5);
	atomic_store(&b->seen_returned, atomic_load(&b->returned));
	if (b->close_instead) {
		if (pp_close(b->r) != 0)
			t_fail_at(__FILE__, __LINE__, "pp_close: %s", strerror(errno));
		return NULL;
	}
	if (pp_read(b->r, page, PG) != PG)
		t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
	return NULL;
}

static void room_on(bool shared)
{
	struct pp_file *p[2];
	struct iovec iov[64];
	unsigned char page[PG], out[CAP];
	ssize_t n;

	open_pipe(p, shared, 0);
	t_fill(page, PG, 0, SEED);
	for (int i = 0; i < 14; i++)
		ASSERT_EQ(pp_write(p[1], page, PG), PG);
	/* Two free slots: two pages, whatever count and iovcnt allow. */
	n = pp_write_lend(p[1], iov, 64, CAP);
	ASSERT_EQ(n, 2 * PG);
	ASSERT_EQ(check_lease(iov, 64, n), 2);
	ASSERT_EQ(pp_write_done(p[1], 0), 0);
	ASSERT_EQ(pp_write(p[1], page, PG), PG);
	/* One free slot. */
	n = pp_write_lend(p[1], iov, 64, CAP);
	ASSERT_EQ(n, PG);
	ASSERT_EQ(check_lease(iov, 64, n), 1);
	memcpy(iov[0].iov_base, page, PG);
	ASSERT_EQ(pp_write_done(p[1], PG), 0);
	ASSERT_EQ(t_fionread(p[0]), CAP);

	/* Full, O_NONBLOCK: EAGAIN, and no lease made. */
	set_nonblock(p[1], true);
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 64, CAP), EAGAIN);
	ASSERT_ERRNO(pp_write_done(p[1], 0), EINVAL);
	set_nonblock(p[1], false);

	/* Full, blocking: the lease sleeps until a page is read, then lends that one. */
	if (!shared) {
		struct blocked b = { .r = p[0], .tid = (pid_t)syscall(SYS_gettid) };
		pthread_t th;

		ASSERT_EQ(pthread_create(&th, NULL, reader_after_sleep, &b), 0);
		atomic_store(&b.leasing, 1);
		n = pp_write_lend(p[1], iov, 64, CAP);
		atomic_store(&b.returned, 1);
		t_join(th, NULL, 10);
		ASSERT_EQ(atomic_load(&b.seen_returned), 0);
		ASSERT_EQ(n, PG);
	} else {
		atomic_int *leasing = shared_word(), *returned = shared_word();
		pid_t pid = t_fork_peer(1, "room: a reader process, after the lease sleeps");

		if (!pid) {
			int rc;

			ASSERT_EQ(pp_close(p[1]), 0);
			while (!atomic_load(leasing))
				t_sleep_ms(1);
			t_wait_asleep(getppid());
			rc = atomic_load(returned);
			ASSERT_EQ(pp_read(p[0], out, PG), PG);
			ASSERT_EQ(pp_close(p[0]), 0);
			_exit(rc ? 3 : 0);
		}
		atomic_store(leasing, 1);
		n = pp_write_lend(p[1], iov, 64, CAP);
		atomic_store(returned, 1);
		t_reap(pid, 10);
		ASSERT_EQ(n, PG);
		munmap(leasing, sizeof(*leasing));
		munmap(returned, sizeof(*returned));
	}
	ASSERT_EQ(check_lease(iov, 64, n), 1);
	t_fill(iov[0].iov_base, PG, 16 * PG, SEED);
	ASSERT_EQ(pp_write_done(p[1], PG), 0);
	ASSERT_EQ(t_fionread(p[0]), CAP);
	ASSERT_EQ(t_read_full(p[0], out, CAP), CAP);
	for (int i = 0; i < 15; i++)
		ASSERT_EQ(t_check(out + i * PG, PG, 0, SEED), 0);
	ASSERT_EQ(t_check(out + 15 * PG, PG, 16 * PG, SEED), 0);

	/* A one-page pipe, empty: one page. */
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, PG), PG);
	n = pp_write_lend(p[1], iov, 64, CAP);
	ASSERT_EQ(n, PG);
	ASSERT_EQ(pp_write_done(p[1], 0), 0);
	close_pipe(p);
	t_run = NULL;
}

static int room(void)
{
	room_on(false);
	room_on(true);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

static void no_merge_on(bool shared)
{
	struct pp_file *p[2];
	struct iovec iov[4];
	static unsigned char out[CAP + 16];

	/* A lease of one byte, then whole pages: the lease took one slot. */
	open_pipe(p, shared, 0);
	ASSERT_EQ(pp_write_lend(p[1], iov, 4, 1), 1);
	ASSERT_EQ(iov[0].iov_len, 1);
	*(char *)iov[0].iov_base = 'A';
	ASSERT_EQ(pp_write_done(p[1], 1), 0);
	ASSERT_EQ(pages_that_fit(p[1]), 15);
	ASSERT_EQ(t_read_full(p[0], out, 1 + 15 * PG), 1 + 15 * PG);
	ASSERT_EQ(out[0], 'A');
	close_pipe(p);

	/* The control: two 1-byte writes share a slot, and 15 pages fit. */
	open_pipe(p, shared, 0);
	ASSERT_EQ(pp_write(p[1], "A", 1), 1);
	ASSERT_EQ(pp_write(p[1], "B", 1), 1);
	ASSERT_EQ(pages_that_fit(p[1]), 15);
	close_pipe(p);

	/* A 1-byte write after done(1) does not go into the lease's slot: 14 fit. */
	open_pipe(p, shared, 0);
	ASSERT_EQ(pp_write_lend(p[1], iov, 4, 1), 1);
	*(char *)iov[0].iov_base = 'A';
	ASSERT_EQ(pp_write_done(p[1], 1), 0);
	ASSERT_EQ(pp_write(p[1], "B", 1), 1);
	ASSERT_EQ(pp_write(p[1], "C", 1), 1);	/* merges with B's slot */
	ASSERT_EQ(pages_that_fit(p[1]), 14);
	ASSERT_EQ(t_fionread(p[0]), 3 + 14 * PG);
	ASSERT_EQ(t_read_full(p[0], out, 3 + 14 * PG), 3 + 14 * PG);
	ASSERT_MEM_EQ(out, "ABC", 3);
	for (int i = 0; i < 14 * PG; i++)
		ASSERT_EQ(out[3 + i], 'P');

	/* The same after a lease of two pages, the second part filled. */
	ASSERT_EQ(pp_write_lend(p[1], iov, 4, 2 * PG), 2 * PG);
	lease_stamp(iov, PG + 10, 0, SEED);
	ASSERT_EQ(pp_write_done(p[1], PG + 10), 0);
	ASSERT_EQ(pp_write(p[1], "Z", 1), 1);
	ASSERT_EQ(pages_that_fit(p[1]), 13);
	ASSERT_EQ(t_read_full(p[0], out, PG + 11), PG + 11);
	ASSERT_EQ(t_check(out, PG + 10, 0, SEED), 0);
	ASSERT_EQ(out[PG + 10], 'Z');
	close_pipe(p);
	t_run = NULL;
}

static int no_merge(void)
{
	no_merge_on(false);
	no_merge_on(true);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

/* pp_close() from another thread: a close that waits on the lease fails by t_join. */
static void *close_in_thread(void *arg)
{
	if (pp_close(arg) != 0)
		t_fail_at(__FILE__, __LINE__, "pp_close: %s", strerror(errno));
	return NULL;
}

static void epipe_on(bool shared)
{
	struct pp_file *p[2];
	struct iovec iov[4];
	unsigned char page[PG];
	ssize_t n;

	t_sigpipe_count_start();
	open_pipe(p, shared, 0);
	ASSERT_EQ(pp_close(p[0]), 0);
	p[0] = NULL;
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 4, 100), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 1);
	ASSERT_ERRNO(pp_write_done(p[1], 100), EINVAL);
	set_nonblock(p[1], true);
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 4, 100), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 2);
	close_pipe(p);

	open_pipe(p, shared, PP_O_NOSIGPIPE);
	ASSERT_EQ(pp_close(p[0]), 0);
	p[0] = NULL;
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 4, 100), EPIPE);
	ASSERT_ERRNO(pp_write_done(p[1], 100), EINVAL);
	ASSERT_EQ(t_sigpipe_count(), 2);
	close_pipe(p);

	/* The reader goes while a lease is held: done still ends it, the next lease is EPIPE. */
	open_pipe(p, shared, 0);
	ASSERT_EQ(pp_write_lend(p[1], iov, 4, 5000), 5000);
	{
		pthread_t th;

		ASSERT_EQ(pthread_create(&th, NULL, close_in_thread, p[0]), 0);
		t_join(th, NULL, 10);
		p[0] = NULL;
	}
	lease_stamp(iov, 5000, 0, SEED);
	ASSERT_EQ(pp_write_done(p[1], 5000), 0);
	ASSERT_EQ(t_sigpipe_count(), 2);
	ASSERT_ERRNO(pp_write_lend(p[1], iov, 4, 100), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 3);
	ASSERT_ERRNO(pp_write(p[1], "x", 1), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 4);
	close_pipe(p);

	/* Asleep on a full pipe when the last reader goes. */
	open_pipe(p, shared, 0);
	memset(page, 'e', sizeof(page));
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(pp_write(p[1], page, PG), PG);
	if (!shared) {
		struct blocked b = { .r = p[0], .tid = (pid_t)syscall(SYS_gettid),
				     .close_instead = true };
		pthread_t th;

		ASSERT_EQ(pthread_create(&th, NULL, reader_after_sleep, &b), 0);
		atomic_store(&b.leasing, 1);
		errno = 0;
		n = pp_write_lend(p[1], iov, 4, PG);
		atomic_store(&b.returned, 1);
		t_join(th, NULL, 10);
		p[0] = NULL;
		ASSERT_EQ(atomic_load(&b.seen_returned), 0);
	} else {
		atomic_int *leasing = shared_word();
		pid_t pid = t_fork_peer(1, "epipe: the reader process exits while the lease sleeps");

		if (!pid) {
			ASSERT_EQ(pp_close(p[1]), 0);
			while (!atomic_load(leasing))
				t_sleep_ms(1);
			t_wait_asleep(getppid());
			ASSERT_EQ(pp_close(p[0]), 0);
			_exit(0);
		}
		ASSERT_EQ(pp_close(p[0]), 0);
		p[0] = NULL;
		atomic_store(leasing, 1);
		errno = 0;
		n = pp_write_lend(p[1], iov, 4, PG);
		t_reap(pid, 10);
		munmap(leasing, sizeof(*leasing));
	}
	if (n != -1 || errno != EPIPE)
		t_fail_at(__FILE__, __LINE__, "a lease asleep when the reader left: %zd (%s), want EPIPE",
			  n, strerror(errno));
	ASSERT_EQ(t_sigpipe_count(), 5);
	ASSERT_ERRNO(pp_write_done(p[1], 0), EINVAL);
	close_pipe(p);
	t_run = NULL;
}

static int epipe(void)
{
	epipe_on(false);
	epipe_on(true);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

#define XF_TOTAL	(4u << 20)
#define XF_SEED		71

static void across_fork_writer(struct pp_file *w)
{
	static struct iovec iov[64];
	unsigned long long s = 0x5eed1234ull, off = 0;
	unsigned int partial = 0, empty = 0;

	while (off < XF_TOTAL) {
		size_t want = 1 + rnd(&s) % 70000, fill;
		ssize_t n;
		unsigned int how = rnd(&s) % 8;

		if (want > XF_TOTAL - off)
			want = XF_TOTAL - off;
		n = pp_write_lend(w, iov, 64, want);
		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "pp_write_lend(%zu) at %llu: %zd (%s)", want, off,
				  n, strerror(errno));
		ASSERT_LE(n, (ssize_t)want);
		check_lease(iov, 64, n);
		fill = (size_t)n;
		if (how == 0) {
			fill = 0;			/* nothing: every page goes back */
			empty++;
		} else if (how == 1 && n > 1) {
			fill = 1 + rnd(&s) % ((size_t)n - 1);	/* a part */
			partial++;
		}
		/* The bytes past fill are wrong ones: they must not show. */
		if (fill < (size_t)n)
			lease_stamp(iov, (size_t)n, off, XF_SEED + 1);
		lease_stamp(iov, fill, off, XF_SEED);
		ASSERT_EQ(pp_write_done(w, fill), 0);
		off += fill;
	}
	ASSERT_TRUE(partial > 0);
	ASSERT_TRUE(empty > 0);
}

static int across_fork(void)
{
	struct pp_file *p[2];
	static struct iovec iov[64];
	static unsigned char buf[200000];
	unsigned long long s = 0xfeedull, off = 0;
	bool grown = false, shrunk = false;
	pid_t pid;

	open_pipe(p, true, 0);
	pid = t_fork_peer(1, "across_fork: the writer process");
	if (!pid) {
		ASSERT_EQ(pp_close(p[0]), 0);
		across_fork_writer(p[1]);
		ASSERT_EQ(pp_close(p[1]), 0);
		_exit(0);
	}
	ASSERT_EQ(pp_close(p[1]), 0);
	p[1] = NULL;
	t_watchdog(25, "across_fork: the reading parent");
	for (unsigned int i = 0;; i++) {
		ssize_t n;

		if (!grown && off >= (1u << 20)) {
			ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, 1 << 20), 1 << 20);
			grown = true;
		}
		if (grown && !shrunk && off >= (3u << 20)) {
			int r = pp_fcntl(p[0], F_SETPIPE_SZ, CAP);

			if (r == CAP)
				shrunk = true;
			else if (r != -1 || errno != EBUSY)
				t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ 64 KiB: %d (%s)", r,
					  strerror(errno));
		}
		if (i & 1) {
			size_t want = 1 + rnd(&s) % sizeof(buf), done;

			n = pp_read_lend(p[0], iov, 1 + (int)(rnd(&s) % 64), want);
			if (n < 0)
				t_fail_at(__FILE__, __LINE__, "pp_read_lend at %llu: %s", off,
					  strerror(errno));
			if (!n)
				break;
			ASSERT_LE(n, (ssize_t)want);
			done = rnd(&s) % 4 ? (size_t)n : rnd(&s) % ((size_t)n + 1);
			for (size_t at = 0, k = 0; at < done; k++) {
				size_t l = iov[k].iov_len < done - at ? iov[k].iov_len : done - at;

				if (t_check(iov[k].iov_base, l, off + at, XF_SEED))
					t_fail_at(__FILE__, __LINE__, "loaned bytes at %llu wrong",
						  off + at);
				at += l;
			}
			ASSERT_EQ(pp_read_done(p[0], done), 0);
			off += done;
		} else {
			n = pp_read(p[0], buf, 1 + rnd(&s) % sizeof(buf));
			if (n < 0)
				t_fail_at(__FILE__, __LINE__, "pp_read at %llu: %s", off, strerror(errno));
			if (!n)
				break;
			if (t_check(buf, (size_t)n, off, XF_SEED))
				t_fail_at(__FILE__, __LINE__, "read bytes at %llu wrong", off);
			off += (size_t)n;
		}
		ASSERT_LE(off, XF_TOTAL);
	}
	ASSERT_EQ(off, XF_TOTAL);
	ASSERT_TRUE(grown);
	if (!shrunk)	/* never 16 slots or fewer in use from 3 MiB on: empty now */
		ASSERT_EQ(pp_fcntl(p[0], F_SETPIPE_SZ, CAP), CAP);
	t_reap(pid, 10);
	t_watchdog(0, NULL);
	close_pipe(p);
	t_run = NULL;
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

#define TH_WRITERS	2
#define TH_MAXREC	(3 * PG + 300)

struct rec_hdr {
	uint32_t writer;
	uint32_t seq;
	uint32_t len;		/* the whole record, header included */
	uint32_t sum;		/* FNV-1a of the payload */
};

struct th_ctx {
	struct pp_file *w, *r;
	long long deadline;
	atomic_uint written[TH_WRITERS];	/* records each writer queued */
	unsigned int got[TH_WRITERS];		/* records the reader checked */
	unsigned long long bytes;
};

struct th_writer {
	struct th_ctx *c;
	unsigned int id;
};

static uint32_t fnv(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static unsigned int rec_seed(uint32_t writer, uint32_t seq)
{
	return writer << 24 ^ seq;
}

static void *th_writer(void *arg)
{
	struct th_writer *tw = arg;
	struct th_ctx *c = tw->c;
	struct iovec iov[64];
	unsigned char rec[TH_MAXREC];
	unsigned long long s = 0x1234567ull + tw->id * 7919;
	uint32_t seq = 0;

	while (t_now_ms() < c->deadline) {
		size_t want = sizeof(struct rec_hdr) + rnd(&s) % (TH_MAXREC - sizeof(struct rec_hdr) + 1);
		struct rec_hdr h;
		size_t len;
		ssize_t n = pp_write_lend(c->w, iov, 64, want);

		if (n < (ssize_t)sizeof(struct rec_hdr))
			t_fail_at(__FILE__, __LINE__, "writer %u: pp_write_lend(%zu) = %zd (%s)",
				  tw->id, want, n, n < 0 ? strerror(errno) : "short");
		/* The record fits the lease: at most what was lent, sometimes less. */
		len = (size_t)n;
		if (rnd(&s) % 3 == 0)
			len = sizeof(h) + rnd(&s) % (len - sizeof(h) + 1);
		t_fill(rec + sizeof(h), len - sizeof(h), 0, rec_seed(tw->id, seq));
		h = (struct rec_hdr){ tw->id, seq, (uint32_t)len, fnv(rec + sizeof(h), len - sizeof(h)) };
		memcpy(rec, &h, sizeof(h));
		lease_put(iov, 0, rec, len);
		if (pp_write_done(c->w, len) != 0)
			t_fail_at(__FILE__, __LINE__, "writer %u: pp_write_done: %s", tw->id,
				  strerror(errno));
		seq++;
		atomic_store(&c->written[tw->id], seq);
	}
	return NULL;
}

/* Check the whole records at the front of buf; how many bytes they took. */
static size_t th_parse(struct th_ctx *c, const unsigned char *buf, size_t have)
{
	size_t at = 0;

	while (have - at >= sizeof(struct rec_hdr)) {
		struct rec_hdr h;
		const unsigned char *pl;

		memcpy(&h, buf + at, sizeof(h));
		if (h.writer >= TH_WRITERS || h.len < sizeof(h) || h.len > TH_MAXREC)
			t_fail_at(__FILE__, __LINE__,
				  "reader: stream byte %llu: a bad header: writer %u seq %u len %u",
				  c->bytes + at, h.writer, h.seq, h.len);
		if (have - at < h.len)
			break;
		pl = buf + at + sizeof(h);
		if (h.seq != c->got[h.writer] || fnv(pl, h.len - sizeof(h)) != h.sum ||
		    t_check(pl, h.len - sizeof(h), 0, rec_seed(h.writer, h.seq)))
			t_fail_at(__FILE__, __LINE__,
				  "reader: stream byte %llu: writer %u record seq %u (want %u) len %u: %s",
				  c->bytes + at, h.writer, h.seq, c->got[h.writer], h.len,
				  h.seq != c->got[h.writer] ? "out of order" : "torn or stale bytes");
		c->got[h.writer]++;
		at += h.len;
	}
	return at;
}

static void *th_reader(void *arg)
{
	struct th_ctx *c = arg;
	static unsigned char buf[4 * TH_MAXREC + 70000];
	struct iovec iov[64];
	unsigned long long s = 0xabcdefull;
	size_t have = 0;

	for (unsigned int i = 0;; i++) {
		size_t room = sizeof(buf) - have, want = 1 + rnd(&s) % room;
		ssize_t n;

		if (i & 1) {
			size_t take;

			n = pp_read_lend(c->r, iov, 1 + (int)(rnd(&s) % 64), want);
			if (n < 0)
				t_fail_at(__FILE__, __LINE__, "reader: pp_read_lend: %s", strerror(errno));
			if (!n)
				break;
			take = rnd(&s) % 4 ? (size_t)n : rnd(&s) % ((size_t)n + 1);
			for (size_t at = 0, k = 0; at < take; k++) {
				size_t l = iov[k].iov_len < take - at ? iov[k].iov_len : take - at;

				memcpy(buf + have + at, iov[k].iov_base, l);
				at += l;
			}
			if (pp_read_done(c->r, take) != 0)
				t_fail_at(__FILE__, __LINE__, "pp_read_done: %s", strerror(errno));
			n = (ssize_t)take;
		} else {
			n = pp_read(c->r, buf + have, want);
			if (n < 0)
				t_fail_at(__FILE__, __LINE__, "reader: pp_read: %s", strerror(errno));
			if (!n)
				break;
		}
		have += (size_t)n;
		{
			size_t used = th_parse(c, buf, have);

			memmove(buf, buf + used, have - used);
			have -= used;
			c->bytes += used;
		}
	}
	if (have)
		t_fail_at(__FILE__, __LINE__, "reader: %zu bytes of a record left at EOF", have);
	return NULL;
}

static void threads_on(bool shared)
{
	struct pp_file *p[2];
	static struct th_ctx c;
	struct th_writer tw[TH_WRITERS];
	pthread_t wt[TH_WRITERS], rt;
	unsigned int total = 0;

	open_pipe(p, shared, 0);
	memset(&c, 0, sizeof(c));
	c.w = p[1];
	c.r = p[0];
	c.deadline = t_now_ms() + 1000;
	ASSERT_EQ(pthread_create(&rt, NULL, th_reader, &c), 0);
	for (unsigned int i = 0; i < TH_WRITERS; i++) {
		tw[i] = (struct th_writer){ &c, i };
		ASSERT_EQ(pthread_create(&wt[i], NULL, th_writer, &tw[i]), 0);
	}
	for (unsigned int i = 0; i < TH_WRITERS; i++)
		t_join(wt[i], NULL, 15);
	ASSERT_EQ(pp_close(p[1]), 0);		/* EOF for the reader */
	p[1] = NULL;
	t_join(rt, NULL, 15);
	for (unsigned int i = 0; i < TH_WRITERS; i++) {
		ASSERT_EQ(c.got[i], atomic_load(&c.written[i]));
		ASSERT_TRUE(c.got[i] > 0);
		total += c.got[i];
	}
	printf("    %s: %u records, %llu bytes\n", t_run, total, c.bytes);
	close_pipe(p);
	t_run = NULL;
}

static int threads(void)
{
	threads_on(false);
	threads_on(true);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(basic),
		T_SUBTEST(room),
		T_SUBTEST(no_merge),
		T_SUBTEST(epipe),
		T_SUBTEST(across_fork),
		T_SUBTEST(threads),
	};

	atexit(t_run_report);
	return T_RUN_SUBTESTS(tests);
}
