// SPDX-License-Identifier: MIT
/*
 * Description: pp_vmsplice() as vmsplice(2), compared with the kernel
 * (issue 3 §5, reference §3.9, §4.3): on a write end the caller's memory is
 * queued by reference, so a change to the memory before the read shows -
 * Linux's semantics too (the kernel pins the pages; no completion notice);
 * vmspliced buffers are never merged into; on a read end a copy out; only
 * SPLICE_F_NONBLOCK makes it non-blocking, the pipe's O_NONBLOCK is ignored
 * both ways; more than 1024 segments EINVAL; a NULL base with a length, or
 * unmapped memory, EFAULT with the pipe unchanged; zero-length segments
 * skipped; SPLICE_F_GIFT accepted; EPIPE; not a pipe EBADF.
 */
#include <signal.h>
#include <sys/mman.h>

#include "helpers.h"

#define PG 4096

#define VMS_W(iov, n, fl) ASSERT_SAME(vmsplice(e.k[1], (iov), (n), (fl)), pp_vmsplice(e.p[1], (iov), (n), (fl)))
#define READ_SAME(n) ASSERT_SAME_READ(e.k[0], e.p[0], (n))

static int test_by_reference(void)
{
	struct t_pair e;
	unsigned char *km = aligned_alloc(PG, 2 * PG), *pm = aligned_alloc(PG, 2 * PG);
	struct iovec ki = { km + 100, PG }, pi = { pm + 100, PG };
	unsigned char kb[PG], pb[PG];

	ASSERT_TRUE(km && pm);
	t_pair_open(&e, 0);
	t_fill(km, 2 * PG, 0, 71);
	t_fill(pm, 2 * PG, 0, 71);
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, 0), pp_vmsplice(e.p[1], &pi, 1, 0));
	/* Change the memory after vmsplice, before the read: the change shows, on Linux too. */
	memcpy(km + 200, "CHANGED", 7);
	memcpy(pm + 200, "CHANGED", 7);
	memcpy(km + PG + 50, "LATER", 5);
	memcpy(pm + PG + 50, "LATER", 5);
	ASSERT_EQ(read(e.k[0], kb, PG), PG);
	ASSERT_EQ(t_read_full(e.p[0], pb, PG), PG);
	ASSERT_MEM_EQ(kb, pb, PG);
	ASSERT_MEM_EQ(pb + 100, "CHANGED", 7);
	ASSERT_MEM_EQ(pb + PG - 100 + 50, "LATER", 5);
	t_pair_close(&e);
	free(km);
	free(pm);
	return T_EXIT_PASS;
}

/* A write after vmsplice makes a new buffer: the caller's memory is never written. */
static int test_never_merged_into(void)
{
	struct t_pair e;
	unsigned char *km = aligned_alloc(PG, PG), *pm = aligned_alloc(PG, PG);
	struct iovec ki = { km, 5 }, pi = { pm, 5 };

	ASSERT_TRUE(km && pm);
	t_pair_open(&e, 0);
	memset(km, '.', PG);
	memset(pm, '.', PG);
	memcpy(km, "hello", 5);
	memcpy(pm, "hello", 5);
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, SPLICE_F_GIFT), pp_vmsplice(e.p[1], &pi, 1, SPLICE_F_GIFT));
	ASSERT_SAME(write(e.k[1], "XYZ", 3), pp_write(e.p[1], "XYZ", 3));
	ASSERT_MEM_EQ(pm + 5, "...", 3);
	ASSERT_MEM_EQ(km + 5, "...", 3);
	READ_SAME(100);
	t_pair_close(&e);
	free(km);
	free(pm);
	return T_EXIT_PASS;
}

