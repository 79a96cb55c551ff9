// SPDX-License-Identifier: MIT
/*
 * pipe-procs.c - two processes talking: the kernel's ways, a pagepipe
 * shared between them (pp_pipe2(PP_O_SHARED), forked with the process)
 * and the limit row.
 *
 * Every run forks a writer (pinger) and a reader (ponger), two processes
 * made with fork(), pinned to different CPUs (split) and to one CPU
 * (same); every table is shown in both layouts unless PP_BENCH_PIN picks
 * one.
 *
 *   msg   one process writes messages of 64 B to 1 MiB, the other reads
 *         each with reads of exactly the message's size, looping until the
 *         whole message is in (as pipe-threads' msg).  Columns: a kernel
 *         pipe (pipe2, its default 64 KiB capacity); an AF_UNIX
 *         SOCK_STREAM socketpair with its default buffers, the peer a user
 *         would pick instead of a pipe between two processes; a shared
 *         pagepipe (64 KiB, 16 slots, as the kernel's); and the
 *         limit, a bare lock-free SPSC byte ring of 64 KiB (ring.h, the
 *         same as pipe-threads' limit row) in MAP_SHARED|MAP_ANONYMOUS
 *         memory mapped before fork(): copy in, copy out, a spinning
 *         waiter that yields when both share a CPU.  What a shared-memory
 *         pagepipe must approach, and what it must beat to be worth it
 *         over a socket.
 *   stream the same writer, and a reader that takes what is there, up to
 *         max(64 KiB, size) a read, and checks every message's number in
 *         what it got: small writes drained in bulk, as a log or a
 *         proxy's downstream reads them.  Same columns as msg.
 *   zc    zero copy: the writer vmsplice(2)s 64 KiB of its own pages into
 *         a kernel pipe and the reader splice(2)s them on to /dev/null,
 *         so no byte is copied or read: the cost of moving page
 *         references between processes, the path a pagepipe's page
 *         lending between processes is to be compared with.  Beside it
 *         write(2) + read(2) of the same 64 KiB chunks through a kernel
 *         pipe; the pagepipe's writer fills the arena's pages in place
 *         (pp_write_lend) and its reader borrows them (pp_read_lend); the
 *         limit hands chunks over by reference through two counters.
 *   rtt   a 64 B round trip (ping-pong): one process writes a message,
 *         the other reads it and writes it back; ns per round trip.
 *         Through two kernel pipes, one socketpair (both ways), two bare
 *         rings in shared memory, and two spinning flags in shared memory
 *         (no data: the limit, as in pipe-threads).
 *
 * Integrity: the first 8 bytes of every message carry its sequence number
 * and the reader checks each one (rtt: the pinger checks the echo), so a
 * channel that loses, reorders or tears data cannot show a fast figure:
 * its cell reads "n/a (EBADMSG)"; a byte count that differs between writer
 * and reader reads "n/a (EIO)".  The vmsplice column cannot be checked:
 * /dev/null reads nothing; only its byte count is.
 *
 * Each run is a forked child (bench.h) that forks the reader in turn; the
 * reader reports through the shared mapping.  Runs of a row go kernel,
 * socket, limit, kernel, ... so that a change in the machine's load hits
 * every column alike; each cell is the median of the runs.  No RSS
 * columns: with two processes there is no one peak to read, and nothing
 * here holds more than its buffers.
 *
 * Knobs (environment): PP_BENCH_RUNS runs per cell (default 5);
 * PP_BENCH_SECONDS seconds per run (default 0.2 here); PP_BENCH_QUICK=1 a
 * smoke run (1 run of 0.05 s, about 2 s in all); PP_BENCH_PIN=split|same|none
 * one layout only.  With the defaults the whole program takes about 60 s on
 * 2 CPUs: 340 runs of 0.2 s (34 cells in each of 2 layouts, 5 runs each).
 *
 * Usage: pipe-procs [-t msg|stream|zc|rtt]... [size ...]
 *   -t TABLE    only these tables (repeatable)
 *   size        message sizes for msg and stream, in bytes, with K or M
 */
#include "bench.h"
#include "ring.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define RING_CAP	65536
#define RTT_SIZE	64
#define ZC_CHUNK	65536
#define ZC_MAXBUF	64
#define ZC_PIPE		(1 << 20)	/* every zc pipe: pipe-max-size, the most a user gets */
#define ZC_LIMIT_SLOTS	16		/* chunks in flight at most: a 1 MiB pipe's worth */
#define ZC_LIMIT_AREA	((ZC_LIMIT_SLOTS + 1) * ZC_CHUNK)
#define DEF_SECONDS	0.2

/*
 * KERN a kernel pipe, SOCK a socketpair, PP a PP_O_SHARED pagepipe, LIMIT the bare ring (rtt: the
 * flags), RING the bare ring where the limit is something else (rtt), ZC
 * vmsplice + splice to /dev/null.
 */
