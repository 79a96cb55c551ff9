// SPDX-License-Identifier: MIT
/*
 * Description: pp_file_event_fd() and pp_poll() on PP_O_SHARED ends
 * (src/shared.c, "Event fds"): the eventfd a process watches for an end
 * of a pipe shared across fork(), kept by a watcher thread of its own.
 * Every sub-test runs the same steps twice, with the same fork()ed peers:
 * once on a kernel pipe, watched through its own descriptor (which checks
 * the test's expectations against the kernel), and once on a shared
 * pagepipe, watched through the event fd; the readiness seen at each
 * synchronised point must be what the kernel pipe shows.
 * Readiness caused by another process is awaited with a generous limit
 * (poll or epoll_wait of 2 s); readiness that a local operation took away
 * (a read that ended in EAGAIN, a write that filled the pipe) must be gone
 * at once (a poll of 0, an epoll_wait of 50 ms).  The peer acts only once
 * the watching process sleeps (state S in /proc/PID/stat), so each wake-up
 * comes from another process to a sleeper.
 *  - ready_at_creation: asked for while its end is already ready (room;
 *    a byte queued), the descriptor is readable when the call returns
 *    (50 pipes); the same number on each call for a direction;
 *  - read_end_epoll: epoll on the read end woken by a peer's write; not
 *    ready once drained to EAGAIN; woken again (HUP) when the peer closes
 *    its write end, and read gives 0;
 *  - hup_on_sigkill: the only writer process is SIGKILLed while the test
 *    process sleeps in epoll_wait: woken (HUP), a non-blocking read gives 0;
 *  - write_end_epoll: the write end filled until EAGAIN is not ready; a
 *    peer's read of a page wakes the epoll; filled again, not ready; the
 *    reader process exits holding its end (_exit: no close, as a crash):
 *    woken (ERR), a non-blocking write gives EPIPE and one SIGPIPE;
 *  - lasting_readiness: no writer left is readiness that reading cannot
 *    take away: after the read that empties the pipe and after each of
 *    100 reads of EOF the descriptor is readable at once; likewise after
 *    each of 100 writes that fail EPIPE on a full pipe;
 *  - edge_triggered: EPOLLET on the read end: three writes with no read
 *    between give one to three events (the kernel gives one per write, the
 *    event fd one per becoming ready), then none while nothing changes;
 *    three rounds of write, drain: one event each, none for the drain; the
 *    writer's close: one event, and none for reading EOF;
 *  - child_event_fd: a fork()ed child asks for its own event fd (the same
 *    number as its parent's) after its parent closed its read end; the
 *    parent's write wakes the child's epoll (its own watcher), and so does
 *    the parent's close (HUP);
 *  - child_event_fd_after_drain: the same with a byte in the pipe at fork
 *    (the parent's descriptor readable then), which the parent drained
 *    before the child asked: the child must not take the parent's
 *    "readable" for its own and miss the next write;
 *  - second_reader_process: a child reads the pipe empty through an event
 *    fd of its own and exits; a later write must make the parent's event
 *    fd readable (within 2 s), as the kernel pipe is;
 *  - pp_poll_mixed: pp_poll on a shared read end and an OS descriptor (a
 *    kernel pipe through pp_fdopen), against poll(2) on two kernel pipes:
 *    each wakes it alone and it says which; pp_poll with timeout -1 on the
 *    shared end alone is woken by another process's write; both ends'
 *    closes give POLLHUP;
 *  - stress_no_lost_wakeup: a peer writes 20000 records of 1 to 64 bytes
 *    (2000 under valgrind) with random tiny pauses, the test process loops
 *    on epoll_wait (5 s) and reads until EAGAIN: every byte in order, then
 *    EOF, and no epoll_wait ever times out (a lost wake-up);
 *  - fork_after_event_fd: 100 times (25 under valgrind), the parent asks
 *    for an event fd and forks at once; the child asks for its own, writes
 *    a byte, and its descriptor is readable within 2 s (a child forked
 *    while the parent's watcher was still starting hung there under ASan:
 *    its allocator's lock, taken by that start-up, stayed held in the
 *    child).
 * A hang fails (t_watchdog, 10 s a step, in every process).  Under TSan
 * the pagepipe half of the four sub-tests whose child starts a watcher
 * thread of its own skips: TSan refuses a thread started after a fork()
 * of a process that has threads.
 * SHARED_EVENTS_VERBOSE=1 prints the event counts of edge_triggered and
 * the number of epoll_waits of stress_no_lost_wakeup.
 */
#include "helpers.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#define CAP	65536		/* 16 slots of 4096 */
#define PAGE	4096
#define SEED	59

/* ---------------------------------------------------------------------- */
/* A kernel pipe or a shared pagepipe, and what an event loop watches of it. */

struct xp {
	bool shared;		/* the pagepipe run */
	bool live[2];
	int k[2];
	struct pp_file *p[2];
};


