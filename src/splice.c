// SPDX-License-Identifier: MIT
/*
 * splice.c - pp_splice(): move buffers between a pagepipe and any endpoint.
 *
 * This is the generic code the 2005 prototype lacked: endpoints only turn
 * their data into arrays of buffers (->splice_read) or consume arrays of
 * buffers (->splice_write); moving them into and out of the ring, waiting,
 * positions and errors are handled here, once.
 *
 *   file -> pipe	splice_to_pipe():   ->splice_read into a local array,
 *			then publish the array at the head.
 *   pipe -> file	splice_from_pipe(): snapshot the tail, ->splice_write,
 *			consume what it took.
 *   pipe -> pipe	splice_pipe_to_pipe(): move whole buffers, share a
 *			partly taken one (->get) and make the copy unmergeable.
 *   fd -> fd		the kernel's own splice(2), when both are OS descriptors.
 */
#include "internal.h"

#include <stdlib.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Buffers one pass of an endpoint op handles; a splice may take several passes. */
#define SPLICE_BATCH	64u
/*
 * Out of a pipe, more: a run of kernel-resident buffers goes in one
 * splice(2) whatever its length, and fewer, larger sends are what keep a
 * relay's CPU near a bare splice loop's (1 MiB in one call).
 */
#define SPLICE_OUT_BATCH	256u

/* ---------------------------------------------------------------------- */

/* Can the descriptor take an explicit offset (FMODE_PREAD/FMODE_PWRITE)? */
static bool file_seekable(struct pp_file *f)
{
	switch (f->kind) {
	case PP_KIND_REG:
		return true;
	case PP_KIND_CHR:
	case PP_KIND_OTHER:
		return lseek(f->fd, 0, SEEK_CUR) >= 0;
	case PP_KIND_USER:
		return true;	/* the endpoint decides what an offset means */
	default:
		return false;
	}
}

/*
 * Where a splice on a non-pipe end starts: at *off when given, else at the
 * file position, which the caller then advances.  Non-seekable ends get no
 * position at all.
 */
struct splice_pos {
	off_t pos;
	off_t *ppos;		/* handed to the endpoint: &pos, or NULL */
	bool update_fpos;	/* write pos back to the descriptor's file position */
};

static int splice_pos_init(struct splice_pos *sp, struct pp_file *f, off_t *off)
{
	sp->ppos = NULL;
	sp->update_fpos = false;
	if (off) {
		if (!file_seekable(f))
			return -EINVAL;
		if (*off < 0)
			return -EINVAL;	/* rw_verify_area */
		sp->pos = *off;
		sp->ppos = &sp->pos;
		return 0;
	}
	if (f->kind == PP_KIND_REG) {
		sp->pos = lseek(f->fd, 0, SEEK_CUR);
		if (sp->pos < 0)
			return -errno;
		sp->ppos = &sp->pos;
		sp->update_fpos = true;
	}
	return 0;
}

/* rw_verify_area(): the count, and the end of the range, must fit a loff_t. */
static int splice_pos_verify(const struct splice_pos *sp, size_t len)
{
	if ((ssize_t)len < 0 || (sp->ppos && sp->pos > (off_t)(LLONG_MAX - len)))
		return -EINVAL;
	return 0;
}

static void splice_pos_done(struct splice_pos *sp, struct pp_file *f, off_t *off, ssize_t ret)
{
	if (ret <= 0)
		return;
	if (off)
		*off = sp->pos;
	else if (sp->update_fpos)
		(void)lseek(f->fd, sp->pos, SEEK_SET);
}

/* ---------------------------------------------------------------------- */

/*
 * Publish what an endpoint produced, in order, with wr_mutex held.  The
 * bytes are already taken from the source, so a producer that raced us to
 * the room we counted is waited out rather than the data lost; only the
 * last reader going drops them.  Returns the bytes published.
 */
