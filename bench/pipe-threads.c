// SPDX-License-Identifier: MIT
/*
 * pipe-threads.c - threads talking through one pipe: a pagepipe against a
 * kernel pipe and against the limit row, side by side in one run, every
 * table in both layouts (split CPUs: writers and readers pinned to
 * different CPUs; same CPU: all pinned to one).
 *
 *   stream  1 writer -> 1 reader, writes of 64 B to 1 MiB, reads of
 *           max(64 KiB, size) bytes: a byte stream.
 *   msg     1 writer -> 1 reader, the same writes, and each read asks for
 *           exactly one write's size: message passing.  Up to PIPE_BUF
 *           (4096) a kernel pipe returns a whole message per read; above
 *           it the reader loops until the message is complete (so does it
 *           on every pipe whenever a read comes back short).
 *   fan     4 writers -> 1 reader and 1 writer -> 4 readers, messages of
 *           512 B and 4 KiB (<= PIPE_BUF, so writes are atomic and each
 *           read of that size gets one whole message).  No limit row: an
 *           SPSC ring has no many-writer or many-reader form.  Each pipe
 *           also gets a stall column: the longest any one thread took for
 *           64 KiB of its own messages (timed where the writers read the
 *           clock anyway, every 64 KiB), the median over the runs; a pipe
 *           that lets one thread keep it while the others wait is fast
 *           and unfair, and shows here.
 *   rtt     a 64 B round trip: one thread writes a message into pipe A,
 *           the other reads it and writes it back through pipe B; ns per
 *           round trip.  The limit row is two spinning flags (atomic ints);
 *           beside it, the same round trip through two bare rings of the
 *           limit row (what any ring that copies in and out pays).
 *
 * The limit row is a minimal lock-free SPSC byte ring (struct ring, ring.h)
 * of the pipe's capacity: writes copy in, reads copy out, with the same
 * sizes as the pipes get, and a waiting side spins.  It is what the
 * hardware allows for this copy-in, copy-out contract, so pp/limit says
 * how far pagepipe is from it.  A pipe that hands a write straight to a
 * reader waiting on an empty ring (one copy where the ring makes two) can
 * beat it: pp/limit above 1x, mostly at 64 KiB and up, is that, not an
 * error.
 *
 * Integrity: the first 8 bytes of every write (message) carry its sequence
 * number (in fan, the writer's index in the top byte), and the reader
 * checks each one, so a pipe that loses, reorders or tears data cannot
 * show a fast figure: its cell reads "n/a (EBADMSG)"; a byte count that
 * differs between the writers and the readers reads "n/a (EIO)".
 *
 * Every run is a forked child (bench.h), so the RSS columns, the largest
 * peak RSS growth over the runs, are the run's own: the buffers and
 * threads exist before the start is sampled, and what the kernel column
 * still shows (a few hundred KiB: the child faulting in shared text after
 * fork, thread stacks) is the harness's, so the pagepipe's own memory is
 * the difference; it must stay near the pipe's capacity whatever the size
 * or duration.  Runs of a row go kernel, pagepipe, limit, kernel,
 * ... so that a change in the machine's load hits every column alike; each
 * cell is the median of the runs.
 *
 * Knobs (environment): PP_BENCH_RUNS runs per cell (default 5);
 * PP_BENCH_SECONDS seconds per run (default 0.2 here); PP_BENCH_QUICK=1 a
 * smoke run (1 run of 0.05 s); PP_BENCH_PIN=split|same|none one layout
 * only.  With the defaults the whole program takes about 75 s on 2 CPUs.
 *
 * Usage: pipe-threads [-k] [-p] [-l] [-t stream|msg|fan|rtt]... [size ...]
 *   -k, -p, -l  only the kernel, pagepipe, limit columns (combinable);
 *               one side alone is what a profiler wants
 *   -t TABLE    only these tables (repeatable)
 *   size        write sizes for stream and msg, in bytes, with K or M
 */
#include "bench.h"

#include <signal.h>
#include <stdatomic.h>

#include "ring.h"

#define FAN_MAX		4
#define RTT_SIZE	64
#define DEF_SECONDS	0.2

/*
 * RING is the bare ring of the limit row used as a channel where the limit
 * row is something else (rtt: the flags), so a table can show both.
 */
enum impl { KERN, PP, LIMIT, RING, NIMPL };

