// SPDX-License-Identifier: MIT
/*
 * Description: the drained slot and the reader's view of a PP_O_SHARED
 * pipe (src/shared.c).  A read that empties the last slot leaves it in the
 * ring, drained, for the next write to reopen, and a read that leaves
 * bytes in a slot keeps its offset in ctrl instead of in the slot.  Both
 * must be invisible: each step beside a kernel pipe doing the same.
 *  - drained_is_empty: a drained slot takes no room and holds no bytes
 *    (a one-page pipe still takes a whole page after it; FIONREAD, poll);
 *  - full_size_drains_too: a pipe of pipe-max-size with a drained slot
 *    still takes a whole pipe's worth (the ring has a slot for it beyond
 *    SH_SLOTS: src/shared.c, SH_RING);
 *  - resize_keeps_drained: F_SETPIPE_SZ to pipe-max-size with a drained
 *    slot in the ring, then a full pipe's worth, and back down;
 *  - packet_after_drained: a packet written after a drained slot stays a
 *    packet (only a mergeable write reopens);
 *  - view_then_lend: a read in part, then pp_read_lend and FIONREAD, which
 *    look at the slot's offset: they see the read's progress;
 *  - test_reopen_fault: a write that faults (a NULL segment) while it
 *    reopens the drained slot is EFAULT and leaves the slot drained, as
 *    it was: the pipe goes on as the kernel's (named test_* for
 *    mk/valgrind.mk's bad-pointer suppression);
 *  - ask_racing_drain: a one-page pipe holds 4000 bytes; a thread reads
 *    them while a non-blocking write of 5000 comes in.  Linux's answers
 *    are EAGAIN (the write first: its 904-byte head does not fit after
 *    4000) or 4096 (the read first: a fresh page takes a page of it);
 *    never 904, which the shared ring gave when the read emptied the slot
 *    between the write's two looks at it (src/shared.c, slot_refit: ask);
 *  - stress_threads, stress_procs: 1- to 200-byte records, a writer and a
 *    reader that mixes reads of random sizes, lends, FIONREAD and resizes;
 *    every byte arrives once and in order.  Threads let TSan see the
 *    drain/reopen pairs; processes are what the design is for.
 */
#include "helpers.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB	(1024 * 1024)

static void pair_open_shared(struct t_pair *x, int size)
{
	t_pipe2(x->p, PP_O_SHARED | O_NONBLOCK);
	t_kpipe2(x->k, O_NONBLOCK);
	ASSERT_SAME(fcntl(x->k[1], F_SETPIPE_SZ, size), pp_fcntl(x->p[1], F_SETPIPE_SZ, size));
}

static int pp_readable(struct pp_file *f)
{
	struct pp_pollfd pfd = { f, POLLIN, 0 };

	return pp_poll(&pfd, 1, 0);
}

static int k_readable(int fd)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	return poll(&pfd, 1, 0);
}

static void write_same(struct t_pair *x, size_t len, unsigned long long pos)
{
	unsigned char *b = malloc(len);

	ASSERT_TRUE(b != NULL);
	t_fill(b, len, pos, 7);
	ASSERT_SAME(write(x->k[1], b, len), pp_write(x->p[1], b, len));
	free(b);
}

