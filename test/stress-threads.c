// SPDX-License-Identifier: MIT
/*
 * Description: many threads, random sizes and operations, end-to-end
 * sequence numbers and checksums.  Four writers put records (header: writer,
 * sequence, length, checksum; random length up to one page) into pagepipe A
 * in packet mode by write and writev.  A middle thread tees A into C and
 * splices A into B (whole buffers, so records stay whole), and resizes A, B
 * and C at random (EBUSY expected).  Four readers take records from B by
 * read, readv and read_lend; a fifth reads the tee'd copies from C.  Every
 * record must arrive in B exactly once with a valid checksum and, per
 * reader, in increasing sequence per writer; C's copies must be valid and
 * increasing.  A second, byte-stream pipeline runs alongside: one writer
 * (write, writev, pp_write_ref, vmsplice of constant memory), a splicer with
 * random (buffer-splitting) lengths into a second pipe, one reader that
 * checks every byte.  Runs for PP_STRESS_SECONDS (default 2).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "helpers.h"
#include "internal.h"

#define NW		4
#define NR		4
#define MAXSEQ		(1u << 22)	/* records per writer at most */
#define MAGIC		0x50504d52u
#define PLEN		(1u << 20)	/* period of the byte stream's pattern */

struct rec {
	uint32_t magic;
	uint16_t writer;
	uint16_t len;			/* payload bytes */
	uint64_t seq;
	uint32_t sum;
	uint32_t pad;
};

static struct pp_file *A[2], *B[2], *C[2];
static atomic_int stop_writers;
static uint64_t sent[NW];
static _Atomic uint32_t *seen[NW];
static atomic_long c_copies, b_records, resizes, ebusy;
static long long deadline;

static uint32_t checksum(const unsigned char *p, size_t n, uint32_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static size_t make_rec(unsigned char *buf, unsigned w, uint64_t seq, unsigned int *s)
{
	size_t max = pp_page_size() - sizeof(struct rec);
	struct rec *r = (struct rec *)buf;
	size_t len = rand_r(s) % (max > 4000 ? 4000 : max);

	t_fill(buf + sizeof(*r), len, seq, w);
	*r = (struct rec){ MAGIC, (uint16_t)w, (uint16_t)len, seq, 0, 0 };
	r->sum = checksum(buf + sizeof(*r), len, 2166136261u ^ (uint32_t)seq);
	return sizeof(*r) + len;
}

/* Valid record of exactly n bytes?  Returns the header. */
static struct rec check_rec(const unsigned char *buf, size_t n)
{
	struct rec r;

	if (n < sizeof(r))
		t_fail_at(__FILE__, __LINE__, "short record: %zu bytes", n);
	memcpy(&r, buf, sizeof(r));
	if (r.magic != MAGIC || r.writer >= NW || sizeof(r) + r.len != n)
		t_fail_at(__FILE__, __LINE__, "bad record: magic %x writer %u len %u in %zu bytes",
			  r.magic, r.writer, r.len, n);
	if (checksum(buf + sizeof(r), r.len, 2166136261u ^ (uint32_t)r.seq) != r.sum)
		t_fail_at(__FILE__, __LINE__, "checksum: writer %u seq %llu", r.writer,
			  (unsigned long long)r.seq);
	return r;
}

static void *writer(void *arg)
{
	unsigned w = (unsigned)(uintptr_t)arg;
	unsigned int s = 1000 + w;
	unsigned char buf[8192];
	uint64_t seq = 0;

	while (!atomic_load(&stop_writers) && seq < MAXSEQ) {
		size_t n = make_rec(buf, w, seq, &s);
		ssize_t r;

		if (rand_r(&s) & 1) {
			r = pp_write(A[1], buf, n);
		} else {
			size_t cut = sizeof(struct rec) / 2;
			struct iovec iov[2] = { { buf, cut }, { buf + cut, n - cut } };
			r = pp_writev(A[1], iov, 2);
		}
		if (r != (ssize_t)n)
			t_fail_at(__FILE__, __LINE__, "writer %u: write %zu: %zd (%s)", w, n, r,
				  r < 0 ? strerrorname_np(errno) : "short");
		seq++;
	}
	sent[w] = seq;
	return NULL;
}

static void resize_random(unsigned int *s)
{
	static const int sizes[] = { 4096, 8192, 16384, 65536, 262144 };
	struct pp_file *f = rand_r(s) % 3 == 0 ? A[0] : rand_r(s) % 2 ? B[1] : C[1];

	if (pp_fcntl(f, F_SETPIPE_SZ, sizes[rand_r(s) % 5]) >= 0)
		atomic_fetch_add(&resizes, 1);
	else if (errno == EBUSY)
		atomic_fetch_add(&ebusy, 1);
	else
		t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ: %s", strerror(errno));
}

static void *middle(void *arg)
{
	unsigned int s = 77;

	(void)arg;
	for (;;) {
		ssize_t t = 0, r;

		if (rand_r(&s) % 16 == 0)
			resize_random(&s);
		if (rand_r(&s) % 3 == 0) {
			/* copy what is queued to C first, then move exactly that to B */
			t = pp_tee(A[0], C[1], SIZE_MAX >> 1, SPLICE_F_NONBLOCK);
			if (t < 0 && errno != EAGAIN)
				t_fail_at(__FILE__, __LINE__, "tee: %s", strerrorname_np(errno));
			if (t == 0)
				break;	/* EOF on A */
		}
		if (t > 0) {
			ssize_t moved = 0;

			while (moved < t) {
				r = pp_splice(A[0], NULL, B[1], NULL, (size_t)(t - moved), 0);
				if (r <= 0)
					t_fail_at(__FILE__, __LINE__, "splice after tee: %zd (%s)", r,
						  r < 0 ? strerrorname_np(errno) : "EOF");
				moved += r;
			}
			continue;
		}
		r = pp_splice(A[0], NULL, B[1], NULL, SIZE_MAX >> 1, 0);
		if (r == 0)
			break;
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "splice A->B: %s", strerrorname_np(errno));
	}
	pp_close(B[1]);
	pp_close(C[1]);
	return NULL;
}

