#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: a reader that exits early (| head -c 10) stops pagepipe cat,
# tee, copy and buffer quietly and at once, as it stops cat: no message,
# and the status cat has (141 by SIGPIPE).  With SIGPIPE ignored, cat's
# "write error: Broken pipe" and status 1 (more cases in cli-gnu.sh).
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-epipe.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

head -c 33554432 /dev/urandom > "$T/big"
want=$(head -c 10 "$T/big" | od -An -tx1)

check() {
	local name=$1; shift
	local got rc
	got=$("$@" 2>"$T/err" | head -c 10 | od -An -tx1; exit "${PIPESTATUS[0]}")
	rc=$?
	[ "$got" = "$want" ] || fail "$name: head saw '$got'"
	case $rc in
	0|141) ;;
	*) fail "$name: exit $rc after the reader went away";;
	esac
	[ -s "$T/err" ] && fail "$name: not quiet: $(head -c 200 "$T/err")"
}

check "cat file" "$PP" cat "$T/big"
check "cat --prefix" sh -c "printf '' | '$PP' cat - '$T/big'"
check "cat pipe" sh -c "cat '$T/big' | '$PP' cat"
check "copy" "$PP" copy "$T/big" -
check "buffer" sh -c "'$PP' buffer --size 1M < '$T/big'"
check "tee" sh -c "'$PP' tee '$T/teed' < '$T/big'"
check "buffer pipe" sh -c "cat '$T/big' | '$PP' buffer"

# An endless producer must end too, not spin.
start=$(date +%s)
timeout 20 sh -c "yes | '$PP' cat | head -c 10 >/dev/null"
rc=$?
[ $rc = 124 ] && fail "yes | pagepipe cat | head did not end"
timeout 20 sh -c "'$PP' cat /dev/zero | head -c 10 >/dev/null"
[ $? = 124 ] && fail "pagepipe cat /dev/zero | head did not end"
timeout 20 sh -c "yes | '$PP' tee '$T/t2' | head -c 10 >/dev/null"
[ $? = 124 ] && fail "yes | pagepipe tee | head did not end"
[ $(($(date +%s) - start)) -lt 20 ] || fail "early readers took too long"

# With SIGPIPE ignored by the parent, cat's message and status.
out=$( (trap '' PIPE; "$PP" cat "$T/big" 2>"$T/err" | head -c 1 >/dev/null; echo "${PIPESTATUS[0]}") )
[ "$out" = 1 ] || fail "with SIGPIPE ignored: exit $out"
[ "$(cat "$T/err")" = "pagepipe cat: write error: Broken pipe" ] ||
	fail "with SIGPIPE ignored: stderr '$(head -c 200 "$T/err")'"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "early readers end every command quietly"
exit 0
