/* SPDX-License-Identifier: MIT */
/*
 * pipe.h - the pipe: its ring, its locks, its wait queues.  Included by
 * internal.h; nothing outside src/ sees it.
 *
 * Locks, in the order they are taken:
 *
 *   rd_mutex  the consumer lock: one consumer at a time (read, readv,
 *             vmsplice out, splice or tee out of the pipe, a read loan).
 *             Only its holder moves tail or touches a slot's offset and
 *             len once the slot is published.  A thread that reads alone
 *             may hold it by its bias for a read, up to any wait (wait.c:
 *             the consumer's bias).
 *   wr_mutex  the producer lock: one producer at a time (write, writev,
 *             vmsplice in, splice or tee into the pipe, pp_pipe_add_buf).
 *             Only its holder moves head or fills a slot.  A thread that
 *             writes alone may hold it by its bias instead, with no
 *             locked instruction (wait.c: the biased producer lock).
 *   mutex     the ring lock: the open-end counts and the event fds.
 *
 * A call that needs two pipes takes the input's rd_mutex, then the
 * output's wr_mutex; a resize takes both of its own pipe's, in that order;
 * nothing takes a wr_mutex and then an rd_mutex, and no one holds two of a
 * kind, so these locks cannot deadlock.  No side lock is held while
 * waiting for data or room: waiting happens with no lock at all
 * (pp__pipe_wait_data, pp__pipe_wait_room), which is what lets two threads
 * splice in opposite directions while others read and write.  The
 * exceptions are the kernel's own: a consumer holds rd_mutex across the
 * output endpoint's write (splice to a socket or a file), as Linux holds
 * pipe->mutex there, after waiting for the output's room with no lock; a
 * non-blocking splice into the pipe holds wr_mutex across the source's
 * (non-blocking) read, as Linux reads under pipe->mutex, so that what it
 * took always has room; and a read loan holds rd_mutex until
 * pp_read_done().
 *
 * So one reader and one writer share no lock: the writer publishes a slot
 * with a release store of head, the reader takes it with an acquire load
 * of head, and gives it back with a release store of tail that the
 * writer's acquire load of tail sees before it reuses the slot.  The one
 * slot both may touch at once is the last one, which the writer may extend
 * (the merge rule) while the reader drains it: see struct pp_slot.
 */
#ifndef PP_PIPE_H
#define PP_PIPE_H

#define PP_CACHELINE	64

struct pp_file;
struct pp__loan;
struct pp__lease;
struct pp_iov_iter;

/*
 * A ring slot: the buffer, and the word the merge rule turns on.
 *
 * `end` is 0 for a buffer nobody may append to.  For a mergeable one it is
 * SLOT_MERGE | (offset + len as the producer last published it), and it is
 * the only field of a published slot that the producer still writes:
 *
 *   producer (extend):  CAS end -> end | SLOT_WRITING   (acquire; fails once sealed)
 *                       copy the new bytes past the old end
 *                       store end + n                    (release: the bytes are visible)
 *   consumer (sync):    load end (acquire), len = end - offset
 *   consumer (seal):    CAS end -> end | SLOT_SEALED     only when offset == end
 *   consumer (drain):   CAS end -> end | SLOT_DRAINED    only when offset == end
 *                                                        (the last slot, below)
 *
 * A consumer frees or moves a drained mergeable slot only after sealing it,
 * and a seal cannot succeed while SLOT_WRITING is set, so no writer ever
 * copies into a page that has been let go (and recycled to some other
 * pipe).  A failed seal means bytes arrived: the consumer syncs and reads
 * on.  offset and len belong to the consumer once the slot is published.
 *
 * A reader that empties the last slot leaves it in the ring marked
 * SLOT_DRAINED instead of freeing it.  It holds no bytes and takes no
 * capacity (pp__pipe_occupancy does not count it, so the ring has room for
 * max_usage + 1 slots): to everyone it is as if the kernel had freed it.
 * But the next write, which in the kernel starts a fresh page in a fresh
 * slot, reopens it instead when the page is the pipe's alone:
 *
 *   producer (reopen):  CAS end -> end | SLOT_WRITING   (only if DRAINED, not SEALED)
 *                       offset = 0, copy from the page's start
 *                       store MERGE | n                  (release: offset and bytes)
 *
 * so message traffic moves neither head nor tail and allocates no page.
 * While DRAINED (or reopening), offset is not the consumer's: it syncs
 * len to 0 without reading it, and seals without comparing it.  A consumer
 * that finds a drained slot with other slots behind it seals and retires
 * it; nobody merges into a drained slot (the kernel's pipe is empty).
 */
