// SPDX-License-Identifier: MIT
/*
 * Description: allocation failure (ENOMEM) injected with PP_FAULT_ALLOC at
 * every allocation the library makes: pp_pipe2, pp_fdopen, write (page
 * allocation), F_SETPIPE_SZ, splice file -> pipe (the file reference),
 * socket -> pipe (copy pages), pp_write_ref (the user reference) and
 * pp_read_lend (scratch pages for file buffers).  Each site on its own, and
 * then SQLite-style: "fail the Nth allocation" of one operation sequence for
 * N = 0, 1, ... until the sequence runs with no allocation failing.  In
 * every case the failing call returns -1/ENOMEM (or a partial count), the
 * state it leaves is unchanged (offsets, queued bytes, pipe size), retrying
 * after the failure succeeds, and the whole stream is read back with no byte
 * lost or duplicated.  Leaks are left to ASan/LSan and valgrind.
 */
#include <sys/socket.h>

#include "helpers.h"
#include "internal.h"

#define FILE_LEN	(64 * 1024)

/* Read exactly len bytes (non-blocking pipe: they must all be there). */
static void read_exact(struct pp_file *r, unsigned char *dst, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pp_read(r, dst + done, len - done);

		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "pp_read after %zu of %zu: %zd (%s)",
				  done, len, n, n < 0 ? strerror(errno) : "EOF");
		done += (size_t)n;
	}
}

static void expect_empty(struct pp_file *r)
{
	char c;

	ASSERT_ERRNO(pp_read(r, &c, 1), EAGAIN);
}

/* ------------------------------------------------------------------ */

static int test_pipe2_enomem(void)
{
	struct pp_file *p[2] = { NULL, NULL };
	long n;

	/* Each of the three allocations (ring, read end, write end) fails in turn. */
	for (n = 0; n < 10; n++) {
		pp__fault_arm(PP_FAULT_ALLOC, n, ENOMEM, 1);
		errno = 0;
		int r = pp_pipe2(p, 0);
		long hits = pp__fault_hits(PP_FAULT_ALLOC);

		pp__fault_disarm_all();
		if (hits == 0) {
			ASSERT_EQ(r, 0);
			break;
		}
		ASSERT_EQ(r, -1);
		ASSERT_EQ(errno, ENOMEM);
	}
	ASSERT_GE(n, 3);	/* ring + two ends */
	t_write_full(p[1], "ok", 2);
	char b[2];
	ASSERT_EQ(pp_read(p[0], b, 2), 2);
	ASSERT_MEM_EQ(b, "ok", 2);
	pp_close(p[0]);
	pp_close(p[1]);

	/* Every allocation failing: still a clean ENOMEM, nothing half-made. */
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_ERRNO(pp_pipe2(p, O_NONBLOCK), ENOMEM);
	pp__fault_disarm_all();
	return 0;
}

static int test_fdopen_enomem(void)
{
	struct pp_file *f;

	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 1);
	errno = 0;
	f = pp_fdopen(0);
	ASSERT_TRUE(f == NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT_EQ(pp__fault_hits(PP_FAULT_ALLOC), 1);
	pp__fault_disarm_all();
	f = pp_fdopen(0);
	ASSERT_TRUE(f != NULL);
	pp_close(f);
	return 0;
}

