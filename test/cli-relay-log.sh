#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe relay -v log lines: an ISO 8601 UTC timestamp
# with milliseconds, the connection's number, the client's and the
# target's addresses, and the event (open, connected, closed with the byte
# counts both ways and the reason); the start names the open files limit.
# A target that refuses is logged without -v too.
set -u
# shellcheck source=relay-lib.sh
. "$(dirname "$0")/relay-lib.sh"
# expect FILE REGEX WHAT: a line of FILE matches the extended REGEX (waits up to 20 s).
expect() {
	for _ in $(seq 1 200); do
		grep -Eq "$2" "$1" && return 0
		sleep 0.1
	done
	fail "$3: no line like /$2/ in: $(cat "$1")"
}

TS='[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}Z'
start echo python3 "$PEER" echo; eport=$port
start relay "$PP" relay -j "$RELAY_J" -v 127.0.0.1:0 "127.0.0.1:$eport"; rport=$port
r=$(timeout 30 python3 "$PEER" say "$rport" hello)
[ "$r" = ok ] || fail "echo through the relay: $r"
P="#1 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:$eport"
expect "$T/relay.err" "^pagepipe relay: $TS open files limit [0-9]+ \(hard limit ([0-9]+|unlimited)\)$" "the limit"
expect "$T/relay.err" "^pagepipe relay: $TS listening on 127\.0\.0\.1:$rport, relaying to 127\.0\.0\.1:$eport, [0-9]+ worker threads?$" "the start"
expect "$T/relay.err" "^pagepipe relay: $TS $P: open$" "the accept"
expect "$T/relay.err" "^pagepipe relay: $TS $P: connected$" "the connect"
expect "$T/relay.err" "^pagepipe relay: $TS $P: closed, 5 bytes up, 5 bytes down, [0-9]+\.[0-9]{3} s$" "the close"
# The client's port in the log is the one the client had.
cport=$(sed -En "s/^pagepipe relay: $TS #1 127\.0\.0\.1:([0-9]+) -> .*: open$/\1/p" "$T/relay.err")
[ -n "$cport" ] && [ "$cport" != "$rport" ] && [ "$cport" != "$eport" ] ||
	fail "the client's port '$cport' is not a client's"
# The timestamp is UTC and today's (or, at midnight, yesterday's).
day=$(sed -En "s/^pagepipe relay: ([0-9-]{10})T.* open$/\1/p" "$T/relay.err")
[ "$day" = "$(date -u +%F)" ] || [ "$day" = "$(date -u -d yesterday +%F)" ] ||
	fail "the timestamp's day $day is not today's in UTC ($(date -u +%F))"

# A refusing target, without -v: one line, with the reason.
start dead "$PP" relay -j "$RELAY_J" 127.0.0.1:0 127.0.0.1:1; dport=$port
timeout 20 python3 -c 'import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
c.recv(1)' "$dport" 2>/dev/null
expect "$T/dead.err" "^pagepipe relay: $TS #1 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:1: connect 127\.0\.0\.1:1: Connection refused$" "a refused connect"
[ "$(wc -l < "$T/dead.err")" -eq 1 ] || fail "without -v, more than the one line: $(cat "$T/dead.err")"

# --progress counts every worker's bytes and connections: two connections
# (with -j 2, one on each worker), 5 bytes each way each.
start prog "$PP" relay -j "$RELAY_J" --progress 127.0.0.1:0 "127.0.0.1:$eport"; pport=$port
for w in hello world; do
	r=$(timeout 30 python3 "$PEER" say "$pport" "$w")
	[ "$r" = ok ] || fail "echo through the --progress relay: $r"
done
expect "$T/prog.err" "^20B .*\] 2 connections \(0 open\)$" "the progress line"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "relay log lines passed"
