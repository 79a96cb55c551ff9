// SPDX-License-Identifier: MIT
/*
 * Description: memory exhaustion (the CVE-2016-2847 class, as far as a
 * library can see it): with every allocation failing (PP_FAULT_ALLOC armed
 * with no end), every entry point that needs memory gives a clean -1/ENOMEM
 * (or NULL/ENOMEM) and changes nothing, the ones that need none (read,
 * tee, whole-buffer splice, merging writes, close) keep working, and
 * after disarming a full workload runs and everything is freed.
 */
#include <sys/socket.h>

#include "helpers.h"
#include "internal.h"

static int test_exhausted_everything(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 65536, 1, path), sv[2];
	struct pp_file *a[2], *b[2], *in, *sin, *q[2];
	static unsigned char src[65536], got[65536];
	struct iovec iov[4];
	off_t off = 0;

	unlink(path);
	t_fill(src, sizeof(src), 0, 2);
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ASSERT_EQ(write(sv[1], src, 1000), 1000);
	t_pipe2(a, O_NONBLOCK);
	t_pipe2(b, O_NONBLOCK);
	t_write_full(a[1], "abc", 3);		/* a mergeable page exists */
	in = pp_fdopen(fd);
	sin = pp_fdopen(sv[0]);
	ASSERT_TRUE(in && sin);

	pp__fault_arm(PP_FAULT_ALLOC, 0, ENOMEM, 0);

	ASSERT_ERRNO(pp_pipe2(q, 0), ENOMEM);
	errno = 0;
	ASSERT_TRUE(pp_fdopen(fd) == NULL);
	ASSERT_EQ(errno, ENOMEM);
	errno = 0;
	ASSERT_TRUE(pp_file_new(&pp__pipe_read_ops, O_RDONLY, NULL) == NULL);
	ASSERT_EQ(errno, ENOMEM);
	errno = 0;
	ASSERT_TRUE(pp_page_alloc() == NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT_ERRNO(pp_write(b[1], src, 5000), ENOMEM);
	ASSERT_ERRNO(pp_write(a[1], src, 8192), ENOMEM);	/* needs pages */
	ASSERT_EQ(pp_write(a[1], "de", 2), 2);			/* a merge needs none */
	ASSERT_ERRNO(pp_fcntl(a[1], F_SETPIPE_SZ, 1 << 20), ENOMEM);
	ASSERT_EQ(pp_fcntl(a[1], F_GETPIPE_SZ), 65536);
	ASSERT_ERRNO(pp_splice(in, &off, b[1], NULL, 4096, 0), ENOMEM);
	ASSERT_EQ(off, 0);
	ASSERT_ERRNO(pp_splice(sin, NULL, b[1], NULL, 1000, 0), ENOMEM);
	ASSERT_ERRNO(pp_write_ref(b[1], src, 100, NULL, NULL), ENOMEM);
	ASSERT_EQ(t_fionread(b[0]), 0);

	/* What needs no memory still works. */
	ASSERT_EQ(pp_tee(a[0], b[1], 5, 0), 5);
	iov[0] = (struct iovec){ src, 10 };
	ASSERT_EQ(pp_vmsplice(b[1], iov, 1, 0), 10);
	ASSERT_EQ(pp_read(b[0], got, sizeof(got)), 15);
	ASSERT_MEM_EQ(got, "abcde", 5);
	ASSERT_MEM_EQ(got + 5, src, 10);
	ASSERT_EQ(pp_splice(a[0], NULL, b[1], NULL, 5, 0), 5);
	ASSERT_EQ(pp_read(b[0], got, sizeof(got)), 5);
	ASSERT_MEM_EQ(got, "abcde", 5);
	pp__fault_disarm_all();

	/* Everything works again, from the state left behind. */
	{
		int avail;
		ASSERT_EQ(ioctl(sv[0], FIONREAD, &avail), 0);
		ASSERT_EQ(avail, 1000);
	}
	ASSERT_EQ(pp_pipe2(q, O_NONBLOCK), 0);
	ASSERT_EQ(pp_splice(in, &off, b[1], NULL, 65536, 0), 65536);
	ASSERT_EQ(pp_read(b[0], got, sizeof(got)), 65536);
	ASSERT_EQ(t_check(got, 65536, 0, 1), 0);
	ASSERT_EQ(pp_splice(sin, NULL, q[1], NULL, 1000, 0), 1000);
	ASSERT_EQ(pp_read(q[0], got, sizeof(got)), 1000);
	ASSERT_MEM_EQ(got, src, 1000);
	ASSERT_EQ(pp_fcntl(a[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	t_write_full(a[1], src, sizeof(src));
	ASSERT_EQ(pp_read(a[0], got, sizeof(got)), (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));
	ASSERT_ERRNO(pp_read(a[0], got, 1), EAGAIN);
	pp_close(q[0]);
	pp_close(q[1]);
	pp_close(in);
	pp_close(sin);
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	close(fd);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* A blocked writer that runs out of memory part way returns its count. */
static int test_exhausted_mid_write(void)
{
	struct pp_file *a[2];
	static unsigned char src[200000], got[200000];
	size_t done;
	ssize_t n;

	t_fill(src, sizeof(src), 0, 3);
	t_pipe2(a, 0);
	ASSERT_EQ(pp_fcntl(a[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	pp__fault_arm(PP_FAULT_ALLOC, 5, ENOMEM, 0);
	n = pp_write(a[1], src, sizeof(src));
	pp__fault_disarm_all();
	ASSERT_EQ(n, 5 * 4096);
	for (done = (size_t)n; done < sizeof(src); done += (size_t)n) {
		n = pp_write(a[1], src + done, sizeof(src) - done);
		ASSERT_TRUE(n > 0);
	}
	ASSERT_EQ(t_read_full(a[0], got, sizeof(got)) , (ssize_t)sizeof(got));
	ASSERT_MEM_EQ(got, src, sizeof(src));
	pp_close(a[0]);
	pp_close(a[1]);
	return 0;
}

/* Many pipes made and dropped under intermittent failure: none leaks. */
static int test_intermittent_churn(void)
{
	int made = 0, refused = 0;

	for (int i = 0; i < 2000; i++) {
		struct pp_file *p[2];

		pp__fault_arm(PP_FAULT_ALLOC, i % 7, ENOMEM, 1);
		if (pp_pipe2(p, O_NONBLOCK) < 0) {
			ASSERT_EQ(errno, ENOMEM);
			refused++;
			pp__fault_disarm_all();
			continue;
		}
		made++;
		if (pp_write(p[1], "x", 1) < 0)
			ASSERT_EQ(errno, ENOMEM);
		pp__fault_disarm_all();
		pp_close(p[1]);
		pp_close(p[0]);
	}
	ASSERT_TRUE(made > 0 && refused > 0);
	return 0;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_exhausted_everything),
		T_SUBTEST(test_exhausted_mid_write),
		T_SUBTEST(test_intermittent_churn),
	};

	return T_RUN_SUBTESTS(tests);
}
