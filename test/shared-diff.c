// SPDX-License-Identifier: MIT
/*
 * Description: a PP_O_SHARED pagepipe (src/shared.c) against a kernel
 * pipe, both O_NONBLOCK, one thread doing the same operations on each:
 * every return value, errno, FIONREAD and byte read must be the kernel's.
 * That includes how many bytes a non-blocking write takes from a pipe
 * near full, which depends on the layout of its buffers: Linux appends a
 * write's tail (its length modulo a page) to the last buffer only while
 * the pipe is not empty and the tail fits whole in that page after the
 * buffer's offset + len; a read that empties the pipe frees the buffer,
 * so the next write starts a fresh page at offset 0 (a shared pipe keeps
 * the slot, drained, and must act as if it had not); a buffer read in
 * part keeps its offset.  The bytes are a running stream (t_fill by
 * stream position), so a byte lost, doubled or moved fails beside the
 * kernel's and against the stream itself.
 *  - fixed_layouts: short fixed sequences (drains at the start and in the
 *    middle of a page, a partly read buffer, writes after the drain larger
 *    than what was drained, writes that cross the page end, a writev and a
 *    resize after a drain), each in a pipe set to 4096, 8192 and 16384
 *    bytes by F_SETPIPE_SZ on both; then a large non-blocking write probes
 *    the capacity left, and everything is read back and compared;
 *  - random_ops: seeded random steps (writes weighted to 1..200 bytes,
 *    also up to a page and up to 70000, writev of 2-3 segments, reads small
 *    and large and of exactly FIONREAD, readv, FIONREAD, F_SETPIPE_SZ to
 *    4096..65536 with EBUSY when the contents do not fit, the odd drain of
 *    everything, and now and then packet mode: O_DIRECT set or cleared by
 *    F_SETFL), FIONREAD on both ends compared after every step.  The
 *    seeds are printed; SHARED_DIFF_SEED=N runs seed N alone and
 *    SHARED_DIFF_STEPS=N sets the steps per seed.
 * A mismatch prints the step number, the operation and both results.
 */
#include "helpers.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#define PG		4096
#define STREAM_SEED	0x5d1fu
#define MAXW		70000		/* the largest write */
#define MAXR		(1 << 17)	/* the largest read: twice the largest pipe here */

static unsigned char wbuf[MAXW + 4 * PG];
static unsigned char kbuf[MAXR], pbuf[MAXR];

/* The two pipes and where the stream stands in them. */
struct diff {
	struct t_pair x;
	unsigned long long wpos;	/* bytes written (the same count to both) */
	unsigned long long rpos;	/* bytes read (likewise) */
	unsigned long step;
	const char *what;		/* the sequence or seed, for messages */
	bool packets;			/* O_DIRECT was set on the write end */
	bool direct;			/* and is set now */
	/* What the run met, for its last line. */
	unsigned long partial, eagain, ebusy, direct_steps;
};

static const char *res_str(struct t_res r, char *buf, size_t len)
{
	if (r.ret < 0)
		snprintf(buf, len, "%lld (%s)", r.ret, strerror(r.err));
	else
		snprintf(buf, len, "%lld", r.ret);
	return buf;
}

/* Both results the same, or fail naming the step and the operation. */
static void same(struct diff *d, int line, const char *op, struct t_res k, struct t_res p)
{
	char kb[64], pb[64];

	if (k.ret == p.ret && k.err == p.err)
		return;
	t_fail_at(__FILE__, line, "%s, step %lu: %s: kernel %s, pagepipe %s",
		  d->what, d->step, op, res_str(k, kb, sizeof(kb)), res_str(p, pb, sizeof(pb)));
}

/* FIONREAD on both ends of both pipes, and the stream's own count. */
static void check_fionread(struct diff *d, int line, const char *op)
{
	for (int e = 0; e < 2; e++) {
		int kn = -1, pn = -2;
		struct t_res k = T_CALL(ioctl(d->x.k[e], FIONREAD, &kn));
		struct t_res p = T_CALL(pp_ioctl(d->x.p[e], FIONREAD, &pn));
		char what[96];

		snprintf(what, sizeof(what), "%s, then FIONREAD on end %d", op, e);
		same(d, line, what, k, p);
		if (kn != pn || (unsigned long long)kn != d->wpos - d->rpos)
			t_fail_at(__FILE__, line,
				  "%s, step %lu: %s: kernel count %d, pagepipe count %d, stream %llu",
				  d->what, d->step, what, kn, pn, d->wpos - d->rpos);
	}
}

