// SPDX-License-Identifier: MIT
/*
 * main.c - the pagepipe command: cat, tee, copy, buffer, relay, send and recv on
 * libpagepipe.  This file dispatches to the commands (one file each) and
 * holds what they share about options and messages.
 *
 * Exit codes are coreutils': 0 success, 1 failure, 2 bad usage.  SIGPIPE
 * is ignored so that every write reports EPIPE, and a reader that goes
 * away then ends the command as it ends cat (see exit_epipe).
 */
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *prog = "pagepipe";
static bool sigpipe_was_default;

void warnx(const char *fmt, ...)
{
	va_list ap;

	progress_message_begin();
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	progress_message_end();
}

void warn_err(int err, const char *what)
{
	warnx("%s: %s", what, strerror(err));
}

void sigpipe_setup(void)
{
	struct sigaction old, sa = { .sa_handler = SIG_IGN };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	sigpipe_was_default = old.sa_handler == SIG_DFL;
}

bool sigpipe_default(void)
{
	return sigpipe_was_default;
}

/*
 * cat dies of SIGPIPE when its reader goes away: no message, and the
 * status the shell expects (141, which `set -o pipefail` scripts already
 * allow for cat).  Do the same; where SIGPIPE came in ignored, cat's
 * write fails with EPIPE and it says so and exits 1: do that too.
 */
void exit_epipe(void)
{
	if (sigpipe_was_default) {
		sigset_t set;

		progress_end_line();
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
		raise(SIGPIPE);
	}
	warn_err(EPIPE, "write error");
	exit(EXIT_FAIL);
}

/* Sizes: a number with an optional K, M, G or T (powers of 1024), "iB" or "B". */
int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -errno;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	case 'B':
		if (end[1])
			return -EINVAL;
		*out = v;
		return 0;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

/*
 * buffer --size: a size from 4K to the library's largest pipe (2^40), or
 * a whole percentage of physical memory, as mbuffer -m 10%.  Like mbuffer,
 * at most 90%: the rest of the system must go on.
 */
int parse_buffer_size(const char *s, uint64_t *out)
{
	size_t len = s ? strlen(s) : 0;

	if (len > 1 && s[len - 1] == '%') {
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		unsigned long pct;
		char *end;

		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		pct = strtoul(s, &end, 10);
		if (end != s + len - 1 || pct < 1 || pct > 90 || pages <= 0 || page <= 0)
			return -EINVAL;
		*out = (uint64_t)pages * (uint64_t)page / 100 * pct;
	} else if (parse_size(s, out)) {
		return -EINVAL;
	}
	return *out >= 4096 && *out <= BUFFER_MAX ? 0 : -ERANGE;
}

/* ---------------------------------------------------------------------- */

void try_help(void)
{
	fprintf(stderr, "Try '%s --help' for more information.\n", prog);
}

int check_operands(int argc, char **argv, int first, int want)
{
	if (argc - first == want)
		return 0;
	if (argc - first < want)
		warnx("missing operand");
	else
		warnx("extra operand '%s'", argv[first + want]);
	try_help();
	return -1;
}

static const char usage_main[] =
	"Usage: pagepipe COMMAND [OPTION]... [ARG]...\n"
	"Zero-copy plumbing on libpagepipe: pipes made of page references.\n"
	"\n"
	"Commands:\n"
	"  cat [--prefix TEXT] [--bytes N] [FILE]...  concatenate FILEs to standard output\n"
	"  tee [-a] [-i] [-p] [FILE]...               copy standard input to FILEs and output\n"
	"  copy SRC DST                               copy SRC to DST ('-' is stdin/stdout)\n"
	"  buffer [--size SIZE]                       buffer standard input in memory\n"
	"  relay LISTEN TARGET                        relay TCP connections (HOST:PORT)\n"
	"  send [--size SIZE] SOCKET                  standard input to a 'recv' at SOCKET\n"
	"  recv SOCKET                                what a 'send' sends, to standard output\n"
	"\n"
	"Options for every command:\n"
	"      --progress     show bytes, rate and ETA on standard error\n"
	"      --no-progress  do not\n"
	"      --help         display help and exit\n"
	"      --version      output version information and exit\n"
	"\n"
	"'pagepipe COMMAND --help' or 'pagepipe help COMMAND' describes one command;\n"
	"see also pagepipe(1).\n"
	"Exit status: 0 success, 1 failure, 2 bad usage.\n";

/* tee --output-error[=MODE]: GNU tee's modes; no MODE is warn-nopipe. */
static int parse_output_error(const char *mode)
{
	static const char *const modes[] = {
		[OUTPUT_ERROR_WARN] = "warn",
		[OUTPUT_ERROR_WARN_NOPIPE] = "warn-nopipe",
		[OUTPUT_ERROR_EXIT] = "exit",
		[OUTPUT_ERROR_EXIT_NOPIPE] = "exit-nopipe",
	};

	if (!mode)
		return OUTPUT_ERROR_WARN_NOPIPE;
	for (int i = OUTPUT_ERROR_WARN; i <= OUTPUT_ERROR_EXIT_NOPIPE; i++)
		if (!strcmp(mode, modes[i]))
			return i;
	warnx("invalid argument '%s' for '--output-error'", mode);
	fputs("Valid arguments are:\n  - 'warn'\n  - 'warn-nopipe'\n  - 'exit'\n"
	      "  - 'exit-nopipe'\n", stderr);
	try_help();
	return -1;
}

