/* SPDX-License-Identifier: MIT */
/*
 * chan-io.h - write_all(), read_full() and read_some() over a benchmark's
 * own channel.
 *
 * pipe-threads and pipe-procs each have a `struct chan` of their own (a
 * kernel pipe, a pagepipe, a socket, a ring...) with chan_write() and
 * chan_read() of read(2)'s and write(2)'s manners: -1 and errno, 0 at EOF.
 * Include this after those are defined; the loops are then the same code,
 * inlined into each program with no call through a pointer, so no column
 * pays for the sharing.
 */
#ifndef PP_BENCH_CHAN_IO_H
#define PP_BENCH_CHAN_IO_H

/* All of buf: 0, or the errno that stopped it. */
static int write_all(struct chan *c, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = chan_write(c, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* len bytes, fewer only at EOF; or -errno. */
static ssize_t read_full(struct chan *c, char *buf, size_t len)
{
	size_t have = 0;

	while (have < len) {
		ssize_t n = chan_read(c, buf + have, len - have);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!n)
			break;
		have += (size_t)n;
	}
	return (ssize_t)have;
}

/* What is there, up to len (a read(2)): n, 0 at EOF, or -errno; EINTR is retried. */
static ssize_t read_some(struct chan *c, char *buf, size_t len)
{
	for (;;) {
		ssize_t n = chan_read(c, buf, len);

		if (n >= 0 || errno != EINTR)
			return n < 0 ? -errno : n;
	}
}

#endif /* PP_BENCH_CHAN_IO_H */
