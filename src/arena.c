// SPDX-License-Identifier: MIT
/*
 * arena.c - the shared arena: its layout, creation, mapping, and its pages
 * (arena.h; docs/shared-pipes.md).  The shared pipe (shared.c) keeps its
 * ring control, its slots and its pages here.
 *
 * The free list is a Treiber stack of page indices: the head word holds a
 * tag in its upper half and an index in its lower half, and next[] links
 * the free pages.
 *
 *   pop:  h = load(head) (acquire); i = index(h); n = next[i];
 *         CAS(head, h -> (tag(h) + 1, n)) (acquire): i is ours
 *   push: h = load(head); next[i] = index(h);
 *         CAS(head, h -> (tag(h) + 1, i)) (release: next[i] and the page's
 *         bytes before the push that shows them)
 *
 * The tag changes at every successful CAS, so a pop that read next[i]
 * before i was popped and pushed back by others fails its CAS instead of
 * installing a stale link (ABA).  A pop reads next[i] for a page it does not
 * own yet; what it reads may be garbage only in that case, and then its CAS
 * fails.  A link that is out of range when the CAS would succeed is
 * corruption.
 *
 * The reference count of a page goes 0 -> 1 only by the pop that took it
 * from the free list (a CAS, so a page the list hands out twice because a
 * peer corrupted the links is found), up by get, down by put; the put that
 * takes it to 0 pushes the page.
 */
#include "internal.h"
#include "arena.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * test/arena-aba compiles this file into itself with a hook here, to run
 * other pops and pushes between a pop's reading of the head and its CAS.
 */
#ifndef PP__ARENA_POP_STEP
#define PP__ARENA_POP_STEP(a)	do { } while (0)
#endif

#define ARENA_MAGIC	"ppArena1"
#define ARENA_VERSION	3u	/* 3: slots of byte counts and page | base (shared.c, the ring); 2: a 1024-byte control area */
#define ARENA_SEALS	(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* A CAS that fails this often in a row has a peer changing the word on purpose. */
#define ARENA_CAS_MAX	(1u << 20)
#define ARENA_REF_MAX	(1u << 30)	/* refcount overflow: refused, not wrapped */
#define ARENA_MAX_PAGES	(1u << 24)

/* The header, at offset 0: written once by the creator, then only the atomics. */
struct arena_hdr {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint32_t npages;
	uint32_t nslots;
	uint64_t size;
	_Alignas(64) uint64_t free_head;	/* atomic: tag << 32 | index */
	_Alignas(64) uint32_t poisoned;		/* atomic: someone found it corrupt */
};

static struct arena_hdr *hdr(const struct pp__arena *a)
{
	return (struct arena_hdr *)a->base;
}

static uint32_t *refs(const struct pp__arena *a)
{
	return (uint32_t *)(a->base + a->lay.refs_off);
}

static uint32_t *next_of(const struct pp__arena *a)
{
	return (uint32_t *)(a->base + a->lay.next_off);
}

static size_t align_up(size_t n, size_t to)
{
	return (n + to - 1) & ~(to - 1);
}

int pp__arena_layout(struct pp__arena_layout *lay, uint32_t page_size, uint32_t npages,
		     uint32_t nslots)
{
	size_t off;

	if (page_size != pp_page_size() || !npages || npages > ARENA_MAX_PAGES || !nslots ||
	    nslots > ARENA_MAX_PAGES || (nslots & (nslots - 1)))
		return -EINVAL;
	lay->page_size = page_size;
	lay->npages = npages;
	lay->nslots = nslots;
	off = align_up(sizeof(struct arena_hdr), 64);
	lay->refs_off = off;
	off = align_up(off + (size_t)npages * sizeof(uint32_t), 64);
	lay->next_off = off;
	off = align_up(off + (size_t)npages * sizeof(uint32_t), 64);
	lay->ctrl_off = off;
	off += PP_ARENA_CTRL_SIZE;
	lay->slots_off = off;
	off = align_up(off + (size_t)nslots * PP_ARENA_SLOT_SIZE, page_size);
	lay->pages_off = off;
	lay->size = off + (size_t)npages * page_size;
	return 0;
}

