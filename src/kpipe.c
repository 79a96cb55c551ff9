// SPDX-License-Identifier: MIT
/*
 * kpipe.c - kernel pipes and FIFOs as endpoints.
 *
 * Into a kernel pipe, file buffers go by splice(2) from the file, so the
 * kernel pipe ends up referring to page-cache pages as a kernel splice
 * would make it; memory buffers are written.  We never vmsplice our own
 * pages into a kernel pipe: it would keep referring to them after we
 * recycle them, and Linux is turning vmsplice into a copy anyway.  Out of
 * a kernel pipe, bytes can only be copied into user space.
 */
#include "internal.h"

#include <unistd.h>

static bool fd_readable_now(int fd)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	return poll(&pfd, 1, 0) > 0;
}

/*
 * Sources that can block: the first pass may wait as the descriptor's own
 * O_NONBLOCK says; later passes of the same splice only take what is there.
 */
ssize_t pp__stream_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags)
{
	if ((flags & PP__SPLICE_NOWAIT) && !fd_readable_now(in->fd))
		return 0;
	/* unix_stream_splice_read() takes SPLICE_F_NONBLOCK for the socket too. */
	if ((flags & SPLICE_F_NONBLOCK) && in->kind == PP_KIND_SOCK &&
	    (in->fd_flags & PP_FD_UNIX) && !fd_readable_now(in->fd))
		return -EAGAIN;
	return pp__fd_splice_read_copy(in, pos, bufs, nr_bufs, len, flags);
}

static ssize_t kpipe_move(struct pp_file *out, int sfd, off_t *spos, off_t *pos, size_t len,
			  unsigned int flags)
{
	ssize_t r = splice(sfd, spos, out->fd, NULL, len, SPLICE_F_MOVE | (flags & SPLICE_F_MORE));

	(void)pos;
	return r < 0 ? -errno : r;
}

static ssize_t kpipe_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				  unsigned int nr_bufs, size_t len, unsigned int flags)
{
	return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, kpipe_move);
}

const struct pp_file_ops pp__fifo_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.splice_read	= pp__stream_splice_read,
	.splice_write	= kpipe_splice_write,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "kernel pipe",
};
