// SPDX-License-Identifier: MIT
/*
 * Description: close during blocked I/O in another thread.  A thread
 * blocks in read, write, splice (pipe -> file, file -> pipe, pipe -> pipe),
 * tee or vmsplice; the main thread closes the other end and the blocked call
 * must return: EOF (0) for a consumer whose writers went, EPIPE (no SIGPIPE
 * with PP_O_NOSIGPIPE) for a producer whose readers went.  Also: closing the
 * very end a thread is blocked on leaves that call safe (the end lives until
 * the call returns; ASan checks for use-after-free).  The wait is detected
 * by the pipe's sleeper counters, not by timing.
 */
#include <stdatomic.h>

#include "helpers.h"
#include "internal.h"

enum op { OP_READ, OP_WRITE, OP_SPLICE_TO_FILE, OP_SPLICE_FROM_FILE, OP_SPLICE_P2P_IN,
	  OP_SPLICE_P2P_OUT, OP_TEE_IN, OP_TEE_OUT, OP_VMSPLICE };

struct job {
	enum op op;
	struct pp_file *a[2], *b[2];
	struct pp_file *file;
	ssize_t ret;
	int err;
};

static unsigned char big[1 << 20];

static void *blocker(void *arg)
{
	struct job *j = arg;
	struct iovec iov = { big, sizeof(big) };
	off_t off = 0;

	errno = 0;
	switch (j->op) {
	case OP_READ:
		j->ret = pp_read(j->a[0], big, 100);
		break;
	case OP_WRITE:
		j->ret = pp_write(j->a[1], big, sizeof(big));
		break;
	case OP_SPLICE_TO_FILE:
		j->ret = pp_splice(j->a[0], NULL, j->file, &off, 4096, 0);
		break;
	case OP_SPLICE_FROM_FILE:
		j->ret = pp_splice(j->file, &off, j->a[1], NULL, 4096, 0);
		break;
	case OP_SPLICE_P2P_IN:		/* a empty: waits for input */
	case OP_SPLICE_P2P_OUT:		/* b full: waits for room */
		j->ret = pp_splice(j->a[0], NULL, j->b[1], NULL, 4096, 0);
		break;
	case OP_TEE_IN:
	case OP_TEE_OUT:
		j->ret = pp_tee(j->a[0], j->b[1], 4096, 0);
		break;
	case OP_VMSPLICE:
		j->ret = pp_vmsplice(j->a[1], &iov, 1, 0);
		break;
	}
	j->err = errno;
	return NULL;
}

static void fill(struct pp_file *w)
{
	while (pp_write(w, big, 4096) == 4096)
		;
	ASSERT_EQ(errno, EAGAIN);
}

/*
 * Set up, start the blocker, wait until it sleeps, close `victim`, and
 * check the blocked call's result.
 */
static void run(enum op op, ssize_t want_ret, int want_err)
{
	struct job j = { .op = op };
	char path[64];
	int fd = t_tmpfile(NULL, 65536, 1, path);
	pthread_t th;
	struct pp_file *victim = NULL;
	struct pp_pipe *waiter;
	bool reader;

	unlink(path);
	t_sigpipe_count_start();
	t_pipe2(j.a, PP_O_NOSIGPIPE);
	t_pipe2(j.b, PP_O_NOSIGPIPE);
	j.file = pp_fdopen(fd);
	ASSERT_TRUE(j.file != NULL);
	switch (op) {
	case OP_READ:
	case OP_SPLICE_TO_FILE:
	case OP_SPLICE_P2P_IN:
	case OP_TEE_IN:
		victim = j.a[1];	/* the writer of the empty input goes */
		waiter = j.a[0]->pipe;
		reader = true;
		break;
	case OP_WRITE:
	case OP_SPLICE_FROM_FILE:
	case OP_VMSPLICE:
		pp_fcntl(j.a[1], F_SETFL, O_NONBLOCK);
		fill(j.a[1]);
		pp_fcntl(j.a[1], F_SETFL, 0);
		victim = j.a[0];	/* the reader of the full pipe goes */
		waiter = j.a[0]->pipe;
		reader = false;
		break;
	case OP_SPLICE_P2P_OUT:
	case OP_TEE_OUT:
		t_write_full(j.a[1], "data", 4);
		pp_fcntl(j.b[1], F_SETFL, O_NONBLOCK);
		fill(j.b[1]);
		pp_fcntl(j.b[1], F_SETFL, 0);
		victim = j.b[0];
		waiter = j.b[0]->pipe;
		reader = false;
		break;
	}
	ASSERT_EQ(pthread_create(&th, NULL, blocker, &j), 0);
	t_wait_ring_sleeper(waiter, reader, 10);
	pp_close(victim);
	t_join(th, NULL, 10);
	if (j.ret != want_ret || (want_ret < 0 && j.err != want_err))
		t_fail_at(__FILE__, __LINE__, "op %d: %zd (%s), want %zd (%s)", op, j.ret,
			  j.ret < 0 ? strerrorname_np(j.err) : "ok", want_ret,
			  want_ret < 0 ? strerrorname_np(want_err) : "ok");
	ASSERT_EQ(t_sigpipe_count(), 0);
	for (int i = 0; i < 2; i++) {
		if (j.a[i] != victim)
			pp_close(j.a[i]);
		if (j.b[i] != victim)
			pp_close(j.b[i]);
	}
	pp_close(j.file);
	close(fd);
}

