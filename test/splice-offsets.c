// SPDX-License-Identifier: MIT
/*
 * Description: file positions and offsets of pp_splice(), both directions,
 * each step compared with splice(2) through a kernel pipe on a twin file
 * (issue 3 §2): a NULL offset starts at the file position and advances it;
 * a non-NULL one starts at *off, updates it and leaves the file position
 * alone.  file -> pipe, pipe -> file and file -> pipe -> file.
 */
#include <sys/stat.h>

#include "helpers.h"

#define FLEN	100000

struct twin {
	char kpath[64], ppath[64];
	int kfd, pfd;		/* the same bytes, one file each */
	struct pp_file *pf;
	int k[2];
	struct pp_file *p[2];
};

static void twin_init(struct twin *t, size_t len, int flags)
{
	t->kfd = t_tmpfile(NULL, len, 5, t->kpath);
	t->pfd = t_tmpfile(NULL, len, 5, t->ppath);
	if (flags) {
		close(t->kfd);
		close(t->pfd);
		t->kfd = open(t->kpath, flags);
		t->pfd = open(t->ppath, flags);
		ASSERT_TRUE(t->kfd >= 0 && t->pfd >= 0);
	}
	t->pf = pp_fdopen(t->pfd);
	ASSERT_TRUE(t->pf != NULL);
	t_kpipe2(t->k, 0);
	t_pipe2(t->p, 0);
}

static void twin_fini(struct twin *t)
{
	pp_close(t->pf);
	close(t->kfd);
	close(t->pfd);
	unlink(t->kpath);
	unlink(t->ppath);
	close(t->k[0]); close(t->k[1]);
	pp_close(t->p[0]); pp_close(t->p[1]);
}

static void same_pos(struct twin *t)
{
	ASSERT_EQ(lseek(t->kfd, 0, SEEK_CUR), lseek(t->pfd, 0, SEEK_CUR));
}

/* The two files hold the same bytes. */
static void same_files(struct twin *t)
{
	struct stat ks, ps;
	unsigned char *a, *b;

	ASSERT_EQ(fstat(t->kfd, &ks), 0);
	ASSERT_EQ(fstat(t->pfd, &ps), 0);
	ASSERT_EQ(ks.st_size, ps.st_size);
	a = malloc((size_t)ks.st_size + 1);
	b = malloc((size_t)ks.st_size + 1);
	ASSERT_TRUE(a && b);
	ASSERT_EQ(pread(t->kfd, a, (size_t)ks.st_size, 0), ks.st_size);
	ASSERT_EQ(pread(t->pfd, b, (size_t)ks.st_size, 0), ks.st_size);
	ASSERT_MEM_EQ(a, b, (size_t)ks.st_size);
	free(a);
	free(b);
}

static int test_in_null_offset(void)
{
	struct twin t;

	twin_init(&t, FLEN, 0);
	ASSERT_EQ(lseek(t.kfd, 1000, SEEK_SET), 1000);
	ASSERT_EQ(lseek(t.pfd, 1000, SEEK_SET), 1000);
	ASSERT_SAME(splice(t.kfd, NULL, t.k[1], NULL, 5000, 0), pp_splice(t.pf, NULL, t.p[1], NULL, 5000, 0));
	same_pos(&t);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_CUR), 6000);
	ASSERT_SAME_READ(t.k[0], t.p[0], 5000);
	/* The next splice continues where the last one stopped. */
	ASSERT_SAME(splice(t.kfd, NULL, t.k[1], NULL, 7, 0), pp_splice(t.pf, NULL, t.p[1], NULL, 7, 0));
	same_pos(&t);
	ASSERT_SAME_READ(t.k[0], t.p[0], 100);
	/* Up to the end of the file, then EOF, the position staying at the end. */
	ASSERT_EQ(lseek(t.kfd, FLEN - 10, SEEK_SET), FLEN - 10);
	ASSERT_EQ(lseek(t.pfd, FLEN - 10, SEEK_SET), FLEN - 10);
	ASSERT_SAME(splice(t.kfd, NULL, t.k[1], NULL, 100, 0), pp_splice(t.pf, NULL, t.p[1], NULL, 100, 0));
	same_pos(&t);
	ASSERT_SAME(splice(t.kfd, NULL, t.k[1], NULL, 100, 0), pp_splice(t.pf, NULL, t.p[1], NULL, 100, 0));
	same_pos(&t);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_CUR), FLEN);
	ASSERT_SAME_READ(t.k[0], t.p[0], 100);
	twin_fini(&t);
	return T_EXIT_PASS;
}

