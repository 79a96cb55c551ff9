// SPDX-License-Identifier: MIT
/*
 * Description: a producer that mixes pp_write with splices from a socket
 * and from a kernel pipe (kernel-resident buffers, src/kbuf.c), against a
 * consumer on another thread that mixes pp_read, splice to a socket,
 * splice to a second pagepipe and tee: every byte arrives once, in order.
 * What it stresses: the private kernel pipe's order against the ring's
 * while the producer appends and the consumer takes with no lock shared,
 * and the packet check that holds the producer off.  Without the rule that
 * a source is spliced into the private pipe only under the producer lock
 * with the room counted, the bytes come out of order.
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>
#include <sys/socket.h>

#define CHUNK_MAX	20000
#define TOTAL_BYTES	(24u << 20)

static struct pp_file *pw, *pr;
static unsigned int seed_of_run = 12345;

static unsigned int rnd(unsigned int *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void splice_all(struct pp_file *in, struct pp_file *out, size_t len)
{
	while (len) {
		ssize_t n = pp_splice(in, NULL, out, NULL, len, 0);

		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "splice into the pagepipe: %zd %s", n,
				  strerror(errno));
		len -= (size_t)n;
	}
}

static void *producer(void *arg)
{
	static unsigned char buf[CHUNK_MAX];
	unsigned int s = seed_of_run;
	unsigned long long pos = 0;
	int sv[2], kp[2];
	struct pp_file *sock, *kin;

	(void)arg;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe2(kp, 0))
		t_fail_at(__FILE__, __LINE__, "socketpair/pipe: %s", strerror(errno));
	fcntl(kp[1], F_SETPIPE_SZ, 1 << 20);
	sock = pp_fdopen(sv[0]);
	kin = pp_fdopen(kp[0]);
	while (pos < TOTAL_BYTES) {
		size_t len = 1 + rnd(&s) % CHUNK_MAX;

		if (len > TOTAL_BYTES - pos)
			len = TOTAL_BYTES - pos;
		t_fill(buf, len, pos, 5);
		switch (rnd(&s) % 3) {
		case 0:
			if (t_write_full(pw, buf, len) != (ssize_t)len)
				t_fail_at(__FILE__, __LINE__, "pp_write: %s", strerror(errno));
			break;
		case 1:
			if (write(sv[1], buf, len) != (ssize_t)len)
				t_fail_at(__FILE__, __LINE__, "socket write: %s", strerror(errno));
			splice_all(sock, pw, len);
			break;
		default:
			if (write(kp[1], buf, len) != (ssize_t)len)
				t_fail_at(__FILE__, __LINE__, "pipe write: %s", strerror(errno));
			splice_all(kin, pw, len);
			break;
		}
		pos += len;
	}
	pp_close(sock);
	pp_close(kin);
	close(sv[0]); close(sv[1]); close(kp[0]); close(kp[1]);
	pp_close(pw);
	return NULL;
}

/* Read exactly len bytes of a socket. */
static void sock_read(int fd, unsigned char *dst, size_t len)
{
	while (len) {
		ssize_t n = read(fd, dst, len);

		if (n <= 0)
			t_fail_at(__FILE__, __LINE__, "socket read: %zd", n);
		dst += n;
		len -= (size_t)n;
	}
}

static int test_mixed(void)
{
	static unsigned char got[CHUNK_MAX * 2];
	struct pp_file *p[2], *q[2], *t[2], *out;
	unsigned long long pos = 0;
	unsigned int s = seed_of_run * 7;
	pthread_t th;
	int sv[2], sz = 1 << 20;

	t_pipe2(p, 0);
	t_pipe2(q, 0);
	t_pipe2(t, 0);
	pw = p[1];
	pr = p[0];
	ASSERT_TRUE(pp_pipe_set_size(q[1], 1 << 20) > 0);
	ASSERT_TRUE(pp_pipe_set_size(t[1], 1 << 20) > 0);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	out = pp_fdopen(sv[1]);
	ASSERT_EQ(pthread_create(&th, NULL, producer, NULL), 0);

	for (;;) {
		size_t want = 1 + rnd(&s) % CHUNK_MAX;
		ssize_t n;

		switch (rnd(&s) % 4) {
		case 0:
			n = pp_read(pr, got, want);
			break;
		case 1:
			n = pp_splice(pr, NULL, out, NULL, want, 0);
			if (n > 0)
				sock_read(sv[0], got, (size_t)n);
			break;
		case 2:
			n = pp_splice(pr, NULL, q[1], NULL, want, 0);
			if (n > 0)
				ASSERT_EQ(t_read_full(q[0], got, (size_t)n), n);
			break;
		default:
			/* tee, then read the same bytes from both pipes. */
			n = pp_tee(pr, t[1], want, 0);
			if (n > 0) {
				static unsigned char again[CHUNK_MAX * 2];

				ASSERT_EQ(t_read_full(t[0], got, (size_t)n), n);
				ASSERT_EQ(t_read_full(pr, again, (size_t)n), n);
				/* Which side is wrong, if one is: the stream's pattern says. */
				if (t_check(again, (size_t)n, pos, 5) != 0)
					t_fail_at(__FILE__, __LINE__,
						  "wrong bytes read from the input after a tee of %zd at %llu",
						  n, pos);
				if (t_check(got, (size_t)n, pos, 5) != 0)
					t_fail_at(__FILE__, __LINE__,
						  "wrong bytes in the tee'd copy of %zd at %llu", n, pos);
				ASSERT_MEM_EQ(again, got, (size_t)n);
			}
			break;
		}
		if (n == 0)
			break;
		if (n < 0)
			t_fail_at(__FILE__, __LINE__, "consumer: %zd %s at %llu", n,
				  strerror(errno), pos);
		if (t_check(got, (size_t)n, pos, 5) != 0)
			t_fail_at(__FILE__, __LINE__, "wrong bytes in [%llu, %llu)", pos,
				  pos + (unsigned long long)n);
		pos += (unsigned long long)n;
	}
	t_join(th, NULL, 60);
	ASSERT_EQ(pos, TOTAL_BYTES);
	pp_close(out);
	close(sv[0]); close(sv[1]);
	pp_close(pr);
	pp_close(q[0]); pp_close(q[1]);
	pp_close(t[0]); pp_close(t[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_mixed),
	};

	t_watchdog(120, "stress-kbuf");
	return T_RUN_SUBTESTS(tests);
}
