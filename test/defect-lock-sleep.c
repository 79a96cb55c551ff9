// SPDX-License-Identifier: MIT
/*
 * Description: no pipe lock may be held across a sleep or an endpoint's
 * system call (issue 11, section 2, defect 2).  Today the producer lock is
 * held while a splice into the pipe waits in its source's splice_read (an
 * empty kernel pipe) or while a writer sleeps on a full pipe, and the
 * consumer lock is held while a splice out of the pipe waits in the
 * output's system call or for the output's producer lock.  A blocking call
 * on the same pipe from another thread then hangs, and a non-blocking one
 * spins in sched_yield, where the kernel returns at once.  One sub-test per
 * lock and blocking point; each runs the same steps on kernel pipes
 * (wrapped with pp_fdopen, so every call is the system call) first, as the
 * reference, then on pagepipes.  A watchdog turns a hang into a failure
 * that names the step.  The last sub-test is the five-thread mix of
 * pp_splice(3)'s promise: a writer, a reader, splices A->B and B->A and
 * tee both ways must keep moving bytes.
 */
#include "helpers.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define PAGE	4096

static const char *side;

/* The watchdog's message names the side and the step. */
static void watch(int seconds, const char *what)
{
	static char msg[256];

	snprintf(msg, sizeof(msg), "%s: %s", side, what ? what : "");
	t_watchdog(seconds, msg);
}

/* A kernel pipe wrapped with pp_fdopen (every call is the system call), or a pagepipe. */
static void any_pipe(bool kernel, struct pp_file *e[2], int flags)
{
	int fds[2];

	if (!kernel) {
		t_pipe2(e, flags);
		return;
	}
	t_kpipe2(fds, flags & O_NONBLOCK);
	e[0] = pp_fdopen(fds[0]);
	e[1] = pp_fdopen(fds[1]);
	if (!e[0] || !e[1])
		t_fail_at(__FILE__, __LINE__, "pp_fdopen: %s", strerror(errno));
}

/* Fill a pipe to the brim with non-blocking writes; returns the bytes it holds. */
static size_t fill(struct pp_file *w)
{
	static char page[PAGE];
	int fl = pp_fcntl(w, F_GETFL);
	size_t total = 0;
	ssize_t r;

	ASSERT_EQ(pp_fcntl(w, F_SETFL, fl | O_NONBLOCK), 0);
	while ((r = pp_write(w, page, sizeof(page))) > 0)
		total += (size_t)r;
	ASSERT_EQ(r, -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(pp_fcntl(w, F_SETFL, fl), 0);
	return total;
}

static void drain(struct pp_file *r, size_t len)
{
	char buf[PAGE];

	while (len) {
		ssize_t n = pp_read(r, buf, len < sizeof(buf) ? len : sizeof(buf));

		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: drain: pp_read = %zd (%s), %zu left",
				  side, n, strerror(errno), len);
		len -= (size_t)n;
	}
}

/* One call in its own thread. */
enum op { OP_SPLICE, OP_TEE, OP_WRITE };
struct job {
	enum op op;
	struct pp_file *in, *out;
	size_t len;
	ssize_t ret;
	int err;
	atomic_int done;
	pthread_t th;
};

static void *job_main(void *arg)
{
	static char page[PAGE];
	struct job *j = arg;

	errno = 0;
	switch (j->op) {
	case OP_SPLICE:
		j->ret = pp_splice(j->in, NULL, j->out, NULL, j->len, 0);
		break;
	case OP_TEE:
		j->ret = pp_tee(j->in, j->out, j->len, 0);
		break;
	case OP_WRITE:
		j->ret = pp_write(j->out, page, j->len);
		break;
	}
	j->err = errno;
	atomic_store(&j->done, 1);
	return NULL;
}

/* Start j and give it time to reach its wait (never a pass/fail timing). */
static void job_start(struct job *j)
{
	ASSERT_EQ(pthread_create(&j->th, NULL, job_main, j), 0);
	t_sleep_ms(200);
	if (atomic_load(&j->done))
		t_fail_at(__FILE__, __LINE__, "%s: the call that should block returned %zd (%s)",
			  side, j->ret, strerror(j->err));
}

static void job_join(struct job *j, ssize_t want)
{
	t_join(j->th, NULL, 10);
	if (j->ret != want)
		t_fail_at(__FILE__, __LINE__, "%s: blocked call returned %zd (%s), want %zd",
			  side, j->ret, j->ret < 0 ? strerror(j->err) : "ok", want);
}

static void set_nonblock(struct pp_file *f)
{
	ASSERT_EQ(pp_fcntl(f, F_SETFL, pp_fcntl(f, F_GETFL) | O_NONBLOCK), 0);
}

/*
 * A splice from an empty kernel pipe into P waits in the source.  A write
 * to P from another thread must not wait for it: the kernel writes.
 */
