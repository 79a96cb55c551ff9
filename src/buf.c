// SPDX-License-Identifier: MIT
/*
 * buf.c - anonymous pages, their buffer operations, and the public wrappers
 * around buffer operations.
 *
 * An anonymous page is library memory with a reference count in a small
 * header in front of it.  write() fills them; tee and partial pipe-to-pipe
 * splices share them.  A page goes back to its pipe's page cache
 * (tmp_page, as in fs/pipe.c) only when the releasing buffer held the only
 * reference: a page another pipe can still see is never handed to a writer.
 * The cache holds up to a default ring's worth of pages (Linux keeps two)
 * so that a reader freeing a batch does not send them back to malloc.
 *
 * Behind the pipe's cache sits a per-thread one: pages allocated with no
 * pipe at hand (a descriptor read into fresh pages by splice_read, which
 * sees only a buffer array) and pages a full pipe cache turns away.
 * Without it a relay step that reads 64 pages from a socket and frees them
 * after sending makes glibc trim its arena (one madvise per trim) and the
 * next step fault every page in again.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE_HDR	64u	/* keeps the data cache-line aligned */

struct anon_page {
	atomic_uint refs;
};

size_t pp__page_size = 4096;
unsigned int pp__page_shift = 12;
unsigned int pp__page_ref_max = INT_MAX;

__attribute__((constructor)) static void page_size_init(void)
{
	long v = sysconf(_SC_PAGESIZE);

	if (v > 0 && !(v & (v - 1)))
		pp__page_size = (size_t)v;
	pp__page_shift = (unsigned int)__builtin_ctzl(pp__page_size);
}

static inline struct anon_page *page_hdr(void *page)
{
	return (struct anon_page *)((char *)page - PAGE_HDR);
}

/* A socket read's worth (256 KiB of 4 KiB pages) per thread. */
#define THREAD_PAGES	64

struct thread_pages {
	unsigned int nr;
	void *page[THREAD_PAGES];
};

static __thread struct thread_pages thread_pages;
static pthread_key_t thread_pages_key;
static pthread_once_t thread_pages_once = PTHREAD_ONCE_INIT;
static bool thread_pages_ok;

/* Runs in the exiting thread, whose TLS is still there. */
static void thread_pages_drain(void *arg)
{
	struct thread_pages *tp = arg;

	while (tp->nr)
		free(page_hdr(tp->page[--tp->nr]));
}

static void thread_pages_init(void)
{
	thread_pages_ok = pthread_key_create(&thread_pages_key, thread_pages_drain) == 0;
}

/* An unloaded library must leave no destructor behind (dlclose). */
__attribute__((destructor)) static void thread_pages_fini(void)
{
	if (thread_pages_ok) {
		pthread_key_delete(thread_pages_key);
		thread_pages_ok = false;
	}
	thread_pages_drain(&thread_pages);
}

unsigned int pp__thread_page_count(void)
{
	return thread_pages.nr;
}

static void *thread_page_take(void)
{
	struct thread_pages *tp = &thread_pages;

	return tp->nr ? tp->page[--tp->nr] : NULL;
}

static bool thread_page_keep(void *page)
{
	struct thread_pages *tp = &thread_pages;

	if (tp->nr == THREAD_PAGES)
		return false;
	if (!tp->nr) {
		/* The key's value only has to be non-NULL for the destructor to run. */
		pthread_once(&thread_pages_once, thread_pages_init);
		if (!thread_pages_ok || pthread_setspecific(thread_pages_key, tp))
			return false;
	}
	tp->page[tp->nr++] = page;
	return true;
}

void *pp__page_alloc(struct pp_pipe *p)
{
	struct anon_page *h;
	void *cached;

	if (p) {
		for (int i = 0; i < PP_TMP_PAGES; i++) {
			void *page;

			/* A plain load first: a locked exchange per empty slot adds up. */
			if (!atomic_load_explicit(&p->tmp_page[i], memory_order_relaxed))
				continue;
			page = atomic_exchange_explicit(&p->tmp_page[i], NULL, memory_order_acquire);
			if (page) {
				atomic_store_explicit(&page_hdr(page)->refs, 1, memory_order_relaxed);
				return page;
			}
		}
	}
	/* Injected failures count every allocation the pipe cache misses. */
	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	cached = thread_page_take();
	if (cached) {
		atomic_store_explicit(&page_hdr(cached)->refs, 1, memory_order_relaxed);
		return cached;
	}
	h = malloc(PAGE_HDR + pp__page_size);
	if (!h)
		return NULL;
	atomic_init(&h->refs, 1);
	return (char *)h + PAGE_HDR;
}

void pp__page_free(struct pp_pipe *p, void *page)
{
	if (p) {
		for (int i = 0; i < PP_TMP_PAGES; i++) {
			void *expect = NULL;

			if (atomic_load_explicit(&p->tmp_page[i], memory_order_relaxed))
				continue;
			if (atomic_compare_exchange_strong_explicit(&p->tmp_page[i], &expect, page,
								    memory_order_release,
								    memory_order_relaxed))
				return;
		}
	}
	if (!thread_page_keep(page))
		free(page_hdr(page));
}

