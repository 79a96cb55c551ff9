// SPDX-License-Identifier: MIT
/*
 * Description: pagepipe to pagepipe splice (issue 3 §5, reference §3.7,
 * §4.2), each step compared with splice(2) between kernel pipes: whole
 * buffers move; a partly taken buffer is shared and the copy is never
 * merged into, so a write to either pipe after a partial splice never shows
 * in the other; EOF, EAGAIN (either end non-blocking) and EPIPE.  Two
 * threads splicing in opposite directions between the same two pipes never
 * deadlock (bounded by iterations and time, with a watchdog).
 */
#include <signal.h>
#include <stdatomic.h>

#include "helpers.h"

struct pp2 {
	int a[2], b[2];			/* kernel pipes A and B */
	struct pp_file *pa[2], *pb[2];	/* pagepipes A and B */
};

static void pp2_init(struct pp2 *e, int flags)
{
	t_kpipe2(e->a, flags);
	t_kpipe2(e->b, flags);
	t_pipe2(e->pa, flags);
	t_pipe2(e->pb, flags);
}

static void pp2_fini(struct pp2 *e)
{
	for (int i = 0; i < 2; i++) {
		if (e->a[i] >= 0) close(e->a[i]);
		if (e->b[i] >= 0) close(e->b[i]);
		if (e->pa[i]) pp_close(e->pa[i]);
		if (e->pb[i]) pp_close(e->pb[i]);
	}
}

static void write_both(struct pp2 *e, int to_b, const void *buf, size_t len)
{
	ASSERT_EQ(write(to_b ? e->b[1] : e->a[1], buf, len), (ssize_t)len);
	ASSERT_EQ(pp_write(to_b ? e->pb[1] : e->pa[1], buf, len), (ssize_t)len);
}

#define SPLICE_AB(len, fl) ASSERT_SAME(splice(e.a[0], NULL, e.b[1], NULL, (len), (fl)), \
				       pp_splice(e.pa[0], NULL, e.pb[1], NULL, (len), (fl)))
#define READ_A(n) ASSERT_SAME_READ(e.a[0], e.pa[0], (n))
#define READ_B(n) ASSERT_SAME_READ(e.b[0], e.pb[0], (n))

static int test_whole_buffers_move(void)
{
	struct pp2 e;
	unsigned char buf[3 * 4096];

	pp2_init(&e, 0);
	t_fill(buf, sizeof(buf), 0, 51);
	for (int i = 0; i < 3; i++)
		write_both(&e, 0, buf + i * 4096, 4096);
	SPLICE_AB(8192, 0);
	{
		int n;

		ASSERT_EQ(pp_ioctl(e.pa[0], FIONREAD, &n), 0);
		ASSERT_EQ(n, 4096);
		ASSERT_EQ(pp_ioctl(e.pb[0], FIONREAD, &n), 0);
		ASSERT_EQ(n, 8192);
	}
	/* A moved buffer the pipe owns alone may still be appended to: same bytes either way. */
	write_both(&e, 1, "tail", 4);
	READ_B(100000);
	READ_A(100000);
	/* A moved page that was written whole: then more whole moves and a read of all. */
	write_both(&e, 0, "ab", 2);
	SPLICE_AB(2, 0);
	write_both(&e, 1, "cd", 2);
	write_both(&e, 0, "ef", 2);
	READ_B(100);
	READ_A(100);
	pp2_fini(&e);
	return T_EXIT_PASS;
}

/* T-T1's splice twin: a partly taken buffer is shared, and neither side merges into the other. */
static int test_partial_shared_not_mergeable(void)
{
	struct pp2 e;

	pp2_init(&e, 0);
	write_both(&e, 0, "hello world", 11);
	SPLICE_AB(5, 0);
	write_both(&e, 1, "!", 1);	/* must not land inside A's " world" */
	write_both(&e, 0, "?", 1);	/* must not land inside B's "hello" */
	{
		char b[32];

		ASSERT_EQ(pp_read(e.pb[0], b, sizeof(b)), 6);
		ASSERT_MEM_EQ(b, "hello!", 6);
		ASSERT_EQ(pp_read(e.pa[0], b, sizeof(b)), 7);
		ASSERT_MEM_EQ(b, " world?", 7);
		ASSERT_EQ(read(e.b[0], b, sizeof(b)), 6);
		ASSERT_MEM_EQ(b, "hello!", 6);
		ASSERT_EQ(read(e.a[0], b, sizeof(b)), 7);
		ASSERT_MEM_EQ(b, " world?", 7);
	}
	/* Reads in the other order, and a whole-page variant. */
	{
		unsigned char pg[4096];

		t_fill(pg, sizeof(pg), 0, 52);
		write_both(&e, 0, pg, 3000);
		SPLICE_AB(1000, 0);
		write_both(&e, 1, "XYZ", 3);
		write_both(&e, 0, "abc", 3);
		READ_A(100000);
		READ_B(100000);
	}
	/* Several partial splices of one buffer, then writes to both. */
	write_both(&e, 0, "0123456789", 10);
	SPLICE_AB(3, 0);
	SPLICE_AB(3, 0);
	write_both(&e, 1, "BB", 2);
	write_both(&e, 0, "AA", 2);
	SPLICE_AB(1, 0);
	write_both(&e, 1, "CC", 2);
	READ_B(100);
	READ_A(100);
	pp2_fini(&e);
	return T_EXIT_PASS;
}