static size_t publish(struct pp_file *out, struct pp_pipe *p, struct pp_buf *bufs, unsigned int n)
{
	size_t done = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (!bufs[i].len) {
			pp__buf_release(p, &bufs[i]);	/* never an empty slot */
			continue;
		}
		while (pp__pipe_full(p) && pp__pipe_readers(p)) {
			pp__pipe_wake_readers(p);
			pp__pipe_unlock_producer(p);
			(void)pp__pipe_wait_room(out, false);
			pp__pipe_lock_producer(p);
		}
		if (!pp__pipe_readers(p))
			break;
		/*
		 * Only pp_write() makes mergeable buffers; whatever an
		 * endpoint produced is not ours to append to (Dirty Pipe).
		 */
		bufs[i].flags &= ~PP_BUF_FLAG_CAN_MERGE;
		pp__pipe_push(p, &bufs[i]);
		done += bufs[i].len;
	}
	if (i < n) {
		pp__pipe_unlock_producer(p);
		pp__pipe_release_bufs(p, bufs + i, n - i);
		pp__pipe_lock_producer(p);
	}
	if (done)
		pp__pipe_wake_readers(p);
	return done;
}

/*
 * file -> pipe.  The source is read with no pipe lock held (it may block:
 * an empty socket or kernel pipe), into at most as many buffers as the pipe
 * had free slots, which are then published.
 */
static ssize_t splice_to_pipe(struct pp_file *in, off_t *ppos, struct pp_file *out,
			      size_t len, unsigned int flags)
{
	struct pp_pipe *p = out->pipe;
	bool nonblock = pp__pipe_nonblock(out, flags);
	struct pp_buf bufs[SPLICE_BATCH];
	unsigned int nfree;
	ssize_t ret = 0;
	int err;

	/* A kernel pipe input is checked before an output that is not ready. */
	if (in->kind == PP_KIND_FIFO && (!pp__pipe_readers(p) || pp__pipe_full(p))) {
		err = pp__kpipe_prep_input(in, flags);
		if (err)
			return err;
	}
	/* Sockets, kernel pipes, devices: into our private kernel pipe (kbuf.c). */
	if (!ppos && pp__kbuf_source(in)) {
		ret = pp__kbuf_splice_in(in, out, len, flags);
		if (ret != PP__EKBUF)
			return ret;
		ret = 0;
	}
	err = pp__pipe_wait_room(out, nonblock);
	if (err)
		return err;
	if (!in->ops->splice_read)
		return -EINVAL;
	/*
	 * A non-blocking caller must not end up holding bytes it took from
	 * the source with no room to put them: it reads the source under the
	 * producer lock, after counting the room there, as Linux reads it
	 * under pipe->mutex after wait_for_space().  Its source read does not
	 * wait (SPLICE_F_NONBLOCK; a source that waits anyway, a blocking
	 * TCP socket, waits in Linux holding the pipe's mutex too).  A
	 * blocking caller reads with no lock, so that a source with nothing
	 * to give keeps no writer waiting, and publish() waits out a producer
	 * that took the room meanwhile.
	 */
	if (nonblock) {
		pp__pipe_lock_producer(p);
		if (!pp__pipe_readers(p))
			err = pp__pipe_epipe(out);
		else if (pp__pipe_full(p))
			err = -EAGAIN;
		if (err) {
			pp__pipe_unlock_producer(p);
			return err;
		}
		flags |= SPLICE_F_NONBLOCK;
	}
	/* Capped to the free slots, a page each, as in Linux. */
	nfree = pp__pipe_max_usage(p) - pp__pipe_occupancy(p);
	if ((int)nfree <= 0)
		nfree = 1;	/* a resize or another producer raced us: publish() waits */
	len = min_t(size_t, len, (size_t)nfree << pp__page_shift);
	len = min_t(size_t, len, PP_MAX_RW);

	while (len && nfree) {
		unsigned int nr = min_t(unsigned int, nfree, SPLICE_BATCH), n = 0;
		size_t sum = 0;
		ssize_t r;

		r = in->ops->splice_read(in, ppos, bufs, nr, len, flags | (ret ? PP__SPLICE_NOWAIT : 0));
		if (r <= 0) {
			if (!ret)
				ret = r;
			break;
		}
		while (sum < (size_t)r)
			sum += bufs[n++].len;
		if (!nonblock)
			pp__pipe_lock_producer(p);
		publish(out, p, bufs, n);
		if (!nonblock)
			pp__pipe_unlock_producer(p);
		ret += r;
		len -= (size_t)r;
		nfree -= n;
		if (n < nr || !pp__pipe_readers(p))
			break;	/* the source had no more for now */
	}
	if (nonblock)
		pp__pipe_unlock_producer(p);
	return ret;
}

