// SPDX-License-Identifier: MIT
/*
 * Description: growing a pagepipe to a huge size costs memory only as it
 * fills.  A 1 GiB pipe has 262144 slots (a 12 MiB slot array); a resize
 * writes only the slots it moves, so the array stays untouched memory
 * until traffic reaches it.  (A first version of the retired-array resize
 * stored every slot of the new array: `pagepipe buffer --size 1T` was
 * killed under TSan; with that version back, the first case here reads
 * 14340 KiB of growth against a bound of 2048.)  Then shrink and grow
 * again, which reuses the retired arrays (pipe.h, struct pp__ring), with
 * bytes queued across each resize: they come out exact and the pipe is
 * empty after them (a regression guard for the reuse path: it passes on
 * the first version too).
 */
#include "helpers.h"

#include <stdio.h>

#define GIB	(1ul << 30)

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, resident = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int test_grow_touches_nothing(void)
{
	struct pp_file *e[2];
	long before, after;

	if (T_SANITIZED || t_under_valgrind())
		return t_skip("the resident set is the sanitizer's or valgrind's");
	ASSERT_EQ(pp_pipe_set_max_size(GIB), 0);
	t_pipe2(e, 0);
	ASSERT_EQ(pp_write(e[1], "abc", 3), 3);
	before = rss_kib();
	ASSERT_EQ(pp_fcntl(e[0], F_SETPIPE_SZ, GIB), (long)GIB);
	after = rss_kib();
	/* 262144 slots written would be over 12 MiB; untouched, a few pages. */
	ASSERT_LE(after - before, 2048);
	pp_close(e[0]);
	pp_close(e[1]);
	return T_EXIT_PASS;
}

static int test_shrink_grow_reuse(void)
{
	static const long sizes[] = { 1ul << 20, 4096, 65536, 1ul << 20, 8192, 65536, 4096 };
	struct pp_file *e[2];
	unsigned char in[4096], out[4096];
	unsigned int seq = 0, got = 0;

	ASSERT_EQ(pp_pipe_set_max_size(GIB), 0);
	t_pipe2(e, O_NONBLOCK);
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ssize_t n;

		/* One page queued across each resize, then drained. */
		t_fill(in, 100, seq, 7);
		ASSERT_EQ(pp_write(e[1], in, 100), 100);
		ASSERT_EQ(pp_fcntl(e[0], F_SETPIPE_SZ, sizes[i]), sizes[i]);
		n = pp_read(e[0], out, sizeof(out));
		ASSERT_EQ(n, 100);
		ASSERT_MEM_EQ(out, in, 100);
		/* Empty now: a read finds nothing stale in the (maybe reused) array. */
		ASSERT_ERRNO(pp_read(e[0], out, sizeof(out)), EAGAIN);
		seq += 100;
		got += (unsigned int)n;
	}
	ASSERT_EQ(got, seq);
	pp_close(e[0]);
	pp_close(e[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_grow_touches_nothing),
		T_SUBTEST(test_shrink_grow_reuse),
	};

	return T_RUN_SUBTESTS(tests);
}