enum impl { KERN, SOCK, PP, LIMIT, RING, ZC, NIMPL };

/*
 * What both processes share, mapped before the reader is forked.  The
 * reader's results are written before it exits; the writer reads them
 * after waitpid(), which orders them.
 */
struct shm {
	struct ring ring[2];
	_Alignas(64) _Atomic uint64_t ping;
	_Alignas(64) _Atomic uint64_t pong;
	_Alignas(64) atomic_int ready;	/* the reader is pinned and set up */
	uint64_t got;			/* reader: bytes read */
	double t_end;			/* reader: when it saw EOF */
	int err;			/* reader: the errno it stopped on */
};

/* ---------------------------------------------------------------------- */
/* One direction of a channel, with read(2) manners. */

struct chan {
	enum impl impl;
	int rfd, wfd;
	struct pp_file *pr, *pw;	/* PP */
	bool shared;			/* rtt socketpair: the fds are the other chan's */
	struct ring *ring;
};

static int chan_open(struct chan *c, enum impl impl, struct shm *s, int idx, enum bench_pin pin)
{
	int fds[2];

	memset(c, 0, sizeof(*c));
	c->impl = impl;
	c->rfd = c->wfd = -1;
	if (impl == KERN || impl == ZC) {
		if (pipe2(fds, 0))
			return errno;
	} else if (impl == SOCK) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
			return errno;
	} else if (impl == PP) {
		struct pp_file *ends[2];

		if (pp_pipe2(ends, PP_O_SHARED))
			return errno;
		c->pr = ends[0];
		c->pw = ends[1];
		return 0;
	} else {
		c->ring = &s->ring[idx];
		c->ring->yield = pin == BENCH_PIN_SAME;
		return 0;
	}
	c->rfd = fds[0];
	c->wfd = fds[1];
	return 0;
}

/* After fork(): each process keeps only its own end, so that EOF and EPIPE work. */
static void chan_keep(struct chan *c, bool writer)
{
	if (c->impl == LIMIT || c->impl == RING || c->shared)
		return;
	if (c->impl == PP) {
		pp_close(writer ? c->pr : c->pw);
		if (writer)
			c->pr = NULL;
		else
			c->pw = NULL;
		return;
	}
	close(writer ? c->rfd : c->wfd);
	if (writer)
		c->rfd = -1;
	else
		c->wfd = -1;
}

static ssize_t chan_write(struct chan *c, const void *buf, size_t len)
{
	if (c->ring) {
		ring_write(c->ring, buf, len);
		return (ssize_t)len;
	}
	if (c->impl == PP)
		return pp_write(c->pw, buf, len);
	return write(c->wfd, buf, len);
}

static ssize_t chan_read(struct chan *c, void *buf, size_t len)
{
	if (c->ring)
		return (ssize_t)ring_read(c->ring, buf, len);
	if (c->impl == PP)
		return pp_read(c->pr, buf, len);
	return read(c->rfd, buf, len);
}

static void chan_close_write(struct chan *c)
{
	if (c->ring)
		atomic_store_explicit(&c->ring->closed, true, memory_order_release);
	else if (c->impl == SOCK)
		/* In rtt the same socket still reads the other way. */
		shutdown(c->wfd, SHUT_WR);
	else if (c->impl == PP)
		pp_close(c->pw);
	else
		close(c->wfd);
}

/* The reader gives up: a blocked writer must get EPIPE rather than hang. */
static void chan_close_read(struct chan *c)
{
	if (c->impl == PP)
		pp_close(c->pr);
	else
		close(c->rfd);
}

#include "chan-io.h"

/* ---------------------------------------------------------------------- */
/* The two processes of a run. */

struct job;
typedef void (*side_fn)(struct job *j, struct bench_res *res);

struct job {
	enum impl impl;
	size_t size;			/* bytes per message (msg, zc) */
	enum bench_pin pin;
	double secs;			/* how long the writer writes */
	side_fn writer, reader;		/* side 0 and side 1 */
	bool rtt;			/* two channels, a: ping -> pong, b: back */
	bool zc;			/* pipes made 1 MiB (F_SETPIPE_SZ) */
	bool stream;			/* oneway_reader: reads of what is there */
	struct shm *shm;
	struct chan a, b;
	double t_start;			/* writer: when it began */
	uint64_t sent;			/* writer: bytes written (one-way runs) */
	void *zc_bufs;			/* writer: pages the pipe may still hold */
	char *zc_area;			/* zc's limit: its chunks, in the shared mapping */
};

/*
 * Runs in the bench_fork() child: set up the channels, fork the reader,
 * run the writer here.  A run that hangs (a lost wakeup) must not hang
 * `make bench`: SIGALRM kills this process, the reader dies with it
 * (PR_SET_PDEATHSIG) and the cell says ECHILD.
 */
