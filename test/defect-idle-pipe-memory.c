// SPDX-License-Identifier: MIT
/*
 * Description: memory held by idle pipes (issue 11, section 2, defect 11).
 * Each pipe keeps pages for its next writes; today up to 16 (a default
 * ring's worth), so 2000 pipes that have each carried 64 KiB hold about
 * 133 MB while idle.  Linux keeps two spare pages per pipe (pipe->tmp_page
 * history; today's kernels one or two).  Bound: after 64 KiB has gone
 * through each of 2000 pipes (16 writes of 4 KiB, then the pipe read dry),
 * the resident set may have grown by at most 16 KiB per pipe on average:
 * two spare pages plus the ring and the bookkeeping.  A memory bound, not
 * a timing; free heap memory is handed back (malloc_trim) before measuring
 * so that only what the pipes keep counts.
 */
#include "helpers.h"

#include <malloc.h>

#define PIPES		2000
#define PAGE		4096
#define PER_PIPE_MAX	(16 * 1024)

static long rss_bytes(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

int main(void)
{
	static struct pp_file *ends[PIPES][2];
	static unsigned char page[PAGE], back[16 * PAGE];
	long before, after, per;

	if (T_SANITIZED)
		return t_skip("a sanitizer's shadow memory and quarantine make the resident set meaningless");
	if (t_under_valgrind())
		return t_skip("under valgrind the resident set is valgrind's");
	t_watchdog(60, "2000 pipes with 64 KiB each");
	/* Warm the allocator and this thread's page cache with one pipe's traffic. */
	{
		struct pp_file *e[2];

		t_pipe2(e, 0);
		for (int i = 0; i < 16; i++)
			ASSERT_EQ(pp_write(e[1], page, PAGE), PAGE);
		ASSERT_EQ(t_read_full(e[0], back, sizeof(back)), (ssize_t)sizeof(back));
		pp_close(e[0]);
		pp_close(e[1]);
	}
	malloc_trim(0);
	before = rss_bytes();
	if (before < 0)
		return t_skip("/proc/self/statm cannot be read");

	for (int p = 0; p < PIPES; p++) {
		t_pipe2(ends[p], 0);
		for (int i = 0; i < 16; i++) {
			t_fill(page, PAGE, (unsigned long long)i * PAGE, (unsigned int)p);
			ASSERT_EQ(pp_write(ends[p][1], page, PAGE), PAGE);
		}
		ASSERT_EQ(t_read_full(ends[p][0], back, sizeof(back)), (ssize_t)sizeof(back));
		ASSERT_EQ(t_check(back, sizeof(back), 0, (unsigned int)p), 0);
	}
	malloc_trim(0);
	after = rss_bytes();
	per = (after - before) / PIPES;
	printf("resident set: %ld KiB before, %ld KiB after %d idle pipes: %ld bytes per pipe "
	       "(bound %d)\n", before >> 10, after >> 10, PIPES, per, PER_PIPE_MAX);
	if (per > PER_PIPE_MAX)
		t_fail_at(__FILE__, __LINE__, "an idle pipe holds %ld bytes on average, more than "
			  "%d (two spare pages and bookkeeping)", per, PER_PIPE_MAX);

	for (int p = 0; p < PIPES; p++) {
		pp_close(ends[p][0]);
		pp_close(ends[p][1]);
	}
	return T_EXIT_PASS;
}
