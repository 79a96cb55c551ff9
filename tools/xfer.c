// SPDX-License-Identifier: MIT
/*
 * xfer.c - the transfer engine: moving bytes between two ends (OS
 * descriptors or pagepipe ends) by the fastest path that works.
 *
 * The fast paths are the library's: pp_splice() between two OS descriptors
 * of which one is a kernel pipe is the kernel's splice, and through a
 * pagepipe a file's pages reach a socket, a file or a pipe without passing
 * through this process's memory.  Every path can fail in ways that only
 * show at run time (a file system without splice, a library built without
 * it, two files on different mounts), so each step falls back to the next
 * path rather than failing: the tool must always work, and fast where it
 * can.
 *
 * The retry rules (EINTR: again; EAGAIN: wait for the descriptor, which
 * the caller may have left non-blocking) are written once, in splice_wait()
 * and the two copy helpers; every command moves its bytes through here.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Errors that say "this path does not work here", not "the data failed". */
static bool is_degradable(int err)
{
	return err == EINVAL || err == ENOSYS || err == EXDEV || err == EOPNOTSUPP ||
	       err == ESPIPE || err == EBADF;
}

/*
 * After EAGAIN from a call between two ends: wait for whichever may be
 * the one not ready.  A pagepipe end (fd -1) is blocking and never the
 * cause.  With both sides in question, neither readiness proves the call
 * will go on, so wait briefly rather than spin or hang.
 */
static void wait_either(int in_fd, int out_fd)
{
	struct pollfd pfd[2] = {
		{ .fd = in_fd, .events = POLLIN },
		{ .fd = out_fd, .events = POLLOUT },
	};

	if (in_fd < 0 && out_fd < 0)
		return;
	poll(pfd, 2, in_fd >= 0 && out_fd >= 0 ? 100 : -1);
}

/* One read from an end, across EINTR and EAGAIN. */
static ssize_t read_end(struct pp_file *f, int fd, void *buf, size_t len)
{
	for (;;) {
		ssize_t r = fd >= 0 ? read(fd, buf, len) : pp_read(f, buf, len);

		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			wait_either(fd, -1);
			continue;
		}
		return -errno;
	}
}

/* All of buf to an end, across EINTR, EAGAIN and short writes. */
static int write_end(struct pp_file *f, int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = fd >= 0 ? write(fd, p, len) : pp_write(f, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				wait_either(-1, fd);
				continue;
			}
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	return write_end(NULL, fd, buf, len);
}

/* One pp_splice between two ends, across EINTR and EAGAIN. */
static ssize_t splice_wait(struct pp_file *in, int in_fd, struct pp_file *out, int out_fd,
			   size_t len, unsigned int flags)
{
	for (;;) {
		ssize_t n = pp_splice(in, NULL, out, NULL, len, SPLICE_F_MOVE | flags);

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			wait_either(in_fd, out_fd);
			continue;
		}
		return -errno;
	}
}

static bool is_tty(int fd, const struct stat *st)
{
	return S_ISCHR(st->st_mode) && isatty(fd);
}

/*
 * Pick the path from the ends' types.  A terminal gets plain writes: it
 * copies anyway, and a tty driver is where splice support is thinnest.  A
 * pagepipe end on either side needs no staging: one splice moves the pages.
 */
static enum xfer_path best_path(int in_fd, int out_fd)
{
	struct stat is = { 0 }, os = { 0 };

	if ((in_fd >= 0 && fstat(in_fd, &is) < 0) || (out_fd >= 0 && fstat(out_fd, &os) < 0))
		return XFER_COPY;
	if ((in_fd >= 0 && is_tty(in_fd, &is)) || (out_fd >= 0 && is_tty(out_fd, &os)))
		return XFER_COPY;
	if (in_fd < 0 || out_fd < 0)
		return XFER_DIRECT;
	if (S_ISFIFO(is.st_mode) || S_ISFIFO(os.st_mode))
		return XFER_DIRECT;
	if (S_ISDIR(is.st_mode) || S_ISDIR(os.st_mode))
		return XFER_COPY;
	if (S_ISREG(is.st_mode) && S_ISREG(os.st_mode))
		return XFER_RANGE;
	return XFER_STAGED;
}

