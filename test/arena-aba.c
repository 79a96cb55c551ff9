// SPDX-License-Identifier: MIT
/*
 * Description: the arena's free list against ABA (src/arena.c).  The test
 * compiles arena.c into itself with a hook between a pop's reading of the
 * head and its CAS (PP__ARENA_POP_STEP; in pp__arena_page_alloc_many(),
 * between the walk of the links and the CAS), where it runs, as another
 * process would, other pops and pushes.
 *  - pop_aba: a single pop reads the head (page 0, whose link says 1);
 *    meanwhile 0 and 1 are popped and 0 pushed back, so the head is page 0
 *    again but its link now says 2 and page 1 is in use.  The pop must fail
 *    its CAS (the head's tag moved) and take 0 afresh; with a CAS on the
 *    index alone it installs 1 as the head and the next pop hands page 1
 *    out a second time (caught as poison: EIO);
 *  - alloc_many_aba: a batch pop walks 2 or 4 links from the head; meanwhile
 *    the head page is popped and pushed back (the links unchanged), or
 *    pages under the walk are popped and the head pushed back over them
 *    (single pops and pushes, or a batch pop and a batch push).  The CAS
 *    must fail and the walk start again: no page handed out twice (every
 *    page's reference count 1 or 0 as it should be, the set handed out
 *    the one expected), none lost (pp__arena_free_pages counts them all
 *    once every page is put back); a batch larger than the list takes all
 *    it holds, then ENOMEM; a link out of range under an unmoved head is
 *    EIO;
 *  - batch_threads: 4 threads alloc_many (1..8 pages) and put_many them (in
 *    a random order) on one 24-page arena for about half a second, each
 *    page marked owned with an atomic exchange (and stamped) while held:
 *    no page ever held by two threads, no error but ENOMEM, every page free
 *    at the end;
 *  - put_many_refs: put_many drops one reference from each page and pushes
 *    only those that reach 0: a page another holder still references stays
 *    off the list (never handed out again until its last put); a batch of
 *    only such pages leaves the head word untouched; n = 0 is a no-op; a
 *    put of a free page is EIO.
 */
#include "helpers.h"

#include <stdatomic.h>

struct pp__arena;
static void others_meanwhile(struct pp__arena *a);
#define PP__ARENA_POP_STEP(a)	others_meanwhile(a)

#include "../src/arena.c"

/*
 * The hook: one-shot, disarmed before it runs (its own pops come through
 * here too, and are neither hooked nor counted).  Set only while no other
 * thread runs; counted atomically, as batch_threads' threads pass here.
 */
static void (*meanwhile)(struct pp__arena *a);
static unsigned int hook_calls;	/* the test's own pops and pushes, not the hook's */
static bool in_hook;

static void others_meanwhile(struct pp__arena *a)
{
	void (*fn)(struct pp__arena *) = meanwhile;

	if (in_hook)
		return;
	__atomic_fetch_add(&hook_calls, 1, __ATOMIC_RELAXED);
	if (!fn)
		return;
	meanwhile = NULL;
	in_hook = true;
	fn(a);
	in_hook = false;
}

static uint32_t ref_of(struct pp__arena *a, uint32_t i)
{
	return __atomic_load_n(&refs(a)[i], __ATOMIC_RELAXED);
}

/* Is page i on the free list (a walk of it)? */
static bool on_list(struct pp__arena *a, uint32_t i)
{
	uint32_t j = (uint32_t)__atomic_load_n(&hdr(a)->free_head, __ATOMIC_RELAXED);

	for (uint32_t n = 0; j != PP_ARENA_NIL && n <= a->lay.npages; n++) {
		if (j == i)
			return true;
		ASSERT_TRUE(j < a->lay.npages);
		j = next_of(a)[j];
	}
	return false;
}

/*
 * Every page's reference count is 1 if held[] says so, else 0 and on the
 * free list, exactly once: pp__arena_free_pages equals the pages not held.
 */
static void check_pages(struct pp__arena *a, const bool *held)
{
	uint32_t nheld = 0;

	ASSERT_EQ(pp__arena_poisoned(a), 0);
	for (uint32_t i = 0; i < a->lay.npages; i++) {
		if (held[i]) {
			nheld++;
			if (ref_of(a, i) != 1 || on_list(a, i))
				t_fail_at(__FILE__, __LINE__, "page %u held: ref %u, %s the free list", i,
					  ref_of(a, i), on_list(a, i) ? "on" : "off");
		} else if (ref_of(a, i) != 0 || !on_list(a, i)) {
			t_fail_at(__FILE__, __LINE__, "page %u free: ref %u, %s the free list", i,
				  ref_of(a, i), on_list(a, i) ? "on" : "off");
		}
	}
	ASSERT_EQ(pp__arena_free_pages(a), a->lay.npages - nheld);
	ASSERT_EQ(pp__arena_poisoned(a), 0);
}

