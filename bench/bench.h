/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what every benchmark shares: a clock, a time budget, peak RSS,
 * a forked child per case and the result printer.
 *
 * Benchmarks print numbers and never judge them: the exit status says only
 * whether the program could run (0), not whether it was fast.  The knobs,
 * all environment variables:
 *
 *   PP_BENCH_SECONDS  seconds per case, or per run of a case where a bench
 *                     takes medians (each bench says its default; 1 here);
 *   PP_BENCH_RUNS     runs per case for benches that report medians
 *                     (default 5);
 *   PP_BENCH_QUICK    set (to anything but 0) for a smoke run: 1 run of
 *                     0.05 s per case unless the two above say otherwise;
 *   PP_BENCH_PIN      thread placement, see bench_pin_mode().
 */
#ifndef PP_BENCH_H
#define PP_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

#define KiB	1024ul
#define MiB	(1024ul * 1024)
#define GiB	(1024ul * 1024 * 1024)

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* PP_BENCH_QUICK: a smoke run, which shows the bench works, not how fast. */
static inline bool bench_quick(void)
{
	const char *s = getenv("PP_BENCH_QUICK");

	return s && *s && strcmp(s, "0");
}

/*
 * Seconds per case (or per run), from PP_BENCH_SECONDS; unset or bad means
 * def, or 0.05 in quick mode.
 */
static inline double bench_seconds_or(double def)
{
	const char *s = getenv("PP_BENCH_SECONDS");
	double v;
	char *end;

	if (bench_quick())
		def = 0.05;
	if (!s || !*s)
		return def;
	v = strtod(s, &end);
	if (*end || !(v > 0.0) || v > 3600.0)
		return def;
	return v;
}

static inline double bench_seconds(void)
{
	return bench_seconds_or(1.0);
}

/* Runs per case, from PP_BENCH_RUNS (1 to 99): default 5, or 1 in quick mode. */
static inline unsigned int bench_runs(void)
{
	const char *s = getenv("PP_BENCH_RUNS");
	unsigned int def = bench_quick() ? 1 : 5;
	unsigned long v;
	char *end;

	if (!s || !*s)
		return def;
	v = strtoul(s, &end, 10);
	if (*end || !v || v > 99)
		return def;
	return (unsigned int)v;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n), which it sorts; 0 for n == 0. */
static inline double bench_median(double *v, unsigned int n)
{
	if (!n)
		return 0.0;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The body of a spin-wait loop: tells an SMT sibling it may have the core. */
static inline void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * A message buffer on cache lines of its own, so that one thread's buffer
 * never shares a line with another's (malloc packs small blocks 16 bytes
 * apart): NULL on failure.
 */
/*
 * aligned_alloc's size must be a multiple of its alignment (C11; glibc
 * forgives it, ASan does not): rounded up here.  align a power of two.
 */
static inline void *bench_buf_aligned(size_t align, size_t len)
{
	return aligned_alloc(align, (len + align - 1) & ~(align - 1));
}

static inline void *bench_buf(size_t len)
{
	return bench_buf_aligned(64, len);
}

/* The same on a page boundary. */
static inline void *bench_page_buf(size_t len)
{
	return bench_buf_aligned(4096, len);
}

/*
 * A byte stream of messages of size bytes, each starting with its
 * sequence number: buf holds the stream's bytes [off, off + n).  True if
 * every message whose number lies whole in there has the right one (a
 * number split between two reads is not checked).
 */
static inline bool bench_stream_ok(const char *buf, uint64_t off, size_t n, size_t size)
{
	uint64_t k = (off + size - 1) / size, v;

	for (uint64_t m = k * size; m + 8 <= off + n; m += size, k++) {
		memcpy(&v, buf + (m - off), 8);
		if (v != k)
			return false;
	}
	return true;
}

/* Peak resident set of this process, in KiB (ru_maxrss is KiB on Linux). */
static inline long bench_peak_rss_kib(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return -1;
	return ru.ru_maxrss;
}

/*
 * Where a two-thread case runs its threads, from PP_BENCH_PIN: "split"
 * (the default on two or more CPUs: writer on the first allowed CPU, reader
 * on the second), "same" (both on the first) or "none" (the scheduler's
 * choice).  Unpinned runs on a small VM swing by 4x from run to run as the
 * scheduler moves the pair, which hides any difference between pipes.
 */
