// SPDX-License-Identifier: MIT
/*
 * Description: the biased write lock of a PP_O_SHARED pipe (src/shared.c)
 * excludes, across processes, and survives its owner's death.  The thread
 * that writes alone takes wr_lock with plain stores: it stores its
 * record's `busy` and then loads `revoke`, ordered by nothing but the
 * compiler; a writer in another process stores `revoke`, runs
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) and waits until `busy` is
 * clear.  Without the membarrier both loads can miss both stores and two
 * writers are inside at once.
 *
 * This test carries its own copy of shared.c (the library's is then not
 * linked) that grants the bias after one ordinary take and never backs
 * off, and that can stop a fast section just before it publishes
 * (PP__SH_FAST_STEP).
 *  - records_under_revokes: three writer processes on different CPUs
 *    write PIPE_BUF records, so the bias moves all the time; the reader
 *    sees every record whole, once and in each writer's order, and many
 *    revocations;
 *  - owner_killed_inside: the owner, SIGKILLed inside a fast section with
 *    three pages taken and not yet shown: the next writer takes over (one
 *    owner found dead), nothing of the killed write shows, and its pages
 *    come back to the arena;
 *  - owner_waited_for: a writer in another process that revokes while the
 *    owner is inside waits for it: the owner's record comes first, whole;
 *  - close_waits_for_owner: pp_close() of the write end while a thread of
 *    the same process is inside a fast section on it waits for the
 *    section (a fast section holds no reference on its file);
 *  - no_membarrier: a pipe whose asym_off is set (as by a process that
 *    cannot membarrier) grants no bias and makes no plain wake-up, and
 *    still carries every record, the reader sleeping between bursts.
 *  - bare_sections: the lock alone, two threads on two CPUs taking it in
 *    a tight loop, a flag inside that must be clear.
 *  - merge_cache_sees_drains: the owner's merge cache (slot_extend) must
 *    not hide a drain that came before its write: the next small write
 *    reopens the slot from its page's start, as a kernel pipe's starts a
 *    fresh page, beside a kernel pipe (a cache blind to ctrl->drains
 *    appends after the drained bytes, and a one-page pipe then has no
 *    room for 4000 bytes the kernel's takes).
 *  - merge_cache_two_mappings: one thread writes through the pipe's own
 *    write end and through one exported and imported in the same process
 *    (a second mapping, a second cache) in turn, under one bias: every
 *    byte arrives (a cache that trusts its own last end rewrites what
 *    the other mapping appended).
 * Without the revoker's wait for `busy`, records_under_revokes,
 * owner_waited_for and close_waits_for_owner fail; without its look at
 * whether the owner lives, owner_killed_inside does.  Without the
 * membarrier alone the record tests passed 1.6 million revocations (the
 * window is two stores each still in its CPU's store buffer, and a whole
 * write around each entry makes it rare); bare_sections failed 5 runs in
 * 5 that way, within the second.
 */
#include "helpers.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

static volatile int step_mode;	/* 0 none, 1 stop for good, 2 pause a while */
static int step_fd = -1;	/* told when a section stops */
static atomic_int step_done;

static void fast_step(void)
{
	if (!step_mode)
		return;
	if (write(step_fd, "s", 1) != 1)
		_exit(3);
	if (step_mode == 1)
		for (;;)
			pause();
	t_sleep_ms(200);
	atomic_store(&step_done, 1);
}

#define SH_BIAS_AFTER		1u
#define SH_BIAS_AFTER_MAX	1u
#define PP__SH_FAST_STEP(f)	fast_step()
#include "../src/shared.c"

#define REC	512u
#define NW	3

/* t_rec_check, and an id no writer here has: 0 whole, 1 not. */
static int rec_take(const unsigned char *rec, uint32_t *id, uint64_t *seq)
{
	return t_rec_check(rec, REC, id, seq) || *id >= 64;
}

static unsigned int stat_revokes(struct pp_file *f, unsigned int *dead)
{
	unsigned int revokes;

	pp__shared_bias_stats(f, &revokes, dead);
	return revokes;
}

/* Pages free in the arena, and those the ring and the spare hold: their sum never changes. */
static uint32_t pages_accounted(struct pp_file *f)
{
	struct sh_pipe *sp = end_of(f)->sp;
	struct sh_ctrl *c = ctrl(sp);
	uint32_t held = c->head - c->tail + (c->spare != 0);

	return pp__arena_free_pages(&sp->arena) + held;
}

