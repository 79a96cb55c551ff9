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

#endif /* PP_BUF_H */
