// SPDX-License-Identifier: MIT
/*
 * Description: pagepipe <-> kernel pipe, both ways (issue 3 §1, §4):
 * memory buffers into a kernel pipe, kernel pipe into a pagepipe, file
 * buffers into a kernel pipe by the kernel's own splice (zero copy: the
 * kernel pipe then refers to the file's pages, so a later pwrite shows in
 * it exactly as after a kernel file -> pipe -> pipe splice, compared),
 * vmspliced memory into a kernel pipe; EOF, EAGAIN and EPIPE compared with
 * splice(2) between two kernel pipes.
 */
#include <signal.h>

#include "helpers.h"

#define PG 4096

static void drain(int fd, unsigned char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, buf + done, len - done);

		ASSERT_TRUE(r > 0);
		done += (size_t)r;
	}
}

/* write() pattern bytes into a pagepipe and a kernel pipe, splice both into kernel pipes. */
static int test_memory_to_kpipe(void)
{
	struct pp_file *p[2], *po;
	int a[2], ko[2], pk[2];
	unsigned char kb[50000], pb[50000], src[50000];

	t_pipe2(p, 0);
	t_kpipe2(a, 0);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	po = pp_fdopen(pk[1]);
	t_fill(src, sizeof(src), 0, 41);
	ASSERT_EQ(write(a[1], src, 30000), 30000);
	ASSERT_EQ(pp_write(p[1], src, 30000), 30000);
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 12345, 0), pp_splice(p[0], NULL, po, NULL, 12345, 0));
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 50000, 0), pp_splice(p[0], NULL, po, NULL, 50000, 0));
	drain(ko[0], kb, 30000);
	drain(pk[0], pb, 30000);
	ASSERT_MEM_EQ(kb, pb, 30000);
	ASSERT_MEM_EQ(pb, src, 30000);
	/* Empty with a writer, non-blocking: EAGAIN; then no writers: 0. */
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 100, SPLICE_F_NONBLOCK),
		    pp_splice(p[0], NULL, po, NULL, 100, SPLICE_F_NONBLOCK));
	close(a[1]);
	pp_close(p[1]);
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 100, 0), pp_splice(p[0], NULL, po, NULL, 100, 0));
	pp_close(po);
	pp_close(p[0]);
	close(a[0]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	return T_EXIT_PASS;
}

