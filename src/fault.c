// SPDX-License-Identifier: MIT
/*
 * fault.c - fault injection for the error paths (the SQLite lesson).
 *
 * A test arms a site with pp__fault_arm(site, skip, err, count): the next
 * `skip` checks at that site pass, then `count` checks fail with -err
 * (count 0: every one from then on).  Unarmed, a check is one relaxed load.
 * Not exported: tests link the static library.
 */
#include "internal.h"

struct fault_site {
	atomic_long skip;
	atomic_long count;
	atomic_int err;
	atomic_bool armed;
	atomic_long hits;
};

static struct fault_site sites[PP_FAULT_NR];

void pp__fault_arm(enum pp_fault_site site, long skip, int err, long count);
void pp__fault_disarm_all(void);
long pp__fault_hits(enum pp_fault_site site);

void pp__fault_arm(enum pp_fault_site site, long skip, int err, long count)
{
	struct fault_site *s = &sites[site];

	atomic_store(&s->skip, skip);
	atomic_store(&s->count, count ? count : -1);
	atomic_store(&s->err, err);
	atomic_store(&s->hits, 0);
	atomic_store(&s->armed, true);
}

void pp__fault_disarm_all(void)
{
	for (int i = 0; i < PP_FAULT_NR; i++)
		atomic_store(&sites[i].armed, false);
}

long pp__fault_hits(enum pp_fault_site site)
{
	return atomic_load(&sites[site].hits);
}

int pp__fault(enum pp_fault_site site)
{
	struct fault_site *s = &sites[site];
	long c;

	if (likely(!atomic_load_explicit(&s->armed, memory_order_relaxed)))
		return 0;
	if (atomic_fetch_sub(&s->skip, 1) > 0)
		return 0;
	c = atomic_load(&s->count);
	if (c == 0)
		return 0;
	if (c > 0 && atomic_fetch_sub(&s->count, 1) <= 0)
		return 0;
	atomic_fetch_add(&s->hits, 1);
	return -atomic_load(&s->err);
}
