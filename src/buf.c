// SPDX-License-Identifier: MIT
/*
 * buf.c - anonymous pages, their buffer operations, and the public wrappers
 * around buffer operations.
 *
 * An anonymous page is a real page: page-aligned library memory, so that
 * anything that needs one (O_DIRECT I/O on a splice in either direction,
 * lending a page to something that maps or pins it) can take it.  Pages
 * come from chunks of CHUNK_PAGES pages mapped with mmap and aligned to the
 * chunk's size, so a page finds its chunk by masking its address.  The
 * chunk's first page is its header: a reference count per page (a page
 * keeps no header of its own in front of its data), the chunk's free pages
 * and its place in the pool's list.  Pages 1..CHUNK_PAGES-1 are handed out.
 *
 * write() fills them; tee and partial pipe-to-pipe splices share them.  A
 * page goes back to its pipe's page cache (tmp_page, as in fs/pipe.c) only
 * when the releasing buffer held the only reference: a page another pipe
 * can still see is never handed to a writer.
 *
 * Behind the pipe's cache sits a per-thread one: pages allocated with no
 * pipe at hand (a descriptor read into fresh pages by splice_read, which
 * sees only a buffer array) and pages a full pipe cache turns away.
 * Without it a relay step that reads 64 pages from a socket and frees them
 * after sending would take the pool's lock once per page.  The thread cache
 * refills and spills in batches, so the pool's lock is taken once per batch.
 *
 * Behind both sits the pool: one mutex, a list of chunks with free pages.
 * A chunk whose pages are all free is unmapped, except one kept spare so
 * that a workload hovering at a chunk boundary does not map and unmap on
 * every step.
 *
 * Shrinking: a thread cache is "unused" when its thread neither took a page
 * from it nor gave one to it between two sweeps.  A sweep runs on the pool's
 * slow path (a batch refill or spill), at most once per TRIM_INTERVAL_NS by
 * a coarse clock read only there, and gives back to the pool the locked
 * part (below) of every cache that stayed unused since the previous sweep:
 * an idle thread's pages go to the threads that are asking the pool for
 * pages.  Since the sweeper is another thread, that part has a mutex.  In
 * front of it sit THREAD_HOT pages that only the owner touches, with no
 * lock: a pipe that empties and fills again on one CPU hands a ring's worth
 * of pages through the thread cache per turn, and a mutex pair per page
 * was a tenth of a 4 KiB message's cost.  Pages move between the two parts
 * in batches, so the mutex is taken once per THREAD_HOT pages or so; the
 * hot part is what a sweep leaves an idle thread, as a sweep that spared a
 * few pages did before.  Lock order: the registry, a cache, the pool.
 * A thread's cache goes back to the pool when the thread exits.  The locks
 * are held across fork(), as malloc's are, so that a child can allocate.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PP_ASAN 1
#endif
#endif
#ifdef PP_ASAN
#include <sanitizer/asan_interface.h>
/* A page in the pool or a thread cache is poisoned: a use after free shows. */
#define page_poison(a, n)	ASAN_POISON_MEMORY_REGION((a), (n))
#define page_unpoison(a, n)	ASAN_UNPOISON_MEMORY_REGION((a), (n))
#else
#define page_poison(a, n)	((void)(a), (void)(n))
#define page_unpoison(a, n)	((void)(a), (void)(n))
#endif

#define CHUNK_PAGES	64u
#define CHUNK_SIZE	((size_t)CHUNK_PAGES << pp__page_shift)

struct chunk {
	struct chunk *next, *prev;	/* pool.avail, while a page is free; pool.lock */
	uint64_t free_mask;		/* bit i: page i is in the pool; pool.lock */
	unsigned int nr_free;		/* pool.lock */
	atomic_uint refs[CHUNK_PAGES];	/* refs[0]: the header, unused */
};

_Static_assert(CHUNK_PAGES == 64, "free_mask has a bit per page");
_Static_assert(sizeof(struct chunk) <= 4096, "the header fits the smallest page");

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

static inline struct chunk *page_chunk(void *page)
{
	return (struct chunk *)((uintptr_t)page & ~(uintptr_t)(CHUNK_SIZE - 1));
}

