// SPDX-License-Identifier: MIT
/*
 * kbuf.c - kernel-resident buffers: bytes that stay in a private kernel pipe.
 *
 * User space cannot hold an skb's pages or a kernel pipe's buffers, but a
 * kernel pipe can: so a pagepipe may own one (struct pp__kpipe, made on
 * first need, sized to the pagepipe, closed with it), and a buffer of this
 * type stands for the next `len` bytes waiting in it.  Splicing a socket, a
 * kernel pipe, a FIFO or a character device into the pagepipe is one
 * splice(2) into the private pipe and a kernel buffer per page of what it
 * moved; nothing is copied.  Consuming them:
 *
 *   to a socket, file, kernel pipe	splice(2) out of the private pipe (fd.c)
 *   to another pagepipe		splice(2) between the two private pipes
 *   tee to another pagepipe		tee(2) between them
 *   read, readv			read(2) into the caller's memory
 *   anything that needs memory		read(2) into an anonymous page, which
 *   (a loan, vmsplice, a user		replaces the kernel buffer in its slot
 *   endpoint, a fallback)		(pp__kbuf_materialize)
 *
 * The invariant that makes this work: the private pipe holds exactly the
 * bytes of the pagepipe's kernel buffers, in ring order.  Producers append
 * to both under wr_mutex, with the room counted first, so nothing is
 * waited for between the splice and the publish; consumers take from the
 * front of both under rd_mutex, and every consumer that takes a kernel
 * buffer's bytes takes them out of the private pipe by a kernel call that
 * reports how many moved, and consumes exactly that many from the ring.
 * So the front of the private pipe is always the first kernel buffer
 * between tail and head, whatever other types sit around it, and a buffer
 * of this type is never shared (->get refuses): tee and pipe-to-pipe
 * splices make new ones in the other pipe instead.
 *
 * Packets.  A kernel pipe written with O_DIRECT holds packets, which
 * splice(2) keeps, and a read(2) of a packet in part throws its rest away,
 * as a pagepipe's read of a packet buffer does.  User space cannot see the
 * flag, so a private pipe that ever received a kernel pipe's bytes is
 * marked `packets`: reads from it count what the kernel threw away
 * (FIONREAD, with the producer held off), and materializing goes through a
 * second private pipe so that nothing is read in part.
 */
#include "internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct pp__kpipe {
	int rd, wr;			/* both O_NONBLOCK: no call on them waits */
	int scr[2];			/* for materializing packets; -1 until needed */
	unsigned int pages;		/* its size, F_GETPIPE_SZ / page size */
	bool packets;			/* atomic: a kernel pipe's bytes went in */
	size_t bytes;			/* atomic: the sum of its kernel buffers' lengths */
};

/* Never shared (see above): a path that would share one gets EFAULT, not corruption. */
static bool kbuf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	(void)buf;
	return false;
}

/*
 * The bytes were taken out of the private pipe by whoever consumed the
 * buffer; a buffer released unconsumed is one of a pipe going away with
 * its private pipe (pipe_free), or of one with no reader left.
 */
static void kbuf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	(void)buf;
}

const struct pp_buf_ops pp__kernel_buf_ops = {
	.release	= kbuf_release,
	.get		= kbuf_get,
	.name		= "kernel",
};

/* ---------------------------------------------------------------------- */

static void kpipe_bytes_add(struct pp__kpipe *kp, size_t n)
{
	__atomic_fetch_add(&kp->bytes, n, __ATOMIC_RELAXED);
}

static void kpipe_bytes_sub(struct pp__kpipe *kp, size_t n)
{
	__atomic_fetch_sub(&kp->bytes, n, __ATOMIC_RELAXED);
}

static bool kpipe_packets(const struct pp__kpipe *kp)
{
	return __atomic_load_n(&kp->packets, __ATOMIC_RELAXED);
}

static void kpipe_set_packets(struct pp__kpipe *kp)
{
	__atomic_store_n(&kp->packets, true, __ATOMIC_RELAXED);
}

