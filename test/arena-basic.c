// SPDX-License-Identifier: MIT
/*
 * Description: the shared arena of cross-process pipes, stage 1
 * (src/arena.c, docs/shared-pipes.md): pages by index, shared by fork()
 * and by mapping the descriptor again; a mapping refused unless the
 * descriptor is a sealed arena whose size matches its own layout; a peer's
 * scribbles (an index out of range, a cycle in the free list, a page handed
 * out twice, a put too many) poison the arena, and every call after fails
 * with EIO, none touching memory outside the mapping; no descriptor left
 * behind.
 */
#include "helpers.h"
#include "../src/arena.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPAGES	8

/* Byte offsets of the shared words the tests scribble on (arena.c's header). */
#define OFF_FREE_HEAD	64

static uint64_t *free_head(struct pp__arena *a)
{
	return (uint64_t *)(a->base + OFF_FREE_HEAD);
}

static uint32_t *next_links(struct pp__arena *a)
{
	return (uint32_t *)(a->base + a->lay.next_off);
}

static bool in_pages(struct pp__arena *a, const void *p)
{
	const unsigned char *c = p;

	return c >= a->base + a->lay.pages_off && c < a->base + a->lay.size &&
	       (size_t)(c - a->base - a->lay.pages_off) % a->lay.page_size == 0;
}

static int arena_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], target[128];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = 0;
			n += strstr(target, "pagepipe-arena") != NULL;
		}
	}
	closedir(d);
	return n;
}

