// SPDX-License-Identifier: MIT
/*
 * copy.c - pagepipe copy SRC DST: one file to another (or standard input
 * or output) through the transfer engine.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_copy[] =
	"Usage: pagepipe copy [OPTION]... SRC DST\n"
	"Copy SRC to DST by the fastest correct path ('-': standard input or\n"
	"output).  A DST that is a directory receives DST/basename(SRC).\n"
	"\n"
	"      --progress     show bytes, rate and ETA on standard error\n"
	"      --no-progress  do not (the default when stderr is not a terminal)\n"
	"      --help         display this help and exit\n";

int cmd_copy(int argc, char **argv)
{
	struct opts o = { .progress = PROGRESS_AUTO };
	struct progress pg;
	const char *src, *dst, *dst_name;
	char *joined = NULL;
	struct stat ss, ds;
	int first, in_fd, out_fd, err, status = EXIT_OK;
	bool dst_is_std, known = true;
	struct xfer x;

	first = parse_opts(argc, argv, "+", NULL, usage_copy, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (argc - first != 2) {
		if (argc - first < 2)
			warnx("missing operand");
		else
			warnx("extra operand '%s'", argv[first + 2]);
		try_help();
		return EXIT_USAGE;
	}
	src = argv[first];
	dst = dst_name = argv[first + 1];
	dst_is_std = !strcmp(dst, "-");

	err = open_input(src, &in_fd);
	if (err) {
		warn_err(-err, src);
		return EXIT_FAIL;
	}
	if (fstat(in_fd, &ss) < 0)
		memset(&ss, 0, sizeof(ss));
	if (!dst_is_std && stat(dst, &ds) == 0 && S_ISDIR(ds.st_mode)) {
		char *tmp = strdup(strcmp(src, "-") ? src : "stdin");

		if (!tmp || asprintf(&joined, "%s/%s", dst, basename(tmp)) < 0) {
			free(tmp);
			warn_err(ENOMEM, dst);
			return EXIT_FAIL;
		}
		free(tmp);
		dst = dst_name = joined;
	}
	if (dst_is_std) {
		out_fd = STDOUT_FILENO;
		dst_name = "standard output";
		if (o.progress == PROGRESS_AUTO && isatty(STDOUT_FILENO))
			o.progress = PROGRESS_OFF;
	} else {
		mode_t mode = S_ISREG(ss.st_mode) ? (ss.st_mode & 0777) : 0666;

		/* Truncating the source would lose it: refuse, as cp does. */
		if (stat(dst, &ds) == 0 && S_ISREG(ds.st_mode) && ds.st_dev == ss.st_dev &&
		    ds.st_ino == ss.st_ino) {
			warnx("'%s' and '%s' are the same file", src, dst);
			free(joined);
			return EXIT_FAIL;
		}
		out_fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
		if (out_fd < 0) {
			warn_err(errno, dst);
			free(joined);
			return EXIT_FAIL;
		}
	}

	progress_init(&pg, o.progress);
	pg.total = input_size(in_fd, &known);
	pg.known = known;
	grow_out_pipe(out_fd);
	xfer_init(&x, in_fd, out_fd, 0);
	for (;;) {
		ssize_t n;

		x.flags = SPLICE_F_MORE;
		n = xfer_step(&x, SIZE_MAX);
		if (n == 0)
			break;
		if (n < 0) {
			if (!(x.write_err && -n == EPIPE))
				status = EXIT_FAIL;
			report_xfer(&x, (int)-n, strcmp(src, "-") ? src : "standard input",
				    dst_name);
			break;
		}
		progress_add(&pg, (uint64_t)n);
		progress_tick(&pg, false);
	}
	xfer_destroy(&x);
	progress_tick(&pg, true);
	/* A file system may report a failed write only now (NFS, quota). */
	if (out_fd != STDOUT_FILENO && close(out_fd) < 0 && status == EXIT_OK) {
		warn_err(errno, dst_name);
		status = EXIT_FAIL;
	}
	if (in_fd != STDIN_FILENO)
		close(in_fd);
	free(joined);
	return status;
}
