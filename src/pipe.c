// SPDX-License-Identifier: MIT
/*
 * pipe.c - the ring: pp_pipe2, read, write, close, resize, readiness.
 *
 * A pagepipe is a power-of-two ring of struct pp_buf slots with free-running
 * head and tail (fs/pipe.c since 5.5).  Producers add whole slots at the
 * head; consumers take bytes from the tail.  See internal.h for the three
 * locks: the short copies and all system calls happen with the ring lock
 * dropped, which is what lets a reader and a writer copy at the same time.
 */
#include "internal.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Slots one consuming pass snapshots; more are taken on the next pass. */
#define PP_READ_BATCH	32u

/*
 * Pages a writer fills before publishing them: small enough that the reader
 * copies one batch while the writer fills the next.
 */
#define PP_WRITE_BATCH	4u

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

static void mutex_init(pthread_mutex_t *m, bool adaptive)
{
	pthread_mutexattr_t attr;

	pthread_mutexattr_init(&attr);
	/* The ring lock is held for a few dozen instructions: spin, don't sleep. */
	if (adaptive)
		pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
}

static struct pp_pipe *pipe_alloc(void)
{
	struct pp_pipe *p;

	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	/* Cache-line aligned: see the layout of struct pp_pipe. */
	p = aligned_alloc(PP_CACHELINE, (sizeof(*p) + PP_CACHELINE - 1) & ~(size_t)(PP_CACHELINE - 1));
	if (!p)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->bufs = calloc(PP_DEF_SLOTS, sizeof(*p->bufs));
	if (!p->bufs) {
		free(p);
		return NULL;
	}
	mutex_init(&p->mutex, true);
	mutex_init(&p->rd_mutex, false);
	mutex_init(&p->wr_mutex, false);
	p->ring_size = p->max_usage = PP_DEF_SLOTS;
	p->readers = p->writers = 1;
	p->files = 2;
	p->rd_event_fd = p->wr_event_fd = -1;
	p->rd_cpu = p->wr_cpu = -1;
	return p;
}

static void pipe_free(struct pp_pipe *p)
{
	while (!pp__pipe_empty(p)) {
		struct pp_buf *buf = pp__pipe_buf(p, p->tail++);

		if (buf->ops)
			pp__buf_release(p, buf);
	}
	pp__pipe_free_tmp_pages(p);
	pp__loan_free(p->loan);
	if (p->rd_event_fd >= 0)
		close(p->rd_event_fd);
	if (p->wr_event_fd >= 0)
		close(p->wr_event_fd);
	pthread_mutex_destroy(&p->mutex);
	pthread_mutex_destroy(&p->rd_mutex);
	pthread_mutex_destroy(&p->wr_mutex);
	free(p->bufs);
	free(p);
}

/* The ends are files too; file.c allocates them. */
struct pp_file *pp__file_alloc(const struct pp_file_ops *ops, enum pp_kind kind, int flags);