/* ---------------------------------------------------------------------- */
/* One channel: a kernel pipe, a pagepipe or a ring, with read(2) manners. */

struct chan {
	enum impl impl;
	int fds[2];
	struct pp_file *ppe[2];
	struct ring *ring;
};

static size_t ring_cap = 65536;		/* the pipes' default capacity, from main */

static int chan_open(struct chan *c, enum impl impl, enum bench_pin pin)
{
	c->impl = impl;
	if (impl == KERN)
		return pipe2(c->fds, 0) ? errno : 0;
	if (impl == PP)
		return pp_pipe2(c->ppe, 0) ? errno : 0;
	c->ring = aligned_alloc(64, sizeof(*c->ring));
	if (!c->ring)
		return ENOMEM;
	memset(c->ring, 0, sizeof(*c->ring));
	c->ring->cap = ring_cap;
	c->ring->yield = pin == BENCH_PIN_SAME;
	c->ring->data = aligned_alloc(4096, ring_cap);
	if (!c->ring->data)
		return ENOMEM;
	return 0;
}

static ssize_t chan_write(struct chan *c, const void *buf, size_t len)
{
	if (c->impl == KERN)
		return write(c->fds[1], buf, len);
	if (c->impl == PP)
		return pp_write(c->ppe[1], buf, len);
	ring_write(c->ring, buf, len);
	return (ssize_t)len;
}

static ssize_t chan_read(struct chan *c, void *buf, size_t len)
{
	if (c->impl == KERN)
		return read(c->fds[0], buf, len);
	if (c->impl == PP)
		return pp_read(c->ppe[0], buf, len);
	return (ssize_t)ring_read(c->ring, buf, len);
}

static void chan_close_write(struct chan *c)
{
	if (c->impl == KERN)
		close(c->fds[1]);
	else if (c->impl == PP)
		pp_close(c->ppe[1]);
	else
		atomic_store_explicit(&c->ring->closed, true, memory_order_release);
}

static void chan_close_read(struct chan *c)
{
	if (c->impl == KERN)
		close(c->fds[0]);
	else if (c->impl == PP)
		pp_close(c->ppe[0]);
}

#include "chan-io.h"

/*
 * A run that hangs (a pipe that lost a wakeup) must not hang `make bench`:
 * the child dies of SIGALRM and its cell says so.
 */
static void watchdog(double secs)
{
	alarm((unsigned int)secs + 60);
}

/* ---------------------------------------------------------------------- */
/* stream and msg: one writer, one reader. */

/*
 * The writer's and the reader's results each on a line of their own, and
 * counted in locals while the run lasts: a counter that one side writes
 * per message beside fields that the other side reads per message moves a
 * line between the CPUs at every message, a cost of the harness that no
 * user's program pays (it halved the limit row at 64 B against the same
 * ring between two processes, bench/pipe-procs).
 */
struct xfer {
	enum impl impl;
	bool msg;			/* each read asks for exactly size bytes */
	size_t size;			/* bytes per write */
	enum bench_pin pin;
	double secs;			/* how long the writer writes */
	struct chan c;
	pthread_barrier_t go;
	char *wbuf, *rbuf;		/* each on lines of its own (bench_buf) */
	size_t rlen;
	_Alignas(64) uint64_t sent;	/* the writer's */
	double t_start;
	int werr;			/* errno the writer stopped on */
	_Alignas(64) uint64_t got;	/* the reader's */
	double t_end;
	int rerr;			/* errno the reader stopped on */
	bool rclosed;
};

static void *xfer_writer(void *arg)
{
	struct xfer *x = arg;
	/* Read the clock about every 64 KiB: a vDSO call per 64 B write would show. */
	uint64_t every = x->size >= 65536 ? 1 : 65536 / x->size, sent = 0;
	double deadline;

	bench_pin_self(x->pin, 0);
	pthread_barrier_wait(&x->go);
	x->t_start = bench_now();
	deadline = x->t_start + x->secs;
	for (uint64_t seq = 0;; seq++) {
		if (seq % every == 0 && bench_now() >= deadline)
			break;
		if (x->size >= 8)
			memcpy(x->wbuf, &seq, 8);
		x->werr = write_all(&x->c, x->wbuf, x->size);
		if (x->werr)
			break;
		sent += x->size;
	}
	x->sent = sent;
	chan_close_write(&x->c);
	return NULL;
}

