// SPDX-License-Identifier: MIT
/*
 * Description: SIGPIPE must be raised after every pipe lock is let go
 * (issue 11, section 2, defect 3).  The kernel delivers SIGPIPE on the way
 * back to user space, after the call is done with the pipe, so a handler
 * may use the pipe (write, fcntl, close) or siglongjmp out and use it
 * again.  Today pp__pipe_epipe() raises it with the ring lock and the
 * producer lock held: a handler that writes to or asks F_GETPIPE_SZ of the
 * same pipe deadlocks, and one that siglongjmps leaves the locks taken (the
 * next write hangs) and the call's file reference leaked.  Each case runs
 * on a kernel pipe (wrapped with pp_fdopen: the calls are the system calls)
 * first, as the reference, then on a pagepipe, with the EPIPE coming from
 * pp_write and from pp_splice (a kernel pipe into the pipe).  A watchdog
 * turns a deadlock into a failure that names the step.
 */
#include "helpers.h"

/*
 * TSan flags the allocator calls a handler here makes (pp_close frees) as
 * signal-unsafe.  They are safe: every SIGPIPE in this test is synchronous,
 * raised by raise() at the library's errno boundary after all its locks
 * are let go, or by the kernel inside write(2) or splice(2) on the kernel
 * side; neither can interrupt the allocator.  That is the point of the
 * test, so the report is turned off for it alone.
 */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "report_signal_unsafe=0";
}

#include <setjmp.h>
#include <signal.h>

enum action { ACT_WRITE, ACT_FCNTL, ACT_CLOSE, ACT_LONGJMP };

static struct pp_file *g_w;
static int g_wfd = -1;		/* the kernel side: pp_fdopen() does not own it */
static enum action g_action;
static volatile sig_atomic_t g_count;
static long g_hret;
static int g_herr;
static sigjmp_buf g_env;
static char g_msg[200];

static void on_sigpipe(int sig)
{
	int saved = errno;

	(void)sig;
	if (g_count++)
		return;		/* the handler's own EPIPE raises another: ignore it */
	errno = 0;
	switch (g_action) {
	case ACT_WRITE:
		g_hret = pp_write(g_w, "y", 1);
		break;
	case ACT_FCNTL:
		g_hret = pp_fcntl(g_w, F_GETPIPE_SZ);
		break;
	case ACT_CLOSE:
		g_hret = pp_close(g_w);
		if (g_wfd >= 0 && close(g_wfd) < 0)
			g_hret = -1;
		break;
	case ACT_LONGJMP:
		siglongjmp(g_env, 1);
	}
	g_herr = errno;
	errno = saved;
}

static const char *const act_names[] = { "pp_write", "pp_fcntl(F_GETPIPE_SZ)", "pp_close",
					 "siglongjmp" };

struct outcome {
	long ret, hret, again;
	int err, herr, again_err;
};

/* The call that meets EPIPE: a write, or a splice from a kernel pipe. */
static long epipe_call(struct pp_file *w, bool splice, struct pp_file *kin)
{
	if (splice)
		return pp_splice(kin, NULL, w, NULL, 1, 0);
	return pp_write(w, "x", 1);
}

static struct outcome run(bool kernel, bool splice, enum action act)
{
	struct outcome o = { 0 };
	struct pp_file *e[2], *kin;
	struct sigaction sa;
	int k[2], fds[2] = { -1, -1 };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
	/* Whoever started us may have blocked it. */
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	ASSERT_EQ(sigprocmask(SIG_UNBLOCK, &set, NULL), 0);

	if (kernel) {
		t_kpipe2(fds, 0);
		e[0] = pp_fdopen(fds[0]);
		e[1] = pp_fdopen(fds[1]);
	} else {
		t_pipe2(e, 0);
	}
	t_kpipe2(k, 0);
	kin = pp_fdopen(k[0]);
	ASSERT_EQ(write(k[1], "abc", 3), 3);
	ASSERT_EQ(pp_close(e[0]), 0);
	if (kernel)
		ASSERT_EQ(close(fds[0]), 0);

