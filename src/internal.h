/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the library's files share and nothing outside sees.
 *
 * Error convention: every function here returns a count or 0 on success and
 * -errno on failure, and never touches errno.  pp__ret() below is the one
 * boundary that converts: the PP_EXPORT entry points that mirror a system
 * call return through it, in whichever file they live.
 *
 * It holds what every file needs and includes the rest, one header per
 * concern: pipe.h (the ring, its locks and waits), file.h (struct pp_file
 * and the endpoints), buf.h (buffer-op wrappers and buffer types).
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
#include <string.h>
#include <sys/types.h>
#include <time.h>

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
#define PP__ADD_MERGEABLE	0x200u	/* pp__pipe_add_buf: an anonymous page may stay CAN_MERGE */
#define SPLICE_F_ALL	(SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT)

#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#define min_t(t, a, b)	((t)(a) < (t)(b) ? (t)(a) : (t)(b))

extern size_t pp__page_size;		/* set once by the library constructor */
extern unsigned int pp__page_shift;

#include "pipe.h"
#include "file.h"
#include "buf.h"

/* A spinning waiter's pause (wait.c, shared.c). */
static inline void pp__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* CLOCK_MONOTONIC in ns: the spin and nap deadlines (wait.c, shared.c). */
static inline long long pp__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* -------------------------------------------------------------------------
 * Pipes between processes (shared.c): their ends are PP_KIND_SHARED files.
 */
#define PP_SHARED_SLOTS	256u	/* a shared pipe's ring: 1 MiB of pages, pipe-max-size */
int  pp__shared_pipe2(struct pp_file *ends[2], int flags);
int  pp__shared_fcntl(struct pp_file *f, int cmd, unsigned long arg);
int  pp__shared_fionread(struct pp_file *f, int *out);
void pp__shared_set_nonblock(struct pp_file *f, bool on);
/* A write end closing: no fast write of this process is inside, none to come (shared.c). */
void pp__shared_unbias(struct pp_file *f);
/* Tests: bias revocations of the pipe, and owners found dead in them (shared.c). */
void pp__shared_bias_stats(struct pp_file *f, unsigned int *revokes, unsigned int *dead);
/* Lends and reservations (shared.c), for shared_splice.c. */
bool    pp__shared_nonblock(const struct pp_file *f);
bool    pp__shared_same(const struct pp_file *a, const struct pp_file *b);
void    pp__shared_blocking(struct pp_file *f, bool on);
int     pp__shared_wait(struct pp_file *f);
int     pp__shared_event_fd(struct pp_file *f);
ssize_t pp__shared_lend(struct pp_file *f, struct iovec *iov, unsigned int nmax, size_t count,
			bool nonblock, bool packets, uint32_t *flags);
#define PP__LENT_WHOLE	0x80000000u	/* lend flags: the iovec holds all that is left of its slot */
void    pp__shared_consume(struct pp_file *f, size_t n);
unsigned int pp__shared_room(struct pp_file *f);
int     pp__shared_reserve(struct pp_file *f, unsigned int want, bool nonblock, void **pages,
			   uint32_t *idx);
ssize_t pp__shared_commit(struct pp_file *f, uint32_t *idx, unsigned int n, const size_t *lens,
			  const uint32_t *flags);
ssize_t pp__shared_read_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count);
int     pp__shared_read_done(struct pp_file *f, size_t consumed);
#define PP_LEASE_MAX	64u	/* pages one pp_write_lend() lends at most */
ssize_t pp__shared_write_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count);
int     pp__shared_write_done(struct pp_file *f, size_t filled);
/*
 * splice and tee on shared ends (shared_splice.c), after splice.c's checks;
 * vmsplice is vmsplice.c's.
 */
ssize_t pp__shared_splice_in(struct pp_file *in, off_t *ppos, struct pp_file *out, size_t len,
			     unsigned int flags);
ssize_t pp__shared_splice_out(struct pp_file *in, struct pp_file *out, off_t *ppos, size_t len,
			      unsigned int flags);
ssize_t pp__shared_splice_pipes(struct pp_file *in, struct pp_file *out, size_t len,
				unsigned int flags, bool tee);
