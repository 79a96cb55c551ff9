// SPDX-License-Identifier: MIT
/*
 * vmsplice.c - pp_vmsplice() and pp_write_ref(): user memory into a pipe
 * by reference; and out of one, by copy.
 *
 * Every caller region is checked before a buffer refers to it (the
 * CVE-2008-0009/0010/0600 class): no NULL base with a length, no base + len
 * past the end of the address space, at most 1024 segments, and every page
 * readable now (see user_readable()).  Zero-length segments are skipped.
 * One buffer per page touched, never mergeable.
 *
 * Out of the pipe the copy goes through process_vm_writev(2), which, like
 * the kernel's copy_to_user(), reports a fault as a short count instead of
 * a signal: the caller gets EFAULT where Linux gives it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/*
 * Whether process_vm_readv/writev work on ourselves: a seccomp filter or
 * an old kernel may refuse them (ENOSYS, EPERM).  Then we fall back to
 * mincore(), which proves only that a page is mapped.
 */
static int pvm_state;	/* 0 unknown, 1 works, -1 refused */

static bool pvm_refused(ssize_t r)
{
	if (r >= 0 || (errno != ENOSYS && errno != EPERM))
		return false;
	__atomic_store_n(&pvm_state, -1, __ATOMIC_RELAXED);
	return true;
}

/* How much of [addr, addr + len) is mapped from its start (mincore). */
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

/*
 * How much of [addr, addr + len) is readable from its start: the bytes, as
 * the kernel pins page by page (get_user_pages) and stops at the first
 * page it cannot.
 *
 * mincore() is not enough: it says a page is mapped, not that reading it
 * works.  A PROT_NONE page, or a MAP_SHARED page past the end of its file,
 * is mapped, and the reader touching it later would die of SIGSEGV or
 * SIGBUS, where the kernel fails the vmsplice with EFAULT.  So we read one
 * byte of every page with process_vm_readv() on our own process: the
 * kernel faults each page in exactly as get_user_pages would for
 * vmsplice, and a page it cannot read ends the count instead of raising a
 * signal.  One byte a page, not the whole range: readability is a page's
 * property, and the bytes are not copied (they go by reference).  A
 * write() of the range to /dev/null would prove nothing (it never reads
 * the memory), and one into a pipe of our own would copy every byte and
 * need a descriptor pair.
 *
 * What this cannot see is a change after the check (munmap, truncate of
 * the file behind a mapping): Linux holds the pages pinned, we only refer
 * to them.  Callers must keep the memory as it is until it is read.
 */
static size_t user_readable(const void *addr, size_t len)
{
	const size_t psz = pp__page_size;
	uintptr_t a = (uintptr_t)addr, end = a + len;
	size_t done = 0;

	if (!addr || !len)
		return 0;
	if (__atomic_load_n(&pvm_state, __ATOMIC_RELAXED) < 0)
		return mapped_prefix(addr, len);
	while (a < end) {
		struct iovec remote[PP_IOV_MAX];
		unsigned char sink[PP_IOV_MAX];
		struct iovec local = { sink, 0 };
		unsigned int n = 0;
		ssize_t r;

		for (uintptr_t pg = a; pg < end && n < PP_IOV_MAX; n++) {
			remote[n] = (struct iovec){ (void *)pg, 1 };
			pg = (pg & ~(psz - 1)) + psz;
		}
		local.iov_len = n;
		r = process_vm_readv(getpid(), &local, 1, remote, n, 0);
		if (r < 0 && pvm_refused(r))
			return done + mapped_prefix((const char *)addr + done, len - done);
		if (r < 0)
			r = 0;
		if ((size_t)r < n) {
			/* Page r is the first unreadable one. */
			uintptr_t stop = (uintptr_t)remote[r].iov_base;

			return stop <= (uintptr_t)addr ? 0 : stop - (uintptr_t)addr;
		}
		a = ((uintptr_t)remote[n - 1].iov_base & ~(psz - 1)) + psz;
		done = min_t(size_t, a - (uintptr_t)addr, len);
	}
	return len;
}