static int test_eof_eagain_epipe(void)
{
	struct pp2 e;

	pp2_init(&e, 0);
	/* Empty input with a writer: NONBLOCK flag, or O_NONBLOCK on either end. */
	SPLICE_AB(10, SPLICE_F_NONBLOCK);
	ASSERT_SAME(fcntl(e.b[1], F_SETFL, O_NONBLOCK), pp_fcntl(e.pb[1], F_SETFL, O_NONBLOCK));
	SPLICE_AB(10, 0);
	ASSERT_SAME(fcntl(e.b[1], F_SETFL, 0), pp_fcntl(e.pb[1], F_SETFL, 0));
	ASSERT_SAME(fcntl(e.a[0], F_SETFL, O_NONBLOCK), pp_fcntl(e.pa[0], F_SETFL, O_NONBLOCK));
	SPLICE_AB(10, 0);
	ASSERT_SAME(fcntl(e.a[0], F_SETFL, 0), pp_fcntl(e.pa[0], F_SETFL, 0));
	/* Output full, non-blocking: EAGAIN. */
	{
		off_t zero = 0;
		char path[64];
		int fd = t_tmpfile(NULL, 100, 53, path);
		struct pp_file *pf = pp_fdopen(fd);

		for (int i = 0; i < 16; i++) {
			off_t o = i;

			ASSERT_SAME(splice(fd, &o, e.b[1], NULL, 1, 0), pp_splice(pf, &zero, e.pb[1], NULL, 1, 0));
			zero = i + 1;
		}
		write_both(&e, 0, "xyz", 3);
		SPLICE_AB(3, SPLICE_F_NONBLOCK);
		ASSERT_SAME(fcntl(e.a[0], F_SETFL, O_NONBLOCK), pp_fcntl(e.pa[0], F_SETFL, O_NONBLOCK));
		SPLICE_AB(3, 0);
		ASSERT_SAME(fcntl(e.a[0], F_SETFL, 0), pp_fcntl(e.pa[0], F_SETFL, 0));
		READ_B(100);
		pp_close(pf);
		close(fd);
		unlink(path);
	}
	/* Short: only what the input has. */
	SPLICE_AB(1000, 0);
	READ_B(1000);
	/* EOF: input empty, no writers. */
	close(e.a[1]); e.a[1] = -1;
	pp_close(e.pa[1]); e.pa[1] = NULL;
	SPLICE_AB(10, 0);
	SPLICE_AB(10, SPLICE_F_NONBLOCK);
	pp2_fini(&e);

	/* EPIPE with SIGPIPE: output without readers, nothing consumed. */
	t_sigpipe_count_start();
	pp2_init(&e, 0);
	write_both(&e, 0, "abc", 3);
	close(e.b[0]); e.b[0] = -1;
	pp_close(e.pb[0]); e.pb[0] = NULL;
	SPLICE_AB(3, 0);
	ASSERT_EQ(t_sigpipe_count(), 2);
	READ_A(10);
	pp2_fini(&e);
	return T_EXIT_PASS;
}

/* Many buffers, random lengths, compared step by step. */
static int test_random_lengths(void)
{
	struct pp2 e;
	unsigned int seed = 12345;
	unsigned char buf[9000];
	unsigned long long wpos = 0;

	pp2_init(&e, O_NONBLOCK);
	for (int round = 0; round < 2000; round++) {
		unsigned int op = (seed = seed * 1103515245 + 12345) >> 16;
		size_t n = (seed >> 3) % 9000 + 1;

		switch (op % 4) {
		case 0:
			t_fill(buf, n, wpos, 54);
			ASSERT_SAME(write(e.a[1], buf, n), pp_write(e.pa[1], buf, n));
			wpos += n;
			break;
		case 1:
			SPLICE_AB(n, 0);
			break;
		case 2:
			ASSERT_SAME(write(e.b[1], buf, n % 100 + 1), pp_write(e.pb[1], buf, n % 100 + 1));
			break;
		default:
			if (op & 8)
				READ_B(n);
			else
				READ_A(n);
		}
	}
	pp2_fini(&e);
	return T_EXIT_PASS;
}

