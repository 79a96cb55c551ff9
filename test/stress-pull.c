// SPDX-License-Identifier: MIT
/*
 * Description: the pull under load (pipe.c): readers copying from waiting
 * writers' memory while those writers time out, withdraw and go on.  A
 * writer makes random blocking writes of up to 300 KiB and scribbles over
 * its buffer as soon as each returns, so a reader that copied from it late
 * reads the scribble; the reader makes random reads and checks every byte
 * and its order, with both threads on one CPU (where pulls happen) and on
 * two.  Then two writers of 4096-byte records, each pulled whole or not at
 * all, whose sequence numbers must arrive in order: a pull ahead of the
 * writer's own bytes still in the ring would show as a record out of
 * order.  Under ThreadSanitizer a missing happens-before edge between the
 * reader's copy and the writer's return shows as a race on the buffer.
 */
#include "helpers.h"
#include "internal.h"

#include <sched.h>

#define CAP	65536

static double budget_s(void)
{
	return t_under_valgrind() ? 0.5 : T_SANITIZED ? 1.0 : 1.5;
}

struct stream {
	struct pp_file *e[2];
	int wcpu, rcpu;
	double seconds;
	atomic_bool stop;
	unsigned long long written;
};

static void *stream_writer(void *arg)
{
	struct stream *s = arg;
	unsigned char *buf = malloc(300 * 1024);
	unsigned int seed = 1;
	unsigned long long pos = 0;
	long long end = t_now_ms() + (long long)(s->seconds * 1000);

	ASSERT_TRUE(buf != NULL);
	if (s->wcpu >= 0)
		t_pin(pthread_self(), s->wcpu);
	while (t_now_ms() < end) {
		size_t n = 1 + (size_t)(rand_r(&seed) % (300 * 1024));
		ssize_t r;

		/* Often exactly what a pull takes, or a page more. */
		if (rand_r(&seed) % 3 == 0)
			n = (size_t)CAP * (1 + rand_r(&seed) % 4) + (rand_r(&seed) % 2) * 4096;
		if (n > 300 * 1024)
			n = 300 * 1024;
		t_fill(buf, n, pos, 5);
		r = pp_write(s->e[1], buf, n);
		ASSERT_EQ(r, (ssize_t)n);
		/* The write returned: the buffer is ours again. */
		memset(buf, 0xA5, n);
		pos += n;
	}
	s->written = pos;
	pp_close(s->e[1]);
	free(buf);
	return NULL;
}

static void stream_case(int wcpu, int rcpu)
{
	struct stream s = { .wcpu = wcpu, .rcpu = rcpu, .seconds = budget_s() };
	unsigned char *buf = malloc(1 << 20);
	unsigned long long pos = 0;
	unsigned int seed = 2;
	pthread_t th;

	ASSERT_TRUE(buf != NULL);
	t_pipe2(s.e, 0);
	ASSERT_EQ(pp_fcntl(s.e[1], F_SETPIPE_SZ, CAP), CAP);
	if (rcpu >= 0)
		t_pin(pthread_self(), rcpu);
	ASSERT_EQ(pthread_create(&th, NULL, stream_writer, &s), 0);
	for (;;) {
		size_t want = rand_r(&seed) % 2 ? (size_t)1 << 20 : 1 + (size_t)rand_r(&seed) % (200 * 1024);
		ssize_t r = pp_read(s.e[0], buf, want);

		ASSERT_TRUE(r >= 0);
		if (!r)
			break;
		if (t_check(buf, (size_t)r, pos, 5))
			t_fail_at(__FILE__, __LINE__, "wrong bytes at %llu (read of %zu)", pos, want);
		pos += (size_t)r;
	}
	t_join(th, NULL, 30);
	ASSERT_EQ(pos, s.written);
	printf("  %.1f MB, %lu reads served by pulls\n", (double)pos / 1e6, s.e[0]->pipe->rd_pulls);
	/* On one CPU the writer waits on a full pipe all the time: pulls must have run. */
	if (wcpu == rcpu && !s.e[0]->pipe->rd_pulls)
		t_fail_at(__FILE__, __LINE__, "no read was served by a pull: the stress did not stress it");
	pp_close(s.e[0]);
	free(buf);
}

