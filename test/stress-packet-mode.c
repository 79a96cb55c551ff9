// SPDX-License-Identifier: MIT
/*
 * Description: packet mode (O_DIRECT) with concurrent writers and readers
 * (issue 11, section 5).  Four writers write packets of 16 to 4096 bytes
 * (pp_write and pp_writev); four readers read with a 4096-byte buffer
 * (pp_read, pp_readv split in two segments), so each read must return
 * exactly one whole packet, as pipe(7) says of packet mode.  Each packet
 * carries its writer, sequence number and length, and a payload made from
 * them: every packet must arrive exactly once, whole, and each reader must
 * see each writer's packets in increasing order.  Runs for
 * PP_STRESS_SECONDS (default 2).
 */
#include "helpers.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>

#define NW	4
#define NR	4
#define PKTMAX	4096
#define MAXSEQ	(1u << 22)

struct hdr {
	uint32_t writer;
	uint32_t len;
	uint64_t seq;
};

static struct pp_file *E[2];
static long long deadline;
static uint64_t sent[NW];
static atomic_uchar *seen[NW];
static atomic_llong packets;

static void *writer_main(void *arg)
{
	unsigned int w = (unsigned int)(uintptr_t)arg;
	unsigned char pkt[PKTMAX];
	unsigned int seed = w + 5;
	uint64_t seq;

	for (seq = 0; seq < MAXSEQ && t_now_ms() < deadline; seq++) {
		size_t len = sizeof(struct hdr) + (size_t)rand_r(&seed) % (PKTMAX - sizeof(struct hdr) + 1);
		struct hdr h = { w, (uint32_t)len, seq };
		ssize_t r;

		memcpy(pkt, &h, sizeof(h));
		t_fill(pkt + sizeof(h), len - sizeof(h), seq * PKTMAX, w);
		if (seq & 1) {
			struct iovec iov[2] = { { pkt, len / 2 }, { pkt + len / 2, len - len / 2 } };

			r = pp_writev(E[1], iov, 2);
		} else {
			r = pp_write(E[1], pkt, len);
		}
		if (r != (ssize_t)len)
			t_fail_at(__FILE__, __LINE__, "writer %u: a %zu-byte packet write returned %zd (%s)",
				  w, len, r, r < 0 ? strerror(errno) : "short");
	}
	sent[w] = seq;
	return NULL;
}

static void *reader_main(void *arg)
{
	unsigned int rd = (unsigned int)(uintptr_t)arg;
	unsigned char pkt[PKTMAX];
	int64_t last[NW];

	for (int w = 0; w < NW; w++)
		last[w] = -1;
	for (uint64_t n = 0;; n++) {
		struct hdr h;
		ssize_t r;

		if (n & 1) {
			struct iovec iov[2] = { { pkt, 100 }, { pkt + 100, PKTMAX - 100 } };

			r = pp_readv(E[0], iov, 2);
		} else {
			r = pp_read(E[0], pkt, PKTMAX);
		}
		if (r < 0)
			t_fail_at(__FILE__, __LINE__, "reader %u: pp_read: %s", rd, strerror(errno));
		if (r == 0)
			break;
		if ((size_t)r < sizeof(h))
			t_fail_at(__FILE__, __LINE__, "reader %u: a read of %zd bytes: not a packet", rd, r);
		memcpy(&h, pkt, sizeof(h));
		if (h.writer >= NW || h.len != (uint32_t)r || h.seq >= MAXSEQ)
			t_fail_at(__FILE__, __LINE__, "reader %u: a read of %zd bytes holds a packet of "
				  "writer %u, %u bytes: packets merged or split", rd, r, h.writer, h.len);
		if ((int64_t)h.seq <= last[h.writer])
			t_fail_at(__FILE__, __LINE__, "reader %u: writer %u's packet %llu after %lld",
				  rd, h.writer, (unsigned long long)h.seq, (long long)last[h.writer]);
		last[h.writer] = (int64_t)h.seq;
		if (t_check(pkt + sizeof(h), h.len - sizeof(h), h.seq * PKTMAX, h.writer))
			t_fail_at(__FILE__, __LINE__, "writer %u packet %llu: wrong payload", h.writer,
				  (unsigned long long)h.seq);
		if (atomic_fetch_add(&seen[h.writer][h.seq], 1))
			t_fail_at(__FILE__, __LINE__, "writer %u packet %llu read twice", h.writer,
				  (unsigned long long)h.seq);
		atomic_fetch_add(&packets, 1);
	}
	return NULL;
}

int main(void)
{
	const char *env = getenv("PP_STRESS_SECONDS");
	int ms = (env && atoi(env) > 0 ? atoi(env) : 2) * 1000;
	pthread_t tw[NW], tr[NR];

	t_watchdog(ms / 1000 + 60, "packet mode with four writers and four readers");
	for (int w = 0; w < NW; w++) {
		seen[w] = calloc(MAXSEQ, 1);
		ASSERT_TRUE(seen[w] != NULL);
	}
	t_pipe2(E, O_DIRECT);
	deadline = t_now_ms() + ms;
	for (unsigned int i = 0; i < NR; i++)
		ASSERT_EQ(pthread_create(&tr[i], NULL, reader_main, (void *)(uintptr_t)i), 0);
	for (unsigned int i = 0; i < NW; i++)
		ASSERT_EQ(pthread_create(&tw[i], NULL, writer_main, (void *)(uintptr_t)i), 0);
	for (int i = 0; i < NW; i++)
		t_join(tw[i], NULL, ms / 1000 + 30);
	pp_close(E[1]);
	for (int i = 0; i < NR; i++)
		t_join(tr[i], NULL, 30);
	for (int w = 0; w < NW; w++)
		for (uint64_t s = 0; s < sent[w]; s++)
			if (atomic_load(&seen[w][s]) != 1)
				t_fail_at(__FILE__, __LINE__, "writer %d packet %llu was never read", w,
					  (unsigned long long)s);
	printf("%lld packets from %d writers read by %d readers, each once and whole\n",
	       (long long)packets, NW, NR);
	pp_close(E[0]);
	return T_EXIT_PASS;
}
