/* SPDX-License-Identifier: MIT */
/*
 * helpers.h - what every test shares: exit codes, assertions that print
 * both values and cannot be compiled out, and setup helpers.
 */
#ifndef PP_TEST_HELPERS_H
#define PP_TEST_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pagepipe.h"

enum t_exit {
	T_EXIT_PASS = 0,
	T_EXIT_FAIL = 1,
	T_EXIT_SKIP = 77,
};

enum t_setup_ret {
	T_SETUP_OK = 0,
	T_SETUP_SKIP,
};

void t_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

#define ASSERT_EQ(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a != _b)							\
		t_fail_at(__FILE__, __LINE__, "%s == %s: %lld != %lld",	\
			  #a, #b, _a, _b);				\
} while (0)

#define ASSERT_NE(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a == _b)							\
		t_fail_at(__FILE__, __LINE__, "%s != %s: both %lld",	\
			  #a, #b, _a);					\
} while (0)

#define ASSERT_GE(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (!(_a >= _b))						\
		t_fail_at(__FILE__, __LINE__, "%s >= %s: %lld < %lld",	\
			  #a, #b, _a, _b);				\
} while (0)

#define ASSERT_LE(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (!(_a <= _b))						\
		t_fail_at(__FILE__, __LINE__, "%s <= %s: %lld > %lld",	\
			  #a, #b, _a, _b);				\
} while (0)

#define ASSERT_TRUE(x) do {						\
	if (!(x))							\
		t_fail_at(__FILE__, __LINE__, "%s is false", #x);	\
} while (0)

/* A call that must fail with -1 and errno e. */
#define ASSERT_ERRNO(call, e) do {					\
	errno = 0;							\
	long long _r = (long long)(call);				\
	int _e = errno;							\
	if (_r != -1 || _e != (e))					\
		t_fail_at(__FILE__, __LINE__,				\
			  "%s: got %lld errno %d (%s), want -1 errno %d (%s)", \
			  #call, _r, _e, strerror(_e), (e), strerror(e)); \
} while (0)

#define ASSERT_MEM_EQ(a, b, n) do {					\
	const unsigned char *_a = (const void *)(a), *_b = (const void *)(b); \
	size_t _n = (n);						\
	for (size_t _i = 0; _i < _n; _i++)				\
		if (_a[_i] != _b[_i])					\
			t_fail_at(__FILE__, __LINE__,			\
				  "%s[%zu] == %s[%zu]: 0x%02x != 0x%02x", \
				  #a, _i, #b, _i, _a[_i], _b[_i]);	\
} while (0)

/*
 * The same step on a kernel pipe and a pagepipe: compare return values
 * and, on failure, errno.  Both results are saved for later checks.
 */
struct t_res { long long ret; int err; };
#define T_CALL(call) ({ errno = 0; long long _r = (long long)(call); \
	(struct t_res){ _r, _r < 0 ? errno : 0 }; })
#define ASSERT_SAME(kcall, pcall) do {					\
	struct t_res _k = T_CALL(kcall), _p = T_CALL(pcall);		\
	if (_k.ret != _p.ret || _k.err != _p.err)			\
		t_fail_at(__FILE__, __LINE__,				\
			  "kernel %s = %lld (%s), pagepipe %s = %lld (%s)", \
			  #kcall, _k.ret, _k.err ? strerror(_k.err) : "ok", \
			  #pcall, _p.ret, _p.err ? strerror(_p.err) : "ok"); \
} while (0)

/*
 * read(kfd, n) and pp_read(pf, n): the same result and errno and, when
 * bytes came back, the same bytes.
 */
#define ASSERT_SAME_READ(kfd, pf, n) do {				\
	size_t _rn = (n);						\
	unsigned char *_kb = malloc(_rn + 1), *_pb = malloc(_rn + 1);	\
	if (!_kb || !_pb)						\
		t_fail_at(__FILE__, __LINE__, "malloc");		\
	struct t_res _kr = T_CALL(read((kfd), _kb, _rn));		\
	struct t_res _pr = T_CALL(pp_read((pf), _pb, _rn));		\
	if (_kr.ret != _pr.ret || _kr.err != _pr.err)			\
		t_fail_at(__FILE__, __LINE__,				\
			  "kernel read(%s, %zu) = %lld (%s), pagepipe = %lld (%s)", \
			  #kfd, _rn, _kr.ret, _kr.err ? strerror(_kr.err) : "ok", \
			  _pr.ret, _pr.err ? strerror(_pr.err) : "ok");	\
	for (long long _i = 0; _i < _kr.ret; _i++)			\
		if (_kb[_i] != _pb[_i])					\
			t_fail_at(__FILE__, __LINE__,			\
				  "read(%s, %zu): byte %lld: kernel 0x%02x, pagepipe 0x%02x", \
				  #kfd, _rn, _i, _kb[_i], _pb[_i]);	\
	free(_kb);							\
	free(_pb);							\
} while (0)

