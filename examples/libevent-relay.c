// SPDX-License-Identifier: MIT
/*
 * libevent-relay - pagepipes in a libevent loop, through pp_file_event_fd().
 *
 *	./libevent-relay [MIB]
 *
 * A producer thread writes MIB MiB (default 32) of numbered bytes into
 * pagepipe A with ordinary blocking writes.  The loop, in the main
 * thread, relays them into pagepipe B: it watches A's read end until a
 * read brings a chunk, then B's write end until the chunk is written,
 * both ends non-blocking.  A consumer thread reads B with blocking reads
 * and checks every byte and the total.  Exit 0 when all arrived intact.
 *
 * The event descriptor is a plain descriptor, so an EV_READ event
 * watches it like a socket; it polls readable exactly while the pagepipe end is
 * ready (data or end of file for a read end, a free slot or no reader for
 * a write end).  It belongs to the pipe: the loop never reads or closes
 * it, and stops watching it before closing the ends.  Since only the
 * loop reads A and writes B, a wakeup whose call then says EAGAIN would
 * mean the descriptor was ready while the end was not: that is counted
 * and fails the run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pagepipe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#define CHUNK	100000		/* not a page multiple: writes end mid-page */

static unsigned char byte_at(unsigned long long pos)
{
	return (unsigned char)((pos * 2654435761u) >> 11 ^ pos);
}

struct relay {
	struct pp_file *a[2], *b[2];
	struct event *a_rd, *b_wr;	/* on A's read end, B's write end */
	unsigned char buf[CHUNK];
	size_t len, off;	/* buf[off, len) still to be written to B */
	unsigned long long total, relayed;
	unsigned long spurious, wakeups;
	int error;
};

static void *producer(void *arg)
{
	struct relay *r = arg;
	unsigned char chunk[65536];
	unsigned long long pos = 0;
	unsigned int seed = 1;

	while (pos < r->total) {
		size_t n = 1 + (seed = seed * 1103515245u + 12345u) % sizeof(chunk);

		if (n > r->total - pos)
			n = (size_t)(r->total - pos);
		for (size_t i = 0; i < n; i++)
			chunk[i] = byte_at(pos + i);
		for (size_t done = 0; done < n; ) {
			ssize_t w = pp_write(r->a[1], chunk + done, n - done);

			if (w < 0) {
				perror("producer: pp_write");
				pp_close(r->a[1]);
				return (void *)1;
			}
			done += (size_t)w;
		}
		pos += n;
	}
	pp_close(r->a[1]);	/* the loop reads end of file */
	return NULL;
}

static void *consumer(void *arg)
{
	struct relay *r = arg;
	unsigned char buf[70000];
	unsigned long long pos = 0;
	ssize_t n;

	void *ret = NULL;

	while ((n = pp_read(r->b[0], buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n && !ret; i++) {
			if (buf[i] != byte_at(pos + (size_t)i)) {
				fprintf(stderr, "consumer: byte %llu is 0x%02x, want 0x%02x\n",
					pos + (size_t)i, buf[i], byte_at(pos + (size_t)i));
				ret = (void *)1;
			}
		}
		if (ret)
			break;
		pos += (size_t)n;
	}
	if (n < 0) {
		perror("consumer: pp_read");
		ret = (void *)1;
	} else if (!ret && pos != r->total) {
		fprintf(stderr, "consumer: %llu bytes, want %llu\n", pos, r->total);
		ret = (void *)1;
	}
	pp_close(r->b[0]);	/* on a failure, the loop's next write is EPIPE */
	return ret;
}

static void fail(struct relay *r, const char *what)
{
	perror(what);
	r->error = 1;
	event_del(r->a_rd);
	event_del(r->b_wr);
}

static void on_b_writable(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	ssize_t n;

	(void)fd;
	(void)what;
	r->wakeups++;
	n = pp_write(r->b[1], r->buf + r->off, r->len - r->off);
	if (n < 0) {
		if (errno == EAGAIN) {
			r->spurious++;
			return;
		}
		fail(r, "pp_write to B");
		return;
	}
	r->off += (size_t)n;
	r->relayed += (size_t)n;
	if (r->off == r->len) {
		/* All written: wait for the next chunk instead. */
		event_del(r->b_wr);
		event_add(r->a_rd, NULL);
	}
}

static void on_a_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	ssize_t n;

	(void)fd;
	(void)what;
	r->wakeups++;
	n = pp_read(r->a[0], r->buf, sizeof(r->buf));
	if (n < 0) {
		if (errno == EAGAIN) {
			r->spurious++;
			return;
		}
		fail(r, "pp_read from A");
		return;
	}
	event_del(r->a_rd);
	if (n == 0)
		return;		/* end of file: no event is pending, the loop returns */
	r->len = (size_t)n;
	r->off = 0;
	event_add(r->b_wr, NULL);
}

int main(int argc, char **argv)
{
	static struct relay r;
	struct event_base *base;
	pthread_t prod, cons;
	void *prod_ret, *cons_ret;
	int a_fd, b_fd;

	r.total = (unsigned long long)(argc > 1 ? strtoul(argv[1], NULL, 0) : 32) << 20;
	/* EPIPE without SIGPIPE: a side that fails closes its end, the others stop. */
	if (pp_pipe2(r.a, PP_O_NOSIGPIPE) < 0 || pp_pipe2(r.b, PP_O_NOSIGPIPE) < 0) {
		perror("pp_pipe2");
		return 1;
	}
	/* The loop's ends never block; the threads' ends do. */
	if (pp_fcntl(r.a[0], F_SETFL, O_NONBLOCK) < 0 || pp_fcntl(r.b[1], F_SETFL, O_NONBLOCK) < 0) {
		perror("pp_fcntl");
		return 1;
	}
	a_fd = pp_file_event_fd(r.a[0]);	/* readable: A has data or EOF */
	b_fd = pp_file_event_fd(r.b[1]);	/* readable: B has a free slot */
	if (a_fd < 0 || b_fd < 0) {
		perror("pp_file_event_fd");
		return 1;
	}
	base = event_base_new();
	if (!base) {
		fprintf(stderr, "event_base_new failed\n");
		return 1;
	}
	/* EV_PERSIST: level-triggered, the event stays until event_del(). */
	r.a_rd = event_new(base, a_fd, EV_READ | EV_PERSIST, on_a_readable, &r);
	r.b_wr = event_new(base, b_fd, EV_READ | EV_PERSIST, on_b_writable, &r);
	if (!r.a_rd || !r.b_wr) {
		fprintf(stderr, "event_new failed\n");
		return 1;
	}
	event_add(r.a_rd, NULL);

	if (pthread_create(&prod, NULL, producer, &r) || pthread_create(&cons, NULL, consumer, &r)) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}
	event_base_dispatch(base);

	/* Stop watching the descriptors before the pipes, which own them, go. */
	event_free(r.a_rd);
	event_free(r.b_wr);
	event_base_free(base);
	pp_close(r.a[0]);
	pp_close(r.b[1]);	/* the consumer reads end of file */
	pthread_join(prod, &prod_ret);
	pthread_join(cons, &cons_ret);

	printf("libevent-relay: %llu of %llu bytes relayed, %lu wakeups, %lu with nothing to do\n",
	       r.relayed, r.total, r.wakeups, r.spurious);
	if (r.error || prod_ret || cons_ret || r.relayed != r.total || r.spurious) {
		fprintf(stderr, "libevent-relay: FAILED\n");
		return 1;
	}
	return 0;
}
