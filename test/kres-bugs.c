// SPDX-License-Identifier: MIT
/*
 * Description: three mismatches with the kernel found while writing the
 * issue 12 tests, kept as regressions.
 *
 * BUG 1 (fixed): a pp_fdopen() file kept the O_NONBLOCK its descriptor had
 * when it was wrapped, and a splice into a socket waited (or not) by that
 * copy.  The kernel reads the open file description's flags at each call,
 * so after fcntl(fd, F_SETFL) on the descriptor itself they disagreed:
 *  - made O_NONBLOCK after pp_fdopen, a full socket: the kernel's splice
 *    says EAGAIN, the pagepipe's waited (a hang for an event loop);
 *  - made blocking after pp_fdopen, a full socket: the kernel's splice
 *    waits for room, the pagepipe's said EAGAIN.
 * Reproduce: T_SUBTEST=test_nonblock_set_after_fdopen.
 *
 * DIFFERENCE 2 (a skip: docs/design.md section 6): a whole buffer spliced
 * out of a kernel pipe (or FIFO) into a pipe stays mergeable in Linux (splice_pipe_to_pipe moves it with its
 * flags; only a split buffer loses CAN_MERGE), so a later write() appends
 * to its page.  A pagepipe makes an unmergeable buffer of it: the write
 * takes another slot.  In a one-slot pipe the kernel's write succeeds and
 * the pagepipe's says EAGAIN (blocking: waits); with both in a pipe,
 * F_SETPIPE_SZ to one page works in Linux and is EBUSY here.  A pagepipe
 * to pagepipe splice keeps the flag, as Linux does (the control below).
 * Reproduce: T_SUBTEST=test_kpipe_source_stays_mergeable.
 *
 * BUG 3 (fixed): splice from an empty kernel pipe or FIFO whose writer is
 * still open into a pipe that has no reader: Linux checks the input first
 * (splice_pipe_to_pipe: ipipe_prep, then opipe_prep) and says EAGAIN with
 * SPLICE_F_NONBLOCK (without it, waits for input); a pagepipe said EPIPE.
 * A socket source is not a pipe: EPIPE in both (the control).  Found by
 * fuzz-ops (its KNOWN_BUG_3 switch is now 0).
 * Reproduce: T_SUBTEST=test_empty_kpipe_into_readerless_pipe.
 */
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "kres.h"

struct call {
	pthread_t th;
	atomic_int tid;
	atomic_bool done;
	long long ret;
	int err;
	int k0, kfd;
	struct pp_file *p0, *pf;
};

static void *run(void *arg)
{
	struct call *c = arg;
	long long r;

	atomic_store(&c->tid, (int)gettid());
	errno = 0;
	r = c->pf ? pp_splice(c->p0, NULL, c->pf, NULL, 65536, 0)
		  : splice(c->k0, NULL, c->kfd, NULL, 65536, 0);
	c->ret = r;
	c->err = r < 0 ? errno : 0;
	atomic_store(&c->done, true);
	return NULL;
}

static char state(int tid)
{
	char path[64], buf[512], st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		char *q = strrchr(buf, ')');

		if (q && q[1] == ' ')
			st = q[2];
	}
	fclose(f);
	return st;
}

/* true: returned (ret/err set); false: asleep in the kernel, not returned. */
static bool returns(struct call *c)
{
	int asleep = 0;

	ASSERT_EQ(pthread_create(&c->th, NULL, run, c), 0);
	for (int i = 0; i < 20000; i++) {
		int tid = atomic_load(&c->tid);

		if (atomic_load(&c->done))
			return true;
		asleep = tid && state(tid) == 'S' ? asleep + 1 : 0;
		if (asleep >= 50 && !atomic_load(&c->done))
			return false;
		t_sleep_ms(1);
	}
	t_fail_at(__FILE__, __LINE__, "the call neither returned nor slept");
}

