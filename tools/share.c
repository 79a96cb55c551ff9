// SPDX-License-Identifier: MIT
/*
 * share.c - pagepipe send and pagepipe recv: a stream between two
 * unrelated processes through one shared pagepipe, met at a Unix socket
 * path, as two shells meet at a FIFO.
 *
 *	pagepipe recv /tmp/s > out		# listens at /tmp/s
 *	producer | pagepipe send /tmp/s		# connects, hands over the pipe
 *
 * The sender makes the pagepipe (PP_O_SHARED: its ring and pages in a
 * memfd both processes map), exports the read end (pp_export: the arena's
 * descriptor and the end's token) and passes both descriptors over the
 * socket in one SCM_RIGHTS message, behind a greeting that names the
 * protocol.  The receiver imports them (pp_import checks the arena: a
 * peer is not trusted with this process's memory), answers with one byte,
 * and from then on the socket carries nothing: the sender writes its
 * input into the pagepipe and the receiver drains it to its output.
 *
 * Against `producer > fifo` and `consumer < fifo` this adds two hops and
 * saves nothing.  Where the bytes would otherwise pass through cat on
 * each side of a FIFO (a file into a FIFO, a FIFO into a file), each byte
 * is copied twice here (into the arena, out of it) where cat and a FIFO
 * copy it four times.
 *
 * A receiver that goes away makes the sender's next write fail with EPIPE,
 * which ends it as it ends cat (exit_epipe); a sender that goes away,
 * killed or not, leaves the receiver end of file once the queued bytes are
 * out (the token pipe, docs/shared-pipes.md section 3b).
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* The greeting before the descriptors: the protocol and its version. */
static const char hello[] = "pagepipe-share 1";
#define ACK	'k'
/* How long a connected peer may take to greet before it is dropped. */
#define GREETING_TIMEOUT_S	5

static const char usage_send[] =
	"Usage: pagepipe send [OPTION]... SOCKET\n"
	"Copy standard input to a 'pagepipe recv' at the Unix socket path SOCKET,\n"
	"through a pagepipe the two processes share: the receiver copies the\n"
	"bytes out of it, with no socket or kernel pipe between them.  Waits for\n"
	"the receiver to listen, as a FIFO's writer waits for a reader.\n"
	"\n"
	"  -s, --size SIZE    the pagepipe's size, 4K to 1M (default 1M)\n"
	"  -T, --timeout SEC  give up after SEC seconds without a receiver's answer\n"
	"      --progress     show bytes and rate on standard error\n"
	"      --no-progress  do not (the default when stderr is not a terminal)\n"
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n";

static const char usage_recv[] =
	"Usage: pagepipe recv [OPTION]... SOCKET\n"
	"Listen at the Unix socket path SOCKET for one 'pagepipe send' and copy\n"
	"what it sends to standard output, until it closes.  SOCKET is made here\n"
	"(a stale one left by a dead receiver is replaced) and removed once the\n"
	"sender has connected.\n"
	"\n"
	"  -T, --timeout SEC  give up after SEC seconds without a sender\n"
	"      --progress     show bytes and rate on standard error\n"
	"      --no-progress  do not (the default when stderr is not a terminal)\n"
	"      --help         display this help and exit\n"
	"      --version      output version information and exit\n";

/* The largest shared pagepipe: the slots its arena is made with. */
#define SHARE_MAX	(1u << 20)

/* SOCKET as an address; false (said) when it cannot be one. */
static bool socket_address(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (!*path || strlen(path) >= sizeof(a->sun_path)) {
		warnx("%s: socket path empty or too long (at most %zu bytes)", path,
		      sizeof(a->sun_path) - 1);
		return false;
	}
	strcpy(a->sun_path, path);
	return true;
}

/* Milliseconds left before the deadline; -1: none set. */
static int ms_left(const struct timespec *start, uint64_t timeout_ms)
{
	double left;

	if (!timeout_ms)
		return -1;
	left = (double)timeout_ms - now_since(start) * 1000;
	if (left > INT_MAX - 1)
		return INT_MAX;
	return left > 0 ? (int)left + 1 : 0;
}

/*
 * How much one step moves: a quarter of the pipe, so that the sender
 * fills one part while the receiver writes out another.  A step of the
 * whole pipe makes the two take turns, each idle while the other copies
 * (1 GiB file to file on tmpfs: 1.4-2.0 GB/s with 1 MiB steps in a 1 MiB
 * pipe, against 3.4-4.0 GB/s with quarters; one cat alone, which copies
 * as often, 3.6-3.9).
 */
static size_t share_step(struct pp_file *end)
{
	int size = pp_fcntl(end, F_GETPIPE_SZ);

	return size >= 16384 ? (size_t)size / 4 : 4096;
}

