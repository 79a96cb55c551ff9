// SPDX-License-Identifier: MIT
/*
 * Description: the per-thread page cache behind each pipe's cache (buf.c).
 * Pages read from a socket by splice, and pages a full pipe cache turns
 * away, wait there for the thread's next allocation instead of going back
 * to malloc.  Checked here: a thread that exits gives its cached pages
 * back (the heap returns to where it was; ASan and valgrind see no leak),
 * a page another pipe still refers to is never cached and handed out
 * again, and bytes relayed through recycled pages arrive intact.
 */
#include "helpers.h"
#include "internal.h"

#include <malloc.h>
#include <sys/socket.h>

#define THREADS		8
#define ROUND		(64u << 10)

/* Socket to pagepipe to memory, ROUND bytes at a time, checking each byte. */
static int splice_rounds(int rounds, unsigned int seed)
{
	struct pp_file *p[2], *sock;
	unsigned char *buf = malloc(ROUND);
	unsigned long long pos = 0;
	int fds[2];

	ASSERT_TRUE(buf != NULL);
	ASSERT_EQ(t_tcp_pair(fds), 0);
	t_pipe2(p, 0);
	sock = pp_fdopen(fds[1]);
	ASSERT_TRUE(sock != NULL);
	for (int r = 0; r < rounds; r++) {
		size_t got = 0;

		t_fill(buf, ROUND, pos, seed);
		ASSERT_EQ(write(fds[0], buf, ROUND), (ssize_t)ROUND);
		memset(buf, 0, ROUND);
		while (got < ROUND) {
			ssize_t n = pp_splice(sock, NULL, p[1], NULL, ROUND - got, 0);
			ssize_t m;

			ASSERT_GE(n, 1);
			m = t_read_full(p[0], buf + got, (size_t)n);
			ASSERT_EQ(m, n);
			got += (size_t)n;
		}
		ASSERT_EQ(t_check(buf, ROUND, pos, seed), 0);
		pos += ROUND;
	}
	pp_close(sock);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fds[0]);
	close(fds[1]);
	free(buf);
	return 0;
}

static void *churn_main(void *arg)
{
	intptr_t rc = splice_rounds(8, (unsigned int)(uintptr_t)arg);

	/* The test means nothing unless the cache was in use when we exit. */
	if (!rc && pp__thread_page_count() == 0) {
		fprintf(stderr, "thread exits with an empty page cache\n");
		rc = 1;
	}
	return (void *)rc;
}

static int test_thread_exit_frees_pages(void)
{
	pthread_t th[THREADS];
	size_t before, after, chunks;
	void *ret;

	/* A first thread, as before the pool: its exit must leave nothing out either. */
	ASSERT_EQ(pthread_create(&th[0], NULL, churn_main, (void *)1), 0);
	t_join(th[0], &ret, 20);
	ASSERT_EQ((intptr_t)ret, 0);
	pp__page_pool_stats(&chunks, &before);
	for (int i = 0; i < THREADS; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, churn_main, (void *)(uintptr_t)(i + 2)), 0);
	for (int i = 0; i < THREADS; i++) {
		t_join(th[i], &ret, 20);
		ASSERT_EQ((intptr_t)ret, 0);
	}
	pp__page_pool_stats(&chunks, &after);
	/*
	 * Each thread's cache holds up to 64 pages when it exits; if exit
	 * kept them, eight threads would leave hundreds of pages out of the
	 * pool.  Pages are counted by the pool (buf.c), not the heap: they are
	 * mapped in chunks, which mallinfo never sees.
	 */
	ASSERT_EQ(after, before);
	return 0;
}

/*
 * A page that a tee left in a second pipe is still in use when the first
 * pipe lets go of it: it must not reach the cache, or the next socket read
 * in this thread would write over the second pipe's bytes.
 */
static int test_shared_page_not_cached(void)
{
	struct pp_file *a[2], *b[2];
	unsigned char src[4096], got[4096];

	t_fill(src, sizeof(src), 0, 7);
	t_pipe2(a, O_NONBLOCK);
	t_pipe2(b, O_NONBLOCK);
	/* Fill the thread cache first, so that a freed page would stay there. */
	ASSERT_EQ(splice_rounds(4, 3), 0);
	ASSERT_TRUE(pp__thread_page_count() > 0);
	ASSERT_EQ(pp_write(a[1], src, sizeof(src)), (ssize_t)sizeof(src));
	ASSERT_EQ(pp_tee(a[0], b[1], sizeof(src), 0), (ssize_t)sizeof(src));
	ASSERT_EQ(pp_read(a[0], got, sizeof(got)), (ssize_t)sizeof(got));
	/* Close a: its pipe cache goes; the page must outlive it, in b only. */
	pp_close(a[0]);
	pp_close(a[1]);
	ASSERT_EQ(splice_rounds(8, 4), 0);
	ASSERT_EQ(pp_read(b[0], got, sizeof(got)), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));
	pp_close(b[0]);
	pp_close(b[1]);
	return 0;
}

/* Short socket reads into recycled pages: no stale byte from a page's past. */
static int test_short_reads_recycled(void)
{
	struct pp_file *p[2], *sock;
	unsigned char out[3000], in[3000];
	int fds[2];

	ASSERT_EQ(splice_rounds(4, 5), 0);
	ASSERT_EQ(t_tcp_pair(fds), 0);
	t_pipe2(p, O_NONBLOCK);
	sock = pp_fdopen(fds[1]);
	ASSERT_TRUE(sock != NULL);
	for (unsigned int i = 1; i < sizeof(out); i += 701) {
		t_fill(out, i, i, 9);
		ASSERT_EQ(write(fds[0], out, i), (ssize_t)i);
		size_t got = 0;

		while (got < i) {
			ssize_t n = pp_splice(sock, NULL, p[1], NULL, i - got, 0);

			ASSERT_GE(n, 1);
			got += (size_t)n;
		}
		ASSERT_EQ(pp_read(p[0], in, sizeof(in)), (ssize_t)i);
		ASSERT_EQ(t_check(in, i, i, 9), 0);
	}
	pp_close(sock);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fds[0]);
	close(fds[1]);
	return 0;
}

int main(void)
{
	/*
	 * The page cache is what is tested: socket bytes must come through
	 * pages, not stay in the kernel (kbuf.c), as they do for a source the
	 * kernel cannot splice.
	 */
	pp__kbuf_disabled = true;
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_thread_exit_frees_pages),
		T_SUBTEST(test_shared_page_not_cached),
		T_SUBTEST(test_short_reads_recycled),
	};

	return T_RUN_SUBTESTS(tests);
}
