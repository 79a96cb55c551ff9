// SPDX-License-Identifier: MIT
/*
 * Description: pp_close() of an end while a call that holds no reference
 * on it is copying.  A pp_read or pp_write whose CAS takes the side lock
 * at once takes it marked "held without a file reference" (wait.c:
 * SIDE_NOREF) instead of taking one; pp_close() must wait for such a call
 * as it waits for a fast section, or the last close frees the pipe under
 * the copy.
 *
 * The read's destination (the write's source) is registered with
 * userfaultfd, so the copy stops at its first byte, inside the section,
 * for as long as the test likes: no timing.  The other end is closed
 * first, so this close is the last and frees the pipe.  Checks: the close
 * does not return while the copy is stopped; the call then returns every
 * byte (the read, in order), and ASan sees no use after free.  Without the
 * wait the close returns at once (and the resumed copy runs in a freed
 * pipe).
 */
#include "helpers.h"
#include "internal.h"

#include <sys/mman.h>

#define LEN	(16 * 4096)

static void *closer(void *arg)
{
	struct t_io *j = arg;

	j->ret = pp_close(j->end);
	__atomic_store_n(&j->done_ms, t_now_ms(), __ATOMIC_RELEASE);
	return NULL;
}

static int close_during_copy(bool write)
{
	static char src[LEN];
	struct t_io cj = { 0 }, xj = { 0 };
	struct pp_file *e[2], *mine;
	struct pp_side_lock *lock;
	pthread_t ct, xt;
	char *buf;
	int uffd;

	if (t_under_valgrind())
		return t_skip("valgrind does not support userfaultfd");
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(buf != MAP_FAILED);
	uffd = t_uffd_missing(buf, LEN);
	if (uffd < 0) {
		munmap(buf, LEN);
		return t_skip("userfaultfd(2): %s (vm.unprivileged_userfaultfd, or no kernel "
			      "support): the copy cannot be stopped inside the section",
			      strerror(errno));
	}

	t_pipe2(e, PP_O_NOSIGPIPE);
	t_fill(src, LEN, 0, 7);
	if (!write) {
		ASSERT_EQ(t_write_full(e[1], src, LEN), LEN);
		ASSERT_EQ(pp_close(e[1]), 0);
	}
	mine = write ? e[1] : e[0];
	lock = write ? &mine->pipe->wr_mutex : &mine->pipe->rd_mutex;

	cj = (struct t_io){ .end = mine, .buf = buf, .len = LEN, .write = write };
	ASSERT_EQ(pthread_create(&ct, NULL, t_io_main, &cj), 0);
	/* The copy's first touch faults: the caller is inside, the lock held. */
	t_uffd_wait_fault(uffd);
	ASSERT_TRUE(__atomic_load_n(&lock->state, __ATOMIC_RELAXED) & SIDE_HELD);
	/* The way in this test means: no reference taken (one, the open one). */
	ASSERT_TRUE(__atomic_load_n(&lock->state, __ATOMIC_RELAXED) & SIDE_NOREF);
	ASSERT_EQ(atomic_load(&mine->refs), 1);
	if (write)
		ASSERT_EQ(pp_close(e[0]), 0);	/* the pipe stays: the write end is open */

	xj = (struct t_io){ .end = mine };
	ASSERT_EQ(pthread_create(&xt, NULL, closer, &xj), 0);
	t_sleep_ms(100);
	/* The close waits for the copy; the copy is still stopped. */
	ASSERT_EQ(__atomic_load_n(&xj.done_ms, __ATOMIC_ACQUIRE), 0);
	ASSERT_EQ(__atomic_load_n(&cj.done_ms, __ATOMIC_ACQUIRE), 0);

	/* Let the copy go on: the read's with zeros it overwrites, the write's with its bytes. */
	if (!write)
		memset(src, 0, LEN);
	t_uffd_fill(uffd, buf, src, LEN);
	t_join(ct, NULL, 20);
	t_join(xt, NULL, 20);
	ASSERT_EQ(xj.ret, 0);
	if (write) {
		/* Into a pipe whose reader left during the copy: a part, or EPIPE. */
		ASSERT_TRUE(cj.ret == -1 || (cj.ret > 0 && cj.ret <= LEN));
	} else {
		ASSERT_EQ(cj.ret, LEN);
		ASSERT_EQ(t_check(buf, LEN, 0, 7), 0);
	}
	close(uffd);
	munmap(buf, LEN);
	return T_EXIT_PASS;
}

static int close_during_read(void)
{
	return close_during_copy(false);
}

static int close_during_write(void)
{
	return close_during_copy(true);
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(close_during_read),
		T_SUBTEST(close_during_write),
	};

	return T_RUN_SUBTESTS(tests);
}
