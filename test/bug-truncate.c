// SPDX-License-Identifier: MIT
/*
 * Description: truncation during splice (T-TRUNC1).  A file is spliced into
 * a pagepipe (file buffers: references, no bytes copied), then truncated
 * before the data is consumed.  Reading the pipe, or splicing it on to a
 * file, socket or kernel pipe, gives the bytes that are still there and then
 * ENODATA, a short count or 0, never SIGBUS and never a byte that was not
 * the file's at that offset.  Then the same with a thread truncating while
 * another splices and reads.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "helpers.h"
#include "internal.h"

#define FLEN	(16 * 4096)

static void on_sigbus(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: SIGBUS\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(T_EXIT_FAIL);
}

static void catch_sigbus(void)
{
	signal(SIGBUS, on_sigbus);
	signal(SIGPIPE, SIG_IGN);
}

/*
 * Bytes [off, off + n) of got against the file's pattern.  With a racing
 * truncator (cut: the size it set, or -1), a zero at or past that size is
 * allowed: pread(2) on the file itself can return zeros there when it
 * races with the truncate (the cut page's tail is zeroed while a read that
 * sampled the old size copies it).  Seen without any pagepipe code, with
 * the same pwrite/readahead/pread/ftruncate pattern: one pread in about
 * 250,000 rounds; it failed this test once in CI.  Any other byte, and
 * any zero below the cut, must be the file's.
 */
static int check_bytes(const unsigned char *got, size_t n, off_t off, unsigned int seed,
		       const atomic_llong *cut)
{
	long long at = cut ? atomic_load(cut) : -1;

	for (size_t i = 0; i < n; i++) {
		unsigned char want = t_pattern((unsigned long long)off + i, seed);

		if (got[i] == want || (at >= 0 && off + (off_t)i >= at && got[i] == 0))
			continue;
		fprintf(stderr, "byte %lld: 0x%02x, want 0x%02x (cut at %lld)\n",
			(long long)off + (long long)i, got[i], want, at);
		return -1;
	}
	return 0;
}

/*
 * Read the pipe dry (non-blocking): every byte that comes must be the
 * file's at its position (check_bytes); ENODATA may replace missing data.
 * Returns the bytes that came.  pos is the file offset of the first queued
 * byte; the buffers are one per page, so a dropped buffer skips to the
 * next page.
 */
static size_t drain_check(struct pp_file *r, off_t pos, unsigned int seed, size_t limit,
			  int *nodata, const atomic_llong *cut)
{
	static unsigned char got[FLEN];
	size_t total = 0;

	*nodata = 0;
	for (;;) {
		ssize_t n = pp_read(r, got, sizeof(got));

		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			ASSERT_EQ(errno, ENODATA);
			(*nodata)++;
			ASSERT_LE(*nodata, 64);
			pos = (pos | 4095) + 1;	/* that buffer is gone: the next page */
			continue;
		}
		ASSERT_TRUE(n > 0);
		ASSERT_LE((size_t)pos + (size_t)n, limit);	/* nothing past the new end */
		ASSERT_EQ(check_bytes(got, (size_t)n, pos, seed, cut), 0);
		pos += n;
		total += (size_t)n;
	}
	return total;
}

static int test_truncate_to_zero(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, FLEN, 1, path), nodata;
	struct pp_file *p[2], *in;
	off_t off = 0;

	catch_sigbus();
	unlink(path);
	in = pp_fdopen(fd);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pp_splice(in, &off, p[1], NULL, 3 * 4096, 0), 3 * 4096);
	ASSERT_EQ(ftruncate(fd, 0), 0);
	{
		char b[100];

		ASSERT_ERRNO(pp_read(p[0], b, sizeof(b)), ENODATA);
	}
	ASSERT_EQ(drain_check(p[0], 4096, 1, 0, &nodata, NULL), 0);
	ASSERT_EQ(nodata, 2);
	ASSERT_EQ(t_fionread(p[0]), 0);
	/* The pipe is usable afterwards. */
	t_write_full(p[1], "ok", 2);
	{
		char b[2];

		ASSERT_EQ(pp_read(p[0], b, 2), 2);
		ASSERT_MEM_EQ(b, "ok", 2);
	}
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
	return 0;
}

static int test_truncate_mid_page(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, FLEN, 2, path), nodata;
	struct pp_file *p[2], *in;
	off_t off = 1000;
	unsigned char got[FLEN];
	ssize_t n;

	catch_sigbus();
	unlink(path);
	in = pp_fdopen(fd);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pp_splice(in, &off, p[1], NULL, 4 * 4096, 0), 4 * 4096);
	ASSERT_EQ(ftruncate(fd, 7000), 0);
	/* Bytes 1000..7000 are still the file's; after them nothing. */
	n = pp_read(p[0], got, sizeof(got));
	ASSERT_TRUE(n > 0);
	ASSERT_LE(n, 6000);
	ASSERT_EQ(t_check(got, (size_t)n, 1000, 2), 0);
	drain_check(p[0], 1000 + n, 2, 7000, &nodata, NULL);
	ASSERT_EQ(t_fionread(p[0]), 0);
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
	return 0;
}

