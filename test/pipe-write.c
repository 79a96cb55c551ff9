// SPDX-License-Identifier: MIT
/*
 * Description: write(2) on a pagepipe, each step also done on a kernel
 * pipe: zero-length writes (0, and no SIGPIPE even with no reader), the
 * merge rule (small writes coalesce; a write's len % pagesize tail merges
 * into a mergeable last buffer when it fits), capacity counted in slots,
 * non-blocking partial writes and EAGAIN, blocking until there is room,
 * EPIPE and SIGPIPE with no reader (PP_O_NOSIGPIPE: EPIPE alone), and a
 * blocked writer that returns its partial count when the last reader goes.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "helpers.h"

#define BIG	(1 << 20)

static char *src;	/* BIG pattern bytes */

static void setup_src(void)
{
	src = malloc(BIG);
	if (!src)
		t_fail_at(__FILE__, __LINE__, "malloc");
	t_fill(src, BIG, 0, 42);
}

/* Read both pipes dry (non-blocking ends) and compare every byte. */
static void drain_same(int kfd, struct pp_file *pf)
{
	for (int i = 0; i < 64; i++) {
		ASSERT_SAME_READ(kfd, pf, 100000);
		{
			int kn = -1, pn = -2;

			ASSERT_SAME(ioctl(kfd, FIONREAD, &kn), pp_ioctl(pf, FIONREAD, &pn));
			ASSERT_EQ(kn, pn);
			if (kn == 0)
				return;
		}
	}
	t_fail_at(__FILE__, __LINE__, "pipe never drained");
}

static int test_zero_length(void)
{
	struct pp_file *p[2];
	int k[2];
	struct iovec none[2] = { { NULL, 0 }, { src, 0 } };
	int ksig, psig;

	t_sigpipe_count_start();
	for (int flags = 0; flags <= O_DIRECT; flags += O_DIRECT) {
		t_pipe2(p, flags | O_NONBLOCK);
		t_kpipe2(k, flags | O_NONBLOCK);
		ASSERT_SAME(write(k[1], src, 0), pp_write(p[1], src, 0));
		ASSERT_SAME(write(k[1], NULL, 0), pp_write(p[1], NULL, 0));
		ASSERT_SAME(writev(k[1], none, 2), pp_writev(p[1], none, 2));
		ASSERT_SAME(writev(k[1], none, 0), pp_writev(p[1], none, 0));
		/* No zero-length packet or buffer was made. */
		ASSERT_SAME_READ(k[0], p[0], 10);
		/* The wrong end is still EBADF. */
		ASSERT_SAME(write(k[0], src, 0), pp_write(p[0], src, 0));

		/* No reader: still 0, and no SIGPIPE. */
		close(k[0]);
		pp_close(p[0]);
		ksig = t_sigpipe_count();
		ASSERT_SAME(write(k[1], src, 0), pp_write(p[1], src, 0));
		ASSERT_SAME(writev(k[1], none, 2), pp_writev(p[1], none, 2));
		ASSERT_EQ(t_sigpipe_count(), ksig);
		psig = t_sigpipe_count();
		ASSERT_EQ(psig, 0);
		close(k[1]);
		pp_close(p[1]);
	}
	return 0;
}

/* ---------------------------------------------------------------------- */

struct op {
	char kind;	/* 'w' write n, 'r' read n, 's' F_SETFL n on the write end, 0 end */
	size_t n;
};

/*
 * Apply ops to a kernel pipe and a pagepipe, comparing each result; then
 * probe how many slots are left with a non-blocking write of 65536 bytes
 * (the count tells how the earlier writes were laid out in slots), and a
 * second probe of 1 byte (merges into the last page or not), then compare
 * the whole stream.
 */
