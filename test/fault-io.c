// SPDX-License-Identifier: MIT
/*
 * Description: system-call failures injected with PP_FAULT_READ,
 * PP_FAULT_WRITE and PP_FAULT_SPLICE on the paths file -> pagepipe ->
 * file, socket and kernel pipe, and socket -> pagepipe: EIO, ENOSPC,
 * ECONNRESET and EAGAIN reach the caller as -1/errno with nothing consumed
 * and no offset moved; EINTR is retried by the library (the call succeeds);
 * EXDEV/EOPNOTSUPP from the kernel's zero-copy path fall back to a copy; a
 * failure behind a partial transfer gives the partial count; a real short
 * write (RLIMIT_FSIZE) gives the short count and the rest stays queued.
 * After each fault the test disarms, continues, and checks the whole
 * stream that arrived: no byte lost or duplicated, offsets right.
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "helpers.h"
#include "internal.h"

#define LEN	(48 * 1024)

static void check_file(int fd, size_t len, unsigned long long pos, unsigned int seed)
{
	static unsigned char got[LEN * 2];
	struct stat st;

	ASSERT_EQ(fstat(fd, &st), 0);
	ASSERT_EQ(st.st_size, (off_t)len);
	ASSERT_TRUE(len <= sizeof(got));
	ASSERT_EQ(pread(fd, got, len, 0), (ssize_t)len);
	ASSERT_EQ(t_check(got, len, pos, seed), 0);
}

/* Queue LEN bytes of stream `seed` from position 0 as anonymous pages. */
static void queue_anon(struct pp_file *w, unsigned int seed)
{
	static unsigned char src[LEN];

	t_fill(src, sizeof(src), 0, seed);
	t_write_full(w, src, sizeof(src));
}

/* Queue LEN bytes of a file made with `seed` as file buffers. */
static int queue_file(struct pp_file *w, unsigned int seed)
{
	char path[64];
	int fd = t_tmpfile(NULL, LEN, seed, path);
	struct pp_file *in = pp_fdopen(fd);
	off_t off = 0;

	unlink(path);
	ASSERT_TRUE(in != NULL);
	ASSERT_EQ(pp_splice(in, &off, w, NULL, LEN, 0), LEN);
	pp_close(in);
	return fd;
}

/*
 * pipe -> file with err injected at `site` on the first call: -1/err, the
 * pipe and both offsets untouched; then the rest goes and the file is right.
 */
static void pipe_to_file_fault(bool file_bufs, enum pp_fault_site site, int err, bool null_off)
{
	char path[64];
	int out = t_tmpfile(NULL, 0, 0, path), src = -1;
	struct pp_file *p[2], *o = pp_fdopen(out);
	off_t off = 0;
	size_t moved = 0;

	unlink(path);
	ASSERT_TRUE(o != NULL);
	t_pipe2(p, O_NONBLOCK);
	if (file_bufs)
		src = queue_file(p[1], 31);
	else
		queue_anon(p[1], 31);

	pp__fault_arm(site, 0, err, 1);
	errno = 0;
	ssize_t n = pp_splice(p[0], NULL, o, null_off ? NULL : &off, LEN, 0);
	long hits = pp__fault_hits(site);
	pp__fault_disarm_all();
	ASSERT_EQ(hits, 1);
	if (err == EINTR || err == EXDEV || err == EOPNOTSUPP) {
		/* Retried, or the copy path took over: nothing shows. */
		if (n < 0)
			t_fail_at(__FILE__, __LINE__, "%s splice with injected %s: -1 %s, want success",
				  file_bufs ? "file-buffer" : "memory-buffer", strerrorname_np(err),
				  strerrorname_np(errno));
		ASSERT_TRUE(n > 0);
		moved = (size_t)n;
	} else {
		if (n != -1 || errno != err)
			t_fail_at(__FILE__, __LINE__, "splice with injected %s: %zd %s",
				  strerrorname_np(err), n, n < 0 ? strerrorname_np(errno) : "");
		ASSERT_EQ(off, 0);
		ASSERT_EQ(lseek(out, 0, SEEK_CUR), 0);
		ASSERT_EQ(t_fionread(p[0]), LEN);
	}
	while (moved < LEN) {
		n = pp_splice(p[0], NULL, o, null_off ? NULL : &off, LEN - moved, 0);
		ASSERT_TRUE(n > 0);
		moved += (size_t)n;
		ASSERT_EQ(null_off ? lseek(out, 0, SEEK_CUR) : off, (off_t)moved);
	}
	ASSERT_EQ(t_fionread(p[0]), 0);
	ASSERT_EQ(null_off ? off : lseek(out, 0, SEEK_CUR), 0);
	check_file(out, LEN, 0, 31);
	pp_close(o);
	pp_close(p[0]);
	pp_close(p[1]);
	close(out);
	if (src >= 0)
		close(src);
}