static void *reader(void *arg)
{
	unsigned int s = 500 + (unsigned)(uintptr_t)arg;
	static _Thread_local unsigned char buf[65536];
	int64_t last[NW];
	long n_rec = 0;

	for (int i = 0; i < NW; i++)
		last[i] = -1;
	for (;;) {
		ssize_t n;
		int how = rand_r(&s) % 3;

		if (how == 0) {
			n = pp_read(B[0], buf, sizeof(buf));
		} else if (how == 1) {
			struct iovec iov[3] = { { buf, 7 }, { buf + 7, 100 }, { buf + 107, sizeof(buf) - 107 } };
			n = pp_readv(B[0], iov, 3);
		} else {
			struct iovec iov[4];
			n = pp_read_lend(B[0], iov, 4, sizeof(buf));
			if (n > 0) {
				size_t k = 0;
				for (int i = 0; k < (size_t)n; i++) {
					memcpy(buf + k, iov[i].iov_base, iov[i].iov_len);
					k += iov[i].iov_len;
				}
				ASSERT_EQ(pp_read_done(B[0], (size_t)n), 0);
			}
		}
		if (n == 0)
			break;
		if (n < 0)
			t_fail_at(__FILE__, __LINE__, "reader: %s", strerrorname_np(errno));
		struct rec r = check_rec(buf, (size_t)n);
		if ((int64_t)r.seq <= last[r.writer])
			t_fail_at(__FILE__, __LINE__, "writer %u: seq %llu after %lld", r.writer,
				  (unsigned long long)r.seq, (long long)last[r.writer]);
		last[r.writer] = (int64_t)r.seq;
		uint32_t bit = 1u << (r.seq & 31);
		if (atomic_fetch_or(&seen[r.writer][r.seq >> 5], bit) & bit)
			t_fail_at(__FILE__, __LINE__, "writer %u seq %llu delivered twice", r.writer,
				  (unsigned long long)r.seq);
		n_rec++;
	}
	atomic_fetch_add(&b_records, n_rec);
	return NULL;
}

