// SPDX-License-Identifier: MIT
/*
 * Description: anonymous pages are real pages (buf.c).  Checked here: pages
 * from pp_page_alloc() and the pages pp_write() fills are page-aligned; a
 * splice to and from a file opened with O_DIRECT moves the same bytes with
 * the same results as on a kernel pipe (a page that is not aligned makes
 * the kernel refuse the I/O with EINVAL); a thread's page cache goes back
 * to the pool when the thread exits; and a sweep gives back what an unused
 * thread cache holds but leaves a cache in use alone.
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define LEN	(64u << 10)

static bool aligned(const void *p)
{
	return ((uintptr_t)p & (pp_page_size() - 1)) == 0;
}

static int test_page_alloc_aligned(void)
{
	const size_t psz = pp_page_size();
	void *page[200];

	for (int i = 0; i < 200; i++) {
		page[i] = pp_page_alloc();
		ASSERT_TRUE(page[i] != NULL);
		if (!aligned(page[i]))
			t_fail_at(__FILE__, __LINE__, "page %d at %p: %#lx past a page boundary",
				  i, page[i], (unsigned long)((uintptr_t)page[i] & (psz - 1)));
		memset(page[i], i, psz);	/* all of it is ours (ASan checks) */
	}
	for (int i = 0; i < 200; i++)
		pp_page_put(page[i]);
	return 0;
}

/* A page-sized write into an empty pipe fills a fresh page from offset 0. */
static int test_written_pages_aligned(void)
{
	const size_t psz = pp_page_size();
	size_t len = 16 * psz;
	unsigned char *src = malloc(len);
	struct pp_file *p[2];
	struct iovec iov[16];

	ASSERT_TRUE(src != NULL);
	t_fill(src, len, 0, 11);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, (int)len), (int)len);
	for (int round = 0; round < 4; round++) {
		ASSERT_EQ(pp_write(p[1], src, len), (ssize_t)len);
		ASSERT_EQ(pp_read_lend(p[0], iov, 16, len), (ssize_t)len);
		for (int i = 0; i < 16; i++) {
			ASSERT_EQ(iov[i].iov_len, psz);
			if (!aligned(iov[i].iov_base))
				t_fail_at(__FILE__, __LINE__, "round %d buffer %d at %p: not page-aligned",
					  round, i, iov[i].iov_base);
			ASSERT_MEM_EQ(iov[i].iov_base, src + (size_t)i * psz, psz);
		}
		ASSERT_EQ(pp_read_done(p[0], len), 0);
	}
	pp_close(p[0]);
	pp_close(p[1]);
	free(src);
	return 0;
}

/* An O_DIRECT file in dir, or -1; *why says what refused it. */
static int odirect_open(const char *dir, const char **why)
{
	char path[80];
	int fd;

	snprintf(path, sizeof(path), "%s/pp-odirect-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0) {
		*why = "mkstemp failed";
		return -1;
	}
	close(fd);
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0)
		*why = "open(O_DIRECT) failed";
	unlink(path);	/* nothing left behind when an assertion exits */
	return fd;
}

/*
 * The kernel's own splice, pipe to file and file to pipe, on fd: if it
 * refuses O_DIRECT here, there is nothing to compare with.
 */
static bool kernel_odirect_splices(int fd, const unsigned char *src)
{
	int k[2];
	loff_t off = 0;
	bool ok;

	t_kpipe2(k, 0);
	ok = write(k[1], src, LEN) == (ssize_t)LEN &&
	     splice(k[0], NULL, fd, &off, LEN, 0) == (ssize_t)LEN;
	off = 0;
	ok = ok && splice(fd, &off, k[1], NULL, LEN, 0) == (ssize_t)LEN;
	close(k[0]);
	close(k[1]);
	return ok;
}

