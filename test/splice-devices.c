// SPDX-License-Identifier: MIT
/*
 * Description: character devices as splice endpoints, compared with
 * splice(2) (issue 3 §1): /dev/null as output consumes and returns len
 * (memory and file buffers alike); /dev/zero as input gives zeroes, capped
 * to the free slots like any source, and (as in Linux) does not move an
 * explicit offset; a pseudo-terminal from openpty() both ways in raw mode
 * (the sub-case skips, with the reason, when no pty can be opened).
 */
#include <pty.h>
#include <termios.h>

#include "helpers.h"

#define PG 4096

static int test_dev_null_output(void)
{
	char path[64];
	int fd = t_tmpfile(NULL, 3 * PG, 101, path), null = open("/dev/null", O_WRONLY), k[2];
	struct pp_file *pf = pp_fdopen(fd), *pn = pp_fdopen(null), *p[2];
	off_t ko = 0, po = 0;
	char buf[5000];
	int n;

	ASSERT_TRUE(null >= 0 && pf && pn);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	memset(buf, 'n', sizeof(buf));
	ASSERT_EQ(write(k[1], buf, sizeof(buf)), 5000);
	ASSERT_EQ(pp_write(p[1], buf, sizeof(buf)), 5000);
	ASSERT_SAME(splice(fd, &ko, k[1], NULL, 3 * PG, 0), pp_splice(pf, &po, p[1], NULL, 3 * PG, 0));
	ASSERT_SAME(splice(k[0], NULL, null, NULL, 1000, 0), pp_splice(p[0], NULL, pn, NULL, 1000, 0));
	ASSERT_SAME(splice(k[0], NULL, null, NULL, 100000, 0), pp_splice(p[0], NULL, pn, NULL, 100000, 0));
	ASSERT_EQ(pp_ioctl(p[0], FIONREAD, &n), 0);
	ASSERT_EQ(n, 0);
	/* With an offset (the device is seekable). */
	ASSERT_EQ(write(k[1], buf, 10), 10);
	ASSERT_EQ(pp_write(p[1], buf, 10), 10);
	ko = po = 77;
	ASSERT_SAME(splice(k[0], NULL, null, &ko, 10, 0), pp_splice(p[0], NULL, pn, &po, 10, 0));
	/* Empty, non-blocking: EAGAIN. */
	ASSERT_SAME(splice(k[0], NULL, null, NULL, 10, SPLICE_F_NONBLOCK),
		    pp_splice(p[0], NULL, pn, NULL, 10, SPLICE_F_NONBLOCK));
	pp_close(pf); pp_close(pn);
	close(fd); close(null); unlink(path);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/*
 * /dev/null as input: Linux's null device has no splice_read, so splice(2)
 * refuses it with EINVAL (5.10+, "no ->splice_read -> EINVAL").
 */
static int test_dev_null_input(void)
{
	int nr = open("/dev/null", O_RDONLY), k[2];
	struct pp_file *pnr = pp_fdopen(nr), *p[2];

	ASSERT_TRUE(nr >= 0 && pnr);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_SAME(splice(nr, NULL, k[1], NULL, 10, 0), pp_splice(pnr, NULL, p[1], NULL, 10, 0));
	pp_close(pnr);
	close(nr);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

static int test_dev_zero_input(void)
{
	int z = open("/dev/zero", O_RDONLY), k[2];
	struct pp_file *pz = pp_fdopen(z), *p[2];
	unsigned char kb[70000], pb[70000];

	ASSERT_TRUE(z >= 0 && pz);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_SAME(splice(z, NULL, k[1], NULL, 10000, 0), pp_splice(pz, NULL, p[1], NULL, 10000, 0));
	memset(kb, 1, sizeof(kb));
	memset(pb, 1, sizeof(pb));
	ASSERT_EQ(read(k[0], kb, sizeof(kb)), 10000);
	ASSERT_EQ(t_read_full(p[0], pb, 10000), 10000);
	ASSERT_MEM_EQ(kb, pb, 10000);
	for (int i = 0; i < 10000; i++)
		ASSERT_EQ(pb[i], 0);
	/* Capped to 16 pages. */
	ASSERT_SAME(splice(z, NULL, k[1], NULL, 1 << 20, 0), pp_splice(pz, NULL, p[1], NULL, 1 << 20, 0));
	ASSERT_SAME_READ(k[0], p[0], sizeof(kb));
	/* A write after it is not merged into the shared zero page. */
	ASSERT_SAME(splice(z, NULL, k[1], NULL, 10, 0), pp_splice(pz, NULL, p[1], NULL, 10, 0));
	ASSERT_EQ(write(k[1], "abc", 3), 3);
	ASSERT_EQ(pp_write(p[1], "abc", 3), 3);
	ASSERT_SAME_READ(k[0], p[0], 100);
	ASSERT_SAME(splice(z, NULL, k[1], NULL, 100, 0), pp_splice(pz, NULL, p[1], NULL, 100, 0));
	ASSERT_SAME_READ(k[0], p[0], 100);
	/* Full, non-blocking: EAGAIN. */
	ASSERT_SAME(splice(z, NULL, k[1], NULL, 1 << 20, 0), pp_splice(pz, NULL, p[1], NULL, 1 << 20, 0));
	ASSERT_SAME(splice(z, NULL, k[1], NULL, 1, SPLICE_F_NONBLOCK), pp_splice(pz, NULL, p[1], NULL, 1, SPLICE_F_NONBLOCK));
	pp_close(pz);
	close(z);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

/* Linux's /dev/zero neither reads nor moves a position: an explicit offset stays put. */
static int test_dev_zero_offset(void)
{
	int z = open("/dev/zero", O_RDONLY), k[2];
	struct pp_file *pz = pp_fdopen(z), *p[2];
	off_t ko = 5, po = 5;

	ASSERT_TRUE(z >= 0 && pz);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	ASSERT_SAME(splice(z, &ko, k[1], NULL, 10, 0), pp_splice(pz, &po, p[1], NULL, 10, 0));
	ASSERT_SAME_READ(k[0], p[0], 100);
	ASSERT_EQ(ko, po);
	pp_close(pz);
	close(z);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

static int open_raw_pty(int *master, int *slave)
{
	struct termios tio;

	if (openpty(master, slave, NULL, NULL, NULL) < 0)
		return -1;
	if (tcgetattr(*slave, &tio) < 0)
		return -1;
	cfmakeraw(&tio);
	if (tcsetattr(*slave, TCSANOW, &tio) < 0)
		return -1;
	return 0;
}

static void read_exact(int fd, unsigned char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, buf + done, len - done);

		ASSERT_TRUE(r > 0);
		done += (size_t)r;
	}
}

static int test_tty(void)
{
	int km, ks, pm, psl, k[2];
	struct pp_file *pslave, *p[2];
	unsigned char src[2000], kb[2000], pb[2000];
	char path[64];
	int fd;
	struct pp_file *pf;
	off_t ko = 0, po = 0;

	if (open_raw_pty(&km, &ks) < 0 || open_raw_pty(&pm, &psl) < 0)
		return t_skip("no pseudo-terminal: openpty: %s", strerror(errno));
	pslave = pp_fdopen(psl);
	ASSERT_TRUE(pslave != NULL);
	t_kpipe2(k, 0);
	t_pipe2(p, 0);
	t_fill(src, sizeof(src), 0, 102);

	/* pipe -> tty: memory buffers, then file buffers. */
	ASSERT_EQ(write(k[1], src, 1000), 1000);
	ASSERT_EQ(pp_write(p[1], src, 1000), 1000);
	ASSERT_SAME(splice(k[0], NULL, ks, NULL, 1000, 0), pp_splice(p[0], NULL, pslave, NULL, 1000, 0));
	read_exact(km, kb, 1000);
	read_exact(pm, pb, 1000);
	ASSERT_MEM_EQ(kb, pb, 1000);
	ASSERT_MEM_EQ(pb, src, 1000);
	fd = t_tmpfile(NULL, 1500, 103, path);
	pf = pp_fdopen(fd);
	ASSERT_SAME(splice(fd, &ko, k[1], NULL, 1500, 0), pp_splice(pf, &po, p[1], NULL, 1500, 0));
	ASSERT_SAME(splice(k[0], NULL, ks, NULL, 1500, 0), pp_splice(p[0], NULL, pslave, NULL, 1500, 0));
	read_exact(km, kb, 1500);
	read_exact(pm, pb, 1500);
	ASSERT_MEM_EQ(kb, pb, 1500);
	ASSERT_EQ(t_check(pb, 1500, 0, 103), 0);

	/* tty -> pipe: what the other side typed. */
	ASSERT_EQ(write(km, src, 500), 500);
	ASSERT_EQ(write(pm, src, 500), 500);
	{
		size_t kn = 0, pn = 0;

		while (kn < 500) {
			ssize_t r = splice(ks, NULL, k[1], NULL, 500 - kn, 0);

			ASSERT_TRUE(r > 0);
			kn += (size_t)r;
		}
		while (pn < 500) {
			ssize_t r = pp_splice(pslave, NULL, p[1], NULL, 500 - pn, 0);

			ASSERT_TRUE(r > 0);
			pn += (size_t)r;
		}
	}
	ASSERT_EQ(read(k[0], kb, sizeof(kb)), 500);
	ASSERT_EQ(t_read_full(p[0], pb, 500), 500);
	ASSERT_MEM_EQ(kb, pb, 500);
	ASSERT_MEM_EQ(pb, src, 500);
	/* Nothing typed, non-blocking tty: EAGAIN on both. */
	ASSERT_EQ(fcntl(ks, F_SETFL, O_NONBLOCK), 0);
	ASSERT_EQ(fcntl(psl, F_SETFL, O_NONBLOCK), 0);
	ASSERT_SAME(splice(ks, NULL, k[1], NULL, 10, 0), pp_splice(pslave, NULL, p[1], NULL, 10, 0));

	pp_close(pf); close(fd); unlink(path);
	pp_close(pslave);
	close(km); close(ks); close(pm); close(psl);
	close(k[0]); close(k[1]);
	pp_close(p[0]); pp_close(p[1]);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(test_dev_null_output),
		T_SUBTEST(test_dev_null_input),
		T_SUBTEST(test_dev_zero_input),
		T_SUBTEST(test_dev_zero_offset),
		T_SUBTEST(test_tty),
	};

	return T_RUN_SUBTESTS(tests);
}