static int test_read_end_copies(void)
{
	struct t_pair e;
	unsigned char src[20000], kb[20000], pb[20000];
	struct iovec ki[3] = { { kb, 100 }, { kb + 100, 0 }, { kb + 200, 19000 } };
	struct iovec pi[3] = { { pb, 100 }, { pb + 100, 0 }, { pb + 200, 19000 } };

	t_pair_open(&e, 0);
	t_fill(src, sizeof(src), 0, 72);
	ASSERT_EQ(write(e.k[1], src, sizeof(src)), 20000);
	ASSERT_EQ(t_write_full(e.p[1], src, sizeof(src)), 20000);
	memset(kb, 0, sizeof(kb));
	memset(pb, 0, sizeof(pb));
	ASSERT_SAME(vmsplice(e.k[0], ki, 3, 0), pp_vmsplice(e.p[0], pi, 3, 0));
	ASSERT_MEM_EQ(kb, pb, sizeof(kb));
	ASSERT_MEM_EQ(pb, src, 100);
	ASSERT_MEM_EQ(pb + 200, src + 100, 19000);
	/* A copy: changing it changes nothing in the pipe. */
	memset(pb, 0, sizeof(pb));
	ASSERT_SAME(vmsplice(e.k[0], ki, 3, 0), pp_vmsplice(e.p[0], pi, 3, 0));
	ASSERT_MEM_EQ(pb, src + 19100, 100);
	/* Empty, writers gone: 0. */
	close(e.k[1]); e.k[1] = -1;
	pp_close(e.p[1]); e.p[1] = NULL;
	ASSERT_SAME(vmsplice(e.k[0], ki, 3, 0), pp_vmsplice(e.p[0], pi, 3, 0));
	t_pair_close(&e);
	return T_EXIT_PASS;
}

struct unblocker {
	int kfd;
	struct pp_file *pf;
	int read_side;	/* 1: read to make room; 0: write to give data */
};

static void *unblock(void *arg)
{
	struct unblocker *u = arg;
	char buf[8192];

	t_sleep_ms(150);
	memset(buf, 'u', sizeof(buf));
	if (u->read_side) {
		if (u->pf ? pp_read(u->pf, buf, sizeof(buf)) <= 0 : read(u->kfd, buf, sizeof(buf)) <= 0)
			abort();
	} else {
		if (u->pf ? pp_write(u->pf, buf, 10) != 10 : write(u->kfd, buf, 10) != 10)
			abort();
	}
	return NULL;
}

/*
 * Only SPLICE_F_NONBLOCK: with O_NONBLOCK on the pipe and no flag,
 * vmsplice still waits - for room on a write end, for data on a read end -
 * and then succeeds, on Linux and on pagepipe alike.
 */
static int test_only_splice_f_nonblock(void)
{
	struct t_pair e;
	static char fill[65536];
	char mem[10];
	struct iovec iov = { mem, 10 };
	struct unblocker u;
	pthread_t th;

	t_pair_open(&e, O_NONBLOCK);
	ASSERT_EQ(write(e.k[1], fill, sizeof(fill)), 65536);
	ASSERT_EQ(t_write_full(e.p[1], fill, sizeof(fill)), 65536);
	/* Write end, full. */
	VMS_W(&iov, 1, SPLICE_F_NONBLOCK);
	ASSERT_ERRNO(pp_vmsplice(e.p[1], &iov, 1, SPLICE_F_NONBLOCK), EAGAIN);
	u = (struct unblocker){ e.k[0], NULL, 1 };
	ASSERT_EQ(pthread_create(&th, NULL, unblock, &u), 0);
	ASSERT_EQ(vmsplice(e.k[1], &iov, 1, 0), 10);
	t_join(th, NULL, 10);
	u = (struct unblocker){ -1, e.p[0], 1 };
	ASSERT_EQ(pthread_create(&th, NULL, unblock, &u), 0);
	ASSERT_EQ(pp_vmsplice(e.p[1], &iov, 1, 0), 10);
	t_join(th, NULL, 10);
	t_pair_close(&e);

	/* Read end, empty. */
	t_pair_open(&e, O_NONBLOCK);
	ASSERT_SAME(vmsplice(e.k[0], &iov, 1, SPLICE_F_NONBLOCK), pp_vmsplice(e.p[0], &iov, 1, SPLICE_F_NONBLOCK));
	ASSERT_ERRNO(pp_vmsplice(e.p[0], &iov, 1, SPLICE_F_NONBLOCK), EAGAIN);
	/* Plain read() does honour O_NONBLOCK. */
	ASSERT_SAME(read(e.k[0], mem, 10), pp_read(e.p[0], mem, 10));
	u = (struct unblocker){ e.k[1], NULL, 0 };
	ASSERT_EQ(pthread_create(&th, NULL, unblock, &u), 0);
	ASSERT_EQ(vmsplice(e.k[0], &iov, 1, 0), 10);
	t_join(th, NULL, 10);
	u = (struct unblocker){ -1, e.p[1], 0 };
	ASSERT_EQ(pthread_create(&th, NULL, unblock, &u), 0);
	ASSERT_EQ(pp_vmsplice(e.p[0], &iov, 1, 0), 10);
	t_join(th, NULL, 10);
	ASSERT_MEM_EQ(mem, "uuuuuuuuuu", 10);
	t_pair_close(&e);
	return T_EXIT_PASS;
}