static void diff_open(struct diff *d, const char *what)
{
	memset(d, 0, sizeof(*d));
	d->what = what;
	t_pipe2(d->x.p, PP_O_SHARED | O_NONBLOCK);
	t_kpipe2(d->x.k, O_NONBLOCK);
}

static void diff_close(struct diff *d)
{
	t_pair_close(&d->x);
}

static void count_write(struct diff *d, struct t_res k, size_t len)
{
	if (k.ret < 0 && k.err == EAGAIN)
		d->eagain++;
	else if (k.ret >= 0 && (size_t)k.ret < len)
		d->partial++;
}

static void do_write(struct diff *d, int line, size_t len)
{
	char op[64];
	struct t_res k, p;

	d->step++;
	snprintf(op, sizeof(op), "write %zu", len);
	t_fill(wbuf, len, d->wpos, STREAM_SEED);
	k = T_CALL(write(d->x.k[1], wbuf, len));
	p = T_CALL(pp_write(d->x.p[1], wbuf, len));
	same(d, line, op, k, p);
	count_write(d, k, len);
	if (k.ret > 0)
		d->wpos += (unsigned long long)k.ret;
	check_fionread(d, line, op);
}

/* writev of n segments of the lengths given, taken from separate places in wbuf. */
static void do_writev(struct diff *d, int line, const size_t *lens, int n)
{
	struct iovec iov[4];
	unsigned long long pos = d->wpos;
	unsigned char *at = wbuf;
	char op[96];
	int o;
	struct t_res k, p;

	d->step++;
	o = snprintf(op, sizeof(op), "writev");
	for (int i = 0; i < n; i++) {
		t_fill(at, lens[i], pos, STREAM_SEED);
		iov[i].iov_base = at;
		iov[i].iov_len = lens[i];
		pos += lens[i];
		at += lens[i] + 64;	/* a gap between segments */
		o += snprintf(op + o, sizeof(op) - (size_t)o, " %zu", lens[i]);
	}
	k = T_CALL(writev(d->x.k[1], iov, n));
	p = T_CALL(pp_writev(d->x.p[1], iov, n));
	same(d, line, op, k, p);
	count_write(d, k, pos - d->wpos);
	if (k.ret > 0)
		d->wpos += (unsigned long long)k.ret;
	check_fionread(d, line, op);
}

/*
 * n bytes read, checked: past them.  A read of part of a packet drops
 * the rest of it (pipe_read: the buffer's len goes to 0), so after it the
 * stream goes on from where the kernel's FIONREAD says.
 */
static void read_past(struct diff *d, int line, const char *op, long long n)
{
	int kn = -1;
	unsigned long long left;

	d->rpos += (unsigned long long)n;
	if (ioctl(d->x.k[0], FIONREAD, &kn) < 0)
		t_fail_at(__FILE__, line, "kernel FIONREAD: %s", strerror(errno));
	left = d->wpos - d->rpos;
	if ((unsigned long long)kn == left)
		return;
	if (!d->packets || (unsigned long long)kn > left)
		t_fail_at(__FILE__, line, "%s, step %lu: %s: the kernel holds %d, the stream %llu "
			  "(the test is wrong)", d->what, d->step, op, kn, left);
	d->rpos += left - (unsigned long long)kn;
}

/* The bytes read: the same from both, and the stream's next ones. */
static void check_bytes(struct diff *d, int line, const char *op, long long n)
{
	for (long long i = 0; i < n; i++)
		if (kbuf[i] != pbuf[i])
			t_fail_at(__FILE__, line,
				  "%s, step %lu: %s: byte %lld (stream %llu): kernel 0x%02x, pagepipe 0x%02x",
				  d->what, d->step, op, i, d->rpos + (unsigned long long)i,
				  kbuf[i], pbuf[i]);
	if (t_check(kbuf, (size_t)n, d->rpos, STREAM_SEED))
		t_fail_at(__FILE__, line, "%s, step %lu: %s: the kernel's bytes are not the stream's "
			  "from %llu (the test is wrong)", d->what, d->step, op, d->rpos);
}