#define SLOT_MERGE	0x80000000u
#define SLOT_SEALED	0x40000000u
#define SLOT_WRITING	0x20000000u
#define SLOT_DRAINED	0x10000000u
#define SLOT_END_MASK	0x0fffffffu

/*
 * Spare pages.  A reader that retires a page the pipe alone holds, with
 * slots still behind it, parks the page in `spare` of the slot it came
 * from, and pp_write takes it from there when it fills that slot on the
 * ring's next turn, instead of from the pipe's tmp_page cache.  Either
 * side stores to the slot's line at those moments anyway, so the page's
 * pointer crosses CPUs on a line that crosses already; tmp_page, stored
 * by both sides, was one more line crossing twice a message
 * (bench/pipe-threads -t msg 4096, split CPUs: 5.2 -> 5.9 GB/s).
 *
 *   consumer (park):    store spare = page    (release; the slot is the
 *                       consumer's until its store of tail hands it back)
 *   producer (take):    exchange spare -> NULL (acquire) as it fills the slot
 *   consumer (unpark):  exchange spare -> NULL on every slot it parked in
 *                       since it last did, once it empties the pipe, and
 *                       under both side locks (resize, the pipe's end)
 *
 * The producer's take could do with tail's ordering alone (it fills a
 * slot only after an acquire load of tail showed it free); the pair is
 * there for the unpark, which races with it.  A producer that brings its
 * own page (pp_pipe_add_buf, splice, vmsplice) leaves the spare where it
 * is, and a consumer does not park over it; the unpark finds it, as its
 * slot was parked in since the last unpark.  A consumer that retires
 * slots without consume() (splice's move) unparks the same way.  So an empty pipe has no
 * spare: an idle pipe keeps no more pages than the drained slot's, as
 * before (test/defect-idle-pipe-memory, test/pipe-spare-pages).
 */

/*
 * One slot per cache line.  Packed (56 bytes), slot i's end word shared a
 * line with slot i + 1's buffer, so a producer filling the next slot and
 * a consumer syncing the current one took that line from each other
 * (bench/pipe-threads, split CPUs: 64 B messages 210-236 -> 246-331 MB/s,
 * a 64 B round trip 1545-1856 -> 1278-1374 ns, five A/B pairs).
 */
struct pp_slot {
	_Alignas(PP_CACHELINE) struct pp_buf buf;
	unsigned int end;		/* atomic: see above */
	void *spare;			/* atomic: a page parked for this slot's next fill (below) */
};
_Static_assert(sizeof(struct pp_slot) == PP_CACHELINE, "a slot is one cache line");

/*
 * The slot array, with its size, so that a glance without locks
 * (pp__pipe_occupancy) indexes the array it loaded and no other.  A resize
 * (pipe_ctl.c) replaces it but frees nothing: the old array goes on the
 * pipe's list of retired ones, to be reused by a later resize to the same
 * size or freed with the pipe, so a waiter that loaded it long ago still
 * reads memory that is there.  Ring sizes are powers of two, so the list
 * holds at most one array per size: less than twice the largest.
 */
struct pp__ring {
	struct pp__ring *retired;	/* next on the pipe's list (under both side locks) */
	void *mem;			/* what calloc or mmap gave (pp__ring_free) */
	unsigned int size;
	struct pp_slot slot[];
};

/*
 * A side lock (rd_mutex, wr_mutex): a futex word of our own, cheaper than
 * a pthread mutex on the path every read and write takes (wait.c).  Zeroed
 * memory is a free lock; it needs no init and no destroy.
 */
struct pp_side_lock {
	unsigned int state;		/* atomic: 0 free, else SIDE_* bits (wait.c) */
};

