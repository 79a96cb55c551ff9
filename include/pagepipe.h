/* SPDX-License-Identifier: MIT */
/*
 * pagepipe.h - in-process pipes that are rings of page-buffer references.
 *
 * A pagepipe is the Linux pipe of 2005 onwards in user space: a power-of-two
 * ring of buffers, each {page, offset, len, ops, flags}, where the buffer's
 * operations decide how it is confirmed, mapped, shared, stolen and released.
 * splice, tee and vmsplice move references to pages between pagepipes,
 * regular files, sockets, kernel pipes and memory.
 *
 * Every call that mirrors a system call keeps that call's contract: it
 * returns -1 (NULL for a pointer) and sets errno on failure, and partial
 * progress is returned as a count.  Compile with -D_GNU_SOURCE so that the
 * SPLICE_F_* and F_*PIPE_SZ constants are visible.
 */
#ifndef PAGEPIPE_H
#define PAGEPIPE_H

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PAGEPIPE_VERSION_MAJOR	0
#define PAGEPIPE_VERSION_MINOR	1
#define PAGEPIPE_VERSION_PATCH	0
#define PAGEPIPE_VERSION	"0.1.0"

/* Linux values, for C libraries that do not define them without _GNU_SOURCE. */
#ifndef SPLICE_F_MOVE
#define SPLICE_F_MOVE		0x01
#define SPLICE_F_NONBLOCK	0x02
#define SPLICE_F_MORE		0x04
#define SPLICE_F_GIFT		0x08
#endif
#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ		1031
#define F_GETPIPE_SZ		1032
#endif

struct pp_file;		/* opaque: one open end, of a pagepipe or of an OS file descriptor */
struct pp_pipe;		/* opaque: the ring that a pagepipe's two ends share */

struct pp_pollfd {
	struct pp_file *file;
	short events;
	short revents;
};

/* ------------------------------------------------------------------------
 * The contract: these mirror pipe2(2), close(2), read(2), write(2),
 * readv(2), writev(2), splice(2), tee(2), vmsplice(2), fcntl(2), ioctl(2)
 * and poll(2).  On a file made by pp_fdopen() each behaves as the same
 * system call on that descriptor.  A NULL struct pp_file * is a bad
 * descriptor (EBADF).
 */

/*
 * pp_pipe2() flags: O_NONBLOCK, O_DIRECT (packet mode), O_CLOEXEC (accepted,
 * meaningless in process) and PP_O_NOSIGPIPE (EPIPE without SIGPIPE, like
 * MSG_NOSIGNAL).  Any other bit gives EINVAL.
 */
#define PP_O_NOSIGPIPE		0x40000000
/*
 * PP_O_SHARED: the pipe's ring and pages live in a shared memory arena (a
 * sealed memfd), so after fork() parent and child hold the ends of one
 * pipe, as with pipe(2): EOF once every write end in every process is
 * closed (or its process gone), EPIPE and SIGPIPE in the writing process
 * once every read end is, O_NONBLOCK and O_DIRECT shared by the copies of
 * an end as by those of an open file description.  Every pipe call takes
 * shared ends, with these differences: F_SETPIPE_SZ goes up to 1 MiB;
 * bytes that enter by splice, tee or vmsplice are copied into the arena
 * then (another process cannot see this one's pages), and pp_write_ref()
 * fails with EINVAL (pp_write_lend() is the zero-copy write there);
 * pp_file_event_fd() is a descriptor of this process kept by a thread of
 * it.  docs/shared-pipes.md.
 */
#define PP_O_SHARED		0x20000000

int      pp_pipe2(struct pp_file *ends[2], int flags);
/*
 * A PP_O_SHARED end for another process: pp_export() gives two new
 * descriptors (close-on-exec clear), the pipe's arena and the end's token,
 * to inherit across exec or send over a Unix socket (SCM_RIGHTS) together;
 * pp_import() there (flags: O_CLOEXEC, PP_O_NOSIGPIPE) opens a copy of the
 * end from them, as a passed pipe descriptor would be, and leaves the two
 * descriptors to the caller to close.  pp_export(3).
 */
int      pp_export(struct pp_file *end, int fds[2]);
struct pp_file *pp_import(const int fds[2], int flags);
struct pp_file *pp_fdopen(int fd);
int      pp_close(struct pp_file *f);
ssize_t  pp_read(struct pp_file *f, void *buf, size_t count);
ssize_t  pp_write(struct pp_file *f, const void *buf, size_t count);
ssize_t  pp_readv(struct pp_file *f, const struct iovec *iov, int iovcnt);
ssize_t  pp_writev(struct pp_file *f, const struct iovec *iov, int iovcnt);
ssize_t  pp_splice(struct pp_file *in, off_t *off_in, struct pp_file *out,
		   off_t *off_out, size_t len, unsigned int flags);