static void pair_run(void *arg, struct bench_res *res)
{
	struct job *j = arg;
	size_t len = (sizeof(struct shm) + 4095) & ~(size_t)4095;
	char *map;
	pid_t pid, parent = getpid();
	int status;

	alarm((unsigned int)j->secs + 60);
	/* Both rings' data after the struct: the same address in both processes. */
	map = mmap(NULL, len + 2 * RING_CAP + ZC_LIMIT_AREA, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		res->err = errno;
		return;
	}
	j->shm = (struct shm *)map;
	j->zc_area = map + len + 2 * RING_CAP;
	for (int i = 0; i < 2; i++) {
		j->shm->ring[i].data = map + len + (size_t)i * RING_CAP;
		j->shm->ring[i].cap = RING_CAP;
		/* Fault the pages in now, not in the first timed copies. */
		memset(j->shm->ring[i].data, 0xa5, RING_CAP);
	}
	res->err = chan_open(&j->a, j->impl, j->shm, 0, j->pin);
	if (!res->err && j->rtt && j->impl == SOCK) {
		/* One socketpair, both ways: ping uses one end, pong the other. */
		j->b = j->a;
		j->b.rfd = j->a.wfd;
		j->b.wfd = j->a.rfd;
		j->b.shared = true;
	} else if (!res->err && j->rtt) {
		res->err = chan_open(&j->b, j->impl, j->shm, 1, j->pin);
	}
	if (!res->err && j->zc && j->a.pw && pp_fcntl(j->a.pw, F_SETPIPE_SZ, ZC_PIPE) < 0)
		res->err = errno;
	else if (!res->err && j->zc && j->a.wfd >= 0 && fcntl(j->a.wfd, F_SETPIPE_SZ, ZC_PIPE) < 0)
		res->err = errno;
	if (res->err)
		return;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		res->err = errno;
		return;
	}
	if (pid == 0) {
		struct bench_res rr = { .err = 0 };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		bench_pin_self(j->pin, 1);
		chan_keep(&j->a, false);
		if (j->rtt)
			chan_keep(&j->b, true);
		atomic_store_explicit(&j->shm->ready, 1, memory_order_release);
		j->reader(j, &rr);
		_exit(0);
	}
	bench_pin_self(j->pin, 0);
	chan_keep(&j->a, true);
	if (j->rtt)
		chan_keep(&j->b, false);
	while (!atomic_load_explicit(&j->shm->ready, memory_order_acquire))
		sched_yield();
	j->writer(j, res);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!res->err && (!WIFEXITED(status) || WEXITSTATUS(status)))
		res->err = ECHILD;
	free(j->zc_bufs);
	if (j->rtt) {
		if (!res->err)
			res->err = j->shm->err;
		return;
	}
	/* A one-way run ends when the reader has seen EOF: its count decides. */
	res->bytes = j->shm->got;
	res->secs = j->shm->t_end - j->t_start;
	if (!res->err)
		res->err = j->shm->err ? j->shm->err : j->sent != j->shm->got ? EIO : 0;
}

/* ---------------------------------------------------------------------- */
/* msg, and zc's write + read column: messages with sequence numbers. */

static void msg_writer(struct job *j, struct bench_res *res)
{
	/* Read the clock about every 64 KiB: a vDSO call per 64 B write would show. */
	uint64_t every = j->size >= 65536 ? 1 : 65536 / j->size, sent = 0;
	char *buf = bench_page_buf(j->size);
	double deadline;

	if (!buf) {
		res->err = ENOMEM;
		chan_close_write(&j->a);
		return;
	}
	memset(buf, 0x5a, j->size);
	j->t_start = bench_now();
	deadline = j->t_start + j->secs;
	for (uint64_t seq = 0;; seq++) {
		if (seq % every == 0 && bench_now() >= deadline)
			break;
		memcpy(buf, &seq, 8);
		res->err = write_all(&j->a, buf, j->size);
		if (res->err)
			break;
		sent += j->size;
	}
	chan_close_write(&j->a);
	j->sent = sent;
	free(buf);
}

/*
 * msg: each read asks for one whole message (read_full), whose number is
 * checked; stream (j->stream): each takes what is there, up to max(64 KiB,
 * size), and the numbers of the messages in it are checked.
 */
