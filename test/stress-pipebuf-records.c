// SPDX-License-Identifier: MIT
/*
 * Description: many writers with PIPE_BUF records (issue 11, section 5).
 * Eight writers write records of 16 to 4096 bytes (PIPE_BUF: each write is
 * atomic) into one pipe, by pp_write and pp_writev (the write end is
 * non-blocking in the second half of the run: EAGAIN, then again); one reader parses the byte stream with reads of random sizes.  Each
 * record carries its writer, a sequence number, its length and a payload
 * made from those, so an interleaved, torn, lost or doubled record is
 * found: per writer, the sequence numbers must arrive 0, 1, 2... with none
 * missing.  Runs for PP_STRESS_SECONDS (default 2).
 */
#include "helpers.h"

#include <fcntl.h>
#include <sched.h>
#include <stdint.h>

#define NW	8
#define RECMAX	4096	/* PIPE_BUF */

struct hdr {
	uint32_t writer;
	uint32_t len;		/* the whole record, header included */
	uint64_t seq;
};

static struct pp_file *E[2];
static long long deadline, halfway;
static uint64_t sent[NW];

static void *writer_main(void *arg)
{
	unsigned int w = (unsigned int)(uintptr_t)arg;
	unsigned char rec[RECMAX];
	unsigned int seed = w * 7919u + 1;

	for (uint64_t seq = 0; t_now_ms() < deadline; seq++) {
		size_t len = sizeof(struct hdr) + (size_t)rand_r(&seed) % (RECMAX - sizeof(struct hdr) + 1);
		struct hdr h = { w, (uint32_t)len, seq };
		ssize_t r;

		memcpy(rec, &h, sizeof(h));
		t_fill(rec + sizeof(h), len - sizeof(h), seq * RECMAX, w);
		for (;;) {
			if (seq & 1) {
				struct iovec iov[2] = {
					{ rec, sizeof(h) }, { rec + sizeof(h), len - sizeof(h) },
				};
				r = pp_writev(E[1], iov, 2);
			} else {
				r = pp_write(E[1], rec, len);
			}
			if (r < 0 && errno == EAGAIN) {
				sched_yield();
				continue;
			}
			break;
		}
		if (r != (ssize_t)len)
			t_fail_at(__FILE__, __LINE__, "writer %u: a %zu-byte write returned %zd (%s)",
				  w, len, r, r < 0 ? strerror(errno) : "short: not atomic");
		sent[w] = seq + 1;
	}
	return NULL;
}

/* Half-way, make the write end non-blocking; at the end, close it once every writer is done. */
static void *closer_main(void *arg)
{
	pthread_t *th = arg;

	while (t_now_ms() < halfway)
		t_sleep_ms(10);
	ASSERT_EQ(pp_fcntl(E[1], F_SETFL, O_NONBLOCK), 0);
	for (unsigned int w = 0; w < NW; w++)
		t_join(th[w], NULL, 60);
	pp_close(E[1]);
	return NULL;
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	static unsigned char buf[1 << 20];
	unsigned char rec[RECMAX];
	uint64_t next[NW] = { 0 };
	size_t have = 0, need = sizeof(struct hdr);
	unsigned long long records = 0;
	unsigned int seed = 99;
	static pthread_t th[NW];
	pthread_t closer;

	t_watchdog(ms / 1000 + 60, "eight writers of PIPE_BUF records, one reader");
	t_pipe2(E, 0);
	deadline = t_now_ms() + ms;
	halfway = deadline - ms / 2;
	for (unsigned int w = 0; w < NW; w++)
		ASSERT_EQ(pthread_create(&th[w], NULL, writer_main, (void *)(uintptr_t)w), 0);
	ASSERT_EQ(pthread_create(&closer, NULL, closer_main, th), 0);

	for (;;) {
		size_t n = 1 + (size_t)rand_r(&seed) % (rand_r(&seed) & 1 ? sizeof(buf) : 5000);
		ssize_t r;

		r = pp_read(E[0], buf, n);
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "pp_read: %s", strerror(errno));
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; ) {
			size_t take = need - have;

			if (take > (size_t)(r - i))
				take = (size_t)(r - i);
			memcpy(rec + have, buf + i, take);
			have += take;
			i += (ssize_t)take;
			if (have < need)
				continue;
			if (need == sizeof(struct hdr)) {
				struct hdr h;

				memcpy(&h, rec, sizeof(h));
				if (h.writer >= NW || h.len < 16 || h.len > RECMAX)
					t_fail_at(__FILE__, __LINE__, "record %llu: a torn or "
						  "interleaved header (writer %u, len %u)",
						  records, h.writer, h.len);
				need = h.len;
				if (have < need)
					continue;
			}
			{
				struct hdr h;

				memcpy(&h, rec, sizeof(h));
				if (h.seq != next[h.writer])
					t_fail_at(__FILE__, __LINE__, "writer %u: record %llu arrived, "
						  "want %llu (lost or doubled)", h.writer,
						  (unsigned long long)h.seq,
						  (unsigned long long)next[h.writer]);
				if (t_check(rec + sizeof(h), h.len - sizeof(h), h.seq * RECMAX, h.writer))
					t_fail_at(__FILE__, __LINE__, "writer %u record %llu: payload "
						  "interleaved or torn", h.writer,
						  (unsigned long long)h.seq);
				next[h.writer]++;
				records++;
				have = 0;
				need = sizeof(struct hdr);
			}
		}
	}
	t_join(closer, NULL, 30);
	ASSERT_EQ(have, 0);
	for (unsigned int w = 0; w < NW; w++)
		ASSERT_EQ(next[w], sent[w]);
	printf("%llu records from %d writers, none lost, torn or interleaved\n", records, NW);
	pp_close(E[0]);
	return T_EXIT_PASS;
}
