#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run each test program under a timeout; report pass, fail, skip or timeout
# per test and end with the line "N passed, N failed, N skipped".
# TEST_TIMEOUT (seconds, default 120) and TEST_WRAP (e.g. "valgrind -q")
# adjust the run; TAP=1 prints TAP lines as well.
set -u
timeout_s=${TEST_TIMEOUT:-120}
wrap=${TEST_WRAP:-}
pass=0 fail=0 skip=0 n=0
failed=()
for t in "$@"; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	n=$((n + 1))
	log=$(mktemp)
	start=$(date +%s%N)
	# shellcheck disable=SC2086
	timeout -k 5 "$timeout_s" $wrap "$t" >"$log" 2>&1 </dev/null
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	secs=$((ms / 1000)).$(((ms % 1000) / 100))
	case $rc in
	0)   pass=$((pass + 1)); printf 'PASS %-36s %6ss\n' "$name" "$secs"
	     [ -n "${TAP:-}" ] && echo "ok $n - $name";;
	77)  skip=$((skip + 1)); printf 'SKIP %-36s %s\n' "$name" "$(tail -n 1 "$log")"
	     [ -n "${TAP:-}" ] && echo "ok $n - $name # SKIP $(tail -n 1 "$log")";;
	124|137) fail=$((fail + 1)); failed+=("$name"); printf 'TIME %-36s (over %ss)\n' "$name" "$timeout_s"
	     sed 's/^/    /' "$log" | tail -n 20
	     [ -n "${TAP:-}" ] && echo "not ok $n - $name # timeout";;
	*)   fail=$((fail + 1)); failed+=("$name"); printf 'FAIL %-36s (exit %d)\n' "$name" "$rc"
	     sed 's/^/    /' "$log" | tail -n 30
	     [ -n "${TAP:-}" ] && echo "not ok $n - $name";;
	esac
	rm -f "$log"
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$n" -gt 0 ]
