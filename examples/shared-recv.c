// SPDX-License-Identifier: MIT
/*
 * shared-recv - the other half of shared-send: listen on a Unix socket,
 * receive the read end of a shared pagepipe (two descriptors in one
 * SCM_RIGHTS message), open it with pp_import() and read the stream to its
 * end.  Prints the byte count and checksum, which must match the sender's.
 *
 *	./shared-recv /tmp/sock &
 *	./shared-send /tmp/sock 100M
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pagepipe.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int recv_fds(int sock, int fds[2])
{
	char byte;
	struct iovec iov = { &byte, 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	uint64_t sum = 1469598103934665603ull;
	unsigned long long got = 0;
	static char buf[65536];
	struct pp_file *r;
	int lsock, sock, fds[2];
	ssize_t n;

	if (argc != 2 || strlen(argv[1]) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "usage: %s SOCKET-PATH\n", argv[0]);
		return 2;
	}
	strcpy(addr.sun_path, argv[1]);
	unlink(argv[1]);
	lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lsock < 0 || bind(lsock, (struct sockaddr *)&addr, sizeof(addr)) || listen(lsock, 1)) {
		perror(argv[1]);
		return 1;
	}
	sock = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
	if (sock < 0 || recv_fds(sock, fds)) {
		perror("shared-recv: receiving the end");
		return 1;
	}
	close(sock);
	close(lsock);
	unlink(argv[1]);
	r = pp_import(fds, 0);
	close(fds[0]);
	close(fds[1]);
	if (!r) {
		perror("pp_import");
		return 1;
	}
	while ((n = pp_read(r, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			sum = (sum ^ (unsigned char)buf[i]) * 1099511628211ull;
		got += (unsigned long long)n;
	}
	if (n < 0) {
		perror("pp_read");
		return 1;
	}
	pp_close(r);
	printf("%llu bytes, fnv1a %016llx\n", got, (unsigned long long)sum);
	return 0;
}
