// SPDX-License-Identifier: MIT
/*
 * fuzz-arena.c - libFuzzer target for the shared arena (src/arena.c;
 * docs/shared-pipes.md section 2): the input is a program of page
 * operations (alloc, get, put, address) through two mappings of one arena,
 * with writes of chosen values to chosen words of the shared header,
 * reference counts and links between them, as a hostile peer would make.
 * Whatever the program, no access leaves the mapping (ASan), no call
 * loops (libFuzzer's timeout), every page address lies inside the page
 * area, and an arena that reports a failure other than ENOMEM or
 * EOVERFLOW has poisoned itself.  No descriptor outlives an input.
 */
#define FUZZ_NAME "fuzz-arena"
#include "internal.h"
#include "fuzz.h"
#include "arena.h"

#include <sys/mman.h>

#define NPAGES	8
#define HELD	32

struct state {
	unsigned int op;
};

static void check_page(struct state *s, struct pp__arena *a, const void *p)
{
	const unsigned char *c = p;

	if (!p)
		return;
	if (c < a->base + a->lay.pages_off || c >= a->base + a->lay.size ||
	    (size_t)(c - a->base - a->lay.pages_off) % a->lay.page_size)
		mismatch(s, "page address %p outside the page area", p);
}

static void check_err(struct state *s, struct pp__arena *a, int err, const char *what)
{
	if (trace)
		fprintf(stderr, FUZZ_NAME ": op %u: %s: %d\n", s->op, what, err);
	if (err && err != -ENOMEM && err != -EOVERFLOW && !pp__arena_poisoned(a))
		mismatch(s, "%s failed (%d) and the arena is not poisoned", what, err);
	if (err && err != -ENOMEM && err != -EOVERFLOW && err != -EIO)
		mismatch(s, "%s: unexpected error %d", what, err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc; (void)argv;
	trace = getenv("FUZZ_TRACE") != NULL;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct pp__arena a, b, *v[2] = { &a, &b };
	uint32_t held[HELD];
	unsigned int nheld = 0;
	struct state s = { 0 };
	int lowest_fd = lowest_free_fd();
	size_t words;

	if (pp__arena_create(&a, NPAGES, 1u << (u8(&c) % 5)))
		abort();
	if (pp__arena_map(&b, a.fd))
		abort();
	words = a.lay.slots_off / 4;	/* the header, the counts, the links */
	for (s.op = 0; s.op < 256 && c.n; s.op++) {
		unsigned int k = u8(&c);
		struct pp__arena *x = v[k >> 7];
		uint32_t i;
		int err;

		switch (k % 6) {
		case 0:
			err = pp__arena_page_alloc(x, &i);
			check_err(&s, x, err, "alloc");
			if (!err) {
				check_page(&s, x, pp__arena_page(x, i));
				if (nheld < HELD)
					held[nheld++] = i;
			}
			break;
		case 1:
			if (nheld) {
				err = pp__arena_page_put(x, held[--nheld]);
				check_err(&s, x, err, "put");
			}
			break;
		case 2:
			err = pp__arena_page_get(x, u8(&c) % (NPAGES + 2));
			check_err(&s, x, err, "get");
			break;
		case 3:
			check_page(&s, x, pp__arena_page(x, u8(&c) % (NPAGES + 2)));
			break;
		case 4: {
			/* A peer's scribble: a chosen word, a chosen value. */
			size_t w = 4 + u16(&c) % (words - 4);
			uint32_t val = u8(&c) & 1 ? u8(&c) % (NPAGES + 2) : (uint32_t)u16(&c) << 16 | u16(&c);

			((uint32_t *)a.base)[w] = val;
			break;
		}
		case 5:
			(void)pp__arena_free_pages(x);
			break;
		}
	}
	pp__arena_unmap(&b);
	pp__arena_unmap(&a);
	if (lowest_free_fd() != lowest_fd)
		fuzz_mismatch(s.op, "a descriptor was left open");
	return 0;
}
