// SPDX-License-Identifier: MIT
/*
 * splice-file.c - moving file data and thread data without copies:
 *
 *   (a) file -> TCP socket on 127.0.0.1: pp_splice through a pagepipe,
 *       against sendfile(2), splice(2) through a kernel pipe and a
 *       read/write loop, once with a receiver that copies the bytes out
 *       and once (a') with one that discards them (MSG_TRUNC), which
 *       leaves the sender's cost as the only difference; each table ends
 *       with sendfile's own gain over read/write, the ceiling for any
 *       sender built on the kernel's zero copy;
 *   (b) file -> /dev/null: pp_splice through a pagepipe against splice(2)
 *       through a kernel pipe (and a read/write loop);
 *   (c) thread -> thread: pp_write_ref + pp_read_lend/pp_read_done against
 *       vmsplice(2) + splice(2) to /dev/null and write/read on a kernel pipe;
 *   (d) peak RSS of a 64 MiB and a 1 GiB file through a default pagepipe to
 *       a socket and to /dev/null: it must not grow with the file.
 *
 * The file holds real (non-sparse, non-zero) data, is made once in
 * PP_BENCH_DIR (default /tmp) and kept for later runs, and is read once
 * before timing, so every number here is page cache warm; cold-cache
 * throughput is not measured.  Every method moves 64 KiB per call.  A case
 * that fails prints "n/a (ERRNO)" (ENOSYS from a library without splice,
 * EINVAL for an endpoint without the op) and the run goes on.  Every case
 * runs in a forked child so that its RSS growth is its own.
 */
#include "bench.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define CHUNK		(64 * KiB)	/* a default pipe's worth, for every method */
#define SMALL_FILE	(64 * MiB)
#define BIG_FILE	(1 * GiB)
#define RECV_BUF	(256 * KiB)
#define POOL		4		/* pp_write_ref chunks in flight */

static char small_path[4096], big_path[4096];

/* ---------------------------------------------------------------------- */
/* The data file. */

/* xorshift64: cheap bytes that no filesystem can compress or deduplicate. */
static void fill_random(uint64_t *w, size_t words, uint64_t *state)
{
	uint64_t x = *state;

	for (size_t i = 0; i < words; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	*state = x;
}

/* Reading the whole file once is what makes every later pass page cache warm. */
static void warm_cache(const char *path)
{
	char *buf = malloc(MiB);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || !buf)
		bench_die("splice-file: open %s: %s", path, strerror(errno));
	while (read(fd, buf, MiB) > 0)
		;
	close(fd);
	free(buf);
}

/*
 * Make the file once.  A file of the right size whose blocks cover it is
 * taken as made; sparse is not enough, because holes would be read as
 * zero-fill without touching the page cache the way data does.
 */
static void make_file(char *path, size_t pathsz, size_t size)
{
	const char *dir = getenv("PP_BENCH_DIR");
	char tmp[4200];
	struct stat st;
	uint64_t state = 0x9e3779b97f4a7c15ull ^ size;
	uint64_t *buf;
	int fd;

	snprintf(path, pathsz, "%s/pagepipe-bench-%zuM.dat", dir && *dir ? dir : "/tmp",
		 size / MiB);
	if (!stat(path, &st) && (size_t)st.st_size == size &&
	    (size_t)st.st_blocks * 512 >= size) {
		warm_cache(path);
		return;
	}
	printf("making %s (%zu MiB, kept for later runs)\n", path, size / MiB);
	fflush(stdout);
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	buf = malloc(MiB);
	if (fd < 0 || !buf)
		bench_die("splice-file: create %s: %s", tmp, strerror(errno));
	for (size_t done = 0; done < size; done += MiB) {
		fill_random(buf, MiB / sizeof(*buf), &state);
		if (write(fd, buf, MiB) != (ssize_t)MiB)
			bench_die("splice-file: write %s: %s", tmp, strerror(errno));
	}
	/* Rename only a whole file, so an interrupted run never leaves a short one. */
	if (close(fd) || rename(tmp, path))
		bench_die("splice-file: %s: %s", path, strerror(errno));
	free(buf);
	warm_cache(path);
}

