// SPDX-License-Identifier: MIT
/*
 * Description: Dirty Pipe (CVE-2022-0847) the way it was exploited, and its
 * relatives (issue 3 §7, reference §4.1 T-DP1/T-DP2, §4.2): fill the pipe
 * with 16 writes of 4096 and drain it, so every ring slot has held a
 * mergeable page; put one byte at the head by some producer other than
 * write() - splice from a read-only (or writable) file at offset k-1,
 * vmsplice, tee, pipe -> pipe splice, socket -> pipe, /dev/zero -> pipe -
 * then write "XYZ".  The file never changes (pread), the pipe yields the
 * byte then "XYZ", vmspliced memory, the tee/splice source pipe and the
 * shared zero page stay as they were.  Each case runs on a kernel pipe too,
 * and the two pipes must give the same bytes.
 */
#include <sys/socket.h>

#include "helpers.h"

#define PG	4096
#define FLEN	(4 * PG)

enum producer {
	P_FILE_RO, P_FILE_RW, P_VMSPLICE, P_TEE, P_SPLICE_PART, P_SPLICE_WHOLE,
	P_SOCKET, P_DEVZERO,
};

struct ctx {
	char path[64];
	int ro, rw;			/* the victim file */
	unsigned char orig[FLEN];
	unsigned char *vm;		/* vmspliced memory, page-aligned */
};

/* The bytes a given producer puts in (what the pipe must yield first). */
static unsigned char expected_byte(struct ctx *c, enum producer p, off_t k)
{
	switch (p) {
	case P_FILE_RO: case P_FILE_RW: case P_TEE: case P_SPLICE_PART: case P_SPLICE_WHOLE:
		return c->orig[k - 1];
	case P_VMSPLICE:
		return c->vm[k - 1];
	case P_SOCKET:
		return 'S';
	default:
		return 0;
	}
}

/*
 * One run on one pipe.  Kernel: ops on descriptors; pagepipe: the same on
 * pp_files.  Returns the 4 bytes the pipe yielded in got[].
 */
struct side {
	int kernel;
	int k[2], q[2];			/* kernel pipe and a second one (tee/splice source) */
	struct pp_file *p[2], *pq[2];
};

static void side_open(struct side *s, int kernel)
{
	memset(s, 0, sizeof(*s));
	s->kernel = kernel;
	if (kernel) {
		t_kpipe2(s->k, 0);
		t_kpipe2(s->q, 0);
	} else {
		t_pipe2(s->p, 0);
		t_pipe2(s->pq, 0);
	}
}

static void side_close(struct side *s)
{
	if (s->kernel) {
		close(s->k[0]); close(s->k[1]); close(s->q[0]); close(s->q[1]);
	} else {
		pp_close(s->p[0]); pp_close(s->p[1]); pp_close(s->pq[0]); pp_close(s->pq[1]);
	}
}

static ssize_t s_write(struct side *s, int q, const void *b, size_t n)
{
	if (s->kernel)
		return write(q ? s->q[1] : s->k[1], b, n);
	return pp_write(q ? s->pq[1] : s->p[1], b, n);
}

static ssize_t s_read(struct side *s, int q, void *b, size_t n)
{
	if (s->kernel)
		return read(q ? s->q[0] : s->k[0], b, n);
	return pp_read(q ? s->pq[0] : s->p[0], b, n);
}

static ssize_t s_splice_from_fd(struct side *s, int q, int fd, off_t *off, size_t n)
{
	if (s->kernel)
		return splice(fd, off, q ? s->q[1] : s->k[1], NULL, n, 0);
	{
		struct pp_file *f = pp_fdopen(fd);
		ssize_t r = pp_splice(f, off, q ? s->pq[1] : s->p[1], NULL, n, 0);
		int e = errno;

		pp_close(f);
		errno = e;
		return r;
	}
}

