// SPDX-License-Identifier: MIT
/*
 * Description: one pass through every splice path: file to pagepipe to a
 * file, a socket, a kernel pipe and /dev/null; /dev/zero in; pagepipe to
 * pagepipe; tee; vmsplice both ways; the seed's mixed write and splice.
 */
#include <sys/socket.h>

#include "helpers.h"

#define LEN (300 * 1024 + 123)

static unsigned char got[LEN];

static void drain_fd(int fd, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, got + done, len - done);
		ASSERT_TRUE(r > 0);
		done += (size_t)r;
	}
}

/* file -> pagepipe -> out, in rounds, then check what out received. */
static void pump(int file, struct pp_file *out, int check_fd, off_t *fpos_check)
{
	struct pp_file *p[2], *in = pp_fdopen(file);
	size_t moved = 0;

	t_pipe2(p, 0);
	ASSERT_TRUE(in != NULL);
	lseek(file, 0, SEEK_SET);
	while (moved < LEN) {
		ssize_t n = pp_splice(in, NULL, p[1], NULL, LEN - moved, 0);
		ASSERT_TRUE(n > 0);
		ssize_t m = 0;
		while (m < n) {
			ssize_t r = pp_splice(p[0], NULL, out, NULL, (size_t)(n - m), 0);
			ASSERT_TRUE(r > 0);
			m += r;
		}
		moved += (size_t)n;
		if (check_fd >= 0) {
			drain_fd(check_fd, (size_t)n);
			ASSERT_EQ(t_check(got, (size_t)n, moved - (size_t)n, 1), 0);
		}
	}
	ASSERT_EQ(pp_splice(in, NULL, p[1], NULL, 10, 0), 0);	/* EOF */
	ASSERT_EQ(lseek(file, 0, SEEK_CUR), LEN);
	(void)fpos_check;
	pp_close(in);
	pp_close(p[0]);
	pp_close(p[1]);
}

