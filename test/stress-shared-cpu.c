// SPDX-License-Identifier: MIT
/*
 * Description: many waiters of one side on one CPU (wait.c: the first
 * waiter of a side yields, the others nap).  All threads are pinned to one
 * CPU, where nothing moves unless a waiter gives the CPU up:
 *
 *   fan_in_one_cpu, fan_out_one_cpu: four writers into one reader, one
 *     writer into four readers, PIPE_BUF records (writer, sequence number,
 *     payload made from both), for PP_STRESS_SECONDS / 2 each; a torn,
 *     lost, doubled or reordered record fails.
 *   blocked_writers_all_finish, blocked_readers_all_finish: four writers
 *     blocked on a full pipe (four readers on an empty one); the main
 *     thread makes room for all four (writes four records) once, and
 *     never calls the pipe again until all four have returned.  A waiter
 *     that napped must find the room on its own: none may be left
 *     blocked beside it.
 *
 * In both fans the side with four threads must also have handed the
 * yielding over (struct pp_yielder's turns): without it one thread keeps
 * the pipe while the others nap, for milliseconds at a time.
 */
#include "helpers.h"
#include "internal.h"

#include <sched.h>
#include <stdint.h>

#define NT	4
#define REC	4096	/* PIPE_BUF: atomic, and one read takes one whole record */

/* A record's header (helpers.h: t_rec_make). */
struct hdr {
	uint32_t who;
	uint64_t seq;
};

static int cpu0;
static struct pp_file *E[2];
static long long deadline;
static int stress_ms;			/* PP_STRESS_SECONDS: half for each fan */
static uint64_t done_seq[NT];			/* fan-in: records sent per writer */
static unsigned char *seen;			/* fan-out: how often each sequence number arrived */
#define FAN_OUT_CAP	(1u << 24)	/* records: 64 GiB, more than a run moves */

static void pin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		t_fail_at(__FILE__, __LINE__, "sched_setaffinity(%d): %s", cpu0, strerror(errno));
}

/* Checks a record and returns its header. */
static struct hdr check_rec(const unsigned char *rec)
{
	struct hdr h = { 0 };

	if (t_rec_check(rec, REC, &h.who, &h.seq) || h.who >= NT)
		t_fail_at(__FILE__, __LINE__, "record %llu of writer %u is torn (there are %d)",
			  (unsigned long long)h.seq, h.who, NT);
	return h;
}

static void write_rec(struct pp_file *f, uint32_t who, uint64_t seq)
{
	unsigned char rec[REC];

	t_rec_make(rec, REC, who, seq);
	ssize_t r = pp_write(f, rec, REC);
	if (r != REC)
		t_fail_at(__FILE__, __LINE__, "pp_write: %zd (%s), want %d", r, strerror(errno), REC);
}

/* One read, one whole record, or 0 at EOF. */
static bool read_rec(struct pp_file *f, struct hdr *h)
{
	unsigned char rec[REC];
	ssize_t r = pp_read(f, rec, REC);

	if (r == 0)
		return false;
	if (r != REC)
		t_fail_at(__FILE__, __LINE__, "pp_read: %zd (%s), want %d", r, strerror(errno), REC);
	*h = check_rec(rec);
	return true;
}

static void *fan_in_writer(void *arg)
{
	uint32_t who = (uint32_t)(uintptr_t)arg;
	uint64_t seq = 0;

	pin();
	while (t_now_ms() < deadline)
		write_rec(E[1], who, seq++);
	done_seq[who] = seq;
	return NULL;
}

static void *fan_in_reader(void *arg)
{
	uint64_t *next = arg;
	struct hdr h;

	pin();
	while (read_rec(E[0], &h)) {
		if (h.seq != next[h.who])
			t_fail_at(__FILE__, __LINE__, "writer %u: record %llu, want %llu", h.who,
				  (unsigned long long)h.seq, (unsigned long long)next[h.who]);
		next[h.who]++;
	}
	return NULL;
}

static int fan_in_one_cpu(void)
{
	pthread_t th[NT], rd;
	uint64_t next[NT] = { 0 };
	unsigned long turns;

	pin();
	deadline = t_now_ms() + stress_ms / 2;
	t_pipe2(E, 0);
	ASSERT_EQ(pthread_create(&rd, NULL, fan_in_reader, next), 0);
	for (uintptr_t i = 0; i < NT; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, fan_in_writer, (void *)i), 0);
	for (int i = 0; i < NT; i++)
		t_join(th[i], NULL, 30);
	turns = __atomic_load_n(&E[1]->pipe->wr_yielder.turns, __ATOMIC_RELAXED);
	pp_close(E[1]);
	t_join(rd, NULL, 30);
	pp_close(E[0]);
	for (int i = 0; i < NT; i++)
		ASSERT_EQ(next[i], done_seq[i]);
	printf("fan in: records %llu %llu %llu %llu, %lu turns\n", (unsigned long long)next[0],
	       (unsigned long long)next[1], (unsigned long long)next[2],
	       (unsigned long long)next[3], turns);
	ASSERT_GE(turns, 1ul);
	return T_EXIT_PASS;
}

