// SPDX-License-Identifier: MIT
/*
 * pagepipe.c - the pagepipe command: cat, tee, copy, buffer and relay on
 * libpagepipe.
 *
 * Exit codes are coreutils': 0 success, 1 failure, 2 bad usage.  SIGPIPE
 * is ignored so that every write reports EPIPE, and a reader that goes
 * away then ends the command as quietly as it ends cat (see exit_epipe).
 */
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *prog = "pagepipe";
static bool sigpipe_was_default;

void warnx(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void warn_err(int err, const char *what)
{
	warnx("%s: %s", what, strerror(err));
}

void sigpipe_setup(void)
{
	struct sigaction old, sa = { .sa_handler = SIG_IGN };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	sigpipe_was_default = old.sa_handler == SIG_DFL;
}

/*
 * cat dies of SIGPIPE when its reader goes away: no message, and the
 * status the shell expects (141, which `set -o pipefail` scripts already
 * allow for cat).  Do the same, unless SIGPIPE came in ignored, where cat
 * would fail with EPIPE: then just stop, since every byte the reader took
 * was right.
 */
void exit_epipe(void)
{
	if (sigpipe_was_default) {
		sigset_t set;

		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
		raise(SIGPIPE);
	}
	_exit(EXIT_OK);
}

/* Sizes: a number with an optional K, M, G or T (powers of 1024), "iB" or "B". */
int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -errno;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	case 'B':
		if (end[1])
			return -EINVAL;
		*out = v;
		return 0;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

/* ---------------------------------------------------------------------- */

void try_help(void)
{
	fprintf(stderr, "Try '%s --help' for more information.\n", prog);
}

static const char usage_main[] =
	"Usage: pagepipe COMMAND [OPTION]... [ARG]...\n"
	"Zero-copy plumbing on libpagepipe: pipes made of page references.\n"
	"\n"
	"Commands:\n"
	"  cat [--prefix TEXT] [--bytes N] [FILE]...  concatenate FILEs to standard output\n"
	"  tee [-a] [-p] [FILE]...                    copy standard input to FILEs and output\n"
	"  copy SRC DST                               copy SRC to DST ('-' is stdin/stdout)\n"
	"  buffer [--size SIZE]                       buffer standard input in memory\n"
	"  relay LISTEN TARGET                        relay TCP connections (HOST:PORT)\n"
	"\n"
	"Options for every command:\n"
	"      --progress     show bytes, rate and ETA on standard error\n"
	"      --no-progress  do not\n"
	"      --help         display help and exit\n"
	"      --version      output version information and exit\n"
	"\n"
	"'pagepipe COMMAND --help' describes one command; see also pagepipe(1).\n"
	"Exit status: 0 success, 1 failure, 2 bad usage.\n";

static const char usage_cat[] =
	"Usage: pagepipe cat [OPTION]... [FILE]...\n"
	"Concatenate FILEs to standard output (standard input for none or '-').\n"
	"Regular files reach a pipe by splice, a socket by sendfile and a file by\n"
	"copy_file_range, through a pagepipe; a terminal gets plain writes.\n"
	"\n"
	"      --prefix TEXT  write TEXT before the first byte\n"
	"      --bytes N      copy at most N bytes of each FILE (K, M, G suffixes)\n"
	"      --progress     show bytes, rate and ETA on standard error\n"
	"      --no-progress  do not (the default)\n"
	"      --help         display this help and exit\n"
	"\n"
	"Example: pagepipe cat --prefix 'hello: ' --bytes 1000 FILE | less\n";

static const char usage_tee[] =
	"Usage: pagepipe tee [OPTION]... [FILE]...\n"
	"Copy standard input to each FILE and to standard output, by tee and\n"
	"splice between pagepipes where the descriptors allow.\n"
	"\n"
	"  -a, --append       append to the FILEs, do not truncate them\n"
	"  -p                 when an output's reader goes away, keep writing the others\n"
	"      --progress     show bytes and rate on standard error\n"
	"      --no-progress  do not (the default)\n"
	"      --help         display this help and exit\n";

static const char usage_copy[] =
	"Usage: pagepipe copy [OPTION]... SRC DST\n"
	"Copy SRC to DST by the fastest correct path ('-': standard input or\n"
	"output).  A DST that is a directory receives DST/basename(SRC).\n"
	"\n"
	"      --progress     show bytes, rate and ETA on standard error\n"
	"      --no-progress  do not (the default when stderr is not a terminal)\n"
	"      --help         display this help and exit\n";

static const char usage_buffer[] =
	"Usage: pagepipe buffer [OPTION]...\n"
	"Copy standard input to standard output through an in-memory pagepipe\n"
	"of SIZE bytes, so that a bursty producer and a slow consumer each run\n"
	"at their own pace.\n"
	"\n"
	"  -s, --size SIZE    buffer size, with K, M or G (default 16M, at most 2G)\n"
	"      --progress     show bytes, rate and buffer fill on standard error\n"
	"      --no-progress  do not (the default when stderr is not a terminal)\n"
	"      --help         display this help and exit\n";

const char usage_relay[] =
	"Usage: pagepipe relay [OPTION]... LISTEN TARGET\n"
	"Accept TCP connections on LISTEN and relay each, both ways, to TARGET,\n"
	"through pagepipes with splice.  LISTEN and TARGET are HOST:PORT (IPv6 as\n"
	"[ADDR]:PORT).  The end of one direction is passed on as a half-close;\n"
	"connections are served at once, each on its own threads.  With LISTEN\n"
	"port 0 the port chosen is printed on standard output as HOST:PORT.\n"
	"\n"
	"  -v, --verbose      log each connection on standard error\n"
	"      --progress     show connections and bytes on standard error\n"
	"      --no-progress  do not (the default)\n"
	"      --help         display this help and exit\n";

int parse_opts(int argc, char **argv, const char *shortopts,
		      const struct option *extra, const char *usage, struct opts *o)
{
	struct option all[16];
	static const struct option common[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	};
	size_t n = 0;
	int c;

	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		all[n++] = common[i];
	for (; extra && extra->name; extra++)
		all[n++] = *extra;
	memset(&all[n], 0, sizeof(all[n]));

	optind = 1;
	opterr = 1;
	while ((c = getopt_long(argc, argv, shortopts, all, NULL)) != -1) {
		uint64_t v;

		switch (c) {
		case OPT_HELP:
			fputs(usage, stdout);
			return -2;
		case OPT_PROGRESS:
			o->progress = PROGRESS_ON;
			break;
		case OPT_NO_PROGRESS:
			o->progress = PROGRESS_OFF;
			break;
		case OPT_PREFIX:
			o->prefix = optarg;
			break;
		case OPT_BYTES:
			if (parse_size(optarg, &v)) {
				warnx("invalid number of bytes: '%s'", optarg);
				try_help();
				return -1;
			}
			o->bytes = v;
			o->have_bytes = true;
			break;
		case 'a':
			o->append = true;
			break;
		case 'p':
			o->keep_going = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 's':
			if (parse_size(optarg, &v) || v < 4096 || v > ((uint64_t)1 << 31)) {
				warnx("invalid buffer size: '%s' (4K to 2G)", optarg);
				try_help();
				return -1;
			}
			o->size = v;
			break;
		default:
			try_help();
			return -1;
		}
	}
	return optind;
}

/* ----------------------------------------------------------------------
 * cat
 */

static int open_input(const char *name, int *fd)
{
	struct stat st;

	if (!strcmp(name, "-")) {
		*fd = STDIN_FILENO;
		return 0;
	}
	*fd = open(name, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	/* read() says EISDIR only on some file systems; say it everywhere. */
	if (fstat(*fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(*fd);
		*fd = -1;
		return -EISDIR;
	}
	return 0;
}

/* Report a failed transfer; EPIPE on the output ends the command quietly. */
static void report_xfer(const struct xfer *x, int err, const char *in_name,
			const char *out_name)
{
	char what[4200];

	if (x->write_err && err == EPIPE)
		exit_epipe();
	if (x->write_err)
		snprintf(what, sizeof(what), "write error%s%s", out_name ? " on " : "",
			 out_name ? out_name : "");
	else
		snprintf(what, sizeof(what), "%s", in_name);
	warn_err(err, what);
}

/* Whether writing fd_out would also grow the file being read (cat's check). */
static bool same_file(int in_fd, int out_fd)
{
	struct stat is, os;

	if (fstat(in_fd, &is) < 0 || fstat(out_fd, &os) < 0)
		return false;
	return S_ISREG(is.st_mode) && S_ISREG(os.st_mode) && is.st_dev == os.st_dev &&
	       is.st_ino == os.st_ino;
}

/* Give a kernel pipe on stdout room for big splices: fewer wakeups for both sides. */
static void grow_out_pipe(int fd)
{
	struct stat st;
	size_t max = pp_pipe_get_max_size();

	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		if (max > STAGE_SIZE)
			max = STAGE_SIZE;
		/* Best effort: an unprivileged limit or a shared pipe may refuse. */
		(void)fcntl(fd, F_SETPIPE_SZ, (int)max);
	}
}

static uint64_t input_size(int fd, bool *known)
{
	struct stat st;
	off_t pos;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*known = false;
		return 0;
	}
	pos = lseek(fd, 0, SEEK_CUR);
	if (pos < 0 || pos > st.st_size)
		pos = 0;
	return (uint64_t)(st.st_size - pos);
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
	xfer_init(&x, in_fd, STDOUT_FILENO, STAGE_SIZE);
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

	first = parse_opts(argc, argv, "+", longopts, usage_cat, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	files = argv + first;
	nfiles = argc - first;
	if (!nfiles) {
		files = dash;
		nfiles = 1;
	}

	progress_init(&pg, o.progress);
	pg.known = true;
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
		if (pg.on) {
			bool known = true;
			uint64_t sz = input_size(fd, &known);

			pg.known = pg.known && known;
			if (o.have_bytes && (sz > o.bytes || !known)) {
				sz = o.bytes;
				pg.known = pg.known || nfiles == 1;
			}
			pg.total += sz;
		}
		if (cat_one(fd, strcmp(files[i], "-") ? files[i] : "standard input", &o, &pg))
			status = EXIT_FAIL;
		if (fd != STDIN_FILENO)
			close(fd);
	}
	progress_tick(&pg, true);
	return status;
}

/* ----------------------------------------------------------------------
 * copy
 */

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
	xfer_init(&x, in_fd, out_fd, STAGE_SIZE);
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

/* ----------------------------------------------------------------------
 * tee
 *
 * Each round splices a stage of standard input into a pagepipe, then for
 * every output but the last tees the stage into a second pagepipe and
 * splices that to the output, and splices the stage itself to the last
 * one: the bytes are never copied where the library can move references.
 */

struct tee_out {
	int fd;
	const char *name;
	struct pp_file *f;
	bool dead;
};

struct tee_state {
	struct tee_out *outs;
	int nouts;
	bool keep_going;
	int status;
	bool copy_mode;
	struct pp_file *stage[2], *dup[2];
	char *buf;
};

/* An output failed: report it, or end quietly for a reader gone away. */
static void tee_fail(struct tee_state *t, struct tee_out *out, int err)
{
	if (err == EPIPE) {
		if (!t->keep_going)
			exit_epipe();
	} else {
		warn_err(err, out->name);
		t->status = EXIT_FAIL;
	}
	out->dead = true;
}

/* Splice exactly len bytes from the pagepipe r to one output. */
static int tee_drain(struct tee_state *t, struct pp_file *r, struct tee_out *out, size_t len)
{
	while (len) {
		ssize_t w = pp_splice(r, NULL, out->f, NULL, len, SPLICE_F_MOVE);

		if (w > 0) {
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			wait_fd(out->fd, POLLOUT);
			continue;
		}
		if (w == 0 || is_degradable(errno)) {
			/* Splice to this output does not work: copy what is queued. */
			while (len) {
				size_t chunk = len < COPY_BUF_SIZE ? len : COPY_BUF_SIZE;
				ssize_t r2 = pp_read(r, t->buf, chunk);
				int err;

				if (r2 <= 0)
					return r2 < 0 ? -errno : -EIO;
				err = write_all(out->fd, t->buf, (size_t)r2);
				len -= (size_t)r2;
				if (err) {
					/* Empty the pipe anyway: the next round needs it so. */
					while (len) {
						r2 = pp_read(r, t->buf, len < COPY_BUF_SIZE ?
							     len : COPY_BUF_SIZE);
						if (r2 <= 0)
							break;
						len -= (size_t)r2;
					}
					return err;
				}
			}
			return 0;
		}
		{
			int err = errno;
			char sink[16384];

			while (len) {
				ssize_t r2 = pp_read(r, sink, len < sizeof(sink) ? len : sizeof(sink));

				if (r2 <= 0)
					break;
				len -= (size_t)r2;
			}
			return -err;
		}
	}
	return 0;
}

static void tee_write_all_outputs(struct tee_state *t, const char *buf, size_t len, int from)
{
	for (int i = from; i < t->nouts; i++) {
		int err;

		if (t->outs[i].dead)
			continue;
		err = write_all(t->outs[i].fd, buf, len);
		if (err)
			tee_fail(t, &t->outs[i], -err);
	}
}

static int tee_live_count(const struct tee_state *t)
{
	int n = 0;

	for (int i = 0; i < t->nouts; i++)
		n += !t->outs[i].dead;
	return n;
}

int cmd_tee(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "append", no_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_OFF };
	struct tee_state t = { 0 };
	struct progress pg;
	struct pp_file *in = NULL;
	int first;

	first = parse_opts(argc, argv, "+ap", longopts, usage_tee, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	t.keep_going = o.keep_going;
	t.nouts = argc - first + 1;
	t.outs = calloc((size_t)t.nouts, sizeof(*t.outs));
	t.buf = malloc(STAGE_SIZE);
	if (!t.outs || !t.buf) {
		warn_err(ENOMEM, "tee");
		return EXIT_FAIL;
	}
	/* Standard output last: it gets the stage itself, not a tee of it. */
	for (int i = first; i < argc; i++) {
		struct tee_out *out = &t.outs[i - first];
		int fl = O_WRONLY | O_CREAT | O_CLOEXEC | (o.append ? O_APPEND : O_TRUNC);

		out->name = argv[i];
		out->fd = strcmp(argv[i], "-") ? open(argv[i], fl, 0666) : STDOUT_FILENO;
		if (out->fd < 0) {
			warn_err(errno, argv[i]);
			t.status = EXIT_FAIL;
			out->dead = true;
		}
	}
	t.outs[t.nouts - 1].fd = STDOUT_FILENO;
	t.outs[t.nouts - 1].name = "standard output";
	for (int i = 0; i < t.nouts; i++) {
		if (t.outs[i].dead)
			continue;
		t.outs[i].f = pp_fdopen(t.outs[i].fd);
		if (!t.outs[i].f)
			t.copy_mode = true;
	}
	in = pp_fdopen(STDIN_FILENO);
	if (!in || stage_pipe(t.stage, STAGE_SIZE, 0) || stage_pipe(t.dup, STAGE_SIZE, 0))
		t.copy_mode = true;

	progress_init(&pg, o.progress);
	while (tee_live_count(&t)) {
		ssize_t n;
		int last = -1;

		if (t.copy_mode) {
			n = read(STDIN_FILENO, t.buf, COPY_BUF_SIZE);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN) {
				wait_fd(STDIN_FILENO, POLLIN);
				continue;
			}
			if (n < 0) {
				warn_err(errno, "standard input");
				t.status = EXIT_FAIL;
				break;
			}
			if (n == 0)
				break;
			tee_write_all_outputs(&t, t.buf, (size_t)n, 0);
			progress_add(&pg, (uint64_t)n);
			progress_tick(&pg, false);
			continue;
		}
		n = pp_splice(in, NULL, t.stage[1], NULL, STAGE_SIZE, SPLICE_F_MOVE);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				wait_fd(STDIN_FILENO, POLLIN);
				continue;
			}
			if (is_degradable(errno)) {
				t.copy_mode = true;
				continue;
			}
			warn_err(errno, "standard input");
			t.status = EXIT_FAIL;
			break;
		}
		if (n == 0)
			break;
		for (int i = 0; i < t.nouts; i++)
			if (!t.outs[i].dead)
				last = i;
		for (int i = 0; i < t.nouts; i++) {
			struct tee_out *out = &t.outs[i];
			size_t have = 0;
			ssize_t c;
			int err;

			if (out->dead)
				continue;
			if (i == last) {
				err = tee_drain(&t, t.stage[0], out, (size_t)n);
				if (err)
					tee_fail(&t, out, -err);
				break;
			}
			/* tee copies from the front, so it must take all n at once. */
			c = pp_tee(t.stage[0], t.dup[1], (size_t)n, 0);
			if (c > 0) {
				err = tee_drain(&t, t.dup[0], out, (size_t)c);
				if (err)
					tee_fail(&t, out, -err);
				have = (size_t)c;
			}
			if (out->dead)
				continue;
			if (have < (size_t)n) {
				/*
				 * tee does not work here, or moved only part: take the
				 * stage into memory and write it to this and every
				 * later output, then copy from now on.
				 */
				size_t got = 0;

				while (got < (size_t)n) {
					ssize_t r = pp_read(t.stage[0], t.buf + got, (size_t)n - got);

					if (r <= 0)
						break;
					got += (size_t)r;
				}
				if (have) {
					/* This output already has the first `have` bytes. */
					err = write_all(out->fd, t.buf + have, got - have);
					if (err)
						tee_fail(&t, out, -err);
					tee_write_all_outputs(&t, t.buf, got, i + 1);
				} else {
					tee_write_all_outputs(&t, t.buf, got, i);
				}
				t.copy_mode = true;
				break;
			}
		}
		/* Outputs that died must not leave the stage half drained. */
		{
			int avail = 0;

			while (pp_ioctl(t.stage[0], FIONREAD, &avail) == 0 && avail > 0) {
				if (pp_read(t.stage[0], t.buf, COPY_BUF_SIZE) <= 0)
					break;
			}
		}
		progress_add(&pg, (uint64_t)n);
		progress_tick(&pg, false);
	}
	progress_tick(&pg, true);
	for (int i = 0; i < t.nouts; i++) {
		if (t.outs[i].f)
			pp_close(t.outs[i].f);
		if (t.outs[i].fd > STDERR_FILENO && close(t.outs[i].fd) < 0 && !t.outs[i].dead) {
			warn_err(errno, t.outs[i].name);
			t.status = EXIT_FAIL;
		}
	}
	if (in)
		pp_close(in);
	for (int i = 0; i < 2; i++) {
		if (t.stage[i])
			pp_close(t.stage[i]);
		if (t.dup[i])
			pp_close(t.dup[i]);
	}
	free(t.outs);
	free(t.buf);
	return t.status;
}

