// SPDX-License-Identifier: MIT
/*
 * Description: the side locks exclude (issue 11, the fast path).  A pipe's
 * consumer lock (rd_mutex) and producer lock (wr_mutex) are a futex lock of
 * the library's own; the ring's head and tail, a slot's offset and length
 * and the merge word are plain counters that only the holder moves.  Many
 * writers and many readers on one pipe, through the real calls: every
 * record is a write of fixed size (at most PIPE_BUF, so atomic) and every
 * read asks for exactly one record, so with the locks excluding each read
 * returns one whole record, and every record arrives once.  Two producers
 * in at once lose or tear records; two consumers in at once tear, double
 * or skip them.  Sub-tests: PIPE_BUF records (a slot each), 64-byte
 * records (the merge rule: many per slot, drained slots reopened), and
 * 64-byte records read by non-blocking readers (the consumer lock's
 * trylock path).  The byte totals must match on both sides.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define NW	4
#define NR	4

struct hdr {
	uint32_t writer;
	uint32_t len;
	uint64_t seq;
};

static struct pp_file *E[2];
static size_t reclen;
static unsigned int nrec;		/* per writer */
static bool nonblock_readers;
static atomic_uchar *seen;		/* [writer * nrec + seq] */
static atomic_llong bytes_read;

static void *writer_main(void *arg)
{
	unsigned int w = (unsigned int)(uintptr_t)arg;
	unsigned char rec[4096];

	for (uint64_t seq = 0; seq < nrec; seq++) {
		struct hdr h = { w, (uint32_t)reclen, seq };
		ssize_t r;

		memcpy(rec, &h, sizeof(h));
		t_fill(rec + sizeof(h), reclen - sizeof(h), seq * reclen, w);
		r = pp_write(E[1], rec, reclen);
		if (r != (ssize_t)reclen)
			t_fail_at(__FILE__, __LINE__, "writer %u: a %zu-byte write returned %zd (%s)",
				  w, reclen, r, r < 0 ? strerror(errno) : "short");
	}
	return NULL;
}

static void *reader_main(void *arg)
{
	unsigned int rd = (unsigned int)(uintptr_t)arg;
	unsigned char rec[4096];
	long long total = 0;

	for (;;) {
		struct hdr h;
		ssize_t r = pp_read(E[0], rec, reclen);

		if (r < 0 && errno == EAGAIN && nonblock_readers) {
			sched_yield();
			continue;
		}
		if (r == 0)
			break;
		if (r != (ssize_t)reclen)
			t_fail_at(__FILE__, __LINE__, "reader %u: a %zu-byte read returned %zd (%s)",
				  rd, reclen, r, r < 0 ? strerror(errno) : "not one record");
		memcpy(&h, rec, sizeof(h));
		if (h.writer >= NW || h.len != reclen || h.seq >= nrec)
			t_fail_at(__FILE__, __LINE__,
				  "reader %u: torn record: writer %u len %u seq %llu",
				  rd, h.writer, h.len, (unsigned long long)h.seq);
		if (t_check(rec + sizeof(h), reclen - sizeof(h), h.seq * reclen, h.writer))
			t_fail_at(__FILE__, __LINE__,
				  "reader %u: record %llu of writer %u: bytes not its own",
				  rd, (unsigned long long)h.seq, h.writer);
		if (atomic_fetch_add(&seen[h.writer * nrec + h.seq], 1))
			t_fail_at(__FILE__, __LINE__, "reader %u: record %llu of writer %u read twice",
				  rd, (unsigned long long)h.seq, h.writer);
		total += r;
	}
	atomic_fetch_add(&bytes_read, total);
	return NULL;
}

/* Fails the test (t_fail_at) on the first wrong record or total. */
static void run(size_t len, unsigned int n, bool nonblock)
{
	pthread_t w[NW], rd[NR];

	reclen = len;
	nrec = n;
	nonblock_readers = nonblock;
	atomic_store(&bytes_read, 0);
	seen = calloc((size_t)NW * n, sizeof(*seen));
	ASSERT_TRUE(seen != NULL);
	t_pipe2(E, 0);
	if (nonblock)
		ASSERT_EQ(pp_fcntl(E[0], F_SETFL, O_NONBLOCK), 0);

	for (unsigned int i = 0; i < NR; i++)
		ASSERT_EQ(pthread_create(&rd[i], NULL, reader_main, (void *)(uintptr_t)i), 0);
	for (unsigned int i = 0; i < NW; i++)
		ASSERT_EQ(pthread_create(&w[i], NULL, writer_main, (void *)(uintptr_t)i), 0);
	for (unsigned int i = 0; i < NW; i++)
		pthread_join(w[i], NULL);
	ASSERT_EQ(pp_close(E[1]), 0);	/* the readers see EOF once it is empty */
	for (unsigned int i = 0; i < NR; i++)
		pthread_join(rd[i], NULL);

	for (unsigned int i = 0; i < NW * n; i++)
		if (atomic_load(&seen[i]) != 1)
			t_fail_at(__FILE__, __LINE__, "record %u of writer %u read %u times",
				  i % n, i / n, (unsigned int)atomic_load(&seen[i]));
	ASSERT_EQ(atomic_load(&bytes_read), (long long)NW * n * len);
	ASSERT_EQ(pp_close(E[0]), 0);
	free(seen);
}

/*
 * A lock that lets two in shows within a few rounds; each takes a fraction
 * of a second, ten times that under TSan, which looks at every access
 * anyway and gets one.
 */
#if defined(__SANITIZE_THREAD__)
#define ROUNDS	1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ROUNDS	1
#endif
#endif
#ifndef ROUNDS
#define ROUNDS	4
#endif

static int test_pipebuf_records(void)
{
	for (int i = 0; i < ROUNDS; i++)
		run(4096, 8000, false);
	return T_EXIT_PASS;
}

static int test_small_records(void)
{
	for (int i = 0; i < ROUNDS; i++)
		run(64, 50000, false);
	return T_EXIT_PASS;
}

static int test_nonblock_readers(void)
{
	for (int i = 0; i < ROUNDS; i++)
		run(64, 50000, true);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_pipebuf_records),
		T_SUBTEST(test_small_records),
		T_SUBTEST(test_nonblock_readers),
	};

	return T_RUN_SUBTESTS(tests);
}
