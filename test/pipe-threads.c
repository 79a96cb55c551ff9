// SPDX-License-Identifier: MIT
/*
 * Description: several reader and several writer threads on the same two
 * ends.  Writers send sequence-numbered, checksummed records no larger
 * than PIPE_BUF, laid out so that every read returns exactly one record
 * (packet mode; or fixed sizes that tile the pages); at the end every
 * record must have arrived exactly once (nothing lost or duplicated),
 * whole and intact (atomic writes stay contiguous), and each reader must
 * have seen each writer's records in increasing order (nothing
 * reordered).  The same run on a kernel pipe checks the checker.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "helpers.h"

#define NWRITERS	4
#define NREADERS	3
#define NRECORDS	2500		/* per writer */

struct rec_hdr {
	uint32_t magic;
	uint16_t writer;
	uint16_t len;
	uint32_t seq;
	uint32_t sum;
};

#define MAGIC	0x7e7e0001u

enum mode {
	M_PACKET,	/* O_DIRECT, 16..4096 bytes, reads of 4096 */
	M_PAGE,		/* plain, 4096 bytes: one record a page */
	M_SMALL,	/* plain, 512 bytes: 8 merged records a page, reads of 512 */
	M_SMALL_IOV,	/* as M_SMALL, written and read with 2 iovecs */
};

struct run {
	enum mode mode;
	bool kernel;
	int kfd[2];
	struct pp_file *pf[2];
	atomic_int bad;
	/* seen[w][s]: how many times record s of writer w was read */
	atomic_uchar seen[NWRITERS][NRECORDS];
};

static size_t rec_len(const struct run *r, unsigned w, unsigned s)
{
	switch (r->mode) {
	case M_PACKET:
		return sizeof(struct rec_hdr) + (w * 7919u + s * 104729u) % (4096 - sizeof(struct rec_hdr) + 1);
	case M_PAGE:
		return 4096;
	default:
		return 512;
	}
}

static size_t read_len(const struct run *r)
{
	return r->mode == M_PACKET || r->mode == M_PAGE ? 4096 : 512;
}

static ssize_t do_writev(struct run *r, const struct iovec *iov, int n)
{
	return r->kernel ? writev(r->kfd[1], iov, n) : pp_writev(r->pf[1], iov, n);
}

static ssize_t do_readv(struct run *r, const struct iovec *iov, int n)
{
	return r->kernel ? readv(r->kfd[0], iov, n) : pp_readv(r->pf[0], iov, n);
}

struct wctx {
	struct run *r;
	unsigned id;
};

static void *writer_main(void *arg)
{
	struct wctx *w = arg;
	struct run *r = w->r;
	unsigned char rec[4096];

	for (unsigned s = 0; s < NRECORDS; s++) {
		size_t len = rec_len(r, w->id, s);
		struct rec_hdr h = { MAGIC, (uint16_t)w->id, (uint16_t)len, s, 0 };
		struct iovec iov[2];
		int n = 1;
		ssize_t ret;

		t_fill(rec + sizeof(h), len - sizeof(h), (unsigned long long)s << 12, w->id);
		for (size_t i = sizeof(h); i < len; i++)
			h.sum += rec[i];
		memcpy(rec, &h, sizeof(h));
		iov[0] = (struct iovec){ rec, len };
		if (r->mode == M_SMALL_IOV) {
			iov[0].iov_len = 100;
			iov[1] = (struct iovec){ rec + 100, len - 100 };
			n = 2;
		}
		ret = do_writev(r, iov, n);
		if (ret != (ssize_t)len) {
			fprintf(stderr, "writer %u: record %u: %zd (%s)\n", w->id, s, ret,
				ret < 0 ? strerror(errno) : "short");
			atomic_fetch_add(&r->bad, 1);
			return NULL;
		}
	}
	return NULL;
}

struct rctx {
	struct run *r;
	unsigned id;
	long records;
};