static int test_iov_max(void)
{
	struct t_pair e;
	static struct iovec iov[1025];
	static char mem[1025];

	t_pair_open(&e, O_NONBLOCK);
	for (int i = 0; i < 1025; i++)
		iov[i] = (struct iovec){ mem + i, 1 };
	VMS_W(iov, 1025, 0);
	ASSERT_ERRNO(pp_vmsplice(e.p[1], iov, 1025, 0), EINVAL);
	VMS_W(iov, (size_t)1 << 20, 0);
	t_pair_same_fionread(&e);
	/* 1024 is allowed: as many as fit (16 one-byte buffers). */
	VMS_W(iov, 1024, SPLICE_F_NONBLOCK);
	t_pair_same_fionread(&e);
	READ_SAME(2000);
	/* The read side has the same limit. */
	ASSERT_SAME(vmsplice(e.k[0], iov, 1025, 0), pp_vmsplice(e.p[0], iov, 1025, 0));
	t_pair_close(&e);
	return T_EXIT_PASS;
}

static int test_null_base(void)
{
	struct t_pair e;
	char mem[100];
	struct iovec bad = { NULL, 10 }, zero = { NULL, 0 };

	memset(mem, 'm', sizeof(mem));
	t_pair_open(&e, O_NONBLOCK);
	VMS_W(&bad, 1, 0);
	ASSERT_ERRNO(pp_vmsplice(e.p[1], &bad, 1, 0), EFAULT);
	t_pair_same_fionread(&e);
	/* NULL with length 0 is skipped: total 0 returns 0. */
	VMS_W(&zero, 1, 0);
	/* A NULL iovec array with a count. */
	ASSERT_SAME(vmsplice(e.k[1], NULL, 1, 0), pp_vmsplice(e.p[1], NULL, 1, 0));
	ASSERT_SAME(vmsplice(e.k[1], NULL, 0, 0), pp_vmsplice(e.p[1], NULL, 0, 0));
	/* Read end, with data there: EFAULT, nothing consumed. */
	ASSERT_EQ(write(e.k[1], "abc", 3), 3);
	ASSERT_EQ(pp_write(e.p[1], "abc", 3), 3);
	ASSERT_SAME(vmsplice(e.k[0], &bad, 1, SPLICE_F_NONBLOCK), pp_vmsplice(e.p[0], &bad, 1, SPLICE_F_NONBLOCK));
	t_pair_same_fionread(&e);
	READ_SAME(10);
	t_pair_same_fionread(&e);
	t_pair_close(&e);
	return T_EXIT_PASS;
}

/* NULL base in a later segment: the kernel queues the segments before it (a short count). */
static int test_null_base_later_segment(void)
{
	struct t_pair e;
	char mem[100];
	struct iovec iov[2] = { { mem, 100 }, { NULL, 10 } };

	memset(mem, 'm', sizeof(mem));
	t_pair_open(&e, O_NONBLOCK);
	VMS_W(iov, 2, 0);
	t_pair_same_fionread(&e);
	READ_SAME(1000);
	t_pair_close(&e);
	return T_EXIT_PASS;
}

/*
 * A region that is mapped nowhere.  Made last thing before it is used and
 * checked with mincore(), because a sanitizer's runtime may map something
 * into any hole at any time.
 */
static char *hole(size_t len)
{
	for (int tries = 0; tries < 100; tries++) {
		char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		unsigned char vec[16];

		ASSERT_TRUE(m != MAP_FAILED);
		ASSERT_EQ(munmap(m, len), 0);
		if (mincore(m, len, vec) < 0 && errno == ENOMEM)
			return m;
	}
	t_fail_at(__FILE__, __LINE__, "could not make an unmapped region");
}