static int records_under_revokes(void)
{
	unsigned long long *sent = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned long long got[NW] = { 0 };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned char buf[64 * REC];
	struct pp_file *p[2];
	unsigned int dead;
	size_t have = 0;
	pid_t pid[NW];

	ASSERT_TRUE(sent != MAP_FAILED);
	t_watchdog(60, "records_under_revokes");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	for (int i = 0; i < NW; i++) {
		pid[i] = fork();
		ASSERT_NE(pid[i], -1);
		if (pid[i] == 0) {
			unsigned char rec[REC];
			long long end = t_now_ms() + 1000;
			uint64_t seq = 0;

			pp_close(p[0]);
			t_pin(pthread_self(), (int)(i % ncpu));
			while (t_now_ms() < end) {
				t_rec_make(rec, REC, (uint32_t)i, seq);
				if (pp_write(p[1], rec, REC) != REC)
					_exit(2);
				seq++;
			}
			sent[i] = seq;
			_exit(0);
		}
	}
	pp_close(p[1]);
	for (;;) {
		ssize_t r = pp_read(p[0], buf + have, sizeof(buf) - have);
		size_t whole;

		ASSERT_GE(r, 0);
		if (r == 0)
			break;
		have += (size_t)r;
		whole = have - have % REC;
		for (size_t off = 0; off < whole; off += REC) {
			uint32_t id;
			uint64_t seq;

			ASSERT_EQ(rec_take(buf + off, &id, &seq), 0);
			ASSERT_TRUE(id < NW);
			ASSERT_EQ(seq, got[id]);	/* once, in order */
			got[id]++;
		}
		memmove(buf, buf + whole, have - whole);
		have -= whole;
	}
	ASSERT_EQ(have, 0);
	for (int i = 0; i < NW; i++) {
		int st;

		ASSERT_EQ(waitpid(pid[i], &st, 0), pid[i]);
		ASSERT_EQ(st, 0);
		ASSERT_EQ(got[i], sent[i]);
	}
	printf("records_under_revokes: %llu + %llu + %llu records, %u revocations\n",
	       got[0], got[1], got[2], stat_revokes(p[0], &dead));
	if (!asym_on(ctrl(end_of(p[0])->sp)))
		printf("records_under_revokes: no membarrier here: no bias was granted\n");
	else
		ASSERT_GE(stat_revokes(p[0], &dead), 10);
	ASSERT_EQ(dead, 0);
	pp_close(p[0]);
	munmap(sent, 4096);
	return 0;
}

/* A child that becomes the owner (records 0..19), then stops in a section of what. */
static pid_t owner_child(struct pp_file *p[2], int mode, size_t what, int notify[2])
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	unsigned char rec[REC], *big = malloc(what);

	pp_close(p[0]);
	close(notify[0]);
	step_fd = notify[1];
	for (uint64_t seq = 0; seq < 20; seq++) {
		t_rec_make(rec, REC, 1, seq);
		if (pp_write(p[1], rec, REC) != REC)
			_exit(2);
	}
	if (!big)
		_exit(2);
	for (size_t off = 0; off + REC <= what; off += REC)
		t_rec_make(big + off, REC, 1, 20 + off / REC);
	step_mode = mode;
	if (pp_write(p[1], big, what) != (ssize_t)what)
		_exit(2);
	free(big);
	_exit(0);
}

/* Read n records of writer id from seq on. */
static int read_records(struct pp_file *r, uint32_t want_id, uint64_t seq0, unsigned int n)
{
	unsigned char rec[REC];

	for (unsigned int i = 0; i < n; i++) {
		uint32_t id;
		uint64_t seq;

		ASSERT_EQ(t_read_full(r, rec, REC), REC);
		ASSERT_EQ(rec_take(rec, &id, &seq), 0);
		ASSERT_EQ(id, want_id);
		ASSERT_EQ(seq, seq0 + i);
	}
	return 0;
}

