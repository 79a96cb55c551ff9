// SPDX-License-Identifier: MIT
/*
 * chr.c - character devices as endpoints: /dev/null, /dev/zero, ttys and
 * the rest.
 *
 * /dev/null consumes buffers without touching their bytes (splice_write_null).
 * /dev/zero produces references to one shared page of zeroes that nobody
 * may write, so a splice from it copies nothing.  Other devices copy, with
 * file buffers going out by sendfile(2) where the kernel takes it.
 */
#include "internal.h"

#include <unistd.h>


static void *zero_page;
static pthread_once_t zero_once = PTHREAD_ONCE_INIT;

static void zero_page_init(void)
{
	zero_page = pp__page_alloc(NULL);
	if (zero_page)
		__builtin_memset(zero_page, 0, pp__page_size);
}

static void zero_buf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	(void)buf;	/* the zero page lives as long as the process */
}

static bool zero_buf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	(void)buf;
	return true;
}

/* Shared by every pipe, so never mergeable and never stolen. */
static const struct pp_buf_ops zero_buf_ops = {
	.release	= zero_buf_release,
	.get		= zero_buf_get,
	.name		= "zero",
};

static ssize_t chr_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags)
{
	const size_t psz = pp__page_size;
	size_t done = 0;
	unsigned int n = 0;

	if (in->fd_flags & PP_FD_NULL)
		return -EINVAL;	/* /dev/null has no splice_read (5.10+) */
	if (!(in->fd_flags & PP_FD_ZERO))
		return pp__stream_splice_read(in, pos, bufs, nr_bufs, len, flags);
	pthread_once(&zero_once, zero_page_init);
	if (!zero_page)
		return -ENOMEM;
	for (; n < nr_bufs && done < len; n++) {
		size_t l = min_t(size_t, psz, len - done);

		bufs[n] = (struct pp_buf){
			.page = zero_page,
			.len = (unsigned int)l,
			.ops = &zero_buf_ops,
		};
		done += l;
	}
	/* Like splice_read_zero, the position does not move. */
	(void)pos;
	return (ssize_t)done;
}

static ssize_t chr_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				unsigned int nr_bufs, size_t len, unsigned int flags)
{
	size_t total = 0;

	if (!(out->fd_flags & PP_FD_NULL))
		return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, &pp__sendfile_path);
	for (unsigned int i = 0; i < nr_bufs && total < len; i++) {
		/* Bytes in our kernel pipe must leave it: the kernel's null splice takes them. */
		if (bufs[i].ops == &pp__kernel_buf_ops)
			return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, NULL);
		total += min_t(size_t, bufs[i].len, len - total);
	}
	return (ssize_t)total;
}

const struct pp_file_ops pp__chr_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.splice_read	= chr_splice_read,
	.splice_write	= chr_splice_write,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "character device",
};