/* Found corrupt: say so in the arena for the others, and here for good. */
static int poison(struct pp__arena *a)
{
	a->poisoned = 1;
	__atomic_store_n(&hdr(a)->poisoned, 1, __ATOMIC_RELEASE);
	return -EIO;
}

int pp__arena_poison(struct pp__arena *a)
{
	return poison(a);
}

int pp__arena_poisoned(const struct pp__arena *a)
{
	return a->poisoned || __atomic_load_n(&hdr(a)->poisoned, __ATOMIC_ACQUIRE);
}

static int map_fd(struct pp__arena *a, int fd, size_t size)
{
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (base == MAP_FAILED)
		return -errno;
	a->base = base;
	a->fd = fd;
	a->poisoned = 0;
	return 0;
}

int pp__arena_create(struct pp__arena *a, uint32_t npages, uint32_t nslots)
{
	struct arena_hdr *h;
	uint32_t *next;
	int fd, err;

	err = pp__arena_layout(&a->lay, (uint32_t)pp_page_size(), npages, nslots);
	if (err)
		return err;
	fd = memfd_create("pagepipe-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)a->lay.size) || fcntl(fd, F_ADD_SEALS, ARENA_SEALS)) {
		err = -errno;
		close(fd);
		return err;
	}
	err = map_fd(a, fd, a->lay.size);
	if (err) {
		close(fd);
		return err;
	}
	/* The memfd is zeroed: refs are 0 (free); link the list 0 -> 1 -> ... */
	next = next_of(a);
	for (uint32_t i = 0; i < npages; i++)
		next[i] = i + 1 < npages ? i + 1 : PP_ARENA_NIL;
	h = hdr(a);
	h->version = ARENA_VERSION;
	h->page_size = a->lay.page_size;
	h->npages = npages;
	h->nslots = nslots;
	h->size = a->lay.size;
	__atomic_store_n(&h->free_head, 0, __ATOMIC_RELAXED);
	memcpy(h->magic, ARENA_MAGIC, sizeof(h->magic));
	/* Importers get the descriptor only after this returns; no ordering needed. */
	return 0;
}

/*
 * The header is read once, here, into this process's own layout, which is
 * checked against the descriptor's real size and seals: an arena that could
 * still shrink could make our mapping fault (SIGBUS) at a peer's whim.
 */
int pp__arena_map(struct pp__arena *a, int fd)
{
	struct arena_hdr h;
	struct stat st;
	int seals, dup_fd, err;
	ssize_t n;

	if (fstat(fd, &st))
		return -errno;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return -EINVAL;		/* not a memfd, or one made without sealing */
	if ((seals & ARENA_SEALS) != ARENA_SEALS || !S_ISREG(st.st_mode))
		return -EINVAL;
	n = pread(fd, &h, sizeof(h), 0);
	if (n != (ssize_t)sizeof(h))
		return n < 0 ? -errno : -EINVAL;
	if (memcmp(h.magic, ARENA_MAGIC, sizeof(h.magic)) || h.version != ARENA_VERSION)
		return -EINVAL;
	err = pp__arena_layout(&a->lay, h.page_size, h.npages, h.nslots);
	if (err)
		return err;
	if (a->lay.size != h.size || (uint64_t)st.st_size != h.size)
		return -EINVAL;
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return -errno;
	err = map_fd(a, dup_fd, a->lay.size);
	if (err)
		close(dup_fd);
	return err;
}

void pp__arena_unmap(struct pp__arena *a)
{
	if (!a->base)
		return;
	munmap(a->base, a->lay.size);
	close(a->fd);
	a->base = NULL;
	a->fd = -1;
}

void *pp__arena_page(struct pp__arena *a, uint32_t idx)
{
	if (idx >= a->lay.npages) {
		poison(a);
		return NULL;
	}
	return a->base + a->lay.pages_off + (size_t)idx * a->lay.page_size;
}