/*
 * An output that can block (a kernel pipe, a socket) is waited for with no
 * lock held, as the kernel's opipe_prep waits for a pipe's room, so that
 * nobody waits behind us for it: 0 when it takes bytes (or has an error
 * its write will report), -EAGAIN for a non-blocking caller.  `now` only
 * looks.
 */
int pp__splice_wait_output(struct pp_file *out, bool nonblock, bool now)
{
	struct pollfd pfd = { out->fd, POLLOUT, 0 };
	int r;

	if (out->fd < 0 || (out->kind != PP_KIND_FIFO && out->kind != PP_KIND_SOCK))
		return 0;
	/* A non-blocking output's own write says EAGAIN: no poll(2) each call. */
	if (nonblock && !now)
		return 0;
	do
		r = poll(&pfd, 1, 0);
	while (r < 0 && errno == EINTR);
	if (r != 0)
		return 0;
	if (nonblock || now)
		return -EAGAIN;
	/*
	 * Full, and the file was blocking when pp_fdopen() looked: the
	 * kernel goes by the descriptor's flags now, which may have changed.
	 */
	if (pp__fd_nonblocking(out->fd))
		return -EAGAIN;
	do
		r = poll(&pfd, 1, -1);
	while (r < 0 && errno == EINTR);
	return 0;
}

/*
 * May the wait for the output's room end in EAGAIN?  A kernel pipe is the
 * output of splice_pipe_to_pipe (opipe_prep): SPLICE_F_NONBLOCK, which
 * do_splice sets for our O_NONBLOCK too, or its own O_NONBLOCK.  A socket
 * waits as its own O_NONBLOCK says (splice_to_socket: MSG_DONTWAIT).
 */
bool pp__splice_output_nonblock(struct pp_file *out, unsigned int flags)
{
	if (out->kind == PP_KIND_SOCK)
		return pp__file_flags(out) & O_NONBLOCK;
	return pp__pipe_nonblock(out, flags);
}

/*
 * Kernel-resident buffers go to OS descriptors by splice(2) (fd.c); an
 * output that takes only memory gets them read into pages first.
 */
static bool needs_memory(struct pp_file *out)
{
	if (out->kind == PP_KIND_USER)
		return true;
	/*
	 * A datagram socket: what one splice moves is one datagram, so it
	 * goes as memory, in sendmsg(2)s corked by MSG_MORE.  A splice(2) of
	 * the kernel run and a sendmsg(2) of the memory behind it are two
	 * datagrams on AF_UNIX; on UDP (Linux 6.18), a datagram corked with
	 * 17 spliced page fragments refuses the memory sent behind them
	 * (EMSGSIZE).  test/kres-dgram.c has both; copies are cheap at
	 * datagram sizes.
	 */
	if (out->kind == PP_KIND_SOCK && out->sock_type != SOCK_STREAM)
		return true;
	return __atomic_load_n(&out->no_kernel, __ATOMIC_RELAXED) & PP_NO_KSPLICE_WRITE;
}

/*
 * pipe -> file.  The consumer lock is held across the output's write, as
 * Linux holds pipe->mutex there: the bytes a short write leaves must stay
 * at the tail for the next consumer.  But we wait for data and for the
 * output's room with no lock (wait_output), and a later pass that would
 * have to wait for the output ends the splice instead.
 */
