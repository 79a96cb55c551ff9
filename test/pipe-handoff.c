// SPDX-License-Identifier: MIT
/*
 * Description: writes that meet a reader already waiting.  A pagepipe hands
 * such a write straight into the reader's buffer when the whole write fits
 * (pipe.c, direct handoff), and a waiter whose peer shares its CPU yields
 * instead of sleeping; neither may change what a caller sees.  Each case
 * runs the same steps against a kernel pipe, with a reader thread blocked
 * in read(2) or pp_read, and compares counts, errno, bytes and FIONREAD:
 * writes smaller than, equal to and larger than the reader's buffer,
 * scattered buffers on both sides, a reader buffer that faults, a write
 * larger than the pipe, and packets.  Then long streams with every thread
 * pinned to one CPU, where nothing moves unless a waiter gives the CPU up.
 */
#include "helpers.h"
#include "internal.h"

#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#define CAP	65536

/*
 * A reader thread: one readv on a kernel pipe or a pagepipe, then, if
 * rest_len is set, plain reads until rest_len bytes in all are at rest.
 * Named test_* because it hands the kernel a NULL segment on purpose
 * (reader_fault): mk/valgrind.mk suppresses that report only there.
 */
struct reader {
	int kfd;
	struct pp_file *pf;
	struct iovec iov[4];
	int iovcnt;
	atomic_int tid;
	struct t_res res;
	unsigned char *rest;
	size_t rest_len;
};

static void *test_reader_main(void *arg)
{
	struct reader *r = arg;
	size_t have;

	atomic_store(&r->tid, (int)gettid());
	r->res = r->pf ? T_CALL(pp_readv(r->pf, r->iov, r->iovcnt))
		       : T_CALL(readv(r->kfd, r->iov, r->iovcnt));
	for (have = r->res.ret > 0 ? (size_t)r->res.ret : 0; have < r->rest_len; ) {
		ssize_t n = r->pf ? pp_read(r->pf, r->rest + have, r->rest_len - have)
				  : read(r->kfd, r->rest + have, r->rest_len - have);

		if (n <= 0)
			break;
		have += (size_t)n;
	}
	return NULL;
}

/* Start r and return once it waits in its read. */
static pthread_t start_reader(struct reader *r)
{
	pthread_t th;

	atomic_store(&r->tid, 0);
	ASSERT_EQ(pthread_create(&th, NULL, test_reader_main, r), 0);
	if (r->pf) {
		t_wait_ring_sleeper(r->pf->pipe, true, 10);
	} else {
		while (!atomic_load(&r->tid))
			sched_yield();
		t_wait_in_syscall(atomic_load(&r->tid), SYS_readv, 10);
	}
	return th;
}

/*
 * One blocked read of the segment sizes rseg[] (a size of -1 is a segment
 * with a NULL base of 64 bytes) against one writev of wseg[], on both
 * pipes; then everything left in each pipe must match too.
 */