static void *xfer_reader(void *arg)
{
	struct xfer *x = arg;
	uint64_t seq = 0, v, got = 0;

	bench_pin_self(x->pin, 1);
	pthread_barrier_wait(&x->go);
	for (;;) {
		ssize_t n;

		if (x->msg)
			n = read_full(&x->c, x->rbuf, x->size);
		else
			n = read_some(&x->c, x->rbuf, x->rlen);
		if (n < 0) {
			/* Close so that a blocked writer gets EPIPE rather than hang. */
			x->rerr = (int)-n;
			chan_close_read(&x->c);
			x->rclosed = true;
			break;
		}
		if (!n)
			break;
		if (x->size >= 8 && !x->rerr) {
			if (x->msg) {
				memcpy(&v, x->rbuf, 8);
				if ((size_t)n != x->size || v != seq)
					x->rerr = EBADMSG;
				seq++;
			} else if (!bench_stream_ok(x->rbuf, got, (size_t)n, x->size)) {
				x->rerr = EBADMSG;
			}
		}
		/* After a bad message keep draining, or the writer would block. */
		got += (uint64_t)n;
	}
	x->got = got;
	x->t_end = bench_now();
	return NULL;
}

/* Runs in the bench_fork() child. */
static void xfer_run(void *arg, struct bench_res *res)
{
	struct xfer *x = arg;
	pthread_t wt, rt;

	watchdog(x->secs);
	res->err = chan_open(&x->c, x->impl, x->pin);
	if (res->err)
		return;
	x->rlen = x->msg ? x->size : x->size > 65536 ? x->size : 65536;
	x->wbuf = bench_buf(x->size);
	x->rbuf = bench_buf(x->rlen);
	if (!x->wbuf || !x->rbuf) {
		res->err = ENOMEM;
		return;
	}
	/*
	 * Touch the buffers now so that their pages are not counted as the
	 * pipe's.  Not with zeros: the compiler may turn malloc + memset(0)
	 * into calloc, which touches nothing.
	 */
	memset(x->wbuf, 0x5a, x->size);
	memset(x->rbuf, 0xa5, x->rlen);
	if (x->impl == LIMIT)
		memset(x->c.ring->data, 0xa5, ring_cap);
	pthread_barrier_init(&x->go, NULL, 3);
	if (pthread_create(&wt, NULL, xfer_writer, x) ||
	    pthread_create(&rt, NULL, xfer_reader, x)) {
		res->err = EAGAIN;
		return;
	}
	res->rss_start_kib = bench_peak_rss_kib();
	pthread_barrier_wait(&x->go);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	if (!x->rclosed)
		chan_close_read(&x->c);
	res->bytes = x->got;
	res->secs = x->t_end - x->t_start;
	res->err = x->werr ? x->werr : x->rerr ? x->rerr : x->sent != x->got ? EIO : 0;
}

/* ---------------------------------------------------------------------- */
/* fan: nw writers -> nr readers on one pipe. */

struct fan;

/* One per thread, on lines of its own: see struct xfer. */
struct fan_thr {
	_Alignas(64) struct fan *f;
	int idx;
	pthread_t t;
	char *buf;
	uint64_t msgs;			/* written, or read */
	uint64_t per[FAN_MAX];		/* reader: the next sequence number of each writer */
	uint64_t last;			/* reader: the last sequence number seen */
	uint64_t seqsum;		/* reader: the sum of sequence numbers seen */
	double stall;			/* the longest it took for 64 KiB of its own messages */
	double t_end;
	int err;
};

struct fan {
	enum impl impl;
	size_t size;
	int nw, nr;
	enum bench_pin pin;
	double secs;
	struct chan c;
	pthread_barrier_t go;
	double t_start;
	struct fan_thr w[FAN_MAX], r[FAN_MAX];
};

#define FAN_SEQ_MASK	((1ull << 56) - 1)

static void *fan_writer(void *arg)
{
	struct fan_thr *t = arg;
	struct fan *f = t->f;
	uint64_t every = 65536 / f->size, hdr;
	double deadline, last, now;

	bench_pin_thread(f->pin, 0, t->idx, f->nw, f->nr);
	pthread_barrier_wait(&f->go);
	last = bench_now();
	deadline = last + f->secs;
	for (uint64_t seq = 0;; seq++) {
		if (seq % every == 0) {
			now = bench_now();
			if (now - last > t->stall)
				t->stall = now - last;
			last = now;
			if (now >= deadline)
				break;
		}
		hdr = (uint64_t)t->idx << 56 | seq;
		memcpy(t->buf, &hdr, 8);
		t->err = write_all(&f->c, t->buf, f->size);
		if (t->err)
			break;
		t->msgs++;
	}
	return NULL;
}

