// SPDX-License-Identifier: MIT
/*
 * Description: SIGKILL at random points under load on a PP_O_SHARED pipe
 * (src/shared.c, src/shared_splice.c, docs/shared-pipes.md section 3b).
 * Every call that moves bytes is in the line of fire: write, writev,
 * pp_write_lend/pp_write_done, vmsplice and splice from a file on the
 * writing side; read, pp_read_lend/pp_read_done, vmsplice and splice to
 * /dev/null on the reading side.  Records are 512 bytes (a sequence
 * number, a checksum, a pattern), every producer publishes whole ones and
 * every consumer takes whole ones.
 *  - writers_killed: 40 writer processes in turn, each running one kind of
 *    call in a loop (one kind resizes the pipe between records), killed
 *    after a random 0-15 ms while the parent reads:
 *    the parent sees every record whole, each writer's records in order
 *    with none missing before the last it got (a write is whole or
 *    absent), then EOF once the last is dead;
 *  - readers_killed: 40 reader processes in turn, killed likewise while the
 *    parent writes: what is left for the next reader is whole records in
 *    order (a dead reader's half-taken read is not half taken), and the
 *    parent never blocks for good (it sees EPIPE only when no reader is
 *    left);
 *  - pages_come_back: after killings in the middle of 256 KiB write leases
 *    (each holding 64 of the arena's pages), the pipe still holds its
 *    whole 1 MiB: the pages the dead held went back to the arena (the
 *    sweep after a lock taken over from the dead).  Without the sweep the
 *    leases' pages are gone after a few kills and the writes end in ENOMEM.
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define REC	512u
#define ROUNDS	40
#define MAGIC	0x7265636fu

struct rec_hdr {
	uint32_t magic;
	uint32_t writer;
	uint64_t seq;
	uint32_t sum;
};

static uint32_t rec_sum(const unsigned char *b)
{
	uint32_t s = 2166136261u;

	for (unsigned int i = sizeof(struct rec_hdr); i < REC; i++)
		s = (s ^ b[i]) * 16777619u;
	return s;
}

static void rec_fill(unsigned char *b, uint32_t writer, uint64_t seq)
{
	struct rec_hdr h;

	memset(&h, 0, sizeof(h));	/* its padding too: the bytes go out whole */
	h.magic = MAGIC;
	h.writer = writer;
	h.seq = seq;
	t_fill(b + sizeof(h), REC - sizeof(h), seq * REC + writer, 11);
	h.sum = rec_sum(b);
	memcpy(b, &h, sizeof(h));
}

/* 1 good, 0 torn or foreign. */
static int rec_check(const unsigned char *b, struct rec_hdr *out)
{
	memcpy(out, b, sizeof(*out));
	return out->magic == MAGIC && out->sum == rec_sum(b);
}

static unsigned int rnd(unsigned int *state)
{
	*state = *state * 1103515245u + 12345u;
	return *state >> 8;
}

/* ---------------------------------------------------------------------- */
/* Writers. */

enum wkind { W_WRITE, W_WRITEV, W_LEASE, W_VMSPLICE, W_SPLICE, W_RESIZE, W_KINDS };

/* A file of whole records, spliced from at page-aligned offsets. */
static char rec_file[64];

static void make_rec_file(void)
{
	unsigned char b[REC];
	int fd;

	snprintf(rec_file, sizeof(rec_file), "/tmp/pp-shared-kill-XXXXXX");
	fd = mkstemp(rec_file);
	if (fd < 0)
		_exit(T_EXIT_FAIL);
	for (uint64_t s = 0; s < 512; s++) {
		rec_fill(b, 0xffff, s);
		if (write(fd, b, REC) != REC)
			_exit(T_EXIT_FAIL);
	}
	close(fd);
}

