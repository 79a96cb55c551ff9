// SPDX-License-Identifier: MIT
/*
 * Description: pp_fdopen() of OS descriptors: a kernel pipe, a regular
 * file, sockets (stream, datagram, TCP) and character devices.  Each step
 * is done with pp_read/pp_write/pp_readv/pp_writev/pp_fcntl/pp_ioctl/
 * pp_poll on a wrapped descriptor and with the system call on a twin
 * descriptor in the same state, and the results must be the same (errors
 * included, whatever the pagepipe end would say); pp_close() never closes
 * the descriptor; pp_fdopen(-1) and friends give NULL and EBADF.
 */
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "helpers.h"

static char src[80000];
static void *volatile null_buf;

static ssize_t (*volatile kreadv)(int, const struct iovec *, int) = readv;
static ssize_t (*volatile kwritev)(int, const struct iovec *, int) = writev;

static struct pp_file *fdopen_ok(int fd)
{
	struct pp_file *f = pp_fdopen(fd);

	if (!f)
		t_fail_at(__FILE__, __LINE__, "pp_fdopen(%d): %s", fd, strerror(errno));
	ASSERT_EQ(pp_file_fd(f), fd);
	return f;
}

/* The descriptor is still open and the same file. */
static void still_open(int fd)
{
	struct stat st;

	ASSERT_GE(fcntl(fd, F_GETFD), 0);
	ASSERT_EQ(fstat(fd, &st), 0);
}

/* Twin steps: kfd is used directly, pf wraps a descriptor in the same state. */
#define SAME_READ(kfd, pf, n)	ASSERT_SAME_READ(kfd, pf, n)
#define SAME_WRITE(kfd, pf, off, n) \
	ASSERT_SAME(write((kfd), src + (off), (n)), pp_write((pf), src + (off), (n)))

static void same_poll(int kfd, struct pp_file *pf, short events)
{
	struct pollfd kp = { kfd, events, 0 };
	struct pp_pollfd pp = { pf, events, 0 };

	ASSERT_SAME(poll(&kp, 1, 0), pp_poll(&pp, 1, 0));
	ASSERT_EQ(kp.revents, pp.revents);
}

static void same_flags(int kfd, struct pp_file *pf)
{
	ASSERT_SAME(fcntl(kfd, F_GETFL), pp_fcntl(pf, F_GETFL));
	ASSERT_SAME(fcntl(kfd, F_GETFD), pp_fcntl(pf, F_GETFD));
}

