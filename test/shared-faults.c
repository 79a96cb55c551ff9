// SPDX-License-Identifier: MIT
/*
 * Description: PP_O_SHARED pipes when a process dies or misbehaves
 * (src/shared.c, docs/shared-pipes.md): a writer SIGKILLed in the middle
 * of a stream of PIPE_BUF records leaves its reader every record whole
 * and then EOF; a reader SIGKILLed leaves its writer EPIPE, whichever
 * call it waits for room in (write, splice, vmsplice, a write lend); a process
 * that exits without closing is closed for at once; a peer that scribbles
 * on the shared state makes calls fail with EIO (or return what is
 * there), never crash, hang or touch memory outside the arena; a
 * non-blocking write that finds no free page in the arena (a peer took
 * them) says EAGAIN at once, where a blocking one gives a reader a second
 * to hand pages back; nothing (descriptor, mapping) is left once the ends
 * are closed.
 */
#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REC	4096		/* PIPE_BUF: one record, written in one call */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A record: its sequence number, then the pattern of that number. */
static void rec_fill(unsigned char *b, uint64_t seq)
{
	memcpy(b, &seq, sizeof(seq));
	t_fill(b + sizeof(seq), REC - sizeof(seq), seq * REC, 7);
}

static int rec_check(const unsigned char *b, uint64_t want)
{
	uint64_t seq;

	memcpy(&seq, b, sizeof(seq));
	if (seq != want)
		return -1;
	return t_check(b + sizeof(seq), REC - sizeof(seq), seq * REC, 7);
}

/* Read exactly n bytes, or fewer at EOF; -1 on an error. */
static ssize_t read_full(struct pp_file *f, unsigned char *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pp_read(f, b + got, n - got);

		if (r < 0)
			return -1;
		if (!r)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/*
 * The writer dies at a random point of its stream (blocked on a full
 * pipe, or between records, or inside a write): what the reader gets is
 * whole records in order, then EOF, soon.
 */
static int test_writer_killed(void)
{
	for (int round = 0; round < 6; round++) {
		struct pp_file *e[2];
		unsigned char b[REC];
		uint64_t seq = 0;
		double t0;
		ssize_t r;
		pid_t pid;

		ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
		pid = fork();
		ASSERT_GE(pid, 0);
		if (!pid) {
			pp_close(e[0]);
			for (uint64_t i = 0;; i++) {
				rec_fill(b, i);
				if (pp_write(e[1], b, REC) != REC)
					_exit(1);
			}
		}
		pp_close(e[1]);
		/* Read a little, so the kill finds the writer blocked or busy. */
		for (int i = 0; i < 10 + round * 37; i++) {
			ASSERT_EQ(read_full(e[0], b, REC), REC);
			ASSERT_EQ(rec_check(b, seq), 0);
			seq++;
		}
		usleep(1000 * (unsigned int)(round % 3));
		kill(pid, SIGKILL);
		ASSERT_EQ(waitpid(pid, NULL, 0), pid);
		t0 = now_s();
		while ((r = read_full(e[0], b, REC)) == REC) {
			ASSERT_EQ(rec_check(b, seq), 0);
			seq++;
		}
		ASSERT_EQ(r, 0);	/* EOF, never half a record */
		/* A death wakes nobody: found at the next look, 50 ms apart. */
		ASSERT_TRUE(now_s() - t0 < 1.0);
		pp_close(e[0]);
	}
	return 0;
}

/* The reader dies: the writer gets EPIPE (no SIGPIPE asked), soon. */
static int test_reader_killed(void)
{
	struct pp_file *e[2];
	unsigned char b[REC] = { 0 };
	double t0;
	ssize_t r;
	pid_t pid;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | PP_O_NOSIGPIPE), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		pp_close(e[1]);
		for (;;)
			if (pp_read(e[0], b, sizeof(b)) <= 0)
				_exit(1);
	}
	pp_close(e[0]);
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(pp_write(e[1], b, sizeof(b)), (ssize_t)sizeof(b));
	kill(pid, SIGKILL);
	ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	t0 = now_s();
	while ((r = pp_write(e[1], b, sizeof(b))) == (ssize_t)sizeof(b))
		ASSERT_TRUE(now_s() - t0 < 2.0);
	ASSERT_EQ(r, -1);
	ASSERT_EQ(errno, EPIPE);
	ASSERT_TRUE(now_s() - t0 < 1.0);
	pp_close(e[1]);
	return 0;
}

