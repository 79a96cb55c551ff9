// SPDX-License-Identifier: MIT
/*
 * shared.c - a pipe between processes: pp_pipe2(ends, PP_O_SHARED)
 * (docs/shared-pipes.md).
 *
 * The ring's control, its slots and its pages live in a shared arena
 * (arena.c), a sealed memfd that fork() leaves mapped in the child, so
 * parent and child hold the ends of one pipe.  Writers take one lock and
 * readers another, futex words in the arena without FUTEX_PRIVATE_FLAG,
 * and a writer and a reader go on at once, through head, tail and each
 * slot's merge word (the ring, below), as pipe.c's do between threads.
 * Nothing the arena
 * holds is a pointer: slots name pages by index, and every index, offset
 * and length read from it is checked before use (a peer may scribble on
 * the arena; the pipe then fails with EIO, this process's memory is never
 * at stake).
 *
 * Who holds an end.  A kernel pipe's ends are counted by the kernel, which
 * also counts the copies fork() makes and drops those of a process that
 * dies.  We let it count for us: every shared pipe has a token pipe, a
 * kernel pipe that carries no data; each read end holds a descriptor for
 * the token's read side, each write end one for its write side.  fork()
 * duplicates them with the ends, exit closes them, and poll(2) says when
 * the last of a side is gone anywhere (POLLHUP on the read side: no writer
 * left; POLLERR on the write side: no reader left).  That is the truth,
 * but a system call; the hot path reads a hint instead, the counts of
 * ends in ctrl (pp_pipe2 sets them, a fork()ed child adds its copies, a
 * close takes one away), and asks the tokens only when the hint says
 * nobody is left (a copy fork() made may not be counted yet: the child
 * adds it when it first runs) and before it sleeps (a process that died
 * or exec'd without closing is still counted).  A sleep is a futex wait of
 * at most SH_SLEEP_NS, so a peer that died while we slept is noticed that
 * late at worst; a process that exits through exit() closes its ends at
 * once (an atexit handler), as does one that calls pp_close().
 *
 * Wake-ups are wait.c's: a waker's store of head or tail (or of a count)
 * comes before its read-modify-write of the sleepers count, a sleeper's
 * increment of that count before its look at the ring; both are seq_cst,
 * so one of the two sees the other.  A small write by the biased writer
 * wakes readers with a plain load instead, and a reader pays a membarrier
 * (wake_readers_plain).
 *
 * pipe.c's reader's view of the slot at tail is here too, and an emptied
 * last slot stays in the ring as pipe.c's drained slot does, but the
 * writer appends to it without asking the reader whether it is empty
 * until a write would not fit its page (the ring, below;
 * docs/shared-pipes.md sections 3c and 3g); splice, tee, vmsplice and
 * the zero-copy calls are shared_splice.c's.
 */
#include "internal.h"
#include "arena.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define SH_SLOTS	PP_SHARED_SLOTS	/* slots a pipe may fill: 1 MiB, pipe-max-size */
/*
 * The ring's slots in the arena: more than SH_SLOTS, so that the drained
 * slot (the ring, below), which holds no bytes and takes no room, fits
 * beside a pipe of SH_SLOTS filled; a power of two, as the ring masks.
 */
#define SH_RING		(2u * SH_SLOTS)
/*
 * Its pages: a page for every slot a pipe may fill and for the drained
 * one, and a few more.  A reader moves tail before it gives the emptied
 * slot's page back (a reader killed between the two must leak that page
 * rather than free it twice), so a writer may count a free slot whose
 * page is not back yet: with max_usage at SH_SLOTS it would find no page.
 * One reader is in that window at a time (rd_lock); the rest is margin.
 */
#define SH_PAGES	(SH_SLOTS + 8u)
#ifndef SH_SLEEP_NS
#define SH_SLEEP_NS	50000000L	/* a sleep re-checks the tokens this often */
#endif
#define SH_SPIN_NS	20000LL		/* before sleeping, when a peer may be running */
#define SH_YIELD_NS	200000LL	/* yielding to a peer on our CPU, before sleeping */
#define SH_BIAS_RECS	8u		/* threads that can hold a pipe's write bias: records */
#ifndef SH_BIAS_AFTER
#define SH_BIAS_AFTER	16u		/* ordinary takes in a row that earn it */
#endif
#ifndef SH_BIAS_AFTER_MAX
#define SH_BIAS_AFTER_MAX (1u << 20)
#endif
/* test/bug-shared-bias: a fast section stopped before it publishes. */
#ifndef PP__SH_FAST_STEP
#define PP__SH_FAST_STEP(f)	do { } while (0)
#endif
#define SH_FLAGS	(O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_ASYNC)	/* setfl() */

/*
 * In the arena; every field atomic.  Lines apart, as pipe.h lays out
 * struct pp_pipe: each side's lock and index are its own, and a waiter
 * spins on the other side's index alone.
 */
struct sh_bias_rec {
	_Alignas(64) uint32_t busy;	/* 1 while its thread is in a fast section; that thread's to store */
	uint32_t pid, tid;		/* the thread's, to ask whether it lives; under wr_lock */
	uint64_t tok;			/* the thread's token, 0 free; under wr_lock */
};

struct sh_ctrl {
	uint32_t wr_lock;		/* 0 free, else the holder's pid | LOCK_WAITERS */
	/* The biased write lock (below): the fast way in reads this line alone. */
	uint32_t wr_revoke;		/* 1: the fast way is shut; 0 set (release) with an owner */
	uint64_t wr_owner;		/* the owner's token | its record's index; 0 none */
	uint32_t asym_off;		/* sticky: a process of the pipe cannot membarrier(2) */
	uint32_t plain_wake;		/* a fast writer wakes readers with a plain load: wake_readers_plain */
	uint32_t wr_streak;		/* ordinary takes in a row by wr_last; under wr_lock */
	uint64_t wr_last;		/* token of the last ordinary taker in sh_writev; under wr_lock */
	uint32_t wr_bias_after;		/* takes in a row that earn the bias; under wr_lock */
	uint32_t wr_revokes;		/* revocations, and of them owners found dead: tests */
	uint32_t wr_dead_owners;
	uint64_t wr_mapping;		/* who last stored a slot's end: map_id() */
	_Alignas(64) uint32_t rd_lock;	/* likewise */
	uint32_t sweep;			/* a lock was taken over from the dead: sweep() */
	uint64_t rd_view;		/* the reader's view of one slot's offset: see sh_readv(); under rd_lock */
	_Alignas(64) uint32_t head;	/* free running; release store under wr_lock */
	_Alignas(64) uint32_t tail;	/* free running; release store under rd_lock */
	_Alignas(64) uint32_t spare;	/* a free page kept for the next write, index + 1 */
	_Alignas(64) uint32_t max_usage;	/* slots a writer may fill; changed under both locks */
	uint32_t readers, writers;	/* hints: ends open (see above) */
	uint32_t end_flags[2];		/* F_SETFL flags of the read and the write end */
	int32_t cpu[2];			/* where each side last ran: wait_for spins or yields */
	uint64_t token_ino;		/* the token pipe's inode: pp_import() checks the token */
	_Alignas(64) uint32_t rd_wait;
	uint32_t rd_sleepers;
	_Alignas(64) uint32_t wr_wait;
	uint32_t wr_sleepers;
	struct sh_bias_rec wr_rec[SH_BIAS_RECS];
};
_Static_assert(sizeof(struct sh_ctrl) <= PP_ARENA_CTRL_SIZE, "ctrl outgrew its room");
/* test/fuzz-shared leaves the lock words and the records' busy words alone: it knows where. */
_Static_assert(offsetof(struct sh_ctrl, rd_lock) == 64 && offsetof(struct sh_ctrl, wr_rec) == 512 &&
	       sizeof(struct sh_bias_rec) == 64, "test/fuzz-shared knows these places");

/*
 * A slot.  Its positions are byte counts, free running (the ring, below):
 * its bytes are [offset, end), at [offset - base, end - base) of its page.
 * Filled whole by the writer before head shows it; after that end and
 * where are the writers', offset and drained the reader's.  A word each
 * (page and base one word, since a move changes both), so a process
 * killed between two stores leaves no slot that says more than its page
 * holds.
 */
struct sh_slot {
	uint32_t end;			/* atomic: where the bytes end; stored by writers */
	uint32_t offset;		/* where the reader is; under rd_lock */
	uint64_t where;			/* arena page index | base << 32; stored by writers */
	uint32_t drained;		/* where a read last emptied it; under rd_lock */
	uint32_t flags;			/* PP_BUF_FLAG_CAN_MERGE or PP_BUF_FLAG_PACKET */
};
_Static_assert(sizeof(struct sh_slot) <= PP_ARENA_SLOT_SIZE, "slot outgrew its room");

/*
 * An event fd for one direction of a shared pipe in this process
 * (pp_file_event_fd, below): an eventfd kept by a watcher thread.
 */
struct sh_event {
	int fd;				/* the eventfd; -1 until asked for.  Atomic: the hot path looks */
	int inherited;			/* after fork(): the parent's, until this process asks */
	uint32_t set;			/* private futex word: 1 while fd is readable */
	uint32_t started;		/* private futex word: the watcher is in its loop */
	bool running, stop;		/* the watcher; under reg_lock, stop atomic */
	pthread_t thread;
	pthread_mutex_t lock;		/* orders set and clear with the eventfd's counter */
	struct sh_pipe *sp;
	int side;
};

/*
 * What the owner of the write bias knows of the last slot (slot_extend),
 * so that a merge loads nothing from the slot's line.  Used and changed
 * only in a fast section, and made invalid by every take of wr_lock the
 * ordinary way (side_lock): never both at once (the biased write lock).
 */
struct sh_merge_cache {
	bool valid;
	uint32_t idx;			/* the slot */
	uint32_t end;			/* its end, as this writer stored it */
	uint32_t base;			/* its base */
	char *page;			/* its page, here */
};

/* This process's view of one shared pipe: one per mapping. */
struct sh_pipe {
	struct pp__arena arena;
	uint32_t serial;		/* this mapping among this process's: map_id() */
	struct sh_merge_cache mc;
	unsigned int ends;		/* ends of it open here; under reg_lock */
	unsigned int side_ends[2];	/* of them, read ends and write ends; under reg_lock */
	bool loan_active;		/* atomic: a read loan holds rd_lock, */
	pthread_t loan_owner;		/* taken by this thread */
	struct sh_event ev[2];
};

/* One end, as this process holds it. */
struct sh_end {
	struct sh_pipe *sp;
	int side;			/* 0 read, 1 write */
	int token;			/* the token pipe's side, see above; -1 once closed */
	size_t loan;			/* pp_read_lend(): bytes lent, rd_lock held till done */
	bool lending;			/* atomic */
	bool leasing;			/* atomic: pp_write_lend(), wr_lock held till done */
	unsigned int lease_n;		/* pages reserved, their indices: */
	size_t lease_len;
	uint32_t lease_idx[PP_LEASE_MAX];
	struct sh_end *prev, *next;	/* every end this process holds; under reg_lock */
};

static void event_clear(struct sh_pipe *sp, int side);
static void event_stop(struct sh_event *ev);

/* Has this process an event fd for the direction?  One load: the hot path asks. */
static inline bool ev_on(const struct sh_pipe *sp, int side)
{
	return unlikely(__atomic_load_n(&sp->ev[side].fd, __ATOMIC_RELAXED) >= 0);
}

/* Ends of this process, for fork() (their copies are counted) and exit(). */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sh_end *reg_head;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static struct sh_ctrl *ctrl(const struct sh_pipe *sp)
{
	return pp__arena_ctrl(&sp->arena);
}

static struct sh_slot *slot(const struct sh_pipe *sp, uint32_t i)
{
	return pp__arena_slot(&sp->arena, i);
}

/* A slot's page and base, loaded in one piece (a move stores both at once). */
static uint64_t slot_where(const struct sh_slot *s)
{
	return __atomic_load_n(&s->where, __ATOMIC_RELAXED);
}

static uint32_t where_page(uint64_t w)
{
	return (uint32_t)w;
}

static uint32_t where_base(uint64_t w)
{
	return (uint32_t)(w >> 32);
}

static void slot_set_where(struct sh_slot *s, uint32_t page, uint32_t base)
{
	__atomic_store_n(&s->where, (uint64_t)base << 32 | page, __ATOMIC_RELAXED);
}

/*
 * Fill a slot not yet shown (beyond head): n bytes from the start of page
 * idx.  Every field, so that nothing of the slot's last use stays.
 */
static void slot_fill(struct sh_slot *s, uint32_t idx, uint32_t flags, uint32_t n)
{
	__atomic_store_n(&s->offset, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->drained, 0, __ATOMIC_RELAXED);
	slot_set_where(s, idx, 0);
	__atomic_store_n(&s->flags, flags, __ATOMIC_RELAXED);
	__atomic_store_n(&s->end, n, __ATOMIC_RELAXED);
}

static uint32_t *count_of(struct sh_ctrl *c, int side)
{
	return side ? &c->writers : &c->readers;
}

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* ---------------------------------------------------------------------- */
/*
 * The side locks, wr_lock and rd_lock (pipe.h's wr_mutex and rd_mutex,
 * between processes): writers take one, readers the other, and a writer
 * and a reader go on at once, meeting only in the words the ring protocol
 * below names.  The word holds the holder's pid, so a waiter that has
 * waited SH_SLEEP_NS can ask whether the holder still lives, and take the
 * lock over from a dead one (a SIGKILL in the middle of a call); what it
 * left half-done was never shown (the ring), and the pages it held come
 * back through a sweep.  A holder
 * that lives but keeps the lock for LOCK_STUCK_WAITS waits in a row is
 * taken for a scribble (a peer wrote some live process's pid there; no
 * call of ours holds a side lock across a sleep, and one that blocks in a
 * system call with a lock held says so, LOCK_BLOCKED): the arena is
 * poisoned, EIO.  So is one that a reused pid makes look alive.
 */
#define LOCK_STUCK_WAITS	40	/* of SH_SLEEP_NS: 2 s */
#define LOCK_WAITERS	0x80000000u
/*
 * The holder is in a system call that may block (a splice to a socket, from
 * a kernel pipe): a long hold is no sign of a scribble then.  A peer can
 * set the bit in a scribble too and make us wait as long as its process
 * lives; it could make us wait as long by holding the lock in a splice to a
 * socket nobody reads, so the bit hides nothing the peer could not do.
 */
#define LOCK_BLOCKED	0x40000000u
#define LOCK_PID	(~(LOCK_WAITERS | LOCK_BLOCKED))	/* pid_max is at most 2^22 */

/*
 * getpid() is a system call (glibc keeps no cache since 2.25): ours is
 * kept here, set when the first shared pipe is made and in every child
 * fork() makes (reg_fork_child).
 */
static uint32_t cached_pid;

static uint32_t my_pid(void)
{
	return __atomic_load_n(&cached_pid, __ATOMIC_RELAXED);
}

static void remember_pid(void)
{
	__atomic_store_n(&cached_pid, (uint32_t)getpid() & LOCK_PID, __ATOMIC_RELAXED);
}