#define SIDE_HELD	1u
#define SIDE_WAITERS	2u		/* held, maybe sleepers */
#define SIDE_NOREF	4u		/* held by a pp_read or pp_write with no file reference */

/*
 * A side lock's bias (wait.c: the biased side locks): one thread that
 * takes the lock alone holds it with plain stores.  owner, streak, last
 * and after change under the lock taken the ordinary way; fast under the
 * lock, however taken.
 */
struct pp_bias {
	/* Every take looks at these. */
	const void *owner;		/* atomic: the owner's record (wait.c: struct bias_rec), or NULL */
	unsigned int revoke;		/* atomic: 1, the owner must take the ordinary way */
	bool fast;			/* the holder came the fast way */
	bool nobias;			/* atomic: the end is closing: never again */
	bool used;			/* atomic: a bias was ever set (pp_close must revoke) */
	/* Ordinary takes by a thread that is not the owner, and revokes. */
	const void *last;		/* the last ordinary taker, and how many times */
	unsigned int streak;		/*   in a row it took the lock */
	unsigned int after;		/* takes in a row before a bias; doubles at each revoke */
	unsigned long revokes;		/* atomic: biases revoked, for tests */
};

/*
 * Which of a side's waiters on a shared CPU yields and which nap (wait.c).
 * Every field is atomic and only chooses: a wrong choice costs time, never
 * a wake-up.
 */
struct pp_yielder {
	unsigned int holder;		/* the yielding thread's token, 0 if none */
	unsigned int last;		/* the token of the one that held it last */
	unsigned int nappers;		/* threads napping on this side */
	long long since;		/* when `last` began to hold it, turn after turn */
	unsigned long turns;		/* times a yielder stood aside for a napper: for tests */
};

struct pp_pipe {
	/*
	 * Read-mostly: changed only under both side locks (resize) or once.
	 */
	struct pp__ring *ring;		/* atomic: for glances; lock holders use: */
	struct pp_slot *slots;		/*   ring->slot */
	unsigned int ring_size;		/*   ring->size, a power of two above max_usage: see SLOT_DRAINED */
	struct pp__ring *retired;	/* arrays a resize replaced, kept for glances */
	unsigned int max_usage;		/* slots producers may fill; atomic loads */
	/*
	 * The private kernel pipe of kernel-resident buffers (kbuf.c): made
	 * by a producer under wr_mutex, seen by consumers through the
	 * buffers that point to it, freed with the pipe.
	 */
	struct pp__kpipe *kpipe;

	/* The ring lock's fields. */
	pthread_mutex_t mutex;
	unsigned int readers, writers;	/* open ends; atomic, changed under mutex */
	unsigned int files;		/* ends still allocated; the pipe goes with the last */
	int rd_event_fd, wr_event_fd;	/* pp_file_event_fd(), under mutex */
	bool rd_event_on, wr_event_on;
	bool events;			/* atomic: an event fd exists, changes must update it */

	/*
	 * Each side's lock, the index it publishes and the wait queue its
	 * peer wakes each sit on a line of their own: a reader taking its
	 * lock does not pull in the line the writer reads tail from, and a
	 * writer's wake-up check (a read-modify-write of rd_sleepers, each
	 * write) does not take away the line the reader's tail is on.
	 *
	 * rd_wait is a futex word bumped by each wake-up; rd_sleepers counts
	 * the threads asleep on it, rd_woken says a wake-up is on its way to
	 * them (so a writer on a busy pipe makes one system call, not one per
	 * write, while the woken reader waits for its CPU).  Where each side
	 * last ran (rd_cpu, wr_cpu, below) tells a waiting peer to spin or
	 * yield.
	 */
	/*
	 * What every read touches, on one line: the lock, the quick read's
	 * view, head as last seen, and the bias's hot half (struct pp_bias).
	 */
	_Alignas(PP_CACHELINE) struct pp_side_lock rd_mutex;
	/*
	 * The quick read's view of the slot at tail (pipe.c: read_in_tail),
	 * under rd_mutex: its page, how far it has been read (rd_at, not yet
	 * stored to the slot's offset) and how far it was seen filled
	 * (rd_end).  Every consumer but the quick read settles it as it takes
	 * the lock (pp__pipe_settle_read), so only the quick read ever finds
	 * the slot's offset behind.  rd_page NULL: no view.
	 */
	const char *rd_page;
	unsigned int rd_at, rd_end;
	/*
	 * Consumer-private, under rd_mutex: head as last loaded (never ahead
	 * of head; a resize resets it), so that a read of slots already seen
	 * published does not load the line the producer stores head to; and
	 * where this side last parked a page (rd_parked: it may still be
	 * there), see struct pp_slot's spare.
	 */
	unsigned int rd_head_seen;
	struct pp_bias rd_bias;		/* wait.c: pp__pipe_lock_reader_fast */
	struct pp__loan *loan;		/* the read loan in progress (zerocopy.c), under rd_mutex */
	bool loan_active;		/* atomic: a loan holds rd_mutex */
	pthread_t loan_owner;		/* atomic: the thread that holds it, while loan_active */
	unsigned int rd_park;
	bool rd_parked;
	struct pp__lease *lease;	/* the write lease in progress (zerocopy.c), under wr_mutex */
	unsigned long rd_pulls;		/* reads the pull served (pipe.c), under rd_mutex: for tests */

