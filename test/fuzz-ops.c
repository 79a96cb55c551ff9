// SPDX-License-Identifier: MIT
/*
 * Description: libFuzzer target.  The input is a program of pipe
 * operations (write, read, writev, readv, F_SETPIPE_SZ, F_GETPIPE_SZ,
 * F_SETFL, F_GETFL, FIONREAD, poll with timeout 0, close either end,
 * reopen; vmsplice at either end, splice and tee to and from a second
 * pipe, pp_write_ref against vmsplice, pp_read_lend/pp_read_done against
 * read) run on a kernel pipe and on a pagepipe side by side, each pair
 * plain or packet (O_DIRECT).  Every return value, errno, byte read and
 * poll mask must be the same; a difference is reported and abort()s, so
 * libFuzzer saves the input.
 *
 * vmsplice takes its bytes from src, which is never written, since both
 * pipes keep references to it; now and then a segment points at memory
 * that faults (unmapped, PROT_NONE, read-only, or running into such a
 * page), where both must say EFAULT or stop at the same byte.
 *
 * Nothing may block.  Ends start non-blocking; an end made blocking by
 * F_SETFL is used only for a call the kernel would finish at once (read
 * with data queued or no writer left; write into an empty pipe that takes
 * it whole, or with no reader left).  If the pagepipe blocks where the
 * kernel did not, libFuzzer's -timeout reports the input.
 *
 * EXT_IN and EXT_OUT (issue 12) splice into the first pipe from, and out
 * of it to, an endpoint of each kind that kernel-resident buffers are made
 * for: an AF_UNIX stream socket pair, a TCP pair on 127.0.0.1, a kernel
 * pipe and a FIFO, one set for each side.  What a source splice leaves in
 * the pipe is the same bytes but not the same buffers (skbs for sockets;
 * for kernel pipes, test/kres-bugs.c KNOWN BUG 2), so once one moved
 * bytes, the rest of the input runs on the pagepipe alone (as fault mode
 * does) until REOPEN makes fresh pipes; its errors are compared first.
 * Out of the pipe, counts are compared (a kernel pipe or TCP sink may take
 * a different count by design: then the same fallback), and the bytes that
 * reach the sink always.
 *
 * An input whose first byte is odd runs in fault mode instead: the
 * FAULT operation arms the library's fault-injection hooks (fault.c), the
 * kernel side is dropped, and what is checked is that nothing crashes,
 * leaks memory (ASan's leak check) or leaks a descriptor, and that the
 * pagepipe's own answers stay consistent.
 *
 * Build and run: `make fuzz` (mk/fuzz.mk).
 */
#define FUZZ_NAME "fuzz-ops"
#include "internal.h"
#include "fuzz.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_IO		(1u << 20)		/* largest write: a full 1 MiB pipe */
#define SRC_LEN		(2u * MAX_IO)
#define MAX_IOV		1100			/* past IOV_MAX, to reach EINVAL */
#define MAX_OPS		512

static unsigned char *src;		/* pattern bytes that writes take from */
static unsigned char *kbuf, *pbuf;	/* what reads put their bytes in */
static struct iovec kiov[MAX_IOV], piov[MAX_IOV];
static size_t max_pipe;			/* pp_pipe_get_max_size() */
/*
 * Memory that faults, for vmsplice: rd_bad is [rw page][PROT_NONE page]
 * (both sides' reads may write its first page, whose bytes are never
 * compared); wr_bad is [page never written][PROT_NONE page]; ro is one
 * PROT_READ page.
 */
static unsigned char *rd_bad, *wr_bad, *ro_page;
static unsigned long released;		/* bytes pp_write_ref's callbacks gave back */
static unsigned long queued_ref;	/* bytes pp_write_ref queued */
static bool privileged;			/* root may grow a kernel pipe past pipe-max-size */

/* A byte count: small, a boundary value, or anything up to MAX_IO. */
static size_t size_arg(struct cursor *c)
{
	static const size_t special[] = {
		0, 1, 2, 511, 512, 4095, 4096, 4097, 8191, 8192, 8193, 12288,
		16383, 16384, 16385, 32768, 61440, 65535, 65536, 65537, 131072,
		262144, 524288, 1048575, 1048576,
	};

	return fuzz_size(c, special, sizeof(special) / sizeof(special[0]), MAX_IO);
}

/* ---------------------------------------------------------------------- */

struct state {
	int k[2];			/* the kernel pipe; -1 once closed */
	struct pp_file *p[2];		/* the pagepipe; NULL once closed */
	int k2[2];			/* the second pair: splice and tee peer */
	struct pp_file *p2[2];
	bool diff;			/* compare with the kernel (not fault mode) */
	bool diff_mode;			/* what diff is after REOPEN */
	unsigned int op;		/* operation number, for messages */
	unsigned int seq;		/* picks the bytes of the next write */
};

static void same(const struct state *s, const char *what, struct res k, struct res p)
{
	fuzz_same(s->op, s->diff, what, k, p);
}

static void same_bytes(const struct state *s, const char *what, long long n)
{
	fuzz_same_bytes(s->op, s->diff, what, kbuf, pbuf, n);
}

