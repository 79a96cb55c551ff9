// SPDX-License-Identifier: MIT
/*
 * Description: pp_read_lend after a file buffer's data is gone (issue 11,
 * section 2, defect 6).  A regular file is spliced into a pagepipe (file
 * buffers, one per page), a few bytes are written behind it, and the file
 * is truncated to its first page.  docs/design.md promises that a buffer
 * whose data is gone is reported once (ENODATA) and dropped, so that the
 * reader goes on: pp_read does that.  pp_read_lend must do the same, but
 * today it returns ENODATA forever and never drops the buffer, so a lending
 * consumer is stuck for good.  The pp_read run is the reference: the
 * lending run must see the same sequence (bytes, ENODATA per gone buffer,
 * then the bytes written behind, then EOF).
 */
#include "helpers.h"

#include <fcntl.h>

#define PAGE	4096
#define NPAGES	3

/* One step's outcome: bytes, or -errno. */
static long step(struct pp_file *r, bool lend, unsigned char *out, size_t len)
{
	long n;

	errno = 0;
	if (!lend) {
		n = pp_read(r, out, len);
	} else {
		struct iovec iov[1];

		n = pp_read_lend(r, iov, 1, len);
		if (n > 0) {
			memcpy(out, iov[0].iov_base, (size_t)n);
			ASSERT_EQ(pp_read_done(r, (size_t)n), 0);
		}
	}
	return n < 0 ? -errno : n;
}

/* Fills seq with the outcomes until EOF (at most max steps); returns how many. */
static int run(bool lend, long *seq, int max)
{
	static unsigned char got[PAGE];
	struct pp_file *e[2], *file;
	char path[64];
	off_t off = 0;
	int fd, n = 0;

	t_pipe2(e, O_NONBLOCK);
	fd = t_tmpfile(NULL, NPAGES * PAGE, 5, path);
	unlink(path);
	file = pp_fdopen(fd);
	ASSERT_EQ(pp_splice(file, &off, e[1], NULL, NPAGES * PAGE, 0), NPAGES * PAGE);
	ASSERT_EQ(pp_write(e[1], "tail", 4), 4);
	ASSERT_EQ(pp_close(e[1]), 0);
	ASSERT_EQ(ftruncate(fd, PAGE), 0);

	while (n < max) {
		long r = step(e[0], lend, got, PAGE);

		seq[n++] = r;
		if (r == 0)
			break;
		if (n == 1 && r > 0)
			ASSERT_EQ(t_check(got, (size_t)r, 0, 5), 0);
		if (r == 4)
			ASSERT_MEM_EQ(got, "tail", 4);
	}
	pp_close(e[0]);
	pp_close(file);
	close(fd);
	return n;
}

static void print_seq(const char *name, const long *seq, int n)
{
	printf("%s:", name);
	for (int i = 0; i < n; i++) {
		if (seq[i] < 0)
			printf(" %s", strerror((int)-seq[i]));
		else
			printf(" %ld", seq[i]);
	}
	printf("%s\n", n && seq[n - 1] == 0 ? " (EOF)" : " ...");
}

int main(void)
{
	long rseq[16], lseq[16];
	int rn, ln;

	t_watchdog(20, "reading past truncated file buffers");
	rn = run(false, rseq, 16);
	ln = run(true, lseq, 16);
	print_seq("pp_read", rseq, rn);
	print_seq("pp_read_lend", lseq, ln);

	/* The reference: the page that is left, ENODATA, ..., the tail, EOF. */
	ASSERT_EQ(rseq[0], PAGE);
	ASSERT_EQ(rseq[1], -ENODATA);
	ASSERT_EQ(rseq[rn - 1], 0);
	ASSERT_EQ(rseq[rn - 2], 4);

	for (int i = 0; i < rn && i < ln; i++)
		if (lseq[i] != rseq[i])
			t_fail_at(__FILE__, __LINE__, "step %d: pp_read gave %ld, pp_read_lend %ld "
				  "(negative: -errno; %d = ENODATA)", i, rseq[i], lseq[i], ENODATA);
	ASSERT_EQ(ln, rn);
	return T_EXIT_PASS;
}