/*
 * The reader SIGKILLed while the pipe is full, then a writer blocks for
 * room by each way in that is not pp_write: a splice from a regular file
 * and from a kernel pipe, pp_vmsplice, pp_write_lend.  Each must see
 * EPIPE, not wait forever: a killed reader leaves its count in the
 * arena's hint, and only the token says it is gone (pagepipe send spun
 * at 100% CPU in pp__shared_reserve, which asked the hint again after
 * every wait, until the wait itself cleared it).
 */
static int blocked_writer_sees_epipe(int how)
{
	struct pp_file *e[2], *in = NULL;
	unsigned char b[REC] = { 0 };
	char path[] = "/tmp/pp-shared-faults.XXXXXX";
	int kp[2] = { -1, -1 }, fd = -1, sync[2];
	struct iovec iov = { b, sizeof(b) };
	double t0;
	ssize_t r;
	pid_t pid;
	char c;

	ASSERT_EQ(pipe(sync), 0);
	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | PP_O_NOSIGPIPE), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		pp_close(e[1]);
		close(sync[0]);
		if (write(sync[1], "r", 1) != 1)
			_exit(1);
		pause();	/* a reader that never reads: the pipe fills */
		_exit(1);
	}
	close(sync[1]);
	ASSERT_EQ(read(sync[0], &c, 1), 1);
	close(sync[0]);
	pp_close(e[0]);
	ASSERT_EQ(pp_fcntl(e[1], F_SETFL, O_NONBLOCK), 0);
	while (pp_write(e[1], b, sizeof(b)) > 0)
		;
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(pp_fcntl(e[1], F_SETFL, 0), 0);
	kill(pid, SIGKILL);
	ASSERT_EQ(waitpid(pid, NULL, 0), pid);

	if (how == 0) {
		fd = mkstemp(path);
		ASSERT_GE(fd, 0);
		unlink(path);
		ASSERT_EQ(write(fd, b, sizeof(b)), (ssize_t)sizeof(b));
		ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
		in = pp_fdopen(fd);
	} else if (how == 1) {
		ASSERT_EQ(pipe(kp), 0);
		ASSERT_EQ(write(kp[1], b, sizeof(b)), (ssize_t)sizeof(b));
		in = pp_fdopen(kp[0]);
	}
	if (how <= 1)
		ASSERT_TRUE(in != NULL);
	t0 = now_s();
	if (how <= 1)
		r = pp_splice(in, NULL, e[1], NULL, sizeof(b), 0);
	else if (how == 2)
		r = pp_vmsplice(e[1], &iov, 1, 0);
	else
		r = pp_write_lend(e[1], &iov, 1, sizeof(b));
	ASSERT_EQ(r, -1);
	ASSERT_EQ(errno, EPIPE);
	ASSERT_TRUE(now_s() - t0 < 1.0);
	if (in)
		pp_close(in);
	if (fd >= 0)
		close(fd);
	if (kp[0] >= 0) {
		close(kp[0]);
		close(kp[1]);
	}
	pp_close(e[1]);
	return 0;
}

static int test_reader_killed_splice_file(void)
{
	return blocked_writer_sees_epipe(0);
}

static int test_reader_killed_splice_kpipe(void)
{
	return blocked_writer_sees_epipe(1);
}

static int test_reader_killed_vmsplice(void)
{
	return blocked_writer_sees_epipe(2);
}

