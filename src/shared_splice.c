// SPDX-License-Identifier: MIT
/*
 * shared_splice.c - splice and tee on the ends of a pipe between
 * processes (PP_O_SHARED, shared.c); vmsplice on them is vmsplice.c's, the
 * loans zerocopy.c's, on the same primitives.
 *
 * A shared pipe's buffers are arena pages, and the arena is all the other
 * process sees: a buffer that referred to this process's memory (a page of
 * the page cache, a vmspliced user page, a threaded pagepipe's page) would
 * mean nothing there.  So bytes that enter a shared pipe are copied into
 * arena pages as they enter (docs/design.md section 6: the copy Linux's
 * copy_splice_read makes for a file without ->splice_read), and bytes that
 * leave one leave from the arena in place: written to a file or a socket
 * by the output's own ->splice_write, copied once into the other pipe's
 * pages, or lent (pp_read_lend).
 *
 * Two primitives of shared.c carry it all.  A lend is the front of the
 * pipe in place, with the readers' lock held until pp__shared_consume()
 * takes what was used, so a short write leaves the rest at the front for
 * the next reader, as Linux's splice_from_pipe leaves it.  A reservation
 * is free slots' pages, with the writers' lock held until
 * pp__shared_commit() queues what was put in them, so what a read from
 * a descriptor brought is never left without room.  Bytes spliced in go
 * one source chunk to a slot, unmergeable, as Linux's spliced buffers are.
 *
 * Where a call holds one of those locks across a system call that can
 * block (a socket's send, a kernel pipe's read), it says so
 * (pp__shared_blocking): the peers' lock waiters then know that a long
 * hold is no scribble.  As in splice.c, the output's room is waited for
 * before the lock is taken, and a pipe on the other side is only ever
 * tried without waiting while we hold ours.
 */
#include "internal.h"

#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Slots one call moves at most: a whole pipe at pipe-max-size (1 MiB). */
#define SH_BATCH	PP_SHARED_SLOTS

static bool end_nonblock(const struct pp_file *f)
{
	if (pp__is_shared(f))
		return pp__shared_nonblock(f);
	return pp__file_flags(f) & O_NONBLOCK;
}

/*
 * Arena memory, lent for the length of one ->splice_write: the lend keeps
 * it, so the buffer holds no reference of its own.  An output that wants
 * to keep one (pp_buf_get) is refused and must copy, as for a count that
 * would overflow.
 */
static void arena_buf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	(void)buf;
}

static bool arena_buf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	(void)buf;
	return false;
}

static const struct pp_buf_ops arena_buf_ops = {
	.release	= arena_buf_release,
	.get		= arena_buf_get,
	.name		= "shared pipe arena (lent)",
};

static struct pp_buf arena_buf(const struct iovec *v)
{
	uintptr_t a = (uintptr_t)v->iov_base, page = a & ~(uintptr_t)(pp__page_size - 1);

	return (struct pp_buf){ .page = (void *)page, .offset = (unsigned int)(a - page),
				.len = (unsigned int)v->iov_len, .ops = &arena_buf_ops };
}

/*
 * A descriptor's read or write that must not wait: RWF_NOWAIT (pipes and
 * sockets take it since Linux 6.0), else a look with poll(2) first.
 */
static ssize_t rw_nowait(int fd, const struct iovec *iov, int n, bool write)
{
	struct pollfd pfd = { fd, write ? POLLOUT : POLLIN, 0 };
	ssize_t r = write ? pwritev2(fd, iov, n, -1, RWF_NOWAIT) :
			    preadv2(fd, iov, n, -1, RWF_NOWAIT);

	if (r >= 0 || errno != EOPNOTSUPP)
		return r;
	if (poll(&pfd, 1, 0) != 1) {
		errno = EAGAIN;
		return -1;
	}
	/* One page at most: a pipe that polls writable has room for it. */
	if (write) {
		struct iovec one = { iov[0].iov_base, min_t(size_t, iov[0].iov_len, PIPE_BUF) };

		return writev(fd, &one, 1);
	}
	return readv(fd, iov, n);
}

/* ---------------------------------------------------------------------- */
/* Into a shared pipe from a descriptor or a caller's endpoint. */

