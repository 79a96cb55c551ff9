// SPDX-License-Identifier: MIT
/*
 * Description: spare pages parked in ring slots (src/pipe.h, struct
 * pp_slot: spare).  A reader that retires a page the pipe alone holds
 * leaves it in the slot for the writer's next fill there; whatever is
 * parked goes back when the pipe empties, so an idle pipe keeps none.
 * Checked here, looking at the slots themselves: pages are parked while
 * the pipe holds bytes and taken by the writes that wrap onto them; no
 * slot holds a spare once the pipe is read dry (the idle-memory bound of
 * issue 11, defect 11), in one read or packet by packet, or emptied by a
 * splice that moves its buffers (it retires slots without consume()); a
 * spare left in a slot that another producer filled without taking it
 * (pp_pipe_add_buf) goes back too; a resize and the pipe's end give every
 * one back (no page leaks: the pool and this thread's cache account for
 * them all); and a writer, a reader and a resizer on three threads move
 * every byte in order while pages go round through the slots.  A pipe
 * that empties while a writer on the reader's CPU waits for room keeps its
 * parked pages for that writer (pages_keep): they go to it as a chain,
 * which it takes when its wait ends, so nothing keeps them once it is
 * gone: checked by marking a waiter in the pipe as pipe_write does, and by
 * a writer and a reader taking turns on one CPU with 64 KiB messages (the
 * writer waits for room each turn), after which the idle pipe keeps
 * nothing in its slots or its chain.
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>

static unsigned int spares(struct pp_file *f)
{
	struct pp_pipe *p = f->pipe;
	unsigned int n = 0;

	for (unsigned int i = 0; i < p->ring_size; i++)
		n += __atomic_load_n(&p->slots[i].spare, __ATOMIC_RELAXED) != NULL;
	return n;
}

/* Pages out of the pool that are not in this thread's cache. */
static size_t pages_held(void)
{
	size_t chunks, in_use;

	pp__page_pool_stats(&chunks, &in_use);
	return in_use - pp__thread_page_count();
}

static int test_park_take_unpark(void)
{
	const size_t psz = pp_page_size();
	unsigned char *page = malloc(psz), *back = malloc(psz);
	struct pp_file *e[2];
	struct pp_pipe *p;
	unsigned long long wpos = 0, rpos = 0;

	ASSERT_TRUE(page && back);
	t_pipe2(e, O_NONBLOCK);
	p = e[0]->pipe;
	/* Eight pages in, four out one at a time: four parked, slots behind. */
	for (int i = 0; i < 8; i++, wpos += psz) {
		t_fill(page, psz, wpos, 3);
		ASSERT_EQ(pp_write(e[1], page, psz), (ssize_t)psz);
	}
	for (int i = 0; i < 4; i++, rpos += psz) {
		ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
		ASSERT_EQ(t_check(back, psz, rpos, 3), 0);
	}
	ASSERT_EQ(spares(e[0]), 4);
	/*
	 * Writes that go round the ring onto those slots take their pages:
	 * keep four slots filled, so the pipe never empties, until head has
	 * come round to slot 0 and past slot 3 again.
	 */
	while (p->head < p->ring_size + 4) {
		t_fill(page, psz, wpos, 3);
		ASSERT_EQ(pp_write(e[1], page, psz), (ssize_t)psz);
		wpos += psz;
		ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
		ASSERT_EQ(t_check(back, psz, rpos, 3), 0);
		rpos += psz;
	}
	/* Every slot head passed had its page taken; those after are parked. */
	for (unsigned int i = p->head - p->ring_size; i != p->head; i++) {
		bool parked = __atomic_load_n(&pp__pipe_slot(p, i)->spare, __ATOMIC_RELAXED);

		if (parked != (i < p->tail))
			t_fail_at(__FILE__, __LINE__, "slot %u (tail %u, head %u): spare %d",
				  i, p->tail, p->head, parked);
	}
	/* Read dry: the idle pipe keeps no spare. */
	while (rpos < wpos) {
		ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
		ASSERT_EQ(t_check(back, psz, rpos, 3), 0);
		rpos += psz;
	}
	ASSERT_EQ(spares(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	free(page);
	free(back);
	return 0;
}

/*
 * Read dry in one call (slots retire together, the last one kept drained),
 * and packet by packet (the last one retires, the pipe is empty).
 */
static int test_read_all_keeps_none(void)
{
	const size_t psz = pp_page_size();
	unsigned char *buf = malloc(16 * psz);
	struct pp_file *e[2];

	ASSERT_TRUE(buf != NULL);
	t_pipe2(e, O_NONBLOCK);
	for (int round = 0; round < 3; round++) {
		t_fill(buf, 16 * psz, 0, 5);
		ASSERT_EQ(pp_write(e[1], buf, 16 * psz), (ssize_t)(16 * psz));
		memset(buf, 0, 16 * psz);
		ASSERT_EQ(pp_read(e[0], buf, 16 * psz), (ssize_t)(16 * psz));
		ASSERT_EQ(t_check(buf, 16 * psz, 0, 5), 0);
		ASSERT_EQ(spares(e[0]), 0);
	}
	pp_close(e[0]);
	pp_close(e[1]);
	/* Packets: no slot is kept drained, the last one retires too. */
	t_pipe2(e, O_NONBLOCK | O_DIRECT);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 16; i++)
			ASSERT_EQ(pp_write(e[1], buf + i * psz, psz), (ssize_t)psz);
		for (int i = 0; i < 16; i++)
			ASSERT_EQ(pp_read(e[0], buf + i * psz, 2 * psz), (ssize_t)psz);
		ASSERT_EQ(t_check(buf, 16 * psz, 0, 5), 0);
		ASSERT_EQ(spares(e[0]), 0);
	}
	pp_close(e[0]);
	pp_close(e[1]);
	free(buf);
	return 0;
}