/*
 * Either side's copy, through `end` (the pagepipe side of x), to the end
 * of the input: an exit status.  EPIPE on the output ends the command in
 * report_xfer, as it ends cat (the sender's, when the receiver is gone).
 */
static int share_copy(struct xfer *x, struct pp_file *end, struct progress *pg,
		      const char *in_name, const char *out_name)
{
	size_t step = share_step(end);
	int status = EXIT_OK;

	for (;;) {
		ssize_t n = xfer_step(x, step);

		if (n < 0) {
			report_xfer(x, (int)-n, in_name, out_name);
			status = EXIT_FAIL;
		}
		if (n <= 0)
			break;
		progress_add(pg, (uint64_t)n);
		progress_tick(pg, false);
	}
	progress_tick(pg, true);
	xfer_destroy(x);
	return status;
}

/* ---------------------------------------------------------------------- */

/*
 * recv's socket path, removed if a signal ends the wait for a sender, and
 * only while it is still the socket bound here (its device and inode):
 * another receiver may have replaced it as stale.
 */
static const char *volatile listen_path;
static dev_t listen_dev;
static ino_t listen_ino;

static const int recv_sigs[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction recv_old[3];

static void listen_unlink(void)
{
	struct stat st;

	if (listen_path && !lstat(listen_path, &st) && st.st_dev == listen_dev &&
	    st.st_ino == listen_ino)
		unlink(listen_path);
}

/* Async-signal-safe: lstat, unlink, sigaction, raise. */
static void recv_signal(int sig)
{
	listen_unlink();
	for (size_t i = 0; i < sizeof(recv_sigs) / sizeof(recv_sigs[0]); i++)
		if (recv_sigs[i] == sig)
			sigaction(sig, &recv_old[i], NULL);
	raise(sig);
}

/*
 * Around the wait for a sender: a signal that would end us removes the
 * socket first.  One that came in ignored (nohup, `cmd &` in a script)
 * stays ignored.
 */
static void recv_signals_catch(void)
{
	for (size_t i = 0; i < sizeof(recv_sigs) / sizeof(recv_sigs[0]); i++) {
		struct sigaction sa = { .sa_handler = recv_signal };

		sigaction(recv_sigs[i], NULL, &recv_old[i]);
		if (recv_old[i].sa_handler == SIG_IGN)
			continue;
		sigemptyset(&sa.sa_mask);
		sigaction(recv_sigs[i], &sa, NULL);
	}
}

static void recv_signals_restore(void)
{
	for (size_t i = 0; i < sizeof(recv_sigs) / sizeof(recv_sigs[0]); i++)
		sigaction(recv_sigs[i], &recv_old[i], NULL);
}

/*
 * Bind SOCKET; where a socket is there already and nobody listens at it
 * (a receiver that died), replace it.  Anything else there is an error,
 * as for mkfifo.  Two receivers started at once on one stale socket can
 * both replace it; the one left waiting at an unlinked name waits in vain
 * (until its -T), and never removes the other's socket (listen_unlink).
 */
static int recv_listen(const struct sockaddr_un *a)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct stat st;

	if (s < 0)
		return -errno;
	if (!bind(s, (const struct sockaddr *)a, sizeof(*a)))
		goto bound;
	if (errno != EADDRINUSE || lstat(a->sun_path, &st) || !S_ISSOCK(st.st_mode))
		goto fail;
	{
		/* Non-blocking: a live receiver's full backlog is EAGAIN, not a wait. */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int r = probe < 0 ? -1 : connect(probe, (const struct sockaddr *)a, sizeof(*a));
		int e = errno;

		if (probe >= 0)
			close(probe);
		if (!r || e != ECONNREFUSED) {
			errno = EADDRINUSE;
			goto fail;
		}
	}
	if (unlink(a->sun_path) || bind(s, (const struct sockaddr *)a, sizeof(*a)))
		goto fail;
bound:
	if (!lstat(a->sun_path, &st)) {
		listen_dev = st.st_dev;
		listen_ino = st.st_ino;
	}
	if (!listen(s, 1))
		return s;
	unlink(a->sun_path);
fail: {
		int e = errno;

		close(s);
		return -e;
	}
}

/*
 * The sender's greeting and its two descriptors.  Anything else (another
 * program at the socket, a descriptor count that is not two) is EPROTO;
 * descriptors that came with it are closed.  ECONNRESET: the peer closed
 * without a word; EAGAIN: it said nothing for ms milliseconds.
 */
