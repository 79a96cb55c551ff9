#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh - run every benchmark in $B/bench/ in turn, then bench/cli.sh and
# bench/relay.sh when they and the CLI ($B/pagepipe) exist.  `make bench`
# calls this.
#
# Benchmarks print numbers and never judge them; the exit status is non-zero
# only when a benchmark could not run at all (it crashed or failed to set
# up), so a broken bench does not hide behind a table.  The output is
# Markdown: the tables paste as they are into a note.
#
# Knobs (environment), read by the benchmarks themselves:
#   PP_BENCH_RUNS=N      runs per cell, the median shown: pipe-threads,
#                        pipe-procs and pipe-idle default 5, cli.sh 3
#   PP_BENCH_SECONDS=S   seconds per run (pipe-threads and pipe-procs,
#                        default 0.2) or per case (splice-file, default 1)
#   PP_BENCH_QUICK=1     smoke run: 1 run of 0.05 s per case, 1,000 idle
#                        pipes, a smaller file for cli.sh; shows that
#                        everything runs, measures nothing
#   cli.sh and splice-file have more (PP_BENCH_DIR, PP_BENCH_MB...): see
#   the top of each
#   PP_BENCH_PIN=split|same|none   one thread (pipe-procs: process) layout
#                        only (default: both where there are two CPUs)
# With the defaults the whole run takes about 3.5 minutes on 2 CPUs (about
# 1.2 of them pipe-threads, 1 pipe-procs); PP_BENCH_QUICK=1 about half a
# minute.

B=${B:-build}
cd "$(dirname "$0")/.." || exit 1

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "# pagepipe benchmarks"
echo
echo "- date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- kernel:  $(uname -srm)"
echo "- cpu:     ${cpu:-unknown} x $(nproc) online"
# Other work on the machine moves these numbers more than anything measured.
echo "- load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain -- src include 2>/dev/null)" ] && commit="$commit, src/ or include/ modified"
echo "- commit:  $commit"
echo "- knobs:   PP_BENCH_RUNS=${PP_BENCH_RUNS:-default} PP_BENCH_SECONDS=${PP_BENCH_SECONDS:-default}" \
	"PP_BENCH_QUICK=${PP_BENCH_QUICK:-0} PP_BENCH_PIN=${PP_BENCH_PIN:-both}"

failed=0
shopt -s nullglob
for bin in "$B"/bench/*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	# Helpers that bench/relay.sh runs, not benchmarks.
	case $(basename "$bin") in relay-peer | splice-relay) continue ;; esac
	start=$SECONDS
	"$bin"
	rc=$?
	echo
	echo "[$(basename "$bin"): $((SECONDS - start)) s]"
	if [ $rc -ne 0 ]; then
		echo "$(basename "$bin"): exited with status $rc" >&2
		failed=1
	fi
done

if [ -x "$B/pagepipe" ] && [ -f bench/cli.sh ]; then
	start=$SECONDS
	B=$B bash bench/cli.sh
	rc=$?
	echo
	echo "[cli.sh: $((SECONDS - start)) s]"
	if [ $rc -ne 0 ]; then
		echo "cli.sh: exited with status $rc" >&2
		failed=1
	fi
fi

if [ -x "$B/pagepipe" ] && [ -f bench/relay.sh ]; then
	start=$SECONDS
	B=$B bash bench/relay.sh
	rc=$?
	echo
	echo "[relay.sh: $((SECONDS - start)) s]"
	if [ $rc -ne 0 ]; then
		echo "relay.sh: exited with status $rc" >&2
		failed=1
	fi
fi

exit $failed