/* Grow to at least `pages`, as far as the kernel lets us; its size after. */
static unsigned int kpipe_grow(struct pp__kpipe *kp, unsigned int pages)
{
	int r;

	if (pages <= kp->pages)
		return kp->pages;
	if (pages > (unsigned int)INT_MAX >> pp__page_shift)
		pages = (unsigned int)INT_MAX >> pp__page_shift;
	/* Above pipe-max-size an unprivileged caller gets EPERM: ask for less. */
	for (; pages > kp->pages; pages /= 2) {
		r = fcntl(kp->wr, F_SETPIPE_SZ, (int)(pages << pp__page_shift));
		if (r > 0) {
			kp->pages = (unsigned int)r >> pp__page_shift;
			break;
		}
		if (errno != EPERM)
			break;
	}
	return kp->pages;
}

/* Double kp if the kernel lets us: did it grow? */
static bool kpipe_grew(struct pp__kpipe *kp)
{
	unsigned int had = kp->pages;

	return kpipe_grow(kp, 2 * had) > had;
}

/*
 * Producer (wr_mutex held): the pipe's private kernel pipe, made now if
 * need be, or NULL (no descriptors or memory to spare: the caller copies).
 * Published to consumers by the first kernel buffer's publication.
 */
struct pp__kpipe *pp__kpipe_get(struct pp_pipe *p)
{
	struct pp__kpipe *kp = p->kpipe;
	int fds[2], sz;

	if (kp)
		return kp;
	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	kp = calloc(1, sizeof(*kp));
	if (!kp)
		return NULL;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC)) {
		free(kp);
		return NULL;
	}
	kp->rd = fds[0];
	kp->wr = fds[1];
	kp->scr[0] = kp->scr[1] = -1;
	sz = fcntl(kp->wr, F_GETPIPE_SZ);
	kp->pages = sz > 0 ? (unsigned int)sz >> pp__page_shift : 16;
	/*
	 * Twice the pagepipe's slots: a socket's page of bytes may sit in
	 * two of the kernel's buffers.  When the kernel refuses (a user over
	 * pipe-user-pages-soft), what we have serves, and a full private
	 * pipe only sends the bytes the copying way.
	 */
	kpipe_grow(kp, 2 * pp__pipe_max_usage(p));
	p->kpipe = kp;
	return kp;
}

/* After a resize, both side locks held: grow with the ring (never shrink). */
void pp__kpipe_resize(struct pp_pipe *p)
{
	if (p->kpipe)
		kpipe_grow(p->kpipe, 2 * pp__pipe_max_usage(p));
}

void pp__kpipe_free(struct pp__kpipe *kp)
{
	if (!kp)
		return;
	close(kp->rd);
	close(kp->wr);
	if (kp->scr[0] >= 0) {
		close(kp->scr[0]);
		close(kp->scr[1]);
	}
	free(kp);
}

/*
 * Queue the `moved` bytes just spliced into kp as kernel buffers, a page's
 * worth each, so that they count in slots as copied bytes would.  The room
 * was counted under the same wr_mutex.
 */
static void push_kbufs(struct pp_pipe *p, struct pp__kpipe *kp, size_t moved)
{
	const size_t psz = pp__page_size;

	kpipe_bytes_add(kp, moved);
	while (moved) {
		struct pp_buf buf = {
			.len = (unsigned int)min_t(size_t, moved, psz),
			.ops = &pp__kernel_buf_ops,
			.private = kp,
		};

		pp__pipe_push(p, &buf);
		moved -= buf.len;
	}
}

/* Would a splice into kp fail for lack of room there (not of the source's bytes)? */
static bool kpipe_full(struct pp__kpipe *kp)
{
	struct pollfd pfd = { kp->wr, POLLOUT, 0 };

	return poll(&pfd, 1, 0) == 0;
}

/*
 * Fault injection: a splice that reads a source is a read (PP_FAULT_READ),
 * one that writes an output or another pipe a splice (PP_FAULT_SPLICE).
 */
