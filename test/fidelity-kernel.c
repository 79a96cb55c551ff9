// SPDX-License-Identifier: MIT
/*
 * Description: fidelity to the kernel (issue 14, section 1), each case a
 * differential test: the same steps on a kernel pipe and on a pagepipe,
 * counts, errno and bytes compared.
 *
 *  - vmsplice from the read end of a packet (O_DIRECT) pipe reads across
 *    packets, and a packet copied in part keeps its rest;
 *  - vmsplice from the read end into memory that faults part way returns
 *    the whole buffers copied before the fault, or EFAULT, and leaves the
 *    faulting buffer in the pipe; read-only memory is EFAULT, not SIGSEGV;
 *  - vmsplice and pp_write_ref of memory that is mapped but not readable
 *    (PROT_NONE, MAP_SHARED past the end of the file) queue the readable
 *    prefix or fail with EFAULT, and the reader never takes a signal;
 *  - EINVAL for a bad length beats EFAULT for an earlier bad address;
 *  - a file spliced into a pagepipe with the descriptor table full;
 *  - file pages spliced back into the same file over an overlapping range,
 *    more than one batch of buffers;
 *  - block devices (a loop device; skipped when none can be made).
 */
#include <limits.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "helpers.h"

#define PG	4096

static size_t fionread_k(int fd)
{
	int n = -1;

	ASSERT_EQ(ioctl(fd, FIONREAD, &n), 0);
	return (size_t)n;
}

/* Write the same bytes to both pipes. */
static void both_write(int k, struct pp_file *p, const void *buf, size_t len)
{
	ASSERT_EQ(write(k, buf, len), (ssize_t)len);
	ASSERT_EQ(pp_write(p, buf, len), (ssize_t)len);
}

/* vmsplice(read end) on both, into two separate buffers; compare result and bytes. */
static void same_vmsplice_read(int k, struct pp_file *p, size_t len)
{
	unsigned char *kb = malloc(len), *pb = malloc(len);
	struct iovec ki = { kb, len }, pi = { pb, len };
	struct t_res kr, pr;

	ASSERT_TRUE(kb && pb);
	kr = T_CALL(vmsplice(k, &ki, 1, SPLICE_F_NONBLOCK));
	pr = T_CALL(pp_vmsplice(p, &pi, 1, SPLICE_F_NONBLOCK));
	if (kr.ret != pr.ret || kr.err != pr.err)
		t_fail_at(__FILE__, __LINE__, "vmsplice to user of %zu: kernel %lld (%s), pagepipe %lld (%s)",
			  len, kr.ret, strerror(kr.err), pr.ret, strerror(pr.err));
	if (kr.ret > 0)
		ASSERT_MEM_EQ(kb, pb, (size_t)kr.ret);
	free(kb);
	free(pb);
}

