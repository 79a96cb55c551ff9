// SPDX-License-Identifier: MIT
/*
 * Description: regular files into a pagepipe without copying (issue 3 §3,
 * reference §3.4, §3.12, §4.10), on disk (/var/tmp, /tmp) and on tmpfs
 * (/dev/shm).  No read happens at splice time (every read fault-injected,
 * the splice still succeeds); the queued data is a reference, not a
 * snapshot: a pwrite between splice and read shows, exactly as with a
 * kernel pipe (T-D1, compared); the caller may close its descriptor.
 * Truncation after the splice gives ENODATA when the data is consumed
 * (pagepipe's documented behaviour; Linux gives the stale bytes) and never
 * SIGBUS or bytes from anywhere else; an injected I/O error gives EIO and,
 * as in Linux, leaves the buffer in place.  Written back over an
 * overlapping range of their own file, file buffers copy as memmove.
 */
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "helpers.h"
#include "internal.h"	/* pp__fault_arm(): the static library's test hooks */

static const char *const dirs[] = { "/var/tmp", "/tmp", "/dev/shm" };
#define NDIRS	(sizeof(dirs) / sizeof(dirs[0]))
#define PG	4096

static void on_sigbus(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: SIGBUS\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(T_EXIT_FAIL);
	_exit(T_EXIT_FAIL);
}

static void no_sigbus(void)
{
	signal(SIGBUS, on_sigbus);
	signal(SIGSEGV, on_sigbus);
}

static int usable_dir(const char *dir)
{
	char p[64];
	int fd;

	snprintf(p, sizeof(p), "%s/pp-probe-XXXXXX", dir);
	fd = mkstemp(p);
	if (fd < 0)
		return 0;
	close(fd);
	unlink(p);
	return 1;
}

/* Reference, not snapshot: compared with a kernel pipe. */
static void reference_in(const char *dir)
{
	char path[64];
	int fd = t_tmpfile(dir, 4 * PG, 21, path);
	struct pp_file *pf = pp_fdopen(fd), *p[2];
	int k[2];
	off_t ko = 0, po = 0;
	char newb[100];

	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_SAME(splice(fd, &ko, k[1], NULL, 4 * PG, 0), pp_splice(pf, &po, p[1], NULL, 4 * PG, 0));
	memset(newb, 'N', sizeof(newb));
	ASSERT_EQ(pwrite(fd, newb, sizeof(newb), 10), (ssize_t)sizeof(newb));
	ASSERT_EQ(pwrite(fd, newb, sizeof(newb), 3 * PG + 5), (ssize_t)sizeof(newb));
	/* Both pipes show the new bytes (Linux's semantics too, §3.12). */
	{
		unsigned char kb[4 * PG], pb[4 * PG];

		ASSERT_EQ(read(k[0], kb, sizeof(kb)), 4 * PG);
		ASSERT_EQ(t_read_full(p[0], pb, sizeof(pb)), 4 * PG);
		ASSERT_MEM_EQ(kb, pb, sizeof(kb));
		ASSERT_MEM_EQ(pb + 10, newb, sizeof(newb));
		ASSERT_MEM_EQ(pb + 3 * PG + 5, newb, sizeof(newb));
		ASSERT_EQ(t_check(pb, 10, 0, 21), 0);
		ASSERT_EQ(t_check(pb + 110, PG - 110, 110, 21), 0);
	}
	pp_close(pf);
	close(fd);
	unlink(path);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_reference_not_snapshot(void)
{
	int n = 0;

	for (size_t i = 0; i < NDIRS; i++) {
		if (!usable_dir(dirs[i]))
			continue;
		reference_in(dirs[i]);
		n++;
	}
	if (!n)
		return t_skip("no writable temporary directory");
	return T_EXIT_PASS;
}

/* No byte is read at splice time: with every read failing, the splice still works. */
static int test_no_read_at_splice_time(void)
{
	for (size_t i = 0; i < NDIRS; i++) {
		char path[64];
		int fd;
		struct pp_file *pf, *p[2];
		unsigned char buf[65536];

		if (!usable_dir(dirs[i]))
			continue;
		fd = t_tmpfile(dirs[i], 65536, 22, path);
		pf = pp_fdopen(fd);
		t_pipe2(p, 0);
		pp__fault_arm(PP_FAULT_READ, 0, EIO, 0);
		ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 65536, 0), 65536);
		ASSERT_EQ(pp__fault_hits(PP_FAULT_READ), 0);
		/* The first consumer does the read, and it fails. */
		ASSERT_ERRNO(pp_read(p[0], buf, 100), EIO);
		ASSERT_EQ(pp__fault_hits(PP_FAULT_READ), 1);
		pp__fault_disarm_all();
		/* EIO leaves the buffer in place, as Linux does: the retry reads it. */
		ASSERT_EQ(pp_read(p[0], buf, PG), PG);
		ASSERT_EQ(t_check(buf, PG, 0, 22), 0);
		pp_close(pf);
		close(fd);
		unlink(path);
		pp_close(p[0]); pp_close(p[1]);
	}
	return T_EXIT_PASS;
}

