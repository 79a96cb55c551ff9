// SPDX-License-Identifier: MIT
/*
 * Description: readers that take a waiting writer's bytes from its own
 * memory (pipe.c, the pull).  A blocking writer that finds the pipe full
 * offers the rest of its write; a blocking reader that then finds the pipe
 * empty copies min(rest, capacity) straight from the writer's buffer, if
 * its request takes all of that.  Nothing a caller sees may change: each
 * case runs the same steps against a kernel pipe and compares every read's
 * count, errno and bytes, the writer's count, its SIGPIPEs and FIONREAD.
 *
 * The writer runs under SCHED_IDLE on the reader's CPU, so it runs only
 * while the reader waits: after a read empties the pipe the writer has
 * not run again, as on one busy CPU, which is where pulls happen.  The
 * kernel's writer then refills the pipe only once the next read blocks,
 * so its reads see what ours see, and the pagepipe's pull counter shows
 * the pull served them.
 */
#include "helpers.h"
#include "internal.h"

#include <sched.h>
#include <sys/syscall.h>

#define CAP	65536
#define MAXR	20

struct pull_case {
	const char *name;
	size_t prefill;		/* written by the reader's thread first */
	size_t wlen;		/* then one write of this much, in wsegs pieces */
	int wsegs;
	long reads[MAXR];	/* requests; negative: a non-blocking read of -n; 0 ends */
	bool close_after;	/* close the read end after the reads, else drain */
	bool pulls;		/* the pagepipe's reads must include a pull */
};

struct writer {
	int kfd;
	struct pp_file *pf;
	int cpu;
	unsigned char *buf;
	size_t len;
	int segs;
	atomic_int tid;
	struct t_res res;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct sched_param sp = { 0 };
	struct iovec iov[8];
	size_t piece = w->len / (size_t)w->segs;

	/* Runs only while the reader waits: see the description. */
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp))
		fprintf(stderr, "SCHED_IDLE refused; pulls may not happen\n");
	for (int i = 0; i < w->segs; i++)
		iov[i] = (struct iovec){ w->buf + (size_t)i * piece,
					 i == w->segs - 1 ? w->len - (size_t)i * piece : piece };
	atomic_store(&w->tid, (int)gettid());
	w->res = w->pf ? T_CALL(pp_writev(w->pf, iov, w->segs))
		       : T_CALL(writev(w->kfd, iov, w->segs));
	return NULL;
}

struct outcome {
	struct t_res reads[MAXR];
	int fionread[MAXR];
	struct t_res write;
	int sigpipes;
	unsigned long pulls;
};

static long rd(int kfd, struct pp_file *pf, void *buf, size_t n, bool nonblock)
{
	long r;

	if (nonblock)
		ASSERT_EQ(pf ? pp_fcntl(pf, F_SETFL, O_NONBLOCK) : fcntl(kfd, F_SETFL, O_NONBLOCK), 0);
	r = pf ? pp_read(pf, buf, n) : read(kfd, buf, n);
	if (nonblock) {
		int e = errno;

		ASSERT_EQ(pf ? pp_fcntl(pf, F_SETFL, 0) : fcntl(kfd, F_SETFL, 0), 0);
		errno = e;
	}
	return r;
}

/* The writer's offer is up (pagepipe) or it sleeps in writev (kernel). */
static void wait_writer_blocked(struct writer *w)
{
	long long deadline = t_now_ms() + 10000;

	while (!atomic_load(&w->tid))
		t_sleep_ms(1);
	if (!w->pf) {
		t_wait_in_syscall(atomic_load(&w->tid), SYS_writev, 10);
		return;
	}
	while (__atomic_load_n(&w->pf->pipe->wo_state, __ATOMIC_ACQUIRE) != PP_WO_OFFERED) {
		if (t_now_ms() > deadline)
			t_fail_at(__FILE__, __LINE__, "the writer never offered its bytes");
		t_sleep_ms(1);
	}
}

