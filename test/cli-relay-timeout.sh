#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe relay -T closes a connection idle in both
# directions for that long, and not one that keeps moving bytes; the log
# says why.  Waits a few seconds; the checks are on what happened, with
# margins of many seconds, not on how long it took.
set -u
# Every check runs twice: one worker thread (-j 1), then two (-j 2),
# where connections are spread over workers with an epoll instance each.
if [ -z "${RELAY_J:-}" ]; then
	for j in 1 2; do
		echo "== relay -j $j"
		RELAY_J=$j bash "$0" "$@" || exit $?
	done
	exit 0
fi
B=${B:-build}
PP="$B/pagepipe"
PEER=$(dirname "$0")/relay-peer.py
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing: relay tests need it"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-relay-timeout.XXXXXX)
pids=()
cleanup() {
	exec 2>/dev/null
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# start NAME CMD...: run in the background, its first stdout line (a port) in $port.
port=
start() {
	local name=$1; shift
	"$@" > "$T/$name.out" 2> "$T/$name.err" &
	pids+=($!)
	for _ in $(seq 1 200); do
		port=$(head -n 1 "$T/$name.out" 2>/dev/null | grep -Eo '[0-9]+$')
		[ -n "$port" ] && return 0
		sleep 0.05
	done
	echo "FAIL: $name did not start: $(cat "$T/$name.err")"
	exit 1
}

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