/* The caller's descriptor may go: the buffers hold their own. */
static int test_close_source(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 3 * PG, 23, path), fd2 = open(path, O_RDONLY);
	struct pp_file *pf = pp_fdopen(fd), *p[2];
	int k[2];

	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_SAME(splice(fd2, NULL, k[1], NULL, 3 * PG, 0), pp_splice(pf, NULL, p[1], NULL, 3 * PG, 0));
	pp_close(pf);
	close(fd);
	close(fd2);
	unlink(path);
	ASSERT_SAME_READ(k[0], p[0], 3 * PG);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * Truncation after the splice: pagepipe reports ENODATA once per buffer
 * whose data is gone and drops it (documented deviation: Linux keeps the
 * truncated page and gives its stale bytes).  Never SIGBUS, never bytes
 * from anywhere else.
 */
static void truncate_read(const char *dir)
{
	char path[64];
	int fd = t_tmpfile(dir, 3 * PG, 24, path);
	struct pp_file *pf = pp_fdopen(fd), *p[2];
	unsigned char buf[3 * PG];
	ssize_t r;
	int enodata = 0;

	t_pipe2(p, 0);
	ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 3 * PG, 0), 3 * PG);
	ASSERT_EQ(ftruncate(fd, 0), 0);
	pp_close(p[1]);
	while ((r = pp_read(p[0], buf, sizeof(buf))) != 0) {
		ASSERT_EQ(r, -1);
		ASSERT_EQ(errno, ENODATA);
		enodata++;
		ASSERT_LE(enodata, 3);
	}
	ASSERT_GE(enodata, 1);
	pp_close(p[0]);

	/* Partly truncated: the bytes still there, then ENODATA, then EOF. */
	ASSERT_EQ(ftruncate(fd, 0), 0);
	{
		char b[3 * PG];

		t_fill(b, sizeof(b), 0, 24);
		ASSERT_EQ(pwrite(fd, b, sizeof(b), 0), (ssize_t)sizeof(b));
	}
	t_pipe2(p, 0);
	ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 3 * PG, 0), 3 * PG);
	ASSERT_EQ(ftruncate(fd, PG + 904), 0);
	pp_close(p[1]);
	{
		size_t got = 0;

		enodata = 0;
		for (;;) {
			r = pp_read(p[0], buf + got, sizeof(buf) - got);
			if (r == 0)
				break;
			if (r < 0) {
				ASSERT_EQ(errno, ENODATA);
				enodata++;
				ASSERT_LE(enodata, 3);
				continue;
			}
			got += (size_t)r;
		}
		ASSERT_EQ(got, PG + 904);
		ASSERT_EQ(t_check(buf, got, 0, 24), 0);
		ASSERT_GE(enodata, 1);
	}
	pp_close(p[0]);
	pp_close(pf);
	close(fd);
	unlink(path);
}

static int test_truncate_then_read(void)
{
	no_sigbus();
	for (size_t i = 0; i < NDIRS; i++) {
		if (usable_dir(dirs[i]))
			truncate_read(dirs[i]);
	}
	return T_EXIT_PASS;
}

