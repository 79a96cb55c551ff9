// SPDX-License-Identifier: MIT
/*
 * Description: the "device window" buffer type of examples/device-window.c
 * (included here, without its main), driven through every consumer: a
 * buffer whose memory must be mapped before it is touched.  Bytes arrive
 * intact through pp_read, partial reads, splice to a file and to a kernel
 * pipe, tee, partial pipe -> pipe splices and lending reads; every ->map
 * has its ->unmap, nothing stays mapped between calls, every reference is
 * released once (also on close with data unread); a failed ->confirm or
 * ->map is EIO, never a crash; pp_pipe_add_buf refuses CAN_MERGE and leaves
 * the reference with the caller when it fails.
 */
#define DEVICE_WINDOW_NO_MAIN
#include "../examples/device-window.c"

#include "helpers.h"

#define PG 4096

static struct dev_window D;

static void setup(size_t pages)
{
	ASSERT_EQ(pp_page_size(), PG);
	ASSERT_EQ(devwin_open(&D, pages), 0);
}

static void check_bytes(const unsigned char *b, size_t len, size_t devpos)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != devwin_byte(devpos + i))
			t_fail_at(__FILE__, __LINE__, "byte %zu: 0x%02x, want 0x%02x",
				  i, b[i], devwin_byte(devpos + i));
}

static void queue_pages(struct pp_file *w, size_t first, size_t n)
{
	for (size_t pg = first; pg < first + n; pg++)
		ASSERT_EQ(devwin_queue(&D, w, pg, 0, PG, 0), PG);
}

static void no_mapping_left(void)
{
	ASSERT_EQ(atomic_load(&D.mapped_now), 0);
	ASSERT_EQ(atomic_load(&D.maps), atomic_load(&D.unmaps));
}

