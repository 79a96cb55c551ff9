// SPDX-License-Identifier: MIT
/*
 * Description: readers that often block on an empty pipe while writers
 * write, the traffic a direct handoff (a writer copying straight into a
 * waiting reader's buffer) would take.  A regression guard written before
 * that handoff, against code that has none; it passes there.
 *
 *  - stream: one writer, one reader, pipes of 4096 and 65536 bytes.  The
 *    writer produces a stream of records (a header with a sequence number
 *    and a length, then a payload made from the sequence number) and
 *    writes it in pieces of 1 byte to 300 KiB that ignore record bounds,
 *    by pp_write and pp_writev, pausing now and then so that the reader
 *    drains the pipe and blocks; the reader reads pieces of 1 byte to
 *    300 KiB, pausing now and then so that the writer blocks, and parses
 *    the records: a lost, doubled, reordered or torn piece breaks the
 *    sequence, a length or the payload.  Both keep a checksum of every
 *    byte, compared at the end.
 *  - records: three writers of PIPE_BUF (4096-byte) records, each one
 *    write or writev, two readers reading 1 to 8 records' worth: every
 *    read returns whole records (the writes fill whole pages, so Linux's
 *    reads do too), each writer's records arrive in order at each reader,
 *    and every record arrives exactly once.
 *
 * Each runs first on a kernel pipe for a quarter of its time, to check
 * the harness against the kernel, then on a pagepipe.  Run time:
 * PP_STRESS_SECONDS per part (default 2, 1 under a sanitizer); no timing
 * is asserted.
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#define MAXIO	(300 * 1024)

/* A kernel pipe or a pagepipe. */
struct xp {
	bool kernel;
	int k[2];
	struct pp_file *p[2];
};

static const char *kind(const struct xp *x)
{
	return x->kernel ? "kernel" : "pagepipe";
}

static void xp_open(struct xp *x, bool kernel, int size)
{
	memset(x, 0, sizeof(*x));
	x->kernel = kernel;
	if (kernel) {
		t_kpipe2(x->k, 0);
		ASSERT_EQ(fcntl(x->k[1], F_SETPIPE_SZ, size), size);
	} else {
		t_pipe2(x->p, 0);
		ASSERT_EQ(pp_fcntl(x->p[1], F_SETPIPE_SZ, size), size);
	}
}

static void xp_close(struct xp *x, int i)
{
	if (x->kernel)
		ASSERT_EQ(close(x->k[i]), 0);
	else
		ASSERT_EQ(pp_close(x->p[i]), 0);
}

static ssize_t xp_read(struct xp *x, void *buf, size_t n)
{
	return x->kernel ? read(x->k[0], buf, n) : pp_read(x->p[0], buf, n);
}

static ssize_t xp_writev(struct xp *x, const struct iovec *iov, int n)
{
	return x->kernel ? writev(x->k[1], iov, n) : pp_writev(x->p[1], iov, n);
}

/*
 * A checksum of the whole stream that does not depend on how it was cut
 * into writes or reads: FNV-1a over the stream's 8-byte words, the bytes
 * of a word cut in two carried over.
 */
struct csum {
	uint64_t h, pos, carry;
};

static void csum_word(struct csum *c, uint64_t w)
{
	c->h = (c->h ^ w) * 0x100000001b3ull;
}

static void csum_add(struct csum *c, const unsigned char *b, size_t n)
{
	for (; n && c->pos % 8; n--, b++) {
		c->carry |= (uint64_t)*b << (8 * (c->pos % 8));
		if (++c->pos % 8 == 0) {
			csum_word(c, c->carry);
			c->carry = 0;
		}
	}
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w;

		memcpy(&w, b, 8);
		csum_word(c, w);
		c->pos += 8;
	}
	for (; n; n--, b++)
		c->carry |= (uint64_t)*b << (8 * (c->pos++ % 8));
}

static uint64_t csum_end(struct csum c)
{
	csum_word(&c, c.carry ^ c.pos);
	return c.h;
}
#define CSUM_INIT	((struct csum){ 0xcbf29ce484222325ull, 0, 0 })