static int test_unmapped(void)
{
	struct t_pair e;
	char mem[100], *m;
	struct iovec gone, mix[2];

	memset(mem, 'm', sizeof(mem));
	t_pair_open(&e, O_NONBLOCK);
	m = hole(4 * PG);
	gone = (struct iovec){ m + 10, 100 };
	VMS_W(&gone, 1, 0);
	ASSERT_ERRNO(pp_vmsplice(e.p[1], &gone, 1, 0), EFAULT);
	t_pair_same_fionread(&e);
	/* Good memory, then unmapped: the good part goes in, on both. */
	m = hole(4 * PG);
	mix[0] = (struct iovec){ mem, 100 };
	mix[1] = (struct iovec){ m + 10, 100 };
	VMS_W(mix, 2, 0);
	t_pair_same_fionread(&e);
	READ_SAME(1000);
	/* Read end into unmapped memory. */
	ASSERT_EQ(write(e.k[1], "abc", 3), 3);
	ASSERT_EQ(pp_write(e.p[1], "abc", 3), 3);
	m = hole(4 * PG);
	gone = (struct iovec){ m + 10, 100 };
	ASSERT_SAME(vmsplice(e.k[0], &gone, 1, 0), pp_vmsplice(e.p[0], &gone, 1, 0));
	t_pair_same_fionread(&e);
	t_pair_close(&e);
	return T_EXIT_PASS;
}

/* A region that runs off the end of a mapping into a hole: the kernel queues the mapped head. */
static int test_unmapped_tail(void)
{
	struct t_pair e;

	t_pair_open(&e, O_NONBLOCK);
	{
		char *two = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct iovec edge;

		ASSERT_TRUE(two != MAP_FAILED);
		memset(two, 'e', 2 * PG);
		ASSERT_EQ(munmap(two + PG, PG), 0);
		{
			unsigned char vec[1];

			if (mincore(two + PG, PG, vec) == 0)
				return t_skip("something was mapped into the hole");
		}
		edge = (struct iovec){ two + PG - 10, 20 };
		VMS_W(&edge, 1, 0);
		t_pair_same_fionread(&e);
		READ_SAME(100);
		munmap(two, PG);
	}
	t_pair_close(&e);
	return T_EXIT_PASS;
}

static int test_zero_length_segments(void)
{
	struct t_pair e;
	char a[5] = "aaaaa", b[5] = "bbbbb", c[3] = "ccc";
	struct iovec iov[6] = { { a, 0 }, { b, 5 }, { NULL, 0 }, { c, 3 }, { a, 0 }, { (void *)1, 0 } };
	struct iovec none[3] = { { a, 0 }, { NULL, 0 }, { b, 0 } };

	t_pair_open(&e, O_NONBLOCK);
	VMS_W(iov, 6, 0);
	VMS_W(none, 3, 0);
	VMS_W(none, 0, 0);
	t_pair_same_fionread(&e);
	{
		char x[16];

		ASSERT_EQ(pp_read(e.p[0], x, sizeof(x)), 8);
		ASSERT_MEM_EQ(x, "bbbbbccc", 8);
		ASSERT_EQ(read(e.k[0], x, sizeof(x)), 8);
	}
	/* Zero total on a read end: 0 without waiting. */
	ASSERT_SAME(vmsplice(e.k[0], none, 3, 0), pp_vmsplice(e.p[0], none, 3, 0));
	t_pair_close(&e);
	return T_EXIT_PASS;
}

static int test_gift_and_flags(void)
{
	struct t_pair e;
	unsigned char *km = aligned_alloc(PG, 2 * PG), *pm = aligned_alloc(PG, 2 * PG);
	struct iovec ki = { km, 2 * PG }, pi = { pm, 2 * PG };

	ASSERT_TRUE(km && pm);
	t_fill(km, 2 * PG, 0, 73);
	t_fill(pm, 2 * PG, 0, 73);
	t_pair_open(&e, 0);
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, SPLICE_F_GIFT), pp_vmsplice(e.p[1], &pi, 1, SPLICE_F_GIFT));
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, SPLICE_F_GIFT | SPLICE_F_MOVE | SPLICE_F_MORE),
		    pp_vmsplice(e.p[1], &pi, 1, SPLICE_F_GIFT | SPLICE_F_MOVE | SPLICE_F_MORE));
	/* An unaligned gift is accepted too (the man page's EINVAL is not in the code). */
	ki = (struct iovec){ km + 3, 10 };
	pi = (struct iovec){ pm + 3, 10 };
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, SPLICE_F_GIFT), pp_vmsplice(e.p[1], &pi, 1, SPLICE_F_GIFT));
	READ_SAME(100000);
	/* Unknown flags. */
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, 0x10), pp_vmsplice(e.p[1], &pi, 1, 0x10));
	ASSERT_SAME(vmsplice(e.k[0], &ki, 1, 0x10), pp_vmsplice(e.p[0], &pi, 1, 0x10));
	t_pair_close(&e);
	free(km);
	free(pm);
	return T_EXIT_PASS;
}