PP_EXPORT int pp_pipe2(struct pp_file *ends[2], int flags)
{
	const int valid = O_NONBLOCK | O_DIRECT | O_CLOEXEC | PP_O_NOSIGPIPE;
	struct pp_file *r, *w;
	struct pp_pipe *p;
	int keep;

	if (!ends)
		return (int)pp__ret(-EFAULT);
	if (flags & ~valid)
		return (int)pp__ret(-EINVAL);
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

/* ---------------------------------------------------------------------- */

void pp__pipe_double_lock(struct pp_pipe *a, struct pp_pipe *b)
{
	/* Address order: tee A->B and tee B->A must not take these ABBA. */
	if (a < b) {
		pthread_mutex_lock(&a->mutex);
		pthread_mutex_lock(&b->mutex);
	} else {
		pthread_mutex_lock(&b->mutex);
		pthread_mutex_lock(&a->mutex);
	}
}

void pp__pipe_double_unlock(struct pp_pipe *a, struct pp_pipe *b)
{
	pp__pipe_unlock(a);
	pp__pipe_unlock(b);
}

/*
 * The wait queues are bare futexes: a condition variable costs more system
 * calls per sleep and wake-up than the one each that this needs, and the
 * ring lock already orders everything a waiter looks at.
 */
static void waitq_wake_all(unsigned int *wq)
{
	__atomic_fetch_add(wq, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, wq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Under mutex; returns with it held, after a wake-up or a spurious return. */
static void waitq_sleep(struct pp_pipe *p, unsigned int *wq)
{
	unsigned int seen = __atomic_load_n(wq, __ATOMIC_RELAXED);

	pthread_mutex_unlock(&p->mutex);
	/* EAGAIN: a wake-up came after we let go; EINTR: look again anyway. */
	syscall(SYS_futex, wq, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
	pthread_mutex_lock(&p->mutex);
}

void pp__pipe_flush_wakes(struct pp_pipe *p, unsigned int wake)
{
	if (wake & PP_WAKE_RD)
		waitq_wake_all(&p->rd_wait);
	if (wake & PP_WAKE_WR)
		waitq_wake_all(&p->wr_wait);
}

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

void pp__pipe_update_events(struct pp_pipe *p)
{
	if (likely(p->rd_event_fd < 0 && p->wr_event_fd < 0))
		return;
	event_set(p->rd_event_fd, &p->rd_event_on, !pp__pipe_empty(p) || !p->writers);
	event_set(p->wr_event_fd, &p->wr_event_on, !pp__pipe_full(p) || !p->readers);
}

void pp__pipe_wake_readers(struct pp_pipe *p)
{
	if (p->rd_sleepers && !p->rd_wake_sent) {
		p->wake_pending |= PP_WAKE_RD;
		p->rd_wake_sent = true;
	}
	pp__pipe_update_events(p);
}

void pp__pipe_wake_writers(struct pp_pipe *p)
{
	if (p->wr_sleepers && !p->wr_wake_sent) {
		p->wake_pending |= PP_WAKE_WR;
		p->wr_wake_sent = true;
	}
	pp__pipe_update_events(p);
}

/*
 * Deliver what we owe with the lock held: before sleeping (nobody else
 * will) and on a close (after it the pipe may be gone).
 */
static void flush_wakes_locked(struct pp_pipe *p)
{
	unsigned int wake = p->wake_pending;

	p->wake_pending = 0;
	if (wake)
		pp__pipe_flush_wakes(p, wake);
}

/*
 * Before sleeping, wait a little with the lock dropped, the way the
 * kernel's mutexes spin on an owner that is running.
 *
 * When the peer is in a call on another CPU it usually adds data or frees a
 * slot within microseconds, and a futex sleep plus a cross-CPU wake-up
 * costs tens of them (far more on a virtual machine, where the idle CPU has
 * to be woken by the host): spin.
 *
 * When the peer last ran on our CPU it cannot move until we stop, so
 * spinning is pointless: yield instead.  The peer runs, and we are not
 * counted as a sleeper, so it owes us no futex wake-up; on a virtual
 * machine a system call costs a microsecond, and a wake-up that preempts
 * the waker costs a context switch per write on top.  This is the same
 * bargain the kernel makes with a synchronous wake-up: the waker goes on
 * until it blocks.
 *
 * (A peer counted as a sleeper is no reason not to wait: it is most often
 * one already woken and on its way.)  Both are bounded in time, about what
 * a sleep and a wake-up cost, so a wait that fails is never much worse than
 * sleeping at once.
 */
#ifndef PP_SPIN_NS
#define PP_SPIN_NS	20000
#endif

static int online_cpus;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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
 * A reader waiting on an empty ring offers its buffer to writers: see
 * direct_handoff() below.  On the reader's stack, under mutex while it is
 * p->direct; done is also watched without the lock.
 */
struct iov_iter;

struct pp__direct {
	struct iov_iter *it;	/* the reader's buffer */
	size_t want;		/* bytes it has room for */
	size_t done;		/* bytes a writer put there */
};

static bool moved(const unsigned int *index, unsigned int seen, const struct pp__direct *d)
{
	return __atomic_load_n(index, __ATOMIC_ACQUIRE) != seen ||
	       (d && __atomic_load_n(&d->done, __ATOMIC_ACQUIRE));
}

/*
 * Under mutex; returns with it held.  True if *index moved or d was filled
 * while we waited with the lock dropped (the caller re-checks its
 * condition), false if neither happened and the caller should sleep.
 */
static bool wait_briefly(struct pp_pipe *p, const unsigned int *index, const int *peer_cpu,
			 const struct pp__direct *d)
{
	unsigned int seen = *index;
	bool yield = peer_shares_cpu(peer_cpu);
	long long deadline;
	bool done = false;

	pp__pipe_unlock(p);
	deadline = mono_ns() + PP_SPIN_NS;
	do {
		if (yield) {
			sched_yield();
			done = moved(index, seen, d);
			continue;
		}
		for (int i = 0; i < 64 && !done; i++) {
			done = moved(index, seen, d);
			cpu_relax();
		}
	} while (!done && mono_ns() < deadline);
	pthread_mutex_lock(&p->mutex);
	return done || moved(index, seen, d);
}

/* Under mutex; d, if set, is offered to writers until we return. */
static void wait_readable(struct pp_pipe *p, struct pp__direct *d)
{
	if (d)
		p->direct = d;
	/*
	 * The brief wait watched head and d only: a close, or a resize
	 * that moved the slots, may have changed the answer meanwhile, and
	 * no wake-up is owed to a thread that was not yet asleep.  Look
	 * again before sleeping; the caller re-checks after any return.
	 */
	if (!wait_briefly(p, &p->head, &p->wr_cpu, d) && p->writers && pp__pipe_empty(p)) {
		flush_wakes_locked(p);
		p->rd_wake_sent = false;
		p->rd_sleepers++;
		waitq_sleep(p, &p->rd_wait);
		p->rd_sleepers--;
	}
	if (d && p->direct == d)
		p->direct = NULL;	/* not taken: withdraw */
}

int pp__pipe_wait_readable(struct pp_pipe *p)
{
	wait_readable(p, NULL);
	return 0;
}

int pp__pipe_wait_writable(struct pp_pipe *p)
{
	/* As above: a resize that grew the ring moves no index. */
	if (wait_briefly(p, &p->tail, &p->rd_cpu, NULL) || !p->readers || !pp__pipe_full(p))
		return 0;
	flush_wakes_locked(p);
	p->wr_wake_sent = false;
	p->wr_sleepers++;
	waitq_sleep(p, &p->wr_wait);
	p->wr_sleepers--;
	return 0;
}

bool pp__pipe_nonblock(const struct pp_file *f, unsigned int splice_flags)
{
	return (pp__file_flags(f) & O_NONBLOCK) || (splice_flags & SPLICE_F_NONBLOCK);
}

int pp__pipe_epipe(const struct pp_file *f)
{
	if (!(pp__file_flags(f) & PP_O_NOSIGPIPE))
		raise(SIGPIPE);
	return -EPIPE;
}

/* Stored only when it changed, so the peer's cached copy stays valid. */
static inline void note_cpu(int *where)
{
	int cpu = sched_getcpu();

	if (__atomic_load_n(where, __ATOMIC_RELAXED) != cpu)
		__atomic_store_n(where, cpu, __ATOMIC_RELAXED);
}

/*
 * A non-blocking caller must not sleep behind a consumer that sleeps on an
 * empty pipe holding rd_mutex: if the lock is taken and the pipe is empty
 * with writers, the answer is EAGAIN, exactly what the holder would see.
 * Otherwise the holder is copying and will let go soon.
 */
int pp__pipe_lock_consumer(struct pp_pipe *p, bool nonblock)
{
	if (!nonblock) {
		pthread_mutex_lock(&p->rd_mutex);
		goto locked;
	}
	while (pthread_mutex_trylock(&p->rd_mutex)) {
		bool would_block;

		pthread_mutex_lock(&p->mutex);
		would_block = pp__pipe_empty(p) && p->writers;
		pp__pipe_unlock(p);
		if (would_block)
			return -EAGAIN;
		sched_yield();
	}
locked:
	note_cpu(&p->rd_cpu);
	return 0;
}

void pp__pipe_unlock_consumer(struct pp_pipe *p)
{
	pthread_mutex_unlock(&p->rd_mutex);
}

int pp__pipe_lock_producer(struct pp_pipe *p, bool nonblock)
{
	if (!nonblock) {
		pthread_mutex_lock(&p->wr_mutex);
		goto locked;
	}
	while (pthread_mutex_trylock(&p->wr_mutex)) {
		bool would_block;

		pthread_mutex_lock(&p->mutex);
		would_block = pp__pipe_full(p) && p->readers;
		pp__pipe_unlock(p);
		if (would_block)
			return -EAGAIN;
		sched_yield();
	}
locked:
	note_cpu(&p->wr_cpu);
	return 0;
}

void pp__pipe_unlock_producer(struct pp_pipe *p)
{
	pthread_mutex_unlock(&p->wr_mutex);
}

/* ---------------------------------------------------------------------- */

/* An iovec cursor: the position equals the bytes consumed (CVE-2015-1805). */
struct iov_iter {
	const struct iovec *iov;
	int nr;
	size_t off;		/* within iov[0] */
};

static void iter_skip_empty(struct iov_iter *it)
{
	while (it->nr && it->off == it->iov->iov_len) {
		it->iov++;
		it->nr--;
		it->off = 0;
	}
}

/*
 * Copy len bytes out of the iterator; returns the bytes copied, fewer when
 * a segment has a NULL base (the fault the kernel would take there).
 */
static size_t iter_copy_from(struct iov_iter *it, char *dst, size_t len)
{
	size_t done = 0;

	while (done < len) {
		size_t n;

		iter_skip_empty(it);
		if (!it->iov->iov_base)
			break;
		n = min_t(size_t, len - done, it->iov->iov_len - it->off);
		memcpy(dst + done, (const char *)it->iov->iov_base + it->off, n);
		it->off += n;
		done += n;
	}
	return done;
}

/* True if the next len bytes lie in segments with a base (see iter_copy_from). */
static bool iter_mapped(const struct iov_iter *it, size_t len)
{
	const struct iovec *iov = it->iov;
	size_t off = it->off;

	for (int nr = it->nr; len && nr; iov++, nr--, off = 0) {
		size_t n = min_t(size_t, len, iov->iov_len - off);

		if (n && !iov->iov_base)
			return false;
		len -= n;
	}
	return !len;
}

/* Both iterators hold at least len mapped bytes (iter_mapped). */
static void iter_copy_iter(struct iov_iter *dst, struct iov_iter *src, size_t len)
{
	while (len) {
		size_t n;

		iter_skip_empty(dst);
		iter_skip_empty(src);
		n = min_t(size_t, len, dst->iov->iov_len - dst->off);
		n = min_t(size_t, n, src->iov->iov_len - src->off);
		memcpy((char *)dst->iov->iov_base + dst->off,
		       (const char *)src->iov->iov_base + src->off, n);
		dst->off += n;
		src->off += n;
		len -= n;
	}
}

/*
 * Direct handoff.  A reader waiting on an empty ring (spinning, yielding or
 * asleep) offers its buffer, and a write that finds it there copies
 * straight into it: one copy instead of two, and on one CPU the write after
 * it goes into the ring instead of waiting for the reader to run.
 *
 * What a caller can see stays what the kernel can give, because every
 * handoff is as if the bytes had gone into the ring and the reader had
 * taken them at once, which a reader may always do:
 *
 *  - only when the ring is empty, so the bytes keep their place in order;
 *  - a write of at most PIPE_BUF only whole, so it stays atomic;
 *  - from a non-blocking writer, only a whole write that would have fitted
 *    in the ring, so its count and whether it gets EAGAIN are the kernel's;
 *  - a blocking writer, whose count does not depend on how the reader
 *    kept up, may hand over any part of a larger write;
 *  - never packets (O_DIRECT): a read must end at a packet's end.
 *
 * The copy is made under the ring lock, which the reader needs to withdraw
 * its offer; PP_DIRECT_MAX bounds how long that is.
 */
#define PP_DIRECT_MAX	(256u * 1024)

/*
 * Under mutex, from a non-packet writer at offset done of a write of total
 * bytes; returns the bytes handed over, 0 if none.
 */
static size_t direct_handoff(struct pp_pipe *p, struct iov_iter *src, size_t done,
			     size_t total, bool nonblock)
{
	struct pp__direct *d = p->direct;
	size_t len = total - done;

	if (!d || !pp__pipe_empty(p))
		return 0;
	if (len > d->want || len > PP_DIRECT_MAX ||
	    len > (size_t)p->max_usage * pp__page_size) {
		if (nonblock || total <= PP_PIPE_BUF)
			return 0;
		len = min_t(size_t, len, min_t(size_t, d->want, PP_DIRECT_MAX));
	}
	if (!iter_mapped(src, len) || !iter_mapped(d->it, len))
		return 0;
	iter_copy_iter(d->it, src, len);
	__atomic_store_n(&d->done, len, __ATOMIC_RELEASE);
	p->direct = NULL;
	pp__pipe_wake_readers(p);
	return len;
}

/*
 * Copy one buffer's bytes [off, off + len) into the iterator.  Memory the
 * iterator cannot take directly (a file buffer read by pread) goes straight
 * into the destination segment by segment.
 */
static ssize_t copy_buf_to_iter(struct pp_pipe *p, struct pp_buf *buf, size_t off,
				size_t len, struct iov_iter *it)
{
	size_t done = 0;

	while (done < len) {
		size_t n;
		ssize_t r;

		iter_skip_empty(it);
		if (!it->iov->iov_base)
			return -EFAULT;	/* a short copy fails the buffer, as copy_page_to_iter does */
		n = min_t(size_t, len - done, it->iov->iov_len - it->off);
		r = pp__buf_copy_out(p, buf, off + done, (char *)it->iov->iov_base + it->off, n);
		if (r < 0)
			return done ? (ssize_t)done : r;
		it->off += (size_t)r;
		done += (size_t)r;
		if ((size_t)r < n)
			return done ? (ssize_t)done : -ENODATA;
	}
	return (ssize_t)done;
}

unsigned int pp__pipe_snapshot(struct pp_pipe *p, struct pp_buf *snap, unsigned int max,
			       size_t want, bool packets)
{
	unsigned int nr = 0;
	size_t have = 0;

	for (unsigned int s = p->tail; s != p->head && nr < max && have < want; s++) {
		snap[nr] = *pp__pipe_buf(p, s);
		have += snap[nr].len;
		if (packets && (snap[nr++].flags & PP_BUF_FLAG_PACKET))
			break;
		if (!packets)
			nr++;
	}
	return nr;
}

/*
 * Apply what a consumer took from its snapshot: `bytes` from the front, in
 * order.  A slot may have grown by a merge since the snapshot; it stays if
 * bytes remain.  Emptied slots (zero-length ones on the way included) move
 * to dead[] so their references are dropped after the ring lock is let go.
 */
unsigned int pp__pipe_consume(struct pp_pipe *p, size_t bytes, bool packets,
			      struct pp_buf *dead, unsigned int max)
{
	unsigned int ndead = 0;

	while (!pp__pipe_empty(p) && ndead < max) {
		struct pp_buf *buf = pp__pipe_buf(p, p->tail);
		size_t n = min_t(size_t, bytes, buf->len);

		buf->offset += (unsigned int)n;
		buf->len -= (unsigned int)n;
		bytes -= n;
		if (n && packets && (buf->flags & PP_BUF_FLAG_PACKET))
			buf->len = 0;	/* a short read discards the rest of a packet */
		if (buf->len)
			break;
		dead[ndead++] = *buf;
		buf->ops = NULL;
		pp__pipe_set_tail(p, p->tail + 1);
		if (!bytes && !pp__pipe_empty(p) && pp__pipe_buf(p, p->tail)->len)
			break;
	}
	return ndead;
}

void pp__pipe_release_bufs(struct pp_pipe *p, struct pp_buf *bufs, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		pp__buf_release(p, &bufs[i]);
}

ssize_t pp__pipe_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	return pp__pipe_read(f, iov, iovcnt, pp__file_flags(f) & O_NONBLOCK);
}

ssize_t pp__pipe_read(struct pp_file *f, const struct iovec *iov, int iovcnt, bool nonblock)
{
	struct pp_pipe *p = f->pipe;
	struct iov_iter it = { iov, iovcnt, 0 };
	struct pp_buf snap[PP_READ_BATCH], dead[PP_READ_BATCH];
	ssize_t total = pp__iov_total(iov, iovcnt);
	ssize_t ret = 0;
	int err;

	if (total < 0)
		return total;
	if (!pp__file_readable(f))
		return -EBADF;
	if (total == 0)
		return 0;

	err = pp__pipe_lock_consumer(p, nonblock);
	if (err)
		return err;
	pthread_mutex_lock(&p->mutex);
	for (;;) {
		unsigned int nr, ndead;
		size_t want = (size_t)(total - ret), taken = 0;
		bool stop = false, was_full;

		if (pp__pipe_empty(p)) {
			if (!p->writers || ret)
				break;
			if (nonblock) {
				ret = -EAGAIN;
				break;
			}
			{
				struct pp__direct d = { .it = &it, .want = (size_t)total };

				wait_readable(p, &d);
				ret = (ssize_t)d.done;
			}
			if (ret == total)
				break;
			continue;
		}

		/* Snapshot the tail slots this read will use. */
		nr = pp__pipe_snapshot(p, snap, PP_READ_BATCH, want, true);
		pp__pipe_unlock_quiet(p);

		for (unsigned int i = 0; i < nr; i++) {
			struct pp_buf *buf = &snap[i];
			size_t n = min_t(size_t, buf->len, want);
			ssize_t r;

			if (!n)
				continue;	/* zero-length buffers are eaten */
			err = pp__buf_confirm(p, buf);
			r = err ? err : copy_buf_to_iter(p, buf, 0, n, &it);
			if (r < 0) {
				/*
				 * Bytes already read are returned first; the error
				 * shows on the next read.  A buffer whose data is
				 * gone (ENODATA: truncated) is reported once and
				 * dropped so the reader can go on; any other error
				 * (EIO) leaves it in place, as Linux does.
				 */
				if (!ret) {
					ret = r;
					if (r == -ENODATA)
						taken += buf->len;
				}
				stop = true;
				break;
			}
			taken += (size_t)r;
			ret += r;
			want -= (size_t)r;
			if ((size_t)r < n || (buf->flags & PP_BUF_FLAG_PACKET)) {
				stop = true;
				break;
			}
			if (!want)
				break;
		}

		pthread_mutex_lock(&p->mutex);
		was_full = pp__pipe_full(p);
		ndead = pp__pipe_consume(p, taken, true, dead, PP_READ_BATCH);
		if (ndead && (was_full || p->wr_sleepers))
			pp__pipe_wake_writers(p);
		else if (ndead)
			pp__pipe_update_events(p);
		if (ndead) {
			pp__pipe_unlock_quiet(p);
			pp__pipe_release_bufs(p, dead, ndead);
			pthread_mutex_lock(&p->mutex);
		}
		if (stop || ret < 0 || ret == total)
			break;
	}
	pp__pipe_unlock(p);
	pp__pipe_unlock_consumer(p);
	return ret;
}

/* ---------------------------------------------------------------------- */

static ssize_t pipe_write_locked(struct pp_file *f, struct pp_pipe *p, struct iov_iter *it,
				 size_t total, bool nonblock)
{
	const size_t psz = pp__page_size;
	bool packet = pp__file_flags(f) & O_DIRECT;
	size_t chars = total & (psz - 1);
	size_t left = total;
	bool faulted = false;
	ssize_t ret = 0;

	pthread_mutex_lock(&p->mutex);
	if (!p->readers) {
		pp__pipe_unlock(p);
		return pp__pipe_epipe(f);
	}

	/*
	 * The merge rule: the sub-page remainder goes first, appended to the
	 * last buffer if the pipe wrote that page and owns it alone and all
	 * of it fits; the rest then stays page-aligned.  The copy is done
	 * under the ring lock because a consumer may release that buffer.
	 */
	if (chars && !pp__pipe_empty(p)) {
		struct pp_buf *last = pp__pipe_buf(p, p->head - 1);

		/* Any writer may merge, packet or not: the last buffer's flag decides. */
		if ((last->flags & PP_BUF_FLAG_CAN_MERGE) &&
		    last->offset + last->len + chars <= psz) {
			if (iter_copy_from(it, (char *)last->page + last->offset + last->len,
					   chars) < chars) {
				pp__pipe_unlock(p);
				return -EFAULT;
			}
			last->len += (unsigned int)chars;
			ret = (ssize_t)chars;
			left -= chars;
			pp__pipe_wake_readers(p);
		}
	}

	while (left) {
		struct pp_buf fill[PP_DEF_SLOTS];
		unsigned int nfree, k, pushed;
		bool small;

		if (!p->readers) {
			/* SIGPIPE even after a partial write, as Linux does. */
			int e = pp__pipe_epipe(f);

			if (!ret)
				ret = e;
			break;
		}
		/* Also after a wait: the reader may have drained the ring and slept. */
		if (!packet && p->direct) {
			size_t n = direct_handoff(p, it, (size_t)ret, total, nonblock);

			ret += (ssize_t)n;
			left -= n;
			if (!left)
				break;
			if (n)
				continue;
		}
		if (pp__pipe_full(p)) {
			if (nonblock) {
				if (!ret)
					ret = -EAGAIN;
				break;
			}
			pp__pipe_wait_writable(p);
			continue;
		}

		/*
		 * Fill fresh pages with the ring lock dropped.  We hold the
		 * producer lock, so the free slots can only grow meanwhile,
		 * unless a resize shrinks the ring.
		 */
		nfree = p->max_usage - pp__pipe_occupancy(p);
		k = (unsigned int)min_t(size_t, nfree, (left + psz - 1) / psz);
		k = min_t(unsigned int, k, PP_WRITE_BATCH);
		/*
		 * A small write fills its one page under the lock: that copy
		 * is shorter than a second trip through the lock the reader
		 * is taking just as often.
		 */
		small = left <= PP_PIPE_BUF;
		if (!small)
			pp__pipe_unlock_quiet(p);

		for (unsigned int i = 0; i < k; i++) {
			size_t n = min_t(size_t, psz, left - (size_t)i * psz);
			void *page = pp__page_alloc(p);

			if (!page) {
				k = i;
				break;
			}
			if (iter_copy_from(it, page, n) < n) {
				/* A fault: publish the whole pages before it, no more. */
				pp__page_free(p, page);
				k = i;
				faulted = true;
				break;
			}
			fill[i] = (struct pp_buf){
				.page = page,
				.offset = 0,
				.len = (unsigned int)n,
				.ops = &pp_anon_buf_ops,
				.flags = packet ? PP_BUF_FLAG_PACKET : PP_BUF_FLAG_CAN_MERGE,
			};
		}

		if (!small)
			pthread_mutex_lock(&p->mutex);
		if (!k) {
			if (!ret)
				ret = faulted ? -EFAULT : -ENOMEM;
			break;
		}
		/*
		 * Publish what was filled.  Only a shrinking resize can have
		 * taken the room we counted: a blocking writer waits for it,
		 * a non-blocking one gives the rest back uncounted.
		 */
		for (pushed = 0; pushed < k && p->readers; ) {
			if (pp__pipe_full(p)) {
				if (nonblock)
					break;
				pp__pipe_wake_readers(p);
				pp__pipe_wait_writable(p);
				continue;
			}
			pp__pipe_push(p, &fill[pushed]);
			ret += fill[pushed].len;
			left -= fill[pushed].len;
			pushed++;
		}
		if (pushed)
			pp__pipe_wake_readers(p);
		if (pushed < k) {
			pp__pipe_unlock(p);
			for (unsigned int i = pushed; i < k; i++)
				pp__page_free(p, fill[i].page);
			pthread_mutex_lock(&p->mutex);
			if (!p->readers) {
				int e = pp__pipe_epipe(f);

				if (!ret)
					ret = e;
			} else if (!ret) {
				ret = -EAGAIN;
			}
			break;
		}
		if (faulted || fill[k - 1].len < psz)
			break;	/* a fault, or that was the last, partial page */
	}
	pp__pipe_unlock(p);
	return ret;
}

ssize_t pp__pipe_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	struct pp_pipe *p = f->pipe;
	struct iov_iter it = { iov, iovcnt, 0 };
	bool nonblock = pp__file_flags(f) & O_NONBLOCK;
	ssize_t total = pp__iov_total(iov, iovcnt);
	ssize_t ret;
	int err;

	if (total < 0)
		return total;
	if (!pp__file_writable(f))
		return -EBADF;
	if (total == 0)
		return 0;	/* no SIGPIPE for a zero-length write */

	err = pp__pipe_lock_producer(p, nonblock);
	if (err)
		return err;
	ret = pipe_write_locked(f, p, &it, (size_t)total, nonblock);
	pp__pipe_unlock_producer(p);
	return ret;
}

ssize_t pp__pipe_add_buf(struct pp_file *f, const struct pp_buf *buf, unsigned int flags)
{
	struct pp_pipe *p = f->pipe;
	bool nonblock = pp__pipe_nonblock(f, flags);
	ssize_t ret;
	int err;

	if (!pp__file_writable(f))
		return -EBADF;
	if (!buf || !buf->ops || !buf->ops->release || !buf->ops->get ||
	    (buf->flags & PP_BUF_FLAG_CAN_MERGE) ||
	    (size_t)buf->offset + buf->len > pp__page_size)
		return -EINVAL;

	err = pp__pipe_lock_producer(p, nonblock);
	if (err)
		return err;
	pthread_mutex_lock(&p->mutex);
	for (;;) {
		if (!p->readers) {
			ret = pp__pipe_epipe(f);
			break;
		}
		if (!pp__pipe_full(p)) {
			pp__pipe_push(p, buf);
			pp__pipe_wake_readers(p);
			ret = buf->len;
			break;
		}
		if (nonblock) {
			ret = -EAGAIN;
			break;
		}
		pp__pipe_wait_writable(p);
	}
	pp__pipe_unlock(p);
	pp__pipe_unlock_producer(p);
	return ret;
}

/* ---------------------------------------------------------------------- */

short pp__pipe_poll(struct pp_file *f, short events)
{
	struct pp_pipe *p = f->pipe;
	short mask = 0;

	pthread_mutex_lock(&p->mutex);
	if (pp__file_readable(f)) {
		if (!pp__pipe_empty(p))
			mask |= POLLIN | POLLRDNORM;
		if (!p->writers)
			mask |= POLLHUP;
	}
	if (pp__file_writable(f)) {
		if (!pp__pipe_full(p))
			mask |= POLLOUT | POLLWRNORM;
		if (!p->readers)
			mask |= POLLERR;
	}
	pp__pipe_unlock(p);
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

			pp__pipe_unlock(p);
			return -e;
		}
		*slot = fd;
		if (reader)
			p->rd_event_on = false;
		else
			p->wr_event_on = false;
		pp__pipe_update_events(p);
	}
	fd = *slot;
	pp__pipe_unlock(p);
	return fd;
}

