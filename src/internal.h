/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the library's files share and nothing outside sees.
 *
 * Error convention: every function here returns a count or 0 on success and
 * -errno on failure, and never touches errno.  pp__ret() below is the one
 * boundary that converts: the PP_EXPORT entry points that mirror a system
 * call return through it, in whichever file they live.
 */
#ifndef PP_INTERNAL_H
#define PP_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pagepipe.h"

#define PP_EXPORT	__attribute__((visibility("default")))
#define PP_PIPE_BUF	4096u		/* POSIX atomicity limit; not the page size */
#define PP_DEF_SLOTS	16u		/* PIPE_DEF_BUFFERS */
#define PP_TMP_PAGES	2		/* pages an idle pipe keeps for its writers, as Linux */
#define PP_MAX_SIZE	(1ul << 31)	/* round_pipe_size() refuses larger sizes */
#define PP_MAX_LIMIT	(1ul << 40)	/* pp_pipe_set_max_size(), pp_pipe_set_size() */
#define PP_IOV_MAX	1024		/* UIO_MAXIOV */
#define PP_MAX_RW	(INT_MAX & ~(long)4095)	/* MAX_RW_COUNT */
/* Internal splice flag: a later pass of one splice takes only what is there. */
#define PP__SPLICE_NOWAIT	0x100u
#define SPLICE_F_ALL	(SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT)

#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#define min_t(t, a, b)	((t)(a) < (t)(b) ? (t)(a) : (t)(b))

extern size_t pp__page_size;		/* set once by the library constructor */
extern unsigned int pp__page_shift;

#include "pipe.h"

/* -------------------------------------------------------------------------
 * Files.
 */
enum pp_kind {
	PP_KIND_PIPE,		/* a pagepipe end */
	PP_KIND_REG,		/* OS descriptors, by fstat() at pp_fdopen(); block devices too */
	PP_KIND_FIFO,		/* kernel pipe or FIFO */
	PP_KIND_SOCK,
	PP_KIND_CHR,
	PP_KIND_OTHER,		/* directories and the rest: read/write pass through */
	PP_KIND_USER,		/* pp_file_new() */
};

struct pp__file_ref;

/* Internal bit in pp_file.flags: the F_SETFD state of a pagepipe end. */
#define PP_FD_CLOEXEC_FLAG	0x20000000

#define PP_FD_PSEUDO	0x1	/* a regular file of procfs, sysfs...: read by copy */
#define PP_FD_NULL	0x2	/* /dev/null */
#define PP_FD_ZERO	0x4	/* /dev/zero */
#define PP_FD_UNIX	0x8	/* an AF_UNIX socket */
#define PP_FD_BLK	0x10	/* a block device: PP_KIND_REG, its size by BLKGETSIZE64 */

struct pp_file {
	const struct pp_file_ops *ops;
	atomic_uint refs;		/* one for being open, one per call in flight */
	_Atomic int flags;		/* O_ACCMODE | O_NONBLOCK | O_DIRECT | PP_O_NOSIGPIPE... */
	enum pp_kind kind;
	struct pp_pipe *pipe;		/* PP_KIND_PIPE */
	int fd;				/* OS kinds, else -1 */
	int sock_type;			/* PP_KIND_SOCK: SOCK_STREAM... */
	unsigned int fd_flags;		/* PP_FD_*: what pp_fdopen() learnt once */
	struct pp__file_ref *fref;	/* PP_KIND_REG: the descriptor file buffers hold */
	/*
	 * PP_KIND_REG: the range the last readahead(2) covered.  A hint only:
	 * threads racing on it cost an extra or a late readahead, nothing else.
	 */
	_Atomic off_t ra_start, ra_end;
	void *private;			/* PP_KIND_USER */
};

static inline bool pp__file_readable(const struct pp_file *f)
{
	int acc = atomic_load_explicit(&f->flags, memory_order_relaxed) & O_ACCMODE;

	return acc == O_RDONLY || acc == O_RDWR;
}

