// SPDX-License-Identifier: MIT
/*
 * pipe.c - the ring and its hot path: pp_pipe2, read, write, close.
 *
 * A pagepipe is a power-of-two ring of slots with free-running head and
 * tail (fs/pipe.c since 5.5).  Producers add whole slots at the head;
 * consumers take bytes from the tail.  One writer and one reader share no
 * lock: see pipe.h for the locks, the publication of slots and the merge
 * word of the last slot; wait.c for sleeping and waking.
 *
 * Read this file top to bottom: pipe_write() and pp__pipe_read() are all
 * of the byte path.  Resize, poll, fcntl, FIONREAD and event fds are in
 * pipe_ctl.c.
 */
#include "internal.h"

#include <sys/mman.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t attr;

	pthread_mutexattr_init(&attr);
	/* Every lock here is held for copies of a few pages at most: spin first. */
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
}

/*
 * Rings from this size up are mapped, not calloc'd: a huge ring's array
 * must stay untouched memory until traffic reaches it (test/resize-huge),
 * and calloc leaves it so only where it maps (glibc above 128 KiB), not
 * under TSan, whose calloc zeroes what it returns: `pagepipe buffer
 * --size 1T` (a 16 GiB slot array) took 108 s and 16 GiB resident there,
 * and test/cli-buffer.sh ran past its timeout.
 */
#define PP_RING_MAP_MIN		(128u << 10)

static size_t ring_bytes(unsigned int size)
{
	return sizeof(struct pp__ring) + (size_t)size * sizeof(struct pp_slot);
}

struct pp__ring *pp__ring_alloc(unsigned int size)
{
	size_t bytes = ring_bytes(size);
	struct pp__ring *r;
	void *mem;

	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	if (bytes >= PP_RING_MAP_MIN) {
		/* Page-aligned, so on a line (struct pp_slot is one). */
		mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			return NULL;
		r = mem;
	} else {
		/* A line to spare, so that the ring starts on one. */
		mem = calloc(1, bytes + PP_CACHELINE);
		if (!mem)
			return NULL;
		r = (struct pp__ring *)(((uintptr_t)mem + PP_CACHELINE - 1) &
					~(uintptr_t)(PP_CACHELINE - 1));
	}
	r->mem = mem;
	r->size = size;
	return r;
}

void pp__ring_free(struct pp__ring *r)
{
	size_t bytes;

	if (!r)
		return;
	bytes = ring_bytes(r->size);
	if (bytes >= PP_RING_MAP_MIN)
		munmap(r->mem, bytes);
	else
		free(r->mem);
}

/* A chain of free pages, linked through each one's first word. */
static inline void chain_push(void **chain, void *page)
{
	*(void **)page = *chain;
	*chain = page;
}

static inline void *chain_pop(void **chain)
{
	void *page = *chain;

	if (page)
		*chain = *(void **)page;
	return page;
}

static void chain_free(struct pp_pipe *p, void *chain)
{
	void *page;

	while ((page = chain_pop(&chain)))
		pp__page_free(p, page);
}

/* A parked page goes back (pipe.h: spare pages), or onto *chain if one is given. */
static void slot_unpark(struct pp_pipe *p, struct pp_slot *s, void **chain)
{
	void *page;

	/* A plain load first: most slots swept have had their page taken. */
	if (!__atomic_load_n(&s->spare, __ATOMIC_RELAXED))
		return;
	page = __atomic_exchange_n(&s->spare, NULL, __ATOMIC_ACQUIRE);
	if (page && chain)
		chain_push(chain, page);
	else if (page)
		pp__page_free(p, page);
}

/*
 * Consumer, retiring a page the pipe alone holds while slots remain
 * (rd_mutex held): park it in its own slot for the producer's next fill
 * there.  False: someone holds it too, or the slot has one already (put
 * there a turn ago and not taken: a producer that brings its own page
 * filled the slot since); release it as usual.
 */
static bool page_park(struct pp_pipe *p, struct pp_slot *s, unsigned int index, void *page)
{
	if (__atomic_load_n(&s->spare, __ATOMIC_RELAXED) || !pp__page_only_ref(page))
		return false;
	/* Nobody else stores here now: the producer fills this slot only after tail passes it. */
	__atomic_store_n(&s->spare, page, __ATOMIC_RELEASE);
	if (!p->rd_parked) {
		p->rd_park = index;
		p->rd_parked = true;
	}
	return true;
}

/*
 * Consumer, having emptied the pipe (rd_mutex held, head fresh), or both
 * side locks held: every page parked since the last unpark goes back.
 */
static void pages_unpark_to(struct pp_pipe *p, unsigned int head, void **chain)
{
	unsigned int from = p->rd_park;

	if (!p->rd_parked)
		return;
	p->rd_parked = false;
	if (head - from > p->ring_size)
		from = head - p->ring_size;	/* each slot once */
	for (unsigned int i = from; i != head; i++)
		slot_unpark(p, pp__pipe_slot(p, i), chain);
}

static void pages_unpark(struct pp_pipe *p, unsigned int head)
{
	pages_unpark_to(p, head, NULL);
}

/*
 * Consumer, having emptied the pipe (rd_mutex held, head fresh): what is
 * parked goes back, or, while writers wait in pipe_write for room, to
 * them.  On one CPU a pipe that fills and empties every turn (messages of
 * the pipe's size) would otherwise hand its ring's pages through this
 * thread's cache, the pool and the writer's cache each turn, a mutex per
 * few pages (bench/pipe-threads -t msg 65536, same CPU: 5% of the time).
 * The kept pages go to the writers as a chain, not left in their slots, so
 * that nothing holds them once the writers are gone (an idle pipe keeps
 * none): a waiting writer takes the chain when its wait ends, whatever
 * ended it, and frees what its write did not use.
 *
 *   consumer: exchange wr_kept = chain; load wr_room_waiters: if 0, take
 *             the chain back (exchange wr_kept = NULL) and free it
 *   writer:   wr_room_waiters - 1; load wr_kept: if set, exchange it NULL
 *
 * all seq_cst.  A consumer that read a waiter still counted stored its
 * chain before that writer's decrement, and so before the writer's load,
 * which sees the chain (or a later one); one that read none takes back
 * what it stored, unless a writer already has.  So when the last waiter
 * is gone and the consumer has checked, wr_kept is empty.  A chain that
 * finds another still there (its writer not yet out of its wait) frees
 * the older one.  The count is a hint for the first glance: a writer
 * counted late loses the pages (they go back as before), never a page.
 * A writer that leaves its wait by siglongjmp stays counted, and then
 * one chain at most (a ring's pages) waits for the pipe's end or a
 * resize: slower and fatter, never stuck, as wait.c's yielder word.
 */
