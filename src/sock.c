// SPDX-License-Identifier: MIT
/*
 * sock.c - sockets as endpoints: the whole of their kernel path.
 *
 * Received bytes stay in the kernel: they are spliced into the pagepipe's
 * private kernel pipe (kbuf.c), and go on from there by splice(2).  File
 * buffers go out by sendfile(2): the kernel sends page-cache pages and
 * user space never touches the bytes.  Memory buffers go by one
 * sendmsg(2) per batch, MSG_MORE when SPLICE_F_MORE is given or more of
 * this call is queued behind them (splice_to_socket): never on the last
 * piece of a call, which would wait for Nagle's timer, or on UDP for the
 * next call's datagram.  A socket the kernel cannot splice from (UDP)
 * is read into anonymous pages.
 */
#include "internal.h"

#include <sys/socket.h>
#include <unistd.h>


/*
 * Memory: one sendmsg(2) per batch.  SPLICE_F_MORE is MSG_MORE; EPIPE
 * raises SIGPIPE as splice_to_socket raises it (no MSG_NOSIGNAL).
 */
static ssize_t sock_sendv(struct pp_file *out, const struct iovec *iov, int n, unsigned int flags)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
	ssize_t r = sendmsg(out->fd, &msg, (flags & SPLICE_F_MORE) ? MSG_MORE : 0);

	return r < 0 ? -errno : r;
}

static const struct pp__kernel_path sock_path = {
	.move	= pp__sendfile_move,
	.sendv	= sock_sendv,
};

static ssize_t sock_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags)
{
	return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, &sock_path);
}

/*
 * The copying way in (a socket the kernel cannot splice from, or no
 * private kernel pipe to spare; kbuf.c is the usual way).
 * SPLICE_F_NONBLOCK, which do_splice sets for a pagepipe's O_NONBLOCK, is
 * for the source too where Linux makes it so: unix_stream_splice_read()
 * reads with MSG_DONTWAIT.  TCP waits as its own O_NONBLOCK says.
 */
static ssize_t sock_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
				unsigned int nr_bufs, size_t len, unsigned int flags)
{
	if ((flags & SPLICE_F_NONBLOCK) && (in->fd_flags & PP_FD_UNIX) &&
	    !pp__fd_readable_now(in->fd))
		return -EAGAIN;
	return pp__stream_splice_read(in, pos, bufs, nr_bufs, len, flags);
}

const struct pp_file_ops pp__sock_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.splice_read	= sock_splice_read,
	.splice_write	= sock_splice_write,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "socket",
};
