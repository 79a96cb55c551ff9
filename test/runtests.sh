#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run each test program under a timeout; report pass, fail, skip or timeout
# per test and end with the line "N passed, N failed, N skipped".
#
# Arguments are compiled test programs and shell tests (*.sh).  Environment:
#   TEST_TIMEOUT  seconds per test (default 120)
#   TEST_WRAP     a command put in front of each compiled test, e.g.
#                 "valgrind -q --error-exitcode=99".  Shell tests are never
#                 wrapped: they drive the CLI and other real programs
#                 (socat, tmux, curl...), and a memory checker around bash
#                 checks bash, not pagepipe.
#   TEST_SKIP     space-separated shell patterns of test names to leave out
#                 (reported as SKIP), e.g. "stress-* *.sh"
#   TAP=1         print TAP lines as well
set -u
timeout_s=${TEST_TIMEOUT:-120}
wrap=${TEST_WRAP:-}
skip_pats=${TEST_SKIP:-}
pass=0 fail=0 skip=0 n=0
failed=()

skipped_by_pattern() {
	local name=$1 pat hit=1
	set -f	# the patterns are matched against names, not expanded as paths
	for pat in $skip_pats; do
		# shellcheck disable=SC2053
		[[ $name == $pat ]] && { hit=0; break; }
	done
	set +f
	return $hit
}

for t in "$@"; do
	name=$(basename "$t")
	case $name in
	*.sh) [ -f "$t" ] || continue; cmd=(bash "$t");;
	*)    [ -x "$t" ] || continue
	      # shellcheck disable=SC2206
	      cmd=($wrap "$t");;
	esac
	n=$((n + 1))
	if [ -n "$skip_pats" ] && skipped_by_pattern "$name"; then
		skip=$((skip + 1)); printf 'SKIP %-36s %s\n' "$name" "excluded by TEST_SKIP"
		[ -n "${TAP:-}" ] && echo "ok $n - $name # SKIP excluded by TEST_SKIP"
		continue
	fi
	log=$(mktemp)
	start=$(date +%s%N)
	timeout -k 5 "$timeout_s" "${cmd[@]}" >"$log" 2>&1 </dev/null
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