static int drained_is_empty(void)
{
	struct t_pair x;

	pair_open_shared(&x, 4096);
	write_same(&x, 100, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* the slot is drained now */
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_EQ(pp_readable(x.p[0]), k_readable(x.k[0]));
	ASSERT_SAME_READ(x.k[0], x.p[0], 10);	/* EAGAIN both */
	write_same(&x, 4096, 100);		/* a whole page: the drained slot took no room */
	write_same(&x, 1, 4196);		/* EAGAIN both: full */
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_SAME_READ(x.k[0], x.p[0], 4096);
	write_same(&x, 10, 4196);
	write_same(&x, 20, 4206);		/* merges into the reopened slot */
	ASSERT_SAME_READ(x.k[0], x.p[0], 5);
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	ASSERT_EQ(pp_readable(x.p[0]), k_readable(x.k[0]));
	t_pair_close(&x);
	return 0;
}

/*
 * Fill with a megabyte of packets, then read them all back beside the
 * kernel's.  Packets, because a mergeable write would reopen a drained
 * slot first: packets take 256 fresh slots beside it, so a pipe of
 * pipe-max-size with a drained slot needs the ring's slot beyond
 * SH_SLOTS (shared.c, SH_RING).
 */
static void full_pipe_same(struct t_pair *x)
{
	ASSERT_SAME(fcntl(x->k[1], F_SETFL, O_NONBLOCK | O_DIRECT),
		    pp_fcntl(x->p[1], F_SETFL, O_NONBLOCK | O_DIRECT));
	write_same(x, MiB, 1000);
	ASSERT_SAME_FIONREAD(x->k[0], x->p[0]);
	for (int i = 0; i < 256; i++)
		ASSERT_SAME_READ(x->k[0], x->p[0], 65536);
	ASSERT_SAME_READ(x->k[0], x->p[0], 1);	/* EAGAIN both */
	ASSERT_SAME(fcntl(x->k[1], F_SETFL, O_NONBLOCK), pp_fcntl(x->p[1], F_SETFL, O_NONBLOCK));
}

/* A pipe of pipe-max-size drains too (before SH_RING it retired the slot instead). */
static int full_size_drains_too(void)
{
	struct t_pair x;

	pair_open_shared(&x, MiB);
	write_same(&x, 100, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	full_pipe_same(&x);
	t_pair_close(&x);
	return 0;
}

/* A resize keeps the drained slot, which takes no room at any size. */
static int resize_keeps_drained(void)
{
	struct t_pair x;

	pair_open_shared(&x, 65536);
	write_same(&x, 100, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* drained */
	ASSERT_SAME(fcntl(x.k[1], F_SETPIPE_SZ, MiB), pp_fcntl(x.p[1], F_SETPIPE_SZ, MiB));
	full_pipe_same(&x);
	/* And back down, drained again, with a byte in it. */
	write_same(&x, 100, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);
	write_same(&x, 1, 0);
	ASSERT_SAME(fcntl(x.k[1], F_SETPIPE_SZ, 4096), pp_fcntl(x.p[1], F_SETPIPE_SZ, 4096));
	ASSERT_SAME_READ(x.k[0], x.p[0], 10);
	write_same(&x, 4096, 7);
	ASSERT_SAME_READ(x.k[0], x.p[0], 8192);
	t_pair_close(&x);
	return 0;
}

static int packet_after_drained(void)
{
	struct t_pair x;

	pair_open_shared(&x, 65536);
	write_same(&x, 100, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* drained, a mergeable slot */
	ASSERT_SAME(fcntl(x.k[1], F_SETFL, O_NONBLOCK | O_DIRECT),
		    pp_fcntl(x.p[1], F_SETFL, O_NONBLOCK | O_DIRECT));
	write_same(&x, 50, 100);
	write_same(&x, 60, 150);
	ASSERT_SAME_READ(x.k[0], x.p[0], 200);	/* one packet: 50 */
	ASSERT_SAME_READ(x.k[0], x.p[0], 200);	/* the next: 60 */
	ASSERT_SAME_READ(x.k[0], x.p[0], 200);	/* EAGAIN */
	t_pair_close(&x);
	return 0;
}

static int view_then_lend(void)
{
	struct t_pair x;
	unsigned char want[300];
	struct iovec iov[4];
	ssize_t n;

	pair_open_shared(&x, 65536);
	write_same(&x, 300, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* 200 left, in the view */
	n = pp_read_lend(x.p[0], iov, 4, 1000);
	ASSERT_EQ(n, 200);
	ASSERT_EQ(iov[0].iov_len, 200);
	t_fill(want, sizeof(want), 0, 7);
	ASSERT_MEM_EQ(iov[0].iov_base, want + 100, 200);
	ASSERT_EQ(pp_read_done(x.p[0], 50), 0);
	ASSERT_EQ(t_fionread(x.p[0]), 150);
	/* The same 50 from the kernel's, and on from there beside it. */
	ASSERT_EQ(read(x.k[0], want, 50), 50);
	ASSERT_SAME_READ(x.k[0], x.p[0], 20);	/* in the view again */
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_SAME_READ(x.k[0], x.p[0], 1000);
	t_pair_close(&x);
	return 0;
}

static int test_reopen_fault(void)
{
	const struct iovec bad = { NULL, 100 };
	struct t_pair x;

	pair_open_shared(&x, 4096);
	write_same(&x, 100, 0);
	ASSERT_SAME_READ(x.k[0], x.p[0], 100);	/* drained */
	ASSERT_SAME(writev(x.k[1], &bad, 1), pp_writev(x.p[1], &bad, 1));
	ASSERT_SAME_FIONREAD(x.k[0], x.p[0]);
	ASSERT_EQ(pp_readable(x.p[0]), k_readable(x.k[0]));
	write_same(&x, 4096, 100);		/* the whole page: the slot is drained again */
	write_same(&x, 1, 4196);		/* EAGAIN both */
	ASSERT_SAME_READ(x.k[0], x.p[0], 8192);
	t_pair_close(&x);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Stress: a byte stream of numbered records, checked byte by byte. */

static double seconds(void)
{
	const char *s = getenv("PP_STRESS_SECONDS");

	return s ? atof(s) : 1.0;
}

static unsigned int rnd(unsigned int *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* The writer: records of 1 to 200 bytes of the stream, blocking; returns bytes sent. */
static unsigned long long writer_run(struct pp_file *w, double secs)
{
	unsigned char buf[256];
	unsigned long long pos = 0;
	unsigned int st = 99;
	long long until = t_now_ms() + (long long)(secs * 1000);

	while (t_now_ms() < until) {
		size_t len = 1 + rnd(&st) % 200;

		t_fill(buf, len, pos, 3);
		if (t_write_full(w, buf, len) != (ssize_t)len)
			return pos;
		pos += len;
	}
	return pos;
}

static void *writer_thread(void *arg)
{
	struct pp_file *w = arg;
	unsigned long long *sent = malloc(sizeof(*sent));

	if (sent)
		*sent = writer_run(w, seconds());
	pp_close(w);
	return sent;
}

/* The reader, to EOF: bytes checked, or -1 on a wrong byte or an error. */
static long long reader_run(struct pp_file *r)
{
	static const int sizes[] = { 4096, 65536, 4096, MiB, 8192 };
	unsigned char buf[512];
	unsigned long long pos = 0;
	unsigned int st = 7, ops = 0;

	for (;;) {
		unsigned int op = rnd(&st) % 64;
		ssize_t n;

		ops++;
		if (op == 0) {
			/* Resizing can fail with EBUSY while full: as the kernel. */
			if (pp_fcntl(r, F_SETPIPE_SZ, sizes[rnd(&st) % 5]) < 0 && errno != EBUSY)
				return t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ: %s", strerror(errno)), -1;
			continue;
		}
		if (op == 1) {
			int avail;

			if (pp_ioctl(r, FIONREAD, &avail) < 0 || avail < 0)
				return t_fail_at(__FILE__, __LINE__, "FIONREAD"), -1;
			continue;
		}
		if (op < 6) {
			struct iovec iov[8];

			n = pp_read_lend(r, iov, 8, 1 + rnd(&st) % 300);
			if (n > 0) {
				size_t take = (size_t)n / 2, at = 0;

				for (int i = 0; at < take; i++) {
					size_t k = iov[i].iov_len < take - at ? iov[i].iov_len : take - at;

					if (t_check(iov[i].iov_base, k, pos + at, 3))
						return t_fail_at(__FILE__, __LINE__,
								 "lent bytes wrong at %llu", pos + at), -1;
					at += k;
				}
				pp_read_done(r, take);
				pos += take;
				continue;
			}
		} else {
			n = pp_read(r, buf, 1 + rnd(&st) % sizeof(buf));
			if (n > 0) {
				if (t_check(buf, (size_t)n, pos, 3))
					return t_fail_at(__FILE__, __LINE__, "read bytes wrong at %llu (op %u)",
							 pos, ops), -1;
				pos += (unsigned long long)n;
				continue;
			}
		}
		if (n == 0)
			return (long long)pos;
		if (errno != EAGAIN)
			return t_fail_at(__FILE__, __LINE__, "read: %s", strerror(errno)), -1;
	}
}

static struct pp_file *race_end[2];
static int race_go;		/* 1: read now; -1: stop */
/* Under valgrind, which runs one thread at a time: spins yield, and fewer rounds. */
static bool race_slow;

static void *race_reader(void *arg)
{
	static unsigned char b[4000];
	int delay = (int)(intptr_t)arg, g;

	for (;;) {
		while (!(g = __atomic_load_n(&race_go, __ATOMIC_ACQUIRE)))
			if (race_slow)
				sched_yield();
		if (g < 0)
			return NULL;
		for (volatile int k = 0; k < delay; k++)
			;
		if (pp_read(race_end[0], b, sizeof(b)) != (ssize_t)sizeof(b))
			return (void *)1;
		__atomic_store_n(&race_go, 0, __ATOMIC_RELEASE);
	}
}

static int ask_racing_drain(void)
{
	static unsigned char b[8192];
	long taken = 0, refused = 0;
	int rounds;

	race_slow = t_under_valgrind();
	rounds = race_slow ? 100 : 25000;
	ASSERT_EQ(pp_pipe2(race_end, PP_O_SHARED | O_NONBLOCK), 0);
	ASSERT_EQ(pp_fcntl(race_end[1], F_SETPIPE_SZ, 4096), 4096);
	/* Delays that move the read across the write's two looks. */
	for (int d = 0; d < 8; d++) {
		pthread_t t;
		void *rc;

		ASSERT_EQ(pthread_create(&t, NULL, race_reader, (void *)(intptr_t)(d * 40)), 0);
		for (int i = 0; i < rounds; i++) {
			ssize_t w;

			ASSERT_EQ(pp_write(race_end[1], b, 4000), 4000);
			__atomic_store_n(&race_go, 1, __ATOMIC_RELEASE);
			w = pp_write(race_end[1], b, 5000);
			if (w < 0)
				ASSERT_EQ(errno, EAGAIN);
			else
				ASSERT_EQ(w, 4096);
			taken += w > 0;
			refused += w < 0;
			while (__atomic_load_n(&race_go, __ATOMIC_ACQUIRE))
				if (race_slow)
					sched_yield();
			while (pp_read(race_end[0], b, sizeof(b)) > 0)
				;
		}
		__atomic_store_n(&race_go, -1, __ATOMIC_RELEASE);
		ASSERT_EQ(pthread_join(t, &rc), 0);
		ASSERT_TRUE(rc == NULL);
		race_go = 0;
	}
	printf("  4096 taken %ld times, EAGAIN %ld\n", taken, refused);
	pp_close(race_end[0]);
	pp_close(race_end[1]);
	return 0;
}

static int stress_threads(void)
{
	struct pp_file *p[2];
	pthread_t th;
	unsigned long long *sent;
	long long got;

	t_pipe2(p, PP_O_SHARED);
	ASSERT_EQ(pthread_create(&th, NULL, writer_thread, p[1]), 0);
	got = reader_run(p[0]);
	t_join(th, (void **)&sent, 60);
	ASSERT_TRUE(sent != NULL);
	ASSERT_EQ(got, (long long)*sent);
	ASSERT_TRUE(*sent > 0);
	free(sent);
	pp_close(p[0]);
	return 0;
}

static int stress_procs(void)
{
	struct pp_file *p[2];
	int tell[2], status;
	unsigned long long sent = 0;
	long long got;
	pid_t pid;

	t_pipe2(p, PP_O_SHARED);
	ASSERT_EQ(pipe(tell), 0);
	pid = fork();
	ASSERT_NE(pid, -1);
	if (pid == 0) {
		pp_close(p[0]);
		close(tell[0]);
		sent = writer_run(p[1], seconds());
		pp_close(p[1]);
		_exit(write(tell[1], &sent, sizeof(sent)) == sizeof(sent) ? 0 : 1);
	}
	pp_close(p[1]);
	close(tell[1]);
	got = reader_run(p[0]);
	ASSERT_EQ(read(tell[0], &sent, sizeof(sent)), (ssize_t)sizeof(sent));
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_EQ(status, 0);
	ASSERT_EQ(got, (long long)sent);
	ASSERT_TRUE(sent > 0);
	close(tell[0]);
	pp_close(p[0]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(drained_is_empty),
		T_SUBTEST(full_size_drains_too),
		T_SUBTEST(resize_keeps_drained),
		T_SUBTEST(packet_after_drained),
		T_SUBTEST(view_then_lend),
		T_SUBTEST(test_reopen_fault),
		T_SUBTEST(ask_racing_drain),
		T_SUBTEST(stress_threads),
		T_SUBTEST(stress_procs),
	};

	return T_RUN_SUBTESTS(tests);
}
