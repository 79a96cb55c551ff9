// SPDX-License-Identifier: MIT
/*
 * progress.c - the progress line on standard error: bytes, rate, and the
 * percentage and time left when the total is known.
 */
#include "tool.h"

#include <string.h>
#include <unistd.h>

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

void progress_init(struct progress *p, enum progress_mode mode)
{
	memset(p, 0, sizeof(*p));
	p->tty = isatty(STDERR_FILENO);
	p->on = mode == PROGRESS_ON || (mode == PROGRESS_AUTO && p->tty);
	atomic_init(&p->done, 0);
	clock_gettime(CLOCK_MONOTONIC, &p->start);
}

void progress_add(struct progress *p, uint64_t n)
{
	atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}

void progress_tick(struct progress *p, bool final)
{
	uint64_t done = atomic_load_explicit(&p->done, memory_order_relaxed);
	double t, rate;
	char b[32], r[32], line[256];
	int len;

	if (!p->on)
		return;
	t = now_since(&p->start);
	/* Twice a second on a terminal; once a second into a log. */
	if (!final && t - p->last < (p->tty ? 0.5 : 1.0))
		return;
	p->last = t;
	rate = t > 0 ? (double)done / t : 0;
	format_bytes(b, sizeof(b), (double)done);
	format_bytes(r, sizeof(r), rate);
	len = snprintf(line, sizeof(line), "%s %s/s %.1fs", b, r, t);
	if (p->known && p->total && len > 0 && (size_t)len < sizeof(line)) {
		double pct = 100.0 * (double)done / (double)p->total;
		char tot[32];

		format_bytes(tot, sizeof(tot), (double)p->total);
		if (pct > 100)
			pct = 100;
		if (final || rate <= 0)
			len += snprintf(line + len, sizeof(line) - (size_t)len, " of %s %3.0f%%",
					tot, pct);
		else
			len += snprintf(line + len, sizeof(line) - (size_t)len,
					" of %s %3.0f%% ETA %.0fs", tot, pct,
					(double)(p->total > done ? p->total - done : 0) / rate);
	}
	if (p->extra && len > 0 && (size_t)len < sizeof(line))
		snprintf(line + len, sizeof(line) - (size_t)len, " %s", p->extra(p->extra_arg));
	if (p->tty)
		fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
	else
		fprintf(stderr, "%s\n", line);
	fflush(stderr);
}