int pp__pipe_release(struct pp_file *f)
{
	struct pp_pipe *p = f->pipe;
	bool last;

	pthread_mutex_lock(&p->mutex);
	if (pp__file_readable(f))
		p->readers--;
	else
		p->writers--;
	/*
	 * Everyone blocked on either side must see EOF or EPIPE now.  The
	 * wake-ups go out with the lock held: once we let go, the other end's
	 * last close may free the pipe, futex words and all.
	 */
	pp__pipe_wake_readers(p);
	pp__pipe_wake_writers(p);
	flush_wakes_locked(p);
	last = --p->files == 0;
	pp__pipe_unlock(p);
	if (last)
		pipe_free(p);
	return 0;
}

static unsigned long round_pipe_size(unsigned long size)
{
	if (size > PP_MAX_LIMIT)
		return 0;
	if (size < pp__page_size)
		return pp__page_size;
	return 1ul << (64 - __builtin_clzl(size - 1));
}

ssize_t pp__pipe_set_size(struct pp_pipe *p, unsigned long arg)
{
	unsigned long size = round_pipe_size(arg);
	unsigned int nr_slots, n;
	struct pp_buf *bufs;

	if (!size)
		return -EINVAL;
	nr_slots = (unsigned int)(size >> pp__page_shift);

	pthread_mutex_lock(&p->mutex);
	if (nr_slots > p->max_usage && size > pp_pipe_get_max_size()) {
		pp__pipe_unlock(p);
		return -EPERM;
	}
	n = pp__pipe_occupancy(p);
	if (n > nr_slots) {
		pp__pipe_unlock(p);
		return -EBUSY;	/* occupied slots, not bytes, as in Linux */
	}
	bufs = pp__fault(PP_FAULT_ALLOC) ? NULL : calloc(nr_slots, sizeof(*bufs));
	if (!bufs) {
		pp__pipe_unlock(p);
		return -ENOMEM;
	}
	/* Compact to index 0, keeping order; consumers hold copies, not slots. */
	for (unsigned int i = 0; i < n; i++)
		bufs[i] = *pp__pipe_buf(p, p->tail + i);
	free(p->bufs);
	p->bufs = bufs;
	pp__pipe_set_tail(p, 0);
	pp__pipe_set_head(p, n);
	p->ring_size = p->max_usage = nr_slots;
	pp__pipe_wake_writers(p);
	pp__pipe_update_events(p);
	pp__pipe_unlock(p);
	return (ssize_t)size;
}

