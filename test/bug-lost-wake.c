// SPDX-License-Identifier: MIT
/*
 * Description: no wake-up is lost when two producers (or two consumers)
 * share a side of a pipe.  A waiter sleeps on a futex word, and a flag
 * (`woken`) spares a busy waker a system call per write while the wake-up
 * it sent is on its way (wait.c).  With the sleeper's load of the futex
 * word after its clearing of the flag, a waker could set the flag and bump
 * the word between the two; another producer took the room before the
 * sleeper looked, the sleeper slept on the new word, and every later waker
 * found the flag set and woke no one.  test/defect-lock-sleep's five
 * threads stopped dead that way in CI: all asleep, on one pipe that was
 * empty and one that was full.
 *
 * The window is a few instructions wide, so this test carries its own copy
 * of wait.c (the library's is then not linked) with a hook between the
 * steps of a sleep, and plays the race out in order: a writer blocks on a
 * full pipe, and at step k of its sleep (k = 1, 2, 3: after its count, its
 * load of the word, its clearing of the flag) a reader frees the room and
 * wakes writers, and a second writer takes the room; then, with the first
 * writer asleep, a read makes room for good, and the writer must finish.
 * The same on the reader side: a reader blocks on an empty pipe, and at
 * step k a write wakes readers and a second reader takes the bytes.  Last,
 * the five threads of defect-lock-sleep on one-page pipes (a writer into
 * A, a reader of B, splices A->B and B->A, a tee that alternates A->B and
 * B->A, so each pipe has two producers and two consumers), three groups at
 * once for PP_STRESS_SECONDS (default 2): no group may go 3 s without a
 * call.  Hang detectors, no timing asserted.
 */
#include "helpers.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/*
 * The hook runs in the thread that armed it, at the k-th step of its
 * first sleep, once.
 */
static __thread int hook_step;
static __thread void (*hook_fn)(void);

static void sleep_step(void)
{
	static __thread int steps;

	if (hook_step && ++steps == hook_step) {
		hook_step = 0;
		hook_fn();
	}
}
#define PP__SLEEP_STEP()	sleep_step()
#include "../src/wait.c"

#define PAGE	4096
#define GROUPS	3

/* ---------------------------------------------------------------------- */

static struct pp_file *E[2];
static char page[PAGE];
static atomic_int injected;

struct sleeper {
	bool reader;
	int step;
	pid_t tid;
	ssize_t ret;
	int err;
};

/* A reader frees the room (and wakes writers); a second writer takes it. */
static void room_made_and_taken(void)
{
	char buf[PAGE];

	ASSERT_EQ(pp_read(E[0], buf, PAGE), PAGE);
	ASSERT_EQ(pp_write(E[1], page, PAGE), PAGE);
	atomic_store(&injected, 1);
}

/* A writer adds bytes (and wakes readers); a second reader takes them. */
static void bytes_added_and_taken(void)
{
	char buf[PAGE];

	ASSERT_EQ(pp_write(E[1], page, 100), 100);
	ASSERT_EQ(pp_read(E[0], buf, PAGE), 100);
	atomic_store(&injected, 1);
}

static void *sleeper_main(void *arg)
{
	struct sleeper *sl = arg;
	char buf[PAGE];

	sl->tid = (pid_t)syscall(SYS_gettid);
	hook_step = sl->step;
	hook_fn = sl->reader ? bytes_added_and_taken : room_made_and_taken;
	errno = 0;
	sl->ret = sl->reader ? pp_read(E[0], buf, PAGE) : pp_write(E[1], page, PAGE);
	sl->err = errno;
	return NULL;
}

static int race_at(bool reader, int step)
{
	struct sleeper sl = { .reader = reader, .step = step, .tid = 0 };
	char buf[PAGE];
	pthread_t th;

	t_pipe2(E, 0);
	ASSERT_EQ(pp_fcntl(E[1], F_SETPIPE_SZ, PAGE), PAGE);
	if (!reader)
		ASSERT_EQ(pp_write(E[1], page, PAGE), PAGE);	/* full */
	ASSERT_EQ(pthread_create(&th, NULL, sleeper_main, &sl), 0);
	while (!atomic_load(&injected))
		t_sleep_ms(1);
	/* Asleep for good this time (or woken at once, and asleep again). */
	t_wait_in_syscall(__atomic_load_n(&sl.tid, __ATOMIC_SEQ_CST), SYS_futex, 5);
	if (reader)
		ASSERT_EQ(pp_write(E[1], page, 10), 10);
	else
		ASSERT_EQ(pp_read(E[0], buf, PAGE), PAGE);
	t_join(th, NULL, 5);
	ASSERT_EQ(sl.ret, reader ? 10 : PAGE);
	if (!reader)
		ASSERT_EQ(pp_read(E[0], buf, PAGE), PAGE);
	ASSERT_EQ(pp_close(E[1]), 0);
	ASSERT_EQ(pp_read(E[0], buf, PAGE), 0);	/* nothing lost, nothing doubled */
	ASSERT_EQ(pp_close(E[0]), 0);
	return T_EXIT_PASS;
}

static int writer_woken_after_count(void) { return race_at(false, 1); }
static int writer_woken_after_load(void) { return race_at(false, 2); }
static int writer_woken_after_clear(void) { return race_at(false, 3); }
static int reader_woken_after_count(void) { return race_at(true, 1); }
static int reader_woken_after_load(void) { return race_at(true, 2); }
static int reader_woken_after_clear(void) { return race_at(true, 3); }

