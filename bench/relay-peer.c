// SPDX-License-Identifier: MIT
/*
 * relay-peer.c - the two ends bench/relay.sh puts around a relay.  Not a
 * benchmark by itself (bench/run.sh skips it).
 *
 *   relay-peer server [FILE BYTES]
 *	listen on 127.0.0.1 (the port printed on standard output); read each
 *	connection to its end and throw the bytes away; with FILE, also send
 *	its first BYTES by sendfile(2) (two-way traffic), then half-close.
 *   relay-peer client PORT CONNS FILE BYTES [BACK]
 *	CONNS connections at once, each sending the first BYTES of FILE by
 *	sendfile(2), half-closing, and reading to the end (BACK bytes are
 *	expected, 0 by default).  Prints the nanoseconds from the first
 *	connect to the last end of file; exit 1 if a count is wrong.
 *   relay-peer hold
 *	listen as server does; echo what comes, keep every connection open.
 *   relay-peer idle PORT CONNS
 *	CONNS connections, each echoed one byte; "ready" on standard output;
 *	held until standard input ends.
 *
 * Every connection is a thread (hold: one epoll thread): the peers must not
 * be what limits the relay.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *file;
static uint64_t bytes, back;
static int port;
static _Atomic int bad;

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void send_file(int s)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	off_t off = 0;

	if (fd < 0) {
		perror(file);
		exit(1);
	}
	while ((uint64_t)off < bytes) {
		ssize_t n = sendfile(s, fd, &off, bytes - (uint64_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			perror("relay-peer: sendfile");
			atomic_store(&bad, 1);
			break;
		}
	}
	close(fd);
	shutdown(s, SHUT_WR);
}

static uint64_t drain(int s)
{
	static __thread char buf[1 << 20];
	uint64_t n = 0;

	for (;;) {
		ssize_t r = recv(s, buf, sizeof(buf), 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return n;
		n += (uint64_t)r;
	}
}

static void *sender(void *arg)
{
	send_file((int)(intptr_t)arg);
	return NULL;
}

static void *serve_one(void *arg)
{
	int s = (int)(intptr_t)arg;
	pthread_t t;

	if (file)
		pthread_create(&t, NULL, sender, arg);
	drain(s);
	if (file)
		pthread_join(t, NULL);
	close(s);
	return NULL;
}

static int listener(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		perror("relay-peer: listen");
		exit(1);
	}
	printf("%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	return lfd;
}

static int __attribute__((noreturn)) server(void)
{
	int lfd = listener();
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (c < 0)
			continue;
		if (pthread_create(&t, &attr, serve_one, (void *)(intptr_t)c))
			close(c);
	}
}

static int connect_to(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("relay-peer: connect");
		exit(1);
	}
	return s;
}

static void *client_one(void *arg)
{
	int s = connect_to();
	pthread_t t;
	uint64_t got;

	(void)arg;
	pthread_create(&t, NULL, sender, (void *)(intptr_t)s);
	got = drain(s);
	pthread_join(t, NULL);
	if (got != back) {
		fprintf(stderr, "relay-peer: got %llu bytes back, not %llu\n",
			(unsigned long long)got, (unsigned long long)back);
		atomic_store(&bad, 1);
	}
	close(s);
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000 + (uint64_t)t.tv_nsec;
}

static int client(int conns)
{
	pthread_t *t = calloc((size_t)conns, sizeof(*t));
	uint64_t t0 = now_ns();

	for (int i = 0; i < conns; i++)
		pthread_create(&t[i], NULL, client_one, NULL);
	for (int i = 0; i < conns; i++)
		pthread_join(t[i], NULL);
	printf("%llu\n", (unsigned long long)(now_ns() - t0));
	free(t);
	return atomic_load(&bad);
}

static int __attribute__((noreturn)) hold(void)
{
	int lfd = listener(), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd }, evs[64];

	raise_nofile();
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			char buf[4096];
			ssize_t r;

			if (fd == lfd) {
				int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

				if (c >= 0) {
					ev.data.fd = c;
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
				}
				continue;
			}
			r = read(fd, buf, sizeof(buf));
			if (r > 0) {
				if (write(fd, buf, (size_t)r) < 0)
					close(fd);
			} else if (r == 0 || errno != EAGAIN) {
				close(fd);
			}
		}
	}
}

static int idle(int conns)
{
	int *s = calloc((size_t)conns, sizeof(*s));
	char c;

	raise_nofile();
	for (int i = 0; i < conns; i++) {
		struct timeval tv = { .tv_sec = 20 };

		s[i] = connect_to();
		/* A relay that cannot take this one must fail the run, not hang it. */
		setsockopt(s[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (write(s[i], "x", 1) != 1 || read(s[i], &c, 1) != 1) {
			fprintf(stderr, "relay-peer: connection %d of %d not echoed\n", i + 1, conns);
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	for (int i = 0; i < conns; i++)
		close(s[i]);
	free(s);
	return 0;
}

int main(int argc, char **argv)
{
	/* A peer that goes away is a failed run, reported, not a silent death. */
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && !strcmp(argv[1], "server") && (argc == 2 || argc == 4)) {
		if (argc == 4) {
			file = argv[2];
			bytes = strtoull(argv[3], NULL, 10);
		}
		return server();
	}
	if (argc >= 6 && argc <= 7 && !strcmp(argv[1], "client")) {
		port = atoi(argv[2]);
		file = argv[4];
		bytes = strtoull(argv[5], NULL, 10);
		back = argc == 7 ? strtoull(argv[6], NULL, 10) : 0;
		raise_nofile();
		return client(atoi(argv[3]));
	}
	if (argc == 2 && !strcmp(argv[1], "hold"))
		return hold();
	if (argc == 4 && !strcmp(argv[1], "idle")) {
		port = atoi(argv[2]);
		return idle(atoi(argv[3]));
	}
	fprintf(stderr, "usage: relay-peer server [FILE BYTES] | client PORT CONNS FILE BYTES [BACK]"
		" | hold | idle PORT CONNS\n");
	return 2;
}