PP_EXPORT ssize_t pp_pipe_set_size(struct pp_file *f, size_t bytes)
{
	ssize_t r;

	if (!f)
		return pp__ret(-EBADF);
	if (!pp__is_pipe(f))
		return pp__ret(-EINVAL);
	pp__file_get(f);
	r = pp__pipe_set_size(f->pipe, bytes);
	pp__file_put(f);
	return pp__ret(r);
}

int pp__pipe_fcntl(struct pp_file *f, int cmd, unsigned long arg)
{
	struct pp_pipe *p = f->pipe;
	int size;

	switch (cmd) {
	case F_SETPIPE_SZ:
		/* round_pipe_size() refuses above 2^31; an int cannot say 2^31. */
		if ((unsigned int)arg > PP_MAX_SIZE)
			return -EINVAL;
		if (round_pipe_size((unsigned int)arg) > INT_MAX)
			return -EINVAL;
		return (int)pp__pipe_set_size(p, (unsigned int)arg);
	case F_GETPIPE_SZ:
		pthread_mutex_lock(&p->mutex);
		size = (int)min_t(size_t, (size_t)p->max_usage << pp__page_shift, INT_MAX);
		pp__pipe_unlock(p);
		return size;
	default:
		return -EINVAL;
	}
}

int pp__pipe_fionread(struct pp_file *f, int *out)
{
	struct pp_pipe *p = f->pipe;
	unsigned long count = 0;

	pthread_mutex_lock(&p->mutex);
	for (unsigned int s = p->tail; s != p->head; s++)
		count += pp__pipe_buf(p, s)->len;
	pp__pipe_unlock(p);
	*out = (int)min_t(unsigned long, count, INT_MAX);
	return 0;
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
