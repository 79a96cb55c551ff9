// SPDX-License-Identifier: MIT
/*
 * relay.c - pagepipe relay LISTEN TARGET: a TCP relay through pagepipes.
 *
 * A few worker threads (-j, default the online CPUs up to 8), each with
 * its own epoll instance, serve the connections; a connection belongs to
 * one worker for its whole life (see hand_out() for how it gets there).  A
 * relay is a service people leave running, so an idle connection must cost next to
 * nothing: two non-blocking sockets and a struct conn, no thread and no
 * buffer.  Each direction gets its pagepipe (and each socket its pp_fdopen
 * file) on its first readable event, and bytes go socket -> pagepipe ->
 * socket by pp_splice with SPLICE_F_NONBLOCK.  Whatever the library does
 * underneath (copies into pages, or leaves the bytes in the kernel), the
 * loop only counts what each splice moved.
 *
 * Backpressure: a direction reads its source only while its pagepipe is
 * empty, or opportunistically while it has room; once the destination
 * says EAGAIN the source is no longer watched, and the destination's
 * EPOLLOUT drives both the drain and the next read.  So a slow reader
 * holds at most one pagepipe of bytes per direction, and the sender is
 * slowed by TCP itself.  A pagepipe starts at 64 KiB, grows to 1 MiB for
 * a bulk flow, and goes back after two seconds without traffic.
 *
 * Shutdown rules, as a TCP proxy must keep them: end of file on one side
 * is passed on as shutdown(SHUT_WR) to the other once the pagepipe has
 * drained, and the other direction goes on until it ends too; an error in
 * either direction (a reset, a write to a peer that went away) closes the
 * whole connection at once.
 *
 * Service behaviour: -T closes a connection that moved no byte either way
 * for that long (socat -T); --max-conns accepts and closes at once what
 * comes beyond the limit, so a client sees an end of file rather than a
 * connection that hangs in the backlog (but a relay out of descriptors
 * leaves clients there: the socket to the target is made before the
 * accept); SIGTERM or SIGINT stops accepting
 * and waits for the open connections to end, a second one ends the relay
 * at once.  Signals arrive through a signalfd in worker 0, so nothing runs
 * in a signal handler; it tells the other workers through their mailboxes.
 */
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

static const char usage_relay[] =
	"Usage: pagepipe relay [OPTION]... LISTEN TARGET\n"
	"Accept TCP connections on LISTEN and relay each, both ways, to TARGET,\n"
	"through pagepipes with splice.  LISTEN and TARGET are HOST:PORT (IPv6 as\n"
	"[ADDR]:PORT).  The end of one direction is passed on as a half-close; an\n"
	"error or a reset on either side closes the whole connection.  Worker\n"
	"threads, each with its own epoll, serve all connections; an idle one holds\n"
	"no buffer.  With LISTEN port 0 the port chosen is printed on standard\n"
	"output as HOST:PORT.\n"
	"\n"
	"  -j, --threads=N        serve connections with N worker threads (1 to\n"
	"                         256); the default is the online CPUs, at most 8\n"
	"  -T, --timeout=SECONDS  close a connection that moved no byte in either\n"
	"                         direction for SECONDS (decimals allowed; like\n"
	"                         socat -T); the default is no timeout\n"
	"      --max-conns=N      serve at most N connections at once; one beyond\n"
	"                         that is accepted and closed at once\n"
	"  -v, --verbose          log the start, each connection and its end on\n"
	"                         standard error, with a UTC timestamp\n"
	"      --progress         show connections and bytes on standard error\n"
	"      --no-progress      do not (the default)\n"
	"      --help             display this help and exit\n"
	"      --version          output version information and exit\n"
	"\n"
	"SIGTERM or SIGINT: stop accepting, let open connections end, then exit 0;\n"
	"a second signal ends the relay at once.  The open files limit is raised\n"
	"to the hard limit (as root, the hard limit to fs.nr_open first).\n"
	"Log lines: pagepipe relay: TIME #ID CLIENT -> TARGET: EVENT\n";

/*
 * Per-direction pagepipe: it starts at the default 64 KiB (16 slots, about
 * 1 KB of ring) and grows to a bare splice loop's 1 MiB (256 slots, about
 * 13 KB) once a read brings half the small one, so that only a busy
 * direction pays for the big ring.
 */
#define RELAY_STAGE_MIN	(64u << 10)
#define RELAY_STAGE	(1u << 20)
/* A connection this long without traffic gives its pagepipes back. */
#define RELAY_RELEASE_MS	2000
/* Releases that make it worth giving memory back to the system. */
#define RELAY_TRIM_AFTER	256
/* struct conn comes in slabs of this many, outside malloc's heap. */
#define CONN_SLAB	512
/* Splice rounds per direction per event, so that one flow cannot starve the rest. */
#define RELAY_ROUNDS	8
/* Reads again at once per direction, to grow the library's kernel pipe (dir_run). */
#define RELAY_PROBES	6
/* Connections accepted per listener event, for the same reason. */
#define ACCEPT_BATCH	64
#define MAX_EVENTS	256
/* -j default: the online CPUs, up to this many worker threads. */
#define RELAY_MAX_DEFAULT	8
/* After EMFILE and the like, the listener rests this long, or until a close. */
#define ACCEPT_PAUSE_MS	1000

struct conn;

/* One socket of a connection; epoll's data points here. */
struct end {
	struct conn *c;
	int fd;
	struct pp_file *f;		/* pp_fdopen(fd), made with the first pagepipe */
	uint32_t ev;			/* the events registered */
	bool added;			/* registered with epoll at all */
};

/* One direction: end[src] -> pagepipe -> end[!src]. */
struct dir {
	struct pp_file *pipe[2];	/* made on first data */
	size_t size;			/* the pagepipe's size */
	size_t queued;			/* bytes in the pagepipe */
	uint64_t bytes;			/* delivered to the destination */
	size_t best;			/* the largest read so far */
	unsigned int probes;		/* reads again at once, to grow the kernel's pipe */
	bool eof;			/* the source ended */
	bool shut;			/* and that was passed on */
};

