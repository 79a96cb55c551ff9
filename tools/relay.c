// SPDX-License-Identifier: MIT
/*
 * relay.c - pagepipe relay LISTEN TARGET: a TCP relay through pagepipes.
 *
 * Each accepted connection gets two threads, one per direction, and each
 * direction its own transfer (struct xfer): socket to pagepipe to socket by
 * pp_splice, with read and write as the fallback.  Blocking threads rather
 * than a poll loop, because the blocking calls are what the library's
 * splice is built for, and a hundred connections are two hundred small
 * threads.
 *
 * Shutdown rules, as a TCP proxy must keep them: end of file on one side
 * is passed on as shutdown(SHUT_WR) to the other, and the other direction
 * goes on until it ends too; an error in either direction (a reset, a
 * write to a peer that went away) ends the whole connection at once, by
 * shutting both sockets down, which wakes the other direction's thread.
 */
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char usage_relay[] =
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
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n";

/* Per-direction staging: enough for a fast link, small enough for many. */
#define RELAY_STAGE	(256u << 10)
#define RELAY_STACK	(256u << 10)

struct relay {
	struct sockaddr_storage target;
	socklen_t target_len;
	const char *target_name;
	bool verbose;
	struct progress pg;
	_Atomic unsigned long active, total;
	char extra[64];
};

struct conn {
	struct relay *r;
	int client, server;
	unsigned long id;
};

struct dir {
	struct conn *c;
	int src, dst;
	const char *what;	/* direction, for the log */
	uint64_t bytes;
	int err;
};

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

static void *run_dir(void *arg)
{
	struct dir *d = arg;
	struct xfer x;

	xfer_init(&x, d->src, d->dst, RELAY_STAGE);
	for (;;) {
		/* No SPLICE_F_MORE: a request must not wait for bytes that never come. */
		ssize_t n = xfer_step(&x, RELAY_STAGE);

		if (n > 0) {
			d->bytes += (uint64_t)n;
			progress_add(&d->c->r->pg, (uint64_t)n);
			continue;
		}
		if (n == 0) {
			/* Pass the half-close on; the other direction may go on. */
			shutdown(d->dst, SHUT_WR);
			break;
		}
		d->err = (int)-n;
		shutdown(d->src, SHUT_RDWR);
		shutdown(d->dst, SHUT_RDWR);
		break;
	}
	xfer_destroy(&x);
	return NULL;
}

static void *run_conn(void *arg)
{
	struct conn *c = arg;
	struct relay *r = c->r;
	struct dir up = { .c = c, .what = "client->server" };
	struct dir down = { .c = c, .what = "server->client" };
	pthread_attr_t attr;
	pthread_t t;
	int one = 1;

	c->server = socket(r->target.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->server < 0 ||
	    connect(c->server, (struct sockaddr *)&r->target, r->target_len) < 0) {
		char what[300];

		snprintf(what, sizeof(what), "connect %s", r->target_name);
		warn_err(errno, what);
		goto out;
	}
	setsockopt(c->server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	up.src = c->client;
	up.dst = c->server;
	down.src = c->server;
	down.dst = c->client;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, RELAY_STACK);
	if (pthread_create(&t, &attr, run_dir, &down)) {
		pthread_attr_destroy(&attr);
		warn_err(EAGAIN, "cannot start a thread");
		goto out;
	}
	pthread_attr_destroy(&attr);
	run_dir(&up);
	pthread_join(t, NULL);
	if (r->verbose) {
		char u[32], dn[32];

		format_bytes(u, sizeof(u), (double)up.bytes);
		format_bytes(dn, sizeof(dn), (double)down.bytes);
		warnx("connection %lu closed: %s up, %s down%s%s", c->id, u, dn,
		      up.err || down.err ? ", " : "",
		      up.err ? strerror(up.err) : down.err ? strerror(down.err) : "");
	}
out:
	if (c->server >= 0)
		close(c->server);
	close(c->client);
	atomic_fetch_sub(&r->active, 1);
	free(c);
	return NULL;
}

static const char *relay_extra(void *arg)
{
	struct relay *r = arg;

	snprintf(r->extra, sizeof(r->extra), "%lu connections (%lu open)",
		 atomic_load(&r->total), atomic_load(&r->active));
	return r->extra;
}

static void *progress_thread(void *arg)
{
	struct relay *r = arg;

	for (;;) {
		usleep(500 * 1000);
		progress_tick(&r->pg, false);
	}
	return NULL;
}

/* Bind and listen on LISTEN; with port 0, print the port the kernel chose. */
static int open_listener(const char *name, const struct sockaddr_storage *la, socklen_t la_len)
{
	char buf[512], *host, *port;
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	char hbuf[NI_MAXHOST], pbuf[NI_MAXSERV];
	int lfd, one = 1;

	lfd = socket(la->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0) {
		warn_err(errno, "socket");
		return -1;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)la, la_len) < 0 || listen(lfd, 1024) < 0) {
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

/* Serve each connection on its own threads, until accept fails for good. */
static int accept_loop(struct relay *r, int lfd, pthread_attr_t *attr)
{
	int one = 1;

	for (;;) {
		struct conn *c;
		pthread_t t;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			int err = errno;

			if (err == EINTR || err == ECONNABORTED)
				continue;
			warn_err(err, "accept");
			if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
				return EXIT_FAIL;
			/* Out of descriptors: let connections finish, then go on. */
			usleep(100 * 1000);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->r = r;
		c->client = fd;
		c->server = -1;
		c->id = atomic_fetch_add(&r->total, 1) + 1;
		atomic_fetch_add(&r->active, 1);
		if (r->verbose)
			warnx("connection %lu opened", c->id);
		if (pthread_create(&t, attr, run_conn, c)) {
			warn_err(EAGAIN, "cannot start a thread");
			atomic_fetch_sub(&r->active, 1);
			close(fd);
			free(c);
		}
	}
}

int cmd_relay(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_OFF };
	static struct relay r;
	struct sockaddr_storage la;
	socklen_t la_len;
	pthread_attr_t attr;
	int first, lfd, status;

	first = parse_opts(argc, argv, "v", longopts, usage_relay, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (check_operands(argc, argv, first, 2))
		return EXIT_USAGE;
	for (int i = 0; i < 2; i++) {
		int err = i ? resolve(argv[first + 1], false, &r.target, &r.target_len) :
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
	r.target_name = argv[first + 1];
	r.verbose = o.verbose;
	lfd = open_listener(argv[first], &la, la_len);
	if (lfd < 0)
		return EXIT_FAIL;

	progress_init(&r.pg, o.progress);
	r.pg.extra = relay_extra;
	r.pg.extra_arg = &r;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, RELAY_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (r.pg.on) {
		pthread_t t;

		pthread_create(&t, &attr, progress_thread, &r);
	}
	status = accept_loop(&r, lfd, &attr);
	close(lfd);
	return status;
}