static void same_layout(const char *name, const struct op *ops, int flags)
{
	struct pp_file *p[2];
	int k[2];
	size_t pos = 0;

	fprintf(stderr, "sequence %s\n", name);
	t_pipe2(p, flags | O_NONBLOCK);
	t_kpipe2(k, flags | O_NONBLOCK);
	for (; ops->kind; ops++) {
		struct t_res kr, pr;

		switch (ops->kind) {
		case 'w':
			kr = T_CALL(write(k[1], src + pos, ops->n));
			pr = T_CALL(pp_write(p[1], src + pos, ops->n));
			ASSERT_EQ(kr.ret, pr.ret);
			ASSERT_EQ(kr.err, pr.err);
			if (kr.ret > 0)
				pos += (size_t)kr.ret;
			break;
		case 'r':
			ASSERT_SAME_READ(k[0], p[0], ops->n);
			break;
		case 's':
			ASSERT_SAME(fcntl(k[1], F_SETFL, (int)ops->n | O_NONBLOCK),
				    pp_fcntl(p[1], F_SETFL, (int)ops->n | O_NONBLOCK));
			break;
		}
	}
	ASSERT_SAME(write(k[1], src + pos, 65536), pp_write(p[1], src + pos, 65536));
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	drain_same(k[0], p[0]);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
}

static int test_merge_rule(void)
{
#define SEQ(...) ((const struct op[]){ __VA_ARGS__, { 0, 0 } })
	/* Small writes coalesce into one page. */
	same_layout("1", SEQ({ 'w', 1 }), 0);
	same_layout("100x3", SEQ({ 'w', 100 }, { 'w', 100 }, { 'w', 100 }), 0);
	same_layout("4095+1", SEQ({ 'w', 4095 }, { 'w', 1 }), 0);
	/* Does not fit: a new slot, nothing split. */
	same_layout("4000+100", SEQ({ 'w', 4000 }, { 'w', 100 }), 0);
	same_layout("4096+1", SEQ({ 'w', 4096 }, { 'w', 1 }), 0);
	/* The len % pagesize tail goes first, into the last page, if it fits. */
	same_layout("1+4097", SEQ({ 'w', 1 }, { 'w', 4097 }), 0);
	same_layout("4000+4097", SEQ({ 'w', 4000 }, { 'w', 4097 }), 0);
	same_layout("4095+4098", SEQ({ 'w', 4095 }, { 'w', 4098 }), 0);
	same_layout("10+8195", SEQ({ 'w', 10 }, { 'w', 8195 }), 0);
	same_layout("100+12288", SEQ({ 'w', 100 }, { 'w', 12288 }), 0);
	same_layout("3000+5000+3000", SEQ({ 'w', 3000 }, { 'w', 5000 }, { 'w', 3000 }), 0);
	/* A partly read page: offset + len + tail must still fit. */
	same_layout("4096-r4000+1", SEQ({ 'w', 4096 }, { 'r', 4000 }, { 'w', 1 }), 0);
	same_layout("2000-r1000+2000", SEQ({ 'w', 2000 }, { 'r', 1000 }, { 'w', 2000 }), 0);
	same_layout("2000-r1000+2097", SEQ({ 'w', 2000 }, { 'r', 1000 }, { 'w', 2097 }), 0);
	/* Read empty: the next write starts a fresh page. */
	same_layout("100-r100+4000", SEQ({ 'w', 100 }, { 'r', 100 }, { 'w', 4000 }, { 'w', 96 }), 0);
	/* Many small writes of varied sizes. */
	same_layout("mixed", SEQ({ 'w', 1 }, { 'w', 2 }, { 'w', 3000 }, { 'w', 1100 }, { 'w', 5 },
				 { 'w', 4091 }, { 'w', 1 }, { 'r', 3 }, { 'w', 7000 }, { 'w', 2 }), 0);
	/* Packet writers never merge, with each other or into packets. */
	same_layout("direct 1x3", SEQ({ 'w', 1 }, { 'w', 1 }, { 'w', 1 }), O_DIRECT);
	same_layout("direct 1+4097", SEQ({ 'w', 1 }, { 'w', 4097 }), O_DIRECT);
	/* Packets then a plain writer (F_SETFL): no merge into a packet. */
	same_layout("direct then plain", SEQ({ 'w', 10 }, { 's', 0 }, { 'w', 10 }, { 'w', 10 }), O_DIRECT);
	return 0;
#undef SEQ
}

/* ---------------------------------------------------------------------- */