static int test_reader_killed_write_lend(void)
{
	return blocked_writer_sees_epipe(3);
}

/*
 * A child that exits without pp_close() is closed for at exit: its
 * reader, asleep by then, sees EOF.
 */
static int test_exit_without_close(void)
{
	struct pp_file *e[2];
	char c;
	double t0;
	pid_t pid;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		usleep(100 * 1000);	/* the parent is asleep in its read by now */
		exit(0);
	}
	pp_close(e[1]);
	t0 = now_s();
	ASSERT_EQ(pp_read(e[0], &c, 1), 0);
	/*
	 * A bound, not a timing: at exit the child's ends are closed for it
	 * and the sleeper woken; without that, the next timeout finds it.
	 * Both are well inside a second (measured: about 100 ms, the child's
	 * sleep), so this says only that nothing waits forever.
	 */
	ASSERT_TRUE(now_s() - t0 < 1.0);
	ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	pp_close(e[0]);
	return 0;
}

/* The arena's mapping in this process, from /proc/self/maps. */
static unsigned char *find_arena(size_t *len)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned char *base = NULL;

	if (!m)
		return NULL;
	while (fgets(line, sizeof(line), m)) {
		unsigned long lo, hi;

		if (strstr(line, "pagepipe-arena") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			base = (unsigned char *)lo;
			*len = hi - lo;
			break;
		}
	}
	fclose(m);
	return base;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * A peer that scribbles: random words of the control area, the slots and
 * the page bookkeeping (the first pages of the arena) take random values
 * between calls.  Every call returns bytes, 0, or -1 with EIO or EAGAIN;
 * none crashes or waits (the ends are non-blocking), and once EIO it
 * stays EIO.
 */
static int test_scribbles(void)
{
	int rounds_poisoned = 0;

	for (int round = 0; round < 60; round++) {
		struct pp_file *e[2];
		unsigned char b[3 * REC];
		unsigned char *base;
		size_t len = 0;
		bool poisoned = false;

		ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | O_NONBLOCK | PP_O_NOSIGPIPE), 0);
		base = find_arena(&len);
		ASSERT_TRUE(base != NULL);
		ASSERT_GE(len, (size_t)8 * 4096);
		for (int i = 0; i < 200; i++) {
			size_t n = 1 + xorshift() % sizeof(b);
			ssize_t r;

			t_fill(b, n, 0, 1);
			/*
			 * A peer may clear O_NONBLOCK (F_SETFL, or a scribble on
			 * the word that holds it): that is a wait, not a fault.
			 * Set it again so that this single process never waits.
			 */
			pp_fcntl(e[0], F_SETFL, O_NONBLOCK);
			pp_fcntl(e[1], F_SETFL, O_NONBLOCK);
			r = i & 1 ? pp_write(e[1], b, n) : pp_read(e[0], b, n);
			if (r < 0) {
				if (errno != EIO && errno != EAGAIN && errno != EPIPE)
					t_fail_at(__FILE__, __LINE__, "errno %d (%s)", errno,
						  strerror(errno));
				if (poisoned)
					ASSERT_EQ(errno, EIO);
				poisoned |= errno == EIO;
			} else {
				ASSERT_TRUE(!poisoned);
				ASSERT_LE((size_t)r, n);
			}
			if (!(xorshift() % 4)) {
				/* Bookkeeping: header, refs, links, ctrl, slots (20 KiB). */
				size_t off = (xorshift() % (5 * 4096 / 4)) * 4;
				uint32_t v = (uint32_t)xorshift();

				if (xorshift() & 1)
					v %= 600;	/* small values pass more checks */
				memcpy(base + off, &v, sizeof(v));
			}
		}
		rounds_poisoned += poisoned;
		pp_close(e[0]);
		pp_close(e[1]);
	}
	/* The scribbles must reach the checks, or this tests nothing. */
	ASSERT_GE(rounds_poisoned, 10);
	return 0;
}