/* Two threads splicing in opposite directions between the same two pipes. */
struct dir_arg {
	struct pp_file *in, *out;
	atomic_int *stop;
	atomic_long moves;
	int blocking;
	int err;
};

static void *splicer(void *arg)
{
	struct dir_arg *d = arg;
	unsigned int seed = (unsigned int)(uintptr_t)d;

	while (!atomic_load(d->stop)) {
		ssize_t r;

		if (d->blocking) {
			r = pp_splice(d->in, NULL, d->out, NULL, 4096, 0);
		} else {
			seed = seed * 1103515245 + 12345;
			r = pp_splice(d->in, NULL, d->out, NULL, (seed >> 16) % 6000 + 1, SPLICE_F_NONBLOCK);
			if (r < 0 && errno == EAGAIN)
				continue;
		}
		if (r <= 0) {
			d->err = r < 0 ? errno : -1;
			break;
		}
		atomic_fetch_add(&d->moves, 1);
	}
	return NULL;
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: opposite-direction splice hung (deadlock)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(T_EXIT_FAIL);
	_exit(T_EXIT_FAIL);
}

static void opposite(int blocking)
{
	struct pp_file *a[2], *b[2];
	atomic_int stop = 0;
	struct dir_arg ab, ba;
	pthread_t t1, t2;
	long long start = t_now_ms();
	unsigned long long sum = 0, got_sum = 0;
	size_t total = 0, got = 0;
	unsigned char buf[65536];

	signal(SIGALRM, on_alarm);
	alarm(15);	/* watchdog: a deadlock fails the test, never hangs it */
	t_pipe2(a, 0);
	t_pipe2(b, 0);
	/* Four whole pages in each: never enough to fill both, so blocking splices always progress. */
	for (int i = 0; i < 4; i++) {
		t_fill(buf, 4096, (unsigned long long)i * 4096, 55);
		for (int k = 0; k < 4096; k++)
			sum += buf[k] * 2u;
		ASSERT_EQ(pp_write(a[1], buf, 4096), 4096);
		ASSERT_EQ(pp_write(b[1], buf, 4096), 4096);
		total += 8192;
	}
	ab = (struct dir_arg){ a[0], b[1], &stop, 0, blocking, 0 };
	ba = (struct dir_arg){ b[0], a[1], &stop, 0, blocking, 0 };
	ASSERT_EQ(pthread_create(&t1, NULL, splicer, &ab), 0);
	ASSERT_EQ(pthread_create(&t2, NULL, splicer, &ba), 0);
	while (t_now_ms() - start < 2000 && atomic_load(&ab.moves) + atomic_load(&ba.moves) < 200000)
		t_sleep_ms(10);
	atomic_store(&stop, 1);
	/*
	 * A blocking splicer may be waiting on an empty pipe: a whole page
	 * more in each wakes it, and then it sees stop.
	 */
	if (blocking) {
		memset(buf, 0, 4096);
		ASSERT_EQ(pp_write(a[1], buf, 4096), 4096);
		ASSERT_EQ(pp_write(b[1], buf, 4096), 4096);
		total += 8192;
	}
	t_join(t1, NULL, 10);
	t_join(t2, NULL, 10);
	alarm(0);
	ASSERT_EQ(ab.err, 0);
	ASSERT_EQ(ba.err, 0);
	ASSERT_TRUE(atomic_load(&ab.moves) > 0 && atomic_load(&ba.moves) > 0);
	/* Nothing lost or duplicated: the bytes and their sum are all there. */
	pp_close(a[1]);
	pp_close(b[1]);
	for (struct pp_file **p = (struct pp_file *[]){ a[0], b[0], NULL }; *p; p++) {
		ssize_t r;

		while ((r = pp_read(*p, buf, sizeof(buf))) > 0) {
			for (ssize_t k = 0; k < r; k++)
				got_sum += buf[k];
			got += (size_t)r;
		}
		ASSERT_EQ(r, 0);
	}
	ASSERT_EQ(got, total);
	ASSERT_EQ(got_sum, sum);
	pp_close(a[0]);
	pp_close(b[0]);
}

static int test_opposite_directions_blocking(void)
{
	opposite(1);
	return T_EXIT_PASS;
}

static int test_opposite_directions_split(void)
{
	opposite(0);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_whole_buffers_move),
		T_SUBTEST(test_partial_shared_not_mergeable),
		T_SUBTEST(test_eof_eagain_epipe),
		T_SUBTEST(test_random_lengths),
		T_SUBTEST(test_opposite_directions_blocking),
		T_SUBTEST(test_opposite_directions_split),
	};

	return T_RUN_SUBTESTS(tests);
}
