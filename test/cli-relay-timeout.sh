#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe relay -T closes a connection idle in both
# directions for that long, and not one that keeps moving bytes; the log
# says why.  Waits a few seconds; the checks are on what happened, with
# margins of many seconds, not on how long it took.
set -u
# shellcheck source=relay-lib.sh
. "$(dirname "$0")/relay-lib.sh"

start echo python3 "$PEER" echo; eport=$port
start relay "$PP" relay -j "$RELAY_J" -v -T 3 127.0.0.1:0 "127.0.0.1:$eport"; rport=$port

r=$(timeout 120 python3 "$PEER" timeout "$rport" 3)
[ "$r" = ok ] || fail "-T 3, an idle and a busy connection: $r"
grep -q ': closed, 1 bytes up, 1 bytes down, [0-9.]* s, idle timeout$' "$T/relay.err" ||
	fail "no log line for the idle timeout: $(cat "$T/relay.err")"
# Only the idle one timed out.
n=$(grep -c 'idle timeout' "$T/relay.err")
[ "$n" -eq 1 ] || fail "$n connections timed out, not 1: $(cat "$T/relay.err")"

# Bad values are usage errors.
for v in 0 -1 abc 1x ""; do
	"$PP" relay -j "$RELAY_J" -T "$v" 127.0.0.1:0 127.0.0.1:1 >/dev/null 2>"$T/usage.err"
	rc=$?
	[ $rc -eq 2 ] || fail "-T '$v': exit $rc, not 2"
done
"$PP" relay -j "$RELAY_J" --timeout=abc 127.0.0.1:0 127.0.0.1:1 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--timeout=abc is not a usage error"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "relay -T passed"
