// SPDX-License-Identifier: MIT
/*
 * pipe-idle.c - what an idle pipe costs once it has carried traffic:
 * 10,000 pagepipes against 10,000 kernel pipes, each of which carried one
 * 64 B message, or a full pipe's worth (64 KiB), was drained and is then
 * kept open.  Per pipe:
 *
 *   RSS   growth of this process's resident set (VmRSS, /proc/self/statm):
 *         where a pagepipe's memory is.  A kernel pipe's is the kernel's.
 *   Slab  growth of /proc/meminfo Slab.  It is what the issue asked for,
 *         but it is machine-wide (other processes add noise) and counts
 *         slab objects only: a kernel pipe's pipe_inode_info, its
 *         pipe_buffer array, inode, dentry and two struct files, not the
 *         page the pipe keeps for reuse after traffic (pipe->tmp_page, from
 *         the page allocator).
 *   kmem  growth of this process's memory cgroup's kernel memory (v1
 *         memory.kmem.usage_in_bytes, v2 memory.stat "kernel").  The
 *         kernel charges all of the above to the cgroup (the slab objects
 *         are accounted allocations, pipe pages are __GFP_ACCOUNT), and
 *         only this cgroup's work counts, so it is the better figure for a
 *         kernel pipe; "n/a" where no memory cgroup can be read.
 *   total RSS + kmem: what a pipe costs, whichever side holds it.
 *
 * The kernel rows need two descriptors per pipe: RLIMIT_NOFILE is raised
 * as far as the hard limit allows, and if that leaves room for fewer than
 * 10,000 pipes the row says how many it made (per-pipe figures still hold);
 * with room for fewer than half it is skipped, with a note.  Every run is a
 * forked child; each cell is the median of PP_BENCH_RUNS runs (default 5;
 * PP_BENCH_QUICK=1: 1 run of 1,000 pipes).  About 10 s with the defaults.
 */
#include "bench.h"

#include <sys/resource.h>

#define NPIPES		10000
#define NPIPES_QUICK	1000
#define MAX_RUNS	99

struct idle_res {
	int err;
	long pipes;
	double rss, slab, kmem;		/* bytes of growth, in all */
	bool have_slab, have_kmem;
};

/* ---------------------------------------------------------------------- */
/* Memory figures; each returns bytes, or -1 when it cannot be read. */

static double rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size, res;
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%ld %ld", &size, &res);
	fclose(f);
	return n == 2 ? (double)res * (double)sysconf(_SC_PAGESIZE) : -1;
}

/* The first number after "key" at the start of a line of path. */
static double file_field(const char *path, const char *key, double unit)
{
	char line[512];
	size_t klen = strlen(key);
	double v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen)) {
			v = strtod(line + klen, NULL) * unit;
			break;
		}
	}
	fclose(f);
	return v;
}

static double slab_bytes(void)
{
	return file_field("/proc/meminfo", "Slab:", 1024);
}

static char kmem_path[4096];
static bool kmem_v2;

/* Find this process's memory cgroup: v1 "N:memory:/path", else v2 "0::/path". */
static void kmem_find(void)
{
	char line[4096], v1[4096] = "", v2[4096] = "";
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':'), *q;

		line[strcspn(line, "\n")] = 0;
		if (!p || !(q = strchr(p + 1, ':')))
			continue;
		*q = 0;
		if (!strcmp(p + 1, "memory") || strstr(p + 1, ",memory") || strstr(p + 1, "memory,"))
			snprintf(v1, sizeof(v1), "%s", q + 1);
		else if (!strcmp(line, "0") && p + 1 == q)
			snprintf(v2, sizeof(v2), "%s", q + 1);
	}
	fclose(f);
	if (*v1) {
		snprintf(kmem_path, sizeof(kmem_path),
			 "/sys/fs/cgroup/memory%s/memory.kmem.usage_in_bytes",
			 strcmp(v1, "/") ? v1 : "");
		if (!access(kmem_path, R_OK))
			return;
	}
	if (*v2) {
		snprintf(kmem_path, sizeof(kmem_path), "/sys/fs/cgroup%s/memory.stat",
			 strcmp(v2, "/") ? v2 : "");
		kmem_v2 = true;
		if (!access(kmem_path, R_OK) && file_field(kmem_path, "kernel ", 1) >= 0)
			return;
	}
	kmem_path[0] = 0;
}

static double kmem_bytes(void)
{
	if (!kmem_path[0])
		return -1;
	if (kmem_v2)
		return file_field(kmem_path, "kernel ", 1);
	return file_field(kmem_path, "", 1);
}