static int test_odirect_splice(void)
{
	static const char *dirs[] = { ".", "/var/tmp", "/work" };
	const char *why = "no directory tried";
	unsigned char *src, *back;
	int kfd = -1, pfd = -1;
	struct pp_file *f;
	struct t_pair x;
	loff_t koff, poff;

	ASSERT_EQ(posix_memalign((void **)&src, pp_page_size(), LEN), 0);
	ASSERT_EQ(posix_memalign((void **)&back, pp_page_size(), LEN), 0);
	t_fill(src, LEN, 0, 21);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && pfd < 0; i++) {
		kfd = odirect_open(dirs[i], &why);
		if (kfd < 0)
			continue;
		if (!kernel_odirect_splices(kfd, src)) {
			why = "the kernel's splice to or from an O_DIRECT file failed";
			close(kfd);
			kfd = -1;
			continue;
		}
		pfd = odirect_open(dirs[i], &why);
		if (pfd < 0) {
			close(kfd);
			kfd = -1;
		}
	}
	if (pfd < 0) {
		printf("skip: no O_DIRECT file to splice with: %s\n", why);
		free(src);
		free(back);
		return T_EXIT_SKIP;
	}
	f = pp_fdopen(pfd);
	ASSERT_TRUE(f != NULL);
	t_pair_open(&x, 0);
	ASSERT_EQ(fcntl(x.k[1], F_SETPIPE_SZ, (int)LEN), (int)LEN);
	ASSERT_EQ(pp_fcntl(x.p[1], F_SETPIPE_SZ, (int)LEN), (int)LEN);

	/* Pipe to O_DIRECT file: the pipe's pages are the I/O's buffers. */
	ASSERT_SAME(write(x.k[1], src, LEN), pp_write(x.p[1], src, LEN));
	koff = poff = 0;
	ASSERT_SAME(splice(x.k[0], NULL, kfd, &koff, LEN, 0),
		    pp_splice(x.p[0], NULL, f, &poff, LEN, 0));
	ASSERT_EQ(koff, poff);
	ASSERT_EQ(pread(pfd, back, LEN, 0), (ssize_t)LEN);
	ASSERT_EQ(t_check(back, LEN, 0, 21), 0);

	/* O_DIRECT file to pipe: read into fresh anonymous pages. */
	koff = poff = 0;
	ASSERT_SAME(splice(kfd, &koff, x.k[1], NULL, LEN, 0),
		    pp_splice(f, &poff, x.p[1], NULL, LEN, 0));
	ASSERT_EQ(koff, poff);
	ASSERT_SAME_READ(x.k[0], x.p[0], LEN);

	/* Again, with the pages the first round left in the caches. */
	t_fill(src, LEN, LEN, 22);
	ASSERT_SAME(write(x.k[1], src, LEN), pp_write(x.p[1], src, LEN));
	ASSERT_SAME(splice(x.k[0], NULL, kfd, &koff, LEN, 0),
		    pp_splice(x.p[0], NULL, f, &poff, LEN, 0));
	ASSERT_EQ(koff, poff);
	koff = poff = LEN;
	ASSERT_SAME(splice(kfd, &koff, x.k[1], NULL, LEN, 0),
		    pp_splice(f, &poff, x.p[1], NULL, LEN, 0));
	memset(back, 0, LEN);
	ASSERT_EQ(read(x.k[0], back, LEN), (ssize_t)LEN);
	ASSERT_EQ(t_check(back, LEN, LEN, 22), 0);
	memset(back, 0, LEN);
	ASSERT_EQ(pp_read(x.p[0], back, LEN), (ssize_t)LEN);
	ASSERT_EQ(t_check(back, LEN, LEN, 22), 0);

	t_pair_close(&x);
	pp_close(f);
	close(kfd);
	free(src);
	free(back);
	return 0;
}

/* Fill this thread's cache: pages allocated, then all freed with no pipe. */
static unsigned int fill_thread_cache(unsigned int n)
{
	void *page[64];

	for (unsigned int i = 0; i < n; i++) {
		page[i] = pp_page_alloc();
		if (!page[i])
			return 0;
	}
	for (unsigned int i = 0; i < n; i++)
		pp_page_put(page[i]);
	return pp__thread_page_count();
}

static void *fill_main(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)fill_thread_cache(40);
}

static int test_thread_exit_returns_pages(void)
{
	size_t chunks, before, after;
	pthread_t th;
	void *ret;

	pp__page_pool_stats(&chunks, &before);
	ASSERT_EQ(pthread_create(&th, NULL, fill_main, NULL), 0);
	t_join(th, &ret, 20);
	/* The test means nothing unless the thread's cache held pages. */
	ASSERT_GE((uintptr_t)ret, 40);
	pp__page_pool_stats(&chunks, &after);
	ASSERT_EQ(after, before);
	return 0;
}

struct idle {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int step;
	unsigned int cached, left;
};

