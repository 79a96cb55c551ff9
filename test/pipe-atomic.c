// SPDX-License-Identifier: MIT
/*
 * Description: PIPE_BUF (4096) atomicity (T-A1, T-A2).  Many writer threads
 * write tagged records of up to 4096 bytes into one pipe with write or
 * writev, blocking or non-blocking; one reader parses the byte stream and
 * checks that every record arrived whole, never interleaved with another,
 * and that each writer's records come in order.  The same run on a kernel
 * pipe checks the checker.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "helpers.h"

#define NWRITERS	6
#define NRECORDS	1500		/* per writer */
#define PIPE_BUF_BYTES	4096

struct rec_hdr {
	uint32_t magic;
	uint16_t writer;
	uint16_t len;		/* whole record, header included */
	uint32_t seq;
	uint32_t sum;		/* of the body bytes */
};

#define MAGIC	0x7a7e5eedu

/* An end of either kind. */
struct end {
	int kfd;
	struct pp_file *pf;
};

static ssize_t end_writev(struct end *e, const struct iovec *iov, int n)
{
	return e->kfd >= 0 ? writev(e->kfd, iov, n) : pp_writev(e->pf, iov, n);
}

static ssize_t end_read(struct end *e, void *buf, size_t n)
{
	return e->kfd >= 0 ? read(e->kfd, buf, n) : pp_read(e->pf, buf, n);
}

static int end_close(struct end *e)
{
	return e->kfd >= 0 ? close(e->kfd) : pp_close(e->pf);
}

/* Record length for writer w's record s: 16..4096, all sizes hit, 4096 often. */
static size_t rec_len(unsigned w, unsigned s)
{
	unsigned x = (w * 7919u + s * 104729u) ^ (s >> 3);

	if (s % 5 == 0)
		return PIPE_BUF_BYTES;
	return sizeof(struct rec_hdr) + x % (PIPE_BUF_BYTES - sizeof(struct rec_hdr) + 1);
}

struct wctx {
	struct end *end;
	unsigned id;
	bool nonblock;
	bool split;		/* header and body in separate iovecs */
	atomic_int *bad;	/* a short or failed write */
};

static void *writer_main(void *arg)
{
	struct wctx *w = arg;
	unsigned char body[PIPE_BUF_BYTES];

	for (unsigned s = 0; s < NRECORDS; s++) {
		size_t len = rec_len(w->id, s), blen = len - sizeof(struct rec_hdr);
		struct rec_hdr h = { MAGIC, (uint16_t)w->id, (uint16_t)len, s, 0 };
		unsigned char rec[PIPE_BUF_BYTES];
		struct iovec iov[3];
		int n;
		ssize_t r;

		t_fill(body, blen, (unsigned long long)s << 12, w->id);
		for (size_t i = 0; i < blen; i++)
			h.sum += body[i];
		if (w->split) {
			/* Three iovecs: the header, then the body in two parts. */
			iov[0] = (struct iovec){ &h, sizeof(h) };
			iov[1] = (struct iovec){ body, blen / 3 };
			iov[2] = (struct iovec){ body + blen / 3, blen - blen / 3 };
			n = 3;
		} else {
			memcpy(rec, &h, sizeof(h));
			memcpy(rec + sizeof(h), body, blen);
			iov[0] = (struct iovec){ rec, len };
			n = 1;
		}
		for (;;) {
			r = end_writev(w->end, iov, n);
			if (r < 0 && errno == EAGAIN && w->nonblock) {
				sched_yield();
				continue;	/* T-A2: all or nothing, so just retry */
			}
			break;
		}
		if (r != (ssize_t)len) {
			fprintf(stderr, "writer %u record %u: write of %zu returned %zd (%s)\n",
				w->id, s, len, r, r < 0 ? strerror(errno) : "short");
			atomic_fetch_add(w->bad, 1);
			return NULL;
		}
	}
	return NULL;
}

