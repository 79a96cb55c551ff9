// SPDX-License-Identifier: MIT
/*
 * Description: a SPLICE_F_NONBLOCK splice into a pagepipe must not block
 * on the pipe.  splice_to_pipe() counts the free slots, then calls the
 * source's splice_read with no pipe lock held, then publishes: a writer
 * that fills the pipe in between leaves the splice holding bytes already
 * taken from the source, and publish() waits for room for them even for a
 * non-blocking caller, forever when nobody reads.  Linux reads the source
 * under the pipe's lock after wait_for_space() (splice_file_to_pipe), and
 * include/pagepipe.h promises the same ("Called with the output pipe's
 * producer lock held, so other writers of that pipe wait").
 *
 * The window is made certain: the source's splice_read asks another thread
 * to fill the pipe with 16 pages and waits up to 2 s for it (a correct
 * library keeps that writer waiting on the producer lock, so the wait runs
 * out and the splice goes on).  The splice must then return, with what it
 * published or EAGAIN; a splice still inside after 10 s is a failure.
 */
#include "helpers.h"

#include <fcntl.h>
#include <time.h>

static struct pp_file *e[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool fill_now, filled;
static ssize_t splice_ret = -2;
static int splice_errno;

static ssize_t src_splice_read(struct pp_file *in, off_t *pos, struct pp_buf *bufs,
			       unsigned int nr_bufs, size_t len, unsigned int flags)
{
	struct timespec ts;
	unsigned int n = 0;

	(void)in;
	(void)pos;
	(void)flags;
	pthread_mutex_lock(&lock);
	fill_now = true;
	pthread_cond_broadcast(&cond);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	while (!filled && pthread_cond_timedwait(&cond, &lock, &ts) == 0)
		;
	pthread_mutex_unlock(&lock);

	while (n < nr_bufs && len >= 4096) {
		void *page = pp_page_alloc();

		if (!page)
			break;
		memset(page, 'S', 4096);
		bufs[n++] = (struct pp_buf){ .page = page, .len = 4096, .ops = &pp_anon_buf_ops };
		len -= 4096;
	}
	return (ssize_t)n * 4096;
}

static const struct pp_file_ops src_ops = {
	.splice_read = src_splice_read,
	.name = "test source",
};

static void *filler(void *arg)
{
	static char page[4096];

	(void)arg;
	pthread_mutex_lock(&lock);
	while (!fill_now)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	memset(page, 'W', sizeof(page));
	/* Non-blocking: it stops at EAGAIN once the 16 slots are taken. */
	while (pp_write(e[1], page, sizeof(page)) > 0)
		;
	pthread_mutex_lock(&lock);
	filled = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *splicer(void *arg)
{
	struct pp_file *src = arg;

	splice_ret = pp_splice(src, NULL, e[1], NULL, 65536, SPLICE_F_NONBLOCK);
	splice_errno = errno;
	return NULL;
}

int main(void)
{
	struct pp_file *src;
	pthread_t tf, ts;

	if (pp_page_size() != 4096)
		return t_skip("page size %zu", pp_page_size());
	t_pipe2(e, O_NONBLOCK);
	src = pp_file_new(&src_ops, O_RDONLY, NULL);
	ASSERT_TRUE(src != NULL);
	ASSERT_EQ(pthread_create(&tf, NULL, filler, NULL), 0);
	ASSERT_EQ(pthread_create(&ts, NULL, splicer, src), 0);
	/* Nobody reads: a splice that waits for room waits forever. */
	t_join(ts, NULL, 10);
	t_join(tf, NULL, 10);
	if (splice_ret < 0)
		ASSERT_EQ(splice_errno, EAGAIN);
	else
		ASSERT_TRUE(splice_ret % 4096 == 0 && splice_ret <= 65536);
	pp_close(src);
	pp_close(e[0]);
	pp_close(e[1]);
	return T_EXIT_PASS;
}