/* Truncated data spliced onwards: the splice ends with 0, nothing foreign arrives. */
static int test_truncate_then_splice_out(void)
{
	no_sigbus();
	for (size_t i = 0; i < NDIRS; i++) {
		char path[64], opath[64];
		int fd, of, s[2];
		struct pp_file *pf, *pof, *ps, *p[2];
		struct stat st;
		char c;

		if (!usable_dir(dirs[i]))
			continue;
		fd = t_tmpfile(dirs[i], 2 * PG, 25, path);
		of = t_tmpfile(dirs[i], 0, 0, opath);
		pf = pp_fdopen(fd);
		pof = pp_fdopen(of);
		/* To a file (copy_file_range path). */
		t_pipe2(p, 0);
		ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 2 * PG, 0), 2 * PG);
		ASSERT_EQ(ftruncate(fd, 0), 0);
		pp_close(p[1]);
		for (int n = 0; n < 4; n++) {
			ssize_t r = pp_splice(p[0], NULL, pof, NULL, 2 * PG, 0);

			ASSERT_EQ(r, 0);
		}
		ASSERT_EQ(fstat(of, &st), 0);
		ASSERT_EQ(st.st_size, 0);
		pp_close(p[0]);
		/* To a socket (sendfile path). */
		ASSERT_EQ(ftruncate(fd, 0), 0);
		{
			char b[2 * PG];

			t_fill(b, sizeof(b), 0, 25);
			ASSERT_EQ(pwrite(fd, b, sizeof(b), 0), (ssize_t)sizeof(b));
		}
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
		ps = pp_fdopen(s[0]);
		t_pipe2(p, 0);
		ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
		ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 2 * PG, 0), 2 * PG);
		ASSERT_EQ(ftruncate(fd, 0), 0);
		pp_close(p[1]);
		for (int n = 0; n < 4; n++)
			ASSERT_EQ(pp_splice(p[0], NULL, ps, NULL, 2 * PG, 0), 0);
		ASSERT_EQ(fcntl(s[1], F_SETFL, O_NONBLOCK), 0);
		ASSERT_ERRNO(read(s[1], &c, 1), EAGAIN);
		pp_close(p[0]);
		pp_close(ps);
		close(s[0]); close(s[1]);
		pp_close(pf);
		pp_close(pof);
		close(fd);
		close(of);
		unlink(path);
		unlink(opath);
	}
	return T_EXIT_PASS;
}

/* An I/O error when a buffer is consumed: EIO, on pp_read and on a splice onwards. */
static int test_io_error(void)
{
	for (size_t i = 0; i < NDIRS; i++) {
		char path[64], opath[64];
		int fd, of;
		struct pp_file *pf, *pof, *p[2];
		unsigned char buf[2 * PG];
		struct stat st;

		if (!usable_dir(dirs[i]))
			continue;
		fd = t_tmpfile(dirs[i], 2 * PG, 26, path);
		of = t_tmpfile(dirs[i], 0, 0, opath);
		pf = pp_fdopen(fd);
		pof = pp_fdopen(of);
		t_pipe2(p, 0);
		ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 2 * PG, 0), 2 * PG);
		pp__fault_arm(PP_FAULT_READ, 0, EIO, 1);
		ASSERT_ERRNO(pp_read(p[0], buf, sizeof(buf)), EIO);
		pp__fault_disarm_all();
		/* Nothing consumed: once the error is gone, all of it reads. */
		ASSERT_EQ(pp_read(p[0], buf, sizeof(buf)), 2 * PG);
		ASSERT_EQ(t_check(buf, 2 * PG, 0, 26), 0);

		/* The kernel path to a file fails: EIO, nothing written, nothing consumed. */
		ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
		ASSERT_EQ(pp_splice(pf, NULL, p[1], NULL, 2 * PG, 0), 2 * PG);
		pp__fault_arm(PP_FAULT_SPLICE, 0, EIO, 1);
		ASSERT_ERRNO(pp_splice(p[0], NULL, pof, NULL, 2 * PG, 0), EIO);
		pp__fault_disarm_all();
		ASSERT_EQ(fstat(of, &st), 0);
		ASSERT_EQ(st.st_size, 0);
		ASSERT_EQ(pp_splice(p[0], NULL, pof, NULL, 2 * PG, 0), 2 * PG);
		ASSERT_EQ(pread(of, buf, sizeof(buf), 0), 2 * PG);
		ASSERT_EQ(t_check(buf, 2 * PG, 0, 26), 0);

		pp_close(p[0]); pp_close(p[1]);
		pp_close(pf); pp_close(pof);
		close(fd); close(of);
		unlink(path); unlink(opath);
	}
	return T_EXIT_PASS;
}

