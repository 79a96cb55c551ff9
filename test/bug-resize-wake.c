// SPDX-License-Identifier: MIT
/*
 * Description: a writer blocked on a full pipe must wake when F_SETPIPE_SZ
 * makes room, even while it is still spinning before it sleeps.  A resize
 * moves neither head nor tail, and wakes only threads already asleep, so a
 * waiter that spun on the tail alone and then went to sleep without
 * looking again slept with room in the pipe (until a reader came, here
 * never).  Each round waits until the writer is in the call (it holds a
 * reference on its end), lets a random 0-30 us pass (the spin lasts up to 20 us)
 * and grows the pipe; the write must then finish.
 */
#include "helpers.h"
#include "internal.h"

#define ROUNDS	200

struct job {
	struct pp_file *w;
	pthread_barrier_t go;
	ssize_t ret;
};

static char page[4096];

static void *writer(void *arg)
{
	struct job *j = arg;

	pthread_barrier_wait(&j->go);
	j->ret = pp_write(j->w, page, sizeof(page));
	return NULL;
}

static void spin_us(long us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

int main(void)
{
	unsigned int seed = 12345;

	for (int i = 0; i < ROUNDS; i++) {
		struct pp_file *e[2];
		struct job j = { .ret = -2 };
		pthread_t th;

		t_pipe2(e, 0);
		for (int k = 0; k < 16; k++)
			ASSERT_EQ(pp_write(e[1], page, sizeof(page)), (ssize_t)sizeof(page));
		j.w = e[1];
		pthread_barrier_init(&j.go, NULL, 2);
		ASSERT_EQ(pthread_create(&th, NULL, writer, &j), 0);
		pthread_barrier_wait(&j.go);
		/* In the call: it holds a reference on its end. */
		while (atomic_load(&e[1]->refs) < 2)
			sched_yield();
		spin_us((long)(rand_r(&seed) % 31));
		ASSERT_EQ(pp_fcntl(e[1], F_SETPIPE_SZ, 131072), 131072);
		/* No reader ever reads: only the resize can let the write finish. */
		t_join_at(__FILE__, __LINE__, th, NULL, 5);
		ASSERT_EQ(j.ret, (ssize_t)sizeof(page));
		pthread_barrier_destroy(&j.go);
		pp_close(e[0]);
		pp_close(e[1]);
	}
	return 0;
}
