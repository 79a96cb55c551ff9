// SPDX-License-Identifier: MIT
/*
 * Description: ring order against kernel-pipe order under concurrency
 * (issue 12 §1): producer threads, each splicing from its own source (an
 * AF_UNIX socket, a kernel pipe, a FIFO) into one pipe, records of 4000
 * bytes that each source holds whole (one write), while consumers take
 * them out (pp_read of odd sizes; splice to a socket; splice to another
 * pipe).  Linux moves each record in one splice under the pipe's mutex,
 * so the stream is a sequence of whole records, each producer's in its
 * order: checked on a kernel pipe (the test's own check) and on a
 * pagepipe, where a buffer queued in the ring must stand for exactly the
 * bytes spliced into the private kernel pipe at the same time.  A record
 * is less than a page: a longer one may leave an AF_UNIX socket in two
 * splices in Linux too, and then interleave with another producer's.
 */
#include <sys/socket.h>

#include "kres.h"

#define REC		4000u
#define NREC		1500u
#define NPROD		3

struct prod {
	enum kres_src_kind kind;
	unsigned int id;
	struct kres_src src;
	int kout;			/* kernel run: the pipe's write end */
	struct pp_file *pin, *pout;	/* pagepipe run */
	int ok;
};

static void make_record(unsigned char *r, unsigned int id, unsigned int seq)
{
	t_fill(r, REC, (unsigned long long)seq * REC, 1000 + id);
	r[0] = (unsigned char)id;
	memcpy(r + 1, &seq, sizeof(seq));
}

/* Write one record into the source, then splice until it is all in the pipe. */
static void *producer(void *arg)
{
	struct prod *p = arg;
	unsigned char rec[REC];

	for (unsigned int seq = 0; seq < NREC; seq++) {
		size_t moved = 0;

		make_record(rec, p->id, seq);
		if (write(p->src.wfd, rec, REC) != (ssize_t)REC)
			return NULL;
		while (moved < REC) {
			ssize_t r = p->pout ? pp_splice(p->pin, NULL, p->pout, NULL, REC - moved, 0)
					    : splice(p->src.rfd, NULL, p->kout, NULL, REC - moved, 0);

			if (r <= 0)
				return NULL;
			moved += (size_t)r;
		}
		/* A record spliced in pieces could interleave in Linux too: flag it. */
		if (moved != REC)
			return NULL;
	}
	p->ok = 1;
	return NULL;
}

struct checker {
	unsigned int next[NPROD];
	unsigned char rec[REC];
	size_t have;
	unsigned long long records;
};

/* Feed the stream in; each whole record is checked. */
static void check_bytes(struct checker *c, const unsigned char *b, size_t n, const char *what)
{
	while (n) {
		size_t take = REC - c->have < n ? REC - c->have : n;

		memcpy(c->rec + c->have, b, take);
		c->have += take;
		b += take;
		n -= take;
		if (c->have == REC) {
			unsigned int id = c->rec[0], seq;
			unsigned char want[REC];

			memcpy(&seq, c->rec + 1, sizeof(seq));
			if (id >= NPROD || seq != c->next[id])
				t_fail_at(__FILE__, __LINE__, "%s: record %llu: producer %u seq %u, want seq %u (interleaved or reordered)",
					  what, c->records, id, seq, id < NPROD ? c->next[id] : 0);
			make_record(want, id, seq);
			if (memcmp(want, c->rec, REC))
				t_fail_at(__FILE__, __LINE__, "%s: record %llu (producer %u seq %u): bytes differ",
					  what, c->records, id, seq);
			c->next[id]++;
			c->records++;
			c->have = 0;
		}
	}
}

static const enum kres_src_kind kinds[NPROD] = { KS_UNIX, KS_KPIPE, KS_FIFO };