static int test_alloc_all_and_free(void)
{
	struct pp__arena a;
	uint32_t idx[NPAGES], extra;
	bool seen[NPAGES] = { false };

	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	ASSERT_EQ(pp__arena_free_pages(&a), (uint32_t)NPAGES);
	for (int i = 0; i < NPAGES; i++) {
		unsigned char *p;

		ASSERT_EQ(pp__arena_page_alloc(&a, &idx[i]), 0);
		ASSERT_TRUE(idx[i] < NPAGES && !seen[idx[i]]);
		seen[idx[i]] = true;
		p = pp__arena_page(&a, idx[i]);
		ASSERT_TRUE(in_pages(&a, p));
		memset(p, 0x30 + i, a.lay.page_size);
	}
	ASSERT_EQ(pp__arena_page_alloc(&a, &extra), -ENOMEM);
	for (int i = 0; i < NPAGES; i++) {
		unsigned char *p = pp__arena_page(&a, idx[i]);

		ASSERT_EQ(p[0], 0x30 + i);
		ASSERT_EQ(p[a.lay.page_size - 1], 0x30 + i);
	}
	/* A second reference keeps a page out of the free list. */
	ASSERT_EQ(pp__arena_page_get(&a, idx[0]), 0);
	for (int i = 0; i < NPAGES; i++)
		ASSERT_EQ(pp__arena_page_put(&a, idx[i]), 0);
	ASSERT_EQ(pp__arena_free_pages(&a), (uint32_t)NPAGES - 1);
	ASSERT_EQ(pp__arena_page_put(&a, idx[0]), 0);
	ASSERT_EQ(pp__arena_free_pages(&a), (uint32_t)NPAGES);
	ASSERT_EQ(pp__arena_page_alloc(&a, &extra), 0);
	ASSERT_EQ(pp__arena_page_put(&a, extra), 0);
	ASSERT_EQ(pp__arena_poisoned(&a), 0);
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

/*
 * A child inherits the mapping and also maps the descriptor a second time,
 * at another address; pages it fills there are read here by index.
 */
static int test_fork_and_second_mapping(void)
{
	struct pp__arena a;
	int fds[2], status;
	uint32_t got[2];
	pid_t pid;

	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	ASSERT_EQ(pipe(fds), 0);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		struct pp__arena b;
		uint32_t i[2];

		close(fds[0]);
		if (pp__arena_page_alloc(&a, &i[0]) || pp__arena_map(&b, a.fd) ||
		    b.base == a.base || pp__arena_page_alloc(&b, &i[1]))
			_exit(2);
		memset(pp__arena_page(&a, i[0]), 0x5a, a.lay.page_size);
		memset(pp__arena_page(&b, i[1]), 0xa5, b.lay.page_size);
		if (write(fds[1], i, sizeof(i)) != (ssize_t)sizeof(i))
			_exit(3);
		pp__arena_unmap(&b);
		_exit(0);
	}
	close(fds[1]);
	ASSERT_EQ(read(fds[0], got, sizeof(got)), (ssize_t)sizeof(got));
	close(fds[0]);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT_NE(got[0], got[1]);
	ASSERT_EQ(((unsigned char *)pp__arena_page(&a, got[0]))[100], 0x5a);
	ASSERT_EQ(((unsigned char *)pp__arena_page(&a, got[1]))[100], 0xa5);
	ASSERT_EQ(pp__arena_free_pages(&a), (uint32_t)NPAGES - 2);
	ASSERT_EQ(pp__arena_page_put(&a, got[0]), 0);
	ASSERT_EQ(pp__arena_page_put(&a, got[1]), 0);
	ASSERT_EQ(pp__arena_free_pages(&a), (uint32_t)NPAGES);
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

static int test_map_refuses(void)
{
	struct pp__arena a, b;
	int fd;

	/* Not a memfd at all. */
	fd = open("/dev/null", O_RDWR);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pp__arena_map(&b, fd), -EINVAL);
	close(fd);

	/* A memfd with an arena's bytes but no seals: it could still shrink. */
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	fd = memfd_create("pagepipe-arena-copy", MFD_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, a.base, a.lay.size), (ssize_t)a.lay.size);
	ASSERT_EQ(pp__arena_map(&b, fd), -EINVAL);
	close(fd);

	/* Sealed, but its header says another size than the file has. */
	fd = memfd_create("pagepipe-arena-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, a.base, a.lay.size - a.lay.page_size),
		  (ssize_t)(a.lay.size - a.lay.page_size));
	ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	ASSERT_EQ(pp__arena_map(&b, fd), -EINVAL);
	close(fd);

	/* Sealed and sized, with a wrong magic. */
	fd = memfd_create("pagepipe-arena-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, a.base, a.lay.size), (ssize_t)a.lay.size);
	ASSERT_EQ(pwrite(fd, "notarena", 8, 0), 8);
	ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	ASSERT_EQ(pp__arena_map(&b, fd), -EINVAL);
	close(fd);

	/* The real one maps, and its seals hold against a peer. */
	ASSERT_EQ(pp__arena_map(&b, a.fd), 0);
	ASSERT_EQ(ftruncate(a.fd, 4096), -1);
	ASSERT_EQ(errno, EPERM);
	pp__arena_unmap(&b);
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

/* Each scribble a peer could make: found, poisoned, EIO from then on. */
static int test_corruption_poisons(void)
{
	struct pp__arena a;
	uint32_t i, j;

	/* A head that indexes past the pages. */
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	__atomic_store_n(free_head(&a), (uint64_t)7 << 32 | (NPAGES + 5), __ATOMIC_RELAXED);
	ASSERT_EQ(pp__arena_page_alloc(&a, &i), -EIO);
	ASSERT_TRUE(pp__arena_poisoned(&a));
	/* A peer cannot take it back. */
	__atomic_store_n(free_head(&a), 0, __ATOMIC_RELAXED);
	memset(a.base + OFF_FREE_HEAD + 64, 0, 4);
	ASSERT_EQ(pp__arena_page_alloc(&a, &i), -EIO);
	ASSERT_EQ(pp__arena_page_put(&a, 0), -EIO);
	pp__arena_unmap(&a);

	/* A cycle in the free list: the page comes out twice, the second time in use. */
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	next_links(&a)[0] = 0;
	ASSERT_EQ(pp__arena_page_alloc(&a, &i), 0);
	ASSERT_EQ(i, 0u);
	ASSERT_EQ(pp__arena_page_alloc(&a, &j), -EIO);
	pp__arena_unmap(&a);

	/* A walk of a cyclic list ends. */
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	next_links(&a)[NPAGES - 1] = 2;
	ASSERT_EQ(pp__arena_free_pages(&a), (uint32_t)NPAGES);
	ASSERT_TRUE(pp__arena_poisoned(&a));
	pp__arena_unmap(&a);

	/* A link out of range, met when the page that holds it is taken. */
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	next_links(&a)[0] = 0x7fffffff;
	ASSERT_EQ(pp__arena_page_alloc(&a, &i), -EIO);
	pp__arena_unmap(&a);

	/* One put too many, a get of a free page, a page index out of range. */
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	ASSERT_EQ(pp__arena_page_alloc(&a, &i), 0);
	ASSERT_EQ(pp__arena_page_put(&a, i), 0);
	ASSERT_EQ(pp__arena_page_put(&a, i), -EIO);
	pp__arena_unmap(&a);
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	ASSERT_EQ(pp__arena_page_get(&a, 3), -EIO);
	pp__arena_unmap(&a);
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	ASSERT_EQ(pp__arena_page(&a, NPAGES), NULL);
	ASSERT_EQ(pp__arena_page_alloc(&a, &i), -EIO);
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

/*
 * Random operations with random words of the header, the counts and the
 * links overwritten between them: whatever happens, no crash, no page
 * address outside the mapping, and the loop ends.  Under ASan a read or
 * write outside the mapping is a report.
 */
static int test_scribble_fuzz(void)
{
	unsigned int seed = 1;

	for (int round = 0; round < 200; round++) {
		struct pp__arena a;
		uint32_t held[NPAGES];
		unsigned int nheld = 0;
		size_t words;

		ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
		words = a.lay.slots_off / 4;	/* header, counts, links */
		for (int op = 0; op < 200; op++) {
			unsigned int r = (unsigned int)rand_r(&seed);
			uint32_t i;
			void *p;

			switch (r % 5) {
			case 0:
				if (nheld < NPAGES && pp__arena_page_alloc(&a, &i) == 0)
					held[nheld++] = i;
				break;
			case 1:
				if (nheld)
					(void)pp__arena_page_put(&a, held[--nheld]);
				break;
			case 2:
				(void)pp__arena_page_get(&a, (uint32_t)rand_r(&seed) % (NPAGES + 2));
				break;
			case 3:
				p = pp__arena_page(&a, (uint32_t)rand_r(&seed) % (NPAGES + 2));
				if (p && !in_pages(&a, p))
					t_fail_at(__FILE__, __LINE__, "page address %p outside the pages", p);
				if (p)
					memset(p, 0xee, 64);
				break;
			case 4:
				if (r % 3 == 0) {
					uint32_t *w = (uint32_t *)a.base + 4 + (size_t)rand_r(&seed) % (words - 4);

					*w = (uint32_t)rand_r(&seed) % (r & 1 ? NPAGES + 2 : UINT32_MAX);
				}
				break;
			}
			(void)pp__arena_free_pages(&a);
		}
		pp__arena_unmap(&a);
	}
	return T_EXIT_PASS;
}

/*
 * Two processes take and give back pages as fast as they can, each filling
 * its page with its own mark and checking it before the put: a page handed
 * to both at once (a lost ABA tag, a missing ordering) shows as the other's
 * mark.  Then every page is free again.
 */
static int churn(struct pp__arena *a, unsigned char mark, long long until)
{
	long n = 0;

	while (t_now_ms() < until || n < 1000) {
		uint32_t i;
		unsigned char *p;
		int err = pp__arena_page_alloc(a, &i);

		if (err == -ENOMEM)
			continue;
		if (err)
			return 10;
		p = pp__arena_page(a, i);
		memset(p, mark, 256);
		for (int k = 0; k < 256; k++)
			if (p[k] != mark)
				return 11;
		if (pp__arena_page_put(a, i))
			return 12;
		n++;
	}
	return 0;
}

static int test_two_processes_churn(void)
{
	struct pp__arena a;
	long long until;
	int status;
	pid_t pid;

	ASSERT_EQ(pp__arena_create(&a, 4, 16), 0);
	until = t_now_ms() + 500;
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0)
		_exit(churn(&a, 0xc1, until));
	ASSERT_EQ(churn(&a, 0x9a, until), 0);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	ASSERT_EQ(pp__arena_free_pages(&a), 4u);
	ASSERT_EQ(pp__arena_poisoned(&a), 0);
	pp__arena_unmap(&a);
	return T_EXIT_PASS;
}

static int test_no_descriptor_left(void)
{
	struct pp__arena a, b;
	int before = arena_fds();

	ASSERT_TRUE(before >= 0);
	ASSERT_EQ(pp__arena_create(&a, NPAGES, 16), 0);
	ASSERT_EQ(pp__arena_map(&b, a.fd), 0);
	ASSERT_EQ(arena_fds(), before + 2);
	pp__arena_unmap(&b);
	pp__arena_unmap(&a);
	ASSERT_EQ(arena_fds(), before);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_alloc_all_and_free),
		T_SUBTEST(test_fork_and_second_mapping),
		T_SUBTEST(test_map_refuses),
		T_SUBTEST(test_corruption_poisons),
		T_SUBTEST(test_scribble_fuzz),
		T_SUBTEST(test_two_processes_churn),
		T_SUBTEST(test_no_descriptor_left),
	};

	return T_RUN_SUBTESTS(tests);
}