/* write: the first page allocation fails -> ENOMEM, nothing queued. */
static int test_write_enomem(void)
{
	struct pp_file *p[2];
	static unsigned char src[40000], got[40000];

	t_fill(src, sizeof(src), 0, 7);
	t_pipe2(p, O_NONBLOCK);

	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_ERRNO(pp_write(p[1], src, sizeof(src)), ENOMEM);
	ASSERT_ERRNO(pp_write(p[1], src, 1), ENOMEM);
	ASSERT_EQ(t_fionread(p[0]), 0);
	pp__fault_disarm_all();

	/* Page k fails: the write is partial, exactly k pages, in order. */
	for (long k = 1; k < 10; k++) {
		size_t done;
		ssize_t n;

		struct pp_file *q[2];

		/*
		 * A fresh pipe each time: its page cache (pages its readers
		 * gave back, reused without allocating) starts empty, so the
		 * k-th page is the k-th allocation.
		 */
		t_pipe2(q, O_NONBLOCK);
		pp_close(p[0]);
		pp_close(p[1]);
		p[0] = q[0];
		p[1] = q[1];
		pp__fault_arm(PP_FAULT_ALLOC, k, ENOMEM, 0);
		n = pp_write(p[1], src, sizeof(src));
		pp__fault_disarm_all();
		ASSERT_EQ(n, k * 4096);
		ASSERT_EQ(t_fionread(p[0]), n);
		/* Continue from where the short write stopped. */
		done = (size_t)n;
		while (done < sizeof(src)) {
			n = pp_write(p[1], src + done, sizeof(src) - done);
			ASSERT_TRUE(n > 0);
			done += (size_t)n;
		}
		read_exact(p[0], got, sizeof(got));
		ASSERT_EQ(t_check(got, sizeof(got), 0, 7), 0);
		expect_empty(p[0]);
	}

	/* A merge into the last page needs no allocation: it still works. */
	t_write_full(p[1], "a", 1);
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_EQ(pp_write(p[1], "bc", 2), 2);
	pp__fault_disarm_all();
	read_exact(p[0], got, 3);
	ASSERT_MEM_EQ(got, "abc", 3);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_setpipe_sz_enomem(void)
{
	struct pp_file *p[2];
	unsigned char got[5000];

	t_pipe2(p, O_NONBLOCK);
	t_fill(got, sizeof(got), 0, 3);
	t_write_full(p[1], got, sizeof(got));
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 65536);

	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 1);
	ASSERT_ERRNO(pp_fcntl(p[1], F_SETPIPE_SZ, 262144), ENOMEM);
	ASSERT_EQ(pp__fault_hits(PP_FAULT_ALLOC), 1);
	pp__fault_disarm_all();
	/* Unchanged: size, contents, and the ring still works at 16 slots. */
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 65536);
	ASSERT_EQ(t_fionread(p[0]), 5000);
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 1);
	ASSERT_ERRNO(pp_fcntl(p[0], F_SETPIPE_SZ, 8192), ENOMEM);	/* shrink too */
	pp__fault_disarm_all();
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 65536);

	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 262144), 262144);
	memset(got, 0, sizeof(got));
	read_exact(p[0], got, sizeof(got));
	ASSERT_EQ(t_check(got, sizeof(got), 0, 3), 0);
	expect_empty(p[0]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/*
 * splice file -> pipe: the file reference cannot be made.  Alone, that is
 * no error: the bytes are copied instead, as the kernel would move them.
 * With no memory at all (every allocation failing) the splice fails with
 * ENOMEM and changes nothing.
 */
static int test_splice_file_ref_enomem(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, FILE_LEN, 11, path);
	struct pp_file *p[2], *in;
	static unsigned char got[FILE_LEN];
	off_t off = 100;

	unlink(path);
	t_pipe2(p, O_NONBLOCK);
	in = pp_fdopen(fd);
	ASSERT_TRUE(in != NULL);

	/* Only the reference fails: copied. */
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 1);
	ASSERT_EQ(pp_splice(in, &off, p[1], NULL, 8192, 0), 8192);
	pp__fault_disarm_all();
	ASSERT_EQ(off, 8292);
	read_exact(p[0], got, 8192);
	ASSERT_EQ(t_check(got, 8192, 100, 11), 0);
	off = 100;

	/* Explicit offset: *off unchanged, file position unchanged. */
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_ERRNO(pp_splice(in, &off, p[1], NULL, 8192, 0), ENOMEM);
	pp__fault_disarm_all();
	ASSERT_EQ(off, 100);
	ASSERT_EQ(lseek(fd, 0, SEEK_CUR), 0);
	ASSERT_EQ(t_fionread(p[0]), 0);

	/* The file position (NULL offset) stays too. */
	ASSERT_EQ(lseek(fd, 4000, SEEK_SET), 4000);
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_ERRNO(pp_splice(in, NULL, p[1], NULL, 8192, 0), ENOMEM);
	pp__fault_disarm_all();
	ASSERT_EQ(lseek(fd, 0, SEEK_CUR), 4000);

	/* Retried: works, the bytes are the file's. */
	ASSERT_EQ(pp_splice(in, &off, p[1], NULL, 8192, 0), 8192);
	ASSERT_EQ(off, 8292);
	ASSERT_EQ(pp_splice(in, NULL, p[1], NULL, 1000, 0), 1000);
	ASSERT_EQ(lseek(fd, 0, SEEK_CUR), 5000);
	read_exact(p[0], got, 9192);
	ASSERT_EQ(t_check(got, 8192, 100, 11), 0);
	ASSERT_EQ(t_check(got + 8192, 1000, 4000, 11), 0);
	expect_empty(p[0]);
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
	return 0;
}

