// SPDX-License-Identifier: MIT
/*
 * file.c - struct pp_file and the public entry points.
 *
 * This is the one errno boundary: everything below returns -errno, and the
 * calls here turn that into -1 and errno (pp__ret).  Each call keeps its
 * file while in flight: by a reference, so a pp_close() in another thread
 * only drops the file's "open" reference and the end is released (a reader
 * or writer goes away) when the last call using it returns, as close(2)
 * does for a file another thread is reading; or, for most reads and writes
 * of a pagepipe end, by its side's lock alone (a fast section, or the lock
 * marked SIDE_NOREF), which pp_close() waits for before it drops the
 * reference.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

struct pp_file *pp__file_alloc(const struct pp_file_ops *ops, enum pp_kind kind, int flags)
{
	struct pp_file *f;

	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	/*
	 * Every call takes and drops a reference (refs): whole lines of its
	 * own, so that no other allocation's writes (the other end's file,
	 * used by the peer thread) take its line away from this CPU.
	 */
	f = aligned_alloc(PP_CACHELINE, (sizeof(*f) + PP_CACHELINE - 1) & ~(size_t)(PP_CACHELINE - 1));
	if (!f)
		return NULL;
	memset(f, 0, sizeof(*f));
	f->ops = ops;
	f->kind = kind;
	f->fd = -1;
	atomic_init(&f->refs, 1);
	atomic_init(&f->flags, flags);
	return f;
}

void pp__file_free(struct pp_file *f)
{
	if (f->ops->release)
		f->ops->release(f);
	if (f->fref)
		pp__file_ref_put(f->fref);
	free(f);
}

PP_EXPORT int pp_close(struct pp_file *f)
{
	if (!f)
		return (int)pp__ret(-EBADF);
	/* A read or write by the fast path holds no reference: let it end first. */
	if (pp__is_pipe(f) && pp__file_writable(f))
		pp__pipe_producer_unbias(f->pipe);
	else if (pp__is_pipe(f) && pp__file_readable(f))
		pp__pipe_consumer_unbias(f->pipe);
	else if (f->kind == PP_KIND_SHARED && pp__file_writable(f))
		pp__shared_unbias(f);
	pp__file_put(f);
	return 0;
}

/*
 * A pagepipe end goes straight to the pipe: its readable end's ops are
 * pp__pipe_read_ops, and the access mode, fixed at pp_pipe2(), says which
 * end it is.
 */
static inline ssize_t do_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	ssize_t r;

	if (!f || !pp__file_readable(f))
		return -EBADF;
	/* It holds f itself: a reference, the consumer's bias, or rd_mutex marked NOREF. */
	if (likely(pp__is_pipe(f)))
		return pp__pipe_read(f, iov, iovcnt, pp__file_flags(f) & O_NONBLOCK);
	if (!f->ops->readv)
		return -EINVAL;
	pp__file_get(f);
	r = f->ops->readv(f, iov, iovcnt);
	pp__file_put(f);
	return r;
}

static inline ssize_t do_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	ssize_t r;

	if (!f || !pp__file_writable(f))
		return -EBADF;
	/* It holds f itself: a reference, the biased lock, or wr_mutex marked NOREF. */
	if (likely(pp__is_pipe(f)))
		return pp__pipe_writev(f, iov, iovcnt);
	if (!f->ops->writev)
		return -EINVAL;
	/* So does a shared pipe's (shared.c: the biased write lock). */
	if (f->kind == PP_KIND_SHARED)
		return f->ops->writev(f, iov, iovcnt);
	pp__file_get(f);
	r = f->ops->writev(f, iov, iovcnt);
	pp__file_put(f);
	return r;
}

PP_EXPORT ssize_t pp_read(struct pp_file *f, void *buf, size_t count)
{
	struct iovec iov = { buf, count };

	if (unlikely(f && f->fd >= 0)) {
		ssize_t r = read(f->fd, buf, count);	/* exactly read(2) */

		return r;
	}
	if (!pp__access_ok(buf, count))
		return pp__ret(-EFAULT);
	iov.iov_len = min_t(size_t, count, PP_MAX_RW);
	return pp__ret(do_readv(f, &iov, 1));
}

PP_EXPORT ssize_t pp_write(struct pp_file *f, const void *buf, size_t count)
{
	struct iovec iov = { (void *)buf, count };

	if (unlikely(f && f->fd >= 0))
		return write(f->fd, buf, count);	/* exactly write(2) */
	if (!pp__access_ok(buf, count))
		return pp__ret(-EFAULT);
	iov.iov_len = min_t(size_t, count, PP_MAX_RW);
	return pp__ret(do_writev(f, &iov, 1));
}

