// SPDX-License-Identifier: MIT
/*
 * tee.c - pp_tee(): share the input's buffers with the output, consuming
 * nothing.
 *
 * Each copy takes its own reference (->get, which may refuse: EFAULT) and
 * loses GIFT and CAN_MERGE, so that a later write to either pipe can never
 * show in the other (the 2019 merge-aliasing bug, a0ce2f0aa6ad).  Unlike
 * link_pipe() in Linux, losing a race between waiting and locking retries
 * instead of returning a false 0 (EOF).
 */
#include "internal.h"

/*
 * Kernel-resident buffers (kbuf.c) cannot be shared: their bytes are
 * duplicated into the output's private kernel pipe by one tee(2), before
 * the walk, for those among the slots the walk can cover (it covers no
 * fewer: the output's room only grows while we hold its producer lock).
 * They are the front of the input's private pipe, in order, since the
 * walk starts at the tail.  Returns the bytes the walk may queue as the
 * output's kernel buffers, or -errno; when tee(2) cannot serve, the
 * input's are read into pages instead (a change of type, not of bytes).
 */
static ssize_t tee_kernel_bufs(struct pp_pipe *ip, unsigned int head, struct pp_pipe *op,
			       size_t len, struct pp__kpipe **okp)
{
	unsigned int room = pp__pipe_max_usage(op) - pp__pipe_occupancy(op), n = 0;
	struct pp__kpipe *ikp = NULL;
	size_t kbytes = 0;
	ssize_t r;

	if ((int)room <= 0)
		return 0;
	for (unsigned int i = ip->tail; i != head && len && n < room; i++) {
		struct pp_slot *s = pp__pipe_slot(ip, i);
		size_t l;

		pp__slot_sync(s);
		if (!s->buf.len)
			continue;
		l = min_t(size_t, s->buf.len, len);
		if (s->buf.ops == &pp__kernel_buf_ops) {
			ikp = s->buf.private;
			kbytes += l;
		}
		len -= l;
		n++;
	}
	if (!kbytes)
		return 0;
	r = pp__kbuf_tee(ikp, op, kbytes, okp);
	if (r != PP__EKBUF)
		return r;
	r = pp__kbuf_materialize(ip, SIZE_MAX, n);
	return r;
}

/*
 * With the input's consumer lock and the output's producer lock held.
 *
 * The walk stops at the head it loaded first.  A producer may still append
 * to the last slot it found (head - 1) while we copy it, and may publish
 * more slots after that; a walk that went on to those would skip what was
 * appended to the one before (the copy of it is fixed at the length seen)
 * and give the output bytes out of order.  Slots before the last cannot
 * grow: the producer appends only to head - 1, before it publishes more,
 * so the acquire load of head showed their final length.  The kernel's
 * tee holds pipe->mutex against the writer instead; a later call takes the
 * rest, as after any partial tee.
 */
static ssize_t link_pipe(struct pp_file *in, struct pp_file *out, size_t len, bool *eof)
{
	struct pp_pipe *ip = in->pipe, *op = out->pipe;
	struct pp__kpipe *okp = NULL;
	unsigned int head = pp__pipe_head(ip);
	ssize_t ret = 0, kbudget;

	kbudget = tee_kernel_bufs(ip, head, op, len, &okp);
	if (kbudget < 0)
		return kbudget;
	for (unsigned int i_tail = ip->tail; len; i_tail++) {
		struct pp_slot *islot;
		struct pp_buf obuf;

		if (!pp__pipe_readers(op)) {
			if (!ret)
				ret = pp__pipe_epipe(out);
			break;
		}
		if (i_tail == head) {
			*eof = !pp__pipe_writers(ip) && ip->tail == pp__pipe_head(ip);
			break;
		}
		if (pp__pipe_full(op))
			break;
		islot = pp__pipe_slot(ip, i_tail);
		pp__slot_sync(islot);
		if (!islot->buf.len)
			continue;
		if (islot->buf.ops == &pp__kernel_buf_ops) {
			/* Its bytes were tee'd above: the output's own kernel buffer. */
			obuf = (struct pp_buf){
				.len = (unsigned int)min_t(size_t, min_t(size_t, islot->buf.len, len),
							   (size_t)kbudget),
				.ops = &pp__kernel_buf_ops,
				.private = okp,
			};
			if (!obuf.len)
				break;	/* tee(2) took fewer: the rest is the next call's */
			kbudget -= obuf.len;
			pp__pipe_push(op, &obuf);
			ret += obuf.len;
			len -= obuf.len;
			/*
			 * Part of the slot: tee(2) stopped inside it (the
			 * output's private pipe had room for fewer kernel
			 * buffers), and the next slot's bytes do not follow
			 * these (test/bug-tee-kbuf-partial).
			 */
			if (obuf.len < islot->buf.len)
				break;
			continue;
		}
		if (!pp__buf_get(ip, &islot->buf)) {
			if (!ret)
				ret = -EFAULT;
			break;
		}
		/* The copy is fixed in length: later merges stay the input's. */
		obuf = islot->buf;
		obuf.flags &= ~(PP_BUF_FLAG_GIFT | PP_BUF_FLAG_CAN_MERGE);
		if (obuf.len > len)
			obuf.len = (unsigned int)len;
		pp__pipe_push(op, &obuf);
		ret += obuf.len;
		len -= obuf.len;
	}
	return ret;
}

static ssize_t do_tee(struct pp_file *in, struct pp_file *out, size_t len, unsigned int flags)
{
	bool nonblock;
	ssize_t ret;
	int err;

	if (!pp__file_readable(in) || !pp__file_writable(out))
		return -EBADF;
	if (pp__is_shared(in) || pp__is_shared(out)) {
		/* shared_splice.c: a copy, as the other process cannot hold our pages. */
		if (!pp__is_pagepipe(in) || !pp__is_pagepipe(out) ||
		    (pp__is_shared(in) && pp__is_shared(out) && pp__shared_same(in, out)))
			return -EINVAL;
		return pp__shared_splice_pipes(in, out, len, flags, true);
	}
	if (!pp__is_pipe(in) || !pp__is_pipe(out) || in->pipe == out->pipe)
		return -EINVAL;
	nonblock = pp__pipe_nonblock(in, flags) || pp__pipe_nonblock(out, flags);

	for (;;) {
		bool eof = false;

		err = pp__pipe_prep_two(in, out, nonblock);
		if (err <= 0)
			return err;
		/* The consumer lock keeps the tail still while we walk it. */
		err = pp__pipe_lock_two(in->pipe, out->pipe, nonblock);
		if (err)
			return err;
		ret = link_pipe(in, out, len, &eof);
		pp__pipe_unlock_two(in->pipe, out->pipe);
		if (ret > 0)
			pp__pipe_wake_readers(out->pipe);
		if (ret || eof)
			return ret;
		if (nonblock)
			return -EAGAIN;
	}
}

PP_EXPORT ssize_t pp_tee(struct pp_file *in, struct pp_file *out, size_t len, unsigned int flags)
{
	ssize_t ret;

	if (flags & ~SPLICE_F_ALL)
		return pp__ret(-EINVAL);
	if (!len)
		return 0;
	if (!in || !out)
		return pp__ret(-EBADF);
	if (in->fd >= 0 && out->fd >= 0) {
		ret = tee(in->fd, out->fd, len, flags);
		return ret;
	}
	pp__file_get(in);
	pp__file_get(out);
	ret = do_tee(in, out, len, flags);
	pp__file_put(out);
	pp__file_put(in);
	return pp__ret(ret);
}