static void idle_wait(struct idle *s, int step)
{
	pthread_mutex_lock(&s->lock);
	while (s->step < step)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

static void idle_step(struct idle *s, int step)
{
	pthread_mutex_lock(&s->lock);
	s->step = step;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *idle_main(void *arg)
{
	struct idle *s = arg;

	s->cached = fill_thread_cache(40);
	idle_step(s, 1);
	idle_wait(s, 2);	/* idle while the sweeps run */
	s->left = pp__thread_page_count();
	return NULL;
}

static int test_idle_cache_trimmed(void)
{
	struct idle s = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
	size_t chunks, before, after;
	unsigned int mine;
	pthread_t th;
	void *page;

	/* This thread's cache is in use between the sweeps: it stays. */
	mine = fill_thread_cache(40);
	ASSERT_GE(mine, 40);
	ASSERT_EQ(pthread_create(&th, NULL, idle_main, &s), 0);
	idle_wait(&s, 1);
	ASSERT_GE(s.cached, 40);
	pp__page_pool_stats(&chunks, &before);
	pp__page_trim();		/* starts the idle period */
	page = pp_page_alloc();		/* this thread uses its cache... */
	ASSERT_TRUE(page != NULL);
	pp_page_put(page);
	pp__page_trim();		/* ...the other thread does not */
	pp__page_pool_stats(&chunks, &after);
	ASSERT_EQ(pp__thread_page_count(), mine);
	idle_step(&s, 2);
	t_join(th, NULL, 20);
	/* A few pages may stay; most of what sat idle went back. */
	ASSERT_LE(s.left, s.cached / 4);
	ASSERT_EQ(before - after, s.cached - s.left);
	return 0;
}

/*
 * Sweeps while threads take and give pages: a page is never in two hands
 * (each thread's pages keep the bytes it wrote) and TSan sees the locks.
 */
#define CHURN_THREADS	4

static void *churn_main(void *arg)
{
	const size_t psz = pp_page_size();
	unsigned int id = (unsigned int)(uintptr_t)arg;
	void *page[64];

	for (unsigned int round = 0; round < 300; round++) {
		unsigned int n = 1 + (round * 7 + id) % 64;

		for (unsigned int i = 0; i < n; i++) {
			page[i] = pp_page_alloc();
			if (!page[i])
				return (void *)1;
			t_fill(page[i], psz, (unsigned long long)i * psz, id * 1000 + round);
		}
		for (unsigned int i = 0; i < n; i++) {
			if (t_check(page[i], psz, (unsigned long long)i * psz, id * 1000 + round))
				return (void *)2;
			pp_page_put(page[i]);
		}
	}
	return NULL;
}

static int test_trim_races(void)
{
	pthread_t th[CHURN_THREADS];
	size_t chunks, in_use;
	void *ret;

	for (int i = 0; i < CHURN_THREADS; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, churn_main, (void *)(uintptr_t)(i + 1)), 0);
	for (int k = 0; k < 200; k++)
		pp__page_trim();
	for (int i = 0; i < CHURN_THREADS; i++) {
		t_join(th[i], &ret, 20);
		ASSERT_EQ((intptr_t)ret, 0);
	}
	/* Every thread exited: its cache went back, nothing is out. */
	pp__page_pool_stats(&chunks, &in_use);
	ASSERT_EQ(in_use, pp__thread_page_count());
	ASSERT_LE(chunks, 1);
	return 0;
}

/*
 * fork() while other threads hold the allocator's locks: the child must
 * still allocate and sweep.  A child that hangs on a lock its parent's
 * thread held at the fork is killed by its alarm.
 */
static atomic_bool fork_stop;

static unsigned int page_burst(unsigned int n)
{
	void *page[200];
	unsigned int got = 0;

	for (; got < n; got++) {
		page[got] = pp_page_alloc();
		if (!page[got])
			break;
		memset(page[got], (int)got, 64);
	}
	for (unsigned int i = 0; i < got; i++)
		pp_page_put(page[i]);
	return got;
}

static void *fork_churn_main(void *arg)
{
	bool sweeper = arg != NULL;

	while (!atomic_load(&fork_stop)) {
		/* More than a thread cache holds: every burst refills and spills. */
		if (page_burst(200) != 200)
			return (void *)1;
		if (sweeper)
			pp__page_trim();
	}
	return NULL;
}

static int test_fork_while_churning(void)
{
	pthread_t th[4];
	void *ret;

	if (t_under_valgrind())
		return t_skip("valgrind runs the four churning threads one at a time: 100 forks "
			      "outlast the timeout; plain, ASan and TSan runs cover it");

	for (int i = 0; i < 4; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, fork_churn_main, i ? NULL : (void *)1), 0);
	for (int k = 0; k < 100; k++) {
		int status;
		pid_t pid = fork();

		ASSERT_GE(pid, 0);
		if (!pid) {
			alarm(10);
			pp__page_trim();
			_exit(page_burst(200) == 200 ? 0 : 1);
		}
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			t_fail_at(__FILE__, __LINE__, "fork %d: child status %#x (signal %d)",
				  k, status, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	atomic_store(&fork_stop, true);
	for (int i = 0; i < 4; i++) {
		t_join(th[i], &ret, 20);
		ASSERT_EQ((intptr_t)ret, 0);
	}
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_page_alloc_aligned),
		T_SUBTEST(test_written_pages_aligned),
		T_SUBTEST(test_odirect_splice),
		T_SUBTEST(test_thread_exit_returns_pages),
		T_SUBTEST(test_idle_cache_trimmed),
		T_SUBTEST(test_trim_races),
		T_SUBTEST(test_fork_while_churning),
	};

	return T_RUN_SUBTESTS(tests);
}
