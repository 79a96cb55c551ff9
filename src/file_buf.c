// SPDX-License-Identifier: MIT
/*
 * file_buf.c - buffers that refer to a regular file's pages.
 *
 * User space cannot hold a page-cache page, but the kernel can move one for
 * us: a file buffer is the reference (descriptor, position, length), and its
 * bytes are only ever touched by the kernel, when the buffer is consumed:
 * pread(2) into a reader's memory, sendfile(2) to a socket, splice(2) to a
 * kernel pipe, copy_file_range(2) to a file.  No byte is copied at splice
 * time, and a file truncated under a buffer gives ENODATA (a short pread),
 * never SIGBUS, which is what a mapping of the page would give.
 *
 * Like a page-cache reference in Linux, a file buffer is a reference, not a
 * snapshot: a write to the file before the buffer is consumed shows.  A
 * file buffer is never mergeable (Dirty Pipe, CVE-2022-0847) and has no
 * memory to merge into anyway.
 */
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

struct pp__file_ref {
	atomic_uint refs;
	int fd;			/* our own dup: the caller may close theirs */
};

struct pp__file_ref *pp__file_ref_new(int fd)
{
	struct pp__file_ref *ref;

	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	ref = malloc(sizeof(*ref));
	if (!ref)
		return NULL;
	ref->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ref->fd < 0) {
		free(ref);
		return NULL;
	}
	atomic_init(&ref->refs, 1);
	return ref;
}

bool pp__file_ref_get(struct pp__file_ref *ref)
{
	unsigned int old = atomic_load_explicit(&ref->refs, memory_order_relaxed);

	do {
		if (old >= pp__page_ref_max)
			return false;	/* refuse, never wrap */
	} while (!atomic_compare_exchange_weak_explicit(&ref->refs, &old, old + 1,
							memory_order_relaxed,
							memory_order_relaxed));
	return true;
}

void pp__file_ref_put(struct pp__file_ref *ref)
{
	if (atomic_fetch_sub_explicit(&ref->refs, 1, memory_order_acq_rel) == 1) {
		close(ref->fd);
		free(ref);
	}
}

int pp__file_ref_fd(const struct pp__file_ref *ref)
{
	return ref->fd;
}

static void file_buf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	pp__file_ref_put(buf->private);
}

static bool file_buf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	return pp__file_ref_get(buf->private);
}

static int file_buf_origin(struct pp_pipe *p, const struct pp_buf *buf, int *fd, off_t *pos)
{
	(void)p;
	*fd = pp__file_ref_fd(buf->private);
	*pos = (off_t)buf->index + buf->offset;
	return 0;
}

/*
 * No ->map: the bytes are not in our memory.  No ->confirm: the I/O is
 * waited for by the consuming system call itself, which reports EIO, and
 * a truncation shows as a short transfer (ENODATA).  No ->try_steal: the
 * page cache is the kernel's.
 */
const struct pp_buf_ops pp__file_buf_ops = {
	.release	= file_buf_release,
	.get		= file_buf_get,
	.origin		= file_buf_origin,
	.name		= "file",
};
