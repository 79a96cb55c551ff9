// SPDX-License-Identifier: MIT
/*
 * Description: pp_splice() argument checks, in the kernel's order and with
 * its errno, each step compared with splice(2) on a kernel pipe and the same
 * kinds of descriptors (issue 3 §2, reference §3.2/§3.3): len 0 first (even
 * with bad flags or descriptors), then unknown flags, NULL file (EBADF), an
 * offset on a pipe end (ESPIPE), an end opened in the wrong mode (EBADF),
 * the same pipe at both ends, O_APPEND output, neither end a pipe, an
 * endpoint without splice ops, an offset on a non-seekable end and a
 * negative offset (EINVAL).  Two OS descriptors of which one is a kernel
 * pipe go straight to the kernel.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include "helpers.h"

/* One set of endpoints: kernel descriptors and their pagepipe twins. */
struct env {
	char path[64];
	int k[2];			/* kernel pipe */
	struct pp_file *p[2];		/* pagepipe */
	int rw, ro, ro2, wo, ap, dir, s[2];	/* files, a directory, a socket pair */
	struct pp_file *prw, *pro, *pwo, *pap, *pdir, *ps;
};

static void env_init(struct env *e, int with_data)
{
	int fd = t_tmpfile(NULL, 100000, 3, e->path);

	close(fd);
	t_kpipe2(e->k, 0);
	t_pipe2(e->p, 0);
	e->rw = open(e->path, O_RDWR);
	e->ro = open(e->path, O_RDONLY);
	e->ro2 = open(e->path, O_RDONLY);
	e->wo = open(e->path, O_WRONLY);
	e->ap = open(e->path, O_WRONLY | O_APPEND);
	e->dir = open("/tmp", O_RDONLY | O_DIRECTORY);
	ASSERT_TRUE(e->rw >= 0 && e->ro >= 0 && e->ro2 >= 0 && e->wo >= 0 && e->ap >= 0 && e->dir >= 0);
	unlink(e->path);	/* nothing left behind, even when a check fails */
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, e->s), 0);
	e->prw = pp_fdopen(e->rw);
	e->pro = pp_fdopen(e->ro);
	e->pwo = pp_fdopen(e->wo);
	e->pap = pp_fdopen(e->ap);
	e->pdir = pp_fdopen(e->dir);
	e->ps = pp_fdopen(e->s[0]);
	ASSERT_TRUE(e->prw && e->pro && e->pwo && e->pap && e->pdir && e->ps);
	if (with_data) {
		ASSERT_EQ(write(e->k[1], "0123456789", 10), 10);
		ASSERT_EQ(pp_write(e->p[1], "0123456789", 10), 10);
	}
}

static void env_fini(struct env *e)
{
	pp_close(e->prw); pp_close(e->pro); pp_close(e->pwo); pp_close(e->pap);
	pp_close(e->pdir); pp_close(e->ps);
	close(e->rw); close(e->ro); close(e->ro2); close(e->wo); close(e->ap); close(e->dir);
	close(e->s[0]); close(e->s[1]);
	close(e->k[0]); close(e->k[1]);
	pp_close(e->p[0]); pp_close(e->p[1]);
}

/* The pipes still hold their 10 bytes: no failed call consumed anything. */
static void check_untouched(struct env *e)
{
	int kn = -1, pn = -1;

	ASSERT_EQ(ioctl(e->k[0], FIONREAD, &kn), 0);
	ASSERT_EQ(pp_ioctl(e->p[0], FIONREAD, &pn), 0);
	ASSERT_EQ(kn, 10);
	ASSERT_EQ(pn, 10);
}