/* Deterministic bytes: the byte at stream position pos of stream seed. */
static inline unsigned char t_pattern(unsigned long long pos, unsigned int seed)
{
	unsigned long long x = (pos + 1) * 0x9E3779B97F4A7C15ull ^ seed;

	x ^= x >> 29;
	return (unsigned char)(x * 0xBF58476D1CE4E5B9ull >> 56);
}
void t_fill(void *buf, size_t len, unsigned long long pos, unsigned int seed);
int  t_check(const void *buf, size_t len, unsigned long long pos, unsigned int seed);

/*
 * Records for the tests of atomic writes (at most PIPE_BUF, written
 * whole): the writer's id (a uint32_t at 0), its sequence number (a
 * uint64_t at 8), then t_fill's bytes keyed by both, so that a record torn,
 * spliced from two or moved whole to another writer's place fails
 * t_rec_check.  t_rec_check: 0 if whole, 1 if not; *id and *seq as read.
 */
#define T_REC_HDR	16
void t_rec_make(unsigned char *rec, size_t len, uint32_t id, uint64_t seq);
int  t_rec_check(const unsigned char *rec, size_t len, uint32_t *id, uint64_t *seq);

/* Helpers that exit the test with T_EXIT_FAIL on an unexpected error. */
void   t_pipe2(struct pp_file *ends[2], int flags);
void   t_kpipe2(int fds[2], int flags);

/*
 * The same pipe twice, for differential steps: a pagepipe and a kernel
 * pipe made with the same flags.  t_pair_close() closes the ends still
 * open; an end closed earlier is marked so with NULL or -1.
 */
struct t_pair {
	struct pp_file *p[2];
	int k[2];
};
void   t_pair_open(struct t_pair *x, int flags);
void   t_pair_close(struct t_pair *x);

/* FIONREAD of a pagepipe file or of a kernel descriptor; a failure fails the test. */
int    t_fionread_at(const char *file, int line, struct pp_file *f);
int    t_kfionread_at(const char *file, int line, int fd);
#define t_fionread(f)		t_fionread_at(__FILE__, __LINE__, (f))
#define t_kfionread(fd)		t_kfionread_at(__FILE__, __LINE__, (fd))

/* FIONREAD on kernel descriptor kfd and on pf: the same result, errno and count. */
#define ASSERT_SAME_FIONREAD(kfd, pf) do {				\
	int _kn = -1, _pn = -2;						\
	ASSERT_SAME(ioctl((kfd), FIONREAD, &_kn), pp_ioctl((pf), FIONREAD, &_pn)); \
	ASSERT_EQ(_kn, _pn);						\
} while (0)

/* The same, at each end of a pair that is open on both sides. */
void   t_pair_same_fionread_at(const char *file, int line, const struct t_pair *x);
#define t_pair_same_fionread(x)	t_pair_same_fionread_at(__FILE__, __LINE__, (x))
ssize_t t_read_full(struct pp_file *f, void *buf, size_t len);
ssize_t t_write_full(struct pp_file *f, const void *buf, size_t len);
/* A temporary file with len pattern bytes; its path goes into path[64]. */
int    t_tmpfile(const char *dir, size_t len, unsigned int seed, char path[64]);
/* A connected TCP pair on 127.0.0.1: fds[0] accepted, fds[1] connected. */
int    t_tcp_pair(int fds[2]);
/* Milliseconds since some fixed point. */
long long t_now_ms(void);
/* Run thread t on CPU cpu only: 0, or an errno (a hint to most callers). */
int    t_pin(pthread_t t, int cpu);


/*
 * Sub-tests.  t_run_subtests() runs each in its own child process, so that
 * one failure does not hide the next and signal handlers, descriptors and
 * SIGPIPE dispositions do not leak between them; a child still running
 * after T_SUBTEST_TIMEOUT seconds (four times that under valgrind, where
 * kres-mix's sub-tests take 14 s each on a quiet machine and ran past 30 s
 * on a loaded one) is killed and counts as a failure (a hang detector,
 * never a pass/fail timing).  Prints one line per sub-test
 * and returns main's exit code: FAIL if any failed, SKIP if all skipped,
 * else PASS.  T_SUBTEST=name in the environment runs only that one.
 */
#define T_SUBTEST_TIMEOUT	30
struct t_subtest {
	const char *name;
	int (*fn)(void);
};
#define T_SUBTEST(fn)	{ #fn, fn }
int t_run_subtests(const struct t_subtest *tests, size_t n);
#define T_RUN_SUBTESTS(arr)	t_run_subtests((arr), sizeof(arr) / sizeof((arr)[0]))

/* Print why a sub-test skips and return T_EXIT_SKIP. */
int t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * True if pp_pipe2(PP_O_SHARED) says EINVAL (a build without shared
 * pagepipes); any other failure fails the test.
 */
bool t_shared_missing(void);

/*
 * Join a thread, failing the test if it has not finished within seconds
 * (a hang, e.g. a waiter that was never woken).
 */
