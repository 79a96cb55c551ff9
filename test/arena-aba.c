// SPDX-License-Identifier: MIT
/*
 * Description: the arena's free list against ABA (src/arena.c).  The test
 * compiles arena.c into itself with a hook between a pop's reading of the
 * head (page 0, whose link says 1) and its CAS; there, as another process
 * would, it pops 0, pops 1 and pushes 0 back, so the head is page 0 again
 * but its link now says 2 and page 1 is in use.  The pop must fail its CAS
 * (the head's tag moved) and take 0 afresh; with a CAS on the index alone
 * it installs 1 as the head and the next pop hands page 1 out a second
 * time (caught as poison: EIO).
 */
#include "helpers.h"

struct pp__arena;
static int hook_armed;
static void others_meanwhile(struct pp__arena *a);
#define PP__ARENA_POP_STEP(a)	others_meanwhile(a)

#include "../src/arena.c"

static uint32_t taken[2];

static void others_meanwhile(struct pp__arena *a)
{
	if (!hook_armed)
		return;
	hook_armed = 0;
	if (pp__arena_page_alloc(a, &taken[0]) || pp__arena_page_alloc(a, &taken[1]) ||
	    pp__arena_page_put(a, taken[0]))
		t_fail_at(__FILE__, __LINE__, "the interleaved pops and push failed");
}

int main(void)
{
	struct pp__arena a;
	uint32_t first, second;

	ASSERT_EQ(pp__arena_create(&a, 4, 16), 0);
	hook_armed = 1;
	ASSERT_EQ(pp__arena_page_alloc(&a, &first), 0);
	ASSERT_EQ(taken[0], 0u);
	ASSERT_EQ(taken[1], 1u);
	/* The interrupted pop got page 0 (pushed back meanwhile), not a stale 1. */
	ASSERT_EQ(first, 0u);
	ASSERT_EQ(pp__arena_page_alloc(&a, &second), 0);
	ASSERT_EQ(second, 2u);
	ASSERT_EQ(pp__arena_poisoned(&a), 0);
	ASSERT_EQ(pp__arena_free_pages(&a), 1u);
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}