static int test_not_a_pipe_and_epipe(void)
{
	struct t_pair e;
	char path[64], mem[10] = "0123456789";
	int fd = t_tmpfile(NULL, 10, 74, path);
	struct pp_file *pf = pp_fdopen(fd);
	struct iovec iov = { mem, 10 };

	t_pair_open(&e, 0);
	ASSERT_SAME(vmsplice(-1, &iov, 1, 0), pp_vmsplice(NULL, &iov, 1, 0));
	ASSERT_SAME(vmsplice(fd, &iov, 1, 0), pp_vmsplice(pf, &iov, 1, 0));
	/* A file of the caller's (pp_file_new) is not a pipe either: EBADF like a regular file. */
	{
		static const struct pp_file_ops ops = { .name = "plain" };
		struct pp_file *u = pp_file_new(&ops, O_RDWR, NULL);

		ASSERT_TRUE(u != NULL);
		ASSERT_SAME(vmsplice(fd, &iov, 1, 0), pp_vmsplice(u, &iov, 1, 0));
		pp_close(u);
	}
	/* No readers: EPIPE with SIGPIPE. */
	t_sigpipe_count_start();
	close(e.k[0]); e.k[0] = -1;
	pp_close(e.p[0]); e.p[0] = NULL;
	VMS_W(&iov, 1, 0);
	ASSERT_EQ(t_sigpipe_count(), 2);
	pp_close(pf);
	close(fd);
	unlink(path);
	t_pair_close(&e);
	return T_EXIT_PASS;
}

/*
 * Nothing to move on something that is not a pipe: Linux imports the
 * iovec, finds the total 0 and returns 0 before it looks for a pipe.
 */
static int test_not_a_pipe_zero_total(void)
{
	static const struct pp_file_ops ops = { .name = "plain" };
	char path[64], mem[1];
	int fd = t_tmpfile(NULL, 10, 76, path);
	struct iovec none = { mem, 0 };
	struct pp_file *u = pp_file_new(&ops, O_RDWR, NULL);

	unlink(path);	/* nothing left behind, even when a check fails */
	ASSERT_TRUE(u != NULL);
	ASSERT_SAME(vmsplice(fd, &none, 1, 0), pp_vmsplice(u, &none, 1, 0));
	ASSERT_SAME(vmsplice(fd, NULL, 0, 0), pp_vmsplice(u, NULL, 0, 0));
	pp_close(u);
	close(fd);
	return T_EXIT_PASS;
}

/* Partial: as many pages as there are free slots, one buffer per page touched. */
static int test_partial_fill(void)
{
	struct t_pair e;
	size_t len = 20 * PG;
	unsigned char *km = aligned_alloc(PG, len + PG), *pm = aligned_alloc(PG, len + PG);
	struct iovec ki = { km + 1000, len }, pi = { pm + 1000, len };

	ASSERT_TRUE(km && pm);
	t_fill(km, len + PG, 0, 75);
	t_fill(pm, len + PG, 0, 75);
	t_pair_open(&e, 0);
	ASSERT_SAME(write(e.k[1], "w", 1), pp_write(e.p[1], "w", 1));
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, 0), pp_vmsplice(e.p[1], &pi, 1, 0));
	t_pair_same_fionread(&e);
	ASSERT_SAME(vmsplice(e.k[1], &ki, 1, SPLICE_F_NONBLOCK), pp_vmsplice(e.p[1], &pi, 1, SPLICE_F_NONBLOCK));
	READ_SAME(len * 2);
	t_pair_close(&e);
	free(km);
	free(pm);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_by_reference),
		T_SUBTEST(test_never_merged_into),
		T_SUBTEST(test_read_end_copies),
		T_SUBTEST(test_only_splice_f_nonblock),
		T_SUBTEST(test_iov_max),
		T_SUBTEST(test_null_base),
		T_SUBTEST(test_null_base_later_segment),
		T_SUBTEST(test_unmapped),
		T_SUBTEST(test_unmapped_tail),
		T_SUBTEST(test_zero_length_segments),
		T_SUBTEST(test_gift_and_flags),
		T_SUBTEST(test_not_a_pipe_and_epipe),
		T_SUBTEST(test_not_a_pipe_zero_total),
		T_SUBTEST(test_partial_fill),
	};

	return T_RUN_SUBTESTS(tests);
}
