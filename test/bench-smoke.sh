#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: the thread and process benchmarks run in their smoke mode
# (PP_BENCH_QUICK=1: one run of 0.05 s a cell) and every cell comes out a
# figure.  Their traffic is what no other test makes in one place: four
# writers into one reader and one into four, 64 B to 1 MiB messages
# through the handoff and the pull, both layouts, pipes shared between
# processes; and every message carries a sequence number the reader
# checks.  A pipe that loses, tears, doubles or reorders a message there
# prints "n/a (EBADMSG)" or "n/a (EIO)" in its cell, a crash "n/a
# (ECHILD)", a hang "n/a" after the bench's watchdog: this test fails on any
# "n/a", on a sanitizer report and on a non-zero exit.  Timings are
# printed, never judged.
set -u
B=${B:-build}
T=$(mktemp -d /tmp/pp-bench-smoke.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0

for b in pipe-threads pipe-procs; do
	bin="$B/bench/$b"
	[ -x "$bin" ] || { echo "no $bin: build with make benches"; exit 77; }
	PP_BENCH_QUICK=1 "$bin" >"$T/$b.out" 2>"$T/$b.err"
	rc=$?
	cat "$T/$b.out"
	if [ "$rc" != 0 ]; then
		echo "FAIL: $b exited $rc: $(head -c 500 "$T/$b.err")"
		fails=$((fails + 1))
	fi
	# Sanitizer reports from the forked runs go to stderr, not to a cell.
	if grep -Eq 'Sanitizer|runtime error' "$T/$b.err"; then
		echo "FAIL: $b: a sanitizer report:"
		head -c 3000 "$T/$b.err"
		fails=$((fails + 1))
	fi
	if grep -n '^|.*n/a' "$T/$b.out"; then
		echo "FAIL: $b: a cell above is n/a (its error names the failed check)"
		fails=$((fails + 1))
	fi
	# A table that printed no row at all would pass the two checks above.
	rows=$(grep -c '^| [0-9]' "$T/$b.out")
	if [ "$rows" -lt 4 ]; then
		echo "FAIL: $b printed $rows table rows"
		fails=$((fails + 1))
	fi
done
# Again at the end, with the cells named: the runner shows a failed
# test's last lines only, and the tables come before.
if [ "$fails" != 0 ]; then
	echo "bench-smoke: $fails failed check(s):"
	grep -n '^|.*n/a' "$T"/*.out
	grep -h -m3 -E 'Sanitizer|runtime error' "$T"/*.err
	exit 1
fi
exit 0
