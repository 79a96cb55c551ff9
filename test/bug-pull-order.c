// SPDX-License-Identifier: MIT
/*
 * Description: a pull never takes a writer's later bytes ahead of its
 * earlier ones.  A reader that finds the pipe empty looks for a waiting
 * writer's offer (pipe.c, the pull); between that look and its claim the
 * writer may fill the whole ring and offer the rest.  The claim is an
 * acquire that sees the head the writer published before its offer, and
 * the reader checks again that the pipe is empty before it copies: without
 * that check it would return the offered bytes before the 64 KiB in the
 * ring.  The window is a few instructions wide, so this test carries its
 * own copy of pipe.c (the library's is then not linked) with a hook at the
 * start of the pull, and plays it out in order.
 */
#include "helpers.h"

#include <stdatomic.h>

static __thread void (*hook_fn)(void);

static void pull_step(void)
{
	void (*fn)(void) = hook_fn;

	hook_fn = NULL;
	if (fn)
		fn();
}
#define PP__PULL_STEP()	pull_step()
#include "../src/pipe.c"

#define CAP	65536
#define WLEN	(CAP + 4096)

static struct pp_file *ends[2];
static unsigned char wbuf[WLEN];
static pthread_t writer;
static struct t_res wres;

static void *writer_main(void *arg)
{
	(void)arg;
	wres = T_CALL(pp_write(ends[1], wbuf, WLEN));
	return NULL;
}

/* Between the reader's look at the empty pipe and its claim. */
static void fill_and_offer(void)
{
	long long deadline = t_now_ms() + 10000;

	ASSERT_EQ(pthread_create(&writer, NULL, writer_main, NULL), 0);
	while (__atomic_load_n(&ends[1]->pipe->wo_state, __ATOMIC_ACQUIRE) != PP_WO_OFFERED) {
		if (t_now_ms() > deadline)
			t_fail_at(__FILE__, __LINE__, "the writer never offered its last page");
		t_sleep_ms(1);
	}
}

static int offer_behind_the_ring(void)
{
	static unsigned char buf[1 << 20];
	ssize_t r;

	t_pipe2(ends, 0);
	ASSERT_EQ(pp_fcntl(ends[1], F_SETPIPE_SZ, CAP), CAP);
	t_fill(wbuf, WLEN, 0, 9);
	hook_fn = fill_and_offer;
	r = pp_read(ends[0], buf, sizeof(buf));
	ASSERT_TRUE(hook_fn == NULL);	/* the hook ran: the race was played */
	ASSERT_EQ(r, CAP);
	ASSERT_EQ(t_check(buf, (size_t)r, 0, 9), 0);
	r = pp_read(ends[0], buf, sizeof(buf));
	ASSERT_EQ(r, 4096);
	ASSERT_EQ(t_check(buf, (size_t)r, CAP, 9), 0);
	t_join(writer, NULL, 10);
	ASSERT_EQ(wres.ret, WLEN);
	pp_close(ends[0]);
	pp_close(ends[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(offer_behind_the_ring),
	};

	return T_RUN_SUBTESTS(tests);
}
