// SPDX-License-Identifier: MIT
/*
 * reg.c - regular files as endpoints.
 *
 * splice_read makes file buffers (file_buf.c): a reference per page, no
 * byte read, readahead started so the I/O runs while the data waits in the
 * pipe (the seed: "we start the IO when we do the splice, but the waiting
 * for the result happens separately, when (or if) the data is used").
 * splice_write hands file buffers to copy_file_range(2) and writes memory
 * buffers with pwritev(2).
 *
 * Pseudo-files (procfs, sysfs...) report sizes that are not their contents,
 * so they are read by copy, as copy_splice_read does in Linux.  Block
 * devices are files here too (filemap_splice_read serves both in Linux),
 * their size asked of the device.
 */
#include "internal.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The descriptor buffers hold, made on first use; racing makers agree on one. */
static struct pp__file_ref *file_ref(struct pp_file *f)
{
	struct pp__file_ref *ref = __atomic_load_n(&f->fref, __ATOMIC_ACQUIRE), *expect = NULL;

	if (ref)
		return ref;
	ref = pp__file_ref_new(f->fd);
	if (!ref)
		return NULL;
	if (!__atomic_compare_exchange_n(&f->fref, &expect, ref, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		pp__file_ref_put(ref);
		ref = expect;
	}
	return ref;
}

/*
 * Start the I/O for [start, end) now; its result is waited for when a
 * buffer is consumed.  One readahead(2) covers a window of several calls,
 * as the kernel's own readahead does: a system call per 64 KiB splice was
 * a tenth of the cost of sending a cached file to a socket.
 */
#define PP_RA_WINDOW	(256 * 1024)

static void start_io(struct pp_file *in, off_t start, off_t end)
{
	off_t ra_start = atomic_load_explicit(&in->ra_start, memory_order_relaxed);
	off_t ra_end = atomic_load_explicit(&in->ra_end, memory_order_relaxed);
	size_t len = (size_t)(end - start);

	if (start >= ra_start && end <= ra_end)
		return;
	len = len > PP_RA_WINDOW ? len : PP_RA_WINDOW;
	(void)readahead(in->fd, start, len);
	atomic_store_explicit(&in->ra_start, start, memory_order_relaxed);
	atomic_store_explicit(&in->ra_end, start + (off_t)len, memory_order_relaxed);
}

static ssize_t reg_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags)
{
	const size_t psz = pp__page_size;
	struct pp__file_ref *ref;
	struct stat st;
	off_t off;
	unsigned int n = 0;

	if ((pp__file_flags(in) & O_DIRECT) || (in->fd_flags & PP_FD_PSEUDO))
		return pp__fd_splice_read_copy(in, pos, bufs, nr_bufs, len, flags);
	if (fstat(in->fd, &st) < 0)
		return -errno;
	if (in->fd_flags & PP_FD_BLK) {
		uint64_t bytes;

		if (ioctl(in->fd, BLKGETSIZE64, &bytes) < 0)
			return -errno;
		st.st_size = (off_t)bytes;
	}
	if (*pos >= st.st_size)
		return 0;
	len = min_t(size_t, len, (size_t)(st.st_size - *pos));
	ref = file_ref(in);
	if (!ref) {
		/*
		 * No descriptor left for the reference (EMFILE), or no
		 * memory: the kernel would still move the bytes, so copy.
		 */
		return pp__fd_splice_read_copy(in, pos, bufs, nr_bufs, len, flags);
	}

	for (off = *pos; len && n < nr_bufs; n++) {
		off_t page = off & ~(off_t)(psz - 1);
		size_t o = (size_t)(off - page), l = min_t(size_t, psz - o, len);

		if (!pp__file_ref_get(ref))
			break;
		bufs[n] = (struct pp_buf){
			.offset = (unsigned int)o,
			.len = (unsigned int)l,
			.ops = &pp__file_buf_ops,
			.flags = 0,
			.private = ref,
			.index = (uint64_t)page,
		};
		off += (off_t)l;
		len -= l;
	}
	if (!n)
		return -EFAULT;	/* the reference count refused */
	start_io(in, *pos, off);
	len = (size_t)(off - *pos);
	*pos = off;
	return (ssize_t)len;
}

static ssize_t reg_move(struct pp_file *out, int sfd, off_t *spos, off_t *pos, size_t len,
			unsigned int flags)
{
	ssize_t r = copy_file_range(sfd, spos, out->fd, pos, len, 0);

	(void)flags;
	return r < 0 ? -errno : r;
}

static const struct pp__kernel_path reg_path = {
	.move	= reg_move,
};

static ssize_t reg_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				unsigned int nr_bufs, size_t len, unsigned int flags)
{
	return pp__fd_splice_write(out, pos, bufs, nr_bufs, len, flags, &reg_path);
}

const struct pp_file_ops pp__reg_ops = {
	.readv		= pp__fd_readv,
	.writev		= pp__fd_writev,
	.splice_read	= reg_splice_read,
	.splice_write	= reg_splice_write,
	.poll		= pp__fd_poll,
	.release	= pp__fd_release,
	.name		= "regular file",
};