static int one_cpu(void)
{
	int cpu = sched_getcpu();

	ASSERT_TRUE(cpu >= 0);
	stream_case(cpu, cpu);
	return T_EXIT_PASS;
}

static int two_cpus(void)
{
	cpu_set_t set;
	int a = -1, b = -1;

	ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &set))
			continue;
		if (a < 0)
			a = i;
		else if (b < 0)
			b = i;
	}
	if (b < 0)
		return t_skip("one CPU only: the two-CPU case needs two");
	stream_case(a, b);
	return T_EXIT_PASS;
}

/* Records of exactly PIPE_BUF bytes: writer id, sequence number, pattern. */
#define REC	4096

struct recw {
	struct pp_file *w;
	atomic_int *live;	/* the last writer to finish closes w */
	unsigned int id;
	double seconds;
	unsigned long long sent;
};

static void *record_writer(void *arg)
{
	struct recw *rw = arg;
	unsigned char rec[REC];
	long long end = t_now_ms() + (long long)(rw->seconds * 1000);
	unsigned long long seq = 0;

	while (t_now_ms() < end) {
		t_rec_make(rec, REC, rw->id, seq);
		ASSERT_EQ(pp_write(rw->w, rec, REC), REC);
		memset(rec, 0x5A, REC);
		seq++;
	}
	rw->sent = seq;
	if (atomic_fetch_sub(rw->live, 1) == 1)
		pp_close(rw->w);
	return NULL;
}

static int records(void)
{
	struct pp_file *e[2];
	struct recw rw[2];
	pthread_t th[2];
	unsigned long long next[2] = { 0, 0 };
	unsigned char *buf = malloc(1 << 20);
	size_t have = 0;
	unsigned int seed = 3;
	int cpu = sched_getcpu();
	atomic_int live = 2;

	ASSERT_TRUE(buf && cpu >= 0);
	t_pipe2(e, 0);
	ASSERT_EQ(pp_fcntl(e[1], F_SETPIPE_SZ, CAP), CAP);
	t_pin(pthread_self(), cpu);
	for (unsigned int i = 0; i < 2; i++) {
		rw[i] = (struct recw){ .w = e[1], .live = &live, .id = i + 1, .seconds = budget_s() };
		ASSERT_EQ(pthread_create(&th[i], NULL, record_writer, &rw[i]), 0);
		t_pin(th[i], cpu);
	}
	for (;;) {
		size_t want = (size_t)REC * (4 + rand_r(&seed) % 60);
		ssize_t r = pp_read(e[0], buf + have, want);

		ASSERT_TRUE(r >= 0);
		if (!r)
			break;
		have += (size_t)r;
		while (have >= REC) {
			uint32_t id;
			uint64_t seq;
			int torn = t_rec_check(buf, REC, &id, &seq);

			if (id < 1 || id > 2)
				t_fail_at(__FILE__, __LINE__, "a record from writer %u", id);
			if (seq != next[id - 1])
				t_fail_at(__FILE__, __LINE__, "writer %u: record %llu where %llu was due",
					  id, (unsigned long long)seq, next[id - 1]);
			if (torn)
				t_fail_at(__FILE__, __LINE__, "writer %u, record %llu: torn", id,
					  (unsigned long long)seq);
			next[id - 1]++;
			memmove(buf, buf + REC, have - REC);
			have -= REC;
		}
	}
	for (unsigned int i = 0; i < 2; i++)
		t_join(th[i], NULL, 30);
	ASSERT_EQ(have, 0);
	ASSERT_EQ(next[0], rw[0].sent);
	ASSERT_EQ(next[1], rw[1].sent);
	printf("  %llu records, %lu reads served by pulls\n", next[0] + next[1],
	       e[0]->pipe->rd_pulls);
	if (!e[0]->pipe->rd_pulls)
		t_fail_at(__FILE__, __LINE__, "no read was served by a pull: the order was not tried");
	pp_close(e[0]);
	free(buf);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(one_cpu),
		T_SUBTEST(two_cpus),
		T_SUBTEST(records),
	};

	return T_RUN_SUBTESTS(tests);
}