static void run(struct ctx *c, struct side *s, enum producer p, off_t k, unsigned char got[4])
{
	unsigned char page[PG];
	off_t off;

	/* Recycle every slot with a mergeable page. */
	memset(page, 'P', sizeof(page));
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(s_write(s, 0, page, PG), PG);
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(s_read(s, 0, page, PG), PG);

	switch (p) {
	case P_FILE_RO:
	case P_FILE_RW:
		off = k - 1;
		ASSERT_EQ(s_splice_from_fd(s, 0, p == P_FILE_RO ? c->ro : c->rw, &off, 1), 1);
		break;
	case P_VMSPLICE: {
		struct iovec iov = { c->vm + k - 1, 1 };

		ASSERT_EQ(s->kernel ? vmsplice(s->k[1], &iov, 1, 0) : pp_vmsplice(s->p[1], &iov, 1, 0), 1);
		break;
	}
	case P_TEE:
		off = k - 1;
		ASSERT_EQ(s_splice_from_fd(s, 1, c->ro, &off, 2), 2);
		ASSERT_EQ(s->kernel ? tee(s->q[0], s->k[1], 1, 0) : pp_tee(s->pq[0], s->p[1], 1, 0), 1);
		break;
	case P_SPLICE_PART:
		off = k - 1;
		ASSERT_EQ(s_splice_from_fd(s, 1, c->ro, &off, 2), 2);
		ASSERT_EQ(s->kernel ? splice(s->q[0], NULL, s->k[1], NULL, 1, 0)
				    : pp_splice(s->pq[0], NULL, s->p[1], NULL, 1, 0), 1);
		break;
	case P_SPLICE_WHOLE:
		off = k - 1;
		ASSERT_EQ(s_splice_from_fd(s, 1, c->ro, &off, 1), 1);
		ASSERT_EQ(s->kernel ? splice(s->q[0], NULL, s->k[1], NULL, 1, 0)
				    : pp_splice(s->pq[0], NULL, s->p[1], NULL, 1, 0), 1);
		break;
	case P_SOCKET: {
		int sp[2];

		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
		ASSERT_EQ(write(sp[1], "S", 1), 1);
		ASSERT_EQ(s_splice_from_fd(s, 0, sp[0], NULL, 1), 1);
		close(sp[0]);
		close(sp[1]);
		break;
	}
	case P_DEVZERO: {
		int z = open("/dev/zero", O_RDONLY);

		ASSERT_TRUE(z >= 0);
		ASSERT_EQ(s_splice_from_fd(s, 0, z, NULL, 1), 1);
		close(z);
		break;
	}
	}

	/* The exploit's write. */
	ASSERT_EQ(s_write(s, 0, "XYZ", 3), 3);
	memset(got, 0xee, 4);
	{
		size_t n = 0;

		while (n < 4) {
			ssize_t r = s_read(s, 0, got + n, 4 - n);

			ASSERT_TRUE(r > 0);
			n += (size_t)r;
		}
	}

	/* The tee/splice source pipe still holds exactly its own bytes. */
	if (p == P_TEE || p == P_SPLICE_PART) {
		unsigned char q[8];
		ssize_t want = p == P_TEE ? 2 : 1;

		ASSERT_EQ(s_write(s, 1, "Q", 1), 1);
		ASSERT_EQ(s_read(s, 1, q, sizeof(q)), want + 1);
		ASSERT_MEM_EQ(q, c->orig + (p == P_TEE ? k - 1 : k), (size_t)want);
		ASSERT_EQ(q[want], 'Q');
	}
}

static void check_file(struct ctx *c)
{
	unsigned char now[FLEN];

	ASSERT_EQ(pread(c->ro, now, FLEN, 0), FLEN);
	ASSERT_MEM_EQ(now, c->orig, FLEN);
}