int pp__arena_page_alloc(struct pp__arena *a, uint32_t *idx)
{
	uint64_t *head = &hdr(a)->free_head;
	uint64_t h = __atomic_load_n(head, __ATOMIC_ACQUIRE);

	if (pp__arena_poisoned(a))
		return -EIO;
	for (uint32_t tries = 0; tries < ARENA_CAS_MAX; tries++) {
		uint32_t i = (uint32_t)h, n, zero = 0;
		uint64_t want;

		if (i == PP_ARENA_NIL)
			return -ENOMEM;
		if (i >= a->lay.npages)
			return poison(a);
		n = __atomic_load_n(&next_of(a)[i], __ATOMIC_RELAXED);
		PP__ARENA_POP_STEP(a);
		want = ((h >> 32) + 1) << 32 | n;
		if (!__atomic_compare_exchange_n(head, &h, want, false, __ATOMIC_ACQUIRE,
						 __ATOMIC_ACQUIRE))
			continue;
		/* Ours.  A link out of range is corruption: the next pop finds it too. */
		if (n != PP_ARENA_NIL && n >= a->lay.npages)
			return poison(a);
		/* A page the list handed out while still in use: corrupt links. */
		if (!__atomic_compare_exchange_n(&refs(a)[i], &zero, 1, false, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			return poison(a);
		*idx = i;
		return 0;
	}
	return poison(a);
}

/*
 * Up to n pages in one pop.  The walk reads links from the head as a pop
 * reads one: a link of a page that another pop took meanwhile may be
 * anything, but then the head's tag has changed and the CAS fails; when it
 * succeeds, every page walked was at the front of the list all along, so
 * the links read were theirs.  Returns the pages taken (at least 1),
 * -ENOMEM when none is free, or -EIO.
 */
int pp__arena_page_alloc_many(struct pp__arena *a, uint32_t *idx, unsigned int n)
{
	uint64_t *head = &hdr(a)->free_head;
	uint64_t h = __atomic_load_n(head, __ATOMIC_ACQUIRE);

	if (pp__arena_poisoned(a))
		return -EIO;
	for (uint32_t tries = 0; tries < ARENA_CAS_MAX; tries++) {
		uint32_t i = (uint32_t)h;
		unsigned int k = 0;
		bool bad = false;

		if (i == PP_ARENA_NIL)
			return -ENOMEM;
		while (k < n && i != PP_ARENA_NIL) {
			if (i >= a->lay.npages) {
				bad = true;	/* stale, or corrupt: the CAS below tells */
				break;
			}
			idx[k++] = i;
			i = __atomic_load_n(&next_of(a)[i], __ATOMIC_RELAXED);
		}
		PP__ARENA_POP_STEP(a);
		if (bad) {
			uint64_t now = __atomic_load_n(head, __ATOMIC_ACQUIRE);

			if (now == h)
				return poison(a);	/* the list as it stands holds it */
			h = now;
			continue;
		}
		if (!__atomic_compare_exchange_n(head, &h, ((h >> 32) + 1) << 32 | i, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			continue;
		if (i != PP_ARENA_NIL && i >= a->lay.npages)
			return poison(a);
		for (unsigned int j = 0; j < k; j++) {
			uint32_t zero = 0;

			if (!__atomic_compare_exchange_n(&refs(a)[idx[j]], &zero, 1, false,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return poison(a);
		}
		return (int)k;
	}
	return poison(a);
}

static int push(struct pp__arena *a, uint32_t idx)
{
	uint64_t *head = &hdr(a)->free_head;
	uint64_t h = __atomic_load_n(head, __ATOMIC_RELAXED);

	for (uint32_t tries = 0; tries < ARENA_CAS_MAX; tries++) {
		uint64_t want = ((h >> 32) + 1) << 32 | idx;

		__atomic_store_n(&next_of(a)[idx], (uint32_t)h, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(head, &h, want, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return 0;
	}
	return poison(a);
}

int pp__arena_page_get(struct pp__arena *a, uint32_t idx)
{
	uint32_t old;

	if (pp__arena_poisoned(a))
		return -EIO;
	if (idx >= a->lay.npages)
		return poison(a);
	old = __atomic_load_n(&refs(a)[idx], __ATOMIC_RELAXED);
	do {
		if (!old)
			return poison(a);	/* a reference to a free page */
		if (old >= ARENA_REF_MAX)
			return -EOVERFLOW;
	} while (!__atomic_compare_exchange_n(&refs(a)[idx], &old, old + 1, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 0;
}

int pp__arena_page_put(struct pp__arena *a, uint32_t idx)
{
	uint32_t old;

	if (pp__arena_poisoned(a))
		return -EIO;
	if (idx >= a->lay.npages)
		return poison(a);
	old = __atomic_load_n(&refs(a)[idx], __ATOMIC_RELAXED);
	do {
		if (!old)
			return poison(a);	/* one put too many */
	} while (!__atomic_compare_exchange_n(&refs(a)[idx], &old, old - 1, true,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return old == 1 ? push(a, idx) : 0;
}

/*
 * Drop a reference to each of n pages; those that reach 0 go back in one
 * push, linked among themselves first (release: the links and the pages'
 * bytes before the push that shows them, as push()).
 */
int pp__arena_page_put_many(struct pp__arena *a, const uint32_t *idx, unsigned int n)
{
	uint64_t *head = &hdr(a)->free_head;
	uint32_t first = PP_ARENA_NIL, last = PP_ARENA_NIL;
	uint64_t h;

	if (pp__arena_poisoned(a))
		return -EIO;
	for (unsigned int j = 0; j < n; j++) {
		uint32_t old;

		if (idx[j] >= a->lay.npages)
			return poison(a);
		old = __atomic_load_n(&refs(a)[idx[j]], __ATOMIC_RELAXED);
		do {
			if (!old)
				return poison(a);	/* one put too many */
		} while (!__atomic_compare_exchange_n(&refs(a)[idx[j]], &old, old - 1, true,
						      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
		if (old != 1)
			continue;
		__atomic_store_n(&next_of(a)[idx[j]], first, __ATOMIC_RELAXED);
		if (last == PP_ARENA_NIL)
			last = idx[j];
		first = idx[j];
	}
	if (first == PP_ARENA_NIL)
		return 0;
	h = __atomic_load_n(head, __ATOMIC_RELAXED);
	for (uint32_t tries = 0; tries < ARENA_CAS_MAX; tries++) {
		__atomic_store_n(&next_of(a)[last], (uint32_t)h, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(head, &h, ((h >> 32) + 1) << 32 | first, false,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return 0;
	}
	return poison(a);
}

/*
 * Give back every page that is neither marked in_use[] nor on the free
 * list: pages whose holder died.  The caller holds off everyone who takes
 * or gives pages (shared.c: both side locks), so the list and the counts
 * stand still.  A page on the list twice, or a cycle, is corruption.
 */
int pp__arena_reclaim(struct pp__arena *a, const unsigned char *in_use)
{
	uint32_t n = a->lay.npages, i, seen = 0;
	unsigned char *mark = calloc(n, 1);

	if (!mark)
		return -ENOMEM;
	if (pp__arena_poisoned(a)) {
		free(mark);
		return -EIO;
	}
	i = (uint32_t)__atomic_load_n(&hdr(a)->free_head, __ATOMIC_ACQUIRE);
	while (i != PP_ARENA_NIL) {
		if (i >= n || mark[i] || in_use[i] || ++seen > n) {
			free(mark);
			return poison(a);
		}
		mark[i] = 1;
		i = __atomic_load_n(&next_of(a)[i], __ATOMIC_RELAXED);
	}
	for (i = 0; i < n; i++) {
		int err;

		if (mark[i] || in_use[i])
			continue;
		/* Held once by the dead (or dropped to 0 on its way back): one reference to put. */
		__atomic_store_n(&refs(a)[i], 1, __ATOMIC_RELAXED);
		err = pp__arena_page_put(a, i);
		if (err) {
			free(mark);
			return err;
		}
	}
	free(mark);
	return 0;
}

uint32_t pp__arena_free_pages(struct pp__arena *a)
{
	uint32_t i = (uint32_t)__atomic_load_n(&hdr(a)->free_head, __ATOMIC_ACQUIRE), n = 0;

	while (i != PP_ARENA_NIL) {
		if (i >= a->lay.npages || n == a->lay.npages) {
			poison(a);	/* out of range, or a cycle */
			break;
		}
		n++;
		i = __atomic_load_n(&next_of(a)[i], __ATOMIC_RELAXED);
	}
	return n;
}