static void oneway_reader(struct job *j, struct bench_res *res)
{
	size_t want = j->stream && j->size < 65536 ? 65536 : j->size;
	char *buf = bench_page_buf(want);
	struct shm *s = j->shm;
	uint64_t seq = 0, v;

	(void)res;
	if (!buf) {
		s->err = ENOMEM;
		chan_close_read(&j->a);
		s->t_end = bench_now();
		return;
	}
	memset(buf, 0xa5, want);
	for (;;) {
		ssize_t n = j->stream ? read_some(&j->a, buf, want) : read_full(&j->a, buf, j->size);

		if (n < 0) {
			/* Close so that a blocked writer gets EPIPE rather than hang. */
			s->err = (int)-n;
			chan_close_read(&j->a);
			break;
		}
		if (!n)
			break;
		if (j->stream) {
			if (!s->err && !bench_stream_ok(buf, s->got, (size_t)n, j->size))
				s->err = EBADMSG;
		} else {
			memcpy(&v, buf, 8);
			if (!s->err && ((size_t)n != j->size || v != seq))
				s->err = EBADMSG;
			seq++;
		}
		/* After a bad message keep draining, or the writer would block. */
		s->got += (uint64_t)n;
	}
	s->t_end = bench_now();
	free(buf);
}

/* ---------------------------------------------------------------------- */
/* zc: vmsplice(2) into a kernel pipe, splice(2) out to /dev/null. */

static void zc_writer(struct job *j, struct bench_res *res)
{
	int cap = fcntl(j->a.wfd, F_GETPIPE_SZ);
	uint64_t sent = 0;
	size_t nbuf;
	char *bufs;
	double deadline;

	/*
	 * Without SPLICE_F_GIFT the pipe holds references to these pages, not
	 * copies of them: a page must not be written again until the reader
	 * has taken it out of the pipe.  The pipe holds at most cap bytes
	 * (one page per slot), so once the vmsplice of chunk k has returned in
	 * full, no page of chunk k - cap / chunk or older is still in it: a
	 * ring of cap / chunk + 1 chunks is never written while the pipe still
	 * holds it.  Each chunk gets its sequence number stamped in before it
	 * goes, as a producer filling its buffer would: that write is what
	 * needs the ring.
	 */
	if (cap < 0) {
		res->err = errno;
		close(j->a.wfd);
		return;
	}
	nbuf = (size_t)cap / ZC_CHUNK + 1;
	if (nbuf > ZC_MAXBUF) {
		res->err = E2BIG;
		close(j->a.wfd);
		return;
	}
	bufs = aligned_alloc(4096, nbuf * ZC_CHUNK);
	if (!bufs) {
		res->err = ENOMEM;
		close(j->a.wfd);
		return;
	}
	memset(bufs, 0x5a, nbuf * ZC_CHUNK);
	j->t_start = bench_now();
	deadline = j->t_start + j->secs;
	for (uint64_t seq = 0; bench_now() < deadline; seq++) {
		struct iovec iov = { bufs + (seq % nbuf) * ZC_CHUNK, ZC_CHUNK };

		memcpy(iov.iov_base, &seq, 8);
		while (iov.iov_len) {
			ssize_t n = vmsplice(j->a.wfd, &iov, 1, 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				res->err = errno;
				goto out;
			}
			iov.iov_base = (char *)iov.iov_base + n;
			iov.iov_len -= (size_t)n;
			sent += (uint64_t)n;
		}
	}
out:
	close(j->a.wfd);
	j->sent = sent;
	/* The reader has drained the pipe when it exits: only then may these go. */
	j->zc_bufs = bufs;
}

static void zc_reader(struct job *j, struct bench_res *res)
{
	struct shm *s = j->shm;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	(void)res;
	if (null < 0) {
		s->err = errno;
		close(j->a.rfd);
		s->t_end = bench_now();
		return;
	}
	for (;;) {
		ssize_t n = splice(j->a.rfd, NULL, null, NULL, 1 << 20, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			s->err = errno;
			close(j->a.rfd);
			break;
		}
		if (!n)
			break;
		s->got += (uint64_t)n;
	}
	s->t_end = bench_now();
	close(null);
}

/* ---------------------------------------------------------------------- */
/* rtt: ping-pong through two channels, or two spinning flags. */

#define RTT_STOP	UINT64_MAX

static void flag_wait(const struct job *j, unsigned int *spins)
{
	if (j->pin == BENCH_PIN_SAME || !(++*spins & 1023))
		sched_yield();
	else
		bench_cpu_relax();
}

static void rtt_ping(struct job *j, struct bench_res *res)
{
	struct shm *s = j->shm;
	char msg[RTT_SIZE] = { 0 };
	unsigned int spins = 0;
	double deadline;
	uint64_t i, v;
	ssize_t n;

	j->t_start = bench_now();
	deadline = j->t_start + j->secs;
	for (i = 1;; i++) {
		if (!(i & 255) && bench_now() >= deadline)
			break;
		if (j->impl == LIMIT) {
			atomic_store_explicit(&s->ping, i, memory_order_release);
			while (atomic_load_explicit(&s->pong, memory_order_acquire) != i)
				flag_wait(j, &spins);
			continue;
		}
		memcpy(msg, &i, 8);
		res->err = write_all(&j->a, msg, RTT_SIZE);
		if (res->err)
			break;
		n = read_full(&j->b, msg, RTT_SIZE);
		memcpy(&v, msg, 8);
		if (n < 0)
			res->err = (int)-n;
		else if (n != RTT_SIZE || v != i)
			res->err = EBADMSG;
		if (res->err)
			break;
	}
	res->secs = bench_now() - j->t_start;
	res->bytes = i - 1;		/* round trips: bench_cell_add() makes ns of them */
	if (j->impl == LIMIT)
		atomic_store_explicit(&s->ping, RTT_STOP, memory_order_release);
	else
		chan_close_write(&j->a);
}