static void *reader_main(void *arg)
{
	struct rctx *c = arg;
	struct run *r = c->r;
	unsigned char rec[4096];
	long last[NWRITERS];
	size_t want = read_len(r);

	for (int w = 0; w < NWRITERS; w++)
		last[w] = -1;
	for (;;) {
		struct iovec iov[2] = { { rec, want }, { NULL, 0 } };
		struct rec_hdr h;
		uint32_t sum = 0;
		int n = 1;
		ssize_t got;

		if (r->mode == M_SMALL_IOV) {
			iov[0].iov_len = 256;
			iov[1] = (struct iovec){ rec + 256, want - 256 };
			n = 2;
		}
		got = do_readv(r, iov, n);
		if (got == 0)
			return NULL;
		if (got < (ssize_t)sizeof(h)) {
			fprintf(stderr, "reader %u: read %zd (%s)\n", c->id, got,
				got < 0 ? strerror(errno) : "short");
			atomic_fetch_add(&r->bad, 1);
			return NULL;
		}
		memcpy(&h, rec, sizeof(h));
		if (h.magic != MAGIC || h.writer >= NWRITERS || h.seq >= NRECORDS ||
		    h.len != (size_t)got || h.len != rec_len(r, h.writer, h.seq)) {
			fprintf(stderr, "reader %u: a read of %zd is not one whole record "
				"(magic %#x writer %u seq %u len %u)\n",
				c->id, got, h.magic, h.writer, h.seq, h.len);
			atomic_fetch_add(&r->bad, 1);
			return NULL;
		}
		for (size_t i = sizeof(h); i < h.len; i++)
			sum += rec[i];
		if (sum != h.sum || t_check(rec + sizeof(h), h.len - sizeof(h),
					    (unsigned long long)h.seq << 12, h.writer)) {
			fprintf(stderr, "reader %u: writer %u record %u corrupt\n", c->id, h.writer, h.seq);
			atomic_fetch_add(&r->bad, 1);
			return NULL;
		}
		if ((long)h.seq <= last[h.writer]) {
			fprintf(stderr, "reader %u: writer %u record %u after record %ld: reordered\n",
				c->id, h.writer, h.seq, last[h.writer]);
			atomic_fetch_add(&r->bad, 1);
			return NULL;
		}
		last[h.writer] = h.seq;
		atomic_fetch_add(&r->seen[h.writer][h.seq], 1);
		c->records++;
	}
}

static void run(enum mode mode, bool kernel)
{
	struct run *r = calloc(1, sizeof(*r));
	struct wctx w[NWRITERS];
	struct rctx rc[NREADERS];
	pthread_t wt[NWRITERS], rt[NREADERS];
	int flags = mode == M_PACKET ? O_DIRECT : 0;
	long total = 0;

	ASSERT_TRUE(r != NULL);
	r->mode = mode;
	r->kernel = kernel;
	if (kernel)
		t_kpipe2(r->kfd, flags);
	else
		t_pipe2(r->pf, flags);
	for (unsigned i = 0; i < NREADERS; i++) {
		rc[i] = (struct rctx){ r, i, 0 };
		ASSERT_EQ(pthread_create(&rt[i], NULL, reader_main, &rc[i]), 0);
	}
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i] = (struct wctx){ r, i };
		ASSERT_EQ(pthread_create(&wt[i], NULL, writer_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < NWRITERS; i++)
		t_join(wt[i], NULL, 25);
	/* All written: the last writer goes, and every reader sees EOF. */
	if (kernel)
		close(r->kfd[1]);
	else
		pp_close(r->pf[1]);
	for (unsigned i = 0; i < NREADERS; i++) {
		t_join(rt[i], NULL, 25);
		total += rc[i].records;
	}
	ASSERT_EQ(atomic_load(&r->bad), 0);
	for (unsigned wi = 0; wi < NWRITERS; wi++)
		for (unsigned s = 0; s < NRECORDS; s++)
			if (atomic_load(&r->seen[wi][s]) != 1)
				t_fail_at(__FILE__, __LINE__, "writer %u record %u read %u times",
					  wi, s, atomic_load(&r->seen[wi][s]));
	ASSERT_EQ(total, (long)NWRITERS * NRECORDS);
	if (kernel)
		close(r->kfd[0]);
	else
		pp_close(r->pf[0]);
	free(r);
}

static int test_kernel_packet(void)
{
	run(M_PACKET, true);
	return 0;
}

static int test_kernel_small(void)
{
	run(M_SMALL, true);
	return 0;
}

static int test_packet(void)
{
	run(M_PACKET, false);
	return 0;
}

static int test_page_records(void)
{
	run(M_PAGE, false);
	return 0;
}

static int test_small_merged_records(void)
{
	run(M_SMALL, false);
	return 0;
}

static int test_small_records_iovecs(void)
{
	run(M_SMALL_IOV, false);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_kernel_packet),
		T_SUBTEST(test_kernel_small),
		T_SUBTEST(test_packet),
		T_SUBTEST(test_page_records),
		T_SUBTEST(test_small_merged_records),
		T_SUBTEST(test_small_records_iovecs),
	};

	return T_RUN_SUBTESTS(tests);
}
