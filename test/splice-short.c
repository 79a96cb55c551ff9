// SPDX-License-Identifier: MIT
/*
 * Description: short transfers and EOF of pp_splice(), compared with
 * splice(2) (issue 3 §2, reference §3.4 and §3.11): a file splice is capped
 * to the free slots, one page per buffer (64 KiB from offset 100 into an
 * empty default pipe queues 65436 bytes); sixteen one-byte splices fill a
 * default pipe and the seventeenth, non-blocking, is EAGAIN; EOF is 0; an
 * empty pipe with no writers gives 0; SPLICE_F_NONBLOCK and O_NONBLOCK act
 * on the pipe side only (a TCP source still blocks).
 */
#include <sys/socket.h>

#include "helpers.h"

#define FLEN	(1 << 20)

struct env {
	char path[64];
	int kfd, pfd;
	struct pp_file *pf;
	int k[2];
	struct pp_file *p[2];
};

static void env_init(struct env *e, int pipe_flags)
{
	e->kfd = t_tmpfile(NULL, FLEN, 11, e->path);
	e->pfd = open(e->path, O_RDONLY);
	ASSERT_TRUE(e->pfd >= 0);
	e->pf = pp_fdopen(e->pfd);
	ASSERT_TRUE(e->pf != NULL);
	t_kpipe2(e->k, pipe_flags);
	t_pipe2(e->p, pipe_flags);
}

static void env_fini(struct env *e)
{
	pp_close(e->pf);
	close(e->kfd);
	close(e->pfd);
	unlink(e->path);
	close(e->k[0]); close(e->k[1]);
	pp_close(e->p[0]); pp_close(e->p[1]);
}

static int test_64k_from_100(void)
{
	struct env e;
	off_t ko = 100, po = 100;

	env_init(&e, 0);
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 65536, 0), pp_splice(e.pf, &po, e.p[1], NULL, 65536, 0));
	ASSERT_EQ(po, 65536);
	ASSERT_EQ(ko, po);
	/* Full now: non-blocking EAGAIN on both. */
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 1, SPLICE_F_NONBLOCK),
		    pp_splice(e.pf, &po, e.p[1], NULL, 1, SPLICE_F_NONBLOCK));
	ASSERT_SAME_READ(e.k[0], e.p[0], 65536);
	env_fini(&e);
	{
		/* Asking for much more than fits: capped to 16 pages. */
		env_init(&e, 0);
		ASSERT_SAME(splice(e.kfd, NULL, e.k[1], NULL, FLEN, 0), pp_splice(e.pf, NULL, e.p[1], NULL, FLEN, 0));
		ASSERT_EQ(lseek(e.pfd, 0, SEEK_CUR), 65536);
		ASSERT_SAME_READ(e.k[0], e.p[0], 65536);
		env_fini(&e);
	}
	return T_EXIT_PASS;
}

