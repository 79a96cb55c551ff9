// SPDX-License-Identifier: MIT
/*
 * vmsplice.c - pp_vmsplice() and pp_write_ref(): user memory into a pipe
 * by reference; and out of one, by copy.
 *
 * Every caller region is checked before a buffer refers to it (the
 * CVE-2008-0009/0010/0600 class): no NULL base with a length, no base + len
 * past the end of the address space, no unmapped page (mincore(2) is our
 * access_ok; memory mapped PROT_NONE is not detected), at most 1024
 * segments.  Zero-length segments are skipped.  One buffer per page
 * touched, never mergeable.
 */
#include "internal.h"

#include <sys/mman.h>
#include <unistd.h>

/*
 * How much of [addr, addr + len) is mapped from its start: the bytes, as
 * the kernel pins page by page and stops at the first hole.
 */
static size_t mapped_prefix(const void *addr, size_t len)
{
	const size_t psz = pp__page_size;
	uintptr_t start = (uintptr_t)addr & ~(psz - 1);
	uintptr_t end = (uintptr_t)addr + len;
	unsigned char vec[256];

	if (!addr)
		return 0;
	while (start < end) {
		size_t n = min_t(size_t, (end - start + psz - 1) / psz, sizeof(vec));

		if (mincore((void *)start, n * psz, vec) < 0) {
			/* A hole somewhere in this chunk: find it page by page. */
			while (start < end && mincore((void *)start, psz, vec) == 0)
				start += psz;
			return start <= (uintptr_t)addr ? 0 : min_t(size_t, start - (uintptr_t)addr, len);
		}
		start += n * psz;
	}
	return len;
}

static int check_iov(const struct iovec *iov, unsigned long nr_segs)
{
	if (nr_segs > PP_IOV_MAX)
		return -EINVAL;
	if (nr_segs && !iov)
		return -EFAULT;
	for (unsigned long i = 0; i < nr_segs; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX)
			return -EINVAL;
		/* access_ok: a NULL base is found when its pages are pinned. */
		if (iov[i].iov_len && !pp__access_ok(iov[i].iov_base, iov[i].iov_len))
			return -EFAULT;
	}
	return 0;
}

ssize_t pp__pipe_add_user(struct pp_file *f, const struct iovec *iov, unsigned long nr_segs,
			  bool nonblock, bool gift, void *ref)
{
	const size_t psz = pp__page_size;
	struct pp_pipe *p = f->pipe;
	ssize_t ret = 0;

	pp__pipe_lock_producer(p);
	/* Wait for room once, then fill what fits (vmsplice_to_pipe). */
	for (;;) {
		if (!pp__pipe_readers(p)) {
			ret = pp__pipe_epipe(f);
			goto out_unlock;
		}
		if (!pp__pipe_full(p))
			break;
		pp__pipe_unlock_producer(p);
		ret = pp__pipe_wait_room(f, nonblock);
		pp__pipe_lock_producer(p);
		if (ret)
			goto out_unlock;
	}

	for (unsigned long i = 0; i < nr_segs && !pp__pipe_full(p); i++) {
		const char *base = iov[i].iov_base;
		size_t left = min_t(size_t, iov[i].iov_len, PP_MAX_RW - (size_t)ret);
		size_t room = (size_t)(p->max_usage - pp__pipe_occupancy(p)) * psz;

		if (!left)
			continue;
		/* Check what can go in now; the rest is checked by the next call. */
		size_t ok = mapped_prefix(base, min_t(size_t, left, room));

		if (!ok) {
			if (!ret)
				ret = -EFAULT;
			break;
		}
		bool hole = ok < min_t(size_t, left, room);

		left = min_t(size_t, left, ok);
		while (left && !pp__pipe_full(p)) {
			uintptr_t page = (uintptr_t)base & ~(psz - 1);
			size_t off = (uintptr_t)base - page;
			size_t n = min_t(size_t, left, psz - off);
			struct pp_buf buf = {
				.page = (void *)page,
				.offset = (unsigned int)off,
				.len = (unsigned int)n,
				.ops = &pp__user_buf_ops,
				.flags = gift ? PP_BUF_FLAG_GIFT : 0,
				.private = ref,
			};

			if (ref && !pp__buf_get(p, &buf)) {
				if (!ret)
					ret = -EFAULT;
				goto out_unlock;
			}
			pp__pipe_push(p, &buf);
			ret += (ssize_t)n;
			base += n;
			left -= n;
		}
		if (left || hole)
			break;
	}
out_unlock:
	pp__pipe_unlock_producer(p);
	if (ret > 0)
		pp__pipe_wake_readers(p);
	return ret;
}