	_Alignas(PP_CACHELINE) unsigned int tail;	/* free running; release store by the consumer */

	_Alignas(PP_CACHELINE) unsigned int rd_wait;
	unsigned int rd_sleepers;
	struct pp_yielder rd_yielder;	/* which waiting reader yields its CPU (wait.c) */
	bool rd_woken;

	/* The producer's side, likewise. */
	_Alignas(PP_CACHELINE) struct pp_side_lock wr_mutex;
	/*
	 * Producer-private, under wr_mutex: tail as last loaded, never ahead
	 * of tail (a resize resets it).  pp_write counts room from it and
	 * loads tail, the line every read stores to, only when it shows none.
	 */
	unsigned int wr_tail_seen;
	struct pp_bias wr_bias;		/* wait.c: the biased producer lock */

	_Alignas(PP_CACHELINE) unsigned int head;	/* free running; release store by the producer */

	_Alignas(PP_CACHELINE) unsigned int wr_wait;
	unsigned int wr_sleepers;
	struct pp_yielder wr_yielder;
	bool wr_woken;
	/*
	 * Pages a consumer that emptied the pipe kept for writers waiting in
	 * pipe_write for room (pipe.c: pages_keep), a chain through each
	 * page's first word, and how many such writers there are.
	 */
	unsigned int wr_room_waiters;
	void *wr_kept;			/* atomic */
	unsigned long wr_kept_chains;	/* chains handed over so far: for tests */

	/*
	 * Where each side last ran, for the peer's choice between spinning and
	 * yielding: stored only when it changes, and read by the peer at each
	 * wait, so on a line of its own and not beside a lock the owner writes
	 * at every call (that would move the line across CPUs twice a message).
	 */
	_Alignas(PP_CACHELINE) int rd_cpu;
	int wr_cpu;

	/*
	 * The handoff (pipe.c): a reader about to wait on an empty pipe offers
	 * its buffer here, and a writer that finds the pipe still empty copies
	 * into it directly.  ho_state is the only word both write; the rest is
	 * written by whoever holds the state it publishes.
	 */
	_Alignas(PP_CACHELINE) unsigned int ho_state;	/* PP_HO_*: atomic */
	size_t ho_total;		/* the reader's request, from BUSY to OFFERED */
	struct pp_iov_iter *ho_it;	/* its buffer, under OFFERED and CLAIMED */
	size_t ho_got;			/* bytes the writer gave, under DONE */
	/*
	 * The pull (pipe.c), the handoff's mirror: a writer about to wait on a
	 * full pipe offers the rest of its write here, and a reader that
	 * finds the pipe empty copies from it directly.  wo_state is the only
	 * word both write; the rest belongs to whoever holds the state.
	 */
	unsigned int wo_state;		/* PP_WO_*: atomic */
	struct pp_iov_iter *wo_it;	/* the writer's bytes, under OFFERED and CLAIMED */
	size_t wo_left;			/* how many of them are left */
	size_t wo_got;			/* how many readers took, for the writer */

	/* Pages kept for the next write: atomic, so producers need no lock. */
	_Alignas(PP_CACHELINE) _Atomic(void *) tmp_page[PP_TMP_PAGES];
};

