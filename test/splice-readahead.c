// SPDX-License-Identifier: MIT
/*
 * Description: a splice from a file starts the I/O and does not wait for
 * it.  The file's pages are dropped from the page cache (fsync, then
 * POSIX_FADV_DONTNEED); pp_splice queues 64 KiB of it in a pagepipe; with
 * nothing consumed, mincore(2) on a mapping of the file must show those
 * pages arriving in the page cache, which only the readahead started at
 * splice time can bring in.  Then the bytes are read and compared.  Skips
 * (77) where the cache cannot be dropped: tmpfs, or a file system that
 * keeps the pages.
 */
#include <sys/mman.h>

#include "helpers.h"

#define FILE_LEN	(1u << 20)
#define SPLICED		65536u

static unsigned int resident(const unsigned char *vec, size_t pages)
{
	unsigned int n = 0;

	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	return n;
}

int main(void)
{
	const size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	const size_t pages = SPLICED / psz;
	unsigned char vec[SPLICED / 512];
	static char got[SPLICED];
	struct pp_file *e[2], *in;
	char path[64];
	unsigned int now = 0;
	void *map;
	long long deadline;
	int fd;

	/* Not /tmp: it may be tmpfs, whose pages cannot be dropped. */
	fd = t_tmpfile("/var/tmp", FILE_LEN, 7, path);
	unlink(path);
	ASSERT_EQ(fsync(fd), 0);
	map = mmap(NULL, FILE_LEN, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(map, MAP_FAILED);
	ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	ASSERT_EQ(mincore(map, SPLICED, vec), 0);
	if (resident(vec, pages))
		return t_skip("the file system kept %u of %zu pages after POSIX_FADV_DONTNEED",
			      resident(vec, pages), pages);

	t_pipe2(e, 0);
	in = pp_fdopen(fd);
	ASSERT_NE(in, NULL);
	ASSERT_EQ(pp_splice(in, NULL, e[1], NULL, SPLICED, 0), (ssize_t)SPLICED);

	/* Nothing consumed yet: only the splice's readahead can fill these. */
	deadline = t_now_ms() + 5000;
	while (t_now_ms() < deadline) {
		ASSERT_EQ(mincore(map, SPLICED, vec), 0);
		now = resident(vec, pages);
		if (now == pages)
			break;
		t_sleep_ms(5);
	}
	ASSERT_EQ(now, (unsigned int)pages);

	ASSERT_EQ(t_read_full(e[0], got, SPLICED), (ssize_t)SPLICED);
	ASSERT_EQ(t_check(got, SPLICED, 0, 7), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	pp_close(in);
	munmap(map, FILE_LEN);
	close(fd);
	return 0;
}
