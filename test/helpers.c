// SPDX-License-Identifier: MIT
/* Description: shared test helpers. */
#include "helpers.h"
#include "internal.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

void t_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: FAIL: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(T_EXIT_FAIL);
}

void t_fill(void *buf, size_t len, unsigned long long pos, unsigned int seed)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = t_pattern(pos + i, seed);
}

void t_rec_make(unsigned char *rec, size_t len, uint32_t id, uint64_t seq)
{
	memset(rec, 0, T_REC_HDR);
	memcpy(rec, &id, sizeof(id));
	memcpy(rec + 8, &seq, sizeof(seq));
	t_fill(rec + T_REC_HDR, len - T_REC_HDR, seq * len, id + 1);
}

int t_rec_check(const unsigned char *rec, size_t len, uint32_t *id, uint64_t *seq)
{
	memcpy(id, rec, sizeof(*id));
	memcpy(seq, rec + 8, sizeof(*seq));
	return t_check(rec + T_REC_HDR, len - T_REC_HDR, *seq * len, *id + 1) ? 1 : 0;
}

int t_check(const void *buf, size_t len, unsigned long long pos, unsigned int seed)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		if (p[i] != t_pattern(pos + i, seed)) {
			fprintf(stderr, "byte %llu: 0x%02x, want 0x%02x\n",
				pos + i, p[i], t_pattern(pos + i, seed));
			return -1;
		}
	}
	return 0;
}

void t_pipe2(struct pp_file *ends[2], int flags)
{
	if (pp_pipe2(ends, flags) < 0)
		t_fail_at(__FILE__, __LINE__, "pp_pipe2: %s", strerror(errno));
}

void t_kpipe2(int fds[2], int flags)
{
	if (pipe2(fds, flags) < 0)
		t_fail_at(__FILE__, __LINE__, "pipe2: %s", strerror(errno));
}

void t_pair_open(struct t_pair *x, int flags)
{
	t_pipe2(x->p, flags);
	t_kpipe2(x->k, flags);
}

void t_pair_close(struct t_pair *x)
{
	for (int e = 0; e < 2; e++) {
		if (x->k[e] >= 0)
			close(x->k[e]);
		if (x->p[e])
			pp_close(x->p[e]);
		x->k[e] = -1;
		x->p[e] = NULL;
	}
}

int t_fionread_at(const char *file, int line, struct pp_file *f)
{
	int n = -1;

	if (pp_ioctl(f, FIONREAD, &n) != 0)
		t_fail_at(file, line, "pp_ioctl(FIONREAD): %s", strerror(errno));
	return n;
}

int t_kfionread_at(const char *file, int line, int fd)
{
	int n = -1;

	if (ioctl(fd, FIONREAD, &n) != 0)
		t_fail_at(file, line, "ioctl(FIONREAD): %s", strerror(errno));
	return n;
}

void t_pair_same_fionread_at(const char *file, int line, const struct t_pair *x)
{
	for (int e = 0; e < 2; e++) {
		int kn = -1, pn = -2;
		struct t_res k, p;

		if (x->k[e] < 0 || !x->p[e])
			continue;
		k = T_CALL(ioctl(x->k[e], FIONREAD, &kn));
		p = T_CALL(pp_ioctl(x->p[e], FIONREAD, &pn));
		if (k.ret != p.ret || k.err != p.err || kn != pn)
			t_fail_at(file, line,
				  "FIONREAD on end %d: kernel %lld (%s) count %d, pagepipe %lld (%s) count %d",
				  e, k.ret, k.err ? strerror(k.err) : "ok", kn,
				  p.ret, p.err ? strerror(p.err) : "ok", pn);
	}
}

ssize_t t_read_full(struct pp_file *f, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pp_read(f, (char *)buf + done, len - done);
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

ssize_t t_write_full(struct pp_file *f, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pp_write(f, (const char *)buf + done, len - done);
		if (r <= 0)
			t_fail_at(__FILE__, __LINE__, "pp_write: %s", strerror(errno));
		done += (size_t)r;
	}
	return (ssize_t)done;
}

int t_tmpfile(const char *dir, size_t len, unsigned int seed, char path[64])
{
	char chunk[65536];
	int fd;

	snprintf(path, 64, "%s/pp-test-XXXXXX", dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		t_fail_at(__FILE__, __LINE__, "mkstemp %s: %s", path, strerror(errno));
	for (size_t off = 0; off < len; ) {
		size_t n = len - off < sizeof(chunk) ? len - off : sizeof(chunk);
		t_fill(chunk, n, off, seed);
		if (pwrite(fd, chunk, n, (off_t)off) != (ssize_t)n)
			t_fail_at(__FILE__, __LINE__, "pwrite: %s", strerror(errno));
		off += n;
	}
	return fd;
}

int t_tcp_pair(int fds[2])
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1;
	int l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (void *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (void *)&sa, &sl) < 0)
		goto fail;
	fds[1] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[1] < 0 || connect(fds[1], (void *)&sa, sizeof(sa)) < 0)
		goto fail;
	fds[0] = accept(l, NULL, NULL);
	if (fds[0] < 0)
		goto fail;
	close(l);
	return 0;
