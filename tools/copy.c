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
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n";

struct copy {
	const char *src, *dst;		/* operands */
	const char *src_name, *dst_name;	/* for messages */
	char *joined;			/* DST/basename(SRC), when DST is a directory */
	int in_fd, out_fd;
	struct stat ss;
	struct progress pg;
};

/* DST/basename(SRC), with no doubled slash however DST ends. */
static int join_dir(struct copy *c)
{
	char *tmp = strdup(strcmp(c->src, "-") ? c->src : "stdin");
	size_t len = strlen(c->dst);
	int r;

	if (!tmp)
		return -ENOMEM;
	while (len > 1 && c->dst[len - 1] == '/')
		len--;
	r = asprintf(&c->joined, "%.*s%s%s", (int)len, c->dst,
		     c->dst[len - 1] == '/' ? "" : "/", basename(tmp));
	free(tmp);
	if (r < 0)
		return -ENOMEM;
	c->dst = c->dst_name = c->joined;
	return 0;
}

/* Open (create, truncate) the destination; a message and EXIT_FAIL on failure. */
static int open_dest(struct copy *c)
{
	mode_t mode = S_ISREG(c->ss.st_mode) ? (c->ss.st_mode & 0777) : 0666;
	size_t len = strlen(c->dst);
	struct stat ds;
	int err;

	if (!strcmp(c->dst, "-")) {
		c->out_fd = STDOUT_FILENO;
		c->dst_name = "standard output";
		return EXIT_OK;
	}
	if (stat(c->dst, &ds) == 0 && S_ISDIR(ds.st_mode)) {
		err = join_dir(c);
		if (err) {
			warn_err(-err, c->dst);
			return EXIT_FAIL;
		}
	} else if (len && c->dst[len - 1] == '/') {
		/*
		 * "dir/sub/" that is not a directory: open() would say EISDIR
		 * for the O_CREAT of a name ending in a slash; cp says what is
		 * wrong.
		 */
		warn_err(ENOTDIR, c->dst);
		return EXIT_FAIL;
	}
	/* Truncating the source would lose it: refuse, as cp does. */
	if (stat(c->dst, &ds) == 0 && S_ISREG(ds.st_mode) && ds.st_dev == c->ss.st_dev &&
	    ds.st_ino == c->ss.st_ino) {
		warnx("'%s' and '%s' are the same file", c->src, c->dst);
		return EXIT_FAIL;
	}
	c->out_fd = open(c->dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (c->out_fd < 0) {
		warn_err(errno, c->dst);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* Move up to len bytes (all of them, or to the end of the input). */
static int copy_range(struct copy *c, struct xfer *x, uint64_t len, uint64_t *moved)
{
	*moved = 0;
	while (len) {
		ssize_t n;

		x->flags = SPLICE_F_MORE;
		n = xfer_step(x, len > SIZE_MAX ? SIZE_MAX : (size_t)len);
		if (n == 0)
			break;
		if (n < 0) {
			report_xfer(x, (int)-n, c->src_name, c->dst_name);
			return EXIT_FAIL;
		}
		len -= (uint64_t)n;
		*moved += (uint64_t)n;
		progress_add(&c->pg, (uint64_t)n);
		progress_tick(&c->pg, false);
	}
	return EXIT_OK;
}

/*
 * A sparse regular file to a regular file: only its data ranges
 * (SEEK_DATA/SEEK_HOLE), the holes left as holes, as cp does.  Taken only
 * when the file has fewer blocks than its size needs (cp's test), so that
 * a dense file is one plain transfer, and only into a DST opened here.
 */
static bool is_sparse_copy(const struct copy *c)
{
	struct stat os;

	/* Not into standard output: its offset and size are the caller's. */
	return c->out_fd != STDOUT_FILENO && S_ISREG(c->ss.st_mode) &&
	       fstat(c->out_fd, &os) == 0 && S_ISREG(os.st_mode) &&
	       (uint64_t)c->ss.st_blocks * 512 < (uint64_t)c->ss.st_size;
}

static int copy_sparse(struct copy *c, struct xfer *x)
{
	off_t start = lseek(c->in_fd, 0, SEEK_CUR), pos = start, end = c->ss.st_size;
	uint64_t moved;

	while (pos >= 0 && pos < end) {
		off_t data = lseek(c->in_fd, pos, SEEK_DATA), hole;
		int status;

		if (data < 0 && errno == ENXIO)
			break;		/* a hole to the end */
		if (data < 0)
			return copy_range(c, x, UINT64_MAX, &moved);	/* no SEEK_DATA here */
		hole = lseek(c->in_fd, data, SEEK_HOLE);
		if (hole < 0)
			hole = end;
		if (lseek(c->in_fd, data, SEEK_SET) < 0 ||
		    lseek(c->out_fd, data - start, SEEK_SET) < 0)
			return copy_range(c, x, UINT64_MAX, &moved);
		/* The skipped hole counts as done, as it is. */
		progress_add(&c->pg, (uint64_t)(data - pos));
		status = copy_range(c, x, (uint64_t)(hole - data), &moved);
		if (status)
			return status;
		pos = data + (off_t)moved;
		/*
		 * The end came early: the file shrank, or its size was never its
		 * length (sysfs says 4096 and has no blocks).  What was read is
		 * the file, as for cp.
		 */
		if (pos < hole) {
			end = pos;
			break;
		}
	}
	progress_add(&c->pg, pos < end ? (uint64_t)(end - pos) : 0);
	/* A trailing hole: the size, without writing it. */
	if (start >= 0 && start < end && ftruncate(c->out_fd, end - start) < 0) {
		warn_err(errno, c->dst_name);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int cmd_copy(int argc, char **argv)
{
	struct opts o = { .progress = PROGRESS_AUTO };
	struct copy c = { .in_fd = -1, .out_fd = -1 };
	struct xfer x;
	bool known = true;
	uint64_t moved;
	int first, err, status;

	first = parse_opts(argc, argv, "", NULL, usage_copy, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (check_operands(argc, argv, first, 2))
		return EXIT_USAGE;
	c.src = argv[first];
	c.dst = c.dst_name = argv[first + 1];
	c.src_name = strcmp(c.src, "-") ? c.src : "standard input";

	err = open_input(c.src, &c.in_fd);
	if (err) {
		warn_err(-err, c.src);
		return EXIT_FAIL;
	}
	if (fstat(c.in_fd, &c.ss) < 0)
		memset(&c.ss, 0, sizeof(c.ss));
	status = open_dest(&c);
	if (status)
		goto out;
	if (c.out_fd == STDOUT_FILENO && o.progress == PROGRESS_AUTO && isatty(STDOUT_FILENO))
		o.progress = PROGRESS_OFF;

	progress_init(&c.pg, o.progress);
	c.pg.total = input_size(c.in_fd, &known);
	c.pg.known = known;
	grow_out_pipe(c.out_fd);
	xfer_init(&x, c.in_fd, c.out_fd, 0);
	if (is_sparse_copy(&c))
		status = copy_sparse(&c, &x);
	else
		status = copy_range(&c, &x, UINT64_MAX, &moved);
	xfer_destroy(&x);
	progress_tick(&c.pg, true);
	/* A file system may report a failed write only now (NFS, quota). */
	if (c.out_fd != STDOUT_FILENO && close(c.out_fd) < 0 && status == EXIT_OK) {
		warn_err(errno, c.dst_name);
		status = EXIT_FAIL;
	}
out:
	if (c.in_fd != STDIN_FILENO)
		close(c.in_fd);
	free(c.joined);
	return status;
}
