// SPDX-License-Identifier: MIT
/*
 * xfer.c - moving bytes between two descriptors by the fastest path that
 * works, and the progress line.
 *
 * The fast paths are the library's: pp_splice() between two OS descriptors
 * of which one is a kernel pipe is the kernel's splice, and through a
 * pagepipe a file's pages reach a socket, a file or a pipe without passing
 * through this process's memory.  Every path can fail in ways that only
 * show at run time (a file system without splice, a library built without
 * it, two files on different mounts), so each step falls back to the next
 * path rather than failing: the tool must always work, and fast where it
 * can.
 */
#include "tool.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const xfer_path_name[] = {
	[XFER_DIRECT] = "splice",
	[XFER_STAGED] = "pagepipe",
	[XFER_COPY] = "copy",
};

/* Errors that say "this path does not work here", not "the data failed". */
bool is_degradable(int err)
{
	return err == EINVAL || err == ENOSYS || err == EXDEV || err == EOPNOTSUPP ||
	       err == ESPIPE || err == EBADF;
}

void wait_fd(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	/* A descriptor the caller left non-blocking: wait rather than fail. */
	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				wait_fd(fd, POLLOUT);
				continue;
			}
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static bool is_tty(int fd, const struct stat *st)
{
	return S_ISCHR(st->st_mode) && isatty(fd);
}

/*
 * Pick the path from the descriptors' types.  A terminal gets plain writes:
 * it copies anyway, and a tty driver is where splice support is thinnest.
 */
enum xfer_path xfer_best_path(int in_fd, int out_fd)
{
	struct stat is, os;

	if (fstat(in_fd, &is) < 0 || fstat(out_fd, &os) < 0)
		return XFER_COPY;
	if (is_tty(in_fd, &is) || is_tty(out_fd, &os))
		return XFER_COPY;
	if (S_ISFIFO(is.st_mode) || S_ISFIFO(os.st_mode))
		return XFER_DIRECT;
	if (S_ISDIR(is.st_mode) || S_ISDIR(os.st_mode))
		return XFER_COPY;
	return XFER_STAGED;
}

int stage_pipe(struct pp_file *ends[2], size_t size, int flags)
{
	if (pp_pipe2(ends, flags | PP_O_NOSIGPIPE) < 0)
		return -errno;
	if (size <= 65536)
		return 0;
	/* Above the default limit, raise it first, as a root user would. */
	if (size > pp_pipe_get_max_size() && pp_pipe_set_max_size(size) < 0) {
		int err = errno;

		pp_close(ends[0]);
		pp_close(ends[1]);
		return -err;
	}
	/* pp_pipe_set_size() reaches past the 1 GiB an int fcntl can report. */
	if (pp_pipe_set_size(ends[1], size) < 0) {
		int err = errno;

		pp_close(ends[0]);
		pp_close(ends[1]);
		return -err;
	}
	return 0;
}

int xfer_init(struct xfer *x, int in_fd, int out_fd, size_t stage_size)
{
	memset(x, 0, sizeof(*x));
	x->in_fd = in_fd;
	x->out_fd = out_fd;
	x->stage_size = stage_size ? stage_size : STAGE_SIZE;
	if (x->stage_size == STAGE_SIZE) {
		struct stat st;

		if (fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode))
			x->stage_size = FILE_STAGE_SIZE;
	}
	x->path = xfer_best_path(in_fd, out_fd);
	x->in = pp_fdopen(in_fd);
	x->out = pp_fdopen(out_fd);
	if (!x->in || !x->out) {
		/* The copy path needs no library files at all. */
		x->path = XFER_COPY;
	}
	return 0;
}

void xfer_destroy(struct xfer *x)
{
	if (x->stage[0])
		pp_close(x->stage[0]);
	if (x->stage[1])
		pp_close(x->stage[1]);
	if (x->in)
		pp_close(x->in);
	if (x->out)
		pp_close(x->out);
	free(x->buf);
	memset(x, 0, sizeof(*x));
}

static ssize_t step_copy(struct xfer *x, size_t max)
{
	ssize_t r;
	int err;

	if (!x->buf) {
		x->buf = malloc(COPY_BUF_SIZE);
		if (!x->buf) {
			x->write_err = false;
			return -ENOMEM;
		}
	}
	if (max > COPY_BUF_SIZE)
		max = COPY_BUF_SIZE;
	for (;;) {
		r = read(x->in_fd, x->buf, max);
		if (r >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			wait_fd(x->in_fd, POLLIN);
			continue;
		}
		x->write_err = false;
		return -errno;
	}
	if (r == 0)
		return 0;
	err = write_all(x->out_fd, x->buf, (size_t)r);
	if (err) {
		x->write_err = true;
		return err;
	}
	return r;
}

/*
 * Empty the staging pipe by read and write: what is left there when
 * splicing out of it stopped working must still arrive, in order.
 */
static int drain_copy(struct xfer *x)
{
	char tmp[16384];

	for (;;) {
		int avail = 0;
		ssize_t r;
		int err;

		if (pp_ioctl(x->stage[0], FIONREAD, &avail) < 0 || avail <= 0)
			return 0;
		r = pp_read(x->stage[0], tmp, sizeof(tmp));
		if (r <= 0)
			return r < 0 ? -errno : 0;
		err = write_all(x->out_fd, tmp, (size_t)r);
		if (err)
			return err;
	}
}