static ssize_t splice_from_pipe(struct pp_file *in, struct pp_file *out, off_t *ppos,
				size_t len, unsigned int flags)
{
	struct pp_pipe *p = in->pipe;
	bool nonblock = pp__pipe_nonblock(in, flags);
	struct pp_buf snap[SPLICE_OUT_BATCH];
	struct pp__dead dead;
	ssize_t ret = 0;
	int err;

	pp__dead_init(&dead);
	len = min_t(size_t, len, PP_MAX_RW);
	for (;;) {
		err = pp__pipe_wait_data(p, nonblock);
		if (err <= 0)
			return err;
		err = pp__splice_wait_output(out, pp__splice_output_nonblock(out, flags), false);
		if (err)
			return err;
		err = pp__pipe_lock_consumer(p, nonblock);
		if (err)
			return err;
		if (!pp__pipe_empty(p))
			break;
		pp__pipe_unlock_consumer(p);	/* another consumer took it: again */
	}
	while (len) {
		unsigned int nr, ok = 0;
		unsigned int oflags = flags;
		size_t avail = 0, drop = 0, batch = 0;
		ssize_t r;

		if (pp__pipe_empty(p) || (ret && !pp__splice_output_nonblock(out, flags) &&
					  pp__splice_wait_output(out, true, true)))
			break;
		if (needs_memory(out)) {
			err = pp__kbuf_materialize(p, len, SPLICE_OUT_BATCH);
			if (err) {
				if (!ret)
					ret = err;
				break;
			}
		}
		nr = pp__pipe_snapshot(p, snap, SPLICE_OUT_BATCH, len, false);
		/*
		 * Let sockets cork only while more of this call remains and is
		 * queued (splice_to_socket): a last piece sent with MSG_MORE
		 * waits for the next call, or for Nagle, or forever on UDP.
		 */
		for (unsigned int i = 0; i < nr; i++)
			batch += snap[i].len;
		if (pp__pipe_head(p) - p->tail > nr && len > batch)
			oflags |= SPLICE_F_MORE;

		/* Confirm each buffer before its bytes are touched; stop at the first bad one. */
		for (; ok < nr; ok++) {
			err = pp__buf_confirm(p, &snap[ok]);
			if (err)
				break;
			avail += snap[ok].len;
		}
		if (!avail && ok == nr) {
			pp__pipe_consume(p, 0, false, &dead);	/* only empty slots: retire them */
			continue;
		}
		if (ok)
			r = out->ops->splice_write(out, ppos, snap, ok, min_t(size_t, len, avail), oflags);
		else
			r = err;
		if (r == PP__EKBUF)
			continue;	/* the output refused the kernel's splice: needs_memory() now */
		if (r == -ENODATA) {
			/*
			 * The data is gone: end the splice as Linux does (0, or
			 * what was moved); the buffer is dropped once reported.
			 */
			if (!ret)
				drop = snap[0].len;
			r = 0;
		}
		if (r > 0 || drop)
			pp__pipe_consume(p, (size_t)(r > 0 ? r : 0) + drop, false, &dead);
		if (r <= 0) {
			if (!ret)
				ret = r;
			break;
		}
		ret += r;
		len -= (size_t)r;
		if ((size_t)r < min_t(size_t, len + (size_t)r, avail) || ok < nr)
			break;	/* short write, or a bad buffer next */
		if (dead.full)
			break;	/* no room to hold more retired buffers */
	}
	pp__pipe_unlock_consumer(p);
	pp__pipe_release_dead(p, &dead);
	return ret;
}

/* ---------------------------------------------------------------------- */

/*
 * Wait for input data and output room holding no lock at all (the kernel's
 * ipipe_prep/opipe_prep): 1 ready, 0 input EOF, or -errno.  The output is
 * checked even at input EOF, so EPIPE wins, as in Linux.
 */
int pp__pipe_prep_two(struct pp_file *in, struct pp_file *out, bool nonblock)
{
	int in_ready = pp__pipe_wait_data(in->pipe, nonblock);
	int err;

	if (in_ready < 0)
		return in_ready;
	err = pp__pipe_wait_room(out, nonblock);
	if (err)
		return err;
	return in_ready;
}

/*
 * Both locks, input consumer first (pipe.h).  A non-blocking caller may
 * find the input's consumer lock held by a read loan: EAGAIN.
 */
int pp__pipe_lock_two(struct pp_pipe *ip, struct pp_pipe *op, bool nonblock)
{
	int err = pp__pipe_lock_consumer(ip, nonblock);

	if (err)
		return err;
	pp__pipe_lock_producer(op);
	return 0;
}

void pp__pipe_unlock_two(struct pp_pipe *ip, struct pp_pipe *op)
{
	pp__pipe_unlock_producer(op);
	pp__pipe_unlock_consumer(ip);
}

