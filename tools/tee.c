// SPDX-License-Identifier: MIT
/*
 * tee.c - pagepipe tee [FILE]...: standard input to each FILE and to
 * standard output.
 *
 * Each round fills a staging pagepipe from standard input, then for every
 * output but the last tees the stage into a second pagepipe and drains
 * that to the output, and drains the stage itself to the last one: the
 * bytes are never copied where the library can move references.  Filling
 * and draining are the transfer engine's, with its fallbacks; tee(2)
 * between two pagepipes needs none.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_tee[] =
	"Usage: pagepipe tee [OPTION]... [FILE]...\n"
	"Copy standard input to each FILE and to standard output, by tee and\n"
	"splice between pagepipes where the descriptors allow.\n"
	"\n"
	"  -a, --append       append to the FILEs, do not truncate them\n"
	"  -i, --ignore-interrupts  ignore interrupt signals\n"
	"  -p                 operate in a more appropriate MODE with pipes\n"
	"      --output-error[=MODE]  set behavior on write error (see MODE below)\n"
	"      --progress     show bytes and rate on standard error\n"
	"      --no-progress  do not (the default)\n"
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n"
	"\n"
	"MODE determines behavior with write errors on the outputs:\n"
	"  warn           diagnose errors writing to any output\n"
	"  warn-nopipe    diagnose errors writing to any output not a pipe\n"
	"  exit           exit on error writing to any output\n"
	"  exit-nopipe    exit on error writing to any output not a pipe\n"
	"The default MODE for -p is warn-nopipe; --output-error without MODE is\n"
	"warn-nopipe too.  With neither, a reader that goes away ends the command\n"
	"by SIGPIPE, or drops that output where SIGPIPE is ignored; other errors\n"
	"are reported and the output dropped.\n";

struct tee_out {
	int fd;
	const char *name;
	struct xfer x;			/* from a pagepipe to this output */
	bool dead;
};

struct tee_state {
	struct tee_out *outs;
	int nouts;
	enum output_error mode;
	int status;
	struct pp_file *stage[2], *dup[2];
	struct xfer fill;		/* standard input into the stage */
	char *buf;
};

/*
 * An output failed, and is dropped.  As GNU tee: by default a reader gone
 * away is SIGPIPE where that is at its default and silence where it is
 * ignored; the -nopipe modes are silent about EPIPE too; any other error
 * is reported, and the exit modes stop at once.
 */
static void tee_fail(struct tee_state *t, struct tee_out *out, int err)
{
	bool nopipe = t->mode == OUTPUT_ERROR_SIGPIPE || t->mode == OUTPUT_ERROR_WARN_NOPIPE ||
		      t->mode == OUTPUT_ERROR_EXIT_NOPIPE;

	out->dead = true;
	if (err == EPIPE && t->mode == OUTPUT_ERROR_SIGPIPE && sigpipe_default())
		exit_epipe();
	if (err == EPIPE && nopipe)
		return;
	warn_err(err, out->name);
	t->status = EXIT_FAIL;
	if (t->mode == OUTPUT_ERROR_EXIT || t->mode == OUTPUT_ERROR_EXIT_NOPIPE)
		exit(EXIT_FAIL);
}

static int open_outputs(struct tee_state *t, char **names, int n, bool append)
{
	int fl = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);

	t->nouts = n + 1;
	t->outs = calloc((size_t)t->nouts, sizeof(*t->outs));
	if (!t->outs)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct tee_out *out = &t->outs[i];

		out->name = names[i];
		out->fd = strcmp(names[i], "-") ? open(names[i], fl, 0666) : STDOUT_FILENO;
		if (out->fd < 0) {
			warn_err(errno, names[i]);
			t->status = EXIT_FAIL;
			out->dead = true;
		}
	}
	/* Standard output last: it gets the stage itself, not a tee of it. */
	t->outs[n].fd = STDOUT_FILENO;
	t->outs[n].name = "standard output";
	for (int i = 0; i < t->nouts; i++) {
		struct tee_out *out = &t->outs[i];

		if (!out->dead)
			xfer_init_ends(&out->x, -1, NULL, out->fd, NULL);
	}
	return 0;
}