/* Large file through the pagepipe and back out, both media, byte exact. */
static int test_large_roundtrip(void)
{
	enum { LEN = 4 << 20 };
	for (size_t i = 0; i < NDIRS; i++) {
		char path[64], opath[64];
		int fd, of;
		struct pp_file *pf, *pof, *p[2];
		size_t done = 0;
		unsigned char *buf;

		if (!usable_dir(dirs[i]))
			continue;
		fd = t_tmpfile(dirs[i], LEN + 77, 27, path);
		of = t_tmpfile(dirs[i], 0, 0, opath);
		pf = pp_fdopen(fd);
		pof = pp_fdopen(of);
		t_pipe2(p, 0);
		ASSERT_EQ(lseek(fd, 77, SEEK_SET), 77);
		while (done < LEN) {
			ssize_t n = pp_splice(pf, NULL, p[1], NULL, LEN - done, 0);

			ASSERT_TRUE(n > 0);
			for (ssize_t m = 0; m < n; ) {
				ssize_t r = pp_splice(p[0], NULL, pof, NULL, (size_t)(n - m), 0);

				ASSERT_TRUE(r > 0);
				m += r;
			}
			done += (size_t)n;
		}
		ASSERT_EQ(lseek(fd, 0, SEEK_CUR), LEN + 77);
		ASSERT_EQ(lseek(of, 0, SEEK_CUR), LEN);
		buf = malloc(LEN);
		ASSERT_TRUE(buf != NULL);
		ASSERT_EQ(pread(of, buf, LEN, 0), LEN);
		ASSERT_EQ(t_check(buf, LEN, 77, 27), 0);
		free(buf);
		pp_close(p[0]); pp_close(p[1]);
		pp_close(pf); pp_close(pof);
		close(fd); close(of);
		unlink(path); unlink(opath);
	}
	return T_EXIT_PASS;
}

/*
 * File buffers spliced back into their own file over an overlapping range
 * copy as memmove (docs/design.md §6; Linux copies page to page in place,
 * whose result depends on the copy order): each byte lands where it was
 * sent, with the value it had before the splice.  A second pipe still
 * holding the same pages is a reference and reads the file as it now is.
 */
static int test_overlapping_write_back(void)
{
	char path[64];
	int fd = t_tmpfile("/tmp", 2 * PG, 33, path);
	struct pp_file *pf = pp_fdopen(fd), *a[2], *b[2];
	unsigned char want[2 * PG], got[2 * PG];
	off_t in = 0, out = 1280;
	const size_t len = PG - 9;

	ASSERT_TRUE(pf != NULL);
	t_pipe2(a, 0);
	t_pipe2(b, 0);
	ASSERT_EQ(pp_splice(pf, &in, a[1], NULL, PG, 0), PG);
	ASSERT_EQ(pp_tee(a[0], b[1], PG, 0), PG);
	ASSERT_EQ(pp_read(a[0], got, 9), 9);
	ASSERT_EQ(pread(fd, want, sizeof(want), 0), (ssize_t)sizeof(want));
	memmove(want + 1280, want + 9, len);
	ASSERT_EQ(pp_splice(a[0], NULL, pf, &out, len, 0), (ssize_t)len);
	ASSERT_EQ(out, (off_t)(1280 + len));
	ASSERT_EQ(pread(fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, want, sizeof(got));
	ASSERT_EQ(t_read_full(b[0], got, PG), PG);
	ASSERT_MEM_EQ(got, want, PG);
	pp_close(a[0]); pp_close(a[1]);
	pp_close(b[0]); pp_close(b[1]);
	pp_close(pf);
	close(fd);
	unlink(path);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_reference_not_snapshot),
		T_SUBTEST(test_no_read_at_splice_time),
		T_SUBTEST(test_close_source),
		T_SUBTEST(test_truncate_then_read),
		T_SUBTEST(test_truncate_then_splice_out),
		T_SUBTEST(test_io_error),
		T_SUBTEST(test_large_roundtrip),
		T_SUBTEST(test_overlapping_write_back),
	};

	return T_RUN_SUBTESTS(tests);
}