/* ---------------------------------------------------------------------- */

struct idle_case {
	bool pp;
	size_t traffic;			/* bytes each pipe carries */
	long pipes;
};

static char traffic_buf[65536], sink_buf[65536];

/* Push len bytes through the pipe and drain it: 0 or an errno. */
static int carry(bool pp, struct pp_file **ends, int *fds, size_t len)
{
	size_t got = 0;
	ssize_t n;

	n = pp ? pp_write(ends[1], traffic_buf, len) : write(fds[1], traffic_buf, len);
	if (n != (ssize_t)len)
		return n < 0 ? errno : EIO;
	while (got < len) {
		n = pp ? pp_read(ends[0], sink_buf, sizeof(sink_buf))
		       : read(fds[0], sink_buf, sizeof(sink_buf));
		if (n <= 0)
			return n < 0 ? errno : EIO;
		got += (size_t)n;
	}
	return 0;
}

static struct idle_res idle_child(const struct idle_case *c)
{
	struct idle_res r = { 0 };
	struct pp_file **ends = NULL;
	int *fds = NULL;
	double rss0, slab0, kmem0, v;

	/*
	 * Allocate and touch the arrays and buffers now, so that their pages
	 * are not counted as the pipes' (not with zeros: calloc, or a
	 * compiler that makes malloc + memset(0) into calloc, touches none).
	 */
	if (c->pp)
		ends = malloc((size_t)c->pipes * 2 * sizeof(*ends));
	else
		fds = malloc((size_t)c->pipes * 2 * sizeof(*fds));
	if (!ends && !fds) {
		r.err = ENOMEM;
		return r;
	}
	memset(ends ? (void *)ends : (void *)fds, 0xff,
	       (size_t)c->pipes * 2 * (ends ? sizeof(*ends) : sizeof(*fds)));
	memset(traffic_buf, 0x5a, sizeof(traffic_buf));
	memset(sink_buf, 0xa5, sizeof(sink_buf));
	rss0 = rss_bytes();
	slab0 = slab_bytes();
	kmem0 = kmem_bytes();
	for (r.pipes = 0; r.pipes < c->pipes; r.pipes++) {
		struct pp_file **e = ends ? ends + 2 * r.pipes : NULL;
		int *fd = fds ? fds + 2 * r.pipes : NULL;

		if (c->pp ? pp_pipe2(e, 0) : pipe2(fd, 0)) {
			r.err = errno;
			break;
		}
		r.err = carry(c->pp, e, fd, c->traffic);
		if (r.err)
			break;
	}
	r.rss = rss_bytes() - rss0;
	v = slab_bytes();
	r.have_slab = v >= 0 && slab0 >= 0;
	r.slab = v - slab0;
	v = kmem_bytes();
	r.have_kmem = v >= 0 && kmem0 >= 0;
	r.kmem = v - kmem0;
	/* Leave the pipes to _exit(): closing 20,000 descriptors is not the point. */
	return r;
}

