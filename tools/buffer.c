// SPDX-License-Identifier: MIT
/*
 * buffer.c - pagepipe buffer: standard input to standard output through
 * one big in-memory pagepipe.
 *
 * Two threads around the pagepipe: the filler moves standard input in and
 * blocks only when the pagepipe is full; the drainer moves it out and
 * blocks only when it is empty.  Each side keeps its own pace.  Both are
 * transfers of the engine, one ending and one starting at a pagepipe end.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_buffer[] =
	"Usage: pagepipe buffer [OPTION]...\n"
	"Copy standard input to standard output through an in-memory pagepipe\n"
	"of SIZE bytes, so that a bursty producer and a slow consumer each run\n"
	"at their own pace.\n"
	"\n"
	"  -s, --size SIZE    buffer size, with K, M, G or T, or N% of memory\n"
	"                     (default 16M, at most 1T or 90%)\n"
	"      --progress     show bytes, in and out rates and buffer fill on standard error\n"
	"      --no-progress  do not (the default when stderr is not a terminal)\n"
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n";

struct buffer_state {
	struct pp_file *ends[2];
	struct progress pg;
	int in_err, out_err;		/* positive errno, or 0 */
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	bool done;
	char extra[64];
	uint64_t size;
};

static void *buffer_filler(void *arg)
{
	struct buffer_state *b = arg;
	struct xfer x;

	xfer_init_ends(&x, STDIN_FILENO, NULL, -1, b->ends[1]);
	for (;;) {
		ssize_t n = xfer_step(&x, STAGE_SIZE);

		if (n > 0) {
			progress_add_in(&b->pg, (uint64_t)n);
			continue;
		}
		/* EPIPE into the pagepipe: the drainer stopped and says why. */
		if (n < 0 && !(x.write_err && n == -EPIPE))
			b->in_err = (int)-n;
		break;
	}
	xfer_destroy(&x);
	/* The drainer sees end of file once the queued pages are out. */
	pp_close(b->ends[1]);
	b->ends[1] = NULL;
	return NULL;
}

static void *buffer_drainer(void *arg)
{
	struct buffer_state *b = arg;
	struct xfer x;

	xfer_init_ends(&x, -1, b->ends[0], STDOUT_FILENO, NULL);
	for (;;) {
		ssize_t n = xfer_step(&x, STAGE_SIZE);

		if (n <= 0) {
			b->out_err = (int)-n;
			break;
		}
		progress_add(&b->pg, (uint64_t)n);
	}
	xfer_destroy(&x);
	pthread_mutex_lock(&b->lock);
	/* A filler blocked on a full pagepipe now gets EPIPE and stops. */
	pp_close(b->ends[0]);
	b->ends[0] = NULL;
	b->done = true;
	pthread_cond_signal(&b->done_cond);
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static const char *buffer_fill(void *arg)
{
	struct buffer_state *b = arg;
	int avail = 0, r;

	/* The lock keeps the drainer from closing the end under the ioctl. */
	pthread_mutex_lock(&b->lock);
	r = b->ends[0] ? pp_ioctl(b->ends[0], FIONREAD, &avail) : -1;
	pthread_mutex_unlock(&b->lock);
	if (r < 0)
		return "";
	snprintf(b->extra, sizeof(b->extra), "buffer %3.0f%%",
		 100.0 * (double)avail / (double)b->size);
	return b->extra;
}

/* Report progress until the drainer is done. */
static void buffer_wait(struct buffer_state *b)
{
	pthread_mutex_lock(&b->lock);
	while (!b->done) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&b->done_cond, &b->lock, &ts);
		if (!b->done) {
			pthread_mutex_unlock(&b->lock);
			progress_tick(&b->pg, false);
			pthread_mutex_lock(&b->lock);
		}
	}
	pthread_mutex_unlock(&b->lock);
}

int cmd_buffer(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_AUTO, .size = 16u << 20 };
	struct buffer_state *b;
	pthread_t filler, drainer;
	int first, err, status = EXIT_OK;

	first = parse_opts(argc, argv, "s:", longopts, usage_buffer, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (check_operands(argc, argv, first, 0))
		return EXIT_USAGE;
	if (o.progress == PROGRESS_AUTO && isatty(STDOUT_FILENO))
		o.progress = PROGRESS_OFF;
	b = calloc(1, sizeof(*b));
	if (!b) {
		warn_err(ENOMEM, "buffer");
		return EXIT_FAIL;
	}
	b->size = o.size;
	err = stage_pipe(b->ends, (size_t)o.size, 0);
	if (err) {
		char what[64];

		snprintf(what, sizeof(what), "cannot make a %llu-byte pagepipe",
			 (unsigned long long)o.size);
		warn_err(-err, what);
		free(b);
		return EXIT_FAIL;
	}
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->done_cond, NULL);
	progress_init(&b->pg, o.progress);
	b->pg.in_out = true;
	b->pg.extra = buffer_fill;
	b->pg.extra_arg = b;
	if (pthread_create(&drainer, NULL, buffer_drainer, b) ||
	    pthread_create(&filler, NULL, buffer_filler, b)) {
		warn_err(EAGAIN, "cannot start threads");
		return EXIT_FAIL;
	}
	buffer_wait(b);
	pthread_join(drainer, NULL);
	pthread_join(filler, NULL);
	b->pg.extra = NULL;
	progress_tick(&b->pg, true);
	if (b->in_err) {
		warn_err(b->in_err, "standard input");
		status = EXIT_FAIL;
	}
	if (b->out_err == EPIPE)
		exit_epipe();
	if (b->out_err) {
		warn_err(b->out_err, "write error");
		status = EXIT_FAIL;
	}
	free(b);
	return status;
}