static void blocked_read_case(const int *rseg, int nr, const int *wseg, int nw, int flags,
			      bool wnonblock)
{
	struct reader kr = { .iovcnt = nr }, pr = { .iovcnt = nr };
	unsigned char *kbuf[4] = { 0 }, *pbuf[4] = { 0 };
	struct iovec wiov[4];
	size_t wtotal = 0;
	struct pp_file *e[2];
	int k[2];
	pthread_t kt, pt;

	t_kpipe2(k, flags);
	t_pipe2(e, flags);
	if (wnonblock)
		ASSERT_SAME(fcntl(k[1], F_SETFL, O_NONBLOCK), pp_fcntl(e[1], F_SETFL, O_NONBLOCK));
	kr.kfd = k[0];
	pr.pf = e[0];
	for (int i = 0; i < nr; i++) {
		size_t n = rseg[i] < 0 ? 64 : (size_t)rseg[i];

		if (rseg[i] >= 0) {
			kbuf[i] = malloc(n + 1);
			pbuf[i] = malloc(n + 1);
			ASSERT_TRUE(kbuf[i] && pbuf[i]);
			memset(kbuf[i], 0xEE, n + 1);
			memset(pbuf[i], 0xEE, n + 1);
		}
		kr.iov[i] = (struct iovec){ kbuf[i], n };
		pr.iov[i] = (struct iovec){ pbuf[i], n };
	}
	for (int i = 0; i < nw; i++) {
		wiov[i].iov_len = (size_t)wseg[i];
		wiov[i].iov_base = malloc((size_t)wseg[i] + 1);
		ASSERT_TRUE(wiov[i].iov_base);
		t_fill(wiov[i].iov_base, (size_t)wseg[i], wtotal, 7);
		wtotal += (size_t)wseg[i];
	}

	kt = start_reader(&kr);
	pt = start_reader(&pr);
	ASSERT_SAME(writev(k[1], wiov, nw), pp_writev(e[1], wiov, nw));
	t_join(kt, NULL, 10);
	t_join(pt, NULL, 10);
	if (kr.res.ret != pr.res.ret || kr.res.err != pr.res.err)
		t_fail_at(__FILE__, __LINE__, "blocked readv: kernel %lld (%s), pagepipe %lld (%s)",
			  kr.res.ret, strerror(kr.res.err), pr.res.ret, strerror(pr.res.err));
	for (int i = 0; i < nr; i++)
		if (kbuf[i])
			ASSERT_MEM_EQ(kbuf[i], pbuf[i], kr.iov[i].iov_len + 1);
	ASSERT_EQ(t_fionread(e[0]), t_kfionread(k[0]));
	/* The rest, in the order written. */
	ASSERT_SAME(fcntl(k[0], F_SETFL, O_NONBLOCK), pp_fcntl(e[0], F_SETFL, O_NONBLOCK));
	for (;;) {
		int before = t_kfionread(k[0]);

		ASSERT_SAME_READ(k[0], e[0], 1000);
		if (!before)
			break;
	}

	for (int i = 0; i < nr; i++) {
		free(kbuf[i]);
		free(pbuf[i]);
	}
	for (int i = 0; i < nw; i++)
		free(wiov[i].iov_base);
	close(k[0]);
	close(k[1]);
	pp_close(e[0]);
	pp_close(e[1]);
}

static int sizes_around_the_buffer(void)
{
	static const int writes[] = { 1, 100, 4095, 4096, 4097, 20000, 65535, CAP };

	for (unsigned int i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		int rd = CAP, wr = writes[i];

		blocked_read_case(&rd, 1, &wr, 1, 0, false);
	}
	/* A reader buffer smaller than the write: it gets its fill, the rest waits. */
	{
		int rd = 100, wr = 5000;

		blocked_read_case(&rd, 1, &wr, 1, 0, false);
		rd = 4096;
		wr = 4097;
		blocked_read_case(&rd, 1, &wr, 1, 0, false);
	}
	return T_EXIT_PASS;
}

static int scattered(void)
{
	static const int rd[] = { 7, 0, 5000, 3 }, wr[] = { 3000, 1, 0, 2000 };
	static const int rd2[] = { 4096, 4096 }, wr2[] = { 1, 8190 };

	blocked_read_case(rd, 4, wr, 4, 0, false);
	blocked_read_case(rd2, 2, wr2, 2, 0, false);
	blocked_read_case(wr2, 2, rd2, 2, 0, false);
	return T_EXIT_PASS;
}

/* A reader buffer with a hole: as read(2) does, the fault decides, not the handoff. */
static int reader_fault(void)
{
	static const int rd[] = { 10, -1 }, rd2[] = { -1, 100 }, rd3[] = { 100, -1 };
	int wr = 50;

	blocked_read_case(rd, 2, &wr, 1, 0, false);
	blocked_read_case(rd2, 2, &wr, 1, 0, false);
	blocked_read_case(rd3, 2, &wr, 1, 0, false);
	return T_EXIT_PASS;
}

/*
 * More than the pipe holds, from a non-blocking writer: partial exactly as
 * in the kernel, so never handed over whole.  (The reader is asleep, and a
 * write sends its wake-ups only as it returns, so the count is certain.)
 */
