// SPDX-License-Identifier: MIT
/*
 * Description: pp_tee() as tee(2), each step compared with the kernel
 * (issue 3 §5, reference §3.8, §4.2): tee shares without consuming (both
 * pipes read the same bytes, the input stays readable: T-T2); a later write
 * to either pipe never shows in the other (T-T1, the 2019 merge-aliasing
 * bug, and its reverse); partial lengths; EAGAIN on a full output or an
 * empty input when non-blocking; 0 at EOF; EPIPE; argument errors in the
 * kernel's order (flags, len 0, EBADF, not a pipe, same pipe).  Two threads
 * teeing in opposite directions never deadlock (T-LOCK1, bounded).
 */
#include <signal.h>
#include <stdatomic.h>

#include "helpers.h"

struct env {
	int a[2], b[2];
	struct pp_file *pa[2], *pb[2];
};

static void env_init(struct env *e, int flags)
{
	t_kpipe2(e->a, flags);
	t_kpipe2(e->b, flags);
	t_pipe2(e->pa, flags);
	t_pipe2(e->pb, flags);
}

static void env_fini(struct env *e)
{
	for (int i = 0; i < 2; i++) {
		if (e->a[i] >= 0) close(e->a[i]);
		if (e->b[i] >= 0) close(e->b[i]);
		if (e->pa[i]) pp_close(e->pa[i]);
		if (e->pb[i]) pp_close(e->pb[i]);
	}
}

#define WRITE_A(s, n) do { ASSERT_EQ(write(e.a[1], (s), (n)), (ssize_t)(n)); \
			   ASSERT_EQ(pp_write(e.pa[1], (s), (n)), (ssize_t)(n)); } while (0)
#define WRITE_B(s, n) do { ASSERT_EQ(write(e.b[1], (s), (n)), (ssize_t)(n)); \
			   ASSERT_EQ(pp_write(e.pb[1], (s), (n)), (ssize_t)(n)); } while (0)
#define TEE_AB(len, fl) ASSERT_SAME(tee(e.a[0], e.b[1], (len), (fl)), pp_tee(e.pa[0], e.pb[1], (len), (fl)))
#define READ_A(n) ASSERT_SAME_READ(e.a[0], e.pa[0], (n))
#define READ_B(n) ASSERT_SAME_READ(e.b[0], e.pb[0], (n))