/* Sizes from 1 byte to 300 KiB: many small, many near a page, the rest anywhere. */
static size_t random_size(unsigned int *seed)
{
	unsigned int r = (unsigned int)rand_r(seed);

	switch (r % 4) {
	case 0:
		return 1 + r / 4 % 256;
	case 1:
		return 4096 - 8 + r / 4 % 17;
	case 2:
		return 65536 - 8 + r / 4 % 17;
	default:
		return 1 + ((size_t)r * 2654435761u) % MAXIO;
	}
}

/* Now and then, let the other side catch up and block: its peer drained or filled the pipe. */
static void pause_briefly(unsigned int *seed, unsigned int one_in)
{
	unsigned int r = (unsigned int)rand_r(seed) % one_in;

	if (r == 0) {
		struct timespec ts = { 0, 50000 + (long)((unsigned int)rand_r(seed) % 450000) };

		nanosleep(&ts, NULL);
	} else if (r == 1) {
		sched_yield();
	}
}

static int part_ms(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");

	return (env && atoi(env) > 0 ? atoi(env) : T_SANITIZED ? 1 : 2) * 1000;
}

/* ---------------------------------------------------------------------- */

/* The record stream: a header, then len payload bytes made from seq. */
struct hdr {
	uint32_t magic;
	uint32_t len;
	uint64_t seq;
};
#define MAGIC	0x48414e44u	/* "HAND" */
#define PAYMAX	(70 * 1024)
#define PATLEN	(1 << 20)

/* Record seq's payload is pat[payload_at(seq)...]: a copy, cheap under sanitizers. */
static unsigned char *pat;

static size_t payload_at(uint64_t seq)
{
	return (size_t)(seq * 4099 % PATLEN);
}

/* The record being produced or parsed, and where in it we are. */
struct cursor {
	uint64_t seq;
	struct hdr h;
	size_t off;		/* into header + payload */
};

static void cursor_next(struct cursor *c, unsigned int *seed)
{
	c->h = (struct hdr){ MAGIC, (uint32_t)((unsigned int)rand_r(seed) % (PAYMAX + 1)), c->seq };
	c->off = 0;
}

/* Produce the next n bytes of the stream into buf. */
static void produce(struct cursor *c, unsigned int *seed, unsigned char *buf, size_t n)
{
	while (n) {
		size_t rec = sizeof(c->h) + c->h.len, k;

		if (c->off == rec) {
			c->seq++;
			cursor_next(c, seed);
			continue;
		}
		k = rec - c->off < n ? rec - c->off : n;
		for (size_t i = 0; i < k; ) {
			if (c->off + i < sizeof(c->h)) {
				size_t m = sizeof(c->h) - (c->off + i);

				m = m < k - i ? m : k - i;
				memcpy(buf + i, (unsigned char *)&c->h + c->off + i, m);
				i += m;
			} else {
				size_t at = c->off + i - sizeof(c->h);

				memcpy(buf + i, pat + payload_at(c->seq) + at, k - i);
				i = k;
			}
		}
		c->off += k;
		buf += k;
		n -= k;
	}
}

/* Bytes left in the current record (0 at a record bound). */
static size_t cursor_left(const struct cursor *c)
{
	size_t rec = sizeof(c->h) + c->h.len;

	return c->off == rec ? 0 : rec - c->off;
}

struct stream {
	struct xp x;
	long long deadline;
	struct csum wsum;
	unsigned long long wbytes;
	uint64_t wrecords;
	unsigned long long met_sleeper;	/* writes that began with a reader asleep */
	unsigned long long writes;
};

/* A reader asleep on the ring (a pagepipe's sleeper count, src/pipe.h). */
static bool reader_asleep(struct xp *x)
{
	return !x->kernel && __atomic_load_n(&x->p[1]->pipe->rd_sleepers, __ATOMIC_RELAXED);
}

