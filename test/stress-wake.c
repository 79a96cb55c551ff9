// SPDX-License-Identifier: MIT
/*
 * Description: no wake-up is lost between a waker that loads the sleeper
 * count plainly and a sleeper that pays with membarrier(2) (wait.c, the
 * asymmetric wake-up).  Two threads on two CPUs bounce one byte through
 * two pipes, and this test carries its own copy of wait.c with the spin
 * before sleeping turned off (PP_SPIN_NS 0), so each waiter goes to sleep
 * at once and nearly every message needs a wake-up that races the
 * waiter's way into its sleep: the waker's store of head can still be on
 * its way to the other CPU when its load of the count passes.  Without
 * the membarrier between the sleeper's increment and its re-check, both
 * threads fell asleep for good within a second (the hang detector below);
 * with the membarrier, or with the read-modify-writes of the fallback
 * (the second sub-test), they do not.  A hang detector: no timing is
 * asserted.
 */
#include "helpers.h"

#include <pthread.h>
#include <stdatomic.h>

#define PP_SPIN_NS	0
#include "../src/wait.c"

static struct pp_file *ab[2], *ba[2];
static atomic_ullong rounds;
static atomic_bool stop;

static void *echo(void *arg)
{
	char c;

	(void)arg;
	(void)t_pin(pthread_self(), 1);	/* a hint */
	while (pp_read(ab[0], &c, 1) == 1)
		if (pp_write(ba[1], &c, 1) != 1)
			break;
	return NULL;
}

static void *ping(void *arg)
{
	char c = 'x';

	(void)arg;
	(void)t_pin(pthread_self(), 0);
	while (!atomic_load(&stop)) {
		if (pp_write(ab[1], &c, 1) != 1 || pp_read(ba[0], &c, 1) != 1)
			t_fail_at(__FILE__, __LINE__, "ping: %s", strerror(errno));
		atomic_fetch_add_explicit(&rounds, 1, memory_order_relaxed);
	}
	return NULL;
}

static int ping_pong(void)
{
	const char *s = getenv("PP_STRESS_SECONDS");
	long long end = t_now_ms() + (s ? atoll(s) * 1000 : 2000);
	unsigned long long last = 0;
	long long still_since = t_now_ms();
	pthread_t e, p;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return t_skip("one CPU: waiters yield there, and no store is in flight");
	t_pipe2(ab, 0);
	t_pipe2(ba, 0);
	printf("asymmetric wake-ups: %s\n", asym_on() ? "on" : "off");
	ASSERT_EQ(pthread_create(&e, NULL, echo, NULL), 0);
	ASSERT_EQ(pthread_create(&p, NULL, ping, NULL), 0);
	/* Past the end too, until the threads are seen moving: a stall is a lost wake-up. */
	while (t_now_ms() < end || t_now_ms() - still_since > 100) {
		unsigned long long r = atomic_load(&rounds);

		usleep(50000);
		if (r != last) {
			last = r;
			still_since = t_now_ms();
		} else if (t_now_ms() - still_since > 3000) {
			t_fail_at(__FILE__, __LINE__, "no round trip for 3 s after %llu: a lost wake-up",
				  r);
		}
	}
	atomic_store(&stop, true);
	t_join(p, NULL, 5);	/* a wake-up lost in the last seconds hangs here */
	pp_close(ab[1]);
	t_join(e, NULL, 5);
	printf("%llu round trips\n", (unsigned long long)atomic_load(&rounds));
	pp_close(ab[0]);
	pp_close(ba[0]);
	pp_close(ba[1]);
	return 0;
}

/* As the process finds it: asymmetric where membarrier serves. */
static int test_ping_pong_sleeping(void)
{
	return ping_pong();
}

/* The fallback, as where membarrier is refused: both sides read-modify-write. */
static int test_ping_pong_sleeping_rmw(void)
{
	pp__wait_init();
	pp__asym_wake = 0;	/* our own copy of wait.c: once done, it stays so */
	return ping_pong();
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_ping_pong_sleeping),
		T_SUBTEST(test_ping_pong_sleeping_rmw),
	};

	return t_run_subtests(tests, sizeof(tests) / sizeof(tests[0]));
}