static void pages_keep(struct pp_pipe *p, unsigned int head)
{
	void *chain = NULL;

	if (!p->rd_parked)
		return;
	if (!__atomic_load_n(&p->wr_room_waiters, __ATOMIC_RELAXED)) {
		pages_unpark(p, head);
		return;
	}
	pages_unpark_to(p, head, &chain);
	if (!chain)
		return;
	/* Under rd_mutex, read once the pipe is gone: for tests. */
	__atomic_store_n(&p->wr_kept_chains, p->wr_kept_chains + 1, __ATOMIC_RELAXED);
	chain = __atomic_exchange_n(&p->wr_kept, chain, __ATOMIC_SEQ_CST);
	chain_free(p, chain);
	if (!__atomic_load_n(&p->wr_room_waiters, __ATOMIC_SEQ_CST))
		chain_free(p, __atomic_exchange_n(&p->wr_kept, NULL, __ATOMIC_SEQ_CST));
}

/* A writer whose wait for room ended: the pages kept for it, if any. */
static void *pages_kept(struct pp_pipe *p)
{
	__atomic_fetch_sub(&p->wr_room_waiters, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&p->wr_kept, __ATOMIC_SEQ_CST))
		return NULL;
	return __atomic_exchange_n(&p->wr_kept, NULL, __ATOMIC_SEQ_CST);
}

/* Both side locks held, or the pipe's last end gone. */
void pp__pipe_clear_spares(struct pp_pipe *p)
{
	pages_unpark(p, p->head);
	chain_free(p, __atomic_exchange_n(&p->wr_kept, NULL, __ATOMIC_ACQ_REL));
}

/*
 * A consumer that retires slots itself rather than through consume()
 * (splice.c, a pipe-to-pipe move), rd_mutex held: if that emptied the
 * pipe, what was parked goes back, or to waiting writers, as consume()
 * does.
 */
void pp__pipe_unpark_if_empty(struct pp_pipe *p)
{
	if (p->rd_parked && pp__pipe_empty(p))
		pages_keep(p, pp__pipe_head(p));
}

/*
 * Producer, wr_mutex held, slot `index` free: a page to fill it with, from
 * the pages kept for this writer (*kept), the slot's parked one, or new.
 */
static void *page_for_slot(struct pp_pipe *p, unsigned int index, void **kept)
{
	struct pp_slot *s = pp__pipe_slot(p, index);
	void *page = chain_pop(kept);

	if (page)
		return page;

	/*
	 * A plain load first, though the fill stores to this line next: a
	 * locked exchange waits for the store buffer to drain, which the
	 * last page's copy just filled, and a pipe that emptied since has
	 * unparked its pages (consume()), so most slots hold none.
	 */
	if (__atomic_load_n(&s->spare, __ATOMIC_RELAXED))
		page = __atomic_exchange_n(&s->spare, NULL, __ATOMIC_ACQUIRE);
	return page ? page : pp__page_alloc(p);
}

static struct pp_pipe *pipe_alloc(void)
{
	struct pp_pipe *p;

	pp__wait_init();
	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	/* Cache-line aligned: see the layout of struct pp_pipe. */
	p = aligned_alloc(PP_CACHELINE, (sizeof(*p) + PP_CACHELINE - 1) & ~(size_t)(PP_CACHELINE - 1));
	if (!p)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->ring = pp__ring_alloc(pp__ring_size_for(PP_DEF_SLOTS));
	if (!p->ring) {
		free(p);
		return NULL;
	}
	p->slots = p->ring->slot;
	p->ring_size = p->ring->size;
	mutex_init(&p->mutex);
	p->max_usage = PP_DEF_SLOTS;
	p->readers = p->writers = 1;
	p->files = 2;
	p->rd_event_fd = p->wr_event_fd = -1;
	p->rd_cpu = p->wr_cpu = -1;
	return p;
}

static void pipe_free(struct pp_pipe *p)
{
	for (unsigned int s = p->tail; s != p->head; s++) {
		struct pp_buf *buf = pp__pipe_buf(p, s);

		if (buf->ops)
			pp__buf_release(p, buf);
	}
	pp__pipe_clear_spares(p);
	pp__pipe_free_tmp_pages(p);
	pp__kpipe_free(p->kpipe);
	pp__loan_free(p->loan);
	pp__lease_free(p->lease);
	if (p->rd_event_fd >= 0)
		close(p->rd_event_fd);
	if (p->wr_event_fd >= 0)
		close(p->wr_event_fd);
	pthread_mutex_destroy(&p->mutex);
	while (p->retired) {
		struct pp__ring *r = p->retired;

		p->retired = r->retired;
		pp__ring_free(r);
	}
	pp__ring_free(p->ring);
	free(p);
}

PP_EXPORT int pp_pipe2(struct pp_file *ends[2], int flags)
{
	const int valid = O_NONBLOCK | O_DIRECT | O_CLOEXEC | PP_O_NOSIGPIPE | PP_O_SHARED;
	struct pp_file *r, *w;
	struct pp_pipe *p;
	int keep;

	if (!ends)
		return (int)pp__ret(-EFAULT);
	if (flags & ~valid)
		return (int)pp__ret(-EINVAL);
	if (flags & PP_O_SHARED)
		return (int)pp__ret(pp__shared_pipe2(ends, flags & ~PP_O_SHARED));
	keep = flags & (O_NONBLOCK | PP_O_NOSIGPIPE);
	if (flags & O_CLOEXEC)
		keep |= PP_FD_CLOEXEC_FLAG;	/* only F_GETFD sees it: nothing is exec'd */
	p = pipe_alloc();
	if (!p)
		return (int)pp__ret(-ENOMEM);
	/* As in Linux, packet mode is a property of the writing file only. */
	r = pp__file_alloc(&pp__pipe_read_ops, PP_KIND_PIPE, O_RDONLY | keep);
	w = pp__file_alloc(&pp__pipe_write_ops, PP_KIND_PIPE,
			   O_WRONLY | keep | (flags & O_DIRECT));
	if (!r || !w) {
		free(r);
		free(w);
		pipe_free(p);
		return (int)pp__ret(-ENOMEM);
	}
	r->pipe = w->pipe = p;
	ends[0] = r;
	ends[1] = w;
	return 0;
}