static ssize_t splice_pipe_to_pipe(struct pp_file *in, struct pp_file *out, size_t len,
				   unsigned int flags)
{
	struct pp_pipe *ip = in->pipe, *op = out->pipe;
	bool nonblock = pp__pipe_nonblock(in, flags) || pp__pipe_nonblock(out, flags);
	ssize_t ret;
	int err;

retry:
	ret = 0;
	err = pp__pipe_prep_two(in, out, nonblock);
	if (err <= 0)
		return err;
	err = pp__pipe_lock_two(ip, op, nonblock);
	if (err)
		return err;
	bool input_eof = false, consumed = false;

	while (len) {
		struct pp_slot *islot;
		struct pp_buf *ibuf, obuf;

		if (!pp__pipe_readers(op)) {
			if (!ret)
				ret = pp__pipe_epipe(out);
			break;
		}
		if (pp__pipe_empty(ip)) {
			input_eof = !pp__pipe_writers(ip) && pp__pipe_empty(ip);
			break;
		}
		if (pp__pipe_full(op))
			break;

		islot = pp__pipe_slot(ip, ip->tail);
		pp__slot_sync(islot);
		ibuf = &islot->buf;
		if (ibuf->ops == &pp__kernel_buf_ops) {
			/* From our private kernel pipe to theirs (kbuf.c). */
			ssize_t r = pp__kbuf_move(ibuf, op, len);

			if (r > 0) {
				ibuf->offset += (unsigned int)r;
				ibuf->len -= (unsigned int)r;
				ret += r;
				len -= (size_t)r;
				if (!ibuf->len) {
					(void)pp__slot_seal(islot);	/* never mergeable */
					ibuf->ops = NULL;
					__atomic_store_n(&ip->tail, ip->tail + 1, __ATOMIC_RELEASE);
					consumed = true;
				}
				continue;
			}
			if (r == PP__EKBUF)
				r = pp__kbuf_materialize(ip, ibuf->len, 1);
			if (r) {
				if (!ret)
					ret = r;
				break;
			}
			/* Now an anonymous page: moved or shared as any other. */
		}
		if (len >= ibuf->len) {
			/*
			 * Move the whole buffer: ownership moves, flags (CAN_MERGE
			 * too) with it, once its writer can no longer append.
			 */
			if (!pp__slot_seal(islot))
				continue;	/* it grew: look again */
			obuf = *ibuf;
			ibuf->ops = NULL;
			__atomic_store_n(&ip->tail, ip->tail + 1, __ATOMIC_RELEASE);
			consumed = true;
			if (!obuf.len) {
				pp__buf_release(ip, &obuf);
				continue;
			}
			pp__pipe_push(op, &obuf);
			ret += obuf.len;
			len -= obuf.len;
			continue;
		}
		/* Share it: the copy is a second reference, so never mergeable. */
		if (!pp__buf_get(ip, ibuf)) {
			if (!ret)
				ret = -EFAULT;
			break;
		}
		obuf = *ibuf;
		obuf.flags &= ~(PP_BUF_FLAG_GIFT | PP_BUF_FLAG_CAN_MERGE);
		obuf.len = (unsigned int)len;
		ibuf->offset += (unsigned int)len;
		ibuf->len -= (unsigned int)len;
		pp__pipe_push(op, &obuf);
		ret += (ssize_t)len;
		len = 0;
	}
	if (consumed)
		pp__pipe_unpark_if_empty(ip);
	pp__pipe_unlock_two(ip, op);
	if (ret > 0)
		pp__pipe_wake_readers(op);
	if (consumed)
		pp__pipe_wake_writers(ip);

	/* 0 means EOF; if we only lost a race, go round again. */
	if (ret == 0 && !input_eof) {
		if (nonblock)
			return -EAGAIN;
		goto retry;
	}
	return ret;
}

/* ---------------------------------------------------------------------- */