static void do_read(struct diff *d, int line, size_t len)
{
	char op[64];
	struct t_res k, p;

	d->step++;
	snprintf(op, sizeof(op), "read %zu", len);
	memset(kbuf, 0xa5, len < MAXR ? len : MAXR);
	memset(pbuf, 0x5a, len < MAXR ? len : MAXR);
	k = T_CALL(read(d->x.k[0], kbuf, len));
	p = T_CALL(pp_read(d->x.p[0], pbuf, len));
	same(d, line, op, k, p);
	if (k.ret > 0) {
		check_bytes(d, line, op, k.ret);
		read_past(d, line, op, k.ret);
	}
	check_fionread(d, line, op);
}

/* readv into n segments of the lengths given, one after another in the buffers. */
static void do_readv(struct diff *d, int line, const size_t *lens, int n)
{
	struct iovec kv[4], pv[4];
	size_t at = 0;
	char op[96];
	int o;
	struct t_res k, p;

	d->step++;
	o = snprintf(op, sizeof(op), "readv");
	for (int i = 0; i < n; i++) {
		kv[i].iov_base = kbuf + at;
		pv[i].iov_base = pbuf + at;
		kv[i].iov_len = pv[i].iov_len = lens[i];
		at += lens[i];
		o += snprintf(op + o, sizeof(op) - (size_t)o, " %zu", lens[i]);
	}
	memset(kbuf, 0xa5, at);
	memset(pbuf, 0x5a, at);
	k = T_CALL(readv(d->x.k[0], kv, n));
	p = T_CALL(pp_readv(d->x.p[0], pv, n));
	same(d, line, op, k, p);
	if (k.ret > 0) {
		check_bytes(d, line, op, k.ret);
		read_past(d, line, op, k.ret);
	}
	check_fionread(d, line, op);
}

/* F_SETPIPE_SZ on end e of both, then F_GETPIPE_SZ on both ends: what F_SETPIPE_SZ gave. */
static long long do_setsize(struct diff *d, int line, int e, int size)
{
	char op[96];
	struct t_res k, p, set;

	d->step++;
	snprintf(op, sizeof(op), "F_SETPIPE_SZ %d on end %d", size, e);
	set = k = T_CALL(fcntl(d->x.k[e], F_SETPIPE_SZ, size));
	p = T_CALL(pp_fcntl(d->x.p[e], F_SETPIPE_SZ, size));
	same(d, line, op, k, p);
	if (k.ret < 0 && k.err == EBUSY)
		d->ebusy++;
	for (int g = 0; g < 2; g++) {
		k = T_CALL(fcntl(d->x.k[g], F_GETPIPE_SZ));
		p = T_CALL(pp_fcntl(d->x.p[g], F_GETPIPE_SZ));
		snprintf(op, sizeof(op), "F_SETPIPE_SZ %d on end %d, then F_GETPIPE_SZ on end %d",
			 size, e, g);
		same(d, line, op, k, p);
	}
	check_fionread(d, line, op);
	return set.ret;
}

/* F_SETFL O_NONBLOCK | extra on end e of both. */
static void do_setfl(struct diff *d, int line, int e, int extra)
{
	char op[64];
	struct t_res k, p;

	d->step++;
	snprintf(op, sizeof(op), "F_SETFL O_NONBLOCK%s on end %d", extra ? " | O_DIRECT" : "", e);
	k = T_CALL(fcntl(d->x.k[e], F_SETFL, O_NONBLOCK | extra));
	p = T_CALL(pp_fcntl(d->x.p[e], F_SETFL, O_NONBLOCK | extra));
	same(d, line, op, k, p);
	if (e == 1) {
		d->direct = extra != 0;
		d->packets |= d->direct;
	}
}

/* Read everything back, in reads of up to len, then one read more: EAGAIN both. */
static void drain(struct diff *d, int line, size_t len)
{
	while (d->wpos > d->rpos)
		do_read(d, line, len);
	do_read(d, line, len);
}

/* ---------------------------------------------------------------------- */
/* Fixed sequences. */

/* write n; writev n, m (, l); read n; F_SETPIPE_SZ n; n times (write m, read m) */
enum { W, V2, V3, R, SZ, WR, END };

