// SPDX-License-Identifier: MIT
/*
 * pipe-threads.c - thread-to-thread throughput: a pagepipe against a kernel
 * pipe with the same layout, one writer thread and one reader thread, at
 * write sizes from 64 B to 1 MiB.
 *
 * Both pipes keep their default capacity (64 KiB), the writer writes its
 * size for PP_BENCH_SECONDS and closes, and the reader reads with a buffer
 * of max(64 KiB, size) until EOF; the rate is the bytes the reader got over
 * the time until it saw EOF.  Each case runs in a forked child so that its
 * peak RSS is its own: the growth shown is sampled after the buffers and
 * threads exist, so it is what the pipe held, and it must stay near the
 * pipe's capacity whatever the size or duration.
 *
 * Threads are pinned as PP_BENCH_PIN says (bench.h); by default both the
 * split-CPU and the same-CPU layouts are shown.
 *
 * Usage: pipe-threads [-k | -p] [size ...]   (-k kernel only, -p pagepipe only;
 * sizes in bytes, with K or M).  One side alone is what a profiler wants.
 */
#include "bench.h"

#include <pthread.h>

struct xfer {
	bool pp;			/* a pagepipe, else a kernel pipe */
	size_t size;			/* bytes per write */
	enum bench_pin pin;
	double secs;			/* how long the writer writes */
	struct pp_file *ppe[2];
	int fds[2];
	pthread_barrier_t go;
	char *wbuf, *rbuf;
	size_t rlen;
	uint64_t got;			/* reader: bytes until EOF */
	double t_start, t_end;
	int werr, rerr;			/* errno each side stopped on, each its own */
};

static ssize_t xfer_write(struct xfer *x, const void *buf, size_t len)
{
	return x->pp ? pp_write(x->ppe[1], buf, len) : write(x->fds[1], buf, len);
}

static ssize_t xfer_read(struct xfer *x, void *buf, size_t len)
{
	return x->pp ? pp_read(x->ppe[0], buf, len) : read(x->fds[0], buf, len);
}

static void xfer_close_write(struct xfer *x)
{
	if (x->pp)
		pp_close(x->ppe[1]);
	else
		close(x->fds[1]);
}

static void *writer(void *arg)
{
	struct xfer *x = arg;
	/* Read the clock about every 64 KiB: a vDSO call per 64 B write would show. */
	uint64_t every = x->size >= 65536 ? 1 : 65536 / x->size;
	double deadline;

	bench_pin_self(x->pin, 0);
	pthread_barrier_wait(&x->go);
	x->t_start = bench_now();
	deadline = x->t_start + x->secs;
	for (uint64_t i = 0;; i++) {
		size_t done = 0;

		if (i % every == 0 && bench_now() >= deadline)
			break;
		while (done < x->size) {
			ssize_t n = xfer_write(x, x->wbuf + done, x->size - done);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				x->werr = errno;
				goto out;
			}
			done += (size_t)n;
		}
	}
out:
	xfer_close_write(x);
	return NULL;
}

static void *reader(void *arg)
{
	struct xfer *x = arg;

	bench_pin_self(x->pin, 1);
	pthread_barrier_wait(&x->go);
	for (;;) {
		ssize_t n = xfer_read(x, x->rbuf, x->rlen);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			x->rerr = errno;
			break;
		}
		if (n == 0)
			break;
		x->got += (uint64_t)n;
	}
	x->t_end = bench_now();
	return NULL;
}