/* ---------------------------------------------------------------------- */

struct group {
	struct pp_file *a[2], *b[2];
	atomic_llong calls[5];
};

static struct group groups[GROUPS];

static void *mix_writer(void *arg)
{
	struct group *g = arg;

	for (;;) {
		if (pp_write(g->a[1], page, 1000) <= 0)
			t_fail_at(__FILE__, __LINE__, "writer: %s", strerror(errno));
		atomic_fetch_add(&g->calls[0], 1);
	}
	return NULL;
}

static void *mix_reader(void *arg)
{
	struct group *g = arg;
	char buf[PAGE * 4];	/* its own: three groups read at once */

	for (;;) {
		if (pp_read(g->b[0], buf, sizeof(buf)) <= 0)
			t_fail_at(__FILE__, __LINE__, "reader: %s", strerror(errno));
		atomic_fetch_add(&g->calls[1], 1);
	}
	return NULL;
}

static void *mix_splice_ab(void *arg)
{
	struct group *g = arg;

	for (;;) {
		if (pp_splice(g->a[0], NULL, g->b[1], NULL, 3 * PAGE, 0) <= 0)
			t_fail_at(__FILE__, __LINE__, "splice A->B: %s", strerror(errno));
		atomic_fetch_add(&g->calls[2], 1);
	}
	return NULL;
}

static void *mix_splice_ba(void *arg)
{
	struct group *g = arg;

	for (;;) {
		if (pp_splice(g->b[0], NULL, g->a[1], NULL, 2 * PAGE, 0) <= 0)
			t_fail_at(__FILE__, __LINE__, "splice B->A: %s", strerror(errno));
		atomic_fetch_add(&g->calls[3], 1);
	}
	return NULL;
}

static void *mix_tee(void *arg)
{
	struct group *g = arg;

	for (unsigned int i = 0;; i++) {
		ssize_t r = i & 1 ? pp_tee(g->b[0], g->a[1], PAGE, 0)
				  : pp_tee(g->a[0], g->b[1], PAGE, 0);

		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "tee: %s", strerror(errno));
		atomic_fetch_add(&g->calls[4], 1);
	}
	return NULL;
}

static long long group_calls(struct group *g)
{
	long long n = 0;

	for (int j = 0; j < 5; j++)
		n += atomic_load(&g->calls[j]);
	return n;
}

static void dump_pipe(const char *name, struct pp_pipe *p)
{
	printf("  %s: head %u tail %u max_usage %u; readers asleep %u woken %d wq %u; "
	       "writers asleep %u woken %d wq %u\n", name,
	       __atomic_load_n(&p->head, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->tail, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->max_usage, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->rd_sleepers, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->rd_woken, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->rd_wait, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->wr_sleepers, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->wr_woken, __ATOMIC_RELAXED),
	       __atomic_load_n(&p->wr_wait, __ATOMIC_RELAXED));
}

static int run_groups(int seconds)
{
	static void *(*fns[5])(void *) = {
		mix_writer, mix_reader, mix_splice_ab, mix_splice_ba, mix_tee,
	};
	long long end = t_now_ms() + seconds * 1000LL, last[GROUPS], last_change[GROUPS], all = 0;

	for (int i = 0; i < GROUPS; i++) {
		struct group *g = &groups[i];

		t_pipe2(g->a, 0);
		t_pipe2(g->b, 0);
		ASSERT_EQ(pp_fcntl(g->a[1], F_SETPIPE_SZ, PAGE), PAGE);
		ASSERT_EQ(pp_fcntl(g->b[1], F_SETPIPE_SZ, PAGE), PAGE);
		last[i] = -1;
		last_change[i] = t_now_ms();
		for (int j = 0; j < 5; j++) {
			pthread_t th;

			ASSERT_EQ(pthread_create(&th, NULL, fns[j], g), 0);
			pthread_detach(th);
		}
	}
	while (t_now_ms() < end) {
		for (int i = 0; i < GROUPS; i++) {
			struct group *g = &groups[i];
			long long n = group_calls(g);

			if (n != last[i]) {
				last[i] = n;
				last_change[i] = t_now_ms();
				continue;
			}
			if (t_now_ms() - last_change[i] <= 3000)
				continue;
			printf("group %d: no call completed for 3 s (%lld in all):\n", i, n);
			dump_pipe("A", g->a[0]->pipe);
			dump_pipe("B", g->b[0]->pipe);
			t_fail_at(__FILE__, __LINE__, "group %d stalled: a wake-up was lost", i);
		}
		t_sleep_ms(20);
	}
	for (int i = 0; i < GROUPS; i++)
		all += group_calls(&groups[i]);
	printf("%lld calls in %d s, no group stalled\n", all, seconds);
	return T_EXIT_PASS;
}

/* The threads never stop: they run in this sub-test's child, which exits under them. */
static int five_threads_three_groups(void)
{
	const char *s = getenv("PP_STRESS_SECONDS");

	return run_groups(s && atoi(s) > 0 ? atoi(s) : 2);
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(writer_woken_after_count),
		T_SUBTEST(writer_woken_after_load),
		T_SUBTEST(writer_woken_after_clear),
		T_SUBTEST(reader_woken_after_count),
		T_SUBTEST(reader_woken_after_load),
		T_SUBTEST(reader_woken_after_clear),
		T_SUBTEST(five_threads_three_groups),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