static void xopen(struct xp *x, bool shared, int flags)
{
	int r;

	memset(x, 0, sizeof(*x));
	x->shared = shared;
	r = shared ? pp_pipe2(x->p, flags | PP_O_SHARED) : pipe2(x->k, flags);
	if (r < 0)
		t_fail_at(__FILE__, __LINE__, "%s pipe2(%#x): %s", t_run, flags, strerror(errno));
	x->live[0] = x->live[1] = true;
}

static ssize_t xread(struct xp *x, void *buf, size_t n)
{
	return x->shared ? pp_read(x->p[0], buf, n) : read(x->k[0], buf, n);
}

static ssize_t xwrite(struct xp *x, const void *buf, size_t n)
{
	return x->shared ? pp_write(x->p[1], buf, n) : write(x->k[1], buf, n);
}

static void xclose(struct xp *x, int end)
{
	ASSERT_TRUE(x->live[end]);
	x->live[end] = false;
	ASSERT_EQ(x->shared ? pp_close(x->p[end]) : close(x->k[end]), 0);
}

static void xclose_all(struct xp *x)
{
	for (int e = 0; e < 2; e++)
		if (x->live[e])
			xclose(x, e);
}

/* What to watch: the kernel pipe's own descriptor, or the end's event fd. */
static int xwatch(struct xp *x, int end)
{
	int fd;

	if (!x->shared)
		return x->k[end];
	fd = pp_file_event_fd(x->p[end]);
	if (fd < 0)
		t_fail_at(__FILE__, __LINE__, "pp_file_event_fd(%s end): %s",
			  end ? "write" : "read", strerror(errno));
	return fd;
}

/* The poll events that mean "ready" on it: an event fd is readable when its end is ready. */
static short xwatch_events(const struct xp *x, int end)
{
	return x->shared || !end ? POLLIN : POLLOUT;
}

/* Is the watched descriptor ready within timeout ms?  POLLHUP and POLLERR count. */
static bool ready_at(const char *file, int line, const struct xp *x, int fd, int end, int timeout)
{
	struct pollfd p = { fd, xwatch_events(x, end), 0 };
	int r;

	while ((r = poll(&p, 1, timeout)) < 0 && errno == EINTR)
		;
	if (r < 0)
		t_fail_at(file, line, "poll: %s", strerror(errno));
	if (p.revents & POLLNVAL)
		t_fail_at(file, line, "poll: descriptor %d is not open", fd);
	return r == 1 && (p.revents & (p.events | POLLHUP | POLLERR));
}
#define READY(x, fd, end, timeout)	ready_at(__FILE__, __LINE__, (x), (fd), (end), (timeout))

/* An epoll instance watching fd (data.u32 0) for its end's readiness. */
static int epoll_for(const struct xp *x, int fd, int end, uint32_t extra)
{
	struct epoll_event ev = { .events = extra, .data.u32 = 0 };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ASSERT_GE(ep, 0);
	ev.events |= xwatch_events(x, end) == POLLIN ? EPOLLIN : EPOLLOUT;
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	return ep;
}

/* epoll_wait for one event at most: how many came. */
static int epoll_n(int ep, int timeout)
{
	struct epoll_event ev[4];
	int r;

	while ((r = epoll_wait(ep, ev, 4, timeout)) < 0 && errno == EINTR)
		;
	ASSERT_GE(r, 0);
	return r;
}

/* ---------------------------------------------------------------------- */
/* Processes: a control channel (peers: helpers.h, t_fork_peer and its kin). */

/* A peer's end: close what it holds besides the pipe (ctl -1: none), and _exit (no atexit). */
static void peer_exit(struct xp *x, int ctl)
{
	if (x)
		xclose_all(x);
	if (ctl >= 0)
		close(ctl);
	_exit(0);
}

/* The control channel: a socket pair, one byte a message. */
static void ctl_open(int ctl[2])
{
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl), 0);
}

static void tell(int fd, char c)
{
	ASSERT_EQ(write(fd, &c, 1), 1);
}

