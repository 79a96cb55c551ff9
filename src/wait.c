// SPDX-License-Identifier: MIT
/*
 * wait.c - the side locks, waiting for data or room, and waking up.
 *
 * Waiting happens with no pipe lock held.  A waiter first watches the index
 * its peer moves (head for a reader, tail for a writer) for a few
 * microseconds, then sleeps on a futex word.  The sleep cannot miss a
 * wake-up, by the usual store-then-load pairing on both sides (all
 * sequentially consistent):
 *
 *   sleeper:  sleepers += 1; seq = load(wq); xchg(woken, false); re-check; futex_wait(wq, seq)
 *   waker:    store head (or tail, or an end count); n = (sleepers += 0);
 *             if (n && !xchg(woken, true)) { wq++; futex_wake(wq) }
 *
 * The two read-modify-writes of sleepers are ordered.  If the waker's comes
 * first, the sleeper's increment reads from it, so the waker's store
 * happens before the sleeper's re-check, which sees it and does not sleep.
 * If the sleeper's comes first, the waker sees it and goes on to `woken`.
 * Look at the exchanges of `woken` in their one modification order.  If the
 * waker's comes before the sleeper's clearing one, that one reads from the
 * waker's or a later waker's exchange, and the waker's store happens
 * before the re-check again.  If it comes after, take the first exchange
 * after the sleeper's: it read the sleeper's `false`, so its owner (this
 * waker or an earlier one) goes on to wq++, which comes after the
 * sleeper's load of wq because that load comes before the clearing
 * exchange.  So futex_wait either finds wq changed or is woken, and the
 * sleeper looks again.
 *
 * The load of wq must come before the clearing exchange.  The other way
 * round, a waker could set `woken` and bump wq between the two; a second
 * producer takes the room it made before the re-check, the sleeper sleeps
 * on the new wq, and every later waker reads `woken` set and wakes no one:
 * test/defect-lock-sleep's five threads stopped dead that way, all asleep
 * on two pipes, one empty and one full (test/bug-lost-wake, and
 * test/model-wake, which tries every interleaving of both orders).  `woken`
 * keeps a writer on a busy pipe from making a futex call per write while
 * the reader it already woke waits for a CPU.
 *
 * Asymmetric: where membarrier(2) serves (pp__wait_init registers the
 * process for MEMBARRIER_CMD_PRIVATE_EXPEDITED), the waker's read of
 * sleepers is a plain load and the sleeper pays instead, with one
 * membarrier between its increment and its re-check.  A waker's locked
 * instruction after its store waited for that store to reach the other CPU
 * (the line the reader reads, or the page bytes before it), at every write
 * and every read; a sleeper is about to make a futex call anyway.  The
 * membarrier runs a full barrier on every CPU that runs a thread of ours
 * (one that runs none has passed through the scheduler's) at some point
 * during the call.  Take a waker whose load missed the increment.  If that
 * barrier came after the load on the waker's CPU, it came after the
 * waker's store too (program order; the barrier drains the store buffer),
 * so the store is visible before the membarrier returns and the re-check
 * after it sees it.  If it came before the load, the increment, a locked
 * instruction done before the membarrier began, was visible before that
 * barrier, and the load after it could not have missed it.  Either the
 * waker sees the sleeper, or the sleeper sees the store: the guarantee the
 * two read-modify-writes gave, and the rest of the argument above stands.
 * (Folly's asymmetric fences and liburcu's use the same argument.)  Where
 * membarrier is refused (old kernels, seccomp), both sides keep
 * the read-modify-write.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */


/*
 * The side locks (struct pp_side_lock): Drepper's third futex mutex
 * ("Futexes Are Tricky"), with its states as bits.  state is 0 free,
 * SIDE_HELD held, and SIDE_WAITERS added while a thread may be asleep on
 * it; SIDE_NOREF says the holder is a pp_read or pp_write holding no
 * reference on its file (pp__pipe_trylock_reader_noref).  Taking it is a
 * CAS 0 -> HELD; failing that, a short spin of CAS attempts, sleepers or
 * not, as glibc's adaptive mutex spins (the holder copies a few pages at
 * most, or holds it for a long time and we sleep anyway), then a CAS that
 * adds WAITERS (keeping NOREF, which the exchange of the textbook would
 * wipe) and FUTEX_WAIT on the word so made, or a CAS 0 -> HELD | WAITERS
 * that takes it.  Letting go is an exchange to 0, and a FUTEX_WAKE only
 * if it returned WAITERS.
 *
 * Ordering: the only stores of 0 are the unlocks, exchanges with release;
 * every way in is a CAS with acquire that reads 0, so it reads from an
 * unlock's exchange (or from the zeroed memory of a new pipe) and
 * everything the previous holder did under the lock happens before
 * everything the next one does.  The spin's loads are relaxed: they only
 * say when to try.  No wake-up is lost: a thread sleeps only while the
 * word has WAITERS (the kernel compares it), and the word loses that bit
 * only by an unlock, which reads it and wakes someone; whoever is woken
 * takes the lock with WAITERS or sets it again before it sleeps, so the
 * next unlock wakes the next sleeper.  A spinner that takes the lock with
 * its CAS (leaving HELD) while others sleep changes nothing here: the
 * word leaves WAITERS only by an unlock that woke one of them, and that
 * one, awake but not yet in, sets it again when it runs.
 * A spurious wake-up (the FUTEX_WAKE of an unlock that comes after the
 * word's memory went to another pipe) is harmless: futex waiters re-check.
 */