/* Read in part, then the rest moved out by a splice, which retires slots itself. */
static int test_splice_empties(void)
{
	const size_t psz = pp_page_size();
	unsigned char *page = malloc(psz);
	struct pp_file *e[2], *o[2];

	ASSERT_TRUE(page != NULL);
	t_pipe2(e, O_NONBLOCK);
	t_pipe2(o, O_NONBLOCK);
	memset(page, 0x43, psz);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(pp_write(e[1], page, psz), (ssize_t)psz);
	ASSERT_EQ(pp_read(e[0], page, psz), (ssize_t)psz);
	ASSERT_EQ(spares(e[0]), 1);
	ASSERT_EQ(pp_splice(e[0], NULL, o[1], NULL, 3 * psz, SPLICE_F_NONBLOCK), (ssize_t)(3 * psz));
	ASSERT_EQ(spares(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	pp_close(o[0]);
	pp_close(o[1]);
	free(page);
	return 0;
}

static void user_release(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	pp_page_put(buf->page);
}

static bool user_get(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	return pp__page_get(buf->page);
}

static const struct pp_buf_ops user_ops = {
	.release	= user_release,
	.get		= user_get,
};

/*
 * Spares parked, then producers that do not take them fill those slots;
 * readers (pp_read, and a splice to another pagepipe) retire them.
 */
static int test_spare_under_other_producers(void)
{
	const size_t psz = pp_page_size();
	unsigned char *page = malloc(psz), *back = malloc(psz);
	struct pp_file *e[2], *o[2];
	struct pp_pipe *p;
	size_t held0;

	ASSERT_TRUE(page && back);
	held0 = pages_held();
	t_pipe2(e, O_NONBLOCK);
	t_pipe2(o, O_NONBLOCK);
	p = e[0]->pipe;
	memset(page, 0x41, psz);
	for (unsigned int round = 0; round < 3 * p->ring_size; round++) {
		struct pp_buf buf = { .len = (unsigned int)psz, .ops = &user_ops };

		/* Two whole pages, one read: the first is parked behind the second. */
		ASSERT_EQ(pp_write(e[1], page, psz), (ssize_t)psz);
		ASSERT_EQ(pp_write(e[1], page, psz), (ssize_t)psz);
		ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
		/* Then a slot filled by pp_pipe_add_buf, which takes no spare. */
		buf.page = pp_page_alloc();
		ASSERT_TRUE(buf.page != NULL);
		memset(buf.page, 0x42, psz);
		ASSERT_EQ(pp_pipe_add_buf(e[1], &buf, 0), (ssize_t)psz);
		ASSERT_EQ(pp_write(e[1], page, 100), 100);
		/* Retired by a splice to another pagepipe, and by reads. */
		ASSERT_EQ(pp_splice(e[0], NULL, o[1], NULL, psz, SPLICE_F_NONBLOCK), (ssize_t)psz);
		ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
		ASSERT_EQ(back[0], 0x42);
		ASSERT_EQ(pp_read(e[0], back, psz), 100);
		ASSERT_EQ(pp_read(o[0], back, psz), (ssize_t)psz);
		ASSERT_EQ(back[0], 0x41);
		ASSERT_EQ(spares(e[0]), 0);
	}
	/* A resize gives back what is parked, in the array it leaves. */
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(pp_write(e[1], page, psz), (ssize_t)psz);
	ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
	ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
	ASSERT_GE(spares(e[0]), 1);
	ASSERT_EQ(pp_fcntl(e[1], F_SETPIPE_SZ, (int)(64 * psz)), (int)(64 * psz));
	for (struct pp__ring *r = p->retired; r; r = r->retired)
		for (unsigned int i = 0; i < r->size; i++)
			ASSERT_TRUE(__atomic_load_n(&r->slot[i].spare, __ATOMIC_RELAXED) == NULL);
	ASSERT_EQ(spares(e[0]), 0);
	/* The pipe's end gives back what is parked at the time. */
	ASSERT_EQ(pp_read(e[0], back, psz), (ssize_t)psz);
	ASSERT_GE(spares(e[0]), 1);
	pp_close(e[0]);
	pp_close(e[1]);
	pp_close(o[0]);
	pp_close(o[1]);
	ASSERT_EQ(pages_held(), held0);
	free(page);
	free(back);
	return 0;
}

/* This thread on the CPU it runs on, so that its reads and writes share one. */
static int pin_here(void)
{
	int cpu = sched_getcpu();

	if (cpu < 0 || t_pin(pthread_self(), cpu))
		return -1;
	return cpu;
}

static unsigned int chain_len(struct pp_pipe *p)
{
	unsigned int n = 0;

	for (void *page = __atomic_load_n(&p->wr_kept, __ATOMIC_ACQUIRE); page; page = *(void **)page)
		n++;
	return n;
}

/*
 * A writer waiting in pipe_write for room is marked as pipe_write marks
 * one (wr_room_waiters).  Read dry: the fifteen retired slots' pages go to
 * the waiter's chain, not to the thread cache (the sixteenth is the
 * drained slot, whose page stays as always), and no slot keeps one.  The
 * waiter's part (take the chain when its wait ends) is done here by hand;
 * test_turns_on_one_cpu has real ones.  Read dry with nobody waiting:
 * nothing kept anywhere.
 */
static int test_kept_for_waiting_writer(void)
{
	const size_t psz = pp_page_size();
	unsigned char *buf = malloc(16 * psz);
	struct pp_file *e[2];
	struct pp_pipe *p;
	size_t held0;
	void *chain;

	ASSERT_TRUE(buf != NULL);
	held0 = pages_held();
	t_pipe2(e, O_NONBLOCK);
	p = e[0]->pipe;
	for (int round = 0; round < 3; round++) {
		t_fill(buf, 16 * psz, 0, 21 + round);
		ASSERT_EQ(pp_write(e[1], buf, 16 * psz), (ssize_t)(16 * psz));
		__atomic_store_n(&p->wr_room_waiters, 1, __ATOMIC_SEQ_CST);
		memset(buf, 0, 16 * psz);
		ASSERT_EQ(pp_read(e[0], buf, 16 * psz), (ssize_t)(16 * psz));
		ASSERT_EQ(t_check(buf, 16 * psz, 0, 21 + round), 0);
		ASSERT_EQ(chain_len(p), 15);
		ASSERT_EQ(spares(e[0]), 0);
		/* The waiter leaves and takes them; its pages go back as any freed page. */
		__atomic_store_n(&p->wr_room_waiters, 0, __ATOMIC_SEQ_CST);
		chain = __atomic_exchange_n(&p->wr_kept, NULL, __ATOMIC_SEQ_CST);
		while (chain) {
			void *next = *(void **)chain;

			pp_page_put(chain);
			chain = next;
		}
		/* Nobody waits: what is parked goes back, none kept. */
		t_fill(buf, 16 * psz, 16 * psz, 21 + round);
		ASSERT_EQ(pp_write(e[1], buf, 16 * psz), (ssize_t)(16 * psz));
		memset(buf, 0, 16 * psz);
		ASSERT_EQ(pp_read(e[0], buf, 16 * psz), (ssize_t)(16 * psz));
		ASSERT_EQ(t_check(buf, 16 * psz, 16 * psz, 21 + round), 0);
		ASSERT_EQ(chain_len(p), 0);
		ASSERT_EQ(spares(e[0]), 0);
	}
	/* Kept, and the pipe's end comes first: every page back. */
	ASSERT_EQ(pp_write(e[1], buf, 16 * psz), (ssize_t)(16 * psz));
	__atomic_store_n(&p->wr_room_waiters, 1, __ATOMIC_SEQ_CST);
	ASSERT_EQ(pp_read(e[0], buf, 16 * psz), (ssize_t)(16 * psz));
	ASSERT_EQ(chain_len(p), 15);
	__atomic_store_n(&p->wr_room_waiters, 0, __ATOMIC_SEQ_CST);
	pp_close(e[0]);
	pp_close(e[1]);
	ASSERT_EQ(pages_held(), held0);
	free(buf);
	return 0;
}

#define TURNS_BYTES	(t_under_valgrind() ? (8u << 20) : T_SANITIZED ? (64u << 20) : (512u << 20))

struct turns {
	struct pp_file *e[2];
	int cpu;
};

static void *turns_writer(void *arg)
{
	struct turns *tu = arg;
	const size_t len = 64 << 10;
	unsigned char *buf = malloc(len);
	unsigned long long pos = 0;

	if (!buf || t_pin(pthread_self(), tu->cpu)) {
		free(buf);
		pp_close(tu->e[1]);
		return (void *)1;
	}
	while (pos < TURNS_BYTES) {
		t_fill(buf, len, pos, 13);
		if (pp_write(tu->e[1], buf, len) != (ssize_t)len) {
			free(buf);
			pp_close(tu->e[1]);
			return (void *)2;
		}
		pos += len;
	}
	free(buf);
	pp_close(tu->e[1]);
	return NULL;
}

/* One CPU, 64 KiB messages: the pipe fills, empties and fills again each turn. */
static int test_turns_on_one_cpu(void)
{
	const size_t len = 64 << 10;
	struct turns tu;
	unsigned char *buf = malloc(len);
	unsigned long long pos = 0;
	pthread_t w;
	void *ret;
	ssize_t r;

	ASSERT_TRUE(buf != NULL);
	tu.cpu = pin_here();
	if (tu.cpu < 0)
		return t_skip("cannot pin this thread to its CPU");
	t_pipe2(tu.e, 0);
	ASSERT_EQ(pthread_create(&w, NULL, turns_writer, &tu), 0);
	for (;;) {
		r = t_read_full(tu.e[0], buf, len);
		if (r <= 0)
			break;
		if (t_check(buf, (size_t)r, pos, 13))
			t_fail_at(__FILE__, __LINE__, "wrong byte in the message at %llu", pos);
		pos += (unsigned long long)r;
	}
	ASSERT_EQ(r, 0);
	t_join(w, &ret, 120);
	ASSERT_TRUE(ret == NULL);
	ASSERT_EQ(pos, (unsigned long long)TURNS_BYTES);
	/*
	 * The writer waited for room at nearly every message, and the reader
	 * emptied the pipe under it: chains went over (thousands, counted), or
	 * this test checked nothing of them.
	 */
	ASSERT_GE(__atomic_load_n(&tu.e[0]->pipe->wr_kept_chains, __ATOMIC_RELAXED), 1);
	/* Read dry after the writer left: the idle pipe keeps nothing. */
	ASSERT_EQ(spares(tu.e[0]), 0);
	ASSERT_EQ(chain_len(tu.e[0]->pipe), 0);
	pp_close(tu.e[0]);
	free(buf);
	return 0;
}

/* Valgrind runs one thread at a time, each many times slower. */
#define STRESS_BYTES	(t_under_valgrind() ? (4u << 20) : T_SANITIZED ? (24u << 20) : (256u << 20))

struct stress {
	struct pp_file *e[2];
	unsigned long long written;
	bool done;
};

static void *stress_writer(void *arg)
{
	struct stress *st = arg;
	unsigned char *buf = malloc(3 * 4096);
	unsigned long long pos = 0;
	unsigned int seed = 7;

	if (!buf) {
		pp_close(st->e[1]);
		return (void *)1;
	}
	while (pos < STRESS_BYTES) {
		/* Whole pages mostly (they park and are taken), some odd sizes. */
		size_t n = (rand_r(&seed) & 3) ? 4096 : 1 + (size_t)rand_r(&seed) % (3 * 4096);
		ssize_t r;

		t_fill(buf, n, pos, 9);
		r = pp_write(st->e[1], buf, n);
		if (r <= 0) {
			free(buf);
			pp_close(st->e[1]);	/* the reader sees EOF early, not a hang */
			return (void *)2;
		}
		pos += (unsigned long long)r;
	}
	free(buf);
	st->written = pos;
	pp_close(st->e[1]);
	return NULL;
}

static void *stress_resizer(void *arg)
{
	struct stress *st = arg;
	const int sizes[] = { 16 * 4096, 4 * 4096, 64 * 4096, 8 * 4096 };
	unsigned int i = 0;

	while (!__atomic_load_n(&st->done, __ATOMIC_ACQUIRE)) {
		/* EBUSY when the pipe holds more than the new size: fine. */
		(void)pp_fcntl(st->e[0], F_SETPIPE_SZ, sizes[i++ % 4]);
		t_sleep_ms(1);
	}
	return NULL;
}

static int test_stress_three_threads(void)
{
	struct stress st = { .done = false };
	unsigned char *buf = malloc(8192);
	unsigned long long pos = 0;
	pthread_t w, z;
	void *ret;
	ssize_t r;
	int err;

	ASSERT_TRUE(buf != NULL);
	t_pipe2(st.e, 0);
	ASSERT_EQ(pthread_create(&w, NULL, stress_writer, &st), 0);
	ASSERT_EQ(pthread_create(&z, NULL, stress_resizer, &st), 0);
	/* Reads of a page, mostly: the size that retires whole slots. */
	for (unsigned int seed = 11;; ) {
		size_t n = (rand_r(&seed) & 1) ? 4096 : 1 + (size_t)rand_r(&seed) % 8192;

		r = pp_read(st.e[0], buf, n);
		if (r <= 0)
			break;
		err = t_check(buf, (size_t)r, pos, 9);
		if (err)
			t_fail_at(__FILE__, __LINE__, "wrong byte at offset %llu", pos);
		pos += (unsigned long long)r;
	}
	ASSERT_EQ(r, 0);
	__atomic_store_n(&st.done, true, __ATOMIC_RELEASE);
	t_join(w, &ret, 60);
	ASSERT_TRUE(ret == NULL);
	t_join(z, &ret, 60);
	ASSERT_EQ(pos, st.written);
	ASSERT_EQ(spares(st.e[0]), 0);
	pp_close(st.e[0]);
	free(buf);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_park_take_unpark),
		T_SUBTEST(test_read_all_keeps_none),
		T_SUBTEST(test_spare_under_other_producers),
		T_SUBTEST(test_splice_empties),
		T_SUBTEST(test_stress_three_threads),
		T_SUBTEST(test_kept_for_waiting_writer),
		T_SUBTEST(test_turns_on_one_cpu),
	};

	return T_RUN_SUBTESTS(tests);
}