/* A socket pair whose send side cannot take another byte. */
static void full_socket(int s[2])
{
	int sz = 4096;
	static char junk[4096];

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
	ASSERT_EQ(setsockopt(s[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
	ASSERT_EQ(fcntl(s[1], F_SETFL, O_NONBLOCK), 0);
	while (write(s[1], junk, sizeof(junk)) > 0)
		;
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(fcntl(s[1], F_SETFL, 0), 0);
}

/*
 * Both sides: a pipe with data, a full socket wrapped (pagepipe side) while
 * its flags were `before`, then changed to `after` on the descriptor.
 */
static int flags_changed(int before, int after)
{
	struct t_pair x;
	int ks[2], ps[2];
	struct pp_file *pso;
	struct call kc = { 0 }, pc = { 0 };
	bool kret, pret;
	static char buf[65536];

	signal(SIGPIPE, SIG_IGN);
	t_pair_open(&x, 0);
	ASSERT_EQ(write(x.k[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(x.p[1], "hello", 5), 5);
	full_socket(ks);
	full_socket(ps);
	ASSERT_EQ(fcntl(ps[1], F_SETFL, before), 0);
	pso = pp_fdopen(ps[1]);
	ASSERT_TRUE(pso != NULL);
	ASSERT_EQ(fcntl(ks[1], F_SETFL, after), 0);
	ASSERT_EQ(fcntl(ps[1], F_SETFL, after), 0);	/* behind the pp_file's back */

	kc = (struct call){ .k0 = x.k[0], .kfd = ks[1] };
	pc = (struct call){ .p0 = x.p[0], .pf = pso };
	kret = returns(&kc);
	pret = returns(&pc);
	/* Let whatever waits go: the receivers read. */
	while (read(ks[0], buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
	while (read(ps[0], buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
	t_join(kc.th, NULL, 10);
	t_join(pc.th, NULL, 10);
	printf("    O_NONBLOCK %s at pp_fdopen, %s after: kernel %s %lld (%s), pagepipe %s %lld (%s)\n",
	       before ? "set" : "clear", after ? "set" : "clear",
	       kret ? "returned" : "waited, then", kc.ret, strerror(kc.err),
	       pret ? "returned" : "waited, then", pc.ret, strerror(pc.err));
	pp_close(pso);
	close(ks[0]); close(ks[1]); close(ps[0]); close(ps[1]);
	t_pair_close(&x);
	if (kret != pret || (kret && (kc.ret != pc.ret || kc.err != pc.err))) {
		printf("    BUG 1 back: a pp_fdopen() file waits by the O_NONBLOCK it was wrapped with\n");
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}

static int test_nonblock_set_after_fdopen(void)
{
	return flags_changed(0, O_NONBLOCK);
}

static int test_nonblock_cleared_after_fdopen(void)
{
	return flags_changed(O_NONBLOCK, 0);
}

/* The control: flags changed through the pp_file agree with the kernel. */
static int test_nonblock_by_pp_fcntl(void)
{
	struct t_pair x;
	int ks[2], ps[2];
	struct pp_file *pso;

	signal(SIGPIPE, SIG_IGN);
	t_pair_open(&x, 0);
	ASSERT_EQ(write(x.k[1], "hello", 5), 5);
	ASSERT_EQ(pp_write(x.p[1], "hello", 5), 5);
	full_socket(ks);
	full_socket(ps);
	pso = pp_fdopen(ps[1]);
	ASSERT_TRUE(pso != NULL);
	ASSERT_EQ(fcntl(ks[1], F_SETFL, O_NONBLOCK), 0);
	ASSERT_EQ(pp_fcntl(pso, F_SETFL, O_NONBLOCK), 0);
	ASSERT_SAME(splice(x.k[0], NULL, ks[1], NULL, 5, 0), pp_splice(x.p[0], NULL, pso, NULL, 5, 0));
	pp_close(pso);
	close(ks[0]); close(ks[1]); close(ps[0]); close(ps[1]);
	t_pair_close(&x);
	return T_EXIT_PASS;
}

/* kernel pipe (or FIFO) -> 1-slot pipe, whole buffer, then a write. */
static int merge_case(bool fifo)
{
	int a[2], b[2], a2[2], bugs = 0;
	struct pp_file *q[2], *ain;
	char buf[100] = { 0 }, path[96], dir[64] = "/tmp/pp-kres-XXXXXX";

	if (fifo) {
		ASSERT_TRUE(mkdtemp(dir) != NULL);
		snprintf(path, sizeof(path), "%s/f1", dir);
		ASSERT_EQ(mkfifo(path, 0600), 0);
		a[0] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		a[1] = open(path, O_WRONLY | O_CLOEXEC);
		unlink(path);
		snprintf(path, sizeof(path), "%s/f2", dir);
		ASSERT_EQ(mkfifo(path, 0600), 0);
		a2[0] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		a2[1] = open(path, O_WRONLY | O_CLOEXEC);
		unlink(path);
		rmdir(dir);
		ASSERT_TRUE(a[0] >= 0 && a[1] >= 0 && a2[0] >= 0 && a2[1] >= 0);
	} else {
		t_kpipe2(a, 0);
		t_kpipe2(a2, 0);
	}
	t_kpipe2(b, O_NONBLOCK);
	t_pipe2(q, O_NONBLOCK);
	ASSERT_SAME(fcntl(b[1], F_SETPIPE_SZ, 4096), pp_fcntl(q[1], F_SETPIPE_SZ, 4096));
	ASSERT_EQ(write(a[1], buf, 100), 100);
	ASSERT_EQ(write(a2[1], buf, 100), 100);
	ain = pp_fdopen(a2[0]);
	ASSERT_TRUE(ain != NULL);
	ASSERT_SAME(splice(a[0], NULL, b[1], NULL, 100, 0), pp_splice(ain, NULL, q[1], NULL, 100, 0));
	struct t_res k = T_CALL(write(b[1], buf, 100));
	struct t_res p = T_CALL(pp_write(q[1], buf, 100));

	printf("    %s -> one-slot pipe, then write(100): kernel %lld (%s), pagepipe %lld (%s)\n",
	       fifo ? "FIFO" : "kernel pipe", k.ret, strerror(k.err), p.ret, strerror(p.err));
	if (k.ret != p.ret || k.err != p.err)
		bugs++;
	pp_close(ain);
	pp_close(q[0]);
	pp_close(q[1]);
	close(a[0]); close(a[1]); close(a2[0]); close(a2[1]); close(b[0]); close(b[1]);
	/*
	 * A deliberate difference (docs/design.md section 6): user space
	 * cannot see whether the kernel buffer it moved was mergeable, or
	 * where in its page it ends, so bytes from a kernel pipe are never
	 * merged into.  Said, not failed; the day it matches, it passes.
	 */
	if (bugs)
		return t_skip("deliberate difference (docs/design.md section 6): a write after "
			      "a kernel pipe's bytes takes a slot of its own");
	return T_EXIT_PASS;
}

static int test_kpipe_source_stays_mergeable(void)
{
	return merge_case(false);
}

static int test_fifo_source_stays_mergeable(void)
{
	return merge_case(true);
}

/* The control: pagepipe -> pagepipe keeps the flag, as the kernel does. */
static int test_pagepipe_source_stays_mergeable(void)
{
	int a[2], b[2];
	struct pp_file *p[2], *q[2];
	char buf[100] = { 0 };

	t_kpipe2(a, 0);
	t_kpipe2(b, O_NONBLOCK);
	t_pipe2(p, 0);
	t_pipe2(q, O_NONBLOCK);
	ASSERT_SAME(fcntl(b[1], F_SETPIPE_SZ, 4096), pp_fcntl(q[1], F_SETPIPE_SZ, 4096));
	ASSERT_SAME(write(a[1], buf, 100), pp_write(p[1], buf, 100));
	ASSERT_SAME(splice(a[0], NULL, b[1], NULL, 100, 0), pp_splice(p[0], NULL, q[1], NULL, 100, 0));
	ASSERT_SAME(write(b[1], buf, 100), pp_write(q[1], buf, 100));
	ASSERT_SAME(write(b[1], buf, 100), pp_write(q[1], buf, 100));
	pp_close(p[0]); pp_close(p[1]); pp_close(q[0]); pp_close(q[1]);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	return T_EXIT_PASS;
}

static int epipe_order(bool sock, bool fifo)
{
	int s1[2], s2[2], d[2];
	struct pp_file *p[2], *in;
	char dir[64] = "/tmp/pp-kres-XXXXXX", path[96];

	signal(SIGPIPE, SIG_IGN);
	if (sock) {
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s1), 0);
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s2), 0);
	} else if (fifo) {
		ASSERT_TRUE(mkdtemp(dir) != NULL);
		for (int i = 0; i < 2; i++) {
			int *f = i ? s2 : s1;

			snprintf(path, sizeof(path), "%s/f%d", dir, i);
			ASSERT_EQ(mkfifo(path, 0600), 0);
			f[0] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
			f[1] = open(path, O_WRONLY | O_CLOEXEC);
			ASSERT_TRUE(f[0] >= 0 && f[1] >= 0);
			unlink(path);
		}
		rmdir(dir);
	} else {
		t_kpipe2(s1, 0);
		t_kpipe2(s2, 0);
	}
	t_kpipe2(d, 0);
	t_pipe2(p, 0);
	close(d[0]);
	pp_close(p[0]);
	in = pp_fdopen(s2[0]);
	ASSERT_TRUE(in != NULL);
	struct t_res k = T_CALL(splice(s1[0], NULL, d[1], NULL, 10, SPLICE_F_NONBLOCK));
	struct t_res q = T_CALL(pp_splice(in, NULL, p[1], NULL, 10, SPLICE_F_NONBLOCK));

	printf("    empty %s, its writer open, into a pipe without readers: kernel %lld (%s), pagepipe %lld (%s)\n",
	       sock ? "socket" : fifo ? "FIFO" : "kernel pipe", k.ret, strerror(k.err), q.ret, strerror(q.err));
	pp_close(in);
	pp_close(p[1]);
	close(d[1]);
	close(s1[0]); close(s1[1]); close(s2[0]); close(s2[1]);
	if (k.ret != q.ret || k.err != q.err) {
		printf("    BUG 3 back: a kernel pipe source is not waited for before the reader check\n");
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}

static int test_empty_socket_into_readerless_pipe(void) { return epipe_order(true, false); }
static int test_empty_kpipe_into_readerless_pipe(void)  { return epipe_order(false, false); }
static int test_empty_fifo_into_readerless_pipe(void)   { return epipe_order(false, true); }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_nonblock_by_pp_fcntl),
		T_SUBTEST(test_nonblock_set_after_fdopen),
		T_SUBTEST(test_nonblock_cleared_after_fdopen),
		T_SUBTEST(test_pagepipe_source_stays_mergeable),
		T_SUBTEST(test_kpipe_source_stays_mergeable),
		T_SUBTEST(test_fifo_source_stays_mergeable),
		T_SUBTEST(test_empty_socket_into_readerless_pipe),
		T_SUBTEST(test_empty_kpipe_into_readerless_pipe),
		T_SUBTEST(test_empty_fifo_into_readerless_pipe),
	};

	return T_RUN_SUBTESTS(tests);
}