/* The kernel's view, to decide whether a blocking call would return at once. */
static int k_queued(const struct state *s)
{
	int fd = s->k[0] >= 0 ? s->k[0] : s->k[1];
	int n = 0;

	if (fd < 0 || ioctl(fd, FIONREAD, &n) < 0)
		return -1;
	return n;
}

static int p_queued(const struct state *s)
{
	struct pp_file *f = s->p[0] ? s->p[0] : s->p[1];
	int n = 0;

	if (!f || pp_ioctl(f, FIONREAD, &n) < 0)
		return -1;
	return n;
}

static bool end_nonblock(const struct state *s, int e)
{
	if (s->diff)
		return s->k[e] < 0 || (fcntl(s->k[e], F_GETFL) & O_NONBLOCK);
	return !s->p[e] || (pp_fcntl(s->p[e], F_GETFL) & O_NONBLOCK);
}

/* Would a read of count bytes at end e return without waiting? */
static bool read_ok(const struct state *s, int e, size_t count)
{
	if (count == 0 || e != 0 || end_nonblock(s, e))
		return true;	/* zero length, EBADF, or EAGAIN at worst */
	if (s->diff)
		return k_queued(s) > 0 || s->k[1] < 0;
	return p_queued(s) > 0 || !s->p[1];
}

/* Would a write of count bytes at end e return without waiting? */
static bool write_ok(const struct state *s, int e, size_t count)
{
	int size;

	if (count == 0 || e != 1 || end_nonblock(s, e))
		return true;
	if (s->diff) {
		if (s->k[0] < 0)
			return true;	/* EPIPE */
		size = fcntl(s->k[1], F_GETPIPE_SZ);
		return k_queued(s) == 0 && size > 0 && count <= (size_t)size;
	}
	if (!s->p[0])
		return true;
	size = pp_fcntl(s->p[1], F_GETPIPE_SZ);
	return p_queued(s) == 0 && size > 0 && count <= (size_t)size;
}

static void close_end(struct state *s, int e)
{
	if (s->k[e] >= 0)
		close(s->k[e]);
	s->k[e] = -1;
	if (s->p[e])
		pp_close(s->p[e]);
	s->p[e] = NULL;
}

static void close_end2(struct state *s, int e)
{
	if (s->k2[e] >= 0)
		close(s->k2[e]);
	s->k2[e] = -1;
	if (s->p2[e])
		pp_close(s->p2[e]);
	s->p2[e] = NULL;
}

static void open_one(struct state *s, int k[2], struct pp_file *p[2], int flags)
{
	if (s->diff && pipe2(k, flags) < 0)
		mismatch(s, "pipe2: %s", strerror(errno));
	if (pp_pipe2(p, flags) < 0) {
		if (s->diff)
			mismatch(s, "pp_pipe2: %s", strerror(errno));
		p[0] = p[1] = NULL;	/* an injected fault */
	}
}

/* Bit 0: the first pair is a packet pipe; bit 1: the second. */
static void open_pair(struct state *s, unsigned int how)
{
	close_end(s, 0);
	close_end(s, 1);
	close_end2(s, 0);
	close_end2(s, 1);
	s->diff = s->diff_mode;		/* fresh pipes: comparable again */
	open_one(s, s->k, s->p, O_NONBLOCK | (how & 1 ? O_DIRECT : 0));
	open_one(s, s->k2, s->p2, O_NONBLOCK | (how & 2 ? O_DIRECT : 0));
}

static const unsigned char *next_src(struct state *s, size_t len)
{
	size_t off = (size_t)(s->seq++ * 7919u) % (SRC_LEN - MAX_IO);

	(void)len;
	return src + off;
}

/* iovecs over kbuf/pbuf (reads) or src (writes); returns iovcnt, total in *total. */
static int make_iov(struct state *s, struct cursor *c, bool for_write, size_t *total)
{
	unsigned int b = u8(c);
	int cnt;
	size_t sum = 0;
	const unsigned char *w = for_write ? next_src(s, 0) : NULL;

	switch (b >> 5) {
	case 0:	cnt = 0; break;
	case 1:	cnt = -1; break;
	case 2:	cnt = 1024; break;
	case 3:	cnt = 1025; break;
	default: cnt = (int)(b & 31) + 1; break;
	}
	for (int i = 0; i < cnt && i < MAX_IOV; i++) {
		size_t len = cnt > 32 ? (i < 3 ? size_arg(c) : 0) : size_arg(c);

		if (sum + len > MAX_IO)
			len = MAX_IO - sum;
		if (for_write) {
			kiov[i] = piov[i] = (struct iovec){ (void *)(w + sum), len };
		} else {
			kiov[i] = (struct iovec){ kbuf + sum, len };
			piov[i] = (struct iovec){ pbuf + sum, len };
		}
		sum += len;
	}
	*total = sum;
	return cnt;
}

static int pick_end(struct cursor *c, int usual)
{
	return u8(c) % 8 == 7 ? !usual : usual;	/* now and then the wrong end: EBADF */
}