static void rtt_pong(struct job *j, struct bench_res *res)
{
	struct shm *s = j->shm;
	char msg[RTT_SIZE];
	unsigned int spins = 0;
	uint64_t last = 0, v;

	(void)res;
	if (j->impl == LIMIT) {
		for (;;) {
			while ((v = atomic_load_explicit(&s->ping, memory_order_acquire)) == last)
				flag_wait(j, &spins);
			if (v == RTT_STOP)
				break;
			atomic_store_explicit(&s->pong, v, memory_order_release);
			last = v;
		}
		return;
	}
	for (;;) {
		ssize_t n = read_full(&j->a, msg, RTT_SIZE);

		if (n <= 0) {
			s->err = n < 0 ? (int)-n : 0;
			break;
		}
		s->err = n != RTT_SIZE ? EBADMSG : write_all(&j->b, msg, RTT_SIZE);
		if (s->err)
			break;
	}
	chan_close_write(&j->b);
}

/* ---------------------------------------------------------------------- */
/* Cells, medians and the Markdown tables. */

/* ---------------------------------------------------------------------- */
/* zc's other columns. */

/*
 * zc through a shared pagepipe: the writer fills the arena's pages in
 * place (pp_write_lend, its sequence number stamped into each chunk as
 * the vmsplice writer stamps its own pages), the reader borrows them
 * (pp_read_lend) and checks each chunk's stamp: no byte copied on either
 * side, and unlike the vmsplice column, checked.  The pipe is 1 MiB
 * (F_SETPIPE_SZ), as big as the vmsplice column's kernel pipe is made.
 */
static void zc_pp_writer(struct job *j, struct bench_res *res)
{
	uint64_t sent = 0;
	double deadline;

	j->t_start = bench_now();
	deadline = j->t_start + j->secs;
	for (uint64_t seq = 0; bench_now() < deadline; seq++) {
		size_t left = ZC_CHUNK;
		bool first = true;

		while (left) {
			struct iovec iov[16];
			ssize_t n = pp_write_lend(j->a.pw, iov, 16, left);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				res->err = errno;
				goto out;
			}
			if (first)
				memcpy(iov[0].iov_base, &seq, 8);
			first = false;
			pp_write_done(j->a.pw, (size_t)n);
			left -= (size_t)n;
			sent += (uint64_t)n;
		}
	}
out:
	chan_close_write(&j->a);
	j->sent = sent;
}

static void zc_pp_reader(struct job *j, struct bench_res *res)
{
	struct shm *s = j->shm;
	uint64_t pos = 0, v;

	(void)res;
	for (;;) {
		struct iovec iov[64];
		ssize_t n = pp_read_lend(j->a.pr, iov, 64, 1 << 20);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			s->err = errno;
			chan_close_read(&j->a);
			break;
		}
		if (!n)
			break;
		for (size_t i = 0, sum = 0; sum < (size_t)n; sum += iov[i++].iov_len) {
			if ((pos + sum) % ZC_CHUNK || iov[i].iov_len < 8)
				continue;
			memcpy(&v, iov[i].iov_base, 8);
			if (!s->err && v != (pos + sum) / ZC_CHUNK)
				s->err = EBADMSG;
		}
		pp_read_done(j->a.pr, (size_t)n);
		pos += (uint64_t)n;
		s->got += (uint64_t)n;
	}
	s->t_end = bench_now();
}

/*
 * zc's limit: chunks handed over by reference with nothing else, two
 * counters in shared memory.  The writer stamps chunk seq % 17 of a shared
 * area and publishes seq + 1 (release: the stamp before the count); the
 * reader, having seen it (acquire), checks the stamp and publishes its own
 * count, which frees the chunk (release: its read of the stamp before the
 * writer stamps that chunk again, acquire there).  At most 16 chunks are in
 * flight, a 1 MiB pipe's worth.
 */
static void zc_limit_writer(struct job *j, struct bench_res *res)
{
	struct shm *s = j->shm;
	unsigned int spins = 0;
	uint64_t seq = 0;
	double deadline;

	(void)res;
	j->t_start = bench_now();
	deadline = j->t_start + j->secs;
	for (; bench_now() < deadline; seq++) {
		while (seq - atomic_load_explicit(&s->pong, memory_order_acquire) >= ZC_LIMIT_SLOTS)
			flag_wait(j, &spins);
		memcpy(j->zc_area + (seq % (ZC_LIMIT_SLOTS + 1)) * ZC_CHUNK, &seq, 8);
		atomic_store_explicit(&s->ping, seq + 1, memory_order_release);
	}
	/* Taken, all of it, before the stop hides the last count. */
	while (atomic_load_explicit(&s->pong, memory_order_acquire) != seq)
		flag_wait(j, &spins);
	atomic_store_explicit(&s->ping, RTT_STOP, memory_order_release);
	j->sent = seq * ZC_CHUNK;
}