struct seq_op {
	int op;
	int n[3];
};

struct seq {
	const char *name;
	struct seq_op ops[12];
};

static const struct seq seqs[] = {
	{ "w100 r100 w10 w4000",
	  { { W, { 100 } }, { R, { 100 } }, { W, { 10 } }, { W, { 4000 } }, { END, { 0 } } } },
	{ "w100 r100 w200 w3800 (more than the drained 100)",
	  { { W, { 100 } }, { R, { 100 } }, { W, { 200 } }, { W, { 3800 } }, { END, { 0 } } } },
	{ "w100 r100 w300 r50 w3700 w100",
	  { { W, { 100 } }, { R, { 100 } }, { W, { 300 } }, { R, { 50 } }, { W, { 3700 } },
	    { W, { 100 } }, { END, { 0 } } } },
	{ "63 x (w64 r64), w64 w100 w3000",
	  { { WR, { 63, 64 } }, { W, { 64 } }, { W, { 100 } }, { W, { 3000 } }, { END, { 0 } } } },
	{ "w4096 r4096 w1 w4095 w1",
	  { { W, { 4096 } }, { R, { 4096 } }, { W, { 1 } }, { W, { 4095 } }, { W, { 1 } },
	    { END, { 0 } } } },
	{ "w3000 r1000 w1000 w200 (partly read: keeps its offset)",
	  { { W, { 3000 } }, { R, { 1000 } }, { W, { 1000 } }, { W, { 200 } }, { W, { 96 } },
	    { W, { 1 } }, { END, { 0 } } } },
	{ "w3000 r1000 r1999 w1097 w1 (one byte left at 2999)",
	  { { W, { 3000 } }, { R, { 1000 } }, { R, { 1999 } }, { W, { 1097 } }, { W, { 1 } },
	    { END, { 0 } } } },
	/* Drained in the middle of a page, then writes across that page's end. */
	{ "w2000 r2000 w3000 w1000 w200",
	  { { W, { 2000 } }, { R, { 2000 } }, { W, { 3000 } }, { W, { 1000 } }, { W, { 200 } },
	    { END, { 0 } } } },
	{ "w2500 r1000 r1500 w2000 w2000 w100",
	  { { W, { 2500 } }, { R, { 1000 } }, { R, { 1500 } }, { W, { 2000 } }, { W, { 2000 } },
	    { W, { 100 } }, { END, { 0 } } } },
	{ "w4000 r4000 w100 w4000",
	  { { W, { 4000 } }, { R, { 4000 } }, { W, { 100 } }, { W, { 4000 } }, { END, { 0 } } } },
	{ "w3000 r3000 w1096 w1 w3000",
	  { { W, { 3000 } }, { R, { 3000 } }, { W, { 1096 } }, { W, { 1 } }, { W, { 3000 } },
	    { END, { 0 } } } },
	{ "w100 w200 r300 w4000 w96 w1",
	  { { W, { 100 } }, { W, { 200 } }, { R, { 300 } }, { W, { 4000 } }, { W, { 96 } },
	    { W, { 1 } }, { END, { 0 } } } },
	{ "w2048 r2048 w2048 w2048 w1",
	  { { W, { 2048 } }, { R, { 2048 } }, { W, { 2048 } }, { W, { 2048 } }, { W, { 1 } },
	    { END, { 0 } } } },
	{ "w1000 r1000 w5000 w3000 w200 (a tail of 904 after a drain)",
	  { { W, { 1000 } }, { R, { 1000 } }, { W, { 5000 } }, { W, { 3000 } }, { W, { 200 } },
	    { END, { 0 } } } },
	{ "w4100 r4100 w4100 w4 w4000",
	  { { W, { 4100 } }, { R, { 4100 } }, { W, { 4100 } }, { W, { 4 } }, { W, { 4000 } },
	    { END, { 0 } } } },
	{ "w100 r50 w3996 w1 w4096 (partly read, merged up to the page's end)",
	  { { W, { 100 } }, { R, { 50 } }, { W, { 3996 } }, { W, { 1 } }, { W, { 4096 } },
	    { END, { 0 } } } },
	{ "w100 r100 writev 50+50 writev 2000+1900 w100",
	  { { W, { 100 } }, { R, { 100 } }, { V2, { 50, 50 } }, { V3, { 2000, 1900, 50 } },
	    { W, { 100 } }, { END, { 0 } } } },
	{ "w100 r100 writev 3000+2000+100 w10",
	  { { W, { 100 } }, { R, { 100 } }, { V3, { 3000, 2000, 100 } }, { W, { 10 } },
	    { END, { 0 } } } },
	{ "w100 r100 resize 4096 w4000 w96 w1",
	  { { W, { 100 } }, { R, { 100 } }, { SZ, { 4096 } }, { W, { 4000 } }, { W, { 96 } },
	    { W, { 1 } }, { END, { 0 } } } },
	{ "w300 r100 resize 4096 w3796 w1",
	  { { W, { 300 } }, { R, { 100 } }, { SZ, { 4096 } }, { W, { 3796 } }, { W, { 1 } },
	    { END, { 0 } } } },
	{ "w100 r100 w4096 resize 4096 (the drained slot takes no room)",
	  { { W, { 100 } }, { R, { 100 } }, { W, { 4096 } }, { SZ, { 4096 } }, { R, { 10 } },
	    { SZ, { 4096 } }, { W, { 1 } }, { END, { 0 } } } },
	{ "w2000 r1500 r500 resize 8192 w2200 w2000 w4000",
	  { { W, { 2000 } }, { R, { 1500 } }, { R, { 500 } }, { SZ, { 8192 } }, { W, { 2200 } },
	    { W, { 2000 } }, { W, { 4000 } }, { END, { 0 } } } },
};