static int larger_than_the_pipe(void)
{
	int rd = 4 * CAP, wr = CAP + 1;

	blocked_read_case(&rd, 1, &wr, 1, 0, true);
	wr = 3 * CAP;
	blocked_read_case(&rd, 1, &wr, 1, 0, true);
	return T_EXIT_PASS;
}

/*
 * A blocking write larger than the pipe, or than the waiting reader's
 * buffer, may be handed over in part: the writer's count is the whole
 * write, as in the kernel, and the stream arrives exact.  How much the
 * waiting read returns depends on timing on both pipes, so only its bounds
 * and the bytes are compared.
 */
static int blocking_larger_than_the_pipe(void)
{
	static const size_t rsz[] = { 100, 4096, CAP, 4 * CAP };
	const size_t len = 3 * CAP + 17;
	unsigned char *data = malloc(len), *got = malloc(len);

	ASSERT_TRUE(data && got);
	t_fill(data, len, 0, 11);
	for (unsigned int i = 0; i < sizeof(rsz) / sizeof(rsz[0]); i++) {
		for (int kernel = 0; kernel < 2; kernel++) {
			struct reader r = { .iovcnt = 1, .rest = got, .rest_len = len };
			struct pp_file *e[2];
			int k[2];
			pthread_t th;

			memset(got, 0, len);
			if (kernel)
				t_kpipe2(k, 0), r.kfd = k[0];
			else
				t_pipe2(e, 0), r.pf = e[0];
			r.iov[0] = (struct iovec){ got, rsz[i] };
			th = start_reader(&r);
			if (kernel)
				ASSERT_EQ(write(k[1], data, len), (ssize_t)len);
			else
				ASSERT_EQ(pp_write(e[1], data, len), (ssize_t)len);
			t_join(th, NULL, 10);
			ASSERT_GE(r.res.ret, 1);
			ASSERT_LE(r.res.ret, (long long)rsz[i]);
			ASSERT_MEM_EQ(got, data, len);
			if (kernel) {
				close(k[0]);
				close(k[1]);
			} else {
				pp_close(e[0]);
				pp_close(e[1]);
			}
		}
	}
	free(data);
	free(got);
	return T_EXIT_PASS;
}

/* Packets never go to the waiting reader directly, and each read gets one. */
static int packets(void)
{
	int rd = 1000, wr = 300;

	blocked_read_case(&rd, 1, &wr, 1, O_DIRECT, false);
	/*
	 * Two packets written back to back while the reader waits: however
	 * the reader's wake-up and the second write interleave, its read
	 * returns the first packet alone.
	 */
	for (int i = 0; i < 200; i++) {
		struct reader r = { .iovcnt = 1 };
		unsigned char buf[1000], data[600];
		struct pp_file *e[2];
		pthread_t th;

		t_pipe2(e, O_DIRECT);
		t_fill(data, sizeof(data), 0, (unsigned int)i);
		r.pf = e[0];
		r.iov[0] = (struct iovec){ buf, sizeof(buf) };
		th = start_reader(&r);
		ASSERT_EQ(pp_write(e[1], data, 300), 300);
		ASSERT_EQ(pp_write(e[1], data + 300, 300), 300);
		t_join(th, NULL, 10);
		ASSERT_EQ(r.res.ret, 300);
		ASSERT_MEM_EQ(buf, data, 300);
		ASSERT_EQ(pp_read(e[0], buf, sizeof(buf)), 300);
		ASSERT_MEM_EQ(buf, data + 300, 300);
		pp_close(e[0]);
		pp_close(e[1]);
	}
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

#define STREAM	(48ull << 20)

struct stream {
	struct pp_file *e[2];
	int cpu;
	unsigned int seed;
	unsigned long long got;
};

static int pick_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}