static void *fan_reader(void *arg)
{
	struct fan_thr *t = arg;
	struct fan *f = t->f;
	uint64_t v, id, seq, every = 65536 / f->size;
	double last, now;

	bench_pin_thread(f->pin, 1, t->idx, f->nw, f->nr);
	pthread_barrier_wait(&f->go);
	last = bench_now();
	for (;;) {
		ssize_t n = read_full(&f->c, t->buf, f->size);

		/* Not the last read: it waits for the writers to stop and close. */
		if (n > 0 && t->msgs % every == 0) {
			now = bench_now();
			if (now - last > t->stall)
				t->stall = now - last;
			last = now;
		}
		if (n < 0) {
			t->err = (int)-n;
			break;
		}
		if (!n)
			break;
		memcpy(&v, t->buf, 8);
		id = v >> 56;
		seq = v & FAN_SEQ_MASK;
		/*
		 * One reader sees each writer's messages in order; each of
		 * several readers sees one writer's in increasing order.
		 */
		if ((size_t)n != f->size || id >= (uint64_t)f->nw ||
		    (f->nr == 1 && seq != t->per[id]) ||
		    (f->nr > 1 && t->msgs && seq <= t->last))
			t->err = t->err ? t->err : EBADMSG;
		if (id < (uint64_t)f->nw)
			t->per[id] = seq + 1;
		t->last = seq;
		t->seqsum += seq;
		t->msgs++;
	}
	t->t_end = bench_now();
	return NULL;
}

static void fan_run(void *arg, struct bench_res *res)
{
	struct fan *f = arg;
	uint64_t wrote = 0, got = 0, sum = 0, n;
	double t_end = 0;
	int i;

	watchdog(f->secs);
	res->err = chan_open(&f->c, f->impl, f->pin);
	if (res->err)
		return;
	pthread_barrier_init(&f->go, NULL, (unsigned int)(f->nw + f->nr + 1));
	for (i = 0; i < f->nw + f->nr; i++) {
		struct fan_thr *t = i < f->nw ? &f->w[i] : &f->r[i - f->nw];

		t->f = f;
		t->idx = i < f->nw ? i : i - f->nw;
		t->buf = bench_buf(f->size);
		if (!t->buf) {
			res->err = ENOMEM;
			return;
		}
		memset(t->buf, 0x5a, f->size);
		if (pthread_create(&t->t, NULL, i < f->nw ? fan_writer : fan_reader, t)) {
			res->err = EAGAIN;
			return;
		}
	}
	res->rss_start_kib = bench_peak_rss_kib();
	pthread_barrier_wait(&f->go);
	f->t_start = bench_now();
	for (i = 0; i < f->nw; i++) {
		pthread_join(f->w[i].t, NULL);
		wrote += f->w[i].msgs;
		if (f->w[i].stall > res->stall_s)
			res->stall_s = f->w[i].stall;
		if (!res->err)
			res->err = f->w[i].err;
	}
	chan_close_write(&f->c);
	for (i = 0; i < f->nr; i++) {
		pthread_join(f->r[i].t, NULL);
		got += f->r[i].msgs;
		sum += f->r[i].seqsum;
		if (f->r[i].stall > res->stall_s)
			res->stall_s = f->r[i].stall;
		if (f->r[i].t_end > t_end)
			t_end = f->r[i].t_end;
		if (!res->err)
			res->err = f->r[i].err;
	}
	chan_close_read(&f->c);
	/* Every message arrived once: by count, and per writer or by sum. */
	if (!res->err && got != wrote)
		res->err = EIO;
	for (i = 0; !res->err && f->nr == 1 && i < f->nw; i++)
		if (f->r[0].per[i] != f->w[i].msgs)
			res->err = EIO;
	n = f->w[0].msgs;
	if (!res->err && f->nw == 1 && sum != (n ? n * (n - 1) / 2 : 0))
		res->err = EIO;
	res->bytes = got * f->size;
	res->secs = t_end - f->t_start;
}