void pp__pipe_free_tmp_pages(struct pp_pipe *p)
{
	for (int i = 0; i < PP_TMP_PAGES; i++) {
		void *page = atomic_exchange(&p->tmp_page[i], NULL);

		if (page)
			free(page_hdr(page));
	}
}

/* Refuses, never wraps (CVE-2019-11487). */
bool pp__page_get(void *page)
{
	atomic_uint *refs = &page_hdr(page)->refs;
	unsigned int old = atomic_load_explicit(refs, memory_order_relaxed);

	do {
		if (old >= pp__page_ref_max)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(refs, &old, old + 1,
							memory_order_relaxed,
							memory_order_relaxed));
	return true;
}

void pp__page_put(struct pp_pipe *p, void *page)
{
	atomic_uint *refs = &page_hdr(page)->refs;

	/*
	 * The only reference is ours, so nobody can take another (only a
	 * holder can): skip the locked decrement, the common case of a page
	 * one pipe wrote and read.
	 */
	if (atomic_load_explicit(refs, memory_order_acquire) == 1 ||
	    atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1)
		pp__page_free(p, page);
}

bool pp__page_only_ref(void *page)
{
	return atomic_load_explicit(&page_hdr(page)->refs, memory_order_acquire) == 1;
}

static void anon_buf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	pp__page_put(p, buf->page);
}

static bool anon_buf_try_steal(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	return pp__page_only_ref(buf->page);
}

static bool anon_buf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	return pp__page_get(buf->page);
}

PP_EXPORT const struct pp_buf_ops pp_anon_buf_ops = {
	.release	= anon_buf_release,
	.try_steal	= anon_buf_try_steal,
	.get		= anon_buf_get,
	.name		= "anon",
};

PP_EXPORT void *pp_page_alloc(void)
{
	void *page = pp__page_alloc(NULL);

	if (!page)
		errno = ENOMEM;
	return page;
}

PP_EXPORT void pp_page_put(void *page)
{
	if (page)
		pp__page_put(NULL, page);
}

PP_EXPORT size_t pp_page_size(void)
{
	return pp__page_size;
}

/*
 * Read a buffer's bytes [off, off + len) of its valid range into dst.
 * Returns the bytes copied, fewer only when the data behind the buffer has
 * shrunk (a truncated file), or -errno.
 */
ssize_t pp__buf_copy_out(struct pp_pipe *p, struct pp_buf *buf, size_t off, void *dst, size_t len)
{
	void *addr;
	off_t pos;
	int fd;

	if (!buf->ops->map && buf->page) {
		memcpy(dst, (const char *)buf->page + buf->offset + off, len);
		return (ssize_t)len;
	}
	if (pp__buf_origin(p, buf, &fd, &pos) == 0) {
		size_t done = 0;

		while (done < len) {
			int e = pp__fault(PP_FAULT_READ);
			ssize_t r = e ? e : pread(fd, (char *)dst + done, len - done,
						  pos + (off_t)(off + done));

			if (r < 0 && e == 0)
				r = -errno;
			if (r == -EINTR)
				continue;
			if (r < 0)
				return done ? (ssize_t)done : r;
			if (r == 0)
				break;
			done += (size_t)r;
		}
		return (ssize_t)done;
	}
	addr = pp__buf_map(p, buf);
	if (!addr)
		return -EIO;	/* the seed's oops: a failed map is an error, not a crash */
	memcpy(dst, (const char *)addr + buf->offset + off, len);
	pp__buf_unmap(p, buf, addr);
	return (ssize_t)len;
}

/* ---------------------------------------------------------------------- */

PP_EXPORT int pp_buf_confirm(struct pp_pipe *pipe, struct pp_buf *buf)
{
	if (!buf || !buf->ops)
		return -EINVAL;
	return pp__buf_confirm(pipe, buf);
}

PP_EXPORT void *pp_buf_map(struct pp_pipe *pipe, struct pp_buf *buf)
{
	if (!buf || !buf->ops)
		return NULL;
	return pp__buf_map(pipe, buf);
}

PP_EXPORT void pp_buf_unmap(struct pp_pipe *pipe, struct pp_buf *buf, void *addr)
{
	if (buf && buf->ops)
		pp__buf_unmap(pipe, buf, addr);
}

PP_EXPORT bool pp_buf_get(struct pp_pipe *pipe, struct pp_buf *buf)
{
	if (!buf || !buf->ops)
		return false;
	return pp__buf_get(pipe, buf);
}

PP_EXPORT bool pp_buf_try_steal(struct pp_pipe *pipe, struct pp_buf *buf)
{
	if (!buf || !buf->ops)
		return false;
	return pp__buf_try_steal(pipe, buf);
}

PP_EXPORT void pp_buf_release(struct pp_pipe *pipe, struct pp_buf *buf)
{
	if (buf && buf->ops)
		pp__buf_release(pipe, buf);
}