/* Sizes from 1 byte to twice the pipe, most of them small or near a page. */
static size_t random_size(unsigned int *seed)
{
	unsigned int r = (unsigned int)rand_r(seed);

	switch (r % 4) {
	case 0:
		return 1 + r / 4 % 256;
	case 1:
		return 4096 - 8 + r / 4 % 16;
	case 2:
		return CAP;
	default:
		return 1 + r / 4 % (2 * CAP);
	}
}

static void *stream_writer(void *arg)
{
	struct stream *s = arg;
	unsigned int seed = s->seed;
	unsigned char *buf = malloc(2 * CAP);
	unsigned long long pos = 0;

	ASSERT_TRUE(buf);
	ASSERT_EQ(t_pin(pthread_self(), s->cpu), 0);
	while (pos < STREAM) {
		size_t n = random_size(&seed);

		if (n > STREAM - pos)
			n = (size_t)(STREAM - pos);
		t_fill(buf, n, pos, 3);
		if (rand_r(&seed) % 2) {
			ASSERT_EQ(t_write_full(s->e[1], buf, n), (ssize_t)n);
		} else {
			struct iovec iov[2] = { { buf, n / 3 }, { buf + n / 3, n - n / 3 } };

			ASSERT_EQ(pp_writev(s->e[1], iov, 2), (ssize_t)n);
		}
		pos += n;
	}
	pp_close(s->e[1]);
	free(buf);
	return NULL;
}

static int one_cpu_stream(void)
{
	struct stream s = { .seed = 99 };
	unsigned char *buf = malloc(2 * CAP);
	unsigned int seed = 5;
	pthread_t th;

	s.cpu = pick_cpu();
	if (s.cpu < 0 || t_pin(pthread_self(), s.cpu))
		return t_skip("cannot pin threads to one CPU");
	ASSERT_TRUE(buf);
	t_pipe2(s.e, 0);
	ASSERT_EQ(pthread_create(&th, NULL, stream_writer, &s), 0);
	for (;;) {
		ssize_t n = pp_read(s.e[0], buf, random_size(&seed));

		ASSERT_GE(n, 0);
		if (!n)
			break;
		if (t_check(buf, (size_t)n, s.got, 3))
			t_fail_at(__FILE__, __LINE__, "wrong bytes at %llu (+%zd)", s.got, n);
		s.got += (unsigned long long)n;
	}
	t_join(th, NULL, 60);
	ASSERT_EQ(s.got, STREAM);
	pp_close(s.e[0]);
	free(buf);
	return T_EXIT_PASS;
}

/*
 * Two writers of 4 KiB records and two readers of 4 KiB, all on one CPU:
 * every read returns one whole record (PIPE_BUF atomicity), none is lost
 * or seen twice.
 */
#define RECORDS	20000

struct rec_job {
	struct pp_file *f;
	int cpu, id;
	unsigned char *seen;	/* readers: [writer][seq] */
	atomic_int *count;
};

static void *rec_writer(void *arg)
{
	struct rec_job *j = arg;
	unsigned char rec[PIPE_BUF];

	ASSERT_EQ(t_pin(pthread_self(), j->cpu), 0);
	for (unsigned int seq = 0; seq < RECORDS; seq++) {
		t_fill(rec, sizeof(rec), seq, (unsigned int)j->id);
		memcpy(rec, &j->id, sizeof(j->id));
		memcpy(rec + sizeof(j->id), &seq, sizeof(seq));
		ASSERT_EQ(pp_write(j->f, rec, sizeof(rec)), (ssize_t)sizeof(rec));
	}
	return NULL;
}

static void *rec_reader(void *arg)
{
	struct rec_job *j = arg;
	unsigned char rec[PIPE_BUF], want[PIPE_BUF];

	ASSERT_EQ(t_pin(pthread_self(), j->cpu), 0);
	for (;;) {
		ssize_t n = pp_read(j->f, rec, sizeof(rec));
		int id;
		unsigned int seq;

		if (!n)
			return NULL;
		ASSERT_EQ(n, (ssize_t)sizeof(rec));
		memcpy(&id, rec, sizeof(id));
		memcpy(&seq, rec + sizeof(id), sizeof(seq));
		ASSERT_TRUE((id == 1 || id == 2) && seq < RECORDS);
		t_fill(want, sizeof(want), seq, (unsigned int)id);
		ASSERT_MEM_EQ(rec + 8, want + 8, sizeof(rec) - 8);
		ASSERT_EQ(__atomic_fetch_add(&j->seen[(id - 1) * RECORDS + seq], 1,
					     __ATOMIC_RELAXED), 0);
		atomic_fetch_add(j->count, 1);
	}
}