/* ---------------------------------------------------------------------- */
/* Shared by the cases. */

enum method {
	M_PP_SPLICE,		/* file -> pagepipe -> out, pp_splice both ways */
	M_K_SPLICE,		/* file -> kernel pipe -> out, splice(2) */
	M_SENDFILE,
	M_RW,			/* read(2)/write(2) through a 64 KiB buffer */
	M_PP_REF,		/* (c): pp_write_ref -> pp_read_lend/pp_read_done */
	M_K_VMSPLICE,		/* (c): vmsplice -> kernel pipe -> splice to /dev/null */
	M_K_RW,			/* (c): write/read on a kernel pipe */
	M_PP_RW,		/* (c): pp_write/pp_read, the copying pagepipe */
};

struct sf_case {
	enum method m;
	const char *path;	/* (a), (b), (d): the file */
	bool to_socket;		/* (a), else /dev/null */
	bool discard;		/* (a): the receiver drops the bytes (MSG_TRUNC), no copy */
	bool once;		/* (d): one pass over the file, not a timed loop */
};

/* The data sink: /dev/null, or a TCP connection with a reader thread. */
struct sink {
	int fd;
	int recv_flags;		/* MSG_TRUNC: TCP discards instead of copying out */
	int rfd;		/* the accepted end, read by the thread */
	pthread_t thread;
	uint64_t got;
	double t_end;
};

static void *sink_reader(void *arg)
{
	struct sink *s = arg;
	char *buf = malloc(RECV_BUF);
	ssize_t n;

	bench_pin_self(bench_pin_mode(), 1);
	while (buf && ((n = recv(s->rfd, buf, RECV_BUF, s->recv_flags)) > 0 || (n < 0 && errno == EINTR)))
		if (n > 0)
			s->got += (uint64_t)n;
	s->t_end = bench_now();
	free(buf);
	return NULL;
}

static int sink_open(struct sink *s, bool to_socket, bool discard)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	socklen_t len = sizeof(sa);
	int lfd;

	memset(s, 0, sizeof(*s));
	s->rfd = -1;
	s->recv_flags = discard ? MSG_TRUNC : 0;
	if (!to_socket) {
		s->fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		return s->fd < 0 ? -errno : 0;
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len))
		goto err_close;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto err_close;
	s->rfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (s->rfd < 0)
		goto err_close;
	close(lfd);
	if (pthread_create(&s->thread, NULL, sink_reader, s))
		return -EAGAIN;
	return 0;

err_close:
	close(lfd);
	return -errno;
}

/* Close the sending side and, for a socket, wait until the reader saw all. */
static void sink_close(struct sink *s)
{
	if (s->rfd < 0) {
		close(s->fd);
		return;
	}
	shutdown(s->fd, SHUT_WR);
	pthread_join(s->thread, NULL);
	close(s->fd);
	close(s->rfd);
}

/* ---------------------------------------------------------------------- */
/* (a), (b), (d): one method moving CHUNK at a time from the file. */

struct mover {
	enum method m;
	int in;			/* the file */
	int out;
	struct pp_file *pin, *pout, *pp[2];
	int kp[2];
	char *buf;
};

static int mover_init(struct mover *mv, enum method m, int in, int out)
{
	memset(mv, 0, sizeof(*mv));
	mv->m = m;
	mv->in = in;
	mv->out = out;
	mv->kp[0] = mv->kp[1] = -1;
	switch (m) {
	case M_PP_SPLICE:
		mv->pin = pp_fdopen(in);
		mv->pout = pp_fdopen(out);
		if (!mv->pin || !mv->pout || pp_pipe2(mv->pp, 0))
			return -errno;
		return 0;
	case M_K_SPLICE:
		return pipe2(mv->kp, O_CLOEXEC) ? -errno : 0;
	case M_RW:
		mv->buf = malloc(CHUNK);
		return mv->buf ? 0 : -ENOMEM;
	default:
		return 0;
	}
}

