#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh - run every benchmark in $B/bench/ in turn, then bench/cli.sh when
# it and the CLI ($B/pagepipe) both exist.  `make bench` calls this.
#
# Benchmarks print numbers and never judge them; the exit status is non-zero
# only when a benchmark could not run at all (it crashed or failed to set
# up), so a broken bench does not hide behind a table.  PP_BENCH_SECONDS
# sets the time per case (default 1), PP_BENCH_PIN the thread placement.

B=${B:-build}
cd "$(dirname "$0")/.." || exit 1

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "pagepipe benchmarks"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "kernel:  $(uname -srm)"
echo "cpu:     ${cpu:-unknown} x $(nproc) online"
# Other work on the machine moves these numbers more than anything measured.
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain -- src include 2>/dev/null)" ] && commit="$commit, src/ or include/ modified"
echo "commit:  $commit"
echo "seconds: ${PP_BENCH_SECONDS:-1} per case"

failed=0
shopt -s nullglob
for bin in "$B"/bench/*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	start=$SECONDS
	"$bin"
	rc=$?
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
	echo "[cli.sh: $((SECONDS - start)) s]"
	if [ $rc -ne 0 ]; then
		echo "cli.sh: exited with status $rc" >&2
		failed=1
	fi
fi

exit $failed
