#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe send and recv, two unrelated processes meeting at
# a Unix socket path and streaming through a shared pagepipe.  The bytes
# arrive whole (SHA-256) from a file to a file and through kernel pipes on
# both sides, whichever side starts first; a receiver that goes away ends
# the sender as a FIFO's reader ends its writer (SIGPIPE, or EPIPE and
# status 1 where SIGPIPE is ignored); a sender killed mid-stream leaves the
# receiver a prefix of the stream and end of file; timeouts, a stale
# socket, a path that is not a socket, a peer that is not a sender or
# says nothing, usage
# errors, and the socket path removed on every way out.
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
command -v socat >/dev/null || { echo "no socat: the foreign-peer case needs it"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-share.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
sum() { sha256sum | cut -d' ' -f1; }
# until_sock PATH: wait (at most 10 s) for a socket at PATH.
until_sock() {
	for _ in $(seq 1 200); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	return 1
}
S="$T/sock"
# recv_bg OUT ERR: a receiver at $S in the background (its pid in rpid),
# listening by the time this returns.
recv_bg() {
	"$PP" recv "$S" > "$1" 2>"$2" &
	rpid=$!
	until_sock "$S" || fail "recv made no socket at $S"
}

head -c 20000000 /dev/urandom > "$T/in"
want=$(sum < "$T/in")

# 1. File to file, the receiver first.
recv_bg "$T/out" "$T/recv.err"
"$PP" send "$S" < "$T/in" 2>"$T/send.err"; src=$?
wait $rpid; rrc=$?
[ $src = 0 ] && [ $rrc = 0 ] || fail "file to file: send $src recv $rrc: $(cat "$T/send.err" "$T/recv.err")"
[ "$(sum < "$T/out")" = "$want" ] || fail "file to file: wrong bytes"
[ -e "$S" ] && fail "the socket is left behind after a transfer"

# 2. Kernel pipes on both sides, the sender first (it waits, as a FIFO's
# writer waits for a reader), a small pagepipe.
cat "$T/in" | "$PP" send --size 64K "$S" 2>"$T/send.err" &
spid=$!
sleep 0.3
got=$("$PP" recv "$S" 2>"$T/recv.err" | cat | sum; echo "${PIPESTATUS[0]}")
wait $spid; src=$?
[ $src = 0 ] || fail "pipes: send exit $src: $(cat "$T/send.err")"
[ "$got" = "$want
0" ] || fail "pipes: wrong bytes or recv failed: $got: $(cat "$T/recv.err")"

# 2b. Pagepipe sizes across the range, smallest (one page) to largest.
for size in 4K 12K 100K 1M; do
	"$PP" recv "$S" > "$T/out" 2>"$T/recv.err" &
	rpid=$!
	"$PP" send -s "$size" -T 10 "$S" < "$T/in" 2>"$T/send.err" || fail "send -s $size: $(cat "$T/send.err")"
	wait $rpid || fail "recv for -s $size: $(cat "$T/recv.err")"
	[ "$(sum < "$T/out")" = "$want" ] || fail "send -s $size: wrong bytes"
done

# 3. An empty stream: end of file at once, nothing written.
recv_bg "$T/out" "$T/recv.err"
"$PP" send "$S" < /dev/null || fail "empty: send failed"
wait $rpid || fail "empty: recv failed: $(cat "$T/recv.err")"
[ -s "$T/out" ] && fail "empty: recv wrote $(stat -c %s "$T/out") bytes"

# 4. The receiver's reader goes away: the receiver dies of SIGPIPE, and
# so then does the sender (status 141), with no message.
"$PP" recv "$S" 2>"$T/recv.err" | head -c 1000 > "$T/head" &
until_sock "$S"
"$PP" send "$S" < "$T/in" 2>"$T/send.err"; src=$?
wait
[ $src = 141 ] || fail "reader gone: send exit $src, not 141: $(cat "$T/send.err")"
[ -s "$T/send.err" ] && fail "reader gone: send said '$(cat "$T/send.err")'"
cmp -s "$T/head" <(head -c 1000 "$T/in") || fail "reader gone: the first 1000 bytes differ"
# ... and with SIGPIPE ignored, EPIPE: "Broken pipe", status 1, as cat.
"$PP" recv "$S" 2>/dev/null | head -c 10 > /dev/null &
until_sock "$S"
(trap '' PIPE; exec "$PP" send "$S" < "$T/in" 2>"$T/send.err"); src=$?
wait
[ $src = 1 ] || fail "reader gone, SIGPIPE ignored: send exit $src, not 1"
grep -q "Broken pipe" "$T/send.err" || fail "reader gone, SIGPIPE ignored: said '$(cat "$T/send.err")'"

# 5. The sender killed mid-stream: the receiver gets a prefix and ends
# with status 0 (end of file, as from a FIFO whose writer died).
mkfifo "$T/feed"
recv_bg "$T/out" "$T/recv.err"
"$PP" send "$S" < "$T/feed" 2>/dev/null &
spid=$!
exec 3> "$T/feed"
head -c 3000000 "$T/in" >&3
for _ in $(seq 1 100); do
	[ "$(stat -c %s "$T/out")" -ge 3000000 ] && break
	sleep 0.05
done
kill -KILL $spid
wait $spid 2>/dev/null
exec 3>&-
for _ in $(seq 1 100); do kill -0 $rpid 2>/dev/null || break; sleep 0.05; done
if kill -0 $rpid 2>/dev/null; then
	fail "sender killed: recv still running after 5 s"
	kill $rpid
fi
wait $rpid; rrc=$?
[ $rrc = 0 ] || fail "sender killed: recv exit $rrc: $(cat "$T/recv.err")"
n=$(stat -c %s "$T/out")
[ "$n" = 3000000 ] || fail "sender killed: recv wrote $n bytes, not 3000000"
cmp -s "$T/out" <(head -c "$n" "$T/in") || fail "sender killed: the prefix differs"

# 6. Timeouts.
"$PP" send -T 0.3 "$S" < "$T/in" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "no receiver listening" "$T/err" ||
	fail "send -T: exit $rc: $(cat "$T/err")"
# ... and the receiver's answer: a listener that takes the greeting and
# never answers (socat) leaves send waiting on the answer until -T.
socat -u "UNIX-LISTEN:$S" OPEN:/dev/null 2>/dev/null &
lpid=$!
until_sock "$S"
"$PP" send -T 0.5 "$S" < "$T/in" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "no answer from the receiver" "$T/err" ||
	fail "send -T, a silent listener: exit $rc: $(cat "$T/err")"
kill $lpid 2>/dev/null
wait $lpid 2>/dev/null
rm -f "$S"
"$PP" recv -T 0.3 "$S" > /dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "no sender connected" "$T/err" ||
	fail "recv -T: exit $rc: $(cat "$T/err")"
[ -e "$S" ] && fail "recv -T left its socket"

# 7. A stale socket (a receiver killed while it waited) is replaced; a
# live one is not; a path that is not a socket is not touched.
recv_bg /dev/null /dev/stderr
"$PP" recv -T 1 "$S" > /dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "Address already in use" "$T/err" ||
	fail "second receiver on a live socket: exit $rc: $(cat "$T/err")"
kill -KILL $rpid
wait $rpid 2>/dev/null
[ -S "$S" ] || fail "a killed receiver should leave its socket (the stale case)"
"$PP" recv "$S" > "$T/out" 2>"$T/recv.err" &
rpid=$!
sleep 0.3
"$PP" send -T 5 "$S" < "$T/in" || fail "stale socket: send failed"
wait $rpid || fail "stale socket: recv failed: $(cat "$T/recv.err")"
[ "$(sum < "$T/out")" = "$want" ] || fail "stale socket: wrong bytes"
echo keep > "$T/file"
"$PP" recv "$T/file" > /dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] || fail "recv on a regular file: exit $rc"
[ "$(cat "$T/file")" = keep ] || fail "recv replaced a regular file"

# 7b. send to a path that can never listen fails at once: a regular
# file, a directory that does not exist.
"$PP" send "$T/file" < "$T/in" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "Socket operation on non-socket" "$T/err" ||
	fail "send to a regular file: exit $rc: $(cat "$T/err")"
"$PP" send "$T/nodir/sock" < "$T/in" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "No such file or directory" "$T/err" ||
	fail "send into a missing directory: exit $rc: $(cat "$T/err")"

# 7c. recv with its standard output closed refuses to start (the arena
# would otherwise take descriptor 1, and the stream would go into it).
"$PP" recv -T 2 "$S" >&- 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "standard output: Bad file descriptor" "$T/err" ||
	fail "recv with stdout closed: exit $rc: $(cat "$T/err")"
[ -e "$S" ] && fail "recv with stdout closed left a socket"

# 8. SIGTERM while waiting for a sender: the socket goes with it.
recv_bg /dev/null /dev/stderr
kill -TERM $rpid
wait $rpid; rc=$?
[ $rc = 143 ] || fail "recv SIGTERM: exit $rc, not 143"
[ -e "$S" ] && fail "recv SIGTERM left its socket"
# ... but a SIGHUP that came in ignored (nohup) stays ignored, there and
# during the transfer.
(trap '' HUP; exec "$PP" recv "$S" > "$T/out" 2>"$T/recv.err") &
rpid=$!
until_sock "$S"
kill -HUP $rpid
sleep 0.2
kill -0 $rpid 2>/dev/null || fail "recv with SIGHUP ignored died of it"
"$PP" send -T 5 "$S" < "$T/in" 2>"$T/send.err" || fail "send after SIGHUP: $(cat "$T/send.err")"
wait $rpid; rc=$?
[ $rc = 0 ] || fail "recv with SIGHUP ignored: exit $rc: $(cat "$T/recv.err")"
[ "$(sum < "$T/out")" = "$want" ] || fail "recv with SIGHUP ignored: wrong bytes"

# 9. A peer that is not a pagepipe sender.
recv_bg "$T/out" "$T/err"
echo "hello there, not a pipe" | socat - "UNIX-CONNECT:$S" > /dev/null 2>&1
wait $rpid; rc=$?
[ $rc = 1 ] && grep -q "not a pagepipe sender" "$T/err" ||
	fail "foreign peer: exit $rc: $(cat "$T/err")"
[ -s "$T/out" ] && fail "foreign peer: recv wrote bytes"
# ... and one that connects and says nothing is not the sender: the
# receiver waits on for the real one.
recv_bg "$T/out" "$T/err"
socat -u /dev/null "UNIX-CONNECT:$S" 2>/dev/null
"$PP" send -T 5 "$S" < "$T/in" 2>"$T/send.err" || fail "after a silent peer: send failed: $(cat "$T/send.err")"
wait $rpid || fail "after a silent peer: recv failed: $(cat "$T/err")"
[ "$(sum < "$T/out")" = "$want" ] || fail "after a silent peer: wrong bytes"
# ... but -T still holds: a peer that connects and stays silent cannot
# keep the receiver past it (it used to wait out the peer's 5 s of grace).
timeout 4 "$PP" recv -T 1 "$S" > /dev/null 2>"$T/err" &
rpid=$!
until_sock "$S" || fail "recv -T 1 made no socket"
socat -u EXEC:"sleep 30" "UNIX-CONNECT:$S" 2>/dev/null &
speer=$!
wait $rpid; rc=$?
kill $speer 2>/dev/null
wait $speer 2>/dev/null
[ $rc = 1 ] && grep -q "no sender connected" "$T/err" ||
	fail "recv -T 1 with a silent peer: exit $rc (124: still waiting after 4 s): $(cat "$T/err")"

# 10. Usage errors: status 2.
long=$(printf 'x%.0s' $(seq 1 120))
for args in "send" "recv" "send a b" "recv a b" "send --size 2M $S" "send $T/$long" "recv ''"; do
	eval "\"\$PP\" $args" < /dev/null > /dev/null 2>"$T/err"; rc=$?
	[ $rc = 2 ] || fail "pagepipe $args: exit $rc, not 2: $(cat "$T/err")"
done
# -s says send's own range, above it and below it.
for size in 2M 1K 10%; do
	"$PP" send -s "$size" "$S" < /dev/null 2>"$T/err"; rc=$?
	[ $rc = 2 ] && grep -q "invalid pagepipe size: '$size' (4K to 1M" "$T/err" ||
		fail "send -s $size: exit $rc: $(cat "$T/err")"
done
"$PP" send --help | grep -q "Usage: pagepipe send" || fail "send --help"
"$PP" help recv | grep -q "Usage: pagepipe recv" || fail "help recv"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "send and recv"
exit 0
