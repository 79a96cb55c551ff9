// SPDX-License-Identifier: MIT
/*
 * Description: libFuzzer target for the pagepipe command's argument
 * parsing: parse_opts() with each subcommand's option table, and
 * parse_size() on every argument (tools/tool.h).  The input is a
 * subcommand number and then NUL-separated arguments.
 *
 * Checked: no crash or sanitizer report; parse_opts() returns -2 (--help),
 * -1 (usage error) or the index of the first operand, 1..argc; a size it
 * accepted for -s is within 4K..BUFFER_MAX (2^40); parse_size() accepts only a number
 * with an optional K/M/G/T, KiB/KB or B suffix, and the value it gives
 * is the number times the unit, without overflow.
 *
 * mk/fuzz.mk builds this only when tools/ provides parse_opts() and
 * parse_size(), and links the tools/ sources with main renamed.  Messages the
 * parser prints go to /dev/null unless FUZZ_TRACE is set.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define MAX_ARGS	24

/* The option tables of tools/{cat,copy,tee,buffer,relay}.c, as they stand. */
struct cmd {
	const char *name, *shortopts;
	struct option longopts[4];
};

static const struct cmd cmds[] = {
	{ "cat", "u", {
		{ "prefix", required_argument, NULL, OPT_PREFIX },
		{ "bytes", required_argument, NULL, OPT_BYTES },
		{ NULL, 0, NULL, 0 } } },
	{ "copy", "", { { NULL, 0, NULL, 0 } } },
	{ "tee", "aip", {
		{ "append", no_argument, NULL, 'a' },
		{ "ignore-interrupts", no_argument, NULL, 'i' },
		{ "output-error", optional_argument, NULL, OPT_OUTPUT_ERROR },
		{ NULL, 0, NULL, 0 } } },
	{ "buffer", "s:", {
		{ "size", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 } } },
	{ "relay", "v", {
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 } } },
};

static bool trace;
static int devnull = -1;

/* A reference parse_size(): digits, then nothing, B, or K/M/G/T with optional iB/B. */
static int ref_parse_size(const char *s, uint64_t *out)
{
	unsigned __int128 v = 0;
	unsigned int shift = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > UINT64_MAX)
			return -ERANGE;
	}
	switch (toupper((unsigned char)*p)) {
	case '\0':
		*out = (uint64_t)v;
		return 0;
	case 'B':
		if (p[1])
			return -EINVAL;
		*out = (uint64_t)v;
		return 0;
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	default:
		return -EINVAL;
	}
	p++;
	if (*p && strcasecmp(p, "iB") && strcasecmp(p, "B"))
		return -EINVAL;
	if (v << shift > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)(v << shift);
	return 0;
}

static void check_size(const char *arg)
{
	uint64_t got = 0x5a5a, want = 0xa5a5;
	int r = parse_size(arg, &got), w = ref_parse_size(arg, &want);

	if (trace)
		fprintf(stderr, "fuzz-cli: parse_size(\"%s\") = %d, %llu\n", arg, r,
			(unsigned long long)got);
	/* The two may name a different error; they must agree on accepting. */
	if ((r == 0) != (w == 0) || (r == 0 && got != want)) {
		fprintf(stderr, "fuzz-cli: parse_size(\"%s\"): %d value %llu, expected %d value %llu\n",
			arg, r, (unsigned long long)got, w, (unsigned long long)want);
		abort();
	}
}

/* glibc keeps a pointer into the previous argv unless getopt starts afresh. */
static void reset_getopt(void)
{
	static char *none[] = { "x", NULL };

	optind = 0;
	opterr = 0;
	getopt(1, none, "");
	optind = 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc; (void)argv;
	trace = getenv("FUZZ_TRACE") != NULL;
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull < 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct cmd *cmd;
	char *copy, *argv[MAX_ARGS + 2];
	int argc = 0, r, saved_out = -1, saved_err = -1;
	struct opts o = { .progress = PROGRESS_OFF, .size = 16u << 20 };

	if (size < 1)
		return 0;
	cmd = &cmds[data[0] % (sizeof(cmds) / sizeof(cmds[0]))];
	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	copy[size - 1] = '\0';

	argv[argc++] = (char *)cmd->name;
	for (size_t i = 0; i < size - 1 && argc <= MAX_ARGS; ) {
		argv[argc++] = copy + i;
		i += strlen(copy + i) + 1;
	}
	argv[argc] = NULL;

	for (int i = 1; i < argc; i++)
		check_size(argv[i]);

	if (!trace) {
		fflush(stdout);
		fflush(stderr);
		saved_out = dup(STDOUT_FILENO);
		saved_err = dup(STDERR_FILENO);
		dup2(devnull, STDOUT_FILENO);
		dup2(devnull, STDERR_FILENO);
	}
	reset_getopt();
	prog = cmd->name;
	r = parse_opts(argc, argv, cmd->shortopts, cmd->longopts, "usage\n", &o);
	if (!trace) {
		fflush(stdout);
		fflush(stderr);
		dup2(saved_out, STDOUT_FILENO);
		dup2(saved_err, STDERR_FILENO);
		close(saved_out);
		close(saved_err);
	}
	if (trace)
		fprintf(stderr, "fuzz-cli: %s: parse_opts = %d\n", cmd->name, r);
	if (r != -1 && r != -2 && (r < 1 || r > argc)) {
		fprintf(stderr, "fuzz-cli: %s: parse_opts returned %d for %d arguments\n",
			cmd->name, r, argc);
		abort();
	}
	if (r >= 0 && (o.size < 4096 || o.size > BUFFER_MAX)) {
		fprintf(stderr, "fuzz-cli: %s: accepted a buffer size of %llu\n",
			cmd->name, (unsigned long long)o.size);
		abort();
	}
	reset_getopt();
	free(copy);
	return 0;
}