/*
 * A pp_file_new() endpoint makes buffers (->splice_read); their bytes are
 * copied into arena pages, one buffer to a page, and the buffers let go.
 * Returns the bytes copied (lens[i] each) or -errno; bufs are released
 * either way.  *stopped: a buffer failed, and none after it was copied
 * (the bytes that follow a failure must not follow the bytes before it).
 */
static ssize_t copy_endpoint_bufs(struct pp_buf *bufs, unsigned int n, void **pages,
				  size_t *lens, bool *stopped)
{
	ssize_t done = 0;
	int err = 0;

	for (unsigned int i = 0; i < n; i++) {
		char *addr = NULL;

		if (!err && bufs[i].len > pp__page_size)
			err = -EIO;	/* the contract: a buffer is at most a page */
		if (!err)
			err = pp__buf_confirm(NULL, &bufs[i]);
		if (!err && !(addr = pp__buf_map(NULL, &bufs[i])))
			err = -EIO;
		if (!err) {
			memcpy(pages[i], addr + bufs[i].offset, bufs[i].len);
			pp__buf_unmap(NULL, &bufs[i], addr);
			lens[i] = bufs[i].len;
			done += bufs[i].len;
		}
		pp__buf_release(NULL, &bufs[i]);
	}
	*stopped = err != 0;
	return done ? done : err;
}

/* How many of bufs hold the r bytes an endpoint produced. */
static unsigned int endpoint_bufs_used(const struct pp_buf *bufs, unsigned int n, ssize_t r)
{
	unsigned int made = 0;

	for (ssize_t sum = 0; made < n && sum < r; made++)
		sum += bufs[made].len;
	return made;
}

/*
 * Non-blocking: read the endpoint under the reservation, which bounds it
 * to the room there is; the endpoint must not wait (pp_file_ops).
 */
static ssize_t fill_from_endpoint(struct pp_file *in, off_t *ppos, void **pages,
				  unsigned int n, size_t len, unsigned int flags, size_t *lens)
{
	struct pp_buf bufs[SH_BATCH];
	ssize_t r = in->ops->splice_read(in, ppos, bufs, n, len, flags);
	bool stopped;

	if (r <= 0)
		return r;
	return copy_endpoint_bufs(bufs, endpoint_bufs_used(bufs, n, r), pages, lens, &stopped);
}

/*
 * Blocking: as splice_to_pipe() for a pagepipe, the endpoint is read with
 * no lock held (pp_file_ops's contract: it may wait for its source, and
 * no writer of the pipe may wait behind it), after waiting for room and
 * into at most as many buffers as there were free slots; its buffers are
 * then copied in, reserving again (which waits for room, as a blocking
 * splice may) until all are in.  Holding wr_lock across the read, as
 * before, kept every writer waiting on the endpoint, and one that took
 * longer than LOCK_STUCK_WAITS was taken for a scribble: EIO for every
 * process (test/shared-splice endpoint_read_holds_no_lock).
 */
static ssize_t splice_endpoint_in(struct pp_file *in, off_t *ppos, struct pp_file *out,
				  size_t len, unsigned int flags)
{
	struct pp_buf bufs[SH_BATCH];
	unsigned int room, made, i = 0;
	ssize_t r, ret = 0;
	int err = 0;

	/* Nothing is taken from the source for a pipe nobody reads. */
	if (!pp__shared_wait(out))
		return pp__pipe_epipe(out);
	room = min_t(unsigned int, SH_BATCH, pp__shared_room(out));
	if (!room)
		room = 1;	/* another writer took it meanwhile: the reservation waits */
	len = min_t(size_t, len, (size_t)room << pp__page_shift);
	r = in->ops->splice_read(in, ppos, bufs, room, len, flags);
	if (r <= 0)
		return r;
	made = endpoint_bufs_used(bufs, room, r);
	while (i < made) {
		void *pages[SH_BATCH];
		uint32_t idx[SH_BATCH];
		size_t lens[SH_BATCH] = { 0 };
		int n = pp__shared_reserve(out, made - i, false, pages, idx);
		bool stopped;
		ssize_t c;

		if (n < 0) {
			err = n;
			break;
		}
		c = copy_endpoint_bufs(bufs + i, (unsigned int)n, pages, lens, &stopped);
		i += (unsigned int)n;
		ret += pp__shared_commit(out, idx, (unsigned int)n, lens, NULL);
		if (stopped) {
			if (c < 0)
				err = (int)c;
			break;
		}
	}
	for (; i < made; i++)
		pp__buf_release(NULL, &bufs[i]);
	return ret ? ret : err;
}