static void *c_reader(void *arg)
{
	static unsigned char buf[65536];
	int64_t last[NW];

	(void)arg;
	for (int i = 0; i < NW; i++)
		last[i] = -1;
	for (;;) {
		ssize_t n = pp_read(C[0], buf, sizeof(buf));

		if (n == 0)
			break;
		if (n < 0)
			t_fail_at(__FILE__, __LINE__, "C reader: %s", strerrorname_np(errno));
		struct rec r = check_rec(buf, (size_t)n);
		if ((int64_t)r.seq <= last[r.writer])
			t_fail_at(__FILE__, __LINE__, "tee copy: writer %u seq %llu after %lld",
				  r.writer, (unsigned long long)r.seq, (long long)last[r.writer]);
		last[r.writer] = (int64_t)r.seq;
		atomic_fetch_add(&c_copies, 1);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The byte stream: D -> (splice, random lengths) -> E. */

static struct pp_file *D[2], *E[2];
static unsigned char pattern[PLEN];	/* never written after setup: vmsplice-safe */
static uint64_t stream_sent;
static atomic_long refs_out;

static void ref_done(void *buf, size_t count, void *arg)
{
	(void)arg;
	free(buf);
	atomic_fetch_sub(&refs_out, (long)count);
}

static void *stream_writer(void *arg)
{
	unsigned int s = 4321;
	uint64_t pos = 0;

	(void)arg;
	while (t_now_ms() < deadline) {
		size_t at = pos % PLEN, n = 1 + rand_r(&s) % 70000;
		ssize_t r;

		if (n > PLEN - at)
			n = PLEN - at;
		switch (rand_r(&s) % 4) {
		case 0:
			r = pp_write(D[1], pattern + at, n);
			break;
		case 1: {
			size_t cut = n / 3;
			struct iovec iov[3] = { { pattern + at, cut }, { pattern + at + cut, 0 },
						{ pattern + at + cut, n - cut } };
			r = pp_writev(D[1], iov, 3);
			break;
		}
		case 2: {
			unsigned char *copy = malloc(n);

			ASSERT_TRUE(copy != NULL);
			memcpy(copy, pattern + at, n);
			atomic_fetch_add(&refs_out, (long)n);
			r = pp_write_ref(D[1], copy, n, ref_done, NULL);
			if (r <= 0) {
				atomic_fetch_sub(&refs_out, (long)n);
				free(copy);
			} else if ((size_t)r < n) {
				/* the rest stays ours: the library releases [copy, copy + r) */
				atomic_fetch_sub(&refs_out, (long)(n - (size_t)r));
			}
			break;
		}
		default: {
			struct iovec iov = { pattern + at, n };
			r = pp_vmsplice(D[1], &iov, 1, 0);
			break;
		}
		}
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "stream write %zu: %zd (%s)", n, r,
				  r < 0 ? strerrorname_np(errno) : "0");
		pos += (uint64_t)r;
	}
	stream_sent = pos;
	pp_close(D[1]);
	return NULL;
}

static void *stream_splicer(void *arg)
{
	unsigned int s = 99;

	(void)arg;
	for (;;) {
		ssize_t r = pp_splice(D[0], NULL, E[1], NULL, 1 + rand_r(&s) % 20000, 0);

		if (r == 0)
			break;
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "stream splice: %s", strerrorname_np(errno));
		if (rand_r(&s) % 64 == 0) {
			int sz = (int)(4096u << (rand_r(&s) % 6));

			if (pp_fcntl(E[1], F_SETPIPE_SZ, sz) < 0 && errno != EBUSY)
				t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ: %s", strerror(errno));
		}
	}
	pp_close(E[1]);
	return NULL;
}

static uint64_t stream_got;