static void one(enum producer p)
{
	static const off_t ks[] = { 1, 100, PG - 2, PG, PG + 1, 3 * PG - 1 };
	struct ctx c;
	int fd = t_tmpfile(NULL, FLEN, 91, c.path);

	close(fd);
	c.ro = open(c.path, O_RDONLY);
	c.rw = open(c.path, O_RDWR);
	ASSERT_TRUE(c.ro >= 0 && c.rw >= 0);
	ASSERT_EQ(pread(c.ro, c.orig, FLEN, 0), FLEN);
	c.vm = aligned_alloc(PG, FLEN);
	ASSERT_TRUE(c.vm != NULL);
	memset(c.vm, 'v', FLEN);
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		off_t k = ks[i];
		unsigned char kgot[4], pgot[4], want[4];
		struct side s;

		want[0] = expected_byte(&c, p, k);
		memcpy(want + 1, "XYZ", 3);

		side_open(&s, 0);
		run(&c, &s, p, k, pgot);
		side_close(&s);
		check_file(&c);
		ASSERT_MEM_EQ(pgot, want, 4);

		side_open(&s, 1);
		run(&c, &s, p, k, kgot);
		side_close(&s);
		check_file(&c);
		ASSERT_MEM_EQ(kgot, pgot, 4);

		/* vmspliced memory was not written. */
		for (size_t j = 0; j < FLEN; j++)
			ASSERT_EQ(c.vm[j], 'v');
	}
	/* The shared zero page is still zero. */
	if (p == P_DEVZERO) {
		int z = open("/dev/zero", O_RDONLY);
		struct pp_file *pz = pp_fdopen(z), *q[2];
		unsigned char b[PG];

		t_pipe2(q, 0);
		ASSERT_EQ(pp_splice(pz, NULL, q[1], NULL, PG, 0), PG);
		ASSERT_EQ(t_read_full(q[0], b, PG), PG);
		for (int j = 0; j < PG; j++)
			ASSERT_EQ(b[j], 0);
		pp_close(q[0]); pp_close(q[1]); pp_close(pz);
		close(z);
	}
	free(c.vm);
	close(c.ro);
	close(c.rw);
	unlink(c.path);
}

static int test_file_readonly(void)	{ one(P_FILE_RO); return T_EXIT_PASS; }
static int test_file_writable(void)	{ one(P_FILE_RW); return T_EXIT_PASS; }
static int test_vmsplice(void)		{ one(P_VMSPLICE); return T_EXIT_PASS; }
static int test_tee(void)		{ one(P_TEE); return T_EXIT_PASS; }
static int test_pipe_splice_partial(void) { one(P_SPLICE_PART); return T_EXIT_PASS; }
static int test_pipe_splice_whole(void)	{ one(P_SPLICE_WHOLE); return T_EXIT_PASS; }
static int test_socket(void)		{ one(P_SOCKET); return T_EXIT_PASS; }
static int test_dev_zero(void)		{ one(P_DEVZERO); return T_EXIT_PASS; }

/* The exploit proper: many one-byte splices at every offset of a page, each followed by a write. */
static int test_sweep(void)
{
	struct ctx c;
	int fd = t_tmpfile(NULL, FLEN, 92, c.path);
	struct pp_file *pf, *p[2];
	unsigned char page[PG], b[8];

	close(fd);
	c.ro = open(c.path, O_RDONLY);
	ASSERT_TRUE(c.ro >= 0);
	ASSERT_EQ(pread(c.ro, c.orig, FLEN, 0), FLEN);
	pf = pp_fdopen(c.ro);
	t_pipe2(p, 0);
	memset(page, 'P', sizeof(page));
	for (off_t k = 1; k < 2 * PG; k += 37) {
		off_t off = k - 1;

		for (int i = 0; i < 16; i++)
			ASSERT_EQ(pp_write(p[1], page, PG), PG);
		for (int i = 0; i < 16; i++)
			ASSERT_EQ(pp_read(p[0], page, PG), PG);
		ASSERT_EQ(pp_splice(pf, &off, p[1], NULL, 1, 0), 1);
		ASSERT_EQ(pp_write(p[1], "XYZ", 3), 3);
		ASSERT_EQ(t_read_full(p[0], b, 4), 4);
		ASSERT_EQ(b[0], c.orig[k - 1]);
		ASSERT_MEM_EQ(b + 1, "XYZ", 3);
	}
	check_file(&c);
	pp_close(pf);
	pp_close(p[0]);
	pp_close(p[1]);
	close(c.ro);
	unlink(c.path);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_file_readonly),
		T_SUBTEST(test_file_writable),
		T_SUBTEST(test_vmsplice),
		T_SUBTEST(test_tee),
		T_SUBTEST(test_pipe_splice_partial),
		T_SUBTEST(test_pipe_splice_whole),
		T_SUBTEST(test_socket),
		T_SUBTEST(test_dev_zero),
		T_SUBTEST(test_sweep),
	};

	return T_RUN_SUBTESTS(tests);
}