static inline unsigned int page_index(struct chunk *c, void *page)
{
	return (unsigned int)(((uintptr_t)page - (uintptr_t)c) >> pp__page_shift);
}

static inline atomic_uint *page_refs(void *page)
{
	struct chunk *c = page_chunk(page);

	return &c->refs[page_index(c, page)];
}

/* ---------------------------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	struct chunk *head, *tail;	/* chunks with a free page */
	size_t nr_chunks;		/* mapped */
	size_t nr_free;			/* free pages in them */
	unsigned int nr_empty;		/* chunks with every page free: at most one */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void chunk_link_tail(struct chunk *c)
{
	c->next = NULL;
	c->prev = pool.tail;
	if (pool.tail)
		pool.tail->next = c;
	else
		pool.head = c;
	pool.tail = c;
}

static void chunk_unlink(struct chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		pool.head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		pool.tail = c->prev;
}

/*
 * Map twice the size and trim, for an aligned chunk.  pool.lock held: three
 * system calls once per CHUNK_PAGES - 1 pages, rarer than a second lock dance.
 */
static struct chunk *chunk_map(void)
{
	size_t size = CHUNK_SIZE;
	char *m = mmap(NULL, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t start;
	struct chunk *c;

	if (m == MAP_FAILED)
		return NULL;
	start = ((uintptr_t)m + size - 1) & ~(uintptr_t)(size - 1);
	if (start > (uintptr_t)m)
		munmap(m, start - (uintptr_t)m);
	if (start + size < (uintptr_t)m + 2 * size)
		munmap((void *)(start + size), (uintptr_t)m + 2 * size - (start + size));
	c = (struct chunk *)start;
	c->free_mask = ~(uint64_t)1;
	c->nr_free = CHUNK_PAGES - 1;
	page_poison((char *)c + pp__page_size, size - pp__page_size);
	chunk_link_tail(c);
	pool.nr_chunks++;
	pool.nr_free += CHUNK_PAGES - 1;
	pool.nr_empty++;
	return c;
}

/* Up to n pages from the pool, still poisoned; fewer only when mmap fails. */
static unsigned int pool_get(void **pages, unsigned int n)
{
	unsigned int got = 0;

	pthread_mutex_lock(&pool.lock);
	while (got < n) {
		struct chunk *c = pool.head;

		if (!c && !(c = chunk_map()))
			break;
		if (c->nr_free == CHUNK_PAGES - 1)
			pool.nr_empty--;
		while (c->free_mask && got < n) {
			unsigned int i = (unsigned int)__builtin_ctzll(c->free_mask);
			void *page = (char *)c + ((size_t)i << pp__page_shift);

			c->free_mask &= ~((uint64_t)1 << i);
			c->nr_free--;
			pool.nr_free--;
			pages[got++] = page;
		}
		if (!c->nr_free)
			chunk_unlink(c);
	}
	pthread_mutex_unlock(&pool.lock);
	return got;
}

static void pool_put(void *const *pages, unsigned int n)
{
	if (!n)
		return;
	pthread_mutex_lock(&pool.lock);
	for (unsigned int k = 0; k < n; k++) {
		struct chunk *c = page_chunk(pages[k]);
		unsigned int i = page_index(c, pages[k]);

		page_poison(pages[k], pp__page_size);
		c->free_mask |= (uint64_t)1 << i;
		pool.nr_free++;
		if (c->nr_free++ == 0)
			chunk_link_tail(c);
		if (c->nr_free < CHUNK_PAGES - 1)
			continue;
		chunk_unlink(c);
		if (!pool.nr_empty) {
			/* The spare goes last: partly used chunks are drained first. */
			pool.nr_empty++;
			chunk_link_tail(c);
			continue;
		}
		pool.nr_chunks--;
		pool.nr_free -= CHUNK_PAGES - 1;
		page_unpoison(c, CHUNK_SIZE);	/* the next mapping there starts clean */
		munmap(c, CHUNK_SIZE);
	}
	pthread_mutex_unlock(&pool.lock);
}

void pp__page_pool_stats(size_t *chunks, size_t *in_use)
{
	pthread_mutex_lock(&pool.lock);
	*chunks = pool.nr_chunks;
	*in_use = pool.nr_chunks * (CHUNK_PAGES - 1) - pool.nr_free;
	pthread_mutex_unlock(&pool.lock);
}

/* ---------------------------------------------------------------------- */

/* A socket read's worth (256 KiB of 4 KiB pages) per thread. */
#define THREAD_PAGES	64
#define THREAD_REFILL	16	/* pages a refill takes from the pool at once */
#define THREAD_HOT	4	/* the owner's, lock-free: what a sweep leaves */
#define TRIM_INTERVAL_NS	1000000000LL

struct thread_pages {
	unsigned int hot_nr;		/* owner only */
	void *hot[THREAD_HOT];		/* owner only: no sweep reaches these */
	atomic_bool used;		/* taken from or given to since the last sweep */
	bool listed;			/* owner only: in the registry */
	bool dead;			/* owner only: its thread is exiting */
	pthread_mutex_t lock;		/* the owner, or a sweep */
	unsigned int nr;		/* lock */
	struct thread_pages *next, *prev;	/* registry.lock */
	void *page[THREAD_PAGES];	/* lock */
};

static __thread struct thread_pages thread_pages = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_key_t thread_pages_key;
static pthread_once_t thread_pages_once = PTHREAD_ONCE_INIT;
static bool thread_pages_ok;

static struct {
	pthread_mutex_t lock;
	struct thread_pages *head;
} registry = { .lock = PTHREAD_MUTEX_INITIALIZER };

static atomic_llong trim_next;	/* CLOCK_MONOTONIC_COARSE ns of the next sweep */

static void thread_pages_detach(struct thread_pages *tp)
{
	if (!tp->listed)
		return;
	pthread_mutex_lock(&registry.lock);
	if (tp->prev)
		tp->prev->next = tp->next;
	else
		registry.head = tp->next;
	if (tp->next)
		tp->next->prev = tp->prev;
	pthread_mutex_unlock(&registry.lock);
	tp->listed = false;
	/* No sweep can reach it now. */
	pthread_mutex_lock(&tp->lock);
	pool_put(tp->page, tp->nr);
	tp->nr = 0;
	pthread_mutex_unlock(&tp->lock);
	pool_put(tp->hot, tp->hot_nr);
	tp->hot_nr = 0;
}

/*
 * Runs in the exiting thread, whose TLS is still there.  A page freed by a
 * later destructor goes straight to the pool: a cache listed again after
 * this would outlive its thread's TLS.
 */
static void thread_pages_drain(void *arg)
{
	struct thread_pages *tp = arg;

	tp->dead = true;
	thread_pages_detach(tp);
}

static void thread_pages_init(void)
{
	thread_pages_ok = pthread_key_create(&thread_pages_key, thread_pages_drain) == 0;
}

/* An unloaded library must leave no destructor behind (dlclose). */
__attribute__((destructor)) static void thread_pages_fini(void)
{
	/* No sweep from here on: a thread still running may not reach its destructor. */
	atomic_store(&trim_next, LLONG_MAX);
	if (thread_pages_ok) {
		pthread_key_delete(thread_pages_key);
		thread_pages_ok = false;
	}
	thread_pages_drain(&thread_pages);
}

/*
 * fork: a lock another thread held at the fork would stay held in the
 * child forever.  Hold them all across the fork, in the lock order; the
 * child keeps only its own thread's cache (the others' threads are gone,
 * their pages stay out of the pool, as memory any allocator's caches held).
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&registry.lock);
	pthread_mutex_lock(&thread_pages.lock);
	pthread_mutex_lock(&pool.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&pool.lock);
	pthread_mutex_unlock(&thread_pages.lock);
	pthread_mutex_unlock(&registry.lock);
}

static void fork_child(void)
{
	struct thread_pages *tp = &thread_pages;

	/* This thread took the locks before the fork: nobody else can hold them. */
	registry.head = tp->listed ? tp : NULL;
	tp->next = tp->prev = NULL;
	pthread_mutex_unlock(&pool.lock);
	pthread_mutex_unlock(&tp->lock);
	pthread_mutex_unlock(&registry.lock);
}

