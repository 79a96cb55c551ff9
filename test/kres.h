/* SPDX-License-Identifier: MIT */
/*
 * kres.h - what the kernel-resident-buffer tests (test/kres-*.c, issue 12
 * section 3) share: byte sources of every kind that a pagepipe may hold
 * in its private kernel pipe (TCP on 127.0.0.1, AF_UNIX stream sockets,
 * kernel pipes, FIFOs, a pty), fed by a thread with pattern bytes; and
 * the leak probe that counts /proc/self/fd entries and threads around a
 * scenario.  Header-only, static: each test takes what it uses.
 *
 * The tests are differential: the same steps on a kernel pipe (pipe2) and
 * on a pagepipe, each fed by its own source of the same kind with the same
 * bytes.  A kernel pipe or FIFO source is deterministic (the kernel's own
 * splice_pipe_to_pipe decides the counts), so counts are compared step by
 * step; a socket or a pty is not (how many bytes one splice takes depends
 * on how the sender's writes were cut into skbs and on timing), so there
 * only what is in the pipe, and the bytes, are compared.
 */
#ifndef PP_TEST_KRES_H
#define PP_TEST_KRES_H

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>

#include "helpers.h"

#define KRES_PIPE_SZ	(1 << 20)	/* both pipes grown to this: room for every layout */

enum kres_src_kind { KS_TCP, KS_UNIX, KS_KPIPE, KS_FIFO, KS_PTY, KS_NR };

static const char *const kres_src_name[KS_NR] = {
	"tcp", "unix", "kpipe", "fifo", "pty",
};

/* Counts from this kind of source are the kernel's to decide, the same each run. */
static inline bool kres_src_det(enum kres_src_kind k)
{
	return k == KS_KPIPE || k == KS_FIFO;
}

struct kres_src {
	enum kres_src_kind kind;
	int rfd;		/* what is spliced from */
	int wfd;		/* where the feeder writes; -1 once closed */
	char dir[64];		/* a FIFO's temporary directory */
	pthread_t th;
	bool running;
	/* The feed: len pattern bytes of stream seed from pos, then EOF if eof. */
	size_t len;
	unsigned long long pos;
	unsigned int seed;
	bool eof;
	size_t chunk;		/* the feeder's write size: varies how skbs are cut */
	bool ok;
};

/*
 * Open a source of kind k.  Returns 0, or T_EXIT_SKIP (a reason printed)
 * when this machine cannot make one (no pty).
 */
