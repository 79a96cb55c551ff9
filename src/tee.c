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

static ssize_t link_pipe(struct pp_file *in, struct pp_file *out, size_t len, bool *eof)
{
	struct pp_pipe *ip = in->pipe, *op = out->pipe;
	ssize_t ret = 0;

	pp__pipe_double_lock(ip, op);
	for (unsigned int i_tail = ip->tail; len; i_tail++) {
		struct pp_buf *ibuf, *obuf;

		if (!op->readers) {
			if (!ret)
				ret = pp__pipe_epipe(out);
			break;
		}
		if (i_tail == ip->head) {
			*eof = !ip->writers && ip->tail == ip->head;
			break;
		}
		if (pp__pipe_full(op))
			break;
		ibuf = pp__pipe_buf(ip, i_tail);
		if (!ibuf->len)
			continue;
		if (!pp__buf_get(ip, ibuf)) {
			if (!ret)
				ret = -EFAULT;
			break;
		}
		obuf = pp__pipe_buf(op, op->head);
		*obuf = *ibuf;
		obuf->flags &= ~(PP_BUF_FLAG_GIFT | PP_BUF_FLAG_CAN_MERGE);
		if (obuf->len > len)
			obuf->len = (unsigned int)len;
		pp__pipe_set_head(op, op->head + 1);
		ret += obuf->len;
		len -= obuf->len;
	}
	if (ret > 0)
		pp__pipe_wake_readers(op);
	pp__pipe_double_unlock(ip, op);
	return ret;
}

static ssize_t do_tee(struct pp_file *in, struct pp_file *out, size_t len, unsigned int flags)
{
	bool nonblock;
	ssize_t ret;
	int err;

	if (!pp__file_readable(in) || !pp__file_writable(out))
		return -EBADF;
	if (!pp__is_pipe(in) || !pp__is_pipe(out) || in->pipe == out->pipe)
		return -EINVAL;
	nonblock = pp__pipe_nonblock(in, flags) || pp__pipe_nonblock(out, flags);

	for (;;) {
		bool eof = false;

		/* As do_tee: the output is checked even at input EOF, so EPIPE wins. */
		int in_ready = pp__ipipe_prep(in->pipe, nonblock);

		if (in_ready < 0)
			return in_ready;
		err = pp__opipe_prep(out, nonblock);
		if (err)
			return err;
		if (!in_ready)
			return 0;
		/* The consumer lock keeps the tail still while we walk it. */
		err = pp__pipe_lock_consumer(in->pipe, nonblock);
		if (err)
			return err;
		err = pp__pipe_lock_producer(out->pipe, nonblock);
		if (err) {
			pp__pipe_unlock_consumer(in->pipe);
			return err;
		}
		ret = link_pipe(in, out, len, &eof);
		pp__pipe_unlock_producer(out->pipe);
		pp__pipe_unlock_consumer(in->pipe);
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