/* ----------------------------------------------------------------------
 * buffer
 *
 * Two threads around one big pagepipe: the filler splices standard input
 * in and blocks only when the pagepipe is full; the drainer splices it out
 * and blocks only when it is empty.  Each side keeps its own pace.
 */

struct buffer_state {
	struct pp_file *ends[2];
	struct progress pg;
	int in_err, out_err;		/* positive errno, or 0 */
	bool out_copy;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	bool done;
	char extra[64];
	uint64_t size;
};

/* Move into the pagepipe by copying: for inputs splice cannot read. */
static int fill_copy(struct buffer_state *b)
{
	char *buf = malloc(COPY_BUF_SIZE);
	int err = 0;

	if (!buf)
		return ENOMEM;
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf, COPY_BUF_SIZE);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			wait_fd(STDIN_FILENO, POLLIN);
			continue;
		}
		if (r <= 0) {
			err = r < 0 ? errno : 0;
			break;
		}
		for (ssize_t off = 0; off < r;) {
			ssize_t w = pp_write(b->ends[1], buf + off, (size_t)(r - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				/* EPIPE: the drainer stopped and reported why. */
				free(buf);
				return errno == EPIPE ? 0 : errno;
			}
			off += w;
		}
	}
	free(buf);
	return err;
}

static void *buffer_filler(void *arg)
{
	struct buffer_state *b = arg;
	struct pp_file *in = pp_fdopen(STDIN_FILENO);

	for (;;) {
		ssize_t n;

		if (!in) {
			b->in_err = fill_copy(b);
			break;
		}
		n = pp_splice(in, NULL, b->ends[1], NULL, STAGE_SIZE, SPLICE_F_MOVE);
		if (n > 0)
			continue;
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			wait_fd(STDIN_FILENO, POLLIN);
			continue;
		}
		if (errno == EPIPE)
			break;
		if (is_degradable(errno)) {
			pp_close(in);
			in = NULL;
			continue;
		}
		b->in_err = errno;
		break;
	}
	if (in)
		pp_close(in);
	/* The drainer sees end of file once the queued pages are out. */
	pp_close(b->ends[1]);
	b->ends[1] = NULL;
	return NULL;
}