/* Gone, or a zombie nobody reaped yet (which can still hold no lock). */
static bool pid_dead(uint32_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (!pid)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Where this process runs: stored only when it changed, so the peer's copy stays valid. */
static void note_cpu(struct sh_ctrl *c, int side)
{
	int cpu = sched_getcpu();

	if (__atomic_load_n(&c->cpu[side], __ATOMIC_RELAXED) != cpu)
		__atomic_store_n(&c->cpu[side], cpu, __ATOMIC_RELAXED);
}

static int lock_acquire(struct sh_pipe *sp, uint32_t *lock)
{
	const struct timespec ts = { 0, SH_SLEEP_NS };
	uint32_t me = my_pid(), v = 0, last = 0;
	int stuck = 0;

	if (unlikely(pp__arena_poisoned(&sp->arena)))
		return -EIO;	/* its lock words may be anything now */
	if (likely(__atomic_compare_exchange_n(lock, &v, me, false, __ATOMIC_ACQUIRE,
					       __ATOMIC_RELAXED)))
		return 0;
	for (int i = 0; i < 100; i++) {
		pp__cpu_relax();
		v = 0;
		if (__atomic_load_n(lock, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(lock, &v, me, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return 0;
	}
	for (;;) {
		v = __atomic_load_n(lock, __ATOMIC_RELAXED);
		if (!v) {
			/* Others may sleep too: keep the bit, as lowlevellock does. */
			if (__atomic_compare_exchange_n(lock, &v, me | LOCK_WAITERS, false,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return 0;
			continue;
		}
		if (!(v & LOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(lock, &v, v | LOCK_WAITERS, false,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		v |= LOCK_WAITERS;
		if (futex(lock, FUTEX_WAIT, v, &ts) < 0 && errno == ETIMEDOUT) {
			if (pid_dead(v & LOCK_PID) &&
			    __atomic_compare_exchange_n(lock, &v, me | LOCK_WAITERS, false,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
				/* Taken over from a dead holder: it may have held pages. */
				__atomic_store_n(&ctrl(sp)->sweep, 1, __ATOMIC_RELAXED);
				return 0;
			}
			stuck = v == last && !(v & LOCK_BLOCKED) ? stuck + 1 : 0;
			last = v;
			if (stuck >= LOCK_STUCK_WAITS)
				return pp__arena_poison(&sp->arena);
		}
	}
}

static void side_unlock(uint32_t *lock)
{
	if (__atomic_exchange_n(lock, 0, __ATOMIC_RELEASE) & LOCK_WAITERS)
		futex(lock, FUTEX_WAKE, 1, NULL);
}

/* ---------------------------------------------------------------------- */
/*
 * Asymmetric barriers between processes (wait.c's, made global).  A
 * writer's locked instruction after its stores waits for them to reach
 * the reader's CPU, the line the reader spins on and the page bytes: at
 * 64 bytes a message that was the whole cost (bench/pipe-procs -t msg 64,
 * split CPUs: 160-190 MB/s, below a kernel pipe's 190-200 on the machine
 * of that measurement).  So, as between threads, the fast side orders its
 * stores and loads against the compiler alone and the slow side pays a
 * membarrier(2): MEMBARRIER_CMD_GLOBAL_EXPEDITED, a full barrier on every
 * CPU that runs a thread of a process registered for it.  Two users: the
 * biased write lock (below) and the readers' wake-up by a small fast write
 * (wake_readers_plain).  Every process
 * of a shared pipe registers when it first makes or imports one (and a
 * child of fork() again, to be sure of it); a process that cannot, or
 * cannot issue the barrier (an old kernel, seccomp), sets asym_off in each
 * pipe it attaches to, for good, and from then on every process of that
 * pipe keeps the read-modify-writes and takes no bias.  A fast side that
 * read asym_off clear just before it was set goes on the asymmetric way
 * once more: a sleeper it misses sleeps SH_SLEEP_NS at most (every sleep
 * is bounded), and a revoke it meets is made without a barrier (see
 * wr_revoke_bias).
 */
static int corrupt(struct sh_pipe *sp);

static int sh_asym;		/* 1: registered and the barrier works here; -1 not */
static pthread_once_t sh_asym_once = PTHREAD_ONCE_INIT;

static bool sh_register(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 &&
	       syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
}

static void sh_asym_init(void)
{
	__atomic_store_n(&sh_asym, sh_register() ? 1 : -1, __ATOMIC_RELAXED);
}

/* Does this process go the asymmetric way on this pipe? */
static inline bool asym_on(const struct sh_ctrl *c)
{
	return __atomic_load_n(&sh_asym, __ATOMIC_RELAXED) == 1 &&
	       !__atomic_load_n(&c->asym_off, __ATOMIC_RELAXED);
}

/* A process attaching to a pipe: after this, asym_on() is right for it. */
static void asym_attach(struct sh_ctrl *c)
{
	pthread_once(&sh_asym_once, sh_asym_init);
	if (__atomic_load_n(&sh_asym, __ATOMIC_RELAXED) != 1)
		__atomic_store_n(&c->asym_off, 1, __ATOMIC_SEQ_CST);
}

/*
 * The slow side's barrier: 0, or -1 where no membarrier serves (this
 * process set asym_off then).  The non-expedited command needs no
 * registration and covers the same processes, a grace period later.
 */
static int sh_barrier(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0 ||
	    syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
		return 0;
	return -1;
}

/* ---------------------------------------------------------------------- */
/*
 * The biased write lock (wait.c's, between processes).  The thread that
 * writes alone becomes wr_lock's owner and takes it with plain stores;
 * everyone else takes wr_lock the ordinary way and first revokes the bias.
 * What wait.c keeps in a thread's own memory lives in the arena here, as a
 * revoker in another process must read it: each thread that holds a bias
 * has a record (struct sh_bias_rec) of its own, named by a random 64-bit
 * token of its thread (pids and tids repeat across pid namespaces); the
 * owner word is the owner's token with its record's index in the low bits.
 * A record is a thread's until the thread is found dead, so `busy` has one
 * writer: a thread that read itself as owner, stopped, and resumed after
 * the bias moved on stores only to its own record.
 *
 *   owner, in:    load owner: us, and wr_lock: 0; store busy = 1; load
 *                 revoke (acquire) and owner again: 0 and us, it holds
 *                 the lock; else store busy = 0 and go the ordinary way
 *   owner, out:   store busy = 0 (release); load revoke: 1, wake busy
 *   revoker:      (holds wr_lock) store revoke = 1; membarrier; wait
 *                 until the owner's busy is 0 (acquire); owner = 0
 *
 * The membarrier runs a full barrier on the owner's CPU between the
 * revoker's store and its load: an owner whose store of busy came before
 * it is seen and waited for, one whose store came after it loads revoke
 * later still and sees 1.  A grant (under wr_lock, by the thread that
 * took it SH_BIAS_AFTER times in a row in sh_writev) stores the record,
 * then owner (release), then revoke = 0 (release): an owner's acquire load
 * of revoke that reads 0 orders the granting section before its own.  The
 * owner's release of busy and the revoker's acquire load order the
 * owner's section before the revoker's.  Each revoke doubles the takes in
 * a row a bias costs, so two writers taking turns pay a membarrier ever
 * more rarely.
 *
 * Deaths and scribbles.  An owner killed inside a fast section leaves busy
 * set: the revoker asks whether its process lives every SH_SLEEP_NS, and
 * takes over from the dead as lock_acquire does (a sweep for the pages
 * it held).  A live owner inside for
 * LOCK_STUCK_WAITS sleeps is taken for a scribble (a fast section is a
 * bounded copy and never blocks): EIO.  Only sh_writev's path comes the
 * fast way; a wait, a reservation, a lease take wr_lock the ordinary way.
 * A fast section holds no reference on its file: pp_close() of a write
 * end revokes a bias held in this process first (pp__shared_unbias), and
 * sh_writev takes a reference before it lets go to wait.
 */
static __thread uint64_t bias_tok __attribute__((tls_model("initial-exec")));
static __thread uint32_t bias_tid __attribute__((tls_model("initial-exec")));

#define BIAS_IDX	((uint64_t)SH_BIAS_RECS - 1)
_Static_assert((SH_BIAS_RECS & (SH_BIAS_RECS - 1)) == 0, "the index is a mask");

/* This thread's token: random, its low bits clear for a record's index, never 0. */
static uint64_t bias_token(void)
{
	uint64_t t = 0;

	if (likely(bias_tok))
		return bias_tok;
	if (syscall(SYS_getrandom, &t, sizeof(t), GRND_NONBLOCK) != (long)sizeof(t))
		t = (uint64_t)pp__mono_ns() * 0x9e3779b97f4a7c15ull ^ (uintptr_t)&t ^
		    ((uint64_t)syscall(SYS_gettid) << 32);
	t &= ~BIAS_IDX;
	bias_tok = t ? t : ~BIAS_IDX;
	bias_tid = (uint32_t)syscall(SYS_gettid);
	return bias_tok;
}

/* A thread of the named process, gone (or its process a zombie). */
static bool tid_dead(uint32_t pid, uint32_t tid)
{
	char path[64];

	if (pid_dead(pid))
		return true;
	snprintf(path, sizeof(path), "/proc/%u/task/%u", pid, tid);
	return access(path, F_OK) && errno == ENOENT;
}

/* The fast way into wr_lock: true if this thread now holds it (*rec, its record). */
static bool wr_fast_enter(struct sh_pipe *sp, struct sh_bias_rec **rec)
{
	struct sh_ctrl *c = ctrl(sp);
	uint64_t tok = bias_tok, o;
	struct sh_bias_rec *r;

	/* Not while wr_lock is held: by a revoker, or by this thread (a lease). */
	if (!tok || ((o = __atomic_load_n(&c->wr_owner, __ATOMIC_RELAXED)) & ~BIAS_IDX) != tok ||
	    __atomic_load_n(&c->wr_lock, __ATOMIC_RELAXED) || pp__arena_poisoned(&sp->arena))
		return false;
	r = &c->wr_rec[o & BIAS_IDX];
	__atomic_store_n(&r->busy, 1, __ATOMIC_RELAXED);
	/* The revoker's membarrier orders the hardware: see above. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (unlikely(__atomic_load_n(&c->wr_revoke, __ATOMIC_ACQUIRE) ||
		     __atomic_load_n(&c->wr_owner, __ATOMIC_RELAXED) != o)) {
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
		futex(&r->busy, FUTEX_WAKE, INT_MAX, NULL);
		return false;
	}
	*rec = r;
	return true;
}

static void wr_fast_exit(struct sh_ctrl *c, struct sh_bias_rec *r)
{
	/* Release: the section before a revoker's. */
	__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (unlikely(__atomic_load_n(&c->wr_revoke, __ATOMIC_RELAXED)))
		futex(&r->busy, FUTEX_WAKE, INT_MAX, NULL);
}

/*
 * With wr_lock held, taken the ordinary way: no owner inside from here
 * on, none to come, unless the owner is this thread (which is not inside,
 * as it holds wr_lock).  0, or -EIO.
 */
static int wr_revoke_bias(struct sh_pipe *sp)
{
	const struct timespec bounded = { .tv_nsec = 100000 };
	struct sh_ctrl *c = ctrl(sp);
	uint64_t o = __atomic_load_n(&c->wr_owner, __ATOMIC_ACQUIRE);
	struct sh_bias_rec *r;
	long long t0, checked;
	uint32_t busy, after;

	if (!o || (bias_tok && (o & ~BIAS_IDX) == bias_tok))
		return 0;
	__atomic_store_n(&c->wr_revoke, 1, __ATOMIC_RELAXED);
	r = &c->wr_rec[o & BIAS_IDX];
	if (sh_barrier()) {
		/*
		 * No barrier here (asym_off, set by this process): an owner
		 * that entered just now may not show busy yet.  Its store
		 * reaches us in far less than a millisecond on every machine
		 * we know; this is a practical bound, not a proof, for a
		 * kind of process (membarrier refused) that sets asym_off
		 * when it attaches, so no bias is granted once it is there.
		 */
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, NULL);
	}
	t0 = checked = pp__mono_ns();
	while ((busy = __atomic_load_n(&r->busy, __ATOMIC_ACQUIRE)) != 0) {
		long long now;

		futex(&r->busy, FUTEX_WAIT, busy, &bounded);
		now = pp__mono_ns();
		if (now - checked < SH_SLEEP_NS)
			continue;
		checked = now;
		/*
		 * Dead, and busy still set after we learnt it: killed inside.
		 * (An owner that left its section and then exited, while we
		 * slept, cleared busy first.)
		 */
		if (pid_dead(__atomic_load_n(&r->pid, __ATOMIC_RELAXED)) &&
		    __atomic_load_n(&r->busy, __ATOMIC_ACQUIRE)) {
			/* As a lock taken over from the dead. */
			__atomic_store_n(&r->busy, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&c->sweep, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&c->wr_dead_owners,
					 __atomic_load_n(&c->wr_dead_owners, __ATOMIC_RELAXED) + 1,
					 __ATOMIC_RELAXED);
			break;
		}
		if (now - t0 > LOCK_STUCK_WAITS * SH_SLEEP_NS)
			return corrupt(sp);
	}
	__atomic_store_n(&c->wr_owner, 0, __ATOMIC_RELAXED);
	/* No fast writer now, so none that wakes plainly: readers sleep without a barrier. */
	__atomic_store_n(&c->plain_wake, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&c->wr_revokes, __atomic_load_n(&c->wr_revokes, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
	after = __atomic_load_n(&c->wr_bias_after, __ATOMIC_RELAXED);
	after = after < SH_BIAS_AFTER ? SH_BIAS_AFTER : after;
	__atomic_store_n(&c->wr_bias_after, min_t(uint32_t, 2 * min_t(uint32_t, after, SH_BIAS_AFTER_MAX),
						 SH_BIAS_AFTER_MAX), __ATOMIC_RELAXED);
	return 0;
}

/*
 * sh_writev, wr_lock taken the ordinary way: one more take in a row by
 * this thread, and the bias if they are enough.  A record: this thread's
 * own, a free one, or one whose thread is dead.
 */
static void wr_bias_count(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	uint64_t tok, o = __atomic_load_n(&c->wr_owner, __ATOMIC_RELAXED);
	uint32_t after, streak;
	int pick = -1;

	if (o || !asym_on(c))
		return;
	tok = bias_token();
	if (__atomic_load_n(&c->wr_last, __ATOMIC_RELAXED) != tok) {
		__atomic_store_n(&c->wr_last, tok, __ATOMIC_RELAXED);
		__atomic_store_n(&c->wr_streak, 0, __ATOMIC_RELAXED);
	}
	streak = __atomic_load_n(&c->wr_streak, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&c->wr_streak, streak, __ATOMIC_RELAXED);
	after = __atomic_load_n(&c->wr_bias_after, __ATOMIC_RELAXED);
	if (streak < (after < SH_BIAS_AFTER ? SH_BIAS_AFTER : after))
		return;
	for (unsigned int i = 0; i < SH_BIAS_RECS && pick < 0; i++)
		if (__atomic_load_n(&c->wr_rec[i].tok, __ATOMIC_RELAXED) == tok)
			pick = (int)i;
	for (unsigned int i = 0; i < SH_BIAS_RECS && pick < 0; i++) {
		struct sh_bias_rec *r = &c->wr_rec[i];

		if (!__atomic_load_n(&r->tok, __ATOMIC_RELAXED) ||
		    tid_dead(__atomic_load_n(&r->pid, __ATOMIC_RELAXED),
			     __atomic_load_n(&r->tid, __ATOMIC_RELAXED)))
			pick = (int)i;
	}
	if (pick < 0) {
		__atomic_store_n(&c->wr_streak, 0, __ATOMIC_RELAXED);	/* look again later */
		return;
	}
	__atomic_store_n(&c->wr_rec[pick].busy, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->wr_rec[pick].pid, my_pid(), __ATOMIC_RELAXED);
	__atomic_store_n(&c->wr_rec[pick].tid, bias_tid, __ATOMIC_RELAXED);
	__atomic_store_n(&c->wr_rec[pick].tok, tok, __ATOMIC_RELAXED);
	/* Release: the record before the owner that names it (pp__shared_unbias). */
	__atomic_store_n(&c->wr_owner, tok | (uint64_t)pick, __ATOMIC_RELEASE);
	/* Release: the owner, and this section, before its first fast one. */
	__atomic_store_n(&c->wr_revoke, 0, __ATOMIC_RELEASE);
}

/*
 * Pages a dead process held: the ones it had taken for a write and not yet
 * shown (sh_writev, a reservation), and the ones it had retired and not yet
 * given back (a reader between its store of tail and the return).  Nobody
 * else can name them, so they would be lost to the pipe for good: once a
 * lock is taken over from the dead, the next reader to take rd_lock takes
 * wr_lock too (rd_lock first, the order set_size() takes them in) and, with every
 * page user of the pipe held off, gives back each page that is neither in
 * a slot of the ring, nor the spare, nor free.
 */
static int check_bounds(struct sh_pipe *sp, uint32_t head, uint32_t tail);
static int side_lock(struct sh_pipe *sp, uint32_t *lock);

static int sweep(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	unsigned char in_use[SH_PAGES] = { 0 };
	uint32_t head, tail, spare, npages = sp->arena.lay.npages;
	/* wr_lock's way never sweeps: no recursion. */
	int err = side_lock(sp, &c->wr_lock);

	if (err)
		return err;
	head = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
	tail = __atomic_load_n(&c->tail, __ATOMIC_RELAXED);
	err = check_bounds(sp, head, tail);
	for (uint32_t i = tail; !err && i != head; i++) {
		uint32_t pg = where_page(slot_where(slot(sp, i)));

		if (pg >= npages || pg >= SH_PAGES || in_use[pg])
			err = corrupt(sp);
		else
			in_use[pg] = 1;
	}
	spare = __atomic_load_n(&c->spare, __ATOMIC_RELAXED);
	if (!err && spare) {
		if (spare - 1 >= npages || spare - 1 >= SH_PAGES || in_use[spare - 1])
			err = corrupt(sp);
		else
			in_use[spare - 1] = 1;
	}
	if (!err && npages <= SH_PAGES)
		err = pp__arena_reclaim(&sp->arena, in_use);
	if (!err)
		__atomic_store_n(&c->sweep, 0, __ATOMIC_RELAXED);
	side_unlock(&c->wr_lock);
	return err;
}

static int side_lock(struct sh_pipe *sp, uint32_t *lock)
{
	struct sh_ctrl *c = ctrl(sp);
	int err = lock_acquire(sp, lock);

	if (!err && lock == &c->wr_lock) {
		/* Every take of wr_lock but the fast way's: the owner must be out. */
		err = wr_revoke_bias(sp);
		if (err)
			side_unlock(lock);
		else
			sp->mc.valid = false;	/* no fast section runs now: see slot_extend */
		return err;
	}
	/* The flag is on rd_lock's line, which this CPU has just taken. */
	if (unlikely(!err && lock == &c->rd_lock && __atomic_load_n(&c->sweep, __ATOMIC_RELAXED))) {
		err = sweep(sp);
		if (err)
			side_unlock(lock);
	}
	return err;
}

/* ---------------------------------------------------------------------- */
/* Waiting.  Wake-ups as in wait.c: see the head comment. */

/*
 * Wake-ups: a read-modify-write of the sleeper count, ordered with every
 * sleeper's increment (the head comment), but for the one that matters at
 * 64 B: a small write by the fast way wakes readers with a plain load
 * (wake_readers_plain), since any locked instruction after its stores
 * waits for them to reach the reader's CPU.  A reader that finds
 * plain_wake set pays a membarrier before it sleeps instead.  The flag
 * keeps that barrier (16.6 us on this VM, an IPI to the writer's CPU) off
 * the reader's sleeps where no plain wake-up is made: bulk traffic paid
 * 20% of its throughput for it (docs/shared-pipes.md, 3d).
 */
static void wake_n(uint32_t *wq, uint32_t n)
{
	if (n) {
		__atomic_fetch_add(wq, 1, __ATOMIC_SEQ_CST);
		futex(wq, FUTEX_WAKE, INT_MAX, NULL);
	}
}

static void wake(uint32_t *wq, uint32_t *sleepers)
{
	wake_n(wq, __atomic_fetch_add(sleepers, 0, __ATOMIC_SEQ_CST));
}

/*
 *   writer (once):  exchange plain_wake = 1; rd_sleepers + 0 (seq_cst both)
 *   writer (after): store head or end; load rd_sleepers (plain)
 *   reader:         rd_sleepers + 1 (seq_cst); load plain_wake (seq_cst):
 *                   1: membarrier; then look at the ring
 *
 * A reader that reads plain_wake 0 comes before the writer's exchange in
 * the seq_cst order, so its increment comes before the writer's
 * read-modify-write of the count, which sees it and wakes it; every later
 * wake-up of that writer is by a plain load, and a reader that sleeps
 * after the exchange reads 1 and runs the membarrier: wait.c's argument.
 * The flag is cleared by a revoke, once the owner is out (wr_revoke_bias):
 * a reader that reads that 0 has the owner's section before it (the
 * owner's release of busy, the revoker's acquire), so it sees the stores
 * an owner's plain wake-up after its section would have been about.
 */
static void wake_readers_plain(struct sh_ctrl *c)
{
	if (unlikely(!__atomic_load_n(&c->plain_wake, __ATOMIC_RELAXED))) {
		/* The first since the flag was clear: both seq_cst, so it sees any sleeper. */
		__atomic_exchange_n(&c->plain_wake, 1, __ATOMIC_SEQ_CST);
		wake(&c->rd_wait, &c->rd_sleepers);
		return;
	}
	/* A plain load after the caller's stores, in the compiler's order too. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	wake_n(&c->rd_wait, __atomic_load_n(&c->rd_sleepers, __ATOMIC_RELAXED));
}

static void wake_all(struct sh_ctrl *c)
{
	__atomic_fetch_add(&c->rd_wait, 1, __ATOMIC_SEQ_CST);
	futex(&c->rd_wait, FUTEX_WAKE, INT_MAX, NULL);
	__atomic_fetch_add(&c->wr_wait, 1, __ATOMIC_SEQ_CST);
	futex(&c->wr_wait, FUTEX_WAKE, INT_MAX, NULL);
}

/*
 * Slots holding bytes in [tail, head): an emptied slot at tail (drained
 * == end, the ring comment below) holds none and takes no room, as Linux
 * frees an emptied buffer.  Only the one at tail can be: a read retires an
 * emptied slot unless it is the last.  Its end word is the line the next
 * write stores to, so a waiter that reads it spins on the line it needs
 * next.  A glance with no lock may be stale; the change that makes it
 * stale wakes the waiter.
 */
static uint32_t ring_used(const struct sh_pipe *sp, uint32_t head, uint32_t tail)
{
	const struct sh_slot *s = slot(sp, tail);

	return head - tail - (head != tail &&
			      __atomic_load_n(&s->end, __ATOMIC_ACQUIRE) ==
				      __atomic_load_n(&s->drained, __ATOMIC_ACQUIRE));
}

/* Glances, with no lock: what a reader and a writer wait for. */
static bool has_data(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	uint32_t tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);

	return ring_used(sp, __atomic_load_n(&c->head, __ATOMIC_ACQUIRE), tail) != 0;
}

static bool has_room(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	uint32_t tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
	uint32_t head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
	uint32_t max = __atomic_load_n(&c->max_usage, __ATOMIC_RELAXED);

	/* The slot at tail only when head and tail alone show none: the reader's line. */
	return head - tail < max || ring_used(sp, head, tail) < max;
}

/*
 * Is the other side gone everywhere?  The token says (see above): POLLHUP
 * on our read token, POLLERR on our write token.
 */
static bool peer_side_gone(const struct sh_end *e)
{
	struct pollfd pfd = { e->token, e->side ? POLLOUT : POLLIN, 0 };

	if (e->token < 0 || poll(&pfd, 1, 0) != 1)
		return false;
	return pfd.revents & (e->side ? POLLERR : POLLHUP);
}

/* The hint first, the token when the hint says nobody is left. */
static bool peer_side_open(const struct sh_end *e)
{
	struct sh_ctrl *c = ctrl(e->sp);

	return __atomic_load_n(count_of(c, !e->side), __ATOMIC_ACQUIRE) || !peer_side_gone(e);
}

/*
 * Before a non-blocking call says EAGAIN: a kernel pipe would say EOF or
 * EPIPE if the other side were gone, and a side that died (SIGKILL) left
 * its count in the hint, so the token decides.  A side found gone has its
 * hint set to 0 for everyone: no process holds it, so no fork() can add
 * to it again.
 */
static bool peer_gone_now(const struct sh_end *e)
{
	if (!peer_side_gone(e))
		return false;
	__atomic_store_n(count_of(ctrl(e->sp), !e->side), 0, __ATOMIC_RELAXED);
	return true;
}

/*
 * Wait, with no lock held, until ready(e->sp) (true) or the other side is gone
 * everywhere (false).  Spins a little first when another CPU may be
 * running the peer; the spin ends early when the hint says the other side
 * closed, and the tokens decide.  A close wakes every sleeper after its
 * token is closed, so a sleeper woken by the last one sees it gone; a
 * death wakes nobody and is seen at the next timeout.  A side found gone
 * has its hint cleared (peer_gone_now), so peer_side_open() agrees.
 */
static bool wait_for(struct sh_end *e, bool (*ready)(struct sh_pipe *), uint32_t *wq,
		     uint32_t *sleepers, const void *hint0, const void *hint1)
{
	struct sh_ctrl *c = ctrl(e->sp);
	const struct timespec ts = { 0, SH_SLEEP_NS };
	long long deadline = pp__mono_ns() + SH_SPIN_NS;
	static int ncpu;
	int peer;

	if (!__atomic_load_n(&ncpu, __ATOMIC_RELAXED))
		__atomic_store_n(&ncpu, (int)sysconf(_SC_NPROCESSORS_ONLN), __ATOMIC_RELAXED);
	note_cpu(c, e->side);
	peer = __atomic_load_n(&c->cpu[!e->side], __ATOMIC_RELAXED);
	if (__atomic_load_n(&ncpu, __ATOMIC_RELAXED) > 1 && peer != sched_getcpu()) {
		do {
			for (int i = 0; i < 64; i++) {
				/* Lines the peer writes next: their misses under way before ready. */
				if (hint0)
					__builtin_prefetch(hint0, 0, 3);
				if (hint1)
					__builtin_prefetch(hint1, 0, 3);
				if (ready(e->sp))
					return true;
				if (!__atomic_load_n(count_of(c, !e->side), __ATOMIC_RELAXED))
					goto sleep;
				pp__cpu_relax();
			}
		} while (pp__mono_ns() < deadline);
	} else {
		/* The peer needs this CPU to make progress: give it, a while. */
		do {
			sched_yield();
			if (ready(e->sp))
				return true;
			if (!__atomic_load_n(count_of(c, !e->side), __ATOMIC_RELAXED))
				goto sleep;
		} while (pp__mono_ns() < deadline + SH_YIELD_NS);
	}
sleep:
	for (;;) {
		uint32_t seq;

		if (ready(e->sp))
			return true;
		/*
		 * Gone for everyone, the hint included: a caller that asks
		 * peer_side_open() next must not find a dead side's count
		 * there and wait again, at once, forever.
		 */
		if (peer_gone_now(e))
			return false;
		__atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
		/*
		 * A writer that wakes readers with a plain load (see
		 * wake_readers_plain) has set plain_wake first: then the
		 * barrier on its CPU either came after its store of the ring,
		 * which the look below sees, or before its load, which sees
		 * our increment (wait.c's argument, across processes).
		 */
		if (sleepers == &c->rd_sleepers && __atomic_load_n(&c->plain_wake, __ATOMIC_SEQ_CST))
			(void)sh_barrier();
		seq = __atomic_load_n(wq, __ATOMIC_SEQ_CST);
		if (!ready(e->sp))
			futex(wq, FUTEX_WAIT, seq, &ts);
		__atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
	}
}

/* ---------------------------------------------------------------------- */
/*
 * The ring.  Slots in [tail, head) hold data; head moves only under
 * wr_lock, tail only under rd_lock, so each side reads its own index
 * plainly and the other's with acquire, and publishes its own with
 * release:
 *
 *   writer: fill slot[head] (every field) and its page
 *           store head + 1 (release)      -- reader: load head (acquire)
 *   reader: copy out, move offset
 *           store tail + 1 (release)      -- writer: load tail (acquire)
 *           and only then give the page back
 *
 * Positions in a slot are byte counts, free running (mod 2^32): end, the
 * writers', where its bytes end; offset, the reader's, where it is;
 * drained, the reader's, where a read last emptied it; base, the
 * writers', the count at the start of its page, kept with the page's
 * index in one word.  The bytes are [offset, end), at [offset - base,
 * end - base) of the page; every difference is checked against the page
 * before it addresses memory (slot_bounds).
 *
 * Merges.  A writer appends to the last slot, slot[head - 1], while a
 * reader reads it, with plain stores, and loads nothing a reader stores:
 *
 *   writer (append): end - base + n within the page: copy after end - base
 *                    store end + n            (release: the bytes before it)
 *   reader:          load end (acquire), then where: len = end - offset
 *
 * No locked instruction on the writer's way, and no load of a line the
 * reader writes: between two CPUs either costs the writer a wait for the
 * other CPU at every small message (docs/shared-pipes.md, 3e and 3g).  So
 * the writer does not ask whether the reader has emptied the slot.  Linux
 * frees an emptied buffer and starts the next write in a fresh page; we
 * append where the last write ended.  The bytes are the same and in the
 * same order; only where they sit in the page differs, and that matters
 * only when a write no longer fits the page but would fit Linux's fresh
 * one.  Then, and only then, the writer asks (slot_refit):
 *
 *   reader (drain):  store offset = end; store drained = end (release: the
 *                    copy out of the page is done)
 *   writer (refit):  load drained (acquire).  Linux's page starts at
 *                    drained, if a read emptied the slot since base, else
 *                    at base, so the write fits Linux's page if end - start
 *                    + n does.  If it does:
 *     - drained == end, the slot is empty (reopen): copy to the page's start;
 *       store where (base = end); store end + n (release);
 *     - bytes after drained (move): with rd_lock taken by a few tries (never
 *       a wait: a resize takes rd_lock, then wr_lock), so that no reader is
 *       in the slot, copy them and the write into a fresh page where
 *       Linux's page has them, from drained; store where (the new page,
 *       base = drained) in one piece; store end + n (release); the old
 *       page goes back.  Tries that fail are a read or a loan holding
 *       rd_lock, overlapping the write: a new slot, as when the write does
 *       not fit.  A packet write, or one of more than a page, never
 *       reopens (slot_extend: ask).
 *
 * So each write merges, or takes a new slot, where Linux's would (but
 * for a write that overlaps a read or a loan, as above), and an
 * emptied slot at tail (drained == end) takes no room (ring_used), as a
 * freed buffer; 64-byte messages move neither head nor tail, nor a page
 * through the spare, until a page's worth has gone by.  base changes
 * only while the slot is empty (a reopen: no reader reads an empty slot,
 * and one that loads end before the reopen finds it empty) or with
 * rd_lock held (a move); a reader loads end with acquire before where, so
 * it sees the base that end was stored with.  The ring has slots beyond
 * SH_SLOTS (SH_RING), so an emptied slot fits beside a full pipe of
 * pipe-max-size.
 *
 * A drain may land between an appending writer's copy and its store of
 * end: the reader drained at the end it saw, and the new bytes follow,
 * read next; to a later refit they sit in Linux's fresh page, as if the
 * read had come first.  Calls that overlap may see pages fill as Linux's
 * would for one of their orders; the bytes are always a kernel pipe's.
 * Deaths: a writer killed in an append or a reopen leaves end as it was
 * (nothing shown; a reopen's new base with the old end is still an empty
 * slot); one killed in a move leaves the old page or the new one in the
 * slot, whole, and the other to the sweep.  A reader killed between its
 * stores of offset and drained leaves an emptied slot that still counts;
 * the next reader drains it.
 */

static int end_flags(const struct sh_end *e)
{
	return (int)__atomic_load_n(&ctrl(e->sp)->end_flags[e->side], __ATOMIC_RELAXED);
}

static struct sh_end *end_of(const struct pp_file *f)
{
	return f->private;
}

static int corrupt(struct sh_pipe *sp)
{
	return pp__arena_poison(&sp->arena);
}

/* [tail, head) no wider than a full pipe and the drained slot, max_usage within SH_SLOTS. */
static int check_bounds(struct sh_pipe *sp, uint32_t head, uint32_t tail)
{
	uint32_t max = __atomic_load_n(&ctrl(sp)->max_usage, __ATOMIC_RELAXED);

	if (head - tail > SH_SLOTS + 1 || !max || max > SH_SLOTS)
		return corrupt(sp);
	return 0;
}

/*
 * A slot's bytes [off, end) within its page from base: 0, or the pipe is
 * corrupt.  Differences of counts, so they hold across the wrap.
 */
static int slot_bounds(struct sh_pipe *sp, uint32_t base, uint32_t off, uint32_t end)
{
	if (end - base > pp__page_size || off - base > end - base)
		return corrupt(sp);
	return 0;
}

/*
 * Pages.  As Linux's pipe->tmp_page: the page a read empties is kept for
 * the next write, so message traffic does not go through the arena's free
 * list.  spare is an exchange away from either side.
 */
/*
 * A free slot and no free page.  Every slot has a page of its own and a
 * few more (SH_PAGES), so a reader is between its store of tail and the
 * return of the pages it retired (slot_retire, pp__shared_consume): they
 * are a moment away.  Wait for them with no lock held, a yield at first,
 * then a millisecond at a time, a second at most: a reader that died
 * there took them with it (or a peer scribbled them away), and the write
 * fails with ENOMEM, as Linux's pipe_write when it finds no page.  A
 * non-blocking write yields only, and then says EAGAIN: the pages are
 * most likely a reader's moment away (one preempted there), and a second
 * is no answer to a caller that asked not to wait.  0: look again.
 */
static int pages_wait(unsigned int *tries, bool nonblock)
{
	const struct timespec ms = { 0, 1000000 };

	if (nonblock && *tries >= 64)
		return -EAGAIN;
	if (++*tries > 1064)
		return -ENOMEM;
	if (*tries <= 64)
		sched_yield();
	else
		nanosleep(&ms, NULL);
	return 0;
}

/* The spare alone: 1 taken, 0 none, -EIO. */
static int page_take_spare(struct sh_pipe *sp, uint32_t *idx)
{
	uint32_t spare = __atomic_exchange_n(&ctrl(sp)->spare, 0, __ATOMIC_ACQUIRE);

	if (!spare)
		return 0;
	if (spare - 1 >= sp->arena.lay.npages)
		return corrupt(sp);
	*idx = spare - 1;
	return 1;
}

static int page_take(struct sh_pipe *sp, uint32_t *idx)
{
	int r = page_take_spare(sp, idx);

	if (r)
		return r < 0 ? r : 0;
	return pp__arena_page_alloc(&sp->arena, idx);
}

/*
 * Give back n pages a read emptied: the last becomes the spare, the rest
 * (and the spare it replaces) go to the arena in one push.  idx[] is ours
 * to rewrite.
 */
static int pages_give(struct sh_pipe *sp, uint32_t *idx, unsigned int n)
{
	uint32_t old;

	if (!n)
		return 0;
	for (unsigned int i = 0; i < n; i++)
		if (idx[i] >= sp->arena.lay.npages)
			return corrupt(sp);
	/* Release: our copy out of the pages is done before a writer refills them. */
	old = __atomic_exchange_n(&ctrl(sp)->spare, idx[n - 1] + 1, __ATOMIC_ACQ_REL);
	if (!old)
		return n > 1 ? pp__arena_page_put_many(&sp->arena, idx, n - 1) : 0;
	if (old - 1 >= sp->arena.lay.npages)
		return corrupt(sp);
	idx[n - 1] = old - 1;
	return pp__arena_page_put_many(&sp->arena, idx, n);
}

static int page_give(struct sh_pipe *sp, uint32_t idx)
{
	return pages_give(sp, &idx, 1);
}

/*
 * The merge cache (struct sh_merge_cache).  Between two CPUs the writer's
 * load of the last slot's end and flags missed at every 64 B message
 * once the reader kept up: the reader loads that line to see each message
 * (docs/shared-pipes.md, 3f).  Only writers store a slot's end and where,
 * so the owner of the bias knows what it stored, as long as no other
 * writer has written since; and an append asks nothing of the reader (the
 * ring comment).  Another writer (of this process or another) must revoke
 * the bias to write, and the owner comes back to the fast way only
 * through a take of the lock the ordinary way, and every such take drops
 * the cache of the taker's mapping (side_lock: the same for a
 * reservation, a resize, a sweep, which then cannot change a slot behind
 * a cache).  But one thread may write through two mappings of the arena
 * (an end imported where it was made), each with its cache, under one
 * bias: so every store of a slot's end says which mapping made it
 * (ctrl->wr_mapping, on the writers' line, stored only when it changes),
 * and a cache counts only while its mapping made the last one.
 */
/* This mapping, this process: a fork()ed child's copy of it is another. */
static uint64_t map_id(const struct sh_pipe *sp)
{
	return (uint64_t)my_pid() << 32 | sp->serial;
}

static bool mc_holds(struct sh_pipe *sp, uint32_t idx)
{
	const struct sh_merge_cache *mc = &sp->mc;

	return mc->valid && mc->idx == idx &&
	       __atomic_load_n(&ctrl(sp)->wr_mapping, __ATOMIC_RELAXED) == map_id(sp);
}

/* With wr_lock held, by every store of a slot's end: this mapping made it. */
static void mc_mine(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	uint64_t me = map_id(sp);

	if (__atomic_load_n(&c->wr_mapping, __ATOMIC_RELAXED) != me)
		__atomic_store_n(&c->wr_mapping, me, __ATOMIC_RELAXED);
}

/* A fast section's last slot, as it stored it. */
static void mc_fill(struct sh_pipe *sp, uint32_t idx, uint32_t end, uint32_t base, char *page)
{
	sp->mc = (struct sh_merge_cache){
		.valid = true, .idx = idx, .end = end, .base = base, .page = page,
	};
}

/*
 * The ends of an append, a reopen and a move: the new bytes are in the
 * page, [.., end) of the slot.  Release: the bytes (and a new where)
 * before the end that shows them.
 */
static ssize_t slot_show(struct sh_pipe *sp, struct sh_slot *s, uint32_t idx, uint32_t end,
			 uint32_t base, char *page, size_t n, bool fast, bool cached)
{
	__atomic_store_n(&s->end, end, __ATOMIC_RELEASE);
	if (cached)
		sp->mc.end = end;	/* a cache that holds says this mapping stored last already */
	else {
		mc_mine(sp);
		if (fast)
			mc_fill(sp, idx, end, base, page);
	}
	return (ssize_t)n;
}

/*
 * Reopen the empty slot idx (drained == end, loaded with acquire: the
 * reader's copy out of its page is done) from the start of its page, pg,
 * for n bytes.  A fault part way leaves bytes in a page nobody reads: the
 * slot is still empty.
 */
static ssize_t slot_reopen_at(struct sh_pipe *sp, struct sh_slot *s, uint32_t idx,
			      struct pp_iov_iter *it, size_t n, uint32_t end, uint32_t pg, bool fast)
{
	char *page = pp__arena_page(&sp->arena, pg);

	if (!page)
		return -EIO;
	if (pp__iter_copy_from(it, page, n) < n)
		return -EFAULT;
	slot_set_where(s, pg, end);
	return slot_show(sp, s, idx, end + (uint32_t)n, end, page, n, fast, false);
}

/*
 * Move the bytes of slot idx, [offset, end) of page pg from base, with
 * chars more of the write, to a fresh page from start, as Linux's page
 * holds them (the ring comment).  With rd_lock held by the caller's try:
 * no reader is in the slot.  chars, 0 if no page is free (a new slot will
 * wait for one), or -errno.
 */
static ssize_t slot_move(struct sh_pipe *sp, struct sh_slot *s, uint32_t idx,
			 struct pp_iov_iter *it, size_t chars, uint32_t end, uint32_t base,
			 uint32_t start, uint32_t pg, char *page, bool fast)
{
	uint32_t off = __atomic_load_n(&s->offset, __ATOMIC_RELAXED), npg;
	char *to;
	int err;

	/* A reader is past the drain it stored (start), in the page. */
	if (off - base > end - base || off - start > end - start)
		return corrupt(sp);
	err = page_take(sp, &npg);
	if (err)
		return err == -ENOMEM ? 0 : err;
	to = pp__arena_page(&sp->arena, npg);
	if (!to) {
		page_give(sp, npg);
		return -EIO;
	}
	memcpy(to + (off - start), page + (off - base), end - off);
	if (pp__iter_copy_from(it, to + (end - start), chars) < chars) {
		page_give(sp, npg);
		return -EFAULT;		/* as pipe_write: all or nothing; the slot as it was */
	}
	slot_set_where(s, npg, start);
	slot_show(sp, s, idx, end + (uint32_t)chars, start, to, chars, fast, false);
	/*
	 * The old page: no reader can be in it (rd_lock), and where no longer
	 * names it.  A bad index poisons the pipe; the write is done anyway.
	 */
	page_give(sp, pg);
	return (ssize_t)chars;
}

static void view_settle(struct sh_pipe *sp);

/*
 * rd_lock by a try, for a move: a few, with a yield between, since a
 * reader holds it only while it copies (or counts, FIONREAD).  Never a
 * wait: we hold wr_lock, and a resize or a sweep takes rd_lock, then
 * wr_lock.  None while a read loan of this process holds it, which may be
 * for long, and may be this thread's.
 */
static bool rd_lock_try(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	uint32_t me = my_pid();

	for (int i = 0; i < 16; i++) {
		uint32_t free_lock = 0;

		if (__atomic_compare_exchange_n(&c->rd_lock, &free_lock, me, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return true;
		if (__atomic_load_n(&sp->loan_active, __ATOMIC_ACQUIRE))
			return false;
		sched_yield();
	}
	return false;
}

/*
 * An append of chars bytes that does not fit the last slot's page (the
 * ring comment): would it fit Linux's, which starts where a read last
 * emptied the slot?  ask: not into an emptied slot (slot_extend).  chars,
 * 0 for a new slot, or -errno.
 */
static ssize_t slot_refit(struct sh_pipe *sp, struct sh_slot *s, uint32_t idx,
			  struct pp_iov_iter *it, size_t chars, uint32_t end, uint32_t base,
			  uint32_t pg, char *page, bool ask, bool fast)
{
	struct sh_ctrl *c = ctrl(sp);
	uint32_t d, start;
	ssize_t r;

	/* Acquire: a reader that emptied the slot is done with its page (a reopen writes it). */
	d = __atomic_load_n(&s->drained, __ATOMIC_ACQUIRE);
	start = d - base <= end - base ? d : base;
	if (end - start + chars > pp__page_size || (ask && d == end))
		return 0;
	if (d == end)
		return slot_reopen_at(sp, s, idx, it, chars, end, pg, fast);
	/*
	 * Bytes to move: with no reader in the slot, which rd_lock makes sure
	 * of.  A try that fails is a read (or a loan) overlapping this write.
	 * The write's own bytes are copied under rd_lock (slot_move,
	 * slot_reopen_at), so their faults are taken first: a reader that
	 * waits LOCK_STUCK_WAITS for a copy stopped in a fault (userfaultfd,
	 * a hung file mapping) would take the hold for a scribble and poison
	 * the pipe (test/shared-fault-hold).
	 */
	pp__iter_prefault(it, chars);
	if (!rd_lock_try(sp))
		return 0;
	if (__atomic_load_n(&c->sweep, __ATOMIC_RELAXED)) {
		r = 0;		/* taken over from the dead: the next reader sweeps first */
	} else {
		view_settle(sp);
		d = __atomic_load_n(&s->drained, __ATOMIC_RELAXED);
		start = d - base <= end - base ? d : base;
		if (end - start + chars > pp__page_size || (ask && d == end))
			r = 0;
		else if (d == end)
			r = slot_reopen_at(sp, s, idx, it, chars, end, pg, fast);
		else
			r = slot_move(sp, s, idx, it, chars, end, base, start, pg, page, fast);
	}
	side_unlock(&c->rd_lock);
	return r;
}

/*
 * Append chars bytes to slot idx, the last, if the merge rule allows it
 * (the ring comment).  Returns chars, 0 if it may not, or -errno.  With
 * wr_lock held; fast: by a fast section, which keeps the merge cache.
 * Into an emptied slot, an append is Linux's fresh page only for a write
 * that fits in it whole and is no packet.  So ask: the reader's drained
 * comes first for a packet write (O_DIRECT; Linux's fresh page holds a
 * packet) and for one of more than a page (Linux's first page takes a
 * page of it, not the part under a page, chars, that merges into a
 * buffer with bytes).
 */
static ssize_t slot_extend(struct sh_pipe *sp, uint32_t idx, struct pp_iov_iter *it, size_t chars,
			   bool ask, bool fast)
{
	struct sh_slot *s = slot(sp, idx);
	bool cached = fast && mc_holds(sp, idx);
	uint32_t end, base, pg;
	uint64_t w;
	char *page;

	if (ask && __atomic_load_n(&s->drained, __ATOMIC_RELAXED) ==
			   __atomic_load_n(&s->end, __ATOMIC_RELAXED))
		return 0;
	if (cached) {
		end = sp->mc.end;
		base = sp->mc.base;
		page = sp->mc.page;
		if (end - base + chars <= pp__page_size)
			goto append;
	} else {
		if (!(__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & PP_BUF_FLAG_CAN_MERGE))
			return 0;
	}
	/* Ours: writers alone store them, and we hold wr_lock. */
	end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
	w = slot_where(s);
	base = where_base(w);
	pg = where_page(w);
	if (end - base > pp__page_size)
		return corrupt(sp);
	page = pp__arena_page(&sp->arena, pg);
	if (!page)
		return -EIO;
	if (end - base + chars > pp__page_size)
		return slot_refit(sp, s, idx, it, chars, end, base, pg, page, ask, fast);
	cached = false;
append:
	if (pp__iter_copy_from(it, page + (end - base), chars) < chars)
		return -EFAULT;		/* as pipe_write: all or nothing; end unmoved */
	return slot_show(sp, s, idx, end + (uint32_t)chars, base, page, chars, fast, cached);
}

/*
 * Reopen the slot at tail, the last and empty (the ring comment), for the
 * first n bytes of a write, n at most a page, as Linux starts an empty
 * pipe's write in a fresh page: n, 0 if there is none to reopen, or
 * -errno.  With wr_lock held, [tail, head) as counted for room.
 */
static ssize_t slot_reopen(struct sh_pipe *sp, uint32_t head, uint32_t tail,
			   struct pp_iov_iter *it, size_t n, bool fast)
{
	struct sh_slot *s = slot(sp, tail);
	uint32_t end;

	if (head != tail + 1)
		return 0;
	end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
	/* Acquire: the reader's copy out of the page is done (its release store of drained). */
	if (__atomic_load_n(&s->drained, __ATOMIC_ACQUIRE) != end)
		return 0;
	return slot_reopen_at(sp, s, tail, it, n, end, where_page(slot_where(s)), fast);
}

/*
 * A write publishes its pages this many at a time, and all of them before
 * it waits or lets go of wr_lock: each store of head is a line the
 * reader, spinning on it, takes back (docs/design.md: batches).  Slots
 * filled past head belong to nobody until published: a writer that dies
 * with some leaves their pages to the sweep, as any page in no slot.
 */
#define SH_PUBLISH_PAGES	4

/* Release: every slot below head, and its page's bytes, before the head that shows them. */
static uint32_t publish_head(struct sh_ctrl *c, uint32_t head)
{
	__atomic_store_n(&c->head, head, __ATOMIC_RELEASE);
	return head;
}

/*
 * wr_lock, let go: the fast way's or the ordinary.  A wait after it
 * takes wr_lock the ordinary way again.
 */
static void wr_unlock(struct sh_ctrl *c, struct sh_bias_rec **fast)
{
	if (*fast) {
		wr_fast_exit(c, *fast);
		*fast = NULL;
		return;
	}
	side_unlock(&c->wr_lock);
}

/* A fast section holds no reference on its file: one is taken before a wait. */
static void hold_file(struct pp_file *f, bool *ref)
{
	if (!*ref) {
		pp__file_get(f);
		*ref = true;
	}
}

/*
 * pipe_write(): the sub-page head of the write merges into the last
 * buffer when it may take all of it, then whole pages, a slot each.
 * *ref: a reference on f was taken (the ordinary way, or before a wait).
 */
static ssize_t sh_write(struct pp_file *f, const struct iovec *iov, int iovcnt, bool *ref)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	struct pp_iov_iter it = { iov, iovcnt, 0 };
	ssize_t total = pp__iov_total(iov, iovcnt), ret = 0;
	size_t left, chars;
	uint32_t head, head_pub, tail, flags, max;
	unsigned int tries = 0;
	struct sh_bias_rec *fast = NULL;
	bool gone = false, plain;
	int err;

	if (total <= 0)
		return total;
	flags = (end_flags(e) & O_DIRECT) ? PP_BUF_FLAG_PACKET : PP_BUF_FLAG_CAN_MERGE;
	left = (size_t)total;
	chars = left & (pp__page_size - 1);

	note_cpu(c, e->side);
	if (!wr_fast_enter(sp, &fast)) {
		hold_file(f, ref);
		err = side_lock(sp, &c->wr_lock);
		if (err)
			return err;
		wr_bias_count(sp);
	}
	head = head_pub = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
	tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
	err = check_bounds(sp, head, tail);
	if (err) {
		wr_unlock(c, &fast);
		return err;
	}
	if (!peer_side_open(e)) {
		wr_unlock(c, &fast);
		return pp__pipe_epipe(f);
	}
	if (chars && head != tail) {
		ret = slot_extend(sp, head - 1, &it, chars,
				  flags == PP_BUF_FLAG_PACKET || chars != left, fast);
		if (ret < 0) {
			wr_unlock(c, &fast);
			return ret;
		}
		left -= (size_t)ret;
	}
	while (left) {
		struct sh_slot *s;
		uint32_t idx;
		size_t n;
		char *page;

		if (gone || !peer_side_open(e)) {
			int epipe = pp__pipe_epipe(f);	/* SIGPIPE after a part too, as Linux */

			if (!ret)
				ret = epipe;
			break;
		}
		tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
		err = check_bounds(sp, head, tail);
		if (err) {
			if (!ret)
				ret = err;
			break;
		}
		max = __atomic_load_n(&c->max_usage, __ATOMIC_RELAXED);
		if (head - tail >= max && ring_used(sp, head, tail) >= max) {
			if (end_flags(e) & O_NONBLOCK) {
				if (!ret)
					ret = peer_gone_now(e) ? pp__pipe_epipe(f) : -EAGAIN;
				break;
			}
			if (head != head_pub)
				head_pub = publish_head(c, head);
			hold_file(f, ref);
			wr_unlock(c, &fast);
			if (ret)
				wake(&c->rd_wait, &c->rd_sleepers);
			gone = !wait_for(e, has_room, &c->wr_wait, &c->wr_sleepers, NULL, NULL);
			err = side_lock(sp, &c->wr_lock);
			if (err)
				return ret ? ret : err;
			/* Other writers may have moved it meanwhile. */
			head = head_pub = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
			continue;
		}
		n = min_t(size_t, left, pp__page_size);
		if (!ret && flags == PP_BUF_FLAG_CAN_MERGE) {
			ssize_t r = slot_reopen(sp, head, tail, &it, n, fast);

			if (r) {
				ret = r;
				if (r < 0)
					break;
				left -= n;
				continue;
			}
		}
		err = page_take(sp, &idx);
		if (err == -ENOMEM) {
			if (head != head_pub)
				head_pub = publish_head(c, head);
			hold_file(f, ref);
			wr_unlock(c, &fast);
			if (ret)
				wake(&c->rd_wait, &c->rd_sleepers);
			err = pages_wait(&tries, end_flags(e) & O_NONBLOCK);
			if (!err)
				err = side_lock(sp, &c->wr_lock);
			if (err)
				return ret ? ret : err;
			head = head_pub = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
			continue;
		}
		if (err) {
			if (!ret)
				ret = err;
			break;
		}
		page = pp__arena_page(&sp->arena, idx);
		if (!page || pp__iter_copy_from(&it, page, n) < n) {
			if (page)
				page_give(sp, idx);
			if (!ret)
				ret = page ? -EFAULT : -EIO;
			break;
		}
		if (fast && flags == PP_BUF_FLAG_CAN_MERGE)
			mc_fill(sp, head, (uint32_t)n, 0, page);
		s = slot(sp, head++);
		slot_fill(s, idx, flags, (uint32_t)n);
		mc_mine(sp);
		ret += (ssize_t)n;
		left -= n;
		if (head - head_pub >= SH_PUBLISH_PAGES)
			head_pub = publish_head(c, head);
	}
	if (fast)
		PP__SH_FAST_STEP(f);
	if (head != head_pub)
		publish_head(c, head);
	/* Not ready: full with a reader left (EPIPE is ready, as POLLERR). */
	if (ev_on(sp, 1) && (ret == -EAGAIN || (ret > 0 && !has_room(sp))))
		event_clear(sp, 1);
	/* A small write that came the fast way: no locked instruction (wake_readers_plain). */
	plain = fast && (size_t)total < pp__page_size && asym_on(c);
	wr_unlock(c, &fast);
	if (ret > 0 && plain)
		wake_readers_plain(c);
	else if (ret > 0)
		wake(&c->rd_wait, &c->rd_sleepers);
	return ret;
}

/*
 * pp_write's way in, with no reference taken for it (do_writev): the
 * fast way needs none (see the biased write lock); sh_write takes one
 * otherwise, and before a wait.
 */
static ssize_t sh_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	bool ref = false;
	ssize_t r = sh_write(f, iov, iovcnt, &ref);

	if (ref)
		pp__file_put(f);
	return r;
}

/*
 * The slots a read emptied, given back together (docs/design.md:
 * batches): one store of tail, then their pages in one push, after tail,
 * so a writer that finds a free slot before its page waits a moment
 * (pages_wait) instead of taking a page still being read.  A reader that
 * dies before the store leaves them in the ring, emptied, for the next
 * reader to retire; one that dies between the two leaves their pages to
 * the sweep.
 */
struct sh_retired {
	uint32_t tail;			/* where the ring's tail is to go */
	unsigned int nr;
	/*
	 * The last page becomes the spare (pages_give): for reads, whose
	 * next write takes one page.  A lend's pages all go to the arena, as
	 * the reservation that refills them pops many at once: routing one
	 * through the spare halved zero-copy throughput between two CPUs
	 * (bench/pipe-procs -t zc, 43-46 against 20 GB/s).
	 */
	bool spare;
	uint32_t page[SH_SLOTS + 1];	/* a full pipe's slots and the drained one */
};

/* Not a designated initializer: that would zero page[] (1 KiB) at every call. */
static void retired_init(struct sh_retired *r, uint32_t tail, bool spare)
{
	r->tail = tail;
	r->nr = 0;
	r->spare = spare;
}

/*
 * The slot at r->tail holds nothing more for us (offset == end, or
 * drained): it goes with the batch, unless it is the last and may be
 * merged into, which the ring comment keeps in the ring (drained,
 * slot_drain).  1 taken, 0 not.  With rd_lock held.
 */
static int retire_later(struct sh_retired *r, struct sh_slot *s, uint32_t head)
{
	if (r->tail + 1 == head &&
	    (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & PP_BUF_FLAG_CAN_MERGE))
		return 0;
	r->page[r->nr++] = where_page(slot_where(s));
	r->tail++;
	return 1;
}

/* With rd_lock held: true if slots were given back; *err = -EIO if a page was bad. */
static bool retire_now(struct sh_pipe *sp, struct sh_retired *r, int *err)
{
	if (!r->nr)
		return false;
	/* Hands the slots back: pairs with the writer's acquire load of tail. */
	__atomic_store_n(&ctrl(sp)->tail, r->tail, __ATOMIC_RELEASE);
	if ((r->spare ? pages_give(sp, r->page, r->nr) :
			pp__arena_page_put_many(&sp->arena, r->page, r->nr)) && !*err)
		*err = -EIO;
	r->nr = 0;
	return true;
}

/* One slot at once: 1 retired, 0 not (retire_later), or -errno. */
static int slot_retire(struct sh_pipe *sp, struct sh_slot *s, uint32_t tail, uint32_t head)
{
	struct sh_retired r;
	int err = 0;

	retired_init(&r, tail, true);
	if (!retire_later(&r, s, head))
		return 0;
	retire_now(sp, &r, &err);
	return err ? err : 1;
}

/*
 * The reader's view.  A read that leaves bytes in the slot at tail keeps
 * how far it read in ctrl->rd_view, on rd_lock's line, which no other
 * side touches, instead of in the slot's offset: the slot's line is the
 * one the writer merges into, and a store to it at every 64-byte message
 * took the line from the writer each time (pipe.c's quick read, the same
 * reason).  One word, VIEW_ON | slot index << 32 | offset in the page
 * (offset - base: under a page, where a count may have any bit set),
 * stored in one piece, so a reader killed anywhere leaves it whole: the
 * next reader takes it up, as it would a stored offset.  The view names
 * the one slot whose offset it overrides; only sh_readv() uses it, and
 * every other reader path settles it first (stores the offset in the
 * slot), under rd_lock.  A slot with a view holds unread bytes, so it is
 * never an emptied slot, nor retired, nor reopened, until a read empties
 * it and drops the view; and its base changes only with rd_lock held (a
 * move), which settles the view first.
 */
#define VIEW_ON		0x80000000u

static bool view_of(const struct sh_ctrl *c, uint32_t idx, uint32_t *off)
{
	uint64_t v = __atomic_load_n(&c->rd_view, __ATOMIC_RELAXED);

	if (!((uint32_t)v & VIEW_ON) || (uint32_t)(v >> 32) != idx)
		return false;
	*off = (uint32_t)v & ~VIEW_ON;
	return true;
}

static void view_set(struct sh_ctrl *c, uint32_t idx, uint32_t off)
{
	__atomic_store_n(&c->rd_view, (uint64_t)idx << 32 | VIEW_ON | off, __ATOMIC_RELAXED);
}

/* With rd_lock held, before any reader path but sh_readv() looks at an offset. */
static void view_settle(struct sh_pipe *sp)
{
	struct sh_ctrl *c = ctrl(sp);
	uint64_t v = __atomic_load_n(&c->rd_view, __ATOMIC_RELAXED);

	struct sh_slot *s;

	if (!((uint32_t)v & VIEW_ON))
		return;
	s = slot(sp, (uint32_t)(v >> 32));
	__atomic_store_n(&s->offset, where_base(slot_where(s)) + ((uint32_t)v & ~VIEW_ON),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&c->rd_view, 0, __ATOMIC_RELAXED);
}

/*
 * The slot at tail, just emptied up to end (its offset stored), stays in
 * the ring if it is the last and may be merged into: drained there (the
 * ring comment), true.  False: it is not the last or holds packets, and
 * is retired.  A merge that came meanwhile is after end: the slot holds
 * it, and the next turn reads it.  *freed when that made room a writer
 * may wait for.  With rd_lock held.
 */
static bool slot_drain(struct sh_pipe *sp, struct sh_slot *s, uint32_t tail, uint32_t head,
		       uint32_t end, bool *freed)
{
	if (tail + 1 != head ||
	    !(__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & PP_BUF_FLAG_CAN_MERGE))
		return false;
	/* Release: our copy out of the page is done before a reopen writes it. */
	__atomic_store_n(&s->drained, end, __ATOMIC_RELEASE);
	/*
	 * The slot counts as room now, so a writer asleep for room must hear
	 * of it: one that filled a one-slot pipe, or one that filled the
	 * pipe while the caller copied, after its load of head (a page's
	 * copy, a lend).  The look at the sleepers is a plain load of a line
	 * that changes only when a writer sleeps.  A writer that counts
	 * itself in and looks at drained in the moment before our store is
	 * seen and our load is made can miss both: it sleeps until its
	 * SH_SLEEP_NS is up, and any later read that retires this slot wakes
	 * it sooner.  Ordering the two (a barrier after the store) would
	 * cost every drain, which at 64 B is every read.
	 */
	if (__atomic_load_n(&ctrl(sp)->max_usage, __ATOMIC_RELAXED) <= 1 ||
	    __atomic_load_n(&ctrl(sp)->wr_sleepers, __ATOMIC_RELAXED))
		*freed = true;
	return true;
}

/*
 * pipe_read(): copy from the tail until the caller's buffer is full, the
 * pipe is empty after some bytes, or a packet ends; wait only before the
 * first byte.  Writers are not held off as Linux's pipe->mutex holds them,
 * so once it has bytes a read goes no further than the slots published
 * when it first found data (head0): it never returns more than the pipe
 * held.  The slots it empties go back together when it ends or waits.
 */
static ssize_t sh_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	struct pp_iov_iter it = { iov, iovcnt, 0 };
	ssize_t total = pp__iov_total(iov, iovcnt), ret = 0;
	struct sh_retired gone_slots;
	uint32_t head0 = 0;
	const void *hint0, *hint1;
	size_t left;
	bool freed = false, gone = false;
	int err, give_err = 0;

	if (total <= 0)
		return total;
	left = (size_t)total;
	note_cpu(c, e->side);
	err = side_lock(sp, &c->rd_lock);
	if (err)
		return err;
	retired_init(&gone_slots, __atomic_load_n(&c->tail, __ATOMIC_RELAXED), true);
	for (;;) {
		uint32_t tail = gone_slots.tail;
		uint32_t head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);

		err = check_bounds(sp, head, tail);
		if (err) {
			if (!ret)
				ret = err;
			break;
		}
		if (ret && (int)(tail - head0) >= 0)
			break;	/* published after we began: the next read's */
		if (ring_used(sp, head, tail)) {
			struct sh_slot *s = slot(sp, tail);
			/* Acquire: the bytes before it, and the where it was stored with. */
			uint32_t end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
			/* Now, with end: after the copy it is a second miss on the writer's line. */
			uint32_t sflags = __atomic_load_n(&s->flags, __ATOMIC_RELAXED);
			uint64_t w = slot_where(s);
			uint32_t base = where_base(w), off;
			bool viewed;
			struct iovec src_iov;
			struct pp_iov_iter src = { &src_iov, 1, 0 };
			char *page;
			size_t n;

			if (!ret)
				head0 = head;
			viewed = view_of(c, tail, &off);
			off = viewed ? base + off : __atomic_load_n(&s->offset, __ATOMIC_RELAXED);
			/* A view always leaves bytes in its slot: one at its end is a scribble. */
			if (slot_bounds(sp, base, off, end) || (viewed && off == end)) {
				if (!ret)
					ret = corrupt(sp);
				break;
			}
			if (off == end) {
				/*
				 * Emptied before us: an emptied one with slots
				 * behind it now (ring_used), or the last slot of
				 * a reader killed before its store of drained.
				 * Retired, or drained if it is the last.
				 */
				if (!retire_later(&gone_slots, s, head))
					slot_drain(sp, s, tail, head, end, &freed);
				continue;
			}
			page = pp__arena_page(&sp->arena, where_page(w));
			if (!page) {
				if (!ret)
					ret = -EIO;
				break;
			}
			n = min_t(size_t, end - off, left);
			src_iov = (struct iovec){ page + (off - base), n };
			if (pp__iter_copy_iter(&it, &src, n) < n) {
				if (!ret)
					ret = -EFAULT;
				break;
			}
			ret += (ssize_t)n;
			left -= n;
			off += (uint32_t)n;
			if (sflags & PP_BUF_FLAG_PACKET) {
				off = end;	/* a short read discards the rest of a packet */
				left = 0;
			}
			if (off != end) {
				view_set(c, tail, off - base);	/* the view, above */
				if (!left)
					break;
				continue;
			}
			__atomic_store_n(&s->offset, off, __ATOMIC_RELAXED);
			if (viewed)
				__atomic_store_n(&c->rd_view, 0, __ATOMIC_RELAXED);
			/*
			 * Emptied: gone from the pipe now, as Linux frees the
			 * buffer; the last slot, a mergeable one, stays,
			 * drained (the ring comment).  A merge that came
			 * meanwhile is after end: the next turn reads it.
			 */
			if (off == end && !slot_drain(sp, s, tail, head, end, &freed))
				retire_later(&gone_slots, s, head);
			if (!left)
				break;
			continue;
		}
		if (ret)
			break;
		if (gone || !peer_side_open(e))
			break;		/* EOF */
		if (end_flags(e) & O_NONBLOCK) {
			if (!peer_gone_now(e))
				ret = -EAGAIN;
			break;
		}
		freed |= retire_now(sp, &gone_slots, &give_err);
		/*
		 * The next write appends to the emptied last slot (or reopens
		 * it, its page full), or fills slot[head] most likely from the
		 * start of the spare page: the wait prefetches the slot and
		 * where the bytes will go.  A prefetch cannot fault, so a hint
		 * gone stale costs nothing.
		 */
		{
			uint32_t head = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
			uint32_t pg = __atomic_load_n(&c->spare, __ATOMIC_RELAXED) - 1, at = 0;

			hint0 = slot(sp, head);
			if (head == gone_slots.tail + 1) {
				struct sh_slot *s = slot(sp, gone_slots.tail);
				uint64_t w = slot_where(s);

				hint0 = s;
				pg = where_page(w);
				at = __atomic_load_n(&s->end, __ATOMIC_RELAXED) - where_base(w);
				if (at >= pp__page_size)
					at = 0;
			}
			hint1 = pg < sp->arena.lay.npages ?
					(char *)sp->arena.base + sp->arena.lay.pages_off +
						(size_t)pg * pp__page_size + at : NULL;
		}
		side_unlock(&c->rd_lock);
		if (freed)
			wake(&c->wr_wait, &c->wr_sleepers);
		freed = false;
		/* Gone: EOF, once the loop has taken what was written before. */
		gone = !wait_for(e, has_data, &c->rd_wait, &c->rd_sleepers, hint0, hint1);
		err = side_lock(sp, &c->rd_lock);
		if (err)
			return err;	/* nothing read yet */
		gone_slots.tail = __atomic_load_n(&c->tail, __ATOMIC_RELAXED);
	}
	freed |= retire_now(sp, &gone_slots, &give_err);
	if (give_err && !ret)
		ret = give_err;		/* the pipe is marked corrupt: the next call says so too */
	/* Not ready: empty with a writer left (EOF is ready, as POLLHUP). */
	if (ev_on(sp, 0) && (ret == -EAGAIN || (ret > 0 && !has_data(sp) &&
						__atomic_load_n(&c->writers, __ATOMIC_RELAXED))))
		event_clear(sp, 0);
	side_unlock(&c->rd_lock);
	if (freed)
		wake(&c->wr_wait, &c->wr_sleepers);
	return ret;
}

/* ---------------------------------------------------------------------- */
/*
 * Lending and reserving, for splice, tee, vmsplice and the zero-copy calls
 * (shared_splice.c).  A lend is the front of the pipe in place, with
 * rd_lock held until pp__shared_consume() says how much of it was used; a
 * reservation is free slots' pages, with wr_lock held until
 * pp__shared_commit() queues what was put in them.  The ring protocol is
 * the one above; only the holding is new.  The lock may be held across a
 * system call that blocks (a socket's send): pp__shared_blocking() says so
 * to the waiters, who would take a long hold for a scribble otherwise.
 */
bool pp__shared_nonblock(const struct pp_file *f)
{
	return end_flags(end_of(f)) & O_NONBLOCK;
}

bool pp__shared_same(const struct pp_file *a, const struct pp_file *b)
{
	struct sh_pipe *x = end_of(a)->sp, *y = end_of(b)->sp;

	/* Two mappings of one arena (an end imported where it was made) are one pipe. */
	return x == y || __atomic_load_n(&ctrl(x)->token_ino, __ATOMIC_RELAXED) ==
			 __atomic_load_n(&ctrl(y)->token_ino, __ATOMIC_RELAXED);
}

void pp__shared_blocking(struct pp_file *f, bool on)
{
	struct sh_end *e = end_of(f);
	uint32_t *lock = e->side ? &ctrl(e->sp)->wr_lock : &ctrl(e->sp)->rd_lock;

	if (on)
		__atomic_fetch_or(lock, LOCK_BLOCKED, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(lock, ~LOCK_BLOCKED, __ATOMIC_RELAXED);
}

/*
 * Wait with no lock held until f's end is ready (data, room): 1, or 0 when
 * the other side is gone.
 */
int pp__shared_wait(struct pp_file *f)
{
	struct sh_end *e = end_of(f);
	struct sh_ctrl *c = ctrl(e->sp);

	if (e->side)
		return wait_for(e, has_room, &c->wr_wait, &c->wr_sleepers, NULL, NULL);
	return wait_for(e, has_data, &c->rd_wait, &c->rd_sleepers, NULL, NULL);
}

/*
 * Lend the front of the pipe: up to nmax iovecs, count bytes, one per slot,
 * pointing into the arena, and no further than one packet if packets;
 * flags (if not NULL) gets each slot's CAN_MERGE and PACKET, and
 * PP__LENT_WHOLE where the iovec runs to the end of its slot.  Waits as a
 * read does unless nonblock (-EAGAIN); 0 at EOF.  With bytes lent (> 0),
 * rd_lock stays held for pp__shared_consume().
 */
ssize_t pp__shared_lend(struct pp_file *f, struct iovec *iov, unsigned int nmax, size_t count,
			bool nonblock, bool packets, uint32_t *flags)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	bool freed = false, gone = false;
	int err;

	note_cpu(c, e->side);
	err = side_lock(sp, &c->rd_lock);
	if (err)
		return err;
	for (;;) {
		uint32_t tail, head;
		unsigned int n = 0;
		size_t lent = 0;

		view_settle(sp);	/* rd_lock taken (again): offsets are the slots' */
		tail = __atomic_load_n(&c->tail, __ATOMIC_RELAXED);
		head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);

		err = check_bounds(sp, head, tail);
		if (err)
			break;
		/* Empty, or the drained slot alone. */
		if (!ring_used(sp, head, tail)) {
			if (gone || !peer_side_open(e))
				break;		/* EOF: err is 0 */
			if (nonblock) {
				if (peer_gone_now(e))
					break;	/* EOF */
				err = -EAGAIN;
				if (ev_on(sp, 0))
					event_clear(sp, 0);
				break;
			}
			side_unlock(&c->rd_lock);
			if (freed)
				wake(&c->wr_wait, &c->wr_sleepers);
			freed = false;
			gone = !wait_for(e, has_data, &c->rd_wait, &c->rd_sleepers, NULL, NULL);
			err = side_lock(sp, &c->rd_lock);
			if (err)
				return err;
			continue;
		}
		for (uint32_t i = tail; i != head && n < nmax && lent < count; i++) {
			struct sh_slot *s = slot(sp, i);
			/* Acquire: the bytes before it, and the where it was stored with. */
			uint32_t end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
			uint64_t w = slot_where(s);
			uint32_t base = where_base(w);
			uint32_t off = __atomic_load_n(&s->offset, __ATOMIC_RELAXED);
			char *page;
			size_t len;

			err = slot_bounds(sp, base, off, end);
			if (err)
				break;
			if (off == end) {
				if (i != tail)
					break;	/* a scribble: the next lend's */
				/* Emptied before us: retired, or drained if last (sh_readv). */
				err = slot_retire(sp, s, tail, head);
				if (err > 0)
					freed = true;
				else if (!err)
					slot_drain(sp, s, tail, head, end, &freed);
				break;	/* look again from the new tail */
			}
			page = pp__arena_page(&sp->arena, where_page(w));
			if (!page) {
				err = -EIO;
				break;
			}
			len = min_t(size_t, end - off, count - lent);
			if (flags)
				flags[n] = (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) &
					    (PP_BUF_FLAG_CAN_MERGE | PP_BUF_FLAG_PACKET)) |
					   (len == end - off ? PP__LENT_WHOLE : 0);
			iov[n++] = (struct iovec){ page + (off - base), len };
			lent += len;
			if (packets && (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & PP_BUF_FLAG_PACKET))
				break;	/* as a read: one packet at most */
		}
		if (err < 0)
			break;
		if (lent) {
			if (freed)
				wake(&c->wr_wait, &c->wr_sleepers);
			return (ssize_t)lent;
		}
		err = 0;
	}
	side_unlock(&c->rd_lock);
	if (freed)
		wake(&c->wr_wait, &c->wr_sleepers);
	return err;
}

/*
 * Take the first n bytes of what was lent out of the pipe, and end the
 * lend.  Emptied slots retire together, as a read's do (struct
 * sh_retired).
 */
void pp__shared_consume(struct pp_file *f, size_t n)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	uint32_t head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
	struct sh_retired gone_slots;
	bool freed = false;
	int err = 0;

	retired_init(&gone_slots, __atomic_load_n(&c->tail, __ATOMIC_RELAXED), false);
	while (n && gone_slots.tail != head && !check_bounds(sp, head, gone_slots.tail)) {
		struct sh_slot *s = slot(sp, gone_slots.tail);
		uint32_t end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
		uint32_t off = __atomic_load_n(&s->offset, __ATOMIC_RELAXED);
		size_t take;

		if (slot_bounds(sp, where_base(slot_where(s)), off, end))
			break;
		take = min_t(size_t, end - off, n);
		off += (uint32_t)take;
		n -= take;
		__atomic_store_n(&s->offset, off, __ATOMIC_RELAXED);
		if (off != end)
			break;
		if (!retire_later(&gone_slots, s, head)) {
			/* The last slot, emptied: drained (a merge that came is the next lend's). */
			slot_drain(sp, s, gone_slots.tail, head, end, &freed);
			break;
		}
	}
	freed |= retire_now(sp, &gone_slots, &err);
	if (ev_on(sp, 0) && !has_data(sp) && __atomic_load_n(&c->writers, __ATOMIC_RELAXED))
		event_clear(sp, 0);
	side_unlock(&c->rd_lock);
	if (freed)
		wake(&c->wr_wait, &c->wr_sleepers);
}

/* Free slots at a glance, with no lock: a bound for what to produce, not a promise. */
unsigned int pp__shared_room(struct pp_file *f)
{
	struct sh_pipe *sp = end_of(f)->sp;
	struct sh_ctrl *c = ctrl(sp);
	uint32_t tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
	uint32_t head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
	uint32_t max = __atomic_load_n(&c->max_usage, __ATOMIC_RELAXED), used;

	/* Nonsense is for the reservation to find, under the lock. */
	if (head - tail > SH_SLOTS + 1 || !max || max > SH_SLOTS)
		return 0;
	used = ring_used(sp, head, tail);
	return used < max ? max - used : 0;
}

/*
 * Reserve up to want free slots, a fresh arena page each: their addresses
 * in pages[], their indices in idx[].  Waits for one free slot as a write
 * does unless nonblock (-EAGAIN); -EPIPE (and SIGPIPE) with no reader.
 * Returns the slots reserved, wr_lock held for pp__shared_commit().
 */
int pp__shared_reserve(struct pp_file *f, unsigned int want, bool nonblock, void **pages,
		       uint32_t *idx)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	uint32_t head, tail, room, used;
	unsigned int n, tries = 0;
	int err;

	note_cpu(c, e->side);
	err = side_lock(sp, &c->wr_lock);
	if (err)
		return err;
again:
	for (;;) {
		head = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
		tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
		err = check_bounds(sp, head, tail);
		if (err)
			goto out;
		if (!peer_side_open(e)) {
			err = pp__pipe_epipe(f);
			goto out;
		}
		room = __atomic_load_n(&c->max_usage, __ATOMIC_RELAXED);
		used = ring_used(sp, head, tail);
		room = used < room ? room - used : 0;
		if (room)
			break;
		if (nonblock) {
			if (peer_gone_now(e)) {
				err = pp__pipe_epipe(f);
				goto out;
			}
			err = -EAGAIN;
			if (ev_on(sp, 1))
				event_clear(sp, 1);
			goto out;
		}
		side_unlock(&c->wr_lock);
		if (!wait_for(e, has_room, &c->wr_wait, &c->wr_sleepers, NULL, NULL))
			return pp__pipe_epipe(f);
		err = side_lock(sp, &c->wr_lock);
		if (err)
			return err;
	}
	want = min_t(unsigned int, want, room);
	/* The spare first, then the rest in one pop: a page at a time costs a line each. */
	err = page_take_spare(sp, &idx[0]);
	n = err > 0;
	while (err >= 0 && n < want) {
		err = pp__arena_page_alloc_many(&sp->arena, &idx[n], want - n);
		if (err > 0)
			n += (unsigned int)err;
	}
	if (err == -ENOMEM && !n) {
		side_unlock(&c->wr_lock);
		err = pages_wait(&tries, nonblock);
		if (err)
			return err;
		err = side_lock(sp, &c->wr_lock);
		if (err)
			return err;
		goto again;
	}
	for (unsigned int i = 0; i < n; i++)
		if (!(pages[i] = pp__arena_page(&sp->arena, idx[i])))
			err = -EIO;	/* poisoned: commit gives them back, or not */
	if (n && err != -EIO)
		return (int)n;
	if (n)
		pp__arena_page_put_many(&sp->arena, idx, n);
out:
	side_unlock(&c->wr_lock);
	return err;
}

/*
 * Queue the reserved pages with lens[i] bytes each from its start (a
 * page with none goes back) and end the reservation.  Each slot's flags
 * are flags[i]'s CAN_MERGE and PACKET, or none when flags is NULL: bytes
 * spliced in from a file or vmspliced are not written, so nothing merges
 * into them, as into Linux's spliced buffers.  Returns the bytes queued.
 */
ssize_t pp__shared_commit(struct pp_file *f, uint32_t *idx, unsigned int n, const size_t *lens,
			  const uint32_t *flags)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	uint32_t head = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
	uint32_t unused[SH_SLOTS];
	unsigned int nu = 0;
	ssize_t ret = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct sh_slot *s;

		if (!lens[i]) {
			unused[nu++] = idx[i];
			continue;
		}
		s = slot(sp, head++);
		slot_fill(s, idx[i],
			  flags ? flags[i] & (PP_BUF_FLAG_CAN_MERGE | PP_BUF_FLAG_PACKET) : 0,
			  (uint32_t)lens[i]);
		ret += (ssize_t)lens[i];
	}
	/* Release: the slots and their pages' bytes before the head that shows them. */
	__atomic_store_n(&c->head, head, __ATOMIC_RELEASE);
	if (nu)
		pp__arena_page_put_many(&sp->arena, unused, nu);
	if (ev_on(sp, 1) && !has_room(sp) && __atomic_load_n(&c->readers, __ATOMIC_RELAXED))
		event_clear(sp, 1);
	side_unlock(&c->wr_lock);
	if (ret)
		wake(&c->rd_wait, &c->rd_sleepers);
	return ret;
}

/* pp_read_lend() and pp_read_done() on a shared read end: a lend, held by the end. */
ssize_t pp__shared_read_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count)
{
	struct sh_end *e = end_of(f);
	ssize_t r = pp__shared_lend(f, iov, (unsigned int)iovcnt, count, pp__shared_nonblock(f), true,
				    NULL);

	if (r > 0) {
		e->loan = (size_t)r;
		__atomic_store_n(&e->sp->loan_owner, pthread_self(), __ATOMIC_RELAXED);
		__atomic_store_n(&e->sp->loan_active, true, __ATOMIC_RELEASE);
		__atomic_store_n(&e->lending, true, __ATOMIC_RELEASE);
	}
	return r;
}

int pp__shared_read_done(struct pp_file *f, size_t consumed)
{
	struct sh_end *e = end_of(f);

	if (!__atomic_load_n(&e->lending, __ATOMIC_ACQUIRE))
		return -EINVAL;
	__atomic_store_n(&e->lending, false, __ATOMIC_RELAXED);
	__atomic_store_n(&e->sp->loan_active, false, __ATOMIC_RELEASE);
	pp__shared_consume(f, min_t(size_t, consumed, e->loan));
	return 0;
}

/* Does this thread hold rd_lock in a read loan?  Then FIONREAD and resize have it already. */
static bool loan_held_here(struct sh_pipe *sp)
{
	return __atomic_load_n(&sp->loan_active, __ATOMIC_ACQUIRE) &&
	       pthread_equal(__atomic_load_n(&sp->loan_owner, __ATOMIC_RELAXED), pthread_self());
}

/*
 * pp_write_lend() and pp_write_done() on a shared write end: a
 * reservation, held by the end.  The pages are the arena's, the only
 * memory the reading processes see.
 */
ssize_t pp__shared_write_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count)
{
	struct sh_end *e = end_of(f);
	void *pages[PP_LEASE_MAX];
	unsigned int want = (unsigned int)min_t(size_t, (size_t)iovcnt,
						(count + pp__page_size - 1) / pp__page_size);
	size_t left = count;
	int n;

	n = pp__shared_reserve(f, min_t(unsigned int, want, PP_LEASE_MAX), pp__shared_nonblock(f),
			       pages, e->lease_idx);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		size_t l = min_t(size_t, left, pp__page_size);

		iov[i] = (struct iovec){ pages[i], l };
		left -= l;
	}
	e->lease_n = (unsigned int)n;
	e->lease_len = count - left;
	__atomic_store_n(&e->leasing, true, __ATOMIC_RELEASE);
	return (ssize_t)(count - left);
}