static int test_capacity_in_slots(void)
{
	struct pp_file *p[2];
	int k[2];
	int n = 0;

	/* 65536 one-byte writes fit a default pipe: they merge into 16 pages. */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	for (;;) {
		struct t_res kr = T_CALL(write(k[1], src + n, 1)), pr = T_CALL(pp_write(p[1], src + n, 1));

		ASSERT_EQ(kr.ret, pr.ret);
		ASSERT_EQ(kr.err, pr.err);
		if (kr.ret < 0)
			break;
		n++;
		ASSERT_LE(n, 70000);
	}
	ASSERT_EQ(n, 65536);
	{
		int kn = -1, pn = -2;

		ASSERT_SAME(ioctl(k[0], FIONREAD, &kn), pp_ioctl(p[0], FIONREAD, &pn));
		ASSERT_EQ(kn, 65536);
		ASSERT_EQ(pn, 65536);
	}
	/* Reading one byte frees no slot. */
	ASSERT_SAME_READ(k[0], p[0], 1);
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	/* Reading a whole page frees one. */
	ASSERT_SAME_READ(k[0], p[0], 4095);
	ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	drain_same(k[0], p[0]);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);

	/* O_DIRECT: one packet a slot; 16 one-byte writes, then EAGAIN. */
	t_pipe2(p, O_NONBLOCK | O_DIRECT);
	t_kpipe2(k, O_NONBLOCK | O_DIRECT);
	for (n = 0; n < 16; n++) {
		ASSERT_SAME(write(k[1], src + n, 1), pp_write(p[1], src + n, 1));
		ASSERT_EQ(pp_write(p[1], src, 0), 0);
	}
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));
	{
		int kn = -1, pn = -2;

		ASSERT_SAME(ioctl(k[0], FIONREAD, &kn), pp_ioctl(p[0], FIONREAD, &pn));
		ASSERT_EQ(kn, 16);
		ASSERT_EQ(pn, 16);
	}
	for (n = 0; n < 17; n++)
		ASSERT_SAME_READ(k[0], p[0], 100);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);

	/* Full pages: 16 writes of 4096, then nothing fits, not even a byte. */
	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	for (n = 0; n < 16; n++)
		ASSERT_SAME(write(k[1], src + n * 4096, 4096), pp_write(p[1], src + n * 4096, 4096));
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	drain_same(k[0], p[0]);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

static int test_nonblock_partial(void)
{
	struct pp_file *p[2];
	int k[2];

	t_pipe2(p, O_NONBLOCK);
	t_kpipe2(k, O_NONBLOCK);
	/* T-A3: n > PIPE_BUF with free slots: a partial count. */
	ASSERT_SAME(write(k[1], src, 100), pp_write(p[1], src, 100));
	ASSERT_SAME(write(k[1], src + 100, 70000), pp_write(p[1], src + 100, 70000));
	/* Completely full: EAGAIN, for any size. */
	ASSERT_SAME(write(k[1], src, 70000), pp_write(p[1], src, 70000));
	ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	/* One slot freed: a large write takes just that page. */
	ASSERT_SAME_READ(k[0], p[0], 4096);
	ASSERT_SAME(write(k[1], src, 70000), pp_write(p[1], src, 70000));
	ASSERT_SAME(write(k[1], src, 70000), pp_write(p[1], src, 70000));
	drain_same(k[0], p[0]);

	/*
	 * T-A2: a write <= PIPE_BUF into a nearly full pipe goes in whole or
	 * not at all: 15 full pages and 4000 bytes; 200 bytes do not fit.
	 */
	for (int i = 0; i < 15; i++)
		ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));
	ASSERT_SAME(write(k[1], src, 4000), pp_write(p[1], src, 4000));
	ASSERT_SAME(write(k[1], src, 200), pp_write(p[1], src, 200));
	ASSERT_SAME(write(k[1], src, 4096), pp_write(p[1], src, 4096));
	ASSERT_SAME(write(k[1], src, 96), pp_write(p[1], src, 96));	/* fits exactly */
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	drain_same(k[0], p[0]);

	/* A non-blocking writev gathers into pages the same way. */
	{
		struct iovec v[3] = { { src, 3000 }, { src + 3000, 70000 }, { src + 73000, 5 } };

		ASSERT_SAME(writev(k[1], v, 3), pp_writev(p[1], v, 3));
		ASSERT_SAME(writev(k[1], v, 3), pp_writev(p[1], v, 3));
	}
	drain_same(k[0], p[0]);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	return 0;
}

/* ---------------------------------------------------------------------- */

