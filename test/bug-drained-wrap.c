// SPDX-License-Identifier: MIT
/*
 * Description: the drained-slot mark at the wrap of the free-running
 * indices.  `drained` holds the drained slot's index + 1 and 0 means none,
 * but index + 1 is 0 for the slot at UINT_MAX: while tail is UINT_MAX an
 * ordinary slot holding bytes matched "drained == tail + 1", so the pipe
 * looked empty (read EAGAIN and no POLLIN with bytes in it, FIONREAD
 * saying otherwise), a resize dropped those bytes as the spare drained
 * slot, and a writer counted one slot too few.  Reaching the wrap for real
 * takes 2^32 slots (16 TiB of pages, or 2^32 packets); here the indices of
 * a fresh, empty pipe are moved there, which is a state a long-lived pipe
 * reaches.  The kernel's free-running indices wrap without any of this.
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>

/* An empty pipe whose next slot is the one at index `at`. */
static void pipe_at(struct pp_file *e[2], unsigned int at)
{
	struct pp_pipe *p;

	ASSERT_EQ(pp_pipe2(e, O_NONBLOCK), 0);
	p = e[0]->pipe;
	ASSERT_EQ(p->head, p->tail);
	p->head = p->tail = at;
	/* The sides' cached views of each other's index move with them. */
	p->rd_head_seen = p->wr_tail_seen = at;
}

static int test_read_at_wrap(void)
{
	struct pp_file *e[2];
	struct pp_pollfd pfd;
	char in[100], out[200];
	int avail = -1;

	memset(in, 0x5a, sizeof(in));
	pipe_at(e, UINT_MAX);
	ASSERT_EQ(pp_write(e[1], in, sizeof(in)), (ssize_t)sizeof(in));
	ASSERT_EQ(pp_ioctl(e[0], FIONREAD, &avail), 0);
	ASSERT_EQ(avail, 100);
	pfd = (struct pp_pollfd){ e[0], POLLIN, 0 };
	ASSERT_EQ(pp_poll(&pfd, 1, 0), 1);
	ASSERT_EQ(pfd.revents, POLLIN);
	ASSERT_EQ(pp_read(e[0], out, sizeof(out)), (ssize_t)sizeof(in));
	ASSERT_MEM_EQ(out, in, sizeof(in));
	ASSERT_ERRNO(pp_read(e[0], out, sizeof(out)), EAGAIN);
	pp_close(e[0]);
	pp_close(e[1]);
	return 0;
}

static int test_resize_at_wrap(void)
{
	struct pp_file *e[2];
	char in[100], out[200];

	memset(in, 0xa5, sizeof(in));
	pipe_at(e, UINT_MAX);
	ASSERT_EQ(pp_write(e[1], in, sizeof(in)), (ssize_t)sizeof(in));
	ASSERT_EQ(pp_fcntl(e[1], F_SETPIPE_SZ, 131072), 131072);
	ASSERT_EQ(pp_read(e[0], out, sizeof(out)), (ssize_t)sizeof(in));
	ASSERT_MEM_EQ(out, in, sizeof(in));
	pp_close(e[0]);
	pp_close(e[1]);
	return 0;
}

/*
 * Capacity across the wrap, against a kernel pipe: after a small write and
 * read (the slot at UINT_MAX emptied), the pipe takes exactly 16 pages,
 * then EAGAIN, and gives back every byte.
 */
static int test_capacity_at_wrap(void)
{
	struct pp_file *e[2];
	static char page[4096], out[4096];
	int k[2];

	if (pp_page_size() != 4096)
		return t_skip("page size %zu", pp_page_size());
	ASSERT_EQ(pipe2(k, O_NONBLOCK), 0);
	pipe_at(e, UINT_MAX);
	memset(page, 0x33, sizeof(page));
	ASSERT_SAME(write(k[1], page, 10), pp_write(e[1], page, 10));
	ASSERT_SAME_READ(k[0], e[0], 10);
	for (int i = 0; i < 17; i++)
		ASSERT_SAME(write(k[1], page, sizeof(page)), pp_write(e[1], page, sizeof(page)));
	for (int i = 0; i < 17; i++)
		ASSERT_SAME_READ(k[0], e[0], sizeof(out));
	close(k[0]);
	close(k[1]);
	pp_close(e[0]);
	pp_close(e[1]);
	return 0;
}

/* One slot before the wrap: the pipe goes on working across it. */
static int test_stream_across_wrap(void)
{
	struct pp_file *e[2];
	unsigned char buf[300], got[300];
	unsigned long long wpos = 0, rpos = 0;
	unsigned int seed = 7;

	pipe_at(e, UINT_MAX - 40);
	for (int i = 0; i < 20000; i++) {
		size_t n = 1 + (size_t)rand_r(&seed) % sizeof(buf);
		ssize_t r;

		t_fill(buf, n, wpos, 0x77);
		r = pp_write(e[1], buf, n);
		if (r > 0)
			wpos += (unsigned long long)r;
		else
			ASSERT_EQ(errno, EAGAIN);
		r = pp_read(e[0], got, 1 + (size_t)rand_r(&seed) % sizeof(got));
		if (r < 0) {
			ASSERT_EQ(errno, EAGAIN);
			ASSERT_EQ(rpos, wpos);
			continue;
		}
		for (ssize_t j = 0; j < r; j++)
			ASSERT_EQ(got[j], t_pattern(rpos + (unsigned long long)j, 0x77));
		rpos += (unsigned long long)r;
	}
	pp_close(e[0]);
	pp_close(e[1]);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_read_at_wrap),
		T_SUBTEST(test_resize_at_wrap),
		T_SUBTEST(test_capacity_at_wrap),
		T_SUBTEST(test_stream_across_wrap),
	};

	return T_RUN_SUBTESTS(tests);
}