PP_EXPORT ssize_t pp_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	return pp__ret(do_readv(f, iov, iovcnt));
}

PP_EXPORT ssize_t pp_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	return pp__ret(do_writev(f, iov, iovcnt));
}

/* ---------------------------------------------------------------------- */

static bool pseudo_fs(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) < 0)
		return true;
	switch ((unsigned long)sfs.f_type) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case SECURITYFS_MAGIC:
	case BPF_FS_MAGIC:
	case EFIVARFS_MAGIC:
		return true;
	default:
		return false;
	}
}

/* What kind of endpoint a descriptor is, decided once: it cannot change. */
static enum pp_kind fd_kind(int fd, int *sock_type, unsigned int *fd_flags)
{
	struct stat st;
	socklen_t sl = sizeof(*sock_type);

	*fd_flags = 0;
	if (fstat(fd, &st) < 0)
		return PP_KIND_OTHER;
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		if (pseudo_fs(fd))
			*fd_flags |= PP_FD_PSEUDO;
		return PP_KIND_REG;
	case S_IFBLK:
		/* A block device has a page cache and a size: a file, as splice sees it. */
		*fd_flags |= PP_FD_BLK;
		return PP_KIND_REG;
	case S_IFIFO:
		return PP_KIND_FIFO;
	case S_IFSOCK: {
		int domain = 0;
		socklen_t dl = sizeof(domain);

		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, sock_type, &sl) < 0)
			*sock_type = 0;
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) == 0 && domain == AF_UNIX)
			*fd_flags |= PP_FD_UNIX;
		return PP_KIND_SOCK;
	}
	case S_IFCHR:
		if (major(st.st_rdev) == 1 && minor(st.st_rdev) == 3)
			*fd_flags |= PP_FD_NULL;
		if (major(st.st_rdev) == 1 && minor(st.st_rdev) == 5)
			*fd_flags |= PP_FD_ZERO;
		return PP_KIND_CHR;
	default:
		return PP_KIND_OTHER;
	}
}

static const struct pp_file_ops *kind_ops(enum pp_kind kind)
{
	switch (kind) {
	case PP_KIND_REG:
		return &pp__reg_ops;
	case PP_KIND_FIFO:
		return &pp__fifo_ops;
	case PP_KIND_SOCK:
		return &pp__sock_ops;
	case PP_KIND_CHR:
		return &pp__chr_ops;
	default:
		return &pp__fd_ops;
	}
}

PP_EXPORT struct pp_file *pp_fdopen(int fd)
{
	struct pp_file *f;
	enum pp_kind kind;
	unsigned int fd_flags;
	int fl, sock_type = 0;

	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return NULL;	/* errno: EBADF */
	if ((fl & O_PATH) == O_PATH) {
		errno = EBADF;
		return NULL;
	}
	kind = fd_kind(fd, &sock_type, &fd_flags);
	f = pp__file_alloc(kind_ops(kind), kind, fl);
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	f->fd = fd;
	f->sock_type = sock_type;
	f->fd_flags = fd_flags;
	return f;
}

PP_EXPORT struct pp_file *pp_file_new(const struct pp_file_ops *ops, int flags, void *private)
{
	struct pp_file *f;

	if (!ops || (flags & ~(O_ACCMODE | O_NONBLOCK)) || (flags & O_ACCMODE) == O_ACCMODE) {
		errno = EINVAL;
		return NULL;
	}
	f = pp__file_alloc(ops, PP_KIND_USER, flags);
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	f->private = private;
	return f;
}

PP_EXPORT void *pp_file_private(struct pp_file *f)
{
	return f && f->kind == PP_KIND_USER ? f->private : NULL;
}

PP_EXPORT int pp_file_fd(struct pp_file *f)
{
	if (!f)
		return (int)pp__ret(-EBADF);
	if (f->fd < 0)
		return (int)pp__ret(-EINVAL);
	return f->fd;
}

PP_EXPORT int pp_file_event_fd(struct pp_file *f)
{
	int r;

	if (!f)
		return (int)pp__ret(-EBADF);
	if (!pp__is_pagepipe(f))
		return (int)pp__ret(-EINVAL);
	pp__file_get(f);
	r = pp__is_shared(f) ? pp__shared_event_fd(f) : pp__pipe_event_fd(f);
	pp__file_put(f);
	return (int)pp__ret(r);
}

PP_EXPORT ssize_t pp_pipe_add_buf(struct pp_file *f, const struct pp_buf *buf, unsigned int flags)
{
	ssize_t r;

	if (!f)
		return pp__ret(-EBADF);
	if (!pp__is_pipe(f))
		return pp__ret(-EINVAL);
	if (flags & ~SPLICE_F_ALL)
		return pp__ret(-EINVAL);
	pp__file_get(f);
	r = pp__pipe_add_buf(f, buf, flags);
	pp__file_put(f);
	return pp__ret(r);
}