static int test_kpipe_to_pagepipe(void)
{
	struct pp_file *p[2], *pi;
	int src1[2], src2[2], kout[2];
	unsigned char b[40000];

	t_pipe2(p, 0);
	t_kpipe2(src1, 0);
	t_kpipe2(src2, 0);
	t_kpipe2(kout, 0);
	pi = pp_fdopen(src2[0]);
	t_fill(b, sizeof(b), 0, 42);
	ASSERT_EQ(write(src1[1], b, 40000), 40000);
	ASSERT_EQ(write(src2[1], b, 40000), 40000);
	ASSERT_SAME(splice(src1[0], NULL, kout[1], NULL, 1000, 0), pp_splice(pi, NULL, p[1], NULL, 1000, 0));
	ASSERT_SAME(splice(src1[0], NULL, kout[1], NULL, 100000, 0), pp_splice(pi, NULL, p[1], NULL, 100000, 0));
	ASSERT_SAME_READ(kout[0], p[0], 100000);
	/* Empty non-blocking source: EAGAIN on both. */
	ASSERT_EQ(fcntl(src1[0], F_SETFL, O_NONBLOCK), 0);
	ASSERT_EQ(fcntl(src2[0], F_SETFL, O_NONBLOCK), 0);
	ASSERT_SAME(splice(src1[0], NULL, kout[1], NULL, 100, 0), pp_splice(pi, NULL, p[1], NULL, 100, 0));
	/* No writers: 0. */
	close(src1[1]);
	close(src2[1]);
	ASSERT_SAME(splice(src1[0], NULL, kout[1], NULL, 100, 0), pp_splice(pi, NULL, p[1], NULL, 100, 0));
	pp_close(pi);
	close(src1[0]); close(src2[0]); close(kout[0]); close(kout[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * file -> pagepipe -> kernel pipe: the bytes go by the kernel's splice from
 * the file, so the kernel pipe refers to the page cache.  A kernel-only
 * file -> pipe -> pipe does the same; a pwrite after the transfer shows in
 * both (reference semantics, §3.12).  If pagepipe had copied through user
 * memory, the old bytes would show instead.
 */
static int test_file_to_kpipe_zero_copy(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 16 * PG, 43, path), a[2], ko[2], pk[2];
	struct pp_file *pf = pp_fdopen(fd), *po, *p[2];
	off_t koff = 0, poff = 0;
	unsigned char kb[16 * PG], pb[16 * PG], newb[300];

	t_pipe2(p, 0);
	t_kpipe2(a, 0);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	po = pp_fdopen(pk[1]);
	ASSERT_SAME(splice(fd, &koff, a[1], NULL, 16 * PG, 0), pp_splice(pf, &poff, p[1], NULL, 16 * PG, 0));
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 16 * PG, 0), pp_splice(p[0], NULL, po, NULL, 16 * PG, 0));
	memset(newb, 'Z', sizeof(newb));
	ASSERT_EQ(pwrite(fd, newb, sizeof(newb), 5 * PG + 7), (ssize_t)sizeof(newb));
	drain(ko[0], kb, sizeof(kb));
	drain(pk[0], pb, sizeof(pb));
	ASSERT_MEM_EQ(kb, pb, sizeof(kb));
	ASSERT_MEM_EQ(pb + 5 * PG + 7, newb, sizeof(newb));
	ASSERT_EQ(t_check(pb, 5 * PG + 7, 0, 43), 0);
	pp_close(pf); pp_close(po);
	close(fd); unlink(path);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

struct drainer {
	int fd;
	size_t len;
	unsigned long long pos;
	unsigned int seed;
	int ok;
};

static void *drain_check(void *arg)
{
	struct drainer *d = arg;
	unsigned char *buf = malloc(65536);
	size_t done = 0;

	while (buf && done < d->len) {
		ssize_t r = read(d->fd, buf, 65536);

		if (r <= 0 || t_check(buf, (size_t)r, d->pos + done, d->seed))
			break;
		done += (size_t)r;
	}
	d->ok = done == d->len;
	free(buf);
	return NULL;
}

/* A large file through a pagepipe into a kernel pipe, with a reader thread. */
static int test_file_to_kpipe_large(void)
{
	enum { LEN = 6 << 20 };
	char path[64];
	int fd = t_tmpfile(NULL, LEN + 1000, 44, path), k[2];
	struct pp_file *pf = pp_fdopen(fd), *po, *p[2];
	struct drainer d;
	pthread_t th;
	size_t done = 0;

	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	po = pp_fdopen(k[1]);
	d = (struct drainer){ .fd = k[0], .len = LEN, .pos = 1000, .seed = 44 };
	ASSERT_EQ(pthread_create(&th, NULL, drain_check, &d), 0);
	ASSERT_EQ(lseek(fd, 1000, SEEK_SET), 1000);
	while (done < LEN) {
		ssize_t n = pp_splice(pf, NULL, p[1], NULL, LEN - done, 0);

		ASSERT_TRUE(n > 0);
		for (ssize_t m = 0; m < n; ) {
			ssize_t r = pp_splice(p[0], NULL, po, NULL, (size_t)(n - m), 0);

			ASSERT_TRUE(r > 0);
			m += r;
		}
		done += (size_t)n;
	}
	t_join(th, NULL, 30);
	ASSERT_EQ(d.ok, 1);
	pp_close(pf); pp_close(po);
	close(fd); unlink(path);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* vmspliced memory, then written memory, into a kernel pipe. */
static int test_vmsplice_memory_to_kpipe(void)
{
	struct pp_file *p[2], *po;
	int a[2], ko[2], pk[2];
	unsigned char *mem = aligned_alloc(PG, 4 * PG), kb[5 * PG], pb[5 * PG];
	struct iovec iov[2];

	ASSERT_TRUE(mem != NULL);
	t_fill(mem, 4 * PG, 0, 45);
	t_pipe2(p, 0);
	t_kpipe2(a, 0);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	po = pp_fdopen(pk[1]);
	iov[0] = (struct iovec){ mem + 10, 2 * PG };
	iov[1] = (struct iovec){ mem + 3 * PG, 100 };
	ASSERT_SAME(vmsplice(a[1], iov, 2, 0), pp_vmsplice(p[1], iov, 2, 0));
	ASSERT_EQ(write(a[1], "trailer", 7), 7);
	ASSERT_EQ(pp_write(p[1], "trailer", 7), 7);
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 5 * PG, 0), pp_splice(p[0], NULL, po, NULL, 5 * PG, 0));
	drain(ko[0], kb, 2 * PG + 107);
	drain(pk[0], pb, 2 * PG + 107);
	ASSERT_MEM_EQ(kb, pb, 2 * PG + 107);
	ASSERT_MEM_EQ(pb, mem + 10, 2 * PG);
	ASSERT_MEM_EQ(pb + 2 * PG + 100, "trailer", 7);
	pp_close(po);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
	free(mem);
	return T_EXIT_PASS;
}