/* consumer: 0 read, 1 splice to a socket, 2 splice to another pipe */
static void run(bool pagepipe, int consumer)
{
	static const size_t sizes[] = { 1, 100, 4095, 4097, 65536, 3999, 12000 };
	const char *what = pagepipe ? "pagepipe" : "kernel pipe";
	struct prod pr[NPROD];
	pthread_t th[NPROD];
	int k[2] = { -1, -1 }, s[2] = { -1, -1 }, y[2] = { -1, -1 };
	struct pp_file *p[2] = { NULL, NULL }, *ps = NULL, *py[2] = { NULL, NULL };
	struct checker c;
	unsigned char *buf = malloc(65536);
	unsigned long long total = 0, want = (unsigned long long)NPROD * NREC * REC;

	ASSERT_TRUE(buf != NULL);
	memset(&c, 0, sizeof(c));
	if (pagepipe)
		t_pipe2(p, 0);
	else
		t_kpipe2(k, 0);
	if (consumer == 1) {
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
		ps = pp_fdopen(s[1]);
	} else if (consumer == 2) {
		if (pagepipe)
			t_pipe2(py, 0);
		else
			t_kpipe2(y, 0);
	}
	for (int i = 0; i < NPROD; i++) {
		memset(&pr[i], 0, sizeof(pr[i]));
		pr[i].kind = kinds[i];
		pr[i].id = (unsigned int)i;
		ASSERT_EQ(kres_src_open(&pr[i].src, kinds[i]), 0);
		pr[i].kout = k[1];
		if (pagepipe) {
			pr[i].pin = pp_fdopen(pr[i].src.rfd);
			pr[i].pout = p[1];
			ASSERT_TRUE(pr[i].pin != NULL);
		}
		ASSERT_EQ(pthread_create(&th[i], NULL, producer, &pr[i]), 0);
	}
	for (unsigned int i = 0; total < want; i++) {
		size_t n = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		ssize_t r;

		switch (consumer) {
		case 0:
			r = pagepipe ? pp_read(p[0], buf, n) : read(k[0], buf, n);
			break;
		case 1:
			r = pagepipe ? pp_splice(p[0], NULL, ps, NULL, n, 0) : splice(k[0], NULL, s[1], NULL, n, 0);
			if (r > 0)
				for (size_t got = 0; got < (size_t)r; ) {
					ssize_t q = read(s[0], buf + got, (size_t)r - got);

					ASSERT_TRUE(q > 0);
					got += (size_t)q;
				}
			break;
		default:
			r = pagepipe ? pp_splice(p[0], NULL, py[1], NULL, n, 0) : splice(k[0], NULL, y[1], NULL, n, 0);
			if (r > 0) {
				ssize_t q = pagepipe ? t_read_full(py[0], buf, (size_t)r) : read(y[0], buf, (size_t)r);

				ASSERT_EQ(q, r);
			}
			break;
		}
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "%s: consumer %d, %zu bytes asked at %llu: %zd (%s)",
				  what, consumer, n, total, r, r < 0 ? strerror(errno) : "EOF");
		check_bytes(&c, buf, (size_t)r, what);
		total += (unsigned long long)r;
	}
	for (int i = 0; i < NPROD; i++) {
		t_join(th[i], NULL, 20);
		if (!pr[i].ok)
			t_fail_at(__FILE__, __LINE__, "%s: producer %d (%s) failed", what, i, kres_src_name[kinds[i]]);
		if (pr[i].pin)
			pp_close(pr[i].pin);
		kres_src_close(&pr[i].src);
	}
	ASSERT_EQ(c.records, NPROD * NREC);
	if (pagepipe) {
		ASSERT_EQ(t_fionread(p[0]), 0);
		pp_close(p[0]);
		pp_close(p[1]);
	} else {
		ASSERT_EQ(t_kfionread(k[0]), 0);
		close(k[0]);
		close(k[1]);
	}
	if (ps)
		pp_close(ps);
	if (py[0]) {
		pp_close(py[0]);
		pp_close(py[1]);
	}
	for (int i = 0; i < 2; i++) {
		if (s[i] >= 0)
			close(s[i]);
		if (y[i] >= 0)
			close(y[i]);
	}
	free(buf);
}

static int consumer_test(int consumer)
{
	struct kres_leak l = kres_leak_begin();

	t_watchdog(25, "concurrent producers");
	run(false, consumer);	/* the kernel: the test's own check */
	run(true, consumer);
	kres_leak_end(l, "concurrent producers");
	return T_EXIT_PASS;
}

static int test_read(void)           { return consumer_test(0); }
static int test_splice_socket(void)  { return consumer_test(1); }
static int test_splice_pipe(void)    { return consumer_test(2); }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_read),
		T_SUBTEST(test_splice_socket),
		T_SUBTEST(test_splice_pipe),
	};

	return T_RUN_SUBTESTS(tests);
}