static int test_capped_by_free_slots(void)
{
	struct env e;

	env_init(&e, 0);
	/* One slot taken by a write: 15 pages remain. */
	ASSERT_EQ(write(e.k[1], "w", 1), 1);
	ASSERT_EQ(pp_write(e.p[1], "w", 1), 1);
	ASSERT_SAME(splice(e.kfd, NULL, e.k[1], NULL, FLEN, 0), pp_splice(e.pf, NULL, e.p[1], NULL, FLEN, 0));
	ASSERT_EQ(lseek(e.pfd, 0, SEEK_CUR), 15 * 4096);
	ASSERT_SAME_READ(e.k[0], e.p[0], FLEN);
	/* A bigger pipe takes more. */
	ASSERT_SAME(fcntl(e.k[1], F_SETPIPE_SZ, 256 * 1024), pp_fcntl(e.p[1], F_SETPIPE_SZ, 256 * 1024));
	ASSERT_SAME(splice(e.kfd, NULL, e.k[1], NULL, FLEN, 0), pp_splice(e.pf, NULL, e.p[1], NULL, FLEN, 0));
	ASSERT_SAME_READ(e.k[0], e.p[0], FLEN);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_one_byte_splices(void)
{
	struct env e;
	off_t ko = 0, po = 0;

	env_init(&e, 0);
	/* File buffers are never merged: one slot each. */
	for (int i = 0; i < 16; i++)
		ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 1, 0), pp_splice(e.pf, &po, e.p[1], NULL, 1, 0));
	ASSERT_EQ(po, 16);
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 1, SPLICE_F_NONBLOCK),
		    pp_splice(e.pf, &po, e.p[1], NULL, 1, SPLICE_F_NONBLOCK));
	ASSERT_ERRNO(pp_splice(e.pf, &po, e.p[1], NULL, 1, SPLICE_F_NONBLOCK), EAGAIN);
	ASSERT_EQ(po, 16);
	/* O_NONBLOCK on the pipe end does the same. */
	ASSERT_SAME(fcntl(e.k[1], F_SETFL, O_NONBLOCK), pp_fcntl(e.p[1], F_SETFL, O_NONBLOCK));
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 1, 0), pp_splice(e.pf, &po, e.p[1], NULL, 1, 0));
	/* A write finds no slot either (16 one-byte buffers that are not mergeable). */
	ASSERT_SAME(write(e.k[1], "z", 1), pp_write(e.p[1], "z", 1));
	ASSERT_SAME_READ(e.k[0], e.p[0], 100);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_full_pipe_at_eof(void)
{
	struct env e;
	off_t ko = FLEN, po = FLEN;

	env_init(&e, 0);
	for (int i = 0; i < 16; i++) {
		off_t a = i, b = i;

		ASSERT_SAME(splice(e.kfd, &a, e.k[1], NULL, 1, 0), pp_splice(e.pf, &b, e.p[1], NULL, 1, 0));
	}
	/* Room is waited for before the file is looked at: EAGAIN, not 0. */
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 1, SPLICE_F_NONBLOCK),
		    pp_splice(e.pf, &po, e.p[1], NULL, 1, SPLICE_F_NONBLOCK));
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_eof(void)
{
	struct env e;
	off_t ko = FLEN, po = FLEN;

	env_init(&e, 0);
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 100, 0), pp_splice(e.pf, &po, e.p[1], NULL, 100, 0));
	ASSERT_EQ(pp_splice(e.pf, &po, e.p[1], NULL, 100, 0), 0);
	ko = po = FLEN - 1;
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 100, 0), pp_splice(e.pf, &po, e.p[1], NULL, 100, 0));
	ASSERT_SAME(splice(e.kfd, &ko, e.k[1], NULL, 100, 0), pp_splice(e.pf, &po, e.p[1], NULL, 100, 0));
	ASSERT_EQ(po, FLEN);
	/* An empty file. */
	{
		char p2[64];
		int ef = t_tmpfile(NULL, 0, 0, p2);
		struct pp_file *pef = pp_fdopen(ef);

		ASSERT_SAME(splice(ef, NULL, e.k[1], NULL, 100, 0), pp_splice(pef, NULL, e.p[1], NULL, 100, 0));
		ASSERT_SAME(splice(ef, NULL, e.k[1], NULL, 100, SPLICE_F_NONBLOCK),
			    pp_splice(pef, NULL, e.p[1], NULL, 100, SPLICE_F_NONBLOCK));
		pp_close(pef);
		close(ef);
		unlink(p2);
	}
	ASSERT_SAME_READ(e.k[0], e.p[0], 100);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_from_pipe_short_and_eof(void)
{
	struct env e;
	char p2[64];
	int of = t_tmpfile(NULL, 0, 0, p2);
	struct pp_file *pof = pp_fdopen(of);
	off_t ko = 0, po = 0;

	env_init(&e, 0);
	/* Short: only what is there. */
	ASSERT_EQ(write(e.k[1], "0123456789", 10), 10);
	ASSERT_EQ(pp_write(e.p[1], "0123456789", 10), 10);
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 1000, 0), pp_splice(e.p[0], NULL, pof, &po, 1000, 0));
	ASSERT_EQ(ko, po);
	/* Empty with a writer: SPLICE_F_NONBLOCK or O_NONBLOCK give EAGAIN. */
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 1000, SPLICE_F_NONBLOCK),
		    pp_splice(e.p[0], NULL, pof, &po, 1000, SPLICE_F_NONBLOCK));
	ASSERT_ERRNO(pp_splice(e.p[0], NULL, pof, &po, 1000, SPLICE_F_NONBLOCK), EAGAIN);
	ASSERT_SAME(fcntl(e.k[0], F_SETFL, O_NONBLOCK), pp_fcntl(e.p[0], F_SETFL, O_NONBLOCK));
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 1000, 0), pp_splice(e.p[0], NULL, pof, &po, 1000, 0));
	ASSERT_SAME(fcntl(e.k[0], F_SETFL, 0), pp_fcntl(e.p[0], F_SETFL, 0));
	/* Several buffers, asked for less than they hold. */
	for (int i = 0; i < 5; i++) {
		char b[3000];

		t_fill(b, sizeof(b), (unsigned long long)i * 3000, 2);
		ASSERT_EQ(write(e.k[1], b, sizeof(b)), 3000);
		ASSERT_EQ(pp_write(e.p[1], b, sizeof(b)), 3000);
	}
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 7777, 0), pp_splice(e.p[0], NULL, pof, &po, 7777, 0));
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 100000, 0), pp_splice(e.p[0], NULL, pof, &po, 100000, 0));
	/* Empty, no writers: 0, even non-blocking. */
	close(e.k[1]);
	e.k[1] = -1;
	pp_close(e.p[1]);
	e.p[1] = NULL;
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 1000, 0), pp_splice(e.p[0], NULL, pof, &po, 1000, 0));
	ASSERT_SAME(splice(e.k[0], NULL, of, &ko, 1000, SPLICE_F_NONBLOCK),
		    pp_splice(e.p[0], NULL, pof, &po, 1000, SPLICE_F_NONBLOCK));
	ASSERT_EQ(pp_splice(e.p[0], NULL, pof, &po, 1000, 0), 0);
	ASSERT_EQ(po, 10 + 15000);
	/* Pipe to pipe: empty with no writers is 0 too. */
	{
		int k2[2];
		struct pp_file *q[2];

		t_kpipe2(k2, 0);
		t_pipe2(q, 0);
		ASSERT_SAME(splice(e.k[0], NULL, k2[1], NULL, 1000, 0), pp_splice(e.p[0], NULL, q[1], NULL, 1000, 0));
		close(k2[0]); close(k2[1]); pp_close(q[0]); pp_close(q[1]);
	}
	pp_close(pof);
	close(of);
	unlink(p2);
	env_fini(&e);
	return T_EXIT_PASS;
}

