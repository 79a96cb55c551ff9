// SPDX-License-Identifier: MIT
/*
 * Description: pp_export() and pp_import() (src/shared.c): an end of a
 * PP_O_SHARED pipe passed to a program started with exec (inherited
 * descriptors) and to a process that existed before the pipe (SCM_RIGHTS
 * over a Unix socket), the stream whole at the other side and EOF after;
 * descriptors of an exported end keep it open until closed, as a pipe
 * descriptor in flight does; the copy shares O_NONBLOCK with the original;
 * imports of the wrong things refused (a private pagepipe's end, another
 * pipe's token, a memfd that is no arena, bad descriptors, bad flags);
 * no descriptor left behind.
 */
#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_ENV	"PP_SHARED_IMPORT_CHILD"

/* This program, to exec: argv[0] (under valgrind /proc/self/exe is valgrind's). */
static const char *self;
#define TOTAL		(3u << 20)

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Write TOTAL pattern bytes to an imported write end: the exec'd child. */
static int child_main(const char *arg)
{
	int fds[2];
	struct pp_file *w;
	static unsigned char buf[65536];
	unsigned int done = 0;

	if (sscanf(arg, "%d,%d", &fds[0], &fds[1]) != 2)
		return 10;
	w = pp_import(fds, 0);
	if (!w)
		return 11;
	close(fds[0]);
	close(fds[1]);
	while (done < TOTAL) {
		unsigned int n = TOTAL - done < sizeof(buf) ? TOTAL - done : sizeof(buf);
		ssize_t r;

		t_fill(buf, n, done, 3);
		r = pp_write(w, buf, n);
		if (r <= 0)
			return 12;
		done += (unsigned int)r;
	}
	return pp_close(w) ? 13 : 0;
}

static void read_stream(struct pp_file *r, unsigned int seed)
{
	static unsigned char buf[70000];
	unsigned long long got = 0;
	ssize_t n;

	while ((n = pp_read(r, buf, sizeof(buf))) > 0) {
		ASSERT_EQ(t_check(buf, (size_t)n, got, seed), 0);
		got += (unsigned long long)n;
	}
	ASSERT_EQ(n, 0);
	ASSERT_EQ(got, (unsigned long long)TOTAL);
}

/* The write end goes to a program started by exec, by inheritance. */
static int test_exec_inherits(void)
{
	struct pp_file *e[2];
	int fds[2], status;
	char arg[64];
	pid_t pid;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
	ASSERT_EQ(pp_export(e[1], fds), 0);
	ASSERT_EQ(fcntl(fds[0], F_GETFD), 0);	/* inherited across exec */
	ASSERT_EQ(fcntl(fds[1], F_GETFD), 0);
	ASSERT_EQ(pp_close(e[1]), 0);
	snprintf(arg, sizeof(arg), "%d,%d", fds[0], fds[1]);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		setenv(CHILD_ENV, arg, 1);
		execl(self, "shared-import", (char *)NULL);
		_exit(127);
	}
	close(fds[0]);
	close(fds[1]);
	read_stream(e[0], 3);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	pp_close(e[0]);
	return 0;
}

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

/*
 * The read end goes over a socket to a process forked before the pipe
 * existed: it shares nothing with the pipe but what it receives.
 */
static int test_scm_rights(void)
{
	struct pp_file *e[2];
	int sv[2], fds[2], status;
	static unsigned char buf[65536];
	unsigned int done = 0;
	pid_t pid;

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		struct pp_file *r;
		static unsigned char rb[70000];
		unsigned long long got = 0;
		ssize_t n;

		close(sv[0]);
		if (recv_fds(sv[1], fds))
			_exit(20);
		r = pp_import(fds, 0);
		close(fds[0]);
		close(fds[1]);
		if (!r)
			_exit(21);
		while ((n = pp_read(r, rb, sizeof(rb))) > 0) {
			if (t_check(rb, (size_t)n, got, 5))
				_exit(22);
			got += (unsigned long long)n;
		}
		pp_close(r);	/* valgrind checks the child's leaks too */
		_exit(n == 0 && got == TOTAL ? 0 : 23);
	}
	close(sv[1]);
	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
	ASSERT_EQ(pp_export(e[0], fds), 0);
	ASSERT_EQ(send_fds(sv[0], fds), 0);
	close(fds[0]);
	close(fds[1]);
	close(sv[0]);
	pp_close(e[0]);
	while (done < TOTAL) {
		unsigned int n = TOTAL - done < sizeof(buf) ? TOTAL - done : sizeof(buf);
		ssize_t r;

		t_fill(buf, n, done, 5);
		r = pp_write(e[1], buf, n);
		ASSERT_GE(r, 1);
		done += (unsigned int)r;
	}
	pp_close(e[1]);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	return 0;
}

