// SPDX-License-Identifier: MIT
/*
 * Description: the two ends closed at the same time, one of them waking a
 * sleeper on the other.  A close that wakes a blocked reader or writer must
 * deliver that wake-up before it lets go of the ring lock: the woken thread
 * may close the last end at once and free the pipe, futex words included.
 * An early version woke after unlocking, a use-after-free that TSan found
 * in the CLI's buffer command; here ASan and TSan see it directly.  Each
 * round waits, by the pipe's sleeper counter, until the other thread really
 * sleeps, so the wake-up is always owed.
 */
#include "helpers.h"
#include "internal.h"

#define ROUNDS	300

struct job {
	struct pp_file *end;	/* the end the thread blocks on, then closes */
	bool reader;
	ssize_t ret;
	int err;
};

static void *blocker(void *arg)
{
	struct job *j = arg;
	char c = 'x';

	errno = 0;
	j->ret = j->reader ? pp_read(j->end, &c, 1) : pp_write(j->end, &c, 1);
	j->err = errno;
	pp_close(j->end);	/* often the last end: the pipe goes here */
	return NULL;
}

static void round_trip(bool reader)
{
	struct pp_file *e[2];
	struct job j = { .reader = reader };
	pthread_t th;

	t_pipe2(e, PP_O_NOSIGPIPE);
	if (!reader) {
		/* Fill the pipe so the writer blocks. */
		static char page[4096];

		for (int i = 0; i < 16; i++)
			ASSERT_EQ(pp_write(e[1], page, sizeof(page)), (ssize_t)sizeof(page));
	}
	j.end = reader ? e[0] : e[1];
	ASSERT_EQ(pthread_create(&th, NULL, blocker, &j), 0);
	t_wait_ring_sleeper(j.end->pipe, reader, 10);
	ASSERT_EQ(pp_close(reader ? e[1] : e[0]), 0);
	t_join_at(__FILE__, __LINE__, th, NULL, 10);
	if (reader) {
		ASSERT_EQ(j.ret, 0);
	} else {
		ASSERT_EQ(j.ret, -1);
		ASSERT_EQ(j.err, EPIPE);
	}
}

int main(void)
{
	for (int i = 0; i < ROUNDS; i++) {
		round_trip(true);
		round_trip(false);
	}
	return 0;
}