static void hear_at(const char *file, int line, int fd, char want)
{
	char c = 0;
	ssize_t r;

	while ((r = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (r != 1 || c != want)
		t_fail_at(file, line, "control channel: read %zd '%c', want '%c'", r, r == 1 ? c : '-', want);
}
#define hear(fd, c)	hear_at(__FILE__, __LINE__, (fd), (c))

/*
 * The kernel run (the test's expectations checked against the kernel),
 * then the pagepipe run.  child_watcher: in the pagepipe run a fork()ed
 * child starts a watcher thread of its own after a fork of a process that
 * has one, which TSan refuses ("starting new threads after multi-threaded
 * fork is not supported"): under TSan that half skips.
 */
static int diff_run(void (*fn)(bool shared), bool child_watcher)
{
	t_run = "kernel";
	fn(false);
	t_run = NULL;
	alarm(0);
	if (t_shared_missing())
		return t_skip("pp_pipe2(PP_O_SHARED) gives EINVAL: shared pagepipes are not built; "
			      "the kernel half ran and passed");
	if (child_watcher && T_TSAN)
		return t_skip("TSan cannot start a thread in a child forked from a process with "
			      "threads (the child's watcher); the kernel half ran and passed");
	t_run = "pagepipe";
	fn(true);
	t_run = NULL;
	alarm(0);
	return T_EXIT_PASS;
}

static int diff(void (*fn)(bool shared)) { return diff_run(fn, false); }

static unsigned char buf[CAP + PAGE];

/* ---------------------------------------------------------------------- */

static void run_read_end(bool shared)
{
	pid_t me = getpid(), pid;
	int ctl[2], w, ep;
	struct xp x;

	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ep = epoll_for(&x, w, 0, 0);
	ctl_open(ctl);
	ASSERT_EQ(READY(&x, w, 0, 0), false);
	ASSERT_EQ(epoll_n(ep, 0), 0);
	if (!(pid = t_fork_peer(1, "write once the test process sleeps, then close the write end"))) {
		close(ctl[0]);
		xclose(&x, 0);
		hear(ctl[1], 'g');
		t_wait_asleep(me);
		ASSERT_EQ(xwrite(&x, "hello", 5), 5);
		hear(ctl[1], 'c');
		t_wait_asleep(me);
		xclose(&x, 1);
		/* Alive until the test process saw EOF: the close counts, not the exit. */
		hear(ctl[1], 'x');
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	xclose(&x, 1);

	t_step("epoll_wait woken by the peer's write");
	tell(ctl[0], 'g');
	ASSERT_EQ(epoll_n(ep, 2000), 1);
	ASSERT_EQ(READY(&x, w, 0, 0), true);
	ASSERT_EQ(xread(&x, buf, sizeof(buf)), 5);
	ASSERT_EQ(memcmp(buf, "hello", 5), 0);
	ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
	/* Our own EAGAIN took the readiness back: at once. */
	ASSERT_EQ(READY(&x, w, 0, 0), false);
	ASSERT_EQ(epoll_n(ep, 50), 0);

	t_step("epoll_wait woken by the peer's close (HUP)");
	tell(ctl[0], 'c');
	ASSERT_EQ(epoll_n(ep, 2000), 1);
	ASSERT_EQ(READY(&x, w, 0, 0), true);
	ASSERT_EQ(xread(&x, buf, sizeof(buf)), 0);
	tell(ctl[0], 'x');
	t_reap(pid, 10);
	xclose_all(&x);
	close(ctl[0]);
	close(ep);
}

static int read_end_epoll(void) { return diff(run_read_end); }

/* ---------------------------------------------------------------------- */

struct killer {
	pid_t me, tid, victim;
};

/* Kill the victim once the test process's main thread sleeps (in epoll_wait). */
static void *killer_main(void *arg)
{
	struct killer *k = arg;

	t_wait_asleep_tid(k->me, k->tid);
	ASSERT_EQ(kill(k->victim, SIGKILL), 0);
	return NULL;
}

static void run_sigkill(bool shared)
{
	struct killer k = { getpid(), (pid_t)syscall(SYS_gettid), 0 };
	int ctl[2], w, ep, status;
	pthread_t th;
	struct xp x;

	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ep = epoll_for(&x, w, 0, 0);
	ctl_open(ctl);
	if (!(k.victim = t_fork_peer(1, "hold the only write end until killed"))) {
		close(ctl[0]);
		xclose(&x, 0);
		tell(ctl[1], 'r');
		for (;;)
			pause();
	}
	close(ctl[1]);
	xclose(&x, 1);
	t_step("wait for the peer");
	hear(ctl[0], 'r');
	ASSERT_EQ(READY(&x, w, 0, 0), false);
	ASSERT_ERRNO(xread(&x, buf, 1), EAGAIN);

	t_step("epoll_wait woken by the writer's death");
	ASSERT_EQ(pthread_create(&th, NULL, killer_main, &k), 0);
	ASSERT_EQ(epoll_n(ep, 2000), 1);
	ASSERT_EQ(READY(&x, w, 0, 0), true);
	ASSERT_EQ(xread(&x, buf, 1), 0);
	t_join(th, NULL, 10);
	ASSERT_EQ(waitpid(k.victim, &status, 0), k.victim);
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	xclose_all(&x);
	close(ctl[0]);
	close(ep);
}

static int hup_on_sigkill(void) { return diff(run_sigkill); }

/* ---------------------------------------------------------------------- */

/* Non-blocking writes of a page until EAGAIN: the bytes written. */
static long fill(struct xp *x)
{
	long n = 0;
	ssize_t r;

	memset(buf, 'f', PAGE);
	while ((r = xwrite(x, buf, PAGE)) == PAGE)
		n += r;
	ASSERT_EQ(r, -1);
	ASSERT_EQ(errno, EAGAIN);
	return n;
}

static void run_write_end(bool shared)
{
	pid_t me = getpid(), pid;
	int ctl[2], w, ep;
	struct xp x;

	t_sigpipe_count_start();
	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 1);
	ep = epoll_for(&x, w, 1, 0);
	ctl_open(ctl);
	/* Ready at once is ready_at_creation's to check. */
	ASSERT_EQ(READY(&x, w, 1, 2000), true);
	ASSERT_EQ(fill(&x), CAP);
	ASSERT_EQ(READY(&x, w, 1, 0), false);
	ASSERT_EQ(epoll_n(ep, 50), 0);
	pid = t_fork_peer(1, "read a page once the test process sleeps, then exit holding the read end");
	if (!pid) {
		close(ctl[0]);
		xclose(&x, 1);
		hear(ctl[1], 'g');
		t_wait_asleep(me);
		ASSERT_EQ(xread(&x, buf, PAGE), PAGE);
		hear(ctl[1], 'x');
		t_wait_asleep(me);
		/*
		 * Exit without closing: the death of the holder, not a close,
		 * must be noticed.  The end stays reachable (the library's
		 * list of ends), so valgrind counts no definite leak.
		 */
		close(ctl[1]);
		_exit(0);
	}
	close(ctl[1]);
	xclose(&x, 0);

	t_step("epoll_wait woken by the peer's read");
	tell(ctl[0], 'g');
	ASSERT_EQ(epoll_n(ep, 2000), 1);
	ASSERT_EQ(READY(&x, w, 1, 0), true);
	ASSERT_EQ(fill(&x), PAGE);
	ASSERT_EQ(READY(&x, w, 1, 0), false);
	ASSERT_EQ(epoll_n(ep, 50), 0);

	t_step("epoll_wait woken by the reader's exit (ERR)");
	tell(ctl[0], 'x');
	ASSERT_EQ(epoll_n(ep, 2000), 1);
	ASSERT_EQ(READY(&x, w, 1, 0), true);
	t_reap(pid, 10);
	ASSERT_ERRNO(xwrite(&x, buf, PAGE), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 1);
	xclose_all(&x);
	close(ctl[0]);
	close(ep);
}

static int write_end_epoll(void) { return diff(run_write_end); }

/* ---------------------------------------------------------------------- */

/*
 * Asked for while its end is already ready, the descriptor is readable
 * when the call returns: an event loop's first look (a poll of 0) sees it.
 */
static void run_creation(bool shared)
{
	/* 50 pipes: a descriptor made readable a moment later passes one look now and then. */
	for (int i = 0; i < 50; i++) {
		struct xp x;
		int w0, w1;

		xopen(&x, shared, O_NONBLOCK);
		w1 = xwatch(&x, 1);			/* room */
		if (!READY(&x, w1, 1, 0))
			t_fail_at(__FILE__, __LINE__, "pipe %d: the write end's descriptor, asked "
				  "for with room in the pipe, is not readable on return", i);
		ASSERT_EQ(xwrite(&x, "a", 1), 1);
		w0 = xwatch(&x, 0);			/* data */
		if (!READY(&x, w0, 0, 0))
			t_fail_at(__FILE__, __LINE__, "pipe %d: the read end's descriptor, asked "
				  "for with a byte in the pipe, is not readable on return", i);
		if (shared) {
			/* One per direction: the same number each time. */
			ASSERT_NE(w0, w1);
			ASSERT_EQ(xwatch(&x, 0), w0);
			ASSERT_EQ(xwatch(&x, 1), w1);
		}
		xclose_all(&x);
	}
}

static int ready_at_creation(void) { return diff(run_creation); }

/* ---------------------------------------------------------------------- */

/*
 * EOF and "no reader" last: reading EOF, or a read that empties the pipe
 * of a writer that is gone, or a write that fails EPIPE, leaves the end
 * ready, so its descriptor must stay readable, right after the call (a
 * poll of 0), every time (100 times each: a descriptor taken back and set
 * again at once would pass a single look now and then).
 */
static void run_lasting(bool shared)
{
	int ctl[2], w;
	struct xp x;
	pid_t pid;

	t_sigpipe_count_start();
	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ctl_open(ctl);
	if (!(pid = t_fork_peer(1, "write a byte, close the only write end"))) {
		close(ctl[0]);
		xclose(&x, 0);
		ASSERT_EQ(xwrite(&x, "z", 1), 1);
		xclose(&x, 1);
		tell(ctl[1], 'd');
		hear(ctl[1], 'x');
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	xclose(&x, 1);
	t_step("read end: the last byte, then EOF");
	hear(ctl[0], 'd');
	ASSERT_EQ(READY(&x, w, 0, 2000), true);
	ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
	ASSERT_EQ(READY(&x, w, 0, 0), true);	/* emptied, but no writer: HUP */
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(xread(&x, buf, sizeof(buf)), 0);
		if (!READY(&x, w, 0, 0))
			t_fail_at(__FILE__, __LINE__, "read %d at EOF left the descriptor unreadable", i + 1);
	}
	tell(ctl[0], 'x');
	t_reap(pid, 10);
	xclose_all(&x);
	close(ctl[0]);

	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 1);
	ctl_open(ctl);
	ASSERT_EQ(fill(&x), CAP);
	if (!(pid = t_fork_peer(1, "close the only read end"))) {
		close(ctl[0]);
		xclose(&x, 1);
		xclose(&x, 0);
		tell(ctl[1], 'd');
		hear(ctl[1], 'x');
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	xclose(&x, 0);
	t_step("write end, full: EPIPE");
	hear(ctl[0], 'd');
	ASSERT_EQ(READY(&x, w, 1, 2000), true);
	for (int i = 0; i < 100; i++) {
		ASSERT_ERRNO(xwrite(&x, buf, 1), EPIPE);
		if (!READY(&x, w, 1, 0))
			t_fail_at(__FILE__, __LINE__, "write %d with no reader (EPIPE) left the "
				  "descriptor unreadable", i + 1);
	}
	ASSERT_EQ(t_sigpipe_count(), 100);
	tell(ctl[0], 'x');
	t_reap(pid, 10);
	xclose_all(&x);
	close(ctl[0]);
}

static int lasting_readiness(void) { return diff(run_lasting); }

/* ---------------------------------------------------------------------- */

/*
 * Edge-triggered counts.  The event fd gives an event each time its end
 * becomes ready (as this process sees it); the kernel's pipe wakes an
 * EPOLLET watcher on every write once the pipe has been polled (Linux 6.x;
 * older kernels only when the pipe was empty).  So, for writes with no
 * read between, neither count is exact: at least one (the empty pipe
 * became non-empty), at most one per write; and none at all while nothing
 * happens, or for our own reads.
 */
#define MSG_DONE	1u	/* data.u32 of the control socket in the epoll set */

/* Pipe events until the peer says it is done, then any that come within 2 s if none yet. */
static int et_collect(int ep, int ctl)
{
	struct epoll_event ev[4];
	bool done = false;
	int events = 0, r;

	while (!done) {
		while ((r = epoll_wait(ep, ev, 4, 2000)) < 0 && errno == EINTR)
			;
		ASSERT_GE(r, 0);
		if (r == 0)
			t_fail_at(__FILE__, __LINE__, "no event and no word from the peer in 2 s");
		for (int i = 0; i < r; i++) {
			if (ev[i].data.u32 == MSG_DONE) {
				hear(ctl, 'd');
				done = true;
			} else {
				events++;
			}
		}
	}
	if (!events)
		events = epoll_n(ep, 2000);
	return events;
}

static void run_edge(bool shared)
{
	const char *v = getenv("SHARED_EVENTS_VERBOSE");
	pid_t me = getpid(), pid;
	int ctl[2], w, ep, n;
	struct epoll_event cev = { .events = EPOLLIN, .data.u32 = MSG_DONE };
	struct xp x;

	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ep = epoll_for(&x, w, 0, EPOLLET);
	ctl_open(ctl);
	ASSERT_EQ(epoll_n(ep, 0), 0);
	if (!(pid = t_fork_peer(1, "three writes, then three rounds of one write, then close"))) {
		close(ctl[0]);
		xclose(&x, 0);
		hear(ctl[1], 'a');
		for (int i = 0; i < 3; i++) {
			t_wait_asleep(me);
			ASSERT_EQ(xwrite(&x, "a", 1), 1);
			t_sleep_ms(20);
		}
		tell(ctl[1], 'd');
		for (int i = 0; i < 3; i++) {
			hear(ctl[1], 'b');
			t_wait_asleep(me);
			ASSERT_EQ(xwrite(&x, "b", 1), 1);
			tell(ctl[1], 'd');
		}
		hear(ctl[1], 'c');
		t_wait_asleep(me);
		xclose(&x, 1);
		tell(ctl[1], 'd');
		hear(ctl[1], 'x');
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	xclose(&x, 1);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ctl[0], &cev), 0);

	t_step("three writes, no read");
	tell(ctl[0], 'a');
	n = et_collect(ep, ctl[0]);
	if (v && *v == '1')
		printf("    %s: %d events for three writes\n", t_run, n);
	ASSERT_GE(n, 1);
	ASSERT_LE(n, 3);
	/* Nothing changes: nothing comes. */
	ASSERT_EQ(epoll_n(ep, 50), 0);
	ASSERT_EQ(READY(&x, w, 0, 0), true);
	ASSERT_EQ(xread(&x, buf, sizeof(buf)), 3);
	ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
	/* Our drain is no event. */
	ASSERT_EQ(epoll_n(ep, 50), 0);
	ASSERT_EQ(READY(&x, w, 0, 0), false);

	for (int i = 0; i < 3; i++) {
		t_step("one write into the empty pipe, then a drain");
		tell(ctl[0], 'b');
		n = et_collect(ep, ctl[0]);
		if (v && *v == '1')
			printf("    %s: round %d: %d events\n", t_run, i, n);
		ASSERT_EQ(n, 1);
		ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
		ASSERT_EQ(buf[0], 'b');
		ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
		ASSERT_EQ(epoll_n(ep, 50), 0);
	}

	t_step("the writer's close");
	tell(ctl[0], 'c');
	n = et_collect(ep, ctl[0]);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(xread(&x, buf, sizeof(buf)), 0);
	/* Reading EOF changes nothing: no event. */
	ASSERT_EQ(epoll_n(ep, 50), 0);
	ASSERT_EQ(READY(&x, w, 0, 0), true);
	tell(ctl[0], 'x');
	t_reap(pid, 10);
	xclose_all(&x);
	close(ctl[0]);
	close(ep);
}

static int edge_triggered(void) { return diff(run_edge); }

/* ---------------------------------------------------------------------- */

/*
 * with_data: the pipe holds a byte at fork (the parent's event fd is
 * readable then), which the parent drains before the child asks for its
 * own: the child must not take over the parent's "readable" as its own.
 */
static void run_child_fd(bool shared, bool with_data)
{
	pid_t pid;
	int ctl[2], w;
	struct xp x;

	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ctl_open(ctl);
	if (with_data) {
		ASSERT_EQ(xwrite(&x, "x", 1), 1);
		ASSERT_EQ(READY(&x, w, 0, 2000), true);
	}
	if (!(pid = t_fork_peer(1, "a reader with an event fd of its own"))) {
		int w2, ep;

		close(ctl[0]);
		xclose(&x, 1);
		hear(ctl[1], 'd');
		/* The inherited descriptor, now with a watcher of this process. */
		w2 = xwatch(&x, 0);
		ASSERT_EQ(w2, w);
		ASSERT_EQ(READY(&x, w2, 0, 0), false);
		ep = epoll_for(&x, w2, 0, 0);
		t_step("child: epoll_wait woken by the parent's write");
		tell(ctl[1], 'a');
		ASSERT_EQ(epoll_n(ep, 2000), 1);
		ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
		ASSERT_EQ(buf[0], 'y');
		ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
		ASSERT_EQ(READY(&x, w2, 0, 0), false);
		ASSERT_EQ(epoll_n(ep, 50), 0);
		t_step("child: epoll_wait woken by the parent's close (HUP)");
		tell(ctl[1], 'r');
		ASSERT_EQ(epoll_n(ep, 2000), 1);
		ASSERT_EQ(xread(&x, buf, sizeof(buf)), 0);
		close(ep);
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	if (with_data) {
		ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
		ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
		ASSERT_EQ(READY(&x, w, 0, 0), false);
	}
	/* The parent's read end goes: its watcher stops, its copy of the descriptor closes. */
	xclose(&x, 0);
	t_step("write once the child sleeps in epoll_wait");
	tell(ctl[0], 'd');
	hear(ctl[0], 'a');
	t_wait_asleep(pid);
	ASSERT_EQ(xwrite(&x, "y", 1), 1);
	t_step("close once the child sleeps in epoll_wait");
	hear(ctl[0], 'r');
	t_wait_asleep(pid);
	xclose(&x, 1);
	t_reap(pid, 10);
	close(ctl[0]);
}

static void run_child_fd_empty(bool shared) { run_child_fd(shared, false); }
static void run_child_fd_data(bool shared) { run_child_fd(shared, true); }

static int child_event_fd(void) { return diff_run(run_child_fd_empty, true); }
static int child_event_fd_after_drain(void) { return diff_run(run_child_fd_data, true); }

/* ---------------------------------------------------------------------- */

/*
 * Two processes reading one pipe, each through an event fd: the child's
 * reads and its EAGAIN must not take away what the parent's descriptor
 * shows of the parent's end once new bytes come.
 */
static void run_second_reader(bool shared)
{
	pid_t pid;
	int ctl[2], w;
	struct xp x;

	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ctl_open(ctl);
	ASSERT_EQ(xwrite(&x, "a", 1), 1);
	ASSERT_EQ(READY(&x, w, 0, 2000), true);
	if (!(pid = t_fork_peer(1, "a second reader: take the byte, EAGAIN, close"))) {
		int w2;

		close(ctl[0]);
		xclose(&x, 1);
		w2 = xwatch(&x, 0);
		ASSERT_EQ(w2, w);
		ASSERT_EQ(READY(&x, w2, 0, 2000), true);
		ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
		ASSERT_EQ(buf[0], 'a');
		ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
		ASSERT_EQ(READY(&x, w2, 0, 0), false);
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	t_step("the second reader");
	t_reap(pid, 10);
	/* The byte is gone, taken elsewhere: the event fd may still say ready (not checked). */
	t_step("a write after the second reader is gone");
	ASSERT_EQ(xwrite(&x, "b", 1), 1);
	ASSERT_EQ(READY(&x, w, 0, 2000), true);
	ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
	ASSERT_EQ(buf[0], 'b');
	ASSERT_ERRNO(xread(&x, buf, sizeof(buf)), EAGAIN);
	ASSERT_EQ(READY(&x, w, 0, 0), false);
	ASSERT_EQ(xwrite(&x, "c", 1), 1);
	ASSERT_EQ(READY(&x, w, 0, 2000), true);
	xclose_all(&x);
	close(ctl[0]);
}

static int second_reader_process(void) { return diff_run(run_second_reader, true); }

/* ---------------------------------------------------------------------- */

/*
 * Two descriptors polled together: the pipe under test and an OS pipe.
 * The kernel run polls both with poll(2); the pagepipe run polls the
 * shared end and a pp_fdopen() of the OS pipe with pp_poll().
 */
struct mixed {
	struct xp *x;
	int os;			/* the OS pipe's read end */
	struct pp_file *osf;	/* pp_fdopen(os), the pagepipe run's */
};

/* Poll the pipe (and the OS pipe when both): the count, each one's revents. */
static int mixed_poll(struct mixed *m, bool both, int timeout, short rev[2])
{
	int r;

	rev[0] = rev[1] = 0;
	if (m->x->shared) {
		struct pp_pollfd p[2] = { { m->x->p[0], POLLIN, 0 }, { m->osf, POLLIN, 0 } };

		while ((r = pp_poll(p, both ? 2 : 1, timeout)) < 0 && errno == EINTR)
			;
		rev[0] = p[0].revents;
		rev[1] = p[1].revents;
	} else {
		struct pollfd p[2] = { { m->x->k[0], POLLIN, 0 }, { m->os, POLLIN, 0 } };

		while ((r = poll(p, both ? 2 : 1, timeout)) < 0 && errno == EINTR)
			;
		rev[0] = p[0].revents;
		rev[1] = p[1].revents;
	}
	ASSERT_GE(r, 0);
	return r;
}

static void run_mixed(bool shared)
{
	pid_t me = getpid(), pid;
	struct mixed m;
	int ctl[2], os[2];
	short rev[2];
	struct xp x;

	xopen(&x, shared, O_NONBLOCK);
	t_kpipe2(os, O_NONBLOCK | O_CLOEXEC);
	ctl_open(ctl);
	m = (struct mixed){ &x, os[0], NULL };
	if (shared) {
		m.osf = pp_fdopen(os[0]);
		ASSERT_TRUE(m.osf != NULL);
	}
	ASSERT_EQ(mixed_poll(&m, true, 0, rev), 0);
	if (!(pid = t_fork_peer(1, "write to the OS pipe, then to the pipe twice, then close"))) {
		close(ctl[0]);
		if (m.osf)
			pp_close(m.osf);
		close(os[0]);
		xclose(&x, 0);
		hear(ctl[1], 'o');
		t_wait_asleep(me);
		ASSERT_EQ(write(os[1], "o", 1), 1);
		hear(ctl[1], 'p');
		t_wait_asleep(me);
		ASSERT_EQ(xwrite(&x, "p", 1), 1);
		hear(ctl[1], 'q');
		t_wait_asleep(me);
		ASSERT_EQ(xwrite(&x, "q", 1), 1);
		hear(ctl[1], 'c');
		t_wait_asleep(me);
		xclose(&x, 1);
		close(os[1]);
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	close(os[1]);
	xclose(&x, 1);

	t_step("poll both, woken by the OS pipe (timeout -1)");
	tell(ctl[0], 'o');
	ASSERT_EQ(mixed_poll(&m, true, -1, rev), 1);
	ASSERT_EQ(rev[0], 0);
	ASSERT_EQ(rev[1], POLLIN);
	ASSERT_EQ(read(os[0], buf, 10), 1);
	ASSERT_EQ(mixed_poll(&m, true, 0, rev), 0);

	t_step("poll both, woken by the pipe (timeout 5 s)");
	tell(ctl[0], 'p');
	ASSERT_EQ(mixed_poll(&m, true, 5000, rev), 1);
	ASSERT_EQ(rev[0], POLLIN);
	ASSERT_EQ(rev[1], 0);
	ASSERT_EQ(xread(&x, buf, 10), 1);
	ASSERT_EQ(buf[0], 'p');
	ASSERT_ERRNO(xread(&x, buf, 10), EAGAIN);
	ASSERT_EQ(mixed_poll(&m, true, 0, rev), 0);

	t_step("poll the pipe alone, timeout -1, woken by the write of another process");
	tell(ctl[0], 'q');
	ASSERT_EQ(mixed_poll(&m, false, -1, rev), 1);
	ASSERT_EQ(rev[0], POLLIN);
	ASSERT_EQ(xread(&x, buf, 10), 1);
	ASSERT_EQ(buf[0], 'q');
	ASSERT_EQ(mixed_poll(&m, false, 0, rev), 0);

	t_step("poll both, timeout -1, woken by the close of the write ends (HUP)");
	tell(ctl[0], 'c');
	ASSERT_GE(mixed_poll(&m, true, -1, rev), 1);
	ASSERT_TRUE(rev[0] & POLLHUP || rev[1] & POLLHUP);
	t_reap(pid, 10);
	ASSERT_EQ(mixed_poll(&m, true, 0, rev), 2);
	ASSERT_EQ(rev[0], POLLHUP);
	ASSERT_EQ(rev[1], POLLHUP);
	ASSERT_EQ(xread(&x, buf, 10), 0);
	if (m.osf)
		pp_close(m.osf);
	close(os[0]);
	xclose_all(&x);
	close(ctl[0]);
}

static int pp_poll_mixed(void) { return diff(run_mixed); }

/* ---------------------------------------------------------------------- */

/* A fork and a thread under valgrind cost tens of milliseconds. */
static int fork_rounds(void)
{
	return t_under_valgrind() ? 25 : 100;
}

/*
 * fork() the moment the parent's event fd call returns: its watcher thread
 * must not be starting still, or a runtime whose allocator is not locked
 * across fork() (GCC's ASan) can leave the child a lock that no thread of
 * its own will ever let go.  The child starts a watcher of its own, writes
 * a byte, and its descriptor must become readable.
 */
static void run_fork_after(bool shared)
{
	for (int round = 0, rounds = fork_rounds(); round < rounds; round++) {
		struct xp x;
		pid_t pid;

		xopen(&x, shared, O_NONBLOCK);
		(void)xwatch(&x, 0);
		if (!(pid = t_fork_peer(1, "a child that watches the read end at once"))) {
			int w = xwatch(&x, 0);

			ASSERT_EQ(xwrite(&x, "f", 1), 1);
			ASSERT_EQ(READY(&x, w, 0, 2000), true);
			ASSERT_EQ(xread(&x, buf, sizeof(buf)), 1);
			peer_exit(&x, -1);
		}
		t_reap(pid, 10);
		xclose_all(&x);
	}
}

static int fork_after_event_fd(void) { return diff_run(run_fork_after, true); }

/* ---------------------------------------------------------------------- */

static unsigned int rng_next(unsigned int *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static int stress_records(void)
{
	return t_under_valgrind() ? 2000 : 20000;
}

/* The next record's length, and the pause after it: 0 none, -1 a yield, else microseconds. */
static size_t rec_plan(unsigned int *s, int *pause_us)
{
	size_t len = 1 + rng_next(s) % 64;
	unsigned int p = rng_next(s) % 8;

	*pause_us = p == 0 ? (int)(1 + rng_next(s) % 20) : p == 1 ? -1 : 0;
	return len;
}

static void run_stress(bool shared)
{
	unsigned long long total = 0, got = 0;
	int records = stress_records(), w, ep, ctl[2];
	long waits = 0;
	unsigned int s = SEED;
	struct xp x;
	pid_t pid;
	ssize_t r;

	for (int i = 0, us; i < records; i++)
		total += rec_plan(&s, &us);
	xopen(&x, shared, O_NONBLOCK);
	w = xwatch(&x, 0);
	ep = epoll_for(&x, w, 0, 0);
	ctl_open(ctl);
	if (!(pid = t_fork_peer(1, "write records with tiny pauses"))) {
		unsigned long long pos = 0;
		unsigned char rec[64];

		close(ctl[0]);
		xclose(&x, 0);
		/* Blocking: a full pipe waits for the reader. */
		ASSERT_EQ(x.shared ? pp_fcntl(x.p[1], F_SETFL, 0) : fcntl(x.k[1], F_SETFL, 0), 0);
		s = SEED;
		hear(ctl[1], 'g');
		for (int i = 0, us; i < records; i++) {
			size_t len = rec_plan(&s, &us);

			t_fill(rec, len, pos, SEED);
			ASSERT_EQ(xwrite(&x, rec, len), (long long)len);
			pos += len;
			if (us > 0) {
				struct timespec ts = { 0, 1000L * us };

				nanosleep(&ts, NULL);
			} else if (us < 0) {
				sched_yield();
			}
		}
		peer_exit(&x, ctl[1]);
	}
	close(ctl[1]);
	xclose(&x, 1);
	t_step("read every record, woken by epoll_wait each time");
	tell(ctl[0], 'g');
	for (;; waits++) {
		if (epoll_n(ep, 5000) == 0)
			t_fail_at(__FILE__, __LINE__,
				  "epoll_wait: no event in 5 s after %ld waits, %llu of %llu bytes read "
				  "(a lost wake-up)", waits, got, total);
		while ((r = xread(&x, buf, sizeof(buf))) > 0) {
			if (t_check(buf, (size_t)r, got, SEED))
				t_fail_at(__FILE__, __LINE__, "bytes %llu.. wrong", got);
			got += (unsigned long long)r;
		}
		if (r == 0)
			break;
		ASSERT_EQ(errno, EAGAIN);
	}
	ASSERT_EQ(got, total);
	if (getenv("SHARED_EVENTS_VERBOSE") && *getenv("SHARED_EVENTS_VERBOSE") == '1')
		printf("    %s: %llu bytes, %ld epoll_waits\n", t_run, got, waits);
	t_reap(pid, 10);
	xclose_all(&x);
	close(ctl[0]);
	close(ep);
}

static int stress_no_lost_wakeup(void) { return diff(run_stress); }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(ready_at_creation),
		T_SUBTEST(read_end_epoll),
		T_SUBTEST(hup_on_sigkill),
		T_SUBTEST(write_end_epoll),
		T_SUBTEST(lasting_readiness),
		T_SUBTEST(edge_triggered),
		T_SUBTEST(child_event_fd),
		T_SUBTEST(child_event_fd_after_drain),
		T_SUBTEST(second_reader_process),
		T_SUBTEST(pp_poll_mixed),
		T_SUBTEST(stress_no_lost_wakeup),
		T_SUBTEST(fork_after_event_fd),
	};

	atexit(t_run_report);
	return T_RUN_SUBTESTS(tests);
}