static int test_pipe_to_file_write_errors(void)
{
	static const int errs[] = { EIO, ENOSPC, EAGAIN, EFBIG };

	for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		pipe_to_file_fault(false, PP_FAULT_WRITE, errs[i], false);
		pipe_to_file_fault(false, PP_FAULT_WRITE, errs[i], true);
	}
	return 0;
}

/* pwritev interrupted: fd.c sys_writev() retries EINTR. */
static int test_pipe_to_file_write_eintr(void)
{
	pipe_to_file_fault(false, PP_FAULT_WRITE, EINTR, false);
	pipe_to_file_fault(false, PP_FAULT_WRITE, EINTR, true);
	return 0;
}

static int test_pipe_to_file_copy_range_errors(void)
{
	static const int errs[] = { EIO, ENOSPC, EXDEV, EOPNOTSUPP };

	for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		pipe_to_file_fault(true, PP_FAULT_SPLICE, errs[i], false);
		pipe_to_file_fault(true, PP_FAULT_SPLICE, errs[i], true);
	}
	return 0;
}

/* copy_file_range interrupted: reg.c reg_move() retries EINTR. */
static int test_pipe_to_file_copy_range_eintr(void)
{
	pipe_to_file_fault(true, PP_FAULT_SPLICE, EINTR, false);
	pipe_to_file_fault(true, PP_FAULT_SPLICE, EINTR, true);
	return 0;
}

/*
 * [memory][file][memory] buffers: three system calls for one splice.  The
 * third fails: the splice returns what the first two moved, the offset
 * says so, and the third part is still queued.
 */
static int test_pipe_to_file_partial(void)
{
	char path[64], fpath[64];
	int out = t_tmpfile(NULL, 0, 0, path);
	int src = t_tmpfile(NULL, 8192, 41, fpath);
	struct pp_file *p[2], *o = pp_fdopen(out), *in = pp_fdopen(src);
	unsigned char a[4096], c[4096], got[16384];
	off_t off = 0, soff = 0;
	ssize_t n;

	unlink(path);
	unlink(fpath);
	t_pipe2(p, O_NONBLOCK);
	memset(a, 'A', sizeof(a));
	memset(c, 'C', sizeof(c));
	t_write_full(p[1], a, sizeof(a));
	ASSERT_EQ(pp_splice(in, &soff, p[1], NULL, 8192, 0), 8192);
	t_write_full(p[1], c, sizeof(c));

	pp__fault_arm(PP_FAULT_WRITE, 1, EIO, 1);	/* the second writev */
	n = pp_splice(p[0], NULL, o, &off, sizeof(got), 0);
	pp__fault_disarm_all();
	ASSERT_EQ(n, 4096 + 8192);
	ASSERT_EQ(off, 4096 + 8192);
	ASSERT_EQ(t_fionread(p[0]), 4096);
	/* The next splice goes on where that one stopped. */
	ASSERT_EQ(pp_splice(p[0], NULL, o, &off, sizeof(got), 0), 4096);
	ASSERT_EQ(off, sizeof(got));
	ASSERT_EQ(pread(out, got, sizeof(got), 0), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, a, 4096);
	ASSERT_EQ(t_check(got + 4096, 8192, 0, 41), 0);
	ASSERT_MEM_EQ(got + 12288, c, 4096);

	/* The same with the kernel path failing in the middle (ENOSPC). */
	ASSERT_EQ(ftruncate(out, 0), 0);
	off = 0;
	soff = 0;
	t_write_full(p[1], a, sizeof(a));
	ASSERT_EQ(pp_splice(in, &soff, p[1], NULL, 8192, 0), 8192);
	t_write_full(p[1], c, sizeof(c));
	pp__fault_arm(PP_FAULT_SPLICE, 0, ENOSPC, 1);
	ASSERT_EQ(pp_splice(p[0], NULL, o, &off, sizeof(got), 0), 4096);
	pp__fault_disarm_all();
	ASSERT_EQ(off, 4096);
	ASSERT_EQ(t_fionread(p[0]), 8192 + 4096);
	ASSERT_EQ(pp_splice(p[0], NULL, o, &off, sizeof(got), 0), 12288);
	ASSERT_EQ(pread(out, got, sizeof(got), 0), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, a, 4096);
	ASSERT_EQ(t_check(got + 4096, 8192, 0, 41), 0);
	ASSERT_MEM_EQ(got + 12288, c, 4096);

	pp_close(in);
	pp_close(o);
	pp_close(p[0]);
	pp_close(p[1]);
	close(out);
	close(src);
	return 0;
}

