/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what the libFuzzer targets (test/fuzz-*.c) share: the decoder
 * that turns the input into numbers, the kernel-versus-pagepipe result
 * comparison, and the descriptor-leak probe.  Header-only: the targets are
 * built by mk/fuzz.mk without test/helpers.c.
 *
 * A target defines FUZZ_NAME ("fuzz-ops") before including this; messages
 * start with it.  FUZZ_TRACE=1 in the environment (the target sets trace
 * from it) prints every compared call, for reading a reproducer.
 */
#ifndef PP_TEST_FUZZ_H
#define PP_TEST_FUZZ_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz.h"
#endif

static bool trace;

/* The input, read front to back; past its end every byte is 0. */
struct cursor {
	const uint8_t *p;
	size_t n;
};

static inline unsigned int u8(struct cursor *c)
{
	if (!c->n)
		return 0;
	c->n--;
	return *c->p++;
}

static inline unsigned int u16(struct cursor *c)
{
	return u8(c) | u8(c) << 8;
}

/*
 * A byte count from one to three bytes: the top two bits of the first
 * choose 0..63, one of the nspecial boundary values, up to 16383, or
 * anything up to max.
 */
static inline size_t fuzz_size(struct cursor *c, const size_t *special, size_t nspecial,
			       size_t max)
{
	unsigned int b = u8(c);

	switch (b >> 6) {
	case 0:
		return b & 63;
	case 1:
		return special[(b & 63) % nspecial];
	case 2:
		return (size_t)(b & 63) << 8 | u8(c);
	default:
		return ((size_t)(b & 63) << 16 | u16(c)) % (max + 1);
	}
}

/* A call's result and, when it failed, its errno. */
struct res {
	long long ret;
	int err;
};

#define CALL(call) ({ errno = 0; long long _r = (long long)(call); \
	(struct res){ _r, _r < 0 ? errno : 0 }; })

/* Report a difference and abort(), so that libFuzzer keeps the input. */
static inline void __attribute__((noreturn, format(printf, 2, 3)))
fuzz_mismatch(unsigned int op, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, FUZZ_NAME ": op %u: ", op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* A target's state has an op member, the operation number. */
#define mismatch(s, ...)	fuzz_mismatch((s)->op, __VA_ARGS__)

/* The kernel's result k and the pagepipe's p must match when cmp is set. */
static inline void fuzz_same(unsigned int op, bool cmp, const char *what,
			     struct res k, struct res p)
{
	if (trace)
		fprintf(stderr, "%s: op %u: %s: kernel %lld (%s), pagepipe %lld (%s)%s\n",
			FUZZ_NAME, op, what, k.ret, k.err ? strerror(k.err) : "ok", p.ret,
			p.err ? strerror(p.err) : "ok", cmp ? "" : " [not compared]");
	if (!cmp)
		return;
	if (k.ret != p.ret || k.err != p.err)
		fuzz_mismatch(op, "%s: kernel %lld (%s), pagepipe %lld (%s)", what,
			      k.ret, k.err ? strerror(k.err) : "ok",
			      p.ret, p.err ? strerror(p.err) : "ok");
}

/* The n bytes each side read must match when cmp is set. */
static inline void fuzz_same_bytes(unsigned int op, bool cmp, const char *what,
				   const unsigned char *kbuf, const unsigned char *pbuf,
				   long long n)
{
	if (!cmp || n <= 0 || memcmp(kbuf, pbuf, (size_t)n) == 0)
		return;
	for (long long i = 0; i < n; i++)
		if (kbuf[i] != pbuf[i])
			fuzz_mismatch(op, "%s: byte %lld of %lld: kernel 0x%02x, pagepipe 0x%02x",
				      what, i, n, kbuf[i], pbuf[i]);
}

/*
 * The lowest free descriptor number: the same before and after an input,
 * or the library leaked a descriptor (libFuzzer opens its own between
 * inputs, so this is measured per input).
 */
static inline int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		abort();
	close(fd);
	return fd;
}

#endif /* PP_TEST_FUZZ_H */
