// SPDX-License-Identifier: MIT
/*
 * Description: issue 12, the endpoint review: each step done on real
 * kernel pipes and sockets (pp_splice between two OS descriptors is
 * splice(2) itself) and on the pagepipe path, compared.
 *  1. SPLICE_F_NONBLOCK and a pagepipe's O_NONBLOCK reach kernel-pipe and
 *     AF_UNIX endpoints (EAGAIN where the kernel gives it, no hang), while
 *     a full socket still blocks as in splice_to_socket; a kernel pipe
 *     with room for less than is queued takes what fits, no wait.
 *  2. MSG_MORE only while more of this call remains: a connected UDP
 *     socket gets one datagram per splice, at once.
 *  3. A kernel pipe is a pipe, not a file: O_APPEND and a len of SIZE_MAX
 *     are fine; packets from an O_DIRECT kernel pipe keep their bounds.
 * Every step runs under a watchdog: a hang is a failure.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>

#include "helpers.h"

#define PG 4096

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	ASSERT_GE(fl, 0);
	ASSERT_EQ(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK), 0);
}

/* Fill a blocking descriptor until it takes no more, and leave it blocking. */
static void fill(int fd)
{
	static char junk[PG];

	set_nonblock(fd, 1);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
	ASSERT_EQ(errno, EAGAIN);
	set_nonblock(fd, 0);
}

static void src_pair(int unix_sock, int s[2])
{
	if (unix_sock)
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	else
		t_kpipe2(s, 0);
}

/*
 * An empty blocking source (kernel pipe or Unix socket) into a pipe that
 * is non-blocking by its O_NONBLOCK (pipe_flags) or by the flag.
 */
