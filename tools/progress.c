// SPDX-License-Identifier: MIT
/*
 * progress.c - the progress line on standard error, on pv's model.
 *
 * On a terminal one line is redrawn in place, cut to the terminal's width
 * (asked again at every redraw, so that a resized window is followed):
 * bytes, elapsed time, the current rate (over the last interval, not the
 * average since the start) and, when the total is known, a bar, the
 * percentage and an ETA from the current rate.  Into a file or a pipe it is
 * one plain line a second.  The last report shows the average rate and
 * ends the line; so do exit() and a fatal signal (Ctrl-C), so that the
 * shell's prompt never lands on it.  Messages (warnx) clear the line, print
 * on their own line and redraw it, from any thread.
 */
#include "tool.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The one line on the terminal; the lock orders it with messages. */
static pthread_mutex_t line_lock = PTHREAD_MUTEX_INITIALIZER;
static char line[512];
/* A line is on the terminal without its newline (read by the signal handler). */
static volatile sig_atomic_t drawn;

double now_since(const struct timespec *start)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - start->tv_sec) + (double)(t.tv_nsec - start->tv_nsec) / 1e9;
}

void format_bytes(char *buf, size_t n, double v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, n, "%.1f %s", v, unit[u]);
}

/* pv's compact units: "230MiB", "1.2GiB". */
static void format_short(char *buf, size_t n, double v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, u && v < 100 ? "%.1f%s" : "%.0f%s", v, unit[u]);
}

static void format_time(char *buf, size_t n, double s)
{
	unsigned long t = s > 0 && s < 360000000 ? (unsigned long)(s + 0.5) : 0;

	snprintf(buf, n, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
}

static void end_line(void)
{
	if (drawn) {
		drawn = 0;
		(void)!write(STDERR_FILENO, "\n", 1);
	}
}

static void on_fatal_signal(int sig)
{
	/* Only async-signal-safe calls: end the line, then die of the signal. */
	if (drawn)
		(void)!write(STDERR_FILENO, "\n", 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

void progress_end_line(void)
{
	pthread_mutex_lock(&line_lock);
	end_line();
	pthread_mutex_unlock(&line_lock);
}

/* Once: end the line at exit and on the signals that end a command. */
static void hook_exit(void)
{
	static bool done;
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

	if (done)
		return;
	done = true;
	atexit(progress_end_line);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old, sa = { .sa_handler = on_fatal_signal };

		sigemptyset(&sa.sa_mask);
		/* Leave alone what was ignored on purpose (tee -i, nohup). */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
			sigaction(sigs[i], &sa, NULL);
	}
}

void progress_init(struct progress *p, enum progress_mode mode)
{
	memset(p, 0, sizeof(*p));
	p->tty = isatty(STDERR_FILENO);
	p->on = mode == PROGRESS_ON || (mode == PROGRESS_AUTO && p->tty);
	atomic_init(&p->done, 0);
	atomic_init(&p->in_done, 0);
	clock_gettime(CLOCK_MONOTONIC, &p->start);
	if (p->on && p->tty)
		hook_exit();
}

void progress_add(struct progress *p, uint64_t n)
{
	atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}

void progress_add_in(struct progress *p, uint64_t n)
{
	atomic_fetch_add_explicit(&p->in_done, n, memory_order_relaxed);
}

static int term_width(void)
{
	struct winsize ws;
	const char *cols = getenv("COLUMNS");

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (cols && atoi(cols) > 0)
		return atoi(cols);
	return 80;
}

/* The fields of one report, each already formatted; empty when not shown. */
enum field {
	F_BYTES,	/* "1.2 GiB" */
	F_PCT,		/* " 45%" */
	F_RATE,		/* " [230.0 MiB/s]" */
	F_ETA,		/* " ETA 0:00:06" */
	F_TIME,		/* " 0:00:05" */
	F_TOTAL,	/* " of 8.0 GiB" */
	F_EXTRA,	/* the command's own */
	F_NR,
};

/* The order on the line, and the order fields are dropped in when it is too narrow. */
static const enum field show_order[] = { F_BYTES, F_TOTAL, F_TIME, F_RATE, F_EXTRA, F_PCT, F_ETA };
static const enum field drop_order[] = { F_EXTRA, F_TOTAL, F_TIME, F_ETA, F_RATE, F_PCT };

static size_t fields_len(char f[F_NR][128])
{
	size_t n = 0;

	for (int i = 0; i < F_NR; i++)
		n += strlen(f[i]);
	return n;
}

/* Put the fields on the line, with a bar of bar_w cells before the percentage. */
static void compose(char *out, size_t n, char f[F_NR][128], int bar_w, double frac)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(show_order) / sizeof(show_order[0]); i++) {
		enum field k = show_order[i];

		if (k == F_PCT && bar_w > 2) {
			int fill = (int)(frac * (bar_w - 2) + 0.5);

			len += (size_t)snprintf(out + len, n - len, " [");
			for (int j = 0; j < bar_w - 2 && len + 2 < n; j++)
				out[len++] = j < fill ? '=' : (j == fill ? '>' : ' ');
			out[len] = '\0';
			len += (size_t)snprintf(out + len, n - len, "]");
		}
		len += (size_t)snprintf(out + len, n - len, "%s", f[k]);
		if (len >= n)
			return;
	}
}