/* ---------------------------------------------------------------------- */

static uint32_t taken[8];

static void pop01_push0(struct pp__arena *a)
{
	if (pp__arena_page_alloc(a, &taken[0]) || pp__arena_page_alloc(a, &taken[1]) ||
	    pp__arena_page_put(a, taken[0]))
		t_fail_at(__FILE__, __LINE__, "the interleaved pops and push failed");
}

static int pop_aba(void)
{
	struct pp__arena a;
	uint32_t first, second;

	ASSERT_EQ(pp__arena_create(&a, 4, 16), 0);
	meanwhile = pop01_push0;
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

/* ---------------------------------------------------------------------- */

/* The head page popped and pushed back: the same index, the same links, a new tag. */
static void pop0_push0(struct pp__arena *a)
{
	if (pp__arena_page_alloc(a, &taken[0]) || taken[0] != 0 || pp__arena_page_put(a, 0))
		t_fail_at(__FILE__, __LINE__, "pop and push of the head failed");
}

/* 0, 1, 2 popped, 2 and 0 pushed: the list 0 -> 2 -> 3 ..., 1 in use. */
static void pop012_push20(struct pp__arena *a)
{
	for (int i = 0; i < 3; i++)
		if (pp__arena_page_alloc(a, &taken[i]) || taken[i] != (uint32_t)i)
			t_fail_at(__FILE__, __LINE__, "pop %d failed", i);
	if (pp__arena_page_put(a, 2) || pp__arena_page_put(a, 0))
		t_fail_at(__FILE__, __LINE__, "the pushes failed");
}

/* The same by batches: alloc_many of 0, 1, 2, put_many of 2 and 0. */
static void many012_many20(struct pp__arena *a)
{
	uint32_t back[2] = { 2, 0 };

	if (pp__arena_page_alloc_many(a, taken, 3) != 3 || taken[0] != 0 || taken[1] != 1 ||
	    taken[2] != 2)
		t_fail_at(__FILE__, __LINE__, "the batch pop failed");
	if (pp__arena_page_put_many(a, back, 2))
		t_fail_at(__FILE__, __LINE__, "the batch push failed");
}

/*
 * One alloc_many(n) with fn run between its walk and its CAS; got[] must
 * be want[] (as a set), page keep (if not NIL) still held by fn, the rest
 * free; then everything is put back and every page is free.
 */
static void aba_case(const char *what, void (*fn)(struct pp__arena *), unsigned int n,
		     const uint32_t *want, uint32_t keep, unsigned int calls)
{
	struct pp__arena a;
	uint32_t got[8];
	bool held[16] = { false };
	int r;

	printf("    %s\n", what);
	ASSERT_EQ(pp__arena_create(&a, 16, 16), 0);
	meanwhile = fn;
	hook_calls = 0;
	r = pp__arena_page_alloc_many(&a, got, n);
	ASSERT_TRUE(meanwhile == NULL);
	ASSERT_EQ(r, (int)n);
	for (unsigned int i = 0; i < n; i++) {
		bool found = false;

		for (unsigned int j = 0; j < n; j++)
			found |= got[j] == want[i];
		if (!found)
			t_fail_at(__FILE__, __LINE__, "page %u not handed out (got[%u] = %u)", want[i], i,
				  got[i]);
		ASSERT_TRUE(got[i] < 16);
		ASSERT_TRUE(!held[got[i]]);	/* twice in one batch */
		held[got[i]] = true;
	}
	if (keep != PP_ARENA_NIL) {
		ASSERT_TRUE(!held[keep]);	/* the page the others hold */
		held[keep] = true;
	}
	check_pages(&a, held);
	/* The CAS failed once (a walk again, a hook call more), and no more. */
	ASSERT_EQ(hook_calls, calls);
	/* Back: all free again, and one batch takes all 16, each once. */
	ASSERT_EQ(pp__arena_page_put_many(&a, got, n), 0);
	if (keep != PP_ARENA_NIL)
		ASSERT_EQ(pp__arena_page_put(&a, keep), 0);
	memset(held, 0, sizeof(held));
	check_pages(&a, held);
	{
		uint32_t all[17];

		ASSERT_EQ(pp__arena_page_alloc_many(&a, all, 17), 16);
		for (int i = 0; i < 16; i++) {
			ASSERT_TRUE(all[i] < 16 && !held[all[i]]);
			held[all[i]] = true;
		}
		check_pages(&a, held);
		ASSERT_EQ(pp__arena_page_alloc_many(&a, all, 1), -ENOMEM);
		ASSERT_EQ(pp__arena_page_put_many(&a, all, 16), 0);
	}
	memset(held, 0, sizeof(held));
	check_pages(&a, held);
	pp__arena_unmap(&a);
}

static int alloc_many_aba(void)
{
	/* The classic ABA: the head page gone and back, links as before. */
	aba_case("head page popped and pushed back", pop0_push0, 2,
		 (const uint32_t[]){ 0, 1 }, PP_ARENA_NIL, 2);
	/* The link walked from 0 (1) is stale: 1 is in use. */
	aba_case("0 and 1 popped, 0 pushed back", pop01_push0, 2,
		 (const uint32_t[]){ 0, 2 }, 1, 2);
	aba_case("0, 1, 2 popped, 2 and 0 pushed back, a walk of 4", pop012_push20, 4,
		 (const uint32_t[]){ 0, 2, 3, 4 }, 1, 2);
	aba_case("a batch of 0, 1, 2 popped, a batch of 2 and 0 pushed back", many012_many20, 2,
		 (const uint32_t[]){ 0, 2 }, 1, 2);

	/* A link out of range under a head nobody moved: corruption, EIO. */
	{
		struct pp__arena a;
		uint32_t got[4];

		ASSERT_EQ(pp__arena_create(&a, 8, 16), 0);
		/* Beyond the batch's reach: not looked at. */
		next_of(&a)[5] = 1000;
		ASSERT_EQ(pp__arena_page_alloc_many(&a, got, 3), 3);
		ASSERT_EQ(pp__arena_poisoned(&a), 0);
		/* Walked: 3 -> 4 -> 5 -> 1000. */
		ASSERT_EQ(pp__arena_page_alloc_many(&a, got, 4), -EIO);
		ASSERT_TRUE(pp__arena_poisoned(&a));
		ASSERT_EQ(pp__arena_page_alloc_many(&a, got, 1), -EIO);
		pp__arena_unmap(&a);
	}
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

#define BT_THREADS	4
#define BT_PAGES	24u

struct bt {
	struct pp__arena *a;
	atomic_uint *owner;		/* [BT_PAGES]: 0 free, else thread id + 1 */
	long long deadline;
	unsigned int id;
	unsigned long ops, nomem;
};

static void *bt_thread(void *arg)
{
	struct bt *t = arg;
	unsigned long long s = 0x9e3779b97f4a7c15ull * (t->id + 1);
	uint32_t idx[8];

	/* At least one round: under valgrind a thread may first run after the deadline. */
	do {
		unsigned int want;
		int r;

		for (int i = 0; i < 32; i++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			want = 1 + (unsigned int)(s >> 33) % 8;
			r = pp__arena_page_alloc_many(t->a, idx, want);
			if (r == -ENOMEM) {
				t->nomem++;
				continue;
			}
			if (r < 1 || r > (int)want)
				t_fail_at(__FILE__, __LINE__, "thread %u: alloc_many(%u) = %d", t->id,
					  want, r);
			for (int j = 0; j < r; j++) {
				unsigned int was;

				if (idx[j] >= BT_PAGES)
					t_fail_at(__FILE__, __LINE__, "thread %u: page %u", t->id, idx[j]);
				was = atomic_exchange(&t->owner[idx[j]], t->id + 1);
				if (was)
					t_fail_at(__FILE__, __LINE__,
						  "thread %u: page %u handed out while thread %u holds it",
						  t->id, idx[j], was - 1);
				memset(pp__arena_page(t->a, idx[j]), (int)t->id + 1, 64);
			}
			for (int j = 0; j < r; j++) {
				unsigned char *pg = pp__arena_page(t->a, idx[j]);

				for (int b = 0; b < 64; b++)
					if (pg[b] != t->id + 1)
						t_fail_at(__FILE__, __LINE__,
							  "thread %u: page %u written by another (0x%02x)",
							  t->id, idx[j], pg[b]);
			}
			/* Put back in a random order. */
			for (int j = r - 1; j > 0; j--) {
				int k = (int)((s >> (j * 3)) % (unsigned long long)(j + 1));
				uint32_t x = idx[j];

				idx[j] = idx[k];
				idx[k] = x;
			}
			for (int j = 0; j < r; j++) {
				unsigned int was = atomic_exchange(&t->owner[idx[j]], 0);

				if (was != t->id + 1)
					t_fail_at(__FILE__, __LINE__,
						  "thread %u: page %u owned by %d at its put", t->id,
						  idx[j], (int)was - 1);
			}
			r = pp__arena_page_put_many(t->a, idx, (unsigned int)r);
			if (r)
				t_fail_at(__FILE__, __LINE__, "thread %u: put_many = %d", t->id, r);
			t->ops++;
		}
	} while (t_now_ms() < t->deadline);
	return NULL;
}

static int batch_threads(void)
{
	struct pp__arena a;
	static atomic_uint owner[BT_PAGES];
	struct bt t[BT_THREADS];
	pthread_t th[BT_THREADS];
	bool held[BT_PAGES] = { false };
	unsigned long ops = 0, nomem = 0;

	ASSERT_EQ(pp__arena_create(&a, BT_PAGES, 16), 0);
	for (unsigned int i = 0; i < BT_THREADS; i++) {
		t[i] = (struct bt){ &a, owner, t_now_ms() + 500, i, 0, 0 };
		ASSERT_EQ(pthread_create(&th[i], NULL, bt_thread, &t[i]), 0);
	}
	for (unsigned int i = 0; i < BT_THREADS; i++) {
		t_join(th[i], NULL, 20);
		ASSERT_TRUE(t[i].ops + t[i].nomem > 0);	/* it ran */
		ops += t[i].ops;
		nomem += t[i].nomem;
	}
	ASSERT_TRUE(ops > 0);
	for (unsigned int i = 0; i < BT_PAGES; i++)
		ASSERT_EQ(atomic_load(&owner[i]), 0);
	check_pages(&a, held);
	ASSERT_EQ(pp__arena_free_pages(&a), BT_PAGES);
	printf("    %lu batches, %lu ENOMEM, %u CAS attempts\n", ops, nomem,
	       __atomic_load_n(&hook_calls, __ATOMIC_RELAXED));
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

static int put_many_refs(void)
{
	struct pp__arena a;
	uint32_t got[8], rest[8];
	bool held[8] = { false };
	uint64_t head;

	ASSERT_EQ(pp__arena_create(&a, 8, 16), 0);
	ASSERT_EQ(pp__arena_page_alloc_many(&a, got, 3), 3);
	for (int i = 0; i < 3; i++)
		held[got[i]] = true;
	check_pages(&a, held);

	/* The middle one has a second holder: it only loses a reference. */
	ASSERT_EQ(pp__arena_page_get(&a, got[1]), 0);
	ASSERT_EQ(ref_of(&a, got[1]), 2);
	ASSERT_EQ(pp__arena_page_put_many(&a, got, 3), 0);
	held[got[0]] = held[got[2]] = false;
	check_pages(&a, held);		/* got[1]: ref 1, off the list */
	ASSERT_EQ(pp__arena_free_pages(&a), 7);
	/* Every free page, and never got[1]. */
	ASSERT_EQ(pp__arena_page_alloc_many(&a, rest, 8), 7);
	for (int i = 0; i < 7; i++)
		ASSERT_NE(rest[i], got[1]);
	ASSERT_EQ(pp__arena_page_alloc_many(&a, rest + 7, 1), -ENOMEM);
	ASSERT_EQ(pp__arena_page_put_many(&a, rest, 7), 0);

	/* Only pages others hold: the head word is not touched at all. */
	ASSERT_EQ(pp__arena_page_get(&a, got[1]), 0);
	head = __atomic_load_n(&hdr(&a)->free_head, __ATOMIC_RELAXED);
	ASSERT_EQ(pp__arena_page_put_many(&a, &got[1], 1), 0);
	ASSERT_EQ(ref_of(&a, got[1]), 1);
	ASSERT_EQ(__atomic_load_n(&hdr(&a)->free_head, __ATOMIC_RELAXED), head);
	ASSERT_EQ(pp__arena_page_put_many(&a, got, 0), 0);
	ASSERT_EQ(__atomic_load_n(&hdr(&a)->free_head, __ATOMIC_RELAXED), head);
	check_pages(&a, held);

	/* The last reference: now it goes back. */
	ASSERT_EQ(pp__arena_page_put_many(&a, &got[1], 1), 0);
	held[got[1]] = false;
	check_pages(&a, held);
	ASSERT_EQ(pp__arena_free_pages(&a), 8);

	/* One put too many: corruption. */
	ASSERT_EQ(pp__arena_page_put_many(&a, &got[1], 1), -EIO);
	ASSERT_TRUE(pp__arena_poisoned(&a));
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(pop_aba),
		T_SUBTEST(alloc_many_aba),
		T_SUBTEST(batch_threads),
		T_SUBTEST(put_many_refs),
	};

	return T_RUN_SUBTESTS(tests);
}
