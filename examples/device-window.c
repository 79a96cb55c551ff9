// SPDX-License-Identifier: MIT
/*
 * device-window.c - a buffer type whose memory must be mapped before it is
 * touched and unmapped after: the seed's "direct window into device memory".
 *
 * The "device" here is a memfd standing in for device memory (a frame
 * buffer, a DMA region, a BAR): its pages are not in our address space.
 * A buffer refers to one page of it by handle ({device, page number}), and
 * its operations table tells pagepipe how to use it:
 *
 *   .confirm   is the device still there?  -EIO once it has failed
 *   .map       mmap the one page, read-only, for the duration of an access
 *   .unmap     munmap it again
 *   .get       one more reference on the device (tee, a partial splice)
 *   .release   drop one
 *
 * The buffers are queued with pp_pipe_add_buf() after a written header and
 * spliced end to end: pagepipe -> pp_splice -> a file and a kernel pipe.
 * The program checks the bytes, and that every map had its unmap and every
 * reference its release, and prints what it did.  Exit 0 on success.
 *
 * Build: make examples; run: ./build/examples/device-window
 * (test/example-device-window.c includes this file with
 * DEVICE_WINDOW_NO_MAIN and checks the same code in more ways.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pagepipe.h>

struct dev_window {
	int memfd;			/* the device memory */
	size_t pages;
	atomic_long refs;		/* buffers referring to the device */
	atomic_long maps, unmaps, gets, releases, confirms;
	atomic_long mapped_now, mapped_max;
	atomic_bool failed;		/* the device went away: confirm says -EIO */
	atomic_bool map_fails;		/* mmap refuses: ->map returns NULL */
};

/* What the device holds at byte pos: anything recognisable. */
unsigned char devwin_byte(size_t pos)
{
	return (unsigned char)(pos * 131u + (pos >> 12) * 7u + 3u);
}

int devwin_open(struct dev_window *d, size_t pages)
{
	size_t psz = pp_page_size();
	unsigned char *tmp;

	memset(d, 0, sizeof(*d));
	d->pages = pages;
	d->memfd = memfd_create("device-window", MFD_CLOEXEC);
	if (d->memfd < 0)
		return -1;
	if (ftruncate(d->memfd, (off_t)(pages * psz)) < 0)
		goto fail;
	/* Program the device: write its contents once, from outside. */
	tmp = malloc(psz);
	if (!tmp)
		goto fail;
	for (size_t pg = 0; pg < pages; pg++) {
		for (size_t i = 0; i < psz; i++)
			tmp[i] = devwin_byte(pg * psz + i);
		if (pwrite(d->memfd, tmp, psz, (off_t)(pg * psz)) != (ssize_t)psz) {
			free(tmp);
			goto fail;
		}
	}
	free(tmp);
	return 0;
fail:
	close(d->memfd);
	return -1;
}

void devwin_close(struct dev_window *d)
{
	close(d->memfd);
}

static struct dev_window *dev_of(const struct pp_buf *buf)
{
	return buf->private;
}

static int devwin_confirm(struct pp_pipe *pipe, struct pp_buf *buf)
{
	struct dev_window *d = dev_of(buf);

	(void)pipe;
	atomic_fetch_add(&d->confirms, 1);
	return atomic_load(&d->failed) ? -EIO : 0;
}

/* The address of byte 0 of the page: a fresh read-only window each time. */
static void *devwin_map(struct pp_pipe *pipe, struct pp_buf *buf)
{
	struct dev_window *d = dev_of(buf);
	size_t psz = pp_page_size();
	void *addr;
	long now, max;

	(void)pipe;
	if (atomic_load(&d->map_fails))
		return NULL;
	addr = mmap(NULL, psz, PROT_READ, MAP_SHARED, d->memfd, (off_t)(buf->index * psz));
	if (addr == MAP_FAILED)
		return NULL;
	atomic_fetch_add(&d->maps, 1);
	now = atomic_fetch_add(&d->mapped_now, 1) + 1;
	max = atomic_load(&d->mapped_max);
	while (now > max && !atomic_compare_exchange_weak(&d->mapped_max, &max, now))
		;
	return addr;
}

static void devwin_unmap(struct pp_pipe *pipe, struct pp_buf *buf, void *addr)
{
	struct dev_window *d = dev_of(buf);

	(void)pipe;
	munmap(addr, pp_page_size());
	atomic_fetch_add(&d->unmaps, 1);
	atomic_fetch_sub(&d->mapped_now, 1);
}

static bool devwin_get(struct pp_pipe *pipe, struct pp_buf *buf)
{
	struct dev_window *d = dev_of(buf);

	(void)pipe;
	atomic_fetch_add(&d->refs, 1);
	atomic_fetch_add(&d->gets, 1);
	return true;
}

static void devwin_release(struct pp_pipe *pipe, struct pp_buf *buf)
{
	struct dev_window *d = dev_of(buf);

	(void)pipe;
	atomic_fetch_sub(&d->refs, 1);
	atomic_fetch_add(&d->releases, 1);
}

const struct pp_buf_ops devwin_buf_ops = {
	.confirm	= devwin_confirm,
	.map		= devwin_map,
	.unmap		= devwin_unmap,
	.release	= devwin_release,
	.get		= devwin_get,
	.name		= "device window",
};

/*
 * Queue [off, off + len) of device page pg at the write end w.  The buffer
 * holds one reference on the device; on failure it is dropped again.
 */
