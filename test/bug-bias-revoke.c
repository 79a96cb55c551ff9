// SPDX-License-Identifier: MIT
/*
 * Description: the biased producer lock excludes (wait.c).  The thread
 * that writes alone takes wr_mutex with plain stores, and any other
 * producer revokes that bias first: it stores `revoke`, runs membarrier(2)
 * and waits until the owner's `busy` is clear, while the owner stores
 * `busy` and then loads `revoke`, ordered by nothing but the compiler.
 * Without the membarrier both loads can miss both stores (each CPU's store
 * still in its store buffer) and two writers are inside at once.
 *
 * This test carries its own copy of wait.c (the library's is then not
 * linked) that sets a bias after one ordinary take and never backs off,
 * so three writers on different CPUs, each writing PIPE_BUF records,
 * revoke and re-bias the lock all the time; the reader checks that every
 * record arrives whole, once and in each writer's order, and that the
 * lock was revoked many times.  Then the lock alone, two threads taking
 * it in a tight loop (bare_sections, below).  Then a writer that is the
 * owner and a pp_close() of the write end from another thread while it
 * writes: the close waits for the fast section, the write is not cut.  Last, a
 * thread's record pooled at its exit is no longer that thread's.
 */
#include "helpers.h"

#define PP_BIAS_AFTER		1
#define PP_BIAS_AFTER_MAX	1
#include "../src/wait.c"

#include <sched.h>

/*
 * The tests of whole reads were written when pp_read went the fast way
 * only where the writer last ran, and keep the threads that met there on
 * CPU 0; it goes the fast way on any CPU now, and readers_under_revokes'
 * readers on the other CPUs take it there.
 */
static void on_cpu0(void)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
		t_pin(pthread_self(), 0);
}

#define REC	512
#define NW	3

struct wr {
	struct pp_file *w;
	atomic_int *live;
	int id, cpu;
	double seconds;
	unsigned long long sent;
};

static void *writer_main(void *arg)
{
	struct wr *w = arg;
	unsigned char rec[REC];
	long long end = t_now_ms() + (long long)(w->seconds * 1000);
	unsigned long long seq = 0;

	if (w->cpu >= 0)
		t_pin(pthread_self(), w->cpu);
	while (t_now_ms() < end) {
		t_rec_make(rec, REC, (uint32_t)w->id, seq);
		ASSERT_EQ(pp_write(w->w, rec, REC), REC);
		seq++;
	}
	w->sent = seq;
	if (atomic_fetch_sub(w->live, 1) == 1)
		pp_close(w->w);
	return NULL;
}

