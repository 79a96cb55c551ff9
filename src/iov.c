// SPDX-License-Identifier: MIT
/*
 * iov.c - the iovec cursor and the address checks user memory meets first.
 */
#include "internal.h"

#include <string.h>

/* The top of the user address space, as access_ok() knows it. */
#if defined(__x86_64__)
#define PP_TASK_SIZE	0x00007ffffffff000ull
#elif defined(__aarch64__)
#define PP_TASK_SIZE	(1ull << 48)
#else
#define PP_TASK_SIZE	UINTPTR_MAX
#endif

bool pp__access_ok(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;

	return a + len >= a && a + len <= PP_TASK_SIZE;
}

ssize_t pp__iov_total(const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	if (iovcnt < 0 || iovcnt > PP_IOV_MAX)
		return -EINVAL;
	if (iovcnt && !iov)
		return -EFAULT;
	/*
	 * import_iovec(): every length is checked (EINVAL) before any
	 * address (EFAULT).  access_ok() sees a lone segment cut to
	 * MAX_RW_COUNT (import_ubuf), but each of several whole.
	 */
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len > (size_t)SSIZE_MAX)
			return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		size_t len = iovcnt == 1 ? min_t(size_t, iov[i].iov_len, PP_MAX_RW) : iov[i].iov_len;

		if (!pp__access_ok(iov[i].iov_base, len))
			return -EFAULT;
		total += min_t(size_t, iov[i].iov_len, PP_MAX_RW - total);
	}
	return (ssize_t)total;
}

static void iter_skip_empty(struct pp_iov_iter *it)
{
	while (it->nr && it->off == it->iov->iov_len) {
		it->iov++;
		it->nr--;
		it->off = 0;
	}
}

/*
 * Copy len bytes out of the iterator; returns the bytes copied, fewer when
 * a segment has a NULL base (the fault the kernel would take there).
 */
size_t pp__iter_copy_from(struct pp_iov_iter *it, char *dst, size_t len)
{
	size_t done = 0;

	while (done < len) {
		size_t n;

		iter_skip_empty(it);
		if (!it->nr || !it->iov->iov_base)
			break;
		n = min_t(size_t, len - done, it->iov->iov_len - it->off);
		memcpy(dst + done, (const char *)it->iov->iov_base + it->off, n);
		it->off += n;
		done += n;
	}
	return done;
}

/*
 * Copy one buffer's bytes [off, off + len) into the iterator.  Memory the
 * iterator cannot take directly (a file buffer read by pread) goes straight
 * into the destination segment by segment.  Bytes copied (fewer when the
 * data behind the buffer shrank), -ENODATA if none was left, or -EFAULT
 * at a NULL segment, whatever was copied before it.
 */
ssize_t pp__iter_copy_buf(struct pp_pipe *p, struct pp_buf *buf, size_t off, size_t len,
			  struct pp_iov_iter *it)
{
	size_t done = 0;

	while (done < len) {
		size_t n;
		ssize_t r;

		iter_skip_empty(it);
		if (!it->nr || !it->iov->iov_base)
			return -EFAULT;	/* a short copy fails the buffer, as in pipe_read */
		n = min_t(size_t, len - done, it->iov->iov_len - it->off);
		r = pp__buf_copy_out(p, buf, off + done, (char *)it->iov->iov_base + it->off, n);
		if (r < 0)
			return done ? (ssize_t)done : r;
		it->off += (size_t)r;
		done += (size_t)r;
		if ((size_t)r < n)
			return done ? (ssize_t)done : -ENODATA;
	}
	return (ssize_t)done;
}