static struct idle_res idle_fork(const struct idle_case *c)
{
	struct idle_res r = { .err = 0 };
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	fflush(NULL);
	if (pipe(fds)) {
		r.err = errno;
		return r;
	}
	pid = fork();
	if (pid < 0) {
		r.err = errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (!pid) {
		close(fds[0]);
		alarm(120);
		r = idle_child(c);
		n = write(fds[1], &r, sizeof(r));
		_exit(n == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(fds[1]);
	do {
		n = read(fds[0], &r, sizeof(r));
	} while (n < 0 && errno == EINTR);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(r)) {
		memset(&r, 0, sizeof(r));
		r.err = ECHILD;
	}
	return r;
}

/* ---------------------------------------------------------------------- */

struct row {
	struct idle_case c;
	double rss[MAX_RUNS], slab[MAX_RUNS], kmem[MAX_RUNS];
	unsigned int n;
	long pipes;
	int err;
	bool have_slab, have_kmem;
	const char *skip;		/* why this row did not run */
};

static const char *kib(char *buf, size_t sz, double *v, unsigned int n, bool have, long pipes)
{
	if (!have || !n || pipes <= 0)
		snprintf(buf, sz, "n/a");
	else
		snprintf(buf, sz, "%.2f", bench_median(v, n) / 1024 / (double)pipes);
	return buf;
}

/*
 * How many kernel pipes fit in the descriptor limit, raised as far as it
 * goes; sets *why when that is fewer than half of want.
 */
static long kernel_pipes(long want, const char **why, long *limit)
{
	struct rlimit rl;
	long room;
	int probe;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return *why = "getrlimit failed", 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)(2 * want + 64)) {
		/* Only with CAP_SYS_RESOURCE; the soft limit below either way. */
		struct rlimit up = { 2 * want + 64, 2 * want + 64 };

		if (!setrlimit(RLIMIT_NOFILE, &up))
			rl = up;
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	*limit = rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
	/* The lowest free descriptor: all below it are taken (stdio and such). */
	probe = dup(0);
	if (probe >= 0)
		close(probe);
	room = rl.rlim_cur == RLIM_INFINITY ? want
	     : ((long)rl.rlim_cur - (probe < 0 ? 16 : probe) - 8) / 2;
	if (room < want / 2)
		*why = "RLIMIT_NOFILE cannot reach two descriptors per pipe";
	return room < want ? room : want;
}

int main(void)
{
	static const size_t traffic[] = { 64, 65536 };
	long want = bench_quick() ? NPIPES_QUICK : NPIPES, klimit = 0, kn;
	unsigned int runs = bench_runs();
	const char *kwhy = NULL;
	struct row rows[4];
	char a[32], b[32], c[32], d[32], e[32];

	kmem_find();
	kn = kernel_pipes(want, &kwhy, &klimit);
	for (int i = 0; i < 4; i++) {
		memset(&rows[i], 0, sizeof(rows[i]));
		rows[i].c = (struct idle_case){ .pp = i & 1, .traffic = traffic[i / 2],
						.pipes = i & 1 ? want : kn };
		rows[i].have_slab = rows[i].have_kmem = true;
		if (!(i & 1) && kwhy)
			rows[i].skip = kwhy;
	}
	for (unsigned int run = 0; run < runs; run++) {
		for (int i = 0; i < 4; i++) {
			struct row *r = &rows[i];
			struct idle_res res;

			if (r->skip || r->err)
				continue;
			res = idle_fork(&r->c);
			if (res.err) {
				r->err = res.err;
				continue;
			}
			r->pipes = res.pipes;
			r->rss[r->n] = res.rss;
			r->slab[r->n] = res.slab;
			r->kmem[r->n] = res.kmem;
			r->have_slab &= res.have_slab;
			r->have_kmem &= res.have_kmem;
			r->n++;
		}
	}

	printf("\n## pipe-idle: idle pipes that carried traffic, memory per pipe\n\n");
	printf("KiB per pipe, median of %u run%s; RSS: this process's resident set; Slab: "
	       "/proc/meminfo (machine-wide, slab objects only); kmem: this memory cgroup's "
	       "kernel memory (%s); total = RSS + kmem\n\n", runs, runs == 1 ? "" : "s",
	       kmem_path[0] ? kmem_path : "no memory cgroup found: n/a");
	printf("| pipe | traffic each | pipes | RSS | Slab | kmem | total |\n");
	printf("|------|-------------:|------:|----:|-----:|-----:|------:|\n");
	for (int i = 0; i < 4; i++) {
		struct row *r = &rows[i];
		const char *name = r->c.pp ? "pagepipe" : "kernel";
		double tot[MAX_RUNS];

		bench_fmt_size(a, sizeof(a), r->c.traffic);
		if (r->skip || r->err) {
			printf("| %s | %s | - | n/a (%s) | | | |\n", name, a,
			       r->skip ? r->skip : bench_errname(r->err));
			continue;
		}
		for (unsigned int k = 0; k < r->n; k++)
			tot[k] = r->rss[k] + r->kmem[k];
		printf("| %s | %s | %ld | %s | %s | %s | %s |\n", name, a, r->pipes,
		       kib(b, sizeof(b), r->rss, r->n, true, r->pipes),
		       kib(c, sizeof(c), r->slab, r->n, r->have_slab, r->pipes),
		       kib(d, sizeof(d), r->kmem, r->n, r->have_kmem, r->pipes),
		       kib(e, sizeof(e), tot, r->n, r->have_kmem, r->pipes));
	}
	if (!kwhy && kn < want)
		printf("\nkernel rows: %ld pipes, as RLIMIT_NOFILE (%ld) allows no more\n", kn, klimit);
	if (kwhy)
		printf("\nkernel rows skipped: %s (%ld)\n", kwhy, klimit);
	if (geteuid())
		printf("\nnot root: past fs.pipe-user-pages-soft the kernel gives a user's new pipes "
		       "2 slots, not 16, which changes their cost\n");
	return 0;
}
