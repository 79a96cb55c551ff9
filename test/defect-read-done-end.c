// SPDX-License-Identifier: MIT
/*
 * Description: pp_read_done must check which end it is given (issue 11,
 * section 2, defect 9).  While the read end holds a loan, pp_read_done on
 * the write end is a caller's mistake and must fail with EBADF, leaving the
 * loan, the data and the write end alone.  Today it ends the read end's
 * loan, consumes the data, and drops a reference that the write end never
 * took, freeing it under its owner (the later pp_write is a use-after-free:
 * ASan sees it; without ASan the test fails on the return value).  Also
 * pp_read_done on an OS descriptor's file and on a read end of another pipe
 * while this one holds the loan.
 */
#include "helpers.h"

#include <fcntl.h>

int main(void)
{
	struct pp_file *e[2], *other[2], *os;
	struct iovec iov[1];
	char buf[16];
	int k[2];

	t_watchdog(10, "pp_read_done on the wrong end");
	t_pipe2(e, 0);
	t_pipe2(other, 0);
	t_kpipe2(k, 0);
	os = pp_fdopen(k[0]);
	ASSERT_TRUE(os != NULL);
	ASSERT_EQ(pp_write(e[1], "0123456789", 10), 10);
	ASSERT_EQ(pp_write(other[1], "abc", 3), 3);

	ASSERT_EQ(pp_read_lend(e[0], iov, 1, 10), 10);
	ASSERT_MEM_EQ(iov[0].iov_base, "0123456789", 10);

	/* The write end of the lending pipe: not a read end, so EBADF. */
	ASSERT_ERRNO(pp_read_done(e[1], 4), EBADF);
	/* Ends that hold no loan. */
	ASSERT_ERRNO(pp_read_done(other[1], 1), EBADF);
	ASSERT_TRUE(pp_read_done(os, 1) == -1);

	/* The loan is still the read end's; the write end still works. */
	ASSERT_EQ(pp_read_done(e[0], 4), 0);
	ASSERT_EQ(pp_write(e[1], "ab", 2), 2);
	ASSERT_EQ(pp_read(e[0], buf, sizeof(buf)), 8);
	ASSERT_MEM_EQ(buf, "456789ab", 8);
	ASSERT_EQ(pp_read(other[0], buf, sizeof(buf)), 3);
	ASSERT_MEM_EQ(buf, "abc", 3);

	ASSERT_EQ(pp_close(e[1]), 0);
	ASSERT_EQ(pp_read(e[0], buf, sizeof(buf)), 0);
	ASSERT_EQ(pp_close(e[0]), 0);
	pp_close(other[0]);
	pp_close(other[1]);
	pp_close(os);
	close(k[0]);
	close(k[1]);
	return T_EXIT_PASS;
}
