// SPDX-License-Identifier: MIT
/*
 * Description: reference-count overflow (CVE-2019-11487 class, T-REF1).
 * With pp__page_ref_max lowered to 8, sharing one buffer again and again
 * (tee, partial pipe-to-pipe splice) must refuse with EFAULT once the count
 * is at the limit, never wrap; the same limit guards file buffers (the file
 * reference each buffer holds) and pp_write_ref() memory.  After the
 * refusal every copy still reads right, and releasing everything frees
 * everything exactly once (ASan/valgrind see no leak and no use-after-free;
 * the pp_write_ref release callback runs once).
 */
#include "helpers.h"
#include "internal.h"

#define LIMIT	8

/* tee one anonymous page into several pipes until the count refuses. */
static int test_tee_anon_limit(void)
{
	struct pp_file *a[2], *b[LIMIT + 2][2];
	unsigned char src[1000], got[1000];
	int ok = 0, i;

	pp__page_ref_max = LIMIT;
	t_fill(src, sizeof(src), 0, 1);
	t_pipe2(a, O_NONBLOCK);
	t_write_full(a[1], src, sizeof(src));
	for (i = 0; i < LIMIT + 2; i++) {
		t_pipe2(b[i], O_NONBLOCK);
		errno = 0;
		ssize_t n = pp_tee(a[0], b[i][1], sizeof(src), 0);
		if (n == (ssize_t)sizeof(src)) {
			ok++;
			continue;
		}
		ASSERT_EQ(n, -1);
		ASSERT_EQ(errno, EFAULT);
		ASSERT_EQ(t_fionread(b[i][0]), 0);	/* nothing half-queued */
	}
	ASSERT_EQ(ok, LIMIT - 1);	/* the writer's reference + 7 copies */
	ASSERT_EQ(t_fionread(a[0]), (int)sizeof(src));

	/* The same buffer teed repeatedly into ONE pipe: refused at the limit too. */
	for (i = 0; i < ok; i++) {
		memset(got, 0, sizeof(got));
		ASSERT_EQ(pp_read(b[i][0], got, sizeof(got)), (ssize_t)sizeof(got));
		ASSERT_MEM_EQ(got, src, sizeof(src));
	}
	{
		int copies = 0;

		for (;;) {
			ssize_t n = pp_tee(a[0], b[0][1], sizeof(src), 0);
			if (n < 0) {
				ASSERT_EQ(errno, EFAULT);
				break;
			}
			ASSERT_EQ(n, (ssize_t)sizeof(src));
			copies++;
			ASSERT_LE(copies, LIMIT);
		}
		ASSERT_EQ(copies, LIMIT - 1);
		ASSERT_EQ(t_fionread(b[0][0]), copies * (int)sizeof(src));
		for (int c = 0; c < copies; c++) {
			ASSERT_EQ(pp_read(b[0][0], got, sizeof(got)), (ssize_t)sizeof(got));
			ASSERT_MEM_EQ(got, src, sizeof(src));
		}
	}

	/* A partial pipe-to-pipe splice shares the buffer too: EFAULT at the limit. */
	for (i = 1; i < LIMIT; i++)
		ASSERT_EQ(pp_tee(a[0], b[i][1], sizeof(src), 0), (ssize_t)sizeof(src));
	ASSERT_ERRNO(pp_splice(a[0], NULL, b[LIMIT][1], NULL, 10, 0), EFAULT);
	ASSERT_EQ(t_fionread(a[0]), (int)sizeof(src));
	/* A whole-buffer move takes no reference: still allowed. */
	ASSERT_EQ(pp_splice(a[0], NULL, b[LIMIT][1], NULL, sizeof(src), 0), (ssize_t)sizeof(src));
	ASSERT_EQ(pp_read(b[LIMIT][0], got, sizeof(got)), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));

	/* Drop the rest in any order: each reference exactly once. */
	for (i = 0; i < LIMIT + 2; i++) {
		pp_close(b[i][1]);
		pp_close(b[i][0]);
	}
	pp_close(a[0]);
	pp_close(a[1]);
	return 0;
}

/* After releases the count comes down and sharing works again. */
static int test_limit_recovers(void)
{
	struct pp_file *a[2], *b[2];
	char got[4];

	pp__page_ref_max = LIMIT;
	t_pipe2(a, O_NONBLOCK);
	t_pipe2(b, O_NONBLOCK);
	t_write_full(a[1], "abcd", 4);
	for (int round = 0; round < 5; round++) {
		int copies = 0;

		while (pp_tee(a[0], b[1], 4, 0) == 4)
			copies++;
		ASSERT_EQ(errno, EFAULT);
		ASSERT_EQ(copies, LIMIT - 1);
		for (int c = 0; c < copies; c++) {
			ASSERT_EQ(pp_read(b[0], got, 4), 4);
			ASSERT_MEM_EQ(got, "abcd", 4);
		}
	}
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	return 0;
}