static int fixed_layouts(void)
{
	static const int sizes[] = { 4096, 8192, 16384 };
	char what[160];

	for (size_t s = 0; s < sizeof(seqs) / sizeof(seqs[0]); s++) {
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			const struct seq *q = &seqs[s];
			struct diff d;

			snprintf(what, sizeof(what), "sequence \"%s\" in %d", q->name, sizes[z]);
			diff_open(&d, what);
			do_setsize(&d, __LINE__, 1, sizes[z]);
			for (const struct seq_op *o = q->ops; o->op != END; o++) {
				size_t lens[3] = { (size_t)o->n[0], (size_t)o->n[1], (size_t)o->n[2] };

				switch (o->op) {
				case W:  do_write(&d, __LINE__, lens[0]); break;
				case V2: do_writev(&d, __LINE__, lens, 2); break;
				case V3: do_writev(&d, __LINE__, lens, 3); break;
				case R:  do_read(&d, __LINE__, lens[0]); break;
				case SZ: do_setsize(&d, __LINE__, 0, o->n[0]); break;
				case WR:
					for (int i = 0; i < o->n[0]; i++) {
						do_write(&d, __LINE__, lens[1]);
						do_read(&d, __LINE__, lens[1]);
					}
					break;
				}
			}
			/* The room left, as a non-blocking write finds it, then all of it back. */
			do_write(&d, __LINE__, MAXW);
			do_write(&d, __LINE__, 1);
			drain(&d, __LINE__, 4000);
			/* And empty: a whole pipe's worth fits again. */
			do_write(&d, __LINE__, MAXW);
			drain(&d, __LINE__, MAXR);
			diff_close(&d);
		}
	}
	return T_EXIT_PASS;
}

/* ---------------------------------------------------------------------- */
/* Random steps. */

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return n ? (uint32_t)(z % n) : 0;
}

/* A length: mostly small, sometimes up to a page, at or near a page, or up to 70000. */
static size_t rlen(void)
{
	uint32_t c = rnd(100);

	if (c < 60)
		return 1 + rnd(200);
	if (c < 80)
		return 1 + rnd(PG);
	if (c < 88)
		return (size_t)(PG * (1 + rnd(3))) + rnd(3) - 1;	/* n pages, -1, +0, +1 */
	if (c < 98)
		return 1 + rnd(MAXW);
	return 0;
}

static int fionread_k(struct diff *d)
{
	int n = -1;

	if (ioctl(d->x.k[0], FIONREAD, &n) < 0)
		t_fail_at(__FILE__, __LINE__, "kernel FIONREAD: %s", strerror(errno));
	return n;
}