struct pp__ring *pp__ring_alloc(unsigned int size);
void pp__ring_free(struct pp__ring *r);
void pp__pipe_clear_spares(struct pp_pipe *p);
void pp__pipe_unpark_if_empty(struct pp_pipe *p);

enum {
	PP_HO_NONE,		/* no offer */
	PP_HO_BUSY,		/* a reader is filling in its offer */
	PP_HO_OFFERED,		/* a waiting reader's buffer is up for a writer to fill */
	PP_HO_CLAIMED,		/* a writer is copying into it, or deciding not to */
	PP_HO_DONE,		/* filled: ho_got bytes, for the reader to take */
};

enum {
	PP_WO_NONE,		/* no offer */
	PP_WO_BUSY,		/* its writer is filling it in or taking it back */
	PP_WO_OFFERED,		/* a waiting writer's bytes are up for readers to take */
	PP_WO_CLAIMED,		/* a reader is copying from them */
};

static inline unsigned int pp__pipe_head(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->head, __ATOMIC_ACQUIRE);
}

static inline unsigned int pp__pipe_tail(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->tail, __ATOMIC_ACQUIRE);
}

static inline unsigned int pp__pipe_max_usage(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->max_usage, __ATOMIC_RELAXED);
}

static inline unsigned int pp__pipe_readers(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->readers, __ATOMIC_ACQUIRE);
}

static inline unsigned int pp__pipe_writers(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->writers, __ATOMIC_ACQUIRE);
}

static inline struct pp_slot *pp__pipe_slot(const struct pp_pipe *p, unsigned int index)
{
	return &p->slots[index & (p->ring_size - 1)];
}

/*
 * Slots holding bytes.  A glance without locks, exact for a side holding
 * its own lock about its own index; a waiter re-checks after any change.
 * A drained slot (SLOT_DRAINED: emptied, kept for the next write) takes no
 * room; it can only be the one at tail, and retiring it moves tail past
 * it.  A waiter holds no lock, so the slot it reads may belong to an array
 * a resize has since replaced, or to a later turn of the ring: a stale
 * answer, never a wild read (struct pp__ring), and the change that made it
 * stale wakes the waiter to look again.
 *
 * Reading the slot itself, rather than a pipe-wide mark of the drained
 * slot, keeps message traffic on the slot's line and the page's: a mark
 * both sides store at every message would be a third line crossing CPUs
 * twice per message.
 */
static inline bool pp__slot_drained(const struct pp_pipe *p, unsigned int index)
{
	const struct pp__ring *r = __atomic_load_n(&p->ring, __ATOMIC_ACQUIRE);

	return __atomic_load_n(&r->slot[index & (r->size - 1)].end, __ATOMIC_ACQUIRE) &
	       SLOT_DRAINED;
}

static inline unsigned int pp__pipe_occupancy(const struct pp_pipe *p)
{
	unsigned int tail = pp__pipe_tail(p), head = pp__pipe_head(p);

	return head - tail - (head != tail && pp__slot_drained(p, tail));
}

static inline bool pp__pipe_empty(const struct pp_pipe *p)
{
	return pp__pipe_occupancy(p) == 0;
}

/*
 * Free slots for a producer.  A drained slot adds one, so the slot at tail
 * is looked at only when head and tail alone show none: that line is the
 * one the consumer is working on.
 */
static inline int pp__pipe_room(const struct pp_pipe *p)
{
	unsigned int tail = pp__pipe_tail(p), head = pp__pipe_head(p);
	unsigned int used = head - tail, max = pp__pipe_max_usage(p);

	if (used < max)
		return (int)(max - used);
	return (int)(max - used + (used && pp__slot_drained(p, tail)));
}

static inline bool pp__pipe_full(const struct pp_pipe *p)
{
	return pp__pipe_room(p) <= 0;
}

/*
 * Rounded up to a power of two with room for one drained slot, up to 64 Ki
 * slots (a 256 MiB pipe of 4 KiB pages); a larger ring would double its
 * slot array for that one slot, so it has none and never keeps a drained
 * slot (pp__pipe_can_drain).
 */