static ssize_t do_vmsplice(struct pp_file *f, const struct iovec *iov, unsigned long nr_segs,
			   unsigned int flags)
{
	bool nonblock = flags & SPLICE_F_NONBLOCK;	/* the pipe's O_NONBLOCK is ignored, as in Linux */
	ssize_t total;
	int err;

	if (!pp__file_writable(f) && !pp__file_readable(f))
		return -EBADF;
	err = check_iov(iov, nr_segs);
	if (err)
		return err;
	total = 0;
	for (unsigned long i = 0; i < nr_segs; i++)
		total += (ssize_t)min_t(size_t, iov[i].iov_len, PP_MAX_RW);
	if (!total)
		return 0;	/* before the pipe check, as in Linux */
	if (!pp__is_pipe(f))
		return -EBADF;
	if (pp__file_writable(f))
		return pp__pipe_add_user(f, iov, nr_segs, nonblock, flags & SPLICE_F_GIFT, NULL);
	/*
	 * A bad segment is found at copy time in Linux, after EAGAIN and EOF.
	 * We cannot take a fault, so unmapped segments are refused up front,
	 * unless the read would not copy at all.  A NULL base is found at copy
	 * time.
	 */
	bool no_copy = pp__pipe_empty(f->pipe) && (nonblock || !pp__pipe_writers(f->pipe));
	for (unsigned long i = 0; i < nr_segs && !no_copy; i++) {
		if (iov[i].iov_len && iov[i].iov_base &&
		    mapped_prefix(iov[i].iov_base, iov[i].iov_len) < iov[i].iov_len)
			return -EFAULT;
	}
	return pp__pipe_read(f, iov, (int)nr_segs, nonblock);
}

PP_EXPORT ssize_t pp_vmsplice(struct pp_file *f, const struct iovec *iov, size_t nr_segs,
			      unsigned int flags)
{
	ssize_t ret;

	if (flags & ~SPLICE_F_ALL)
		return pp__ret(-EINVAL);
	if (!f)
		return pp__ret(-EBADF);
	if (f->fd >= 0)
		return vmsplice(f->fd, iov, nr_segs, flags);
	pp__file_get(f);
	ret = do_vmsplice(f, iov, nr_segs, flags);
	pp__file_put(f);
	return pp__ret(ret);
}

PP_EXPORT ssize_t pp_write_ref(struct pp_file *f, const void *buf, size_t count,
			       pp_release_fn release, void *arg)
{
	struct iovec iov = { (void *)buf, count };
	void *ref;
	ssize_t ret;

	if (!f)
		return pp__ret(-EBADF);
	if (!pp__is_pipe(f))
		return pp__ret(-EINVAL);
	if (!pp__file_writable(f))
		return pp__ret(-EBADF);
	if (!count)
		return 0;
	if (!buf || !pp__access_ok(buf, count))
		return pp__ret(-EFAULT);
	ref = pp__user_ref_new(release, (void *)buf, arg);
	if (!ref)
		return pp__ret(-ENOMEM);
	pp__file_get(f);
	ret = pp__pipe_add_user(f, &iov, 1, pp__file_flags(f) & O_NONBLOCK, false, ref);
	pp__file_put(f);
	pp__user_ref_set_count(ref, ret > 0 ? (size_t)ret : 0);
	pp__user_ref_put(ref);
	return pp__ret(ret);
}