static void run_case(const struct pull_case *c, bool kernel, struct outcome *o)
{
	struct writer w = { .kfd = -1, .len = c->wlen, .segs = c->wsegs ? c->wsegs : 1 };
	size_t total = c->prefill + c->wlen, pos = 0, maxr = 0;
	unsigned char *src, *buf;
	struct pp_file *e[2] = { 0 };
	int k[2] = { -1, -1 }, cpu = sched_getcpu();
	pthread_t th;

	ASSERT_TRUE(cpu >= 0);
	ASSERT_EQ(t_pin(pthread_self(), cpu), 0);
	for (int i = 0; i < MAXR && c->reads[i]; i++) {
		size_t n = (size_t)(c->reads[i] > 0 ? c->reads[i] : -c->reads[i]);

		if (n > maxr)
			maxr = n;
	}
	src = malloc(total + 1);
	buf = malloc((maxr > total ? maxr : total) + 1);
	ASSERT_TRUE(src && buf);
	t_fill(src, total, 0, 11);
	if (kernel) {
		t_kpipe2(k, 0);
		ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, CAP), CAP);
		w.kfd = k[1];
	} else {
		t_pipe2(e, 0);
		ASSERT_EQ(pp_fcntl(e[1], F_SETPIPE_SZ, CAP), CAP);
		w.pf = e[1];
	}
	if (c->prefill)
		ASSERT_EQ(kernel ? write(k[1], src, c->prefill) : pp_write(e[1], src, c->prefill),
			  (ssize_t)c->prefill);
	w.buf = src + c->prefill;
	ASSERT_EQ(pthread_create(&th, NULL, writer_main, &w), 0);
	ASSERT_EQ(t_pin(th, cpu), 0);
	wait_writer_blocked(&w);

	for (int i = 0; i < MAXR && c->reads[i]; i++) {
		size_t n = (size_t)(c->reads[i] > 0 ? c->reads[i] : -c->reads[i]);

		o->reads[i] = T_CALL(rd(k[0], e[0], buf, n, c->reads[i] < 0));
		if (o->reads[i].ret > 0) {
			if (t_check(buf, (size_t)o->reads[i].ret, pos, 11))
				t_fail_at(__FILE__, __LINE__, "%s, %s: read %d: wrong bytes", c->name,
					  kernel ? "kernel" : "pagepipe", i);
			pos += (size_t)o->reads[i].ret;
		}
		o->fionread[i] = kernel ? t_kfionread(k[0]) : t_fionread(e[0]);
	}
	if (!kernel)
		o->pulls = e[0]->pipe->rd_pulls;
	if (c->close_after) {
		if (kernel)
			close(k[0]);
		else
			pp_close(e[0]);
	} else {
		while (pos < total) {
			long r = rd(k[0], e[0], buf, total - pos, false);

			ASSERT_TRUE(r > 0);
			ASSERT_EQ(t_check(buf, (size_t)r, pos, 11), 0);
			pos += (size_t)r;
		}
	}
	t_join(th, NULL, 20);
	o->write = w.res;
	o->sigpipes = t_sigpipe_count();
	if (kernel) {
		if (!c->close_after)
			close(k[0]);
		close(k[1]);
	} else {
		if (!c->close_after)
			pp_close(e[0]);
		pp_close(e[1]);
	}
	free(src);
	free(buf);
}

/*
 * Do the two runs differ?  With report, each difference is a failure.
 * The pull counter is checked only with report: it is ours alone.
 */
static bool differs(const struct pull_case *c, const struct outcome *ko, const struct outcome *po,
		    bool report)
{
	bool d = false;

	for (int i = 0; i < MAXR && c->reads[i]; i++) {
		if (ko->reads[i].ret != po->reads[i].ret || ko->reads[i].err != po->reads[i].err) {
			d = true;
			if (report)
				t_fail_at(__FILE__, __LINE__,
					  "%s: read %d of %ld: kernel %lld (%s), pagepipe %lld (%s)",
					  c->name, i, c->reads[i], ko->reads[i].ret,
					  strerror(ko->reads[i].err), po->reads[i].ret,
					  strerror(po->reads[i].err));
		}
		if (ko->fionread[i] != po->fionread[i]) {
			d = true;
			if (report)
				t_fail_at(__FILE__, __LINE__, "%s: FIONREAD after read %d: kernel %d, pagepipe %d",
					  c->name, i, ko->fionread[i], po->fionread[i]);
		}
	}
	if (ko->write.ret != po->write.ret || ko->write.err != po->write.err) {
		d = true;
		if (report)
			t_fail_at(__FILE__, __LINE__, "%s: the write: kernel %lld (%s), pagepipe %lld (%s)",
				  c->name, ko->write.ret, strerror(ko->write.err), po->write.ret,
				  strerror(po->write.err));
	}
	if (po->sigpipes != ko->sigpipes) {
		d = true;
		if (report)
			t_fail_at(__FILE__, __LINE__, "%s: SIGPIPEs: kernel %d, pagepipe %d", c->name,
				  ko->sigpipes, po->sigpipes);
	}
	if (report && c->pulls && !po->pulls)
		t_fail_at(__FILE__, __LINE__, "%s: no read was served by a pull", c->name);
	return d;
}

