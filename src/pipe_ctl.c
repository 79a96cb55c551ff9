// SPDX-License-Identifier: MIT
/*
 * pipe_ctl.c - everything about a pipe but its bytes: the size limit,
 * F_SETPIPE_SZ and F_GETPIPE_SZ, FIONREAD, poll and event fds.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

static size_t pp__max_size;		/* F_SETPIPE_SZ limit; 0: not read yet */
static pthread_once_t max_size_once = PTHREAD_ONCE_INIT;

static void max_size_init(void)
{
	unsigned long v = 1048576;
	FILE *f = fopen("/proc/sys/fs/pipe-max-size", "re");

	if (f) {
		if (fscanf(f, "%lu", &v) != 1 || v < pp__page_size)
			v = 1048576;
		fclose(f);
	}
	pp__max_size = v;
}

PP_EXPORT int pp_pipe_set_max_size(size_t bytes)
{
	pthread_once(&max_size_once, max_size_init);
	if (bytes < pp__page_size || bytes > PP_MAX_LIMIT)
		return (int)pp__ret(-EINVAL);
	__atomic_store_n(&pp__max_size, bytes, __ATOMIC_RELAXED);
	return 0;
}

PP_EXPORT size_t pp_pipe_get_max_size(void)
{
	pthread_once(&max_size_once, max_size_init);
	return __atomic_load_n(&pp__max_size, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------- */

static void event_set(int fd, bool *state, bool on)
{
	uint64_t v = 1;

	if (fd < 0 || *state == on)
		return;
	*state = on;
	/* eventfd writes and reads of 8 bytes cannot be short; EAGAIN is harmless. */
	if (on)
		(void)!write(fd, &v, sizeof(v));
	else
		(void)!read(fd, &v, sizeof(v));
}

/*
 * Under mutex.  Producers and consumers call this after their change is
 * visible (wait.c), so the last update after any change sees it.
 */
void pp__pipe_update_events(struct pp_pipe *p)
{
	if (likely(p->rd_event_fd < 0 && p->wr_event_fd < 0))
		return;
	event_set(p->rd_event_fd, &p->rd_event_on, !pp__pipe_empty(p) || !pp__pipe_writers(p));
	event_set(p->wr_event_fd, &p->wr_event_on, !pp__pipe_full(p) || !pp__pipe_readers(p));
}

short pp__pipe_poll(struct pp_file *f, short events)
{
	struct pp_pipe *p = f->pipe;
	short mask = 0;

	if (pp__file_readable(f)) {
		if (!pp__pipe_empty(p))
			mask |= POLLIN | POLLRDNORM;
		if (!pp__pipe_writers(p))
			mask |= POLLHUP;
	}
	if (pp__file_writable(f)) {
		if (!pp__pipe_full(p))
			mask |= POLLOUT | POLLWRNORM;
		if (!pp__pipe_readers(p))
			mask |= POLLERR;
	}
	return mask & (events | POLLHUP | POLLERR);
}

int pp__pipe_event_fd(struct pp_file *f)
{
	struct pp_pipe *p = f->pipe;
	bool reader = pp__file_readable(f);
	int *slot = reader ? &p->rd_event_fd : &p->wr_event_fd;
	int fd;

	pthread_mutex_lock(&p->mutex);
	if (*slot < 0) {
		fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd < 0) {
			int e = errno;

			pthread_mutex_unlock(&p->mutex);
			return -e;
		}
		*slot = fd;
		if (reader)
			p->rd_event_on = false;
		else
			p->wr_event_on = false;
		/*
		 * From now on every change takes the ring lock to update the
		 * fds; a change made before it is seen by the update below.
		 */
		__atomic_store_n(&p->events, true, __ATOMIC_SEQ_CST);
		pp__pipe_update_events(p);
	}
	fd = *slot;
	pthread_mutex_unlock(&p->mutex);
	return fd;
}

/* ---------------------------------------------------------------------- */

static unsigned long round_pipe_size(unsigned long size)
{
	if (size > PP_MAX_LIMIT)
		return 0;
	if (size < pp__page_size)
		return pp__page_size;
	return 1ul << (64 - __builtin_clzl(size - 1));
}

/*
 * Both side locks keep every producer and consumer out while the slots
 * move; nobody waits while holding them, so this waits at most for a copy.
 */
ssize_t pp__pipe_set_size(struct pp_pipe *p, unsigned long arg)
{
	unsigned long size = round_pipe_size(arg);
	unsigned int nr_slots, ring_size, n;
	struct pp_buf spare = { .ops = NULL };
	struct pp__ring *ring, **prev;
	ssize_t ret = (ssize_t)size;
	bool locked;

	if (!size)
		return -EINVAL;
	nr_slots = (unsigned int)(size >> pp__page_shift);

	locked = pp__pipe_lock_consumer_ctl(p);
	pp__pipe_lock_producer(p);
	n = p->head - p->tail;
	if (nr_slots > p->max_usage && size > pp_pipe_get_max_size()) {
		ret = -EPERM;
		goto out_unlock;
	}
	if (pp__pipe_occupancy(p) > nr_slots) {
		ret = -EBUSY;	/* occupied slots, not bytes, as in Linux */
		goto out_unlock;
	}
	ring_size = pp__ring_size_for(nr_slots);
	/* A retired array of this size (pipe.h: struct pp__ring), or a new one. */
	for (prev = &p->retired; *prev && (*prev)->size != ring_size; prev = &(*prev)->retired)
		;
	ring = *prev;
	if (ring) {
		*prev = ring->retired;
	} else {
		ring = pp__ring_alloc(ring_size);
		if (!ring) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}
	/*
	 * Compact to index 0, keeping order and merge words.  A drained slot
	 * (pipe.h) holds nothing and is left behind: the new ring may have no
	 * room for it, and nobody else is in the ring to care.  Merge words
	 * are stored atomically: a waiter may be glancing at either array.
	 * What moves is cleared behind it, so the old array, if a later resize
	 * reuses it, holds no slot that looks occupied (only moved slots can:
	 * consumers clear ops as they retire), and no slot past n is touched
	 * here: a huge ring's array stays untouched memory until it is used.
	 */
	pp__pipe_clear_spares(p);
	if (n && pp__slot_drained(p, p->tail)) {
		struct pp_slot *d = pp__pipe_slot(p, p->tail);

		spare = d->buf;
		d->buf.ops = NULL;
		__atomic_store_n(&p->tail, p->tail + 1, __ATOMIC_RELEASE);
		n--;
	}
	for (unsigned int i = 0; i < n; i++) {
		struct pp_slot *from = pp__pipe_slot(p, p->tail + i);

		ring->slot[i].buf = from->buf;
		__atomic_store_n(&ring->slot[i].end, __atomic_load_n(&from->end, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
		from->buf.ops = NULL;
		__atomic_store_n(&from->end, 0, __ATOMIC_RELAXED);
	}
	p->ring->retired = p->retired;
	p->retired = p->ring;
	p->slots = ring->slot;
	p->ring_size = ring_size;
	/* Publishes the filled array to glances (pp__slot_drained). */
	__atomic_store_n(&p->ring, ring, __ATOMIC_RELEASE);
	__atomic_store_n(&p->max_usage, nr_slots, __ATOMIC_RELAXED);
	__atomic_store_n(&p->tail, 0, __ATOMIC_RELEASE);
	p->wr_tail_seen = 0;
	p->rd_head_seen = n;
	__atomic_store_n(&p->head, n, __ATOMIC_RELEASE);
	/* A private kernel pipe keeps up, so that it holds what the ring may (kbuf.c). */
	pp__kpipe_resize(p);
out_unlock:
	pp__pipe_unlock_producer(p);
	if (locked)
		pp__pipe_unlock_consumer(p);
	if (spare.ops)
		pp__buf_release(p, &spare);
	if (ret > 0) {
		/* Spinning waiters watch head and tail, which may look unmoved. */
		pp__pipe_wake_all(p);
		pthread_mutex_lock(&p->mutex);
		pp__pipe_update_events(p);
		pthread_mutex_unlock(&p->mutex);
	}
	return ret;
}

PP_EXPORT ssize_t pp_pipe_set_size(struct pp_file *f, size_t bytes)
{
	ssize_t r;

	if (!f)
		return pp__ret(-EBADF);
	if (!pp__is_pipe(f) && !pp__is_shared(f))
		return pp__ret(-EINVAL);
	pp__file_get(f);
	if (pp__is_pipe(f))
		r = pp__pipe_set_size(f->pipe, bytes);
	else if (bytes > PP_MAX_SIZE)
		r = -EPERM;	/* past the arena's slots, as set_size() answers */
	else
		r = pp__shared_fcntl(f, F_SETPIPE_SZ, bytes);	/* the new size, as Linux */
	pp__file_put(f);
	return pp__ret(r);
}

int pp__pipe_fcntl(struct pp_file *f, int cmd, unsigned long arg)
{
	struct pp_pipe *p = f->pipe;

	switch (cmd) {
	case F_SETPIPE_SZ:
		/* round_pipe_size() refuses above 2^31; an int cannot say 2^31. */
		if ((unsigned int)arg > PP_MAX_SIZE)
			return -EINVAL;
		if (round_pipe_size((unsigned int)arg) > INT_MAX)
			return -EINVAL;
		return (int)pp__pipe_set_size(p, (unsigned int)arg);
	case F_GETPIPE_SZ:
		return (int)min_t(size_t, (size_t)pp__pipe_max_usage(p) << pp__page_shift, INT_MAX);
	default:
		return -EINVAL;
	}
}

/* Under the consumer lock: the lengths are the consumer's (pipe.h). */
int pp__pipe_fionread(struct pp_file *f, int *out)
{
	struct pp_pipe *p = f->pipe;
	unsigned long count = 0;
	unsigned int head;
	bool locked = pp__pipe_lock_consumer_ctl(p);

	head = pp__pipe_head(p);
	for (unsigned int i = p->tail; i != head; i++) {
		struct pp_slot *s = pp__pipe_slot(p, i);

		pp__slot_sync(s);
		count += s->buf.len;
	}
	if (locked)
		pp__pipe_unlock_consumer(p);
	*out = (int)min_t(unsigned long, count, INT_MAX);
	return 0;
}