static int test_kernel_pipe(void)
{
	int a[2], b[2];		/* a: wrapped; b: used directly */
	struct pp_file *r, *w;
	char kb[64], pb[64];
	struct iovec kv[2] = { { kb, 3 }, { kb + 3, 30 } }, pv[2] = { { pb, 3 }, { pb + 3, 30 } };
	struct iovec bad[2] = { { NULL, 0 }, { NULL, 10 } };
	int ksig, psig;

	t_sigpipe_count_start();
	t_kpipe2(a, O_NONBLOCK);
	t_kpipe2(b, O_NONBLOCK);
	r = fdopen_ok(a[0]);
	w = fdopen_ok(a[1]);
	same_flags(b[0], r);
	same_flags(b[1], w);
	same_poll(b[0], r, POLLIN | POLLOUT);
	same_poll(b[1], w, POLLIN | POLLOUT);
	SAME_READ(b[0], r, 10);					/* EAGAIN */
	SAME_WRITE(b[1], w, 0, 0);
	SAME_WRITE(b[1], w, 0, 5);
	SAME_WRITE(b[1], w, 5, 70000);				/* partial */
	SAME_WRITE(b[1], w, 0, 1);				/* EAGAIN */
	ASSERT_SAME_FIONREAD(b[0], r);
	same_poll(b[0], r, POLLIN | POLLOUT);
	same_poll(b[1], w, POLLIN | POLLOUT);
	ASSERT_SAME(kreadv(b[0], kv, 2), pp_readv(r, pv, 2));
	ASSERT_MEM_EQ(kb, pb, 33);
	SAME_READ(b[0], r, 65536);
	ASSERT_SAME(kwritev(b[1], kv, 2), pp_writev(w, kv, 2));
	/* The wrong end, as the kernel says. */
	SAME_READ(b[1], w, 1);
	SAME_WRITE(b[0], r, 0, 1);
	ASSERT_SAME(kreadv(b[1], kv, 2), pp_readv(w, kv, 2));
	ASSERT_SAME(kwritev(b[0], kv, 2), pp_writev(r, kv, 2));
	/* Argument errors in the kernel's order (the kernel's, not a pagepipe's). */
	ASSERT_SAME(read(b[0], null_buf, 10), pp_read(r, null_buf, 10));		/* EFAULT */
	ASSERT_SAME(kreadv(b[0], bad, 2), pp_readv(r, bad, 2));
	ASSERT_SAME(kreadv(b[0], kv, -1), pp_readv(r, kv, -1));
	ASSERT_SAME(kwritev(b[1], kv, 1025), pp_writev(w, kv, 1025));
	SAME_READ(b[0], r, 64);
	ASSERT_SAME(read(b[0], null_buf, 10), pp_read(r, null_buf, 10));		/* EAGAIN */
	/* fcntl and ioctl are the descriptor's. */
	ASSERT_SAME(fcntl(b[0], F_SETFL, 0), pp_fcntl(r, F_SETFL, 0));
	same_flags(b[0], r);
	ASSERT_SAME(fcntl(b[0], F_SETFL, O_NONBLOCK), pp_fcntl(r, F_SETFL, O_NONBLOCK));
	ASSERT_SAME(fcntl(b[1], F_SETFL, O_NONBLOCK | O_DIRECT), pp_fcntl(w, F_SETFL, O_NONBLOCK | O_DIRECT));
	same_flags(b[1], w);
	ASSERT_SAME(fcntl(b[0], F_GETPIPE_SZ), pp_fcntl(r, F_GETPIPE_SZ));
	ASSERT_SAME(fcntl(b[0], F_SETPIPE_SZ, 12288), pp_fcntl(r, F_SETPIPE_SZ, 12288));
	ASSERT_SAME(fcntl(b[1], F_GETPIPE_SZ), pp_fcntl(w, F_GETPIPE_SZ));
	ASSERT_SAME(fcntl(b[1], F_SETFD, FD_CLOEXEC), pp_fcntl(w, F_SETFD, FD_CLOEXEC));
	same_flags(b[1], w);
	ASSERT_SAME(fcntl(b[1], 0x7fff), pp_fcntl(w, 0x7fff));
	ASSERT_SAME(ioctl(b[1], 0x1234, 0), pp_ioctl(w, 0x1234, 0));
	{
		int on = 0;

		ASSERT_SAME(ioctl(b[0], FIONBIO, &on), pp_ioctl(r, FIONBIO, &on));
		same_flags(b[0], r);
		on = 1;
		ASSERT_SAME(ioctl(b[0], FIONBIO, &on), pp_ioctl(r, FIONBIO, &on));
	}
	SAME_WRITE(b[1], w, 0, 3);				/* packets now */
	SAME_WRITE(b[1], w, 3, 3);
	SAME_READ(b[0], r, 100);
	SAME_READ(b[0], r, 100);

	/* No reader: EPIPE and SIGPIPE, as the kernel sends. */
	close(b[0]);
	close(a[0]);
	same_poll(b[1], w, POLLOUT);
	ksig = t_sigpipe_count();
	ASSERT_SAME(write(b[1], src, 1), (psig = t_sigpipe_count(), pp_write(w, src, 1)));
	ASSERT_EQ(psig - ksig, 1);
	ASSERT_EQ(t_sigpipe_count() - psig, 1);
	ASSERT_SAME(write(b[1], src, 0), pp_write(w, src, 0));

	/* pp_close leaves the descriptors alone. */
	ASSERT_EQ(pp_close(r), 0);	/* its descriptor is gone already: no matter */
	ASSERT_EQ(pp_close(w), 0);
	still_open(a[1]);
	close(a[1]);
	close(b[1]);
	return 0;
}