/* Parse the stream; returns the number of records checked, or -1. */
static long check_stream(struct end *rd)
{
	size_t cap = 1 << 17, have = 0;
	unsigned char *buf = malloc(cap);
	uint32_t next[NWRITERS] = { 0 };
	long records = 0;

	ASSERT_TRUE(buf != NULL);
	for (;;) {
		ssize_t r = end_read(rd, buf + have, cap - have);
		size_t off = 0;

		if (r < 0) {
			fprintf(stderr, "read: %s\n", strerror(errno));
			free(buf);
			return -1;
		}
		if (r == 0)
			break;
		have += (size_t)r;
		while (have - off >= sizeof(struct rec_hdr)) {
			struct rec_hdr h;
			uint32_t sum = 0;

			memcpy(&h, buf + off, sizeof(h));
			if (h.magic != MAGIC || h.writer >= NWRITERS || h.len < sizeof(h) ||
			    h.len > PIPE_BUF_BYTES) {
				fprintf(stderr, "stream offset %ld+%zu: not a record header "
					"(magic %#x writer %u len %u): records interleaved\n",
					records, off, h.magic, h.writer, h.len);
				free(buf);
				return -1;
			}
			if (have - off < h.len)
				break;
			for (size_t i = sizeof(h); i < h.len; i++)
				sum += buf[off + i];
			if (sum != h.sum || t_check(buf + off + sizeof(h), h.len - sizeof(h),
						    (unsigned long long)h.seq << 12, h.writer)) {
				fprintf(stderr, "record %u of writer %u: body corrupt (interleaved)\n",
					h.seq, h.writer);
				free(buf);
				return -1;
			}
			if (h.seq != next[h.writer] || h.len != rec_len(h.writer, h.seq)) {
				fprintf(stderr, "writer %u: record %u, want %u\n", h.writer, h.seq,
					next[h.writer]);
				free(buf);
				return -1;
			}
			next[h.writer]++;
			records++;
			off += h.len;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	free(buf);
	if (have) {
		fprintf(stderr, "%zu bytes of a partial record at EOF\n", have);
		return -1;
	}
	for (int w = 0; w < NWRITERS; w++)
		if (next[w] != NRECORDS) {
			fprintf(stderr, "writer %d: %u records, want %u\n", w, next[w], NRECORDS);
			return -1;
		}
	return records;
}

struct jctx {
	pthread_t *th;
	struct end *wr;
};

/* Join the writers (generously: a hang, not a timing) and close the write end. */
static void *join_main(void *arg)
{
	struct jctx *jc = arg;

	for (int i = 0; i < NWRITERS; i++)
		t_join(jc->th[i], NULL, 20);
	end_close(jc->wr);
	return NULL;
}

static void run(bool kernel, bool nonblock, bool split_some)
{
	struct end rd = { -1, NULL }, wr = { -1, NULL };
	struct wctx w[NWRITERS];
	pthread_t th[NWRITERS], jt;
	struct jctx jc = { th, &wr };
	atomic_int bad = 0;
	long n;

	if (kernel) {
		int k[2];

		t_kpipe2(k, 0);
		if (nonblock)
			ASSERT_EQ(fcntl(k[1], F_SETFL, O_NONBLOCK), 0);
		rd.kfd = k[0];
		wr.kfd = k[1];
	} else {
		struct pp_file *p[2];

		t_pipe2(p, 0);
		if (nonblock)
			ASSERT_EQ(pp_fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
		rd.pf = p[0];
		wr.pf = p[1];
	}
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i] = (struct wctx){ &wr, i, nonblock, split_some && (i & 1), &bad };
		ASSERT_EQ(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	/* EOF comes when the joiner has closed the write end after the writers. */
	ASSERT_EQ(pthread_create(&jt, NULL, join_main, &jc), 0);
	n = check_stream(&rd);
	ASSERT_EQ(n, (long)NWRITERS * NRECORDS);
	t_join(jt, NULL, 25);
	ASSERT_EQ(atomic_load(&bad), 0);
	end_close(&rd);
}

static int test_kernel_blocking(void)
{
	run(true, false, true);
	return 0;
}

static int test_blocking_write(void)
{
	run(false, false, false);
	return 0;
}

static int test_blocking_writev(void)
{
	run(false, false, true);
	return 0;
}

static int test_nonblocking_writers(void)
{
	run(false, true, true);
	return 0;
}

/* T-A2 alone: a non-blocking write <= PIPE_BUF is all or nothing, never partial. */
static int test_nonblocking_all_or_nothing(void)
{
	struct pp_file *p[2];
	int k[2];
	char buf[PIPE_BUF_BYTES];

	memset(buf, 'a', sizeof(buf));
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	/* Fill with writes of sizes that leave ragged page tails. */
	for (int i = 0; i < 200; i++) {
		size_t n = 1 + (size_t)(i * 1237) % PIPE_BUF_BYTES;
		struct t_res kr = T_CALL(write(k[1], buf, n)), pr = T_CALL(pp_write(p[1], buf, n));

		ASSERT_EQ(kr.ret, pr.ret);
		ASSERT_EQ(kr.err, pr.err);
		ASSERT_TRUE(pr.ret == (long long)n || (pr.ret == -1 && pr.err == EAGAIN));
		if (i % 7 == 0)
			ASSERT_SAME_READ(k[0], p[0], 3000);
	}
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_kernel_blocking),
		T_SUBTEST(test_blocking_write),
		T_SUBTEST(test_blocking_writev),
		T_SUBTEST(test_nonblocking_writers),
		T_SUBTEST(test_nonblocking_all_or_nothing),
	};

	return T_RUN_SUBTESTS(tests);
}