#define SIDE_LOCK_SPINS	100	/* glibc's adaptive mutex spins as many */

static inline bool side_trylock(struct pp_side_lock *l)
{
	unsigned int free = 0;

	return __atomic_compare_exchange_n(&l->state, &free, SIDE_HELD, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

/* Taken at once, marked: its holder holds no reference on its file. */
static inline bool side_trylock_noref(struct pp_side_lock *l)
{
	unsigned int free = 0;

	return __atomic_compare_exchange_n(&l->state, &free, SIDE_HELD | SIDE_NOREF, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/*
 * Until no holder is marked: the marked one's unlock (release) is its last
 * touch of its file and pipe, and this acquire load that sees it comes
 * before the caller lets the file go.  Such a holder copies and never
 * waits with the lock, so we yield; but its copy may fault on a page that
 * takes its time to come (a file mapping, userfaultfd), so after a while
 * we nap instead of spinning.
 */
static void side_wait_noref(const struct pp_side_lock *l)
{
	static const struct timespec nap = { .tv_nsec = 100000 };

	for (unsigned int i = 0; __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) & SIDE_NOREF; i++) {
		if (i < 64)
			sched_yield();
		else
			nanosleep(&nap, NULL);
	}
}

static void __attribute__((noinline)) side_lock_slow(struct pp_side_lock *l)
{
	for (int i = 0; i < SIDE_LOCK_SPINS; i++) {
		unsigned int c = __atomic_load_n(&l->state, __ATOMIC_RELAXED);

		if (c == 0 && side_trylock(l))
			return;
		pp__cpu_relax();
	}
	for (;;) {
		unsigned int c = __atomic_load_n(&l->state, __ATOMIC_RELAXED);

		if (c == 0) {
			if (__atomic_compare_exchange_n(&l->state, &c, SIDE_HELD | SIDE_WAITERS,
							false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return;
			continue;
		}
		if (!(c & SIDE_WAITERS) &&
		    !__atomic_compare_exchange_n(&l->state, &c, c | SIDE_WAITERS, false,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, c | SIDE_WAITERS, NULL, NULL, 0);
	}
}

static inline void side_lock(struct pp_side_lock *l)
{
	if (unlikely(!side_trylock(l)))
		side_lock_slow(l);
}

static inline void side_unlock(struct pp_side_lock *l)
{
	if (unlikely(__atomic_exchange_n(&l->state, 0, __ATOMIC_RELEASE) & SIDE_WAITERS))
		syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * The CPU we run on, as sched_getcpu() says it, without the call into libc:
 * glibc (2.35 on) registers an rseq area per thread, where the kernel keeps
 * cpu_id current, and sched_getcpu() reads it there.  A negative cpu_id
 * (registration failed or was turned off; valgrind) asks libc after all.
 */
#if defined(__has_include)
#if __has_include(<sys/rseq.h>) && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/rseq.h>
#define PP_HAVE_RSEQ	1
#endif
#endif

#ifdef PP_HAVE_RSEQ
static inline int this_cpu(void)
{
	const struct rseq *rs = (const struct rseq *)((char *)__builtin_thread_pointer() +
						      __rseq_offset);
	/* The kernel writes it at each migration: atomic load. */
	int cpu = (int)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);

	return likely(cpu >= 0) ? cpu : sched_getcpu();
}
#else
static inline int this_cpu(void)
{
	return sched_getcpu();
}
#endif

/* Stored only when it changed, so the peer's cached copy stays valid. */
static inline void note_cpu(int *where)
{
	int cpu = this_cpu();

	if (__atomic_load_n(where, __ATOMIC_RELAXED) != cpu)
		__atomic_store_n(where, cpu, __ATOMIC_RELAXED);
}

/*
 * The biased side locks: the producer's, and the consumer's after it.
 *
 * Between two CPUs a 64 B write costs what its locked instructions wait
 * for: each waits until the stores before it (the bytes, into a line the
 * reader's CPU holds, and the slot's end word) have left, so a write whose
 * lock and unlock are a CAS and an exchange, and whose call takes and
 * drops a reference on its file, waits for a round trip to the other CPU
 * each time.  Without them the stores of one write overlap the next
 * (bench/pipe-threads -t msg 64, split CPUs, those four instructions made
 * plain in a test build: 490-520 -> 750-790 MB/s; the limit ring 820-1060).
 * So the thread that writes alone becomes the lock's owner and takes it
 * with plain stores; everyone else takes it the ordinary way and first
 * revokes the bias.  Asymmetric, as the wake-up is (above): the fast side
 * orders its stores and loads only against the compiler, and the slow side
 * pays a membarrier(2).
 *
 * Each thread has a record (struct bias_rec), and `owner` names the
 * owner's.  `busy` is in the record, not the pipe, so that it has one
 * writer: a thread that read itself as owner, stopped, and resumed after
 * the bias moved to another thread must not store over the new owner's
 * flag.  It counts: a signal handler may write to another pipe it owns.
 *
 *   owner, in:    load owner: us; store busy + 1; load revoke (acquire)
 *                 and owner again: 0 and us, it holds the lock; else
 *                 store busy - 1 and go the ordinary way
 *   owner, out:   store busy - 1 (release); load revoke: 1, wake
 *   revoker:      (holds the ordinary lock) store revoke = 1; membarrier;
 *                 wait until the owner's busy is 0 (acquire); owner = NULL
 *
 * The membarrier runs a full barrier on the owner's CPU at some point
 * between the revoker's stores and its load.  If the owner's store of
 * busy came before that barrier, the revoker's load sees it and waits; if
 * after, the owner's load of revoke, later still, sees 1.  So an owner
 * never enters while a revoker goes on, and the same argument, with the
 * owner's store of busy - 1 and its load of revoke, means a revoker that
 * sleeps on busy while the owner is in this pipe's section is woken when
 * it leaves.  The owner may be in another pipe's section instead (busy
 * counts them all), whose exit looks at that pipe's revoke: so the sleep
 * is bounded (100 us), and looks again.  A bias is
 * set by a thread that took the ordinary lock: owner, then a release
 * store of revoke = 0; the owner's acquire load of revoke that reads it
 * orders that section before the owner's, and shows the owner stored
 * before it, so a thread that read a stale owner sees the new one on its
 * second look.  The owner's release store of busy and the revoker's
 * acquire load that reads it order the owner's section before the
 * revoker's.
 *
 * Only pp_write's path comes the fast way (pp__pipe_lock_producer_fast),
 * and it holds the lock only for a bounded copy, in one thread: a wait, a
 * lease, a splice take the ordinary way.  (The consumer's bias is the same
 * lock on rd_mutex, for pp_read's path: see pp__pipe_lock_reader_fast.)
 * The bias goes to a thread that took the ordinary lock PP_BIAS_AFTER
 * times in a row; each revoke doubles that, so two threads taking turns
 * cost a membarrier ever more rarely.  A caller of the fast path takes no
 * reference on its file (that was one of the four instructions):
 * pp_close() of the write end revokes the bias first
 * (pp__pipe_producer_unbias), so the file outlives every fast section, and
 * pipe_write takes a reference before it lets go of the lock to wait.
 * Records are never freed: a thread's goes back to a pool when it exits,
 * and the next thread to take it inherits its biases, which is safe, as
 * one live thread at a time holds a record.  Where membarrier is refused
 * there is no bias.
 */
static inline bool asym_on(void);
static int asym_barrier(void);

#ifndef PP_BIAS_AFTER
#define PP_BIAS_AFTER		16
#endif
#ifndef PP_BIAS_AFTER_MAX
#define PP_BIAS_AFTER_MAX	(1u << 20)
#endif

struct bias_rec {
	/* atomic: fast sections we are in; ours alone to store */
	_Alignas(PP_CACHELINE) unsigned int busy;
	struct bias_rec *next;				/* the pool's list, under bias_lock */
};

static __thread struct bias_rec *bias_me __attribute__((tls_model("initial-exec")));
static pthread_mutex_t bias_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bias_rec *bias_pool;
static pthread_key_t bias_key;
static pthread_once_t bias_once = PTHREAD_ONCE_INIT;
static bool bias_key_ok;

/*
 * At thread exit (the key's destructor, run by the exiting thread), or a
 * record that could not be registered.  Once pooled, the record may be
 * the next thread's, so this thread must not use it again: a later
 * destructor of the user's that writes to a pipe gets a fresh one.
 */
static void bias_rec_put(void *arg)
{
	struct bias_rec *r = arg;

	if (bias_me == r)
		bias_me = NULL;
	pthread_mutex_lock(&bias_lock);
	r->next = bias_pool;
	bias_pool = r;
	pthread_mutex_unlock(&bias_lock);
}

static void bias_key_init(void)
{
	bias_key_ok = pthread_key_create(&bias_key, bias_rec_put) == 0;
}

/* This thread's record, or NULL (no memory, no key): then it gets no bias. */
static struct bias_rec *bias_rec_get(void)
{
	struct bias_rec *r = bias_me;

	if (likely(r))
		return r;
	pthread_once(&bias_once, bias_key_init);
	if (!bias_key_ok)
		return NULL;
	pthread_mutex_lock(&bias_lock);
	r = bias_pool;
	if (r)
		bias_pool = r->next;
	pthread_mutex_unlock(&bias_lock);
	if (!r) {
		r = aligned_alloc(PP_CACHELINE, sizeof(*r));
		if (!r)
			return NULL;
		memset(r, 0, sizeof(*r));
	}
	if (pthread_setspecific(bias_key, r)) {
		bias_rec_put(r);
		return NULL;
	}
	bias_me = r;
	return r;
}

/* The owner's exit from a fast section under b, or its retreat from one. */
static inline void bias_exit(struct bias_rec *me, struct pp_bias *b)
{
	/* Release: the section before a revoker's. */
	__atomic_store_n(&me->busy, __atomic_load_n(&me->busy, __ATOMIC_RELAXED) - 1,
			 __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (unlikely(__atomic_load_n(&b->revoke, __ATOMIC_RELAXED)))
		syscall(SYS_futex, &me->busy, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* With the ordinary lock held (or the end closing): no owner inside, none to come. */
static void bias_revoke(struct pp_bias *b)
{
	/*
	 * Bounded: the owner may be inside another pipe's fast section, whose
	 * exit looks at that pipe's revoke, not ours (see above).
	 */
	static const struct timespec bounded = { .tv_nsec = 100000 };
	struct bias_rec *r = (struct bias_rec *)__atomic_load_n(&b->owner, __ATOMIC_RELAXED);
	unsigned int busy;

	__atomic_store_n(&b->revoke, 1, __ATOMIC_RELAXED);
	if (!r)
		return;
	/*
	 * Registered, it does not fail (a bias is set only then); if it did,
	 * the bounded wait below would look again, which is all it can do.
	 */
	(void)asym_barrier();
	while ((busy = __atomic_load_n(&r->busy, __ATOMIC_ACQUIRE)) != 0)
		syscall(SYS_futex, &r->busy, FUTEX_WAIT_PRIVATE, busy, &bounded, NULL, 0);
	__atomic_store_n(&b->owner, NULL, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->revokes, 1, __ATOMIC_RELAXED);
}

/* True if this thread now holds l by b's bias; false, nothing held. */
static inline bool bias_enter(struct pp_bias *b, const struct pp_side_lock *l)
{
	struct bias_rec *me = bias_me;

	/*
	 * Not while the ordinary lock is held: by another thread, which is
	 * revoking us, or by us (a lease, a loan), where the ordinary way
	 * blocks as it always did rather than go in beside it.
	 */
	if (!me || __atomic_load_n(&b->owner, __ATOMIC_RELAXED) != me ||
	    __atomic_load_n(&l->state, __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&me->busy, __atomic_load_n(&me->busy, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
	/* The revoker's membarrier orders the hardware: see above. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (unlikely(__atomic_load_n(&b->revoke, __ATOMIC_ACQUIRE) ||
		     __atomic_load_n(&b->owner, __ATOMIC_RELAXED) != me)) {
		bias_exit(me, b);
		return false;
	}
	b->fast = true;
	return true;
}

/*
 * l just taken the ordinary way: revoke another thread's bias, count this
 * thread's takes in a row, and set its bias once they are enough.
 */
static inline __attribute__((always_inline)) void bias_taken(struct pp_bias *b)
{
	struct bias_rec *me = bias_me;
	const void *owner = __atomic_load_n(&b->owner, __ATOMIC_RELAXED);

	if (owner && owner != me) {
		/* Contended: the owner may be inside by the fast path. */
		bias_revoke(b);
		owner = NULL;
		b->after = min_t(unsigned int, 2 * (b->after ?: PP_BIAS_AFTER), PP_BIAS_AFTER_MAX);
	}
	if (!owner && asym_on()) {
		if (!me || b->last != me) {
			me = bias_rec_get();
			b->last = me;
			b->streak = 0;
		}
		if (me && ++b->streak >= (b->after ?: PP_BIAS_AFTER) &&
		    !__atomic_load_n(&b->nobias, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&b->used, true, __ATOMIC_RELAXED);
			__atomic_store_n(&b->owner, me, __ATOMIC_RELAXED);
			/* Release: the owner, and this section, before its first fast one. */
			__atomic_store_n(&b->revoke, 0, __ATOMIC_RELEASE);
		}
	}
	/* Only now: until the revoke above, an owner's fast section may own `fast`. */
	b->fast = false;
}

static inline void bias_unlock(struct pp_bias *b, struct pp_side_lock *l)
{
	if (b->fast) {
		b->fast = false;
		bias_exit(bias_me, b);	/* a fast section is one thread's: see above */
		return;
	}
	side_unlock(l);
}

/* The end is closing: no fast section from now on, none in progress. */
static void bias_end(struct pp_bias *b)
{
	if (!__atomic_load_n(&b->used, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&b->nobias, true, __ATOMIC_RELEASE);
	bias_revoke(b);
}

/* This side's lock just taken the ordinary way, by this thread, which runs on *cpu now. */
static inline __attribute__((always_inline)) void side_taken(struct pp_bias *b, int *cpu)
{
	bias_taken(b);
	note_cpu(cpu);
}

/* The ordinary way in, taken at once and marked: no reference (side_trylock_noref). */
static inline __attribute__((always_inline)) bool side_take_noref(struct pp_side_lock *l,
								    struct pp_bias *b, int *cpu)
{
	if (!side_trylock_noref(l))
		return false;
	side_taken(b, cpu);
	return true;
}

/*
 * The end of this side is closing: no fast section and no marked holder
 * from now on, none in progress.  The caller drops its reference, and
 * maybe frees the end and the pipe, only after this.
 */
static void side_end(struct pp_bias *b, const struct pp_side_lock *l)
{
	bias_end(b);
	side_wait_noref(l);
}

bool pp__pipe_lock_producer_fast(struct pp_pipe *p)
{
	if (!bias_enter(&p->wr_bias, &p->wr_mutex))
		return false;
	note_cpu(&p->wr_cpu);
	return true;
}

/* Producers never hold wr_mutex across a wait or a system call. */
void pp__pipe_lock_producer(struct pp_pipe *p)
{
	side_lock(&p->wr_mutex);
	side_taken(&p->wr_bias, &p->wr_cpu);
}

void pp__pipe_unlock_producer(struct pp_pipe *p)
{
	bias_unlock(&p->wr_bias, &p->wr_mutex);
}

void pp__pipe_producer_unbias(struct pp_pipe *p)
{
	side_end(&p->wr_bias, &p->wr_mutex);
}

/* pp_write's ordinary way, taken at once: as pp__pipe_trylock_reader_noref. */
bool pp__pipe_trylock_producer_noref(struct pp_pipe *p)
{
	return side_take_noref(&p->wr_mutex, &p->wr_bias, &p->wr_cpu);
}

/*
 * The consumer's bias: pp__pipe_read comes the fast way, and nothing
 * else does; it leaves the fast section, with a reference on its file,
 * before anything that waits (pipe.c).  On one CPU the two threads take
 * turns, and rd_mutex's CAS and exchange and the file reference's add and
 * subtract were a third of a 64 B read's cost (bench/pipe-threads -t msg
 * 64, same CPU: 1259 -> 1886 MB/s with all four made plain in a test
 * build).  Between two CPUs the exchange that lets go of the lock waits
 * for the read's store of tail, a line the writer of a full pipe polls,
 * so it paid a miss per read: 4 KiB messages 6.0-6.1 -> 7.8-7.9 GB/s
 * with the fast way taken there too (four pairs, 2026-12-07; 64 B, 64 KiB
 * and the round trip level).  It was once kept to the writer's CPU, when
 * a reader that fast caught up with its writer and met it on the slot
 * line at every message (docs/design.md: the catching-up reader); the
 * quick read and the drained slot have since taken that line out of the
 * reader's path.
 */
bool pp__pipe_lock_reader_fast(struct pp_pipe *p)
{
	int cpu;

	if (!bias_enter(&p->rd_bias, &p->rd_mutex))
		return false;
	cpu = this_cpu();
	if (__atomic_load_n(&p->rd_cpu, __ATOMIC_RELAXED) != cpu)
		__atomic_store_n(&p->rd_cpu, cpu, __ATOMIC_RELAXED);
	return true;
}

void pp__pipe_consumer_unbias(struct pp_pipe *p)
{
	side_end(&p->rd_bias, &p->rd_mutex);
}

/*
 * pp_read's way in between CPUs, where the fast way is not taken: the
 * ordinary lock, by one CAS that also says the holder holds no reference
 * on its file, so the call makes no locked instruction on the file's
 * count (two per read, a sixth of a 64-byte message's time between
 * CPUs).  pp_close() waits for such a holder (pp__pipe_consumer_unbias)
 * as it waits for a fast section; the caller takes a reference before
 * anything that lets go of the lock.  False: taken by someone, nothing
 * held; the caller goes the ordinary way.
 */
bool pp__pipe_trylock_reader_noref(struct pp_pipe *p)
{
	return side_take_noref(&p->rd_mutex, &p->rd_bias, &p->rd_cpu);
}

/*
 * No consumer holds rd_mutex while it waits, so a blocked lock is one that
 * is copying and lets go soon, or one that writes to a slow output (as
 * Linux holds pipe->mutex there), and a non-blocking reader waits for it as
 * a non-blocking read(2) waits for pipe->mutex.  A read loan is different:
 * it holds the lock until its owner says pp_read_done(), maybe never, so a
 * non-blocking caller gets EAGAIN.
 */
int pp__pipe_lock_reader(struct pp_pipe *p, bool nonblock)
{
	if (nonblock) {
		while (!side_trylock(&p->rd_mutex)) {
			if (__atomic_load_n(&p->loan_active, __ATOMIC_ACQUIRE))
				return -EAGAIN;
			sched_yield();
		}
	} else {
		side_lock(&p->rd_mutex);
	}
	side_taken(&p->rd_bias, &p->rd_cpu);
	return 0;
}

/* Every consumer but pp__pipe_read's quick path: the tail slot as read. */
int pp__pipe_lock_consumer(struct pp_pipe *p, bool nonblock)
{
	int err = pp__pipe_lock_reader(p, nonblock);

	if (!err)
		pp__pipe_settle_read(p);
	return err;
}

/*
 * loan_owner is stored before the release store of loan_active, so a true
 * loan_active read here (acquire) comes with that loan's owner: never an
 * older loan's, which could be our own.
 */
bool pp__pipe_lock_consumer_ctl(struct pp_pipe *p)
{
	if (__atomic_load_n(&p->loan_active, __ATOMIC_ACQUIRE) &&
	    pthread_equal(__atomic_load_n(&p->loan_owner, __ATOMIC_RELAXED), pthread_self()))
		return false;
	pp__pipe_lock_consumer(p, false);
	return true;
}

/* A read loan may end in another thread than the one that took it. */
void pp__pipe_unlock_consumer(struct pp_pipe *p)
{
	bias_unlock(&p->rd_bias, &p->rd_mutex);
}

/* ---------------------------------------------------------------------- */

/*
 * Read at every call's errno boundary (pp__ret).  Initial-exec: in the
 * shared library the default model costs a __tls_get_addr call per call
 * (about 3% of a 64 B write + read pair, measured); one byte of static TLS
 * is well within what glibc keeps spare for libraries that are dlopen()ed.
 */
__thread bool pp__sigpipe_owed __attribute__((tls_model("initial-exec")));

int pp__pipe_epipe(const struct pp_file *f)
{
	if (!(pp__file_flags(f) & PP_O_NOSIGPIPE))
		pp__sigpipe_owed = true;
	return -EPIPE;
}

void pp__raise_sigpipe(void)
{
	pp__sigpipe_owed = false;
	raise(SIGPIPE);
}

bool pp__pipe_nonblock(const struct pp_file *f, unsigned int splice_flags)
{
	return (pp__file_flags(f) & O_NONBLOCK) || (splice_flags & SPLICE_F_NONBLOCK);
}

/* ---------------------------------------------------------------------- */

/*
 * 1: wakers load sleepers plainly and sleepers membarrier; else both use
 * RMWs.  Not static: pp__pipe_wake_readers (pipe.h) looks at it inline.
 */
int pp__asym_wake;
static pthread_once_t asym_once = PTHREAD_ONCE_INIT;

static void asym_init(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		__atomic_store_n(&pp__asym_wake, 1, __ATOMIC_RELAXED);
}

/*
 * Before the process's first pipe: whoever gets a pipe end got it after
 * this, by whatever passed the pointer, so every waker and sleeper of it
 * reads the same pp__asym_wake.
 */
void pp__wait_init(void)
{
	pthread_once(&asym_once, asym_init);
}

static inline bool asym_on(void)
{
	return __atomic_load_n(&pp__asym_wake, __ATOMIC_RELAXED) == 1;
}

/* The sleeper's barrier on every CPU that runs a thread of ours: 0, or -1. */
static int asym_barrier(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return 0;
	/* A child of fork() on a kernel that does not carry the registration over. */
	if (errno == EPERM &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return 0;
	return -1;
}

static void futex_wake_all(unsigned int *wq)
{
	__atomic_fetch_add(wq, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, wq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void wake(unsigned int *wq, unsigned int *sleepers, bool *woken)
{
	unsigned int n;

	if (likely(asym_on())) {
		/*
		 * A plain load, after the caller's store of head, tail or an
		 * end count in the compiler's order too; the sleeper's
		 * membarrier orders it with the hardware's (see above).
		 */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		n = __atomic_load_n(sleepers, __ATOMIC_RELAXED);
	} else {
		/*
		 * A read-modify-write, not a plain load: it is ordered with
		 * every sleeper's increment (see above), and it releases the
		 * caller's store to any sleeper that increments after it.  (A
		 * fence would do the first; TSan cannot see fences.)
		 */
		n = __atomic_fetch_add(sleepers, 0, __ATOMIC_SEQ_CST);
	}
	if (n && !__atomic_exchange_n(woken, true, __ATOMIC_SEQ_CST))
		futex_wake_all(wq);
}

static void update_events_if_any(struct pp_pipe *p)
{
	if (unlikely(__atomic_load_n(&p->events, __ATOMIC_ACQUIRE))) {
		pthread_mutex_lock(&p->mutex);
		pp__pipe_update_events(p);
		pthread_mutex_unlock(&p->mutex);
	}
}

void pp__pipe_do_wake_readers(struct pp_pipe *p)
{
	wake(&p->rd_wait, &p->rd_sleepers, &p->rd_woken);
	update_events_if_any(p);
}

void pp__pipe_wake_writers(struct pp_pipe *p)
{
	wake(&p->wr_wait, &p->wr_sleepers, &p->wr_woken);
	update_events_if_any(p);
}

void pp__pipe_wake_all(struct pp_pipe *p)
{
	futex_wake_all(&p->rd_wait);
	futex_wake_all(&p->wr_wait);
}

/* ---------------------------------------------------------------------- */

/*
 * Before sleeping, wait a little, the way the kernel's mutexes spin on an
 * owner that is running.
 *
 * When the peer is in a call on another CPU it usually adds data or frees a
 * slot within microseconds, and a futex sleep plus a cross-CPU wake-up
 * costs tens of them (far more on a virtual machine, where the idle CPU has
 * to be woken by the host): spin.
 *
 * When the peer last ran on our CPU it cannot move until we stop, so
 * spinning is pointless: yield instead.  The peer runs, and we are not
 * counted as a sleeper, so it owes us no futex wake-up.  Both are bounded
 * in time, about what a sleep and a wake-up cost, so a wait that fails is
 * never much worse than sleeping at once.
 */
#ifndef PP_SPIN_NS
#define PP_SPIN_NS	20000
#endif

static int online_cpus;


/* True if the peer may be running only once we give up our CPU. */
static bool peer_shares_cpu(const int *peer_cpu)
{
	int n = __atomic_load_n(&online_cpus, __ATOMIC_RELAXED);
	int cpu;

	if (!n) {
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
		__atomic_store_n(&online_cpus, n > 0 ? n : 1, __ATOMIC_RELAXED);
	}
	if (n <= 1)
		return true;
	cpu = sched_getcpu();	/* rseq: a load, no system call */
	return cpu >= 0 && cpu == __atomic_load_n(peer_cpu, __ATOMIC_RELAXED);
}

/*
 * On a shared CPU one waiter per side is all that helps: when the peer
 * yields or blocks, the waiter runs.  A second, third ... waiter that
 * yields too is one more runnable thread between the peer and its CPU, and
 * under a fair scheduler each takes its share of it: four writers yielding
 * beside one reader on one CPU leave the reader a fifth of the time it
 * needs.  So the first waiter of a side yields (it holds the side's
 * `yielder` word) and any other naps: a timed futex wait of PP_NAP_NS on
 * the side's wait queue, not counted among the sleepers, so no peer owes
 * it a wake-up and no peer call pays for one.  A wake-up of the queue (a
 * close, a resize, a wake of real sleepers) ends a nap early; otherwise a
 * napper looks again when its time is up, becomes the yielder if the word
 * is free, and sleeps for real once it has napped PP_NAP_BUDGET_NS, or as
 * soon as its peer last ran on another CPU (then the peer can move while
 * we sleep, and its wake-up is what ends the wait promptly).
 *
 * Naps are long and the yielding goes in turns.  A napper that wakes on a
 * timer while its peer is half way through the pipe preempts it and moves
 * a message or two per pair of switches, where the yielder moves a pipe's
 * worth; so a nap is PP_NAP_NS, about a scheduler slice.  Left at that, the
 * yielder would keep the pipe for as long as it has data to write (or
 * room to read into) and the nappers would get it only when their naps
 * happen to end at a good moment.  So a waiter that has been the yielder
 * for PP_YIELD_TURN_NS, wait after wait, stands aside when it finds the
 * word free and others napping: it wakes one thread of the queue and naps
 * itself, and whoever takes the word next begins a turn.  Four writers
 * into one reader at 4 KiB, all on one CPU (bench/pipe-threads -t fan,
 * PP_BENCH_PIN=same, "stall" the longest a thread took for 64 KiB of its
 * own messages): naps of 50 us and no turns made 2.3x a kernel pipe with
 * stalls of 3.5-6 ms; naps of 1 ms and no turns 3.0x, stalls of 19 ms;
 * naps of 1 ms and turns of 0.2 ms 3.0x, stalls of 1.1 ms (the kernel's:
 * 0.4 ms); turns of 0.5 ms let stalls grow to 6-8 ms.  A napper woken by
 * nothing misses room or data for up to one nap; it shares a CPU with a
 * thread that is running anyway (the yielder's peer), which the scheduler
 * would let finish its slice first (milliseconds) even if it were woken
 * at once.  A thread that siglongjmps out of a wait as the yielder leaves
 * the word set: the side's waiters then nap instead of yield, slower but
 * never stuck; one that jumps out of a nap leaves itself counted among the
 * nappers: each yielder then stands aside after its turn though nobody
 * may take over, a 1 ms nap per turn, again slower but never stuck.
 *
 * struct pp_yielder only chooses who yields; nothing else reads it, so its
 * fields are relaxed atomics and a wrong choice (two threads that both
 * think a turn is theirs, a stand-aside that wakes a real sleeper instead
 * of a napper) costs time, never a wake-up: every waiter re-checks
 * ready() after each yield or nap and sleeps through sleep_on().
 */
#ifndef PP_NAP_NS
#define PP_NAP_NS		1000000
#endif
#ifndef PP_NAP_BUDGET_NS
#define PP_NAP_BUDGET_NS	10000000
#endif

#ifndef PP_YIELD_TURN_NS
#define PP_YIELD_TURN_NS	200000
#endif

/* This thread's token for struct pp_yielder: nonzero, distinct while it lives. */
static unsigned int yield_tokens;
static __thread unsigned int yield_me __attribute__((tls_model("initial-exec")));

static unsigned int yield_token(void)
{
	while (unlikely(!yield_me))
		yield_me = __atomic_add_fetch(&yield_tokens, 1, __ATOMIC_RELAXED);
	return yield_me;
}

/*
 * Become the side's yielder if nobody is.  A thread that has been it for a
 * whole turn (PP_YIELD_TURN_NS, across however many waits) while others
 * nap declines and wakes the queue instead, so that one of them takes
 * over: the turn is what keeps the faster scheme fair.
 */
static bool take_yielder(struct pp_yielder *y, unsigned int *wq)
{
	unsigned int me = yield_token(), free = 0;
	bool again;

	if (__atomic_load_n(&y->holder, __ATOMIC_RELAXED))
		return false;
	/* The clock only when a turn may end or begin: a lone waiter reads none. */
	again = __atomic_load_n(&y->last, __ATOMIC_RELAXED) == me;
	if (again && __atomic_load_n(&y->nappers, __ATOMIC_RELAXED) &&
	    pp__mono_ns() - __atomic_load_n(&y->since, __ATOMIC_RELAXED) >= PP_YIELD_TURN_NS) {
		__atomic_store_n(&y->last, 0, __ATOMIC_RELAXED);
		__atomic_fetch_add(&y->turns, 1, __ATOMIC_RELAXED);
		syscall(SYS_futex, wq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		return false;
	}
	if (!__atomic_compare_exchange_n(&y->holder, &free, me, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return false;
	if (!again) {
		__atomic_store_n(&y->since, pp__mono_ns(), __ATOMIC_RELAXED);
		__atomic_store_n(&y->last, me, __ATOMIC_RELAXED);
	}
	return true;
}

static void nap(struct pp_yielder *y, unsigned int *wq)
{
	static const struct timespec ts = { .tv_nsec = PP_NAP_NS };
	unsigned int seq = __atomic_load_n(wq, __ATOMIC_RELAXED);

	__atomic_fetch_add(&y->nappers, 1, __ATOMIC_RELAXED);
	syscall(SYS_futex, wq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
	__atomic_fetch_sub(&y->nappers, 1, __ATOMIC_RELAXED);
}

/*
 * Spin, yield or nap until ready(p) holds or the time is up; true if it
 * holds.  ready() is a handful of loads.
 *
 * A spinning waiter also prefetches `hint`, the line its peer is expected
 * to write next, when the caller knows one (pp__pipe_wait_data_at), so
 * that the miss on it is under way while ready() waits for the word that
 * publishes it, instead of starting once it has (a 64 B round trip
 * between two CPUs, bench/pipe-threads -t rtt: 327-345 ns without it,
 * 292-307 with it, the spinning flags 95-107).  A prefetch cannot fault:
 * a hint that went stale (its page let go) costs nothing.
 */
static bool wait_briefly(struct pp_pipe *p, bool (*ready)(struct pp_pipe *), const int *peer_cpu,
			 unsigned int *wq, struct pp_yielder *yielder, const void *hint)
{
	long long now = pp__mono_ns(), deadline = now + PP_SPIN_NS, nap_end = now + PP_NAP_BUDGET_NS;
	bool mine = false;

	if (!peer_shares_cpu(peer_cpu)) {
		do {
			for (int i = 0; i < 64; i++) {
				if (hint)
					__builtin_prefetch(hint, 0, 3);
				if (ready(p))
					return true;
				pp__cpu_relax();
			}
		} while (pp__mono_ns() < deadline);
		return ready(p);
	}
	for (;;) {
		if (!mine && take_yielder(yielder, wq)) {
			mine = true;
			deadline = pp__mono_ns() + PP_SPIN_NS;
		}
		if (mine) {
			sched_yield();
			if (ready(p) || pp__mono_ns() >= deadline)
				break;
		} else {
			nap(yielder, wq);
			if (ready(p) || pp__mono_ns() >= nap_end || !peer_shares_cpu(peer_cpu))
				break;
		}
	}
	if (mine)
		__atomic_store_n(&yielder->holder, 0, __ATOMIC_RELAXED);
	return ready(p);
}

/*
 * test/bug-lost-wake compiles this file into itself with a hook here, to
 * run a waker and a second producer between the steps of a sleep.
 */
#ifndef PP__SLEEP_STEP
#define PP__SLEEP_STEP()	do { } while (0)
#endif

static void sleep_on(struct pp_pipe *p, bool (*ready)(struct pp_pipe *), unsigned int *wq,
		     unsigned int *sleepers, bool *woken)
{
	static const struct timespec bounded = { .tv_nsec = 1000000 };
	const struct timespec *timeout = NULL;
	unsigned int seq;

	__atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
	/*
	 * A waker that loaded sleepers plainly before our increment: its
	 * store is visible once this returns (see above).  Registered, it
	 * does not fail; if it did, a sleep bounded to a millisecond would
	 * be the worst a missed wake-up could cost.
	 */
	if (asym_on() && asym_barrier())
		timeout = &bounded;
	PP__SLEEP_STEP();
	/* Before the exchange: any wake-up that reads its `false` bumps wq after this. */
	seq = __atomic_load_n(wq, __ATOMIC_SEQ_CST);
	PP__SLEEP_STEP();
	/* An exchange: it reads from a waker's, which releases its store to us. */
	(void)__atomic_exchange_n(woken, false, __ATOMIC_SEQ_CST);
	PP__SLEEP_STEP();
	if (!ready(p))
		/* EAGAIN: woken since we read seq; EINTR: look again anyway. */
		syscall(SYS_futex, wq, FUTEX_WAIT_PRIVATE, seq, timeout, NULL, 0);
	__atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
}

static bool readable(struct pp_pipe *p)
{
	return !pp__pipe_empty(p) || !pp__pipe_writers(p);
}

static bool writable(struct pp_pipe *p)
{
	return !pp__pipe_full(p) || !pp__pipe_readers(p);
}

int pp__pipe_wait_data_at(struct pp_pipe *p, bool nonblock, const void *hint)
{
	for (;;) {
		if (!pp__pipe_empty(p))
			return 1;
		/* Data published before the last writer closed is still data. */
		if (!pp__pipe_writers(p))
			return pp__pipe_empty(p) ? 0 : 1;
		if (nonblock)
			return -EAGAIN;
		if (!wait_briefly(p, readable, &p->wr_cpu, &p->rd_wait, &p->rd_yielder, hint))
			sleep_on(p, readable, &p->rd_wait, &p->rd_sleepers, &p->rd_woken);
	}
}

int pp__pipe_wait_data(struct pp_pipe *p, bool nonblock)
{
	return pp__pipe_wait_data_at(p, nonblock, NULL);
}

/*
 * A filled offer, or one still open on a pipe that became readable (bytes
 * a writer put in the ring instead, or EOF): the offerer withdraws it.
 * While a writer holds the offer (CLAIMED) there is nothing to do but
 * wait for it, which it ends with a wake-up of readers.
 */
static bool handed_or_readable(struct pp_pipe *p)
{
	unsigned int st = __atomic_load_n(&p->ho_state, __ATOMIC_ACQUIRE);

	return st == PP_HO_DONE || (st == PP_HO_OFFERED && readable(p));
}

void pp__pipe_wait_handoff(struct pp_pipe *p)
{
	if (!wait_briefly(p, handed_or_readable, &p->wr_cpu, &p->rd_wait, &p->rd_yielder, NULL))
		sleep_on(p, handed_or_readable, &p->rd_wait, &p->rd_sleepers, &p->rd_woken);
}

static int wait_room(struct pp_pipe *p, bool nonblock)
{
	while (!writable(p)) {
		if (nonblock)
			return -EAGAIN;
		if (!wait_briefly(p, writable, &p->rd_cpu, &p->wr_wait, &p->wr_yielder, NULL))
			sleep_on(p, writable, &p->wr_wait, &p->wr_sleepers, &p->wr_woken);
	}
	return pp__pipe_readers(p) ? 0 : -EPIPE;
}

int pp__pipe_wait_room(struct pp_file *out, bool nonblock)
{
	int err = wait_room(out->pipe, nonblock);

	return err == -EPIPE ? pp__pipe_epipe(out) : err;
}

int pp__pipe_wait_room_quiet(struct pp_pipe *p)
{
	return wait_room(p, false);
}

/*
 * A reader holds the pull offer only while it copies (pipe.c), and wakes
 * writers when it lets go.
 */
static bool pull_settled(struct pp_pipe *p)
{
	return __atomic_load_n(&p->wo_state, __ATOMIC_ACQUIRE) != PP_WO_CLAIMED;
}

void pp__pipe_wait_pull(struct pp_pipe *p)
{
	while (!pull_settled(p))
		if (!wait_briefly(p, pull_settled, &p->rd_cpu, &p->wr_wait, &p->wr_yielder, NULL))
			sleep_on(p, pull_settled, &p->wr_wait, &p->wr_sleepers, &p->wr_woken);
}