/* Runs in the bench_fork() child. */
static void run_case(void *arg, struct bench_res *res)
{
	struct xfer *x = arg;
	pthread_t wt, rt;

	if (x->pp ? pp_pipe2(x->ppe, 0) : pipe2(x->fds, 0)) {
		res->err = errno;
		return;
	}
	x->rlen = x->size > 65536 ? x->size : 65536;
	x->wbuf = malloc(x->size);
	x->rbuf = malloc(x->rlen);
	if (!x->wbuf || !x->rbuf) {
		res->err = ENOMEM;
		return;
	}
	/* Touch both buffers now so their pages are not counted as the pipe's. */
	memset(x->wbuf, 0x5a, x->size);
	memset(x->rbuf, 0, x->rlen);
	pthread_barrier_init(&x->go, NULL, 3);
	if (pthread_create(&wt, NULL, writer, x) || pthread_create(&rt, NULL, reader, x)) {
		res->err = EAGAIN;
		return;
	}
	res->rss_start_kib = bench_peak_rss_kib();
	pthread_barrier_wait(&x->go);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	if (x->pp)
		pp_close(x->ppe[0]);
	else
		close(x->fds[0]);
	res->bytes = x->got;
	res->secs = x->t_end - x->t_start;
	res->err = x->werr ? x->werr : x->rerr;
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

/* One table row: both pipes at one write size. */
static void run_size(size_t size, enum bench_pin pin, bool want_k, bool want_p)
{
	struct xfer xk = { .pp = false, .size = size, .secs = bench_seconds(), .pin = pin };
	struct xfer xp = { .pp = true, .size = size, .secs = bench_seconds(), .pin = pin };
	struct bench_res rk = { .err = BENCH_SKIPPED }, rp = { .err = BENCH_SKIPPED };
	char a[32], b[32], c[32], d[32], e[32], f[32];

	if (want_k)
		rk = bench_fork(run_case, &xk);
	if (want_p)
		rp = bench_fork(run_case, &xp);
	printf("%-6s %14s %16s %8s %11s %13s\n", bench_fmt_size(a, sizeof(a), size),
	       bench_fmt_rate(b, sizeof(b), &rk), bench_fmt_rate(c, sizeof(c), &rp),
	       bench_fmt_ratio(d, sizeof(d), &rp, &rk), bench_fmt_rss(e, sizeof(e), &rk),
	       bench_fmt_rss(f, sizeof(f), &rp));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const size_t def_sizes[] = { 64, 4096, 65536, 1048576 };
	size_t sizes[16];
	unsigned int nsizes = 0;
	bool want_k = true, want_p = true;
	enum bench_pin modes[2];
	unsigned int nmodes = 0;
	struct pp_file *ends[2];
	int fds[2], ksz = -1, psz = -1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-k"))
			want_p = false;
		else if (!strcmp(argv[i], "-p"))
			want_k = false;
		else if (nsizes < 16)
			sizes[nsizes++] = parse_size(argv[i]);
	}
	if (!nsizes)
		for (; nsizes < 4; nsizes++)
			sizes[nsizes] = def_sizes[nsizes];

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

	bench_title("pipe-threads", "1 writer thread -> 1 reader thread, MB/s (10^6 B/s)");
	printf("capacity: kernel pipe %d B, pagepipe %d B; reader buffer max(64K, size); "
	       "RSS = peak growth while running, MiB\n", ksz, psz);
	/*
	 * Unless PP_BENCH_PIN picks one, show both layouts: split CPUs is the
	 * parallel case and pays a cross-CPU wakeup per sleep; one CPU shows
	 * the cost per byte with no wakeup latency in it.
	 */
	modes[nmodes++] = bench_pin_mode();
	if (!getenv("PP_BENCH_PIN") && modes[0] == BENCH_PIN_SPLIT)
		modes[nmodes++] = BENCH_PIN_SAME;
	for (unsigned int m = 0; m < nmodes; m++) {
		printf("\nthreads: %s\n%-6s %14s %16s %8s %11s %13s\n", bench_pin_name(modes[m]),
		       "size", "kernel MB/s", "pagepipe MB/s", "pp/kern", "kernel RSS",
		       "pagepipe RSS");
		for (unsigned int i = 0; i < nsizes; i++)
			run_size(sizes[i], modes[m], want_k, want_p);
	}
	return 0;
}
