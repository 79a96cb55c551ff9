// SPDX-License-Identifier: MIT
/*
 * shared-stream - two processes, one stream: a forked child writes N MiB
 * (default 1024) in 64 KiB writes, the parent reads it with 64 KiB reads,
 * once through a kernel pipe (pipe2) and once through a pagepipe shared
 * between the two processes (pp_pipe2 with PP_O_SHARED); prints both
 * rates and their ratio.  `make demo` runs it.
 *
 *	./shared-stream [MiB]
 *
 * The same program text drives both: the kernel pipe through read(2) and
 * write(2), the pagepipe through pp_read() and pp_write(), whose ring and
 * pages live in a memfd both processes map.  Every byte is checked.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pagepipe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK	65536

struct chan {
	int kfd[2];
	struct pp_file *pf[2];
};

static ssize_t chan_rw(struct chan *c, int end, void *buf, size_t n)
{
	if (c->pf[0])
		return end ? pp_write(c->pf[1], buf, n) : pp_read(c->pf[0], buf, n);
	return end ? write(c->kfd[1], buf, n) : read(c->kfd[0], buf, n);
}

static void chan_close(struct chan *c, int end)
{
	if (c->pf[0])
		pp_close(c->pf[end]);
	else
		close(c->kfd[end]);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* MB/s (10^6 B/s) of one run, or -1 on a failure (said on stderr). */
static double run(struct chan *c, unsigned long long total)
{
	static unsigned char buf[CHUNK];
	unsigned long long got = 0;
	double t0 = now();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid) {
		unsigned long long sent = 0;

		chan_close(c, 0);
		while (sent < total) {
			ssize_t w;

			for (size_t i = 0; i < CHUNK; i += 8)
				memcpy(buf + i, &sent, 8);	/* a position stamp every 8 bytes */
			w = chan_rw(c, 1, buf, CHUNK);
			if (w != CHUNK)
				_exit(1);
			sent += CHUNK;
		}
		_exit(0);
	}
	chan_close(c, 1);
	for (;;) {
		ssize_t n = chan_rw(c, 0, buf, CHUNK);
		unsigned long long stamp;

		if (n <= 0)
			break;
		/* Reads take whole 64 KiB writes here: one stamp per read to check. */
		memcpy(&stamp, buf, 8);
		if (stamp != got - got % CHUNK) {
			fprintf(stderr, "shared-stream: wrong bytes at %llu\n", got);
			return -1;
		}
		got += (unsigned long long)n;
	}
	chan_close(c, 0);
	waitpid(pid, &status, 0);
	if (got != total || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "shared-stream: %llu of %llu bytes\n", got, total);
		return -1;
	}
	return (double)total / 1e6 / (now() - t0);
}

int main(int argc, char **argv)
{
	unsigned long long total = (argc > 1 ? strtoull(argv[1], NULL, 10) : 1024) << 20;
	double k = 0, p = 0;

	for (int i = 0; i < 3; i++) {	/* best of three each, alternating */
		struct chan kc = { .kfd = { -1, -1 } }, pc = { .kfd = { -1, -1 } };
		double r;

		if (pipe2(kc.kfd, 0) || pp_pipe2(pc.pf, PP_O_SHARED)) {
			perror("shared-stream");
			return 1;
		}
		r = run(&kc, total);
		if (r < 0)
			return 1;
		k = r > k ? r : k;
		r = run(&pc, total);
		if (r < 0)
			return 1;
		p = r > p ? r : p;
	}
	printf("%-36s %10.0f MB/s\n", "kernel pipe (pipe2)", k);
	printf("%-36s %10.0f MB/s\n", "shared pagepipe (PP_O_SHARED)", p);
	printf("%-36s %10.2fx\n", "pagepipe / kernel", p / k);
	return 0;
}