enum bench_pin { BENCH_PIN_NONE, BENCH_PIN_SPLIT, BENCH_PIN_SAME };

static inline enum bench_pin bench_pin_mode(void)
{
	const char *s = getenv("PP_BENCH_PIN");
	cpu_set_t set;

	if (s && !strcmp(s, "none"))
		return BENCH_PIN_NONE;
	if (s && !strcmp(s, "same"))
		return BENCH_PIN_SAME;
	if (sched_getaffinity(0, sizeof(set), &set) || CPU_COUNT(&set) < 2)
		return BENCH_PIN_SAME;
	return BENCH_PIN_SPLIT;
}

static inline const char *bench_pin_name(enum bench_pin m)
{
	return m == BENCH_PIN_NONE ? "none" : m == BENCH_PIN_SAME ? "same CPU" : "split CPUs";
}

/*
 * Pin the calling thread, thread idx of its side (side 0: the nw writers,
 * side 1: the nr readers).  Split CPUs gives every thread a CPU of its own
 * when there are enough, writers first; with fewer, the writers share the
 * first half of the allowed CPUs and the readers the second half, so that
 * no writer ever shares a CPU with a reader.  Same CPU puts all on the
 * first allowed CPU.
 */
static inline void bench_pin_thread(enum bench_pin m, int side, int idx, int nw, int nr)
{
	cpu_set_t set, one;
	int seen = 0, want = 0, ncpu, half;

	if (m == BENCH_PIN_NONE || sched_getaffinity(0, sizeof(set), &set))
		return;
	ncpu = CPU_COUNT(&set);
	if (m == BENCH_PIN_SPLIT && ncpu >= nw + nr) {
		want = side ? nw + idx : idx;
	} else if (m == BENCH_PIN_SPLIT && ncpu >= 2) {
		half = ncpu / 2;
		want = side ? half + idx % (ncpu - half) : idx % half;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &set) || seen++ != want)
			continue;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* Best effort: an unpinned run is still a run. */
		(void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
		return;
	}
}

/* Pin the calling thread as role 0 (writer) or 1 (reader) of the pair. */
static inline void bench_pin_self(enum bench_pin m, int role)
{
	bench_pin_thread(m, role, 0, 1, 1);
}

/*
 * Where the pair's two CPUs sit now: the round trip of two spinning flags
 * between the CPUs split pinning uses, in ns (median of 5 tries of 2000
 * round trips), or -1 if the probe could not run.  A VM's two vCPUs may
 * sit on near or far host CPUs and move between them within seconds
 * (seen here: 100-130 ns near, 450-600 far), and every figure that crosses
 * between the CPUs moves with them, the kernel's too; so a split table
 * says where it ran, before its rows and after, and its cells compare
 * only within one placement.
 */
struct bench_probe {
	_Alignas(64) _Atomic unsigned int ping;
	_Alignas(64) _Atomic unsigned int pong;
	unsigned int rounds;
	double ns;			/* the result, or -1 */
};

static void *bench_probe_pong(void *arg)
{
	struct bench_probe *pr = arg;

	bench_pin_self(BENCH_PIN_SPLIT, 1);
	for (unsigned int i = 1; i <= pr->rounds; i++) {
		while (atomic_load_explicit(&pr->ping, memory_order_acquire) < i)
			bench_cpu_relax();
		atomic_store_explicit(&pr->pong, i, memory_order_release);
	}
	return NULL;
}

static void *bench_probe_ping(void *arg)
{
	struct bench_probe *pr = arg;
	double t0;

	bench_pin_self(BENCH_PIN_SPLIT, 0);
	t0 = bench_now();
	for (unsigned int i = 1; i <= pr->rounds; i++) {
		atomic_store_explicit(&pr->ping, i, memory_order_release);
		while (atomic_load_explicit(&pr->pong, memory_order_acquire) != i)
			bench_cpu_relax();
	}
	pr->ns = (bench_now() - t0) * 1e9 / pr->rounds;
	return NULL;
}