/* A real short write: the file size limit stops pwritev part way. */
static int test_pipe_to_file_short_write(void)
{
	char path[64];
	int out = t_tmpfile(NULL, 0, 0, path);
	struct pp_file *p[2], *o = pp_fdopen(out);
	struct rlimit rl = { 10000, RLIM_INFINITY };
	off_t off = 0;

	unlink(path);
	signal(SIGXFSZ, SIG_IGN);
	t_pipe2(p, O_NONBLOCK);
	queue_anon(p[1], 51);
	if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
		return t_skip("setrlimit(RLIMIT_FSIZE): %s", strerror(errno));
	ASSERT_EQ(pp_splice(p[0], NULL, o, &off, LEN, 0), 10000);
	ASSERT_EQ(off, 10000);
	ASSERT_EQ(t_fionread(p[0]), LEN - 10000);
	ASSERT_ERRNO(pp_splice(p[0], NULL, o, &off, LEN, 0), EFBIG);
	ASSERT_EQ(off, 10000);
	ASSERT_EQ(t_fionread(p[0]), LEN - 10000);
	rl.rlim_cur = RLIM_INFINITY;
	ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &rl), 0);
	ASSERT_EQ(pp_splice(p[0], NULL, o, &off, LEN, 0), LEN - 10000);
	ASSERT_EQ(off, LEN);
	check_file(out, LEN, 0, 51);
	pp_close(o);
	pp_close(p[0]);
	pp_close(p[1]);
	close(out);
	return 0;
}

/* Drain a socket's peer and check the stream. */
static void recv_check(int fd, size_t len, unsigned int seed)
{
	static unsigned char got[LEN];
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, got + done, len - done);

		ASSERT_TRUE(r > 0);
		done += (size_t)r;
	}
	ASSERT_EQ(t_check(got, len, 0, seed), 0);
	int avail = -1;
	ASSERT_EQ(ioctl(fd, FIONREAD, &avail), 0);
	ASSERT_EQ(avail, 0);	/* nothing duplicated */
}

static void pipe_to_socket_fault(bool file_bufs, enum pp_fault_site site, int err)
{
	int sv[2], src = -1;
	struct pp_file *p[2], *o;
	size_t moved = 0;
	int sz = 1 << 20;

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	o = pp_fdopen(sv[1]);
	ASSERT_TRUE(o != NULL);
	t_pipe2(p, O_NONBLOCK);
	if (file_bufs)
		src = queue_file(p[1], 61);
	else
		queue_anon(p[1], 61);

	pp__fault_arm(site, 0, err, 1);
	errno = 0;
	ssize_t n = pp_splice(p[0], NULL, o, NULL, LEN, 0);
	long hits = pp__fault_hits(site);
	pp__fault_disarm_all();
	ASSERT_EQ(hits, 1);
	if (err == EINTR) {
		if (n < 0)
			t_fail_at(__FILE__, __LINE__, "%s splice to socket with injected EINTR: -1 %s, want success",
				  file_bufs ? "file-buffer" : "memory-buffer", strerrorname_np(errno));
		moved = (size_t)n;
	} else {
		if (n != -1 || errno != err)
			t_fail_at(__FILE__, __LINE__, "splice to socket with injected %s: %zd %s",
				  strerrorname_np(err), n, n < 0 ? strerrorname_np(errno) : "");
		ASSERT_EQ(t_fionread(p[0]), LEN);
	}
	while (moved < LEN) {
		n = pp_splice(p[0], NULL, o, NULL, LEN - moved, 0);
		ASSERT_TRUE(n > 0);
		moved += (size_t)n;
	}
	recv_check(sv[0], LEN, 61);
	pp_close(o);
	pp_close(p[0]);
	pp_close(p[1]);
	close(sv[0]);
	close(sv[1]);
	if (src >= 0)
		close(src);
}