static int test_vmsplice_read_packets(void)
{
	unsigned char buf[8192];
	struct pp_file *p[2];
	int k[2];

	t_fill(buf, sizeof(buf), 0, 1);
	t_kpipe2(k, O_DIRECT | O_NONBLOCK);
	t_pipe2(p, O_DIRECT | O_NONBLOCK);
	/* Several packets: the kernel copies across them (13214 in the report). */
	for (size_t i = 0; i < 5; i++)
		both_write(k[1], p[1], buf + i * 100, 926 + i * 811);
	same_vmsplice_read(k[0], p[0], 50000);
	ASSERT_SAME_READ(k[0], p[0], 100);
	/* Across packets, stopping inside one; the rest is one packet still. */
	for (size_t i = 0; i < 4; i++)
		both_write(k[1], p[1], buf + i * 7, 926);
	same_vmsplice_read(k[0], p[0], 926 * 2 + 10);
	ASSERT_SAME_READ(k[0], p[0], 5);
	ASSERT_SAME_READ(k[0], p[0], 5000);
	ASSERT_SAME_READ(k[0], p[0], 5000);
	/* A packet bigger than a page is two buffers, each a packet. */
	both_write(k[1], p[1], buf, 6000);
	both_write(k[1], p[1], buf + 3, 10);
	same_vmsplice_read(k[0], p[0], 6005);
	ASSERT_SAME_READ(k[0], p[0], 8192);
	ASSERT_SAME_READ(k[0], p[0], 8192);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* n pages, read-write, with the pages in mask (bit i: page i) unmapped. */
static char *region(size_t n, unsigned int mask)
{
	char *m = mmap(NULL, n * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_TRUE(m != MAP_FAILED);
	for (size_t i = 0; i < n; i++)
		if (mask & (1u << i))
			ASSERT_EQ(munmap(m + i * PG, PG), 0);
	return m;
}

static void same_vmsplice_iov(int k, struct pp_file *p, const struct iovec *ki,
			      const struct iovec *pi, int n, const char *what)
{
	struct t_res kr = T_CALL(vmsplice(k, ki, (unsigned long)n, SPLICE_F_NONBLOCK));
	struct t_res pr = T_CALL(pp_vmsplice(p, pi, (size_t)n, SPLICE_F_NONBLOCK));

	if (kr.ret != pr.ret || kr.err != pr.err)
		t_fail_at(__FILE__, __LINE__, "%s: kernel %lld (%s), pagepipe %lld (%s)", what,
			  kr.ret, strerror(kr.err), pr.ret, strerror(pr.err));
}

/*
 * pagepipe checks memory with process_vm_readv/writev on itself; where a
 * seccomp filter refuses them it falls back to mincore(), which cannot see
 * these cases (the man page says so).
 */
static const char *no_process_vm(void)
{
	char a = 1, b = 0;
	struct iovec l = { &b, 1 }, r = { &a, 1 };

	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1)
		return NULL;
	return "process_vm_readv on ourselves is refused here (seccomp?): pagepipe falls back to mincore";
}

static int test_vmsplice_read_fault(void)
{
	unsigned char buf[3 * PG];

	if (no_process_vm())
		return t_skip("%s", no_process_vm());

	t_fill(buf, sizeof(buf), 0, 2);
	for (int packet = 0; packet < 2; packet++) {
		char *km = region(2, 2), *pm = region(2, 2);	/* [mapped][unmapped] */
		char *kro = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char *pro = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct iovec ki[2], pi[2];
		char kgood[200], pgood[200];
		struct pp_file *p[2];
		int k[2];

		ASSERT_TRUE(kro != MAP_FAILED && pro != MAP_FAILED);
		t_kpipe2(k, (packet ? O_DIRECT : 0) | O_NONBLOCK);
		t_pipe2(p, (packet ? O_DIRECT : 0) | O_NONBLOCK);

		/* Fault part way: the first page's buffer, then the fault. */
		both_write(k[1], p[1], buf, 8000);
		ki[0] = (struct iovec){ km, 2 * PG };
		pi[0] = (struct iovec){ pm, 2 * PG };
		same_vmsplice_iov(k[0], p[0], ki, pi, 1, "vmsplice into [mapped][unmapped]");
		ASSERT_MEM_EQ(km, pm, PG);
		ASSERT_SAME_READ(k[0], p[0], 2 * PG);

		/* Fault at the start: EFAULT, nothing taken. */
		both_write(k[1], p[1], buf, 300);
		ki[0] = (struct iovec){ km + PG, 100 };
		pi[0] = (struct iovec){ pm + PG, 100 };
		same_vmsplice_iov(k[0], p[0], ki, pi, 1, "vmsplice into unmapped");
		ASSERT_EQ(fionread_k(k[0]), 300u);

		/* A good segment then a bad one within one buffer: that buffer stays whole. */
		ki[0] = (struct iovec){ kgood, 100 };
		pi[0] = (struct iovec){ pgood, 100 };
		ki[1] = (struct iovec){ km + PG, 100 };
		pi[1] = (struct iovec){ pm + PG, 100 };
		same_vmsplice_iov(k[0], p[0], ki, pi, 2, "vmsplice into good + unmapped");
		ASSERT_SAME_READ(k[0], p[0], 1000);

		/* Read-only memory: EFAULT, no SIGSEGV. */
		both_write(k[1], p[1], buf, 100);
		ki[0] = (struct iovec){ kro, 100 };
		pi[0] = (struct iovec){ pro, 100 };
		same_vmsplice_iov(k[0], p[0], ki, pi, 1, "vmsplice into PROT_READ");
		ASSERT_SAME_READ(k[0], p[0], 1000);

		/* Two whole buffers, the third faults: their bytes. */
		both_write(k[1], p[1], buf, 2 * PG);
		both_write(k[1], p[1], buf, 100);
		{
			char *kr3 = region(3, 4), *pr3 = region(3, 4);

			ki[0] = (struct iovec){ kr3 + 50, 3 * PG - 50 };
			pi[0] = (struct iovec){ pr3 + 50, 3 * PG - 50 };
			same_vmsplice_iov(k[0], p[0], ki, pi, 1, "vmsplice into [mapped][mapped][unmapped]");
			ASSERT_MEM_EQ(kr3 + 50, pr3 + 50, 2 * PG - 50);
		}
		ASSERT_SAME_READ(k[0], p[0], 3 * PG);
		close(k[0]); close(k[1]);
		pp_close(p[0]); pp_close(p[1]);
	}
	return T_EXIT_PASS;
}

/* A one-page file mapped MAP_SHARED over two pages: the second is past EOF. */
static char *shared_past_eof(int *fdp)
{
	char path[64];
	int fd = t_tmpfile("/tmp", PG, 3, path);
	char *m;

	unlink(path);
	m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_TRUE(m != MAP_FAILED);
	*fdp = fd;
	return m;
}

static int test_vmsplice_unreadable(void)
{
	int fd, k[2];
	char *sm = shared_past_eof(&fd);
	char *none = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char ok[100] = "ok";
	struct pp_file *p[2];
	struct iovec iov[2];

	if (no_process_vm())
		return t_skip("%s", no_process_vm());
	ASSERT_TRUE(none != MAP_FAILED);
	t_kpipe2(k, O_NONBLOCK);
	t_pipe2(p, O_NONBLOCK);
	/* The readable prefix goes in, then EFAULT; the reader gets no SIGBUS. */
	iov[0] = (struct iovec){ sm, 2 * PG };
	same_vmsplice_iov(k[1], p[1], iov, iov, 1, "vmsplice of [file page][past EOF]");
	iov[0] = (struct iovec){ sm + PG, 100 };
	same_vmsplice_iov(k[1], p[1], iov, iov, 1, "vmsplice of past EOF");
	iov[0] = (struct iovec){ none, 100 };
	same_vmsplice_iov(k[1], p[1], iov, iov, 1, "vmsplice of PROT_NONE");
	iov[0] = (struct iovec){ ok, sizeof(ok) };
	iov[1] = (struct iovec){ none, 100 };
	same_vmsplice_iov(k[1], p[1], iov, iov, 2, "vmsplice of good + PROT_NONE");
	ASSERT_SAME_READ(k[0], p[0], 3 * PG);

	/* pp_write_ref queues what vmsplice would. */
	ASSERT_SAME(vmsplice(k[1], &(struct iovec){ sm, 2 * PG }, 1, 0),
		    pp_write_ref(p[1], sm, 2 * PG, NULL, NULL));
	ASSERT_SAME(vmsplice(k[1], &(struct iovec){ sm + PG, 10 }, 1, 0),
		    pp_write_ref(p[1], sm + PG, 10, NULL, NULL));
	ASSERT_SAME(vmsplice(k[1], &(struct iovec){ none, 10 }, 1, 0),
		    pp_write_ref(p[1], none, 10, NULL, NULL));
	ASSERT_SAME_READ(k[0], p[0], 3 * PG);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	munmap(sm, 2 * PG);
	close(fd);
	return T_EXIT_PASS;
}

/* import_iovec: lengths (EINVAL) before addresses (EFAULT), addresses whole. */
static int test_iov_check_order(void)
{
	static char buf[PG];
	struct iovec bad_then_long[2] = {
		{ (void *)(UINTPTR_MAX - 4095), 10 }, { buf, (size_t)-1 },
	};
	/* The second segment ends past the top only counted whole. */
	struct iovec long_then_top[2] = {
		{ buf, 0x7ffff000 }, { (void *)(uintptr_t)(0x7ffffffff000ull - 10), 100 },
	};
	/* A lone segment is cut to MAX_RW_COUNT first (import_ubuf): no EFAULT. */
	struct iovec lone_huge[1] = { { buf, (size_t)SSIZE_MAX } };
	struct pp_file *p[2];
	int k[2];

	t_kpipe2(k, O_NONBLOCK);
	t_pipe2(p, O_NONBLOCK);
	both_write(k[1], p[1], "x", 1);
	for (int e = 0; e < 2; e++) {
		ASSERT_SAME(vmsplice(k[e], bad_then_long, 2, 0), pp_vmsplice(p[e], bad_then_long, 2, 0));
		ASSERT_SAME(vmsplice(k[e], long_then_top, 2, 0), pp_vmsplice(p[e], long_then_top, 2, 0));
	}
	ASSERT_SAME(readv(k[0], bad_then_long, 2), pp_readv(p[0], bad_then_long, 2));
	ASSERT_SAME(writev(k[1], bad_then_long, 2), pp_writev(p[1], bad_then_long, 2));
	ASSERT_SAME(readv(k[0], long_then_top, 2), pp_readv(p[0], long_then_top, 2));
	ASSERT_SAME(vmsplice(k[0], lone_huge, 1, 0), pp_vmsplice(p[0], lone_huge, 1, 0));
	ASSERT_SAME_READ(k[0], p[0], 10);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* With no descriptor left, splicing a file into a pipe still moves its bytes. */
static int test_splice_fd_table_full(void)
{
	char path[64];
	int fd = t_tmpfile("/tmp", 3 * PG + 100, 4, path);
	struct pp_file *pf = pp_fdopen(fd), *p[2];
	struct rlimit rl = { 64, 64 };
	int k[2], last = -1;
	off_t ko = 10, po = 10;

	ASSERT_TRUE(pf != NULL);
	unlink(path);
	t_kpipe2(k, O_NONBLOCK);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	for (;;) {
		int d = dup(0);

		if (d < 0) {
			ASSERT_EQ(errno, EMFILE);
			break;
		}
		last = d;
	}
	ASSERT_TRUE(last >= 0);
	ASSERT_SAME(splice(fd, &ko, k[1], NULL, 3 * PG, SPLICE_F_NONBLOCK),
		    pp_splice(pf, &po, p[1], NULL, 3 * PG, SPLICE_F_NONBLOCK));
	ASSERT_EQ(ko, po);
	ASSERT_SAME_READ(k[0], p[0], 4 * PG);
	close(last);	/* malloc in the read macro may want none; be safe */
	pp_close(pf);
	close(fd);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * The pages of a file, a megabyte of them, spliced back into the same file
 * over an overlapping range: Linux copies in order, each page read when it
 * is written, so with the target a few pages ahead the source repeats.
 * Past the first batch of 64 buffers pagepipe used to give other bytes.
 */
static void overlap_case(off_t from, off_t to, size_t len)
{
	char kpath[64], ppath[64];
	size_t flen = (size_t)(to > from ? to : from) + len + PG;
	int kf = t_tmpfile("/tmp", flen, 5, kpath), pfd = t_tmpfile("/tmp", flen, 5, ppath);
	struct pp_file *pf = pp_fdopen(pfd), *p[2];
	unsigned char *kb = malloc(flen), *pb = malloc(flen);
	off_t ki = from, pi = from, ko = to, po = to;
	size_t kdone = 0, pdone = 0;
	int k[2];

	ASSERT_TRUE(pf && kb && pb);
	unlink(kpath);
	unlink(ppath);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	while (kdone < len) {
		ssize_t r = splice(kf, &ki, k[1], NULL, len - kdone, 0);

		ASSERT_TRUE(r > 0);
		kdone += (size_t)r;
	}
	while (pdone < len) {
		ssize_t r = pp_splice(pf, &pi, p[1], NULL, len - pdone, 0);

		ASSERT_TRUE(r > 0);
		pdone += (size_t)r;
	}
	for (kdone = 0; kdone < len;) {
		ssize_t r = splice(k[0], NULL, kf, &ko, len - kdone, 0);

		ASSERT_TRUE(r > 0);
		kdone += (size_t)r;
	}
	for (pdone = 0; pdone < len;) {
		ssize_t r = pp_splice(p[0], NULL, pf, &po, len - pdone, 0);

		ASSERT_TRUE(r > 0);
		pdone += (size_t)r;
	}
	ASSERT_EQ(ko, po);
	ASSERT_EQ(pread(kf, kb, flen, 0), (ssize_t)flen);
	ASSERT_EQ(pread(pfd, pb, flen, 0), (ssize_t)flen);
	for (size_t i = 0; i < flen; i++)
		if (kb[i] != pb[i])
			t_fail_at(__FILE__, __LINE__, "overlap %lld -> %lld, %zu bytes: byte %zu (page %zu) "
				  "kernel 0x%02x, pagepipe 0x%02x", (long long)from, (long long)to,
				  len, i, i / PG, kb[i], pb[i]);
	free(kb);
	free(pb);
	pp_close(pf);
	close(kf);
	close(pfd);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_overlapping_splice_back(void)
{
	overlap_case(0, 3 * PG, 1 << 20);		/* forward, a few pages on */
	overlap_case(100, 100 + 70 * PG, (1 << 20) - PG);	/* forward, past one batch */
	overlap_case(5 * PG, 0, 1 << 20);		/* backward */
	overlap_case(0, PG + 512, 250 * PG);		/* forward, unaligned */
	return T_EXIT_PASS;
}

/* A loop device over a temporary file, or -1 with why in *why. */
static int loop_device(char dev[64], char path[64], const char **why)
{
	char cmd[256];
	FILE *f;

	*why = NULL;
	if (geteuid() != 0) {
		*why = "not root: cannot set up a loop device";
		return -1;
	}
	close(t_tmpfile("/tmp", 64 * PG, 6, path));
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s 2>/dev/null", path);
	f = popen(cmd, "r");
	if (!f || !fgets(dev, 64, f)) {
		if (f)
			pclose(f);
		unlink(path);
		*why = "losetup failed (no loop device support here)";
		return -1;
	}
	pclose(f);
	dev[strcspn(dev, "\n")] = 0;
	return 0;
}

static void loop_free(const char *dev, const char *path)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "losetup -d %s 2>/dev/null", dev);
	if (system(cmd) != 0)
		fprintf(stderr, "losetup -d %s failed\n", dev);
	unlink(path);
}

static int test_block_device(void)
{
	char dev[64], path[64];
	const char *why;
	unsigned char buf[2 * PG];
	struct pp_file *pb, *p[2];
	off_t ko = 100, po = 100;
	int bfd, k[2];

	if (loop_device(dev, path, &why) < 0)
		return t_skip("%s", why);
	bfd = open(dev, O_RDWR);
	if (bfd < 0) {
		loop_free(dev, path);
		return t_skip("open %s: %s", dev, strerror(errno));
	}
	/* Detached now, freed at our last close: nothing stays behind if we fail. */
	loop_free(dev, path);
	pb = pp_fdopen(bfd);
	ASSERT_TRUE(pb != NULL);
	t_kpipe2(k, O_NONBLOCK);
	t_pipe2(p, O_NONBLOCK);
	/* Out of the device, at an offset and at the file position. */
	ASSERT_SAME(splice(bfd, &ko, k[1], NULL, 3 * PG, 0), pp_splice(pb, &po, p[1], NULL, 3 * PG, 0));
	ASSERT_EQ(ko, po);
	ASSERT_SAME_READ(k[0], p[0], 4 * PG);
	ASSERT_EQ(lseek(bfd, 5, SEEK_SET), 5);
	/* Each side from position 5 (the kernel's call runs first). */
	ASSERT_SAME(splice(bfd, NULL, k[1], NULL, 100, 0), (lseek(bfd, 5, SEEK_SET),
			pp_splice(pb, NULL, p[1], NULL, 100, 0)));
	ASSERT_EQ(lseek(bfd, 0, SEEK_CUR), 105);
	ASSERT_SAME_READ(k[0], p[0], 4 * PG);
	/* At the end of the device: 0. */
	ko = po = 64 * PG;
	ASSERT_SAME(splice(bfd, &ko, k[1], NULL, 100, 0), pp_splice(pb, &po, p[1], NULL, 100, 0));
	/* Into the device. */
	t_fill(buf, sizeof(buf), 0, 7);
	both_write(k[1], p[1], buf, sizeof(buf));
	ko = 10 * PG + 7;
	po = 20 * PG + 7;
	ASSERT_SAME(splice(k[0], NULL, bfd, &ko, sizeof(buf), 0),
		    pp_splice(p[0], NULL, pb, &po, sizeof(buf), 0));
	ASSERT_EQ(ko - 10 * PG, po - 20 * PG);
	{
		unsigned char a[sizeof(buf)], b[sizeof(buf)];

		ASSERT_EQ(pread(bfd, a, sizeof(a), 10 * PG + 7), (ssize_t)sizeof(a));
		ASSERT_EQ(pread(bfd, b, sizeof(b), 20 * PG + 7), (ssize_t)sizeof(b));
		ASSERT_MEM_EQ(a, b, sizeof(a));
		ASSERT_MEM_EQ(a, buf, sizeof(a));
	}
	pp_close(pb);
	close(bfd);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_vmsplice_read_packets),
		T_SUBTEST(test_vmsplice_read_fault),
		T_SUBTEST(test_vmsplice_unreadable),
		T_SUBTEST(test_iov_check_order),
		T_SUBTEST(test_splice_fd_table_full),
		T_SUBTEST(test_overlapping_splice_back),
		T_SUBTEST(test_block_device),
	};

	return T_RUN_SUBTESTS(tests);
}
