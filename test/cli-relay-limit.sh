#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe relay --max-conns N: N connections are served, one
# more is accepted and closed at once (and logged), the N keep working,
# and once one of them ends a new one is served again.  Out of descriptors,
# the relay says so and goes on.
set -u
# shellcheck source=relay-lib.sh
. "$(dirname "$0")/relay-lib.sh"

start echo python3 "$PEER" echo; eport=$port
start relay "$PP" relay -j "$RELAY_J" -v --max-conns 5 127.0.0.1:0 "127.0.0.1:$eport"; rport=$port; rpid=${pids[-1]}

r=$(timeout 120 python3 "$PEER" limit "$rport" 5)
[ "$r" = ok ] || fail "--max-conns 5: $r"
grep -Eq ' #6 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:'"$eport"': refused: 5 connections open \(--max-conns\)$' "$T/relay.err" ||
	fail "no log line for the refused connection: $(cat "$T/relay.err")"
kill -0 "$rpid" 2>/dev/null || fail "the relay died: $(cat "$T/relay.err")"

# Out of descriptors (a hard limit of 40: about 17 connections): the relay
# says so, rests its listener instead of spinning on it, and serves again
# once connections end.
start relay2 bash -c "ulimit -n 40 && exec \"\$0\" relay -j $RELAY_J -v 127.0.0.1:0 127.0.0.1:$eport" "$PP"
rport2=$port; rpid2=${pids[-1]}
r=$(timeout 120 python3 "$PEER" fdlimit "$rport2" 30)
[ "$(echo "$r" | tail -n 1)" = ok ] || fail "30 connections on 40 descriptors: $r"
grep -q 'Too many open files' "$T/relay2.err" || fail "no message for the shortage: $(tail -n 3 "$T/relay2.err")"
kill -0 "$rpid2" 2>/dev/null || fail "the relay died of the shortage: $(tail -n 3 "$T/relay2.err")"

for v in 0 -3 x 2y; do
	"$PP" relay -j "$RELAY_J" --max-conns "$v" 127.0.0.1:0 127.0.0.1:1 >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "--max-conns '$v': exit $rc, not 2"
done

for v in 0 -1 x 257; do
	"$PP" relay -j "$v" 127.0.0.1:0 127.0.0.1:1 >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "-j '$v': exit $rc, not 2"
done

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "relay --max-conns passed"