__attribute__((constructor)) static void fork_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* The thread's cache, listed for sweeps; false: pages go to the pool. */
static bool thread_pages_attach(struct thread_pages *tp)
{
	if (tp->listed)
		return true;
	if (tp->dead)
		return false;
	/* The key's value only has to be non-NULL for the destructor to run. */
	pthread_once(&thread_pages_once, thread_pages_init);
	if (!thread_pages_ok || pthread_setspecific(thread_pages_key, tp))
		return false;
	pthread_mutex_lock(&registry.lock);
	tp->prev = NULL;
	tp->next = registry.head;
	if (registry.head)
		registry.head->prev = tp;
	registry.head = tp;
	pthread_mutex_unlock(&registry.lock);
	tp->listed = true;
	return true;
}

/* Give back what unused caches hold: see the header comment. */
void pp__page_trim(void)
{
	pthread_mutex_lock(&registry.lock);
	for (struct thread_pages *tp = registry.head; tp; tp = tp->next) {
		pthread_mutex_lock(&tp->lock);
		/* Relaxed: a use the exchange misses is one the next sweep sees. */
		if (!atomic_exchange_explicit(&tp->used, false, memory_order_relaxed)) {
			pool_put(tp->page, tp->nr);
			tp->nr = 0;
		}
		pthread_mutex_unlock(&tp->lock);
	}
	pthread_mutex_unlock(&registry.lock);
}