static void *buffer_drainer(void *arg)
{
	struct buffer_state *b = arg;
	struct pp_file *out = pp_fdopen(STDOUT_FILENO);
	char *buf = NULL;

	for (;;) {
		ssize_t n;

		if (!out || b->out_copy) {
			int err;

			if (!buf && !(buf = malloc(COPY_BUF_SIZE))) {
				b->out_err = ENOMEM;
				break;
			}
			n = pp_read(b->ends[0], buf, COPY_BUF_SIZE);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				b->out_err = n < 0 ? errno : 0;
				break;
			}
			err = write_all(STDOUT_FILENO, buf, (size_t)n);
			if (err) {
				b->out_err = -err;
				break;
			}
		} else {
			n = pp_splice(b->ends[0], NULL, out, NULL, STAGE_SIZE, SPLICE_F_MOVE);
			if (n == 0)
				break;
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN) {
					wait_fd(STDOUT_FILENO, POLLOUT);
					continue;
				}
				if (is_degradable(errno)) {
					b->out_copy = true;
					continue;
				}
				b->out_err = errno;
				break;
			}
		}
		progress_add(&b->pg, (uint64_t)n);
	}
	if (out)
		pp_close(out);
	free(buf);
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

	first = parse_opts(argc, argv, "+s:", longopts, usage_buffer, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (first != argc) {
		warnx("extra operand '%s'", argv[first]);
		try_help();
		return EXIT_USAGE;
	}
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
	b->pg.extra = buffer_fill;
	b->pg.extra_arg = b;
	if (pthread_create(&drainer, NULL, buffer_drainer, b) ||
	    pthread_create(&filler, NULL, buffer_filler, b)) {
		warn_err(EAGAIN, "cannot start threads");
		return EXIT_FAIL;
	}
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

/* ---------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "cat", cmd_cat },
	{ "tee", cmd_tee },
	{ "copy", cmd_copy },
	{ "buffer", cmd_buffer },
	{ "relay", cmd_relay },
};

static void version(void)
{
	printf("pagepipe %s (libpagepipe %s)\n", PAGEPIPE_VERSION, PAGEPIPE_VERSION);
}

int main(int argc, char **argv)
{
	static char name[64];
	const char *cmd;

	sigpipe_setup();
	if (argc < 2) {
		fputs("Usage: pagepipe COMMAND [OPTION]... [ARG]...\n", stderr);
		try_help();
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		fputs(usage_main, stdout);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
		version();
		return EXIT_OK;
	}
	if (!strcmp(cmd, "help") && argc > 2) {
		static char *help[4];

		help[0] = argv[0];
		help[1] = argv[2];
		help[2] = "--help";
		argc = 3;
		argv = help;
		cmd = argv[1];
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(cmd, commands[i].name))
			continue;
		snprintf(name, sizeof(name), "pagepipe %s", cmd);
		prog = name;
		argv[1] = name;
		return commands[i].fn(argc - 1, argv + 1);
	}
	if (cmd[0] == '-')
		warnx("unrecognized option '%s'", cmd);
	else
		warnx("unknown command '%s'", cmd);
	try_help();
	return EXIT_USAGE;
}