/* Move what one pipe holds out to the sink; 0 or -errno. */
static int drain_pipe(struct mover *mv, ssize_t n)
{
	while (n > 0) {
		ssize_t w;

		if (mv->m == M_PP_SPLICE)
			w = pp_splice(mv->pp[0], NULL, mv->pout, NULL, (size_t)n,
				      SPLICE_F_MOVE | SPLICE_F_MORE);
		else
			w = splice(mv->kp[0], NULL, mv->out, NULL, (size_t)n,
				   SPLICE_F_MOVE | SPLICE_F_MORE);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w ? -errno : -EIO;
		n -= w;
	}
	return 0;
}

/* Move up to CHUNK bytes from *off; returns bytes moved, 0 at EOF, or -errno. */
static ssize_t mover_step(struct mover *mv, off_t *off)
{
	ssize_t n, w;
	int err;

	switch (mv->m) {
	case M_PP_SPLICE:
		n = pp_splice(mv->pin, off, mv->pp[1], NULL, CHUNK, SPLICE_F_MOVE | SPLICE_F_MORE);
		break;
	case M_K_SPLICE:
		n = splice(mv->in, off, mv->kp[1], NULL, CHUNK, SPLICE_F_MOVE | SPLICE_F_MORE);
		break;
	case M_SENDFILE:
		n = sendfile(mv->out, mv->in, off, CHUNK);
		return n < 0 ? -errno : n;
	case M_RW:
		n = pread(mv->in, mv->buf, CHUNK, *off);
		if (n <= 0)
			return n < 0 ? -errno : 0;
		*off += n;
		for (ssize_t done = 0; done < n; done += w) {
			w = write(mv->out, mv->buf + done, (size_t)(n - done));
			if (w < 0)
				return -errno;
		}
		return n;
	default:
		return -EINVAL;
	}
	if (n <= 0)
		return n < 0 ? -errno : 0;
	err = drain_pipe(mv, n);
	return err ? err : n;
}

static void mover_done(struct mover *mv)
{
	if (mv->pp[0])
		pp_close(mv->pp[0]);
	if (mv->pp[1])
		pp_close(mv->pp[1]);
	if (mv->pin)
		pp_close(mv->pin);
	if (mv->pout)
		pp_close(mv->pout);
	if (mv->kp[0] >= 0) {
		close(mv->kp[0]);
		close(mv->kp[1]);
	}
	free(mv->buf);
}

/* Runs in the bench_fork() child. */
static void run_file_case(void *arg, struct bench_res *res)
{
	struct sf_case *c = arg;
	struct mover mv;
	struct sink sink;
	double t0, deadline;
	uint64_t sent = 0;
	off_t off = 0;
	int in, err;

	signal(SIGPIPE, SIG_IGN);
	bench_pin_self(bench_pin_mode(), 0);
	in = open(c->path, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		res->err = errno;
		return;
	}
	err = sink_open(&sink, c->to_socket, c->discard);
	if (err) {
		res->err = -err;
		return;
	}
	err = mover_init(&mv, c->m, in, sink.fd);
	res->rss_start_kib = bench_peak_rss_kib();
	t0 = bench_now();
	deadline = t0 + bench_seconds();
	while (!err) {
		ssize_t n = mover_step(&mv, &off);

		if (n < 0) {
			err = (int)n;
			break;
		}
		sent += (uint64_t)n;
		if (n == 0) {
			if (c->once)
				break;
			off = 0;	/* timed cases go round the file again */
		}
		if (!c->once && bench_now() >= deadline)
			break;
	}
	mover_done(&mv);
	sink_close(&sink);
	res->secs = (c->to_socket ? sink.t_end : bench_now()) - t0;
	res->bytes = c->to_socket ? sink.got : sent;
	res->err = -err;
	close(in);
}

/* ---------------------------------------------------------------------- */
/* (c): thread to thread, CHUNK per write, reader not touching the bytes. */

