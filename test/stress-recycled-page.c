// SPDX-License-Identifier: MIT
/*
 * Description: a writer filling recycled pages while the reader copies out
 * (issue 11, section 5).  Reproduces the conditions of a ThreadSanitizer
 * report, a race between iter_copy_from (a writer filling a recycled page
 * at offset 0) and pp__buf_copy_out (the reader): one writer makes random
 * writes of 1 byte to 100 KiB, one reader makes random reads of 1 byte to
 * 100 KiB, so pages go back to the pipe's cache and out again while the
 * other side works.  Every byte is checked; under `make SAN=tsan check`
 * TSan checks the hand-over of each page.  Runs for PP_STRESS_SECONDS
 * (default 2).
 */
#include "helpers.h"

#define SEED	0x21
#define MAXIO	(100 * 1024)

struct side {
	struct pp_file *f;
	long long deadline;
	unsigned long long bytes;
};

static void *writer_main(void *arg)
{
	struct side *s = arg;
	unsigned char *buf = malloc(MAXIO);
	unsigned int seed = 31;

	while (t_now_ms() < s->deadline) {
		size_t n = 1 + (size_t)rand_r(&seed) % MAXIO;

		t_fill(buf, n, s->bytes, SEED);
		ASSERT_EQ(t_write_full(s->f, buf, n), (ssize_t)n);
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
	unsigned int seed = 32;

	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % MAXIO;
		ssize_t r = pp_read(s->f, buf, n);

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

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	struct pp_file *e[2];
	struct side w, r;
	pthread_t tw, tr;

	t_watchdog(ms / 1000 + 60, "random writes and reads of up to 100 KiB");
	t_pipe2(e, 0);
	w = (struct side){ .f = e[1], .deadline = t_now_ms() + ms };
	r = (struct side){ .f = e[0] };
	ASSERT_EQ(pthread_create(&tr, NULL, reader_main, &r), 0);
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, &w), 0);
	t_join(tw, NULL, ms / 1000 + 30);
	t_join(tr, NULL, 30);
	ASSERT_EQ(r.bytes, w.bytes);
	printf("%llu bytes, every one checked\n", w.bytes);
	return T_EXIT_PASS;
}
