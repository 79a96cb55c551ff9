/* SPDX-License-Identifier: MIT */
/*
 * file.h - struct pp_file and the endpoints: pagepipe ends, OS descriptors
 * of each kind, user endpoints.  Included by internal.h.
 */
#ifndef PP_FILE_H
#define PP_FILE_H

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
	PP_KIND_SHARED,		/* a PP_O_SHARED pipe end (shared.c) */
};

struct pp__file_ref;

/* Internal bit in pp_file.flags: the F_SETFD state of a pagepipe end. */
#define PP_FD_CLOEXEC_FLAG	0x20000000

#define PP_FD_PSEUDO	0x1	/* a regular file of procfs, sysfs...: read by copy */
#define PP_FD_NULL	0x2	/* /dev/null */
#define PP_FD_ZERO	0x4	/* /dev/zero */
#define PP_FD_UNIX	0x8	/* an AF_UNIX socket */
#define PP_FD_BLK	0x10	/* a block device: PP_KIND_REG, its size by BLKGETSIZE64 */

/* pp_file.no_kernel: splice(2) gave EINVAL, so the bytes are copied from now on. */
#define PP_NO_KSPLICE_READ	0x1	/* into our private kernel pipe */
#define PP_NO_KSPLICE_WRITE	0x2	/* out of it */

struct pp_file {
	const struct pp_file_ops *ops;
	atomic_uint refs;		/* one for being open, one per call in flight */
	_Atomic int flags;		/* O_ACCMODE | O_NONBLOCK | O_DIRECT | PP_O_NOSIGPIPE... */
	enum pp_kind kind;
	struct pp_pipe *pipe;		/* PP_KIND_PIPE */
	int fd;				/* OS kinds, else -1 */
	int sock_type;			/* PP_KIND_SOCK: SOCK_STREAM... */
	unsigned int fd_flags;		/* PP_FD_*: what pp_fdopen() learnt once */
	unsigned int no_kernel;		/* atomic: PP_NO_KSPLICE_*, what the kernel refused */
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

/* A file with one reference (its being open); file.c.  NULL: ENOMEM. */
struct pp_file *pp__file_alloc(const struct pp_file_ops *ops, enum pp_kind kind, int flags);

static inline bool pp__is_shared(const struct pp_file *f)
{
	return f->kind == PP_KIND_SHARED;
}

/* An end of a pagepipe, threaded or shared: what the pipe calls take. */
static inline bool pp__is_pagepipe(const struct pp_file *f)
{
	return pp__is_pipe(f) || pp__is_shared(f);
}

/* Calls in flight hold a reference so that a concurrent pp_close() is safe. */
static inline void pp__file_get(struct pp_file *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}
void pp__file_free(struct pp_file *f);	/* the last reference went */

static inline void pp__file_put(struct pp_file *f)
{
	if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
		pp__file_free(f);
}

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
/*
 * A kind's kernel paths, each in the kind's own file: `move` sends a file's
 * bytes by one system call (sendfile, splice, copy_file_range: see
 * pp__move_fn; NULL: they are read and written); `sendv` writes memory
 * (NULL: writev, or pwritev at a position; a socket's is sendmsg with
 * MSG_MORE).  Bytes in our private kernel pipe always go by splice(2).
 */
typedef ssize_t (*pp__move_fn)(struct pp_file *out, int sfd, off_t *spos, off_t *pos,
			       size_t len, unsigned int flags);
typedef ssize_t (*pp__sendv_fn)(struct pp_file *out, const struct iovec *iov, int n,
				unsigned int flags);
struct pp__kernel_path {
	pp__move_fn move;
	pp__sendv_fn sendv;
};
/*
 * move: one system call moving up to `len` bytes of descriptor sfd from
 * *spos to out (at *pos when given), both advanced by the call.  Bytes
 * moved (maybe fewer), or -errno; the caller loops, retries EINTR, and
 * copies instead on -EINVAL, -EXDEV, -ENOSYS, -EOPNOTSUPP or a 0 at the
 * start.
 */
ssize_t pp__sendfile_move(struct pp_file *out, int sfd, off_t *spos, off_t *pos, size_t len,
			  unsigned int flags);
extern const struct pp__kernel_path pp__sendfile_path;	/* sendfile, write */
/* splice_write for descriptors: each buffer by the kind's path. */
ssize_t pp__fd_splice_write(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
			    unsigned int nr_bufs, size_t len, unsigned int flags,
			    const struct pp__kernel_path *path);
/* The copying part of it: write(v) of memory buffers, as many per call as fit. */
ssize_t pp__fd_splice_write_copy(struct pp_file *out, off_t *pos, struct pp_buf *bufs,
				 unsigned int nr_bufs, size_t len, unsigned int flags,
				 pp__sendv_fn sendv);
/*
 * splice_read for descriptors that can block: the first pass may wait as
 * the descriptor says, later passes take what is there; bytes are read
 * into fresh anonymous pages.
 */
ssize_t pp__stream_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags);
ssize_t pp__fd_splice_read_copy(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
				unsigned int nr_bufs, size_t len, unsigned int flags);
bool pp__fd_readable_now(int fd);
bool pp__fd_nonblocking(int fd);
int  pp__kpipe_prep_input(struct pp_file *in, unsigned int flags);

#endif /* PP_FILE_H */