void t_join_at(const char *file, int line, pthread_t th, void **ret, int seconds);
#define t_join(th, ret, seconds)	t_join_at(__FILE__, __LINE__, (th), (ret), (seconds))

/*
 * userfaultfd(2) over [addr, addr + len), missing mode: the first touch
 * of each page there stops until the test fills it, so a call can be held
 * at a chosen point for as long as the test likes.  The descriptor, or -1
 * with errno where it is refused (vm.unprivileged_userfaultfd, no kernel
 * support): the test then skips.  valgrind does not support it either.
 */
int  t_uffd_missing(void *addr, size_t len);
/* Wait (20 s at most) until a touch of the range stops: a page fault event. */
void t_uffd_wait_fault_at(const char *file, int line, int uffd);
#define t_uffd_wait_fault(uffd)	t_uffd_wait_fault_at(__FILE__, __LINE__, (uffd))
/* Fill len bytes at addr (page-aligned) from src: the stopped touch goes on. */
void t_uffd_fill_at(const char *file, int line, int uffd, void *addr, const void *src, size_t len);
#define t_uffd_fill(uffd, addr, src, len)	t_uffd_fill_at(__FILE__, __LINE__, (uffd), (addr), (src), (len))

/*
 * One pp_read or pp_write in a thread of its own (t_io_main): its result,
 * errno, and when it returned (done_ms, atomic: 0 until then).
 */
struct t_io {
	struct pp_file *end;
	void *buf;
	size_t len;
	bool write;
	ssize_t ret;
	int err;
	long long done_ms;
};
void *t_io_main(void *arg);

/* Count SIGPIPEs with a handler (so EPIPE is returned and nothing dies). */
void t_sigpipe_count_start(void);
int  t_sigpipe_count(void);

/*
 * Wait until thread tid (from gettid()) sleeps inside system call nr
 * (SYS_read...), by /proc/self/task/<tid>/syscall; fails after seconds.
 * Where /proc cannot tell, waits 200 ms instead.
 */
void t_wait_in_syscall_at(const char *file, int line, pid_t tid, long nr, int seconds);
#define t_wait_in_syscall(tid, nr, seconds) \
	t_wait_in_syscall_at(__FILE__, __LINE__, (tid), (nr), (seconds))

/*
 * Wait until some thread sleeps on pagepipe p's ring as a reader (or a
 * writer), by the pipe's sleeper counts; fails after seconds.  Unlike a
 * timed sleep, this cannot pass before the other thread really waits.
 */
struct pp_pipe;
void t_wait_ring_sleeper_at(const char *file, int line, struct pp_pipe *p, bool reader,
			    int seconds);
#define t_wait_ring_sleeper(p, reader, seconds) \
	t_wait_ring_sleeper_at(__FILE__, __LINE__, (p), (reader), (seconds))

/* Sleep for ms milliseconds: only to let another thread reach a wait. */
void t_sleep_ms(int ms);

/*
 * Turn a hang into a failure that says what hung: if still running after
 * seconds, print "hang: what" and exit T_EXIT_FAIL.  A later call re-arms
 * it with a new label; seconds 0 disarms it.  Uses SIGALRM.
 */
void t_watchdog(int seconds, const char *what);

/*
 * Tests that fork peers (shared pipes, differential runs against kernel
 * pipes).  t_run names the run that is on ("kernel", "pagepipe", NULL
 * between runs) and t_peer_id this process (0 the test process, else the
 * id it was forked with), for t_step's watchdog labels and for
 * t_run_report, an atexit() handler that says which run and which
 * process a failure was in.  t_fork_peer returns 0 in the peer, which has
 * armed its own watchdog (so it ends even if nobody waits for it);
 * t_reap waits for a peer to exit 0 and kills one that runs past
 * `seconds`; t_wait_asleep(_tid) waits until a process (a thread) sleeps
 * in a call (state S in /proc; 200 ms where /proc cannot tell).
 */
extern const char *t_run;
extern int t_peer_id;
void  t_step(const char *what);
void  t_run_report(void);
pid_t t_fork_peer(int id, const char *what);
void  t_reap(pid_t pid, int seconds);
void  t_wait_asleep_tid(pid_t pid, pid_t tid);
void  t_wait_asleep(pid_t pid);


/* True when the test runs under valgrind (its preload library is in LD_PRELOAD). */
/*
 * Built with a sanitizer: T_ASAN for AddressSanitizer, T_SANITIZED for it
 * or ThreadSanitizer (gcc says so by __SANITIZE_*__, clang by
 * __has_feature).
 */
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN		1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN		1
#endif
#endif
#ifndef T_ASAN
#define T_ASAN		0
#endif
#if defined(__SANITIZE_THREAD__)
#define T_TSAN		1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN		1
#endif
#endif
#ifndef T_TSAN
#define T_TSAN		0
#endif
#define T_SANITIZED	(T_ASAN || T_TSAN)

static inline bool t_under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload");
}

#endif /* PP_TEST_HELPERS_H */