/* splice.c's waits for an output descriptor's room. */
int  pp__splice_wait_output(struct pp_file *out, bool nonblock, bool now);
bool pp__splice_output_nonblock(struct pp_file *out, unsigned int flags);

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

/* The top of the user address space, as access_ok() knows it. */
#if defined(__x86_64__)
#define PP_TASK_SIZE	0x00007ffffffff000ull
#elif defined(__aarch64__)
#define PP_TASK_SIZE	(1ull << 48)
#else
#define PP_TASK_SIZE	UINTPTR_MAX
#endif

static inline bool pp__access_ok(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;

	return a + len >= a && a + len <= PP_TASK_SIZE;
}

/*
 * Sum an iovec array: -EINVAL for a bad count or a segment past ssize_t,
 * -EFAULT for a segment no user address can hold (access_ok).  A NULL
 * base is found at copy time, as the kernel finds it.
 *
 * The inline parts of this and of the copies below are what every read()
 * and write() of a few bytes runs: one segment, copied whole by one
 * memcpy.  Everything else goes to iov.c.
 */
ssize_t pp__iov_total_many(const struct iovec *iov, int iovcnt);

static inline ssize_t pp__iov_total(const struct iovec *iov, int iovcnt)
{
	/* access_ok() sees a lone segment cut to MAX_RW_COUNT (import_ubuf). */
	if (likely(iovcnt == 1 && iov && iov->iov_len <= (size_t)SSIZE_MAX)) {
		size_t len = min_t(size_t, iov->iov_len, PP_MAX_RW);

		return pp__access_ok(iov->iov_base, len) ? (ssize_t)len : -EFAULT;
	}
	return pp__iov_total_many(iov, iovcnt);
}

/* An iovec cursor (iov.c): the position equals the bytes consumed (CVE-2015-1805). */
struct pp_iov_iter {
	const struct iovec *iov;
	int nr;
	size_t off;		/* within iov[0] */
};

/* True if the segment the cursor is in takes len more bytes, whole. */
static inline bool pp__iter_fits(const struct pp_iov_iter *it, size_t len)
{
	return it->nr && it->iov->iov_base && it->iov->iov_len - it->off >= len;
}

size_t  pp__iter_copy_from_many(struct pp_iov_iter *it, char *dst, size_t len);
bool    pp__iter_plain(const struct pp_iov_iter *it, size_t n);
size_t  pp__iter_copy_iter(struct pp_iov_iter *dst, struct pp_iov_iter *src, size_t n);
void    pp__iter_prefault(const struct pp_iov_iter *it, size_t n);
ssize_t pp__iter_copy_buf_many(struct pp_pipe *p, struct pp_buf *buf, size_t off, size_t len,
			       struct pp_iov_iter *it);

/*
 * Copy len bytes out of the iterator; returns the bytes copied, fewer when
 * a segment has a NULL base (the fault the kernel would take there).
 */
static inline size_t pp__iter_copy_from(struct pp_iov_iter *it, char *dst, size_t len)
{
	if (likely(pp__iter_fits(it, len))) {
		memcpy(dst, (const char *)it->iov->iov_base + it->off, len);
		it->off += len;
		return len;
	}
	return pp__iter_copy_from_many(it, dst, len);
}

/*
 * Copy one buffer's bytes [off, off + len) into the iterator.  Memory the
 * iterator cannot take directly (a file buffer read by pread) goes straight
 * into the destination segment by segment.  Bytes copied (fewer when the
 * data behind the buffer shrank), -ENODATA if none was left, or -EFAULT
 * at a NULL segment, whatever was copied before it.  Memory the buffer
 * addresses is copied here as pp__buf_copy_out() would copy it.
 */
static inline ssize_t pp__iter_copy_buf(struct pp_pipe *p, struct pp_buf *buf, size_t off,
					size_t len, struct pp_iov_iter *it)
{
	if (likely(pp__iter_fits(it, len) && pp__buf_is_memory(buf))) {
		memcpy((char *)it->iov->iov_base + it->off,
		       (const char *)buf->page + buf->offset + off, len);
		it->off += len;
		return (ssize_t)len;
	}
	return pp__iter_copy_buf_many(p, buf, off, len, it);
}

#endif /* PP_INTERNAL_H */