static void random_run(uint64_t seed, unsigned int steps)
{
	static const int sizes[] = { 4096, 8192, 16384, 65536 };
	char what[64];
	struct diff d;

	printf("seed %llu, %u steps\n", (unsigned long long)seed, steps);
	fflush(stdout);
	rng = seed;
	snprintf(what, sizeof(what), "seed %llu", (unsigned long long)seed);
	diff_open(&d, what);
	do_setsize(&d, __LINE__, 1, sizes[rnd(4)]);
	while (d.step < steps) {
		uint32_t c = rnd(1000);

		if (d.direct)
			d.direct_steps++;
		if (c < 380) {
			do_write(&d, __LINE__, rlen());
		} else if (c < 450) {
			size_t lens[3];
			int n = 2 + (int)rnd(2);

			for (int i = 0; i < n; i++)
				lens[i] = rnd(4) ? 1 + rnd(200) : rnd(2 * PG);
			do_writev(&d, __LINE__, lens, n);
		} else if (c < 700) {
			do_read(&d, __LINE__, 1 + rnd(200));
		} else if (c < 780) {
			do_read(&d, __LINE__, rnd(2) ? 1 + rnd(2 * PG) : 1 + rnd(MAXR));
		} else if (c < 830) {
			/* Exactly what is there, or that less a few bytes. */
			int n = fionread_k(&d);

			if (rnd(2) && n > 0)
				n -= (int)rnd((uint32_t)(n < 8 ? n : 8));
			do_read(&d, __LINE__, (size_t)n);
		} else if (c < 870) {
			size_t lens[3];
			int n = 2 + (int)rnd(2);

			for (int i = 0; i < n; i++)
				lens[i] = rnd(3) ? 1 + rnd(300) : rnd(2 * PG);
			do_readv(&d, __LINE__, lens, n);
		} else if (c < 910) {
			d.step++;
			check_fionread(&d, __LINE__, "FIONREAD");
		} else if (c < 920) {
			/* Packet mode on or off at one end (the write end's makes packets). */
			do_setfl(&d, __LINE__, rnd(4) ? 1 : 0, rnd(4) ? 0 : O_DIRECT);
		} else if (c < 955) {
			do_setsize(&d, __LINE__, (int)rnd(2), sizes[rnd(4)]);
		} else if (c < 970) {
			/*
			 * The slots in use, as a shrink sees them: the smallest
			 * size that is not EBUSY, then a random one again.
			 */
			for (int i = 0; i < 4; i++)
				if (do_setsize(&d, __LINE__, 1, sizes[i]) >= 0)
					break;
			do_setsize(&d, __LINE__, (int)rnd(2), sizes[rnd(4)]);
		} else if (c < 985) {
			drain(&d, __LINE__, rnd(2) ? MAXR : 1 + rnd(PG));
		} else {
			/* A full pipe: the last write takes what is left, the next none. */
			do_write(&d, __LINE__, MAXW);
			do_write(&d, __LINE__, 1 + rnd(PG));
		}
	}
	drain(&d, __LINE__, MAXR);
	printf("seed %llu: %lu steps, %llu bytes through; writes short %lu, EAGAIN %lu; "
	       "F_SETPIPE_SZ EBUSY %lu; %lu steps in packet mode\n", (unsigned long long)seed,
	       d.step, d.wpos, d.partial, d.eagain, d.ebusy, d.direct_steps);
	diff_close(&d);
}

static int random_ops(void)
{
	const char *se = getenv("SHARED_DIFF_SEED"), *st = getenv("SHARED_DIFF_STEPS");
	unsigned int steps = st ? (unsigned int)strtoul(st, NULL, 0) : 5000;

	if (se) {
		random_run(strtoull(se, NULL, 0), steps);
		return T_EXIT_PASS;
	}
	for (uint64_t seed = 1; seed <= 4; seed++)
		random_run(seed * 0x51ed, steps);
	return T_EXIT_PASS;
}

int main(void)
{
	static const struct t_subtest tests[] = {
		T_SUBTEST(fixed_layouts),
		T_SUBTEST(random_ops),
	};

	if (t_shared_missing())
		return t_skip("pp_pipe2(PP_O_SHARED) gives EINVAL: shared pagepipes are not built");
	return T_RUN_SUBTESTS(tests);
}