static int one_cpu_records(void)
{
	unsigned char *seen = calloc(2, RECORDS);
	atomic_int count = 0;
	struct rec_job w[2], r[2];
	pthread_t wt[2], rt[2];
	struct pp_file *e[2];
	int cpu = pick_cpu();

	if (cpu < 0 || t_pin(pthread_self(), cpu))
		return t_skip("cannot pin threads to one CPU");
	ASSERT_TRUE(seen);
	t_pipe2(e, 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct rec_job){ .f = e[1], .cpu = cpu, .id = i + 1 };
		r[i] = (struct rec_job){ .f = e[0], .cpu = cpu, .seen = seen, .count = &count };
		ASSERT_EQ(pthread_create(&wt[i], NULL, rec_writer, &w[i]), 0);
		ASSERT_EQ(pthread_create(&rt[i], NULL, rec_reader, &r[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		t_join(wt[i], NULL, 60);
	pp_close(e[1]);
	for (int i = 0; i < 2; i++)
		t_join(rt[i], NULL, 60);
	ASSERT_EQ(atomic_load(&count), 2 * RECORDS);
	pp_close(e[0]);
	free(seen);
	return T_EXIT_PASS;
}

/*
 * White-box: the handoff really happens, and only where it should.  A
 * reader asleep in a read of 64 KiB gets a 64 KiB write without a slot
 * being published (head does not move: one copy, straight into its
 * buffer); one asleep in a read of 4 KiB, under the offer threshold
 * (pipe.c, PP_HANDOFF_MIN), gets it through the ring.  Every other case
 * here passes whether or not the handoff runs; this one fails if it never
 * does.
 */
static int handed_over(void)
{
	static const size_t rsz[] = { 65536, 4096 };

	for (unsigned int i = 0; i < 2; i++) {
		unsigned char *data = malloc(rsz[i]), *got = malloc(rsz[i]);
		struct reader r = { .iovcnt = 1 };
		struct pp_file *e[2];
		unsigned int head;
		pthread_t th;

		ASSERT_TRUE(data && got);
		t_fill(data, rsz[i], 0, 13);
		t_pipe2(e, 0);
		r.pf = e[0];
		r.iov[0] = (struct iovec){ got, rsz[i] };
		th = start_reader(&r);
		head = __atomic_load_n(&e[1]->pipe->head, __ATOMIC_ACQUIRE);
		ASSERT_EQ(pp_write(e[1], data, rsz[i]), (ssize_t)rsz[i]);
		t_join(th, NULL, 10);
		ASSERT_EQ(r.res.ret, (long long)rsz[i]);
		ASSERT_MEM_EQ(got, data, rsz[i]);
		if (rsz[i] >= 16384)
			ASSERT_EQ(__atomic_load_n(&e[1]->pipe->head, __ATOMIC_ACQUIRE), head);
		else
			ASSERT_EQ(__atomic_load_n(&e[1]->pipe->head, __ATOMIC_ACQUIRE), head + 1);
		pp_close(e[0]);
		pp_close(e[1]);
		free(data);
		free(got);
	}
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(sizes_around_the_buffer),
		T_SUBTEST(scattered),
		T_SUBTEST(reader_fault),
		T_SUBTEST(larger_than_the_pipe),
		T_SUBTEST(blocking_larger_than_the_pipe),
		T_SUBTEST(packets),
		T_SUBTEST(handed_over),
		T_SUBTEST(one_cpu_stream),
		T_SUBTEST(one_cpu_records),
	};

	return T_RUN_SUBTESTS(tests);
}