int pp__shared_write_done(struct pp_file *f, size_t filled)
{
	struct sh_end *e = end_of(f);
	size_t lens[PP_LEASE_MAX];
	uint32_t flags[PP_LEASE_MAX];
	/* An O_DIRECT end's pages go as packets, a page each, as sh_writev sends them. */
	uint32_t fl = (end_flags(e) & O_DIRECT) ? PP_BUF_FLAG_PACKET : 0;

	if (!__atomic_load_n(&e->leasing, __ATOMIC_ACQUIRE))
		return -EINVAL;
	__atomic_store_n(&e->leasing, false, __ATOMIC_RELAXED);
	filled = min_t(size_t, filled, e->lease_len);
	for (unsigned int i = 0; i < e->lease_n; i++) {
		lens[i] = min_t(size_t, filled, pp__page_size);
		flags[i] = fl;
		filled -= lens[i];
	}
	pp__shared_commit(f, e->lease_idx, e->lease_n, lens, flags);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Ends: opening, fork(), exit() and close. */

/* Let go of one end's count and token, and tell everyone.  Under reg_lock. */
static void end_detach(struct sh_end *e)
{
	struct sh_ctrl *c = ctrl(e->sp);
	uint32_t *n = count_of(c, e->side), v = __atomic_load_n(n, __ATOMIC_RELAXED);

	if (e->token < 0)
		return;
	/* A hint a peer scribbled to 0 stays at 0: the tokens have the truth. */
	while (v && !__atomic_compare_exchange_n(n, &v, v - 1, true, __ATOMIC_SEQ_CST,
						 __ATOMIC_RELAXED))
		;
	close(e->token);
	e->token = -1;
	wake_all(c);
}

static void reg_fork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

static void reg_fork_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

/* The child holds copies of every end: count them, as fork() counts fds. */
static void reg_fork_child(void)
{
	remember_pid();
	/* Not the parent's thread: a token of its own, and the registration (sh_register). */
	bias_tok = 0;
	bias_tid = 0;
	if (__atomic_load_n(&sh_asym, __ATOMIC_RELAXED) == 1 && !sh_register())
		__atomic_store_n(&sh_asym, -1, __ATOMIC_RELAXED);
	for (struct sh_end *e = reg_head; e; e = e->next) {
		if (__atomic_load_n(&sh_asym, __ATOMIC_RELAXED) != 1)
			__atomic_store_n(&ctrl(e->sp)->asym_off, 1, __ATOMIC_SEQ_CST);
		if (e->token >= 0)
			__atomic_fetch_add(count_of(ctrl(e->sp), e->side), 1, __ATOMIC_SEQ_CST);
		/*
		 * The watchers stayed in the parent, and the eventfd is the
		 * parent's: this process must neither clear it nor count on it
		 * (two processes' flags over one counter lose wake-ups).  Its
		 * number is kept for the eventfd of our own that a request
		 * here puts there (pp__shared_event_fd).
		 */
		for (int i = 0; i < 2; i++) {
			struct sh_event *ev = &e->sp->ev[i];

			if (ev->fd >= 0) {
				ev->inherited = ev->fd;
				ev->fd = -1;
			}
			ev->set = 0;
			ev->running = false;
			pthread_mutex_init(&ev->lock, NULL);
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

/*
 * pp_close() of a write end, before the end can go: a fast section holds
 * no reference on it, so a bias held by a thread of this process is
 * revoked (taking wr_lock does it), which waits for its section to end.
 * An owner in another process writes through its own ends.
 */
void pp__shared_unbias(struct pp_file *f)
{
	struct sh_end *e = end_of(f);
	struct sh_ctrl *c = ctrl(e->sp);
	/* Acquire: the record the grant stored before it. */
	uint64_t o = __atomic_load_n(&c->wr_owner, __ATOMIC_ACQUIRE);

	if (!o || __atomic_load_n(&c->wr_rec[o & BIAS_IDX].pid, __ATOMIC_RELAXED) != my_pid())
		return;
	if (!side_lock(e->sp, &c->wr_lock))
		side_unlock(&c->wr_lock);
}

void pp__shared_bias_stats(struct pp_file *f, unsigned int *revokes, unsigned int *dead)
{
	struct sh_ctrl *c = ctrl(end_of(f)->sp);

	*revokes = __atomic_load_n(&c->wr_revokes, __ATOMIC_RELAXED);
	*dead = __atomic_load_n(&c->wr_dead_owners, __ATOMIC_RELAXED);
}

/* A process that exits holds no end from then on: its peers need not wait to learn it. */
static void reg_exit(void)
{
	pthread_mutex_lock(&reg_lock);
	for (struct sh_end *e = reg_head; e; e = e->next)
		end_detach(e);
	pthread_mutex_unlock(&reg_lock);
}

static void reg_init(void)
{
	remember_pid();
	pthread_atfork(reg_fork_prepare, reg_fork_parent, reg_fork_child);
	atexit(reg_exit);
}

/* Under reg_lock: the end counts among this process's, and its pipe's. */
static void reg_add(struct sh_end *e)
{
	e->prev = NULL;
	e->next = reg_head;
	if (reg_head)
		reg_head->prev = e;
	reg_head = e;
	e->sp->ends++;
	e->sp->side_ends[e->side]++;
}

/* A new view of a pipe: its arena is mapped by the caller. */
static struct sh_pipe *sh_pipe_new(void)
{
	static uint32_t serials;
	struct sh_pipe *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return NULL;
	sp->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++) {
		sp->ev[i] = (struct sh_event){ .fd = -1, .inherited = -1, .sp = sp, .side = i };
		pthread_mutex_init(&sp->ev[i].lock, NULL);
	}
	return sp;
}

static int sh_release(struct pp_file *f)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	bool last, stop;

	pthread_mutex_lock(&reg_lock);
	end_detach(e);
	if (e->prev)
		e->prev->next = e->next;
	else
		reg_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	stop = --sp->side_ends[e->side] == 0;
	pthread_mutex_unlock(&reg_lock);
	/* Before our count of sp goes: whoever takes it to 0 frees sp. */
	if (stop)
		event_stop(&sp->ev[e->side]);
	pthread_mutex_lock(&reg_lock);
	last = --sp->ends == 0;
	pthread_mutex_unlock(&reg_lock);
	free(e);
	if (last) {
		pp__arena_unmap(&sp->arena);
		for (int i = 0; i < 2; i++)
			pthread_mutex_destroy(&sp->ev[i].lock);
		free(sp);
	}
	return 0;
}

/*
 * pipe_poll()'s answer.  pp_poll() sleeps on the end's event fd (below);
 * an answer of not ready takes back a readiness it showed that another
 * process has since used up.
 */
static short sh_poll(struct pp_file *f, short events)
{
	struct sh_end *e = end_of(f);
	short mask = 0;

	if (!e->side) {
		if (has_data(e->sp))
			mask |= POLLIN | POLLRDNORM;
		if (peer_side_gone(e))
			mask |= POLLHUP;
	} else {
		if (has_room(e->sp))
			mask |= POLLOUT | POLLWRNORM;
		if (peer_side_gone(e))
			mask |= POLLERR;
	}
	if (!mask)
		event_clear(e->sp, e->side);
	return mask & (events | POLLHUP | POLLERR);
}

/* ---------------------------------------------------------------------- */
/*
 * Event fds.  A kernel pipe's readiness is the kernel's to tell every
 * process; ours changes in shared memory, where no descriptor can watch
 * it.  So each process that asks (pp_file_event_fd, or pp_poll) gets an
 * eventfd of its own per direction, kept by a watcher thread of its own:
 *
 *   watcher: the end not ready -> sleep on the ring's wait word as one
 *            more sleeper (the wake-ups of wait_for, woken by every
 *            write or read that a sleeper waits for), at most
 *            SH_SLEEP_NS, then ask the tokens whether the other side is
 *            gone;
 *            ready -> make the eventfd readable (set) and sleep until
 *            this process takes the readiness back (event_clear).
 *   clear:   an operation of this process that finds the end not ready
 *            (EAGAIN, a poll) or leaves it so (a read that empties the
 *            ring, a write that fills it) makes the eventfd unreadable
 *            and wakes the watcher to look again.
 *
 * So the descriptor is never unreadable while the end is ready (the
 * watcher looks again after every clear, and sleeps only as a counted
 * sleeper, whom every change wakes), and it is readable while the end is
 * not only until this process next finds so: another process that takes
 * the bytes away is not seen at once, as with a descriptor several
 * processes read from.  set and clear take ev->lock, so that the
 * eventfd's counter and `set` agree.  The thread starts on the first
 * request and stops when this process closes its last end of that
 * direction.  A fork()ed child does not touch the parent's eventfd; when
 * it asks, it gets one of its own under the same number, and a watcher.
 * A clear happens only where the end is not ready: EOF and EPIPE are
 * ready (POLLHUP, POLLERR), and the non-blocking calls ask the tokens
 * before they say EAGAIN, so that a side that died is EOF or EPIPE there
 * too.
 */
static bool ev_ready(struct sh_event *ev)
{
	return ev->side ? has_room(ev->sp) : has_data(ev->sp);
}

/* Is the other side gone?  The token of some end of ours of this direction says. */
static bool ev_peer_gone(struct sh_event *ev)
{
	bool gone = false;

	pthread_mutex_lock(&reg_lock);
	for (struct sh_end *e = reg_head; e; e = e->next)
		if (e->sp == ev->sp && e->side == ev->side && e->token >= 0) {
			gone = peer_side_gone(e);
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	return gone;
}

static void event_set(struct sh_event *ev)
{
	uint64_t one = 1;

	pthread_mutex_lock(&ev->lock);
	if (!__atomic_load_n(&ev->set, __ATOMIC_RELAXED)) {
		__atomic_store_n(&ev->set, 1, __ATOMIC_RELAXED);
		(void)!write(ev->fd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&ev->lock);
}

static void event_clear(struct sh_pipe *sp, int side)
{
	struct sh_event *ev = &sp->ev[side];
	uint64_t v;

	/* The hot path's whole cost when nobody asked for a descriptor. */
	if (likely(__atomic_load_n(&ev->fd, __ATOMIC_ACQUIRE) < 0) ||
	    !__atomic_load_n(&ev->set, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ev->lock);
	if (__atomic_load_n(&ev->set, __ATOMIC_RELAXED)) {
		(void)!read(ev->fd, &v, sizeof(v));
		__atomic_store_n(&ev->set, 0, __ATOMIC_RELAXED);
		futex(&ev->set, FUTEX_WAKE_PRIVATE, 1, NULL);
	}
	pthread_mutex_unlock(&ev->lock);
}

static void *event_watch(void *arg)
{
	struct sh_event *ev = arg;
	struct sh_ctrl *c = ctrl(ev->sp);
	uint32_t *wq = ev->side ? &c->wr_wait : &c->rd_wait;
	uint32_t *sleepers = ev->side ? &c->wr_sleepers : &c->rd_sleepers;
	const struct timespec ts = { 0, SH_SLEEP_NS };

	/* Whatever thread start-up does is done: pp__shared_event_fd may return. */
	__atomic_store_n(&ev->started, 1, __ATOMIC_RELEASE);
	futex(&ev->started, FUTEX_WAKE_PRIVATE, 1, NULL);
	while (!__atomic_load_n(&ev->stop, __ATOMIC_ACQUIRE)) {
		uint32_t seq;

		if (ev_ready(ev) || ev_peer_gone(ev)) {
			event_set(ev);
			/* Until this process takes it back, or we are told to stop. */
			while (__atomic_load_n(&ev->set, __ATOMIC_RELAXED) &&
			       !__atomic_load_n(&ev->stop, __ATOMIC_ACQUIRE))
				futex(&ev->set, FUTEX_WAIT_PRIVATE, 1, NULL);
			continue;
		}
		/* A sleeper as wait_for's: the count before the look (see the head comment). */
		__atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
		/*
		 * A writer that wakes readers with a plain load (see
		 * wake_readers_plain) has set plain_wake first: then the
		 * barrier on its CPU either came after its store of the ring,
		 * which the look below sees, or before its load, which sees
		 * our increment (wait.c's argument, across processes).
		 */
		if (sleepers == &c->rd_sleepers && __atomic_load_n(&c->plain_wake, __ATOMIC_SEQ_CST))
			(void)sh_barrier();
		seq = __atomic_load_n(wq, __ATOMIC_SEQ_CST);
		if (!ev_ready(ev) && !__atomic_load_n(&ev->stop, __ATOMIC_ACQUIRE))
			futex(wq, FUTEX_WAIT, seq, &ts);
		__atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* With no lock: the last end of the direction is closed here. */
static void event_stop(struct sh_event *ev)
{
	struct sh_ctrl *c = ctrl(ev->sp);
	int fd;

	pthread_mutex_lock(&reg_lock);
	if (!ev->running) {
		pthread_mutex_unlock(&reg_lock);
		goto close_fd;
	}
	ev->running = false;
	pthread_mutex_unlock(&reg_lock);
	__atomic_store_n(&ev->stop, true, __ATOMIC_RELEASE);
	/* The word changes before the wake: a watcher that has not slept yet will not. */
	pthread_mutex_lock(&ev->lock);
	__atomic_store_n(&ev->set, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ev->lock);
	futex(&ev->set, FUTEX_WAKE_PRIVATE, 1, NULL);
	/* Wakes every sleeper on the word, in every process: each looks again, no harm. */
	__atomic_fetch_add(ev->side ? &c->wr_wait : &c->rd_wait, 1, __ATOMIC_SEQ_CST);
	futex(ev->side ? &c->wr_wait : &c->rd_wait, FUTEX_WAKE, INT_MAX, NULL);
	pthread_join(ev->thread, NULL);
close_fd:
	fd = __atomic_exchange_n(&ev->fd, -1, __ATOMIC_ACQ_REL);
	if (fd >= 0)
		close(fd);
	if (ev->inherited >= 0)
		close(ev->inherited);
	ev->inherited = -1;
	__atomic_store_n(&ev->set, 0, __ATOMIC_RELAXED);
}

int pp__shared_event_fd(struct pp_file *f)
{
	struct sh_end *e = end_of(f);
	struct sh_event *ev = &e->sp->ev[e->side];
	sigset_t all, old;
	int err = 0;

	pthread_mutex_lock(&reg_lock);
	if (ev->fd < 0) {
		int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

		if (fd < 0) {
			err = -errno;
			goto out;
		}
		/* A fork()ed child's own eventfd, under the number it inherited. */
		if (ev->inherited >= 0) {
			if (dup3(fd, ev->inherited, O_CLOEXEC) < 0) {
				err = -errno;
				close(fd);
				goto out;
			}
			close(fd);
			fd = ev->inherited;
			ev->inherited = -1;
		}
		__atomic_store_n(&ev->set, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&ev->fd, fd, __ATOMIC_RELEASE);
	}
	if (!ev->running) {
		/* The watcher takes no signal: they are the application's threads' to take. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		__atomic_store_n(&ev->stop, false, __ATOMIC_RELAXED);
		__atomic_store_n(&ev->started, 0, __ATOMIC_RELAXED);
		err = -pthread_create(&ev->thread, NULL, event_watch, ev);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err)
			goto out;
		ev->running = true;
		/*
		 * Return only once the watcher runs its loop, which takes no
		 * lock of ours until it has said so.  A fork() while a thread
		 * is still starting is safe in glibc, but not in every
		 * runtime: GCC 12's ASan allocator keeps no fork handler, so
		 * a child forked while our new thread was in its start-up
		 * calloc inherited that size class's lock held, and its own
		 * watcher hung on it for good (test/shared-events
		 * fork_after_event_fd, and child_event_fd failing 2 in 60
		 * runs under load in an ASan build).
		 */
		while (!__atomic_load_n(&ev->started, __ATOMIC_ACQUIRE))
			futex(&ev->started, FUTEX_WAIT_PRIVATE, 0, NULL);
	}
	/* Readable on return when the end is ready now, as a kernel pipe's descriptor is. */
	if (ev_ready(ev) || peer_side_gone(e))
		event_set(ev);
out:
	pthread_mutex_unlock(&reg_lock);
	return err ? err : ev->fd;
}

static const struct pp_file_ops sh_read_ops = {
	.readv		= sh_readv,
	.poll		= sh_poll,
	.release	= sh_release,
	.name		= "pagepipe shared read end",
};

static const struct pp_file_ops sh_write_ops = {
	.writev		= sh_writev,
	.poll		= sh_poll,
	.release	= sh_release,
	.name		= "pagepipe shared write end",
};

int pp__shared_pipe2(struct pp_file *ends[2], int flags)
{
	int keep = flags & PP_O_NOSIGPIPE, tok[2] = { -1, -1 }, err;
	struct sh_end *re = NULL, *we = NULL;
	struct pp_file *r = NULL, *w = NULL;
	struct sh_pipe *sp;
	struct sh_ctrl *c;

	if (flags & O_CLOEXEC)
		keep |= PP_FD_CLOEXEC_FLAG;
	pthread_once(&reg_once, reg_init);
	sp = sh_pipe_new();
	if (!sp)
		return -ENOMEM;
	err = pp__arena_create(&sp->arena, SH_PAGES, SH_RING);
	if (err) {
		free(sp);
		return err;
	}
	re = calloc(1, sizeof(*re));
	we = calloc(1, sizeof(*we));
	r = pp__file_alloc(&sh_read_ops, PP_KIND_SHARED, O_RDONLY | keep);
	w = pp__file_alloc(&sh_write_ops, PP_KIND_SHARED, O_WRONLY | keep);
	err = !re || !we || !r || !w ? -ENOMEM : pipe2(tok, O_CLOEXEC) ? -errno : 0;
	if (err) {
		free(re);
		free(we);
		free(r);
		free(w);
		pp__arena_unmap(&sp->arena);
		free(sp);
		return err;
	}
	c = ctrl(sp);
	asym_attach(c);
	c->max_usage = PP_DEF_SLOTS;
	c->cpu[0] = c->cpu[1] = -1;
	{
		struct stat st;

		c->token_ino = fstat(tok[0], &st) ? 0 : (uint64_t)st.st_ino;
	}
	c->readers = c->writers = 1;
	c->end_flags[0] = (uint32_t)(flags & O_NONBLOCK);
	c->end_flags[1] = (uint32_t)(flags & (O_NONBLOCK | O_DIRECT));
	*re = (struct sh_end){ .sp = sp, .side = 0, .token = tok[0] };
	*we = (struct sh_end){ .sp = sp, .side = 1, .token = tok[1] };
	r->private = re;
	w->private = we;
	pthread_mutex_lock(&reg_lock);
	reg_add(re);
	reg_add(we);
	pthread_mutex_unlock(&reg_lock);
	ends[0] = r;
	ends[1] = w;
	return 0;
}

/* ---------------------------------------------------------------------- */
/*
 * Export and import: an end as two descriptors, the arena's and the
 * end's token, which another process can inherit across exec or receive
 * over a Unix socket (SCM_RIGHTS) and import: then it holds a copy of the
 * end, as if a pipe's descriptor had been passed.  While the descriptors
 * are open the end counts as open (they hold a token), as a pipe's
 * descriptor in flight does.
 */
PP_EXPORT int pp_export(struct pp_file *end, int fds[2])
{
	struct sh_end *e;
	int a, t;

	if (!end)
		return (int)pp__ret(-EBADF);
	if (!pp__is_shared(end))
		return (int)pp__ret(-EINVAL);
	if (!fds)
		return (int)pp__ret(-EFAULT);
	pp__file_get(end);
	e = end_of(end);
	a = fcntl(e->sp->arena.fd, F_DUPFD, 0);
	t = a < 0 || e->token < 0 ? -1 : fcntl(e->token, F_DUPFD, 0);
	if (t < 0) {
		int err = e->token < 0 && a >= 0 ? -EBADF : -errno;

		if (a >= 0)
			close(a);
		pp__file_put(end);
		return (int)pp__ret(err);
	}
	pp__file_put(end);
	fds[0] = a;
	fds[1] = t;
	return 0;
}

static struct pp_file *do_import(const int fds[2], int flags, int *err)
{
	struct sh_pipe *sp;
	struct sh_end *e;
	struct pp_file *f;
	struct stat st;
	int acc, side, tok;

	if (flags & ~(O_CLOEXEC | PP_O_NOSIGPIPE)) {
		*err = -EINVAL;
		return NULL;
	}
	if (fds[1] < 0 || fstat(fds[1], &st) || (acc = fcntl(fds[1], F_GETFL)) < 0) {
		*err = -EBADF;
		return NULL;
	}
	if (!S_ISFIFO(st.st_mode) || ((acc & O_ACCMODE) != O_RDONLY && (acc & O_ACCMODE) != O_WRONLY)) {
		*err = -EINVAL;
		return NULL;
	}
	side = (acc & O_ACCMODE) == O_WRONLY;
	pthread_once(&reg_once, reg_init);
	sp = sh_pipe_new();
	if (!sp) {
		*err = -ENOMEM;
		return NULL;
	}
	*err = pp__arena_map(&sp->arena, fds[0]);
	if (*err) {
		free(sp);
		return NULL;
	}
	/* The token must be this pipe's: its inode is in the arena. */
	if (sp->arena.lay.nslots != SH_RING ||
	    __atomic_load_n(&ctrl(sp)->token_ino, __ATOMIC_RELAXED) != (uint64_t)st.st_ino) {
		*err = -EINVAL;
		goto fail;
	}
	tok = fcntl(fds[1], F_DUPFD_CLOEXEC, 0);
	if (tok < 0) {
		*err = -errno;
		goto fail;
	}
	e = calloc(1, sizeof(*e));
	f = pp__file_alloc(side ? &sh_write_ops : &sh_read_ops, PP_KIND_SHARED,
			   (side ? O_WRONLY : O_RDONLY) | (flags & PP_O_NOSIGPIPE) |
				   (flags & O_CLOEXEC ? PP_FD_CLOEXEC_FLAG : 0));
	if (!e || !f) {
		free(e);
		free(f);
		close(tok);
		*err = -ENOMEM;
		goto fail;
	}
	*e = (struct sh_end){ .sp = sp, .side = side, .token = tok };
	f->private = e;
	__atomic_fetch_add(count_of(ctrl(sp), side), 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&reg_lock);
	asym_attach(ctrl(sp));
	reg_add(e);
	pthread_mutex_unlock(&reg_lock);
	return f;
fail:
	pp__arena_unmap(&sp->arena);
	free(sp);
	return NULL;
}

PP_EXPORT struct pp_file *pp_import(const int fds[2], int flags)
{
	struct pp_file *f;
	int err;

	if (!fds) {
		errno = EFAULT;
		return NULL;
	}
	f = do_import(fds, flags, &err);
	if (!f)
		errno = -err;
	return f;
}

/* ---------------------------------------------------------------------- */
/* fcntl and ioctl on a shared end. */

static int set_size(struct sh_end *e, unsigned long arg)
{
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	unsigned long nr = 1;
	uint32_t head, tail;
	bool held;
	int err;

	/* round_pipe_size(): a page at least, a power of two of pages. */
	if (arg > PP_MAX_SIZE)
		return -EINVAL;
	while (nr * pp__page_size < arg)
		nr <<= 1;
	/* Above pipe-max-size, as the kernel answers an unprivileged caller. */
	if (nr > SH_SLOTS)
		return -EPERM;
	/* rd_lock first, always (sweep); a read loan of this thread holds it. */
	held = loan_held_here(sp);
	err = held ? 0 : side_lock(sp, &c->rd_lock);
	if (err)
		return err;
	err = side_lock(sp, &c->wr_lock);
	if (err) {
		if (!held)
			side_unlock(&c->rd_lock);
		return err;
	}
	view_settle(sp);
	head = __atomic_load_n(&c->head, __ATOMIC_RELAXED);
	tail = __atomic_load_n(&c->tail, __ATOMIC_RELAXED);
	err = check_bounds(sp, head, tail);
	/* Slots holding bytes: the drained slot takes no room (SH_RING has one for it). */
	if (!err && ring_used(sp, head, tail) > nr)
		err = -EBUSY;
	if (!err)
		__atomic_store_n(&c->max_usage, (uint32_t)nr, __ATOMIC_RELAXED);
	side_unlock(&c->wr_lock);
	if (!held)
		side_unlock(&c->rd_lock);
	if (err)
		return err;
	wake_all(c);
	return (int)(nr * pp__page_size);
}

int pp__shared_fcntl(struct pp_file *f, int cmd, unsigned long arg)
{
	struct sh_end *e = end_of(f);
	struct sh_ctrl *c = ctrl(e->sp);
	uint32_t *fl = &c->end_flags[e->side];
	int acc = pp__file_flags(f) & O_ACCMODE;

	switch (cmd) {
	case F_GETFL:
		return acc | (int)(__atomic_load_n(fl, __ATOMIC_RELAXED) & SH_FLAGS);
	case F_SETFL:
		__atomic_store_n(fl, (uint32_t)(arg & SH_FLAGS), __ATOMIC_RELAXED);
		return 0;
	case F_GETFD:
		return pp__file_flags(f) & PP_FD_CLOEXEC_FLAG ? FD_CLOEXEC : 0;
	case F_SETFD:
		if (arg & FD_CLOEXEC)
			atomic_fetch_or(&f->flags, PP_FD_CLOEXEC_FLAG);
		else
			atomic_fetch_and(&f->flags, ~PP_FD_CLOEXEC_FLAG);
		return 0;
	case F_GETPIPE_SZ:
		return (int)(__atomic_load_n(&c->max_usage, __ATOMIC_RELAXED) * pp__page_size);
	case F_SETPIPE_SZ:
		return set_size(e, arg);
	default:
		return -EINVAL;
	}
}

/* FIONREAD: the bytes in the ring. */
int pp__shared_fionread(struct pp_file *f, int *out)
{
	struct sh_end *e = end_of(f);
	struct sh_pipe *sp = e->sp;
	struct sh_ctrl *c = ctrl(sp);
	uint32_t head, tail;
	unsigned int sum = 0;
	int err;

	bool held = loan_held_here(sp);

	err = held ? 0 : side_lock(sp, &c->rd_lock);
	if (err)
		return err;
	view_settle(sp);
	tail = __atomic_load_n(&c->tail, __ATOMIC_RELAXED);
	head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
	err = check_bounds(sp, head, tail);
	for (uint32_t i = tail; !err && i != head; i++) {
		struct sh_slot *s = slot(sp, i);
		uint32_t end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
		uint32_t off = __atomic_load_n(&s->offset, __ATOMIC_RELAXED);

		err = slot_bounds(sp, where_base(slot_where(s)), off, end);
		if (!err)
			sum += end - off;
	}
	if (!held)
		side_unlock(&c->rd_lock);
	if (err)
		return err;
	*out = (int)sum;
	return 0;
}

/* FIONBIO sets the flag every copy of the end shares. */
void pp__shared_set_nonblock(struct pp_file *f, bool on)
{
	struct sh_end *e = end_of(f);
	uint32_t *fl = &ctrl(e->sp)->end_flags[e->side];

	if (on)
		__atomic_fetch_or(fl, (uint32_t)O_NONBLOCK, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(fl, ~(uint32_t)O_NONBLOCK, __ATOMIC_RELAXED);
}
