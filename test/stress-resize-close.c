// SPDX-License-Identifier: MIT
/*
 * Description: resize and close during traffic (issue 11, section 5).  A
 * writer (writes of 1 byte to 40 KiB) and a reader (reads of 1 byte to 40
 * KiB) stream position-numbered bytes while a third thread resizes the
 * pipe with F_SETPIPE_SZ between one page and 1 MiB (EBUSY when the
 * occupied slots do not fit is the only error allowed) and reads
 * F_GETPIPE_SZ and FIONREAD.  Rounds end either way: the writer closes its
 * end after its last write, with the reader mid-read (the reader must get
 * every byte, then EOF), or the reader closes its end mid-stream (the
 * writer must get EPIPE, without SIGPIPE: PP_O_NOSIGPIPE, and every byte
 * the reader got must be right).  The resizer works through the end that
 * is not closed during the round (ends cannot be duplicated).  Every byte is checked.  Runs for
 * PP_STRESS_SECONDS (default 2).
 */
#include "helpers.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/ioctl.h>

#define SEED	0x5a
#define MAXIO	(40 * 1024)

struct round {
	struct pp_file *e[2];
	bool reader_closes;
	long long deadline;
	unsigned long long written, read;
	atomic_int done;
	long resizes, ebusy;
};

static void *writer_main(void *arg)
{
	struct round *rd = arg;
	unsigned char *buf = malloc(MAXIO);
	unsigned int seed = (unsigned int)t_now_ms();

	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % (rand_r(&seed) & 1 ? MAXIO : 512);
		ssize_t r;

		if (!rd->reader_closes && t_now_ms() >= rd->deadline)
			break;
		t_fill(buf, n, rd->written, SEED);
		r = pp_write(rd->e[1], buf, n);
		if (r < 0 && errno == EPIPE && rd->reader_closes)
			break;
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "pp_write = %zd: %s", r, strerror(errno));
		rd->written += (size_t)r;
	}
	if (!rd->reader_closes)
		pp_close(rd->e[1]);	/* close during traffic: the reader is still reading */
	free(buf);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct round *rd = arg;
	unsigned char *buf = malloc(MAXIO);
	unsigned int seed = (unsigned int)t_now_ms() ^ 7;

	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % (rand_r(&seed) & 1 ? MAXIO : 512);
		ssize_t r;

		if (rd->reader_closes && t_now_ms() >= rd->deadline)
			break;
		r = pp_read(rd->e[0], buf, n);
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		if (t_check(buf, (size_t)r, rd->read, SEED))
			t_fail_at(__FILE__, __LINE__, "wrong byte in a read of %zd at position %llu",
				  r, rd->read);
		rd->read += (size_t)r;
	}
	if (rd->reader_closes)
		pp_close(rd->e[0]);	/* close during traffic: the writer is still writing */
	free(buf);
	return NULL;
}

static void *resizer_main(void *arg)
{
	struct round *rd = arg;
	unsigned int seed = 3;

	/* The end that stays open until the round ends (main closes it). */
	struct pp_file *f = rd->reader_closes ? rd->e[1] : rd->e[0];

	while (!atomic_load(&rd->done)) {
		int size = 4096 << (rand_r(&seed) % 9);	/* 4 KiB .. 1 MiB */
		int r = pp_fcntl(f, F_SETPIPE_SZ, size);
		int avail = -1;

		if (r < 0 && errno != EBUSY)
			t_fail_at(__FILE__, __LINE__, "F_SETPIPE_SZ %d: %s", size, strerror(errno));
		if (r < 0)
			rd->ebusy++;
		else
			ASSERT_GE(r, size);
		rd->resizes++;
		ASSERT_GE(pp_fcntl(f, F_GETPIPE_SZ), 4096);
		if (f == rd->e[0]) {
			ASSERT_EQ(pp_ioctl(f, FIONREAD, &avail), 0);
			ASSERT_GE(avail, 0);
		}
	}
	return NULL;
}

static void one_round(int ms, bool reader_closes)
{
	struct round *rd = calloc(1, sizeof(*rd));
	pthread_t tw, tr, tz;

	t_pipe2(rd->e, PP_O_NOSIGPIPE);
	rd->reader_closes = reader_closes;
	rd->deadline = t_now_ms() + ms;
	ASSERT_EQ(pthread_create(&tz, NULL, resizer_main, rd), 0);
	ASSERT_EQ(pthread_create(&tr, NULL, reader_main, rd), 0);
	ASSERT_EQ(pthread_create(&tw, NULL, writer_main, rd), 0);
	t_join(tw, NULL, ms / 1000 + 30);
	t_join(tr, NULL, 30);
	atomic_store(&rd->done, 1);
	t_join(tz, NULL, 30);
	pp_close(reader_closes ? rd->e[1] : rd->e[0]);
	if (!reader_closes)
		ASSERT_EQ(rd->read, rd->written);
	else
		ASSERT_LE(rd->read, rd->written);
	printf("%s closes first: %llu bytes written, %llu read, %ld resizes (%ld EBUSY)\n",
	       reader_closes ? "reader" : "writer", rd->written, rd->read, rd->resizes, rd->ebusy);
	free(rd);
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	int rounds = 8;

	t_watchdog(ms / 1000 + 60, "resize and close during traffic");
	for (int i = 0; i < rounds; i++)
		one_round(ms / rounds, i & 1);
	return T_EXIT_PASS;
}
