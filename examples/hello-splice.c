// SPDX-License-Identifier: MIT
/*
 * hello-splice - the seed's demonstration program (Linus Torvalds, January
 * 2005), on pagepipe: write "hello: " into a pipe, then splice the first
 * 1000 bytes of a file after it, and splice the lot to standard output.
 *
 *	./hello-splice FILE | less
 *
 * The plain write and the splice share one pipe; the file's bytes are
 * page references until the kernel sends them to stdout (splice into a
 * kernel pipe, sendfile to a socket, copy_file_range to a file).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pagepipe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct pp_file *p[2], *in, *out;
	ssize_t n, left;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	in = pp_fdopen(fd);
	out = pp_fdopen(STDOUT_FILENO);
	if (!in || !out || pp_pipe2(p, 0) < 0) {
		perror("pagepipe");
		return 1;
	}
	if (pp_write(p[1], "hello: ", 7) != 7) {
		perror("pp_write");
		return 1;
	}
	n = pp_splice(in, NULL, p[1], NULL, 1000, 0);
	if (n < 0) {
		perror("pp_splice from the file");
		return 1;
	}
	pp_close(p[1]);
	for (left = n + 7; left > 0; left -= n) {
		n = pp_splice(p[0], NULL, out, NULL, (size_t)left, 0);
		if (n <= 0) {
			perror("pp_splice to stdout");
			return 1;
		}
	}
	pp_close(p[0]);
	pp_close(in);
	pp_close(out);
	close(fd);
	return 0;
}