ssize_t  pp_tee(struct pp_file *in, struct pp_file *out, size_t len,
		unsigned int flags);
ssize_t  pp_vmsplice(struct pp_file *f, const struct iovec *iov,
		     size_t nr_segs, unsigned int flags);
int      pp_fcntl(struct pp_file *f, int cmd, ...);
int      pp_ioctl(struct pp_file *f, unsigned long request, ...);
int      pp_poll(struct pp_pollfd *fds, nfds_t nfds, int timeout_ms);

/* ------------------------------------------------------------------------
 * Limits.  The largest size a pipe may grow to starts as the kernel's
 * /proc/sys/fs/pipe-max-size (1 MiB when that cannot be read); an
 * application may raise it, up to 2^40, so that one pagepipe can hold
 * gigabytes.  Returns 0, or -1 with EINVAL when bytes is below one page or
 * above 2^40.  Shrinking the limit never shrinks a pipe.
 *
 * pp_pipe_set_size() is F_SETPIPE_SZ without the int: the size is rounded
 * up to a power-of-two number of pages and returned; -1 with EPERM above
 * the limit, EBUSY when the occupied slots do not fit, ENOMEM, EBADF for a
 * NULL file, EINVAL above 2^40 or for a file that is not a pagepipe end.
 * So the largest pagepipe is 2^40 bytes.  F_SETPIPE_SZ itself refuses
 * sizes whose result an int cannot hold (above 1 GiB) with EINVAL, and
 * F_GETPIPE_SZ reports a larger pipe as INT_MAX.
 */
int      pp_pipe_set_max_size(size_t bytes);
size_t   pp_pipe_get_max_size(void);
ssize_t  pp_pipe_set_size(struct pp_file *f, size_t bytes);

/*
 * Event loops.  Returns an OS descriptor that polls readable exactly while
 * pp_poll() would report the end ready in its direction (POLLIN or POLLHUP
 * for a read end, POLLOUT or POLLERR for a write end).  It belongs to the
 * pipe (one per direction, shared by all ends of that direction) and is
 * closed when the pipe is freed, after both ends are closed.  It is
 * level-triggered: watch it with epoll, libuv or libevent and call the
 * pagepipe operation when it fires.  With EPOLLET an event is delivered
 * each time the end becomes ready, not on every write.  Never read from it
 * or close it.  -1 and errno (those of eventfd(2): EMFILE, ENFILE, ENOMEM,
 * ENODEV) on failure; EINVAL for a file that is not a pagepipe end (poll an
 * OS descriptor itself).
 *
 * A PP_O_SHARED end's descriptor is this process's (one per direction per
 * process), kept by a thread this call starts, which sleeps on the shared
 * ring and stops when the process closes its last end of that direction;
 * a fork()ed child calls this again before it uses the descriptor: the
 * same number comes back, now the child's own.  Readiness that another process takes away (it read the bytes)
 * shows until an operation here finds the end not ready (EAGAIN, a
 * pp_poll()), as when processes share a kernel pipe's descriptor and one
 * reads what the other's epoll announced.
 */
int      pp_file_event_fd(struct pp_file *f);

/* The OS descriptor behind a pp_fdopen() file, or -1 with EINVAL. */
int      pp_file_fd(struct pp_file *f);

/* ------------------------------------------------------------------------
 * Buffers.  A slot of the ring is occupied exactly when its ops is set.
 *
 * Call order for one buffer: ->confirm (before the first access to its
 * bytes, and before ->try_steal), then ->map/->unmap around each access for
 * types whose memory is not directly addressable, ->get each time it is
 * shared, and ->release exactly once per reference.  ->get, ->try_steal and
 * ->release may be called with the pipe's ring lock held, or with no lock
 * at all, so they must not block or call back into the library; ->confirm,
 * ->map and ->unmap are called with only the consumer side of the pipe
 * locked (other readers wait; writers do not) and may block.  The ops see
 * a copy of the slot: they must not change the buffer, only what it refers
 * to.  Operations are called only through the library's wrappers, which
 * supply the defaults noted below.  A pp_pipe argument may be NULL when the
 * buffer is outside any pipe (held by an endpoint).
 */
struct pp_buf;