/* Exported descriptors are an open end until closed; the copy shares its flags. */
static int test_descriptors_hold_the_end(void)
{
	struct pp_file *e[2], *w;
	int fds[2];
	char c;

	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED | O_NONBLOCK), 0);
	ASSERT_EQ(pp_export(e[1], fds), 0);
	ASSERT_EQ(pp_close(e[1]), 0);
	ASSERT_ERRNO(pp_read(e[0], &c, 1), EAGAIN);	/* not EOF: a write end is in flight */
	w = pp_import(fds, 0);
	ASSERT_TRUE(w != NULL);
	ASSERT_EQ(pp_fcntl(w, F_GETFL), O_WRONLY | O_NONBLOCK);
	ASSERT_EQ(pp_fcntl(w, F_SETFL, 0), 0);
	ASSERT_EQ(pp_fcntl(w, F_GETFL), O_WRONLY);
	ASSERT_EQ(pp_write(w, "x", 1), 1);
	ASSERT_EQ(pp_read(e[0], &c, 1), 1);
	ASSERT_EQ(pp_close(w), 0);
	ASSERT_ERRNO(pp_read(e[0], &c, 1), EAGAIN);	/* the descriptors still hold it */
	close(fds[0]);
	close(fds[1]);
	ASSERT_EQ(pp_read(e[0], &c, 1), 0);
	pp_close(e[0]);
	return 0;
}

static int test_refusals(void)
{
	struct pp_file *e[2], *p[2], *o[2];
	int fds[2], ofds[2], bad[2];
	int memfd = memfd_create("not-an-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ASSERT_GE(memfd, 0);
	ASSERT_EQ(ftruncate(memfd, 1 << 20), 0);
	ASSERT_EQ(pp_pipe2(p, 0), 0);
	ASSERT_ERRNO(pp_export(p[0], fds), EINVAL);	/* a pipe of threads: nothing to pass */
	ASSERT_ERRNO(pp_export(NULL, fds), EBADF);
	ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
	ASSERT_EQ(pp_pipe2(o, PP_O_SHARED), 0);
	ASSERT_ERRNO(pp_export(e[0], NULL), EFAULT);
	ASSERT_EQ(pp_export(e[0], fds), 0);
	ASSERT_EQ(pp_export(o[1], ofds), 0);

	ASSERT_TRUE(pp_import(NULL, 0) == NULL && errno == EFAULT);
	ASSERT_TRUE(pp_import(fds, O_NONBLOCK) == NULL && errno == EINVAL);
	bad[0] = fds[0];
	bad[1] = -1;
	ASSERT_TRUE(pp_import(bad, 0) == NULL && errno == EBADF);
	bad[1] = ofds[1];	/* another pipe's token */
	ASSERT_TRUE(pp_import(bad, 0) == NULL && errno == EINVAL);
	bad[0] = memfd;		/* a memfd, not sealed, not an arena */
	bad[1] = fds[1];
	ASSERT_TRUE(pp_import(bad, 0) == NULL && errno == EINVAL);
	bad[0] = fds[1];	/* a pipe where the arena should be */
	ASSERT_TRUE(pp_import(bad, 0) == NULL && errno == EINVAL);
	bad[0] = fds[0];
	bad[1] = memfd;		/* a file where the token should be */
	ASSERT_TRUE(pp_import(bad, 0) == NULL && errno == EINVAL);

	close(fds[0]);
	close(fds[1]);
	close(ofds[0]);
	close(ofds[1]);
	close(memfd);
	pp_close(e[0]);
	pp_close(e[1]);
	pp_close(o[0]);
	pp_close(o[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* Every export, import and close undone: the descriptor count as before. */
static int test_nothing_left(void)
{
	int before = open_fds();
	struct pp_file *e[2], *r;
	int fds[2];

	ASSERT_GE(before, 0);
	for (int i = 0; i < 20; i++) {
		ASSERT_EQ(pp_pipe2(e, PP_O_SHARED), 0);
		ASSERT_EQ(pp_export(e[0], fds), 0);
		r = pp_import(fds, 0);
		ASSERT_TRUE(r != NULL);
		close(fds[0]);
		close(fds[1]);
		ASSERT_EQ(pp_write(e[1], "ab", 2), 2);
		pp_close(e[0]);
		ASSERT_EQ(pp_fcntl(r, F_GETFL), O_RDONLY);
		pp_close(r);
		pp_close(e[1]);
	}
	ASSERT_EQ(open_fds(), before);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_exec_inherits),
		T_SUBTEST(test_scm_rights),
		T_SUBTEST(test_descriptors_hold_the_end),
		T_SUBTEST(test_refusals),
		T_SUBTEST(test_nothing_left),
	};
	const char *child = getenv(CHILD_ENV);

	(void)argc;
	self = argv[0];
	if (child)
		return child_main(child);
	return T_RUN_SUBTESTS(tests);
}