static int recv_fds(int s, int fds[2], int ms)
{
	char buf[sizeof(hello)];
	struct iovec iov = { buf, sizeof(buf) };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	/* A peer that connects and stays silent is not kept waiting on. */
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	int got = 0;
	ssize_t n;

	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	do
		n = recvmsg(s, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (!n)
		return -ECONNRESET;	/* gone before it said anything */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t nfd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < 2)
				fds[got] = fd;
			else
				close(fd);
			got++;
		}
	}
	if ((size_t)n == sizeof(hello) && !memcmp(buf, hello, sizeof(hello)) &&
	    !(m.msg_flags & MSG_CTRUNC) && got == 2)
		return 0;
	for (int i = 0; i < got && i < 2; i++)
		close(fds[i]);
	return -EPROTO;
}

int cmd_recv(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_AUTO };
	struct sockaddr_un a;
	struct pp_file *r = NULL;
	struct timespec start;
	struct progress pg;
	struct xfer x;
	int first, ls, s = -1, fds[2], err, status;
	sigset_t block, old_mask;
	const char *path;
	char ack = ACK;

	first = parse_opts(argc, argv, "T:", longopts, usage_recv, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (check_operands(argc, argv, first, 1))
		return EXIT_USAGE;
	path = argv[first];
	if (!socket_address(path, &a))
		return EXIT_USAGE;
	/* Closed, it would be the lowest free descriptor: the arena's, once imported. */
	if (fcntl(STDOUT_FILENO, F_GETFD) < 0) {
		warn_err(EBADF, "standard output");
		return EXIT_FAIL;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	listen_path = path;
	recv_signals_catch();
	/*
	 * Held off while the socket is made: one that came between bind()
	 * and the note of its inode would find the socket not ours to remove.
	 */
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(recv_sigs) / sizeof(recv_sigs[0]); i++)
		sigaddset(&block, recv_sigs[i]);
	sigprocmask(SIG_BLOCK, &block, &old_mask);
	ls = recv_listen(&a);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	if (ls < 0) {
		recv_signals_restore();
		listen_path = NULL;
		warn_err(-ls, path);
		return EXIT_FAIL;
	}
	/*
	 * A peer that connects and says nothing (recv_listen's probe of a
	 * live socket, a port scanner) is not the sender: wait on for one.
	 * One that says something else is an error, as a wrong program at
	 * the other end of a FIFO would be.
	 */
	for (;;) {
		struct pollfd p = { .fd = ls, .events = POLLIN };
		int n = poll(&p, 1, ms_left(&start, o.timeout_ms)), left;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -ETIMEDOUT;
			break;
		}
		s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (s < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			err = -errno;
			break;
		}
		/* Up to GREETING_TIMEOUT_S for its greeting, and never past -T. */
		left = ms_left(&start, o.timeout_ms);
		if (left < 0 || left > GREETING_TIMEOUT_S * 1000)
			left = GREETING_TIMEOUT_S * 1000;
		err = recv_fds(s, fds, left ? left : 1);
		if (err != -ECONNRESET && err != -EAGAIN)
			break;
		close(s);
		s = -1;
	}
	/* One sender: the name goes once it is here (or we give up). */
	listen_unlink();
	listen_path = NULL;
	recv_signals_restore();
	close(ls);
	if (s < 0) {
		warn_err(-err, err == -ETIMEDOUT ? "no sender connected" : path);
		return EXIT_FAIL;
	}
	if (err) {
		close(s);
		warn_err(-err, err == -EPROTO ? "not a pagepipe sender" : "the sender's greeting");
		return EXIT_FAIL;
	}
	r = pp_import(fds, O_CLOEXEC);
	err = r ? 0 : errno;
	close(fds[0]);
	close(fds[1]);
	if (err) {
		close(s);
		warn_err(err, "cannot import the pagepipe");
		return EXIT_FAIL;
	}
	/* The sender starts once it knows the pipe was taken. */
	if (write(s, &ack, 1) != 1) {
		warn_err(errno, "the sender went away");
		close(s);
		pp_close(r);
		return EXIT_FAIL;
	}
	close(s);

	if (o.progress == PROGRESS_AUTO && isatty(STDOUT_FILENO))
		o.progress = PROGRESS_OFF;
	progress_init(&pg, o.progress);
	xfer_init_ends(&x, -1, r, STDOUT_FILENO, NULL);
	status = share_copy(&x, r, &pg, "the pagepipe", "standard output");
	pp_close(r);
	return status;
}

/* ---------------------------------------------------------------------- */