static ssize_t sys_splice_site(enum pp_fault_site site, int in, off_t *ipos, int out,
			       off_t *opos, size_t len, unsigned int flags)
{
	for (;;) {
		int e = pp__fault(site);
		ssize_t r;

		if (e == -EINTR)
			continue;
		if (e)
			return e;
		r = splice(in, ipos, out, opos, len, flags);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static ssize_t sys_splice(int in, off_t *ipos, int out, off_t *opos, size_t len, unsigned int flags)
{
	return sys_splice_site(PP_FAULT_SPLICE, in, ipos, out, opos, len, flags);
}

/* ---------------------------------------------------------------------- */

/*
 * Sources.  A kernel pipe and an AF_UNIX socket read without waiting when
 * asked (SPLICE_F_NONBLOCK: ipipe_prep, unix_stream_splice_read); TCP and
 * devices wait as their own O_NONBLOCK says, whatever the flag, so they
 * are looked at before the producer lock is taken.
 */
static bool source_honours_nonblock(const struct pp_file *in)
{
	return in->kind == PP_KIND_FIFO || (in->kind == PP_KIND_SOCK && (in->fd_flags & PP_FD_UNIX));
}

/* Wait with no lock for the source's bytes (or its EOF or error). */
static int wait_source(int fd)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

/* Tests of the copying path set it; nothing else does. */
bool pp__kbuf_disabled;

bool pp__kbuf_source(struct pp_file *in)
{
	if (__atomic_load_n(&pp__kbuf_disabled, __ATOMIC_RELAXED))
		return false;
	switch (in->kind) {
	case PP_KIND_SOCK:
	case PP_KIND_FIFO:
		break;
	case PP_KIND_CHR:
		if (in->fd_flags & (PP_FD_NULL | PP_FD_ZERO))
			return false;	/* chr.c has better for both */
		break;
	default:
		return false;
	}
	return !(__atomic_load_n(&in->no_kernel, __ATOMIC_RELAXED) & PP_NO_KSPLICE_READ);
}

static void remember(struct pp_file *f, unsigned int bit)
{
	__atomic_fetch_or(&f->no_kernel, bit, __ATOMIC_RELAXED);
}

/*
 * file -> pipe for the sources above: splice(2) into the private pipe,
 * under wr_mutex, at most the free slots' worth, and queue what moved.  A
 * caller that may wait does so first with no lock (for room, then for the
 * source), and then splices without waiting; only a source another thread
 * empties in between (a blocking TCP socket, which ignores
 * SPLICE_F_NONBLOCK) waits under the lock, as it waits under pipe->mutex
 * in Linux.  PP__EKBUF: this call goes the copying way (the kernel has no
 * splice_read for the source, remembered; or no private pipe).
 */
ssize_t pp__kbuf_splice_in(struct pp_file *in, struct pp_file *out, size_t len,
			   unsigned int flags)
{
	struct pp_pipe *p = out->pipe;
	bool nonblock = pp__pipe_nonblock(out, flags);
	struct pp__kpipe *kp;
	ssize_t r;
	int err;

	for (;;) {
		unsigned int nfree;
		size_t want;

		err = pp__pipe_wait_room(out, nonblock);
		if (err)
			return err;
		/*
		 * A source that would wait under our lock is waited for here;
		 * one opened non-blocking (as an event loop's are) cannot wait.
		 */
		if (!source_honours_nonblock(in) && !(pp__file_flags(in) & O_NONBLOCK) &&
		    !pp__fd_readable_now(in->fd)) {
			if (pp__fd_nonblocking(in->fd))
				return -EAGAIN;
			err = wait_source(in->fd);
			if (err)
				return err;
		}
		pp__pipe_lock_producer(p);
		if (!pp__pipe_readers(p)) {
			pp__pipe_unlock_producer(p);
			return pp__pipe_epipe(out);
		}
		nfree = pp__pipe_max_usage(p) - pp__pipe_occupancy(p);
		if ((int)nfree <= 0) {
			pp__pipe_unlock_producer(p);
			if (nonblock)
				return -EAGAIN;
			continue;	/* another producer took the room */
		}
		kp = pp__kpipe_get(p);
		if (!kp) {
			pp__pipe_unlock_producer(p);
			return PP__EKBUF;
		}
		want = min_t(size_t, len, (size_t)nfree << pp__page_shift);
		want = min_t(size_t, want, PP_MAX_RW);
		r = sys_splice_site(PP_FAULT_READ, in->fd, NULL, kp->wr, NULL, want,
				    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (r == -EAGAIN && kpipe_full(kp)) {
			/* Our side is full, not the source empty: grow, else copy. */
			if (kpipe_grow(kp, 2 * kp->pages) > 0 && !kpipe_full(kp))
				r = sys_splice_site(PP_FAULT_READ, in->fd, NULL, kp->wr, NULL,
						    want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (r == -EAGAIN && kpipe_full(kp)) {
				pp__pipe_unlock_producer(p);
				return PP__EKBUF;
			}
		}
		if (r > 0) {
			if (in->kind == PP_KIND_FIFO)
				kpipe_set_packets(kp);
			push_kbufs(p, kp, (size_t)r);
		}
		pp__pipe_unlock_producer(p);
		if (r > 0) {
			pp__pipe_wake_readers(p);
			return r;
		}
		if (r == -EINVAL) {
			/* No splice_read for this file (a tty, UDP...): copy, from now on. */
			remember(in, PP_NO_KSPLICE_READ);
			return PP__EKBUF;
		}
		if (r != -EAGAIN || nonblock || pp__fd_nonblocking(in->fd))
			return r;
		/* A blocking splice found the source empty: wait for it with no lock. */
		err = wait_source(in->fd);
		if (err)
			return err;
	}
}

/* ---------------------------------------------------------------------- */

/*
 * Consumers (rd_mutex held).  The longest run of kernel buffers at the
 * front of bufs, at most max bytes: their bytes are the front of one
 * private pipe.
 */
unsigned int pp__kbuf_run(const struct pp_buf *bufs, unsigned int nr, size_t max,
			  struct pp__kpipe **kp, size_t *bytes)
{
	unsigned int n = 0;
	size_t sum = 0;

	if (!nr || bufs[0].ops != &pp__kernel_buf_ops)
		return 0;
	*kp = bufs[0].private;
	for (; n < nr && sum < max && bufs[n].ops == &pp__kernel_buf_ops; n++)
		sum += min_t(size_t, bufs[n].len, max - sum);
	*bytes = sum;
	return n;
}

/*
 * splice(2) the front `len` bytes of kp to descriptor fd (at *pos when
 * given, which is not advanced): bytes moved, or -errno.  The output's own rules apply, as they
 * would to the kernel's splice from a pipe: flags carry SPLICE_F_MORE and
 * SPLICE_F_NONBLOCK.  -EINVAL: the output has no splice_write
 * (remembered by the caller), nothing moved.
 */
ssize_t pp__kbuf_splice_out(struct pp__kpipe *kp, int fd, off_t *pos, size_t len,
			    unsigned int flags)
{
	off_t at = pos ? *pos : 0;	/* the caller advances *pos */
	ssize_t r = sys_splice(kp->rd, NULL, fd, pos ? &at : NULL, len,
			       SPLICE_F_MOVE | (flags & (SPLICE_F_MORE | SPLICE_F_NONBLOCK)));

	if (r > 0)
		kpipe_bytes_sub(kp, (size_t)r);
	return r;
}

/*
 * Read the front of kp into the caller's iovecs, at most len bytes: the
 * bytes read, and in *discarded what the kernel threw away behind them (the
 * rest of a packet read in part); *packet_end when the read stopped at the
 * end of a packet.  The producer is held off across the read and the
 * FIONREAD that tells the two apart (lock order: rd_mutex, then wr_mutex).
 */
ssize_t pp__kbuf_read(struct pp_pipe *p, struct pp__kpipe *kp, struct pp_iov_iter *it,
		      size_t len, size_t *discarded, bool *packet_end)
{
	struct iovec iov[PP_IOV_MAX];
	const struct iovec *v = it->iov;
	size_t off = it->off, sum = 0;
	bool packets = kpipe_packets(kp);
	int n = 0, e, avail = 0;
	ssize_t r;

	*discarded = 0;
	*packet_end = false;
	for (int i = 0; i < it->nr && n < PP_IOV_MAX && sum < len; i++, off = 0) {
		size_t l = min_t(size_t, v[i].iov_len - off, len - sum);

		if (!l)
			continue;
		if (!v[i].iov_base)
			break;	/* a NULL segment: what comes before it, or EFAULT */
		iov[n].iov_base = (char *)v[i].iov_base + off;
		iov[n++].iov_len = l;
		sum += l;
	}
	if (!n)
		return -EFAULT;
	do
		e = pp__fault(PP_FAULT_READ);
	while (e == -EINTR);
	if (e)
		return e;
	if (packets)
		pp__pipe_lock_producer(p);
	do
		r = readv(kp->rd, iov, n);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		r = -errno;
	} else if (packets) {
		size_t before = __atomic_load_n(&kp->bytes, __ATOMIC_RELAXED);

		if (ioctl(kp->rd, FIONREAD, &avail) == 0 && before - (size_t)r > (size_t)avail)
			*discarded = before - (size_t)r - (size_t)avail;
		*packet_end = (size_t)r < sum || *discarded;
	}
	if (r > 0 || *discarded)
		kpipe_bytes_sub(kp, (size_t)(r > 0 ? r : 0) + *discarded);
	if (packets)
		pp__pipe_unlock_producer(p);
	if (r == 0)
		return -EIO;	/* cannot happen: the ring says the bytes are there */
	if (r > 0) {
		/* Advance the caller's cursor by what landed. */
		size_t left = (size_t)r;

		while (left) {
			size_t l = min_t(size_t, it->iov->iov_len - it->off, left);

			it->off += l;
			left -= l;
			if (it->off == it->iov->iov_len) {
				it->iov++;
				it->nr--;
				it->off = 0;
			}
		}
	}
	return r;
}

/* Read exactly len bytes of a private pipe into dst, packets or not. */
static ssize_t read_exact(int fd, void *dst, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, (char *)dst + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got ? (ssize_t)got : (r < 0 ? -errno : -EIO);
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/*
 * len bytes of a private pipe that may hold packets, with none read in
 * part: they are spliced whole into a second private pipe first (the
 * kernel splits a buffer there without loss), which is then read empty.
 */
static ssize_t kpipe_read_packets(struct pp__kpipe *kp, void *dst, size_t len)
{
	size_t got = 0;

	if (kp->scr[0] < 0 && pipe2(kp->scr, O_NONBLOCK | O_CLOEXEC)) {
		kp->scr[0] = kp->scr[1] = -1;
		return -errno;
	}
	while (got < len) {
		ssize_t m = splice(kp->rd, NULL, kp->scr[1], NULL, len - got, SPLICE_F_NONBLOCK);
		ssize_t r;

		if (m < 0 && errno == EINTR)
			continue;
		if (m <= 0)
			return got ? (ssize_t)got : (m < 0 ? -errno : -EIO);
		r = read_exact(kp->scr[0], (char *)dst + got, (size_t)m);
		if (r > 0)
			got += (size_t)r;
		if (r != m)
			return -EIO;	/* cannot happen: they are in our own pipe */
	}
	return (ssize_t)got;
}

/*
 * Replace the kernel buffers among the first `max` slots at the tail
 * covering `want` bytes with anonymous pages holding their bytes (read(2)
 * out of the private pipe, in ring order): for consumers that need the
 * bytes in memory.  Under rd_mutex: the consumer owns a published slot's
 * fields, and a kernel buffer's slot is never merged into.  0, or -errno
 * (ENOMEM: nothing changed for the slot that failed; what came before it
 * stays converted, which is only a change of type).
 */
int pp__kbuf_materialize(struct pp_pipe *p, size_t want, unsigned int max)
{
	unsigned int head = pp__pipe_head(p);
	size_t have = 0;

	for (unsigned int i = p->tail, n = 0; i != head && n < max && have < want; i++, n++) {
		struct pp_slot *s = pp__pipe_slot(p, i);
		struct pp_buf *buf = &s->buf;
		struct pp__kpipe *kp;
		void *page;
		ssize_t r;
		int e;

		pp__slot_sync(s);
		have += buf->len;
		if (buf->ops != &pp__kernel_buf_ops || !buf->len)
			continue;
		kp = buf->private;
		page = pp__page_alloc(p);
		if (!page)
			return -ENOMEM;
		do
			e = pp__fault(PP_FAULT_READ);
		while (e == -EINTR);
		if (e) {
			pp__page_put(p, page);
			return e;
		}
		r = kpipe_packets(kp) ? kpipe_read_packets(kp, page, buf->len)
				      : read_exact(kp->rd, page, buf->len);
		if (r <= 0) {
			pp__page_put(p, page);
			return r < 0 ? (int)r : -EIO;
		}
		kpipe_bytes_sub(kp, (size_t)r);
		*buf = (struct pp_buf){
			.page = page,
			.len = (unsigned int)r,
			.ops = &pp_anon_buf_ops,
		};
	}
	return 0;
}

/*
 * pipe -> pipe for a kernel buffer at the input's tail: up to len of its
 * bytes go from the input's private pipe to the output's by splice(2),
 * and a kernel buffer of the output stands for them.  Both side locks
 * held (input's consumer, output's producer) and a free slot counted.
 * Bytes moved (the caller consumes them from the input's ring), or
 * PP__EKBUF when the output has no private pipe to spare or it is full:
 * the caller materializes the buffer and moves it the ordinary way.
 */
ssize_t pp__kbuf_move(struct pp_buf *ibuf, struct pp_pipe *op, size_t len)
{
	struct pp__kpipe *ikp = ibuf->private, *okp = pp__kpipe_get(op);
	ssize_t r;

	if (!okp)
		return PP__EKBUF;
	len = min_t(size_t, len, ibuf->len);
	r = sys_splice(ikp->rd, NULL, okp->wr, NULL, len, SPLICE_F_NONBLOCK);
	/*
	 * EAGAIN is the output's private pipe full (the input's holds these
	 * bytes).  Again only if it grew: at the kernel's limit (pipe-max-size,
	 * pipe-user-pages-soft) the same splice can only say EAGAIN again,
	 * and the bytes go the copying way.
	 */
	if (r == -EAGAIN && kpipe_grew(okp))
		r = sys_splice(ikp->rd, NULL, okp->wr, NULL, len, SPLICE_F_NONBLOCK);
	if (r <= 0)
		return r < 0 && r != -EAGAIN ? r : PP__EKBUF;
	if (kpipe_packets(ikp))
		kpipe_set_packets(okp);
	kpipe_bytes_sub(ikp, (size_t)r);
	push_kbufs(op, okp, (size_t)r);
	return r;
}

/*
 * tee: the kernel buffers among the slots a tee will cover are, in order,
 * the front of the input's private pipe; tee(2) duplicates `bytes` of it
 * into the output's, before any of them is queued there.  Returns the
 * bytes duplicated (maybe fewer), or PP__EKBUF.
 */
ssize_t pp__kbuf_tee(struct pp__kpipe *ikp, struct pp_pipe *op, size_t bytes,
		     struct pp__kpipe **okpp)
{
	struct pp__kpipe *okp = pp__kpipe_get(op);
	ssize_t r;
	int e;

	if (!okp)
		return PP__EKBUF;
	do
		e = pp__fault(PP_FAULT_SPLICE);
	while (e == -EINTR);
	if (e)
		return e;
	do
		r = tee(ikp->rd, okp->wr, bytes, SPLICE_F_NONBLOCK);
	while (r < 0 && errno == EINTR);
	/* The output's private pipe full: again only if it grew (as pp__kbuf_move). */
	if (r < 0 && errno == EAGAIN && kpipe_grew(okp))
		r = tee(ikp->rd, okp->wr, bytes, SPLICE_F_NONBLOCK);
	if (r <= 0)
		return PP__EKBUF;
	if (kpipe_packets(ikp))
		kpipe_set_packets(okp);
	kpipe_bytes_add(okp, (size_t)r);
	*okpp = okp;
	return r;
}
