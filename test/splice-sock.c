// SPDX-License-Identifier: MIT
/*
 * Description: sockets as splice endpoints, real TCP on 127.0.0.1 and Unix
 * stream socket pairs (issue 3 §2, §4, reference §3.6): file -> pagepipe ->
 * socket and socket -> pagepipe -> file, 8 MiB each way, checked byte for
 * byte with a thread on the other end; memory and file buffers mixed;
 * SPLICE_F_MORE accepted (compared with splice(2)); a socket that cannot
 * send any more gives EPIPE and SIGPIPE, as the kernel's splice does.
 */
#include <signal.h>
#include <sys/socket.h>

#include "helpers.h"

#define BIG	(8u << 20)

static int sock_pair(int tcp, int s[2])
{
	if (tcp)
		return t_tcp_pair(s);
	return socketpair(AF_UNIX, SOCK_STREAM, 0, s);
}

struct peer {
	int fd;
	size_t len;
	unsigned long long pos;
	unsigned int seed;
	int ok;
};

/* Read len bytes and check them against the pattern. */
static void *reader(void *arg)
{
	struct peer *pr = arg;
	unsigned char *buf = malloc(65536);
	size_t done = 0;

	pr->ok = 0;
	if (!buf)
		return NULL;
	while (done < pr->len) {
		ssize_t r = read(pr->fd, buf, 65536);

		if (r <= 0)
			break;
		if (t_check(buf, (size_t)r, pr->pos + done, pr->seed))
			break;
		done += (size_t)r;
	}
	/* Then EOF. */
	if (done == pr->len && read(pr->fd, buf, 1) == 0)
		pr->ok = 1;
	free(buf);
	return NULL;
}

/* Write len pattern bytes, then shut the connection down. */
static void *writer(void *arg)
{
	struct peer *pr = arg;
	unsigned char *buf = malloc(65536);
	size_t done = 0;

	pr->ok = 0;
	if (!buf)
		return NULL;
	while (done < pr->len) {
		size_t n = pr->len - done < 65536 ? pr->len - done : 65536;
		ssize_t w;

		t_fill(buf, n, pr->pos + done, pr->seed);
		for (size_t m = 0; m < n; m += (size_t)w) {
			w = write(pr->fd, buf + m, n - m);
			if (w <= 0)
				goto out;
		}
		done += n;
	}
	pr->ok = 1;
out:
	shutdown(pr->fd, SHUT_WR);
	free(buf);
	return NULL;
}