#define PP_DRAIN_MAX_SLOTS	(1u << 16)

static inline unsigned int pp__ring_size_for(unsigned int max_usage)
{
	if (max_usage >= PP_DRAIN_MAX_SLOTS)
		return max_usage;
	return 2u << (31 - __builtin_clz(max_usage));
}

static inline bool pp__pipe_can_drain(const struct pp_pipe *p)
{
	return p->ring_size > p->max_usage;
}

static inline struct pp_buf *pp__pipe_buf(const struct pp_pipe *p, unsigned int index)
{
	return &pp__pipe_slot(p, index)->buf;
}

/*
 * Consumer: bring len up to what the producer has merged so far.  A drained
 * slot holds nothing, and its offset may be the producer's to rewrite
 * (pipe.c: slot_reopen), so it is not read.
 */
static inline void pp__slot_sync(struct pp_slot *s)
{
	unsigned int end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);

	if (end & SLOT_DRAINED)
		s->buf.len = 0;
	else if (end & SLOT_MERGE)
		s->buf.len = (end & SLOT_END_MASK) - s->buf.offset;
}

bool pp__slot_seal(struct pp_slot *s);

/*
 * Consumer, rd_mutex just taken: store what quick reads took off the tail
 * slot to its offset, so its offset and len are what was really read.  The
 * slot is still at tail (only consumers move tail, and each settles first)
 * and still holds bytes past them (read_in_tail leaves at least one), so
 * it was neither drained nor retired meanwhile.
 */
static inline void pp__pipe_settle_read(struct pp_pipe *p)
{
	if (p->rd_page) {
		struct pp_slot *s = pp__pipe_slot(p, p->tail);

		s->buf.offset = p->rd_at;
		p->rd_page = NULL;
		pp__slot_sync(s);
	}
}

/* A fresh slot's merge word (struct pp_slot): its end if writes may merge into it. */
static inline void pp__slot_set_end(struct pp_slot *s, unsigned int flags, unsigned int end)
{
	/* Atomic: a waiter may glance at a slot it found at tail long ago. */
	__atomic_store_n(&s->end, (flags & PP_BUF_FLAG_CAN_MERGE) ? SLOT_MERGE | end : 0,
			 __ATOMIC_RELAXED);
}

/*
 * Producer side (wr_mutex held, free slots counted): fill a slot at or past
 * head whole, merge word included; slots filled are published together,
 * in order, by pp__pipe_publish (pp__pipe_push: one slot, at once).
 */
static inline void pp__pipe_fill(struct pp_pipe *p, unsigned int index, const struct pp_buf *buf)
{
	struct pp_slot *s = pp__pipe_slot(p, index);

	s->buf = *buf;
	pp__slot_set_end(s, buf->flags, buf->offset + buf->len);
}

/*
 * pp__pipe_fill() for write()'s anonymous page, its fields stored straight
 * into the slot: a pp_buf built on the stack and copied in 16-byte pieces
 * is loaded across two smaller stores, which cannot be forwarded, so the
 * load waits for the store buffer to drain, and the page copy just before
 * it left thousands of bytes of stores there (a seventh of a 4 KiB
 * message's time on one CPU).
 */
static inline void pp__pipe_fill_anon(struct pp_pipe *p, unsigned int index, void *page,
				      unsigned int len, unsigned int flags)
{
	struct pp_slot *s = pp__pipe_slot(p, index);

	s->buf.page = page;
	s->buf.offset = 0;
	s->buf.len = len;
	s->buf.ops = &pp_anon_buf_ops;
	s->buf.flags = flags;
	s->buf.private = NULL;
	s->buf.index = 0;
	pp__slot_set_end(s, flags, len);
}

/*
 * Publishes the slots filled up to head: pairs with the consumer's acquire
 * load of head, which then sees each of them whole.
 */
static inline void pp__pipe_publish(struct pp_pipe *p, unsigned int head)
{
	__atomic_store_n(&p->head, head, __ATOMIC_RELEASE);
}

static inline void pp__pipe_push(struct pp_pipe *p, const struct pp_buf *buf)
{
	pp__pipe_fill(p, p->head, buf);
	pp__pipe_publish(p, p->head + 1);
}

