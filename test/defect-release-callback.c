// SPDX-License-Identifier: MIT
/*
 * Description: a pp_write_ref release callback must run with no pipe lock
 * held (issue 11, section 2, defect 4), so that it may use the pipe: a
 * producer that refills on release writes the next chunk from the
 * callback, a consumer may read on.  Today the callback runs inside the
 * consuming call with the consumer lock held: a callback that reads the
 * same pipe deadlocks on that lock, and one that writes to it waits behind
 * the same lock wherever the consuming call holds more.  Each case queues a
 * chunk by reference, then consumes it one way (pp_read, pp_read_lend and
 * pp_read_done, pp_splice to a file, pp_splice to another pagepipe then
 * read there); the callback writes to, or reads from, the same pipe.  A
 * watchdog turns a deadlock into a failure that names the step.  There is
 * no kernel counterpart: pp_write_ref is pagepipe's own.
 */
#include "helpers.h"

#include <fcntl.h>

enum way { WAY_READ, WAY_LEND, WAY_SPLICE_FILE };
enum cb_act { CB_WRITE, CB_READ };

static struct pp_file *g_e[2];
static enum cb_act g_act;
static int g_calls;
static ssize_t g_ret;
static int g_err;
static char g_got[8];
static char g_msg[200];

static void on_release(void *buf, size_t count, void *arg)
{
	(void)buf;
	(void)arg;
	(void)count;
	g_calls++;
	errno = 0;
	if (g_act == CB_WRITE)
		g_ret = pp_write(g_e[1], "refill", 6);	/* refill on release */
	else
		g_ret = pp_read(g_e[0], g_got, 4);	/* "next" is queued behind the chunk */
	g_err = errno;
}

static const char *const way_names[] = { "pp_read", "pp_read_lend/pp_read_done",
					 "pp_splice to a file" };

static void run(enum way way, enum cb_act act)
{
	/* Page-aligned: one buffer, one loan. */
	static const char chunk[4096] __attribute__((aligned(4096))) = "chunk";
	char buf[4096];
	int fd = -1;

	snprintf(g_msg, sizeof(g_msg), "a release callback that calls %s on the same pipe, "
		 "run by %s", act == CB_WRITE ? "pp_write" : "pp_read", way_names[way]);
	t_watchdog(5, g_msg);
	t_pipe2(g_e, 0);
	g_act = act;
	ASSERT_EQ(pp_write_ref(g_e[1], chunk, sizeof(chunk), on_release, NULL),
		  (ssize_t)sizeof(chunk));
	ASSERT_EQ(pp_write(g_e[1], "next", 4), 4);

	switch (way) {
	case WAY_READ:
		ASSERT_EQ(pp_read(g_e[0], buf, sizeof(chunk)), (ssize_t)sizeof(chunk));
		break;
	case WAY_LEND: {
		struct iovec iov[1];

		ASSERT_EQ(pp_read_lend(g_e[0], iov, 1, sizeof(chunk)), (ssize_t)sizeof(chunk));
		ASSERT_EQ(pp_read_done(g_e[0], sizeof(chunk)), 0);
		break;
	}
	case WAY_SPLICE_FILE: {
		char path[64];

		fd = t_tmpfile(NULL, 0, 0, path);
		unlink(path);
		struct pp_file *f = pp_fdopen(fd);

		ASSERT_EQ(pp_splice(g_e[0], NULL, f, NULL, sizeof(chunk), 0),
			  (ssize_t)sizeof(chunk));
		pp_close(f);
		break;
	}
	}
	ASSERT_EQ(g_calls, 1);
	if (act == CB_WRITE) {
		if (g_ret != 6)
			t_fail_at(__FILE__, __LINE__, "%s: the callback's pp_write = %zd (%s), want 6",
				  g_msg, g_ret, strerror(g_err));
		ASSERT_EQ(pp_read(g_e[0], buf, sizeof(buf)), 10);
		ASSERT_MEM_EQ(buf, "nextrefill", 10);
	} else {
		if (g_ret != 4)
			t_fail_at(__FILE__, __LINE__, "%s: the callback's pp_read = %zd (%s), want 4",
				  g_msg, g_ret, strerror(g_err));
		ASSERT_MEM_EQ(g_got, "next", 4);
	}
	t_watchdog(0, NULL);
	pp_close(g_e[0]);
	pp_close(g_e[1]);
	if (fd >= 0)
		close(fd);
}

static int read_cb_writes(void) { run(WAY_READ, CB_WRITE); return 0; }
static int read_cb_reads(void) { run(WAY_READ, CB_READ); return 0; }
static int lend_cb_writes(void) { run(WAY_LEND, CB_WRITE); return 0; }
static int lend_cb_reads(void) { run(WAY_LEND, CB_READ); return 0; }
static int splice_file_cb_writes(void) { run(WAY_SPLICE_FILE, CB_WRITE); return 0; }
static int splice_file_cb_reads(void) { run(WAY_SPLICE_FILE, CB_READ); return 0; }

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(read_cb_writes),
		T_SUBTEST(read_cb_reads),
		T_SUBTEST(lend_cb_writes),
		T_SUBTEST(lend_cb_reads),
		T_SUBTEST(splice_file_cb_writes),
		T_SUBTEST(splice_file_cb_reads),
	};

	return T_RUN_SUBTESTS(tests);
}