fail:
	close(l);
	return -1;
}

long long t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int t_pin(pthread_t t, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(t, sizeof(set), &set);
}

int t_run_subtests(const struct t_subtest *tests, size_t n)
{
	const char *only = getenv("T_SUBTEST");
	int npass = 0, nfail = 0, nskip = 0;

	for (size_t i = 0; i < n; i++) {
		int status, rc;
		pid_t pid;

		if (only && *only && strcmp(only, tests[i].name) != 0)
			continue;
		fflush(stdout);
		fflush(stderr);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "fork: %s\n", strerror(errno));
			return T_EXIT_FAIL;
		}
		if (pid == 0) {
			alarm(t_under_valgrind() ? 4 * T_SUBTEST_TIMEOUT : T_SUBTEST_TIMEOUT);
			rc = tests[i].fn();
			fflush(stdout);
			exit(rc);
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		fflush(stderr);
		if (WIFEXITED(status)) {
			rc = WEXITSTATUS(status);
			if (rc == T_EXIT_PASS) {
				npass++;
				printf("  %-40s PASS\n", tests[i].name);
			} else if (rc == T_EXIT_SKIP) {
				nskip++;
				printf("  %-40s SKIP\n", tests[i].name);
			} else {
				nfail++;
				printf("  %-40s FAIL (exit %d)\n", tests[i].name, rc);
			}
		} else {
			int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

			nfail++;
			printf("  %-40s FAIL (%s%s)\n", tests[i].name,
			       sig == SIGALRM ? "hung, killed after the timeout: " : "signal ",
			       strsignal(sig));
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed, %d skipped\n", npass, nfail, nskip);
	fflush(stdout);
	if (nfail)
		return T_EXIT_FAIL;
	if (nskip && !npass)
		return T_EXIT_SKIP;
	return T_EXIT_PASS;
}

int t_skip(const char *fmt, ...)
{
	va_list ap;

	printf("skip: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return T_EXIT_SKIP;
}

bool t_shared_missing(void)
{
	struct pp_file *e[2];

	if (pp_pipe2(e, PP_O_SHARED) == 0) {
		pp_close(e[0]);
		pp_close(e[1]);
		return false;
	}
	if (errno != EINVAL)
		t_fail_at(__FILE__, __LINE__, "pp_pipe2(PP_O_SHARED): %s", strerror(errno));
	return true;
}

void t_join_at(const char *file, int line, pthread_t th, void **ret, int seconds)
{
	struct timespec ts;
	int e;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	e = pthread_timedjoin_np(th, ret, &ts);
	if (e == ETIMEDOUT)
		t_fail_at(file, line, "a thread did not finish within %d s (hang)", seconds);
	if (e)
		t_fail_at(file, line, "pthread_timedjoin_np: %s", strerror(e));
}

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY	1
#endif

int t_uffd_missing(void *addr, size_t len)
{
	/* User-mode faults only where the kernel asks for it (vm.unprivileged_userfaultfd = 0). */
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int e;

	if (fd < 0)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg)) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void t_uffd_wait_fault_at(const char *file, int line, int uffd)
{
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffd_msg msg;

	if (poll(&pfd, 1, 20000) != 1)
		t_fail_at(file, line, "no fault on the userfaultfd range within 20 s");
	if (read(uffd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		t_fail_at(file, line, "read(userfaultfd): %s", strerror(errno));
	if (msg.event != UFFD_EVENT_PAGEFAULT)
		t_fail_at(file, line, "userfaultfd event %u, not a page fault", msg.event);
}

void t_uffd_fill_at(const char *file, int line, int uffd, void *addr, const void *src, size_t len)
{
	struct uffdio_copy copy = {
		.dst = (uintptr_t)addr, .src = (uintptr_t)src, .len = len, .mode = 0,
	};

	if (ioctl(uffd, UFFDIO_COPY, &copy))
		t_fail_at(file, line, "UFFDIO_COPY: %s", strerror(errno));
}

void *t_io_main(void *arg)
{
	struct t_io *io = arg;

	io->ret = io->write ? pp_write(io->end, io->buf, io->len) : pp_read(io->end, io->buf, io->len);
	io->err = errno;
	__atomic_store_n(&io->done_ms, t_now_ms(), __ATOMIC_RELEASE);
	return NULL;
}

static atomic_int sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	atomic_fetch_add(&sigpipes, 1);
}

void t_sigpipe_count_start(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGPIPE, &sa, NULL) < 0)
		t_fail_at(__FILE__, __LINE__, "sigaction: %s", strerror(errno));
	atomic_store(&sigpipes, 0);
}

int t_sigpipe_count(void)
{
	return atomic_load(&sigpipes);
}