static int last_live(const struct tee_state *t)
{
	int last = -1;

	for (int i = 0; i < t->nouts; i++)
		if (!t->outs[i].dead)
			last = i;
	return last;
}

/*
 * tee(2) copied only part of the stage (it copies from the front, so it
 * cannot be asked again for the rest): take the stage into memory and
 * write it to output i, which already has the first `have` bytes, and to
 * every later one.
 */
static void tee_round_by_copy(struct tee_state *t, int i, size_t have, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pp_read(t->stage[0], t->buf + got, n - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	for (int j = i; j < t->nouts; j++) {
		struct tee_out *out = &t->outs[j];
		size_t skip = j == i ? have : 0;
		int err;

		if (out->dead || got <= skip)
			continue;
		err = write_all(out->fd, t->buf + skip, got - skip);
		if (err)
			tee_fail(t, out, -err);
	}
}

/* Give the n bytes in the stage to every live output. */
static void tee_round(struct tee_state *t, size_t n)
{
	int last = last_live(t);

	for (int i = 0; i <= last; i++) {
		struct tee_out *out = &t->outs[i];
		ssize_t c;
		int err;

		if (out->dead)
			continue;
		if (i == last) {
			err = xfer_drain(&out->x, t->stage[0], n);
			if (err)
				tee_fail(t, out, -err);
			return;
		}
		c = pp_tee(t->stage[0], t->dup[1], n, 0);
		err = c > 0 ? xfer_drain(&out->x, t->dup[0], (size_t)c) : 0;
		if (err)
			tee_fail(t, out, -err);
		if ((size_t)(c > 0 ? c : 0) < n) {
			tee_round_by_copy(t, i, out->dead || c < 0 ? 0 : (size_t)c, n);
			return;
		}
	}
}

static void tee_close(struct tee_state *t)
{
	for (int i = 0; i < t->nouts; i++) {
		struct tee_out *out = &t->outs[i];

		xfer_destroy(&out->x);
		if (out->fd > STDERR_FILENO && close(out->fd) < 0 && !out->dead) {
			warn_err(errno, out->name);
			t->status = EXIT_FAIL;
		}
	}
	xfer_destroy(&t->fill);
	for (int i = 0; i < 2; i++) {
		if (t->stage[i])
			pp_close(t->stage[i]);
		if (t->dup[i])
			pp_close(t->dup[i]);
	}
	free(t->outs);
	free(t->buf);
}

int cmd_tee(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "append", no_argument, NULL, 'a' },
		{ "ignore-interrupts", no_argument, NULL, 'i' },
		{ "output-error", optional_argument, NULL, OPT_OUTPUT_ERROR },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_OFF };
	struct tee_state t = { 0 };
	struct progress pg;
	int first, err;

	first = parse_opts(argc, argv, "aip", longopts, usage_tee, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	t.mode = (enum output_error)o.output_error;
	if (o.ignore_interrupts)
		signal(SIGINT, SIG_IGN);
	t.buf = malloc(STAGE_SIZE);
	err = t.buf ? open_outputs(&t, argv + first, argc - first, o.append) : -ENOMEM;
	if (!err)
		err = stage_pipe(t.stage, STAGE_SIZE, 0);
	if (!err)
		err = stage_pipe(t.dup, STAGE_SIZE, 0);
	if (err) {
		warn_err(-err, "tee");
		tee_close(&t);
		return EXIT_FAIL;
	}
	xfer_init_ends(&t.fill, STDIN_FILENO, NULL, -1, t.stage[1]);

	progress_init(&pg, o.progress);
	while (last_live(&t) >= 0) {
		ssize_t n = xfer_step(&t.fill, STAGE_SIZE);

		if (n <= 0) {
			if (n < 0) {
				warn_err((int)-n, "standard input");
				t.status = EXIT_FAIL;
			}
			break;
		}
		tee_round(&t, (size_t)n);
		/* Outputs that died must not leave the stage half drained. */
		pipe_discard(t.stage[0]);
		progress_add(&pg, (uint64_t)n);
		progress_tick(&pg, false);
	}
	progress_tick(&pg, true);
	tee_close(&t);
	return t.status;
}