enum conn_state { CONN_CONNECTING, CONN_OPEN, CONN_DEAD };

struct conn {
	struct end end[2];		/* 0: the client, 1: the target */
	struct dir dir[2];		/* 0: client -> target, 1: target -> client */
	struct conn *prev, *next;	/* by last activity, oldest first; the dead list */
	struct conn *bprev, *bnext;	/* the same, of those holding pagepipes */
	bool buffered;			/* on that second list */
	uint64_t start_ms, last_ms;
	unsigned long id;
	enum conn_state state;
	char peer[56];			/* the client's address, for the log */
};

/* What the workers share: counters, the progress line, the stop flags. */
struct shared {
	struct progress pg;
	_Atomic unsigned long active, total;
	atomic_bool draining;		/* SIGTERM or SIGINT came: no new connection */
	atomic_bool quit;		/* the relay ends now: close everything */
	unsigned int nworkers;
	struct relay **workers;
	unsigned int next;		/* the acceptor's round-robin start */
	char extra[64];
};

/*
 * One worker: a thread with its own epoll instance and its own connections,
 * which no other thread touches, so the data path takes no lock.  Worker 0
 * is the main thread; it also holds the listener and the signalfd.
 */
struct relay {
	struct shared *sh;
	unsigned int index;
	pthread_t thread;
	/* The configuration, the same in every worker (copied before the threads start). */
	struct sockaddr_storage target;
	socklen_t target_len;
	const char *target_name;	/* as given, for connect errors */
	char target_addr[56];		/* numeric, for the log */
	bool verbose;
	uint64_t timeout_ms;		/* 0: none */
	unsigned long max_conns;	/* 0: no limit */

	int epfd, lfd, sfd;
	int mbox[2];			/* this worker's mailbox: a kernel pipe of struct msg */
	_Atomic unsigned long nconns;	/* connections handed to this worker and not closed */
	unsigned int done;		/* worker 0: workers that have ended */
	int spare;			/* the next connection's socket to the target */
	bool draining, listen_paused;
	bool short_logged;		/* the shortage of descriptors was reported */
	uint64_t resume_ms;		/* when a paused listener is watched again */
	struct conn *oldest, *newest;	/* the idle-timeout list */
	struct conn *boldest, *bnewest;	/* those holding pagepipes */
	unsigned long released;		/* pagepipe pairs given back since the last trim */
	struct conn *dead;		/* closed in this batch, freed after it */
	struct conn *free_conns;	/* from the slabs, for the next accepts */
	bool sigint;			/* SIGINT is handled (it was not ignored) */
	char tag_mbox;			/* epoll's data for the mailbox */
};

/*
 * The acceptor's word to a worker.  At most PIPE_BUF bytes, so that each
 * write to a mailbox is whole, and readers see whole messages.
 */
enum msg_type { MSG_CONN, MSG_WAKE, MSG_DONE };

struct msg {
	enum msg_type type;
	int fd, spare;			/* MSG_CONN: the client, the socket to the target */
	socklen_t sl;
	unsigned long id;
	struct sockaddr_storage ss;
};
_Static_assert(sizeof(struct msg) <= PIPE_BUF, "a mailbox message must be one atomic write");

/* Tags for epoll's data: the listener and the signalfd are no struct end. */
static char tag_listen, tag_signal;

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* "2026-12-04T16:50:00.123Z": ISO 8601, UTC, milliseconds. */
static void timestamp(char *buf, size_t n)
{
	struct timespec t;
	struct tm tm;
	size_t len;

	clock_gettime(CLOCK_REALTIME, &t);
	gmtime_r(&t.tv_sec, &tm);
	len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + len, n - len, ".%03ldZ", t.tv_nsec / 1000000);
}

/* A log line: TIME [#ID CLIENT -> TARGET: ]TEXT.  c may be NULL. */
static void __attribute__((format(printf, 3, 4)))
rlog(const struct relay *r, const struct conn *c, const char *fmt, ...)
{
	char ts[40], text[512];
	va_list ap;

	timestamp(ts, sizeof(ts));
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (c)
		warnx("%s #%lu %s -> %s: %s", ts, c->id, c->peer, r->target_addr, text);
	else
		warnx("%s %s", ts, text);
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char *buf, size_t n)
{
	char h[NI_MAXHOST], p[NI_MAXSERV];

	if (getnameinfo(sa, len, h, sizeof(h), p, sizeof(p), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(buf, n, "?");
		return;
	}
	snprintf(buf, n, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
}

/* Split HOST:PORT or [HOST]:PORT; the result points into buf. */
static int split_hostport(const char *s, char *buf, size_t n, char **host, char **port)
{
	char *colon;

	if (strlen(s) >= n)
		return -ENAMETOOLONG;
	strcpy(buf, s);
	if (buf[0] == '[') {
		char *end = strchr(buf, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		*end = '\0';
		*host = buf + 1;
		*port = end + 2;
	} else {
		colon = strrchr(buf, ':');
		if (!colon)
			return -EINVAL;
		*colon = '\0';
		*host = buf;
		*port = colon + 1;
	}
	if (!**port)
		return -EINVAL;
	return 0;
}

/*
 * A port is a decimal number, 1 to 65535; 0 only where the kernel may
 * choose (a listening address).  getaddrinfo() alone would take 99999 as
 * 34463 and "-1" as 65535, and a service name is no port either.
 */
static bool valid_port(const char *port, bool passive)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)*port) || strlen(port) > 5)
		return false;
	v = strtoul(port, &end, 10);
	return !*end && v <= 65535 && (v || passive);
}