/* File buffers: each holds a reference on the file's descriptor record. */
static int test_file_buffers_limit(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 65536, 3, path);
	struct pp_file *a[2], *b[2], *in;
	static unsigned char got[65536];
	off_t off = 0;
	ssize_t n;
	int copies = 0;

	unlink(path);
	pp__page_ref_max = LIMIT;
	in = pp_fdopen(fd);
	ASSERT_TRUE(in != NULL);
	t_pipe2(a, O_NONBLOCK);
	t_pipe2(b, O_NONBLOCK);
	/* The file's own reference + 7 buffers: a 16-page splice stops at 7. */
	n = pp_splice(in, &off, a[1], NULL, 65536, 0);
	ASSERT_EQ(n, 7 * 4096);
	ASSERT_EQ(off, 7 * 4096);
	ASSERT_ERRNO(pp_splice(in, &off, a[1], NULL, 65536, 0), EFAULT);
	ASSERT_EQ(off, 7 * 4096);	/* a refused splice moves no offset */
	ASSERT_EQ(lseek(fd, 0, SEEK_CUR), 0);
	ASSERT_ERRNO(pp_tee(a[0], b[1], 4096, 0), EFAULT);
	ASSERT_EQ(t_fionread(b[0]), 0);
	ASSERT_EQ(t_fionread(a[0]), 7 * 4096);

	/* Consume one buffer: one reference free, one tee succeeds. */
	ASSERT_EQ(pp_read(a[0], got, 4096), 4096);
	ASSERT_EQ(t_check(got, 4096, 0, 3), 0);
	ASSERT_EQ(pp_tee(a[0], b[1], 4096, 0), 4096);
	copies++;
	ASSERT_ERRNO(pp_tee(a[0], b[1], 4096, 0), EFAULT);
	ASSERT_EQ(pp_read(b[0], got, 4096), 4096);
	ASSERT_EQ(t_check(got, 4096, 4096, 3), 0);

	/* Everything left reads right, then closing frees the reference record. */
	ASSERT_EQ(pp_read(a[0], got, sizeof(got)), 6 * 4096);
	ASSERT_EQ(t_check(got, 6 * 4096, 4096, 3), 0);
	pp__page_ref_max = INT_MAX;
	n = pp_splice(in, &off, a[1], NULL, 65536, 0);
	ASSERT_EQ(n, 65536 - 7 * 4096);
	ASSERT_EQ(pp_read(a[0], got, sizeof(got)), n);
	ASSERT_EQ(t_check(got, (size_t)n, 7 * 4096, 3), 0);
	(void)copies;
	pp_close(in);
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	close(fd);
	return 0;
}

/* File buffers released after the pp_file that made them is closed. */
static int test_file_buffers_outlive_file(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 16384, 4, path);
	struct pp_file *a[2], *b[2], *in;
	unsigned char got[16384];
	off_t off = 0;

	unlink(path);
	pp__page_ref_max = LIMIT;
	in = pp_fdopen(fd);
	t_pipe2(a, O_NONBLOCK);
	t_pipe2(b, O_NONBLOCK);
	ASSERT_EQ(pp_splice(in, &off, a[1], NULL, 8192, 0), 8192);
	ASSERT_EQ(pp_tee(a[0], b[1], 8192, 0), 8192);
	pp_close(in);
	close(fd);	/* the buffers hold their own descriptor */
	ASSERT_EQ(pp_read(b[0], got, sizeof(got)), 8192);
	ASSERT_EQ(t_check(got, 8192, 0, 4), 0);
	pp_close(b[0]);
	pp_close(b[1]);
	ASSERT_EQ(pp_read(a[0], got, sizeof(got)), 8192);
	ASSERT_EQ(t_check(got, 8192, 0, 4), 0);
	pp_close(a[0]);
	pp_close(a[1]);
	return 0;
}

static int releases;
static size_t released;

static void on_release(void *buf, size_t count, void *arg)
{
	(void)buf;
	(void)arg;
	releases++;
	released += count;
}

/* pp_write_ref: one reference per page queued, plus the caller's. */
static int test_write_ref_limit(void)
{
	struct pp_file *a[2], *b[2];
	static unsigned char src[16 * 4096] __attribute__((aligned(4096)));
	static unsigned char got[16 * 4096];
	ssize_t n;

	pp__page_ref_max = LIMIT;
	t_fill(src, sizeof(src), 0, 5);
	t_pipe2(a, O_NONBLOCK);
	t_pipe2(b, O_NONBLOCK);
	n = pp_write_ref(a[1], src, sizeof(src), on_release, NULL);
	ASSERT_EQ(n, 7 * 4096);	/* partial, as write is: the caller owns the rest */
	/* The caller's reference went when pp_write_ref returned: one more fits. */
	ASSERT_EQ(pp_tee(a[0], b[1], 4096, 0), 4096);
	ASSERT_ERRNO(pp_tee(a[0], b[1], 4096, 0), EFAULT);
	ASSERT_EQ(t_fionread(b[0]), 4096);
	ASSERT_EQ(releases, 0);
	ASSERT_EQ(pp_read(a[0], got, sizeof(got)), n);
	ASSERT_MEM_EQ(got, src, (size_t)n);
	ASSERT_EQ(releases, 0);	/* the tee'd copy still refers to the memory */
	ASSERT_EQ(pp_read(b[0], got, sizeof(got)), 4096);
	ASSERT_MEM_EQ(got, src, 4096);
	ASSERT_EQ(releases, 1);
	ASSERT_EQ(released, (size_t)n);
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	ASSERT_EQ(releases, 1);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_tee_anon_limit),
		T_SUBTEST(test_limit_recovers),
		T_SUBTEST(test_file_buffers_limit),
		T_SUBTEST(test_file_buffers_outlive_file),
		T_SUBTEST(test_write_ref_limit),
	};

	return T_RUN_SUBTESTS(tests);
}