static void op_write(struct state *s, struct cursor *c)
{
	int e = pick_end(c, 1);
	size_t n = size_arg(c);
	const unsigned char *w = next_src(s, n);
	struct res k = { 0, 0 }, p;

	if (!write_ok(s, e, n))
		return;
	if (s->diff)
		k = CALL(write(s->k[e], w, n));
	p = CALL(pp_write(s->p[e], w, n));
	same(s, "write", k, p);
}

static void op_read(struct state *s, struct cursor *c)
{
	int e = pick_end(c, 0);
	size_t n = size_arg(c);
	struct res k = { 0, 0 }, p;

	if (u8(c) == 0xff)
		n = (size_t)1 << 30;	/* a count past any buffer; the pipe holds less */
	if (!read_ok(s, e, n))
		return;
	if (s->diff)
		k = CALL(read(s->k[e], kbuf, n));
	p = CALL(pp_read(s->p[e], pbuf, n));
	same(s, "read", k, p);
	same_bytes(s, "read", k.ret);
}

static void op_writev(struct state *s, struct cursor *c)
{
	int e = pick_end(c, 1);
	size_t total;
	int cnt = make_iov(s, c, true, &total);
	struct res k = { 0, 0 }, p;

	if (!write_ok(s, e, cnt < 0 || cnt > 1024 ? 0 : total))
		return;
	if (s->diff)
		k = CALL(writev(s->k[e], kiov, cnt));
	p = CALL(pp_writev(s->p[e], piov, cnt));
	same(s, "writev", k, p);
}

static void op_readv(struct state *s, struct cursor *c)
{
	int e = pick_end(c, 0);
	size_t total;
	int cnt = make_iov(s, c, false, &total);
	struct res k = { 0, 0 }, p;

	if (!read_ok(s, e, cnt < 0 || cnt > 1024 ? 0 : total))
		return;
	if (s->diff)
		k = CALL(readv(s->k[e], kiov, cnt));
	p = CALL(pp_readv(s->p[e], piov, cnt));
	same(s, "readv", k, p);
	same_bytes(s, "readv", k.ret);
}

static void op_setsize(struct state *s, struct cursor *c)
{
	static const unsigned long special[] = {
		0, 1, 4095, 4096, 4097, 8192, 12288, 16384, 65536, 65537,
		131072, 1048576, 1048577, 1ul << 31, (1ul << 31) + 1, 0xffffffffu,
	};
	int e = u8(c) & 1;
	unsigned int b = u8(c);
	unsigned long size = b & 0x80 ? special[b % (sizeof(special) / sizeof(special[0]))]
				      : (unsigned long)size_arg(c);
	struct res k = { 0, 0 }, p;

	/*
	 * Past the limit the kernel still obeys CAP_SYS_RESOURCE; the
	 * pagepipe limit is the application's, so compare only what both
	 * refuse or accept for the same reason.
	 */
	if (privileged && size > max_pipe && size <= (1ul << 31))
		return;
	if (s->diff)
		k = CALL(fcntl(s->k[e], F_SETPIPE_SZ, size));
	p = CALL(pp_fcntl(s->p[e], F_SETPIPE_SZ, size));
	same(s, "F_SETPIPE_SZ", k, p);
}

static void op_getsize(struct state *s, struct cursor *c)
{
	int e = u8(c) & 1;
	struct res k = { 0, 0 }, p;

	if (s->diff)
		k = CALL(fcntl(s->k[e], F_GETPIPE_SZ));
	p = CALL(pp_fcntl(s->p[e], F_GETPIPE_SZ));
	same(s, "F_GETPIPE_SZ", k, p);
}

static void op_setfl(struct state *s, struct cursor *c)
{
	int e = u8(c) & 1;
	unsigned int b = u8(c);
	int fl = (b & 1 ? O_NONBLOCK : 0) | (b & 2 ? O_DIRECT : 0) | (b & 4 ? O_APPEND : 0);
	struct res k = { 0, 0 }, p;

	if (!s->diff)
		fl |= O_NONBLOCK;	/* no kernel to say what would block */
	if (s->diff)
		k = CALL(fcntl(s->k[e], F_SETFL, fl));
	p = CALL(pp_fcntl(s->p[e], F_SETFL, fl));
	same(s, "F_SETFL", k, p);
	if (s->diff)
		k = CALL(fcntl(s->k[e], F_GETFL));
	p = CALL(pp_fcntl(s->p[e], F_GETFL));
	same(s, "F_GETFL after F_SETFL", k, p);
}

static void op_getfl(struct state *s, struct cursor *c)
{
	int e = u8(c) & 1;
	struct res k = { 0, 0 }, p;

	if (s->diff)
		k = CALL(fcntl(s->k[e], F_GETFL));
	p = CALL(pp_fcntl(s->p[e], F_GETFL));
	same(s, "F_GETFL", k, p);
}