static void *fan_out_reader(void *arg)
{
	uint64_t *got = arg;
	struct hdr h;

	pin();
	while (read_rec(E[0], &h)) {
		if (h.who != 0 || h.seq >= FAN_OUT_CAP)
			t_fail_at(__FILE__, __LINE__, "record %llu of writer %u", (unsigned long long)h.seq,
				  h.who);
		/* Each sequence number has its own byte, and one reader takes it. */
		__atomic_fetch_add(&seen[h.seq], 1, __ATOMIC_RELAXED);
		(*got)++;
	}
	return NULL;
}

static int fan_out_one_cpu(void)
{
	pthread_t th[NT];
	uint64_t got[NT] = { 0 }, total = 0, seq = 0;
	const uint64_t cap = FAN_OUT_CAP;
	unsigned long turns;

	pin();
	deadline = t_now_ms() + stress_ms / 2;
	seen = calloc(cap, 1);
	ASSERT_NE(seen, NULL);
	t_pipe2(E, 0);
	for (int i = 0; i < NT; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, fan_out_reader, &got[i]), 0);
	while (t_now_ms() < deadline && seq < cap)
		write_rec(E[1], 0, seq++);
	turns = __atomic_load_n(&E[0]->pipe->rd_yielder.turns, __ATOMIC_RELAXED);
	pp_close(E[1]);
	for (int i = 0; i < NT; i++) {
		t_join(th[i], NULL, 30);
		total += got[i];
	}
	pp_close(E[0]);
	ASSERT_EQ(total, seq);
	for (uint64_t i = 0; i < seq; i++)
		if (seen[i] != 1)
			t_fail_at(__FILE__, __LINE__, "record %llu arrived %u times",
				  (unsigned long long)i, seen[i]);
	free(seen);
	printf("fan out: %llu records, readers took %llu %llu %llu %llu, %lu turns\n",
	       (unsigned long long)seq, (unsigned long long)got[0], (unsigned long long)got[1],
	       (unsigned long long)got[2], (unsigned long long)got[3], turns);
	ASSERT_GE(turns, 1ul);
	return T_EXIT_PASS;
}

static void *blocked_writer(void *arg)
{
	pin();
	write_rec(E[1], (uint32_t)(uintptr_t)arg, 1000);
	return NULL;
}

static int blocked_writers_all_finish(void)
{
	pthread_t th[NT];
	bool from[NT] = { false };
	int fill;
	struct hdr h;

	pin();
	t_pipe2(E, 0);
	fill = pp_fcntl(E[1], F_GETPIPE_SZ) / REC;
	ASSERT_GE(fill, NT + 1);
	for (int i = 0; i < fill; i++)
		write_rec(E[1], 0, (uint64_t)i);
	for (uintptr_t i = 0; i < NT; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, blocked_writer, (void *)i), 0);
	t_sleep_ms(100);			/* all four are waiting: yielding, napping or asleep */
	for (int i = 0; i < NT; i++) {
		ASSERT_TRUE(read_rec(E[0], &h));
		ASSERT_EQ(h.seq, (uint64_t)i);
	}
	/* Room for all four, and no further call on the pipe until they return. */
	for (int i = 0; i < NT; i++)
		t_join(th[i], NULL, 10);
	for (int i = 0; i < fill - NT; i++) {
		ASSERT_TRUE(read_rec(E[0], &h));
		ASSERT_EQ(h.seq, (uint64_t)(i + NT));
	}
	for (int i = 0; i < NT; i++) {
		ASSERT_TRUE(read_rec(E[0], &h));
		ASSERT_EQ(h.seq, 1000u);
		ASSERT_TRUE(!from[h.who]);
		from[h.who] = true;
	}
	pp_close(E[1]);
	ASSERT_TRUE(!read_rec(E[0], &h));
	pp_close(E[0]);
	return T_EXIT_PASS;
}

static void *blocked_reader(void *arg)
{
	struct hdr h;

	pin();
	if (!read_rec(E[0], &h))
		t_fail_at(__FILE__, __LINE__, "EOF with the write end open");
	*(uint64_t *)arg = h.seq;
	return NULL;
}

static int blocked_readers_all_finish(void)
{
	pthread_t th[NT];
	uint64_t got[NT];
	bool seen_seq[NT] = { false };

	pin();
	t_pipe2(E, 0);
	for (int i = 0; i < NT; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, blocked_reader, &got[i]), 0);
	t_sleep_ms(100);			/* all four are waiting */
	for (int i = 0; i < NT; i++)
		write_rec(E[1], 0, (uint64_t)i);
	for (int i = 0; i < NT; i++) {
		t_join(th[i], NULL, 10);
		ASSERT_LE(got[i], (uint64_t)NT - 1);
		ASSERT_TRUE(!seen_seq[got[i]]);
		seen_seq[got[i]] = true;
	}
	pp_close(E[1]);
	pp_close(E[0]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(blocked_writers_all_finish),
		T_SUBTEST(blocked_readers_all_finish),
		T_SUBTEST(fan_in_one_cpu),
		T_SUBTEST(fan_out_one_cpu),
	};
	const char *env = getenv("PP_STRESS_SECONDS");
	cpu_set_t set;

	stress_ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	if (sched_getaffinity(0, sizeof(set), &set))
		return t_skip("sched_getaffinity: %s", strerror(errno));
	for (cpu0 = 0; cpu0 < CPU_SETSIZE && !CPU_ISSET(cpu0, &set); cpu0++)
		;
	return T_RUN_SUBTESTS(tests);
}