static int records_under_revokes(void)
{
	struct pp_file *e[2];
	struct wr w[NW];
	pthread_t th[NW];
	unsigned long long next[NW] = { 0 };
	static unsigned char buf[1 << 16];
	size_t have = 0;
	atomic_int live = NW;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long revokes;

	t_pipe2(e, 0);
	if (!__atomic_load_n(&pp__asym_wake, __ATOMIC_RELAXED))
		return t_skip("membarrier(2) refused here: no bias is ever set");
	for (int i = 0; i < NW; i++) {
		w[i] = (struct wr){ .w = e[1], .live = &live, .id = i,
				    .cpu = ncpu > 1 ? i % ncpu : -1,
				    .seconds = t_under_valgrind() ? 0.5 : 1.5 };
		ASSERT_EQ(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (;;) {
		ssize_t r = pp_read(e[0], buf + have, sizeof(buf) - have);

		ASSERT_TRUE(r >= 0);
		if (!r)
			break;
		have += (size_t)r;
		while (have >= REC) {
			uint32_t id;
			uint64_t seq;
			int torn = t_rec_check(buf, REC, &id, &seq);

			if (id >= NW)
				t_fail_at(__FILE__, __LINE__, "a record from writer %u", id);
			if (seq != next[id])
				t_fail_at(__FILE__, __LINE__, "writer %u: record %llu where %llu was due",
					  id, (unsigned long long)seq, next[id]);
			if (torn)
				t_fail_at(__FILE__, __LINE__, "writer %u, record %llu: torn", id,
					  (unsigned long long)seq);
			next[id]++;
			memmove(buf, buf + REC, have - REC);
			have -= REC;
		}
	}
	for (int i = 0; i < NW; i++) {
		t_join(th[i], NULL, 30);
		ASSERT_EQ(next[i], w[i].sent);
	}
	ASSERT_EQ(have, 0);
	revokes = __atomic_load_n(&e[0]->pipe->wr_bias.revokes, __ATOMIC_RELAXED);
	printf("  %llu records, %lu revokes\n", next[0] + next[1] + next[2], revokes);
	/*
	 * Valgrind runs one thread at a time, so writers rarely meet there:
	 * a few revokes show the path ran; the race itself is for real CPUs.
	 */
	if (revokes < (t_under_valgrind() ? 5u : 100u))
		t_fail_at(__FILE__, __LINE__, "only %lu revokes: the race was not played", revokes);
	pp_close(e[0]);
	return T_EXIT_PASS;
}

/*
 * The lock alone, no pipe traffic around it: two threads on two CPUs take
 * wr_mutex by whichever way they may (the fast way while they own the
 * bias, else the ordinary way, which revokes the other's bias and, after
 * one take, sets their own), so the owner's fast entry and the other's
 * revoke meet as often as the CPUs allow.  The section is a plain
 * read-modify-write of a counter with an `inside` flag around it: two
 * threads in at once show as a flag found set or a lost count.  With the
 * membarrier(2) of bias_revoke taken out, every run here failed within
 * the second; with it, none did.
 */
struct sect {
	struct pp_pipe *p;
	bool reader;			/* rd_mutex and the consumer's bias, else wr_mutex */
	int cpu;
	long long end_ms;
	unsigned long done, fast;
};

static atomic_int sect_inside;
static unsigned long sect_count;	/* plain: only the lock's holder touches it */

static bool sect_lock(struct sect *t)
{
	bool fast = t->reader ? pp__pipe_lock_reader_fast(t->p) : pp__pipe_lock_producer_fast(t->p);

	if (!fast && t->reader)
		ASSERT_EQ(pp__pipe_lock_reader(t->p, false), 0);
	else if (!fast)
		pp__pipe_lock_producer(t->p);
	return fast;
}

static void *sect_main(void *arg)
{
	struct sect *t = arg;

	if (t->cpu >= 0)
		t_pin(pthread_self(), t->cpu);
	while (t_now_ms() < t->end_ms) {
		for (int i = 0; i < 256; i++) {
			bool fast = sect_lock(t);

			/*
			 * At once: an overlap goes on to confuse the bias's
			 * `fast`, and the two threads then wait for each other
			 * for good.
			 */
			if (atomic_exchange_explicit(&sect_inside, 1, memory_order_relaxed))
				t_fail_at(__FILE__, __LINE__, "two threads inside %s at once (%s way in)",
					  t->reader ? "rd_mutex" : "wr_mutex", fast ? "fast" : "ordinary");
			(*(volatile unsigned long *)&sect_count)++;
			atomic_store_explicit(&sect_inside, 0, memory_order_relaxed);
			if (t->reader)
				pp__pipe_unlock_consumer(t->p);
			else
				pp__pipe_unlock_producer(t->p);
			t->done++;
			t->fast += fast;
		}
	}
	return NULL;
}

static int run_sections(bool reader)
{
	struct pp_file *e[2];
	struct sect t[2];
	pthread_t th[2];
	long long end;
	unsigned long revokes;
	struct pp_bias *b;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return t_skip("one CPU: the owner and the revoker never run at once");
	if (t_under_valgrind())
		return t_skip("valgrind runs one thread at a time: a fast entry and a revoke never overlap");
	t_pipe2(e, 0);
	if (!__atomic_load_n(&pp__asym_wake, __ATOMIC_RELAXED)) {
		pp_close(e[0]);
		pp_close(e[1]);
		return t_skip("membarrier(2) refused here: no bias is ever set");
	}
	b = reader ? &e[0]->pipe->rd_bias : &e[0]->pipe->wr_bias;
	sect_count = 0;
	end = t_now_ms() + 1000;
	for (int i = 0; i < 2; i++) {
		t[i] = (struct sect){ .p = e[0]->pipe, .reader = reader, .cpu = i, .end_ms = end };
		ASSERT_EQ(pthread_create(&th[i], NULL, sect_main, &t[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		t_join(th[i], NULL, 30);
	revokes = __atomic_load_n(&b->revokes, __ATOMIC_RELAXED);
	printf("  %lu + %lu sections (%lu + %lu fast), %lu revokes\n",
	       t[0].done, t[1].done, t[0].fast, t[1].fast, revokes);
	ASSERT_EQ(sect_count, t[0].done + t[1].done);
	if (revokes < 100 || !t[0].fast || !t[1].fast)
		t_fail_at(__FILE__, __LINE__, "%lu revokes, fast takes %lu and %lu: the race was not played",
			  revokes, t[0].fast, t[1].fast);
	pp_close(e[0]);
	pp_close(e[1]);
	return T_EXIT_PASS;
}

static int bare_sections(void)
{
	return run_sections(false);
}

/*
 * The consumer's bias, the same way: pp__pipe_lock_reader_fast (which this
 * build allows on any CPU) or the ordinary way into rd_mutex.
 */
static int bare_read_sections(void)
{
	return run_sections(true);
}

/*
 * One writer of PIPE_BUF records, three non-blocking readers that each
 * read one record at a time, and try again at once on EAGAIN, so the
 * consumer's bias moves between them all the time, and they take the
 * quick read by it whenever they own it: every record is read whole, by
 * one reader, once, and each reader sees the records in order.
 */
#define NR	3

struct rd {
	struct pp_file *r;
	int cpu;
	unsigned long long got, last;
	bool any;
	unsigned char *seen;
	unsigned long long max;
};

static void *reader_main(void *arg)
{
	struct rd *r = arg;
	unsigned char rec[REC];

	if (r->cpu >= 0)
		t_pin(pthread_self(), r->cpu);
	for (;;) {
		ssize_t n = pp_read(r->r, rec, REC);
		uint64_t seq;
		uint32_t id;
		int torn;

		if (n == -1 && errno == EAGAIN) {
			/* Valgrind runs one thread at a time: let the writer have it. */
			if (t_under_valgrind())
				sched_yield();
			continue;	/* and take the lock again at once: the bias moves */
		}
		if (!n)
			break;
		ASSERT_EQ(n, REC);
		torn = t_rec_check(rec, REC, &id, &seq);
		if (id != 0 || seq >= r->max)
			t_fail_at(__FILE__, __LINE__, "a record from writer %u, number %llu", id,
				  (unsigned long long)seq);
		if (torn)
			t_fail_at(__FILE__, __LINE__, "record %llu: torn", (unsigned long long)seq);
		if (r->any && seq <= r->last)
			t_fail_at(__FILE__, __LINE__, "record %llu after %llu", (unsigned long long)seq,
				  r->last);
		if (__atomic_exchange_n(&r->seen[seq], 1, __ATOMIC_RELAXED))
			t_fail_at(__FILE__, __LINE__, "record %llu read twice", (unsigned long long)seq);
		r->last = seq;
		r->any = true;
		r->got++;
	}
	return NULL;
}

static int readers_under_revokes(void)
{
	struct pp_file *e[2];
	struct rd r[NR];
	pthread_t th[NR];
	unsigned char rec[REC];
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long long n = t_under_valgrind() ? 20000 : 3000000, total = 0, sent;
	long long end;
	unsigned char *seen = calloc(n, 1);
	unsigned long revokes;

	ASSERT_TRUE(seen != NULL);
	t_pipe2(e, 0);
	if (!__atomic_load_n(&pp__asym_wake, __ATOMIC_RELAXED)) {
		pp_close(e[0]);
		pp_close(e[1]);
		free(seen);
		return t_skip("membarrier(2) refused here: no bias is ever set");
	}
	on_cpu0();	/* the writer: readers 0 and 2 meet it there, reader 1 revokes them */
	ASSERT_EQ(pp_fcntl(e[0], F_SETFL, O_NONBLOCK), 0);
	for (int i = 0; i < NR; i++) {
		r[i] = (struct rd){ .r = e[0], .cpu = ncpu > 1 ? i % ncpu : -1, .seen = seen, .max = n };
		ASSERT_EQ(pthread_create(&th[i], NULL, reader_main, &r[i]), 0);
	}
	/* Up to n records, for a second and a half at most (sanitizers are slower). */
	end = t_now_ms() + 1500;
	for (sent = 0; sent < n && (sent % 1024 || t_now_ms() < end); sent++) {
		t_rec_make(rec, REC, 0, sent);
		ASSERT_EQ(pp_write(e[1], rec, REC), REC);
	}
	pp_close(e[1]);
	for (int i = 0; i < NR; i++) {
		t_join(th[i], NULL, 60);
		total += r[i].got;
	}
	ASSERT_EQ(total, sent);
	for (unsigned long long seq = 0; seq < sent; seq++)
		if (!seen[seq])
			t_fail_at(__FILE__, __LINE__, "record %llu never read", seq);
	revokes = __atomic_load_n(&e[0]->pipe->rd_bias.revokes, __ATOMIC_RELAXED);
	printf("  %llu records: %llu + %llu + %llu, %lu revokes\n", sent, r[0].got, r[1].got,
	       r[2].got, revokes);
	if (revokes < (t_under_valgrind() ? 5u : 50u))
		t_fail_at(__FILE__, __LINE__, "only %lu revokes: the race was not played", revokes);
	pp_close(e[0]);
	free(seen);
	return T_EXIT_PASS;
}

/* The owner writes; another thread closes the write end meanwhile. */
struct closer {
	struct pp_file *w;
	atomic_int go;
};

static void *close_main(void *arg)
{
	struct closer *c = arg;

	while (!atomic_load(&c->go))
		sched_yield();
	pp_close(c->w);
	return NULL;
}

static int close_during_fast_write(void)
{
	for (int round = 0; round < 200; round++) {
		struct pp_file *e[2];
		struct closer c = { 0 };
		static char buf[2048];
		pthread_t th;
		ssize_t r;

		t_pipe2(e, 0);
		c.w = e[1];
		/* Two ordinary takes make this thread the owner; the third is fast. */
		ASSERT_EQ(pp_write(e[1], buf, 10), 10);
		ASSERT_EQ(pp_write(e[1], buf, 10), 10);
		if (__atomic_load_n(&e[1]->pipe->wr_bias.owner, __ATOMIC_RELAXED) != bias_me)
			t_fail_at(__FILE__, __LINE__, "no bias after two writes");
		/* Our own reference, as a call holds one, so the close cannot free e[1] under us. */
		pp__file_get(e[1]);
		ASSERT_EQ(pthread_create(&th, NULL, close_main, &c), 0);
		atomic_store(&c.go, 1);
		r = pp_write(e[1], buf, sizeof(buf));
		ASSERT_EQ(r, (ssize_t)sizeof(buf));
		t_join(th, NULL, 10);
		ASSERT_EQ(__atomic_load_n(&e[1]->pipe->wr_bias.owner, __ATOMIC_RELAXED), NULL);
		pp__file_put(e[1]);
		ASSERT_EQ(pp_read(e[0], buf, sizeof(buf)), (ssize_t)sizeof(buf));
		pp_close(e[0]);
	}
	return T_EXIT_PASS;
}

/* The owner reads the quick way; another thread closes the read end meanwhile. */
static int close_during_fast_read(void)
{
	on_cpu0();
	for (int round = 0; round < 200; round++) {
		struct pp_file *e[2];
		struct closer c = { 0 };
		static char buf[4096], out[16];
		pthread_t th;

		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (char)(i * 7 + round);
		t_pipe2(e, 0);
		c.w = e[0];
		ASSERT_EQ(pp_write(e[1], buf, 2048), 2048);
		/* An ordinary take makes this thread the owner; the next read is fast. */
		ASSERT_EQ(pp_read(e[0], out, 10), 10);
		ASSERT_EQ(pp_read(e[0], out, 10), 10);
		if (__atomic_load_n(&e[0]->pipe->rd_bias.owner, __ATOMIC_RELAXED) != bias_me)
			t_fail_at(__FILE__, __LINE__, "no bias after two reads");
		/* Our own reference, as a call holds one, so the close cannot free e[0] under us. */
		pp__file_get(e[0]);
		ASSERT_EQ(pthread_create(&th, NULL, close_main, &c), 0);
		atomic_store(&c.go, 1);
		for (int k = 2; k < 40; k++) {
			/* Our reference keeps the end open, closed or not. */
			ASSERT_EQ(pp_read(e[0], out, 10), 10);
			if (memcmp(out, buf + 10 * k, 10))
				t_fail_at(__FILE__, __LINE__, "round %d, read %d: wrong bytes", round, k);
		}
		t_join(th, NULL, 10);
		ASSERT_EQ(__atomic_load_n(&e[0]->pipe->rd_bias.owner, __ATOMIC_RELAXED), NULL);
		pp__file_put(e[0]);
		pp_close(e[1]);
	}
	return T_EXIT_PASS;
}

/*
 * The owner's read finds the pipe empty and waits, and meanwhile its end
 * is closed.  The fast way held no reference, so the read takes one before
 * it lets go to wait: the end lives until the read returns (ASan and
 * valgrind would see a use after free), and the read gets what is written
 * next, as a kernel read(2) blocked on a closed descriptor does.
 */
struct waiter {
	struct pp_file *r;
	char buf[4096];
	ssize_t got[4];
	bool owner;
};

static void *owner_reads_main(void *arg)
{
	struct waiter *w = arg;

	on_cpu0();

	w->got[0] = pp_read(w->r, w->buf, 10);		/* the ordinary way: the bias */
	w->owner = __atomic_load_n(&w->r->pipe->rd_bias.owner, __ATOMIC_RELAXED) == bias_me;
	w->got[1] = pp_read(w->r, w->buf, 10);		/* the quick read, the fast way */
	w->got[2] = pp_read(w->r, w->buf, sizeof(w->buf));	/* the rest, the fast way */
	w->got[3] = pp_read(w->r, w->buf, sizeof(w->buf));	/* waits */
	return NULL;
}

static int close_while_owner_waits(void)
{
	struct pp_file *e[2];
	struct waiter w = { 0 };
	static char buf[2048];
	pthread_t th;

	on_cpu0();
	t_pipe2(e, PP_O_NOSIGPIPE);
	w.r = e[0];
	ASSERT_EQ(pp_write(e[1], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	ASSERT_EQ(pthread_create(&th, NULL, owner_reads_main, &w), 0);
	t_wait_ring_sleeper(e[0]->pipe, true, 10);
	pp_close(e[0]);			/* only the "open" reference goes */
	ASSERT_EQ(pp_write(e[1], "late", 4), 4);	/* a reader is still there */
	t_join(th, NULL, 10);
	ASSERT_TRUE(w.owner);
	ASSERT_EQ(w.got[0], 10);
	ASSERT_EQ(w.got[1], 10);
	ASSERT_EQ(w.got[2], (ssize_t)sizeof(buf) - 20);
	ASSERT_EQ(w.got[3], 4);
	ASSERT_MEM_EQ(w.buf, "late", 4);
	pp_close(e[1]);
	return T_EXIT_PASS;
}

/*
 * The owner's read retires a pp_write_ref() buffer and a buffer of the
 * user's type, whose releases run after the read lets go of rd_mutex: the
 * first closes both ends, the second looks at the pipe it is given.  The
 * read takes a reference before it lets go, so the end (and with it the
 * pipe) lives until the read returns.
 */
static struct pp_file *cb_ends[2];
static atomic_int cb_runs;

static void close_both(void *buf, size_t count, void *arg)
{
	(void)buf;
	(void)count;
	(void)arg;
	pp_close(cb_ends[0]);
	pp_close(cb_ends[1]);
	atomic_fetch_add(&cb_runs, 1);
}

/* A buffer type of the user's whose release looks at the pipe it is given. */
static unsigned int looked_size;

static void look_release(struct pp_pipe *pipe, struct pp_buf *buf)
{
	(void)buf;
	looked_size = pipe->max_usage;	/* ASan: a use after free if the pipe went */
}

static bool look_get(struct pp_pipe *pipe, struct pp_buf *buf)
{
	(void)pipe;
	(void)buf;
	return true;
}

static const struct pp_buf_ops look_ops = {
	.release	= look_release,
	.get		= look_get,
	.name		= "looks at its pipe",
};

static int release_closes_under_owner(void)
{
	static char ref_bytes[100] = "by reference", look_bytes[64] = "looked";
	const struct pp_buf look = { .page = look_bytes, .len = sizeof(look_bytes), .ops = &look_ops };
	char buf[256];

	on_cpu0();
	t_pipe2(cb_ends, 0);
	ASSERT_EQ(pp_write(cb_ends[1], "ab", 2), 2);
	ASSERT_EQ(pp_read(cb_ends[0], buf, 1), 1);	/* the ordinary way: the bias */
	if (__atomic_load_n(&cb_ends[0]->pipe->rd_bias.owner, __ATOMIC_RELAXED) != bias_me)
		t_fail_at(__FILE__, __LINE__, "no bias after a read");
	ASSERT_EQ(pp_write_ref(cb_ends[1], ref_bytes, sizeof(ref_bytes), close_both, NULL),
		  (ssize_t)sizeof(ref_bytes));
	ASSERT_EQ(pp_pipe_add_buf(cb_ends[1], &look, 0), (ssize_t)sizeof(look_bytes));
	/*
	 * The fast way in: the rest of "ab" and both buffers, which retire.
	 * The first release closes both ends; the second looks at the pipe.
	 */
	ASSERT_EQ(pp_read(cb_ends[0], buf, sizeof(buf)),
		  1 + (ssize_t)sizeof(ref_bytes) + (ssize_t)sizeof(look_bytes));
	ASSERT_EQ(atomic_load(&cb_runs), 1);
	ASSERT_EQ(looked_size, 16);
	ASSERT_MEM_EQ(buf + 1, "by reference", 12);
	ASSERT_MEM_EQ(buf + 1 + sizeof(ref_bytes), "looked", 6);
	return T_EXIT_PASS;
}

/*
 * A thread's record goes back to the pool when it exits (the key's
 * destructor), where the next thread may take it and with it the biases
 * it holds.  A destructor of the user's that runs after ours and writes to
 * a pipe must then not go the fast way on the pooled record: two live
 * threads would share one busy count and one bias.
 */
static pthread_key_t user_key;
static struct pp_file *dtor_pipe[2];
static struct bias_rec *dtor_rec;
static atomic_int dtor_checked;

static void user_dtor(void *arg)
{
	bool pooled = false;

	(void)arg;
	pthread_mutex_lock(&bias_lock);
	for (struct bias_rec *r = bias_pool; r; r = r->next)
		pooled |= r == dtor_rec;
	pthread_mutex_unlock(&bias_lock);
	if (pooled) {
		/* Ours ran first: the record is the pool's, no longer ours. */
		if (bias_me == dtor_rec)
			t_fail_at(__FILE__, __LINE__, "a pooled record still names this thread");
		atomic_store(&dtor_checked, 1);
	} else {
		atomic_store(&dtor_checked, 2);
	}
	if (pp_write(dtor_pipe[1], "x", 1) != 1)
		t_fail_at(__FILE__, __LINE__, "a write from a destructor failed");
}

static void *owner_then_exit(void *arg)
{
	(void)arg;
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(pp_write(dtor_pipe[1], "y", 1), 1);
	dtor_rec = bias_me;
	if (!dtor_rec || __atomic_load_n(&dtor_pipe[1]->pipe->wr_bias.owner, __ATOMIC_RELAXED) != dtor_rec)
		t_fail_at(__FILE__, __LINE__, "the writer did not become the owner");
	ASSERT_EQ(pthread_setspecific(user_key, (void *)1), 0);
	return NULL;
}

static int pooled_record_at_exit(void)
{
	pthread_t th;
	char buf[16];

	t_pipe2(dtor_pipe, 0);
	if (!__atomic_load_n(&pp__asym_wake, __ATOMIC_RELAXED))
		return t_skip("membarrier(2) refused here: no bias is ever set");
	/* Our key first, so that its destructor runs before the user's (glibc: key order). */
	ASSERT_EQ(pp_write(dtor_pipe[1], "z", 1), 1);
	ASSERT_TRUE(bias_key_ok);
	ASSERT_EQ(pthread_key_create(&user_key, user_dtor), 0);
	/* The main thread owns the pipe now: the new thread revokes, then owns it. */
	ASSERT_EQ(pthread_create(&th, NULL, owner_then_exit, NULL), 0);
	t_join(th, NULL, 10);
	if (atomic_load(&dtor_checked) == 2)
		return t_skip("this libc ran the user's destructor first: nothing to check");
	ASSERT_EQ(atomic_load(&dtor_checked), 1);
	ASSERT_EQ(pp_read(dtor_pipe[0], buf, sizeof(buf)), 6);
	pp_close(dtor_pipe[0]);
	pp_close(dtor_pipe[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(records_under_revokes),
		T_SUBTEST(bare_sections),
		T_SUBTEST(bare_read_sections),
		T_SUBTEST(readers_under_revokes),
		T_SUBTEST(close_during_fast_read),
		T_SUBTEST(close_while_owner_waits),
		T_SUBTEST(release_closes_under_owner),
		T_SUBTEST(close_during_fast_write),
		T_SUBTEST(pooled_record_at_exit),
	};

	return T_RUN_SUBTESTS(tests);
}