/* Read from an OS descriptor into the reserved pages, chunk i into page i. */
static ssize_t fill_from_fd(struct pp_file *in, off_t *ppos, void **pages, unsigned int n,
			    size_t len, bool nonblock, bool nowait, struct pp_file *out, size_t *lens)
{
	struct iovec iov[SH_BATCH];
	unsigned int k = 0;
	size_t left = len;
	ssize_t r;
	int err;

	/*
	 * A file's bytes go a page-cache page to a slot, as Linux's
	 * filemap_splice_read puts them: the first chunk ends where the
	 * file's page does.
	 */
	for (; k < n && left; k++) {
		size_t l = pp__page_size;

		if (!k && ppos && in->kind == PP_KIND_REG)
			l -= (size_t)*ppos & (pp__page_size - 1);
		l = min_t(size_t, l, left);
		iov[k] = (struct iovec){ pages[k], l };
		left -= l;
	}
	err = pp__fault(PP_FAULT_READ);
	if (err)
		return err;
	if (ppos) {
		r = preadv(in->fd, iov, (int)k, *ppos);
	} else if (nowait || (nonblock && (in->kind == PP_KIND_FIFO ||
					   (in->kind == PP_KIND_SOCK && (in->fd_flags & PP_FD_UNIX))))) {
		/* Linux: a kernel pipe is splice_pipe_to_pipe's, AF_UNIX reads MSG_DONTWAIT (sock.c). */
		r = rw_nowait(in->fd, iov, (int)k, false);
	} else {
		pp__shared_blocking(out, true);
		r = readv(in->fd, iov, (int)k);
		pp__shared_blocking(out, false);
	}
	if (r < 0)
		return -errno;
	if (ppos)
		*ppos += r;
	left = (size_t)r;
	for (unsigned int i = 0; i < k; i++) {
		lens[i] = min_t(size_t, iov[i].iov_len, left);
		left -= lens[i];
	}
	return r;
}

/*
 * file -> shared pipe: wait for room as splice_file_to_pipe does, then
 * read into the reserved pages.  flags has SPLICE_F_NONBLOCK for the
 * pipe's O_NONBLOCK (do_splice).
 */
ssize_t pp__shared_splice_in(struct pp_file *in, off_t *ppos, struct pp_file *out, size_t len,
			     unsigned int flags)
{
	bool nonblock = flags & SPLICE_F_NONBLOCK;
	/*
	 * A source that can keep us waiting (a kernel pipe, a socket, a
	 * device) is waited for with no lock, as splice_pipe_to_pipe's
	 * ipipe_prep waits, and then read without waiting: a writer of the
	 * pipe must not wait behind a splice that waits for its input.
	 */
	bool first = in->fd >= 0 && in->kind != PP_KIND_REG && !nonblock;
	void *pages[SH_BATCH];
	uint32_t idx[SH_BATCH];
	unsigned int want;
	ssize_t r;
	int n;

	len = min_t(size_t, len, PP_MAX_RW);
	if (in->fd < 0 && !nonblock)
		return splice_endpoint_in(in, ppos, out, len, flags);
	want = (unsigned int)min_t(size_t, SH_BATCH, len / pp__page_size + 2);
	for (;;) {
		size_t lens[SH_BATCH] = { 0 };

		if (first) {
			struct pollfd pfd = { in->fd, POLLIN, 0 };

			while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
				;
		}
		n = pp__shared_reserve(out, want, nonblock, pages, idx);
		if (n < 0)
			return n;
		if (in->fd >= 0)
			r = fill_from_fd(in, ppos, pages, (unsigned int)n, len, nonblock, first, out,
					 lens);
		else
			r = fill_from_endpoint(in, ppos, pages, (unsigned int)n, len, flags, lens);
		pp__shared_commit(out, idx, (unsigned int)n, lens, NULL);
		if (r != -EAGAIN || !first)
			return r;	/* else another reader of the source was first: again */
	}
}

/* ---------------------------------------------------------------------- */
/* Out of a shared pipe to a descriptor or a caller's endpoint. */

