// SPDX-License-Identifier: MIT
/*
 * sock.c - sockets as endpoints.
 *
 * File buffers go out by sendfile(2): the kernel sends page-cache pages
 * and user space never touches the bytes.  Memory buffers go by one
 * sendmsg(2) per batch, MSG_MORE when SPLICE_F_MORE is given or more of
 * this call is queued behind them (splice_to_socket): never on the last
 * piece of a call, which would wait for Nagle's timer, or on UDP for the
 * next call's datagram.  Received bytes are copied into anonymous
 * pages: user space cannot take the kernel's skb pages.
 */
#include "internal.h"

#include <sys/socket.h>
#include <unistd.h>


static ssize_t sock_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags)
{
	return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, pp__sendfile_move);
}

const struct pp_file_ops pp__sock_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.splice_read	= pp__stream_splice_read,
	.splice_write	= sock_splice_write,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "socket",
};
