// SPDX-License-Identifier: MIT
/*
 * iov.c - the iovec cursor and the address checks user memory meets first:
 * what internal.h's inline fast paths leave, several segments and buffers
 * that are not plain memory.
 */
#include "internal.h"

#include <string.h>

ssize_t pp__iov_total_many(const struct iovec *iov, int iovcnt)
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

/* pp__iter_copy_from() (internal.h), across segments. */
size_t pp__iter_copy_from_many(struct pp_iov_iter *it, char *dst, size_t len)
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

/* pp__iter_copy_buf() (internal.h), across segments or through the buffer's ops. */
ssize_t pp__iter_copy_buf_many(struct pp_pipe *p, struct pp_buf *buf, size_t off, size_t len,
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

/* No NULL base in the next n bytes (the fault the kernel would take there). */
bool pp__iter_plain(const struct pp_iov_iter *it, size_t n)
{
	const struct iovec *iov = it->iov;
	size_t off = it->off;

	for (int i = 0; i < it->nr && n; i++, iov++, off = 0) {
		size_t len = iov->iov_len - off;

		if (len && !iov->iov_base)
			return false;
		n -= min_t(size_t, n, len);
	}
	return true;
}

/*
 * Copy n bytes from one cursor to the other (the direct handoff: pipe.c).
 * Both were checked with pp__iter_plain() for n bytes; returns the bytes
 * copied, n unless that check was skipped.
 */
size_t pp__iter_copy_iter(struct pp_iov_iter *dst, struct pp_iov_iter *src, size_t n)
{
	size_t done = 0;

	while (done < n) {
		size_t k;

		iter_skip_empty(dst);
		if (!dst->nr)
			break;
		k = min_t(size_t, n - done, dst->iov->iov_len - dst->off);
		k = pp__iter_copy_from(src, (char *)dst->iov->iov_base + dst->off, k);
		if (!k)
			break;
		dst->off += k;
		done += k;
	}
	return done;
}

/*
 * Touch the next n bytes, a load per page, so that a fault on them is
 * taken now, before the caller takes a lock that a slow fault must not
 * hold (shared.c: slot_refit).  A NULL segment is skipped: the copy
 * reports it.  Nothing is read into anything: the loads only fault.
 */
void pp__iter_prefault(const struct pp_iov_iter *it, size_t n)
{
	const struct iovec *iov = it->iov;
	size_t off = it->off;

	for (int i = 0; i < it->nr && n; i++, iov++, off = 0) {
		size_t len = min_t(size_t, iov->iov_len - off, n);
		const volatile char *at = (const char *)iov->iov_base + off;

		n -= len;
		if (!len || !iov->iov_base)
			continue;
		for (size_t k = 0; k < len; k += pp__page_size - ((uintptr_t)(at + k) & (pp__page_size - 1)))
			(void)at[k];
		(void)at[len - 1];
	}
}