static void version(void)
{
	printf("pagepipe %s (libpagepipe %s)\n", PAGEPIPE_VERSION, PAGEPIPE_VERSION);
}

/*
 * Options may follow operands, as with GNU getopt, unless POSIXLY_CORRECT
 * is set: the commands' option strings have no leading '+'.
 */
int parse_opts(int argc, char **argv, const char *shortopts,
		      const struct option *extra, const char *usage, struct opts *o)
{
	struct option all[16];
	static const struct option common[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
		{ "version", no_argument, NULL, OPT_VERSION },
	};
	size_t n = 0;
	int c;

	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		all[n++] = common[i];
	for (; extra && extra->name; extra++)
		all[n++] = *extra;
	memset(&all[n], 0, sizeof(all[n]));

	optind = 1;
	opterr = 1;
	while ((c = getopt_long(argc, argv, shortopts, all, NULL)) != -1) {
		uint64_t v;

		switch (c) {
		case OPT_HELP:
			fputs(usage, stdout);
			return -2;
		case OPT_VERSION:
			version();
			return -2;
		case OPT_PROGRESS:
			o->progress = PROGRESS_ON;
			break;
		case OPT_NO_PROGRESS:
			o->progress = PROGRESS_OFF;
			break;
		case OPT_PREFIX:
			o->prefix = optarg;
			break;
		case OPT_BYTES:
			if (parse_size(optarg, &v)) {
				warnx("invalid number of bytes: '%s'", optarg);
				try_help();
				return -1;
			}
			o->bytes = v;
			o->have_bytes = true;
			break;
		case 'a':
			o->append = true;
			break;
		case 'p':
			o->output_error = OUTPUT_ERROR_WARN_NOPIPE;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'i':
			o->ignore_interrupts = true;
			break;
		case OPT_OUTPUT_ERROR:
			o->output_error = parse_output_error(optarg);
			if (o->output_error < 0)
				return -1;
			break;
		case 'T': {
			/* Seconds, as socat -T: a decimal number above 0. */
			char *end;
			double t;

			errno = 0;
			t = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(t > 0) || t > 1e9 ||
			    (uint64_t)(t * 1000) == 0) {
				warnx("invalid timeout: '%s' (seconds, above 0)", optarg);
				try_help();
				return -1;
			}
			o->timeout_ms = (uint64_t)(t * 1000);
			break;
		}
		case OPT_MAX_CONNS: {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (!isdigit((unsigned char)*optarg) || errno || *end || !v) {
				warnx("invalid connection limit: '%s' (a whole number above 0)",
				      optarg);
				try_help();
				return -1;
			}
			o->max_conns = v;
			break;
		}
		case 'j': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (!isdigit((unsigned char)*optarg) || errno || *end || !v || v > 256) {
				warnx("invalid number of threads: '%s' (1 to 256)", optarg);
				try_help();
				return -1;
			}
			o->threads = (unsigned int)v;
			break;
		}
		case 'u':
			/* cat -u: POSIX's unbuffered output, which every write here is. */
			break;
		case 's':
			if (parse_buffer_size(optarg, &v) || (o->size_max && v > o->size_max)) {
				if (o->size_max)
					warnx("invalid pagepipe size: '%s' (%s)", optarg, o->size_range);
				else
					warnx("invalid buffer size: '%s' (4K to 1T, or 1%% to 90%% of memory)",
					      optarg);
				try_help();
				return -1;
			}
			o->size = v;
			break;
		default:
			try_help();
			return -1;
		}
	}
	return optind;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "cat", cmd_cat },
	{ "tee", cmd_tee },
	{ "copy", cmd_copy },
	{ "buffer", cmd_buffer },
	{ "relay", cmd_relay },
	{ "send", cmd_send },
	{ "recv", cmd_recv },
};

int main(int argc, char **argv)
{
	static char name[64];
	const char *cmd;

	sigpipe_setup();
	if (argc < 2) {
		fputs("Usage: pagepipe COMMAND [OPTION]... [ARG]...\n", stderr);
		try_help();
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		fputs(usage_main, stdout);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
		version();
		return EXIT_OK;
	}
	if (!strcmp(cmd, "help") && argc == 2) {
		fputs(usage_main, stdout);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "help")) {
		static char *help[4];

		help[0] = argv[0];
		help[1] = argv[2];
		help[2] = "--help";
		argc = 3;
		argv = help;
		cmd = argv[1];
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(cmd, commands[i].name))
			continue;
		snprintf(name, sizeof(name), "pagepipe %s", cmd);
		prog = name;
		argv[1] = name;
		return commands[i].fn(argc - 1, argv + 1);
	}
	if (cmd[0] == '-')
		warnx("unrecognized option '%s'", cmd);
	else
		warnx("unknown command '%s'", cmd);
	try_help();
	return EXIT_USAGE;
}
