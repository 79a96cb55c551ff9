// SPDX-License-Identifier: MIT
/*
 * Description: vmsplice argument validation (the CVE-2008-0009/0010/0600
 * class, T-V1/T-V2): a NULL iovec array, a NULL base with a length,
 * base + len past the end of the address space, memory that is not mapped
 * (in the first, a middle or the last page of a region), more than 1024
 * segments, and iov_len above SSIZE_MAX give EFAULT or EINVAL with the
 * pipe unchanged, in both directions (into the pipe and out of it into the
 * caller's memory); zero-length segments are skipped whatever their base;
 * exactly 1024 segments are accepted.
 */
#include <stdint.h>
#include <sys/mman.h>

#include "helpers.h"
#include "internal.h"

/* The pipe holds "hello" and nothing else. */
static void check_unchanged(struct pp_file *r)
{
	ASSERT_EQ(t_fionread(r), 5);
}

static void check_hello(struct pp_file *r)
{
	char b[16];

	ASSERT_EQ(pp_read(r, b, sizeof(b)), 5);
	ASSERT_MEM_EQ(b, "hello", 5);
}

/* A page-aligned region of n pages where page `hole` is unmapped. */
static char *region_with_hole(size_t n, size_t hole)
{
	size_t psz = pp_page_size();
	char *m = mmap(NULL, n * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_TRUE(m != MAP_FAILED);
	memset(m, 'm', n * psz);
	ASSERT_EQ(munmap(m + hole * psz, psz), 0);
	return m;
}

static int test_bad_pointers_to_pipe(void)
{
	struct pp_file *p[2];
	size_t psz = pp_page_size();
	char ok[64] = "ok";
	struct iovec iov[3];

	t_pipe2(p, O_NONBLOCK);
	t_write_full(p[1], "hello", 5);

	ASSERT_ERRNO(pp_vmsplice(p[1], NULL, 1, 0), EFAULT);
	check_unchanged(p[0]);
	iov[0] = (struct iovec){ NULL, 10 };
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, 0), EFAULT);
	check_unchanged(p[0]);
	/* base + len wraps the address space */
	iov[0] = (struct iovec){ (void *)(UINTPTR_MAX - 100), 4096 };
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, 0), EFAULT);
	check_unchanged(p[0]);
	/* a bad segment behind a good one: the whole call is refused up front */
	iov[0] = (struct iovec){ ok, 2 };
	iov[1] = (struct iovec){ (void *)(UINTPTR_MAX - 10), 100 };
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, 2, 0), EFAULT);
	check_unchanged(p[0]);
	/* a NULL base is found when its page is pinned: the kernel returns what it queued before */
	iov[1] = (struct iovec){ NULL, 1 };
	{
		struct pp_file *q[2];
		char drain[2];

		t_pipe2(q, 0);
		ASSERT_EQ(pp_vmsplice(q[1], iov, 2, 0), 2);
		ASSERT_EQ(pp_read(q[0], drain, 2), 2);
		pp_close(q[0]);
		pp_close(q[1]);
	}
	check_unchanged(p[0]);
	/* iov_len above SSIZE_MAX */
	iov[0] = (struct iovec){ ok, (size_t)SSIZE_MAX + 1 };
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, 0), EINVAL);
	check_unchanged(p[0]);
	/* kernel-half addresses (not mapped for us) */
	iov[0] = (struct iovec){ (void *)(uintptr_t)0xffff800000000000ull, 10 };
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, 0), EFAULT);
	check_unchanged(p[0]);

	/* Unmapped memory: first, middle and last page of a 3-page region. */
	for (size_t hole = 0; hole < 3; hole++) {
		char *m = region_with_hole(3, hole);

		iov[0] = (struct iovec){ m, 3 * psz };
		if (hole == 0) {
			ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, 0), EFAULT);
		} else {
			/* the kernel pins page by page: the mapped prefix goes in */
			static char drain[3 * 65536];
			struct pp_file *q[2];

			t_pipe2(q, 0);
			ASSERT_EQ(pp_vmsplice(q[1], iov, 1, 0), hole * psz);
			ASSERT_EQ(pp_read(q[0], drain, hole * psz), hole * psz);
			ASSERT_EQ(drain[0], 'm');
			pp_close(q[0]);
			pp_close(q[1]);
		}
		check_unchanged(p[0]);
		iov[0] = (struct iovec){ m + hole * psz + 100, 1 };
		ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, 0), EFAULT);
		check_unchanged(p[0]);
		for (size_t pg = 0; pg < 3; pg++)
			if (pg != hole)
				munmap(m + pg * psz, psz);
	}
	/* A freshly unmapped page */
	{
		char *m = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_TRUE(m != MAP_FAILED);
		ASSERT_EQ(munmap(m, psz), 0);
		iov[0] = (struct iovec){ m, 10 };
		ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1, SPLICE_F_GIFT), EFAULT);
		check_unchanged(p[0]);
	}
	check_hello(p[0]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_segment_count(void)
{
	struct pp_file *p[2];
	static struct iovec iov[1025];
	static char bytes[1025];

	t_pipe2(p, O_NONBLOCK);
	t_write_full(p[1], "hello", 5);
	for (int i = 0; i < 1025; i++) {
		bytes[i] = (char)('a' + i % 26);
		iov[i] = (struct iovec){ &bytes[i], 0 };	/* zero-length: skipped */
	}
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, 1025, 0), EINVAL);
	check_unchanged(p[0]);
	ASSERT_ERRNO(pp_vmsplice(p[1], iov, (size_t)-1, 0), EINVAL);
	check_unchanged(p[0]);
	ASSERT_ERRNO(pp_vmsplice(p[0], iov, 1025, 0), EINVAL);
	check_unchanged(p[0]);
	/* 1024 zero-length segments: accepted, nothing queued */
	ASSERT_EQ(pp_vmsplice(p[1], iov, 1024, 0), 0);
	check_unchanged(p[0]);
	ASSERT_EQ(pp_vmsplice(p[1], iov, 0, 0), 0);
	ASSERT_EQ(pp_vmsplice(p[1], NULL, 0, 0), 0);
	check_unchanged(p[0]);
	/* zero-length segments with bad bases are skipped, not dereferenced */
	iov[0] = (struct iovec){ NULL, 0 };
	iov[1] = (struct iovec){ (void *)(UINTPTR_MAX - 1), 0 };
	iov[2] = (struct iovec){ &bytes[2], 1 };
	iov[3] = (struct iovec){ (void *)16, 0 };
	iov[4] = (struct iovec){ &bytes[4], 1 };
	ASSERT_EQ(pp_vmsplice(p[1], iov, 5, 0), 2);
	{
		char b[16];

		ASSERT_EQ(pp_read(p[0], b, sizeof(b)), 7);
		ASSERT_MEM_EQ(b, "hello", 5);
		ASSERT_EQ(b[5], bytes[2]);
		ASSERT_EQ(b[6], bytes[4]);
	}
	/* 1024 one-byte segments: accepted (the pipe takes what fits) */
	for (int i = 0; i < 1024; i++)
		iov[i] = (struct iovec){ &bytes[i], 1 };
	ssize_t n = pp_vmsplice(p[1], iov, 1024, SPLICE_F_NONBLOCK);
	ASSERT_TRUE(n >= 1 && n <= 1024);
	{
		char b[1024];

		ASSERT_EQ(pp_read(p[0], b, sizeof(b)), n);
		ASSERT_MEM_EQ(b, bytes, (size_t)n);
	}
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* Out of the pipe (vmsplice on the read end): bad destinations consume nothing. */
static int test_bad_pointers_from_pipe(void)
{
	struct pp_file *p[2];
	size_t psz = pp_page_size();
	char dst[16];
	struct iovec iov[2];

	memset(dst, 0, sizeof(dst));
	t_pipe2(p, O_NONBLOCK);
	t_write_full(p[1], "hello", 5);

	ASSERT_ERRNO(pp_vmsplice(p[0], NULL, 1, 0), EFAULT);
	check_unchanged(p[0]);
	iov[0] = (struct iovec){ NULL, 5 };
	ASSERT_ERRNO(pp_vmsplice(p[0], iov, 1, 0), EFAULT);
	check_unchanged(p[0]);
	iov[0] = (struct iovec){ (void *)(UINTPTR_MAX - 2), 5 };
	ASSERT_ERRNO(pp_vmsplice(p[0], iov, 1, 0), EFAULT);
	check_unchanged(p[0]);
	{
		char *m = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_TRUE(m != MAP_FAILED);
		ASSERT_EQ(munmap(m, psz), 0);
		iov[0] = (struct iovec){ dst, 2 };
		iov[1] = (struct iovec){ m, 3 };
		ASSERT_ERRNO(pp_vmsplice(p[0], iov, 2, 0), EFAULT);
		/*
		 * The good segment may have been written: Linux copies up to
		 * the fault and then fails the whole buffer (pipe_to_user).
		 */
		check_unchanged(p[0]);
	}
	/* A good destination works, zero-length NULL segments skipped. */
	iov[0] = (struct iovec){ NULL, 0 };
	iov[1] = (struct iovec){ dst, sizeof(dst) };
	ASSERT_EQ(pp_vmsplice(p[0], iov, 2, 0), 5);
	ASSERT_MEM_EQ(dst, "hello", 5);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* Bad flags and bad files: refused before any pointer is looked at. */
static int test_bad_flags_files(void)
{
	struct pp_file *p[2];
	struct iovec iov = { "abc", 3 };

	t_pipe2(p, O_NONBLOCK);
	t_write_full(p[1], "hello", 5);
	ASSERT_ERRNO(pp_vmsplice(p[1], &iov, 1, 0x80), EINVAL);
	ASSERT_ERRNO(pp_vmsplice(NULL, &iov, 1, 0), EBADF);
	check_unchanged(p[0]);
	/* pp_write_ref has the same checks */
	ASSERT_ERRNO(pp_write_ref(p[1], NULL, 10, NULL, NULL), EFAULT);
	ASSERT_ERRNO(pp_write_ref(p[1], (void *)(UINTPTR_MAX - 3), 10, NULL, NULL), EFAULT);
	check_unchanged(p[0]);
	check_hello(p[0]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_bad_pointers_to_pipe),
		T_SUBTEST(test_segment_count),
		T_SUBTEST(test_bad_pointers_from_pipe),
		T_SUBTEST(test_bad_flags_files),
	};

	return T_RUN_SUBTESTS(tests);
}
