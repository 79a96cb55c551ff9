/* SPDX-License-Identifier: MIT */
/*
 * arena.h - the shared arena of a cross-process pipe (docs/shared-pipes.md,
 * sections 1 and 2): a sealed memfd that every process of the pipe maps at
 * an address of its own.  src/shared.c builds the shared pipe on it.
 *
 * Nothing in the arena is a pointer.  Pages are named by index; the page
 * area, the reference counts and the free list sit at offsets each process
 * computes itself from the three numbers the creator chose (page size,
 * pages, slots) and checks against the memfd's size when it maps it.  After
 * that, no layout field is ever read from the arena again: a peer that
 * scribbles on the header changes nothing this process addresses.  Every
 * index read from the arena (the free list's head and links) is checked
 * against the page count before use; a bad one poisons the arena, and every
 * later call fails with EIO.
 */
#ifndef PP_ARENA_H
#define PP_ARENA_H

#include <stdint.h>
#include <stddef.h>

#define PP_ARENA_NIL	UINT32_MAX
#define PP_ARENA_CTRL_SIZE	1024u
#define PP_ARENA_SLOT_SIZE	64u

/* Where things are, as this process computed it: never read from the arena. */
struct pp__arena_layout {
	uint32_t page_size;
	uint32_t npages;
	uint32_t nslots;
	size_t refs_off;	/* uint32_t refs[npages] */
	size_t next_off;	/* uint32_t next[npages]: the free list's links */
	size_t ctrl_off;	/* PP_ARENA_CTRL_SIZE bytes: the ring's control (shared.c) */
	size_t slots_off;	/* nslots * PP_ARENA_SLOT_SIZE: the ring's slots (shared.c) */
	size_t pages_off;	/* page-aligned: npages pages */
	size_t size;		/* the memfd's size */
};

/* This process's view of one arena. */
struct pp__arena {
	int fd;
	unsigned char *base;
	struct pp__arena_layout lay;
	int poisoned;		/* found corrupt here: no peer can take it back */
};

int  pp__arena_layout(struct pp__arena_layout *lay, uint32_t page_size, uint32_t npages,
		      uint32_t nslots);
/* A new arena: the memfd, sized, sealed, mapped, every page free. */
int  pp__arena_create(struct pp__arena *a, uint32_t npages, uint32_t nslots);
/* Another process's arena, from its descriptor (dup'ed: the caller keeps fd). */
int  pp__arena_map(struct pp__arena *a, int fd);
void pp__arena_unmap(struct pp__arena *a);

/*
 * Pages, by index.  alloc: 0 and *idx with a reference of 1, -ENOMEM when
 * none is free, -EIO when the arena is (or is found) corrupt.  get and put
 * take and drop a reference; the last put returns the page to the free
 * list.  page: the page's address in this process, or NULL for an index
 * out of range (and the arena poisoned).
 */
int   pp__arena_page_alloc(struct pp__arena *a, uint32_t *idx);
/* Batches: up to n pages in one pop (how many, or -errno); n puts, one push. */
int   pp__arena_page_alloc_many(struct pp__arena *a, uint32_t *idx, unsigned int n);
int   pp__arena_page_put_many(struct pp__arena *a, const uint32_t *idx, unsigned int n);
int   pp__arena_page_get(struct pp__arena *a, uint32_t idx);
int   pp__arena_page_put(struct pp__arena *a, uint32_t idx);
void *pp__arena_page(struct pp__arena *a, uint32_t idx);
uint32_t pp__arena_free_pages(struct pp__arena *a);	/* a walk, bounded; tests */
/* Pages neither in_use[] nor free go back: their holder died.  With all page users held off. */
int   pp__arena_reclaim(struct pp__arena *a, const unsigned char *in_use);
int   pp__arena_poisoned(const struct pp__arena *a);
/* Found corrupt by a user of the arena: poisons it; returns -EIO. */
int   pp__arena_poison(struct pp__arena *a);

static inline void *pp__arena_ctrl(const struct pp__arena *a)
{
	return a->base + a->lay.ctrl_off;
}

/* Slot i of the ring, masked: never out of the slot area. */
static inline void *pp__arena_slot(const struct pp__arena *a, uint32_t i)
{
	return a->base + a->lay.slots_off + (size_t)(i & (a->lay.nslots - 1)) * PP_ARENA_SLOT_SIZE;
}

#endif /* PP_ARENA_H */