static void *stream_writer(void *arg)
{
	struct stream *s = arg;
	unsigned char *buf = malloc(MAXIO);
	unsigned int seed = 17, gseed = 4242;
	struct cursor c = { 0 };

	ASSERT_TRUE(buf);
	s->wsum = CSUM_INIT;
	cursor_next(&c, &gseed);
	for (bool last = false; !last; ) {
		size_t n = random_size(&seed);
		ssize_t r;

		if (t_now_ms() >= s->deadline) {
			/* Finish the record under way, and stop. */
			n = cursor_left(&c);
			last = true;
			if (!n)
				break;
		}
		produce(&c, &gseed, buf, n);
		csum_add(&s->wsum, buf, n);
		s->met_sleeper += reader_asleep(&s->x);
		if (rand_r(&seed) % 3 == 0 && n >= 3) {
			struct iovec iov[3] = {
				{ buf, n / 3 }, { buf + n / 3, 0 }, { buf + n / 3, n - n / 3 },
			};

			r = xp_writev(&s->x, iov, 3);
		} else {
			struct iovec iov = { buf, n };

			r = xp_writev(&s->x, &iov, 1);
		}
		if (r != (ssize_t)n)
			t_fail_at(__FILE__, __LINE__, "%s: a blocking write of %zu returned %zd (%s)",
				  kind(&s->x), n, r, r < 0 ? strerror(errno) : "short");
		s->wbytes += n;
		s->writes++;
		pause_briefly(&seed, 3);
	}
	s->wrecords = c.seq + (cursor_left(&c) == 0);
	xp_close(&s->x, 1);
	free(buf);
	return NULL;
}

/* Parse what the reader got against the generator's own stream. */
static void run_stream(bool kernel, int cap, int ms)
{
	struct stream s = { .deadline = t_now_ms() + ms };
	unsigned char *buf = malloc(MAXIO), *want = malloc(MAXIO);
	unsigned int seed = 99, gseed = 4242;
	unsigned long long rbytes = 0, reads = 0;
	struct csum rsum = CSUM_INIT;
	struct cursor c = { 0 };
	pthread_t th;

	ASSERT_TRUE(buf && want);
	xp_open(&s.x, kernel, cap);
	cursor_next(&c, &gseed);
	ASSERT_EQ(pthread_create(&th, NULL, stream_writer, &s), 0);
	for (;;) {
		size_t n = random_size(&seed);
		ssize_t r = xp_read(&s.x, buf, n);

		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "%s: read: %s", kind(&s.x), strerror(errno));
		if (!r)
			break;
		if ((size_t)r > n || (size_t)r > (size_t)cap)
			t_fail_at(__FILE__, __LINE__, "%s: read(%zu) from a %d-byte pipe returned %zd",
				  kind(&s.x), n, cap, r);
		/*
		 * The same generator, run in step: any byte lost, doubled,
		 * reordered or changed shows at once; the header tells where.
		 */
		{
			uint64_t seq = c.seq;
			size_t off = c.off;

			produce(&c, &gseed, want, (size_t)r);
			if (memcmp(buf, want, (size_t)r)) {
				size_t i = 0;

				while (buf[i] == want[i])
					i++;
				t_fail_at(__FILE__, __LINE__, "%s: stream byte %llu (record %llu, "
					  "offset %zu, + %zu): 0x%02x, want 0x%02x: lost, doubled, "
					  "reordered or torn", kind(&s.x), rbytes + i,
					  (unsigned long long)seq, off, i, buf[i], want[i]);
			}
		}
		csum_add(&rsum, buf, (size_t)r);
		rbytes += (unsigned long long)r;
		reads++;
		pause_briefly(&seed, 16);
	}
	t_join(th, NULL, 30);
	if (cursor_left(&c))
		t_fail_at(__FILE__, __LINE__, "%s: EOF inside record %llu", kind(&s.x),
			  (unsigned long long)c.seq);
	ASSERT_EQ(rbytes, s.wbytes);
	ASSERT_EQ(csum_end(rsum), csum_end(s.wsum));
	ASSERT_EQ(c.seq + (c.off != 0), s.wrecords);
	printf("%s, %d-byte pipe: %llu bytes, %llu records, %llu reads, checksum %016llx",
	       kind(&s.x), cap, rbytes, (unsigned long long)s.wrecords, reads,
	       (unsigned long long)csum_end(rsum));
	if (!kernel)
		printf(", %llu of %llu writes found the reader asleep", s.met_sleeper, s.writes);
	printf("\n");
	xp_close(&s.x, 0);
	free(buf);
	free(want);
}