/* ---------------------------------------------------------------------- */

/* The status flags F_SETFL may change, as setfl() in fs/fcntl.c. */
#define SETFL_MASK	(O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_ASYNC)

static int pipe_fcntl(struct pp_file *f, int cmd, unsigned long arg)
{
	int fl = pp__file_flags(f);

	switch (cmd) {
	case F_GETFL:
		return fl & ~(PP_O_NOSIGPIPE | PP_FD_CLOEXEC_FLAG);
	case F_SETFL:
		atomic_store(&f->flags, (fl & ~SETFL_MASK) | ((int)arg & SETFL_MASK));
		return 0;
	case F_GETFD:
		return fl & PP_FD_CLOEXEC_FLAG ? FD_CLOEXEC : 0;
	case F_SETFD:
		if (arg & FD_CLOEXEC)
			atomic_fetch_or(&f->flags, PP_FD_CLOEXEC_FLAG);
		else
			atomic_fetch_and(&f->flags, ~PP_FD_CLOEXEC_FLAG);
		return 0;
	default:
		return pp__pipe_fcntl(f, cmd, arg);
	}
}

PP_EXPORT int pp_fcntl(struct pp_file *f, int cmd, ...)
{
	unsigned long arg;
	va_list ap;
	int r;

	va_start(ap, cmd);
	arg = va_arg(ap, unsigned long);
	va_end(ap);

	if (!f)
		return (int)pp__ret(-EBADF);
	if (f->fd >= 0) {
		r = fcntl(f->fd, cmd, arg);
		if (r >= 0 && cmd == F_SETFL)
			atomic_store(&f->flags, fcntl(f->fd, F_GETFL));
		return r;
	}
	pp__file_get(f);
	if (pp__is_pipe(f))
		r = pipe_fcntl(f, cmd, arg);
	else if (pp__is_shared(f))
		r = pp__shared_fcntl(f, cmd, arg);
	else if (cmd == F_GETFL)
		r = pp__file_flags(f);
	else if (cmd == F_SETFL) {
		atomic_store(&f->flags, (pp__file_flags(f) & ~O_NONBLOCK) | ((int)arg & O_NONBLOCK));
		r = 0;
	} else
		r = -EINVAL;
	pp__file_put(f);
	return (int)pp__ret(r);
}

/* What the kernel answers for every descriptor before the file sees it. */
static int do_ioctl(struct pp_file *f, unsigned long request, void *arg)
{
	switch (request) {
	case FIOCLEX:
		atomic_fetch_or(&f->flags, PP_FD_CLOEXEC_FLAG);
		return 0;
	case FIONCLEX:
		atomic_fetch_and(&f->flags, ~PP_FD_CLOEXEC_FLAG);
		return 0;
	case FIONBIO:
	case FIOASYNC:
		if (!arg)
			return -EFAULT;
		if (request == FIONBIO && pp__is_shared(f)) {
			pp__shared_set_nonblock(f, *(int *)arg);
			return 0;
		}
		if (*(int *)arg)
			atomic_fetch_or(&f->flags, request == FIONBIO ? O_NONBLOCK : O_ASYNC);
		else
			atomic_fetch_and(&f->flags, ~(request == FIONBIO ? O_NONBLOCK : O_ASYNC));
		return 0;
	case FIONREAD:
		if (!pp__is_pagepipe(f))
			break;
		if (!arg)
			return -EFAULT;
		return pp__is_shared(f) ? pp__shared_fionread(f, arg) : pp__pipe_fionread(f, arg);
	}
	return -ENOTTY;
}

PP_EXPORT int pp_ioctl(struct pp_file *f, unsigned long request, ...)
{
	void *arg;
	va_list ap;
	int r;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);

	if (!f)
		return (int)pp__ret(-EBADF);
	if (f->fd >= 0)
		return ioctl(f->fd, request, arg);
	/* The call holds the file, as the kernel's fdget does: see pp_poll(). */
	pp__file_get(f);
	r = do_ioctl(f, request, arg);
	pp__file_put(f);
	return (int)pp__ret(r);
}

/* ---------------------------------------------------------------------- */

