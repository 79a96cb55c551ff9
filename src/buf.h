/* SPDX-License-Identifier: MIT */
/*
 * buf.h - buffers: the wrappers that supply the ops' defaults, anonymous
 * pages, file pages, user memory.  Included by internal.h.
 */
#ifndef PP_BUF_H
#define PP_BUF_H

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
void pp__lease_free(struct pp__lease *lease);

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
void  pp__pipe_trim_tmp_pages_now(struct pp_pipe *p);

/*
 * A drained slot is the spare: let go of the kept pages.  Plain loads
 * first, inline: the common case, every read that drains the pipe, finds
 * the cache empty.
 */
static inline void pp__pipe_trim_tmp_pages(struct pp_pipe *p)
{
	for (int i = 0; i < PP_TMP_PAGES; i++)
		if (atomic_load_explicit(&p->tmp_page[i], memory_order_relaxed)) {
			pp__pipe_trim_tmp_pages_now(p);
			return;
		}
}
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

/*
 * Kernel-resident buffers (kbuf.c): bytes waiting in the pipe's private
 * kernel pipe.  PP__EKBUF, never returned to a caller, says "not this
 * way": the caller copies, or materializes and goes on.
 */
#define PP__EKBUF	(-4096)
struct pp__kpipe;
extern const struct pp_buf_ops pp__kernel_buf_ops;
struct pp__kpipe *pp__kpipe_get(struct pp_pipe *p);	/* wr_mutex held */
void     pp__kpipe_free(struct pp__kpipe *kp);
void     pp__kpipe_resize(struct pp_pipe *p);	/* both side locks held */
bool     pp__kbuf_source(struct pp_file *in);
extern bool pp__kbuf_disabled;		/* tests: sources go the copying way */
ssize_t  pp__kbuf_splice_in(struct pp_file *in, struct pp_file *out, size_t len,
			    unsigned int flags);
unsigned int pp__kbuf_run(const struct pp_buf *bufs, unsigned int nr, size_t max,
			  struct pp__kpipe **kp, size_t *bytes);
ssize_t  pp__kbuf_splice_out(struct pp__kpipe *kp, int fd, off_t *pos, size_t len,
			     unsigned int flags);
struct pp_iov_iter;
ssize_t  pp__kbuf_read(struct pp_pipe *p, struct pp__kpipe *kp, struct pp_iov_iter *it,
		       size_t len, size_t *discarded, bool *packet_end);
int      pp__kbuf_materialize(struct pp_pipe *p, size_t want, unsigned int max);
ssize_t  pp__kbuf_move(struct pp_buf *ibuf, struct pp_pipe *op, size_t len);
ssize_t  pp__kbuf_tee(struct pp__kpipe *ikp, struct pp_pipe *op, size_t bytes,
		      struct pp__kpipe **okp);

/*
 * What a buffer is, for the code that moves its bytes: memory it can
 * address, memory behind ->map, a file's bytes (->origin), or bytes in the
 * kernel.  The one place that derives it from which ops are set.
 */
enum pp__buf_class {
	PP_BUF_MEMORY,
	PP_BUF_MAPPED,
	PP_BUF_FILE,
	PP_BUF_KERNEL,
};

/* PP_BUF_MEMORY, without asking ->origin what the rest are. */
static inline bool pp__buf_is_memory(const struct pp_buf *buf)
{
	return buf->ops != &pp__kernel_buf_ops && !buf->ops->map && buf->page;
}

static inline enum pp__buf_class pp__buf_class(const struct pp_buf *buf)
{
	int fd;
	off_t pos;

	if (pp__buf_is_memory(buf))
		return PP_BUF_MEMORY;
	if (buf->ops == &pp__kernel_buf_ops)
		return PP_BUF_KERNEL;
	if (buf->ops->map)
		return PP_BUF_MAPPED;
	if (buf->ops->origin && buf->ops->origin(NULL, buf, &fd, &pos) == 0)
		return PP_BUF_FILE;
	return PP_BUF_MAPPED;	/* ->map's default: the page, which is NULL: EIO */
}

/* Copies: the one place that knows how to read a buffer's bytes. */
ssize_t pp__buf_copy_out(struct pp_pipe *p, struct pp_buf *buf, size_t off, void *dst, size_t len);

#endif /* PP_BUF_H */
