/* SPDX-License-Identifier: MIT */
/*
 * tool.h - what the pagepipe command's files share.
 *
 * Helpers here follow the library's own convention: they return a count or
 * 0 on success and -errno on failure.  Only the subcommands print messages
 * and choose exit codes.
 */
#ifndef PAGEPIPE_TOOL_H
#define PAGEPIPE_TOOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "pagepipe.h"

/* coreutils exit codes. */
#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	2

/* The default size of the pagepipe each transfer stages its pages in. */
#define STAGE_SIZE	(1u << 20)
/*
 * ... and when the input is a regular file: its pages are queued as
 * references, which cost no memory, and each step is a few system calls.
 */
#define FILE_STAGE_SIZE	(8u << 20)
/* The user-memory buffer of the read/write fallback. */
#define COPY_BUF_SIZE	(128u << 10)

extern const char *prog;		/* "pagepipe cat" etc., for messages */

void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: what: strerror(err)"; err is a positive errno. */
void warn_err(int err, const char *what);

/* The write end's reader went away: stop quietly, as cat does under SIGPIPE. */
void __attribute__((noreturn)) exit_epipe(void);
void sigpipe_setup(void);

int parse_size(const char *s, uint64_t *out);
void format_bytes(char *buf, size_t n, double v);

/* -------------------------------------------------------------------------
 * Moving bytes from one descriptor to another by the fastest path that
 * works.  DIRECT is one pp_splice() between the two OS descriptors (the
 * library passes it to the kernel when one is a kernel pipe); STAGED goes
 * through a pagepipe, so that file pages reach a socket by sendfile and a
 * file by copy_file_range; COPY is read(2)/write(2) through user memory,
 * the fallback that always works.  A path that fails with EINVAL, ENOSYS or
 * EXDEV is given up for the next one, without losing a byte.
 */
enum xfer_path {
	XFER_DIRECT,
	XFER_STAGED,
	XFER_COPY,
};

struct xfer {
	int in_fd, out_fd;
	struct pp_file *in, *out;	/* pp_fdopen() of in_fd, out_fd */
	struct pp_file *stage[2];	/* the staging pagepipe, made on first use */
	size_t stage_size;
	enum xfer_path path;
	unsigned int flags;		/* SPLICE_F_MORE when more data follows */
	bool write_err;			/* the last error was the output's */
	char *buf;			/* COPY's buffer, made on first use */
};

extern const char *const xfer_path_name[];

enum xfer_path xfer_best_path(int in_fd, int out_fd);
int xfer_init(struct xfer *x, int in_fd, int out_fd, size_t stage_size);
void xfer_destroy(struct xfer *x);
/*
 * Move up to max bytes from input to output: returns the count moved (all
 * of it written), 0 at the end of the input, or -errno with write_err set
 * when the output failed.
 */
ssize_t xfer_step(struct xfer *x, size_t max);

/* Write all of buf to fd, waiting out EAGAIN and EINTR. */
int write_all(int fd, const void *buf, size_t len);
/* Wait until fd is ready for events (for descriptors left non-blocking). */
void wait_fd(int fd, short events);
bool is_degradable(int err);

/* Make a pagepipe of at least size bytes, raising the limit if need be. */
int stage_pipe(struct pp_file *ends[2], size_t size, int flags);

/* -------------------------------------------------------------------------
 * Progress on stderr: bytes, rate, and ETA when the total is known.
 */
struct progress {
	bool on;
	bool tty;			/* redraw one line with \r */
	bool known;			/* total is meaningful */
	uint64_t total;
	_Atomic uint64_t done;
	struct timespec start;
	double last;			/* seconds since start of the last report */
	const char *(*extra)(void *arg);	/* more text for the line */
	void *extra_arg;
};

enum progress_mode {
	PROGRESS_OFF,
	PROGRESS_AUTO,			/* on when stderr is a terminal */
	PROGRESS_ON,
};

void progress_init(struct progress *p, enum progress_mode mode);
void progress_add(struct progress *p, uint64_t n);
/* Print a report if one is due (or always, with final). */
void progress_tick(struct progress *p, bool final);
double now_since(const struct timespec *start);

/* -------------------------------------------------------------------------
 * Options.  parse_opts() handles --help, --progress and --no-progress for
 * every command, then the command's own; it returns the index of the first
 * operand, -1 after a usage error (reported) or -2 after --help.
 */
enum {
	OPT_HELP = 0x100,
	OPT_PROGRESS,
	OPT_NO_PROGRESS,
	OPT_PREFIX,
	OPT_BYTES,
};

struct opts {
	enum progress_mode progress;
	const char *prefix;
	uint64_t bytes;
	bool have_bytes;
	bool append;
	bool keep_going;
	bool verbose;
	uint64_t size;
};

struct option;
int parse_opts(int argc, char **argv, const char *shortopts,
	       const struct option *extra, const char *usage, struct opts *o);
void try_help(void);
extern const char usage_relay[];

int cmd_cat(int argc, char **argv);
int cmd_tee(int argc, char **argv);
int cmd_copy(int argc, char **argv);
int cmd_buffer(int argc, char **argv);
int cmd_relay(int argc, char **argv);

#endif /* PAGEPIPE_TOOL_H */