static inline int kres_src_open(struct kres_src *s, enum kres_src_kind k)
{
	int fds[2];

	memset(s, 0, sizeof(*s));
	s->kind = k;
	s->rfd = s->wfd = -1;
	switch (k) {
	case KS_TCP:
		ASSERT_EQ(t_tcp_pair(fds), 0);
		s->rfd = fds[0];
		s->wfd = fds[1];
		break;
	case KS_UNIX:
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
		s->rfd = fds[0];
		s->wfd = fds[1];
		break;
	case KS_KPIPE:
		t_kpipe2(fds, O_CLOEXEC);
		s->rfd = fds[0];
		s->wfd = fds[1];
		/* Room for a whole feed: what one splice takes is then not timing. */
		ASSERT_EQ(fcntl(s->wfd, F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		break;
	case KS_FIFO: {
		char path[96];

		snprintf(s->dir, sizeof(s->dir), "/tmp/pp-kres-XXXXXX");
		if (!mkdtemp(s->dir))
			t_fail_at(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
		snprintf(path, sizeof(path), "%s/fifo", s->dir);
		ASSERT_EQ(mkfifo(path, 0600), 0);
		/* The reader first, non-blocking, so that neither open waits. */
		s->rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		ASSERT_TRUE(s->rfd >= 0);
		s->wfd = open(path, O_WRONLY | O_CLOEXEC);
		ASSERT_TRUE(s->wfd >= 0);
		ASSERT_EQ(fcntl(s->rfd, F_SETFL, 0), 0);
		unlink(path);
		rmdir(s->dir);
		ASSERT_EQ(fcntl(s->wfd, F_SETPIPE_SZ, KRES_PIPE_SZ), KRES_PIPE_SZ);
		break;
	}
	case KS_PTY: {
		struct termios tio;
		const char *name;
		int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);

		if (m < 0)
			return t_skip("pty: posix_openpt: %s", strerror(errno));
		if (grantpt(m) || unlockpt(m) || !(name = ptsname(m))) {
			close(m);
			return t_skip("pty: grantpt/unlockpt/ptsname: %s", strerror(errno));
		}
		s->wfd = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (s->wfd < 0) {
			close(m);
			return t_skip("pty: open %s: %s", name, strerror(errno));
		}
		/* Raw: bytes pass unchanged (no \n -> \r\n, no echo). */
		ASSERT_EQ(tcgetattr(s->wfd, &tio), 0);
		cfmakeraw(&tio);
		ASSERT_EQ(tcsetattr(s->wfd, TCSANOW, &tio), 0);
		ASSERT_EQ(tcgetattr(m, &tio), 0);
		cfmakeraw(&tio);
		ASSERT_EQ(tcsetattr(m, TCSANOW, &tio), 0);
		s->rfd = m;
		break;
	}
	default:
		t_fail_at(__FILE__, __LINE__, "source kind %d", k);
	}
	return 0;
}

static void *kres_feeder(void *arg)
{
	struct kres_src *s = arg;
	size_t chunk = s->chunk ? s->chunk : 65536;
	unsigned char *buf = malloc(chunk);
	size_t done = 0;

	if (!buf)
		return NULL;
	while (done < s->len) {
		size_t n = s->len - done < chunk ? s->len - done : chunk;
		ssize_t w;

		t_fill(buf, n, s->pos + done, s->seed);
		for (size_t m = 0; m < n; m += (size_t)w) {
			w = write(s->wfd, buf + m, n - m);
			if (w <= 0)
				goto out;
		}
		done += n;
	}
	s->ok = true;
out:
	if (s->eof)
		shutdown(s->wfd, SHUT_WR);	/* ENOTSOCK for pipes: closed below */
	free(buf);
	return NULL;
}

/* Start feeding: a thread writes the bytes (the source may hold fewer than len). */
static inline void kres_src_feed(struct kres_src *s, size_t len, unsigned long long pos,
				 unsigned int seed, bool eof, size_t chunk)
{
	s->len = len;
	s->pos = pos;
	s->seed = seed;
	s->eof = eof;
	s->chunk = chunk;
	s->ok = false;
	ASSERT_EQ(pthread_create(&s->th, NULL, kres_feeder, s), 0);
	s->running = true;
}

/* Wait for the feeder; a pipe or FIFO that was to end is closed now. */
static inline void kres_src_join(struct kres_src *s)
{
	if (!s->running)
		return;
	t_join(s->th, NULL, 20);
	s->running = false;
	ASSERT_TRUE(s->ok);
	if (s->eof && (s->kind == KS_KPIPE || s->kind == KS_FIFO)) {
		close(s->wfd);
		s->wfd = -1;
	}
}

static inline void kres_src_close(struct kres_src *s)
{
	if (s->running) {
		/* A feeder still writing: closing our reader makes it fail. */
		if (s->rfd >= 0)
			shutdown(s->rfd, SHUT_RDWR);
		if (s->kind == KS_KPIPE || s->kind == KS_FIFO || s->kind == KS_PTY) {
			close(s->rfd);
			s->rfd = -1;
		}
		t_join(s->th, NULL, 20);
		s->running = false;
	}
	if (s->rfd >= 0)
		close(s->rfd);
	if (s->wfd >= 0)
		close(s->wfd);
	s->rfd = s->wfd = -1;
}

/* ---------------------------------------------------------------------- */
/* Leak probe. */

static inline int kres_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		t_fail_at(__FILE__, __LINE__, "opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static inline int kres_thread_count(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	int n = -1;

	if (!f)
		t_fail_at(__FILE__, __LINE__, "/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* For a failure: each thread's id, name and what it is waiting in. */
static inline void kres_show_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[300], comm[64] = "", wchan[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if ((f = fopen(path, "re"))) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/self/task/%s/wchan", e->d_name);
		if ((f = fopen(path, "re"))) {
			if (!fgets(wchan, sizeof(wchan), f))
				wchan[0] = 0;
			fclose(f);
		}
		comm[strcspn(comm, "\n")] = 0;
		fprintf(stderr, "  thread %s: %s, in %s\n", e->d_name, comm, wchan);
	}
	if (d)
		closedir(d);
}

struct kres_leak {
	int fds, threads;
};

static void *kres_noop(void *arg)
{
	return arg;
}

static inline struct kres_leak kres_leak_begin(void)
{
	static bool warm;

	/*
	 * A sanitizer runtime starts a thread of its own with the first
	 * pthread_create (TSan): have it running before counting.
	 */
	if (!warm) {
		pthread_t th;

		ASSERT_EQ(pthread_create(&th, NULL, kres_noop, NULL), 0);
		ASSERT_EQ(pthread_join(th, NULL), 0);
		warm = true;
	}
	return (struct kres_leak){ kres_fd_count(), kres_thread_count() };
}

/*
 * After a scenario, every pagepipe end and source closed: the same number
 * of descriptors and no more threads than before (a feeder just joined
 * may take a moment to leave /proc: waited for, never timed).
 */
#define kres_leak_end(l, what) do {					\
	int _f = kres_fd_count(), _t = kres_thread_count();		\
	for (int _i = 0; _t > (l).threads && _i < 2000; _i++) {	\
		t_sleep_ms(1);						\
		_t = kres_thread_count();				\
	}								\
	if (_f != (l).fds)						\
		t_fail_at(__FILE__, __LINE__, "%s: %d descriptors open, %d before (leak)", \
			  (what), _f, (l).fds);				\
	if (_t > (l).threads) {						\
		kres_show_threads();					\
		t_fail_at(__FILE__, __LINE__, "%s: %d threads, %d before", \
			  (what), _t, (l).threads);			\
	}								\
} while (0)

/* ---------------------------------------------------------------------- */

/*
 * Splice exactly n bytes from source fd into a kernel pipe (kout >= 0) or
 * a pagepipe (pout), in pieces of the lengths in lens (cycled; the last
 * piece is what is left).  The counts of each piece go into cnt[] (at most
 * ncnt) so that the caller can compare them; returns the number of pieces.
 */
static inline int kres_fill(int src, int kout, struct pp_file *pin, struct pp_file *pout,
			    size_t n, const size_t *lens, int nlens, long long *cnt, int ncnt)
{
	size_t got = 0;
	int i = 0;

	while (got < n) {
		size_t want = n - got;
		ssize_t r;

		if (nlens && lens[i % nlens] < want)
			want = lens[i % nlens];
		if (kout >= 0)
			r = splice(src, NULL, kout, NULL, want, 0);
		else
			r = pp_splice(pin, NULL, pout, NULL, want, 0);
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "%s splice of %zu from the source at %zu of %zu: %zd (%s)",
				  kout >= 0 ? "kernel" : "pagepipe", want, got, n, r,
				  r < 0 ? strerror(errno) : "EOF");
		ASSERT_LE(r, (ssize_t)want);
		if (i < ncnt)
			cnt[i] = r;
		got += (size_t)r;
		i++;
	}
	return i;
}

#endif /* PP_TEST_KRES_H */