/* ---------------------------------------------------------------------- */
/* rtt: ping-pong through two channels, or two spinning flags. */

struct rtt {
	enum impl impl;			/* LIMIT: the flags; RING: two bare rings */
	enum bench_pin pin;
	double secs;
	struct chan a, b;		/* a: ping -> pong; b: back */
	_Alignas(64) _Atomic uint64_t ping;
	_Alignas(64) _Atomic uint64_t pong;
	_Alignas(64) pthread_barrier_t go;
	uint64_t rounds;
	double t0, t1;
	int err0, err1;
};

#define RTT_STOP	UINT64_MAX

static void flag_wait(const struct rtt *r, unsigned int *spins)
{
	if (r->pin == BENCH_PIN_SAME || !(++*spins & 1023))
		sched_yield();
	else
		bench_cpu_relax();
}

static void *rtt_ping(void *arg)
{
	struct rtt *r = arg;
	char msg[RTT_SIZE] = { 0 };
	unsigned int spins = 0;
	double deadline;
	uint64_t i, v;
	ssize_t n;

	bench_pin_self(r->pin, 0);
	pthread_barrier_wait(&r->go);
	r->t0 = bench_now();
	deadline = r->t0 + r->secs;
	for (i = 1;; i++) {
		if (!(i & 255) && bench_now() >= deadline)
			break;
		if (r->impl == LIMIT) {
			atomic_store_explicit(&r->ping, i, memory_order_release);
			while (atomic_load_explicit(&r->pong, memory_order_acquire) != i)
				flag_wait(r, &spins);
			continue;
		}
		memcpy(msg, &i, 8);
		r->err0 = write_all(&r->a, msg, RTT_SIZE);
		if (r->err0)
			break;
		n = read_full(&r->b, msg, RTT_SIZE);

		memcpy(&v, msg, 8);
		if (n < 0)
			r->err0 = (int)-n;
		else if (n != RTT_SIZE || v != i)
			r->err0 = EBADMSG;
		if (r->err0)
			break;
	}
	r->t1 = bench_now();
	r->rounds = i - 1;
	if (r->impl == LIMIT)
		atomic_store_explicit(&r->ping, RTT_STOP, memory_order_release);
	else
		chan_close_write(&r->a);
	return NULL;
}

static void *rtt_pong(void *arg)
{
	struct rtt *r = arg;
	char msg[RTT_SIZE];
	unsigned int spins = 0;
	uint64_t last = 0, v;

	bench_pin_self(r->pin, 1);
	pthread_barrier_wait(&r->go);
	if (r->impl == LIMIT) {
		for (;;) {
			while ((v = atomic_load_explicit(&r->ping, memory_order_acquire)) == last)
				flag_wait(r, &spins);
			if (v == RTT_STOP)
				break;
			atomic_store_explicit(&r->pong, v, memory_order_release);
			last = v;
		}
		return NULL;
	}
	for (;;) {
		ssize_t n = read_full(&r->a, msg, RTT_SIZE);

		if (n <= 0) {
			r->err1 = n < 0 ? (int)-n : 0;
			break;
		}
		r->err1 = n != RTT_SIZE ? EBADMSG : write_all(&r->b, msg, RTT_SIZE);
		if (r->err1)
			break;
	}
	chan_close_write(&r->b);
	return NULL;
}

static void rtt_run(void *arg, struct bench_res *res)
{
	struct rtt *r = arg;
	pthread_t pt, qt;

	watchdog(r->secs);
	if (r->impl != LIMIT) {
		res->err = chan_open(&r->a, r->impl, r->pin);
		if (!res->err)
			res->err = chan_open(&r->b, r->impl, r->pin);
		if (res->err)
			return;
	}
	pthread_barrier_init(&r->go, NULL, 3);
	if (pthread_create(&pt, NULL, rtt_ping, r) || pthread_create(&qt, NULL, rtt_pong, r)) {
		res->err = EAGAIN;
		return;
	}
	res->rss_start_kib = bench_peak_rss_kib();
	pthread_barrier_wait(&r->go);
	pthread_join(pt, NULL);
	pthread_join(qt, NULL);
	if (r->impl != LIMIT) {
		chan_close_read(&r->a);
		chan_close_read(&r->b);
	}
	res->bytes = r->rounds;
	res->secs = r->t1 - r->t0;
	res->err = r->err0 ? r->err0 : r->err1;
}