static int test_in_offset(void)
{
	struct twin t;
	off_t ko = 3000, po = 3000;

	twin_init(&t, FLEN, 0);
	ASSERT_EQ(lseek(t.kfd, 1000, SEEK_SET), 1000);
	ASSERT_EQ(lseek(t.pfd, 1000, SEEK_SET), 1000);
	ASSERT_SAME(splice(t.kfd, &ko, t.k[1], NULL, 5000, 0), pp_splice(t.pf, &po, t.p[1], NULL, 5000, 0));
	ASSERT_EQ(ko, po);
	ASSERT_EQ(po, 8000);
	same_pos(&t);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_CUR), 1000);	/* untouched */
	ASSERT_SAME_READ(t.k[0], t.p[0], 5000);
	/* The offset near the end: short, *off at the end; then EOF leaves it there. */
	ko = po = FLEN - 10;
	ASSERT_SAME(splice(t.kfd, &ko, t.k[1], NULL, 100, 0), pp_splice(t.pf, &po, t.p[1], NULL, 100, 0));
	ASSERT_EQ(ko, po);
	ASSERT_SAME(splice(t.kfd, &ko, t.k[1], NULL, 100, 0), pp_splice(t.pf, &po, t.p[1], NULL, 100, 0));
	ASSERT_EQ(ko, po);
	ASSERT_EQ(po, FLEN);
	ko = po = FLEN + 12345;
	ASSERT_SAME(splice(t.kfd, &ko, t.k[1], NULL, 100, 0), pp_splice(t.pf, &po, t.p[1], NULL, 100, 0));
	ASSERT_EQ(ko, po);
	same_pos(&t);
	ASSERT_SAME_READ(t.k[0], t.p[0], 100);
	/* An offset with the position at the end still reads. */
	ASSERT_EQ(lseek(t.kfd, 0, SEEK_END), FLEN);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_END), FLEN);
	ko = po = 0;
	ASSERT_SAME(splice(t.kfd, &ko, t.k[1], NULL, 4096, 0), pp_splice(t.pf, &po, t.p[1], NULL, 4096, 0));
	ASSERT_EQ(ko, po);
	same_pos(&t);
	ASSERT_SAME_READ(t.k[0], t.p[0], 8192);
	twin_fini(&t);
	return T_EXIT_PASS;
}

static void fill_both(struct twin *t, size_t len, unsigned long long pos)
{
	unsigned char *b = malloc(len);

	ASSERT_TRUE(b != NULL);
	t_fill(b, len, pos, 9);
	ASSERT_EQ(write(t->k[1], b, len), (ssize_t)len);
	ASSERT_EQ(t_write_full(t->p[1], b, len), (ssize_t)len);
	free(b);
}

static int test_out_null_offset(void)
{
	struct twin t;

	twin_init(&t, 10000, O_RDWR);
	ASSERT_EQ(lseek(t.kfd, 200, SEEK_SET), 200);
	ASSERT_EQ(lseek(t.pfd, 200, SEEK_SET), 200);
	fill_both(&t, 5000, 0);
	ASSERT_SAME(splice(t.k[0], NULL, t.kfd, NULL, 5000, 0), pp_splice(t.p[0], NULL, t.pf, NULL, 5000, 0));
	same_pos(&t);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_CUR), 5200);
	/* Past the old end: the file grows. */
	fill_both(&t, 9000, 5000);
	ASSERT_SAME(splice(t.k[0], NULL, t.kfd, NULL, 3000, 0), pp_splice(t.p[0], NULL, t.pf, NULL, 3000, 0));
	same_pos(&t);
	ASSERT_SAME(splice(t.k[0], NULL, t.kfd, NULL, 30000, 0), pp_splice(t.p[0], NULL, t.pf, NULL, 30000, 0));
	same_pos(&t);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_CUR), 14200);
	same_files(&t);
	twin_fini(&t);
	return T_EXIT_PASS;
}