/*
 * import_iovec(): the lengths of all segments first (EINVAL), then their
 * addresses (EFAULT), so a bad length anywhere beats a bad address before
 * it, as in Linux.  access_ok() sees a lone segment cut to MAX_RW_COUNT
 * (import_ubuf), each of several whole.  A NULL base is found when its
 * pages are pinned.
 */
static int check_iov(const struct iovec *iov, unsigned long nr_segs)
{
	if (nr_segs > PP_IOV_MAX)
		return -EINVAL;
	if (nr_segs && !iov)
		return -EFAULT;
	for (unsigned long i = 0; i < nr_segs; i++)
		if (iov[i].iov_len > (size_t)SSIZE_MAX)
			return -EINVAL;
	for (unsigned long i = 0; i < nr_segs; i++) {
		size_t len = nr_segs == 1 ? min_t(size_t, iov[i].iov_len, PP_MAX_RW) : iov[i].iov_len;

		if (len && !pp__access_ok(iov[i].iov_base, len))
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
		/*
		 * Check what can go in now; the rest is checked by the next
		 * call.  The probe may fault pages in (I/O for a file's), as
		 * a write()'s copy may: only the producer lock is held.
		 */
		size_t ok = user_readable(base, min_t(size_t, left, room));

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

/* ---------------------------------------------------------------------- */

/* Out of the pipe: vmsplice_to_user(). */

#define TO_USER_BATCH	32u

struct user_iter {
	const struct iovec *iov;
	unsigned long nr;
	size_t off;		/* within iov[0] */
};

/*
 * Copy len bytes from src to the caller's next len bytes; true when all
 * of them landed.  A fault anywhere fails the whole copy, as pipe_to_user
 * fails a buffer whose copy_page_to_iter() came up short.
 */
static bool copy_to_user_iter(struct user_iter *it, const void *src, size_t len)
{
	struct iovec remote[PP_IOV_MAX], local = { (void *)src, len };
	struct user_iter at = *it;
	unsigned int n = 0;
	size_t left = len;
	ssize_t r;

	while (left) {
		size_t k;

		while (at.nr && at.off == at.iov->iov_len) {
			at.iov++;
			at.nr--;
			at.off = 0;
		}
		if (!at.nr)
			return false;	/* cannot happen: len is within the total */
		k = min_t(size_t, left, at.iov->iov_len - at.off);
		/* In integers: a NULL base is the caller's to pass, ours to fault on. */
		remote[n++] = (struct iovec){ (void *)((uintptr_t)at.iov->iov_base + at.off), k };
		at.off += k;
		left -= k;
	}
	if (__atomic_load_n(&pvm_state, __ATOMIC_RELAXED) >= 0) {
		r = process_vm_writev(getpid(), &local, 1, remote, n, 0);
		if (r >= 0 || !pvm_refused(r)) {
			if ((size_t)r != len)
				return false;
			*it = at;
			return true;
		}
	}
	/* No process_vm_writev: mincore is all we have (see user_readable). */
	for (unsigned int i = 0; i < n; i++)
		if (mapped_prefix(remote[i].iov_base, remote[i].iov_len) < remote[i].iov_len)
			return false;
	for (unsigned int i = 0, done = 0; i < n; done += (unsigned int)remote[i].iov_len, i++)
		memcpy(remote[i].iov_base, (const char *)src + done, remote[i].iov_len);
	*it = at;
	return true;
}

/* One buffer's first len bytes to the caller: len, or -errno. */
static ssize_t buf_to_user(struct pp_pipe *p, struct pp_buf *buf, size_t len,
			   struct user_iter *it)
{
	const size_t psz = pp__page_size;
	void *addr, *scratch = NULL;
	bool ok;

	if (pp__buf_class(buf) == PP_BUF_MEMORY) {
		ok = copy_to_user_iter(it, (char *)buf->page + buf->offset, len);
		return ok ? (ssize_t)len : -EFAULT;
	}
	if (pp__buf_class(buf) == PP_BUF_FILE) {
		/* Bytes we cannot address (a file's): read them first, a page at a time. */
		size_t done = 0;

		scratch = pp__page_alloc(NULL);
		if (!scratch)
			return -ENOMEM;
		while (done < len) {
			size_t n = min_t(size_t, len - done, psz);
			ssize_t r = pp__buf_copy_out(p, buf, done, scratch, n);

			if (r >= 0 && (size_t)r < n)
				r = -ENODATA;
			if (r >= 0 && !copy_to_user_iter(it, scratch, n))
				r = -EFAULT;
			if (r < 0) {
				pp__page_put(NULL, scratch);
				return r;
			}
			done += n;
		}
		pp__page_put(NULL, scratch);
		return (ssize_t)len;
	}
	addr = pp__buf_map(p, buf);
	if (!addr)
		return -EIO;
	ok = copy_to_user_iter(it, (char *)addr + buf->offset, len);
	pp__buf_unmap(p, buf, addr);
	return ok ? (ssize_t)len : -EFAULT;
}

/*
 * __splice_from_pipe() with pipe_to_user: buffers are copied whole or not
 * at all, in order, packet boundaries ignored (a packet copied in part
 * keeps its rest, which the next read returns).  The first buffer that
 * faults ends the call: the bytes of the buffers before it, or EFAULT;
 * the faulting buffer stays in the pipe whole.
 */
static ssize_t vmsplice_to_user(struct pp_file *f, const struct iovec *iov,
				unsigned long nr_segs, size_t total, bool nonblock)
{
	struct pp_pipe *p = f->pipe;
	struct pp_buf snap[TO_USER_BATCH];
	struct user_iter it = { iov, nr_segs, 0 };
	struct pp__dead dead;
	ssize_t ret = 0;
	int err;

	pp__dead_init(&dead);
	err = pp__pipe_lock_consumer(p, nonblock);
	if (err)
		return err;
	while (total && !dead.full) {
		unsigned int nr;
		size_t taken = 0;
		bool stop = false;

		if (pp__pipe_empty(p)) {
			if (ret)
				break;
			pp__pipe_unlock_consumer(p);
			err = pp__pipe_wait_data(p, nonblock);
			if (err <= 0)
				return err;
			err = pp__pipe_lock_consumer(p, nonblock);
			if (err)
				return err;
			continue;
		}
		/* Kernel-resident bytes are read into pages first (kbuf.c). */
		err = pp__kbuf_materialize(p, total, TO_USER_BATCH);
		if (err) {
			if (!ret)
				ret = err;
			break;
		}
		nr = pp__pipe_snapshot(p, snap, TO_USER_BATCH, total, false);

		for (unsigned int i = 0; i < nr && total; i++) {
			size_t n = min_t(size_t, snap[i].len, total);
			ssize_t r;

			if (!n)
				continue;	/* zero-length buffers are eaten */
			err = pp__buf_confirm(p, &snap[i]);
			r = err ? err : buf_to_user(p, &snap[i], n, &it);
			if (r < 0) {
				/* As pp_read: ENODATA is reported once and its buffer dropped. */
				if (!ret) {
					ret = r;
					if (r == -ENODATA)
						taken += snap[i].len;
				}
				stop = true;
				break;
			}
			taken += n;
			ret += (ssize_t)n;
			total -= n;
		}
		pp__pipe_consume(p, taken, false, &dead);
		if (stop)
			break;
	}
	pp__pipe_unlock_consumer(p);
	pp__pipe_release_dead(p, &dead);
	return ret;
}

/*
 * The same out of a shared pipe (shared.c): its bytes are lent in place
 * and copied to the caller a buffer at a time; a fault fails the buffer,
 * which stays in the pipe, as pipe_to_user's short copy does.
 */
static ssize_t vmsplice_shared_to_user(struct pp_file *f, const struct iovec *iov,
				       unsigned long nr_segs, size_t total, bool nonblock)
{
	struct iovec lent[TO_USER_BATCH];
	struct user_iter it = { iov, nr_segs, 0 };
	ssize_t n = pp__shared_lend(f, lent, TO_USER_BATCH, total, nonblock, false, NULL);
	size_t copied = 0;

	if (n <= 0)
		return n;
	for (unsigned int i = 0; copied < (size_t)n; i++) {
		if (!copy_to_user_iter(&it, lent[i].iov_base, lent[i].iov_len))
			break;
		copied += lent[i].iov_len;
	}
	pp__shared_consume(f, copied);
	return copied ? (ssize_t)copied : -EFAULT;
}

/*
 * Into a shared pipe: the other process cannot see our pages, so the bytes
 * are copied into the arena's, a slot per user page each segment touches
 * (iter_to_pipe's buffers).  Each segment's readable prefix is found first,
 * as for the threaded pipe's references, so that memory that is not there
 * is EFAULT (or the bytes before it) and never a fault in the copy.
 */
static ssize_t vmsplice_shared_from_user(struct pp_file *f, const struct iovec *iov,
					 unsigned long nr_segs, size_t total, bool nonblock)
{
	struct iovec chunk[PP_SHARED_SLOTS];
	void *pages[PP_SHARED_SLOTS];
	uint32_t idx[PP_SHARED_SLOTS];
	size_t lens[PP_SHARED_SLOTS] = { 0 };
	const unsigned int max = PP_SHARED_SLOTS;	/* a whole pipe at pipe-max-size */
	unsigned int nc = 0;
	bool fault = false;
	ssize_t ret = 0;
	int n;

	for (unsigned long i = 0; i < nr_segs && nc < max && total && !fault; i++) {
		uintptr_t a = (uintptr_t)iov[i].iov_base;
		size_t left = min_t(size_t, iov[i].iov_len, total), ok;

		if (!left)
			continue;
		total -= left;
		ok = user_readable((const void *)a, left);
		fault = ok < left;
		while (ok && nc < max) {
			size_t l = min_t(size_t, ok, pp__page_size - (a & (pp__page_size - 1)));

			chunk[nc++] = (struct iovec){ (void *)a, l };
			a += l;
			ok -= l;
		}
	}
	/* Room first, as wait_for_space comes before the pages are pinned. */
	n = pp__shared_reserve(f, nc ? nc : 1, nonblock, pages, idx);
	if (n < 0)
		return n;
	for (int i = 0; i < n && (unsigned int)i < nc; i++) {
		memcpy(pages[i], chunk[i].iov_base, chunk[i].iov_len);
		lens[i] = chunk[i].iov_len;
		ret += (ssize_t)lens[i];
	}
	pp__shared_commit(f, idx, (unsigned int)n, lens, NULL);
	return ret ? ret : -EFAULT;
}

static ssize_t do_vmsplice(struct pp_file *f, const struct iovec *iov, unsigned long nr_segs,
			   unsigned int flags)
{
	bool nonblock = flags & SPLICE_F_NONBLOCK;	/* the pipe's O_NONBLOCK is ignored, as in Linux */
	size_t total;
	int err;

	if (!pp__file_writable(f) && !pp__file_readable(f))
		return -EBADF;
	err = check_iov(iov, nr_segs);
	if (err)
		return err;
	total = 0;
	for (unsigned long i = 0; i < nr_segs; i++)
		total += min_t(size_t, iov[i].iov_len, PP_MAX_RW - total);
	if (!total)
		return 0;	/* before the pipe check, as in Linux */
	if (pp__is_shared(f))
		return pp__file_writable(f) ?
			       vmsplice_shared_from_user(f, iov, nr_segs, total, nonblock) :
			       vmsplice_shared_to_user(f, iov, nr_segs, total, nonblock);
	if (!pp__is_pipe(f))
		return -EBADF;
	if (pp__file_writable(f))
		return pp__pipe_add_user(f, iov, nr_segs, nonblock, flags & SPLICE_F_GIFT, NULL);
	return vmsplice_to_user(f, iov, nr_segs, total, nonblock);
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
	/* As vmsplice: a NULL base is found when the pages are taken, after any wait. */
	if (!pp__access_ok(buf, count))
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
