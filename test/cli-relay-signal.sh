#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe relay and SIGTERM.  With two transfers in flight
# (on two workers with -j 2) the relay stops accepting (a new client is
# refused), lets both end byte-exact (SHA-256 at the server), waiting for
# the second after the first, then exits 0 by itself.  A second SIGTERM
# ends a draining relay at once, by the signal (status 143), and its
# clients see their connections end.  SIGINT does the same, unless it was
# ignored when the relay started.
set -u
# shellcheck source=relay-lib.sh
. "$(dirname "$0")/relay-lib.sh"
# wait_line FILE TEXT: until FILE has a line TEXT (at most a minute).
wait_line() {
	for _ in $(seq 1 600); do
		grep -qx "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# exit_within PID SECONDS: wait for a background child, its status in $status.
status=
exit_within() {
	for _ in $(seq 1 $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || { wait "$1"; status=$?; return 0; }
		sleep 0.1
	done
	return 1
}

head -c 64000000 /dev/urandom > "$T/data"

# 1. Drain: SIGTERM half way through a 64 MB upload.
start hash python3 "$PEER" hash; hport=$port
start relay "$PP" relay -j "$RELAY_J" -v 127.0.0.1:0 "127.0.0.1:$hport"; rport=$port; rpid=${pids[-1]}
# Two uploads at once: with -j 2 the relay gives them to two workers, and
# the drain must wait for both.
mkfifo "$T/ctl" "$T/ctl2"
python3 "$PEER" inflight "$rport" "$T/data" "$T/ctl" > "$T/inflight.out" 2>&1 &
cpid=$!
pids+=($cpid)
exec 3> "$T/ctl"
wait_line "$T/inflight.out" half || fail "the client did not get half way: $(cat "$T/inflight.out")"
python3 "$PEER" inflight "$rport" "$T/data" "$T/ctl2" > "$T/inflight2.out" 2>&1 &
cpid2=$!
pids+=($cpid2)
exec 4> "$T/ctl2"
wait_line "$T/inflight2.out" half || fail "the second client did not get half way: $(cat "$T/inflight2.out")"
kill -TERM "$rpid"
# The relay stops accepting at once, but waits for the transfers.
grep_draining() { grep -q 'SIGTERM: no longer accepting; draining 2 connections$' "$T/relay.err"; }
for _ in $(seq 1 100); do grep_draining && break; sleep 0.1; done
grep_draining || fail "no drain log line: $(cat "$T/relay.err")"
kill -0 "$rpid" 2>/dev/null || fail "the relay exited with a transfer in flight"
r=$(timeout 10 python3 -c 'import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    print("accepted")
except ConnectionRefusedError:
    print("refused")' "$rport")
[ "$r" = refused ] || fail "a new client while draining: $r"
# The first ends; the relay still waits for the second (on the other worker).
echo go >&3
exec 3>&-
wait "$cpid"
r=$(tail -n 1 "$T/inflight.out")
[ "$r" = ok ] || fail "the transfer in flight at SIGTERM: $r"
sleep 0.5
kill -0 "$rpid" 2>/dev/null || fail "the relay exited with the second transfer in flight"
echo go >&4
exec 4>&-
wait "$cpid2"
r=$(tail -n 1 "$T/inflight2.out")
[ "$r" = ok ] || fail "the second transfer in flight at SIGTERM: $r"
if exit_within "$rpid" 60; then
	[ "$status" -eq 0 ] || fail "the drained relay exited with status $status, not 0: $(cat "$T/relay.err")"
else
	fail "the relay did not exit after its last connection ended"
fi
[ "$(grep -c ': closed, 64000000 bytes up, 65 bytes down, ' "$T/relay.err")" -eq 2 ] ||
	fail "not two close lines with the byte counts: $(cat "$T/relay.err")"

# 2. A second SIGTERM while a connection stays open: exit at once, by the signal.
start echo python3 "$PEER" echo; eport=$port
start relay2 "$PP" relay -j "$RELAY_J" 127.0.0.1:0 "127.0.0.1:$eport"; rport=$port; rpid=${pids[-1]}
# A first connection, ended, so that with -j 2 the held one goes to the
# second worker: the first (which reads the signals) then has none, and
# must still be there for the second signal.
r=$(timeout 30 python3 "$PEER" say "$rport" first)
[ "$r" = ok ] || fail "a first connection: $r"
python3 "$PEER" hold "$rport" > "$T/hold.out" 2>&1 &
hpid=$!
pids+=($hpid)
wait_line "$T/hold.out" ready || fail "the held client did not start: $(cat "$T/hold.out")"
kill -TERM "$rpid"
for _ in $(seq 1 100); do grep -q 'draining 1 connections' "$T/relay2.err" && break; sleep 0.1; done
kill -0 "$rpid" 2>/dev/null || fail "one SIGTERM ended the relay with a connection open"
kill -TERM "$rpid"
if exit_within "$rpid" 20; then
	[ "$status" -eq 143 ] || fail "after a second SIGTERM: status $status, not 143"
else
	fail "a second SIGTERM did not end the relay"
fi
wait "$hpid"
[ "$(tail -n 1 "$T/hold.out")" = closed ] || fail "the held client: $(cat "$T/hold.out")"

# 3. SIGINT drains as SIGTERM does, unless it came in ignored (as it does
# for this script's background jobs): then the relay leaves it ignored.
start relay3 python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$PP" relay -j "$RELAY_J" -v 127.0.0.1:0 "127.0.0.1:$eport"
rpid=${pids[-1]}
kill -INT "$rpid"
if exit_within "$rpid" 20; then
	[ "$status" -eq 0 ] || fail "SIGINT with no connection: status $status, not 0"
	grep -q 'SIGINT: no longer accepting; draining 0 connections$' "$T/relay3.err" ||
		fail "no SIGINT log line: $(cat "$T/relay3.err")"
else
	fail "SIGINT did not end an idle relay"
fi
start relay4 "$PP" relay -j "$RELAY_J" 127.0.0.1:0 "127.0.0.1:$eport"; rport=$port; rpid=${pids[-1]}
kill -INT "$rpid"
r=$(timeout 30 python3 "$PEER" say "$rport" after-sigint)
[ "$r" = ok ] || fail "a relay started with SIGINT ignored, after SIGINT: $r"
kill -0 "$rpid" 2>/dev/null || fail "a relay started with SIGINT ignored died of it"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "relay SIGTERM passed"
