// SPDX-License-Identifier: MIT
/*
 * fd.c - OS descriptors as endpoints: what every kind shares.
 *
 * A file made by pp_fdopen() behaves as its descriptor: read, write and
 * poll pass straight through.  The copying splice helpers here are the
 * fallback every kind can use; the kinds with a faster path (regular
 * files, kernel pipes, sockets) have files of their own.
 */
#include "internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

ssize_t pp__fd_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	ssize_t r = readv(f->fd, iov, iovcnt);

	return r < 0 ? -errno : r;
}

ssize_t pp__fd_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	ssize_t r = writev(f->fd, iov, iovcnt);

	return r < 0 ? -errno : r;
}

short pp__fd_poll(struct pp_file *f, short events)
{
	struct pollfd pfd = { f->fd, events, 0 };

	if (poll(&pfd, 1, 0) < 0)
		return POLLERR;
	return pfd.revents;
}

int pp__fd_release(struct pp_file *f)
{
	(void)f;	/* pp_fdopen() never owns the descriptor */
	return 0;
}

/* Retry on EINTR; one boundary for the fault-injection hook. */
static ssize_t sys_readv(int fd, const struct iovec *iov, int n, off_t *pos)
{
	for (;;) {
		int e = pp__fault(PP_FAULT_READ);
		ssize_t r;

		if (e == -EINTR)
			continue;
		if (e)
			return e;
		r = pos ? preadv(fd, iov, n, *pos) : readv(fd, iov, n);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static ssize_t sys_writev(struct pp_file *out, const struct iovec *iov, int n, off_t *pos,
			  unsigned int flags, pp__sendv_fn sendv)
{
	for (;;) {
		int e = pp__fault(PP_FAULT_WRITE);
		ssize_t r;

		if (e == -EINTR)
			continue;
		if (e)
			return e;
		if (sendv) {
			r = sendv(out, iov, n, flags);
			if (r != -EINTR)
				return r;
			continue;
		}
		r = pos ? pwritev(out->fd, iov, n, *pos) : writev(out->fd, iov, n);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

bool pp__fd_readable_now(int fd)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	return poll(&pfd, 1, 0) > 0;
}

/*
 * The descriptor's O_NONBLOCK now: the kernel goes by it, and the caller
 * may have changed it since pp_fdopen() looked.
 */
bool pp__fd_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

ssize_t pp__stream_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags)
{
	if ((flags & PP__SPLICE_NOWAIT) && !pp__fd_readable_now(in->fd))
		return 0;
	return pp__fd_splice_read_copy(in, pos, bufs, nr_bufs, len, flags);
}

/*
 * Read into fresh anonymous pages (copy_splice_read): one buffer per page,
 * never mergeable, since the pipe did not write them.
 */
ssize_t pp__fd_splice_read_copy(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
				unsigned int nr_bufs, size_t len, unsigned int flags)
{
	const size_t psz = pp__page_size;
	struct iovec iov[PP_IOV_MAX];
	unsigned int n = (unsigned int)min_t(size_t, nr_bufs, (len + psz - 1) / psz);
	size_t want = 0;
	ssize_t r;

	(void)flags;
	n = min_t(unsigned int, n, PP_IOV_MAX);
	for (unsigned int i = 0; i < n; i++) {
		iov[i].iov_base = pp__page_alloc(NULL);
		if (!iov[i].iov_base) {
			n = i;
			break;
		}
		iov[i].iov_len = min_t(size_t, psz, len - want);
		want += iov[i].iov_len;
	}
	if (!n)
		return -ENOMEM;
	r = sys_readv(in->fd, iov, (int)n, pos);
	for (unsigned int i = 0; i < n; i++) {
		size_t got = r > 0 ? min_t(size_t, (size_t)r - min_t(size_t, (size_t)r, i * psz), psz) : 0;

		if (!got) {
			pp__page_put(NULL, iov[i].iov_base);
			continue;
		}
		bufs[i] = (struct pp_buf){
			.page = iov[i].iov_base,
			.len = (unsigned int)got,
			.ops = &pp_anon_buf_ops,
		};
	}
	if (r > 0 && pos)
		*pos += r;
	return r;
}

/*
 * Write the front of the buffers with one writev: memory buffers as they
 * are, mapped ones between map and unmap, file buffers read into scratch
 * pages first (a kind with a kernel path for those does not come here).
 */
ssize_t pp__fd_splice_write_copy(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags,
				 pp__sendv_fn sendv)
{
	struct iovec iov[PP_IOV_MAX];
	void *mapped[PP_IOV_MAX], *scratch[PP_IOV_MAX];
	unsigned int n = 0;
	size_t total = 0;
	ssize_t r = 0;

	for (; n < nr_bufs && n < PP_IOV_MAX && total < len; n++) {
		struct pp_buf *buf = &bufs[n];
		size_t take = min_t(size_t, buf->len, len - total);
		enum pp__buf_class cls;

		mapped[n] = scratch[n] = NULL;
		cls = pp__buf_class(buf);
		if (cls == PP_BUF_MEMORY) {
			iov[n].iov_base = (char *)buf->page + buf->offset;
		} else if (cls == PP_BUF_FILE) {
			ssize_t got;

			scratch[n] = pp__page_alloc(NULL);
			if (!scratch[n]) {
				r = -ENOMEM;
				break;
			}
			got = pp__buf_copy_out(NULL, buf, 0, scratch[n], take);
			if (got <= 0) {
				r = got ? got : -ENODATA;
				pp__page_put(NULL, scratch[n]);
				scratch[n] = NULL;
				break;
			}
			take = (size_t)got;
			iov[n].iov_base = scratch[n];
		} else {
			mapped[n] = pp__buf_map(NULL, buf);
			if (!mapped[n]) {
				r = -EIO;
				break;
			}
			iov[n].iov_base = (char *)mapped[n] + buf->offset;
		}
		iov[n].iov_len = take;
		total += take;
	}
	if (n) {
		/* What was gathered goes out; an error behind it shows on the next call. */
		r = sys_writev(out, iov, (int)n, pos, flags, sendv);
		if (r > 0 && pos)
			*pos += r;
	}
	for (unsigned int i = 0; i < n; i++) {
		if (mapped[i])
			pp__buf_unmap(NULL, &bufs[i], mapped[i]);
		if (scratch[i])
			pp__page_put(NULL, scratch[i]);
	}
	return r;
}

/*
 * The longest run of file buffers at the front of bufs that one kernel
 * call can move: the same descriptor, each starting where the last ended,
 * every one but the last whole.  0 when bufs[0] has no origin.
 */
static unsigned int file_run(struct pp_buf *bufs, unsigned int nr, size_t max,
			     int *fd, off_t *pos, size_t *bytes)
{
	unsigned int n = 0;
	size_t sum = 0;
	int rfd;
	off_t rpos;

	if (pp__buf_class(&bufs[0]) != PP_BUF_FILE || pp__buf_origin(NULL, &bufs[0], fd, pos))
		return 0;
	for (; n < nr && sum < max; n++) {
		if (n) {
			if (pp__buf_class(&bufs[n]) != PP_BUF_FILE ||
			    pp__buf_origin(NULL, &bufs[n], &rfd, &rpos) ||
			    rfd != *fd || rpos != *pos + (off_t)sum)
				break;
		}
		sum += min_t(size_t, bufs[n].len, max - sum);
	}
	*bytes = sum;
	return n;
}

/* sendfile(2): the kernel path to sockets, ttys and most other descriptors. */
ssize_t pp__sendfile_move(struct pp_file *out, int sfd, off_t *spos, off_t *pos, size_t len,
			  unsigned int flags)
{
	ssize_t r = sendfile(out->fd, sfd, spos, len);

	(void)pos;
	(void)flags;
	return r < 0 ? -errno : r;
}

const struct pp__kernel_path pp__sendfile_path = {
	.move	= pp__sendfile_move,
};

/* Loop one kind's kernel call until len moved, a short 0, or an error. */
static ssize_t move_all(pp__move_fn move, struct pp_file *out, int sfd, off_t spos,
			off_t *pos, size_t len, unsigned int flags)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = move(out, sfd, &spos, pos, len - done, flags);

		if (r == -EINTR)
			continue;
		if (r < 0)
			return done ? (ssize_t)done : r;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* Do two descriptors name the same file? */
static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/*
 * Copy the front of bufs with writev, `step` buffers per call; what a call
 * wrote is visible to the reads of the next.
 */
static ssize_t copy_in_steps(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
			     unsigned int nr_bufs, size_t len, unsigned int flags,
			     unsigned int step, pp__sendv_fn sendv)
{
	size_t done = 0;

	for (unsigned int i = 0; i < nr_bufs && done < len; i += step) {
		unsigned int m = min_t(unsigned int, step, nr_bufs - i);
		size_t bytes = 0;
		ssize_t r;

		for (unsigned int k = 0; k < m; k++)
			bytes += bufs[i + k].len;
		bytes = min_t(size_t, bytes, len - done);
		r = pp__fd_splice_write_copy(out, pos, bufs + i, m, bytes, flags, sendv);
		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < bytes)
			break;
	}
	return (ssize_t)done;
}

static bool kernel_path_unsupported(ssize_t r)
{
	return r == -EINVAL || r == -EXDEV || r == -ENOSYS || r == -EOPNOTSUPP || r == -EBADF;
}

/*
 * splice_write for descriptors: file runs go through the kind's kernel
 * path (move), with no byte in user memory; everything else, and any run
 * the kernel refuses at run time, goes through writev.  The zero copy of
 * the kernel is detected, never assumed.
 */
ssize_t pp__fd_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
			    unsigned int nr_bufs, size_t len, unsigned int flags,
			    const struct pp__kernel_path *path)
{
	pp__move_fn move = path ? path->move : NULL;
	pp__sendv_fn sendv = path ? path->sendv : NULL;
	size_t done = 0;
	unsigned int i = 0;

	while (i < nr_bufs && done < len) {
		unsigned int n, step, mflags;
		size_t bytes = 0;
		ssize_t r = -EOPNOTSUPP;
		struct pp__kpipe *kp;
		off_t spos;
		int sfd;

		n = pp__kbuf_run(bufs + i, nr_bufs - i, len - done, &kp, &bytes);
		if (n) {
			/* Bytes in our private kernel pipe: splice(2) them on. */
			mflags = flags;
			if (i + n < nr_bufs && done + bytes < len)
				mflags |= SPLICE_F_MORE;
			r = pp__kbuf_splice_out(kp, out->fd, pos, bytes, mflags);
			if (r == -EINVAL) {
				/* No splice_write here: memory from now on. */
				__atomic_fetch_or(&out->no_kernel, PP_NO_KSPLICE_WRITE,
						  __ATOMIC_RELAXED);
				return done ? (ssize_t)done : PP__EKBUF;
			}
			if (r < 0)
				return done ? (ssize_t)done : r;
			if (r > 0 && pos)
				*pos += r;
			done += (size_t)r;
			if ((size_t)r < bytes)
				break;
			i += n;
			continue;
		}
		n = move ? file_run(bufs + i, nr_bufs - i, len - done, &sfd, &spos, &bytes) : 0;
		if (n) {
			/* An interrupted kernel call is retried, as the move loops do. */
			do
				r = pp__fault(PP_FAULT_SPLICE);
			while (r == -EINTR);
			if (!r)
				r = move_all(move, out, sfd, spos, pos, bytes, flags);
			if (r == 0 && bytes) {
				/* 0 from a pseudo-file, or the data is gone: let a read decide. */
				r = -EOPNOTSUPP;
			}
		}
		if (!n || kernel_path_unsupported(r) || r == -EOPNOTSUPP) {
			unsigned int m = n ? n : 1;

			if (!n) {
				/* A run of memory buffers. */
				while (i + m < nr_bufs &&
				       (pp__buf_class(&bufs[i + m]) == PP_BUF_MEMORY ||
					pp__buf_class(&bufs[i + m]) == PP_BUF_MAPPED))
					m++;
			}
			bytes = 0;
			for (unsigned int k = 0; k < m; k++)
				bytes += bufs[i + k].len;
			bytes = min_t(size_t, bytes, len - done);
			/*
			 * File pages going back into their own file (which
			 * copy_file_range refuses when the ranges overlap) are
			 * copied a buffer at a time, in order, as Linux copies
			 * them page by page from the page cache: a later
			 * buffer reads what an earlier one of the same splice
			 * wrote.  Reading a whole run before writing it gave a
			 * memmove within each batch of buffers and something
			 * else across batches.
			 */
			step = n && out->kind == PP_KIND_REG && same_file(sfd, out->fd) ? 1 : m;
			/*
			 * More of this call follows in another system call: a
			 * socket corks, as it would for the kernel's one sendmsg
			 * of both (one datagram on UDP).
			 */
			mflags = flags;
			if (i + m < nr_bufs && done + bytes < len)
				mflags |= SPLICE_F_MORE;
			r = copy_in_steps(out, pos, bufs + i, m, bytes, mflags, step, sendv);
			n = m;
		}
		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < bytes)
			break;
		i += n;
	}
	return (ssize_t)done;
}

const struct pp_file_ops pp__fd_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "descriptor",
};