/* socket -> pipe: the copy pages cannot be allocated; nothing is received. */
static int test_splice_socket_enomem(void)
{
	int sv[2];
	struct pp_file *p[2], *in;
	static unsigned char src[20000], got[20000];
	size_t moved = 0;
	int avail;

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	t_fill(src, sizeof(src), 0, 5);
	ASSERT_EQ(write(sv[1], src, sizeof(src)), (ssize_t)sizeof(src));
	t_pipe2(p, O_NONBLOCK);
	in = pp_fdopen(sv[0]);
	ASSERT_TRUE(in != NULL);

	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_ERRNO(pp_splice(in, NULL, p[1], NULL, sizeof(src), SPLICE_F_NONBLOCK), ENOMEM);
	pp__fault_disarm_all();
	ASSERT_EQ(ioctl(sv[0], FIONREAD, &avail), 0);
	ASSERT_EQ(avail, (int)sizeof(src));	/* not one byte taken from the socket */
	ASSERT_EQ(t_fionread(p[0]), 0);

	/*
	 * The third page fails: a partial count of two pages; the rest stays.
	 * Only the copying path allocates pages for a socket's bytes (the
	 * kernel-resident one keeps them in the kernel): force it.
	 */
	pp__kbuf_disabled = true;
	pp__fault_arm(PP_FAULT_ALLOC, 2, ENOMEM, 1);
	ASSERT_EQ(pp_splice(in, NULL, p[1], NULL, sizeof(src), SPLICE_F_NONBLOCK), 8192);
	pp__fault_disarm_all();
	moved = 8192;
	while (moved < sizeof(src)) {
		ssize_t n = pp_splice(in, NULL, p[1], NULL, sizeof(src) - moved, SPLICE_F_NONBLOCK);

		ASSERT_TRUE(n > 0);
		moved += (size_t)n;
	}
	pp__kbuf_disabled = false;
	read_exact(p[0], got, sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));
	expect_empty(p[0]);
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

static int release_calls;
static size_t release_count;

static void on_release(void *buf, size_t count, void *arg)
{
	(void)buf;
	(void)arg;
	release_calls++;
	release_count += count;
}

static int test_write_ref_enomem(void)
{
	struct pp_file *p[2];
	static unsigned char src[10000], got[10000];

	t_fill(src, sizeof(src), 0, 9);
	t_pipe2(p, O_NONBLOCK);
	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 1);
	ASSERT_ERRNO(pp_write_ref(p[1], src, sizeof(src), on_release, NULL), ENOMEM);
	pp__fault_disarm_all();
	ASSERT_EQ(release_calls, 0);	/* nothing queued: release never runs */
	ASSERT_EQ(t_fionread(p[0]), 0);
	ASSERT_EQ(pp_write_ref(p[1], src, sizeof(src), on_release, NULL), (ssize_t)sizeof(src));
	read_exact(p[0], got, sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));
	ASSERT_EQ(release_calls, 1);
	ASSERT_EQ(release_count, sizeof(src));
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* pp_read_lend of file buffers needs scratch pages: ENOMEM, nothing consumed. */
static int test_read_lend_enomem(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, FILE_LEN, 13, path);
	struct pp_file *p[2], *in;
	struct iovec iov[4];
	unsigned char got[12288];
	off_t off = 0;
	ssize_t n;
	size_t done = 0;

	unlink(path);
	t_pipe2(p, O_NONBLOCK);
	in = pp_fdopen(fd);
	ASSERT_TRUE(in != NULL);
	ASSERT_EQ(pp_splice(in, &off, p[1], NULL, sizeof(got), 0), (ssize_t)sizeof(got));

	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);
	ASSERT_ERRNO(pp_read_lend(p[0], iov, 4, sizeof(got)), ENOMEM);
	pp__fault_disarm_all();
	ASSERT_EQ(t_fionread(p[0]), (int)sizeof(got));
	ASSERT_ERRNO(pp_read_done(p[0], 1), EINVAL);	/* no loan is open */

	/* The second scratch page fails: one buffer lent. */
	pp__fault_arm(PP_FAULT_ALLOC, 1, ENOMEM, 1);
	n = pp_read_lend(p[0], iov, 4, sizeof(got));
	pp__fault_disarm_all();
	ASSERT_EQ(n, 4096);
	memcpy(got, iov[0].iov_base, 4096);
	ASSERT_EQ(pp_read_done(p[0], 4096), 0);
	done = 4096;
	while (done < sizeof(got)) {
		n = pp_read_lend(p[0], iov, 4, sizeof(got) - done);
		ASSERT_TRUE(n > 0);
		size_t k = 0;
		for (int i = 0; k < (size_t)n; i++) {
			memcpy(got + done + k, iov[i].iov_base, iov[i].iov_len);
			k += iov[i].iov_len;
		}
		ASSERT_EQ(pp_read_done(p[0], (size_t)n), 0);
		done += (size_t)n;
	}
	ASSERT_EQ(t_check(got, sizeof(got), 0, 13), 0);
	expect_empty(p[0]);
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
	close(fd);
	return 0;
}

