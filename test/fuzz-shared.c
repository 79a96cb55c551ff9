// SPDX-License-Identifier: MIT
/*
 * fuzz-shared.c - libFuzzer target for PP_O_SHARED pipes (src/shared.c;
 * docs/shared-pipes.md section 2): the input is a program of calls on a
 * shared pipe (writes, reads through the pipe's read end and through a
 * second one imported from an export, so a second mapping of the arena,
 * resizes, FIONREAD, poll) with writes of chosen values to chosen words of
 * the arena's bookkeeping between them (the header, counts, links, ring
 * control and slots), as a hostile peer would make, through a mapping of
 * the exported arena descriptor.  Whatever the program: no access leaves
 * a mapping (ASan), no call waits (the ends are set non-blocking before
 * every call) or loops (libFuzzer's timeout), every call returns bytes or
 * one of the errors a peer can cause, and until the first scribble the
 * bytes read are exactly the bytes written, in order.  No descriptor or
 * mapping outlives an input.
 *
 * The two side-lock words are left alone, and so are the busy words of
 * the write bias's records: a scribbled lock or busy word is waited on for
 * 2 s before it is called corrupt, which would make every such input a
 * slow one; test/shared-faults scribbles on the locks.  Their places (the
 * first word of the control area, the word 64 bytes on, and the first
 * word of each 64-byte record from 512 bytes on) are shared.c's struct
 * sh_ctrl, which asserts them.
 */
#define FUZZ_NAME "fuzz-shared"
#include "internal.h"
#include "fuzz.h"
#include "arena.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define MAXIO	20000

static unsigned char wbuf[MAXIO], rbuf[MAXIO];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc; (void)argv;
	trace = getenv("FUZZ_TRACE") != NULL;
	return 0;
}

static unsigned char stream_byte(unsigned long long pos)
{
	return (unsigned char)(pos * 131 + (pos >> 9));
}