/*
 * SCHED_IDLE is a small weight, not a guarantee: now and then the
 * scheduler gives the writer a slice while the reader runs (CI's check
 * stage saw it once in about ten runs: a kernel pipe refilled between a
 * read and the FIONREAD after it), and then the kernel's counts move as
 * much as ours would.  So a difference is tried again, twice: one that
 * the code makes repeats on every try, as this schedule is the same each
 * time; the last try reports.
 */
#define TRIES	3

static void compare(const struct pull_case *c)
{
	struct outcome ko, po;

	for (int t = 1;; t++) {
		memset(&ko, 0, sizeof(ko));
		memset(&po, 0, sizeof(po));
		t_sigpipe_count_start();
		run_case(c, true, &ko);
		t_sigpipe_count_start();
		run_case(c, false, &po);
		if (T_SANITIZED || t_under_valgrind()) {
			/*
			 * The sanitizers' runtimes and valgrind's scheduler let the
			 * SCHED_IDLE writer run between our steps (a runtime lock,
			 * valgrind's own time slices), and then how much it refilled
			 * decides the counts, on either pipe.  The bytes were checked
			 * read by read; the order and the happens-before edges are
			 * stress-pull's, which these builds run.
			 */
			printf("  %s: %lu pulls (counts not compared in this build)\n", c->name,
			       po.pulls);
			return;
		}
		if (!differs(c, &ko, &po, t == TRIES))
			break;
		if (t == TRIES)
			return;
		printf("  %s: the runs differ on try %d of %d, again\n", c->name, t, TRIES);
	}
	if (c->pulls && !po.pulls)
		t_fail_at(__FILE__, __LINE__, "%s: no read was served by a pull", c->name);
	printf("  %s: %lu pulls\n", c->name, po.pulls);
}

static const struct pull_case cases[] = {
	/* A 1 MiB write against 1 MiB reads: the ring's 64 KiB, then pulls. */
	{ "large", 0, 1 << 20, 1, { [0 ... 15] = 1 << 20 }, false, true },
	/* The rest fits the request: pulled whole, partial page and all. */
	{ "rest", 0, 100000, 1, { 1 << 20, 1 << 20 }, false, true },
	/* Scattered writer memory; a pull crosses its segments. */
	{ "scattered", 0, 300000, 3, { 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20 }, false, true },
	/* Smaller requests, whole pages: from the ring, then a pull. */
	{ "smaller", 0, 1 << 20, 1, { 16384, 16384, 16384, 16384, 1 << 20 }, false, true },
	/* A request the capacity does not fit, not whole pages: no pull, same counts. */
	{ "odd-request", 0, 1 << 20, 1, { 65536, 20000, 1 << 20, 1 << 20 }, false, false },
	/* A non-blocking read of the emptied pipe: EAGAIN, the writer has not run. */
	{ "nonblock", 0, 1 << 20, 1, { 65536, -65536, 65536 }, false, true },
	/* At most PIPE_BUF into a full pipe: pulled whole, atomic. */
	{ "pipe-buf", CAP, 4096, 1, { 1 << 20, 1 << 20 }, false, true },
	/* The reader leaves after a pull: the writer gets its count and SIGPIPE. */
	{ "close-partial", 0, 1 << 20, 1, { 65536, 65536 }, true, true },
	/* The reader took everything, then left: the write is whole, no SIGPIPE. */
	{ "close-whole", 0, 200000, 1, { 1 << 20, 1 << 20, 1 << 20, 1 << 20 }, true, true },
};

static int differential(void)
{
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		compare(&cases[i]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(differential),
	};

	return T_RUN_SUBTESTS(tests);
}
