// SPDX-License-Identifier: MIT
/*
 * Description: a splice from one pagepipe to another of kernel-resident
 * bytes, when the output's private kernel pipe is full and the kernel will
 * not let it grow (pipe-max-size, for a user without CAP_SYS_RESOURCE):
 * the bytes go the copying way at once, with no second splice(2) that
 * could only say EAGAIN again (pp__kbuf_move): all of them move, in
 * order behind what the output held.  A second splice would be seen as
 * the next PP_FAULT_SPLICE check.  Runs as nobody when started as root,
 * so that the limit applies.
 */
#include "helpers.h"
#include "kbuf.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>

#define NOBODY	65534
#define MOVE	100

static long pipe_max_pages(void)
{
	FILE *f = fopen("/proc/sys/fs/pipe-max-size", "re");
	long n = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n > 0 ? n / (long)sysconf(_SC_PAGESIZE) : -1;
}

static int test_move_into_full_private_pipe(void)
{
	long pages = pipe_max_pages();
	unsigned char buf[MOVE], got[MOVE];
	struct pp_file *a[2], *b[2], *s1, *s2;
	int k1[2], k2[2];
	int sz;

	if (geteuid() == 0) {
		/* Without the capability, pipe-max-size holds (and setuid drops it). */
		ASSERT_EQ(setgroups(0, NULL), 0);
		ASSERT_EQ(setgid(NOBODY), 0);
		ASSERT_EQ(setuid(NOBODY), 0);
	}
	if (pages < 16 || pages > 1024)
		return t_skip("pipe-max-size is %ld pages: this test wants 16 to 1024", pages);
	sz = (int)(pages * sysconf(_SC_PAGESIZE));
	/* The limit holds: one page more is refused. */
	t_kpipe2(k1, O_CLOEXEC);
	ASSERT_ERRNO(fcntl(k1[1], F_SETPIPE_SZ, sz + (int)sysconf(_SC_PAGESIZE)), EPERM);
	close(k1[0]);
	close(k1[1]);

	/*
	 * B's private pipe (2 * pages wanted, pipe-max-size given) is filled
	 * with one-byte packets, a kernel buffer each, spliced from an
	 * O_DIRECT kernel pipe: full, and it cannot grow.
	 */
	t_pipe2(b, 0);
	ASSERT_EQ(pp_fcntl(b[1], F_SETPIPE_SZ, sz), sz);
	t_kpipe2(k2, O_DIRECT | O_CLOEXEC);
	ASSERT_EQ(fcntl(k2[1], F_SETPIPE_SZ, sz), sz);
	for (long i = 0; i < pages; i++)
		ASSERT_EQ(write(k2[1], "x", 1), 1);
	s2 = pp_fdopen(k2[0]);
	ASSERT_TRUE(s2 != NULL);
	ASSERT_EQ(pp_splice(s2, NULL, b[1], NULL, (size_t)pages, 0), pages);
	ASSERT_EQ(t_kernel_bytes(b[1], NULL), pages);

	/* A holds MOVE kernel-resident bytes of its own. */
	t_pipe2(a, 0);
	t_kpipe2(k1, O_CLOEXEC);
	t_fill(buf, MOVE, 0, 7);
	ASSERT_EQ(write(k1[1], buf, MOVE), MOVE);
	s1 = pp_fdopen(k1[0]);
	ASSERT_TRUE(s1 != NULL);
	ASSERT_EQ(pp_splice(s1, NULL, a[1], NULL, MOVE, 0), MOVE);
	ASSERT_EQ(t_kernel_bytes(a[1], NULL), MOVE);

	/*
	 * The first splice(2) between the private pipes finds B's full; a
	 * second, after a growth that did not happen, would be the next
	 * PP_FAULT_SPLICE check, and fails with EIO here.  None must come:
	 * the bytes are copied, all MOVE of them, as Linux moves them.
	 */
	pp__fault_arm(PP_FAULT_SPLICE, 1, EIO, 1);
	ASSERT_EQ(pp_splice(a[0], NULL, b[1], NULL, MOVE, 0), MOVE);
	ASSERT_EQ(pp__fault_hits(PP_FAULT_SPLICE), 0);
	pp__fault_disarm_all();

	/* B: its packets, then A's bytes. */
	for (long i = 0; i < pages; i++) {
		ASSERT_EQ(pp_read(b[0], got, 1), 1);
		ASSERT_EQ(got[0], 'x');
	}
	ASSERT_EQ(pp_read(b[0], got, MOVE), MOVE);
	ASSERT_MEM_EQ(got, buf, MOVE);
	ASSERT_EQ(t_fionread(a[0]), 0);

	pp_close(s1);
	pp_close(s2);
	close(k1[1]);
	close(k2[1]);
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_move_into_full_private_pipe),
	};

	return T_RUN_SUBTESTS(tests);
}