static int stream(void)
{
	int ms = part_ms();

	t_watchdog(ms / 1000 + 60, "stream");
	for (int cap = 4096; cap <= 65536; cap *= 16) {
		run_stream(true, cap, ms / 8);
		run_stream(false, cap, ms * 3 / 8);
	}
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */

#define NWR	3
#define NRD	2
#define REC	PIPE_BUF
#define RECMAX_SEQ	(1u << 20)

struct rec {
	uint32_t writer;
	uint32_t seq;
};

struct records {
	struct xp x;
	long long deadline;
	uint32_t sent[NWR];
	unsigned char *seen;		/* [writer][seq]: times read */
	atomic_ullong nread;
	atomic_int writers_left;
	atomic_ullong met_sleeper;
	ssize_t cap;
};

struct rjob {
	struct records *r;
	int id;
};

static void *rec_writer(void *arg)
{
	struct rjob *j = arg;
	struct records *r = j->r;
	unsigned char rec[REC];
	unsigned int seed = (unsigned int)j->id * 31 + 7;
	uint32_t seq;

	for (seq = 0; seq < RECMAX_SEQ && t_now_ms() < r->deadline; seq++) {
		struct rec h = { (uint32_t)j->id, seq };
		struct iovec iov[3];
		int n = 1 + rand_r(&seed) % 3;
		size_t cut1 = 1 + (size_t)rand_r(&seed) % (REC - 2), cut2;
		ssize_t ret;

		memcpy(rec, &h, sizeof(h));
		t_fill(rec + sizeof(h), REC - sizeof(h), ((uint64_t)j->id << 32) + seq * REC, 9);
		cut2 = cut1 + (size_t)rand_r(&seed) % (REC - cut1);
		if (reader_asleep(&r->x))
			atomic_fetch_add(&r->met_sleeper, 1);
		if (n == 1) {
			iov[0] = (struct iovec){ rec, REC };
		} else if (n == 2) {
			iov[0] = (struct iovec){ rec, cut1 };
			iov[1] = (struct iovec){ rec + cut1, REC - cut1 };
		} else {
			iov[0] = (struct iovec){ rec, cut1 };
			iov[1] = (struct iovec){ rec + cut1, cut2 - cut1 };
			iov[2] = (struct iovec){ rec + cut2, REC - cut2 };
		}
		ret = xp_writev(&r->x, iov, n);
		if (ret != REC)
			t_fail_at(__FILE__, __LINE__, "%s: writer %d: a %d-byte write returned %zd (%s)",
				  kind(&r->x), j->id, REC, ret, ret < 0 ? strerror(errno) : "short");
		pause_briefly(&seed, 4);
	}
	r->sent[j->id] = seq;
	if (atomic_fetch_sub(&r->writers_left, 1) == 1)
		xp_close(&r->x, 1);
	return NULL;
}

static void *rec_reader(void *arg)
{
	struct rjob *j = arg;
	struct records *r = j->r;
	unsigned char *buf = malloc(8 * REC), want[REC];
	unsigned int seed = (unsigned int)j->id * 77 + 3;
	int64_t last[NWR];

	ASSERT_TRUE(buf);
	for (int w = 0; w < NWR; w++)
		last[w] = -1;
	for (;;) {
		size_t n = REC * (1 + (size_t)rand_r(&seed) % 8);
		ssize_t ret = xp_read(&r->x, buf, n);

		if (ret < 0)
			t_fail_at(__FILE__, __LINE__, "%s: reader %d: %s", kind(&r->x), j->id,
				  strerror(errno));
		if (!ret)
			break;
		if (ret > r->cap)
			t_fail_at(__FILE__, __LINE__, "%s: reader %d: read(%zu) from a %zd-byte "
				  "pipe returned %zd", kind(&r->x), j->id, n, r->cap, ret);
		if (ret % REC)
			t_fail_at(__FILE__, __LINE__, "%s: reader %d: read(%zu) returned %zd: not "
				  "whole records", kind(&r->x), j->id, n, ret);
		for (ssize_t at = 0; at < ret; at += REC) {
			struct rec h;

			memcpy(&h, buf + at, sizeof(h));
			if (h.writer >= NWR || h.seq >= RECMAX_SEQ)
				t_fail_at(__FILE__, __LINE__, "%s: reader %d: a torn record (writer "
					  "%u, seq %u)", kind(&r->x), j->id, h.writer, h.seq);
			if ((int64_t)h.seq <= last[h.writer])
				t_fail_at(__FILE__, __LINE__, "%s: reader %d: writer %u's record %u "
					  "after its %lld: reordered or doubled", kind(&r->x), j->id,
					  h.writer, h.seq, (long long)last[h.writer]);
			last[h.writer] = h.seq;
			t_fill(want, REC - sizeof(h), ((uint64_t)h.writer << 32) + h.seq * REC, 9);
			if (memcmp(buf + at + sizeof(h), want, REC - sizeof(h)))
				t_fail_at(__FILE__, __LINE__, "%s: reader %d: writer %u record %u: "
					  "payload torn", kind(&r->x), j->id, h.writer, h.seq);
			if (__atomic_fetch_add(&r->seen[h.writer * RECMAX_SEQ + h.seq], 1,
					       __ATOMIC_RELAXED))
				t_fail_at(__FILE__, __LINE__, "%s: writer %u record %u read twice",
					  kind(&r->x), h.writer, h.seq);
			atomic_fetch_add(&r->nread, 1);
		}
		pause_briefly(&seed, 16);
	}
	free(buf);
	return NULL;
}

static void run_records(bool kernel, int cap, int ms)
{
	struct records r = { .deadline = t_now_ms() + ms, .writers_left = NWR, .cap = cap };
	struct rjob wj[NWR], rj[NRD];
	pthread_t wt[NWR], rt[NRD];
	unsigned long long total = 0;

	r.seen = calloc(NWR, RECMAX_SEQ);
	ASSERT_TRUE(r.seen);
	xp_open(&r.x, kernel, cap);
	for (int i = 0; i < NRD; i++) {
		rj[i] = (struct rjob){ &r, i };
		ASSERT_EQ(pthread_create(&rt[i], NULL, rec_reader, &rj[i]), 0);
	}
	for (int i = 0; i < NWR; i++) {
		wj[i] = (struct rjob){ &r, i };
		ASSERT_EQ(pthread_create(&wt[i], NULL, rec_writer, &wj[i]), 0);
	}
	for (int i = 0; i < NWR; i++)
		t_join(wt[i], NULL, 30);
	for (int i = 0; i < NRD; i++)
		t_join(rt[i], NULL, 30);
	for (int w = 0; w < NWR; w++) {
		for (uint32_t s = 0; s < r.sent[w]; s++)
			if (r.seen[w * RECMAX_SEQ + s] != 1)
				t_fail_at(__FILE__, __LINE__, "%s: writer %d record %u read %d times",
					  kind(&r.x), w, s, r.seen[w * RECMAX_SEQ + s]);
		total += r.sent[w];
	}
	ASSERT_EQ(atomic_load(&r.nread), total);
	printf("%s, %d-byte pipe: %llu records of %d bytes from %d writers, %d readers: each "
	       "once, whole, in order", kind(&r.x), cap, total, REC, NWR, NRD);
	if (!kernel)
		printf("; %llu writes found a reader asleep", atomic_load(&r.met_sleeper));
	printf("\n");
	xp_close(&r.x, 0);
	free(r.seen);
}

static int records(void)
{
	int ms = part_ms();

	t_watchdog(ms / 1000 + 60, "records");
	for (int cap = 4096; cap <= 65536; cap *= 16) {
		run_records(true, cap, ms / 8);
		run_records(false, cap, ms * 3 / 8);
	}
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(stream),
		T_SUBTEST(records),
	};

	pat = malloc(PATLEN + PAYMAX);
	if (!pat)
		return T_EXIT_FAIL;
	t_fill(pat, PATLEN + PAYMAX, 0, 5);
	return T_RUN_SUBTESTS(tests);
}