/* Blocking, then EOF, through the wrapper. */
static int test_kernel_pipe_eof(void)
{
	int a[2], b[2];
	struct pp_file *r;

	t_kpipe2(a, 0);
	t_kpipe2(b, 0);
	r = fdopen_ok(a[0]);
	ASSERT_EQ(write(a[1], "abc", 3), 3);
	ASSERT_EQ(write(b[1], "abc", 3), 3);
	close(a[1]);
	close(b[1]);
	SAME_READ(b[0], r, 100);
	SAME_READ(b[0], r, 100);	/* EOF */
	same_poll(b[0], r, POLLIN);	/* POLLHUP */
	pp_close(r);
	still_open(a[0]);
	close(a[0]);
	close(b[0]);
	return 0;
}

static int test_regular_file(void)
{
	char pa[64], pb[64];
	int a = t_tmpfile(NULL, 10000, 1, pa), b = t_tmpfile(NULL, 10000, 1, pb);
	struct pp_file *f = fdopen_ok(a);
	char kb[100], ppb[100];
	struct iovec kv[2] = { { kb, 10 }, { kb + 10, 90 } }, pv[2] = { { ppb, 10 }, { ppb + 10, 90 } };

	unlink(pa);
	unlink(pb);
	same_flags(b, f);
	SAME_READ(b, f, 100);
	SAME_READ(b, f, 5000);
	ASSERT_SAME(kreadv(b, kv, 2), pp_readv(f, pv, 2));
	ASSERT_MEM_EQ(kb, ppb, 100);
	ASSERT_SAME_FIONREAD(b, f);
	same_poll(b, f, POLLIN | POLLOUT);
	same_poll(b, f, 0);
	SAME_WRITE(b, f, 0, 3000);		/* overwrites at the position */
	SAME_READ(b, f, 10000);			/* to the end */
	SAME_READ(b, f, 10000);			/* EOF: 0 */
	SAME_WRITE(b, f, 0, 7);			/* extends */
	ASSERT_SAME(fcntl(b, F_SETFL, O_APPEND), pp_fcntl(f, F_SETFL, O_APPEND));
	same_flags(b, f);
	SAME_WRITE(b, f, 0, 11);
	ASSERT_SAME(fcntl(b, F_GETPIPE_SZ), pp_fcntl(f, F_GETPIPE_SZ));		/* EBADF: not a pipe */
	ASSERT_SAME(fcntl(b, F_SETPIPE_SZ, 4096), pp_fcntl(f, F_SETPIPE_SZ, 4096));
	ASSERT_SAME(read(b, null_buf, 10), pp_read(f, null_buf, 10));	/* at EOF: 0 */
	ASSERT_SAME(lseek(b, 0, SEEK_SET), lseek(a, 0, SEEK_SET));
	SAME_READ(b, f, 20000);			/* the whole file, same bytes */
	ASSERT_EQ(pp_close(f), 0);
	still_open(a);
	close(a);
	close(b);

	/* A read-only descriptor. */
	a = t_tmpfile(NULL, 100, 2, pa);
	b = open(pa, O_RDONLY);
	ASSERT_GE(b, 0);
	close(a);
	a = open(pa, O_RDONLY);
	ASSERT_GE(a, 0);
	unlink(pa);
	f = fdopen_ok(a);
	same_flags(b, f);
	SAME_WRITE(b, f, 0, 10);		/* EBADF */
	ASSERT_SAME(kwritev(b, kv, 2), pp_writev(f, kv, 2));
	SAME_READ(b, f, 1000);
	pp_close(f);
	still_open(a);
	close(a);
	close(b);
	return 0;
}

