// SPDX-License-Identifier: MIT
/*
 * Description: the ring of a PP_O_SHARED pipe under its own races, with
 * threads so that TSan sees every access (src/shared.c: a writer merging
 * into the last slot while the reader seals and retires it, head and tail
 * published by two side locks, the spare page passed back and forth).
 * Two writers send records of 1 to PIPE_BUF bytes (small ones mostly, so
 * most writes merge), one reader reads them with reads of random sizes:
 * every record arrives whole, once, in order per writer; then the same
 * across two processes, and a pipe resized while the traffic runs.
 */
#include "helpers.h"

#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WRITERS		2
#define HDR		12	/* writer, seq, length: 3 x uint32_t */

static double seconds(void)
{
	const char *s = getenv("PP_STRESS_SECONDS");

	return s ? atof(s) : 1.0;
}

struct writer {
	struct pp_file *w;
	uint32_t id;
	uint32_t sent;		/* records */
	double until;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t rec_len(uint32_t id, uint32_t seq)
{
	uint32_t x = (seq + 1) * 2654435761u ^ id * 40503u;

	/* Mostly small (merges), now and then up to PIPE_BUF (new slots). */
	return HDR + (x % 8 ? x % 100 : x % (4096 - HDR + 1));
}

static void *writer_main(void *arg)
{
	struct writer *wr = arg;
	unsigned char buf[4096];

	for (uint32_t seq = 0; now_s() < wr->until; seq++) {
		uint32_t len = rec_len(wr->id, seq), hdr[3] = { wr->id, seq, len };

		memcpy(buf, hdr, HDR);
		t_fill(buf + HDR, len - HDR, (unsigned long long)seq << 12, wr->id);
		if (pp_write(wr->w, buf, len) != (ssize_t)len)
			return (void *)1;
		wr->sent = seq + 1;
	}
	return NULL;
}

/* Reassemble the stream; every record whole and in order per writer. */
static int read_all(struct pp_file *r, uint32_t nwriters, uint32_t *got)
{
	static unsigned char stream[1 << 16];
	size_t have = 0;
	uint32_t x = 12345;

	for (;;) {
		size_t want = 1 + (x = x * 1103515245 + 12345) % 9000;
		ssize_t n;

		if (want > sizeof(stream) - have)
			want = sizeof(stream) - have;
		n = pp_read(r, stream + have, want);
		if (n < 0)
			return -1;
		if (n == 0)
			return have ? -2 : 0;	/* EOF inside a record */
		have += (size_t)n;
		for (;;) {
			uint32_t hdr[3];

			if (have < HDR)
				break;
			memcpy(hdr, stream, HDR);
			if (hdr[0] >= nwriters || hdr[1] != got[hdr[0]] ||
			    hdr[2] != rec_len(hdr[0], hdr[1]))
				return -3;	/* torn, lost, duplicated or foreign */
			if (have < hdr[2])
				break;
			if (t_check(stream + HDR, hdr[2] - HDR, (unsigned long long)hdr[1] << 12, hdr[0]))
				return -4;
			got[hdr[0]]++;
			memmove(stream, stream + hdr[2], have - hdr[2]);
			have -= hdr[2];
		}
	}
}

struct reader {
	struct pp_file *r;
	uint32_t got[WRITERS];
	int rc;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	rd->rc = read_all(rd->r, WRITERS, rd->got);
	if (rd->rc)
		fprintf(stderr, "reader: %d after %u and %u records\n", rd->rc, rd->got[0],
			rd->got[1]);
	/* Done or failed: the writers see EPIPE rather than wait for us. */
	pp_close(rd->r);
	return NULL;
}

/* Writers and the reader are threads of this process. */
static int test_threads(void)
{
	struct pp_file *e[2];
	struct writer wr[WRITERS];
	struct reader rd = { .rc = 0 };
	pthread_t t[WRITERS], rt;
	void *rv;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | PP_O_NOSIGPIPE), 0);
	rd.r = e[0];
	ASSERT_EQ(pthread_create(&rt, NULL, reader_main, &rd), 0);
	for (uint32_t i = 0; i < WRITERS; i++) {
		wr[i] = (struct writer){ .w = e[1], .id = i, .until = now_s() + seconds() };
		ASSERT_EQ(pthread_create(&t[i], NULL, writer_main, &wr[i]), 0);
	}
	/* Resize under traffic: capacity moves, nothing is lost. */
	for (int i = 0; i < 20; i++) {
		int r;

		usleep(10000);
		r = pp_fcntl(e[1], F_SETPIPE_SZ, i & 1 ? 1 << 20 : 1 << 16);
		ASSERT_TRUE(r > 0 || errno == EBUSY);
	}
	for (uint32_t i = 0; i < WRITERS; i++)
		t_join(t[i], &rv, 60);
	pp_close(e[1]);
	t_join(rt, &rv, 60);
	ASSERT_EQ(rd.rc, 0);
	for (uint32_t i = 0; i < WRITERS; i++)
		ASSERT_EQ(rd.got[i], wr[i].sent);
	return 0;
}

/* The same with the writers in a child process. */
static int test_processes(void)
{
	struct pp_file *e[2];
	struct reader rd = { .rc = 0 };
	int status;
	pid_t pid;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | PP_O_NOSIGPIPE), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		struct writer wr[WRITERS];
		pthread_t t[WRITERS];
		void *rv;

		pp_close(e[0]);
		for (uint32_t i = 0; i < WRITERS; i++) {
			wr[i] = (struct writer){ .w = e[1], .id = i, .until = now_s() + seconds() };
			if (pthread_create(&t[i], NULL, writer_main, &wr[i]))
				_exit(1);
		}
		for (uint32_t i = 0; i < WRITERS; i++)
			if (pthread_join(t[i], &rv) || rv)
				_exit(2);
		pp_close(e[1]);
		_exit(0);
	}
	pp_close(e[1]);
	rd.r = e[0];
	reader_main(&rd);
	ASSERT_EQ(rd.rc, 0);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	ASSERT_TRUE(rd.got[0] > 0 && rd.got[1] > 0);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_threads),
		T_SUBTEST(test_processes),
	};

	return T_RUN_SUBTESTS(tests);
}
