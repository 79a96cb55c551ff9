// SPDX-License-Identifier: MIT
/*
 * Description: a zero-length buffer at the front of a pipe (issue 11,
 * section 2, defect 7).  pp_pipe_add_buf() accepts len 0, and an
 * endpoint's splice_read may produce an empty buffer among others; alone at
 * the front, such a buffer makes pp_read_lend fail with EIO for good and
 * pp_splice to a file return 0 (EOF) while writers are still open.  Either
 * fix is accepted: pp_pipe_add_buf refusing len 0 with EINVAL, or empty
 * buffers skipped everywhere.  What is not accepted is the stuck loan and
 * the false EOF: after the empty buffer, the next bytes must come, and
 * with nothing else queued the answer is EAGAIN, as for an empty pipe.
 * pp_read, which eats empty buffers, is the reference.
 */
#include "helpers.h"

#include <fcntl.h>

#define PAGE	4096

/* Queue an empty anonymous buffer; false if it was refused (EINVAL). */
static bool add_empty(struct pp_file *w)
{
	void *page = pp_page_alloc();
	struct pp_buf b = { .page = page, .offset = 0, .len = 0, .ops = &pp_anon_buf_ops };
	ssize_t r;

	ASSERT_TRUE(page != NULL);
	errno = 0;
	r = pp_pipe_add_buf(w, &b, 0);
	if (r < 0) {
		ASSERT_EQ(errno, EINVAL);	/* the other acceptable fix */
		pp_page_put(page);
		return false;
	}
	ASSERT_EQ(r, 0);
	return true;
}

/* An endpoint whose splice_read yields an empty buffer, then "hello". */
static ssize_t ep_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			      unsigned int nr_bufs, size_t len, unsigned int flags)
{
	void *a, *b;

	(void)in;
	(void)pos;
	(void)flags;
	if (nr_bufs < 2 || len < 5)
		return -EINVAL;
	a = pp_page_alloc();
	b = pp_page_alloc();
	if (!a || !b)
		return -ENOMEM;
	memcpy(b, "hello", 5);
	bufs[0] = (struct pp_buf){ .page = a, .len = 0, .ops = &pp_anon_buf_ops };
	bufs[1] = (struct pp_buf){ .page = b, .len = 5, .ops = &pp_anon_buf_ops };
	return 5;
}

static const struct pp_file_ops ep_ops = {
	.splice_read = ep_splice_read,
	.name = "empty-then-hello",
};

enum src { SRC_ADD_BUF, SRC_ENDPOINT };
enum way { WAY_READ, WAY_LEND, WAY_SPLICE_FILE };

static const char *const way_names[] = { "pp_read", "pp_read_lend", "pp_splice to a file" };

/* Consume with way, non-blocking: bytes (copied to out), or -errno. */
static long consume(struct pp_file *r, enum way way, char *out, int fd)
{
	long n;

	errno = 0;
	switch (way) {
	case WAY_READ:
		n = pp_read(r, out, PAGE);
		break;
	case WAY_LEND: {
		struct iovec iov[4];

		n = pp_read_lend(r, iov, 4, PAGE);
		if (n > 0) {
			size_t at = 0;

			for (int i = 0; at < (size_t)n; i++) {
				memcpy(out + at, iov[i].iov_base, iov[i].iov_len);
				at += iov[i].iov_len;
			}
			ASSERT_EQ(pp_read_done(r, (size_t)n), 0);
		}
		break;
	}
	case WAY_SPLICE_FILE: {
		struct pp_file *f = pp_fdopen(fd);
		off_t off = 0;

		ASSERT_EQ(ftruncate(fd, 0), 0);
		n = pp_splice(r, NULL, f, &off, PAGE, SPLICE_F_NONBLOCK);
		if (n > 0)
			ASSERT_EQ(pread(fd, out, (size_t)n, 0), n);
		pp_close(f);
		break;
	}
	default:
		n = -1;
	}
	return n < 0 ? -errno : n;
}

static void run(enum src src, enum way way)
{
	static char msg[160];
	struct pp_file *e[2];
	char out[PAGE], path[64];
	int fd = t_tmpfile(NULL, 0, 0, path);
	long n;

	unlink(path);
	snprintf(msg, sizeof(msg), "an empty buffer at the front, consumed by %s", way_names[way]);
	t_watchdog(10, msg);
	t_pipe2(e, O_NONBLOCK);

	if (src == SRC_ADD_BUF) {
		/* Alone: nothing to read yet, and the writer is open. */
		if (add_empty(e[1])) {
			n = consume(e[0], way, out, fd);
			if (n != -EAGAIN)
				t_fail_at(__FILE__, __LINE__, "%s, nothing behind it, writer open: "
					  "got %ld (%s), want -1 EAGAIN", msg, n,
					  n < 0 ? strerror((int)-n) : n == 0 ? "EOF" : "bytes");
		}
		ASSERT_EQ(pp_write(e[1], "hello", 5), 5);
	} else {
		struct pp_file *ep = pp_file_new(&ep_ops, O_RDONLY, NULL);

		ASSERT_TRUE(ep != NULL);
		ASSERT_EQ(pp_splice(ep, NULL, e[1], NULL, PAGE, 0), 5);
		pp_close(ep);
	}

	/* Then the bytes behind it must come. */
	n = consume(e[0], way, out, fd);
	if (n != 5)
		t_fail_at(__FILE__, __LINE__, "%s, \"hello\" behind it: got %ld (%s), want 5",
			  msg, n, n < 0 ? strerror((int)-n) : n == 0 ? "EOF" : "bytes");
	ASSERT_MEM_EQ(out, "hello", 5);
	n = consume(e[0], way, out, fd);
	ASSERT_EQ(n, -EAGAIN);
	pp_close(e[1]);
	n = consume(e[0], way, out, fd);
	ASSERT_EQ(n, 0);
	pp_close(e[0]);
	close(fd);
	t_watchdog(0, NULL);
}

static int add_buf_read(void) { run(SRC_ADD_BUF, WAY_READ); return 0; }
static int add_buf_lend(void) { run(SRC_ADD_BUF, WAY_LEND); return 0; }
static int add_buf_splice_file(void) { run(SRC_ADD_BUF, WAY_SPLICE_FILE); return 0; }
static int endpoint_read(void) { run(SRC_ENDPOINT, WAY_READ); return 0; }
static int endpoint_lend(void) { run(SRC_ENDPOINT, WAY_LEND); return 0; }
static int endpoint_splice_file(void) { run(SRC_ENDPOINT, WAY_SPLICE_FILE); return 0; }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(add_buf_read),
		T_SUBTEST(add_buf_lend),
		T_SUBTEST(add_buf_splice_file),
		T_SUBTEST(endpoint_read),
		T_SUBTEST(endpoint_lend),
		T_SUBTEST(endpoint_splice_file),
	};

	return T_RUN_SUBTESTS(tests);
}