/* A kernel pipe without readers: EPIPE and SIGPIPE, and nothing consumed. */
static int test_kpipe_epipe(void)
{
	struct pp_file *p[2], *po;
	int a[2], ko[2], pk[2], kn, pn;

	t_sigpipe_count_start();
	t_pipe2(p, 0);
	t_kpipe2(a, 0);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	po = pp_fdopen(pk[1]);
	ASSERT_EQ(write(a[1], "abc", 3), 3);
	ASSERT_EQ(pp_write(p[1], "abc", 3), 3);
	close(ko[0]);
	close(pk[0]);
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 3, 0), pp_splice(p[0], NULL, po, NULL, 3, 0));
	ASSERT_ERRNO(pp_splice(p[0], NULL, po, NULL, 3, 0), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 3);
	ASSERT_EQ(ioctl(a[0], FIONREAD, &kn), 0);
	ASSERT_EQ(pp_ioctl(p[0], FIONREAD, &pn), 0);
	ASSERT_EQ(kn, 3);
	ASSERT_EQ(pn, 3);
	pp_close(po);
	close(a[0]); close(a[1]); close(ko[1]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* A full kernel pipe, non-blocking: EAGAIN, like kernel pipe -> kernel pipe. */
static int test_kpipe_full(void)
{
	struct pp_file *p[2], *po;
	int a[2], ko[2], pk[2];
	static char fill[65536];

	t_pipe2(p, 0);
	t_kpipe2(a, 0);
	t_kpipe2(ko, O_NONBLOCK);
	t_kpipe2(pk, O_NONBLOCK);
	po = pp_fdopen(pk[1]);
	ASSERT_EQ(write(ko[1], fill, sizeof(fill)), 65536);
	ASSERT_EQ(write(pk[1], fill, sizeof(fill)), 65536);
	ASSERT_EQ(write(a[1], "abc", 3), 3);
	ASSERT_EQ(pp_write(p[1], "abc", 3), 3);
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 3, 0), pp_splice(p[0], NULL, po, NULL, 3, 0));
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 3, SPLICE_F_NONBLOCK),
		    pp_splice(p[0], NULL, po, NULL, 3, SPLICE_F_NONBLOCK));
	pp_close(po);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_memory_to_kpipe),
		T_SUBTEST(test_kpipe_to_pagepipe),
		T_SUBTEST(test_file_to_kpipe_zero_copy),
		T_SUBTEST(test_file_to_kpipe_large),
		T_SUBTEST(test_vmsplice_memory_to_kpipe),
		T_SUBTEST(test_kpipe_epipe),
		T_SUBTEST(test_kpipe_full),
	};

	return T_RUN_SUBTESTS(tests);
}