static int resolve(const char *s, bool passive, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = passive ? AI_PASSIVE : 0,
	}, *res;
	char buf[512], *host, *port;
	int err = split_hostport(s, buf, sizeof(buf), &host, &port);

	if (err)
		return err;
	if (!valid_port(port, passive)) {
		warnx("'%s': invalid port '%s' (%s to 65535)", s, port, passive ? "0" : "1");
		return -ERANGE;
	}
	err = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (err) {
		warnx("%s: %s", s, gai_strerror(err));
		return -EADDRNOTAVAIL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ------------------------------------------------------------------------
 * Watching sockets.  An end is in the epoll set only while the loop wants
 * something from it: a socket both of whose directions are waiting on the
 * other side would otherwise report EPOLLHUP over and over.
 */
static int watch(struct relay *r, struct end *e, uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.ptr = e };
	int op;

	if (!want) {
		if (e->added && epoll_ctl(r->epfd, EPOLL_CTL_DEL, e->fd, NULL) < 0)
			return -errno;
		e->added = false;
		e->ev = 0;
		return 0;
	}
	if (e->added && e->ev == want)
		return 0;
	op = e->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(r->epfd, op, e->fd, &ev) < 0)
		return -errno;
	e->added = true;
	e->ev = want;
	return 0;
}

/* A direction reads only while its pagepipe is empty: that is the backpressure. */
static bool dir_reading(const struct dir *d)
{
	return !d->eof && !d->queued;
}