/*
 * shared pipe -> file.  The output's room is waited for first with no
 * lock (splice.c's wait_output); then the front of the pipe is lent to
 * the output's ->splice_write, and what it took is consumed.
 */
ssize_t pp__shared_splice_out(struct pp_file *in, struct pp_file *out, off_t *ppos, size_t len,
			      unsigned int flags)
{
	bool nonblock = flags & SPLICE_F_NONBLOCK;
	struct iovec iov[SH_BATCH];
	struct pp_buf bufs[SH_BATCH];
	unsigned int n = 0;
	ssize_t lent, r;
	int err;

	len = min_t(size_t, len, PP_MAX_RW);
	err = pp__splice_wait_output(out, pp__splice_output_nonblock(out, flags), false);
	if (err)
		return err;
	lent = pp__shared_lend(in, iov, SH_BATCH, len, nonblock, false, NULL);
	if (lent <= 0)
		return lent;
	for (ssize_t sum = 0; sum < lent; n++) {
		bufs[n] = arena_buf(&iov[n]);
		sum += (ssize_t)iov[n].iov_len;
	}
	pp__shared_blocking(in, true);
	r = out->ops->splice_write(out, ppos, bufs, n, (size_t)lent, flags);
	pp__shared_blocking(in, false);
	pp__shared_consume(in, r > 0 ? (size_t)r : 0);
	return r;
}

/* ---------------------------------------------------------------------- */
/* Pipe to pipe, and tee: a shared pipe on one side or both. */

/*
 * Copies of lent bytes into the output pipe, a slot each, without
 * waiting: the bytes that fit, or -EAGAIN, -EPIPE.  A slot moved whole
 * by a splice keeps its flags, as splice_pipe_to_pipe moves a whole
 * buffer; a part of one, or any tee, is not merged into (Linux clears
 * CAN_MERGE there: the page is shared).
 */
static ssize_t put_copies(struct pp_file *out, const struct iovec *iov, const uint32_t *lflags,
			  unsigned int n, bool tee)
{
	uint32_t flags[SH_BATCH];
	ssize_t ret = 0;

	for (unsigned int i = 0; i < n; i++) {
		flags[i] = lflags[i] & PP_BUF_FLAG_PACKET;
		if (!tee && (lflags[i] & PP__LENT_WHOLE))
			flags[i] |= lflags[i] & PP_BUF_FLAG_CAN_MERGE;
	}
	if (pp__is_shared(out)) {
		void *pages[SH_BATCH];
		uint32_t idx[SH_BATCH];
		size_t lens[SH_BATCH];
		int got = pp__shared_reserve(out, n, true, pages, idx);

		if (got < 0)
			return got;
		for (int i = 0; i < got; i++) {
			memcpy(pages[i], iov[i].iov_base, iov[i].iov_len);
			lens[i] = iov[i].iov_len;
		}
		return pp__shared_commit(out, idx, (unsigned int)got, lens, flags);
	}
	for (unsigned int i = 0; i < n; i++) {
		struct pp_buf buf = { .offset = 0, .len = (unsigned int)iov[i].iov_len,
				      .ops = &pp_anon_buf_ops, .flags = flags[i] };
		ssize_t r;

		buf.page = pp_page_alloc();
		if (!buf.page) {
			r = -ENOMEM;
		} else {
			memcpy(buf.page, iov[i].iov_base, iov[i].iov_len);
			r = pp__pipe_add_buf(out, &buf, SPLICE_F_NONBLOCK | PP__ADD_MERGEABLE);
			if (r < 0)
				pp_page_put(buf.page);
		}
		if (r < 0)
			return ret ? ret : r;
		ret += r;
	}
	return ret;
}

static int wait_room(struct pp_file *out)
{
	if (pp__is_shared(out)) {
		pp__shared_wait(out);	/* false, the readers gone: the next try says EPIPE */
		return 0;
	}
	return pp__pipe_wait_room(out, false);
}

/*
 * A threaded pagepipe's buffers into the reserved pages, one to a page, as
 * splice_pipe_to_pipe moves them (a whole one keeps its flags), and taken
 * out of that pipe unless tee (which leaves them, and whose copies are not
 * merged into).  Never waits: -EAGAIN when the pipe is empty or another
 * consumer has it.
 */