static int test_read(void)
{
	struct pp_file *p[2];
	unsigned char b[4 * PG];

	setup(4);
	t_pipe2(p, 0);
	queue_pages(p[1], 0, 4);
	ASSERT_EQ(atomic_load(&D.maps), 0);	/* nothing touched at queue time */
	ASSERT_EQ(atomic_load(&D.refs), 4);
	/* Partial reads: a map/unmap pair per access, nothing left mapped in between. */
	ASSERT_EQ(pp_read(p[0], b, 100), 100);
	no_mapping_left();
	ASSERT_EQ(pp_read(p[0], b + 100, PG), PG);
	no_mapping_left();
	ASSERT_EQ(t_read_full(p[0], b + 100 + PG, 3 * PG - 100), 3 * PG - 100);
	check_bytes(b, 4 * PG, 0);
	no_mapping_left();
	ASSERT_GE(atomic_load(&D.confirms), 4);
	ASSERT_EQ(atomic_load(&D.refs), 0);
	ASSERT_EQ(atomic_load(&D.releases), 4);
	pp_close(p[0]); pp_close(p[1]);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_splice_to_file_and_kpipe(void)
{
	struct pp_file *p[2], *pf, *pk;
	char path[64];
	int fd = t_tmpfile(NULL, 0, 0, path), k[2];
	unsigned char b[8 * PG];
	size_t moved = 0;

	setup(8);
	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	pf = pp_fdopen(fd);
	pk = pp_fdopen(k[1]);
	/* Offsets inside the page, and short buffers. */
	ASSERT_EQ(devwin_queue(&D, p[1], 0, 100, PG - 100, 0), PG - 100);
	ASSERT_EQ(devwin_queue(&D, p[1], 1, 0, 10, 0), 10);
	queue_pages(p[1], 2, 6);
	while (moved < 6 * PG + PG - 100 + 10) {
		ssize_t r = pp_splice(p[0], NULL, pf, NULL, 3 * PG, 0);

		ASSERT_TRUE(r > 0);
		moved += (size_t)r;
		no_mapping_left();
	}
	ASSERT_EQ(pread(fd, b, sizeof(b), 0), (ssize_t)moved);
	check_bytes(b, PG - 100, 100);
	check_bytes(b + PG - 100, 10, PG);
	check_bytes(b + PG - 90, 6 * PG, 2 * PG);
	ASSERT_EQ(atomic_load(&D.refs), 0);
	/* Kernel pipe. */
	queue_pages(p[1], 0, 8);
	moved = 0;
	while (moved < 8 * PG) {
		ssize_t r = pp_splice(p[0], NULL, pk, NULL, 8 * PG - moved, SPLICE_F_MORE);

		ASSERT_TRUE(r > 0);
		moved += (size_t)r;
	}
	for (size_t n = 0; n < 8 * PG; ) {
		ssize_t r = read(k[0], b + n, 8 * PG - n);

		ASSERT_TRUE(r > 0);
		n += (size_t)r;
	}
	check_bytes(b, 8 * PG, 0);
	pp_close(pf); pp_close(pk);
	close(fd); unlink(path);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_tee_and_partial_splice(void)
{
	struct pp_file *a[2], *b[2], *c[2];
	unsigned char x[2 * PG], y[2 * PG], z[2 * PG];

	setup(2);
	t_pipe2(a, 0);
	t_pipe2(b, 0);
	t_pipe2(c, 0);
	queue_pages(a[1], 0, 2);
	ASSERT_EQ(pp_tee(a[0], b[1], 2 * PG, 0), 2 * PG);
	ASSERT_EQ(atomic_load(&D.gets), 2);
	ASSERT_EQ(atomic_load(&D.refs), 4);
	/* A partial splice shares (get), a whole one moves. */
	ASSERT_EQ(pp_splice(b[0], NULL, c[1], NULL, 1000, 0), 1000);
	ASSERT_EQ(atomic_load(&D.gets), 3);
	ASSERT_EQ(pp_splice(b[0], NULL, c[1], NULL, 2 * PG, 0), 2 * PG - 1000);
	/* A write after them is never merged into device memory. */
	ASSERT_EQ(pp_write(c[1], "tail", 4), 4);
	ASSERT_EQ(atomic_load(&D.maps), 0);
	ASSERT_EQ(t_read_full(a[0], x, 2 * PG), 2 * PG);
	ASSERT_EQ(t_read_full(c[0], z, 2 * PG), 2 * PG);
	check_bytes(x, 2 * PG, 0);
	check_bytes(z, 2 * PG, 0);
	ASSERT_EQ(pp_read(c[0], y, 10), 4);
	ASSERT_MEM_EQ(y, "tail", 4);
	no_mapping_left();
	ASSERT_EQ(atomic_load(&D.refs), 0);
	ASSERT_EQ(atomic_load(&D.releases), 2 + atomic_load(&D.gets));
	pp_close(a[0]); pp_close(a[1]); pp_close(b[0]); pp_close(b[1]);
	pp_close(c[0]); pp_close(c[1]);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_close_unread(void)
{
	struct pp_file *p[2], *q[2];

	setup(4);
	t_pipe2(p, 0);
	t_pipe2(q, 0);
	queue_pages(p[1], 0, 4);
	ASSERT_EQ(pp_tee(p[0], q[1], 3 * PG, 0), 3 * PG);
	pp_close(p[1]);
	pp_close(p[0]);
	ASSERT_EQ(atomic_load(&D.refs), 3);
	pp_close(q[0]);
	pp_close(q[1]);
	ASSERT_EQ(atomic_load(&D.refs), 0);
	ASSERT_EQ(atomic_load(&D.maps), 0);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_lend(void)
{
	struct pp_file *p[2];
	struct iovec iov[4];
	unsigned char b[3 * PG];
	ssize_t n;

	setup(3);
	t_pipe2(p, 0);
	queue_pages(p[1], 0, 3);
	n = pp_read_lend(p[0], iov, 4, 3 * PG);
	ASSERT_EQ(n, 3 * PG);
	/* Lent: mapped for as long as the loan lasts. */
	ASSERT_EQ(atomic_load(&D.mapped_now), 3);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(iov[i].iov_len, PG);
		check_bytes(iov[i].iov_base, PG, (size_t)i * PG);
	}
	ASSERT_EQ(pp_read_done(p[0], PG + 5), 0);
	no_mapping_left();
	ASSERT_EQ(atomic_load(&D.refs), 2);
	ASSERT_EQ(t_read_full(p[0], b, 2 * PG - 5), 2 * PG - 5);
	check_bytes(b, 2 * PG - 5, PG + 5);
	no_mapping_left();
	pp_close(p[0]); pp_close(p[1]);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_confirm_fails(void)
{
	struct pp_file *p[2], *pf;
	char path[64];
	int fd = t_tmpfile(NULL, 0, 0, path);
	unsigned char b[PG];

	setup(4);
	t_pipe2(p, 0);
	pf = pp_fdopen(fd);
	queue_pages(p[1], 0, 4);
	atomic_store(&D.failed, true);
	ASSERT_ERRNO(pp_read(p[0], b, PG), EIO);
	ASSERT_ERRNO(pp_splice(p[0], NULL, pf, NULL, PG, 0), EIO);
	ASSERT_EQ(atomic_load(&D.maps), 0);	/* not touched after a failed confirm */
	ASSERT_EQ(lseek(fd, 0, SEEK_END), 0);
	atomic_store(&D.failed, false);
	ASSERT_TRUE(pp_read(p[0], b, PG) > 0);
	pp_close(p[0]); pp_close(p[1]);
	pp_close(pf); close(fd); unlink(path);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_map_fails(void)
{
	struct pp_file *p[2], *pf;
	char path[64];
	int fd = t_tmpfile(NULL, 0, 0, path);
	unsigned char b[PG];
	struct iovec iov[2];

	setup(4);
	t_pipe2(p, 0);
	pf = pp_fdopen(fd);
	queue_pages(p[1], 0, 4);
	atomic_store(&D.map_fails, true);
	ASSERT_ERRNO(pp_read(p[0], b, PG), EIO);
	ASSERT_ERRNO(pp_splice(p[0], NULL, pf, NULL, PG, 0), EIO);
	ASSERT_ERRNO(pp_read_lend(p[0], iov, 2, PG), EIO);
	ASSERT_EQ(atomic_load(&D.unmaps), 0);	/* nothing to undo */
	ASSERT_EQ(lseek(fd, 0, SEEK_END), 0);
	atomic_store(&D.map_fails, false);
	ASSERT_TRUE(pp_read(p[0], b, PG) > 0);
	pp_close(p[0]); pp_close(p[1]);
	pp_close(pf); close(fd); unlink(path);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

static int test_add_buf_refusals(void)
{
	struct pp_file *p[2];
	struct pp_buf merge = {
		.page = &D, .len = 10, .ops = &devwin_buf_ops, .flags = PP_BUF_FLAG_CAN_MERGE,
		.private = &D, .index = 0,
	};

	setup(1);
	t_pipe2(p, 0);
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &merge, 0), EINVAL);
	ASSERT_ERRNO(pp_pipe_add_buf(p[0], &merge, 0), EBADF);
	merge.flags = 0;
	merge.offset = PG - 5;	/* past the page */
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &merge, 0), EINVAL);
	ASSERT_ERRNO(pp_pipe_add_buf(p[1], &merge, 0x100), EINVAL);
	/* Full: EAGAIN, and the reference stays ours (devwin_queue drops it). */
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(devwin_queue(&D, p[1], 0, 0, 1, 0), 1);
	ASSERT_ERRNO(devwin_queue(&D, p[1], 0, 0, 1, SPLICE_F_NONBLOCK), EAGAIN);
	ASSERT_EQ(atomic_load(&D.refs), 16);
	ASSERT_EQ(atomic_load(&D.releases), 0);
	/* No reader: EPIPE. */
	t_sigpipe_count_start();
	pp_close(p[0]);
	ASSERT_ERRNO(devwin_queue(&D, p[1], 0, 0, 1, 0), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 1);
	ASSERT_EQ(atomic_load(&D.refs), 16);
	pp_close(p[1]);
	ASSERT_EQ(atomic_load(&D.refs), 0);
	ASSERT_TRUE(devwin_balanced(&D));
	devwin_close(&D);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_read),
		T_SUBTEST(test_splice_to_file_and_kpipe),
		T_SUBTEST(test_tee_and_partial_splice),
		T_SUBTEST(test_close_unread),
		T_SUBTEST(test_lend),
		T_SUBTEST(test_confirm_fails),
		T_SUBTEST(test_map_fails),
		T_SUBTEST(test_add_buf_refusals),
	};

	return T_RUN_SUBTESTS(tests);
}