/*
 * Buffers a consumer took out of the ring, to be released once it holds no
 * lock: a release may run a pp_write_ref() callback, which may use the
 * pipe.  Anonymous pages are let go at once (their release calls nothing).
 * Past PP_DEAD_MAX the list goes on the heap; only if that fails does a
 * consumer stop early (`full`), with a short count.
 */
#define PP_DEAD_MAX	64u

struct pp__dead {
	unsigned int nr, cap;
	bool full;
	struct pp_buf *more;		/* heap, once buf[] is used up */
	struct pp_buf buf[PP_DEAD_MAX];
};

static inline void pp__dead_init(struct pp__dead *dead)
{
	dead->nr = dead->cap = 0;
	dead->full = false;
	dead->more = NULL;
}

/*
 * Consumers (rd_mutex held).  pp__pipe_snapshot copies up to max slots from
 * the tail covering want bytes (stopping after a packet if packets);
 * pp__pipe_consume takes `bytes` from the front, seals and retires emptied
 * slots into dead, wakes producers; it stops early only when dead is full,
 * and returns the bytes it took.  pp__pipe_release_dead runs after every
 * lock is let go.
 */
unsigned int pp__pipe_snapshot(struct pp_pipe *p, struct pp_buf *snap, unsigned int max,
			       size_t want, bool packets);
size_t pp__pipe_consume(struct pp_pipe *p, size_t bytes, bool packets, struct pp__dead *dead);
/* The same, leaving an emptied last slot with room in the ring (SLOT_DRAINED). */
size_t pp__pipe_consume_keep(struct pp_pipe *p, size_t bytes, struct pp__dead *dead);
void pp__pipe_release_dead(struct pp_pipe *p, struct pp__dead *dead);
void pp__pipe_release_bufs(struct pp_pipe *p, struct pp_buf *bufs, unsigned int n);

/* wait.c: side locks, wait queues, wake-ups.  wait_init: before the first pipe. */
void pp__wait_init(void);
int  pp__pipe_lock_consumer(struct pp_pipe *p, bool nonblock);
int  pp__pipe_lock_reader(struct pp_pipe *p, bool nonblock);
/*
 * For FIONREAD and resize, which the holder of a read loan may call between
 * pp_read_lend() and pp_read_done(): false if this thread holds it already.
 */
bool pp__pipe_lock_consumer_ctl(struct pp_pipe *p);
void pp__pipe_unlock_consumer(struct pp_pipe *p);
void pp__pipe_lock_producer(struct pp_pipe *p);
void pp__pipe_unlock_producer(struct pp_pipe *p);
/*
 * pp_write's way in: true if wr_mutex is now held by the fast path (the
 * calling thread is the lock's biased owner); false, nothing held.
 */
bool pp__pipe_lock_producer_fast(struct pp_pipe *p);
/*
 * The write end is closing: no fast path and no holder without a reference
 * (SIDE_NOREF) from now on, none in progress.
 */
void pp__pipe_producer_unbias(struct pp_pipe *p);
/*
 * pp__pipe_read's way in for its quick read: true if rd_mutex is now held
 * by the fast path (unlock with pp__pipe_unlock_consumer); false, nothing
 * held.  consumer_unbias: the read end is closing, as above.
 */
bool pp__pipe_lock_reader_fast(struct pp_pipe *p);
/*
 * pp_read's and pp_write's ordinary way in when the lock is free: true if
 * it is now held, marked SIDE_NOREF (the caller takes no reference, and one
 * before anything that lets go of the lock); false, nothing held.
 */
bool pp__pipe_trylock_reader_noref(struct pp_pipe *p);
bool pp__pipe_trylock_producer_noref(struct pp_pipe *p);
void pp__pipe_consumer_unbias(struct pp_pipe *p);
/*
 * Wait with no lock held.  wait_data: 1 data, 0 EOF (no writers), -EAGAIN.
 * wait_room: 0 a free slot, -EPIPE (no readers; SIGPIPE is owed), -EAGAIN.
 * Either may return early: the caller re-checks under its lock.
 */