static void check_errno(unsigned int op, long r, const char *what)
{
	if (trace)
		fprintf(stderr, FUZZ_NAME ": op %u: %s: %ld (%s)\n", op, what, r,
			r < 0 ? strerror(errno) : "ok");
	if (r < 0 && errno != EAGAIN && errno != EIO && errno != EPIPE && errno != EBUSY &&
	    errno != EPERM && errno != ENOMEM)
		fuzz_mismatch(op, "%s: unexpected errno %d (%s)", what, errno, strerror(errno));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct pp_file *e[2], *r2;
	struct pp__arena_layout lay;
	unsigned long long wpos = 0, rpos = 0;
	bool scribbled = false;
	int lowest_fd = lowest_free_fd(), fds[2];
	unsigned char *map;
	struct stat st;
	size_t words, lock0, lock1, busy0;

	if (pp_pipe2(e, PP_O_SHARED | O_NONBLOCK | PP_O_NOSIGPIPE))
		abort();
	if (pp_export(e[0], fds))
		abort();
	r2 = pp_import(fds, PP_O_NOSIGPIPE);
	if (!r2 || fstat(fds[0], &st))
		abort();
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (map == MAP_FAILED)
		abort();
	close(fds[0]);
	close(fds[1]);
	/* The same layout shared.c asked for: 264 pages (SH_PAGES), 512 slots (SH_RING). */
	if (pp__arena_layout(&lay, (uint32_t)pp_page_size(), 264, 512))
		abort();
	words = lay.pages_off / 4;
	lock0 = lay.ctrl_off / 4;
	lock1 = (lay.ctrl_off + 64) / 4;
	busy0 = (lay.ctrl_off + 512) / 4;

	for (unsigned int op = 0; op < 256 && c.n; op++) {
		unsigned int k = u8(&c);
		size_t n = 1 + u16(&c) % MAXIO;
		struct pp_file *rd = k & 0x80 ? r2 : e[0];
		long r;

		pp_fcntl(e[0], F_SETFL, O_NONBLOCK);
		pp_fcntl(e[1], F_SETFL, O_NONBLOCK);
		switch (k % 10) {
		case 0:
		case 1:
			for (size_t i = 0; i < n; i++)
				wbuf[i] = stream_byte(wpos + i);
			r = pp_write(e[1], wbuf, n);
			check_errno(op, r, "write");
			if (r > 0)
				wpos += (unsigned long long)r;
			break;
		case 2:
		case 3:
			r = pp_read(rd, rbuf, n);
			check_errno(op, r, "read");
			if (r > (long)n)
				fuzz_mismatch(op, "read %ld of %zu", r, n);
			for (long i = 0; !scribbled && i < r; i++)
				if (rbuf[i] != stream_byte(rpos + (unsigned long long)i))
					fuzz_mismatch(op, "byte %llu of the stream is wrong",
						      rpos + (unsigned long long)i);
			if (r > 0)
				rpos += (unsigned long long)r;
			break;
		case 4: {
			/* A peer's scribble: a chosen word, a chosen value. */
			size_t w = u16(&c) % words;
			uint32_t val = u8(&c) & 1 ? u8(&c) % 300 : (uint32_t)u16(&c) << 16 | u16(&c);

			if (w == lock0 || w == lock1 ||
			    (w >= busy0 && w < busy0 + 8 * 16 && (w - busy0) % 16 == 0))
				break;
			memcpy(map + w * 4, &val, 4);
			scribbled = true;
			break;
		}
		case 5:
			r = pp_fcntl(e[k & 1], F_SETPIPE_SZ, (unsigned long)4096 << (u8(&c) % 9));
			check_errno(op, r, "F_SETPIPE_SZ");
			break;
		case 6: {
			struct pp_pollfd p[2] = { { rd, POLLIN, 0 }, { e[1], POLLOUT, 0 } };
			int avail;

			r = pp_ioctl(rd, FIONREAD, &avail);
			check_errno(op, r, "FIONREAD");
			if (!r && !scribbled && (unsigned long long)avail != wpos - rpos)
				fuzz_mismatch(op, "FIONREAD %d, written - read %llu", avail,
					      wpos - rpos);
			r = pp_poll(p, 2, 0);
			check_errno(op, r, "poll");
			break;
		}
		case 7: {
			/* The arena's pages lent to the writer, filled in place, part of them queued. */
			struct iovec v[16];
			size_t fill = u16(&c) % (n + 1), done = 0;

			r = pp_write_lend(e[1], v, 16, n);
			check_errno(op, r, "write_lend");
			if (r <= 0)
				break;
			fill = fill < (size_t)r ? fill : (size_t)r;
			for (int i = 0; done < fill; i++)
				for (size_t j = 0; j < v[i].iov_len && done < fill; j++, done++)
					((unsigned char *)v[i].iov_base)[j] = stream_byte(wpos + done);
			if (pp_write_done(e[1], fill))
				fuzz_mismatch(op, "write_done: %s", strerror(errno));
			wpos += fill;
			break;
		}
		case 8: {
			/* The front lent in place, checked, part of it taken. */
			struct iovec v[16];
			size_t take = u16(&c) % (n + 1), seen = 0;

			r = pp_read_lend(rd, v, 16, n);
			check_errno(op, r, "read_lend");
			if (r <= 0)
				break;
			if (r > (long)n)
				fuzz_mismatch(op, "lent %ld of %zu", r, n);
			for (int i = 0; !scribbled && seen < (size_t)r; i++)
				for (size_t j = 0; j < v[i].iov_len; j++, seen++)
					if (((unsigned char *)v[i].iov_base)[j] != stream_byte(rpos + seen))
						fuzz_mismatch(op, "lent byte %llu is wrong", rpos + seen);
			take = take < (size_t)r ? take : (size_t)r;
			if (pp_read_done(rd, take))
				fuzz_mismatch(op, "read_done: %s", strerror(errno));
			rpos += take;
			break;
		}
		case 9: {
			/* vmsplice both ways: a copy into the arena, a copy out of it. */
			struct iovec v;

			if (k & 0x40) {
				for (size_t i = 0; i < n; i++)
					wbuf[i] = stream_byte(wpos + i);
				v = (struct iovec){ wbuf, n };
				r = pp_vmsplice(e[1], &v, 1, SPLICE_F_NONBLOCK);
				check_errno(op, r, "vmsplice in");
				if (r > 0)
					wpos += (unsigned long long)r;
			} else {
				v = (struct iovec){ rbuf, n };
				r = pp_vmsplice(rd, &v, 1, SPLICE_F_NONBLOCK);
				check_errno(op, r, "vmsplice out");
				for (long i = 0; !scribbled && i < r; i++)
					if (rbuf[i] != stream_byte(rpos + (unsigned long long)i))
						fuzz_mismatch(op, "vmspliced byte %llu is wrong",
							      rpos + (unsigned long long)i);
				if (r > 0)
					rpos += (unsigned long long)r;
			}
			break;
		}
		}
	}
	pp_close(r2);
	pp_close(e[0]);
	pp_close(e[1]);
	munmap(map, (size_t)st.st_size);
	if (lowest_free_fd() != lowest_fd)
		fuzz_mismatch(256, "a descriptor was left open");
	return 0;
}
