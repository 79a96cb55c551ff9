// SPDX-License-Identifier: MIT
/*
 * Description: a writer merging small writes into the last buffer while
 * the reader drains that same buffer (issue 11, section 5).  The writer
 * makes writes of 1 to 300 bytes, so almost every write appends to the
 * page the reader is reading from (the merge rule); the reader makes reads
 * of 1 to 600 bytes, so it keeps catching up with the writer and reading
 * the last, growing buffer.  The stream is position-numbered (the byte at
 * position n is t_pattern(n)); every byte is checked, none may be lost,
 * doubled or stale.  A second round does the same with one blocking and
 * one non-blocking side each way.  Two more rounds read by the calls
 * that retire the last buffer instead of leaving it drained, so that they
 * must seal it first (pipe.h): a read loan (pp_read_lend/pp_read_done)
 * and a splice into a kernel pipe.  A last round splices into a second
 * pagepipe, where a splice that takes the whole last buffer moves its page
 * to the other pipe: the move must shut the writer out of that slot first
 * (its seal), or the writer's next merge lands in a page that has left
 * the pipe and those bytes are lost (without the seal in splice.c's move,
 * this round fails three runs in three).  Runs for PP_STRESS_SECONDS
 * (default 2) in all.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>

#define SEED	0x3e

enum how { BY_READ, BY_LEND, BY_SPLICE, BY_MOVE };

struct side {
	struct pp_file *f;
	bool nonblock;
	enum how how;
	long long deadline;
	unsigned long long bytes;
};

static void *writer_main(void *arg)
{
	struct side *s = arg;
	unsigned char buf[300];
	unsigned int seed = 1;

	while (t_now_ms() < s->deadline) {
		size_t n = 1 + (size_t)rand_r(&seed) % sizeof(buf);
		size_t done = 0;

		t_fill(buf, n, s->bytes, SEED);
		while (done < n) {
			ssize_t r = pp_write(s->f, buf + done, n - done);

			if (r < 0 && errno == EAGAIN && s->nonblock) {
				sched_yield();
				continue;
			}
			if (r <= 0)
				t_fail_at(__FILE__, __LINE__, "pp_write = %zd: %s", r, strerror(errno));
			done += (size_t)r;
		}
		s->bytes += n;
	}
	pp_close(s->f);
	return NULL;
}

/* Copy what a read loan lends, then give it back whole. */
static ssize_t lend_read(struct pp_file *f, unsigned char *buf, size_t n)
{
	struct iovec iov[16];
	ssize_t r = pp_read_lend(f, iov, 16, n);
	size_t off = 0;

	if (r <= 0)
		return r;
	for (int i = 0; off < (size_t)r; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	ASSERT_EQ(pp_read_done(f, (size_t)r), 0);
	return r;
}

/*
 * pp_splice n bytes out of the pagepipe into w, then read all that moved
 * back from r, the other end of w's pipe.
 */
static ssize_t splice_then_read(struct side *s, struct pp_file *w, struct pp_file *r,
				unsigned char *buf, size_t n, const char *what)
{
	ssize_t moved, got = 0;

	moved = pp_splice(s->f, NULL, w, NULL, n, s->nonblock ? SPLICE_F_NONBLOCK : 0);
	if (moved <= 0)
		return moved;
	while (got < moved) {
		ssize_t m = pp_read(r, buf + got, (size_t)(moved - got));

		if (m <= 0)
			t_fail_at(__FILE__, __LINE__, "read(%s) = %zd: %s", what, m,
				  strerror(errno));
		got += m;
	}
	return moved;
}

/* Through a kernel pipe (pp_fdopen: its reads are read(2)). */
static struct pp_file *kpipe[2];

static ssize_t splice_read(struct side *s, unsigned char *buf, size_t n)
{
	return splice_then_read(s, kpipe[1], kpipe[0], buf, n, "kernel pipe");
}

/* Into a second pagepipe, whole buffers moving, then pp_read from it. */
static struct pp_file *second[2];

static ssize_t move_read(struct side *s, unsigned char *buf, size_t n)
{
	return splice_then_read(s, second[1], second[0], buf, n, "second pagepipe");
}

static void *reader_main(void *arg)
{
	struct side *s = arg;
	unsigned char buf[600];
	unsigned int seed = 2;

	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % sizeof(buf);
		ssize_t r = s->how == BY_LEND ? lend_read(s->f, buf, n) :
			    s->how == BY_SPLICE ? splice_read(s, buf, n) :
			    s->how == BY_MOVE ? move_read(s, buf, n) : pp_read(s->f, buf, n);

		if (r < 0 && errno == EAGAIN && s->nonblock) {
			sched_yield();
			continue;
		}
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		if (t_check(buf, (size_t)r, s->bytes, SEED))
			t_fail_at(__FILE__, __LINE__, "wrong byte in a read of %zd at stream "
				  "position %llu", r, s->bytes);
		s->bytes += (size_t)r;
	}
	return NULL;
}

static void round_trip(int ms, bool wr_nonblock, bool rd_nonblock, enum how how)
{
	static const char *const how_name[] = { "pp_read", "pp_read_lend", "pp_splice",
						 "pp_splice to a pagepipe" };
	struct pp_file *e[2];
	struct side w, r;
	pthread_t tw, tr;

	t_pipe2(e, 0);
	if (wr_nonblock)
		ASSERT_EQ(pp_fcntl(e[1], F_SETFL, O_NONBLOCK), 0);
	if (rd_nonblock)
		ASSERT_EQ(pp_fcntl(e[0], F_SETFL, O_NONBLOCK), 0);
	w = (struct side){ .f = e[1], .nonblock = wr_nonblock, .deadline = t_now_ms() + ms };
	r = (struct side){ .f = e[0], .nonblock = rd_nonblock, .how = how };
	ASSERT_EQ(pthread_create(&tr, NULL, reader_main, &r), 0);
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, &w), 0);
	t_join(tw, NULL, ms / 1000 + 30);
	t_join(tr, NULL, 30);
	ASSERT_EQ(r.bytes, w.bytes);
	printf("%s writer, %s reader by %s: %llu bytes\n",
	       wr_nonblock ? "non-blocking" : "blocking", rd_nonblock ? "non-blocking" : "blocking",
	       how_name[how], w.bytes);
	pp_close(e[0]);
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;

	t_watchdog(ms / 1000 + 60, "merging writes while the reader drains the last buffer");
	{
		int k[2];

		ASSERT_EQ(pipe(k), 0);
		kpipe[0] = pp_fdopen(k[0]);
		kpipe[1] = pp_fdopen(k[1]);
		ASSERT_TRUE(kpipe[0] && kpipe[1]);
	}
	t_pipe2(second, 0);
	round_trip(ms / 4, false, false, BY_READ);
	round_trip(ms / 8, true, false, BY_READ);
	round_trip(ms / 8, false, true, BY_READ);
	round_trip(ms / 8, false, false, BY_LEND);
	round_trip(ms / 8, false, false, BY_SPLICE);
	round_trip(ms / 4, false, false, BY_MOVE);
	return T_EXIT_PASS;
}