static inline double bench_placement_ns(void)
{
	double v[5];

	for (int k = 0; k < 5; k++) {
		struct bench_probe *p = aligned_alloc(64, sizeof(*p));
		pthread_t ping, pong;

		if (!p)
			return -1;
		memset(p, 0, sizeof(*p));
		p->rounds = 2000;
		p->ns = -1;
		/* Both from here: a thread made by a pinned one would start pinned there. */
		if (pthread_create(&pong, NULL, bench_probe_pong, p)) {
			free(p);
			return -1;
		}
		if (pthread_create(&ping, NULL, bench_probe_ping, p)) {
			/* Let the pong side run out on its own. */
			atomic_store_explicit(&p->ping, p->rounds, memory_order_release);
			pthread_join(pong, NULL);
			free(p);
			return -1;
		}
		pthread_join(ping, NULL);
		pthread_join(pong, NULL);
		v[k] = p->ns;
		free(p);
		if (v[k] < 0)
			return -1;
	}
	return bench_median(v, 5);
}

/*
 * The line under a split table's heading (after false) or rows (after
 * true, which ends the table first): where the CPUs sat.
 */
static inline void bench_placement_say(enum bench_pin pin, bool after)
{
	const char *when = after ? "after the rows" : "before the rows";
	double ns;

	if (pin != BENCH_PIN_SPLIT)
		return;
	ns = bench_placement_ns();
	if (after)
		putchar('\n');
	if (ns < 0)
		printf("Placement %s: not measured.\n\n", when);
	else
		printf("Placement %s: two spinning flags between the two CPUs, %.0f ns a round trip.\n\n",
		       when, ns);
}

static inline double bench_mbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes / secs / 1e6 : 0.0;
}

/*
 * The outcome of one case.  err is 0 or the errno that stopped it, so a
 * case that cannot run (ENOSYS before splice lands, EINVAL for a missing
 * op) prints "n/a (ENOSYS)" rather than a bogus rate.
 */
/* bench_res.err of a case the command line left out: printed as "-". */
#define BENCH_SKIPPED	(-1)

struct bench_res {
	uint64_t bytes;
	double secs;
	int err;
	long rss_start_kib;	/* ru_maxrss when the case began */
	long rss_peak_kib;	/* ru_maxrss when it ended */
	double stall_s;		/* the longest one thread went between its progress marks, if fn measures it */
};

static inline double bench_res_mbps(const struct bench_res *r)
{
	return bench_mbps(r->bytes, r->secs);
}

/*
 * Run fn in a forked child and return what it measured.  A child of its own
 * gives each case a fresh ru_maxrss, so peak RSS growth is the case's alone
 * and not the high-water mark of an earlier, larger case.  fn fills
 * bytes/secs/err.  rss_start_kib is sampled before fn runs; fn may sample it
 * again once its own buffers and threads exist, so that the growth shown is
 * what the pipe itself held.
 */
typedef void (*bench_fn)(void *arg, struct bench_res *res);

static inline struct bench_res bench_fork(bench_fn fn, void *arg)
{
	struct bench_res res = { .err = 0 };
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	fflush(NULL);
	if (pipe(fds)) {
		res.err = errno;
		return res;
	}
	pid = fork();
	if (pid < 0) {
		res.err = errno;
		close(fds[0]);
		close(fds[1]);
		return res;
	}
	if (pid == 0) {
		close(fds[0]);
		res.rss_start_kib = bench_peak_rss_kib();
		fn(arg, &res);
		res.rss_peak_kib = bench_peak_rss_kib();
		/* Fewer than PIPE_BUF bytes into an empty pipe: never short. */
		n = write(fds[1], &res, sizeof(res));
		_exit(n == (ssize_t)sizeof(res) ? 0 : 1);
	}
	close(fds[1]);
	do {
		n = read(fds[0], &res, sizeof(res));
	} while (n < 0 && errno == EINTR);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(res)) {
		/* The child died: say so in the table rather than stop the run. */
		memset(&res, 0, sizeof(res));
		res.err = ECHILD;
		if (WIFSIGNALED(status))
			fprintf(stderr, "bench: case killed by signal %d\n", WTERMSIG(status));
	}
	return res;
}

static inline const char *bench_errname(int err)
{
	const char *s = strerrorname_np(err);

	return s ? s : "error";
}

/*
 * Format a rate for a table cell: "1234.5" or "n/a (ENOSYS)".  buf is the
 * caller's, so several cells can be formatted for one printf.
 */
static inline const char *bench_fmt_rate(char *buf, size_t sz, const struct bench_res *r)
{
	if (r->err == BENCH_SKIPPED)
		snprintf(buf, sz, "-");
	else if (r->err)
		snprintf(buf, sz, "n/a (%s)", bench_errname(r->err));
	else
		snprintf(buf, sz, "%.1f", bench_res_mbps(r));
	return buf;
}