/* ------------------------------------------------------------------ */

/*
 * The sequence.  Every step may meet the one injected failure: it must
 * then fail with ENOMEM (or come back short) having changed nothing, and
 * the step is retried.  At the end the reader must see exactly:
 * [20000 bytes, seed 21][file bytes 300..12588 (seed 22)][socket 6000 bytes, seed 23]
 * [write_ref 9000 bytes, seed 24][3 bytes "xyz"].
 */
#define SEQ_W	20000
#define SEQ_F	12288
#define SEQ_S	6000
#define SEQ_R	9000

struct seq_state {
	long failures;		/* ENOMEM (or short) results seen */
	const char *where;	/* the step that saw it */
};

static void seq_note(struct seq_state *st, const char *step)
{
	st->failures++;
	st->where = step;
	if (st->failures > 1)
		t_fail_at(__FILE__, __LINE__, "one armed failure, but %s saw failure #%ld",
			  step, st->failures);
}

static void run_sequence(long nth, struct seq_state *st, int file_fd)
{
	static unsigned char wsrc[SEQ_W], ssrc[SEQ_S], rsrc[SEQ_R];
	static unsigned char got[SEQ_W + SEQ_F + SEQ_S + SEQ_R + 3];
	struct pp_file *p[2], *in, *sin;
	int sv[2];
	size_t done;
	off_t off = 300;
	ssize_t n;
	int r;

	t_fill(wsrc, sizeof(wsrc), 0, 21);
	t_fill(ssrc, sizeof(ssrc), 0, 23);
	t_fill(rsrc, sizeof(rsrc), 0, 24);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ASSERT_EQ(write(sv[1], ssrc, sizeof(ssrc)), (ssize_t)sizeof(ssrc));
	release_calls = 0;
	release_count = 0;

	pp__fault_arm(PP_FAULT_ALLOC, nth, ENOMEM, 1);

	/* 1. pp_pipe2 */
	while ((r = pp_pipe2(p, O_NONBLOCK)) < 0) {
		ASSERT_EQ(errno, ENOMEM);
		seq_note(st, "pp_pipe2");
	}
	/* 2. write 20000 */
	for (done = 0; done < SEQ_W; done += (size_t)n) {
		n = pp_write(p[1], wsrc + done, SEQ_W - done);
		if (n < 0) {
			ASSERT_EQ(errno, ENOMEM);
			n = 0;
		}
		if ((size_t)n < SEQ_W - done)
			seq_note(st, "pp_write");
		ASSERT_EQ(t_fionread(p[0]), (int)(done + (size_t)n));
	}
	/* 3. F_SETPIPE_SZ */
	while (pp_fcntl(p[1], F_SETPIPE_SZ, 131072) < 0) {
		ASSERT_EQ(errno, ENOMEM);
		ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 65536);
		seq_note(st, "F_SETPIPE_SZ");
	}
	ASSERT_EQ(pp_fcntl(p[1], F_GETPIPE_SZ), 131072);
	/* 4. pp_fdopen of the file and of the socket */
	while (!(in = pp_fdopen(file_fd))) {
		ASSERT_EQ(errno, ENOMEM);
		seq_note(st, "pp_fdopen(file)");
	}
	while (!(sin = pp_fdopen(sv[0]))) {
		ASSERT_EQ(errno, ENOMEM);
		seq_note(st, "pp_fdopen(socket)");
	}
	/* 5. splice file -> pipe */
	for (done = 0; done < SEQ_F; done += (size_t)n) {
		off_t before = off;

		n = pp_splice(in, &off, p[1], NULL, SEQ_F - done, 0);
		if (n < 0) {
			ASSERT_EQ(errno, ENOMEM);
			ASSERT_EQ(off, before);
			n = 0;
			seq_note(st, "splice file->pipe");
		} else {
			ASSERT_TRUE(n > 0);
			ASSERT_EQ(off, before + n);
		}
	}
	/* 6. splice socket -> pipe */
	for (done = 0; done < SEQ_S; done += (size_t)n) {
		n = pp_splice(sin, NULL, p[1], NULL, SEQ_S - done, SPLICE_F_NONBLOCK);
		if (n < 0) {
			ASSERT_EQ(errno, ENOMEM);
			n = 0;
		}
		if ((size_t)n < SEQ_S - done)
			seq_note(st, "splice socket->pipe");
	}
	/* 7. pp_write_ref */
	while ((n = pp_write_ref(p[1], rsrc, SEQ_R, on_release, NULL)) < 0) {
		ASSERT_EQ(errno, ENOMEM);
		seq_note(st, "pp_write_ref");
	}
	ASSERT_EQ(n, SEQ_R);
	ASSERT_EQ(release_calls, 0);
	/* 8. a write that merges and one that needs a page */
	for (done = 0; done < 1; done += (size_t)n) {
		n = pp_write(p[1], "x", 1);
		if (n < 0) {
			ASSERT_EQ(errno, ENOMEM);
			n = 0;
			seq_note(st, "pp_write(page)");
		}
	}
	for (done = 0; done < 2; done += (size_t)n) {
		n = pp_write(p[1], &"yz"[done], 2 - done);
		if (n < 0) {
			ASSERT_EQ(errno, ENOMEM);
			n = 0;
			seq_note(st, "pp_write(small)");
		}
	}
	/* 9. read it all: lend the file part (scratch pages), read the rest */
	read_exact(p[0], got, SEQ_W);
	for (done = 0; done < SEQ_F; ) {
		struct iovec iov[8];

		n = pp_read_lend(p[0], iov, 8, SEQ_F - done);
		if (n < 0) {
			ASSERT_EQ(errno, ENOMEM);
			seq_note(st, "pp_read_lend");
			continue;
		}
		ASSERT_TRUE(n > 0);
		size_t k = 0;
		for (int i = 0; k < (size_t)n; i++) {
			memcpy(got + SEQ_W + done + k, iov[i].iov_base, iov[i].iov_len);
			k += iov[i].iov_len;
		}
		ASSERT_EQ(pp_read_done(p[0], (size_t)n), 0);
		done += (size_t)n;
	}
	read_exact(p[0], got + SEQ_W + SEQ_F, sizeof(got) - SEQ_W - SEQ_F);
	expect_empty(p[0]);
	pp__fault_disarm_all();

	ASSERT_EQ(t_check(got, SEQ_W, 0, 21), 0);
	ASSERT_EQ(t_check(got + SEQ_W, SEQ_F, 300, 22), 0);
	ASSERT_MEM_EQ(got + SEQ_W + SEQ_F, ssrc, SEQ_S);
	ASSERT_MEM_EQ(got + SEQ_W + SEQ_F + SEQ_S, rsrc, SEQ_R);
	ASSERT_MEM_EQ(got + SEQ_W + SEQ_F + SEQ_S + SEQ_R, "xyz", 3);
	ASSERT_EQ(release_calls, 1);
	ASSERT_EQ(release_count, SEQ_R);
	ASSERT_EQ(off, 300 + SEQ_F);
	ASSERT_EQ(lseek(file_fd, 0, SEEK_CUR), 0);

	pp_close(sin);
	pp_close(in);
	pp_close(p[1]);
	/* EOF after everything, and the end closes cleanly */
	{
		char c;
		ASSERT_EQ(pp_read(p[0], &c, 1), 0);
	}
	pp_close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

static int test_nth_allocation(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, FILE_LEN, 22, path);
	long nth;

	unlink(path);
	for (nth = 0; nth < 1000; nth++) {
		struct seq_state st = { 0, NULL };
		long hits;

		run_sequence(nth, &st, fd);
		hits = pp__fault_hits(PP_FAULT_ALLOC);
		ASSERT_LE(st.failures, hits);
		if (hits == 0)
			break;
		/* st.failures == 0: the library absorbed it (e.g. write took another page). */
		ASSERT_EQ(hits, 1);
	}
	printf("sequence: %ld allocations, each failed once\n", nth);
	ASSERT_GE(nth, 10);
	ASSERT_TRUE(nth < 1000);
	close(fd);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_pipe2_enomem),
		T_SUBTEST(test_fdopen_enomem),
		T_SUBTEST(test_write_enomem),
		T_SUBTEST(test_setpipe_sz_enomem),
		T_SUBTEST(test_splice_file_ref_enomem),
		T_SUBTEST(test_splice_socket_enomem),
		T_SUBTEST(test_write_ref_enomem),
		T_SUBTEST(test_read_lend_enomem),
		T_SUBTEST(test_nth_allocation),
	};

	return T_RUN_SUBTESTS(tests);
}