static void *stream_reader(void *arg)
{
	static unsigned char buf[100000];
	unsigned int s = 7;
	uint64_t pos = 0;

	(void)arg;
	for (;;) {
		ssize_t n = pp_read(E[0], buf, 1 + rand_r(&s) % sizeof(buf));

		if (n == 0)
			break;
		if (n < 0)
			t_fail_at(__FILE__, __LINE__, "stream read: %s", strerrorname_np(errno));
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern[(pos + (uint64_t)i) % PLEN])
				t_fail_at(__FILE__, __LINE__, "stream byte %llu wrong",
					  (unsigned long long)(pos + (uint64_t)i));
		pos += (uint64_t)n;
	}
	stream_got = pos;
	return NULL;
}

static int test_stress(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int secs = env && atoi(env) > 0 ? atoi(env) : 2;
	pthread_t tw[NW], tr[NR], tm, tc, sw, ss, sr;
	uint64_t total = 0;

	deadline = t_now_ms() + secs * 1000LL;
	for (int w = 0; w < NW; w++) {
		seen[w] = calloc(MAXSEQ / 32, sizeof(uint32_t));
		ASSERT_TRUE(seen[w] != NULL);
	}
	for (size_t i = 0; i < PLEN; i++)
		pattern[i] = t_pattern(i, 42);
	t_pipe2(A, O_DIRECT);
	t_pipe2(B, 0);
	t_pipe2(C, 0);
	t_pipe2(D, 0);
	t_pipe2(E, 0);

	ASSERT_EQ(pthread_create(&tm, NULL, middle, NULL), 0);
	ASSERT_EQ(pthread_create(&tc, NULL, c_reader, NULL), 0);
	for (int i = 0; i < NR; i++)
		ASSERT_EQ(pthread_create(&tr[i], NULL, reader, (void *)(uintptr_t)i), 0);
	for (int w = 0; w < NW; w++)
		ASSERT_EQ(pthread_create(&tw[w], NULL, writer, (void *)(uintptr_t)w), 0);
	ASSERT_EQ(pthread_create(&sw, NULL, stream_writer, NULL), 0);
	ASSERT_EQ(pthread_create(&ss, NULL, stream_splicer, NULL), 0);
	ASSERT_EQ(pthread_create(&sr, NULL, stream_reader, NULL), 0);

	while (t_now_ms() < deadline)
		t_sleep_ms(20);
	atomic_store(&stop_writers, 1);
	for (int w = 0; w < NW; w++)
		t_join(tw[w], NULL, 30);
	pp_close(A[1]);
	t_join(tm, NULL, 30);
	for (int i = 0; i < NR; i++)
		t_join(tr[i], NULL, 30);
	t_join(tc, NULL, 30);
	t_join(sw, NULL, 30);
	t_join(ss, NULL, 30);
	t_join(sr, NULL, 30);

	/* Every record arrived exactly once (twice was caught by the readers). */
	for (int w = 0; w < NW; w++) {
		for (uint64_t q = 0; q < sent[w]; q++)
			if (!(atomic_load(&seen[w][q >> 5]) & (1u << (q & 31))))
				t_fail_at(__FILE__, __LINE__, "writer %d seq %llu lost", w,
					  (unsigned long long)q);
		for (uint64_t q = sent[w]; q < MAXSEQ; q++)
			if (atomic_load(&seen[w][q >> 5]) & (1u << (q & 31)))
				t_fail_at(__FILE__, __LINE__, "writer %d seq %llu never sent", w,
					  (unsigned long long)q);
		total += sent[w];
	}
	ASSERT_EQ(atomic_load(&b_records), (long)total);
	ASSERT_EQ(stream_got, stream_sent);
	ASSERT_EQ(atomic_load(&refs_out), 0);	/* every pp_write_ref release ran */
	printf("%d s: %llu records (%ld tee'd copies), %ld resizes, %ld EBUSY; stream %llu bytes\n",
	       secs, (unsigned long long)total, atomic_load(&c_copies), atomic_load(&resizes),
	       atomic_load(&ebusy), (unsigned long long)stream_got);
	pp_close(A[0]);
	pp_close(B[0]);
	pp_close(C[0]);
	pp_close(D[0]);
	pp_close(E[0]);
	for (int w = 0; w < NW; w++)
		free(seen[w]);
	return 0;
}

int main(void)
{
	int r = test_stress();

	return r;
}
