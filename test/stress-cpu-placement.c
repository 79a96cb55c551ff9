// SPDX-License-Identifier: MIT
/*
 * Description: a writer and a reader on the same CPU and on different
 * CPUs (issue 11, section 5).  Both threads are pinned with
 * sched_setaffinity: first to one CPU, where nothing moves unless a waiter
 * gives the CPU up, then to two different CPUs, where a waiter may spin
 * and its peer runs meanwhile (skipped with one CPU).  Random write sizes
 * (1 byte to 100 KiB, with O_NONBLOCK rounds too) and read sizes (1 byte to
 * 100 KiB); every byte is checked.  Runs for PP_STRESS_SECONDS (default 2)
 * in all.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sched.h>

#define SEED	0x77
#define MAXIO	(100 * 1024)

struct side {
	struct pp_file *f;
	int cpu;
	bool nonblock;
	long long deadline;
	unsigned long long bytes;
};

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		t_fail_at(__FILE__, __LINE__, "sched_setaffinity(%d): %s", cpu, strerror(errno));
}

static void *writer_main(void *arg)
{
	struct side *s = arg;
	unsigned char *buf = malloc(MAXIO);
	unsigned int seed = 11;

	pin(s->cpu);
	while (t_now_ms() < s->deadline) {
		size_t n = 1 + (size_t)rand_r(&seed) % (rand_r(&seed) & 1 ? MAXIO : 4096);
		size_t done = 0;

		t_fill(buf, n, s->bytes, SEED);
		while (done < n) {
			ssize_t r = pp_write(s->f, buf + done, n - done);

			if (r < 0 && errno == EAGAIN && s->nonblock) {
				sched_yield();
				continue;
			}
			if (r <= 0)
				t_fail_at(__FILE__, __LINE__, "pp_write: %s", strerror(errno));
			done += (size_t)r;
		}
		s->bytes += n;
	}
	pp_close(s->f);
	free(buf);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct side *s = arg;
	unsigned char *buf = malloc(MAXIO);
	unsigned int seed = 12;

	pin(s->cpu);
	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % (rand_r(&seed) & 1 ? MAXIO : 4096);
		ssize_t r = pp_read(s->f, buf, n);

		if (r < 0 && errno == EAGAIN && s->nonblock) {
			sched_yield();
			continue;
		}
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (!r)
			break;
		if (t_check(buf, (size_t)r, s->bytes, SEED))
			t_fail_at(__FILE__, __LINE__, "wrong byte at position %llu", s->bytes);
		s->bytes += (size_t)r;
	}
	pp_close(s->f);
	free(buf);
	return NULL;
}

static void run(int ms, int wcpu, int rcpu, bool nonblock)
{
	struct pp_file *e[2];
	struct side w, r;
	pthread_t tw, tr;

	t_pipe2(e, nonblock ? O_NONBLOCK : 0);
	w = (struct side){ .f = e[1], .cpu = wcpu, .nonblock = nonblock,
			   .deadline = t_now_ms() + ms };
	r = (struct side){ .f = e[0], .cpu = rcpu, .nonblock = nonblock };
	ASSERT_EQ(pthread_create(&tr, NULL, reader_main, &r), 0);
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, &w), 0);
	t_join(tw, NULL, ms / 1000 + 30);
	t_join(tr, NULL, 30);
	ASSERT_EQ(r.bytes, w.bytes);
	printf("writer on CPU %d, reader on CPU %d%s: %llu bytes\n", wcpu, rcpu,
	       nonblock ? ", non-blocking" : "", w.bytes);
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	int cpus[2], n = 0;
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return t_skip("sched_getaffinity: %s", strerror(errno));
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	ASSERT_GE(n, 1);
	t_watchdog(ms / 1000 + 60, "a writer and a reader pinned to CPUs");
	run(ms / 4, cpus[0], cpus[0], false);
	run(ms / 4, cpus[0], cpus[0], true);
	if (n < 2) {
		printf("one CPU: the split placement is skipped\n");
		return T_EXIT_PASS;
	}
	run(ms / 4, cpus[0], cpus[1], false);
	run(ms / 4, cpus[1], cpus[0], true);
	return T_EXIT_PASS;
}
