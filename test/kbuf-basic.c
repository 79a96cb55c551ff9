// SPDX-License-Identifier: MIT
/*
 * Description: kernel-resident buffers (src/kbuf.c).  Bytes spliced from a
 * socket or a kernel pipe stay in the pagepipe's private kernel pipe (no
 * page of ours is taken for them), and whatever mix of buffer types the
 * ring holds, every consumer sees the bytes in the order they were queued:
 * read, splice to a socket, splice to another pagepipe, tee, vmsplice,
 * a loan.  Packets from an O_DIRECT kernel pipe keep their bounds through
 * a read, as a kernel pipe spliced from it would.
 */
#include "helpers.h"
#include "kbuf.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>

#define A_LEN	1000
#define B_LEN	9000
#define C_LEN	333
#define D_LEN	5000
#define E_LEN	7000
#define TOTAL	(A_LEN + B_LEN + C_LEN + D_LEN + E_LEN)

static unsigned char want[TOTAL];

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Splice exactly len bytes of in into out (a source may come in pieces). */
static void splice_all(struct pp_file *in, struct pp_file *out, size_t len)
{
	while (len) {
		ssize_t n = pp_splice(in, NULL, out, NULL, len, 0);

		ASSERT_TRUE(n > 0);
		len -= (size_t)n;
	}
}

/*
 * Queue, in order: a pp_write (A), a socket's bytes (B), a pp_write that
 * may merge into nothing kernel-resident (C), a kernel pipe's bytes (D), a
 * regular file's pages (E).
 */
static void fill_mix(struct pp_file *w, int fdcount_check)
{
	int sv[2], kp[2], fd;
	struct pp_file *s, *k, *f;
	char path[64];
	size_t in_use0, in_use1, chunks;

	(void)fdcount_check;
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	t_kpipe2(kp, 0);
	s = pp_fdopen(sv[0]);
	k = pp_fdopen(kp[0]);
	ASSERT_TRUE(s && k);
	fd = t_tmpfile(NULL, E_LEN, 0, path);
	f = pp_fdopen(fd);
	ASSERT_TRUE(f != NULL);
	/* The file's bytes are want[] from A_LEN + B_LEN + C_LEN + D_LEN on. */
	ASSERT_EQ(pread(fd, want + TOTAL - E_LEN, E_LEN, 0), E_LEN);

	ASSERT_EQ(pp_write(w, want, A_LEN), A_LEN);
	ASSERT_EQ(write(sv[1], want + A_LEN, B_LEN), B_LEN);
	pp__page_pool_stats(&chunks, &in_use0);
	splice_all(s, w, B_LEN);
	pp__page_pool_stats(&chunks, &in_use1);
	/* The socket's bytes took no page of ours: they are in the kernel. */
	ASSERT_EQ(in_use1, in_use0);
	ASSERT_EQ(t_kernel_bytes(w, NULL), B_LEN);
	ASSERT_EQ(pp_write(w, want + A_LEN + B_LEN, C_LEN), C_LEN);
	ASSERT_EQ(write(kp[1], want + A_LEN + B_LEN + C_LEN, D_LEN), D_LEN);
	splice_all(k, w, D_LEN);
	ASSERT_EQ(t_kernel_bytes(w, NULL), B_LEN + D_LEN);
	{
		off_t off = 0;
		size_t left = E_LEN;

		while (left) {
			ssize_t n = pp_splice(f, &off, w, NULL, left, 0);

			ASSERT_TRUE(n > 0);
			left -= (size_t)n;
		}
	}
	pp_close(s);
	pp_close(k);
	pp_close(f);
	close(sv[0]);
	close(sv[1]);
	close(kp[0]);
	close(kp[1]);
	close(fd);
	unlink(path);
}

static void make_pipe(struct pp_file *p[2])
{
	t_pipe2(p, 0);
	/* Room for the whole mix. */
	ASSERT_TRUE(pp_pipe_set_size(p[1], 1 << 20) > 0);
}

static int test_read_sizes(void)
{
	static const size_t sizes[] = { 1, 100, 777, 4095, 4097, 65536 };
	static unsigned char got[TOTAL];

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct pp_file *p[2];
		size_t have = 0;

		make_pipe(p);
		fill_mix(p[1], 0);
		ASSERT_EQ(t_fionread(p[0]), TOTAL);
		while (have < TOTAL) {
			ssize_t n = pp_read(p[0], got + have, sizes[k]);

			ASSERT_TRUE(n > 0);
			have += (size_t)n;
		}
		ASSERT_MEM_EQ(got, want, TOTAL);
		ASSERT_EQ(t_fionread(p[0]), 0);
		pp_close(p[0]);
		pp_close(p[1]);
	}
	return T_EXIT_PASS;
}