static ssize_t step_staged(struct xfer *x, size_t max)
{
	size_t left;
	ssize_t n;

	if (!x->stage[0]) {
		int err = stage_pipe(x->stage, x->stage_size, 0);

		if (err) {
			x->path = XFER_COPY;
			return step_copy(x, max);
		}
	}
	if (max > x->stage_size)
		max = x->stage_size;
	for (;;) {
		n = pp_splice(x->in, NULL, x->stage[1], NULL, max, SPLICE_F_MOVE | x->flags);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			wait_fd(x->in_fd, POLLIN);
			continue;
		}
		if (is_degradable(errno)) {
			x->path = XFER_COPY;
			return step_copy(x, max);
		}
		x->write_err = false;
		return -errno;
	}
	/* Drain all of it: the caller counts a step's bytes as delivered. */
	for (left = (size_t)n; left;) {
		ssize_t w = pp_splice(x->stage[0], NULL, x->out, NULL, left,
				      SPLICE_F_MOVE | x->flags);

		if (w > 0) {
			left -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			wait_fd(x->out_fd, POLLOUT);
			continue;
		}
		if (w == 0 || is_degradable(errno)) {
			int err = drain_copy(x);

			x->path = XFER_COPY;
			if (err) {
				x->write_err = true;
				return err;
			}
			return n;
		}
		x->write_err = true;
		return -errno;
	}
	return n;
}

static ssize_t step_direct(struct xfer *x, size_t max)
{
	ssize_t n;

	if (max > (size_t)1 << 30)
		max = (size_t)1 << 30;
	for (;;) {
		n = pp_splice(x->in, NULL, x->out, NULL, max, SPLICE_F_MOVE | x->flags);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			struct pollfd pfd[2] = {
				{ .fd = x->in_fd, .events = POLLIN },
				{ .fd = x->out_fd, .events = POLLOUT },
			};

			/* Either side may be the one that is not ready. */
			poll(pfd, 2, 100);
			continue;
		}
		break;
	}
	if (is_degradable(errno)) {
		x->path = XFER_STAGED;
		return step_staged(x, max);
	}
	/*
	 * Nothing moved, so redo the step by read and write: it reports the
	 * same error, and says which side it came from.
	 */
	x->path = XFER_COPY;
	return step_copy(x, max);
}

ssize_t xfer_step(struct xfer *x, size_t max)
{
	if (!max)
		return 0;
	switch (x->path) {
	case XFER_DIRECT:
		return step_direct(x, max);
	case XFER_STAGED:
		return step_staged(x, max);
	default:
		return step_copy(x, max);
	}
}

/* ---------------------------------------------------------------------- */

double now_since(const struct timespec *start)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - start->tv_sec) + (double)(t.tv_nsec - start->tv_nsec) / 1e9;
}

void format_bytes(char *buf, size_t n, double v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, n, "%.1f %s", v, unit[u]);
}

void progress_init(struct progress *p, enum progress_mode mode)
{
	memset(p, 0, sizeof(*p));
	p->tty = isatty(STDERR_FILENO);
	p->on = mode == PROGRESS_ON || (mode == PROGRESS_AUTO && p->tty);
	atomic_init(&p->done, 0);
	clock_gettime(CLOCK_MONOTONIC, &p->start);
}

void progress_add(struct progress *p, uint64_t n)
{
	atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}

void progress_tick(struct progress *p, bool final)
{
	uint64_t done = atomic_load_explicit(&p->done, memory_order_relaxed);
	double t, rate;
	char b[32], r[32], line[256];
	int len;

	if (!p->on)
		return;
	t = now_since(&p->start);
	/* Twice a second on a terminal; once a second into a log. */
	if (!final && t - p->last < (p->tty ? 0.5 : 1.0))
		return;
	p->last = t;
	rate = t > 0 ? (double)done / t : 0;
	format_bytes(b, sizeof(b), (double)done);
	format_bytes(r, sizeof(r), rate);
	len = snprintf(line, sizeof(line), "%s %s/s %.1fs", b, r, t);
	if (p->known && p->total && len > 0 && (size_t)len < sizeof(line)) {
		double pct = 100.0 * (double)done / (double)p->total;
		char tot[32];

		format_bytes(tot, sizeof(tot), (double)p->total);
		if (pct > 100)
			pct = 100;
		if (final || rate <= 0)
			len += snprintf(line + len, sizeof(line) - (size_t)len, " of %s %3.0f%%",
					tot, pct);
		else
			len += snprintf(line + len, sizeof(line) - (size_t)len,
					" of %s %3.0f%% ETA %.0fs", tot, pct,
					(double)(p->total > done ? p->total - done : 0) / rate);
	}
	if (p->extra && len > 0 && (size_t)len < sizeof(line))
		snprintf(line + len, sizeof(line) - (size_t)len, " %s", p->extra(p->extra_arg));
	if (p->tty)
		fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
	else
		fprintf(stderr, "%s\n", line);
	fflush(stderr);
}