static inline bool pp__file_writable(const struct pp_file *f)
{
	int acc = atomic_load_explicit(&f->flags, memory_order_relaxed) & O_ACCMODE;

	return acc == O_WRONLY || acc == O_RDWR;
}

static inline int pp__file_flags(const struct pp_file *f)
{
	return atomic_load_explicit(&f->flags, memory_order_relaxed);
}

static inline bool pp__is_pipe(const struct pp_file *f)
{
	return f->kind == PP_KIND_PIPE;
}

/* Calls in flight hold a reference so that a concurrent pp_close() is safe. */
static inline void pp__file_get(struct pp_file *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}
void pp__file_put(struct pp_file *f);

/* OS descriptors. */
extern const struct pp_file_ops pp__fd_ops;		/* generic pass-through */
extern const struct pp_file_ops pp__reg_ops;		/* regular files */
extern const struct pp_file_ops pp__fifo_ops;		/* kernel pipes */
extern const struct pp_file_ops pp__sock_ops;		/* sockets */
extern const struct pp_file_ops pp__chr_ops;		/* character devices */
ssize_t pp__fd_readv(struct pp_file *f, const struct iovec *iov, int iovcnt);
ssize_t pp__fd_writev(struct pp_file *f, const struct iovec *iov, int iovcnt);
short   pp__fd_poll(struct pp_file *f, short events);
int     pp__fd_release(struct pp_file *f);
/* splice_write for any descriptor: write(v) of mapped buffers, as many per call as fit. */
ssize_t pp__fd_splice_write_copy(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags);
/*
 * A kind's kernel path for file bytes: one system call moving up to `len`
 * bytes of descriptor sfd from *spos to out (at *pos when given), both
 * advanced by the call.  Bytes moved (maybe fewer), or -errno; the caller
 * loops, retries EINTR, and copies instead on -EINVAL, -EXDEV, -ENOSYS,
 * -EOPNOTSUPP or a 0 at the start.
 */
typedef ssize_t (*pp__move_fn)(struct pp_file *out, int sfd, off_t *spos, off_t *pos,
			       size_t len, unsigned int flags);
ssize_t pp__sendfile_move(struct pp_file *out, int sfd, off_t *spos, off_t *pos, size_t len,
			  unsigned int flags);
ssize_t pp__fd_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
			    unsigned int nr_bufs, size_t len, unsigned int flags, pp__move_fn move);
/* splice_read for any descriptor: read(v) into fresh anonymous pages. */
ssize_t pp__stream_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags);
ssize_t pp__fd_splice_read_copy(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
				unsigned int nr_bufs, size_t len, unsigned int flags);

/* -------------------------------------------------------------------------
 * Buffers: the wrappers that supply the defaults (buf.c).
 */
static inline int pp__buf_confirm(struct pp_pipe *p, struct pp_buf *buf)
{
	return buf->ops->confirm ? buf->ops->confirm(p, buf) : 0;
}

static inline void *pp__buf_map(struct pp_pipe *p, struct pp_buf *buf)
{
	return buf->ops->map ? buf->ops->map(p, buf) : buf->page;
}

static inline void pp__buf_unmap(struct pp_pipe *p, struct pp_buf *buf, void *addr)
{
	if (buf->ops->unmap)
		buf->ops->unmap(p, buf, addr);
}

/* Must be checked: false means the reference count would overflow (EFAULT). */
static inline __attribute__((warn_unused_result))
bool pp__buf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	return buf->ops->get(p, buf);
}

static inline bool pp__buf_try_steal(struct pp_pipe *p, struct pp_buf *buf)
{
	return buf->ops->try_steal ? buf->ops->try_steal(p, buf) : false;
}

static inline int pp__buf_origin(struct pp_pipe *p, const struct pp_buf *buf, int *fd, off_t *pos)
{
	return buf->ops->origin ? buf->ops->origin(p, buf, fd, pos) : -EOPNOTSUPP;
}

/* Clears ops before ->release, so that a slot cannot be released twice. */
static inline void pp__buf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	const struct pp_buf_ops *ops = buf->ops;

	buf->ops = NULL;
	ops->release(p, buf);
}

void pp__loan_free(struct pp__loan *loan);