static void write_during_splice_from_empty(bool kernel, bool nonblock)
{
	struct pp_file *p[2], *kin;
	int k[2];
	char c;

	side = kernel ? "kernel" : "pagepipe";
	t_kpipe2(k, 0);
	kin = pp_fdopen(k[0]);
	any_pipe(kernel, p, 0);

	struct job s = { .op = OP_SPLICE, .in = kin, .out = p[1], .len = PAGE };
	job_start(&s);
	if (nonblock)
		set_nonblock(p[1]);
	watch(5, nonblock ?
		   "non-blocking pp_write to P while another thread splices an empty kernel pipe into P" :
		   "pp_write to P while another thread splices an empty kernel pipe into P");
	ASSERT_EQ(pp_write(p[1], "x", 1), 1);
	watch(5, "pp_read of P after the write");
	ASSERT_EQ(pp_read(p[0], &c, 1), 1);
	ASSERT_EQ(c, 'x');

	/* Let the splice finish. */
	watch(5, "cleanup: the splice from the kernel pipe");
	ASSERT_EQ(write(k[1], "y", 1), 1);
	job_join(&s, 1);
	ASSERT_EQ(pp_read(p[0], &c, 1), 1);
	ASSERT_EQ(c, 'y');
	watch(0, NULL);
	pp_close(p[0]);
	pp_close(p[1]);
	pp_close(kin);
	close(k[1]);
}

static int write_during_splice_from_empty_kpipe(void)
{
	write_during_splice_from_empty(true, false);
	write_during_splice_from_empty(false, false);
	return T_EXIT_PASS;
}

static int write_nonblock_during_splice_from_empty_kpipe(void)
{
	write_during_splice_from_empty(true, true);
	write_during_splice_from_empty(false, true);
	return T_EXIT_PASS;
}

/*
 * A splice from P into a full kernel pipe waits in the output's system
 * call.  A read of P from another thread must not wait for it.
 */
static void read_during_splice_to_full(bool kernel, bool nonblock)
{
	struct pp_file *p[2], *kout, *kin;
	char buf[8];
	size_t held;
	int k[2];

	side = kernel ? "kernel" : "pagepipe";
	t_kpipe2(k, 0);
	kin = pp_fdopen(k[0]);
	kout = pp_fdopen(k[1]);
	held = fill(kout);
	any_pipe(kernel, p, 0);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);

	struct job s = { .op = OP_SPLICE, .in = p[0], .out = kout, .len = 5 };
	job_start(&s);
	if (nonblock)
		set_nonblock(p[0]);
	watch(5, nonblock ?
		   "non-blocking pp_read of P while a splice from P waits on a full kernel pipe" :
		   "pp_read of P while a splice from P waits on a full kernel pipe");
	ASSERT_EQ(pp_read(p[0], buf, 5), 5);
	ASSERT_MEM_EQ(buf, "hello", 5);

	watch(5, "cleanup: the splice to the kernel pipe");
	ASSERT_EQ(pp_write(p[1], "world", 5), 5);
	drain(kin, held);
	job_join(&s, 5);
	ASSERT_EQ(pp_read(kin, buf, 5), 5);
	ASSERT_MEM_EQ(buf, "world", 5);
	watch(0, NULL);
	pp_close(p[0]);
	pp_close(p[1]);
	pp_close(kin);
	pp_close(kout);
}

static int read_during_splice_to_full_kpipe(void)
{
	read_during_splice_to_full(true, false);
	read_during_splice_to_full(false, false);
	return T_EXIT_PASS;
}

static int read_nonblock_during_splice_to_full_kpipe(void)
{
	read_during_splice_to_full(true, true);
	read_during_splice_to_full(false, true);
	return T_EXIT_PASS;
}

/*
 * A writer sleeps on a full Q while a tee from P into Q waits for room.  A
 * read of P from a third thread must not wait for either.  (Passes today:
 * the tee waits for room holding no lock.  A regression check.)
 */