static int send_fds(int s, const int fds[2])
{
	struct iovec iov = { (void *)hello, sizeof(hello) };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	ssize_t n;

	memset(&ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(c), fds, 2 * sizeof(int));
	do
		n = sendmsg(s, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(hello) ? 0 : -EPROTO;
}

/*
 * Could a receiver come to listen at path?  Yes while it is a socket or
 * absent in a directory that exists; a regular file, say, never answers.
 */
static bool path_may_listen(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!lstat(path, &st))
		return S_ISSOCK(st.st_mode);
	if (errno != ENOENT)
		return false;
	if (!slash)
		return true;
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	return !stat(dir, &st) && S_ISDIR(st.st_mode);
}

/*
 * Connect to SOCKET, waiting while nobody listens there yet (no such path,
 * or a socket nobody accepts at), as opening a FIFO for writing waits for
 * a reader.
 */
static int send_connect(const struct sockaddr_un *a, const struct timespec *start,
			uint64_t timeout_ms)
{
	for (;;) {
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

		if (s < 0)
			return -errno;
		if (!connect(s, (const struct sockaddr *)a, sizeof(*a)))
			return s;
		e = errno;
		close(s);
		if (e != ENOENT && e != ECONNREFUSED && e != EINTR)
			return -e;
		/* Not yet there is worth the wait; never there, or not a socket, is not. */
		if (e != EINTR && !path_may_listen(a->sun_path))
			return e == ENOENT ? -ENOENT : -ENOTSOCK;
		if (!ms_left(start, timeout_ms))
			return -ETIMEDOUT;
		usleep(20 * 1000);
	}
}

/* The receiver's answer: its byte once it holds the pipe (within -T). */
static int send_wait_ack(int s, const struct timespec *start, uint64_t timeout_ms)
{
	char c;
	ssize_t n;

	for (;;) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		int r = poll(&p, 1, ms_left(start, timeout_ms));

		if (r > 0)
			break;
		if (!r)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
	do
		n = read(s, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 1 && c == ACK ? 0 : -EPROTO;
}

int cmd_send(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .progress = PROGRESS_AUTO, .size = SHARE_MAX, .size_max = SHARE_MAX,
			  .size_range = "4K to 1M for a shared pagepipe" };
	struct pp_file *ends[2];
	struct sockaddr_un a;
	struct timespec start;
	struct progress pg;
	struct xfer x;
	int first, s, fds[2], err, status;
	const char *path;
	bool known = true;	/* input_size() only clears it */

	first = parse_opts(argc, argv, "s:T:", longopts, usage_send, &o);
	if (first < 0)
		return first == -2 ? EXIT_OK : EXIT_USAGE;
	if (check_operands(argc, argv, first, 1))
		return EXIT_USAGE;
	path = argv[first];
	if (!socket_address(path, &a))
		return EXIT_USAGE;
	if (fcntl(STDIN_FILENO, F_GETFD) < 0) {
		warn_err(EBADF, "standard input");
		return EXIT_FAIL;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	s = send_connect(&a, &start, o.timeout_ms);
	if (s < 0) {
		warn_err(-s, s == -ETIMEDOUT ? "no receiver listening" : path);
		return EXIT_FAIL;
	}
	/* Every size, 64K and below too: stage_pipe() leaves those at the default. */
	err = pp_pipe2(ends, PP_O_SHARED | PP_O_NOSIGPIPE) ? -errno : 0;
	if (!err && pp_pipe_set_size(ends[1], (size_t)o.size) < 0) {
		err = -errno;
		pp_close(ends[0]);
		pp_close(ends[1]);
	}
	if (err) {
		close(s);
		warn_err(-err, "cannot make a shared pagepipe");
		return EXIT_FAIL;
	}
	err = pp_export(ends[0], fds) ? -errno : 0;
	if (!err) {
		err = send_fds(s, fds);
		close(fds[0]);
		close(fds[1]);
	}
	if (!err)
		err = send_wait_ack(s, &start, o.timeout_ms);
	close(s);
	/* The receiver holds the read end now (or nobody will). */
	pp_close(ends[0]);
	if (err) {
		pp_close(ends[1]);
		warn_err(-err, err == -EPROTO ? "the receiver did not take the pagepipe" :
			       err == -ETIMEDOUT ? "no answer from the receiver" :
			       "cannot hand over the pagepipe");
		return EXIT_FAIL;
	}

	/* Not over what is typed at a terminal. */
	if (o.progress == PROGRESS_AUTO && isatty(STDIN_FILENO))
		o.progress = PROGRESS_OFF;
	progress_init(&pg, o.progress);
	pg.total = input_size(STDIN_FILENO, &known);
	pg.known = known;
	xfer_init_ends(&x, STDIN_FILENO, NULL, -1, ends[1]);
	status = share_copy(&x, ends[1], &pg, "standard input", "the pagepipe");
	/* The receiver sees end of file once it has drained what is queued. */
	pp_close(ends[1]);
	return status;
}