static int test_splice_to_socket(void)
{
	static unsigned char got[TOTAL];
	struct pp_file *p[2], *out;
	int sv[2];
	size_t have = 0;

	make_pipe(p);
	fill_mix(p[1], 0);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	{
		int sz = 1 << 20;

		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	out = pp_fdopen(sv[1]);
	/* In uneven pieces: each splice ends inside some buffer. */
	for (size_t step = 1234; have < TOTAL; ) {
		ssize_t n = pp_splice(p[0], NULL, out, NULL, step, 0);

		ASSERT_TRUE(n > 0);
		have += (size_t)n;
	}
	ASSERT_EQ(t_fionread(p[0]), 0);
	for (size_t got_n = 0; got_n < TOTAL; ) {
		ssize_t n = read(sv[0], got + got_n, TOTAL - got_n);

		ASSERT_TRUE(n > 0);
		got_n += (size_t)n;
	}
	ASSERT_MEM_EQ(got, want, TOTAL);
	pp_close(out);
	close(sv[0]);
	close(sv[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return T_EXIT_PASS;
}

static int test_splice_and_tee_to_pagepipe(void)
{
	static unsigned char got[TOTAL], got2[TOTAL];
	struct pp_file *p[2], *q[2], *r[2];
	size_t moved = 0;

	make_pipe(p);
	make_pipe(q);
	make_pipe(r);
	fill_mix(p[1], 0);
	/* tee all of p into r first: r's kernel bytes come by tee(2). */
	ASSERT_EQ(pp_tee(p[0], r[1], TOTAL, 0), TOTAL);
	ASSERT_EQ(t_kernel_bytes(r[1], NULL), B_LEN + D_LEN);	/* by tee(2), not copied */
	/* Then move p into q in pieces that split buffers. */
	for (size_t step = 1500; moved < TOTAL; ) {
		ssize_t n = pp_splice(p[0], NULL, q[1], NULL, step, 0);

		ASSERT_TRUE(n > 0);
		moved += (size_t)n;
	}
	ASSERT_EQ(t_fionread(p[0]), 0);
	ASSERT_EQ(t_kernel_bytes(q[1], NULL), B_LEN + D_LEN);	/* by splice(2), not copied */
	ASSERT_EQ(t_read_full(q[0], got, TOTAL), TOTAL);
	ASSERT_MEM_EQ(got, want, TOTAL);
	ASSERT_EQ(t_read_full(r[0], got2, TOTAL), TOTAL);
	ASSERT_MEM_EQ(got2, want, TOTAL);
	pp_close(p[0]); pp_close(p[1]);
	pp_close(q[0]); pp_close(q[1]);
	pp_close(r[0]); pp_close(r[1]);
	return T_EXIT_PASS;
}

static int test_vmsplice_and_lend(void)
{
	static unsigned char got[TOTAL];
	struct pp_file *p[2];
	size_t have = 0;

	make_pipe(p);
	fill_mix(p[1], 0);
	/* The first half by vmsplice to user memory, the rest by loans. */
	while (have < TOTAL / 2) {
		struct iovec iov = { got + have, TOTAL / 2 - have };
		ssize_t n = pp_vmsplice(p[0], &iov, 1, 0);

		ASSERT_TRUE(n > 0);
		have += (size_t)n;
	}
	while (have < TOTAL) {
		struct iovec iov[8];
		ssize_t n = pp_read_lend(p[0], iov, 8, 3000);
		size_t k = 0;

		ASSERT_TRUE(n > 0);
		for (int i = 0; k < (size_t)n; i++) {
			memcpy(got + have + k, iov[i].iov_base, iov[i].iov_len);
			k += iov[i].iov_len;
		}
		ASSERT_EQ(pp_read_done(p[0], (size_t)n), 0);
		have += (size_t)n;
	}
	ASSERT_MEM_EQ(got, want, TOTAL);
	pp_close(p[0]);
	pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * An O_DIRECT kernel pipe's packets, spliced into a kernel pipe and into
 * a pagepipe: reads of both stop at the same packet ends and throw away
 * the same rests.
 */
static int test_packets(void)
{
	static const size_t pk[] = { 10, 4096, 100, 1, 3000, 700 };
	static const size_t rd[] = { 5, 4096, 200, 1, 1000, 4096 };
	unsigned char buf[8192], kb[8192], pb[8192];
	int src1[2], src2[2], k[2];
	struct pp_file *p[2], *in;
	size_t total = 0;

	if (pipe2(src1, O_DIRECT) || pipe2(src2, O_DIRECT))
		return t_skip("no packet-mode pipes: %s", strerror(errno));
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	in = pp_fdopen(src2[0]);
	t_fill(buf, sizeof(buf), 0, 9);
	for (size_t i = 0; i < sizeof(pk) / sizeof(pk[0]); i++) {
		ASSERT_EQ(write(src1[1], buf, pk[i]), (ssize_t)pk[i]);
		ASSERT_EQ(write(src2[1], buf, pk[i]), (ssize_t)pk[i]);
		total += pk[i];
	}
	ASSERT_EQ(splice(src1[0], NULL, k[1], NULL, total, 0), (ssize_t)total);
	ASSERT_EQ(pp_splice(in, NULL, p[1], NULL, total, 0), (ssize_t)total);
	for (size_t i = 0; i < sizeof(rd) / sizeof(rd[0]); i++) {
		ssize_t kn = read(k[0], kb, rd[i]);
		ssize_t pn = pp_read(p[0], pb, rd[i]);

		ASSERT_EQ(pn, kn);
		ASSERT_MEM_EQ(pb, kb, (size_t)kn);
		ASSERT_EQ(t_fionread(p[0]), t_kfionread(k[0]));
	}
	pp_close(in);
	close(src1[0]); close(src1[1]); close(src2[0]); close(src2[1]);
	close(k[0]); close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return T_EXIT_PASS;
}

/* Nothing stays open: the private kernel pipe goes with its pagepipe. */
static int test_no_fd_leak(void)
{
	int before = count_fds();
	struct pp_file *p[2];
	unsigned char got[100];

	make_pipe(p);
	fill_mix(p[1], 0);
	ASSERT_EQ(pp_read(p[0], got, sizeof(got)), (ssize_t)sizeof(got));
	pp_close(p[0]);
	pp_close(p[1]);
	ASSERT_EQ(count_fds(), before);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_read_sizes),
		T_SUBTEST(test_splice_to_socket),
		T_SUBTEST(test_splice_and_tee_to_pagepipe),
		T_SUBTEST(test_vmsplice_and_lend),
		T_SUBTEST(test_packets),
		T_SUBTEST(test_no_fd_leak),
	};

	t_fill(want, TOTAL, 0, 77);
	return T_RUN_SUBTESTS(tests);
}