static void zc_limit_reader(struct job *j, struct bench_res *res)
{
	struct shm *s = j->shm;
	unsigned int spins = 0;
	uint64_t seq = 0, v, pub = 0;

	(void)res;
	for (;;) {
		while (seq >= pub) {
			pub = atomic_load_explicit(&s->ping, memory_order_acquire);
			if (pub == RTT_STOP)
				goto out;
			if (seq >= pub)
				flag_wait(j, &spins);
		}
		memcpy(&v, j->zc_area + (seq % (ZC_LIMIT_SLOTS + 1)) * ZC_CHUNK, 8);
		if (!s->err && v != seq)
			s->err = EBADMSG;
		atomic_store_explicit(&s->pong, ++seq, memory_order_release);
		s->got += ZC_CHUNK;
	}
out:
	s->t_end = bench_now();
}

static unsigned int runs;
static double secs;

static void heading(const char *title, enum bench_pin pin, const char *unit)
{
	printf("\n### %s, %s\n\nMedian of %u run%s of %.2f s; %s.\n\n", title, bench_pin_name(pin),
	       runs, runs == 1 ? "" : "s", secs, unit);
	bench_placement_say(pin, false);
}

/* Run each job that exists runs times, interleaved, into cells[]. */
static void run_row(struct job jobs[NIMPL], struct bench_cell cells[NIMPL], bool ns)
{
	for (int i = 0; i < NIMPL; i++) {
		memset(&cells[i], 0, sizeof(cells[i]));
		if (!jobs[i].writer)
			cells[i].err = BENCH_SKIPPED;
	}
	for (unsigned int r = 0; r < runs; r++) {
		for (int i = 0; i < NIMPL; i++) {
			struct bench_res res;

			if (cells[i].err)
				continue;
			res = bench_fork(pair_run, &jobs[i]);
			bench_cell_add(&cells[i], &res, ns);
		}
	}
	for (int i = 0; i < NIMPL; i++)
		bench_cell_done(&cells[i]);
}

static struct job job(enum impl impl, size_t size, enum bench_pin pin, side_fn w, side_fn r)
{
	return (struct job){ .impl = impl, .size = size, .pin = pin, .secs = secs,
			     .writer = w, .reader = r };
}

/* msg, or stream: the same writer and reader, which reads as the table says. */
static void table_oneway(enum bench_pin pin, const size_t *sizes, unsigned int nsizes, bool stream)
{
	if (stream)
		heading("stream: 1 writer process -> 1 reader process, reads of max(64 KiB, size)",
			pin, "MB/s (10^6 B/s); each read takes what is there, up to max(64 KiB, "
			"size); pipe = pipe2(2), socket = AF_UNIX SOCK_STREAM socketpair(2), "
			"pagepipe = pp_pipe2(PP_O_SHARED), limit = a bare SPSC ring of 64 KiB in "
			"shared memory (copy in, copy out, spinning)");
	else
		heading("msg: 1 writer process -> 1 reader process, each read one whole message",
			pin, "MB/s (10^6 B/s); each read asks for one message and loops until it is "
			"complete; pipe = pipe2(2), socket = AF_UNIX SOCK_STREAM socketpair(2), "
			"pagepipe = pp_pipe2(PP_O_SHARED), limit = a bare SPSC "
			"ring of 64 KiB in shared memory (copy in, copy out, spinning)");
	printf("| size | pipe MB/s | socket MB/s | pagepipe MB/s | limit MB/s | socket/pipe "
	       "| pp/pipe | pp/limit | limit/pipe |\n");
	printf("|-----:|----------:|------------:|--------------:|-----------:|------------:"
	       "|--------:|---------:|-----------:|\n");
	for (unsigned int s = 0; s < nsizes; s++) {
		struct job jobs[NIMPL] = {
			[KERN] = job(KERN, sizes[s], pin, msg_writer, oneway_reader),
			[SOCK] = job(SOCK, sizes[s], pin, msg_writer, oneway_reader),
			[PP] = job(PP, sizes[s], pin, msg_writer, oneway_reader),
			[LIMIT] = job(LIMIT, sizes[s], pin, msg_writer, oneway_reader),
		};
		struct bench_cell c[NIMPL];
		char a[32], b[32], d[32], e[32], f[32], g[32], h[32], k[32], l[32];

		for (int i = 0; i < NIMPL; i++)
			jobs[i].stream = stream;
		run_row(jobs, c, false);
		printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		       bench_fmt_size(a, sizeof(a), sizes[s]),
		       bench_fmt_cell(b, sizeof(b), &c[KERN], "%.1f"),
		       bench_fmt_cell(d, sizeof(d), &c[SOCK], "%.1f"),
		       bench_fmt_cell(h, sizeof(h), &c[PP], "%.1f"),
		       bench_fmt_cell(e, sizeof(e), &c[LIMIT], "%.1f"),
		       bench_fmt_cell_ratio(f, sizeof(f), &c[SOCK], &c[KERN]),
		       bench_fmt_cell_ratio(k, sizeof(k), &c[PP], &c[KERN]),
		       bench_fmt_cell_ratio(l, sizeof(l), &c[PP], &c[LIMIT]),
		       bench_fmt_cell_ratio(g, sizeof(g), &c[LIMIT], &c[KERN]));
		fflush(stdout);
	}
	bench_placement_say(pin, true);
}