/* ---------------------------------------------------------------------- */
/* Cells, medians and the Markdown tables. */

static unsigned int runs;
static double secs;
static bool want[NIMPL] = { true, true, true };

static const char *fmt_rss(char *buf, size_t sz, const struct bench_cell *c)
{
	if (c->err)
		snprintf(buf, sz, "-");
	else
		snprintf(buf, sz, "%+ld", c->rss_kib);
	return buf;
}

static const char *fmt_stall(char *buf, size_t sz, const struct bench_cell *c)
{
	if (c->err)
		snprintf(buf, sz, "-");
	else
		snprintf(buf, sz, "%.2f", c->stall_med * 1e3);
	return buf;
}

static void heading(const char *title, enum bench_pin pin, const char *unit)
{
	printf("\n### %s, %s\n\nMedian of %u run%s of %.2f s; pp = pagepipe; %s.\n\n", title,
	       bench_pin_name(pin), runs, runs == 1 ? "" : "s", secs, unit);
	bench_placement_say(pin, false);
}

/*
 * Run fn over the chosen implementations runs times, interleaved; args[i]
 * is the argument for implementation i (NULL: no such column).
 */
static void run_row(bench_fn fn, void *args[NIMPL], struct bench_cell cells[NIMPL], bool ns)
{
	for (int i = 0; i < NIMPL; i++) {
		memset(&cells[i], 0, sizeof(cells[i]));
		if (!want[i == RING ? LIMIT : i] || !args[i])
			cells[i].err = BENCH_SKIPPED;
	}
	for (unsigned int r = 0; r < runs; r++) {
		for (int i = 0; i < NIMPL; i++) {
			struct bench_res res;

			if (cells[i].err)
				continue;
			res = bench_fork(fn, args[i]);
			bench_cell_add(&cells[i], &res, ns);
		}
	}
	for (int i = 0; i < NIMPL; i++)
		bench_cell_done(&cells[i]);
}

static void table_xfer(bool msg, enum bench_pin pin, const size_t *sizes, unsigned int nsizes)
{
	heading(msg ? "msg: 1 writer -> 1 reader, each read one whole message"
		    : "stream: 1 writer -> 1 reader, reads of max(64 KiB, size)",
		pin, msg ? "MB/s (10^6 B/s); each read asks for one message, and above PIPE_BUF "
			   "(4 KiB) the reader loops until the message is complete; RSS: largest "
			   "peak RSS growth of a run, KiB"
			 : "MB/s (10^6 B/s); RSS: largest peak RSS growth of a run, KiB");
	printf("| size | kernel MB/s | pagepipe MB/s | limit MB/s | pp/kernel | pp/limit "
	       "| kernel RSS | pp RSS |\n");
	printf("|-----:|------------:|--------------:|-----------:|----------:|---------:"
	       "|-----------:|-------:|\n");
	for (unsigned int s = 0; s < nsizes; s++) {
		struct xfer x[NIMPL];
		void *args[NIMPL];
		struct bench_cell c[NIMPL];
		char a[32], b[32], d[32], e[32], f[32], g[32], h[32], k[32];

		for (int i = 0; i < NIMPL; i++) {
			x[i] = (struct xfer){ .impl = (enum impl)i, .msg = msg, .size = sizes[s],
					      .pin = pin, .secs = secs };
			args[i] = &x[i];
		}
		args[RING] = NULL;
		run_row(xfer_run, args, c, false);
		printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n",
		       bench_fmt_size(a, sizeof(a), sizes[s]),
		       bench_fmt_cell(b, sizeof(b), &c[KERN], "%.1f"),
		       bench_fmt_cell(d, sizeof(d), &c[PP], "%.1f"),
		       bench_fmt_cell(e, sizeof(e), &c[LIMIT], "%.1f"),
		       bench_fmt_cell_ratio(f, sizeof(f), &c[PP], &c[KERN]),
		       bench_fmt_cell_ratio(g, sizeof(g), &c[PP], &c[LIMIT]),
		       fmt_rss(k, sizeof(k), &c[KERN]), fmt_rss(h, sizeof(h), &c[PP]));
		fflush(stdout);
	}
	bench_placement_say(pin, true);
}