/* Runs until killed: records numbered from 0, by one kind of call. */
static void __attribute__((noreturn)) writer_child(struct pp_file *w, uint32_t id, enum wkind kind)
{
	unsigned char *buf = mmap(NULL, 64 * REC, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pp_file *file = NULL;
	unsigned int st = id * 7919u + 1;
	uint64_t seq = 0;

	if (buf == MAP_FAILED)
		_exit(T_EXIT_FAIL);
	if (kind == W_SPLICE) {
		int fd = open(rec_file, O_RDONLY);

		file = fd < 0 ? NULL : pp_fdopen(fd);
		if (!file)
			_exit(T_EXIT_FAIL);
	}
	for (;;) {
		unsigned int n = 1 + rnd(&st) % 8;	/* records this call */
		ssize_t r = 0;

		if (kind != W_SPLICE && kind != W_LEASE)
			for (unsigned int i = 0; i < n; i++)
				rec_fill(buf + i * REC, id, seq + i);
		switch (kind) {
		case W_WRITE:
			r = pp_write(w, buf, REC);	/* PIPE_BUF: whole or nothing */
			n = 1;
			break;
		case W_WRITEV: {
			struct iovec v[2] = { { buf, REC / 2 }, { buf + REC / 2, REC / 2 } };

			r = pp_writev(w, v, 2);
			n = 1;
			break;
		}
		case W_LEASE: {
			struct iovec v[64];
			size_t want = (size_t)n * REC;

			r = pp_write_lend(w, v, 64, want);
			if (r > 0) {
				/* Whole records into the whole pages lent. */
				size_t got = (size_t)r - (size_t)r % REC, done = 0;

				for (int i = 0; done < got; i++) {
					size_t in_page = v[i].iov_len - v[i].iov_len % REC;

					for (size_t o = 0; o < in_page && done < got; o += REC, done += REC)
						rec_fill((unsigned char *)v[i].iov_base + o, id,
							 seq + done / REC);
				}
				pp_write_done(w, got);
				r = (ssize_t)got;
			}
			break;
		}
		case W_VMSPLICE: {
			struct iovec v = { buf, (size_t)n * REC };

			r = pp_vmsplice(w, &v, 1, 0);
			break;
		}
		case W_RESIZE:
			/* Both locks held a while, between records: a kill lands in a resize too. */
			r = pp_fcntl(w, F_SETPIPE_SZ, 4096u << (rnd(&st) % 9));
			if (r < 0 && errno != EBUSY)
				_exit(T_EXIT_FAIL);
			r = pp_write(w, buf, REC);
			n = 1;
			break;
		case W_SPLICE: {
			/* The file's records have their own numbers: writer 0xffff. */
			off_t off = (off_t)(rnd(&st) % 64) * 4096;

			r = pp_splice(file, &off, w, NULL, 4096, 0);
			if (r > 0)
				continue;
			break;
		}
		default:
			break;
		}
		if (r < 0)
			_exit(errno == EPIPE ? 0 : T_EXIT_FAIL);
		if (r % REC)
			_exit(T_EXIT_FAIL);	/* a short count inside a record */
		seq += (uint64_t)r / REC;
	}
}

/* Reads and checks records; per writer, numbers follow on with no gap. */
struct tally {
	uint64_t next[ROUNDS + 1];
	uint64_t records;
	int bad;
};

static void tally_take(struct tally *t, const unsigned char *b, size_t len)
{
	for (size_t o = 0; o + REC <= len; o += REC) {
		struct rec_hdr h;

		if (!rec_check(b + o, &h)) {
			if (!t->bad)
				fprintf(stderr, "torn or foreign record at +%zu of a read of %zu\n", o, len);
			t->bad = 1;
			continue;
		}
		t->records++;
		if (h.writer == 0xffff)
			continue;	/* spliced from the file */
		if (h.writer > ROUNDS || h.seq != t->next[h.writer]) {
			if (!t->bad)
				fprintf(stderr, "writer %u: record %llu, expected %llu\n", h.writer,
					(unsigned long long)h.seq,
					(unsigned long long)(h.writer > ROUNDS ? 0 : t->next[h.writer]));
			t->bad = 1;
			continue;
		}
		t->next[h.writer]++;
	}
}

static int writers_killed(void)
{
	struct pp_file *p[2];
	struct tally t = { 0 };
	unsigned char *buf = malloc(64 * REC);
	unsigned int st = 12345;
	size_t have = 0;

	ASSERT_TRUE(buf != NULL);
	make_rec_file();
	t_watchdog(60, "writers_killed");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED | O_NONBLOCK), 0);
	ASSERT_EQ(pp_fcntl(p[1], F_SETFL, 0), 0);	/* the writers block */
	for (uint32_t round = 1; round <= ROUNDS; round++) {
		uint64_t before = t.records;
		long long until = 0;
		pid_t pid = fork();

		ASSERT_NE(pid, -1);
		if (pid == 0) {
			pp_close(p[0]);
			writer_child(p[1], round, (enum wkind)(round % W_KINDS));
		}
		/*
		 * Read while it writes, then kill it wherever it is: the clock
		 * starts at its first record, so that a slow start (valgrind)
		 * does not make every kill land before the load.
		 */
		while (!until || t_now_ms() < until) {
			if (!until && t.records > before)
				until = t_now_ms() + rnd(&st) % 16;
			ssize_t r = pp_read(p[0], buf + have, 64 * REC - have);

			if (r > 0) {
				have += (size_t)r;
				tally_take(&t, buf, have - have % REC);
				memmove(buf, buf + (have - have % REC), have % REC);
				have %= REC;
			} else if (r < 0 && errno != EAGAIN) {
				ASSERT_EQ(errno, EAGAIN);
			}
		}
		kill(pid, SIGKILL);
		ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	}
	pp_close(p[1]);
	ASSERT_EQ(pp_fcntl(p[0], F_SETFL, 0), 0);
	for (;;) {
		ssize_t r = pp_read(p[0], buf + have, 64 * REC - have);

		if (r <= 0) {
			ASSERT_EQ(r, 0);	/* EOF: every writer is dead */
			break;
		}
		have += (size_t)r;
		tally_take(&t, buf, have - have % REC);
		memmove(buf, buf + (have - have % REC), have % REC);
		have %= REC;
	}
	ASSERT_EQ(have, 0);		/* no half record at the end */
	ASSERT_EQ(t.bad, 0);
	ASSERT_GE(t.records, ROUNDS);
	{
		unsigned int revokes, dead;

		pp__shared_bias_stats(p[0], &revokes, &dead);
		printf("writers_killed: %u biases revoked, %u of them from a writer killed inside\n",
		       revokes, dead);
	}
	pp_close(p[0]);
	unlink(rec_file);
	free(buf);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Readers. */