static int test_pipe_to_socket_errors(void)
{
	static const int errs[] = { EAGAIN, ECONNRESET, ENOBUFS };

	for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		pipe_to_socket_fault(false, PP_FAULT_WRITE, errs[i]);	/* sendmsg */
		pipe_to_socket_fault(true, PP_FAULT_SPLICE, errs[i]);	/* sendfile */
	}
	return 0;
}

/* sendmsg / sendfile interrupted: sys_writev() and sock_move() retry EINTR. */
static int test_pipe_to_socket_eintr(void)
{
	pipe_to_socket_fault(false, PP_FAULT_WRITE, EINTR);
	pipe_to_socket_fault(true, PP_FAULT_SPLICE, EINTR);
	return 0;
}

/* socket -> pipe: the readv fails; the socket keeps its bytes. */
static void socket_to_pipe(const int *errs, unsigned nerrs)
{
	static unsigned char src[LEN], got[LEN];

	t_fill(src, sizeof(src), 0, 71);
	for (unsigned i = 0; i < nerrs; i++) {
		int sv[2], avail = -1;
		struct pp_file *p[2], *in;
		size_t moved = 0, done = 0;
		ssize_t n;

		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		ASSERT_EQ(write(sv[1], src, 20000), 20000);
		in = pp_fdopen(sv[0]);
		ASSERT_TRUE(in != NULL);
		t_pipe2(p, O_NONBLOCK);

		pp__fault_arm(PP_FAULT_READ, 0, errs[i], 1);
		errno = 0;
		n = pp_splice(in, NULL, p[1], NULL, 20000, SPLICE_F_NONBLOCK);
		pp__fault_disarm_all();
		if (errs[i] == EINTR) {
			if (n < 0)
				t_fail_at(__FILE__, __LINE__, "socket->pipe with injected EINTR: -1 %s, want success",
					  strerrorname_np(errno));
			moved = (size_t)n;
		} else {
			if (n != -1 || errno != errs[i])
				t_fail_at(__FILE__, __LINE__, "socket->pipe with injected %s: %zd %s",
					  strerrorname_np(errs[i]), n, n < 0 ? strerrorname_np(errno) : "");
			ASSERT_EQ(ioctl(sv[0], FIONREAD, &avail), 0);
			ASSERT_EQ(avail, 20000);
			ASSERT_EQ(t_fionread(p[0]), 0);
		}
		while (moved < 20000) {
			n = pp_splice(in, NULL, p[1], NULL, 20000 - moved, SPLICE_F_NONBLOCK);
			ASSERT_TRUE(n > 0);
			moved += (size_t)n;
		}
		while (done < 20000) {
			n = pp_read(p[0], got + done, sizeof(got) - done);
			ASSERT_TRUE(n > 0);
			done += (size_t)n;
		}
		ASSERT_MEM_EQ(got, src, 20000);
		ASSERT_ERRNO(pp_read(p[0], got, 1), EAGAIN);
		pp_close(in);
		pp_close(p[0]);
		pp_close(p[1]);
		close(sv[0]);
		close(sv[1]);
	}
}

static int test_socket_to_pipe_errors(void)
{
	static const int errs[] = { EIO, ECONNRESET, EAGAIN };

	socket_to_pipe(errs, 3);
	return 0;
}

/* readv interrupted: fd.c sys_readv() retries EINTR. */
static int test_socket_to_pipe_eintr(void)
{
	static const int errs[] = { EINTR };

	socket_to_pipe(errs, 1);
	return 0;
}

