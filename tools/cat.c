// SPDX-License-Identifier: MIT
/*
 * cat.c - pagepipe cat [FILE]...: concatenate FILEs to standard output,
 * each through the transfer engine, after an optional --prefix written
 * with a plain write (the seed's demonstration).
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_cat[] =
	"Usage: pagepipe cat [OPTION]... [FILE]...\n"
	"Concatenate FILEs to standard output (standard input for none or '-').\n"
	"Regular files reach a pipe by splice, a socket by sendfile and a file by\n"
	"copy_file_range, through a pagepipe; a terminal gets plain writes.\n"
	"\n"
	"      --prefix TEXT  write TEXT before the first byte\n"
	"  -u                 (ignored; output is never buffered)\n"
	"      --bytes N      copy at most N bytes of each FILE (K, M, G, T suffixes)\n"
	"      --progress     show bytes, rate and ETA on standard error\n"
	"      --no-progress  do not (the default)\n"
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n"
	"\n"
	"Example: pagepipe cat --prefix 'hello: ' --bytes 1000 FILE | less\n";

/* Whether writing fd_out would also grow the file being read (cat's check). */
static bool same_file(int in_fd, int out_fd)
{
	struct stat is, os;

	if (fstat(in_fd, &is) < 0 || fstat(out_fd, &os) < 0)
		return false;
	return S_ISREG(is.st_mode) && S_ISREG(os.st_mode) && is.st_dev == os.st_dev &&
	       is.st_ino == os.st_ino;
}

static int cat_one(int in_fd, const char *name, const struct opts *o, struct progress *pg)
{
	uint64_t left = o->have_bytes ? o->bytes : UINT64_MAX;
	struct xfer x;
	int status = EXIT_OK;

	if (same_file(in_fd, STDOUT_FILENO)) {
		struct stat st;
		off_t out_pos = lseek(STDOUT_FILENO, 0, SEEK_CUR);
		off_t in_pos = lseek(in_fd, 0, SEEK_CUR);

		/* As cat: only a write that would chase its own reading is refused. */
		if ((fcntl(STDOUT_FILENO, F_GETFL) & O_APPEND) ||
		    (fstat(in_fd, &st) == 0 && in_pos < st.st_size && out_pos >= in_pos)) {
			warnx("%s: input file is output file", name);
			return EXIT_FAIL;
		}
	}
	xfer_init(&x, in_fd, STDOUT_FILENO, 0);
	while (left) {
		ssize_t n;

		/* MSG_MORE only while more is certain to follow. */
		x.flags = left > STAGE_SIZE ? SPLICE_F_MORE : 0;
		n = xfer_step(&x, left > SIZE_MAX ? SIZE_MAX : (size_t)left);
		if (n == 0)
			break;
		if (n < 0) {
			report_xfer(&x, (int)-n, name, NULL);
			status = EXIT_FAIL;
			break;
		}
		left -= (uint64_t)n;
		progress_add(pg, (uint64_t)n);
		progress_tick(pg, false);
	}
	xfer_destroy(&x);
	return status;
}

/*
 * The total for the progress line, from all the FILEs before the first is
 * read, as pv does: the percentage and ETA are of the whole.  Known when
 * every FILE is a regular file, or when --bytes bounds the only one.
 */
static void cat_total(struct progress *pg, char **files, int nfiles, const struct opts *o)
{
	pg->known = true;
	for (int i = 0; i < nfiles; i++) {
		bool known = true;
		uint64_t sz = 0;
		struct stat st;

		if (!strcmp(files[i], "-"))
			sz = input_size(STDIN_FILENO, &known);
		else if (stat(files[i], &st) == 0 && S_ISREG(st.st_mode))
			sz = (uint64_t)st.st_size;
		else if (stat(files[i], &st) == 0)
			known = false;
		if (o->have_bytes && (sz > o->bytes || !known)) {
			sz = o->bytes;
			known = known || nfiles == 1;
		}
		pg->known = pg->known && known;
		pg->total += sz;
	}
}

int cmd_cat(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "prefix", required_argument, NULL, OPT_PREFIX },
		{ "bytes", required_argument, NULL, OPT_BYTES },
		{ NULL, 0, NULL, 0 },
	};
	static char *dash[] = { "-", NULL };
	struct opts o = { .progress = PROGRESS_OFF };
	struct progress pg;
	char **files;
	int first, nfiles, status = EXIT_OK;

	first = parse_opts(argc, argv, "u", longopts, usage_cat, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	files = argv + first;
	nfiles = argc - first;
	if (!nfiles) {
		files = dash;
		nfiles = 1;
	}

	progress_init(&pg, o.progress);
	if (pg.on)
		cat_total(&pg, files, nfiles, &o);
	if (o.prefix) {
		/* The seed's plain write, ahead of the splice. */
		int err = write_all(STDOUT_FILENO, o.prefix, strlen(o.prefix));

		if (err == -EPIPE)
			exit_epipe();
		if (err) {
			warn_err(-err, "write error");
			return EXIT_FAIL;
		}
	}
	grow_out_pipe(STDOUT_FILENO);
	for (int i = 0; i < nfiles; i++) {
		int fd, err = open_input(files[i], &fd);

		if (err) {
			warn_err(-err, files[i]);
			status = EXIT_FAIL;
			continue;
		}
		if (cat_one(fd, strcmp(files[i], "-") ? files[i] : "standard input", &o, &pg))
			status = EXIT_FAIL;
		if (fd != STDIN_FILENO)
			close(fd);
	}
	progress_tick(&pg, true);
	return status;
}
