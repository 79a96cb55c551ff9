// SPDX-License-Identifier: MIT
/*
 * Description: a PP_O_SHARED read that empties what it took for the last
 * slot wakes a writer that filled the pipe meanwhile.  A read loads head,
 * copies, and if the slot it emptied was the last it saw, leaves it in the
 * ring drained, where it counts as room (src/shared.c, slot_drain).  With
 * a pipe of more than one slot it woke no writer there, so a writer that
 * filled the pipe during the copy and went to sleep stayed asleep until
 * its sleep's timeout (50 ms in the library), where Linux's reader wakes
 * its writer as it frees the buffer.
 *
 * This test carries its own copy of shared.c with that timeout made 900
 * ms, so a missed wake-up cannot hide in the time the test takes.  The
 * read's destination is registered with userfaultfd, so the read stops in
 * its copy after it loaded head, for as long as the test likes: meanwhile
 * three more pages fill the four-page pipe and a fifth write goes to
 * sleep (the test waits for the writers' sleeper count).  Then the page
 * comes in: the read must wake the writer at once (before the fix: 900
 * ms later), and all five pages arrive in order.
 */
#include "helpers.h"

#define SH_SLEEP_NS	900000000L
#include "../src/shared.c"

#include <sys/mman.h>

static int drain_wakes_writer(void)
{
	const size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	const int pages = 4;
	struct t_io rj, wj;
	struct pp_file *e[2];
	struct sh_ctrl *c;
	pthread_t rt, wt;
	char *dst, *src, *want, *got;
	long long t0, until;
	int uffd;

	if (t_under_valgrind())
		return t_skip("valgrind does not support userfaultfd");
	dst = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(dst != MAP_FAILED);
	uffd = t_uffd_missing(dst, psz);
	if (uffd < 0) {
		munmap(dst, psz);
		return t_skip("userfaultfd(2): %s (vm.unprivileged_userfaultfd, or no kernel "
			      "support): the read cannot be stopped in its copy",
			      strerror(errno));
	}
	src = calloc(1, psz);
	want = malloc((pages + 1) * psz);
	got = malloc((pages + 1) * psz);
	ASSERT_TRUE(src && want && got);
	t_fill(want, (pages + 1) * psz, 0, 5);

	t_pipe2(e, PP_O_SHARED | PP_O_NOSIGPIPE);
	ASSERT_EQ(pp_fcntl(e[1], F_SETPIPE_SZ, pages * (int)psz), pages * (int)psz);
	c = ctrl(end_of(e[1])->sp);
	ASSERT_EQ(pp_write(e[1], want, psz), (ssize_t)psz);

	/* The read loads head (one page), then stops in its copy. */
	rj = (struct t_io){ .end = e[0], .buf = dst, .len = psz };
	ASSERT_EQ(pthread_create(&rt, NULL, t_io_main, &rj), 0);
	t_uffd_wait_fault(uffd);

	/* The pipe fills behind it, and one more write goes to sleep. */
	ASSERT_EQ(pp_write(e[1], want + psz, (pages - 1) * psz), (ssize_t)((pages - 1) * psz));
	wj = (struct t_io){ .end = e[1], .buf = want + pages * psz, .len = psz, .write = true };
	ASSERT_EQ(pthread_create(&wt, NULL, t_io_main, &wj), 0);
	until = t_now_ms() + 10000;
	while (!__atomic_load_n(&c->wr_sleepers, __ATOMIC_ACQUIRE) && t_now_ms() < until)
		t_sleep_ms(1);
	ASSERT_TRUE(__atomic_load_n(&c->wr_sleepers, __ATOMIC_ACQUIRE) != 0);
	ASSERT_EQ(__atomic_load_n(&wj.done_ms, __ATOMIC_ACQUIRE), 0);

	/* The page comes in: the read ends, and must wake the writer. */
	t0 = t_now_ms();
	t_uffd_fill(uffd, dst, src, psz);
	t_join(rt, NULL, 20);
	t_join(wt, NULL, 20);
	ASSERT_EQ(rj.ret, (ssize_t)psz);
	ASSERT_EQ(wj.ret, (ssize_t)psz);
	/* Woken: at once; not: the sleep's 900 ms.  The bound is far from both. */
	if (wj.done_ms - t0 > 450)
		t_fail_at(__FILE__, __LINE__, "the writer slept %lld ms after the read made room",
			  wj.done_ms - t0);
	memcpy(got, dst, psz);
	ASSERT_EQ(pp_close(e[1]), 0);
	ASSERT_EQ(t_read_full(e[0], got + psz, pages * psz + 1), (ssize_t)(pages * psz));
	ASSERT_EQ(t_check(got, (pages + 1) * psz, 0, 5), 0);
	ASSERT_EQ(pp_close(e[0]), 0);
	free(src);
	free(want);
	free(got);
	close(uffd);
	munmap(dst, psz);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(drain_wakes_writer),
	};

	if (t_shared_missing())
		return t_skip("pp_pipe2(PP_O_SHARED) gives EINVAL: shared pagepipes are not built");
	return T_RUN_SUBTESTS(tests);
}