static int test_shares_without_consuming(void)
{
	struct env e;
	unsigned char src[10000], x[10000], y[10000];
	int n;

	env_init(&e, 0);
	t_fill(src, sizeof(src), 0, 61);
	WRITE_A(src, sizeof(src));
	TEE_AB(sizeof(src), 0);
	/* The input is untouched. */
	ASSERT_EQ(pp_ioctl(e.pa[0], FIONREAD, &n), 0);
	ASSERT_EQ(n, 10000);
	/* Tee again: the same bytes once more. */
	TEE_AB(sizeof(src), 0);
	ASSERT_EQ(t_read_full(e.pb[0], x, sizeof(x)), 10000);
	ASSERT_EQ(t_read_full(e.pb[0], y, sizeof(y)), 10000);
	ASSERT_MEM_EQ(x, src, sizeof(src));
	ASSERT_MEM_EQ(y, src, sizeof(src));
	ASSERT_EQ(t_read_full(e.pa[0], x, sizeof(x)), 10000);
	ASSERT_MEM_EQ(x, src, sizeof(src));
	/* Same on the kernel side. */
	ASSERT_EQ(read(e.b[0], y, sizeof(y)), 10000);
	ASSERT_MEM_EQ(y, src, sizeof(src));
	ASSERT_EQ(read(e.b[0], y, sizeof(y)), 10000);
	ASSERT_EQ(read(e.a[0], y, sizeof(y)), 10000);
	/* Partial lengths, from the front. */
	WRITE_A(src, 5000);
	TEE_AB(1, 0);
	TEE_AB(4097, 0);
	TEE_AB(100000, 0);
	READ_B(100000);
	READ_A(100000);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_t_t1(void)
{
	struct env e;
	char b[16];

	env_init(&e, 0);
	WRITE_A("abcd", 4);
	TEE_AB(2, 0);
	WRITE_B("xx", 2);
	ASSERT_EQ(pp_read(e.pa[0], b, 4), 4);
	ASSERT_MEM_EQ(b, "abcd", 4);		/* the bug gave "abxx" */
	ASSERT_EQ(read(e.a[0], b, 4), 4);
	ASSERT_MEM_EQ(b, "abcd", 4);
	READ_B(16);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_t_t1_reverse(void)
{
	struct env e;
	char b[16];

	env_init(&e, 0);
	WRITE_A("abcd", 4);
	TEE_AB(4, 0);
	WRITE_A("yy", 2);	/* appended in A; B's copy ends at "d" */
	WRITE_B("zz", 2);
	ASSERT_EQ(pp_read(e.pb[0], b, sizeof(b)), 6);
	ASSERT_MEM_EQ(b, "abcdzz", 6);
	ASSERT_EQ(read(e.b[0], b, sizeof(b)), 6);
	ASSERT_MEM_EQ(b, "abcdzz", 6);
	ASSERT_EQ(pp_read(e.pa[0], b, sizeof(b)), 6);
	ASSERT_MEM_EQ(b, "abcdyy", 6);
	ASSERT_EQ(read(e.a[0], b, sizeof(b)), 6);
	ASSERT_MEM_EQ(b, "abcdyy", 6);
	/* Tee, read the input away, then write to it: the copy stays. */
	WRITE_A("1234", 4);
	TEE_AB(4, 0);
	READ_A(4);
	WRITE_A("5678", 4);
	WRITE_B("9", 1);
	READ_B(16);
	READ_A(16);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_nonblock_eof_epipe(void)
{
	struct env e;
	char path[64];
	int fd;
	struct pp_file *pf;

	env_init(&e, 0);
	/* Empty input with a writer. */
	TEE_AB(10, SPLICE_F_NONBLOCK);
	ASSERT_ERRNO(pp_tee(e.pa[0], e.pb[1], 10, SPLICE_F_NONBLOCK), EAGAIN);
	ASSERT_SAME(fcntl(e.a[0], F_SETFL, O_NONBLOCK), pp_fcntl(e.pa[0], F_SETFL, O_NONBLOCK));
	TEE_AB(10, 0);
	ASSERT_SAME(fcntl(e.a[0], F_SETFL, 0), pp_fcntl(e.pa[0], F_SETFL, 0));
	ASSERT_SAME(fcntl(e.b[1], F_SETFL, O_NONBLOCK), pp_fcntl(e.pb[1], F_SETFL, O_NONBLOCK));
	TEE_AB(10, 0);
	ASSERT_SAME(fcntl(e.b[1], F_SETFL, 0), pp_fcntl(e.pb[1], F_SETFL, 0));
	/* A full output: fill B with 16 unmergeable one-byte buffers. */
	fd = t_tmpfile(NULL, 100, 62, path);
	pf = pp_fdopen(fd);
	for (int i = 0; i < 16; i++) {
		off_t ko = i, po = i;

		ASSERT_SAME(splice(fd, &ko, e.b[1], NULL, 1, 0), pp_splice(pf, &po, e.pb[1], NULL, 1, 0));
	}
	WRITE_A("data", 4);
	TEE_AB(4, SPLICE_F_NONBLOCK);
	ASSERT_ERRNO(pp_tee(e.pa[0], e.pb[1], 4, SPLICE_F_NONBLOCK), EAGAIN);
	ASSERT_SAME(fcntl(e.a[0], F_SETFL, O_NONBLOCK), pp_fcntl(e.pa[0], F_SETFL, O_NONBLOCK));
	TEE_AB(4, 0);
	ASSERT_SAME(fcntl(e.a[0], F_SETFL, 0), pp_fcntl(e.pa[0], F_SETFL, 0));
	READ_B(100);
	READ_A(100);
	/* EOF: empty input, no writers, even non-blocking. */
	close(e.a[1]); e.a[1] = -1;
	pp_close(e.pa[1]); e.pa[1] = NULL;
	TEE_AB(10, 0);
	TEE_AB(10, SPLICE_F_NONBLOCK);
	pp_close(pf);
	close(fd);
	unlink(path);
	env_fini(&e);

	/* EPIPE with SIGPIPE, nothing consumed. */
	t_sigpipe_count_start();
	env_init(&e, 0);
	WRITE_A("data", 4);
	close(e.b[0]); e.b[0] = -1;
	pp_close(e.pb[0]); e.pb[0] = NULL;
	TEE_AB(4, 0);
	ASSERT_EQ(t_sigpipe_count(), 2);
	READ_A(10);
	env_fini(&e);
	return T_EXIT_PASS;
}

static int test_arg_errors(void)
{
	struct env e;
	char path[64];
	int fd = t_tmpfile(NULL, 100, 63, path);
	struct pp_file *pf = pp_fdopen(fd);

	env_init(&e, 0);
	WRITE_A("data", 4);
	/* Same pipe. */
	ASSERT_SAME(tee(e.a[0], e.a[1], 4, 0), pp_tee(e.pa[0], e.pa[1], 4, 0));
	ASSERT_ERRNO(pp_tee(e.pa[0], e.pa[1], 4, 0), EINVAL);
	/* Not a pipe, either side. */
	ASSERT_SAME(tee(fd, e.b[1], 4, 0), pp_tee(pf, e.pb[1], 4, 0));
	ASSERT_ERRNO(pp_tee(pf, e.pb[1], 4, 0), EINVAL);
	ASSERT_SAME(tee(e.a[0], fd, 4, 0), pp_tee(e.pa[0], pf, 4, 0));
	/* A kernel pipe with a pagepipe: not a pagepipe pair. */
	{
		struct pp_file *kb1 = pp_fdopen(e.b[1]);

		ASSERT_ERRNO(pp_tee(e.pa[0], kb1, 4, 0), EINVAL);
		pp_close(kb1);
	}
	/* Flags: EINVAL first, even with len 0 or bad descriptors. */
	ASSERT_SAME(tee(e.a[0], e.b[1], 4, 0x10), pp_tee(e.pa[0], e.pb[1], 4, 0x10));
	ASSERT_SAME(tee(e.a[0], e.b[1], 0, 0x10), pp_tee(e.pa[0], e.pb[1], 0, 0x10));
	ASSERT_SAME(tee(-1, -1, 4, 0x10), pp_tee(NULL, NULL, 4, 0x10));
	/* len 0: 0 before the descriptors are looked at. */
	ASSERT_SAME(tee(e.a[0], e.a[1], 0, 0), pp_tee(e.pa[0], e.pa[1], 0, 0));
	ASSERT_SAME(tee(-1, -1, 0, 0), pp_tee(NULL, NULL, 0, 0));
	/* Bad descriptors, wrong modes. */
	ASSERT_SAME(tee(-1, e.b[1], 4, 0), pp_tee(NULL, e.pb[1], 4, 0));
	ASSERT_SAME(tee(e.a[1], e.b[1], 4, 0), pp_tee(e.pa[1], e.pb[1], 4, 0));
	ASSERT_SAME(tee(e.a[0], e.b[0], 4, 0), pp_tee(e.pa[0], e.pb[0], 4, 0));
	/* Mode before "same pipe". */
	ASSERT_SAME(tee(e.a[1], e.a[0], 4, 0), pp_tee(e.pa[1], e.pa[0], 4, 0));
	/* Mode before "not a pipe": an O_WRONLY file as input. */
	{
		int wo = open(path, O_WRONLY);
		struct pp_file *pwo = pp_fdopen(wo);

		ASSERT_SAME(tee(wo, e.b[1], 4, 0), pp_tee(pwo, e.pb[1], 4, 0));
		pp_close(pwo);
		close(wo);
	}
	/* Every defined flag is accepted. */
	TEE_AB(4, SPLICE_F_MOVE | SPLICE_F_MORE | SPLICE_F_GIFT);
	READ_B(10);
	READ_A(10);
	pp_close(pf);
	close(fd);
	unlink(path);
	env_fini(&e);
	return T_EXIT_PASS;
}

/* tee(2) through pp_tee on two OS descriptors: the kernel's own tee. */
static int test_kernel_passthrough(void)
{
	int a[2], b[2], c[2], d[2];
	struct pp_file *pc0, *pd1;

	t_kpipe2(a, 0); t_kpipe2(b, 0); t_kpipe2(c, 0); t_kpipe2(d, 0);
	pc0 = pp_fdopen(c[0]);
	pd1 = pp_fdopen(d[1]);
	ASSERT_EQ(write(a[1], "kernel", 6), 6);
	ASSERT_EQ(write(c[1], "kernel", 6), 6);
	ASSERT_SAME(tee(a[0], b[1], 6, 0), pp_tee(pc0, pd1, 6, 0));
	{
		struct pp_file *pc1 = pp_fdopen(c[1]);

		ASSERT_SAME(tee(a[0], a[1], 6, 0), pp_tee(pc0, pc1, 6, 0));
		pp_close(pc1);
	}
	{
		char x[8], y[8];

		ASSERT_EQ(read(b[0], x, 8), 6);
		ASSERT_EQ(read(d[0], y, 8), 6);
		ASSERT_MEM_EQ(x, y, 6);
	}
	pp_close(pc0); pp_close(pd1);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	close(c[0]); close(c[1]); close(d[0]); close(d[1]);
	return T_EXIT_PASS;
}

/*
 * T-LOCK1: thread 1 tees A -> B and reads one byte of B; thread 2 tees
 * B -> A and reads one byte of A.  Each pipe always holds at least one byte
 * and at most a few buffers, so blocking tees always progress: a hang is a
 * deadlock.
 */
struct tee_arg {
	struct pp_file *in, *out, *drain;
	atomic_int *stop;
	atomic_long n;
	int err;
};

static void *teer(void *arg)
{
	struct tee_arg *t = arg;
	char c;

	while (!atomic_load(t->stop)) {
		ssize_t r = pp_tee(t->in, t->out, 1, 0);

		if (r != 1) {
			t->err = r < 0 ? errno : -1;
			break;
		}
		if (pp_read(t->drain, &c, 1) != 1) {
			t->err = -2;
			break;
		}
		atomic_fetch_add(&t->n, 1);
	}
	return NULL;
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: opposite-direction tee hung (deadlock)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(T_EXIT_FAIL);
	_exit(T_EXIT_FAIL);
}

static int test_opposite_directions(void)
{
	struct pp_file *a[2], *b[2];
	atomic_int stop = 0;
	struct tee_arg ab, ba;
	pthread_t t1, t2;
	long long start = t_now_ms();

	signal(SIGALRM, on_alarm);
	alarm(15);
	t_pipe2(a, 0);
	t_pipe2(b, 0);
	ASSERT_EQ(pp_write(a[1], "a", 1), 1);
	ASSERT_EQ(pp_write(b[1], "b", 1), 1);
	ab = (struct tee_arg){ a[0], b[1], b[0], &stop, 0, 0 };
	ba = (struct tee_arg){ b[0], a[1], a[0], &stop, 0, 0 };
	ASSERT_EQ(pthread_create(&t1, NULL, teer, &ab), 0);
	ASSERT_EQ(pthread_create(&t2, NULL, teer, &ba), 0);
	while (t_now_ms() - start < 2000 && atomic_load(&ab.n) + atomic_load(&ba.n) < 200000)
		t_sleep_ms(10);
	atomic_store(&stop, 1);
	t_join(t1, NULL, 10);
	t_join(t2, NULL, 10);
	alarm(0);
	ASSERT_EQ(ab.err, 0);
	ASSERT_EQ(ba.err, 0);
	ASSERT_TRUE(atomic_load(&ab.n) > 0 && atomic_load(&ba.n) > 0);
	/* Each pipe still holds exactly its one byte. */
	{
		int na, nb;

		ASSERT_EQ(pp_ioctl(a[0], FIONREAD, &na), 0);
		ASSERT_EQ(pp_ioctl(b[0], FIONREAD, &nb), 0);
		ASSERT_EQ(na, 1);
		ASSERT_EQ(nb, 1);
	}
	pp_close(a[0]); pp_close(a[1]); pp_close(b[0]); pp_close(b[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_shares_without_consuming),
		T_SUBTEST(test_t_t1),
		T_SUBTEST(test_t_t1_reverse),
		T_SUBTEST(test_nonblock_eof_epipe),
		T_SUBTEST(test_arg_errors),
		T_SUBTEST(test_kernel_passthrough),
		T_SUBTEST(test_opposite_directions),
	};

	return T_RUN_SUBTESTS(tests);
}