static int test_blocked_read_writer_closes(void)      { run(OP_READ, 0, 0); return 0; }
static int test_blocked_write_reader_closes(void)     { run(OP_WRITE, -1, EPIPE); return 0; }
static int test_blocked_splice_out_writer_closes(void) { run(OP_SPLICE_TO_FILE, 0, 0); return 0; }
static int test_blocked_splice_in_reader_closes(void) { run(OP_SPLICE_FROM_FILE, -1, EPIPE); return 0; }
static int test_blocked_p2p_input_writer_closes(void) { run(OP_SPLICE_P2P_IN, 0, 0); return 0; }
static int test_blocked_p2p_output_reader_closes(void) { run(OP_SPLICE_P2P_OUT, -1, EPIPE); return 0; }
static int test_blocked_tee_input_writer_closes(void) { run(OP_TEE_IN, 0, 0); return 0; }
static int test_blocked_tee_output_reader_closes(void) { run(OP_TEE_OUT, -1, EPIPE); return 0; }
static int test_blocked_vmsplice_reader_closes(void)  { run(OP_VMSPLICE, -1, EPIPE); return 0; }

/* A big write blocked part way: the bytes already queued are its count. */
static int test_blocked_write_partial(void)
{
	struct job j = { .op = OP_WRITE };
	pthread_t th;
	char got[4096];

	t_sigpipe_count_start();
	t_pipe2(j.a, PP_O_NOSIGPIPE);
	ASSERT_EQ(pthread_create(&th, NULL, blocker, &j), 0);
	t_wait_ring_sleeper(j.a[0]->pipe, false, 10);
	ASSERT_EQ(pp_read(j.a[0], got, sizeof(got)), 4096);	/* room for one more page */
	for (int i = 0, n = 0; n != 65536; i++) {		/* ...which the writer takes */
		ASSERT_EQ(pp_ioctl(j.a[0], FIONREAD, &n), 0);
		ASSERT_LE(i, 10000);
		if (n != 65536)
			t_sleep_ms(1);
	}
	pp_close(j.a[0]);
	t_join(th, NULL, 10);
	ASSERT_EQ(j.ret, 17 * 4096);	/* 16 slots, one read, one more */
	pp_close(j.a[1]);
	return 0;
}

/* Closing the end the blocked thread itself uses: the call stays safe. */
static int test_close_own_end_while_blocked(void)
{
	struct job j = { .op = OP_READ };
	pthread_t th;

	t_pipe2(j.a, 0);
	ASSERT_EQ(pthread_create(&th, NULL, blocker, &j), 0);
	t_wait_ring_sleeper(j.a[0]->pipe, true, 10);
	pp_close(j.a[0]);		/* only the "open" reference goes */
	t_write_full(j.a[1], "late", 4);	/* the blocked read still gets it */
	t_join(th, NULL, 10);
	ASSERT_EQ(j.ret, 4);
	ASSERT_MEM_EQ(big, "late", 4);
	pp_close(j.a[1]);		/* now the pipe goes */
	return 0;
}

/* Many blocked readers and writers, all released by one close each. */
static int test_many_blocked(void)
{
	struct job r[4], w[4];
	pthread_t tr[4], tw[4];
	struct pp_file *a[2], *b[2];

	t_sigpipe_count_start();
	t_pipe2(a, PP_O_NOSIGPIPE);
	t_pipe2(b, PP_O_NOSIGPIPE);
	pp_fcntl(b[1], F_SETFL, O_NONBLOCK);
	fill(b[1]);
	pp_fcntl(b[1], F_SETFL, 0);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct job){ .op = OP_READ, .a = { a[0], a[1] } };
		w[i] = (struct job){ .op = OP_WRITE, .a = { b[0], b[1] } };
		ASSERT_EQ(pthread_create(&tr[i], NULL, blocker, &r[i]), 0);
		ASSERT_EQ(pthread_create(&tw[i], NULL, blocker, &w[i]), 0);
	}
	t_wait_ring_sleeper(a[0]->pipe, true, 10);
	t_wait_ring_sleeper(b[0]->pipe, false, 10);
	t_sleep_ms(20);		/* let the rest reach their waits too (not required) */
	pp_close(a[1]);
	pp_close(b[0]);
	for (int i = 0; i < 4; i++) {
		t_join(tr[i], NULL, 10);
		t_join(tw[i], NULL, 10);
		ASSERT_EQ(r[i].ret, 0);
		ASSERT_EQ(w[i].ret, -1);
		ASSERT_EQ(w[i].err, EPIPE);
	}
	ASSERT_EQ(t_sigpipe_count(), 0);
	pp_close(a[0]);
	pp_close(b[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_blocked_read_writer_closes),
		T_SUBTEST(test_blocked_write_reader_closes),
		T_SUBTEST(test_blocked_splice_out_writer_closes),
		T_SUBTEST(test_blocked_splice_in_reader_closes),
		T_SUBTEST(test_blocked_p2p_input_writer_closes),
		T_SUBTEST(test_blocked_p2p_output_reader_closes),
		T_SUBTEST(test_blocked_tee_input_writer_closes),
		T_SUBTEST(test_blocked_tee_output_reader_closes),
		T_SUBTEST(test_blocked_vmsplice_reader_closes),
		T_SUBTEST(test_blocked_write_partial),
		T_SUBTEST(test_close_own_end_while_blocked),
		T_SUBTEST(test_many_blocked),
	};

	return T_RUN_SUBTESTS(tests);
}