static int update_watch(struct relay *r, struct conn *c)
{
	for (int i = 0; i < 2; i++) {
		uint32_t want = 0;
		int err;

		/* end i is the source of dir[i] and the destination of dir[!i]. */
		if (dir_reading(&c->dir[i]))
			want |= EPOLLIN;
		if (c->dir[!i].queued)
			want |= EPOLLOUT;
		err = watch(r, &c->end[i], want);
		if (err)
			return err;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * The idle list: connections by the time of their last byte, oldest first,
 * so that the timeout looks only at its head.
 */
static void list_del(struct relay *r, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		r->oldest = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		r->newest = c->prev;
	c->prev = c->next = NULL;
}

static void list_add(struct relay *r, struct conn *c)
{
	c->prev = r->newest;
	c->next = NULL;
	if (r->newest)
		r->newest->next = c;
	else
		r->oldest = c;
	r->newest = c;
}

static void blist_del(struct relay *r, struct conn *c)
{
	if (!c->buffered)
		return;
	if (c->bprev)
		c->bprev->bnext = c->bnext;
	else
		r->boldest = c->bnext;
	if (c->bnext)
		c->bnext->bprev = c->bprev;
	else
		r->bnewest = c->bprev;
	c->bprev = c->bnext = NULL;
	c->buffered = false;
}

static void blist_add(struct relay *r, struct conn *c)
{
	c->bprev = r->bnewest;
	c->bnext = NULL;
	if (r->bnewest)
		r->bnewest->bnext = c;
	else
		r->boldest = c;
	r->bnewest = c;
	c->buffered = true;
}

/* Bytes moved: the connection goes to the young end of both lists. */
static void touch(struct relay *r, struct conn *c, uint64_t now)
{
	c->last_ms = now;
	if (r->newest != c) {
		list_del(r, c);
		list_add(r, c);
	}
	if (r->bnewest != c) {
		blist_del(r, c);
		blist_add(r, c);
	}
}

/* Close the pagepipes and library files of a connection; empty ones only. */
static void conn_release(struct conn *c)
{
	for (int i = 0; i < 2; i++) {
		struct dir *d = &c->dir[i];
		struct end *e = &c->end[i];

		if (d->pipe[0])
			pp_close(d->pipe[0]);
		if (d->pipe[1])
			pp_close(d->pipe[1]);
		d->pipe[0] = d->pipe[1] = NULL;
		d->size = 0;
		d->best = 0;
		d->probes = 0;
		if (e->f)
			pp_close(e->f);
		e->f = NULL;
	}
}

/* ------------------------------------------------------------------------
 * Connections.
 *
 * A struct conn lives as long as its connection, a pagepipe only while
 * bytes flow.  From malloc's heap, each long-lived struct would pin the
 * page it shares with pagepipes since freed, and the relay's resident set
 * would stay at its peak: so they come from slabs of their own, mapped as
 * needed and kept for the next connections.
 */
static struct conn *conn_alloc(struct relay *r)
{
	struct conn *c;

	if (!r->free_conns) {
		struct conn *slab = mmap(NULL, CONN_SLAB * sizeof(*slab), PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (slab == MAP_FAILED)
			return NULL;
		for (int i = CONN_SLAB - 1; i >= 0; i--) {
			slab[i].next = r->free_conns;
			r->free_conns = &slab[i];
		}
	}
	c = r->free_conns;
	r->free_conns = c->next;
	memset(c, 0, sizeof(*c));
	return c;
}
static void conn_close(struct relay *r, struct conn *c, const char *why)
{
	if (c->state == CONN_DEAD)
		return;
	if (r->verbose) {
		double s = (double)(now_ms() - c->start_ms) / 1000;

		rlog(r, c, "closed, %llu bytes up, %llu bytes down, %.3f s%s%s",
		     (unsigned long long)c->dir[0].bytes, (unsigned long long)c->dir[1].bytes,
		     s, why ? ", " : "", why ? why : "");
	}
	conn_release(c);
	/* Closing the descriptors takes them out of the epoll set too. */
	for (int i = 0; i < 2; i++)
		if (c->end[i].fd >= 0)
			close(c->end[i].fd);
	list_del(r, c);
	blist_del(r, c);
	c->state = CONN_DEAD;
	c->next = r->dead;
	r->dead = c;
	atomic_fetch_sub(&r->sh->active, 1);
	atomic_fetch_sub(&r->nconns, 1);
	/*
	 * A descriptor is free again: a listener resting after EMFILE may go
	 * on (a close in another worker is seen when the rest ends).
	 */
	r->resume_ms = 0;
}

/* Pipes and library files on first data; an idle connection has neither. */
static int conn_prepare(struct relay *r, struct conn *c, struct dir *d)
{
	int err;

	for (int i = 0; i < 2; i++) {
		struct end *e = &c->end[i];

		if (!e->f && !(e->f = pp_fdopen(e->fd)))
			return -errno;
	}
	if (!d->pipe[0]) {
		err = stage_pipe(d->pipe, RELAY_STAGE_MIN, O_NONBLOCK);
		if (err)
			return err;
		d->size = RELAY_STAGE_MIN;
		/* Even if no byte comes, they are given back in time. */
		if (!c->buffered)
			blist_add(r, c);
	}
	return 0;
}

/* The direction is busy: from the small pagepipe to the big one, once. */
static void dir_grow(struct dir *d)
{
	ssize_t size;

	if (d->size >= RELAY_STAGE)
		return;
	size = pp_pipe_set_size(d->pipe[1], RELAY_STAGE);
	/* Refused (memory, the limit): the small one still works. */
	if (size > 0)
		d->size = (size_t)size;
}

/*
 * Move what can move in direction i without waiting.  Returns 0, or
 * -errno with *what naming the side and the call that failed.
 */
static int dir_run(struct relay *r, struct conn *c, int i, const char **what)
{
	static const char *const names[2][2] = {
		{ "read from client", "write to target" },
		{ "read from target", "write to client" },
	};
	const unsigned int fl = SPLICE_F_NONBLOCK | SPLICE_F_MOVE;
	struct dir *d = &c->dir[i];
	struct end *src = &c->end[i], *dst = &c->end[!i];
	int err;

	if (d->shut)
		return 0;
	err = conn_prepare(r, c, d);
	if (err) {
		*what = "pagepipe";
		return err;
	}
	for (int round = 0; round < RELAY_ROUNDS; round++) {
		bool moved = false, blocked = false, drained = false;
		ssize_t n;

		/* While bytes wait for the destination, reading only fills the pagepipe. */
		if (!d->eof && d->queued < d->size) {
			size_t room = d->size - d->queued;

			n = pp_splice(src->f, NULL, d->pipe[1], NULL, room, fl);
			if (n > 0) {
				d->queued += (size_t)n;
				moved = true;
				/*
				 * A read that filled the pagepipe, or half of the
				 * small one (its 16 slots may fill first), is a bulk
				 * flow: give it the big one.
				 */
				if ((size_t)n == room || (size_t)n >= RELAY_STAGE_MIN / 2)
					dir_grow(d);
				/*
				 * The library keeps socket bytes in a private kernel
				 * pipe sized for the small pagepipe (128 KiB), and grows
				 * it only when a read finds it full: drained by every
				 * write, it never would, and a bulk flow would move
				 * 120 KB a splice for ever.  So a big read that came up
				 * to the best so far, short of the room, reads again at
				 * once, a few times per direction: the bytes are there,
				 * nothing waits, and the private pipe grows.  Only up
				 * to half the pagepipe: a private pipe full at its
				 * largest would send the bytes the copying way.
				 */
				if ((size_t)n >= RELAY_STAGE_MIN / 2 && (size_t)n >= d->best &&
				    d->queued < d->size / 2 && d->probes < RELAY_PROBES) {
					d->best = (size_t)n;
					d->probes++;
					round--;
					continue;
				}
				if ((size_t)n > d->best)
					d->best = (size_t)n;
				drained = (size_t)n < RELAY_STAGE_MIN / 2 && (size_t)n < room;
			} else if (n == 0) {
				d->eof = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				*what = names[i][0];
				return -errno;
			}
		}
		if (d->queued) {
			n = pp_splice(d->pipe[0], NULL, dst->f, NULL, d->queued, fl);
			if (n > 0) {
				d->queued -= (size_t)n;
				d->bytes += (uint64_t)n;
				progress_add(&r->sh->pg, (uint64_t)n);
				moved = true;
			} else if (n < 0 && errno == EAGAIN) {
				blocked = true;
			} else if (n < 0 && errno != EINTR) {
				*what = names[i][1];
				return -errno;
			}
		}
		if (d->eof && !d->queued) {
			/* Pass the half-close on; the other direction may go on. */
			shutdown(dst->fd, SHUT_WR);
			d->shut = true;
			return 0;
		}
		if (moved)
			touch(r, c, now_ms());
		/*
		 * The source is empty, or the destination full: wait for epoll.
		 * A small read that got less than it asked for most likely
		 * emptied the socket: once those bytes are out, reading again
		 * would only say EAGAIN (a splice per small message), and
		 * epoll, level-triggered, reports what came since.  Not after
		 * a big read: in a bulk flow more has come while the bytes
		 * went out, and reading it now saves an epoll_wait.
		 */
		if (!moved || blocked || (drained && !d->queued))
			break;
	}
	return 0;
}

/* After events on a connection: close it, or watch what it now waits for. */
static void conn_settle(struct relay *r, struct conn *c)
{
	int err;

	if (c->dir[0].shut && c->dir[1].shut) {
		conn_close(r, c, NULL);
		return;
	}
	err = update_watch(r, c);
	if (err) {
		char why[128];

		snprintf(why, sizeof(why), "epoll: %s", strerror(-err));
		conn_close(r, c, why);
	}
}

static void conn_failed(struct relay *r, struct conn *c, const char *what, int err)
{
	char why[300];

	snprintf(why, sizeof(why), "%s: %s", what, strerror(err));
	conn_close(r, c, why);
}

static void conn_connected(struct relay *r, struct conn *c)
{
	int one = 1;

	setsockopt(c->end[1].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->state = CONN_OPEN;
	if (r->verbose)
		rlog(r, c, "connected");
	conn_settle(r, c);
}

/* A connect that failed is the relay's business, -v or not: say so always. */
static void connect_failed(struct relay *r, struct conn *c, int err)
{
	char why[300];

	snprintf(why, sizeof(why), "connect %s: %s", r->target_name, strerror(err));
	if (!r->verbose)
		rlog(r, c, "%s", why);
	conn_close(r, c, why);
}

static void conn_event(struct relay *r, struct end *e, uint32_t ev)
{
	struct conn *c = e->c;
	int side = (int)(e - c->end), err = 0;
	socklen_t len = sizeof(err);
	const char *what = NULL;

	if (c->state == CONN_DEAD)
		return;
	if (c->state == CONN_CONNECTING) {
		if (getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err)
			connect_failed(r, c, err);
		else if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			conn_connected(r, c);
		return;
	}
	if (ev & EPOLLERR) {
		if (getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
			conn_failed(r, c, side ? "target" : "client", err);
			return;
		}
	}
	/* This end is the source of dir[side] and the destination of dir[!side]. */
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		err = dir_run(r, c, side, &what);
	if (!err && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		err = dir_run(r, c, !side, &what);
	if (err)
		conn_failed(r, c, what, -err);
	else
		conn_settle(r, c);
}

/*
 * A connection handed to this worker: the acceptor counted it (active,
 * nconns) and made its socket to the target.
 */
static void conn_start(struct relay *r, const struct msg *m)
{
	struct conn *c;
	int one = 1, s = m->spare, fd = m->fd, err;

	c = conn_alloc(r);
	if (!c) {
		close(fd);
		close(s);
		atomic_fetch_sub(&r->sh->active, 1);
		atomic_fetch_sub(&r->nconns, 1);
		return;
	}
	c->id = m->id;
	format_addr((const struct sockaddr *)&m->ss, m->sl, c->peer, sizeof(c->peer));
	for (int i = 0; i < 2; i++) {
		c->end[i].c = c;
		c->end[i].fd = -1;
	}
	c->end[0].fd = fd;
	c->start_ms = c->last_ms = now_ms();
	c->state = CONN_CONNECTING;
	list_add(r, c);
	if (r->verbose)
		rlog(r, c, "open");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	c->end[1].fd = s;
	if (connect(s, (struct sockaddr *)&r->target, r->target_len) == 0) {
		conn_connected(r, c);
		return;
	}
	if (errno != EINPROGRESS) {
		connect_failed(r, c, errno);
		return;
	}
	/* The client waits, unread, until the target answers. */
	err = watch(r, &c->end[1], EPOLLOUT);
	if (err)
		connect_failed(r, c, -err);
}

/* A word to worker w; false if its mailbox is full. */
static bool post(struct relay *w, const struct msg *m)
{
	return write(w->mbox[1], m, sizeof(*m)) == (ssize_t)sizeof(*m);
}

/* Wake every other worker to look at the flags. */
static void post_all(struct relay *r, enum msg_type type)
{
	struct msg m = { .type = type, .fd = -1, .spare = -1 };

	/* A full mailbox wakes its worker anyway. */
	for (unsigned int i = 0; i < r->sh->nworkers; i++)
		if (r->sh->workers[i] != r)
			post(r->sh->workers[i], &m);
}

/*
 * A client accepted by worker 0 (it holds the only listener): count it
 * against --max-conns, and give it to the worker with the fewest
 * connections, whose mailbox it reaches as one atomic pipe write.
 *
 * Why one acceptor and not a SO_REUSEPORT listener per worker: with
 * SO_REUSEPORT a second relay started on the same port by the same user
 * would share it silently rather than fail with EADDRINUSE, the kernel's
 * hash may hand a worker more than its share, and a worker at EMFILE
 * would leave its share of clients in its own backlog while the others
 * have room.  Nor EPOLLEXCLUSIVE on a shared listener: it tends to wake
 * the same worker, which would serve nearly everything.  Accepting is
 * rare next to the data path, and each worker still owns its connections.
 */
static void hand_out(struct relay *r, int fd, const struct sockaddr_storage *ss, socklen_t sl)
{
	struct shared *sh = r->sh;
	struct msg m = { .type = MSG_CONN, .fd = fd, .spare = r->spare, .sl = sl };
	struct relay *w = r;
	unsigned long least = ULONG_MAX;

	m.id = atomic_fetch_add(&sh->total, 1) + 1;
	memcpy(&m.ss, ss, sl);
	if (r->max_conns && atomic_fetch_add(&sh->active, 1) >= r->max_conns) {
		struct conn tmp = { .id = m.id };

		atomic_fetch_sub(&sh->active, 1);
		if (r->verbose) {
			format_addr((const struct sockaddr *)ss, sl, tmp.peer, sizeof(tmp.peer));
			rlog(r, &tmp, "refused: %lu connections open (--max-conns)",
			     atomic_load(&sh->active));
		}
		close(fd);
		return;
	}
	if (!r->max_conns)
		atomic_fetch_add(&sh->active, 1);
	r->spare = -1;
	for (unsigned int k = 0; k < sh->nworkers; k++) {
		struct relay *x = sh->workers[(sh->next + k) % sh->nworkers];
		unsigned long n = atomic_load(&x->nconns);

		if (n < least) {
			least = n;
			w = x;
		}
	}
	sh->next = (sh->next + 1) % sh->nworkers;
	atomic_fetch_add(&w->nconns, 1);
	/* Its mailbox full (a worker that lags far behind): serve the client here. */
	if (w != r && !post(w, &m)) {
		atomic_fetch_sub(&w->nconns, 1);
		atomic_fetch_add(&r->nconns, 1);
		w = r;
	}
	if (w == r)
		conn_start(r, &m);
}

/* ------------------------------------------------------------------------
 * The listener and the loop.
 */
static const char *relay_extra(void *arg)
{
	struct shared *sh = arg;

	snprintf(sh->extra, sizeof(sh->extra), "%lu connections (%lu open)",
		 atomic_load(&sh->total), atomic_load(&sh->active));
	return sh->extra;
}

/* Bind and listen on LISTEN; with port 0, print the port the kernel chose. */
static int open_listener(const char *name, const struct sockaddr_storage *la, socklen_t la_len)
{
	char buf[512], *host, *port;
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	char hbuf[NI_MAXHOST], pbuf[NI_MAXSERV];
	int lfd, one = 1;

	lfd = socket(la->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0) {
		warn_err(errno, "socket");
		return -1;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* The kernel caps the backlog at net.core.somaxconn. */
	if (bind(lfd, (const struct sockaddr *)la, la_len) < 0 || listen(lfd, 4096) < 0) {
		warn_err(errno, name);
		close(lfd);
		return -1;
	}
	/* Port 0: the caller needs to know which port the kernel chose. */
	if (split_hostport(name, buf, sizeof(buf), &host, &port) == 0 && !strcmp(port, "0") &&
	    getsockname(lfd, (struct sockaddr *)&bound, &bl) == 0 &&
	    getnameinfo((struct sockaddr *)&bound, bl, hbuf, sizeof(hbuf), pbuf, sizeof(pbuf),
			NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
		printf(bound.ss_family == AF_INET6 ? "[%s]:%s\n" : "%s:%s\n", hbuf, pbuf);
		fflush(stdout);
	}
	return lfd;
}

static int listen_watch(struct relay *r, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_listen };

	if (epoll_ctl(r->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, r->lfd, &ev) < 0)
		return -errno;
	r->listen_paused = !on;
	return 0;
}

/*
 * Rest the listener (level-triggered, it would spin) until a connection
 * closes, or ACCEPT_PAUSE_MS pass.
 */
static void pause_accept(struct relay *r, int err)
{
	if (r->lfd < 0 || r->listen_paused)
		return;
	/* Once a shortage: the listener comes back each second to look again. */
	if (!r->short_logged)
		rlog(r, NULL, "%s (%lu connections open): accepting again when one closes",
		     strerror(err), atomic_load(&r->sh->active));
	r->short_logged = true;
	r->resume_ms = now_ms() + ACCEPT_PAUSE_MS;
	/* Refused: the listener stays watched, and the loop retries at once. */
	if (listen_watch(r, false) < 0)
		r->listen_paused = false;
}

/* Out of descriptors or memory: a client would be accepted only to be closed. */
static bool is_shortage(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/*
 * Accept a batch; returns -errno only for what ends the relay.  The socket
 * to the target is made before the client is accepted, so that a relay
 * short of descriptors leaves clients waiting in the backlog rather than
 * accepting them only to close them.
 */
static int accept_some(struct relay *r)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd;

		if (r->spare < 0) {
			r->spare = socket(r->target.ss_family,
					  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			if (r->spare < 0) {
				if (!is_shortage(errno))
					return -errno;
				pause_accept(r, errno);
				return 0;
			}
		}
		fd = accept4(r->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			r->short_logged = false;
			hand_out(r, fd, &ss, sl);
			continue;
		}
		switch (errno) {
		case EAGAIN:
			return 0;
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
		case EPERM:
			continue;
		default:
			if (!is_shortage(errno))
				return -errno;
			/* The pending client stays in the backlog. */
			pause_accept(r, errno);
			return 0;
		}
	}
	return 0;
}

static void stop_listening(struct relay *r)
{
	if (r->lfd < 0)
		return;
	close(r->lfd);
	r->lfd = -1;
	r->listen_paused = false;
}

static const char *signame(int sig)
{
	return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

/* The first signal starts the drain; a second ends the relay, by that signal. */
static void on_signal(struct relay *r)
{
	struct signalfd_siginfo si;
	sigset_t set;

	while (read(r->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;

		if (r->draining) {
			/* The second signal: end at once, by that signal, as an unhandled one would. */
			rlog(r, NULL, "%s again: exiting with %lu connections open", signame(sig),
			     atomic_load(&r->sh->active));
			progress_end_line();
			signal(sig, SIG_DFL);
			sigemptyset(&set);
			sigaddset(&set, sig);
			sigprocmask(SIG_UNBLOCK, &set, NULL);
			raise(sig);
			_exit(128 + sig);
		}
		r->draining = true;
		atomic_store(&r->sh->draining, true);
		stop_listening(r);
		post_all(r, MSG_WAKE);
		if (r->verbose || atomic_load(&r->sh->active))
			rlog(r, NULL, "%s: no longer accepting; draining %lu connections",
			     signame(sig), atomic_load(&r->sh->active));
	}
}

/* Close what has been idle too long; returns the ms until the next may be. */
static int expire(struct relay *r, uint64_t now)
{
	while (r->oldest) {
		struct conn *c = r->oldest;
		uint64_t due = c->last_ms + r->timeout_ms;

		if (due > now)
			return due - now > INT32_MAX ? INT32_MAX : (int)(due - now);
		conn_close(r, c, "idle timeout");
	}
	return -1;
}

/*
 * Hand malloc's free pages back to the system.  Not under AddressSanitizer
 * or ThreadSanitizer: their allocator is not glibc's, whose arenas
 * malloc_trim() then walks untouched (a SEGV in mtrim with two workers
 * trimming: CI's ASan stage first, later its TSan stage, in
 * test/cli-relay-idle.sh's `relay -j 2`).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RELAY_NO_TRIM	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RELAY_NO_TRIM	1
#endif
#endif

static void relay_trim(struct relay *r)
{
#ifndef RELAY_NO_TRIM
	malloc_trim(0);
#endif
	r->released = 0;
}

/*
 * Give back the pagepipes of connections quiet for RELAY_RELEASE_MS.  What
 * they held goes back to malloc, which keeps it; after a sweep that freed
 * many, hand the free pages back to the system too, so that a relay's
 * resident set falls again after a burst of connections.
 */
static int release_quiet(struct relay *r, uint64_t now)
{
	while (r->boldest) {
		struct conn *c = r->boldest;
		uint64_t due = c->last_ms + RELAY_RELEASE_MS;

		if (due > now) {
			if (r->released >= RELAY_TRIM_AFTER)
				relay_trim(r);
			return (int)(due - now);
		}
		/*
		 * Bytes still queued wait for a reader that does not read: keep
		 * them; the next byte moved puts the connection back on the list.
		 */
		if (!c->dir[0].queued && !c->dir[1].queued) {
			conn_release(c);
			r->released++;
		}
		blist_del(r, c);
	}
	if (r->released >= RELAY_TRIM_AFTER)
		relay_trim(r);
	return -1;
}

static void free_dead(struct relay *r)
{
	while (r->dead) {
		struct conn *c = r->dead;

		r->dead = c->next;
		c->next = r->free_conns;
		r->free_conns = c;
	}
}

static int min_wait(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

/* Read the mailbox: new connections, and wake-ups for the flags. */
static void on_mbox(struct relay *r)
{
	struct msg m[16];
	ssize_t n;

	while ((n = read(r->mbox[0], m, sizeof(m))) > 0) {
		for (size_t i = 0; i < (size_t)n / sizeof(m[0]); i++) {
			if (m[i].type == MSG_CONN)
				conn_start(r, &m[i]);
			else if (m[i].type == MSG_DONE)
				r->done++;
		}
		free_dead(r);
	}
}

/*
 * Draining, a worker ends once its connections have; worker 0, which
 * holds the signalfd for a second signal, once every worker has ended.
 */
static bool finished(struct relay *r)
{
	if (!r->draining || atomic_load(&r->nconns))
		return false;
	return r->index || r->done == r->sh->nworkers - 1;
}

static int event_loop(struct relay *r)
{
	struct epoll_event evs[MAX_EVENTS];
	uint64_t next_tick = now_ms() + 500;
	struct shared *sh = r->sh;
	int status = EXIT_OK;

	for (;;) {
		int wait = -1, n;
		uint64_t now = now_ms();

		if (atomic_load(&sh->quit))
			break;
		if (!r->draining && atomic_load(&sh->draining))
			r->draining = true;
		if (r->timeout_ms)
			wait = expire(r, now);
		wait = min_wait(wait, release_quiet(r, now));
		free_dead(r);
		if (finished(r))
			break;
		if (r->listen_paused && r->lfd >= 0) {
			if (r->resume_ms <= now) {
				if (listen_watch(r, true) < 0)
					r->resume_ms = now + ACCEPT_PAUSE_MS;
			}
			if (r->listen_paused)
				wait = min_wait(wait, (int)(r->resume_ms - now));
		}
		if (!r->index && sh->pg.on) {
			if (next_tick <= now) {
				progress_tick(&sh->pg, false);
				next_tick = now + 500;
			}
			wait = min_wait(wait, (int)(next_tick - now));
		}
		n = epoll_wait(r->epfd, evs, MAX_EVENTS, wait);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			warn_err(errno, "epoll_wait");
			status = EXIT_FAIL;
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &r->tag_mbox) {
				on_mbox(r);
			} else if (p == &tag_signal) {
				on_signal(r);
			} else if (p == &tag_listen) {
				int err;

				if (r->lfd < 0)
					continue;
				err = accept_some(r);
				if (err) {
					warn_err(-err, "accept");
					status = EXIT_FAIL;
					goto out;
				}
			} else {
				conn_event(r, p, evs[i].events);
			}
		}
		free_dead(r);
	}
out:
	if (status != EXIT_OK) {
		/* The relay ends: every worker closes what it holds. */
		atomic_store(&sh->quit, true);
		post_all(r, MSG_WAKE);
	}
	while (r->oldest)
		conn_close(r, r->oldest, "relay ending");
	free_dead(r);
	/* Connections still in the mailbox: the acceptor counted them. */
	if (r->index) {
		struct msg m;

		while (read(r->mbox[0], &m, sizeof(m)) == (ssize_t)sizeof(m)) {
			if (m.type != MSG_CONN)
				continue;
			close(m.fd);
			close(m.spare);
			atomic_fetch_sub(&sh->active, 1);
			atomic_fetch_sub(&r->nconns, 1);
		}
	}
	return status;
}

static void *worker_main(void *arg)
{
	struct relay *w = arg;
	struct msg m = { .type = MSG_DONE, .fd = -1, .spare = -1 };
	int status = event_loop(w);

	/* Worker 0's mailbox holds at most one word from each worker: it cannot be full. */
	post(w->sh->workers[0], &m);
	return (void *)(intptr_t)status;
}

/*
 * A relay holds two descriptors a connection: take the whole hard limit,
 * and as root (CAP_SYS_RESOURCE) first raise the hard limit to fs.nr_open.
 * Each step may be refused; what was got is what is reported.
 */
static void raise_nofile(struct relay *r)
{
	struct rlimit rl;
	unsigned long nr_open = 0;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open && (rl.rlim_max == RLIM_INFINITY || rl.rlim_max < nr_open)) {
		struct rlimit want = { .rlim_cur = nr_open, .rlim_max = nr_open };

		if (rl.rlim_max == RLIM_INFINITY)
			want.rlim_max = RLIM_INFINITY;
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != rl.rlim_max) {
		struct rlimit want = rl;

		want.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &want) < 0 && nr_open) {
			want.rlim_cur = nr_open;
			setrlimit(RLIMIT_NOFILE, &want);
		}
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (r->verbose) {
		if (rl.rlim_max == RLIM_INFINITY)
			rlog(r, NULL, "open files limit %llu (hard limit unlimited)",
			     (unsigned long long)rl.rlim_cur);
		else
			rlog(r, NULL, "open files limit %llu (hard limit %llu)",
			     (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	}
}

/* SIGTERM, and SIGINT unless it came in ignored (a background job, nohup). */
static int setup_signals(struct relay *r)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_signal };
	struct sigaction old;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	r->sigint = !(sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN);
	if (r->sigint)
		sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	r->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (r->sfd < 0)
		return -errno;
	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->sfd, &ev) < 0)
		return -errno;
	return 0;
}

/* A worker's epoll instance and mailbox. */
static int worker_init(struct relay *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &w->tag_mbox };

	w->epfd = w->lfd = w->sfd = w->spare = w->mbox[0] = w->mbox[1] = -1;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return -errno;
	if (pipe2(w->mbox, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->mbox[0], &ev) < 0)
		return -errno;
	return 0;
}

static void worker_fini(struct relay *w)
{
	stop_listening(w);
	if (w->spare >= 0)
		close(w->spare);
	if (w->sfd >= 0)
		close(w->sfd);
	for (int i = 0; i < 2; i++)
		if (w->mbox[i] >= 0)
			close(w->mbox[i]);
	if (w->epfd >= 0)
		close(w->epfd);
}

/* -j default: one worker per online CPU, at most RELAY_MAX_DEFAULT. */
static unsigned int default_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > RELAY_MAX_DEFAULT ? RELAY_MAX_DEFAULT : (unsigned int)n;
}

int cmd_relay(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "max-conns", required_argument, NULL, OPT_MAX_CONNS },
		{ "threads", required_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_OFF };
	static struct shared sh;
	static struct relay cfg;
	struct relay *r;
	struct sockaddr_storage la;
	socklen_t la_len;
	int first, err, status;
	unsigned int started;

	first = parse_opts(argc, argv, "vT:j:", longopts, usage_relay, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (check_operands(argc, argv, first, 2))
		return EXIT_USAGE;
	for (int i = 0; i < 2; i++) {
		err = i ? resolve(argv[first + 1], false, &cfg.target, &cfg.target_len) :
			  resolve(argv[first], true, &la, &la_len);

		if (err == -EINVAL || err == -ENAMETOOLONG)
			warnx("'%s': addresses are HOST:PORT", argv[first + i]);
		if (err == -EINVAL || err == -ENAMETOOLONG || err == -ERANGE) {
			try_help();
			return EXIT_USAGE;
		}
		if (err)
			return EXIT_FAIL;
	}
	cfg.target_name = argv[first + 1];
	format_addr((struct sockaddr *)&cfg.target, cfg.target_len, cfg.target_addr,
		    sizeof(cfg.target_addr));
	cfg.verbose = o.verbose;
	cfg.timeout_ms = o.timeout_ms;
	cfg.max_conns = o.max_conns;
	cfg.sh = &sh;
	sh.nworkers = o.threads ? o.threads : default_workers();
	sh.workers = calloc(sh.nworkers, sizeof(*sh.workers));
	if (!sh.workers) {
		warn_err(errno, "workers");
		return EXIT_FAIL;
	}
	for (unsigned int i = 0; i < sh.nworkers; i++) {
		struct relay *w = calloc(1, sizeof(*w));

		if (!w) {
			warn_err(errno, "workers");
			return EXIT_FAIL;
		}
		*w = cfg;
		w->index = i;
		sh.workers[i] = w;
		err = worker_init(w);
		if (err) {
			warn_err(-err, "epoll");
			return EXIT_FAIL;
		}
	}
	r = sh.workers[0];
	raise_nofile(r);
	/* Every big pagepipe is RELAY_STAGE: raise the library's limit once. */
	if (pp_pipe_get_max_size() < RELAY_STAGE)
		pp_pipe_set_max_size(RELAY_STAGE);
	/*
	 * Signals first: one sent once the port is printed must find them
	 * handled.  Blocked before the workers start, they inherit the mask,
	 * and only the signalfd in worker 0 takes SIGTERM and SIGINT.
	 */
	err = setup_signals(r);
	if (err < 0) {
		warn_err(-err, "signals");
		return EXIT_FAIL;
	}
	r->lfd = open_listener(argv[first], &la, la_len);
	if (r->lfd < 0)
		return EXIT_FAIL;
	err = listen_watch(r, true);
	if (err < 0) {
		warn_err(-err, "epoll");
		return EXIT_FAIL;
	}
	if (r->verbose) {
		struct sockaddr_storage bound;
		socklen_t bl = sizeof(bound);
		char name[56] = "?";

		/* The address bound, with the port the kernel chose for port 0. */
		if (getsockname(r->lfd, (struct sockaddr *)&bound, &bl) == 0)
			format_addr((struct sockaddr *)&bound, bl, name, sizeof(name));
		rlog(r, NULL, "listening on %s, relaying to %s, %u worker thread%s", name,
		     r->target_addr, sh.nworkers, sh.nworkers == 1 ? "" : "s");
	}

	progress_init(&sh.pg, o.progress);
	sh.pg.extra = relay_extra;
	sh.pg.extra_arg = &sh;
	for (started = 1; started < sh.nworkers; started++) {
		struct relay *w = sh.workers[started];

		err = pthread_create(&w->thread, NULL, worker_main, w);
		if (err) {
			warn_err(err, "worker thread");
			break;
		}
	}
	if (started == sh.nworkers) {
		status = event_loop(r);
	} else {
		/* Fewer threads than asked: end those started. */
		status = EXIT_FAIL;
		atomic_store(&sh.quit, true);
		post_all(r, MSG_WAKE);
	}
	for (unsigned int i = 1; i < started; i++) {
		void *ret;

		pthread_join(sh.workers[i]->thread, &ret);
		if ((intptr_t)ret != EXIT_OK)
			status = EXIT_FAIL;
		worker_fini(sh.workers[i]);
		free(sh.workers[i]);
	}
	if (r->verbose)
		rlog(r, NULL, "exiting: %lu connections served", atomic_load(&sh.total));
	if (sh.pg.on)
		progress_tick(&sh.pg, true);
	worker_fini(r);
	free(r);
	free(sh.workers);
	return status;
}
