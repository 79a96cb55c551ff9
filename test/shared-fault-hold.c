// SPDX-License-Identifier: MIT
/*
 * Description: a PP_O_SHARED write whose source memory faults for long
 * does not hold the readers' lock meanwhile.  A write that does not fit
 * the last slot's page, where Linux's fresh page would take it, moves the
 * bytes written since the reader's drain to a new page under rd_lock
 * (src/shared.c: slot_refit, slot_move), and copies its own bytes there.
 * A reader that waits LOCK_STUCK_WAITS (2 s) for a live holder takes the
 * hold for a scribble and poisons the pipe: so a copy stopped in a fault
 * (userfaultfd, a hung file mapping) under rd_lock turned a slow page into
 * EIO for every user of the pipe.  The write now takes its faults before
 * it takes rd_lock.
 *
 * The write's source is registered with userfaultfd, so the write stops
 * at its first touch for as long as the test likes: no timing.  While it
 * is stopped a reader reads 10 bytes; it must get them at once (before the
 * fix: EIO after 2 s).  Then the page comes in, and the write and every
 * byte after it arrive in order, as a kernel pipe would give them.
 */
#include "helpers.h"

#include <sys/mman.h>

static int move_faults_outside_rd_lock(void)
{
	const size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	const size_t first = 64, second = psz - 96, late = 50;
	struct t_io wj, rj;
	struct pp_file *e[2];
	pthread_t wt, rt;
	char *src, *buf, *got, *want;
	size_t total = first + second + late, at;
	long long until;
	int uffd;

	if (t_under_valgrind())
		return t_skip("valgrind does not support userfaultfd");
	buf = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(buf != MAP_FAILED);
	uffd = t_uffd_missing(buf, psz);
	if (uffd < 0) {
		munmap(buf, psz);
		return t_skip("userfaultfd(2): %s (vm.unprivileged_userfaultfd, or no kernel "
			      "support): the write cannot be stopped in a fault",
			      strerror(errno));
	}
	src = malloc(psz);
	want = malloc(total);
	got = malloc(total);
	ASSERT_TRUE(src && want && got);
	t_fill(want, total, 0, 11);

	t_pipe2(e, PP_O_SHARED | PP_O_NOSIGPIPE);
	/* A drain at 64, then a page's worth less 96 appended after it in place. */
	ASSERT_EQ(pp_write(e[1], want, first), (ssize_t)first);
	ASSERT_EQ(pp_read(e[0], got, first), (ssize_t)first);
	ASSERT_EQ(pp_write(e[1], want + first, second), (ssize_t)second);
	/* The reader inside the slot: bytes after the drain remain. */
	ASSERT_EQ(pp_read(e[0], got + first, 100), 100);
	at = first + 100;

	/*
	 * 50 more do not fit after the slot's end, but fit Linux's page,
	 * which starts at the drain: the write moves the slot's bytes.
	 */
	wj = (struct t_io){ .end = e[1], .buf = buf, .len = late, .write = true };
	ASSERT_EQ(pthread_create(&wt, NULL, t_io_main, &wj), 0);
	t_uffd_wait_fault(uffd);

	/* The write is stopped in its fault: a reader goes on meanwhile. */
	rj = (struct t_io){ .end = e[0], .buf = got + at, .len = 10 };
	ASSERT_EQ(pthread_create(&rt, NULL, t_io_main, &rj), 0);
	until = t_now_ms() + 4000;	/* past LOCK_STUCK_WAITS */
	while (!__atomic_load_n(&rj.done_ms, __ATOMIC_ACQUIRE) && t_now_ms() < until)
		t_sleep_ms(5);
	if (!__atomic_load_n(&rj.done_ms, __ATOMIC_ACQUIRE))
		t_fail_at(__FILE__, __LINE__, "the read waited 4 s for a write stopped in a fault");
	ASSERT_EQ(__atomic_load_n(&wj.done_ms, __ATOMIC_ACQUIRE), 0);
	if (rj.ret < 0)
		t_fail_at(__FILE__, __LINE__, "the read: %s (the pipe was poisoned)",
			  strerror(rj.err));
	ASSERT_EQ(rj.ret, 10);
	at += 10;

	/* The page comes in: the write goes on with its bytes. */
	memcpy(src, want + first + second, late);
	t_uffd_fill(uffd, buf, src, psz);
	t_join(wt, NULL, 20);
	t_join(rt, NULL, 20);
	ASSERT_EQ(wj.ret, (ssize_t)late);

	ASSERT_EQ(pp_close(e[1]), 0);
	ASSERT_EQ(t_read_full(e[0], got + at, total - at + 1), (ssize_t)(total - at));
	ASSERT_EQ(t_check(got, total, 0, 11), 0);
	ASSERT_EQ(pp_close(e[0]), 0);
	free(src);
	free(want);
	free(got);
	close(uffd);
	munmap(buf, psz);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(move_faults_outside_rd_lock),
	};

	if (t_shared_missing())
		return t_skip("pp_pipe2(PP_O_SHARED) gives EINVAL: shared pagepipes are not built");
	return T_RUN_SUBTESTS(tests);
}