static void op_fionread(struct state *s, struct cursor *c)
{
	int e = u8(c) & 1;
	int kn = -7, pn = -7;
	struct res k = { 0, 0 }, p;

	if (s->diff)
		k = CALL(ioctl(s->k[e], FIONREAD, &kn));
	p = CALL(pp_ioctl(s->p[e], FIONREAD, &pn));
	same(s, "FIONREAD", k, p);
	if (s->diff && k.ret == 0 && kn != pn)
		mismatch(s, "FIONREAD: kernel %d bytes, pagepipe %d", kn, pn);
	if (p.ret == 0 && pn < 0)
		mismatch(s, "FIONREAD: pagepipe says %d bytes", pn);
}

static void op_poll(struct state *s, struct cursor *c)
{
	static const short evs[] = { POLLIN, POLLOUT, POLLPRI, POLLRDNORM, POLLWRNORM,
				     POLLRDBAND, POLLWRBAND, POLLHUP };
	struct pollfd kfds[2];
	struct pp_pollfd pfds[2];
	unsigned int b = u8(c), nk = 0;
	struct res k = { 0, 0 }, p;

	for (int e = 0; e < 2; e++) {
		short ev = 0;
		unsigned int m = u8(c);

		/* A closed end is -1 to poll(2) but NULL (POLLNVAL) to pp_poll: leave it out. */
		if (!(b & (1u << e)) || !s->p[e] || (s->diff && s->k[e] < 0))
			continue;
		for (unsigned int i = 0; i < 8; i++)
			if (m & (1u << i))
				ev |= evs[i];
		kfds[nk] = (struct pollfd){ s->k[e], ev, 0 };
		pfds[nk] = (struct pp_pollfd){ s->p[e], ev, 0 };
		nk++;
	}
	if (s->diff)
		k = CALL(poll(kfds, nk, 0));
	p = CALL(pp_poll(pfds, nk, 0));
	same(s, "poll", k, p);
	for (unsigned int i = 0; s->diff && i < nk; i++)
		if (kfds[i].revents != pfds[i].revents)
			mismatch(s, "poll: fd %u events 0x%x: kernel revents 0x%x, pagepipe 0x%x",
				 i, kfds[i].events, kfds[i].revents, pfds[i].revents);
}

static void op_fault(struct state *s, struct cursor *c)
{
	static const int errs[] = { ENOMEM, EIO, ENOSPC, EINTR, EAGAIN, EFAULT };
	unsigned int site = u8(c) % PP_FAULT_NR;
	long skip = u8(c) % 16, count = u8(c) % 4;
	int err = errs[u8(c) % (sizeof(errs) / sizeof(errs[0]))];

	/*
	 * A signal interrupts a call now and then, never every time: the
	 * library retries EINTR, so an endless one (count 0) would hang it.
	 */
	if (err == EINTR && !count)
		count = 3;

	if (s->diff_mode)
		return;		/* faults exist only in fault mode */
	pp__fault_arm(site, skip, err, count);
}

/* SPLICE_F_NONBLOCK always (nothing may wait), the other flags drawn; now and then a bad bit. */
static unsigned int splice_flags(struct cursor *c)
{
	unsigned int b = u8(c);

	return SPLICE_F_NONBLOCK | (b & (SPLICE_F_MOVE | SPLICE_F_MORE | SPLICE_F_GIFT)) |
	       (b == 0xff ? 0x100u : 0);
}

/*
 * Now and then point one segment at memory that faults: a NULL base, a
 * PROT_NONE page, a range running into one, or (for reads) a read-only
 * page.  The same address on both sides.
 */
static void bad_segment(struct cursor *c, int cnt, bool for_write)
{
	unsigned int b = u8(c);
	unsigned char *region = for_write ? wr_bad : rd_bad;
	struct iovec *k, *p;
	size_t len;

	if ((b & 0xc0) != 0xc0 || cnt <= 0 || cnt > MAX_IOV)
		return;
	k = &kiov[(b & 7) % (unsigned int)min_t(int, cnt, 8)];
	p = &piov[k - kiov];
	len = k->iov_len ? min_t(size_t, k->iov_len, 3 * 4096) : 100;
	switch ((b >> 3) & 7) {
	case 0:
		*k = (struct iovec){ NULL, len };
		break;
	case 1:
		*k = (struct iovec){ region + 4096, len };
		break;
	case 2:
	case 3:
		*k = (struct iovec){ region + 4096 - (b & 8 ? 100 : 4096), len + 4096 };
		break;
	case 4:
		*k = (struct iovec){ ro_page + (b & 1), min_t(size_t, len, 4095) };
		break;
	default:
		return;
	}
	*p = *k;
}

/* vmsplice at either end: into the pipe from src, or out of it into kbuf/pbuf. */
static void op_vmsplice(struct state *s, struct cursor *c)
{
	int e = u8(c) & 1;
	size_t total;
	int cnt = make_iov(s, c, e == 1, &total);
	unsigned int flags = splice_flags(c);
	struct res k = { 0, 0 }, p;

	bad_segment(c, cnt, e == 1);
	if (s->diff)
		k = CALL(vmsplice(s->k[e], kiov, (unsigned long)cnt, flags));
	p = CALL(pp_vmsplice(s->p[e], piov, (size_t)cnt, flags));
	same(s, e ? "vmsplice to pipe" : "vmsplice to user", k, p);
	/* Out of the pipe the copies land in kbuf/pbuf segment by segment, in order. */
	if (!e && s->diff && k.ret > 0)
		for (int i = 0, left = (int)k.ret; i < cnt && left > 0; i++) {
			size_t n = min_t(size_t, kiov[i].iov_len, (size_t)left);

			if (kiov[i].iov_base && memcmp(kiov[i].iov_base, piov[i].iov_base, n))
				mismatch(s, "vmsplice to user: segment %d differs", i);
			left -= (int)n;
		}
}