/*
 * A peer empties the arena's free list (its head, the header's word at
 * 64: src/arena.c, struct arena_hdr) on a fresh pipe, which has no spare
 * page yet.  Every write then finds a free slot and no page.  A
 * non-blocking one must fail with EAGAIN (pages are most often a reader's
 * moment away) without waiting for them to come back: it waited a second
 * (a thousand sleeps of 1 ms), then said ENOMEM, before.  The bound
 * is the proof of no wait, not a measure of speed: a second is the
 * blocking write's wait, and the non-blocking one yields 64 times.
 */
static int nonblock_write_no_free_page(void)
{
	struct pp_file *e[2];
	unsigned char b[100] = { 0 };
	unsigned char *base;
	uint64_t *head, h;
	size_t len = 0;
	double t0;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | O_NONBLOCK | PP_O_NOSIGPIPE), 0);
	base = find_arena(&len);
	ASSERT_TRUE(base != NULL);
	head = (uint64_t *)(base + 64);
	h = __atomic_load_n(head, __ATOMIC_ACQUIRE);
	ASSERT_TRUE((uint32_t)h != UINT32_MAX);		/* a fresh pipe: all pages free */
	__atomic_store_n(head, ((h >> 32) + 1) << 32 | UINT32_MAX, __ATOMIC_RELEASE);
	t0 = now_s();
	ASSERT_ERRNO(pp_write(e[1], b, sizeof(b)), EAGAIN);
	t0 = now_s() - t0;
	if (t0 >= 0.9)
		t_fail_at(__FILE__, __LINE__, "the non-blocking write waited %.3f s for a page", t0);
	/* And again: nothing was queued, nothing is poisoned. */
	ASSERT_ERRNO(pp_write(e[1], b, sizeof(b)), EAGAIN);
	ASSERT_ERRNO(pp_read(e[0], b, sizeof(b)), EAGAIN);
	pp_close(e[0]);
	pp_close(e[1]);
	return 0;
}

/* Descriptors and mappings that name the arena, in this process. */
static int arena_traces(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t len;
	int n = 0;

	ASSERT_TRUE(d != NULL);
	while ((de = readdir(d))) {
		char path[300], target[256];
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		k = readlink(path, target, sizeof(target) - 1);
		if (k > 0) {
			target[k] = 0;
			if (strstr(target, "pagepipe-arena"))
				n++;
		}
	}
	closedir(d);
	return n + (find_arena(&len) != NULL);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ASSERT_TRUE(d != NULL);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* All ends closed, in every process: no descriptor, no mapping left. */
static int test_nothing_left(void)
{
	int fds = open_fds();
	struct pp_file *e[2];
	pid_t pid;
	char c = 'x';

	ASSERT_EQ(arena_traces(), 0);
	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
	ASSERT_EQ(arena_traces(), 2);	/* the memfd and its mapping */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		pp_close(e[0]);
		_exit(pp_write(e[1], &c, 1) == 1 ? 0 : 1);
	}
	ASSERT_EQ(pp_read(e[0], &c, 1), 1);
	ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	pp_close(e[0]);
	pp_close(e[1]);
	ASSERT_EQ(arena_traces(), 0);
	ASSERT_EQ(open_fds(), fds);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_writer_killed),
		T_SUBTEST(test_reader_killed),
		T_SUBTEST(test_reader_killed_splice_file),
		T_SUBTEST(test_reader_killed_splice_kpipe),
		T_SUBTEST(test_reader_killed_vmsplice),
		T_SUBTEST(test_reader_killed_write_lend),
		T_SUBTEST(test_exit_without_close),
		T_SUBTEST(test_scribbles),
		T_SUBTEST(nonblock_write_no_free_page),
		T_SUBTEST(test_nothing_left),
	};

	signal(SIGPIPE, SIG_IGN);
	alarm(60);	/* a hang fails, with SIGALRM */
	return T_RUN_SUBTESTS(tests);
}