int stage_pipe(struct pp_file *ends[2], size_t size, int flags)
{
	size_t round = 4096;
	int err = 0;

	if (pp_pipe2(ends, flags | PP_O_NOSIGPIPE) < 0)
		return -errno;
	if (size <= 65536)
		return 0;
	/*
	 * Above the default limit, raise it first, as a root user would: to
	 * the power of two pages the size will be rounded up to.
	 */
	while (round < size)
		round <<= 1;
	if (round > pp_pipe_get_max_size() && pp_pipe_set_max_size(round) < 0)
		err = -errno;
	/* pp_pipe_set_size() reaches past the 1 GiB an int fcntl can report. */
	else if (pp_pipe_set_size(ends[1], size) < 0)
		err = -errno;
	if (err) {
		pp_close(ends[0]);
		pp_close(ends[1]);
	}
	return err;
}

/* One side: an OS descriptor (fd >= 0), opened here, or a pagepipe end. */
static void init_end(int fd, struct pp_file *f, int *xfd, struct pp_file **xf, bool *own)
{
	*xfd = fd;
	*xf = f;
	if (fd >= 0) {
		*xf = pp_fdopen(fd);
		*own = *xf != NULL;
	}
}

int xfer_init_ends(struct xfer *x, int in_fd, struct pp_file *in, int out_fd,
		   struct pp_file *out)
{
	memset(x, 0, sizeof(*x));
	init_end(in_fd, in, &x->in_fd, &x->in, &x->own_in);
	init_end(out_fd, out, &x->out_fd, &x->out, &x->own_out);
	x->stage_size = STAGE_SIZE;
	x->path = best_path(x->in_fd, x->out_fd);
	/* The copy path needs no library files for OS descriptors. */
	if ((in_fd >= 0 && !x->in) || (out_fd >= 0 && !x->out))
		x->path = XFER_COPY;
	return 0;
}

int xfer_init(struct xfer *x, int in_fd, int out_fd, size_t stage_size)
{
	struct stat st;

	xfer_init_ends(x, in_fd, NULL, out_fd, NULL);
	if (stage_size)
		x->stage_size = stage_size;
	else if (fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode))
		x->stage_size = FILE_STAGE_SIZE;
	return 0;
}

void xfer_destroy(struct xfer *x)
{
	if (x->stage[0])
		pp_close(x->stage[0]);
	if (x->stage[1])
		pp_close(x->stage[1]);
	if (x->in && x->own_in)
		pp_close(x->in);
	if (x->out && x->own_out)
		pp_close(x->out);
	free(x->buf);
	memset(x, 0, sizeof(*x));
}

static int get_buf(struct xfer *x)
{
	if (!x->buf)
		x->buf = malloc(COPY_BUF_SIZE);
	return x->buf ? 0 : -ENOMEM;
}

static ssize_t step_copy(struct xfer *x, size_t max)
{
	ssize_t r;
	int err;

	x->write_err = false;
	if (get_buf(x))
		return -ENOMEM;
	if (max > COPY_BUF_SIZE)
		max = COPY_BUF_SIZE;
	r = read_end(x->in, x->in_fd, x->buf, max);
	if (r <= 0)
		return r;
	err = write_end(x->out, x->out_fd, x->buf, (size_t)r);
	if (err) {
		x->write_err = true;
		return err;
	}
	return r;
}

void pipe_discard(struct pp_file *r)
{
	char sink[16384];
	int avail;

	while (pp_ioctl(r, FIONREAD, &avail) == 0 && avail > 0)
		if (pp_read(r, sink, sizeof(sink)) <= 0)
			break;
}

/*
 * Splicing out of `from` does not work here: copy the len bytes queued
 * there, so that they still arrive, in order.
 */
static int drain_copy(struct xfer *x, struct pp_file *from, size_t len)
{
	int err = get_buf(x);

	while (!err && len) {
		ssize_t r = pp_read(from, x->buf, len < COPY_BUF_SIZE ? len : COPY_BUF_SIZE);

		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		len -= (size_t)r;
		err = write_end(x->out, x->out_fd, x->buf, (size_t)r);
	}
	return err;
}

int xfer_drain(struct xfer *x, struct pp_file *from, size_t len)
{
	int err = 0;

	x->write_err = true;
	while (len && x->path != XFER_COPY) {
		ssize_t w = splice_wait(from, -1, x->out, x->out_fd, len, x->flags);

		if (w > 0) {
			len -= (size_t)w;
			continue;
		}
		if (w == 0 || is_degradable((int)-w)) {
			x->path = XFER_COPY;
			break;
		}
		err = (int)w;
		break;
	}
	if (!err && len)
		err = drain_copy(x, from, len);
	if (err)
		pipe_discard(from);
	return err;
}