struct writer {
	int kfd;
	struct pp_file *pf;
	const char *buf;
	size_t n;
	struct t_res res;
	atomic_int done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	if (w->kfd >= 0)
		w->res = T_CALL(write(w->kfd, w->buf, w->n));
	else
		w->res = T_CALL(pp_write(w->pf, w->buf, w->n));
	atomic_store(&w->done, 1);
	return NULL;
}

/* A blocking write larger than the pipe returns when all of it is in. */
static int test_blocking_until_room(void)
{
	const size_t n = 300000;
	char *kb = malloc(n), *pb = malloc(n);
	struct pp_file *p[2];
	int k[2];
	struct writer kw = { .buf = src, .n = n }, pw = { .buf = src, .n = n };
	pthread_t kt, pt;
	size_t kgot = 0, pgot = 0;

	ASSERT_TRUE(kb && pb);
	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	kw.kfd = k[1];
	pw.kfd = -1;
	pw.pf = p[1];
	ASSERT_EQ(pthread_create(&kt, NULL, writer_main, &kw), 0);
	ASSERT_EQ(pthread_create(&pt, NULL, writer_main, &pw), 0);
	t_sleep_ms(50);
	/* Both have filled their pipe and wait for room. */
	ASSERT_EQ(atomic_load(&kw.done), 0);
	ASSERT_EQ(atomic_load(&pw.done), 0);
	{
		int kn = -1, pn = -2;

		ASSERT_SAME(ioctl(k[0], FIONREAD, &kn), pp_ioctl(p[0], FIONREAD, &pn));
		ASSERT_EQ(kn, 65536);
		ASSERT_EQ(pn, 65536);
	}
	while (kgot < n) {
		ssize_t r = read(k[0], kb + kgot, 7000);

		ASSERT_GE(r, 1);
		kgot += (size_t)r;
	}
	while (pgot < n) {
		ssize_t r = pp_read(p[0], pb + pgot, 7000);

		ASSERT_GE(r, 1);
		pgot += (size_t)r;
	}
	t_join(kt, NULL, 10);
	t_join(pt, NULL, 10);
	ASSERT_EQ(kw.res.ret, (long long)n);
	ASSERT_EQ(pw.res.ret, kw.res.ret);
	ASSERT_EQ(t_check(pb, n, 0, 42), 0);
	ASSERT_MEM_EQ(kb, pb, n);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);
	free(kb);
	free(pb);
	return 0;
}

/* ---------------------------------------------------------------------- */

static int test_epipe_sigpipe(void)
{
	struct pp_file *p[2];
	int k[2];
	struct iovec v[2] = { { src, 10 }, { src + 10, 5000 } };
	int before, ksig, psig;

	t_sigpipe_count_start();
	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	ASSERT_SAME(write(k[1], src, 100), pp_write(p[1], src, 100));	/* data left behind */
	close(k[0]);
	pp_close(p[0]);

	before = t_sigpipe_count();
	ASSERT_SAME(write(k[1], src, 1), (ksig = t_sigpipe_count(), pp_write(p[1], src, 1)));
	psig = t_sigpipe_count();
	ASSERT_EQ(ksig - before, 1);
	ASSERT_EQ(psig - ksig, ksig - before);

	before = t_sigpipe_count();
	ASSERT_SAME(write(k[1], src, 100000), (ksig = t_sigpipe_count(), pp_write(p[1], src, 100000)));
	psig = t_sigpipe_count();
	ASSERT_EQ(psig - ksig, ksig - before);

	before = t_sigpipe_count();
	ASSERT_SAME(writev(k[1], v, 2), (ksig = t_sigpipe_count(), pp_writev(p[1], v, 2)));
	psig = t_sigpipe_count();
	ASSERT_EQ(psig - ksig, ksig - before);

	/* SIGPIPE ignored: EPIPE all the same. */
	signal(SIGPIPE, SIG_IGN);
	ASSERT_SAME(write(k[1], src, 1), pp_write(p[1], src, 1));
	close(k[1]);
	pp_close(p[1]);
	return 0;
}