struct t2t {
	enum method m;
	struct pp_file *pp[2];
	int kp[2];
	int null_fd;
	char *pool;			/* POOL chunks, page aligned */
	atomic_uint busy[POOL];		/* pp_write_ref calls not yet released */
	char *rbuf;
	uint64_t got;
	double t_start, t_end;
	pthread_barrier_t go;
	int werr, rerr;			/* errno each side stopped on, each its own */
};

static void chunk_release(void *buf, size_t count, void *arg)
{
	(void)buf;
	(void)count;
	atomic_fetch_sub_explicit((atomic_uint *)arg, 1, memory_order_release);
}

/* One chunk out; 0 or -errno. */
static int t2t_put(struct t2t *t, unsigned int i)
{
	char *chunk = t->pool + (size_t)i * CHUNK;
	size_t done = 0;

	/*
	 * pp_write_ref memory must stay unchanged until released; this
	 * writer never changes it, but waits anyway, as a producer that
	 * refills its buffers must.  The pipe holds one chunk, so the wait
	 * is for the reader's pp_read_done, not for the pipe.
	 */
	if (t->m == M_PP_REF)
		while (atomic_load_explicit(&t->busy[i], memory_order_acquire))
			sched_yield();
	while (done < CHUNK) {
		struct iovec iov = { chunk + done, CHUNK - done };
		ssize_t n;

		switch (t->m) {
		case M_PP_REF:
			atomic_fetch_add_explicit(&t->busy[i], 1, memory_order_relaxed);
			n = pp_write_ref(t->pp[1], chunk + done, CHUNK - done, chunk_release,
					 &t->busy[i]);
			if (n <= 0)	/* no release comes for a call that queued nothing */
				atomic_fetch_sub_explicit(&t->busy[i], 1, memory_order_relaxed);
			break;
		case M_PP_RW:
			n = pp_write(t->pp[1], chunk + done, CHUNK - done);
			break;
		case M_K_VMSPLICE:
			/* No SPLICE_F_GIFT: the chunk stays ours, as with pp_write_ref. */
			n = vmsplice(t->kp[1], &iov, 1, 0);
			break;
		default:
			n = write(t->kp[1], chunk + done, CHUNK - done);
			break;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

static void *t2t_writer(void *arg)
{
	struct t2t *t = arg;
	double deadline;
	int err = 0;

	bench_pin_self(bench_pin_mode(), 0);
	pthread_barrier_wait(&t->go);
	t->t_start = bench_now();
	deadline = t->t_start + bench_seconds();
	for (unsigned int i = 0; !err && bench_now() < deadline; i = (i + 1) % POOL)
		err = t2t_put(t, i);
	t->werr = -err;
	if (t->pp[1])
		pp_close(t->pp[1]);
	else
		close(t->kp[1]);
	return NULL;
}

/* One read; bytes, 0 at EOF, or -errno. */
static ssize_t t2t_get(struct t2t *t)
{
	struct iovec iov[16];
	ssize_t n;

	switch (t->m) {
	case M_PP_REF:
		n = pp_read_lend(t->pp[0], iov, 16, CHUNK);
		if (n > 0 && pp_read_done(t->pp[0], (size_t)n))
			return -errno;
		break;
	case M_PP_RW:
		n = pp_read(t->pp[0], t->rbuf, CHUNK);
		break;
	case M_K_VMSPLICE:
		n = splice(t->kp[0], NULL, t->null_fd, NULL, CHUNK, SPLICE_F_MOVE);
		break;
	default:
		n = read(t->kp[0], t->rbuf, CHUNK);
		break;
	}
	return n < 0 ? -errno : n;
}

static void *t2t_reader(void *arg)
{
	struct t2t *t = arg;
	ssize_t n;

	bench_pin_self(bench_pin_mode(), 1);
	pthread_barrier_wait(&t->go);
	while ((n = t2t_get(t)) > 0 || n == -EINTR)
		if (n > 0)
			t->got += (uint64_t)n;
	if (n < 0)
		t->rerr = (int)-n;
	t->t_end = bench_now();
	return NULL;
}

static void run_t2t_case(void *arg, struct bench_res *res)
{
	struct t2t *t = calloc(1, sizeof(*t));
	struct sf_case *c = arg;
	pthread_t wt, rt;
	bool pp = c->m == M_PP_REF || c->m == M_PP_RW;

	if (!t) {
		res->err = ENOMEM;
		return;
	}
	t->m = c->m;
	t->kp[0] = t->kp[1] = -1;
	t->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	t->pool = aligned_alloc(4096, POOL * CHUNK);
	t->rbuf = malloc(CHUNK);
	if (t->null_fd < 0 || !t->pool || !t->rbuf ||
	    (pp ? pp_pipe2(t->pp, 0) : pipe2(t->kp, O_CLOEXEC))) {
		res->err = errno ? errno : ENOMEM;
		return;
	}
	memset(t->pool, 0x5a, POOL * CHUNK);
	memset(t->rbuf, 0, CHUNK);
	pthread_barrier_init(&t->go, NULL, 3);
	if (pthread_create(&wt, NULL, t2t_writer, t) || pthread_create(&rt, NULL, t2t_reader, t)) {
		res->err = EAGAIN;
		return;
	}
	res->rss_start_kib = bench_peak_rss_kib();
	pthread_barrier_wait(&t->go);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	res->bytes = t->got;
	res->secs = t->t_end - t->t_start;
	res->err = t->werr ? t->werr : t->rerr;
}

/* ---------------------------------------------------------------------- */

struct row {
	const char *name;
	struct sf_case c;
	struct bench_res r;
};

/*
 * Run rows[] and print them.  Row 0 is the pagepipe; the ratio column is the
 * pagepipe's rate over each other row's, so "2.00x" means twice as fast.
 */
static void table(const char *title, struct row *rows, unsigned int n, bench_fn fn)
{
	char a[32], b[32], d[32];

	printf("\n-- %s\n%-40s %16s %12s %9s\n", title, "method", "MB/s", "pp / this",
	       "RSS MiB");
	for (unsigned int i = 0; i < n; i++)
		rows[i].r = bench_fork(fn, &rows[i].c);
	for (unsigned int i = 0; i < n; i++)
		printf("%-40s %16s %12s %9s\n", rows[i].name,
		       bench_fmt_rate(a, sizeof(a), &rows[i].r),
		       i ? bench_fmt_ratio(b, sizeof(b), &rows[0].r, &rows[i].r) : "-",
		       bench_fmt_rss(d, sizeof(d), &rows[i].r));
	fflush(stdout);
}

/*
 * How far the kernel's own zero copy gets over a copying loop on this
 * machine: the most any splice-based sender can hope for.  On loopback
 * TCP the stack's per-segment work dominates, not the copy.
 */
static void ceiling(const struct row *rows)
{
	char b[32];

	printf("%-40s %16s %12s\n", "ceiling: sendfile(2) / read/write", "",
	       bench_fmt_ratio(b, sizeof(b), &rows[1].r, &rows[3].r));
}

int main(int argc, char **argv)
{
	struct row tcp[] = {
		{ .name = "pp_splice file->pagepipe->socket",
		  .c = { .m = M_PP_SPLICE, .path = small_path, .to_socket = true } },
		{ .name = "sendfile(2)",
		  .c = { .m = M_SENDFILE, .path = small_path, .to_socket = true } },
		{ .name = "splice(2) file->kernel pipe->socket",
		  .c = { .m = M_K_SPLICE, .path = small_path, .to_socket = true } },
		{ .name = "read/write, 64K buffer",
		  .c = { .m = M_RW, .path = small_path, .to_socket = true } },
	};
	struct row tcp_discard[] = {
		{ .name = "pp_splice file->pagepipe->socket",
		  .c = { .m = M_PP_SPLICE, .path = small_path, .to_socket = true, .discard = true } },
		{ .name = "sendfile(2)",
		  .c = { .m = M_SENDFILE, .path = small_path, .to_socket = true, .discard = true } },
		{ .name = "splice(2) file->kernel pipe->socket",
		  .c = { .m = M_K_SPLICE, .path = small_path, .to_socket = true, .discard = true } },
		{ .name = "read/write, 64K buffer",
		  .c = { .m = M_RW, .path = small_path, .to_socket = true, .discard = true } },
	};
	struct row null[] = {
		{ .name = "pp_splice file->pagepipe->/dev/null",
		  .c = { .m = M_PP_SPLICE, .path = small_path } },
		{ .name = "splice(2) file->kernel pipe->/dev/null",
		  .c = { .m = M_K_SPLICE, .path = small_path } },
		{ .name = "read/write, 64K buffer", .c = { .m = M_RW, .path = small_path } },
	};
	struct row t2t[] = {
		{ .name = "pp_write_ref + pp_read_lend/done", .c = { .m = M_PP_REF } },
		{ .name = "vmsplice(2) + splice(2) to /dev/null", .c = { .m = M_K_VMSPLICE } },
		{ .name = "write/read, kernel pipe", .c = { .m = M_K_RW } },
		{ .name = "pp_write/pp_read (copying)", .c = { .m = M_PP_RW } },
	};
	struct row rss[] = {
		{ .name = "pp_splice, 64M file -> TCP",
		  .c = { .m = M_PP_SPLICE, .path = small_path, .to_socket = true, .once = true } },
		{ .name = "pp_splice, 1G file -> TCP",
		  .c = { .m = M_PP_SPLICE, .path = big_path, .to_socket = true, .once = true } },
		{ .name = "pp_splice, 64M file -> /dev/null",
		  .c = { .m = M_PP_SPLICE, .path = small_path, .once = true } },
		{ .name = "pp_splice, 1G file -> /dev/null",
		  .c = { .m = M_PP_SPLICE, .path = big_path, .once = true } },
	};
	const char *only = argc > 1 ? argv[1] : "abcd";
	char a[32], b[32], d[32];

	if (argc > 2 || strspn(only, "abcd") != strlen(only))
		bench_die("usage: splice-file [SECTIONS]   (any of abcd, default all)");
	if (strpbrk(only, "abd"))
		make_file(small_path, sizeof(small_path), SMALL_FILE);
	if (strchr(only, 'd'))
		make_file(big_path, sizeof(big_path), BIG_FILE);

	bench_title("splice-file", "zero-copy paths, MB/s (10^6 B/s), page cache warm");
	printf("%zu KiB per call, default (64 KiB) pipes; threads: %s (PP_BENCH_PIN); "
	       "cold-cache numbers are not measured\n", CHUNK / KiB,
	       bench_pin_name(bench_pin_mode()));
	if (strchr(only, 'a')) {
		table("(a) 64 MiB file -> TCP 127.0.0.1 (rate as received)", tcp, 4,
		      run_file_case);
		ceiling(tcp);
		/*
		 * The same with a receiver that copies nothing, so the sending
		 * side's cost is all that differs between the rows.
		 */
		table("(a') the same, the receiver discarding (recv MSG_TRUNC)", tcp_discard, 4,
		      run_file_case);
		ceiling(tcp_discard);
	}
	if (strchr(only, 'b'))
		table("(b) 64 MiB file -> /dev/null", null, 3, run_file_case);
	if (strchr(only, 'c'))
		table("(c) thread -> thread, 64 KiB writes, reader does not touch the bytes",
		      t2t, 4, run_t2t_case);
	if (!strchr(only, 'd'))
		return 0;

	printf("\n-- (d) peak RSS through a default pagepipe, one pass over the file\n");
	printf("%-40s %16s %12s %9s\n", "method", "MB/s", "bytes", "RSS MiB");
	for (unsigned int i = 0; i < sizeof(rss) / sizeof(rss[0]); i++) {
		rss[i].r = bench_fork(run_file_case, &rss[i].c);
		snprintf(b, sizeof(b), "%llu", (unsigned long long)rss[i].r.bytes);
		printf("%-40s %16s %12s %9s\n", rss[i].name,
		       bench_fmt_rate(a, sizeof(a), &rss[i].r), rss[i].r.err ? "-" : b,
		       bench_fmt_rss(d, sizeof(d), &rss[i].r));
	}
	return 0;
}
