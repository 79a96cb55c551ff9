// SPDX-License-Identifier: MIT
/*
 * splice-relay.c - the bare splice loop bench/relay.sh measures every relay
 * against: socket -> kernel pipe of 1 MiB -> socket, splice(2) both ways,
 * one blocking thread per direction.  No library: this is what the kernel
 * alone costs.  Not a benchmark by itself (bench/run.sh skips it):
 *
 *     splice-relay TARGET_PORT
 *
 * listens on 127.0.0.1 (a port of the kernel's choice, printed on standard
 * output) and relays each connection to 127.0.0.1:TARGET_PORT, with the
 * half-close passed on, until killed.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPE_SIZE	(1 << 20)

struct dir {
	int src, dst;
	_Atomic int *left;		/* directions still running */
	struct dir *both;		/* the pair, freed by the last one out */
};

static int target_port;

static void *run_dir(void *arg)
{
	struct dir *d = arg;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		goto out;
	/* Above pipe-max-size this fails and the pipe stays at 64 KiB. */
	fcntl(p[1], F_SETPIPE_SZ, PIPE_SIZE);
	for (;;) {
		ssize_t n = splice(d->src, NULL, p[1], NULL, PIPE_SIZE, SPLICE_F_MOVE);

		if (n == 0) {
			shutdown(d->dst, SHUT_WR);
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			shutdown(d->dst, SHUT_RDWR);
			shutdown(d->src, SHUT_RDWR);
			break;
		}
		while (n > 0) {
			ssize_t w = splice(p[0], NULL, d->dst, NULL, (size_t)n, SPLICE_F_MOVE);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				shutdown(d->dst, SHUT_RDWR);
				shutdown(d->src, SHUT_RDWR);
				goto done;
			}
			n -= w;
		}
	}
done:
	close(p[0]);
	close(p[1]);
out:
	/* The last direction out closes the connection. */
	if (atomic_fetch_sub(d->left, 1) == 1) {
		close(d->src);
		close(d->dst);
		free(d->left);
		free(d->both);
	}
	return NULL;
}

static void *run_conn(void *arg)
{
	int client = (int)(intptr_t)arg, server, one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(target_port) };
	struct dir *d;
	_Atomic int *left;
	pthread_t t;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (server < 0 || connect(server, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("splice-relay: connect");
		close(client);
		if (server >= 0)
			close(server);
		return NULL;
	}
	setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	d = calloc(2, sizeof(*d));
	left = malloc(sizeof(*left));
	if (!d || !left)
		abort();
	atomic_init(left, 2);
	d[0] = (struct dir){ .src = client, .dst = server, .left = left, .both = d };
	d[1] = (struct dir){ .src = server, .dst = client, .left = left, .both = d };
	pthread_create(&t, NULL, run_dir, &d[1]);
	pthread_detach(t);
	run_dir(&d[0]);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct rlimit rl;
	pthread_attr_t attr;
	int lfd, one = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: splice-relay TARGET_PORT\n");
		return 2;
	}
	target_port = atoi(argv[1]);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		perror("splice-relay: listen");
		return 1;
	}
	printf("%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("splice-relay: accept");
			usleep(100000);
			continue;
		}
		if (pthread_create(&t, &attr, run_conn, (void *)(intptr_t)c))
			close(c);
	}
}
