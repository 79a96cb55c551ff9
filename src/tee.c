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

/* With the input's consumer lock and the output's producer lock held. */
static ssize_t link_pipe(struct pp_file *in, struct pp_file *out, size_t len, bool *eof)
{
	struct pp_pipe *ip = in->pipe, *op = out->pipe;
	ssize_t ret = 0;

	for (unsigned int i_tail = ip->tail; len; i_tail++) {
		struct pp_slot *islot;
		struct pp_buf obuf;

		if (!pp__pipe_readers(op)) {
			if (!ret)
				ret = pp__pipe_epipe(out);
			break;
		}
		if (i_tail == pp__pipe_head(ip)) {
			*eof = !pp__pipe_writers(ip) && ip->tail == pp__pipe_head(ip);
			break;
		}
		if (pp__pipe_full(op))
			break;
		islot = pp__pipe_slot(ip, i_tail);
		pp__slot_sync(islot);
		if (!islot->buf.len)
			continue;
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