static ssize_t step_staged(struct xfer *x, size_t max)
{
	ssize_t n;
	int err;

	if (!x->stage[0] && stage_pipe(x->stage, x->stage_size, 0)) {
		x->path = XFER_COPY;
		return step_copy(x, max);
	}
	if (max > x->stage_size)
		max = x->stage_size;
	n = splice_wait(x->in, x->in_fd, x->stage[1], -1, max, x->flags);
	if (n < 0 && is_degradable((int)-n)) {
		x->path = XFER_COPY;
		return step_copy(x, max);
	}
	if (n <= 0) {
		x->write_err = false;
		return n;
	}
	/* Drain all of it: the caller counts a step's bytes as delivered. */
	err = xfer_drain(x, x->stage[0], (size_t)n);
	return err ? err : n;
}

static ssize_t step_direct(struct xfer *x, size_t max)
{
	ssize_t n;

	if (max > (size_t)1 << 30)
		max = (size_t)1 << 30;
	n = splice_wait(x->in, x->in_fd, x->out, x->out_fd, max, x->flags);
	if (n >= 0)
		return n;
	/* Staging helps only between two OS descriptors. */
	if (is_degradable((int)-n) && x->in_fd >= 0 && x->out_fd >= 0) {
		x->path = XFER_STAGED;
		return step_staged(x, max);
	}
	/*
	 * Nothing moved, so redo the step by read and write: it works where
	 * splice does not, or reports the same error and says which side.
	 */
	x->path = XFER_COPY;
	return step_copy(x, max);
}

/* Between two regular files: one copy_file_range, across EINTR. */
static ssize_t step_range(struct xfer *x, size_t max)
{
	ssize_t n;

	/* A bounded step, so that progress and SIGINT are seen. */
	if (max > (size_t)256 << 20)
		max = (size_t)256 << 20;
	do
		n = copy_file_range(x->in_fd, NULL, x->out_fd, NULL, max, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		x->range_moved = true;
	/*
	 * 0 before any byte may be a file whose size is not its length
	 * (procfs, sysfs), which some kernels copy as empty: read it instead,
	 * as cp does.
	 */
	if (n == 0 && !x->range_moved) {
		x->path = XFER_STAGED;
		return step_staged(x, max);
	}
	if (n >= 0)
		return n;
	if (is_degradable(errno) || errno == ETXTBSY) {
		x->path = XFER_STAGED;
		return step_staged(x, max);
	}
	/* Nothing moved: read and write say which side failed. */
	x->path = XFER_COPY;
	return step_copy(x, max);
}

ssize_t xfer_step(struct xfer *x, size_t max)
{
	if (!max)
		return 0;
	switch (x->path) {
	case XFER_RANGE:
		return step_range(x, max);
	case XFER_DIRECT:
		return step_direct(x, max);
	case XFER_STAGED:
		return step_staged(x, max);
	default:
		return step_copy(x, max);
	}
}

/* ----------------------------------------------------------------------
 * What cat and copy share about their files.
 */

int open_input(const char *name, int *fd)
{
	struct stat st;

	if (!strcmp(name, "-")) {
		*fd = STDIN_FILENO;
		return 0;
	}
	*fd = open(name, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	/* read() says EISDIR only on some file systems; say it everywhere. */
	if (fstat(*fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(*fd);
		*fd = -1;
		return -EISDIR;
	}
	return 0;
}

uint64_t input_size(int fd, bool *known)
{
	struct stat st;
	off_t pos;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*known = false;
		return 0;
	}
	pos = lseek(fd, 0, SEEK_CUR);
	if (pos < 0 || pos > st.st_size)
		pos = 0;
	return (uint64_t)(st.st_size - pos);
}

void grow_out_pipe(int fd)
{
	struct stat st;
	size_t max = pp_pipe_get_max_size();

	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		if (max > STAGE_SIZE)
			max = STAGE_SIZE;
		/* Best effort: an unprivileged limit or a shared pipe may refuse. */
		(void)fcntl(fd, F_SETPIPE_SZ, (int)max);
	}
}

void report_xfer(const struct xfer *x, int err, const char *in_name, const char *out_name)
{
	char what[4200];

	if (x->write_err && err == EPIPE && sigpipe_default())
		exit_epipe();
	if (x->write_err)
		snprintf(what, sizeof(what), "write error%s%s", out_name ? " on " : "",
			 out_name ? out_name : "");
	else
		snprintf(what, sizeof(what), "%s", in_name);
	warn_err(err, what);
	/* As cat: a reader gone away ends everything, not just this file. */
	if (x->write_err && err == EPIPE)
		exit(EXIT_FAIL);
}