static void table_zc(enum bench_pin pin)
{
	struct job jobs[NIMPL] = {
		[KERN] = job(KERN, ZC_CHUNK, pin, msg_writer, oneway_reader),
		[ZC] = job(ZC, ZC_CHUNK, pin, zc_writer, zc_reader),
		[PP] = job(PP, ZC_CHUNK, pin, zc_pp_writer, zc_pp_reader),
		[LIMIT] = job(LIMIT, ZC_CHUNK, pin, zc_limit_writer, zc_limit_reader),
	};
	struct bench_cell c[NIMPL];
	char a[32], b[32], d[32], e[32], f[32], g[32], h[32];

	for (int i = 0; i < NIMPL; i++)
		jobs[i].zc = true;
	heading("zc: 64 KiB chunks between two processes, zero copy", pin,
		"GB/s (10^9 B/s); write+read = write(2) and read(2) of the chunks through a "
		"kernel pipe; vmsplice = the writer vmsplice(2)s its own pages (no "
		"SPLICE_F_GIFT, a ring of buffers one deeper than the pipe) and the reader "
		"splice(2)s them to /dev/null: no byte copied or read, so no integrity check, "
		"only the byte count; pagepipe = a PP_O_SHARED pagepipe, the writer fills the "
		"arena's pages in place (pp_write_lend) and the reader borrows them "
		"(pp_read_lend), sequence numbers checked; limit = chunks handed over by "
		"reference through two counters in shared memory, spinning. Every pipe 1 MiB");
	run_row(jobs, c, false);
	for (int i = 0; i < NIMPL; i++)
		c[i].med /= 1000.0;
	printf("| chunk | write+read GB/s | vmsplice+splice GB/s | pagepipe GB/s | limit GB/s "
	       "| vmsplice/write | pp/vmsplice | pp/limit |\n");
	printf("|------:|----------------:|---------------------:|--------------:|-----------:"
	       "|---------------:|------------:|---------:|\n");
	printf("| 64K | %s | %s | %s | %s | %s | %s | %s |\n",
	       bench_fmt_cell(a, sizeof(a), &c[KERN], "%.2f"),
	       bench_fmt_cell(b, sizeof(b), &c[ZC], "%.2f"),
	       bench_fmt_cell(e, sizeof(e), &c[PP], "%.2f"),
	       bench_fmt_cell(f, sizeof(f), &c[LIMIT], "%.2f"),
	       bench_fmt_cell_ratio(d, sizeof(d), &c[ZC], &c[KERN]),
	       bench_fmt_cell_ratio(g, sizeof(g), &c[PP], &c[ZC]),
	       bench_fmt_cell_ratio(h, sizeof(h), &c[PP], &c[LIMIT]));
	fflush(stdout);
	bench_placement_say(pin, true);
}