/* The pool's slow path was taken: a sweep, if one is due.  No lock held. */
static void trim_maybe(void)
{
	struct timespec ts;
	long long now, next;

	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts))
		return;
	now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	next = atomic_load_explicit(&trim_next, memory_order_relaxed);
	if (now < next ||
	    !atomic_compare_exchange_strong_explicit(&trim_next, &next, now + TRIM_INTERVAL_NS,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	pp__page_trim();
}

unsigned int pp__thread_page_count(void)
{
	struct thread_pages *tp = &thread_pages;
	unsigned int nr;

	pthread_mutex_lock(&tp->lock);
	nr = tp->nr;
	pthread_mutex_unlock(&tp->lock);
	return nr + tp->hot_nr;
}

/* The owner, on each use: a store only when a sweep cleared the mark. */
static inline void thread_pages_used(struct thread_pages *tp)
{
	if (!atomic_load_explicit(&tp->used, memory_order_relaxed))
		atomic_store_explicit(&tp->used, true, memory_order_relaxed);
}

static void *thread_page_take(void)
{
	struct thread_pages *tp = &thread_pages;
	bool slow = false;
	void *page = NULL;

	if (!thread_pages_attach(tp)) {
		if (!pool_get(&page, 1))
			return NULL;
		page_unpoison(page, pp__page_size);
		return page;
	}
	thread_pages_used(tp);
	if (!tp->hot_nr) {
		/* Refill the hot part from the locked one, that from the pool. */
		pthread_mutex_lock(&tp->lock);
		if (!tp->nr) {
			tp->nr = pool_get(tp->page, THREAD_REFILL);
			slow = true;
		}
		tp->hot_nr = min_t(unsigned int, tp->nr, THREAD_HOT);
		tp->nr -= tp->hot_nr;
		/* The warmest, last given, is taken first. */
		memcpy(tp->hot, tp->page + tp->nr, tp->hot_nr * sizeof(tp->hot[0]));
		pthread_mutex_unlock(&tp->lock);
		if (slow)
			trim_maybe();
		if (!tp->hot_nr)
			return NULL;
	}
	page = tp->hot[--tp->hot_nr];
	page_unpoison(page, pp__page_size);
	return page;
}

static bool thread_page_keep(void *page)
{
	struct thread_pages *tp = &thread_pages;
	bool slow = false;

	if (!thread_pages_attach(tp))
		return false;
	thread_pages_used(tp);
	page_poison(page, pp__page_size);
	if (tp->hot_nr < THREAD_HOT) {
		tp->hot[tp->hot_nr++] = page;
		return true;
	}
	/* The hot part is full: it moves to the locked part, oldest first. */
	pthread_mutex_lock(&tp->lock);
	if (tp->nr + THREAD_HOT > THREAD_PAGES) {
		/* Spill the older half: the newer pages are warmer in the cache. */
		pool_put(tp->page, THREAD_PAGES / 2);
		memmove(tp->page, tp->page + THREAD_PAGES / 2,
			(tp->nr - THREAD_PAGES / 2) * sizeof(tp->page[0]));
		tp->nr -= THREAD_PAGES / 2;
		slow = true;
	}
	memcpy(tp->page + tp->nr, tp->hot, THREAD_HOT * sizeof(tp->hot[0]));
	tp->nr += THREAD_HOT;
	pthread_mutex_unlock(&tp->lock);
	tp->hot[0] = page;
	tp->hot_nr = 1;
	if (slow)
		trim_maybe();
	return true;
}

/*
 * A page handed out has one reference.  A free page has no holder, so
 * nobody else writes its count; it is usually 1 already (pp__page_put's
 * fast path leaves it), and then it is not stored: the reader that freed
 * the page read that line last, and a store would take it from its CPU.
 */
static inline void page_refs_reset(void *page)
{
	atomic_uint *refs = page_refs(page);

	if (atomic_load_explicit(refs, memory_order_relaxed) != 1)
		atomic_store_explicit(refs, 1, memory_order_relaxed);
}

void *pp__page_alloc(struct pp_pipe *p)
{
	void *page;

	if (p) {
		for (int i = 0; i < PP_TMP_PAGES; i++) {
			/* A plain load first: a locked exchange per empty slot adds up. */
			if (!atomic_load_explicit(&p->tmp_page[i], memory_order_relaxed))
				continue;
			page = atomic_exchange_explicit(&p->tmp_page[i], NULL, memory_order_acquire);
			if (page) {
				page_refs_reset(page);
				return page;
			}
		}
	}
	/* Injected failures count every allocation the pipe cache misses. */
	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	page = thread_page_take();
	if (page)
		page_refs_reset(page);
	return page;
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
		pool_put(&page, 1);
}

/*
 * A pipe left holding a drained slot keeps its page as a spare already,
 * which is what the next write takes: its cached pages go to this thread's
 * cache, where the pool gets them back in batches if nobody uses them.
 * So an idle pipe that carried traffic keeps one page, not three.  This
 * is pp__pipe_trim_tmp_pages() (buf.h) once it found a page kept.
 */
void pp__pipe_trim_tmp_pages_now(struct pp_pipe *p)
{
	for (int i = 0; i < PP_TMP_PAGES; i++) {
		void *page;

		/* A plain load first: the common case is an empty cache. */
		if (!atomic_load_explicit(&p->tmp_page[i], memory_order_relaxed))
			continue;
		page = atomic_exchange_explicit(&p->tmp_page[i], NULL, memory_order_acquire);
		if (page)
			pp__page_free(NULL, page);
	}
}

void pp__pipe_free_tmp_pages(struct pp_pipe *p)
{
	void *pages[PP_TMP_PAGES];
	unsigned int n = 0;

	for (int i = 0; i < PP_TMP_PAGES; i++) {
		void *page = atomic_exchange(&p->tmp_page[i], NULL);

		if (page)
			pages[n++] = page;
	}
	pool_put(pages, n);
}

/* Refuses, never wraps (CVE-2019-11487). */
bool pp__page_get(void *page)
{
	atomic_uint *refs = page_refs(page);
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
	atomic_uint *refs = page_refs(page);

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
	return atomic_load_explicit(page_refs(page), memory_order_acquire) == 1;
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

	switch (pp__buf_class(buf)) {
	case PP_BUF_MEMORY:
		memcpy(dst, (const char *)buf->page + buf->offset + off, len);
		return (ssize_t)len;
	case PP_BUF_KERNEL:
		return -EIO;	/* only read(2) takes them, in order: kbuf.c */
	case PP_BUF_FILE:
	case PP_BUF_MAPPED:
		break;
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