/* file buffers -> kernel pipe: splice(2) fails, then goes on. */
static void pipe_to_kpipe(const int *errs, unsigned nerrs)
{
	static unsigned char got[LEN];

	for (unsigned i = 0; i < nerrs; i++) {
		struct pp_file *p[2], *o;
		int k[2], src;
		size_t moved = 0, done = 0;
		ssize_t n;

		t_kpipe2(k, 0);
		ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, 1 << 20) >= LEN, 1);
		o = pp_fdopen(k[1]);
		ASSERT_TRUE(o != NULL);
		t_pipe2(p, O_NONBLOCK);
		src = queue_file(p[1], 81);

		pp__fault_arm(PP_FAULT_SPLICE, 0, errs[i], 1);
		errno = 0;
		n = pp_splice(p[0], NULL, o, NULL, LEN, 0);
		pp__fault_disarm_all();
		if (errs[i] == EINTR) {
			if (n < 0)
				t_fail_at(__FILE__, __LINE__, "pipe->kernel pipe with injected EINTR: -1 %s, want success",
					  strerrorname_np(errno));
			moved = (size_t)n;
		} else {
			if (n != -1 || errno != errs[i])
				t_fail_at(__FILE__, __LINE__, "pipe->kernel pipe with injected %s: %zd %s",
					  strerrorname_np(errs[i]), n, n < 0 ? strerrorname_np(errno) : "");
			ASSERT_EQ(t_fionread(p[0]), LEN);
		}
		while (moved < LEN) {
			n = pp_splice(p[0], NULL, o, NULL, LEN - moved, 0);
			ASSERT_TRUE(n > 0);
			moved += (size_t)n;
		}
		while (done < LEN) {
			n = read(k[0], got + done, LEN - done);
			ASSERT_TRUE(n > 0);
			done += (size_t)n;
		}
		ASSERT_EQ(t_check(got, LEN, 0, 81), 0);
		pp_close(o);
		pp_close(p[0]);
		pp_close(p[1]);
		close(k[0]);
		close(k[1]);
		close(src);
	}
}

static int test_pipe_to_kpipe_errors(void)
{
	static const int errs[] = { EAGAIN, EIO };

	pipe_to_kpipe(errs, 2);
	return 0;
}

/* splice(2) interrupted: kpipe.c kpipe_move() retries EINTR. */
static int test_pipe_to_kpipe_eintr(void)
{
	static const int errs[] = { EINTR };

	pipe_to_kpipe(errs, 1);
	return 0;
}

/* Reading file buffers out of the pipe (pread): EINTR is retried inside buf.c. */
static int test_file_bufs_read_eintr(void)
{
	static unsigned char got[LEN];
	struct pp_file *p[2];
	int src;
	ssize_t n;

	t_pipe2(p, O_NONBLOCK);
	src = queue_file(p[1], 91);
	pp__fault_arm(PP_FAULT_READ, 0, EINTR, 3);
	n = pp_read(p[0], got, LEN);
	ASSERT_EQ(pp__fault_hits(PP_FAULT_READ), 3);
	pp__fault_disarm_all();
	ASSERT_EQ(n, LEN);
	ASSERT_EQ(t_check(got, LEN, 0, 91), 0);
	ASSERT_ERRNO(pp_read(p[0], got, 1), EAGAIN);
	pp_close(p[0]);
	pp_close(p[1]);
	close(src);
	return 0;
}

/*
 * EIO reaches the caller and, once the fault is gone, the stream continues
 * at the same byte: a failed read consumes nothing (Linux pipe_read()
 * leaves a buffer whose confirm failed in place).
 */
static int test_file_bufs_read_eio(void)
{
	static unsigned char got[LEN];
	struct pp_file *p[2];
	int src;
	size_t done = 0;
	ssize_t n;

	t_pipe2(p, O_NONBLOCK);
	src = queue_file(p[1], 91);
	ASSERT_EQ(pp_read(p[0], got, 4096), 4096);
	done = 4096;

	pp__fault_arm(PP_FAULT_READ, 0, EIO, 1);
	ASSERT_ERRNO(pp_read(p[0], got + done, 4096), EIO);
	pp__fault_disarm_all();
	ASSERT_EQ(t_fionread(p[0]), LEN - 4096);	/* nothing consumed */
	while (done < LEN) {
		n = pp_read(p[0], got + done, LEN - done);
		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "read after EIO at %zu: %zd %s", done, n,
				  n < 0 ? strerrorname_np(errno) : "EOF");
		done += (size_t)n;
	}
	ASSERT_EQ(t_check(got, LEN, 0, 91), 0);
	ASSERT_ERRNO(pp_read(p[0], got, 1), EAGAIN);
	pp_close(p[0]);
	pp_close(p[1]);
	close(src);
	return 0;
}