/* splice or tee between the two pairs, either way; sometimes a pipe to itself. */
static void op_splice_tee(struct state *s, struct cursor *c, bool is_tee)
{
	unsigned int b = u8(c);
	size_t len = size_arg(c);
	unsigned int flags = splice_flags(c);
	int kin = b & 1 ? s->k2[0] : s->k[0], kout = b & 1 ? s->k[1] : s->k2[1];
	struct pp_file *pin = b & 1 ? s->p2[0] : s->p[0], *pout = b & 1 ? s->p[1] : s->p2[1];
	loff_t koff = 0, poff = 0;
	struct res k = { 0, 0 }, p;

	if (b & 2) {		/* the same pipe both sides: EINVAL */
		kout = b & 1 ? s->k2[1] : s->k[1];
		pout = b & 1 ? s->p2[1] : s->p[1];
	}
	if (b & 4) {		/* the ends swapped: EBADF */
		kin = b & 1 ? s->k2[1] : s->k[1];
		pin = b & 1 ? s->p2[1] : s->p[1];
	}
	if (is_tee) {
		if (s->diff)
			k = CALL(tee(kin, kout, len, flags));
		p = CALL(pp_tee(pin, pout, len, flags));
		same(s, "tee", k, p);
		return;
	}
	/* An offset on a pipe: ESPIPE. */
	if (s->diff)
		k = CALL(splice(kin, b & 8 ? &koff : NULL, kout, NULL, len, flags));
	p = CALL(pp_splice(pin, b & 8 ? &poff : NULL, pout, NULL, len, flags));
	same(s, "splice", k, p);
}

/* Read from the second pair: its stream must be the kernel's too. */
static void op_read2(struct state *s, struct cursor *c)
{
	size_t n = size_arg(c);
	struct res k = { 0, 0 }, p;

	if (s->diff)
		k = CALL(read(s->k2[0], kbuf, n));
	p = CALL(pp_read(s->p2[0], pbuf, n));
	same(s, "read of the second pipe", k, p);
	same_bytes(s, "read of the second pipe", k.ret);
}

static void on_release(void *buf, size_t count, void *arg)
{
	(void)buf;
	(void)arg;
	released += count;
}

/*
 * pp_write_ref is vmsplice with a completion: the same count, errno and
 * bytes.  Only non-blocking (the end's O_NONBLOCK decides, where vmsplice
 * has its flag).
 */
static void op_write_ref(struct state *s, struct cursor *c)
{
	size_t n = size_arg(c);
	const unsigned char *w = next_src(s, n);
	unsigned int b = u8(c);
	struct res k = { 0, 0 }, p;

	if (b >= 0xf8)
		w = b & 1 ? wr_bad + 4096 - 100 : NULL;	/* faults: part or all */
	if (!end_nonblock(s, 1))
		return;
	if (s->diff)
		k = CALL(vmsplice(s->k[1], &(struct iovec){ (void *)w, n }, 1, SPLICE_F_NONBLOCK));
	p = CALL(pp_write_ref(s->p[1], w, n, on_release, NULL));
	if (p.ret > 0)
		queued_ref += (unsigned long)p.ret;
	same(s, "pp_write_ref (vmsplice)", k, p);
}

/*
 * pp_read_lend then pp_read_done(consumed) is a read of consumed bytes:
 * those bytes, and the same stream after.
 */
static void op_lend(struct state *s, struct cursor *c)
{
	struct iovec lend[64];
	int e = pick_end(c, 0);
	int cnt = (int)(u8(c) % 64) + 1;
	size_t n = size_arg(c), consumed;
	unsigned int frac = u8(c);
	struct res k = { 0, 0 }, p;

	if (!read_ok(s, e, n))
		return;
	p = CALL(pp_read_lend(s->p[e], lend, cnt, n));
	if (p.ret <= 0) {
		if (s->diff)
			k = CALL(read(s->k[e], kbuf, n));
		same(s, "pp_read_lend (read)", k, p);
		return;
	}
	/* Lent: at most n bytes, over at most cnt segments. */
	consumed = frac >= 0x80 ? (size_t)p.ret : (size_t)p.ret * frac / 0x80;
	for (int i = 0, off = 0; off < p.ret; off += (int)lend[i++].iov_len) {
		if (i >= cnt || !lend[i].iov_len)
			mismatch(s, "pp_read_lend: %lld bytes in %d segments of %d", p.ret, i, cnt);
		memcpy(pbuf + off, lend[i].iov_base, lend[i].iov_len);
	}
	if (pp_read_done(s->p[e], consumed) < 0)
		mismatch(s, "pp_read_done: %s", strerror(errno));
	if (!s->diff)
		return;
	k = CALL(read(s->k[e], kbuf, consumed));
	p.ret = (long long)consumed;
	same(s, "pp_read_lend + pp_read_done (read)", k, p);
	same_bytes(s, "pp_read_lend", k.ret);
}