struct feeder {
	int fd;
	int delay_ms;
};

static void *feed(void *arg)
{
	struct feeder *f = arg;

	t_sleep_ms(f->delay_ms);
	if (write(f->fd, "late data", 9) != 9)
		abort();
	return NULL;
}

/*
 * SPLICE_F_NONBLOCK and the pipe's O_NONBLOCK make only the pipe side
 * non-blocking: a TCP socket with no data yet still blocks, so the splice
 * returns the data that arrives later, not EAGAIN.  (Linux's Unix stream
 * sockets are an exception: unix_stream_splice_read takes SPLICE_F_NONBLOCK
 * as MSG_DONTWAIT; they are not compared here.)
 */
static int nonblock_pipe_side_only(int use_flag)
{
	struct pp_file *p[2], *ps;
	int k[2], s[2];
	unsigned int fl = use_flag ? SPLICE_F_NONBLOCK : 0;
	pthread_t th;
	struct feeder fd;
	char buf[64];

	t_kpipe2(k, use_flag ? 0 : O_NONBLOCK);
	t_pipe2(p, use_flag ? 0 : O_NONBLOCK);
	ASSERT_EQ(t_tcp_pair(s), 0);
	ps = pp_fdopen(s[0]);
	ASSERT_TRUE(ps != NULL);

	fd = (struct feeder){ s[1], 200 };
	ASSERT_EQ(pthread_create(&th, NULL, feed, &fd), 0);
	ASSERT_EQ(splice(s[0], NULL, k[1], NULL, 100, fl), 9);
	t_join(th, NULL, 10);
	ASSERT_EQ(read(k[0], buf, sizeof(buf)), 9);

	ASSERT_EQ(pthread_create(&th, NULL, feed, &fd), 0);
	ASSERT_EQ(pp_splice(ps, NULL, p[1], NULL, 100, fl), 9);
	t_join(th, NULL, 10);
	ASSERT_EQ(pp_read(p[0], buf, sizeof(buf)), 9);
	ASSERT_MEM_EQ(buf, "late data", 9);

	/* The socket's own O_NONBLOCK does make it EAGAIN, on both. */
	ASSERT_EQ(fcntl(s[0], F_SETFL, O_NONBLOCK), 0);
	ASSERT_SAME(splice(s[0], NULL, k[1], NULL, 100, fl), pp_splice(ps, NULL, p[1], NULL, 100, fl));
	ASSERT_ERRNO(pp_splice(ps, NULL, p[1], NULL, 100, fl), EAGAIN);

	pp_close(ps);
	close(s[0]); close(s[1]);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

static int test_splice_f_nonblock_pipe_side_only(void)
{
	return nonblock_pipe_side_only(1);
}

static int test_o_nonblock_pipe_side_only(void)
{
	return nonblock_pipe_side_only(0);
}

/* A socket source gives what it has: short, then the rest on the next call. */
static int test_socket_short(void)
{
	struct pp_file *p[2], *ps;
	int k[2], s[2], s2[2];
	char buf[100];

	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_EQ(t_tcp_pair(s), 0);
	ASSERT_EQ(t_tcp_pair(s2), 0);
	ps = pp_fdopen(s2[0]);
	ASSERT_EQ(write(s[1], "short", 5), 5);
	ASSERT_EQ(write(s2[1], "short", 5), 5);
	t_sleep_ms(20);	/* let loopback deliver */
	ASSERT_SAME(splice(s[0], NULL, k[1], NULL, 100000, 0), pp_splice(ps, NULL, p[1], NULL, 100000, 0));
	/* EOF: the peer shut down. */
	shutdown(s[1], SHUT_WR);
	shutdown(s2[1], SHUT_WR);
	ASSERT_SAME(splice(s[0], NULL, k[1], NULL, 100000, 0), pp_splice(ps, NULL, p[1], NULL, 100000, 0));
	ASSERT_EQ(pp_read(p[0], buf, sizeof(buf)), 5);
	ASSERT_MEM_EQ(buf, "short", 5);
	pp_close(ps);
	close(s[0]); close(s[1]); close(s2[0]); close(s2[1]);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_64k_from_100),
		T_SUBTEST(test_capped_by_free_slots),
		T_SUBTEST(test_one_byte_splices),
		T_SUBTEST(test_full_pipe_at_eof),
		T_SUBTEST(test_eof),
		T_SUBTEST(test_from_pipe_short_and_eof),
		T_SUBTEST(test_splice_f_nonblock_pipe_side_only),
		T_SUBTEST(test_o_nonblock_pipe_side_only),
		T_SUBTEST(test_socket_short),
	};

	return T_RUN_SUBTESTS(tests);
}
