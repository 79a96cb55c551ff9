#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe parses its command line as the GNU tools it stands
# in for: options after operands (unless POSIXLY_CORRECT), --version in
# every command, bare `pagepipe help`, cat -u; relay refuses ports outside
# 1-65535 (0 only to listen) as a usage error; with SIGPIPE ignored a
# reader gone away is "write error: Broken pipe" and status 1, as for cat.
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-gnu.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC PATTERN CMD...: exit status RC and stderr matching PATTERN.
expect() {
	local want=$1 pat=$2; shift 2
	"$@" >"$T/out" 2>"$T/err" </dev/null
	local rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(head -c 300 "$T/err")"
	if [ -n "$pat" ] && ! grep -Eq -- "$pat" "$T/err"; then
		fail "'$*': stderr '$(head -c 300 "$T/err")' does not match '$pat'"
	fi
}

printf 'hello\n' > "$T/f1"

# Options after operands, as GNU getopt permutes them.
got=$("$PP" cat "$T/f1" --bytes 0 2>&1) || fail "cat f1 --bytes 0 exited $?"
[ -z "$got" ] || fail "cat f1 --bytes 0 gave '$got'"
got=$("$PP" cat "$T/f1" --bytes 2 --prefix '>' 2>&1)
[ "$got" = '>he' ] || fail "cat f1 --bytes 2 --prefix '>' gave '$got'"
"$PP" copy "$T/f1" "$T/f2" --progress 2>"$T/err" || fail "copy a b --progress exited $?"
cmp -s "$T/f1" "$T/f2" || fail "copy a b --progress did not copy"
grep -q '100%' "$T/err" || fail "copy a b --progress showed no progress: $(cat "$T/err")"
# (in $T: a tee that does not permute makes a file named "-a")
PPABS=$(cd "$(dirname "$PP")" && pwd)/pagepipe
got=$(cd "$T" && printf 'x' | "$PPABS" tee "$T/t1" -a 2>&1)
[ "$got" = x ] && [ "$(cat "$T/t1")" = x ] || fail "tee FILE -a gave '$got'"
# ... but not under POSIXLY_CORRECT, where the first operand ends the options.
expect 1 "\\-\\-bytes: No such file or directory" env POSIXLY_CORRECT=1 "$PP" cat "$T/f1" --bytes 0
# "--" still ends them.
expect 1 "\\-\\-bytes: No such file or directory" "$PP" cat -- "$T/f1" --bytes

# --version in every command, as --help promises; bare "help".
want="pagepipe $(sed -n 's/^#define PAGEPIPE_VERSION[[:space:]]*"\(.*\)"/\1/p' "$(dirname "$0")/../include/pagepipe.h")"
for c in cat tee copy buffer relay; do
	got=$("$PP" $c --version 2>&1 </dev/null); rc=$?
	[ $rc = 0 ] || fail "pagepipe $c --version exited $rc: $got"
	grep -q "^$want" <<<"$got" || fail "pagepipe $c --version: '$got'"
	grep -q -- '--version' <<<"$("$PP" $c --help)" || fail "pagepipe $c --help does not list --version"
done
got=$("$PP" help 2>"$T/err"); rc=$?
[ $rc = 0 ] || fail "pagepipe help exited $rc: $(cat "$T/err")"
grep -q '^Usage: pagepipe COMMAND' <<<"$got" || fail "pagepipe help: '$got'"
expect 2 "unknown command 'frob'" "$PP" help frob

# cat -u: POSIX's unbuffered output, a no-op.
got=$("$PP" cat -u "$T/f1" 2>&1) || fail "cat -u exited $?"
[ "$got" = hello ] || fail "cat -u gave '$got'"

# relay: ports are 1-65535, and 0 only where the kernel may choose one.
for a in 127.0.0.1:99999 127.0.0.1:65536 :abc :-1 127.0.0.1:8x 127.0.0.1:http; do
	expect 2 "invalid port" timeout 5 "$PP" relay "$a" 127.0.0.1:80
	expect 2 "invalid port" timeout 5 "$PP" relay 127.0.0.1:0 "$a"
done
expect 2 "invalid port '0' \\(1 to 65535\\)" timeout 5 "$PP" relay 127.0.0.1:0 127.0.0.1:0
expect 2 "addresses are HOST:PORT" timeout 5 "$PP" relay 127.0.0.1: 127.0.0.1:80
# The largest port is a port.
timeout 1 "$PP" relay 127.0.0.1:0 127.0.0.1:65535 >"$T/out" 2>"$T/err"
[ $? = 124 ] || fail "relay to port 65535 did not run: $(cat "$T/err")"

# SIGPIPE ignored: cat says "write error: Broken pipe" and exits 1.
head -c 4194304 /dev/zero > "$T/big"
for c in "cat $T/big" "cat --prefix x $T/big" "copy $T/big -" "buffer -s 64K"; do
	# shellcheck disable=SC2086
	rc=$( (trap '' PIPE; "$PP" $c <"$T/big" 2>"$T/err" | head -c 1 >/dev/null; echo "${PIPESTATUS[0]}") )
	[ "$rc" = 1 ] || fail "$c with SIGPIPE ignored: exit $rc, not 1"
	grep -q "^pagepipe ${c%% *}: write error.*: Broken pipe$" "$T/err" ||
		fail "$c with SIGPIPE ignored: stderr '$(cat "$T/err")'"
	[ "$(wc -l < "$T/err")" = 1 ] || fail "$c with SIGPIPE ignored: more than one message: $(cat "$T/err")"
done
# A pipe on stdin too.
rc=$( (trap '' PIPE; cat "$T/big" 2>/dev/null | "$PP" cat 2>"$T/err" | head -c 1 >/dev/null; echo "${PIPESTATUS[1]}") )
[ "$rc" = 1 ] || fail "pipe | cat with SIGPIPE ignored: exit $rc"
grep -q "write error: Broken pipe" "$T/err" || fail "pipe | cat with SIGPIPE ignored: '$(cat "$T/err")'"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "the command line behaves as GNU's"
exit 0