static void table_rtt(enum bench_pin pin)
{
	struct job jobs[NIMPL] = {
		[KERN] = job(KERN, RTT_SIZE, pin, rtt_ping, rtt_pong),
		[SOCK] = job(SOCK, RTT_SIZE, pin, rtt_ping, rtt_pong),
		[PP] = job(PP, RTT_SIZE, pin, rtt_ping, rtt_pong),
		[LIMIT] = job(LIMIT, RTT_SIZE, pin, rtt_ping, rtt_pong),
		[RING] = job(RING, RTT_SIZE, pin, rtt_ping, rtt_pong),
	};
	struct bench_cell c[NIMPL];
	char a[32], b[32], d[32], e[32], f[32], g[32], h[32], k[32], l[32], m[32];

	for (int i = 0; i < NIMPL; i++)
		jobs[i].rtt = true;
	heading("rtt: 64 B round trip between two processes (ping-pong)", pin,
		"ns per round trip, lower is better; pipes = two kernel pipes, socket = one "
		"socketpair both ways, pagepipes = two PP_O_SHARED pagepipes, rings = two bare SPSC rings in shared memory (what any ring "
		"that copies in and out pays), flags = two spinning flags in shared memory, no "
		"data: the limit");
	run_row(jobs, c, true);
	printf("| size | pipes ns | socket ns | pagepipes ns | rings ns | flags ns | pipes/flags "
	       "| socket/flags | pp/flags | pp/pipes | rings/flags |\n");
	printf("|-----:|---------:|----------:|-------------:|---------:|---------:|------------:"
	       "|-------------:|---------:|---------:|------------:|\n");
	printf("| 64 | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
	       bench_fmt_cell(a, sizeof(a), &c[KERN], "%.0f"),
	       bench_fmt_cell(b, sizeof(b), &c[SOCK], "%.0f"),
	       bench_fmt_cell(k, sizeof(k), &c[PP], "%.0f"),
	       bench_fmt_cell(d, sizeof(d), &c[RING], "%.0f"),
	       bench_fmt_cell(e, sizeof(e), &c[LIMIT], "%.0f"),
	       bench_fmt_cell_ratio(f, sizeof(f), &c[KERN], &c[LIMIT]),
	       bench_fmt_cell_ratio(g, sizeof(g), &c[SOCK], &c[LIMIT]),
	       bench_fmt_cell_ratio(l, sizeof(l), &c[PP], &c[LIMIT]),
	       bench_fmt_cell_ratio(m, sizeof(m), &c[PP], &c[KERN]),
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
	/* At least 8: every message carries its sequence number. */
	if (*end || v < 8 || v > 64 * MiB)
		bench_die("pipe-procs: bad size '%s' (8 bytes to 64M)", s);
	return v;
}

enum { T_MSG = 1, T_ZC = 2, T_RTT = 4, T_STREAM = 8, T_ALL = 15 };

int main(int argc, char **argv)
{
	static const size_t def_sizes[] = { 64, 4096, 65536, 1048576 };
	size_t sizes[16];
	unsigned int nsizes = 0, tables = 0, nmodes = 0, t;
	enum bench_pin modes[2];
	int fds[2], ksz = -1, snd = -1, rcv = -1, opt;
	socklen_t sl = sizeof(int);

	while ((opt = getopt(argc, argv, "t:")) != -1) {
		switch (opt) {
		case 't':
			t = !strcmp(optarg, "msg") ? T_MSG : !strcmp(optarg, "zc") ? T_ZC
			  : !strcmp(optarg, "rtt") ? T_RTT : !strcmp(optarg, "stream") ? T_STREAM : 0;
			if (!t)
				bench_die("pipe-procs: -t msg|stream|zc|rtt, not '%s'", optarg);
			tables |= t;
			break;
		default:
			bench_die("usage: pipe-procs [-t msg|stream|zc|rtt]... [size ...]");
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

	/* Say what each channel could hold: the pipe's and the ring's are equal. */
	if (!pipe(fds)) {
		ksz = fcntl(fds[0], F_GETPIPE_SZ);
		close(fds[0]);
		close(fds[1]);
	}
	if (!socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) {
		getsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &snd, &sl);
		sl = sizeof(int);
		getsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &rcv, &sl);
		close(fds[0]);
		close(fds[1]);
	}

	printf("\n## pipe-procs: two processes, kernel pipe vs socketpair vs shared pagepipe "
	       "vs limit\n\n");
	printf("capacity: kernel pipe %d B, socketpair SO_SNDBUF %d B / SO_RCVBUF %d B, limit ring "
	       "%d B; PP_BENCH_RUNS=%u, PP_BENCH_SECONDS=%.2f per run%s\n", ksz, snd, rcv, RING_CAP,
	       runs, secs, bench_quick() ? " (PP_BENCH_QUICK: a smoke run, not a measurement)" : "");
	printf("integrity: the first 8 bytes of each message carry a sequence number that the "
	       "reader checks; a failed check shows n/a (EBADMSG), lost bytes n/a (EIO); "
	       "vmsplice to /dev/null is counted, not checked\n");
	/*
	 * Unless PP_BENCH_PIN picks one, show both layouts: split CPUs pays a
	 * cross-CPU wakeup per sleep; one CPU pays a context switch instead.
	 */
	modes[nmodes++] = bench_pin_mode();
	if (!getenv("PP_BENCH_PIN") && modes[0] == BENCH_PIN_SPLIT)
		modes[nmodes++] = BENCH_PIN_SAME;
	for (unsigned int m = 0; m < nmodes; m++) {
		if (tables & T_MSG)
			table_oneway(modes[m], sizes, nsizes, false);
		if (tables & T_STREAM)
			table_oneway(modes[m], sizes, nsizes, true);
		if (tables & T_ZC)
			table_zc(modes[m]);
		if (tables & T_RTT)
			table_rtt(modes[m]);
	}
	return 0;
}