static int test_len_zero(void)
{
	struct env e;
	off_t ko = 0, po = 0;

	env_init(&e, 0);
	/* len 0 returns 0 before anything else is looked at. */
	ASSERT_SAME(splice(e.k[0], NULL, e.wo, NULL, 0, 0), pp_splice(e.p[0], NULL, e.pwo, NULL, 0, 0));
	ASSERT_SAME(splice(e.k[0], NULL, e.wo, NULL, 0, 0x10), pp_splice(e.p[0], NULL, e.pwo, NULL, 0, 0x10));
	ASSERT_SAME(splice(e.k[0], NULL, e.wo, NULL, 0, ~0u), pp_splice(e.p[0], NULL, e.pwo, NULL, 0, ~0u));
	ASSERT_SAME(splice(-1, NULL, e.wo, NULL, 0, 0), pp_splice(NULL, NULL, e.pwo, NULL, 0, 0));
	ASSERT_SAME(splice(e.k[0], &ko, e.k[1], &ko, 0, 0), pp_splice(e.p[0], &po, e.p[1], &po, 0, 0));
	ASSERT_SAME(splice(e.k[0], NULL, e.k[1], NULL, 0, 0), pp_splice(e.p[0], NULL, e.p[1], NULL, 0, 0));
	ASSERT_SAME(splice(e.wo, NULL, e.ro, NULL, 0, 0), pp_splice(e.pwo, NULL, e.pro, NULL, 0, 0));
	ASSERT_EQ(pp_splice(e.p[0], NULL, e.pwo, NULL, 0, 0x10), 0);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_bad_flags(void)
{
	struct env e;

	env_init(&e, 1);
	for (unsigned int fl = 0x10; fl; fl <<= 1)
		ASSERT_SAME(splice(e.k[0], NULL, e.wo, NULL, 10, fl),
			    pp_splice(e.p[0], NULL, e.pwo, NULL, 10, fl));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, e.pwo, NULL, 10, 0x10), EINVAL);
	/* Flags are checked before the descriptors. */
	ASSERT_SAME(splice(-1, NULL, e.wo, NULL, 10, 0x10), pp_splice(NULL, NULL, e.pwo, NULL, 10, 0x10));
	ASSERT_SAME(splice(e.k[1], NULL, e.wo, NULL, 10, 0x100), pp_splice(e.p[1], NULL, e.pwo, NULL, 10, 0x100));
	/* ... and before the same-pipe check. */
	ASSERT_SAME(splice(e.k[0], NULL, e.k[1], NULL, 10, 0x20), pp_splice(e.p[0], NULL, e.p[1], NULL, 10, 0x20));
	/* Every defined flag is accepted. */
	ASSERT_SAME(splice(e.k[0], NULL, e.wo, NULL, 1, SPLICE_F_MOVE | SPLICE_F_MORE | SPLICE_F_GIFT | SPLICE_F_NONBLOCK),
		    pp_splice(e.p[0], NULL, e.pwo, NULL, 1, SPLICE_F_MOVE | SPLICE_F_MORE | SPLICE_F_GIFT | SPLICE_F_NONBLOCK));
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_null_file(void)
{
	struct env e;

	env_init(&e, 1);
	ASSERT_SAME(splice(-1, NULL, e.wo, NULL, 10, 0), pp_splice(NULL, NULL, e.pwo, NULL, 10, 0));
	ASSERT_SAME(splice(e.k[0], NULL, -1, NULL, 10, 0), pp_splice(e.p[0], NULL, NULL, NULL, 10, 0));
	ASSERT_SAME(splice(-1, NULL, -1, NULL, 10, 0), pp_splice(NULL, NULL, NULL, NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(NULL, NULL, e.p[1], NULL, 10, 0), EBADF);
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_espipe(void)
{
	struct env e;
	off_t ko = 0, po = 0;

	env_init(&e, 1);
	/* Offset on the input pipe, on the output pipe, on both pipes. */
	ASSERT_SAME(splice(e.k[0], &ko, e.wo, NULL, 10, 0), pp_splice(e.p[0], &po, e.pwo, NULL, 10, 0));
	ASSERT_SAME(splice(e.rw, NULL, e.k[1], &ko, 10, 0), pp_splice(e.prw, NULL, e.p[1], &po, 10, 0));
	ASSERT_SAME(splice(e.rw, &ko, e.k[1], &ko, 10, 0), pp_splice(e.prw, &po, e.p[1], &po, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[0], &po, e.pwo, NULL, 10, 0), ESPIPE);
	/* ESPIPE comes before the mode check: the write end as input, with an offset. */
	ASSERT_SAME(splice(e.k[1], &ko, e.wo, NULL, 10, 0), pp_splice(e.p[1], &po, e.pwo, NULL, 10, 0));
	/* ... and before the same-pipe check. */
	ASSERT_SAME(splice(e.k[0], &ko, e.k[1], NULL, 10, 0), pp_splice(e.p[0], &po, e.p[1], NULL, 10, 0));
	ASSERT_EQ(ko, 0);
	ASSERT_EQ(po, 0);
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_wrong_mode(void)
{
	struct env e;

	env_init(&e, 1);
	/* The pipe's write end as input, its read end as output. */
	ASSERT_SAME(splice(e.k[1], NULL, e.wo, NULL, 10, 0), pp_splice(e.p[1], NULL, e.pwo, NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[1], NULL, e.pwo, NULL, 10, 0), EBADF);
	ASSERT_SAME(splice(e.rw, NULL, e.k[0], NULL, 10, 0), pp_splice(e.prw, NULL, e.p[0], NULL, 10, 0));
	/* An O_WRONLY file as input; an O_RDONLY file as output. */
	ASSERT_SAME(splice(e.wo, NULL, e.k[1], NULL, 10, 0), pp_splice(e.pwo, NULL, e.p[1], NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.pwo, NULL, e.p[1], NULL, 10, 0), EBADF);
	ASSERT_SAME(splice(e.k[0], NULL, e.ro, NULL, 10, 0), pp_splice(e.p[0], NULL, e.pro, NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, e.pro, NULL, 10, 0), EBADF);
	/* A directory opened read-only as output. */
	ASSERT_SAME(splice(e.k[0], NULL, e.dir, NULL, 10, 0), pp_splice(e.p[0], NULL, e.pdir, NULL, 10, 0));
	/* Both ends of one pipe reversed: the mode check comes before the same-pipe check. */
	ASSERT_SAME(splice(e.k[1], NULL, e.k[0], NULL, 10, 0), pp_splice(e.p[1], NULL, e.p[0], NULL, 10, 0));
	/* Between two pipes: write end in, read end out. */
	{
		int k2[2];
		struct pp_file *p2[2];

		t_kpipe2(k2, 0);
		t_pipe2(p2, 0);
		ASSERT_SAME(splice(e.k[1], NULL, k2[1], NULL, 10, 0), pp_splice(e.p[1], NULL, p2[1], NULL, 10, 0));
		ASSERT_SAME(splice(e.k[0], NULL, k2[0], NULL, 10, 0), pp_splice(e.p[0], NULL, p2[0], NULL, 10, 0));
		close(k2[0]); close(k2[1]); pp_close(p2[0]); pp_close(p2[1]);
	}
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_same_pipe(void)
{
	struct env e;

	env_init(&e, 0);
	/* Empty: EINVAL at once, no wait. */
	ASSERT_SAME(splice(e.k[0], NULL, e.k[1], NULL, 10, 0), pp_splice(e.p[0], NULL, e.p[1], NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, e.p[1], NULL, 10, 0), EINVAL);
	ASSERT_EQ(write(e.k[1], "0123456789", 10), 10);
	ASSERT_EQ(pp_write(e.p[1], "0123456789", 10), 10);
	ASSERT_SAME(splice(e.k[0], NULL, e.k[1], NULL, 10, 0), pp_splice(e.p[0], NULL, e.p[1], NULL, 10, 0));
	ASSERT_SAME(splice(e.k[0], NULL, e.k[1], NULL, 10, SPLICE_F_NONBLOCK),
		    pp_splice(e.p[0], NULL, e.p[1], NULL, 10, SPLICE_F_NONBLOCK));
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_append(void)
{
	struct env e;

	env_init(&e, 1);
	ASSERT_SAME(splice(e.k[0], NULL, e.ap, NULL, 10, 0), pp_splice(e.p[0], NULL, e.pap, NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, e.pap, NULL, 10, 0), EINVAL);
	/* With an offset too. */
	{
		off_t ko = 5, po = 5;

		ASSERT_SAME(splice(e.k[0], NULL, e.ap, &ko, 10, 0), pp_splice(e.p[0], NULL, e.pap, &po, 10, 0));
		ASSERT_EQ(po, 5);
	}
	check_untouched(&e);
	/* EINVAL before waiting: an empty pipe with a writer does not block. */
	{
		int k2[2];
		struct pp_file *p2[2];

		t_kpipe2(k2, 0);
		t_pipe2(p2, 0);
		ASSERT_SAME(splice(k2[0], NULL, e.ap, NULL, 10, 0), pp_splice(p2[0], NULL, e.pap, NULL, 10, 0));
		close(k2[0]); close(k2[1]); pp_close(p2[0]); pp_close(p2[1]);
	}
	/* The file did not grow. */
	{
		struct stat st;

		ASSERT_EQ(fstat(e.rw, &st), 0);
		ASSERT_EQ(st.st_size, 100000);
	}
	env_fini(&e);
	return T_EXIT_PASS;
}

static ssize_t user_readv(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	(void)f; (void)iov; (void)iovcnt;
	return 0;
}

static ssize_t user_writev(struct pp_file *f, const struct iovec *iov, int iovcnt)
{
	(void)f; (void)iov;
	return iovcnt;
}

static const struct pp_file_ops no_splice_ops = {
	.readv = user_readv,
	.writev = user_writev,
	.name = "no splice",
};

static int test_neither_pipe(void)
{
	struct env e;
	struct pp_file *ur, *uw;

	env_init(&e, 1);
	/* Two OS descriptors, neither a pipe: the kernel answers. */
	ASSERT_SAME(splice(e.rw, NULL, e.wo, NULL, 10, 0), pp_splice(e.prw, NULL, e.pwo, NULL, 10, 0));
	ASSERT_SAME(splice(e.ro, NULL, e.s[0], NULL, 10, 0), pp_splice(e.pro, NULL, e.ps, NULL, 10, 0));
	/* A file of the caller's and an OS file: nobody is a pipe either. */
	ur = pp_file_new(&no_splice_ops, O_RDONLY, NULL);
	uw = pp_file_new(&no_splice_ops, O_WRONLY, NULL);
	ASSERT_TRUE(ur && uw);
	ASSERT_ERRNO(pp_splice(ur, NULL, e.pwo, NULL, 10, 0), EINVAL);
	ASSERT_ERRNO(pp_splice(e.prw, NULL, uw, NULL, 10, 0), EINVAL);
	ASSERT_ERRNO(pp_splice(ur, NULL, uw, NULL, 10, 0), EINVAL);
	/* Mode first, as in the kernel: an unwritable output is EBADF. */
	ASSERT_SAME(splice(e.rw, NULL, e.ro, NULL, 10, 0), pp_splice(e.prw, NULL, e.pro, NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.prw, NULL, ur, NULL, 10, 0), EBADF);
	pp_close(ur);
	pp_close(uw);
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_cannot_splice(void)
{
	struct env e;
	struct pp_file *ur, *uw;
	off_t ko = 0, po = 0;

	env_init(&e, 1);
	/* A directory has no splice_read: EINVAL, with or without an offset. */
	ASSERT_SAME(splice(e.dir, NULL, e.k[1], NULL, 10, 0), pp_splice(e.pdir, NULL, e.p[1], NULL, 10, 0));
	ASSERT_SAME(splice(e.dir, &ko, e.k[1], NULL, 10, 0), pp_splice(e.pdir, &po, e.p[1], NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.pdir, NULL, e.p[1], NULL, 10, 0), EINVAL);
	/* Files made with pp_file_new() and no splice ops, both directions. */
	ur = pp_file_new(&no_splice_ops, O_RDONLY, NULL);
	uw = pp_file_new(&no_splice_ops, O_WRONLY, NULL);
	ASSERT_TRUE(ur && uw);
	ASSERT_ERRNO(pp_splice(ur, NULL, e.p[1], NULL, 10, 0), EINVAL);
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, uw, NULL, 10, 0), EINVAL);
	ASSERT_ERRNO(pp_splice(ur, NULL, e.p[1], NULL, 10, SPLICE_F_NONBLOCK), EINVAL);
	/* No wait for data first: an empty pipe with a writer answers EINVAL at once. */
	{
		struct pp_file *p2[2];

		t_pipe2(p2, 0);
		ASSERT_ERRNO(pp_splice(p2[0], NULL, uw, NULL, 10, 0), EINVAL);
		pp_close(p2[0]); pp_close(p2[1]);
	}
	pp_close(ur);
	pp_close(uw);
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_offset_not_seekable(void)
{
	struct env e;
	off_t ko = 0, po = 0;

	env_init(&e, 1);
	ASSERT_SAME(splice(e.s[0], &ko, e.k[1], NULL, 10, 0), pp_splice(e.ps, &po, e.p[1], NULL, 10, 0));
	ASSERT_ERRNO(pp_splice(e.ps, &po, e.p[1], NULL, 10, 0), EINVAL);
	ASSERT_SAME(splice(e.k[0], NULL, e.s[0], &ko, 10, 0), pp_splice(e.p[0], NULL, e.ps, &po, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, e.ps, &po, 10, 0), EINVAL);
	ASSERT_EQ(po, 0);
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

/*
 * A kernel pipe on the other side of a pagepipe is still a pipe end: an
 * offset for it is ESPIPE, as splice(2) gives for any pipe end.
 */
static int test_offset_on_kernel_pipe(void)
{
	struct env e;
	int k2[2];
	struct pp_file *pk0, *pk1;
	off_t ko = 0, po = 0;

	env_init(&e, 1);
	t_kpipe2(k2, 0);
	ASSERT_EQ(write(k2[1], "abc", 3), 3);
	pk0 = pp_fdopen(k2[0]);
	pk1 = pp_fdopen(k2[1]);
	ASSERT_TRUE(pk0 && pk1);
	/* pipe -> kernel pipe with an output offset */
	ASSERT_SAME(splice(e.k[0], NULL, k2[1], &ko, 10, 0), pp_splice(e.p[0], NULL, pk1, &po, 10, 0));
	/* kernel pipe -> pipe with an input offset */
	ASSERT_SAME(splice(k2[0], &ko, e.k[1], NULL, 10, 0), pp_splice(pk0, &po, e.p[1], NULL, 10, 0));
	ASSERT_EQ(po, 0);
	pp_close(pk0); pp_close(pk1);
	close(k2[0]); close(k2[1]);
	check_untouched(&e);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_negative_offset(void)
{
	struct env e;
	off_t ko, po;

	env_init(&e, 1);
	ko = po = -1;
	ASSERT_SAME(splice(e.rw, &ko, e.k[1], NULL, 10, 0), pp_splice(e.prw, &po, e.p[1], NULL, 10, 0));
	ko = po = -4096;
	ASSERT_SAME(splice(e.k[0], NULL, e.wo, &ko, 10, 0), pp_splice(e.p[0], NULL, e.pwo, &po, 10, 0));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, e.pwo, &po, 10, 0), EINVAL);
	ASSERT_EQ(po, -4096);
	ko = po = (off_t)1 << 62;
	ASSERT_SAME(splice(e.rw, &ko, e.k[1], NULL, 10, 0), pp_splice(e.prw, &po, e.p[1], NULL, 10, 0));
	check_untouched(&e);
	/* Negative offset into an empty pipe with a writer: EINVAL, no wait. */
	{
		int k2[2];
		struct pp_file *p2[2];

		t_kpipe2(k2, 0);
		t_pipe2(p2, 0);
		ko = po = -1;
		ASSERT_SAME(splice(k2[0], NULL, e.wo, &ko, 10, 0), pp_splice(p2[0], NULL, e.pwo, &po, 10, 0));
		close(k2[0]); close(k2[1]); pp_close(p2[0]); pp_close(p2[1]);
	}
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_passthrough(void)
{
	struct env e;
	int k2[2];
	struct pp_file *pk0, *pk1;
	char a[64], b[64];
	off_t ko = 1000, po = 1000;
	int fd2;

	env_init(&e, 0);
	t_kpipe2(k2, 0);
	pk0 = pp_fdopen(k2[0]);
	pk1 = pp_fdopen(k2[1]);
	fd2 = e.ro2;
	ASSERT_TRUE(pk0 && pk1);
	/* file -> kernel pipe through pp_splice is splice(2): same count, offsets, bytes. */
	ASSERT_SAME(splice(fd2, &ko, e.k[1], NULL, 50, 0), pp_splice(e.pro, &po, pk1, NULL, 50, 0));
	ASSERT_EQ(ko, po);
	ASSERT_EQ(read(e.k[0], a, 64), 50);
	ASSERT_EQ(read(k2[0], b, 64), 50);
	ASSERT_MEM_EQ(a, b, 50);
	ASSERT_EQ(t_check(b, 50, 1000, 3), 0);
	/* Without an offset: both file positions advance the same. */
	ASSERT_SAME(splice(fd2, NULL, e.k[1], NULL, 30, 0), pp_splice(e.pro, NULL, pk1, NULL, 30, 0));
	ASSERT_EQ(lseek(fd2, 0, SEEK_CUR), 30);
	ASSERT_EQ(lseek(e.ro, 0, SEEK_CUR), 30);
	ASSERT_EQ(read(e.k[0], a, 64), 30);
	ASSERT_EQ(read(k2[0], b, 64), 30);
	ASSERT_MEM_EQ(a, b, 30);
	/* kernel pipe -> file, and the kernel's errors (ESPIPE on the pipe offset). */
	ASSERT_EQ(write(k2[1], "abcdef", 6), 6);
	ASSERT_EQ(write(e.k[1], "abcdef", 6), 6);
	ko = po = 0;
	ASSERT_SAME(splice(e.k[0], &ko, e.wo, NULL, 6, 0), pp_splice(pk0, &po, e.pwo, NULL, 6, 0));
	ASSERT_SAME(splice(e.k[0], NULL, e.rw, &ko, 6, 0), pp_splice(pk0, NULL, e.prw, &po, 6, 0));
	ASSERT_EQ(ko, po);
	/* The kernel's same-pipe check. */
	ASSERT_SAME(splice(e.k[0], NULL, e.k[1], NULL, 6, 0), pp_splice(pk0, NULL, pk1, NULL, 6, 0));
	pp_close(pk0); pp_close(pk1);
	close(k2[0]); close(k2[1]);
	env_fini(&e);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_len_zero),
		T_SUBTEST(test_bad_flags),
		T_SUBTEST(test_null_file),
		T_SUBTEST(test_espipe),
		T_SUBTEST(test_wrong_mode),
		T_SUBTEST(test_same_pipe),
		T_SUBTEST(test_append),
		T_SUBTEST(test_neither_pipe),
		T_SUBTEST(test_cannot_splice),
		T_SUBTEST(test_offset_not_seekable),
		T_SUBTEST(test_offset_on_kernel_pipe),
		T_SUBTEST(test_negative_offset),
		T_SUBTEST(test_passthrough),
	};

	return T_RUN_SUBTESTS(tests);
}