void t_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void t_wait_in_syscall_at(const char *file, int line, pid_t tid, long nr, int seconds)
{
	long long deadline = t_now_ms() + seconds * 1000ll;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (;;) {
		char buf[256] = "";
		char spath[64], sbuf[512] = "";
		FILE *f = fopen(path, "re");
		long got = -1;
		char state = 0;

		if (!f) {
			t_sleep_ms(200);
			return;
		}
		if (!fgets(buf, sizeof(buf), f)) {
			fclose(f);
			t_sleep_ms(200);
			return;
		}
		fclose(f);
		if (sscanf(buf, "%ld", &got) == 1 && got == nr) {
			snprintf(spath, sizeof(spath), "/proc/self/task/%d/stat", (int)tid);
			f = fopen(spath, "re");
			if (f) {
				if (fgets(sbuf, sizeof(sbuf), f)) {
					char *p = strrchr(sbuf, ')');

					if (p && p[1] == ' ')
						state = p[2];
				}
				fclose(f);
			}
			if (state == 'S' || state == 0)
				return;
		}
		if (t_now_ms() > deadline)
			t_fail_at(file, line, "thread %d never blocked in system call %ld (%s)",
				  (int)tid, nr, buf);
		t_sleep_ms(1);
	}
}

void t_wait_ring_sleeper_at(const char *file, int line, struct pp_pipe *p, bool reader,
			    int seconds)
{
	long long deadline = t_now_ms() + 1000LL * seconds;

	for (unsigned int i = 0;; i++) {
		unsigned int n;

		n = __atomic_load_n(reader ? &p->rd_sleepers : &p->wr_sleepers, __ATOMIC_SEQ_CST);
		if (n)
			return;
		if (t_now_ms() > deadline)
			t_fail_at(file, line, "nobody ever slept on the ring as a %s",
				  reader ? "reader" : "writer");
		/* Yield first: the other thread is usually a few microseconds away. */
		if (i < 1000)
			sched_yield();
		else
			t_sleep_ms(1);
	}
}

static const char *volatile watchdog_what;

static void on_watchdog(int sig)
{
	const char *w = watchdog_what ? watchdog_what : "?";
	static const char pre[] = "FAIL: hang: ";

	(void)sig;
	if (write(STDERR_FILENO, pre, sizeof(pre) - 1) < 0 ||
	    write(STDERR_FILENO, w, strlen(w)) < 0 || write(STDERR_FILENO, "\n", 1) < 0)
		_exit(T_EXIT_FAIL);
	_exit(T_EXIT_FAIL);
}

void t_watchdog(int seconds, const char *what)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_watchdog;
	sigemptyset(&sa.sa_mask);
	watchdog_what = what;
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		t_fail_at(__FILE__, __LINE__, "sigaction: %s", strerror(errno));
	alarm((unsigned int)seconds);
}

/* ---------------------------------------------------------------------- */
/* Peers: see helpers.h. */

const char *t_run;
int t_peer_id;
static char step_label[160];

void t_step(const char *what)
{
	snprintf(step_label, sizeof(step_label), "%s run, %s: %s", t_run ? t_run : "-",
		 t_peer_id ? "peer" : "test process", what);
	t_watchdog(10, step_label);
}

void t_run_report(void)
{
	if (t_run)
		fprintf(stderr, "  (in the %s run, %s)\n", t_run,
			t_peer_id ? "a peer" : "the test process");
}

pid_t t_fork_peer(int id, const char *what)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		t_fail_at(__FILE__, __LINE__, "fork: %s", strerror(errno));
	if (pid == 0) {
		t_peer_id = id;
		t_step(what);
	}
	return pid;
}

void t_reap(pid_t pid, int seconds)
{
	long long deadline = t_now_ms() + seconds * 1000LL;
	int status = 0;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && t_now_ms() < deadline)
		t_sleep_ms(1);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		t_fail_at(__FILE__, __LINE__, "peer %d still running after %d s (hang): killed",
			  (int)pid, seconds);
	}
	if (r != pid)
		t_fail_at(__FILE__, __LINE__, "waitpid(%d) = %d: %s", (int)pid, (int)r,
			  strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		t_fail_at(__FILE__, __LINE__, "peer %d: %s %d", (int)pid,
			  WIFEXITED(status) ? "exit" : "signal",
			  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

void t_wait_asleep_tid(pid_t pid, pid_t tid)
{
	long long deadline = t_now_ms() + 5000;
	char path[64], line[512];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	for (;;) {
		FILE *f = fopen(path, "re");
		char *p, st = 0;

		if (f && fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) && p[1] == ' ')
			st = p[2];
		if (f)
			fclose(f);
		if (!st)
			t_sleep_ms(200);
		if (!st || st == 'S')
			return;
		if (t_now_ms() > deadline)
			t_fail_at(__FILE__, __LINE__, "process %d never slept (state %c)", (int)pid, st);
		t_sleep_ms(1);
	}
}

void t_wait_asleep(pid_t pid)
{
	t_wait_asleep_tid(pid, pid);	/* the main thread's task has the process's id */
}