/* With the default disposition SIGPIPE kills the writer, as with a kernel pipe. */
static int test_sigpipe_kills(void)
{
	for (int which = 0; which < 2; which++) {
		int status;
		pid_t pid = fork();

		ASSERT_GE(pid, 0);
		if (pid == 0) {
			struct pp_file *p[2];
			int k[2];

			signal(SIGPIPE, SIG_DFL);
			if (which == 0) {
				t_kpipe2(k, 0);
				close(k[0]);
				(void)!write(k[1], "x", 1);
			} else {
				t_pipe2(p, 0);
				pp_close(p[0]);
				(void)!pp_write(p[1], "x", 1);
			}
			_exit(0);	/* survived: wrong */
		}
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		ASSERT_TRUE(WIFSIGNALED(status));
		ASSERT_EQ(WTERMSIG(status), SIGPIPE);
	}
	return 0;
}

static int test_nosigpipe(void)
{
	struct pp_file *p[2];
	int k[2];

	t_sigpipe_count_start();
	t_pipe2(p, PP_O_NOSIGPIPE);
	t_kpipe2(k, 0);
	/* The flag is not a status flag F_GETFL shows. */
	ASSERT_SAME(fcntl(k[1], F_GETFL), pp_fcntl(p[1], F_GETFL));
	ASSERT_SAME(fcntl(k[0], F_GETFL), pp_fcntl(p[0], F_GETFL));
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	ASSERT_ERRNO(pp_write(p[1], src, 1), EPIPE);
	ASSERT_ERRNO(pp_write(p[1], src, 100000), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 0);
	/* F_SETFL keeps it. */
	ASSERT_EQ(pp_fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
	ASSERT_ERRNO(pp_write(p[1], src, 1), EPIPE);
	ASSERT_EQ(t_sigpipe_count(), 0);
	ASSERT_EQ(pp_write(p[1], src, 0), 0);
	pp_close(p[1]);

	/* Even the default disposition does not kill: no signal is sent. */
	signal(SIGPIPE, SIG_DFL);
	t_pipe2(p, PP_O_NOSIGPIPE | O_NONBLOCK | O_DIRECT);
	pp_close(p[0]);
	ASSERT_ERRNO(pp_write(p[1], src, 1), EPIPE);
	pp_close(p[1]);
	return 0;
}

/*
 * A writer blocked on a full pipe returns the bytes it wrote when the last
 * reader closes (and gets SIGPIPE, as Linux sends it after a partial write).
 */
static int test_partial_then_reader_closes(void)
{
	const size_t n = 100000;
	struct pp_file *p[2];
	int k[2];
	struct writer kw = { .buf = src, .n = n }, pw = { .buf = src, .n = n };
	pthread_t th;
	int ksig, psig;

	t_sigpipe_count_start();
	t_pipe2(p, 0);
	t_kpipe2(k, 0);
	kw.kfd = k[1];
	pw.kfd = -1;
	pw.pf = p[1];

	ASSERT_EQ(pthread_create(&th, NULL, writer_main, &kw), 0);
	t_sleep_ms(50);
	ASSERT_EQ(atomic_load(&kw.done), 0);
	close(k[0]);
	t_join(th, NULL, 10);
	ksig = t_sigpipe_count();

	ASSERT_EQ(pthread_create(&th, NULL, writer_main, &pw), 0);
	t_sleep_ms(50);
	ASSERT_EQ(atomic_load(&pw.done), 0);
	pp_close(p[0]);
	t_join(th, NULL, 10);
	psig = t_sigpipe_count() - ksig;

	ASSERT_EQ(kw.res.ret, 65536);
	ASSERT_EQ(pw.res.ret, kw.res.ret);
	ASSERT_EQ(pw.res.err, kw.res.err);
	ASSERT_EQ(ksig, 1);
	ASSERT_EQ(psig, ksig);

	/* Nothing blocked: the next write is EPIPE. */
	ASSERT_SAME(write(k[1], src, 10), pp_write(p[1], src, 10));
	close(k[1]);
	pp_close(p[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_zero_length),
		T_SUBTEST(test_merge_rule),
		T_SUBTEST(test_capacity_in_slots),
		T_SUBTEST(test_nonblock_partial),
		T_SUBTEST(test_blocking_until_room),
		T_SUBTEST(test_epipe_sigpipe),
		T_SUBTEST(test_sigpipe_kills),
		T_SUBTEST(test_nosigpipe),
		T_SUBTEST(test_partial_then_reader_closes),
	};

	setup_src();
	return T_RUN_SUBTESTS(tests);
}
