// SPDX-License-Identifier: MIT
/*
 * Description: splice to and from a file opened with O_DIRECT (issue 11,
 * section 2, defect 10).  O_DIRECT wants page-aligned memory; a kernel
 * pipe's pages are pages, so the kernel moves the bytes both ways.  Today
 * a pagepipe's anonymous pages are malloc(64 + 4096) blocks whose data is
 * not page-aligned, so both directions fail with EINVAL.  The kernel's
 * steps run first on a kernel pipe as the reference (counts, errno, and the
 * bytes read back through a second, buffered descriptor), then the same on
 * a pagepipe.  Skips when no candidate directory's filesystem takes
 * O_DIRECT.
 */
#include "helpers.h"

#include <fcntl.h>

#define LEN	(16 * 4096)

static char dpath[128];

/* A file opened with O_DIRECT on the first filesystem that takes it, or -1. */
static int open_direct(void)
{
	const char *dirs[] = { getenv("TMPDIR"), "/var/tmp", "/tmp", "." };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int fd;

		if (!dirs[i])
			continue;
		snprintf(dpath, sizeof(dpath), "%s/pp-odirect-XXXXXX", dirs[i]);
		fd = mkstemp(dpath);
		if (fd < 0)
			continue;
		close(fd);
		fd = open(dpath, O_RDWR | O_DIRECT);
		if (fd >= 0)
			return fd;
		unlink(dpath);
	}
	return -1;
}

struct res {
	long out, in, in_read;
	int out_err, in_err;
};

static struct res run(bool kernel, int dfd, int bfd, unsigned char *src)
{
	static unsigned char back[LEN];
	struct pp_file *e[2], *df = pp_fdopen(dfd);
	struct res r = { 0 };
	size_t have = 0;
	off_t off;
	int k[2];

	if (kernel) {
		t_kpipe2(k, 0);
		ASSERT_EQ(fcntl(k[1], F_SETPIPE_SZ, LEN), LEN);
		e[0] = pp_fdopen(k[0]);
		e[1] = pp_fdopen(k[1]);
	} else {
		t_pipe2(e, 0);
	}
	ASSERT_TRUE(df && e[0] && e[1]);
	ASSERT_EQ(ftruncate(bfd, 0), 0);

	/* Into the file: write(2) into the pipe, then splice the pipe to the file. */
	ASSERT_EQ(pp_write(e[1], src, LEN), LEN);
	off = 0;
	errno = 0;
	r.out = pp_splice(e[0], NULL, df, &off, LEN, 0);
	r.out_err = r.out < 0 ? errno : 0;
	if (r.out > 0) {
		ASSERT_EQ(pread(bfd, back, (size_t)r.out, 0), r.out);
		if (memcmp(back, src, (size_t)r.out))
			t_fail_at(__FILE__, __LINE__, "%s: the file's bytes differ from the bytes spliced",
				  kernel ? "kernel" : "pagepipe");
	}
	/* Empty the pipe whatever happened. */
	while (have < (size_t)LEN - (r.out > 0 ? (size_t)r.out : 0)) {
		ssize_t n = pp_read(e[0], back, sizeof(back));

		ASSERT_TRUE(n > 0);
		have += (size_t)n;
	}

	/* Out of the file: the file holds the pattern now (written without O_DIRECT). */
	ASSERT_EQ(pwrite(bfd, src, LEN, 0), LEN);
	ASSERT_EQ(fdatasync(bfd), 0);
	off = 0;
	errno = 0;
	r.in = pp_splice(df, &off, e[1], NULL, LEN, 0);
	r.in_err = r.in < 0 ? errno : 0;
	if (r.in > 0) {
		have = 0;
		while (have < (size_t)r.in) {
			ssize_t n = pp_read(e[0], back + have, (size_t)r.in - have);

			ASSERT_TRUE(n > 0);
			have += (size_t)n;
		}
		if (memcmp(back, src, have))
			t_fail_at(__FILE__, __LINE__, "%s: the bytes spliced out of the file differ",
				  kernel ? "kernel" : "pagepipe");
		r.in_read = (long)have;
	}
	printf("%s: splice pipe -> O_DIRECT file = %ld (%s); O_DIRECT file -> pipe = %ld (%s)\n",
	       kernel ? "kernel" : "pagepipe", r.out, r.out < 0 ? strerror(r.out_err) : "ok",
	       r.in, r.in < 0 ? strerror(r.in_err) : "ok");
	pp_close(e[0]);
	pp_close(e[1]);
	pp_close(df);
	if (kernel) {
		close(k[0]);
		close(k[1]);
	}
	return r;
}

int main(void)
{
	unsigned char *src;
	struct res k, p;
	int dfd, bfd;

	t_watchdog(20, "splices to and from an O_DIRECT file");
	dfd = open_direct();
	if (dfd < 0)
		return t_skip("no filesystem among $TMPDIR, /var/tmp, /tmp and . takes O_DIRECT");
	bfd = open(dpath, O_RDWR);
	unlink(dpath);
	ASSERT_TRUE(bfd >= 0);
	ASSERT_EQ(posix_memalign((void **)&src, 4096, LEN), 0);
	t_fill(src, LEN, 0, 17);

	k = run(true, dfd, bfd, src);
	p = run(false, dfd, bfd, src);
	ASSERT_EQ(k.out, LEN);	/* the reference */
	ASSERT_EQ(k.in, LEN);
	if (p.out != k.out || p.out_err != k.out_err)
		t_fail_at(__FILE__, __LINE__, "splice pipe -> O_DIRECT file: kernel %ld (%s), "
			  "pagepipe %ld (%s)", k.out, k.out < 0 ? strerror(k.out_err) : "ok",
			  p.out, p.out < 0 ? strerror(p.out_err) : "ok");
	if (p.in != k.in || p.in_err != k.in_err)
		t_fail_at(__FILE__, __LINE__, "splice O_DIRECT file -> pipe: kernel %ld (%s), "
			  "pagepipe %ld (%s)", k.in, k.in < 0 ? strerror(k.in_err) : "ok",
			  p.in, p.in < 0 ? strerror(p.in_err) : "ok");
	ASSERT_EQ(p.in_read, k.in_read);
	free(src);
	close(dfd);
	close(bfd);
	return T_EXIT_PASS;
}