static int owner_killed_inside(void)
{
	struct pp_file *p[2];
	int notify[2], avail = -1;
	unsigned int dead;
	unsigned char rec[REC], c;
	uint32_t pages0;
	pid_t pid;

	t_watchdog(60, "owner_killed_inside");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	if (!asym_on(ctrl(end_of(p[0])->sp)))
		return t_skip("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is refused here: no bias");
	ASSERT_EQ(pipe(notify), 0);
	pages0 = pages_accounted(p[0]);
	pid = owner_child(p, 1, 3 * 4096, notify);
	ASSERT_NE(pid, -1);
	close(notify[1]);
	ASSERT_EQ(read(notify[0], &c, 1), 1);		/* inside, pages taken, not shown */
	ASSERT_EQ(kill(pid, SIGKILL), 0);
	/* This process takes wr_lock the ordinary way: it finds the owner dead. */
	t_rec_make(rec, REC, 2, 0);
	ASSERT_EQ(pp_write(p[1], rec, REC), REC);
	ASSERT_EQ(stat_revokes(p[0], &dead), 1);
	ASSERT_EQ(dead, 1);
	ASSERT_EQ(read_records(p[0], 1, 0, 20), 0);
	ASSERT_EQ(read_records(p[0], 2, 0, 1), 0);	/* and nothing of the killed write */
	ASSERT_EQ(pp_ioctl(p[0], FIONREAD, &avail), 0);
	ASSERT_EQ(avail, 0);
	ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	/* The read took rd_lock after the takeover: the sweep gave the three pages back. */
	ASSERT_EQ(pages_accounted(p[0]), pages0);
	close(notify[0]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int owner_waited_for(void)
{
	struct pp_file *p[2];
	int notify[2], st;
	unsigned int dead;
	unsigned char c;
	pid_t owner, other;

	t_watchdog(60, "owner_waited_for");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	if (!asym_on(ctrl(end_of(p[0])->sp)))
		return t_skip("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is refused here: no bias");
	ASSERT_EQ(pipe(notify), 0);
	/* Five records: a slot of its own, filled and not yet shown when it stops. */
	owner = owner_child(p, 2, 5 * REC, notify);
	ASSERT_NE(owner, -1);
	close(notify[1]);
	ASSERT_EQ(read(notify[0], &c, 1), 1);		/* inside, for 200 ms */
	other = fork();
	ASSERT_NE(other, -1);
	if (other == 0) {
		unsigned char rec[REC];

		pp_close(p[0]);
		t_rec_make(rec, REC, 2, 0);
		_exit(pp_write(p[1], rec, REC) == REC ? 0 : 2);
	}
	pp_close(p[1]);
	ASSERT_EQ(read_records(p[0], 1, 0, 25), 0);	/* the owner's section first */
	ASSERT_EQ(read_records(p[0], 2, 0, 1), 0);
	ASSERT_EQ(waitpid(owner, &st, 0), owner);
	ASSERT_EQ(st, 0);
	ASSERT_EQ(waitpid(other, &st, 0), other);
	ASSERT_EQ(st, 0);
	ASSERT_EQ(stat_revokes(p[0], &dead), 1);
	ASSERT_EQ(dead, 0);
	close(notify[0]);
	pp_close(p[0]);
	return 0;
}

/*
 * A process that cannot membarrier(2) sets asym_off when it attaches
 * (forced here): from then on no bias is granted and no wake-up is
 * plain, and records written by a child still arrive whole, in order,
 * with the reader sleeping between bursts.
 */
static void write_same(struct t_pair *x, size_t len, unsigned long long pos)
{
	unsigned char b[4096];

	t_fill(b, len, pos, 9);
	ASSERT_SAME(write(x->k[1], b, len), pp_write(x->p[1], b, len));
}

static int merge_cache_sees_drains(void)
{
	struct t_pair x;
	struct sh_pipe *sp;
	unsigned long long pos = 0;

	t_pipe2(x.p, PP_O_SHARED | O_NONBLOCK);
	t_kpipe2(x.k, O_NONBLOCK);
	sp = end_of(x.p[1])->sp;
	if (!asym_on(ctrl(sp)))
		return t_skip("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is refused here: no bias");
	ASSERT_SAME(fcntl(x.k[1], F_SETPIPE_SZ, 4096), pp_fcntl(x.p[1], F_SETPIPE_SZ, 4096));
	for (int i = 0; i < 4; i++, pos += 10) {
		write_same(&x, 10, pos);
		ASSERT_SAME_READ(x.k[0], x.p[0], 10);
	}
	ASSERT_NE(__atomic_load_n(&ctrl(sp)->wr_owner, __ATOMIC_RELAXED), 0);	/* the bias */
	write_same(&x, 100, pos);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* drained */
	pos += 100;
	write_same(&x, 10, pos);		/* the fast way: reopens */
	ASSERT_TRUE(sp->mc.valid);
	write_same(&x, 4000, pos + 10);		/* merges: 4010 bytes in one page */
	write_same(&x, 1, pos + 4010);		/* EAGAIN both */
	ASSERT_SAME_READ(x.k[0], x.p[0], 8192);
	t_pair_close(&x);
	return 0;
}

static int merge_cache_two_mappings(void)
{
	struct pp_file *p[2], *w2, *w;
	unsigned char b[16], got[4000];
	int fds[2];

	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	if (!asym_on(ctrl(end_of(p[0])->sp)))
		return t_skip("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is refused here: no bias");
	ASSERT_EQ(pp_export(p[1], fds), 0);
	w2 = pp_import(fds, 0);
	ASSERT_TRUE(w2 != NULL);
	close(fds[0]);
	close(fds[1]);
	ASSERT_TRUE(end_of(w2)->sp != end_of(p[1])->sp);	/* a mapping of its own */
	for (int i = 0; i < 400; i++) {
		w = i % 2 ? w2 : p[1];
		t_fill(b, 10, (unsigned long long)i * 10, 5);
		ASSERT_EQ(pp_write(w, b, 10), 10);
	}
	ASSERT_NE(__atomic_load_n(&ctrl(end_of(p[1])->sp)->wr_owner, __ATOMIC_RELAXED), 0);
	ASSERT_EQ(t_fionread(p[0]), (int)sizeof(got));
	ASSERT_EQ(t_read_full(p[0], got, sizeof(got)), (ssize_t)sizeof(got));
	ASSERT_EQ(t_check(got, sizeof(got), 0, 5), 0);
	pp_close(w2);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int no_membarrier(void)
{
	struct pp_file *p[2];
	struct sh_ctrl *c;
	unsigned int dead;
	pid_t pid;
	int st;

	t_watchdog(60, "no_membarrier");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	c = ctrl(end_of(p[0])->sp);
	__atomic_store_n(&c->asym_off, 1, __ATOMIC_SEQ_CST);
	pid = fork();
	ASSERT_NE(pid, -1);
	if (pid == 0) {
		unsigned char rec[REC];

		pp_close(p[0]);
		for (uint64_t seq = 0; seq < 200; seq++) {
			t_rec_make(rec, REC, 1, seq);
			if (pp_write(p[1], rec, REC) != REC)
				_exit(2);
			if (seq % 50 == 49)
				t_sleep_ms(20);		/* the reader goes to sleep */
		}
		_exit(0);
	}
	pp_close(p[1]);
	ASSERT_EQ(read_records(p[0], 1, 0, 200), 0);
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_EQ(st, 0);
	ASSERT_EQ(c->wr_owner, 0);
	ASSERT_EQ(c->plain_wake, 0);
	ASSERT_EQ(stat_revokes(p[0], &dead), 0);
	pp_close(p[0]);
	return 0;
}

struct owner_thread {
	struct pp_file *w;
	ssize_t last;
};

static void *owner_thread_main(void *arg)
{
	struct owner_thread *o = arg;
	unsigned char rec[REC];

	for (uint64_t seq = 0; seq < 20; seq++) {
		t_rec_make(rec, REC, 1, seq);
		if (pp_write(o->w, rec, REC) != REC)
			return NULL;
	}
	t_rec_make(rec, REC, 1, 20);
	step_mode = 2;
	o->last = pp_write(o->w, rec, REC);
	return NULL;
}

static int close_waits_for_owner(void)
{
	struct owner_thread o = { 0 };
	struct pp_file *p[2];
	int notify[2];
	unsigned char c, rec[REC];
	pthread_t th;

	t_watchdog(60, "close_waits_for_owner");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	if (!asym_on(ctrl(end_of(p[0])->sp)))
		return t_skip("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is refused here: no bias");
	ASSERT_EQ(pipe(notify), 0);
	step_fd = notify[1];
	o.w = p[1];
	ASSERT_EQ(pthread_create(&th, NULL, owner_thread_main, &o), 0);
	ASSERT_EQ(read(notify[0], &c, 1), 1);		/* inside, for 200 ms */
	pp_close(p[1]);
	ASSERT_EQ(atomic_load(&step_done), 1);		/* the close waited for the section */
	t_join(th, NULL, 30);
	ASSERT_EQ(o.last, REC);
	ASSERT_EQ(read_records(p[0], 1, 0, 21), 0);
	ASSERT_EQ(pp_read(p[0], rec, REC), 0);		/* EOF */
	close(notify[0]);
	close(notify[1]);
	pp_close(p[0]);
	return 0;
}

/*
 * bare_sections: wr_lock alone, no ring traffic around it.  Two threads
 * on two CPUs take it whichever way they may (the fast way while theirs
 * is the bias, else the ordinary way, which revokes the other's and, after
 * one take, grants their own), so a fast entry and a revoke meet as often
 * as the CPUs allow.  Inside, a flag that must be clear and a plain count.
 * With sh_barrier() taken out of wr_revoke_bias, runs here failed within
 * the second (two inside at once, or the two waiting on each other); with
 * it, none did.
 */
struct sect {
	struct sh_pipe *sp;
	int cpu;
	long long end_ms;
	unsigned long done, fast;
};

static atomic_int sect_inside;
static unsigned long sect_count;	/* plain: only wr_lock's holder touches it */

static void *sect_main(void *arg)
{
	struct sect *t = arg;
	struct sh_ctrl *c = ctrl(t->sp);

	if (t->cpu >= 0)
		t_pin(pthread_self(), t->cpu);
	while (t_now_ms() < t->end_ms) {
		for (int i = 0; i < 256; i++) {
			struct sh_bias_rec *r = NULL;
			bool fast = wr_fast_enter(t->sp, &r);

			if (!fast) {
				ASSERT_EQ(side_lock(t->sp, &c->wr_lock), 0);
				wr_bias_count(t->sp);
			}
			if (atomic_exchange_explicit(&sect_inside, 1, memory_order_relaxed))
				t_fail_at(__FILE__, __LINE__, "two threads inside wr_lock at once (%s way in)",
					  fast ? "fast" : "ordinary");
			(*(volatile unsigned long *)&sect_count)++;
			atomic_store_explicit(&sect_inside, 0, memory_order_relaxed);
			if (fast)
				wr_fast_exit(c, r);
			else
				side_unlock(&c->wr_lock);
			t->done++;
			t->fast += fast;
		}
	}
	return NULL;
}

static int bare_sections(void)
{
	struct pp_file *p[2];
	struct sect t[2];
	pthread_t th[2];
	unsigned int revokes, dead;
	long long end;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return t_skip("one CPU: the owner and the revoker never run at once");
	if (t_under_valgrind())
		return t_skip("valgrind runs one thread at a time: a fast entry and a revoke never overlap");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	if (!asym_on(ctrl(end_of(p[0])->sp))) {
		pp_close(p[0]);
		pp_close(p[1]);
		return t_skip("membarrier(2) refused here: no bias is ever granted");
	}
	t_watchdog(60, "bare_sections");
	end = t_now_ms() + 1000;
	for (int i = 0; i < 2; i++) {
		t[i] = (struct sect){ .sp = end_of(p[1])->sp, .cpu = i, .end_ms = end };
		ASSERT_EQ(pthread_create(&th[i], NULL, sect_main, &t[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		t_join(th[i], NULL, 30);
	revokes = stat_revokes(p[1], &dead);
	printf("  %lu + %lu sections (%lu + %lu fast), %u revokes\n",
	       t[0].done, t[1].done, t[0].fast, t[1].fast, revokes);
	ASSERT_EQ(sect_count, t[0].done + t[1].done);
	ASSERT_EQ(dead, 0);
	if (revokes < 100 || !t[0].fast || !t[1].fast)
		t_fail_at(__FILE__, __LINE__, "%u revokes, fast takes %lu and %lu: the race was not played",
			  revokes, t[0].fast, t[1].fast);
	pp_close(p[0]);
	pp_close(p[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(records_under_revokes),
		T_SUBTEST(owner_killed_inside),
		T_SUBTEST(owner_waited_for),
		T_SUBTEST(close_waits_for_owner),
		T_SUBTEST(no_membarrier),
		T_SUBTEST(bare_sections),
		T_SUBTEST(merge_cache_sees_drains),
		T_SUBTEST(merge_cache_two_mappings),
	};

	return T_RUN_SUBTESTS(tests);
}