static void file_to_socket(int tcp)
{
	char path[64];
	int fd = t_tmpfile(NULL, BIG + 333, 31, path), s[2];
	struct pp_file *pf = pp_fdopen(fd), *ps, *p[2];
	struct peer pr;
	pthread_t th;
	size_t done = 0;

	ASSERT_EQ(sock_pair(tcp, s), 0);
	ps = pp_fdopen(s[1]);
	ASSERT_TRUE(pf && ps);
	t_pipe2(p, 0);
	pr = (struct peer){ .fd = s[0], .len = BIG, .pos = 333, .seed = 31 };
	ASSERT_EQ(pthread_create(&th, NULL, reader, &pr), 0);
	ASSERT_EQ(lseek(fd, 333, SEEK_SET), 333);
	while (done < BIG) {
		ssize_t n = pp_splice(pf, NULL, p[1], NULL, BIG - done, 0);

		ASSERT_TRUE(n > 0);
		for (ssize_t m = 0; m < n; ) {
			ssize_t r = pp_splice(p[0], NULL, ps, NULL, (size_t)(n - m),
					      done + (size_t)n < BIG ? SPLICE_F_MORE : 0);

			ASSERT_TRUE(r > 0);
			m += r;
		}
		done += (size_t)n;
	}
	ASSERT_EQ(lseek(fd, 0, SEEK_CUR), BIG + 333);
	shutdown(s[1], SHUT_WR);
	t_join(th, NULL, 30);
	ASSERT_EQ(pr.ok, 1);
	pp_close(pf); pp_close(ps);
	close(fd); close(s[0]); close(s[1]);
	unlink(path);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_file_to_tcp(void)
{
	file_to_socket(1);
	return T_EXIT_PASS;
}

static int test_file_to_unix(void)
{
	file_to_socket(0);
	return T_EXIT_PASS;
}

static void socket_to_file(int tcp)
{
	char path[64];
	int of = t_tmpfile(NULL, 0, 0, path), s[2];
	struct pp_file *pof = pp_fdopen(of), *ps, *p[2];
	struct peer pr;
	pthread_t th;
	size_t done = 0;
	unsigned char *buf;

	ASSERT_EQ(sock_pair(tcp, s), 0);
	ps = pp_fdopen(s[0]);
	ASSERT_TRUE(pof && ps);
	t_pipe2(p, 0);
	pr = (struct peer){ .fd = s[1], .len = BIG, .pos = 0, .seed = 32 };
	ASSERT_EQ(pthread_create(&th, NULL, writer, &pr), 0);
	for (;;) {
		ssize_t n = pp_splice(ps, NULL, p[1], NULL, 1 << 20, 0);

		ASSERT_GE(n, 0);
		if (n == 0)
			break;
		for (ssize_t m = 0; m < n; ) {
			ssize_t r = pp_splice(p[0], NULL, pof, NULL, (size_t)(n - m), 0);

			ASSERT_TRUE(r > 0);
			m += r;
		}
		done += (size_t)n;
	}
	t_join(th, NULL, 30);
	ASSERT_EQ(pr.ok, 1);
	ASSERT_EQ(done, BIG);
	ASSERT_EQ(lseek(of, 0, SEEK_CUR), BIG);
	buf = malloc(BIG);
	ASSERT_TRUE(buf != NULL);
	ASSERT_EQ(pread(of, buf, BIG, 0), BIG);
	ASSERT_EQ(t_check(buf, BIG, 0, 32), 0);
	free(buf);
	pp_close(pof); pp_close(ps);
	close(of); close(s[0]); close(s[1]);
	unlink(path);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_tcp_to_file(void)
{
	socket_to_file(1);
	return T_EXIT_PASS;
}

static int test_unix_to_file(void)
{
	socket_to_file(0);
	return T_EXIT_PASS;
}

/* socket -> pagepipe -> socket, TCP in, Unix out, with a thread at each end. */
static int test_socket_to_socket(void)
{
	int a[2], b[2];
	struct pp_file *pin, *pout, *p[2];
	struct peer w, r;
	pthread_t tw, tr;

	ASSERT_EQ(sock_pair(1, a), 0);
	ASSERT_EQ(sock_pair(0, b), 0);
	pin = pp_fdopen(a[0]);
	pout = pp_fdopen(b[1]);
	t_pipe2(p, 0);
	w = (struct peer){ .fd = a[1], .len = BIG / 2, .seed = 33 };
	r = (struct peer){ .fd = b[0], .len = BIG / 2, .seed = 33 };
	ASSERT_EQ(pthread_create(&tw, NULL, writer, &w), 0);
	ASSERT_EQ(pthread_create(&tr, NULL, reader, &r), 0);
	for (;;) {
		ssize_t n = pp_splice(pin, NULL, p[1], NULL, 65536, SPLICE_F_MOVE);

		ASSERT_GE(n, 0);
		if (!n)
			break;
		for (ssize_t m = 0; m < n; ) {
			ssize_t k = pp_splice(p[0], NULL, pout, NULL, (size_t)(n - m), SPLICE_F_MORE);

			ASSERT_TRUE(k > 0);
			m += k;
		}
	}
	shutdown(b[1], SHUT_WR);
	t_join(tw, NULL, 30);
	t_join(tr, NULL, 30);
	ASSERT_EQ(w.ok, 1);
	ASSERT_EQ(r.ok, 1);
	pp_close(pin); pp_close(pout);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* Memory and file buffers mixed, to both kinds of socket, compared with the kernel. */
static void mixed(int tcp)
{
	char path[64];
	int fd = t_tmpfile(NULL, 20000, 34, path), ks[2], ps[2], k[2];
	struct pp_file *pf = pp_fdopen(fd), *pso, *p[2];
	off_t ko = 50, po = 50;
	unsigned char kb[30000], pb[30000];
	size_t kn = 0, pn = 0;

	ASSERT_EQ(sock_pair(tcp, ks), 0);
	ASSERT_EQ(sock_pair(tcp, ps), 0);
	pso = pp_fdopen(ps[1]);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_EQ(write(k[1], "hello: ", 7), 7);
	ASSERT_EQ(pp_write(p[1], "hello: ", 7), 7);
	ASSERT_SAME(splice(fd, &ko, k[1], NULL, 10000, 0), pp_splice(pf, &po, p[1], NULL, 10000, 0));
	ASSERT_EQ(write(k[1], " :tail", 6), 6);
	ASSERT_EQ(pp_write(p[1], " :tail", 6), 6);
	ASSERT_SAME(splice(k[0], NULL, ks[1], NULL, 100000, SPLICE_F_MORE),
		    pp_splice(p[0], NULL, pso, NULL, 100000, SPLICE_F_MORE));
	/* Empty pipes, SPLICE_F_MORE accepted both ways. */
	ASSERT_SAME(splice(k[0], NULL, ks[1], NULL, 100, SPLICE_F_MORE | SPLICE_F_NONBLOCK),
		    pp_splice(p[0], NULL, pso, NULL, 100, SPLICE_F_MORE | SPLICE_F_NONBLOCK));
	shutdown(ks[1], SHUT_WR);
	pp_close(pso);
	shutdown(ps[1], SHUT_WR);
	for (ssize_t r; (r = read(ks[0], kb + kn, sizeof(kb) - kn)) > 0; )
		kn += (size_t)r;
	for (ssize_t r; (r = read(ps[0], pb + pn, sizeof(pb) - pn)) > 0; )
		pn += (size_t)r;
	ASSERT_EQ(kn, 10013);
	ASSERT_EQ(pn, kn);
	ASSERT_MEM_EQ(kb, pb, kn);
	ASSERT_MEM_EQ(pb, "hello: ", 7);
	ASSERT_EQ(t_check(pb + 7, 10000, 50, 34), 0);
	ASSERT_MEM_EQ(pb + 10007, " :tail", 6);
	pp_close(pf);
	close(fd); unlink(path);
	close(ks[0]); close(ks[1]); close(ps[0]); close(ps[1]);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_mixed_tcp(void)
{
	mixed(1);
	return T_EXIT_PASS;
}

static int test_mixed_unix(void)
{
	mixed(0);
	return T_EXIT_PASS;
}

/*
 * A socket that can send no more: EPIPE with SIGPIPE, compared with the
 * kernel.  Unix: the peer closed.  TCP: our own side shut down for writing
 * (deterministic, no RST race).  Memory buffers and file buffers (which
 * pagepipe sends with sendfile).
 */
static void epipe(int tcp, int file_bufs)
{
	char path[64];
	int fd = t_tmpfile(NULL, 8192, 35, path), ks[2], ps[2], k[2];
	struct pp_file *pf = pp_fdopen(fd), *pso, *p[2];
	int before;

	t_sigpipe_count_start();
	ASSERT_EQ(sock_pair(tcp, ks), 0);
	ASSERT_EQ(sock_pair(tcp, ps), 0);
	pso = pp_fdopen(ps[1]);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	if (file_bufs) {
		off_t ko = 0, po = 0;

		ASSERT_SAME(splice(fd, &ko, k[1], NULL, 8192, 0), pp_splice(pf, &po, p[1], NULL, 8192, 0));
	} else {
		ASSERT_EQ(write(k[1], "data", 4), 4);
		ASSERT_EQ(pp_write(p[1], "data", 4), 4);
	}
	if (tcp) {
		shutdown(ks[1], SHUT_WR);
		shutdown(ps[1], SHUT_WR);
	} else {
		close(ks[0]);
		close(ps[0]);
	}
	before = t_sigpipe_count();
	ASSERT_EQ(splice(k[0], NULL, ks[1], NULL, 8192, 0), -1);
	ASSERT_EQ(errno, EPIPE);
	ASSERT_EQ(t_sigpipe_count(), before + 1);
	ASSERT_ERRNO(pp_splice(p[0], NULL, pso, NULL, 8192, 0), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), before + 2);
	/* Nothing was consumed from either pipe. */
	{
		int kn, pn;

		ASSERT_EQ(ioctl(k[0], FIONREAD, &kn), 0);
		ASSERT_EQ(pp_ioctl(p[0], FIONREAD, &pn), 0);
		ASSERT_EQ(kn, pn);
	}
	pp_close(pso); pp_close(pf);
	close(fd); unlink(path);
	close(ks[1]); close(ps[1]);
	if (tcp) {
		close(ks[0]);
		close(ps[0]);
	}
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_epipe_unix(void)
{
	epipe(0, 0);
	return T_EXIT_PASS;
}

static int test_epipe_unix_file_bufs(void)
{
	epipe(0, 1);
	return T_EXIT_PASS;
}

static int test_epipe_tcp(void)
{
	epipe(1, 0);
	return T_EXIT_PASS;
}

static int test_epipe_tcp_file_bufs(void)
{
	epipe(1, 1);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_file_to_tcp),
		T_SUBTEST(test_file_to_unix),
		T_SUBTEST(test_tcp_to_file),
		T_SUBTEST(test_unix_to_file),
		T_SUBTEST(test_socket_to_socket),
		T_SUBTEST(test_mixed_tcp),
		T_SUBTEST(test_mixed_unix),
		T_SUBTEST(test_epipe_unix),
		T_SUBTEST(test_epipe_unix_file_bufs),
		T_SUBTEST(test_epipe_tcp),
		T_SUBTEST(test_epipe_tcp_file_bufs),
	};

	return T_RUN_SUBTESTS(tests);
}