static int test_out_offset(void)
{
	struct twin t;
	off_t ko = 7000, po = 7000;

	twin_init(&t, 10000, O_RDWR);
	ASSERT_EQ(lseek(t.kfd, 200, SEEK_SET), 200);
	ASSERT_EQ(lseek(t.pfd, 200, SEEK_SET), 200);
	fill_both(&t, 6000, 0);
	ASSERT_SAME(splice(t.k[0], NULL, t.kfd, &ko, 5000, 0), pp_splice(t.p[0], NULL, t.pf, &po, 5000, 0));
	ASSERT_EQ(ko, po);
	ASSERT_EQ(po, 12000);
	same_pos(&t);
	ASSERT_EQ(lseek(t.pfd, 0, SEEK_CUR), 200);	/* untouched */
	/* Into a hole far past the end. */
	ko = po = 1 << 20;
	ASSERT_SAME(splice(t.k[0], NULL, t.kfd, &ko, 5000, 0), pp_splice(t.p[0], NULL, t.pf, &po, 5000, 0));
	ASSERT_EQ(ko, po);
	same_pos(&t);
	same_files(&t);
	twin_fini(&t);
	return T_EXIT_PASS;
}

/* file -> pipe -> file, offsets at both ends: file buffers reach the file by the kernel. */
static int test_file_pipe_file(void)
{
	struct twin in, out;
	off_t kin = 100, pin = 100, kout = 50, pout = 50;
	ssize_t kn, pn;

	twin_init(&in, FLEN, 0);
	twin_init(&out, 0, O_RDWR);
	ASSERT_EQ(lseek(in.kfd, 10, SEEK_SET), 10);
	ASSERT_EQ(lseek(in.pfd, 10, SEEK_SET), 10);
	for (int round = 0; round < 3; round++) {
		kn = splice(in.kfd, &kin, in.k[1], NULL, 30000, 0);
		pn = pp_splice(in.pf, &pin, in.p[1], NULL, 30000, 0);
		ASSERT_EQ(kn, pn);
		ASSERT_EQ(kin, pin);
		ASSERT_SAME(splice(in.k[0], NULL, out.kfd, &kout, (size_t)kn, 0),
			    pp_splice(in.p[0], NULL, out.pf, &pout, (size_t)pn, 0));
		ASSERT_EQ(kout, pout);
	}
	/* Then with the file positions on both sides. */
	for (int round = 0; round < 3; round++) {
		kn = splice(in.kfd, NULL, in.k[1], NULL, 20000, 0);
		pn = pp_splice(in.pf, NULL, in.p[1], NULL, 20000, 0);
		ASSERT_EQ(kn, pn);
		same_pos(&in);
		ASSERT_SAME(splice(in.k[0], NULL, out.kfd, NULL, (size_t)kn, 0),
			    pp_splice(in.p[0], NULL, out.pf, NULL, (size_t)pn, 0));
		same_pos(&out);
	}
	same_pos(&in);
	same_pos(&out);
	same_files(&out);
	twin_fini(&in);
	twin_fini(&out);
	return T_EXIT_PASS;
}

/* A failed splice moves neither *off nor the file position. */
static int test_failure_keeps_offsets(void)
{
	struct twin t;
	off_t ko = 10, po = 10;

	twin_init(&t, FLEN, 0);
	ASSERT_EQ(lseek(t.kfd, 100, SEEK_SET), 100);
	ASSERT_EQ(lseek(t.pfd, 100, SEEK_SET), 100);
	/* Fill the slots with one-byte file splices; then EAGAIN. */
	while (splice(t.kfd, NULL, t.k[1], NULL, 1, SPLICE_F_NONBLOCK) > 0)
		;
	while (pp_splice(t.pf, NULL, t.p[1], NULL, 1, SPLICE_F_NONBLOCK) > 0)
		;
	same_pos(&t);
	ASSERT_SAME(splice(t.kfd, &ko, t.k[1], NULL, 100, SPLICE_F_NONBLOCK),
		    pp_splice(t.pf, &po, t.p[1], NULL, 100, SPLICE_F_NONBLOCK));
	ASSERT_SAME(splice(t.kfd, NULL, t.k[1], NULL, 100, SPLICE_F_NONBLOCK),
		    pp_splice(t.pf, NULL, t.p[1], NULL, 100, SPLICE_F_NONBLOCK));
	ASSERT_EQ(ko, 10);
	ASSERT_EQ(po, 10);
	same_pos(&t);
	twin_fini(&t);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_in_null_offset),
		T_SUBTEST(test_in_offset),
		T_SUBTEST(test_out_null_offset),
		T_SUBTEST(test_out_offset),
		T_SUBTEST(test_file_pipe_file),
		T_SUBTEST(test_failure_keeps_offsets),
	};

	return T_RUN_SUBTESTS(tests);
}