static void table_fan(enum bench_pin pin)
{
	static const size_t sizes[] = { 512, 4096 };
	static const int shape[][2] = { { 4, 1 }, { 1, 4 } };

	heading(pin == BENCH_PIN_SPLIT ? "fan: 4 writers -> 1 reader, 1 writer -> 4 readers, one pipe "
					 "(split: no writer shares a CPU with a reader)"
				       : "fan: 4 writers -> 1 reader, 1 writer -> 4 readers, one pipe", pin,
		"MB/s (10^6 B/s), all readers together; stall: the longest one thread took for "
		"64 KiB of its own messages, ms, the median over the runs (a thread left waiting "
		"while the others run shows here: fairness); RSS: largest peak RSS growth of a run, "
		"KiB; no limit row (an SPSC ring has no such form)");
	printf("| threads | size | kernel MB/s | pagepipe MB/s | pp/kernel | kernel stall | pp stall "
	       "| kernel RSS | pp RSS |\n");
	printf("|--------:|-----:|------------:|--------------:|----------:|-------------:|---------:"
	       "|-----------:|-------:|\n");
	for (unsigned int k = 0; k < 2; k++) {
		for (unsigned int s = 0; s < 2; s++) {
			struct fan fk = { .impl = KERN, .size = sizes[s], .nw = shape[k][0],
					  .nr = shape[k][1], .pin = pin, .secs = secs };
			struct fan fp = fk;
			void *args[NIMPL] = { &fk, &fp, NULL };
			struct bench_cell c[NIMPL];
			char a[32], b[32], d[32], e[32], f[32], g[32], h[32], m[32];

			fp.impl = PP;
			run_row(fan_run, args, c, false);
			printf("| %dw -> %dr | %s | %s | %s | %s | %s | %s | %s | %s |\n", shape[k][0],
			       shape[k][1], bench_fmt_size(a, sizeof(a), sizes[s]),
			       bench_fmt_cell(b, sizeof(b), &c[KERN], "%.1f"),
			       bench_fmt_cell(d, sizeof(d), &c[PP], "%.1f"),
			       bench_fmt_cell_ratio(e, sizeof(e), &c[PP], &c[KERN]),
			       fmt_stall(h, sizeof(h), &c[KERN]), fmt_stall(m, sizeof(m), &c[PP]),
			       fmt_rss(g, sizeof(g), &c[KERN]), fmt_rss(f, sizeof(f), &c[PP]));
			fflush(stdout);
		}
	}
	bench_placement_say(pin, true);
}

static void table_rtt(enum bench_pin pin)
{
	struct rtt r[NIMPL];
	void *args[NIMPL];
	struct bench_cell c[NIMPL];
	char a[32], b[32], d[32], e[32], f[32], g[32], h[32];

	heading("rtt: 64 B round trip through two pipes (ping-pong)", pin,
		"ns per round trip, lower is better; flags = two spinning flags (atomic ints), no data: "
		"the limit; ring = the limit row's bare SPSC ring, one each way, the same 64 B "
		"messages: what any ring that copies in and out pays");
	for (int i = 0; i < NIMPL; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].impl = (enum impl)i;
		r[i].pin = pin;
		r[i].secs = secs;
		args[i] = &r[i];
	}
	run_row(rtt_run, args, c, true);
	printf("| size | kernel ns | pagepipe ns | ring ns | flags ns | pp/kernel | pp/flags "
	       "| ring/flags |\n");
	printf("|-----:|----------:|------------:|--------:|---------:|----------:|---------:"
	       "|-----------:|\n");
	printf("| 64 | %s | %s | %s | %s | %s | %s | %s |\n",
	       bench_fmt_cell(a, sizeof(a), &c[KERN], "%.0f"),
	       bench_fmt_cell(b, sizeof(b), &c[PP], "%.0f"),
	       bench_fmt_cell(g, sizeof(g), &c[RING], "%.0f"),
	       bench_fmt_cell(d, sizeof(d), &c[LIMIT], "%.0f"),
	       bench_fmt_cell_ratio(e, sizeof(e), &c[PP], &c[KERN]),
	       bench_fmt_cell_ratio(f, sizeof(f), &c[PP], &c[LIMIT]),
	       bench_fmt_cell_ratio(h, sizeof(h), &c[RING], &c[LIMIT]));
	fflush(stdout);
	bench_placement_say(pin, true);
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (*end == 'K' || *end == 'k')
		v *= KiB, end++;
	else if (*end == 'M' || *end == 'm')
		v *= MiB, end++;
	if (*end || !v || v > 64 * MiB)
		bench_die("pipe-threads: bad size '%s' (1 byte to 64M)", s);
	return v;
}

