/* SPDX-License-Identifier: MIT */
/*
 * ring.h - the limit row of the pipe benches: a minimal lock-free SPSC byte
 * ring.  Writes copy in, reads copy out, a waiting side spins (or yields
 * when both sides share a CPU): what the hardware allows for the pipes'
 * copy-in, copy-out contract.  pipe-threads puts it in ordinary memory
 * between threads; pipe-procs puts the struct and its data in a
 * MAP_SHARED mapping made before fork(), between processes (data is then
 * the same address in both).
 */
#ifndef PP_BENCH_RING_H
#define PP_BENCH_RING_H

#include <stdatomic.h>

#include "bench.h"

/*
 * head and tail count bytes ever written and ever read; the ring holds
 * head - tail bytes at data[tail & mask] onwards.  Each index has one
 * writer: head the producer, tail the consumer.
 *
 * Ordering.  The producer copies bytes into the free space and then stores
 * head with release; the consumer loads head with acquire before it copies
 * those bytes out, so it sees them complete.  The other way round, the
 * consumer copies bytes out and then stores tail with release; the
 * producer loads tail with acquire before it writes into that space again,
 * so its writes cannot overtake the consumer's reads of the old bytes.
 * closed is stored (release) after the last head store, so a consumer
 * that sees it (acquire) and then finds head == tail has seen everything.
 * Each side also keeps its last view of the other's index on its own
 * cache line and reloads it only when that view says there is no room (or
 * nothing to read): a stale view only understates what is available.
 */
struct ring {
	/* The producer's line. */
	_Alignas(64) _Atomic uint64_t head;
	uint64_t tail_seen;
	/* The consumer's line. */
	_Alignas(64) _Atomic uint64_t tail;
	uint64_t head_seen;
	/* Written once or never. */
	_Alignas(64) atomic_bool closed;
	char *data;
	size_t cap;		/* a power of two */
	bool yield;		/* both sides on one CPU: a spin would waste its slice */
};

static inline void ring_wait(const struct ring *r, unsigned int *spins)
{
	/*
	 * Split CPUs: spin.  Still yield now and then, as a preempted peer on
	 * a loaded machine would otherwise cost a whole time slice.
	 */
	if (r->yield || !(++*spins & 1023))
		sched_yield();
	else
		bench_cpu_relax();
}

static inline void ring_write(struct ring *r, const char *buf, size_t len)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	unsigned int spins = 0;

	while (len) {
		size_t room = r->cap - (size_t)(head - r->tail_seen), n, off, first;

		if (!room) {
			r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
			if (r->tail_seen == head - r->cap) {
				ring_wait(r, &spins);
				continue;
			}
			room = r->cap - (size_t)(head - r->tail_seen);
		}
		n = len < room ? len : room;
		off = head & (r->cap - 1);
		first = n < r->cap - off ? n : r->cap - off;
		memcpy(r->data + off, buf, first);
		memcpy(r->data, buf + first, n - first);
		head += n;
		atomic_store_explicit(&r->head, head, memory_order_release);
		buf += n;
		len -= n;
	}
}

/* Like read(2): at least one byte, up to len, or 0 once closed and empty. */
static inline size_t ring_read(struct ring *r, char *buf, size_t len)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	unsigned int spins = 0;
	size_t avail, n, off, first;

	while (!(avail = (size_t)(r->head_seen - tail))) {
		r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
		if (r->head_seen != tail)
			continue;
		if (atomic_load_explicit(&r->closed, memory_order_acquire)) {
			r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
			if (r->head_seen == tail)
				return 0;
			continue;
		}
		ring_wait(r, &spins);
	}
	n = len < avail ? len : avail;
	off = tail & (r->cap - 1);
	first = n < r->cap - off ? n : r->cap - off;
	memcpy(buf, r->data + off, first);
	memcpy(buf + first, r->data, n - first);
	atomic_store_explicit(&r->tail, tail + n, memory_order_release);
	return n;
}

#endif /* PP_BENCH_RING_H */
