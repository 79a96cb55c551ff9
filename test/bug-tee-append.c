// SPDX-License-Identifier: MIT
/*
 * Description: a tee that races a writer appending to the last buffer.
 * pp_tee walked the input up to its head as it was at each step, so after
 * copying the last slot at the length it saw, it went on to slots the
 * writer published next, skipping what the writer had appended to that
 * slot in between: the output held bytes out of order (found by
 * test/pipe-quick-read's mixed sub-test).  Here a writer streams small
 * writes (most of them merge) while the reader tees random lengths into a
 * second pipe, checks every teed byte against the stream, then reads the
 * same bytes out of the input and checks them too.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "helpers.h"

#define SEED	11
/* The race is narrow: about one run in six of 32 MiB hit it before the fix. */
static unsigned long long bytes = 512ull << 20;

static void *writer(void *arg)
{
	struct pp_file *w = arg;
	unsigned char buf[4096 + 512];
	unsigned long long pos = 0;
	unsigned int r = 5;

	while (pos < bytes) {
		size_t n;

		r = r * 1103515245 + 12345;
		/*
		 * A small write appends to the last slot; a page and a bit
		 * appends the bit and publishes the page, in one call: what a
		 * tee between the two steps must not mix up.
		 */
		n = 1 + (r >> 8) % 512 + ((r >> 20) & 1 ? 4096 : 0);
		if (n > bytes - pos)
			n = (size_t)(bytes - pos);
		t_fill(buf, n, pos, SEED);
		if (t_write_full(w, buf, n) != (ssize_t)n)
			t_fail_at(__FILE__, __LINE__, "write at %llu", pos);
		pos += n;
	}
	return NULL;
}

static atomic_bool done;

/*
 * Shares the reader's CPU, so that the scheduler takes the reader off it
 * at random points, now and then inside a tee: the writer then has all
 * the time it needs to append and publish behind the tee's back.
 */
static void *hog(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&done, memory_order_relaxed))
		;
	return NULL;
}

static int test_tee_while_appending(void)
{
	struct pp_file *in[2], *side[2];
	unsigned char *teed = malloc(65536), *got = malloc(65536);
	unsigned long long pos = 0, tees = 0;
	unsigned int r = 3;
	pthread_t w, h;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	ASSERT_TRUE(teed && got);
	bool valgrind = t_under_valgrind();

	/*
	 * Valgrind runs one thread at a time, a spinning one for a whole
	 * time slice: no hog there, and a stream small enough to check
	 * memory on, not to race.
	 */
	if (valgrind)
		bytes = 4ull << 20;
	else if (T_TSAN)
		bytes = 24ull << 20;	/* 512 MiB ran past the 30 s limit */
	else if (T_ASAN)
		bytes = 128ull << 20;
	t_pipe2(in, 0);
	t_pipe2(side, 0);
	ASSERT_EQ(pthread_create(&w, NULL, writer, in[1]), 0);
	if (!valgrind)
		ASSERT_EQ(pthread_create(&h, NULL, hog, NULL), 0);
	if (ncpu >= 2 && !valgrind) {
		/* Hints: the race only gets likelier with them. */
		(void)t_pin(pthread_self(), 0);
		(void)t_pin(h, 0);
		(void)t_pin(w, 1);
	}
	while (pos < bytes) {
		ssize_t n, k;

		r = r * 1103515245 + 12345;
		n = pp_tee(in[0], side[1], 1 + (r >> 8) % 20000, 0);
		ASSERT_TRUE(n > 0);
		tees++;
		ASSERT_EQ(t_read_full(side[0], teed, (size_t)n), n);
		if (t_check(teed, (size_t)n, pos, SEED))
			t_fail_at(__FILE__, __LINE__, "tee %llu: %zd bytes at %llu out of order",
				  tees, n, pos);
		/* They are still the input's: a read gives the same bytes. */
		k = t_read_full(in[0], got, (size_t)n);
		ASSERT_EQ(k, n);
		ASSERT_MEM_EQ(teed, got, (size_t)n);
		pos += (unsigned long long)n;
	}
	atomic_store(&done, true);
	ASSERT_EQ(pthread_join(w, NULL), 0);
	if (!valgrind)
		ASSERT_EQ(pthread_join(h, NULL), 0);
	ASSERT_EQ(t_fionread(in[0]), 0);
	pp_close(in[0]);
	pp_close(in[1]);
	pp_close(side[0]);
	pp_close(side[1]);
	free(teed);
	free(got);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_tee_while_appending),
	};

	return t_run_subtests(tests, sizeof(tests) / sizeof(tests[0]));
}