/* A pseudo-file is read by copy (readv): its read fails, the offset stays. */
static int procfs_to_pipe(const int *errs, unsigned nerrs)
{
	char want[4096], got[4096];
	int fd = open("/proc/version", O_RDONLY);
	ssize_t wl;

	if (fd < 0)
		return t_skip("/proc/version: %s", strerror(errno));
	wl = read(fd, want, sizeof(want));
	ASSERT_TRUE(wl > 0);
	for (unsigned i = 0; i < nerrs; i++) {
		struct pp_file *p[2], *in = pp_fdopen(fd);
		off_t off = 0;
		ssize_t n;

		ASSERT_TRUE(in != NULL);
		t_pipe2(p, O_NONBLOCK);
		ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
		pp__fault_arm(PP_FAULT_READ, 0, errs[i], 1);
		errno = 0;
		n = pp_splice(in, errs[i] == EIO ? &off : NULL, p[1], NULL, sizeof(got), 0);
		pp__fault_disarm_all();
		if (errs[i] == EINTR) {
			if (n != wl)
				t_fail_at(__FILE__, __LINE__, "procfs->pipe with injected EINTR: %zd %s, want %zd",
					  n, n < 0 ? strerrorname_np(errno) : "", wl);
		} else {
			if (n != -1 || errno != errs[i])
				t_fail_at(__FILE__, __LINE__, "procfs->pipe with injected %s: %zd %s",
					  strerrorname_np(errs[i]), n, n < 0 ? strerrorname_np(errno) : "");
			ASSERT_EQ(off, 0);
			ASSERT_EQ(lseek(fd, 0, SEEK_CUR), 0);
			ASSERT_EQ(t_fionread(p[0]), 0);
			n = pp_splice(in, errs[i] == EIO ? &off : NULL, p[1], NULL, sizeof(got), 0);
			ASSERT_EQ(n, wl);
		}
		if (errs[i] == EIO)
			ASSERT_EQ(off, wl);
		else
			ASSERT_EQ(lseek(fd, 0, SEEK_CUR), wl);
		ASSERT_EQ(pp_read(p[0], got, sizeof(got)), wl);
		ASSERT_MEM_EQ(got, want, (size_t)wl);
		pp_close(in);
		pp_close(p[0]);
		pp_close(p[1]);
	}
	close(fd);
	return 0;
}

static int test_procfs_to_pipe_errors(void)
{
	static const int errs[] = { EIO, EAGAIN };

	return procfs_to_pipe(errs, 2);
}

static int test_procfs_to_pipe_eintr(void)
{
	static const int errs[] = { EINTR };

	return procfs_to_pipe(errs, 1);
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_pipe_to_file_write_errors),
		T_SUBTEST(test_pipe_to_file_write_eintr),
		T_SUBTEST(test_pipe_to_file_copy_range_errors),
		T_SUBTEST(test_pipe_to_file_copy_range_eintr),
		T_SUBTEST(test_pipe_to_file_partial),
		T_SUBTEST(test_pipe_to_file_short_write),
		T_SUBTEST(test_pipe_to_socket_errors),
		T_SUBTEST(test_pipe_to_socket_eintr),
		T_SUBTEST(test_socket_to_pipe_errors),
		T_SUBTEST(test_socket_to_pipe_eintr),
		T_SUBTEST(test_pipe_to_kpipe_errors),
		T_SUBTEST(test_pipe_to_kpipe_eintr),
		T_SUBTEST(test_file_bufs_read_eintr),
		T_SUBTEST(test_file_bufs_read_eio),
		T_SUBTEST(test_procfs_to_pipe_errors),
		T_SUBTEST(test_procfs_to_pipe_eintr),
	};

	return T_RUN_SUBTESTS(tests);
}