struct pp_buf_ops {
	/* 0, or -errno (-ENODATA: the data is gone; -EIO).  NULL: always valid. */
	int   (*confirm)(struct pp_pipe *pipe, struct pp_buf *buf);
	/* The address of byte 0 of buf->page.  NULL: buf->page itself. */
	void *(*map)(struct pp_pipe *pipe, struct pp_buf *buf);
	/* Undoes one ->map.  NULL: nothing to undo. */
	void  (*unmap)(struct pp_pipe *pipe, struct pp_buf *buf, void *addr);
	/* Drops this buffer's reference.  Required. */
	void  (*release)(struct pp_pipe *pipe, struct pp_buf *buf);
	/* true: the caller now owns the page alone.  NULL: never. */
	bool  (*try_steal)(struct pp_pipe *pipe, struct pp_buf *buf);
	/* Takes one more reference; false if the count would overflow.  Required. */
	bool  (*get)(struct pp_pipe *pipe, struct pp_buf *buf);
	/*
	 * Optional: the buffer's bytes are bytes [*pos, *pos + buf->len) of
	 * OS descriptor *fd, so the kernel can move them (sendfile, splice,
	 * copy_file_range) without user space touching them.  0, or -errno
	 * when the buffer has no such origin.  The descriptor stays valid
	 * while the buffer holds its reference.
	 */
	int   (*origin)(struct pp_pipe *pipe, const struct pp_buf *buf,
			int *fd, off_t *pos);
	/* Human-readable type name, for diagnostics. */
	const char *name;
};

struct pp_buf {
	void *page;		/* the page: memory, or a handle that ->map turns into memory */
	unsigned int offset;	/* first valid byte within the page */
	unsigned int len;	/* valid bytes: offset + len <= page size */
	const struct pp_buf_ops *ops;
	unsigned int flags;	/* PP_BUF_FLAG_*: every producer sets all of them */
	void *private;		/* belongs to ops: the reference-counted owner */
	uint64_t index;		/* belongs to ops: e.g. a file page's position */
};

#define PP_BUF_FLAG_GIFT	0x04	/* vmspliced with SPLICE_F_GIFT */
#define PP_BUF_FLAG_PACKET	0x08	/* O_DIRECT write: one read takes at most this buffer */
#define PP_BUF_FLAG_CAN_MERGE	0x10	/* write() may append: the pipe owns the page alone */

/* The system page size, which is a pagepipe's page size. */
size_t   pp_page_size(void);

/*
 * Queue one buffer, filled by the caller (all fields, flags included), at
 * the write end f, taking over the reference it holds.  CAN_MERGE is
 * refused (EINVAL): only the library's anonymous pages may be merged into.
 * Blocks for a free slot unless f is non-blocking or flags has
 * SPLICE_F_NONBLOCK.  Returns buf->len, or -1: EAGAIN, EPIPE (SIGPIPE as
 * for write), EBADF, EINVAL.  On failure the reference stays the caller's.
 */
ssize_t  pp_pipe_add_buf(struct pp_file *f, const struct pp_buf *buf,
			 unsigned int flags);

/*
 * Anonymous pages: library-owned page memory with a reference count.  A
 * caller that wants to build its own buffers of plain memory allocates
 * with pp_page_alloc() and queues {page, offset, len, &pp_anon_buf_ops}.
 */
extern const struct pp_buf_ops pp_anon_buf_ops;
void    *pp_page_alloc(void);
void     pp_page_put(void *page);

/* ------------------------------------------------------------------------
 * Endpoints.  Every pp_file has an operations table; pagepipe ends and the
 * OS descriptor kinds (regular files, kernel pipes and FIFOs, sockets,
 * character devices) are built-in tables, and pp_file_new() makes a file of
 * a caller's table.  splice_read produces an array of buffers that the
 * library then moves into a pipe; splice_write consumes an array of
 * buffers.  Any op may be NULL: read and write then fail with EINVAL, and
 * splice through a file without the op fails with EINVAL, as in Linux.
 * Ops return a count or -errno (never -1 with errno).
 */
struct pp_file_ops {
	ssize_t (*readv)(struct pp_file *f, const struct iovec *iov, int iovcnt);
	ssize_t (*writev)(struct pp_file *f, const struct iovec *iov, int iovcnt);
	/*
	 * Fill up to nr_bufs slots of bufs (whole buffers, flags included)
	 * with at most len bytes from *pos (NULL: the file has no position),
	 * buffers in order, their lengths summing to the return value:
	 * bytes produced, 0 at end of file, or -errno.  flags are the
	 * caller's SPLICE_F_* (an endpoint with its own notion of blocking
	 * may honour SPLICE_F_NONBLOCK); bits above 0xff are internal
	 * (0x100: a later pass of the same splice, take only what is there
	 * now).  For a blocking splice, called with no pipe lock held (the
	 * buffers are published afterwards); for a non-blocking one
	 * (SPLICE_F_NONBLOCK set), with the output pipe's producer lock held,
	 * so it must not wait and must not write to that pipe.  Readers go
	 * on either way.  CAN_MERGE is cleared from whatever is produced.
	 */
	ssize_t (*splice_read)(struct pp_file *in, off_t *pos,
			       struct pp_buf *bufs, unsigned int nr_bufs,
			       size_t len, unsigned int flags);
	/*
	 * Consume bytes from the front of bufs[0..nr_bufs), at most len, each
	 * already confirmed, writing them at *pos (NULL: no position).
	 * Returns bytes consumed, or -errno.  The buffers stay the caller's:
	 * an op that keeps a reference takes one with the ->get wrapper
	 * pp_buf_get().  Called with the pipe's consumer side locked.
	 */
	ssize_t (*splice_write)(struct pp_file *out, off_t *pos,
				struct pp_buf *bufs, unsigned int nr_bufs,
				size_t len, unsigned int flags);
	/* Returns revents for events (POLLIN, POLLOUT...). NULL: always ready. */
	short   (*poll)(struct pp_file *f, short events);
	/* Called once, when the last reference to f goes. */
	int     (*release)(struct pp_file *f);
	const char *name;
};