/* Anonymous pages (buf.c). */
void *pp__page_alloc(struct pp_pipe *p);		/* NULL: ENOMEM */
void  pp__page_free(struct pp_pipe *p, void *page);	/* the caller held the only reference */
bool  pp__page_get(void *page);
void  pp__page_put(struct pp_pipe *p, void *page);
bool  pp__page_only_ref(void *page);
unsigned int pp__thread_page_count(void);	/* pages in this thread's cache (tests) */
void  pp__page_pool_stats(size_t *chunks, size_t *in_use);	/* pages out of the pool (tests) */
void  pp__page_trim(void);	/* sweep unused thread caches now (tests; buf.c) */
void  pp__pipe_free_tmp_pages(struct pp_pipe *p);
void  pp__pipe_trim_tmp_pages(struct pp_pipe *p);	/* a drained slot is the spare */
extern unsigned int pp__page_ref_max;			/* tests lower it to reach the limit */

/* File pages and user memory (file_buf.c, user_buf.c). */
extern const struct pp_buf_ops pp__file_buf_ops;
extern const struct pp_buf_ops pp__user_buf_ops;
struct pp__file_ref *pp__file_ref_new(int fd);		/* dups fd; NULL: errno-free -ENOMEM/EMFILE lost */
void pp__file_ref_put(struct pp__file_ref *ref);
bool pp__file_ref_get(struct pp__file_ref *ref);
int  pp__file_ref_fd(const struct pp__file_ref *ref);

void *pp__user_ref_new(pp_release_fn release, void *base, void *arg);
void  pp__user_ref_set_count(void *ref, size_t count);
void  pp__user_ref_put(void *ref);
/* Queue user memory by reference, a buffer per page it touches (vmsplice.c). */
ssize_t pp__pipe_add_user(struct pp_file *f, const struct iovec *iov, unsigned long nr_segs,
			  bool nonblock, bool gift, void *ref);

/* Copies: the one place that knows how to read a buffer's bytes. */
ssize_t pp__buf_copy_out(struct pp_pipe *p, struct pp_buf *buf, size_t off, void *dst, size_t len);

/* -------------------------------------------------------------------------
 * Fault injection (fault.c): a test sets a countdown per site; the library
 * asks before each allocation or system call that can fail.
 */
enum pp_fault_site {
	PP_FAULT_ALLOC,
	PP_FAULT_READ,		/* read, readv, pread, recv */
	PP_FAULT_WRITE,		/* write, writev, pwrite, send */
	PP_FAULT_SPLICE,	/* splice, sendfile, copy_file_range */
	PP_FAULT_NR,
};
int  pp__fault(enum pp_fault_site site);	/* 0, or the -errno to fail with */
void pp__fault_arm(enum pp_fault_site site, long skip, int err, long count);
void pp__fault_disarm_all(void);
long pp__fault_hits(enum pp_fault_site site);

/* -------------------------------------------------------------------------
 * The one errno boundary.
 */
static inline long pp__ret(long r)
{
	/* Every lock is let go by now: the handler may do anything (pipe.h). */
	if (unlikely(pp__sigpipe_owed))
		pp__raise_sigpipe();
	if (unlikely(r < 0)) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/*
 * Sum an iovec array: -EINVAL for a bad count or a segment past ssize_t,
 * -EFAULT for a segment no user address can hold (access_ok).  A NULL
 * base is found at copy time, as the kernel finds it.
 */
ssize_t pp__iov_total(const struct iovec *iov, int iovcnt);
bool pp__access_ok(const void *addr, size_t len);

/* An iovec cursor (iov.c): the position equals the bytes consumed (CVE-2015-1805). */
struct pp_iov_iter {
	const struct iovec *iov;
	int nr;
	size_t off;		/* within iov[0] */
};

size_t  pp__iter_copy_from(struct pp_iov_iter *it, char *dst, size_t len);
ssize_t pp__iter_copy_buf(struct pp_pipe *p, struct pp_buf *buf, size_t off, size_t len,
			  struct pp_iov_iter *it);

#endif /* PP_INTERNAL_H */