	g_w = e[1];
	g_wfd = fds[1];
	g_action = act;
	g_count = 0;
	g_hret = 0;
	g_herr = 0;
	snprintf(g_msg, sizeof(g_msg), "%s: a SIGPIPE handler calling %s during %s",
		 kernel ? "kernel" : "pagepipe", act_names[act], splice ? "pp_splice" : "pp_write");
	t_watchdog(5, g_msg);

	if (act == ACT_LONGJMP) {
		if (sigsetjmp(g_env, 1) == 0) {
			epipe_call(e[1], splice, kin);
			t_fail_at(__FILE__, __LINE__, "%s: no SIGPIPE", g_msg);
		}
		/* Back from the handler: the pipe must work as before. */
		snprintf(g_msg, sizeof(g_msg), "%s: the same call again after siglongjmp out of "
			 "the SIGPIPE handler (%s)", kernel ? "kernel" : "pagepipe",
			 splice ? "pp_splice" : "pp_write");
		t_watchdog(5, g_msg);
		o.ret = -1;
		o.err = EPIPE;
		errno = 0;
		o.again = epipe_call(e[1], splice, kin);
		o.again_err = errno;
		o.hret = pp_fcntl(e[1], F_GETPIPE_SZ);
	} else {
		errno = 0;
		o.ret = epipe_call(e[1], splice, kin);
		o.err = errno;
		o.hret = g_hret;
		o.herr = g_herr;
	}
	ASSERT_TRUE(g_count >= 1);
	t_watchdog(5, "closing the ends");
	if (act != ACT_CLOSE) {
		ASSERT_EQ(pp_close(e[1]), 0);
		if (kernel)
			ASSERT_EQ(close(fds[1]), 0);
	}
	pp_close(kin);
	close(k[0]);
	close(k[1]);
	t_watchdog(0, NULL);
	return o;
}

static void compare(bool splice, enum action act)
{
	struct outcome k = run(true, splice, act);
	struct outcome p = run(false, splice, act);

	printf("%s, handler %s: kernel ret %ld (%s) handler %ld (%s) again %ld (%s); "
	       "pagepipe ret %ld (%s) handler %ld (%s) again %ld (%s)\n",
	       splice ? "pp_splice" : "pp_write", act_names[act],
	       k.ret, strerror(k.err), k.hret, strerror(k.herr), k.again, strerror(k.again_err),
	       p.ret, strerror(p.err), p.hret, strerror(p.herr), p.again, strerror(p.again_err));
	ASSERT_EQ(k.ret, -1);
	ASSERT_EQ(k.err, EPIPE);
	ASSERT_EQ(p.ret, k.ret);
	ASSERT_EQ(p.err, k.err);
	ASSERT_EQ(p.hret, k.hret);
	ASSERT_EQ(p.herr, k.herr);
	ASSERT_EQ(p.again, k.again);
	ASSERT_EQ(p.again_err, k.again_err);
}

static int write_handler_writes(void) { compare(false, ACT_WRITE); return 0; }
static int write_handler_fcntl(void) { compare(false, ACT_FCNTL); return 0; }
static int write_handler_closes(void) { compare(false, ACT_CLOSE); return 0; }
static int write_handler_longjmps(void) { compare(false, ACT_LONGJMP); return 0; }
static int splice_handler_writes(void) { compare(true, ACT_WRITE); return 0; }
static int splice_handler_fcntl(void) { compare(true, ACT_FCNTL); return 0; }
static int splice_handler_longjmps(void) { compare(true, ACT_LONGJMP); return 0; }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(write_handler_writes),
		T_SUBTEST(write_handler_fcntl),
		T_SUBTEST(write_handler_closes),
		T_SUBTEST(write_handler_longjmps),
		T_SUBTEST(splice_handler_writes),
		T_SUBTEST(splice_handler_fcntl),
		T_SUBTEST(splice_handler_longjmps),
	};

	return T_RUN_SUBTESTS(tests);
}