/* "3.42x", or "-" when either side did not run. */
static inline const char *bench_fmt_ratio(char *buf, size_t sz, const struct bench_res *num,
					  const struct bench_res *den)
{
	double d = bench_res_mbps(den);

	if (num->err || den->err || d <= 0)
		snprintf(buf, sz, "-");
	else
		snprintf(buf, sz, "%.2fx", bench_res_mbps(num) / d);
	return buf;
}

/* Peak RSS growth during the case, in MiB, as "+1.2"; "-" when it did not run. */
static inline const char *bench_fmt_rss(char *buf, size_t sz, const struct bench_res *r)
{
	if (r->err || r->rss_peak_kib < 0 || r->rss_start_kib < 0)
		snprintf(buf, sz, "-");
	else
		snprintf(buf, sz, "+%.1f", (double)(r->rss_peak_kib - r->rss_start_kib) / 1024.0);
	return buf;
}

/* "64", "4K", "1M": sizes as the tables show them. */
static inline const char *bench_fmt_size(char *buf, size_t sz, size_t n)
{
	if (n >= GiB && !(n % GiB))
		snprintf(buf, sz, "%zuG", n / GiB);
	else if (n >= MiB && !(n % MiB))
		snprintf(buf, sz, "%zuM", n / MiB);
	else if (n >= KiB && !(n % KiB))
		snprintf(buf, sz, "%zuK", n / KiB);
	else
		snprintf(buf, sz, "%zu", n);
	return buf;
}

/* A benchmark's banner: its name, what it measures, and the time per case. */
static inline void bench_title(const char *name, const char *what)
{
	printf("\n== %s: %s (%g s per case, PP_BENCH_SECONDS) ==\n", name, what,
	       bench_seconds());
}

/* Setup failures are the one reason a bench exits non-zero. */
static inline __attribute__((noreturn, format(printf, 1, 2)))
void bench_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/*
 * One table cell over PP_BENCH_RUNS runs: bench_cell_add() each run's
 * result (a rate in MB/s, or ns per op where bytes counts ops), then
 * bench_cell_done() takes the median.  The first failed run decides the
 * cell: a rate from the runs that worked would hide the failure.
 */
#define BENCH_MAX_RUNS	99

struct bench_cell {
	double v[BENCH_MAX_RUNS];
	unsigned int n;
	int err;			/* the first run's failure, or BENCH_SKIPPED */
	long rss_kib;			/* the largest peak RSS growth of a run */
	double med;
	double stall[BENCH_MAX_RUNS];	/* each run's stall_s */
	double stall_med;
};

static inline void bench_cell_add(struct bench_cell *c, const struct bench_res *r,
				  bool ns_per_op)
{
	if (c->err)
		return;
	if (r->err) {
		c->err = r->err;
		return;
	}
	if (!r->bytes || r->secs <= 0) {
		c->err = ENODATA;	/* nothing moved: no rate to show */
		return;
	}
	c->stall[c->n] = r->stall_s;
	c->v[c->n++] = ns_per_op ? r->secs * 1e9 / (double)r->bytes : bench_res_mbps(r);
	if (r->rss_peak_kib - r->rss_start_kib > c->rss_kib)
		c->rss_kib = r->rss_peak_kib - r->rss_start_kib;
}

static inline void bench_cell_done(struct bench_cell *c)
{
	if (!c->err) {
		c->med = bench_median(c->v, c->n);
		c->stall_med = bench_median(c->stall, c->n);
	}
}

static inline const char *bench_fmt_cell(char *buf, size_t sz, const struct bench_cell *c,
					 const char *fmt)
{
	if (c->err == BENCH_SKIPPED)
		snprintf(buf, sz, "-");
	else if (c->err)
		snprintf(buf, sz, "n/a (%s)", bench_errname(c->err));
	else
		snprintf(buf, sz, fmt, c->med);
	return buf;
}

static inline const char *bench_fmt_cell_ratio(char *buf, size_t sz, const struct bench_cell *a,
					       const struct bench_cell *b)
{
	if (a->err || b->err || b->med <= 0)
		snprintf(buf, sz, "-");
	else
		snprintf(buf, sz, "%.2fx", a->med / b->med);
	return buf;
}

#endif /* PP_BENCH_H */