static void read_behind_sleeping_writer(bool kernel)
{
	struct pp_file *p[2], *q[2];
	char buf[8];
	size_t held;

	side = kernel ? "kernel" : "pagepipe";
	any_pipe(kernel, p, 0);
	any_pipe(kernel, q, 0);
	held = fill(q[1]);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);

	struct job w = { .op = OP_WRITE, .out = q[1], .len = PAGE };
	job_start(&w);
	struct job s = { .op = OP_TEE, .in = p[0], .out = q[1], .len = 5 };
	job_start(&s);
	watch(5, "pp_read of P while a tee P->Q waits behind a writer asleep on a full Q");
	ASSERT_EQ(pp_read(p[0], buf, 5), 5);
	ASSERT_MEM_EQ(buf, "hello", 5);

	watch(5, "cleanup: the writer and the tee into Q");
	ASSERT_EQ(pp_write(p[1], "world", 5), 5);
	drain(q[0], held);
	/*
	 * Q now takes the writer's page and the five bytes, in either order;
	 * a tee that finds Q full again when it gets there returns 0 (the
	 * kernel's link_pipe does not retry).
	 */
	job_join(&w, PAGE);
	t_join(s.th, NULL, 10);
	if (s.ret != 5 && s.ret != 0)
		t_fail_at(__FILE__, __LINE__, "%s: the tee returned %zd (%s), want 5 or 0",
			  side, s.ret, s.ret < 0 ? strerror(s.err) : "ok");
	drain(q[0], PAGE + (size_t)s.ret);
	watch(0, NULL);
	pp_close(p[0]);
	pp_close(p[1]);
	pp_close(q[0]);
	pp_close(q[1]);
}

static int read_during_tee_behind_sleeping_writer(void)
{
	read_behind_sleeping_writer(true);
	read_behind_sleeping_writer(false);
	return T_EXIT_PASS;
}

/*
 * S1 splices an empty kernel pipe into Q (it waits in the source); S2
 * splices or tees P into Q, which has room.  The kernel's S2 finishes at
 * once.  A read of P from a third thread must not wait for S1 through S2
 * (the input's consumer lock held while waiting for the output's producer
 * lock).
 */
static void read_behind_blocked_producer(bool kernel, enum op op, bool nonblock)
{
	struct pp_file *p[2], *q[2], *kin;
	char buf[16];
	int k[2];

	side = kernel ? "kernel" : "pagepipe";
	t_kpipe2(k, 0);
	kin = pp_fdopen(k[0]);
	any_pipe(kernel, p, 0);
	any_pipe(kernel, q, 0);
	ASSERT_EQ(pp_write(p[1], "helloworld", 10), 10);

	struct job s1 = { .op = OP_SPLICE, .in = kin, .out = q[1], .len = PAGE };
	job_start(&s1);
	struct job s2 = { .op = op, .in = p[0], .out = q[1], .len = 5 };
	ASSERT_EQ(pthread_create(&s2.th, NULL, job_main, &s2), 0);
	t_sleep_ms(200);
	if (nonblock)
		set_nonblock(p[0]);
	watch(5, op == OP_TEE ?
	      "pp_read of P while a tee P->Q waits for Q's producer, who waits on an empty kernel pipe" :
	      "pp_read of P while a splice P->Q waits for Q's producer, who waits on an empty kernel pipe");
	/* One byte: P still has data for S2 whenever it runs. */
	ASSERT_EQ(pp_read(p[0], buf, 1), 1);

	watch(5, "the splice or tee P->Q, then cleanup");
	job_join(&s2, 5);
	ASSERT_EQ(write(k[1], "y", 1), 1);
	job_join(&s1, 1);
	ASSERT_EQ(pp_read(q[0], buf, sizeof(buf)), 6);
	watch(0, NULL);
	pp_close(p[0]);
	pp_close(p[1]);
	pp_close(q[0]);
	pp_close(q[1]);
	pp_close(kin);
	close(k[1]);
}

static int read_during_splice_behind_blocked_producer(void)
{
	read_behind_blocked_producer(true, OP_SPLICE, false);
	read_behind_blocked_producer(false, OP_SPLICE, false);
	return T_EXIT_PASS;
}

static int read_during_tee_behind_blocked_producer(void)
{
	read_behind_blocked_producer(true, OP_TEE, false);
	read_behind_blocked_producer(false, OP_TEE, false);
	return T_EXIT_PASS;
}

static int read_nonblock_during_tee_behind_blocked_producer(void)
{
	read_behind_blocked_producer(true, OP_TEE, true);
	read_behind_blocked_producer(false, OP_TEE, true);
	return T_EXIT_PASS;
}

/*
 * Five threads: a writer into A, a reader of B, splice A->B, splice B->A,
 * and tee A->B and B->A alternately.  The reader must keep getting bytes:
 * a reader that gets none for 5 s is a stall (a hang detector, not a
 * timing).  The threads are left running; the sub-test's process ends.
 */
struct mix {
	struct pp_file *a[2], *b[2];
	atomic_llong read_bytes, calls[5];
};

