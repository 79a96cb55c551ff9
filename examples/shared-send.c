// SPDX-License-Identifier: MIT
/*
 * shared-send - one half of a pair (shared-recv is the other): make a
 * pagepipe that connects processes (PP_O_SHARED), hand its read end to an
 * unrelated process over a Unix socket, and write a stream into it.
 *
 *	./shared-recv /tmp/sock &
 *	./shared-send /tmp/sock 100M
 *
 * The read end travels as two descriptors (pp_export: the pipe's arena and
 * the end's token) in one SCM_RIGHTS message.  Once they are sent, this
 * process closes its copies and its own read end: from then on the
 * receiver holds the only read end, and when it goes, a write here fails
 * with EPIPE, as with a kernel pipe.  Both sides print the byte count and
 * a checksum (FNV-1a) of the stream, which must agree.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pagepipe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int send_fds(int sock, const int fds[2])
{
	char byte = 'p';
	struct iovec iov = { &byte, 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	memset(&ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(c), fds, 2 * sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static unsigned long long parse_size(const char *s)
{
	char *end;
	unsigned long long n = strtoull(s, &end, 10);

	switch (*end) {
	case 'G': n <<= 10; /* fall through */
	case 'M': n <<= 10; /* fall through */
	case 'K': n <<= 10;
	}
	return n;
}

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	unsigned long long total, sent = 0;
	uint64_t sum = 1469598103934665603ull;
	struct pp_file *ends[2];
	static char buf[65536];
	int sock, fds[2];

	if (argc != 3 || strlen(argv[1]) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "usage: %s SOCKET-PATH BYTES\n", argv[0]);
		return 2;
	}
	total = parse_size(argv[2]);
	strcpy(addr.sun_path, argv[1]);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof(addr))) {
		perror(argv[1]);
		return 1;
	}
	if (pp_pipe2(ends, PP_O_SHARED) || pp_export(ends[0], fds) || send_fds(sock, fds)) {
		perror("shared-send");
		return 1;
	}
	close(fds[0]);
	close(fds[1]);
	close(sock);
	pp_close(ends[0]);

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + i / 251);
	while (sent < total) {
		size_t n = total - sent < sizeof(buf) ? (size_t)(total - sent) : sizeof(buf);
		ssize_t w = pp_write(ends[1], buf, n);

		if (w < 0) {
			perror("pp_write");
			return 1;
		}
		for (ssize_t i = 0; i < w; i++)
			sum = (sum ^ (unsigned char)buf[i]) * 1099511628211ull;
		sent += (unsigned long long)w;
	}
	pp_close(ends[1]);
	printf("%llu bytes, fnv1a %016llx\n", sent, (unsigned long long)sum);
	return 0;
}