int  pp__pipe_wait_data(struct pp_pipe *p, bool nonblock);
/* The same, prefetching hint while it spins: see pp__pipe_read's caller. */
int  pp__pipe_wait_data_at(struct pp_pipe *p, bool nonblock, const void *hint);
int  pp__pipe_wait_room(struct pp_file *out, bool nonblock);
/* Blocking wait_room that owes no SIGPIPE: 0, or -EPIPE for the caller to raise. */
int  pp__pipe_wait_room_quiet(struct pp_pipe *p);
/* The writer taking back a pull offer: until no reader is copying from it (pipe.c). */
void pp__pipe_wait_pull(struct pp_pipe *p);
/* The reader that made a handoff offer: until it is filled, or readable (pipe.c). */
void pp__pipe_wait_handoff(struct pp_pipe *p);
/*
 * Two-pipe calls (splice.c, tee.c): wait for input data and output room with
 * no lock held (1 ready, 0 input EOF, -errno), then take the input's
 * consumer lock and the output's producer lock, in that order.
 */
int  pp__pipe_prep_two(struct pp_file *in, struct pp_file *out, bool nonblock);
int  pp__pipe_lock_two(struct pp_pipe *ip, struct pp_pipe *op, bool nonblock);
void pp__pipe_unlock_two(struct pp_pipe *ip, struct pp_pipe *op);
/* After publishing (readers) or freeing slots (writers); any lock or none. */
void pp__pipe_do_wake_readers(struct pp_pipe *p);
void pp__pipe_wake_writers(struct pp_pipe *p);
extern int pp__asym_wake;	/* wait.c: 1, wake-ups are asymmetric */

/*
 * Every write ends here, so the common case is inline: with asymmetric
 * wake-ups (wait.c: wake()) a plain load of the sleeper count after the
 * caller's stores, ordered against the compiler, is all the protocol asks
 * of a waker, and with no sleeper and no event fd there is nothing to do.
 * Otherwise wait.c does it all, and loads the count again, later still.
 * (bench/pipe-threads -t msg 64, same CPU: 1907 -> 1990 MB/s, a test build
 * that skipped the call the same way.)
 */
static inline void pp__pipe_wake_readers(struct pp_pipe *p)
{
	if (__builtin_expect(__atomic_load_n(&pp__asym_wake, __ATOMIC_RELAXED) == 1, 1)) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&p->rd_sleepers, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&p->events, __ATOMIC_ACQUIRE))
			return;
	}
	pp__pipe_do_wake_readers(p);
}
/* Unconditional, for a close or a resize that changes what waiters wait for. */
void pp__pipe_wake_all(struct pp_pipe *p);
void pp__pipe_update_events(struct pp_pipe *p);		/* under mutex */

/* Pipe ends (pipe.c, pipe_ctl.c). */
extern const struct pp_file_ops pp__pipe_read_ops, pp__pipe_write_ops;
ssize_t pp__pipe_readv(struct pp_file *f, const struct iovec *iov, int iovcnt);
ssize_t pp__pipe_read(struct pp_file *f, const struct iovec *iov, int iovcnt, bool nonblock);
ssize_t pp__pipe_writev(struct pp_file *f, const struct iovec *iov, int iovcnt);
short   pp__pipe_poll(struct pp_file *f, short events);
int     pp__pipe_release(struct pp_file *f);
int     pp__pipe_fcntl(struct pp_file *f, int cmd, unsigned long arg);
ssize_t pp__pipe_set_size(struct pp_pipe *p, unsigned long bytes);
int     pp__pipe_fionread(struct pp_file *f, int *out);
int     pp__pipe_event_fd(struct pp_file *f);
ssize_t pp__pipe_add_buf(struct pp_file *f, const struct pp_buf *buf, unsigned int flags);
bool    pp__pipe_nonblock(const struct pp_file *f, unsigned int splice_flags);
/*
 * -EPIPE, and SIGPIPE owed to the calling thread unless the end asked for
 * none: it is raised by the public entry point after every lock is let go
 * (pp__ret), so a handler may use the pipe or siglongjmp out.
 */
int     pp__pipe_epipe(const struct pp_file *f);
extern __thread bool pp__sigpipe_owed __attribute__((tls_model("initial-exec")));
void    pp__raise_sigpipe(void);

#endif /* PP_PIPE_H */