int main(void)
{
	char path[64], path2[64];
	int file = t_tmpfile(NULL, LEN, 1, path);
	struct pp_file *p[2], *q[2];

	/* file -> pagepipe: 64 KiB from offset 100 queues 65436 bytes */
	{
		struct pp_file *in = pp_fdopen(file);
		off_t off = 100;
		t_pipe2(p, 0);
		ASSERT_EQ(pp_splice(in, &off, p[1], NULL, 65536, 0), 65436);
		ASSERT_EQ(off, 65536);
		ASSERT_EQ(lseek(file, 0, SEEK_CUR), 0);
		ASSERT_EQ(t_read_full(p[0], got, 65436), 65436);
		ASSERT_EQ(t_check(got, 65436, 100, 1), 0);
		pp_close(p[0]); pp_close(p[1]); pp_close(in);
	}
	/* to a file */
	{
		int out = t_tmpfile(NULL, 0, 0, path2);
		struct pp_file *o = pp_fdopen(out);
		pump(file, o, -1, NULL);
		ASSERT_EQ(pread(out, got, LEN, 0), LEN);
		ASSERT_EQ(t_check(got, LEN, 0, 1), 0);
		pp_close(o); close(out); unlink(path2);
	}
	/* to a TCP socket */
	{
		int s[2];
		ASSERT_EQ(t_tcp_pair(s), 0);
		struct pp_file *o = pp_fdopen(s[1]);
		pump(file, o, s[0], NULL);
		pp_close(o); close(s[0]); close(s[1]);
	}
	/* to a kernel pipe */
	{
		int k[2];
		t_kpipe2(k, 0);
		fcntl(k[1], F_SETPIPE_SZ, 1 << 20);
		struct pp_file *o = pp_fdopen(k[1]);
		pump(file, o, k[0], NULL);
		pp_close(o); close(k[0]); close(k[1]);
	}
	/* to /dev/null */
	{
		int nul = open("/dev/null", O_WRONLY);
		struct pp_file *o = pp_fdopen(nul);
		pump(file, o, -1, NULL);
		pp_close(o); close(nul);
	}
	/* /dev/zero in */
	{
		int z = open("/dev/zero", O_RDONLY);
		struct pp_file *in = pp_fdopen(z);
		t_pipe2(p, 0);
		ASSERT_EQ(pp_splice(in, NULL, p[1], NULL, 10000, 0), 10000);
		memset(got, 1, 10000);
		ASSERT_EQ(t_read_full(p[0], got, 10000), 10000);
		for (int i = 0; i < 10000; i++)
			ASSERT_EQ(got[i], 0);
		pp_close(p[0]); pp_close(p[1]); pp_close(in); close(z);
	}
	/* pipe -> pipe, tee, the merge-aliasing case */
	{
		t_pipe2(p, 0);
		t_pipe2(q, 0);
		ASSERT_EQ(pp_write(p[1], "abcd", 4), 4);
		ASSERT_EQ(pp_tee(p[0], q[1], 2, 0), 2);
		ASSERT_EQ(pp_write(q[1], "xx", 2), 2);
		ASSERT_EQ(pp_read(p[0], got, 4), 4);
		ASSERT_MEM_EQ(got, "abcd", 4);
		ASSERT_EQ(pp_read(q[0], got, 10), 4);
		ASSERT_MEM_EQ(got, "abxx", 4);
		ASSERT_EQ(pp_write(p[1], "hello world", 11), 11);
		ASSERT_EQ(pp_splice(p[0], NULL, q[1], NULL, 5, 0), 5);
		ASSERT_EQ(pp_write(q[1], "!", 1), 1);
		ASSERT_EQ(pp_read(q[0], got, 10), 6);
		ASSERT_MEM_EQ(got, "hello!", 6);
		ASSERT_EQ(pp_read(p[0], got, 10), 6);
		ASSERT_MEM_EQ(got, " world", 6);
		ASSERT_ERRNO(pp_splice(p[0], NULL, p[1], NULL, 5, 0), EINVAL);
		pp_close(p[0]); pp_close(p[1]); pp_close(q[0]); pp_close(q[1]);
	}
	/* vmsplice both ways */
	{
		static char mem[10000];
		struct iovec iov = { mem, sizeof(mem) };
		t_fill(mem, sizeof(mem), 0, 7);
		t_pipe2(p, 0);
		ASSERT_EQ(pp_vmsplice(p[1], &iov, 1, 0), 10000);
		struct iovec out = { got, 10000 };
		ASSERT_EQ(pp_vmsplice(p[0], &out, 1, 0), 10000);
		ASSERT_EQ(t_check(got, 10000, 0, 7), 0);
		struct iovec bad = { NULL, 10 };
		ASSERT_ERRNO(pp_vmsplice(p[1], &bad, 1, 0), EFAULT);
		ASSERT_ERRNO(pp_vmsplice(p[1], &iov, 1025, 0), EINVAL);
		pp_close(p[0]); pp_close(p[1]);
	}
	/* the seed: "hello: " then 1000 bytes of the file, into a kernel pipe */
	{
		int k[2];
		t_kpipe2(k, 0);
		struct pp_file *o = pp_fdopen(k[1]), *in = pp_fdopen(file);
		t_pipe2(p, 0);
		lseek(file, 0, SEEK_SET);
		ASSERT_EQ(pp_write(p[1], "hello: ", 7), 7);
		ASSERT_EQ(pp_splice(in, NULL, p[1], NULL, 1000, 0), 1000);
		ASSERT_EQ(pp_splice(p[0], NULL, o, NULL, 2000, 0), 1007);
		drain_fd(k[0], 1007);
		ASSERT_MEM_EQ(got, "hello: ", 7);
		ASSERT_EQ(t_check(got + 7, 1000, 0, 1), 0);
		pp_close(p[0]); pp_close(p[1]); pp_close(o); pp_close(in); close(k[0]); close(k[1]);
	}
	close(file);
	unlink(path);
	return T_EXIT_PASS;
}