static int socket_kind(int type)
{
	int a[2], b[2];
	struct pp_file *f0, *f1;
	int ksig, psig;

	ASSERT_EQ(socketpair(AF_UNIX, type | SOCK_NONBLOCK, 0, a), 0);
	ASSERT_EQ(socketpair(AF_UNIX, type | SOCK_NONBLOCK, 0, b), 0);
	f0 = fdopen_ok(a[0]);
	f1 = fdopen_ok(a[1]);
	same_flags(b[0], f0);
	SAME_READ(b[0], f0, 10);		/* EAGAIN */
	same_poll(b[0], f0, POLLIN | POLLOUT);
	SAME_WRITE(b[1], f1, 0, 100);
	SAME_WRITE(b[1], f1, 100, 50);
	ASSERT_SAME_FIONREAD(b[0], f0);
	same_poll(b[0], f0, POLLIN | POLLOUT);
	SAME_READ(b[0], f0, 30);		/* a datagram: the rest is gone */
	SAME_READ(b[0], f0, 1000);
	{
		char kb[40], pb[40];
		struct iovec kv[2] = { { kb, 20 }, { kb + 20, 20 } }, pv[2] = { { pb, 20 }, { pb + 20, 20 } };

		ASSERT_SAME(kwritev(b[1], kv, 2), pp_writev(f1, kv, 2));
		ASSERT_SAME(kreadv(b[0], kv, 2), pp_readv(f0, pv, 2));
	}
	/* Both directions: a socket is read and written through one file. */
	SAME_WRITE(b[0], f0, 0, 10);
	SAME_READ(b[1], f1, 100);
	ASSERT_SAME(fcntl(b[0], F_GETPIPE_SZ), pp_fcntl(f0, F_GETPIPE_SZ));	/* EBADF */
	ASSERT_SAME(ioctl(b[0], FIONREAD, null_buf), pp_ioctl(f0, FIONREAD, null_buf));
	/* The peer is gone: EOF one way, EPIPE (and SIGPIPE) the other. */
	shutdown(a[1], SHUT_RDWR);
	shutdown(b[1], SHUT_RDWR);
	SAME_READ(b[0], f0, 10);
	same_poll(b[0], f0, POLLIN | POLLOUT);
	ksig = t_sigpipe_count();
	ASSERT_SAME(write(b[0], src, 5), (psig = t_sigpipe_count(), pp_write(f0, src, 5)));
	ASSERT_EQ(t_sigpipe_count() - psig, psig - ksig);
	pp_close(f0);
	pp_close(f1);
	still_open(a[0]);
	still_open(a[1]);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	return 0;
}

static int test_socket_stream(void)
{
	t_sigpipe_count_start();
	return socket_kind(SOCK_STREAM);
}

static int test_socket_dgram(void)
{
	t_sigpipe_count_start();
	return socket_kind(SOCK_DGRAM);
}

static int test_socket_seqpacket(void)
{
	t_sigpipe_count_start();
	return socket_kind(SOCK_SEQPACKET);
}

static int test_tcp(void)
{
	int a[2], b[2];
	struct pp_file *f0, *f1;

	if (t_tcp_pair(a) < 0 || t_tcp_pair(b) < 0)
		return t_skip("no TCP on 127.0.0.1: %s", strerror(errno));
	f0 = fdopen_ok(a[0]);
	f1 = fdopen_ok(a[1]);
	same_flags(b[0], f0);
	SAME_WRITE(b[1], f1, 0, 5000);
	{
		/* Wait until the bytes are there on both (loopback is fast but not instant). */
		struct pollfd w[2] = { { a[0], POLLIN, 0 }, { b[0], POLLIN, 0 } };

		ASSERT_EQ(poll(&w[0], 1, 5000), 1);
		ASSERT_EQ(poll(&w[1], 1, 5000), 1);
	}
	ASSERT_SAME(fcntl(b[0], F_SETFL, O_NONBLOCK), pp_fcntl(f0, F_SETFL, O_NONBLOCK));
	same_flags(b[0], f0);
	same_poll(b[1], f1, POLLOUT);
	pp_close(f0);
	pp_close(f1);
	still_open(a[0]);
	still_open(a[1]);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	return 0;
}