/* Splice the truncated buffers on: to a file, a socket, a kernel pipe. */
static int test_truncate_then_splice_out(void)
{
	char path[64], opath[64];
	int fd = t_tmpfile(NULL, FLEN, 3, path);
	int out = t_tmpfile(NULL, 0, 0, opath), sv[2], k[2];
	struct pp_file *p[2], *in, *o[3];
	unsigned char got[FLEN];

	catch_sigbus();
	unlink(path);
	unlink(opath);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	t_kpipe2(k, O_NONBLOCK);
	in = pp_fdopen(fd);
	o[0] = pp_fdopen(out);
	o[1] = pp_fdopen(sv[1]);
	o[2] = pp_fdopen(k[1]);
	t_pipe2(p, O_NONBLOCK);
	for (int t = 0; t < 3; t++) {
		off_t off = 0, ooff = 0;
		ssize_t total = 0, n;
		int rounds = 0;

		ASSERT_EQ(ftruncate(fd, 0), 0);
		for (off_t q = 0; q < FLEN; q += 4096) {
			unsigned char b[4096];
			t_fill(b, sizeof(b), (unsigned long long)q, 3);
			ASSERT_EQ(pwrite(fd, b, sizeof(b), q), 4096);
		}
		ASSERT_EQ(pp_splice(in, &off, p[1], NULL, 4 * 4096, 0), 4 * 4096);
		ASSERT_EQ(ftruncate(fd, 6000), 0);
		ASSERT_EQ(ftruncate(out, 0), 0);
		/* Splice until the pipe is empty; 0 (data gone) and short are fine. */
		while (t_fionread(p[0]) > 0) {
			n = pp_splice(p[0], NULL, o[t], t == 0 ? &ooff : NULL, FLEN, SPLICE_F_NONBLOCK);
			if (n < 0)
				ASSERT_EQ(errno, ENODATA);
			else
				total += n;
			ASSERT_LE(++rounds, 20);
		}
		ASSERT_LE(total, 6000);
		if (t == 0) {
			ASSERT_EQ(ooff, total);
			ASSERT_EQ(pread(out, got, sizeof(got), 0), total);
		} else {
			ssize_t got_n = 0;
			while (got_n < total) {
				n = read(t == 1 ? sv[0] : k[0], got + got_n, sizeof(got) - (size_t)got_n);
				ASSERT_TRUE(n > 0);
				got_n += n;
			}
			ASSERT_EQ(got_n, total);
		}
		ASSERT_EQ(t_check(got, (size_t)total, 0, 3), 0);
	}
	for (int t = 0; t < 3; t++)
		pp_close(o[t]);
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
	close(out);
	close(sv[0]);
	close(sv[1]);
	close(k[0]);
	close(k[1]);
	return 0;
}

/* ------------------------------------------------------------------ */

struct race {
	int fd;
	atomic_int stop;
	atomic_int go;
	atomic_llong cut;	/* the size this round truncates to; -1 before */
	unsigned int seed;
};

static void *truncator(void *arg)
{
	struct race *r = arg;
	unsigned int s = r->seed;

	while (!atomic_load(&r->stop)) {
		while (!atomic_load(&r->go) && !atomic_load(&r->stop))
			sched_yield();
		if (atomic_load(&r->stop))
			break;
		for (int i = 0; i < (int)(rand_r(&s) % 200); i++)
			sched_yield();
		/* Shrink only: bytes below the new size are never touched. */
		off_t size = (off_t)(rand_r(&s) % FLEN);

		atomic_store(&r->cut, size);	/* before the cut, so a reader that saw it knows */
		ASSERT_EQ(ftruncate(r->fd, size), 0);
		atomic_store(&r->go, 0);
	}
	return NULL;
}

/* One thread truncates while this one splices page by page and reads. */
static int test_truncate_concurrent(void)
{
	char path[64];
	struct pp_file *p[2];
	struct race r = { .cut = -1, .seed = 12345 };
	pthread_t th;
	unsigned char page[4096];
	long long deadline = t_now_ms() + 1500;
	int rounds = 0;
	size_t seen = 0;

	catch_sigbus();
	r.fd = t_tmpfile(NULL, 0, 0, path);
	unlink(path);
	t_pipe2(p, O_NONBLOCK);
	ASSERT_EQ(pthread_create(&th, NULL, truncator, &r), 0);
	while (t_now_ms() < deadline || rounds < 20) {
		struct pp_file *in;
		off_t off = 0, end;
		int nodata;

		/* A fresh copy of the whole file, then let the truncator loose. */
		for (off_t q = 0; q < FLEN; q += 4096) {
			t_fill(page, sizeof(page), (unsigned long long)q, 9);
			ASSERT_EQ(pwrite(r.fd, page, sizeof(page), q), 4096);
		}
		in = pp_fdopen(r.fd);
		ASSERT_TRUE(in != NULL);
		atomic_store(&r.cut, -1);
		atomic_store(&r.go, 1);
		for (end = 0; end < FLEN; ) {
			off_t at = off;
			ssize_t n = pp_splice(in, &off, p[1], NULL, 4096 - (size_t)(at & 4095), 0);

			if (n == 0)
				break;	/* EOF: truncated below here */
			ASSERT_TRUE(n > 0);
			seen += drain_check(p[0], at, 9, FLEN, &nodata, &r.cut);
			end = off;
		}
		while (atomic_load(&r.go))
			sched_yield();
		seen += drain_check(p[0], off, 9, FLEN, &nodata, &r.cut);
		ASSERT_EQ(t_fionread(p[0]), 0);
		pp_close(in);
		rounds++;
	}
	atomic_store(&r.stop, 1);
	t_join(th, NULL, 10);
	printf("%d rounds, %zu bytes checked\n", rounds, seen);
	pp_close(p[0]);
	pp_close(p[1]);
	close(r.fd);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_truncate_to_zero),
		T_SUBTEST(test_truncate_mid_page),
		T_SUBTEST(test_truncate_then_splice_out),
		T_SUBTEST(test_truncate_concurrent),
	};

	return T_RUN_SUBTESTS(tests);
}
