/* SPDX-License-Identifier: MIT */
/*
 * tool.h - what the pagepipe command's files share.
 *
 * main.c      dispatch, options, messages, sizes
 * xfer.c      the transfer engine: one descriptor or pagepipe end to another
 * progress.c  the progress line
 * cat.c tee.c copy.c buffer.c relay.c   one command each
 * share.c     send and recv: a shared pagepipe between unrelated processes
 *
 * Helpers here follow the library's own convention: they return a count or
 * 0 on success and -errno on failure.  Only the commands print messages
 * and choose exit codes.  Only include/pagepipe.h is used from the library.
 */
#ifndef PAGEPIPE_TOOL_H
#define PAGEPIPE_TOOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
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

/*
 * The output's reader went away (EPIPE).  With SIGPIPE at its default,
 * die of it quietly as cat does; with SIGPIPE ignored, report
 * "write error: Broken pipe" and exit 1, as cat does.
 */
void __attribute__((noreturn)) exit_epipe(void);
/* Whether SIGPIPE was at its default when the command started. */
bool sigpipe_default(void);
void sigpipe_setup(void);

int parse_size(const char *s, uint64_t *out);
/* The largest buffer: the largest pipe the library makes. */
#define BUFFER_MAX	((uint64_t)1 << 40)
int parse_buffer_size(const char *s, uint64_t *out);
void format_bytes(char *buf, size_t n, double v);

/* -------------------------------------------------------------------------
 * The transfer engine: moving bytes from one end to another by the fastest
 * path that works.  An end is an OS descriptor or a pagepipe end.  DIRECT
 * is one pp_splice() between the two (the library passes it to the kernel
 * when one is a kernel pipe, and moves references when one is a pagepipe);
 * STAGED goes through a pagepipe, so that file pages reach a socket by
 * sendfile and a file by copy_file_range; COPY is read/write through user
 * memory, the fallback that always works.  RANGE, between two regular
 * files, is copy_file_range(2) as cp uses it: the file system's own copy
 * (a reflink or an in-kernel one), which no user-space path can beat.  A path that fails with EINVAL,
 * ENOSYS or EXDEV is given up for the next one, without losing a byte.
 */
enum xfer_path {
	XFER_RANGE,			/* copy_file_range(2): file to file */
	XFER_DIRECT,
	XFER_STAGED,
	XFER_COPY,
};

struct xfer {
	int in_fd, out_fd;		/* OS descriptors, -1 for a pagepipe end */
	struct pp_file *in, *out;
	bool own_in, own_out;		/* made by pp_fdopen() here */
	struct pp_file *stage[2];	/* the staging pagepipe, made on first use */
	size_t stage_size;
	enum xfer_path path;
	unsigned int flags;		/* SPLICE_F_MORE when more data follows */
	bool write_err;			/* the last error was the output's */
	bool range_moved;		/* copy_file_range() has moved bytes */
	char *buf;			/* COPY's buffer, made on first use */
};

/*
 * Between two OS descriptors; a stage_size of 0 chooses by the input (8 MiB
 * for a regular file, else 1 MiB).
 */
int xfer_init(struct xfer *x, int in_fd, int out_fd, size_t stage_size);
/*
 * Each side an OS descriptor (fd >= 0, file NULL) or a pagepipe end (fd
 * -1), which stays the caller's to close.
 */
int xfer_init_ends(struct xfer *x, int in_fd, struct pp_file *in, int out_fd,
		   struct pp_file *out);
void xfer_destroy(struct xfer *x);
/*
 * Move up to max bytes from input to output: returns the count moved (all
 * of it written), 0 at the end of the input, or -errno with write_err set
 * when the output failed.
 */
ssize_t xfer_step(struct xfer *x, size_t max);
/*
 * Move exactly len bytes queued in the pagepipe read end `from` to the
 * output.  On failure the rest is discarded, so that `from` is empty either
 * way, and -errno returned.
 */
int xfer_drain(struct xfer *x, struct pp_file *from, size_t len);
/* Throw away everything queued in a pagepipe read end. */
void pipe_discard(struct pp_file *r);