enum { T_STREAM = 1, T_MSG = 2, T_FAN = 4, T_RTT = 8, T_ALL = 15 };

int main(int argc, char **argv)
{
	static const size_t def_sizes[] = { 64, 4096, 65536, 1048576 };
	size_t sizes[16];
	unsigned int nsizes = 0, tables = 0, nmodes = 0, t;
	bool pick = false;
	enum bench_pin modes[2];
	struct pp_file *ends[2];
	int fds[2], ksz = -1, psz = -1, opt;

	while ((opt = getopt(argc, argv, "kplt:")) != -1) {
		switch (opt) {
		case 'k':
		case 'p':
		case 'l':
			if (!pick)
				want[KERN] = want[PP] = want[LIMIT] = false;
			pick = true;
			want[opt == 'k' ? KERN : opt == 'p' ? PP : LIMIT] = true;
			break;
		case 't':
			t = !strcmp(optarg, "stream") ? T_STREAM : !strcmp(optarg, "msg") ? T_MSG
			  : !strcmp(optarg, "fan") ? T_FAN : !strcmp(optarg, "rtt") ? T_RTT : 0;
			if (!t)
				bench_die("pipe-threads: -t stream|msg|fan|rtt, not '%s'", optarg);
			tables |= t;
			break;
		default:
			bench_die("usage: pipe-threads [-k] [-p] [-l] [-t stream|msg|fan|rtt]... [size ...]");
		}
	}
	for (int i = optind; i < argc; i++)
		if (nsizes < 16)
			sizes[nsizes++] = parse_size(argv[i]);
	if (!nsizes)
		for (; nsizes < 4; nsizes++)
			sizes[nsizes] = def_sizes[nsizes];
	if (!tables)
		tables = T_ALL;
	runs = bench_runs();
	secs = bench_seconds_or(DEF_SECONDS);
	/* A reader that fails closes its end: the writer must see EPIPE, not die. */
	signal(SIGPIPE, SIG_IGN);

	/* Say what capacity each side had: the comparison is only fair if equal. */
	if (!pipe(fds)) {
		ksz = fcntl(fds[0], F_GETPIPE_SZ);
		close(fds[0]);
		close(fds[1]);
	}
	if (!pp_pipe2(ends, 0)) {
		psz = pp_fcntl(ends[0], F_GETPIPE_SZ);
		pp_close(ends[0]);
		pp_close(ends[1]);
	}
	if (psz >= 4096 && !(psz & (psz - 1)))
		ring_cap = (size_t)psz;

	printf("\n## pipe-threads: threads through one pipe, kernel vs pagepipe vs limit\n\n");
	printf("capacity: kernel pipe %d B, pagepipe %d B, limit ring %zu B; "
	       "PP_BENCH_RUNS=%u, PP_BENCH_SECONDS=%.2f per run%s\n", ksz, psz, ring_cap,
	       runs, secs, bench_quick() ? " (PP_BENCH_QUICK: a smoke run, not a measurement)" : "");
	printf("integrity: the first 8 bytes of each write carry a sequence number that the reader "
	       "checks; a failed check shows n/a (EBADMSG), lost bytes n/a (EIO)\n");
	/*
	 * Unless PP_BENCH_PIN picks one, show both layouts: split CPUs is the
	 * parallel case and pays a cross-CPU wakeup per sleep; one CPU shows
	 * the cost per byte with no wakeup latency in it.
	 */
	modes[nmodes++] = bench_pin_mode();
	if (!getenv("PP_BENCH_PIN") && modes[0] == BENCH_PIN_SPLIT)
		modes[nmodes++] = BENCH_PIN_SAME;
	for (unsigned int m = 0; m < nmodes; m++) {
		if (tables & T_STREAM)
			table_xfer(false, modes[m], sizes, nsizes);
		if (tables & T_MSG)
			table_xfer(true, modes[m], sizes, nsizes);
		if (tables & T_FAN)
			table_fan(modes[m]);
		if (tables & T_RTT)
			table_rtt(modes[m]);
	}
	return 0;
}