static int test_char_devices(void)
{
	int a = open("/dev/zero", O_RDWR), b = open("/dev/zero", O_RDWR);
	int c = open("/dev/null", O_RDWR), d = open("/dev/null", O_RDWR);
	struct pp_file *z, *n;

	if (a < 0 || b < 0 || c < 0 || d < 0)
		return t_skip("no /dev/zero or /dev/null: %s", strerror(errno));
	z = fdopen_ok(a);
	n = fdopen_ok(c);
	same_flags(b, z);
	SAME_READ(b, z, 5000);
	SAME_WRITE(b, z, 0, 100);
	SAME_READ(d, n, 100);			/* EOF */
	SAME_WRITE(d, n, 0, 70000);
	same_poll(d, n, POLLIN | POLLOUT);
	ASSERT_SAME(ioctl(d, FIONREAD, &(int){ 0 }), pp_ioctl(n, FIONREAD, &(int){ 0 }));
	pp_close(z);
	pp_close(n);
	still_open(a);
	still_open(c);
	close(a);
	close(b);
	close(c);
	close(d);
	return 0;
}

/* Two wrappers of one descriptor; closing both leaves it open. */
static int test_close_keeps_fd(void)
{
	int k[2];
	struct pp_file *f1, *f2;
	char c;

	t_kpipe2(k, 0);
	f1 = fdopen_ok(k[1]);
	f2 = fdopen_ok(k[1]);
	ASSERT_EQ(pp_write(f1, "a", 1), 1);
	ASSERT_EQ(pp_close(f1), 0);
	ASSERT_EQ(pp_write(f2, "b", 1), 1);
	ASSERT_EQ(pp_close(f2), 0);
	still_open(k[1]);
	ASSERT_EQ(write(k[1], "c", 1), 1);
	close(k[1]);
	ASSERT_EQ(read(k[0], &c, 1), 1);
	ASSERT_EQ(c, 'a');
	close(k[0]);
	return 0;
}

static int test_bad_fd(void)
{
	int k[2], path;

	errno = 0;
	ASSERT_TRUE(pp_fdopen(-1) == NULL);
	ASSERT_EQ(errno, EBADF);
	errno = 0;
	ASSERT_TRUE(pp_fdopen(-100) == NULL);
	ASSERT_EQ(errno, EBADF);
	t_kpipe2(k, 0);
	close(k[0]);
	close(k[1]);
	errno = 0;
	ASSERT_TRUE(pp_fdopen(k[0]) == NULL);	/* closed */
	ASSERT_EQ(errno, EBADF);
	/* O_PATH: no I/O, so no file, as read(2) on it is EBADF. */
	path = open("/", O_PATH);
	if (path >= 0) {
		errno = 0;
		ASSERT_TRUE(pp_fdopen(path) == NULL);
		ASSERT_EQ(errno, EBADF);
		close(path);
	}
	/* pp_file_fd of a pagepipe end: no descriptor. */
	{
		struct pp_file *p[2];

		t_pipe2(p, 0);
		ASSERT_ERRNO(pp_file_fd(p[0]), EINVAL);
		ASSERT_ERRNO(pp_file_fd(p[1]), EINVAL);
		pp_close(p[0]);
		pp_close(p[1]);
	}
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_kernel_pipe),
		T_SUBTEST(test_kernel_pipe_eof),
		T_SUBTEST(test_regular_file),
		T_SUBTEST(test_socket_stream),
		T_SUBTEST(test_socket_dgram),
		T_SUBTEST(test_socket_seqpacket),
		T_SUBTEST(test_tcp),
		T_SUBTEST(test_char_devices),
		T_SUBTEST(test_close_keeps_fd),
		T_SUBTEST(test_bad_fd),
	};

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)t_pattern(i, 21);
	return T_RUN_SUBTESTS(tests);
}