/* Write all of buf to fd, waiting out EAGAIN and EINTR. */
int write_all(int fd, const void *buf, size_t len);

/* Make a pagepipe of at least size bytes, raising the limit if need be. */
int stage_pipe(struct pp_file *ends[2], size_t size, int flags);

/* Open a FILE operand for reading ("-" is standard input); a directory is EISDIR. */
int open_input(const char *name, int *fd);
/* Bytes left to read in a regular file; *known cleared for anything else. */
uint64_t input_size(int fd, bool *known);
/* Give a kernel pipe on fd room for big splices. */
void grow_out_pipe(int fd);
/*
 * Report a failed transfer.  EPIPE on the output ends the command: by
 * SIGPIPE where that is at its default, else after the message, status 1.
 */
void report_xfer(const struct xfer *x, int err, const char *in_name, const char *out_name);

/* -------------------------------------------------------------------------
 * Progress on stderr (progress.c): bytes, time, the current rate, and a
 * bar, percentage and ETA when the total is known.
 */
struct progress {
	bool on;
	bool tty;			/* redraw one line with \r */
	bool known;			/* total is meaningful */
	bool in_out;			/* show the input's rate beside the output's */
	uint64_t total;
	_Atomic uint64_t done;		/* bytes written */
	_Atomic uint64_t in_done;	/* bytes read, where in_out */
	struct timespec start;
	double last;			/* seconds since start of the last report */
	uint64_t last_done, last_in_done;	/* the counts then */
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
void progress_add_in(struct progress *p, uint64_t n);
/* Print a report if one is due (or always, with final: the line is ended). */
void progress_tick(struct progress *p, bool final);
/* Around a message on stderr: it gets a line of its own, from any thread. */
void progress_message_begin(void);
void progress_message_end(void);
/* End a drawn progress line (before dying of a signal; exit() does it). */
void progress_end_line(void);
double now_since(const struct timespec *start);

/* -------------------------------------------------------------------------
 * Options.  parse_opts() handles --help, --progress and --no-progress for
 * every command, then the command's own; it returns the index of the first
 * operand, -1 after a usage error (reported) or -2 after --help or
 * --version (done).  Operands are moved after the options (GNU getopt).
 */
enum {
	OPT_HELP = 0x100,
	OPT_PROGRESS,
	OPT_NO_PROGRESS,
	OPT_PREFIX,
	OPT_BYTES,
	OPT_VERSION,
	OPT_OUTPUT_ERROR,
	OPT_MAX_CONNS,
};

/* What tee does when an output fails, as GNU tee's --output-error. */
enum output_error {
	OUTPUT_ERROR_SIGPIPE,		/* no option: EPIPE as SIGPIPE would */
	OUTPUT_ERROR_WARN,
	OUTPUT_ERROR_WARN_NOPIPE,
	OUTPUT_ERROR_EXIT,
	OUTPUT_ERROR_EXIT_NOPIPE,
};

struct opts {
	enum progress_mode progress;
	const char *prefix;
	uint64_t bytes;
	bool have_bytes;
	bool append;
	bool verbose;
	bool ignore_interrupts;		/* tee -i */
	int output_error;		/* enum output_error */
	uint64_t size;
	uint64_t size_max;		/* -s: the largest a command takes; 0: BUFFER_MAX */
	const char *size_range;		/* -s: said when refused, with size_max */
	uint64_t timeout_ms;		/* relay -T; 0: none */
	unsigned long max_conns;	/* relay --max-conns; 0: no limit */
	unsigned int threads;		/* relay -j; 0: the default */
};

struct option;
int parse_opts(int argc, char **argv, const char *shortopts,
	       const struct option *extra, const char *usage, struct opts *o);
void try_help(void);
/* Exactly `want` operands from argv[first], or a GNU-style message and -1. */
int check_operands(int argc, char **argv, int first, int want);

int cmd_cat(int argc, char **argv);
int cmd_tee(int argc, char **argv);
int cmd_copy(int argc, char **argv);
int cmd_buffer(int argc, char **argv);
int cmd_relay(int argc, char **argv);
int cmd_send(int argc, char **argv);
int cmd_recv(int argc, char **argv);

#endif /* PAGEPIPE_TOOL_H */