int pp__pipe_release(struct pp_file *f)
{
	struct pp_pipe *p = f->pipe;
	bool last;

	pthread_mutex_lock(&p->mutex);
	if (pp__file_readable(f))
		__atomic_fetch_sub(&p->readers, 1, __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_sub(&p->writers, 1, __ATOMIC_SEQ_CST);
	pp__pipe_update_events(p);
	/*
	 * Everyone waiting on either side must see EOF or EPIPE now, and
	 * before the pipe can go: our end still counts in files, so the
	 * futex words are there until we let go below.
	 */
	pp__pipe_wake_all(p);
	last = --p->files == 0;
	pthread_mutex_unlock(&p->mutex);
	if (last)
		pipe_free(p);
	return 0;
}

/* ---------------------------------------------------------------------- */

/*
 * The consumer side of the merge word (pipe.h): true once no producer can
 * append to the drained slot, false if bytes arrived after all (the caller
 * syncs len and reads on).  A producer inside its copy (SLOT_WRITING)
 * finishes in the time of a page's memcpy; if it was preempted there, we
 * give it our CPU.
 */
bool pp__slot_seal(struct pp_slot *s)
{
	unsigned int end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);

	for (unsigned int spins = 0;; spins++) {
		if (!(end & SLOT_MERGE) || (end & SLOT_SEALED))
			return true;
		if (end & SLOT_WRITING) {
			if (spins > 64)
				sched_yield();
			end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
			continue;
		}
		/* Drained: nothing in it; its offset is not ours to read. */
		if (!(end & SLOT_DRAINED) && (end & SLOT_END_MASK) != s->buf.offset + s->buf.len)
			return false;
		if (__atomic_compare_exchange_n(&s->end, &end, end | SLOT_SEALED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return true;
	}
}

/*
 * The producer side: append up to n bytes from it to the last slot if the
 * merge rule allows (mergeable, unsealed, all n fit).  Returns n, 0 if it
 * may not merge, or -EFAULT.
 */
static ssize_t slot_extend(struct pp_pipe *p, struct pp_iov_iter *it, size_t n)
{
	struct pp_slot *s = pp__pipe_slot(p, p->head - 1);
	unsigned int end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
	unsigned int at = end & SLOT_END_MASK;

	if (!(end & SLOT_MERGE) || (end & (SLOT_SEALED | SLOT_DRAINED)) || at + n > pp__page_size)
		return 0;
	/* Acquire: a seal that lost this race let go of nothing yet. */
	if (!__atomic_compare_exchange_n(&s->end, &end, end | SLOT_WRITING, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;	/* sealed meanwhile */
	if (pp__iter_copy_from(it, (char *)s->buf.page + at, n) < n) {
		__atomic_store_n(&s->end, end, __ATOMIC_RELEASE);
		return -EFAULT;
	}
	/* Release: the new bytes before the end that shows them. */
	__atomic_store_n(&s->end, SLOT_MERGE | (at + (unsigned int)n), __ATOMIC_RELEASE);
	return (ssize_t)n;
}

/*
 * The producer side of SLOT_DRAINED (pipe.h): take the drained last slot
 * back as a fresh page, filled with up to a page from it.  Returns the
 * bytes written, 0 if it may not (no such slot, a shared page), or -EFAULT.
 * With wr_mutex held and a free slot counted.
 */
static ssize_t slot_reopen(struct pp_pipe *p, struct pp_iov_iter *it, size_t n)
{
	struct pp_slot *s;
	unsigned int end;

	if (p->head == pp__pipe_tail(p))
		return 0;
	s = pp__pipe_slot(p, p->head - 1);
	end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
	if ((end & (SLOT_MERGE | SLOT_DRAINED | SLOT_SEALED)) != (SLOT_MERGE | SLOT_DRAINED))
		return 0;
	/* Acquire: the consumer's last copy out of the page is done. */
	if (!__atomic_compare_exchange_n(&s->end, &end, end | SLOT_WRITING, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	/* A page tee or splice shares stays as it is: its bytes are not ours. */
	if (s->buf.ops != &pp_anon_buf_ops || !pp__page_only_ref(s->buf.page)) {
		__atomic_store_n(&s->end, end, __ATOMIC_RELEASE);
		return 0;
	}
	if (pp__iter_copy_from(it, s->buf.page, n) < n) {
		__atomic_store_n(&s->end, end, __ATOMIC_RELEASE);
		return -EFAULT;
	}
	s->buf.offset = 0;
	/*
	 * Release: the offset and the bytes before the end that shows them.
	 * Clearing SLOT_DRAINED is what makes the slot count again
	 * (pp__pipe_occupancy); the caller wakes readers after this store.
	 */
	__atomic_store_n(&s->end, SLOT_MERGE | (unsigned int)n, __ATOMIC_RELEASE);
	return (ssize_t)n;
}

/*
 * Consumers: copy up to max slots from the tail covering want bytes
 * (stopping after a packet if packets).  Zero-length slots on the way are
 * copied too so the consumer can retire them.
 */
unsigned int pp__pipe_snapshot(struct pp_pipe *p, struct pp_buf *snap, unsigned int max,
			       size_t want, bool packets)
{
	unsigned int head = pp__pipe_head(p);
	unsigned int nr = 0;
	size_t have = 0;

	for (unsigned int i = p->tail; i != head && nr < max && have < want; i++) {
		struct pp_slot *s = pp__pipe_slot(p, i);

		pp__slot_sync(s);
		snap[nr] = s->buf;
		have += snap[nr].len;
		if (packets && (snap[nr++].flags & PP_BUF_FLAG_PACKET))
			break;
		if (!packets)
			nr++;
	}
	return nr;
}

static void dead_add(struct pp_pipe *p, struct pp__dead *dead, const struct pp_buf *buf)
{
	if (buf->ops == &pp_anon_buf_ops) {
		pp__page_put(p, buf->page);
		return;
	}
	if (buf->ops == &pp__kernel_buf_ops)
		return;	/* its bytes left the kernel pipe with the call that consumed them */
	/* dead_room() said yes. */
	if (dead->nr < PP_DEAD_MAX)
		dead->buf[dead->nr++] = *buf;
	else
		dead->more[dead->nr++ - PP_DEAD_MAX] = *buf;
}

/* Room for one more retired buffer, growing the list if need be. */
static bool dead_room(struct pp__dead *dead)
{
	unsigned int cap;
	struct pp_buf *more;

	if (dead->full)
		return false;
	if (dead->nr < PP_DEAD_MAX || dead->nr - PP_DEAD_MAX < dead->cap)
		return true;
	cap = dead->cap ? 2 * dead->cap : PP_DEAD_MAX;
	more = pp__fault(PP_FAULT_ALLOC) ? NULL : realloc(dead->more, cap * sizeof(*more));
	if (!more) {
		dead->full = true;
		return false;
	}
	dead->more = more;
	dead->cap = cap;
	return true;
}

/*
 * Leave the emptied last slot in the ring for the next merge (pipe.h:
 * SLOT_DRAINED): true if marked, false if bytes arrived meanwhile.
 */
static bool slot_drain(struct pp_slot *s)
{
	unsigned int end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);

	for (unsigned int spins = 0;; spins++) {
		if (end & SLOT_DRAINED)
			return true;
		if (end & SLOT_WRITING) {
			if (spins > 64)
				sched_yield();
			end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
			continue;
		}
		if ((end & SLOT_END_MASK) != s->buf.offset + s->buf.len)
			return false;
		if (__atomic_compare_exchange_n(&s->end, &end, end | SLOT_DRAINED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return true;
	}
}

/*
 * Consumer (rd_mutex held): head, from rd_head_seen when that shows more
 * than `past` slots after tail, else loaded (acquire: the slots it shows
 * are filled) and kept.  The cached head is never ahead of head; one not
 * between tail and a ring's length after it is out of date (other
 * consumers moved tail) and is loaded again too.
 */
static inline unsigned int rd_head(struct pp_pipe *p, unsigned int tail, unsigned int past)
{
	unsigned int seen = p->rd_head_seen - tail;

	if (seen > past && seen <= p->ring_size)
		return p->rd_head_seen;
	return p->rd_head_seen = pp__pipe_head(p);
}

/*
 * Take `bytes` from the front, in order.  A slot may have grown by a merge
 * since it was looked at; it stays if bytes remain.  Emptied slots (and
 * zero-length ones on the way) leave the ring once sealed, except, with
 * keep, a last one a writer may still fill.  Returns the bytes taken:
 * fewer only when dead filled up.
 */
static size_t consume(struct pp_pipe *p, size_t bytes, bool packets, bool keep,
		      struct pp__dead *dead)
{
	unsigned int head, tail = p->tail, freed = 0;
	size_t taken = 0;

	for (;;) {
		struct pp_slot *s;
		struct pp_buf *buf;
		size_t n;

		/*
		 * Slots up to the head last loaded are published; look again
		 * only for the last of them, which decides the seal and the
		 * drain below (a fresh head there, as if loaded on entry).
		 */
		head = rd_head(p, tail, 1);
		if (tail == head) {
			pages_keep(p, head);
			break;
		}
		s = pp__pipe_slot(p, tail);
		buf = &s->buf;
		n = min_t(size_t, bytes - taken, buf->len);

		/*
		 * Only buffers whose release may call out wait in dead; a
		 * kernel buffer's bytes are gone already, so it never stops
		 * short of them.
		 */
		if (buf->ops != &pp_anon_buf_ops && buf->ops != &pp__kernel_buf_ops &&
		    !dead_room(dead))
			break;

		if (n) {
			buf->offset += (unsigned int)n;
			buf->len -= (unsigned int)n;
			taken += n;
			if (packets && (buf->flags & PP_BUF_FLAG_PACKET))
				buf->len = 0;	/* a short read discards the rest of a packet */
		}
		if (buf->len)
			break;
		if (keep && tail + 1 == head && pp__pipe_can_drain(p) &&
		    (__atomic_load_n(&s->end, __ATOMIC_RELAXED) & SLOT_MERGE)) {
			/* Once marked it takes no room (pp__pipe_occupancy). */
			if (slot_drain(s)) {
				pp__pipe_wake_writers(p);
				pages_keep(p, head);
				pp__pipe_trim_tmp_pages(p);
			} else
				pp__slot_sync(s);		/* more was merged: read on */
			break;
		}
		/*
		 * Only the last slot can still grow: a producer extends or
		 * reopens head - 1 and nothing else, before it pushes anything
		 * in the same call, and our acquire load of head, which showed
		 * slots after this one, saw its last store of end.  So a slot
		 * with others after it needs no seal (a locked instruction on
		 * a line the producer's glances keep taking back), only its
		 * final length.
		 */
		if (tail + 1 != head)
			pp__slot_sync(s);
		else if (!pp__slot_seal(s))
			pp__slot_sync(s);
		if (buf->len)
			break;	/* more was merged: it stays */
		if (buf->ops != &pp_anon_buf_ops || tail + 1 == head ||
		    !page_park(p, s, tail, buf->page))
			dead_add(p, dead, buf);
		buf->ops = NULL;
		/* Hands the slot back: pairs with the producer's acquire load of tail. */
		__atomic_store_n(&p->tail, ++tail, __ATOMIC_RELEASE);
		freed++;
		if (taken == bytes && tail != head) {
			pp__slot_sync(pp__pipe_slot(p, tail));
			if (pp__pipe_buf(p, tail)->len)
				break;	/* retire zero-length slots after us, no more */
		}
	}
	if (freed)
		pp__pipe_wake_writers(p);
	return taken;
}

size_t pp__pipe_consume(struct pp_pipe *p, size_t bytes, bool packets, struct pp__dead *dead)
{
	return consume(p, bytes, packets, false, dead);
}

size_t pp__pipe_consume_keep(struct pp_pipe *p, size_t bytes, struct pp__dead *dead)
{
	return consume(p, bytes, true, true, dead);
}

void pp__pipe_release_bufs(struct pp_pipe *p, struct pp_buf *bufs, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		pp__buf_release(p, &bufs[i]);
}

static void __attribute__((noinline)) release_dead(struct pp_pipe *p, struct pp__dead *dead)
{
	pp__pipe_release_bufs(p, dead->buf, min_t(unsigned int, dead->nr, PP_DEAD_MAX));
	if (dead->nr > PP_DEAD_MAX)
		pp__pipe_release_bufs(p, dead->more, dead->nr - PP_DEAD_MAX);
	free(dead->more);
	pp__dead_init(dead);
}

void pp__pipe_release_dead(struct pp_pipe *p, struct pp__dead *dead)
{
	/*
	 * Anonymous pages went at once (dead_add): usually nothing waits
	 * here, and nr == 0 with no heap part is what pp__dead_init() left.
	 */
	if (unlikely(dead->nr || dead->more))
		release_dead(p, dead);
}

/* ---------------------------------------------------------------------- */

ssize_t pp__pipe_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	return pp__pipe_read(f, iov, iovcnt, pp__file_flags(f) & O_NONBLOCK);
}

/*
 * The handoff: one copy where the ring makes two.
 *
 * A blocking reader that finds the pipe empty offers its buffer before it
 * waits; a writer that finds the pipe still empty and an offer up copies
 * its bytes straight into the reader's memory instead of into pages.  It
 * must be invisible: the reader gets exactly the bytes a kernel pipe would
 * give it, and the pipe is left exactly as full as the kernel's.  In the
 * kernel the writer fills the empty pipe under pipe->mutex, up to its
 * capacity, and the reader then takes min(request, what is there); the
 * bytes it leaves stay where they were written.  So a writer hands over
 *
 *   the whole rest of its write, when it fits the request and the pipe's
 *   capacity: the kernel's reader would take all of it and leave the pipe
 *   empty, as the handoff does; or
 *
 *   exactly the request (or the capacity), when that is whole pages: the
 *   kernel's reader would take those pages whole and leave the rest of the
 *   write starting on a fresh page, as our ring holds it;
 *
 * and nothing otherwise (a request of 100 bytes against a write of 200
 * would leave 100 bytes at a page offset the ring cannot reproduce, and so
 * a different room for merges).  The second kind is for blocking writers
 * only: the kernel's reader takes nothing until the writer lets go of the
 * pipe, so a non-blocking writer that goes on after a part handed over
 * would fit more into one call than the pipe holds.  Packets never go this
 * way, and neither does memory that would fault: a NULL segment on either
 * side.
 *
 * Ordering.  The reader takes the offer (CAS NONE -> BUSY), fills ho_total
 * and ho_it, then publishes them with a release store of OFFERED; the
 * writer's acquire CAS OFFERED -> CLAIMED reads from it (or from a
 * writer's release store of OFFERED that gave an offer back, which the
 * same chain covers).  The writer copies, stores ho_got, and publishes
 * both with a release store of DONE, followed by a wake-up (wait.c); the
 * reader's acquire load of DONE sees the bytes and the count, and only
 * then stores NONE.  A reader that wakes to a readable pipe withdraws
 * with a CAS OFFERED -> NONE; if a writer's claim won, it waits for DONE
 * (or for the offer back) instead, so its buffer and iterator, which live
 * on its stack, are never written after it returns.  One offer at a
 * time: a second reader waits the usual way.
 */

/*
 * Readers offer when they ask for at least this much (docs/design.md):
 * measured, 16384 is where one copy wins.
 */
#ifndef PP_HANDOFF_MIN
#define PP_HANDOFF_MIN	16384
#endif

/* Consumer, rd_mutex held, the pipe empty: offer it; true if made. */
static bool handoff_offer(struct pp_pipe *p, struct pp_iov_iter *it, size_t total)
{
	unsigned int none = PP_HO_NONE;

	/* No writer: EOF, nobody to hand anything over. */
	if (total < PP_HANDOFF_MIN || !pp__pipe_writers(p) || !pp__iter_plain(it, total))
		return false;
	/* Ours before we write the fields: another reader may hold the offer. */
	if (!__atomic_compare_exchange_n(&p->ho_state, &none, PP_HO_BUSY, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	p->ho_total = total;
	p->ho_it = it;
	__atomic_store_n(&p->ho_state, PP_HO_OFFERED, __ATOMIC_RELEASE);
	return true;
}

/*
 * The offerer, no lock held: wait until the offer is filled (the bytes
 * handed over) or the pipe becomes readable (0: withdrawn, read the usual
 * way).
 */
static size_t handoff_wait(struct pp_pipe *p)
{
	for (;;) {
		unsigned int st;

		pp__pipe_wait_handoff(p);
		st = __atomic_load_n(&p->ho_state, __ATOMIC_ACQUIRE);
		if (st == PP_HO_DONE) {
			size_t got = p->ho_got;

			__atomic_store_n(&p->ho_state, PP_HO_NONE, __ATOMIC_RELEASE);
			return got;
		}
		if (st == PP_HO_OFFERED &&
		    __atomic_compare_exchange_n(&p->ho_state, &st, PP_HO_NONE, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
		/* A writer holds it: wait for DONE, or the offer back. */
	}
}

/*
 * Producer, wr_mutex held: if a reader's offer is up and the pipe is empty,
 * fill the offer as far as the rules above allow.  Returns the bytes
 * handed over, or 0.  The plain load first keeps the offer's line shared
 * while nobody offers.
 */
static size_t __attribute__((noinline)) handoff_fill(struct pp_pipe *p, struct pp_iov_iter *it,
						     size_t left, bool nonblock)
{
	unsigned int offered = PP_HO_OFFERED;
	size_t cap, want, n;

	if (!pp__pipe_empty(p))
		return 0;
	if (!__atomic_compare_exchange_n(&p->ho_state, &offered, PP_HO_CLAIMED, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	cap = (size_t)p->max_usage << pp__page_shift;
	want = min_t(size_t, p->ho_total, cap);
	n = left <= want ? left : (nonblock || (want & (pp__page_size - 1))) ? 0 : want;
	if (!n || !pp__iter_plain(it, n)) {
		__atomic_store_n(&p->ho_state, PP_HO_OFFERED, __ATOMIC_RELEASE);
		return 0;
	}
	/*
	 * The count is returned from n, not read back: once DONE is stored the
	 * reader may take it and offer again, and another writer's fill of
	 * that offer would rewrite ho_got.
	 */
	n = pp__iter_copy_iter(p->ho_it, it, n);
	p->ho_got = n;
	__atomic_store_n(&p->ho_state, PP_HO_DONE, __ATOMIC_RELEASE);
	pp__pipe_wake_readers(p);
	return n;
}

/* Every write looks, so the look is inline: an offer is rare. */
static inline size_t handoff_give(struct pp_pipe *p, unsigned int flags, struct pp_iov_iter *it,
				  size_t left, bool nonblock)
{
	if (flags != PP_BUF_FLAG_CAN_MERGE ||
	    __atomic_load_n(&p->ho_state, __ATOMIC_RELAXED) != PP_HO_OFFERED)
		return 0;
	return handoff_fill(p, it, left, nonblock);
}

/*
 * The pull: the handoff's mirror, for a writer that waits on a full pipe.
 *
 * On one CPU a message crosses only when its peer gets the CPU, and a
 * kernel pipe moves one capacity per pair of switches (docs/design.md).
 * The handoff makes it two: one copied straight into the waiting reader's
 * buffer, one left in the ring.  The pull adds the rest of the write: a
 * blocking writer that finds no room offers the bytes it has left, and a
 * reader that finds the pipe empty and an offer up copies from the
 * writer's memory into its own, so that a 1 MiB write meets a 1 MiB
 * reader in one pair of switches, not sixteen, and one copy, not two.
 *
 * It must be invisible.  In the kernel the waiting writer, once it runs
 * again on the pipe the reader emptied, fills min(left, capacity) bytes
 * into fresh pages, and the reader then takes min(request, that).  So a
 * reader pulls exactly min(left, capacity) bytes, and only when its
 * request takes them all: the pipe is then left empty, as the kernel's
 * reader would leave it, with the writer still waiting (on the kernel's
 * CPU, woken but not yet run; FIONREAD, poll and a non-blocking read see
 * the empty pipe such a moment shows: only a blocking read pulls, as only
 * it would wait for the writer).  A later read may pull
 * again, as the kernel's writer, run again, would fill again.  The ring
 * must be empty: the writer's earlier bytes, and any another writer put
 * in meanwhile, come first.  A write of at most PIPE_BUF goes whole, as
 * it would into the kernel's pipe.  Packets and non-blocking writers never
 * offer, and neither does memory with a NULL segment.
 *
 * Ordering.  The writer publishes what it filled (a release store of head),
 * takes the offer (CAS NONE -> BUSY), fills wo_it, wo_left, wo_got and
 * publishes them with a release store of OFFERED.  A reader's acquire CAS
 * OFFERED -> CLAIMED reads from it or from an earlier reader's release
 * store of OFFERED back, so it sees the fields, the writer's bytes and the
 * head the writer published before its offer: its check that the pipe is
 * empty, made after the claim, cannot miss bytes that belong before the
 * pulled ones.  It copies, updates the fields and the writer's cursor, and
 * gives the offer back with a release store of OFFERED, then wakes
 * writers.  The writer takes it back with an acquire CAS OFFERED -> BUSY
 * (after a claim it waits for OFFERED), reads wo_got, and frees the offer
 * with a release store of NONE; so every read of its memory happens
 * before its write returns and the caller reuses the buffer.
 */

/* Producer, wr_mutex held, no room: offer the rest of the write; true if made. */
static bool pull_offer(struct pp_pipe *p, unsigned int flags, struct pp_iov_iter *it, size_t left)
{
	unsigned int none = PP_WO_NONE;

	if (flags != PP_BUF_FLAG_CAN_MERGE || !pp__iter_plain(it, left))
		return false;
	if (!__atomic_compare_exchange_n(&p->wo_state, &none, PP_WO_BUSY, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;	/* another writer's offer is up */
	p->wo_it = it;
	p->wo_left = left;
	p->wo_got = 0;
	__atomic_store_n(&p->wo_state, PP_WO_OFFERED, __ATOMIC_RELEASE);
	return true;
}

/* The writer, no lock held: take the offer back; the bytes readers took. */
static size_t pull_withdraw(struct pp_pipe *p)
{
	for (;;) {
		unsigned int offered = PP_WO_OFFERED;
		size_t got;

		if (__atomic_compare_exchange_n(&p->wo_state, &offered, PP_WO_BUSY, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			got = p->wo_got;
			__atomic_store_n(&p->wo_state, PP_WO_NONE, __ATOMIC_RELEASE);
			return got;
		}
		pp__pipe_wait_pull(p);	/* a reader is copying */
	}
}

/*
 * test/bug-pull-order compiles this file into itself with a hook here, to
 * put a writer's fill and offer between a reader's look at the empty pipe
 * (pp__pipe_read) and its claim.
 */
#ifndef PP__PULL_STEP
#define PP__PULL_STEP()	do { } while (0)
#endif

/*
 * Consumer, rd_mutex held, the pipe seen empty: take the next bytes of a
 * waiting writer's offer, as far as the rules above allow.  Returns the
 * bytes taken, or 0.  Only requests the handoff would serve look: the
 * plain load keeps the offer's line shared while nobody offers.
 */
static size_t pull_take(struct pp_pipe *p, struct pp_iov_iter *it, size_t total, bool nonblock)
{
	unsigned int offered = PP_WO_OFFERED;
	size_t n;

	PP__PULL_STEP();
	/*
	 * Blocking reads only: a kernel reader here would wait for the writer
	 * and then take these bytes, where a non-blocking one gets EAGAIN.
	 */
	if (nonblock || total < PP_HANDOFF_MIN ||
	    __atomic_load_n(&p->wo_state, __ATOMIC_RELAXED) != PP_WO_OFFERED)
		return 0;
	if (!__atomic_compare_exchange_n(&p->wo_state, &offered, PP_WO_CLAIMED, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	n = min_t(size_t, p->wo_left, (size_t)p->max_usage << pp__page_shift);
	if (n && n <= total && pp__pipe_empty(p) && pp__iter_plain(it, n)) {
		n = pp__iter_copy_iter(it, p->wo_it, n);
		p->wo_left -= n;
		p->wo_got += n;
		p->rd_pulls++;
	} else {
		n = 0;
	}
	__atomic_store_n(&p->wo_state, PP_WO_OFFERED, __ATOMIC_RELEASE);
	if (n)
		pp__pipe_wake_writers(p);
	return n;
}

/*
 * pipe_read of kernel-resident buffers (kbuf.c): the run of them at the
 * tail, published before head0, is the front of the private kernel pipe,
 * read with one readv(2) into the caller's memory.  What the kernel threw
 * away behind a packet read in part goes from the ring too.  Bytes read,
 * or -errno; *stop when the read must end here (a packet's end, a short
 * read, a fault).
 */
static ssize_t read_kernel_run(struct pp_pipe *p, struct pp_iov_iter *it, size_t max,
			       unsigned int head0, struct pp__dead *dead, bool *stop)
{
	struct pp_buf *first = pp__pipe_buf(p, p->tail);
	size_t run = 0, discarded;
	bool packet_end;
	ssize_t r;

	for (unsigned int i = p->tail; i != head0 && run < max; i++) {
		struct pp_buf *b = pp__pipe_buf(p, i);

		if (b->ops != &pp__kernel_buf_ops)
			break;
		run += b->len;
	}
	run = min_t(size_t, run, max);
	r = pp__kbuf_read(p, first->private, it, run, &discarded, &packet_end);
	if (r < 0)
		return r;
	pp__pipe_consume(p, (size_t)r + discarded, false, dead);
	*stop = packet_end || (size_t)r < run;
	return r;
}

/* A large write publishes its pages this many at a time (pipe_write). */
#ifndef PP_PUBLISH_PAGES
#define PP_PUBLISH_PAGES	4
#endif

/*
 * The quick read: a request that the slot at tail more than covers, in a
 * page written by pp_write.  It keeps its own view of that slot (rd_page,
 * rd_at, rd_end on rd_mutex's line) and stores nothing to the slot, and
 * while the bytes it has seen cover the request it does not even load the
 * slot: that line is the one a writer extends (slot_extend) at every small
 * write, so each look at it is a miss between two CPUs, and each store to
 * it (the offset and len a read used to store) two (docs/design.md: the
 * quick read).  The slot keeps at least one byte, so it is neither drained
 * nor retired: nothing here wakes a writer or changes what a glance
 * counts.  With rd_mutex held; false: settle and take the ordinary path.
 */
static bool read_in_tail(struct pp_pipe *p, struct pp_iov_iter *it, size_t total)
{
	struct pp_slot *s = pp__pipe_slot(p, p->tail);
	unsigned int end;

	if (!pp__iter_fits(it, total))
		return false;
	if (!p->rd_page) {
		/* Acquire: the slot is filled. */
		if (p->tail == rd_head(p, p->tail, 0))
			return false;
		/*
		 * Acquire: the bytes below end.  Merging and not drained: a
		 * page of pp_write's whose end only grows, and whose offset is
		 * ours (a drained slot's is the producer's: slot_reopen).  A
		 * view is taken only when it serves this read, so a read that
		 * takes the whole slot leaves nothing to settle.
		 */
		end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
		if ((end & (SLOT_MERGE | SLOT_DRAINED)) != SLOT_MERGE ||
		    s->buf.ops != &pp_anon_buf_ops ||
		    (end & SLOT_END_MASK) - s->buf.offset <= total)
			return false;
		p->rd_page = s->buf.page;
		p->rd_at = s->buf.offset;
		p->rd_end = end & SLOT_END_MASK;
	} else if (p->rd_end - p->rd_at <= total) {
		/*
		 * Bytes below rd_end were shown by an acquire load of end and
		 * stay as they are: a producer writes only past end, and
		 * rewrites the page only once we drained the slot, which we do
		 * not while we hold a view.  Look again only when they do not
		 * cover the request.
		 */
		end = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
		p->rd_end = end & SLOT_END_MASK;
		if (p->rd_end - p->rd_at <= total)
			return false;
	}
	memcpy((char *)it->iov->iov_base + it->off, p->rd_page + p->rd_at, total);
	it->off += total;
	p->rd_at += (unsigned int)total;
	return true;
}

/*
 * pipe_read: take bytes from the tail until the reader's buffer is full,
 * the pipe is empty (after some bytes), or a packet ends.  Waits only
 * with no lock held, and only before the first byte.  Writers are not
 * held off as Linux's pipe->mutex holds them, so a read stops at the
 * slots published when it found data (head0) and once it drained the
 * pipe: it never returns more than the pipe held.
 */
static ssize_t pipe_read(struct pp_file *f, struct pp_pipe *p, struct pp_iov_iter *it,
			 ssize_t total, bool nonblock, bool *ref);

ssize_t pp__pipe_read(struct pp_file *f, const struct iovec *iov, int iovcnt, bool nonblock)
{
	struct pp_pipe *p = f->pipe;
	struct pp_iov_iter it = { iov, iovcnt, 0 };
	ssize_t total = pp__iov_total(iov, iovcnt);
	ssize_t ret;
	bool ref;

	if (total < 0)
		return total;
	if (!pp__file_readable(f))
		return -EBADF;
	if (total == 0)
		return 0;

	/*
	 * The fast way holds no reference on f: pp_close() waits for the
	 * section to end (wait.c); pipe_read takes one before it lets go of
	 * the lock with work left.
	 */
	ref = !pp__pipe_lock_reader_fast(p);
	/*
	 * Nor does the ordinary lock when one CAS takes it (SIDE_NOREF):
	 * pp_close() waits for that section too.  Only a lock we must wait
	 * for costs the reference's two locked instructions.
	 */
	if (ref && pp__pipe_trylock_reader_noref(p))
		ref = false;
	if (ref) {
		pp__file_get(f);
		ret = pp__pipe_lock_reader(p, nonblock);
		if (ret) {
			pp__file_put(f);
			return ret;
		}
	}
	if (read_in_tail(p, &it, (size_t)total)) {
		pp__pipe_unlock_consumer(p);
		ret = total;
	} else {
		ret = pipe_read(f, p, &it, total, nonblock, &ref);
	}
	if (ref)
		pp__file_put(f);
	return ret;
}

/*
 * f is held by a reference (*ref) or by a fast section of its lock; take
 * the reference before anything that lets go of the lock (pipe_read,
 * pipe_write).
 */
static inline void hold_file(struct pp_file *f, bool *ref)
{
	if (!*ref) {
		pp__file_get(f);
		*ref = true;
	}
}

/* rd_mutex held, however taken, and no quick read possible; returns with it let go. */
static ssize_t pipe_read(struct pp_file *f, struct pp_pipe *p, struct pp_iov_iter *it,
			 ssize_t total, bool nonblock, bool *ref)
{
	struct pp__dead dead;
	ssize_t ret = 0;
	size_t owed = 0;
	unsigned int head0, idx;
	bool fresh = false;
	int err;

	pp__pipe_settle_read(p);
	pp__dead_init(&dead);
	head0 = rd_head(p, p->tail, 0);
	/*
	 * Slots are copied from idx on and given back together once the read
	 * is done (owed: the bytes copied from [tail, idx) and from a last
	 * slot read in part), with one store of tail and one wake-up: a store
	 * of tail per page is a line the waiting writer takes back each time.
	 * The kernel's writer sees no room before pipe_read lets go of
	 * pipe->mutex either.  With nothing copied yet, idx is tail.
	 */
	idx = p->tail;
	while (ret < total) {
		struct pp_slot *s;
		struct pp_buf *buf;
		size_t n;
		ssize_t r;

		if (ret && (int)(idx - head0) >= 0) {
			if (fresh)
				break;	/* published after we began: the next read's */
			head0 = p->rd_head_seen = pp__pipe_head(p);
			fresh = true;
			if ((int)(idx - head0) >= 0)
				break;
		}
		if (!ret && (int)(head0 - idx) < 2 && pp__pipe_empty(p)) {
			const void *next = NULL;
			bool offered;

			ret = (ssize_t)pull_take(p, it, (size_t)total, nonblock);
			if (ret)
				break;

			/*
			 * A drained slot (pipe.h) is where the next write
			 * lands, from the start of its page (slot_reopen): the
			 * wait prefetches that line.  Its page is read under
			 * rd_mutex, while the slot cannot change hands.
			 */
			if (p->tail != pp__pipe_head(p))
				next = pp__pipe_buf(p, p->tail)->page;
			offered = !nonblock && handoff_offer(p, it, (size_t)total);
			/* f must outlive the wait: the lock no longer keeps it. */
			hold_file(f, ref);
			pp__pipe_unlock_consumer(p);
			if (offered) {
				size_t got = handoff_wait(p);

				if (got)
					return (ssize_t)got;	/* nothing consumed: dead is empty */
			}
			err = pp__pipe_wait_data_at(p, nonblock, next);
			if (err <= 0)
				return err;	/* 0: EOF */
			err = pp__pipe_lock_consumer(p, nonblock);
			if (err)
				return err;
			head0 = p->rd_head_seen = pp__pipe_head(p);
			idx = p->tail;
			continue;
		}

		/* Published between the lock and the look: the first read takes it. */
		if (!ret && idx == head0)
			head0 = p->rd_head_seen = pp__pipe_head(p);
		s = pp__pipe_slot(p, idx);
		pp__slot_sync(s);
		buf = &s->buf;
		n = min_t(size_t, buf->len, (size_t)(total - ret));
		if (!n) {
			/* Zero-length: retired with the rest, or now if it is in front. */
			if (ret)
				idx++;
			else {
				pp__pipe_consume(p, 0, true, &dead);
				idx = p->tail;
				if (dead.full)
					break;
			}
			continue;
		}
		if (buf->ops == &pp__kernel_buf_ops) {
			bool packet;

			if (owed) {
				/* read_kernel_run works at tail: give back what is before it. */
				size_t taken = pp__pipe_consume(p, owed, false, &dead);

				ret -= (ssize_t)(owed - taken);
				owed = 0;
				if (dead.full)
					break;
			}
			r = read_kernel_run(p, it, (size_t)(total - ret), head0, &dead, &packet);
			if (r < 0) {
				if (!ret)
					ret = r;
				break;
			}
			ret += r;
			idx = p->tail;
			if (packet || dead.full)
				break;
			continue;
		}
		err = pp__buf_confirm(p, buf);
		r = err ? err : pp__iter_copy_buf(p, buf, 0, n, it);
		if (r < 0) {
			/*
			 * Bytes already read are returned first; the error
			 * shows on the next read.  A buffer whose data is gone
			 * (ENODATA: truncated) is reported once and dropped so
			 * the reader can go on; any other error (EIO) leaves it
			 * in place, as Linux does.
			 */
			if (!ret) {
				ret = r;
				if (r == -ENODATA)
					pp__pipe_consume(p, buf->len, false, &dead);
			}
			break;
		}
		ret += r;
		owed += (size_t)r;
		/* A packet read in part loses the rest (consume), as Linux does. */
		if ((size_t)r < buf->len || (buf->flags & PP_BUF_FLAG_PACKET))
			break;
		idx++;
	}
	if (owed) {
		size_t taken = pp__pipe_consume_keep(p, owed, &dead);

		ret -= (ssize_t)(owed - taken);
	}
	/* A release may call out, with no lock held: f must outlive it. */
	if (dead.nr || dead.more)
		hold_file(f, ref);
	pp__pipe_unlock_consumer(p);
	pp__pipe_release_dead(p, &dead);
	return ret;
}

/* ---------------------------------------------------------------------- */

/*
 * pipe_write, with wr_mutex held.  The merge rule first: the sub-page
 * remainder goes into the last buffer if it may take all of it (any writer
 * may merge, packet or not: the last buffer's flag decides).  Then whole
 * pages, published PP_PUBLISH_PAGES at a time (docs/design.md: batches) so
 * the reader copies some while we fill the rest, with room counted once
 * per batch of free slots.  A full pipe: a non-blocking writer returns what
 * it wrote or EAGAIN; a blocking one lets go of wr_mutex and waits.  A
 * write of at most PIPE_BUF needs one slot or none, so it goes in whole
 * after any wait: it stays atomic.
 */
static ssize_t pipe_write(struct pp_file *f, struct pp_pipe *p, struct pp_iov_iter *it,
			  size_t total, bool nonblock, bool *ref)
{
	const size_t psz = pp__page_size;
	const unsigned int flags = (pp__file_flags(f) & O_DIRECT) ? PP_BUF_FLAG_PACKET
								  : PP_BUF_FLAG_CAN_MERGE;
	size_t chars = total & (psz - 1);
	size_t left = total;
	unsigned int head = p->head, room = 0;
	void *kept = NULL;	/* pages_keep's chain, once a wait gave us one */
	ssize_t ret = 0;

	if (!pp__pipe_readers(p))
		return pp__pipe_epipe(f);

	ret = (ssize_t)handoff_give(p, flags, it, left, nonblock);
	left -= (size_t)ret;
	if (!left)
		return ret;
	if (!ret && chars && !pp__pipe_empty(p)) {
		ssize_t r = slot_extend(p, it, chars);

		if (r < 0)
			return r;
		ret = r;
		left -= (size_t)r;
	}

	while (left) {
		size_t n;
		void *page;

		if (!pp__pipe_readers(p)) {
			/* SIGPIPE even after a partial write, as Linux does. */
			int e = pp__pipe_epipe(f);

			if (!ret)
				ret = e;
			break;
		}
		if (!room) {
			int free_slots;

			/* What is filled goes out before we count again, or wait. */
			if (head != p->head)
				pp__pipe_publish(p, head);
			/*
			 * Room as counted from the tail last loaded: never more
			 * than there is.  Load tail only when that shows none
			 * (or is out of date: other producers moved head).
			 */
			if (head - p->wr_tail_seen < p->max_usage) {
				free_slots = (int)(p->max_usage - (head - p->wr_tail_seen));
			} else {
				p->wr_tail_seen = pp__pipe_tail(p);
				free_slots = pp__pipe_room(p);
			}
			if (free_slots > 0) {
				room = (unsigned int)free_slots;
				continue;
			}
			if (nonblock) {
				if (!ret)
					ret = -EAGAIN;
				break;
			}
			if (ret)
				pp__pipe_wake_readers(p);
			{
				bool offered = pull_offer(p, flags, it, left);
				int e;

				/* f must outlive the wait: the lock no longer keeps it. */
				hold_file(f, ref);
				pp__pipe_unlock_producer(p);
				__atomic_fetch_add(&p->wr_room_waiters, 1, __ATOMIC_RELAXED);
				e = pp__pipe_wait_room_quiet(p);
				if (!kept)
					kept = pages_kept(p);
				else
					chain_free(p, pages_kept(p));
				if (offered) {
					n = pull_withdraw(p);
					ret += (ssize_t)n;
					left -= n;
				}
				pp__pipe_lock_producer(p);
				head = p->head;		/* another writer may have been in */
				if (!left)
					break;		/* readers took the rest: no SIGPIPE */
				if (e) {
					/* SIGPIPE even after a partial write, as Linux does. */
					e = pp__pipe_epipe(f);
					if (!ret)
						ret = e;
					break;
				}
			}
			n = handoff_give(p, flags, it, left, false);
			ret += (ssize_t)n;
			left -= n;
			continue;
		}

		n = min_t(size_t, psz, left);
		if (flags == PP_BUF_FLAG_CAN_MERGE && !ret) {
			/* Nothing filled yet: head is p->head, its last slot the drained one. */
			ssize_t r = slot_reopen(p, it, n);

			if (r) {
				if (r < 0) {
					ret = r;
					break;
				}
				ret = r;
				left -= n;
				room--;
				continue;
			}
		}
		page = page_for_slot(p, head, &kept);
		if (!page) {
			if (!ret)
				ret = -ENOMEM;
			break;
		}
		if (pp__iter_copy_from(it, page, n) < n) {
			/* A fault: the whole pages before it are written, no more. */
			pp__page_free(p, page);
			if (!ret)
				ret = -EFAULT;
			break;
		}
		pp__pipe_fill_anon(p, head++, page, (unsigned int)n, flags);
		room--;
		ret += (ssize_t)n;
		left -= n;
		if (head - p->head >= PP_PUBLISH_PAGES)
			pp__pipe_publish(p, head);
	}
	if (head != p->head)
		pp__pipe_publish(p, head);
	chain_free(p, kept);
	if (ret > 0)
		pp__pipe_wake_readers(p);
	return ret;
}

ssize_t pp__pipe_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	struct pp_pipe *p = f->pipe;
	struct pp_iov_iter it = { iov, iovcnt, 0 };
	bool nonblock = pp__file_flags(f) & O_NONBLOCK;
	ssize_t total = pp__iov_total(iov, iovcnt);
	ssize_t ret;
	bool ref;

	if (total < 0)
		return total;
	if (!pp__file_writable(f))
		return -EBADF;
	if (total == 0)
		return 0;	/* no SIGPIPE for a zero-length write */

	/*
	 * The fast way holds no reference on f: pp_close() waits for the
	 * section to end (wait.c); pipe_write takes one before it waits.
	 */
	ref = !pp__pipe_lock_producer_fast(p) && !pp__pipe_trylock_producer_noref(p);
	if (ref) {
		pp__file_get(f);
		pp__pipe_lock_producer(p);
	}
	ret = pipe_write(f, p, &it, (size_t)total, nonblock, &ref);
	pp__pipe_unlock_producer(p);
	if (ref)
		pp__file_put(f);
	return ret;
}

/*
 * Queue one caller-built buffer.  An empty buffer is refused: a slot that
 * holds nothing would read as data where there is none.
 */
ssize_t pp__pipe_add_buf(struct pp_file *f, const struct pp_buf *buf, unsigned int flags)
{
	struct pp_pipe *p = f->pipe;
	bool nonblock = pp__pipe_nonblock(f, flags);
	ssize_t ret;

	if (!pp__file_writable(f))
		return -EBADF;
	if (!buf || !buf->ops || !buf->ops->release || !buf->ops->get || !buf->len ||
	    ((buf->flags & PP_BUF_FLAG_CAN_MERGE) &&
	     !((flags & PP__ADD_MERGEABLE) && buf->ops == &pp_anon_buf_ops)) ||
	    (size_t)buf->offset + buf->len > pp__page_size)
		return -EINVAL;

	pp__pipe_lock_producer(p);
	for (;;) {
		if (!pp__pipe_readers(p)) {
			ret = pp__pipe_epipe(f);
			break;
		}
		if (!pp__pipe_full(p)) {
			pp__pipe_push(p, buf);
			ret = buf->len;
			break;
		}
		pp__pipe_unlock_producer(p);
		ret = pp__pipe_wait_room(f, nonblock);
		pp__pipe_lock_producer(p);
		if (ret)
			break;
	}
	pp__pipe_unlock_producer(p);
	if (ret > 0)
		pp__pipe_wake_readers(p);
	return ret;
}

const struct pp_file_ops pp__pipe_read_ops = {
	.readv		= pp__pipe_readv,
	.poll		= pp__pipe_poll,
	.release	= pp__pipe_release,
	.name		= "pagepipe read end",
};

const struct pp_file_ops pp__pipe_write_ops = {
	.writev		= pp__pipe_writev,
	.poll		= pp__pipe_poll,
	.release	= pp__pipe_release,
	.name		= "pagepipe write end",
};
