#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: 1000 idle connections open at once through pagepipe relay
# cost little: the relay's RSS grows by less than 50 MB (two threads and
# about 100 KB a connection before the event loop: 100 MB), it runs on at
# most 8 threads, all 1000 still echo after being held, and the relay logs
# the close of each and keeps no descriptor of them.  Figures from
# /proc/PID/status.
set -u
# shellcheck source=relay-lib.sh
. "$(dirname "$0")/relay-lib.sh"
N=1000
# The client holds N descriptors, the echo server N, the relay 2N.
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt $((2 * N + 100)) ]; then
	echo "the open files hard limit ($hard) is below $((2 * N + 100))"
	exit 77
fi
# 50 MB; ThreadSanitizer's shadow memory makes every byte cost about four.
bound=51200
tsan=
grep -q __tsan_init "$PP" && bound=$((4 * bound)) && tsan=1
field() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

start echo python3 "$PEER" echo; eport=$port
start relay "$PP" relay -j "$RELAY_J" -v 127.0.0.1:0 "127.0.0.1:$eport"; rport=$port; rpid=${pids[-1]}
rss0=$(field "$rpid" VmRSS)
fds0=$(ls /proc/"$rpid"/fd | wc -l)

mkfifo "$T/ctl"
python3 "$PEER" idle "$rport" $N "$T/ctl" > "$T/idle.out" 2>&1 &
cpid=$!
pids+=($cpid)
exec 3> "$T/ctl"
for _ in $(seq 1 1200); do
	grep -q '^ready$\|^bad' "$T/idle.out" && break
	sleep 0.1
done
if grep -q '^ready$' "$T/idle.out"; then
	rss=$(field "$rpid" VmRSS)
	hwm=$(field "$rpid" VmHWM)
	threads=$(field "$rpid" Threads)
	fds=$(ls /proc/"$rpid"/fd | wc -l)
	echo "$N idle connections: relay VmRSS $rss kB (at start $rss0 kB, peak $hwm kB), $threads threads, $fds descriptors"
	[ $((rss - rss0)) -lt "$bound" ] || fail "RSS grew by $((rss - rss0)) kB for $N idle connections (bound $bound kB)"
	[ "$threads" -le 8 ] || fail "$threads threads for $N idle connections (bound 8)"
	# -j N: N worker threads, the main one among them, and no other
	# (but ThreadSanitizer's own, once a second thread exists).
	want=$RELAY_J
	[ -n "$tsan" ] && [ "$threads" -eq $((RELAY_J + 1)) ] && want=$threads
	[ "$threads" -eq "$want" ] || fail "$threads threads with -j $RELAY_J"
	[ "$fds" -ge $((2 * N)) ] || fail "only $fds descriptors: not all $N connections are open"
else
	fail "the $N connections did not all open: $(tail -n 3 "$T/idle.out")"
fi
# The relay gives an idle connection's pagepipes back after 2 s: the held
# connections must still echo after that.
sleep 3
kill -0 "$rpid" 2>/dev/null && echo "after 3 s idle: relay VmRSS $(field "$rpid" VmRSS) kB"
exec 3>&-
wait "$cpid"
r=$(tail -n 1 "$T/idle.out")
[ "$r" = ok ] || fail "after holding them: $r"
# Every connection's end is seen and logged.
for _ in $(seq 1 300); do
	[ "$(grep -c ': closed, ' "$T/relay.err")" -ge $N ] && break
	sleep 0.1
done
n=$(grep -c ': closed, ' "$T/relay.err")
[ "$n" -eq $N ] || fail "$n connections logged as closed, not $N"
kill -0 "$rpid" 2>/dev/null || fail "the relay died: $(tail -n 5 "$T/relay.err")"
# No descriptor is left behind (one more: the socket made for the next client).
fds=$(ls /proc/"$rpid"/fd | wc -l)
[ "$fds" -le $((fds0 + 1)) ] || fail "$fds descriptors after all closed, $fds0 at the start"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "relay with $N idle connections passed"