ssize_t devwin_queue(struct dev_window *d, struct pp_file *w, size_t pg, unsigned int off,
		     unsigned int len, unsigned int flags)
{
	struct pp_buf buf = {
		.page = d,		/* a handle, not memory: only ->map makes memory of it */
		.offset = off,
		.len = len,
		.ops = &devwin_buf_ops,
		.flags = 0,		/* never CAN_MERGE: the pipe does not own device memory */
		.private = d,
		.index = pg,
	};
	ssize_t r;

	if (pg >= d->pages) {
		errno = EINVAL;
		return -1;
	}
	atomic_fetch_add(&d->refs, 1);
	r = pp_pipe_add_buf(w, &buf, flags);
	if (r < 0) {
		int e = errno;

		atomic_fetch_sub(&d->refs, 1);
		errno = e;
	}
	return r;
}

/* Every map had its unmap, and no reference is left. */
int devwin_balanced(struct dev_window *d)
{
	return atomic_load(&d->maps) == atomic_load(&d->unmaps) &&
	       atomic_load(&d->mapped_now) == 0 && atomic_load(&d->refs) == 0;
}

#ifndef DEVICE_WINDOW_NO_MAIN

static const char header[] = "device window: ";

/* Queue the header and all device pages; returns the bytes queued. */
static size_t fill(struct dev_window *d, struct pp_file *w)
{
	size_t psz = pp_page_size(), n = 0;

	if (pp_write(w, header, sizeof(header) - 1) != (ssize_t)(sizeof(header) - 1))
		return 0;
	n += sizeof(header) - 1;
	for (size_t pg = 0; pg < d->pages; pg++) {
		if (devwin_queue(d, w, pg, 0, (unsigned int)psz, 0) != (ssize_t)psz)
			return 0;
		n += psz;
	}
	return n;
}

static int check(const unsigned char *got, size_t len)
{
	size_t hl = sizeof(header) - 1;

	if (len < hl || memcmp(got, header, hl))
		return -1;
	for (size_t i = hl; i < len; i++)
		if (got[i] != devwin_byte(i - hl))
			return -1;
	return 0;
}

int main(void)
{
	enum { PAGES = 8 };
	struct dev_window d;
	struct pp_file *p[2], *out;
	char path[] = "/tmp/device-window-XXXXXX";
	size_t psz = pp_page_size(), total, moved;
	unsigned char *got;
	int fd, k[2];

	if (devwin_open(&d, PAGES) < 0) {
		perror("device-window: memfd");
		return 1;
	}
	if (pp_pipe2(p, 0) < 0) {
		perror("pp_pipe2");
		return 1;
	}
	got = malloc(PAGES * psz + 64);
	if (!got)
		return 1;

	/* 1. pagepipe -> a file. */
	fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	unlink(path);
	out = pp_fdopen(fd);
	total = fill(&d, p[1]);
	if (!total) {
		perror("queue");
		return 1;
	}
	for (moved = 0; moved < total; ) {
		ssize_t r = pp_splice(p[0], NULL, out, NULL, total - moved, 0);

		if (r <= 0) {
			perror("pp_splice to file");
			return 1;
		}
		moved += (size_t)r;
	}
	if (pread(fd, got, total, 0) != (ssize_t)total || check(got, total)) {
		fprintf(stderr, "device-window: the file does not hold the device's bytes\n");
		return 1;
	}
	printf("spliced %zu bytes (a header and %d device pages) into a file: ok\n", total, PAGES);
	printf("  maps %ld, unmaps %ld, confirms %ld, references left %ld\n",
	       atomic_load(&d.maps), atomic_load(&d.unmaps), atomic_load(&d.confirms),
	       atomic_load(&d.refs));
	pp_close(out);
	close(fd);

	/* 2. pagepipe -> a kernel pipe, read by us. */
	if (pipe(k) < 0 || fcntl(k[1], F_SETPIPE_SZ, 1 << 20) < 0) {
		perror("pipe");
		return 1;
	}
	out = pp_fdopen(k[1]);
	total = fill(&d, p[1]);
	for (moved = 0; moved < total; ) {
		ssize_t r = pp_splice(p[0], NULL, out, NULL, total - moved, 0);

		if (r <= 0) {
			perror("pp_splice to kernel pipe");
			return 1;
		}
		moved += (size_t)r;
	}
	for (size_t n = 0; n < total; ) {
		ssize_t r = read(k[0], got + n, total - n);

		if (r <= 0) {
			perror("read");
			return 1;
		}
		n += (size_t)r;
	}
	if (check(got, total)) {
		fprintf(stderr, "device-window: the kernel pipe does not hold the device's bytes\n");
		return 1;
	}
	printf("spliced %zu bytes into a kernel pipe: ok\n", total);
	pp_close(out);
	close(k[0]);
	close(k[1]);
	pp_close(p[0]);
	pp_close(p[1]);

	printf("  maps %ld, unmaps %ld (at most %ld mapped at once), gets %ld, releases %ld, references left %ld\n",
	       atomic_load(&d.maps), atomic_load(&d.unmaps), atomic_load(&d.mapped_max),
	       atomic_load(&d.gets), atomic_load(&d.releases), atomic_load(&d.refs));
	if (!devwin_balanced(&d)) {
		fprintf(stderr, "device-window: map/unmap or references do not balance\n");
		return 1;
	}
	printf("every map had its unmap, every reference its release\n");
	devwin_close(&d);
	free(got);
	return 0;
}

#endif /* DEVICE_WINDOW_NO_MAIN */