enum rkind { R_READ, R_LEND, R_VMSPLICE, R_SPLICE, R_KINDS };

static void __attribute__((noreturn)) reader_child(struct pp_file *r, enum rkind kind)
{
	unsigned char *buf = malloc(64 * REC);
	int null = open("/dev/null", O_WRONLY);
	struct pp_file *out = null < 0 ? NULL : pp_fdopen(null);

	if (!buf || !out)
		_exit(T_EXIT_FAIL);
	for (;;) {
		ssize_t n = 0;

		switch (kind) {
		case R_READ:
			n = pp_read(r, buf, 8 * REC);
			break;
		case R_LEND: {
			struct iovec v[64];

			n = pp_read_lend(r, v, 64, 16 * REC);
			if (n > 0)
				pp_read_done(r, (size_t)n - (size_t)n % REC);
			break;
		}
		case R_VMSPLICE: {
			struct iovec v = { buf, 8 * REC };

			n = pp_vmsplice(r, &v, 1, 0);
			break;
		}
		case R_SPLICE:
			n = pp_splice(r, NULL, out, NULL, 8 * REC, 0);
			break;
		default:
			break;
		}
		if (n <= 0)
			_exit(n ? T_EXIT_FAIL : 0);
	}
}

static int readers_killed(void)
{
	struct pp_file *p[2];
	unsigned char *buf = malloc(64 * REC);
	unsigned int st = 777;
	uint64_t seq = 0, last = 0;
	size_t have = 0;
	bool first = true;

	ASSERT_TRUE(buf != NULL);
	t_watchdog(60, "readers_killed");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED | O_NONBLOCK), 0);
	ASSERT_EQ(pp_fcntl(p[0], F_SETFL, 0), 0);	/* the readers block */
	for (uint32_t round = 1; round <= ROUNDS; round++) {
		uint64_t seq0 = seq;
		long long until = 0;
		pid_t pid = fork();

		ASSERT_NE(pid, -1);
		if (pid == 0) {
			pp_close(p[1]);
			reader_child(p[0], (enum rkind)(round % R_KINDS));
		}
		/*
		 * The clock starts once more than the pipe holds has gone in
		 * this round, so the reader has been reading: a slow start
		 * (valgrind) does not make every kill land before the load.
		 */
		while (!until || t_now_ms() < until) {
			if (!until && (seq - seq0) * REC > 65536)
				until = t_now_ms() + rnd(&st) % 16;
			unsigned int n = 1 + rnd(&st) % 8;
			ssize_t r;

			for (unsigned int i = 0; i < n; i++)
				rec_fill(buf + i * REC, 1, seq + i);
			r = pp_write(p[1], buf, n * REC);
			if (r < 0) {
				ASSERT_EQ(errno, EAGAIN);
				continue;
			}
			/* A non-blocking write above PIPE_BUF may be short: whole records only are counted. */
			ASSERT_EQ(r % REC, 0);
			seq += (uint64_t)r / REC;
		}
		kill(pid, SIGKILL);
		ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	}
	/* What is left: whole records, in order, the last one written last. */
	pp_close(p[1]);
	for (;;) {
		ssize_t r = pp_read(p[0], buf + have, 64 * REC - have);
		size_t whole;

		if (r <= 0) {
			ASSERT_EQ(r, 0);
			break;
		}
		have += (size_t)r;
		whole = have - have % REC;
		for (size_t o = 0; o < whole; o += REC) {
			struct rec_hdr h;

			ASSERT_TRUE(rec_check(buf + o, &h));
			if (!first)
				ASSERT_EQ(h.seq, last + 1);
			first = false;
			last = h.seq;
		}
		memmove(buf, buf + whole, have - whole);
		have -= whole;
	}
	ASSERT_EQ(have, 0);
	if (!first)
		ASSERT_EQ(last, seq - 1);
	pp_close(p[0]);
	free(buf);
	return 0;
}