/*
 * Make a file of a caller's operations table.  flags: O_RDONLY, O_WRONLY or
 * O_RDWR, with O_NONBLOCK.  private is returned by pp_file_private().
 */
struct pp_file *pp_file_new(const struct pp_file_ops *ops, int flags, void *private);
void    *pp_file_private(struct pp_file *f);

/* Wrappers for buffer operations, for endpoint code outside the library. */
int      pp_buf_confirm(struct pp_pipe *pipe, struct pp_buf *buf);
void    *pp_buf_map(struct pp_pipe *pipe, struct pp_buf *buf);
void     pp_buf_unmap(struct pp_pipe *pipe, struct pp_buf *buf, void *addr);
bool     pp_buf_get(struct pp_pipe *pipe, struct pp_buf *buf);
bool     pp_buf_try_steal(struct pp_pipe *pipe, struct pp_buf *buf);
void     pp_buf_release(struct pp_pipe *pipe, struct pp_buf *buf);

/* ------------------------------------------------------------------------
 * Zero copy beyond the system calls.
 *
 * pp_write_ref() queues [buf, buf + count) by reference: no byte is
 * copied.  release(buf, queued, arg) is called once, with the number of
 * bytes queued, from whichever thread drops the last reference (a reader, a
 * tee'd copy, a close), when no buffer refers to the memory any more; until
 * then that memory must stay valid and unchanged.  Like vmsplice, it waits
 * (unless the end is O_NONBLOCK) for one free slot and queues what fits
 * then, so it may return fewer than count bytes: the caller still owns the
 * rest.  Returns bytes queued, or -1 (EAGAIN, EPIPE, EBADF, EFAULT, EINVAL
 * for a file that is not a pagepipe write end, ENOMEM).  release runs only
 * if at least one byte was queued.
 */
typedef void (*pp_release_fn)(void *buf, size_t count, void *arg);
ssize_t  pp_write_ref(struct pp_file *f, const void *buf, size_t count,
		      pp_release_fn release, void *arg);

/*
 * pp_read_lend() lends the next buffers' bytes without copying: up to
 * iovcnt iovecs (at most 64), at most count bytes, from the front of the
 * pipe at read end f.  Blocks as read does; returns the bytes lent, 0 at
 * EOF, or -1.  The iovecs filled are the first ones whose lengths sum to
 * the return value.  The memory is read-only.  pp_read_done() consumes the
 * first `consumed` bytes of what was lent (at most that) and ends the loan;
 * it must be called from the thread that took the loan, which holds the
 * pipe's consumer lock until then: other readers of the pipe wait, and a
 * consuming call on the same pipe from that thread would deadlock.
 * Buffers whose bytes are not addressable (a file's pages) are copied into
 * anonymous pages first.
 */
ssize_t  pp_read_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count);
int      pp_read_done(struct pp_file *f, size_t consumed);

/*
 * pp_write_lend() lends the pipe's own memory to a writer that builds its
 * bytes in place: up to iovcnt iovecs (at most 64), at most count bytes in
 * all, each the start of a free page of the pipe's (of a shared pipe's
 * arena, the memory its reading processes see: this is the zero-copy write
 * between processes).  Waits as write does for a free slot (EAGAIN for an
 * O_NONBLOCK end; EPIPE and SIGPIPE once no reader is left) and lends no
 * more pages than there are free slots; returns the bytes lent, or -1.
 * pp_write_done() queues the first `filled` bytes of what was lent (at most
 * that), page by page in iovec order, a slot each, gives back the pages
 * not filled, and ends the lease.  Until then the calling thread holds the
 * pipe's producer lock: other writers wait, and a write, resize or second
 * lease on the same pipe from that thread would deadlock; call
 * pp_write_done() from the thread that took the lease.  Slots queued this
 * way are never appended to by a later write.  pp_write_done() fails with
 * EINVAL when f holds no lease.
 */
ssize_t  pp_write_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count);
int      pp_write_done(struct pp_file *f, size_t filled);

#ifdef __cplusplus
}
#endif

#endif /* PAGEPIPE_H */