/* ---------------------------------------------------------------------- */
/* External endpoints: [x][0] is read, [x][1] written; kernel side and pagepipe side. */

enum { X_UNIX, X_TCP, X_KPIPE, X_FIFO, X_NR };
static const char *const x_name[X_NR] = { "unix", "tcp", "kernel pipe", "FIFO" };
static int xk[X_NR][2], xp[X_NR][2];
static struct pp_file *xpin[X_NR], *xpout[X_NR];
static int listener = -1;
static struct sockaddr_in listen_addr;
static char fifodir[64], kfifo[96], pfifo[96];

static void x_fail(const char *what)
{
	fprintf(stderr, "fuzz-ops: setup: %s: %s\n", what, strerror(errno));
	abort();
}

static void x_tcp(int fds[2])
{
	int sz = 4 << 20;

	fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fds[1] < 0)
		x_fail("socket");
	if (connect(fds[1], (struct sockaddr *)&listen_addr, sizeof(listen_addr)) < 0) {
		/* Interrupted by libFuzzer's timer: the connection goes on. */
		struct pollfd pfd = { fds[1], POLLOUT, 0 };
		int err = 0;
		socklen_t el = sizeof(err);

		if (errno != EINTR)
			x_fail("connect");
		while (poll(&pfd, 1, -1) < 0)
			;
		if (getsockopt(fds[1], SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
			x_fail("connect (after EINTR)");
	}
	fds[0] = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	if (fds[0] < 0)
		x_fail("accept");
	setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

static void x_open_one(int x, int fds[2], const char *fifo)
{
	int sz = 4 << 20;

	switch (x) {
	case X_UNIX:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
			x_fail("socketpair");
		setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		break;
	case X_TCP:
		x_tcp(fds);
		break;
	case X_KPIPE:
		if (pipe2(fds, O_CLOEXEC) < 0)
			x_fail("pipe2");
		break;
	case X_FIFO:
		fds[0] = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		fds[1] = fds[0] < 0 ? -1 : open(fifo, O_WRONLY | O_CLOEXEC);
		if (fds[1] < 0)
			x_fail("fifo");
		break;
	}
	if (x == X_KPIPE || x == X_FIFO)
		(void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
	/* Nothing may wait. */
	if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0)
		x_fail("O_NONBLOCK");
}

static void x_open(void)
{
	for (int x = 0; x < X_NR; x++) {
		x_open_one(x, xk[x], kfifo);
		x_open_one(x, xp[x], pfifo);
		xpin[x] = pp_fdopen(xp[x][0]);
		xpout[x] = pp_fdopen(xp[x][1]);
	}
}

static void x_close(void)
{
	struct linger lg = { 1, 0 };

	for (int x = 0; x < X_NR; x++) {
		if (xpin[x])
			pp_close(xpin[x]);
		if (xpout[x])
			pp_close(xpout[x]);
		xpin[x] = xpout[x] = NULL;
		for (int e = 0; e < 2; e++) {
			/* TCP: a reset, no TIME_WAIT, or a long run runs out of ports. */
			if (x == X_TCP) {
				setsockopt(xk[x][e], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				setsockopt(xp[x][e], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			}
			close(xk[x][e]);
			close(xp[x][e]);
		}
	}
}

/* Read n bytes (or what there is, for pipes) from fd into buf; returns the count. */
static size_t x_take(int x, int fd, unsigned char *buf, size_t n)
{
	size_t got = 0;

	for (int idle = 0; got < n && idle < 2000; ) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (x != X_TCP)
			break;
		/* Loopback TCP: the bytes are on their way; wait for them (no assertion on time). */
		struct pollfd pfd = { fd, POLLIN, 0 };

		if (poll(&pfd, 1, 1) == 0)
			idle++;
	}
	return got;
}

/* Empty a source or sink, discarding. */
static void x_empty(int fd)
{
	while (read(fd, kbuf, MAX_IO) > 0)
		;
}

static void stop_comparing(struct state *s, const char *why)
{
	if (trace && s->diff)
		fprintf(stderr, "fuzz-ops: op %u: %s: the pagepipe alone from here to REOPEN\n", s->op, why);
	s->diff = false;
}

static void op_ext_in(struct state *s, struct cursor *c)
{
	int x = (int)(u8(c) % X_NR);
	size_t n = size_arg(c) % 65537, len = size_arg(c);
	unsigned int flags = splice_flags(c);
	const unsigned char *w = next_src(s, n);
	ssize_t kw = 0, pw;
	struct res k = { 0, 0 }, p;

	if (s->diff)
		kw = write(xk[x][1], w, n);
	pw = write(xp[x][1], w, n);
	if (s->diff && kw != pw)
		stop_comparing(s, "the two sources took different counts");
	if (x == X_TCP && pw > 0) {
		/* Until the bytes are at the other end: loopback is quick, not instant. */
		for (int i = 0, kn = 0, pn = 0; i < 2000 && (pn < pw || (s->diff && kn < kw)); i++) {
			struct pollfd pfd[2] = { { xk[x][0], POLLIN, 0 }, { xp[x][0], POLLIN, 0 } };

			ioctl(xk[x][0], FIONREAD, &kn);
			ioctl(xp[x][0], FIONREAD, &pn);
			if (pn < pw || (s->diff && kn < kw))
				poll(pfd, 2, 1);
		}
	}
	if (trace)
		fprintf(stderr, "fuzz-ops: op %u: splice(%s -> pipe, %zu, 0x%x) of %zd written\n",
			s->op, x_name[x], len, flags, pw);
	if (s->diff)
		k = CALL(splice(xk[x][0], NULL, s->k[1], NULL, len, flags));
	p = CALL(pp_splice(xpin[x], NULL, s->p[1], NULL, len, flags));
	/*
	 * Failures do not depend on the buffers: EBADF, EPIPE, EINVAL...
	 * compared.  KNOWN BUG 3 (test/kres-bugs.c: an empty kernel pipe or
	 * FIFO into a pipe without readers was EPIPE, where Linux waits for
	 * the input first and says EAGAIN) is fixed; the switch stays for
	 * bisecting.
	 */
#define KNOWN_BUG_3	0
	bool known = KNOWN_BUG_3 && (x == X_KPIPE || x == X_FIFO) && k.ret < 0 && k.err == EAGAIN &&
		     p.ret < 0 && p.err == EPIPE;

	if (known && trace)
		fprintf(stderr, "fuzz-ops: op %u: KNOWN BUG 3: EAGAIN in Linux, EPIPE here\n", s->op);
	fuzz_same(s->op, !known && s->diff && ((k.ret < 0 && k.err != EAGAIN) || (p.ret < 0 && p.err != EAGAIN)),
		  "splice from an external source", k, p);
	if (k.ret > 0 || p.ret > 0)
		stop_comparing(s, "bytes from an external source");
	x_empty(xk[x][0]);
	x_empty(xp[x][0]);
}

static void op_ext_out(struct state *s, struct cursor *c)
{
	int x = (int)(u8(c) % X_NR);
	size_t len = size_arg(c);
	unsigned int flags = splice_flags(c);
	bool cmp = s->diff;
	struct res k = { 0, 0 }, p;
	size_t kn = 0, pn = 0;

	if (x == X_UNIX || x == X_TCP)
		len = len < 65536 ? len : 65536;	/* one non-blocking send takes it all */
	if (trace)
		fprintf(stderr, "fuzz-ops: op %u: splice(pipe -> %s, %zu, 0x%x)\n", s->op, x_name[x], len, flags);
	if (s->diff)
		k = CALL(splice(s->k[0], NULL, xk[x][1], NULL, len, flags));
	p = CALL(pp_splice(s->p[0], NULL, xpout[x], NULL, len, flags));
	/*
	 * Into a kernel pipe the kernel moves buffers and counts its slots
	 * by them; a TCP send may stop short: a different count is no bug
	 * there, and the streams part ways.
	 */
	if (cmp && (x != X_UNIX) && (k.ret != p.ret || k.err != p.err))
		stop_comparing(s, "a different count into a kernel pipe or TCP");
	else
		same(s, "splice to an external sink", k, p);
	if (k.ret > 0)
		kn = x_take(x, xk[x][0], kbuf, (size_t)k.ret);
	if (p.ret > 0)
		pn = x_take(x, xp[x][0], pbuf, (size_t)p.ret);
	if (p.ret > 0 && pn != (size_t)p.ret)
		mismatch(s, "splice to %s said %lld, %zu arrived", x_name[x], p.ret, pn);
	if (cmp)
		fuzz_same_bytes(s->op, true, "bytes at the external sink", kbuf, pbuf,
				(long long)(kn < pn ? kn : pn));
	x_empty(xk[x][0]);
	x_empty(xp[x][0]);
}

enum {
	OP_WRITE, OP_READ, OP_WRITEV, OP_READV, OP_SETSIZE, OP_GETSIZE,
	OP_SETFL, OP_GETFL, OP_FIONREAD, OP_POLL, OP_CLOSE_W, OP_CLOSE_R,
	OP_REOPEN, OP_FAULT, OP_VMSPLICE, OP_SPLICE, OP_TEE, OP_READ2,
	OP_WRITE_REF, OP_LEND, OP_CLOSE2, OP_EXT_IN, OP_EXT_OUT, OP_NR,
};

/* Read both pipes of a pair dry and compare: the streams must be the same to the end. */
static void drain(struct state *s, int k_[2], struct pp_file *p_[2])
{
	for (int guard = 0; guard < 4096; guard++) {
		struct res k = { 0, 0 }, p;

		if (!p_[0])
			return;
		if (s->diff) {
			fcntl(k_[0], F_SETFL, O_NONBLOCK);
			k = CALL(read(k_[0], kbuf, MAX_IO));
		}
		pp_fcntl(p_[0], F_SETFL, O_NONBLOCK);
		p = CALL(pp_read(p_[0], pbuf, MAX_IO));
		same(s, "final read", k, p);
		same_bytes(s, "final read", k.ret);
		if (p.ret <= 0)
			return;
	}
}

static void x_cleanup(void)
{
	unlink(kfifo);
	unlink(pfifo);
	rmdir(fifodir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc; (void)argv;
	signal(SIGPIPE, SIG_IGN);
	trace = getenv("FUZZ_TRACE") != NULL;
	src = malloc(SRC_LEN);
	kbuf = malloc(MAX_IO + 4096);
	pbuf = malloc(MAX_IO + 4096);
	if (!src || !kbuf || !pbuf)
		abort();
	for (size_t i = 0; i < SRC_LEN; i++)
		src[i] = (unsigned char)((i * 2654435761u) >> 13 ^ i);
	rd_bad = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	wr_bad = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ro_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rd_bad == MAP_FAILED || wr_bad == MAP_FAILED || ro_page == MAP_FAILED ||
	    mprotect(rd_bad + 4096, 4096, PROT_NONE) || mprotect(wr_bad + 4096, 4096, PROT_NONE))
		abort();
	max_pipe = pp_pipe_get_max_size();
	{
		const char *dir = getenv("TMPDIR");
		socklen_t sl = sizeof(listen_addr);

		snprintf(fifodir, sizeof(fifodir), "%s/pp-fuzz-ops-XXXXXX", dir ? dir : "/tmp");
		if (!mkdtemp(fifodir))
			x_fail("mkdtemp");
		snprintf(kfifo, sizeof(kfifo), "%s/k", fifodir);
		snprintf(pfifo, sizeof(pfifo), "%s/p", fifodir);
		if (mkfifo(kfifo, 0600) < 0 || mkfifo(pfifo, 0600) < 0)
			x_fail("mkfifo");
		atexit(x_cleanup);
		listen_addr = (struct sockaddr_in){ .sin_family = AF_INET };
		listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (listener < 0 || bind(listener, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) < 0 ||
		    listen(listener, 16) < 0 ||
		    getsockname(listener, (struct sockaddr *)&listen_addr, &sl) < 0)
			x_fail("tcp listener");
	}
	privileged = geteuid() == 0;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct state s = { .k = { -1, -1 }, .k2 = { -1, -1 } };
	int lowest_fd = lowest_free_fd(), fd;

	s.diff = s.diff_mode = !(u8(&c) & 1);
	open_pair(&s, u8(&c));
	x_open();
	for (s.op = 0; c.n && s.op < MAX_OPS; s.op++) {
		switch (u8(&c) % OP_NR) {
		case OP_WRITE:		op_write(&s, &c); break;
		case OP_READ:		op_read(&s, &c); break;
		case OP_WRITEV:		op_writev(&s, &c); break;
		case OP_READV:		op_readv(&s, &c); break;
		case OP_SETSIZE:	op_setsize(&s, &c); break;
		case OP_GETSIZE:	op_getsize(&s, &c); break;
		case OP_SETFL:		op_setfl(&s, &c); break;
		case OP_GETFL:		op_getfl(&s, &c); break;
		case OP_FIONREAD:	op_fionread(&s, &c); break;
		case OP_POLL:		op_poll(&s, &c); break;
		case OP_CLOSE_W:	close_end(&s, 1); break;
		case OP_CLOSE_R:	close_end(&s, 0); break;
		case OP_REOPEN:		open_pair(&s, u8(&c)); break;
		case OP_FAULT:		op_fault(&s, &c); break;
		case OP_VMSPLICE:	op_vmsplice(&s, &c); break;
		case OP_SPLICE:		op_splice_tee(&s, &c, false); break;
		case OP_TEE:		op_splice_tee(&s, &c, true); break;
		case OP_READ2:		op_read2(&s, &c); break;
		case OP_WRITE_REF:	op_write_ref(&s, &c); break;
		case OP_LEND:		op_lend(&s, &c); break;
		case OP_CLOSE2:		close_end2(&s, u8(&c) & 1); break;
		case OP_EXT_IN:		op_ext_in(&s, &c); break;
		case OP_EXT_OUT:	op_ext_out(&s, &c); break;
		}
	}
	pp__fault_disarm_all();
	drain(&s, s.k, s.p);
	drain(&s, s.k2, s.p2);
	close_end(&s, 0);
	close_end(&s, 1);
	close_end2(&s, 0);
	close_end2(&s, 1);
	x_close();
	/* Every byte pp_write_ref queued was given back once the pipes went. */
	if (released != queued_ref)
		mismatch(&s, "pp_write_ref: %lu bytes queued, %lu released", queued_ref, released);
	released = queued_ref = 0;

	/*
	 * Every descriptor the library opened (event fds) must be gone with
	 * the pipe; a leaked one would hold the lowest free number.  Measured
	 * per input: libFuzzer itself opens descriptors between inputs.
	 */
	fd = lowest_free_fd();
	if (fd != lowest_fd)
		mismatch(&s, "descriptor leak: lowest free descriptor %d, was %d", fd, lowest_fd);
	return 0;
}