static void empty_source(int unix_sock, int pipe_flags, unsigned int sflags)
{
	int ks[2], ps[2], ko[2];
	struct pp_file *p[2], *pin;

	src_pair(unix_sock, ks);
	src_pair(unix_sock, ps);
	t_kpipe2(ko, pipe_flags);
	t_pipe2(p, pipe_flags);
	pin = pp_fdopen(ps[0]);
	ASSERT_TRUE(pin);
	t_watchdog(5, "splice from an empty blocking source, non-blocking pipe");
	ASSERT_SAME(splice(ks[0], NULL, ko[1], NULL, 100, sflags),
		    pp_splice(pin, NULL, p[1], NULL, 100, sflags));
	/* With data it moves, the same count and bytes. */
	ASSERT_EQ(write(ks[1], "hello", 5), 5);
	ASSERT_EQ(write(ps[1], "hello", 5), 5);
	ASSERT_SAME(splice(ks[0], NULL, ko[1], NULL, 100, sflags),
		    pp_splice(pin, NULL, p[1], NULL, 100, sflags));
	ASSERT_SAME_READ(ko[0], p[0], 100);
	/* No writer (or peer) left: 0, not EAGAIN. */
	close(ks[1]);
	close(ps[1]);
	ASSERT_SAME(splice(ks[0], NULL, ko[1], NULL, 100, sflags),
		    pp_splice(pin, NULL, p[1], NULL, 100, sflags));
	t_watchdog(0, NULL);
	pp_close(pin);
	close(ks[0]); close(ps[0]); close(ko[0]); close(ko[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_kpipe_in_flag(void)  { empty_source(0, 0, SPLICE_F_NONBLOCK); return T_EXIT_PASS; }
static int test_kpipe_in_onb(void)   { empty_source(0, O_NONBLOCK, 0); return T_EXIT_PASS; }
static int test_unix_in_flag(void)   { empty_source(1, 0, SPLICE_F_NONBLOCK); return T_EXIT_PASS; }
static int test_unix_in_onb(void)    { empty_source(1, O_NONBLOCK, 0); return T_EXIT_PASS; }

/* A pipe with 5 bytes into a full blocking kernel pipe. */
static void full_kpipe(int pipe_flags, unsigned int sflags)
{
	int a[2], ko[2], pk[2];
	struct pp_file *p[2], *po;
	char b[PG];

	t_kpipe2(a, pipe_flags);
	t_pipe2(p, pipe_flags);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	fill(ko[1]);
	fill(pk[1]);
	po = pp_fdopen(pk[1]);
	ASSERT_TRUE(po);
	ASSERT_EQ(write(a[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);
	t_watchdog(5, "splice into a full blocking kernel pipe, non-blocking");
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 100, sflags),
		    pp_splice(p[0], NULL, po, NULL, 100, sflags));
	/* A page of room: the bytes go. */
	ASSERT_EQ(read(ko[0], b, PG), PG);
	ASSERT_EQ(read(pk[0], b, PG), PG);
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 100, sflags),
		    pp_splice(p[0], NULL, po, NULL, 100, sflags));
	t_watchdog(0, NULL);
	pp_close(po);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_kpipe_out_flag(void) { full_kpipe(0, SPLICE_F_NONBLOCK); return T_EXIT_PASS; }
static int test_kpipe_out_onb(void)  { full_kpipe(O_NONBLOCK, 0); return T_EXIT_PASS; }

/*
 * More queued than a blocking kernel pipe has room for: the kernel moves
 * what fits and returns (splice_pipe_to_pipe never waits once it moved
 * something); blocking or not, no wait for the rest.
 */
static void part_room(int pipe_flags, unsigned int sflags)
{
	int a[2], ko[2], pk[2];
	struct pp_file *p[2], *po;
	unsigned char b[16 * PG];

	t_kpipe2(a, pipe_flags);
	t_pipe2(p, pipe_flags);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	fill(ko[1]);
	fill(pk[1]);
	ASSERT_EQ(read(ko[0], b, PG), PG);
	ASSERT_EQ(read(pk[0], b, PG), PG);
	po = pp_fdopen(pk[1]);
	ASSERT_TRUE(po);
	t_fill(b, sizeof(b), 0, 15);
	ASSERT_EQ(write(a[1], b, sizeof(b)), (ssize_t)sizeof(b));
	ASSERT_EQ(t_write_full(p[1], b, sizeof(b)), (ssize_t)sizeof(b));
	t_watchdog(5, "splice into a kernel pipe with room for less");
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, sizeof(b), sflags),
		    pp_splice(p[0], NULL, po, NULL, sizeof(b), sflags));
	t_watchdog(0, NULL);
	pp_close(po);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_kpipe_part_block(void) { part_room(0, 0); return T_EXIT_PASS; }
static int test_kpipe_part_onb(void)   { part_room(O_NONBLOCK, 0); return T_EXIT_PASS; }

/*
 * A full blocking socket is not the pipe side: splice_to_socket waits for
 * it whatever SPLICE_F_NONBLOCK or the pipe's O_NONBLOCK say.  The splice
 * runs in a thread; the main thread drains the peer once it had time to
 * block there.
 */
struct sock_job {
	struct pp_file *in, *out;
	unsigned int flags;
	struct t_res res;
};

static void *sock_job(void *arg)
{
	struct sock_job *j = arg;

	j->res = T_CALL(pp_splice(j->in, NULL, j->out, NULL, 5, j->flags));
	return NULL;
}

static struct t_res splice_into_full_socket(struct pp_file *in, int pipe_flags, unsigned int sflags)
{
	static char junk[1 << 16];
	struct sock_job j = { .in = in, .flags = sflags };
	pthread_t th;
	int s[2];

	(void)pipe_flags;
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	fill(s[1]);
	j.out = pp_fdopen(s[1]);
	ASSERT_TRUE(j.out);
	ASSERT_EQ(pthread_create(&th, NULL, sock_job, &j), 0);
	t_sleep_ms(200);	/* only to let it reach its wait */
	set_nonblock(s[0], 1);
	while (read(s[0], junk, sizeof(junk)) > 0)
		;
	t_join(th, NULL, 10);
	pp_close(j.out);
	close(s[0]); close(s[1]);
	return j.res;
}

static void full_socket(int pipe_flags, unsigned int sflags)
{
	int a[2];
	struct pp_file *p[2], *ka;
	struct t_res k, pr;

	t_kpipe2(a, pipe_flags);
	t_pipe2(p, pipe_flags);
	ka = pp_fdopen(a[0]);
	ASSERT_EQ(write(a[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);
	k = splice_into_full_socket(ka, pipe_flags, sflags);
	pr = splice_into_full_socket(p[0], pipe_flags, sflags);
	ASSERT_EQ(k.ret, 5);
	ASSERT_EQ(pr.ret, k.ret);
	ASSERT_EQ(pr.err, k.err);
	pp_close(ka);
	close(a[0]); close(a[1]);
	pp_close(p[0]); pp_close(p[1]);
}

static int test_sock_out_flag(void) { full_socket(0, SPLICE_F_NONBLOCK); return T_EXIT_PASS; }
static int test_sock_out_onb(void)  { full_socket(O_NONBLOCK, 0); return T_EXIT_PASS; }

/* ---------------------------------------------------------------------- */

/* Two UDP sockets on 127.0.0.1 connected to each other: s[1] sends to s[0]. */
static int udp_pair(int s[2])
{
	struct sockaddr_in a[2];
	socklen_t l = sizeof(a[0]);

	for (int i = 0; i < 2; i++) {
		s[i] = socket(AF_INET, SOCK_DGRAM, 0);
		if (s[i] < 0)
			return -1;
		a[i] = (struct sockaddr_in){ .sin_family = AF_INET,
					     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (bind(s[i], (struct sockaddr *)&a[i], sizeof(a[i])) ||
		    getsockname(s[i], (struct sockaddr *)&a[i], &l))
			return -1;
	}
	if (connect(s[0], (struct sockaddr *)&a[1], sizeof(a[1])) ||
	    connect(s[1], (struct sockaddr *)&a[0], sizeof(a[0])))
		return -1;
	return 0;
}

#define ASSERT_SAME_RECV(kfd, pfd) do {					\
	static unsigned char _kb[1 << 16], _pb[1 << 16];		\
	struct t_res _k = T_CALL(recv((kfd), _kb, sizeof(_kb), MSG_DONTWAIT)); \
	struct t_res _p = T_CALL(recv((pfd), _pb, sizeof(_pb), MSG_DONTWAIT)); \
	if (_k.ret != _p.ret || _k.err != _p.err)			\
		t_fail_at(__FILE__, __LINE__,				\
			  "kernel recv = %lld (%s), pagepipe recv = %lld (%s)", \
			  _k.ret, _k.err ? strerror(_k.err) : "ok",	\
			  _p.ret, _p.err ? strerror(_p.err) : "ok");	\
	if (_k.ret > 0)							\
		ASSERT_MEM_EQ(_kb, _pb, (size_t)_k.ret);		\
} while (0)

/*
 * Two page-sized buffers queued, a splice of one page: the kernel sends it
 * as one datagram at once (no MSG_MORE: nothing of this call remains), and
 * the second splice is a second datagram.
 */
static int test_udp_more(void)
{
	int ku[2], pu[2], a[2];
	struct pp_file *p[2], *pso;
	unsigned char b[2 * PG];

	if (udp_pair(ku) || udp_pair(pu))
		return t_skip("no UDP on 127.0.0.1: %s", strerror(errno));
	t_kpipe2(a, 0);
	t_pipe2(p, 0);
	pso = pp_fdopen(pu[1]);
	ASSERT_TRUE(pso);
	t_fill(b, sizeof(b), 0, 12);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(write(a[1], b + i * PG, PG), PG);
		ASSERT_EQ(pp_write(p[1], b + i * PG, PG), PG);
	}
	/* Three buffers queued, the first two taken: still nothing more of this call. */
	ASSERT_EQ(write(a[1], b, 100), 100);
	ASSERT_EQ(pp_write(p[1], b, 100), 100);
	t_watchdog(5, "UDP splices");
	ASSERT_SAME(splice(a[0], NULL, ku[1], NULL, PG, 0), pp_splice(p[0], NULL, pso, NULL, PG, 0));
	ASSERT_SAME_RECV(ku[0], pu[0]);
	ASSERT_SAME(splice(a[0], NULL, ku[1], NULL, 2 * PG, 0),
		    pp_splice(p[0], NULL, pso, NULL, 2 * PG, 0));
	ASSERT_SAME_RECV(ku[0], pu[0]);
	ASSERT_SAME_RECV(ku[0], pu[0]);		/* nothing left on either */
	t_watchdog(0, NULL);
	pp_close(pso);
	close(ku[0]); close(ku[1]); close(pu[0]); close(pu[1]); close(a[0]); close(a[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * Memory bytes and file bytes in one splice: the kernel sends them with
 * one sendmsg, one datagram; pagepipe sends them by two calls (sendmsg,
 * sendfile), the first of which must cork.
 */
static int test_udp_mixed(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 1000, 14, path), ku[2], pu[2], a[2];
	struct pp_file *p[2], *pso, *pf = pp_fdopen(fd);
	off_t ko = 0, po = 0;

	if (udp_pair(ku) || udp_pair(pu))
		return t_skip("no UDP on 127.0.0.1: %s", strerror(errno));
	ASSERT_TRUE(pf);
	t_kpipe2(a, 0);
	t_pipe2(p, 0);
	pso = pp_fdopen(pu[1]);
	ASSERT_TRUE(pso);
	t_watchdog(5, "UDP splices, memory and file");
	ASSERT_EQ(write(a[1], "head:", 5), 5);
	ASSERT_EQ(pp_write(p[1], "head:", 5), 5);
	ASSERT_SAME(splice(fd, &ko, a[1], NULL, 1000, 0), pp_splice(pf, &po, p[1], NULL, 1000, 0));
	ASSERT_SAME(splice(a[0], NULL, ku[1], NULL, 5000, 0), pp_splice(p[0], NULL, pso, NULL, 5000, 0));
	ASSERT_SAME_RECV(ku[0], pu[0]);
	ASSERT_SAME_RECV(ku[0], pu[0]);
	t_watchdog(0, NULL);
	pp_close(pso);
	pp_close(pf);
	close(fd); unlink(path);
	close(ku[0]); close(ku[1]); close(pu[0]); close(pu[1]); close(a[0]); close(a[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

/* A pipe into a kernel pipe whose write end has O_APPEND: a pipe, so it splices. */
static int test_append_kpipe(void)
{
	int a[2], ko[2], pk[2];
	struct pp_file *p[2], *po;

	t_kpipe2(a, 0);
	t_pipe2(p, 0);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	ASSERT_EQ(fcntl(ko[1], F_SETFL, O_APPEND), 0);
	ASSERT_EQ(fcntl(pk[1], F_SETFL, O_APPEND), 0);
	po = pp_fdopen(pk[1]);
	ASSERT_TRUE(po);
	ASSERT_EQ(write(a[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);
	t_watchdog(5, "splice into an O_APPEND kernel pipe");
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, 100, 0), pp_splice(p[0], NULL, po, NULL, 100, 0));
	t_watchdog(0, NULL);
	pp_close(po);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* len SIZE_MAX between a pipe and a kernel pipe, both ways: clamped, not EINVAL. */
static int test_size_max_kpipe(void)
{
	int a[2], ko[2], pk[2], ks[2], ps[2], kd[2];
	struct pp_file *p[2], *po, *pin;

	t_kpipe2(a, 0);
	t_pipe2(p, 0);
	t_kpipe2(ko, 0);
	t_kpipe2(pk, 0);
	po = pp_fdopen(pk[1]);
	ASSERT_TRUE(po);
	ASSERT_EQ(write(a[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);
	t_watchdog(5, "splices of SIZE_MAX");
	ASSERT_SAME(splice(a[0], NULL, ko[1], NULL, SIZE_MAX, 0),
		    pp_splice(p[0], NULL, po, NULL, SIZE_MAX, 0));
	/* And back: kernel pipe -> pipe. */
	t_kpipe2(kd, 0);
	pin = pp_fdopen(pk[0]);
	ASSERT_TRUE(pin);
	ASSERT_SAME(splice(ko[0], NULL, kd[1], NULL, SIZE_MAX, 0),
		    pp_splice(pin, NULL, p[1], NULL, SIZE_MAX, 0));
	ASSERT_SAME_READ(kd[0], p[0], 100);
	/* A socket is a file here: rw_verify_area refuses it. */
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, ks), 0);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, ps), 0);
	ASSERT_EQ(write(a[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(p[1], "hello", 5), 5);
	pp_close(po);
	po = pp_fdopen(ps[1]);
	ASSERT_TRUE(po);
	ASSERT_SAME(splice(a[0], NULL, ks[1], NULL, SIZE_MAX, 0),
		    pp_splice(p[0], NULL, po, NULL, SIZE_MAX, 0));
	t_watchdog(0, NULL);
	pp_close(po);
	pp_close(pin);
	close(a[0]); close(a[1]); close(ko[0]); close(ko[1]); close(pk[0]); close(pk[1]);
	close(kd[0]); close(kd[1]);
	close(ks[0]); close(ks[1]); close(ps[0]); close(ps[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * Packets of an O_DIRECT kernel pipe spliced into a pipe: whole ones
 * moved, one split by len; each read then stops at a packet's end, as
 * after splice_pipe_to_pipe, which keeps PIPE_BUF_FLAG_PACKET.
 */
static int test_odirect_kpipe_packets(void)
{
	int ks[2], ps[2], ko[2];
	struct pp_file *p[2], *pin;
	unsigned char big[PG];

	t_kpipe2(ks, O_DIRECT);
	t_kpipe2(ps, O_DIRECT);
	t_kpipe2(ko, 0);
	t_pipe2(p, 0);
	pin = pp_fdopen(ps[0]);
	ASSERT_TRUE(pin);
	t_fill(big, sizeof(big), 0, 13);
	for (int i = 0; i < 2; i++) {
		int fd = i ? ps[1] : ks[1];

		ASSERT_EQ(write(fd, "abc", 3), 3);
		ASSERT_EQ(write(fd, "defg", 4), 4);
		ASSERT_EQ(write(fd, big, PG), PG);
		ASSERT_EQ(write(fd, "hijkl", 5), 5);
	}
	t_watchdog(5, "splices from an O_DIRECT kernel pipe");
	/* Two whole packets and two bytes of the big one. */
	ASSERT_SAME(splice(ks[0], NULL, ko[1], NULL, 9, 0), pp_splice(pin, NULL, p[1], NULL, 9, 0));
	ASSERT_SAME(splice(ks[0], NULL, ko[1], NULL, 2 * PG, 0),
		    pp_splice(pin, NULL, p[1], NULL, 2 * PG, 0));
	/* abc, defg, 2 bytes, the 4094 left of the big one, hijkl: a read each. */
	for (int i = 0; i < 5; i++)
		ASSERT_SAME_READ(ko[0], p[0], 2 * PG);
	ASSERT_SAME(t_kfionread(ko[0]), t_fionread(p[0]));
	t_watchdog(0, NULL);
	pp_close(pin);
	close(ks[0]); close(ks[1]); close(ps[0]); close(ps[1]); close(ko[0]); close(ko[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_kpipe_in_flag),
		T_SUBTEST(test_kpipe_in_onb),
		T_SUBTEST(test_unix_in_flag),
		T_SUBTEST(test_unix_in_onb),
		T_SUBTEST(test_kpipe_out_flag),
		T_SUBTEST(test_kpipe_out_onb),
		T_SUBTEST(test_kpipe_part_block),
		T_SUBTEST(test_kpipe_part_onb),
		T_SUBTEST(test_sock_out_flag),
		T_SUBTEST(test_sock_out_onb),
		T_SUBTEST(test_udp_more),
		T_SUBTEST(test_udp_mixed),
		T_SUBTEST(test_append_kpipe),
		T_SUBTEST(test_size_max_kpipe),
		T_SUBTEST(test_odirect_kpipe_packets),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