static short file_poll(struct pp_file *f, short events)
{
	if (f->ops->poll)
		return f->ops->poll(f, events);
	return events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Poll pagepipe ends and OS descriptors together.  Pagepipe ends are
 * checked directly; to sleep, their readiness descriptors join the OS
 * descriptors in one poll(2), and everything is checked again on waking.
 */
static int do_poll(struct pp_pollfd *fds, nfds_t nfds, int timeout_ms);

/*
 * Each file keeps a reference for the whole poll, as Linux keeps the file
 * alive through poll(2): a close in another thread meanwhile lets go of the
 * end only when we return.
 */
PP_EXPORT int pp_poll(struct pp_pollfd *fds, nfds_t nfds, int timeout_ms)
{
	int ret;

	if (nfds > 0 && !fds)
		return (int)pp__ret(-EFAULT);
	if (nfds > (nfds_t)1 << 20)
		return (int)pp__ret(-EINVAL);
	for (nfds_t i = 0; i < nfds; i++)
		if (fds[i].file)
			pp__file_get(fds[i].file);
	ret = do_poll(fds, nfds, timeout_ms);
	for (nfds_t i = 0; i < nfds; i++)
		if (fds[i].file)
			pp__file_put(fds[i].file);
	return (int)pp__ret(ret);
}

static int do_poll(struct pp_pollfd *fds, nfds_t nfds, int timeout_ms)
{
	struct pollfd stack_kfds[64], *kfds = stack_kfds;
	long long deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
	int ret;

	if (nfds > 64) {
		kfds = calloc(nfds, sizeof(*kfds));
		if (!kfds)
			return -ENOMEM;
	}

	for (;;) {
		nfds_t nk = 0;
		bool recheck = false;
		int wait_ms;

		ret = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct pp_file *f = fds[i].file;

			fds[i].revents = 0;
			if (!f)
				fds[i].revents = POLLNVAL;
			else if (f->fd >= 0)
				continue;	/* below, with the kernel's answer */
			else
				fds[i].revents = file_poll(f, fds[i].events);
			if (fds[i].revents)
				ret++;
		}
		/* OS descriptors: one non-blocking look, then maybe sleep. */
		for (nfds_t i = 0; i < nfds; i++) {
			struct pp_file *f = fds[i].file;

			if (!f)
				continue;
			if (f->fd >= 0) {
				kfds[nk] = (struct pollfd){ f->fd, fds[i].events, 0 };
			} else {
				/*
				 * The end's readiness descriptor tells about its own
				 * direction only: watch it when that is what was asked
				 * (POLLHUP/POLLERR are always asked), else nothing can
				 * wake this entry but the deadline.
				 */
				short mine = pp__file_readable(f) ? (POLLIN | POLLRDNORM) : (POLLOUT | POLLWRNORM);
				int efd = -1;

				if (pp__is_pagepipe(f) && (fds[i].events & mine)) {
					/* No descriptor to sleep on (EMFILE): fail, as poll(2) would. */
					efd = pp__is_shared(f) ? pp__shared_event_fd(f) : pp__pipe_event_fd(f);
					if (efd < 0) {
						ret = efd;
						goto out;
					}
				} else {
					recheck = true;	/* only HUP/ERR can come: look again now and then */
				}
				kfds[nk] = (struct pollfd){ efd, efd >= 0 ? POLLIN : 0, 0 };
			}
			nk++;
		}
		if (ret) {
			if (poll(kfds, nk, 0) > 0) {
				nfds_t k = 0;

				for (nfds_t i = 0; i < nfds; i++) {
					if (!fds[i].file)
						continue;
					if (fds[i].file->fd >= 0 && kfds[k].revents) {
						fds[i].revents = kfds[k].revents;
						ret++;
					}
					k++;
				}
			}
			break;
		}
		wait_ms = timeout_ms < 0 ? -1 : timeout_ms == 0 ? 0 :
			  (int)(deadline - now_ms() > 0 ? deadline - now_ms() : 0);
		if (recheck && (wait_ms < 0 || wait_ms > 20))
			wait_ms = 20;
		ret = poll(kfds, nk, wait_ms);
		if (ret < 0) {
			ret = -errno;
			break;
		}
		{
			nfds_t k = 0;
			int os_ready = 0;

			for (nfds_t i = 0; i < nfds; i++) {
				if (!fds[i].file)
					continue;
				if (fds[i].file->fd >= 0) {
					fds[i].revents = kfds[k].revents;
					os_ready += !!kfds[k].revents;
				}
				k++;
			}
			if (os_ready) {
				for (nfds_t i = 0; i < nfds; i++) {
					struct pp_file *f = fds[i].file;

					if (f && f->fd < 0) {
						fds[i].revents = file_poll(f, fds[i].events);
						os_ready += !!fds[i].revents;
					}
				}
				ret = os_ready;
				break;
			}
		}
		/* Woken, but nothing asked for is ready: go on until the deadline. */
		if (timeout_ms == 0 || (timeout_ms > 0 && now_ms() >= deadline)) {
			ret = 0;
			break;
		}
	}
out:
	if (kfds != stack_kfds)
		free(kfds);
	return ret;
}