static void *mix_writer(void *arg)
{
	struct mix *m = arg;
	static char page[PAGE];

	for (;;) {
		if (pp_write(m->a[1], page, 1000) <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: writer: %s", side, strerror(errno));
		atomic_fetch_add(&m->calls[0], 1);
	}
	return NULL;
}

static void *mix_reader(void *arg)
{
	struct mix *m = arg;
	static char page[PAGE * 4];

	for (;;) {
		ssize_t n = pp_read(m->b[0], page, sizeof(page));

		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: reader: %zd %s", side, n, strerror(errno));
		atomic_fetch_add(&m->read_bytes, n);
		atomic_fetch_add(&m->calls[1], 1);
	}
	return NULL;
}

static void *mix_splice_ab(void *arg)
{
	struct mix *m = arg;

	for (;;) {
		if (pp_splice(m->a[0], NULL, m->b[1], NULL, 3 * PAGE, 0) <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: splice A->B: %s", side, strerror(errno));
		atomic_fetch_add(&m->calls[2], 1);
	}
	return NULL;
}

static void *mix_splice_ba(void *arg)
{
	struct mix *m = arg;

	for (;;) {
		if (pp_splice(m->b[0], NULL, m->a[1], NULL, 2 * PAGE, 0) <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: splice B->A: %s", side, strerror(errno));
		atomic_fetch_add(&m->calls[3], 1);
	}
	return NULL;
}

static void *mix_tee(void *arg)
{
	struct mix *m = arg;

	for (unsigned int i = 0;; i++) {
		ssize_t r = i & 1 ? pp_tee(m->b[0], m->a[1], PAGE, 0)
				  : pp_tee(m->a[0], m->b[1], PAGE, 0);

		/* The kernel's tee returns 0 when it lost a race for the slots. */
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "%s: tee: %s", side, strerror(errno));
		atomic_fetch_add(&m->calls[4], 1);
	}
	return NULL;
}

static const char *const mix_names[5] = {
	"writer", "reader", "splice A->B", "splice B->A", "tee",
};

static void mix_report(struct mix *m, const char *what)
{
	printf("%s: %s: read %lld bytes; calls:", side, what, (long long)m->read_bytes);
	for (int i = 0; i < 5; i++)
		printf(" %s %lld", mix_names[i], (long long)m->calls[i]);
	printf("\n");
}

/*
 * Run for the given seconds, then every thread must complete at least one
 * more call within 5 s: a thread that does not is stalled (a hang
 * detector: the kernel's threads make thousands of calls a second).
 */
static int run_mix(bool kernel, int seconds)
{
	static void *(*fns[5])(void *) = {
		mix_writer, mix_reader, mix_splice_ab, mix_splice_ba, mix_tee,
	};
	struct mix *m = calloc(1, sizeof(*m));
	long long seen[5], deadline;

	side = kernel ? "kernel" : "pagepipe";
	any_pipe(kernel, m->a, 0);
	any_pipe(kernel, m->b, 0);
	for (int i = 0; i < 5; i++) {
		pthread_t th;

		ASSERT_EQ(pthread_create(&th, NULL, fns[i], m), 0);
		pthread_detach(th);
	}
	t_sleep_ms(seconds * 1000);
	mix_report(m, "after the run");
	for (int i = 0; i < 5; i++)
		seen[i] = atomic_load(&m->calls[i]);
	deadline = t_now_ms() + 5000;
	for (int i = 0; i < 5; i++) {
		while (atomic_load(&m->calls[i]) == seen[i]) {
			if (t_now_ms() > deadline) {
				mix_report(m, "stalled");
				t_fail_at(__FILE__, __LINE__,
					  "%s: stalled: the %s made no call for 5 s (%lld calls in all)",
					  side, mix_names[i], seen[i]);
			}
			t_sleep_ms(10);
		}
	}
	return T_EXIT_PASS;
}

static int mix_seconds(void)
{
	const char *s = getenv("PP_STRESS_SECONDS");
	int n = s ? atoi(s) : 0;

	return n > 0 ? n : 2;
}

/* In a child each, since the threads never stop. */
static int five_threads_opposite_splices_and_tees(void)
{
	int secs = mix_seconds();

	for (int kernel = 1; kernel >= 0; kernel--) {
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		ASSERT_TRUE(pid >= 0);
		if (pid == 0) {
			alarm((unsigned int)secs + 20);
			int rc = run_mix(kernel, secs);

			fflush(stdout);
			_exit(rc);
		}
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			t_fail_at(__FILE__, __LINE__, "%s side failed (status 0x%x)",
				  kernel ? "kernel" : "pagepipe", status);
	}
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(write_during_splice_from_empty_kpipe),
		T_SUBTEST(write_nonblock_during_splice_from_empty_kpipe),
		T_SUBTEST(read_during_splice_to_full_kpipe),
		T_SUBTEST(read_nonblock_during_splice_to_full_kpipe),
		T_SUBTEST(read_during_tee_behind_sleeping_writer),
		T_SUBTEST(read_during_splice_behind_blocked_producer),
		T_SUBTEST(read_during_tee_behind_blocked_producer),
		T_SUBTEST(read_nonblock_during_tee_behind_blocked_producer),
		T_SUBTEST(five_threads_opposite_splices_and_tees),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
