// SPDX-License-Identifier: MIT
/*
 * kpipe.c - kernel pipes and FIFOs as endpoints.
 *
 * Into a kernel pipe, file buffers go by splice(2) from the file, so the
 * kernel pipe ends up referring to page-cache pages as a kernel splice
 * would make it; memory buffers are written.  We never vmsplice our own
 * pages into a kernel pipe: it would keep referring to them after we
 * recycle them, and Linux is turning vmsplice into a copy anyway.  Out of
 * a kernel pipe, bytes can only be copied into user space: they are
 * spliced into a private kernel pipe first, so that the kernel decides
 * what moves, and packets keep their bounds (kpipe_splice_read).
 */
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

/* The most slots a private kernel pipe gets: pipe-max-size allows 256. */
#define PP__KPIPE_SLOTS	64u

/*
 * A kernel pipe as a splice's input is waited for before the output
 * (splice_pipe_to_pipe: ipipe_prep, then opipe_prep): empty with a writer,
 * it is EAGAIN for a non-blocking splice, or a wait, even when the output
 * has no reader or no room.  Empty with no writer goes on to the output's
 * checks (EPIPE before EOF).  Only asked when the output is not ready, so
 * a splice that can go ahead costs no poll(2).  0, or -errno.
 */
int pp__kpipe_prep_input(struct pp_file *in, unsigned int flags)
{
	struct pollfd pfd = { in->fd, POLLIN, 0 };

	if (poll(&pfd, 1, 0) != 0)
		return 0;	/* bytes, no writer, or an error the splice reports */
	if ((flags & SPLICE_F_NONBLOCK) || pp__fd_nonblocking(in->fd))
		return -EAGAIN;
	while (poll(&pfd, 1, -1) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/*
 * Out of a kernel pipe.  A read() of a kernel pipe stops at the end of a
 * packet (an O_DIRECT writer's buffer) and throws away the rest of one it
 * read only in part, so reading the source directly would split packets,
 * lose bytes, and then merge what it got.  Instead the kernel's own
 * splice_pipe_to_pipe moves the bytes into a private kernel pipe, with its
 * rules for whole and split buffers, for non-blocking and for EOF; that
 * pipe is then read a packet at a time.  A byte written behind the data
 * tells whether the last piece was a packet too: a read stops before it
 * only then.  The private pipe holds no more slots than we have buffers
 * left, and every piece read starts a page, so bufs cannot overflow; a
 * power of two of them at a time, so several rounds may be needed.
 */
static ssize_t kpipe_round(struct pp_file *in, int sc[2], struct pp_buf *bufs,
			   unsigned int nr_bufs, size_t len, unsigned int flags)
{
	const size_t psz = pp__page_size;
	unsigned int slots = 1, npages, used = 0, nb = 0;
	void *pages[PP__KPIPE_SLOTS + 1];
	struct iovec iov[PP__KPIPE_SLOTS + 1];
	bool sentinel = false;
	size_t got = 0;
	ssize_t r, moved;
	int cap;

	while (slots * 2 <= nr_bufs && slots * 2 <= PP__KPIPE_SLOTS)
		slots *= 2;
	/* Shrinking always works; growing may not, and 16 slots fit then. */
	(void)fcntl(sc[1], F_SETPIPE_SZ, (int)(slots * psz));
	cap = fcntl(sc[1], F_GETPIPE_SZ);
	slots = cap > 0 ? (unsigned int)(cap / (int)psz) : 0;
	if (!slots || slots > nr_bufs)
		return -ENOMEM;
	if (fcntl(sc[1], F_SETFL, 0))
		return -errno;
	/* Pages first: once the bytes have left the source they must land. */
	npages = (unsigned int)min_t(size_t, slots, len) + 1;
	for (unsigned int i = 0; i < npages; i++) {
		pages[i] = pp__page_alloc(NULL);
		if (!pages[i]) {
			npages = i;
			r = -ENOMEM;
			goto put;
		}
	}
	do
		moved = splice(in->fd, NULL, sc[1], NULL, len,
			       (flags & (SPLICE_F_NONBLOCK | PP__SPLICE_NOWAIT)) ? SPLICE_F_NONBLOCK : 0);
	while (moved < 0 && errno == EINTR);
	if (moved <= 0) {
		r = moved < 0 ? -errno : 0;
		if (r == -EAGAIN && (flags & PP__SPLICE_NOWAIT))
			r = 0;	/* a later pass: only what is there */
		goto put;
	}
	if (fcntl(sc[1], F_SETFL, O_NONBLOCK) == 0) {
		sentinel = write(sc[1], "", 1) == 1;
		if (!sentinel && fcntl(sc[1], F_SETPIPE_SZ, (int)(2 * slots * psz)) > 0)
			sentinel = write(sc[1], "", 1) == 1;
	}
	while (got < (size_t)moved) {
		size_t want = (size_t)moved - got + sentinel;
		unsigned int n = 0, k;
		size_t rem;

		for (size_t sum = 0; sum < want && used + n < npages; n++) {
			iov[n].iov_base = pages[used + n];
			iov[n].iov_len = min_t(size_t, psz, want - sum);
			sum += iov[n].iov_len;
		}
		do
			r = readv(sc[0], iov, (int)n);
		while (r < 0 && errno == EINTR);
		if (r <= 0)
			break;	/* cannot happen: the bytes are there */
		rem = (size_t)r;
		if (got + rem > (size_t)moved) {
			rem--;	/* the sentinel: no packet end before it */
			sentinel = false;
		}
		for (k = 0; rem && nb < nr_bufs; k++) {
			size_t take = min_t(size_t, psz, rem);

			bufs[nb++] = (struct pp_buf){
				.page = pages[used + k],
				.len = (unsigned int)take,
				.ops = &pp_anon_buf_ops,
			};
			rem -= take;
			got += take;
		}
		used += k;
		/* Stopped short of what was there: that was a packet's end. */
		if ((size_t)r < want && nb)
			bufs[nb - 1].flags |= PP_BUF_FLAG_PACKET;
	}
	if (sentinel) {
		char c;

		/* Behind a packet that ended the data: the pipe is empty after it. */
		(void)read(sc[0], &c, 1);
	}
	r = (ssize_t)got;
put:
	for (unsigned int i = used; i < npages; i++)
		pp__page_put(NULL, pages[i]);
	return r;
}

static ssize_t kpipe_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags)
{
	ssize_t ret = 0, r;
	unsigned int nb = 0;
	int sc[2], e;

	do
		e = pp__fault(PP_FAULT_READ);
	while (e == -EINTR);
	if (e)
		return e;
	if (pipe2(sc, O_CLOEXEC)) {
		/* No descriptor to spare: read it directly, packets or not. */
		if ((flags & SPLICE_F_NONBLOCK) && !pp__fd_readable_now(in->fd))
			return -EAGAIN;
		return pp__stream_splice_read(in, pos, bufs, nr_bufs, len, flags);
	}
	while (len && nb < nr_bufs) {
		r = kpipe_round(in, sc, bufs + nb, nr_bufs - nb, len,
				flags | (ret ? PP__SPLICE_NOWAIT : 0));
		if (r <= 0) {
			if (!ret)
				ret = r;
			break;
		}
		ret += r;
		len -= (size_t)r;
		for (size_t sum = 0; sum < (size_t)r; )
			sum += bufs[nb++].len;
	}
	close(sc[0]);
	close(sc[1]);
	return ret;
}

static ssize_t kpipe_move(struct pp_file *out, int sfd, off_t *spos, off_t *pos, size_t len,
			  unsigned int flags)
{
	ssize_t r = splice(sfd, spos, out->fd, NULL, len, SPLICE_F_MOVE | (flags & SPLICE_F_MORE));

	(void)pos;
	return r < 0 ? -errno : r;
}

/*
 * Linux moves what fits into a kernel pipe and returns
 * (splice_pipe_to_pipe); a write() or splice() to a blocking kernel pipe
 * would wait for room for all of it, holding our consumer lock, for a
 * reader that may be waiting for this very call.  So the bytes go through
 * a non-blocking open file description of the same pipe, after
 * splice_from_pipe waited for some room; only if another writer took that
 * room first does a blocking caller wait again.
 */
static const struct pp__kernel_path kpipe_path = {
	.move	= kpipe_move,
};

static ssize_t kpipe_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				  unsigned int nr_bufs, size_t len, unsigned int flags)
{
	struct pp_file view;
	char path[40];
	ssize_t r;
	int fd;

	/* A bad descriptor, on which F_GETFL fails, fails the open below: as it is too. */
	if (pp__fd_nonblocking(out->fd))
		return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, &kpipe_path);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", out->fd);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)	/* no /proc, or no reader left: as it is */
		return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, &kpipe_path);
	view = (struct pp_file){
		.ops = out->ops,
		.flags = O_WRONLY | O_NONBLOCK,
		.kind = out->kind,
		.fd = fd,
		.sock_type = out->sock_type,
		.fd_flags = out->fd_flags,
	};
	for (;;) {
		struct pollfd pfd = { out->fd, POLLOUT, 0 };

		r = pp__fd_splice_write(&view, pos, bufs, nr_bufs, len, flags, &kpipe_path);
		if (r == PP__EKBUF)
			__atomic_fetch_or(&out->no_kernel, PP_NO_KSPLICE_WRITE, __ATOMIC_RELAXED);
		if (r != -EAGAIN || (flags & SPLICE_F_NONBLOCK))
			break;
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
	}
	close(fd);
	return r;
}

const struct pp_file_ops pp__fifo_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.splice_read	= kpipe_splice_read,
	.splice_write	= kpipe_splice_write,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "kernel pipe",
};