static ssize_t take_from_pipe(struct pp_file *in, void **pages, unsigned int n, size_t len,
			      bool tee, size_t *lens, uint32_t *flags)
{
	struct pp_pipe *p = in->pipe;
	struct pp_buf snap[SH_BATCH];
	struct pp__dead dead;
	unsigned int nr, k = 0;
	size_t taken = 0;
	int err;

	pp__dead_init(&dead);
	err = pp__pipe_lock_consumer(p, true);
	if (err)
		return err;
	err = pp__pipe_empty(p) ? -EAGAIN : pp__kbuf_materialize(p, len, n);
	nr = err ? 0 : pp__pipe_snapshot(p, snap, n, len, false);
	for (unsigned int i = 0; i < nr && taken < len && !err; i++) {
		size_t l = min_t(size_t, snap[i].len, len - taken);
		void *addr;

		if (!l)
			continue;	/* an empty slot: the consume below retires it */
		err = pp__buf_confirm(p, &snap[i]);
		if (err)
			break;
		if (pp__buf_class(&snap[i]) == PP_BUF_FILE) {
			ssize_t r = pp__buf_copy_out(p, &snap[i], 0, pages[k], l);

			if (r < (ssize_t)l) {
				err = r < 0 ? (int)r : -EIO;
				break;
			}
		} else {
			addr = pp__buf_map(p, &snap[i]);
			if (!addr) {
				err = -EIO;
				break;
			}
			memcpy(pages[k], (char *)addr + snap[i].offset, l);
			pp__buf_unmap(p, &snap[i], addr);
		}
		lens[k] = l;
		flags[k] = snap[i].flags & PP_BUF_FLAG_PACKET;
		if (!tee && l == snap[i].len)
			flags[k] |= snap[i].flags & PP_BUF_FLAG_CAN_MERGE;
		k++;
		taken += l;
	}
	if (!tee && nr)
		pp__pipe_consume(p, taken, false, &dead);
	pp__pipe_unlock_consumer(p);
	pp__pipe_release_dead(p, &dead);	/* the consume woke the writers */
	return taken ? (ssize_t)taken : err;
}

/*
 * splice between two pipes, or tee (the input keeps its bytes).  Waits for
 * data as splice_pipe_to_pipe does, and for room with no lock held: the
 * input's lend is given back while we wait.  Nonblocking for
 * SPLICE_F_NONBLOCK or either end's O_NONBLOCK, as Linux.
 */
ssize_t pp__shared_splice_pipes(struct pp_file *in, struct pp_file *out, size_t len,
				unsigned int flags, bool tee)
{
	bool nonblock = (flags & SPLICE_F_NONBLOCK) || end_nonblock(in) || end_nonblock(out);

	len = min_t(size_t, len, PP_MAX_RW);
	for (;;) {
		if (pp__is_shared(in)) {
			struct iovec iov[SH_BATCH];
			uint32_t lflags[SH_BATCH];
			unsigned int n = 0;
			ssize_t lent = pp__shared_lend(in, iov, SH_BATCH, len, nonblock, false, lflags), w;
			int err;

			if (lent <= 0)
				return lent;
			for (ssize_t sum = 0; sum < lent; n++)
				sum += (ssize_t)iov[n].iov_len;
			w = put_copies(out, iov, lflags, n, tee);
			pp__shared_consume(in, w > 0 && !tee ? (size_t)w : 0);
			if (w != -EAGAIN || nonblock)
				return w;
			err = wait_room(out);
			if (err < 0)
				return err;
		} else {
			void *pages[SH_BATCH];
			uint32_t idx[SH_BATCH], flags[SH_BATCH];
			size_t lens[SH_BATCH] = { 0 };
			unsigned int want = (unsigned int)min_t(size_t, SH_BATCH, len / pp__page_size + 2);
			ssize_t r;
			int n, err;

			err = pp__pipe_wait_data(in->pipe, nonblock);
			if (err <= 0)
				return err;	/* 0: EOF */
			n = pp__shared_reserve(out, want, nonblock, pages, idx);
			if (n < 0)
				return n;
			r = take_from_pipe(in, pages, (unsigned int)n, len, tee, lens, flags);
			pp__shared_commit(out, idx, (unsigned int)n, lens, flags);
			if (r != -EAGAIN || nonblock)
				return r;
		}
	}
}