/* Format each field of one report into f. */
static void fill_fields(struct progress *p, char f[F_NR][128], double t, double rate,
			double in_rate, uint64_t done, bool final, double *frac)
{
	char b[32], r[32];

	format_short(f[F_BYTES], sizeof(f[F_BYTES]), (double)done);
	format_time(b, sizeof(b), t);
	snprintf(f[F_TIME], sizeof(f[F_TIME]), " %s", b);
	format_short(r, sizeof(r), rate);
	if (p->in_out) {
		format_short(b, sizeof(b), in_rate);
		snprintf(f[F_RATE], sizeof(f[F_RATE]), " [in %s/s out %s/s]", b, r);
	} else {
		snprintf(f[F_RATE], sizeof(f[F_RATE]), " [%s/s]", r);
	}
	*frac = 0;
	if (p->known && p->total) {
		*frac = (double)done / (double)p->total;
		if (*frac > 1)
			*frac = 1;
		format_short(b, sizeof(b), (double)p->total);
		snprintf(f[F_TOTAL], sizeof(f[F_TOTAL]), " of %s", b);
		snprintf(f[F_PCT], sizeof(f[F_PCT]), " %3.0f%%", *frac * 100);
		if (!final && rate > 0) {
			format_time(b, sizeof(b), (double)(p->total > done ? p->total - done : 0) / rate);
			snprintf(f[F_ETA], sizeof(f[F_ETA]), " ETA %s", b);
		}
	}
	if (p->extra)
		snprintf(f[F_EXTRA], sizeof(f[F_EXTRA]), " %s", p->extra(p->extra_arg));
}

/* Redraw the terminal's line, as much of it as fits; the caller holds line_lock. */
static void draw_tty(char f[F_NR][128], bool bar, double frac, bool final)
{
	/* One column spare: writing the last one makes some terminals wrap. */
	int width = term_width() - 1, bar_w = 0;

	if (width > (int)sizeof(line) - 1)
		width = (int)sizeof(line) - 1;
	for (size_t i = 0; fields_len(f) > (size_t)width &&
			   i < sizeof(drop_order) / sizeof(drop_order[0]); i++)
		f[drop_order[i]][0] = '\0';
	if (bar && f[F_PCT][0])
		bar_w = width - (int)fields_len(f) - 1;
	if (bar_w > 60)
		bar_w = 60;
	if (bar_w < 6)
		bar_w = 0;
	compose(line, sizeof(line), f, bar_w, frac);
	line[width > 0 ? width : 0] = '\0';
	fprintf(stderr, "\r%s\033[K", line);
	drawn = 1;
	if (final) {
		fputc('\n', stderr);
		drawn = 0;
	}
}

void progress_tick(struct progress *p, bool final)
{
	uint64_t done = atomic_load_explicit(&p->done, memory_order_relaxed);
	uint64_t in_done = atomic_load_explicit(&p->in_done, memory_order_relaxed);
	char f[F_NR][128] = { { 0 } };
	double t, dt, rate, in_rate, frac;

	if (!p->on)
		return;
	t = now_since(&p->start);
	/* Twice a second on a terminal; once a second into a log. */
	dt = t - p->last;
	if (!final && dt < (p->tty ? 0.5 : 1.0))
		return;
	/* The current rate is that of the last interval; the final one the average. */
	rate = final ? (t > 0 ? (double)done / t : 0) :
		       (dt > 0 ? (double)(done - p->last_done) / dt : 0);
	in_rate = final ? (t > 0 ? (double)in_done / t : 0) :
			  (dt > 0 ? (double)(in_done - p->last_in_done) / dt : 0);
	p->last = t;
	p->last_done = done;
	p->last_in_done = in_done;
	fill_fields(p, f, t, rate, in_rate, done, final, &frac);

	pthread_mutex_lock(&line_lock);
	if (p->tty) {
		draw_tty(f, p->known && p->total, frac, final);
	} else {
		compose(line, sizeof(line), f, 0, frac);
		fprintf(stderr, "%s\n", line);
	}
	fflush(stderr);
	pthread_mutex_unlock(&line_lock);
}

void progress_message_begin(void)
{
	pthread_mutex_lock(&line_lock);
	fflush(stdout);
	if (drawn)
		fputs("\r\033[K", stderr);
}

void progress_message_end(void)
{
	/* The message ended its line: put the progress line back under it. */
	if (drawn)
		fprintf(stderr, "\r%s\033[K", line);
	fflush(stderr);
	pthread_mutex_unlock(&line_lock);
}