static ssize_t do_splice(struct pp_file *in, off_t *off_in, struct pp_file *out,
			 off_t *off_out, size_t len, unsigned int flags)
{
	bool ishared = pp__is_shared(in), oshared = pp__is_shared(out);
	bool ipipe = pp__is_pipe(in) || ishared, opipe = pp__is_pipe(out) || oshared;
	struct splice_pos sp;
	ssize_t ret;
	int err;

	if (!ipipe && !opipe) {
		/* Two OS descriptors went to splice(2) in pp_splice(). */
		if (!pp__file_readable(in) || !pp__file_writable(out))
			return -EBADF;
		return -EINVAL;
	}
	/* A kernel pipe is a pipe here too: no offset (get_pipe_info). */
	if ((ipipe || in->kind == PP_KIND_FIFO) && off_in)
		return -ESPIPE;
	if ((opipe || out->kind == PP_KIND_FIFO) && off_out)
		return -ESPIPE;
	if (!pp__file_readable(in) || !pp__file_writable(out))
		return -EBADF;

	if (ipipe && opipe) {
		/* A shared pipe's end on either side: shared_splice.c. */
		if (ishared && oshared && pp__shared_same(in, out))
			return -EINVAL;
		if (ishared || oshared)
			return pp__shared_splice_pipes(in, out, len, flags, false);
		if (in->pipe == out->pipe)
			return -EINVAL;
		return splice_pipe_to_pipe(in, out, len, flags);
	}

	/*
	 * The pipe end's O_NONBLOCK makes the whole splice non-blocking, as
	 * do_splice makes it in Linux; each endpoint takes from the flag what
	 * its kernel counterpart takes.
	 */
	if (ipipe && (ishared ? pp__shared_nonblock(in) : pp__file_flags(in) & O_NONBLOCK))
		flags |= SPLICE_F_NONBLOCK;
	if (opipe && (oshared ? pp__shared_nonblock(out) : pp__file_flags(out) & O_NONBLOCK))
		flags |= SPLICE_F_NONBLOCK;

	if (ipipe) {
		err = splice_pos_init(&sp, out, off_out);
		if (err)
			return err;
		/*
		 * A kernel pipe is a pipe to Linux (splice_pipe_to_pipe): its
		 * O_APPEND means nothing and no rw_verify_area limits len.
		 */
		if (out->kind != PP_KIND_FIFO) {
			if (pp__file_flags(out) & O_APPEND)
				return -EINVAL;
			err = splice_pos_verify(&sp, len);
			if (err)
				return err;
		}
		if (!out->ops->splice_write)
			return -EINVAL;
		if (ishared)
			ret = pp__shared_splice_out(in, out, sp.ppos, len, flags);
		else
			ret = splice_from_pipe(in, out, sp.ppos, len, flags);
		splice_pos_done(&sp, out, off_out, ret);
		return ret;
	}

	err = splice_pos_init(&sp, in, off_in);
	if (err)
		return err;
	err = in->kind == PP_KIND_FIFO ? 0 : splice_pos_verify(&sp, len);
	if (err)
		return err;
	if (oshared) {
		if (in->fd < 0 && !in->ops->splice_read)
			return -EINVAL;
		ret = pp__shared_splice_in(in, sp.ppos, out, len, flags);
	} else {
		ret = splice_to_pipe(in, sp.ppos, out, len, flags);
	}
	splice_pos_done(&sp, in, off_in, ret);
	return ret;
}

PP_EXPORT ssize_t pp_splice(struct pp_file *in, off_t *off_in, struct pp_file *out,
			    off_t *off_out, size_t len, unsigned int flags)
{
	ssize_t ret;

	if (!len)
		return 0;
	if (flags & ~SPLICE_F_ALL)
		return pp__ret(-EINVAL);
	if (!in || !out)
		return pp__ret(-EBADF);
	/*
	 * Two OS descriptors: exactly splice(2), holding nothing, since the
	 * kernel may raise SIGPIPE inside it and a handler may siglongjmp.
	 */
	if (in->fd >= 0 && out->fd >= 0)
		return splice(in->fd, off_in, out->fd, off_out, len, flags);
	pp__file_get(in);
	pp__file_get(out);
	ret = do_splice(in, off_in, out, off_out, len, flags);
	pp__file_put(out);
	pp__file_put(in);
	return pp__ret(ret);
}