/* ---------------------------------------------------------------------- */

/* Holds a lease of 64 pages, filling it slowly, until killed. */
static void __attribute__((noreturn)) lease_holder(struct pp_file *w, int ready)
{
	for (;;) {
		struct iovec v[64];
		ssize_t n = pp_write_lend(w, v, 64, 64 * 4096);

		if (n < 0)
			_exit(T_EXIT_FAIL);
		if (write(ready, "x", 1) != 1)
			_exit(T_EXIT_FAIL);
		for (int i = 0; i < 64; i++)
			memset(v[i].iov_base, i, v[i].iov_len);
		pause();
		pp_write_done(w, (size_t)n);
	}
}

static int pages_come_back(void)
{
	struct pp_file *p[2];
	char *buf = malloc(1 << 20);
	int writes = 0;

	ASSERT_TRUE(buf != NULL);
	t_watchdog(60, "pages_come_back");
	ASSERT_EQ(pp_pipe2(p, PP_O_SHARED), 0);
	ASSERT_EQ(pp_fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	for (int round = 0; round < 12; round++) {
		int ready[2];
		char c;
		pid_t pid;

		ASSERT_EQ(pipe(ready), 0);
		pid = fork();
		ASSERT_NE(pid, -1);
		if (pid == 0) {
			close(ready[0]);
			pp_close(p[0]);
			lease_holder(p[1], ready[1]);
		}
		close(ready[1]);
		/* It holds 64 pages and the writers' lock; it dies holding them. */
		ASSERT_EQ(read(ready[0], &c, 1), 1);
		close(ready[0]);
		kill(pid, SIGKILL);
		ASSERT_EQ(waitpid(pid, NULL, 0), pid);
		/* A reader comes by (and sweeps, once a writer took the lock over). */
		ASSERT_EQ(pp_write(p[1], "y", 1), 1);
		ASSERT_EQ(pp_read(p[0], buf, 16), 1);
	}
	/* The whole 1 MiB: 256 pages, one per slot. */
	ASSERT_EQ(pp_fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
	memset(buf, 0x33, 4096);
	while (pp_write(p[1], buf, 4096) == 4096)
		writes++;
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(writes, 256);
	ASSERT_EQ(pp_read(p[0], buf, 1 << 20), 1 << 20);
	pp_close(p[0]);
	pp_close(p[1]);
	free(buf);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(writers_killed),
		T_SUBTEST(readers_killed),
		T_SUBTEST(pages_come_back),
	};

	signal(SIGPIPE, SIG_IGN);
	return T_RUN_SUBTESTS(tests);
}
