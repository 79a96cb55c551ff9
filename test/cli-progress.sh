#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: --progress on a real terminal (tmux panes of 40 and 200
# columns, read back with capture-pane), on pv's model: one line, redrawn
# in place and never wider than the pane; the current rate and an ETA; with
# several FILEs the total is their sum from the first report; the line is
# ended on exit and on Ctrl-C, so what follows starts a line of its own;
# relay -v's log lines never land on the progress line; the line is ended
# when the command dies of SIGPIPE too.
set -u
B=${B:-build}
PP="$(cd "$(dirname "${B:-build}/x")" && pwd)/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
command -v tmux >/dev/null || { echo "tmux missing (Debian package tmux): skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing: skipped"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-progress.XXXXXX)
sock='' runs=0
cleanup() {
	for i in $(seq 1 "$runs"); do tmux -L "pp-progress-$$-$i" kill-server 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# A reader of about 4 MiB/s, so that a 24 MiB copy takes a few seconds.
cat > "$T/slow.py" <<'PY'
import sys, time
f = sys.stdin.buffer
while f.read(1 << 20):
    time.sleep(0.25)
PY
head -c 12582912 /dev/urandom > "$T/f1"
head -c 12582912 /dev/urandom > "$T/f2"

# run WIDTH SCRIPT: a fresh pane of WIDTH columns running bash SCRIPT.
# Each in a server of its own, so that one never waits for the last to go.
run() {
	[ -n "$sock" ] && tmux -L "$sock" kill-server 2>/dev/null
	runs=$((runs + 1))
	sock="pp-progress-$$-$runs"
	tmux -L "$sock" -f /dev/null new-session -d -x "$1" -y 20 "bash $2; sleep 60"
}
screen() { tmux -L "$sock" capture-pane -p 2>/dev/null; }
# The rows between the START row and the first row matching $1 (or the end).
between() {
	screen | sed -n '/^START$/,$p' | sed '1d' | sed "/$1/,\$d" | sed '/^$/d'
}

for w in 40 200; do
	cat > "$T/cat.sh" <<EOF
echo START
'$PP' cat --progress '$T/f1' '$T/f2' | python3 '$T/slow.py'
echo AFTER
EOF
	run "$w" "$T/cat.sh"
	seen=0 first=
	for _ in $(seq 1 100); do
		sleep 0.2
		s=$(screen)
		grep -q '^AFTER' <<<"$s" && break
		rows=$(between '^AFTER')
		[ -n "$rows" ] || continue
		seen=$((seen + 1))
		[ -n "$first" ] || first=$rows
		n=$(wc -l <<<"$rows")
		[ "$n" = 1 ] || { fail "width $w: progress takes $n rows, not one:"; printf '%s\n' "$rows"; break; }
		[ ${#rows} -lt "$w" ] || fail "width $w: a line of ${#rows} columns: '$rows'"
		grep -q '/s' <<<"$rows" || fail "width $w: no rate in '$rows'"
		# The last report has the average rate and no ETA.
		grep -q '100%' <<<"$rows" || grep -q 'ETA [0-9]' <<<"$rows" || fail "width $w: no ETA in '$rows'"
	done
	[ "$seen" -ge 2 ] || fail "width $w: progress seen only $seen times: $(screen)"
	# Both files count from the first report on: 24 MiB, not 12.
	[ "$w" = 200 ] && { grep -q 'of 24.0MiB' <<<"$first" || fail "width $w: first report '$first' is not of 24.0MiB"; }
	# Ended by a newline: AFTER has a row of its own, under one progress row.
	for _ in $(seq 1 50); do screen | grep -q 'AFTER' && break; sleep 0.2; done
	screen | grep -q '^AFTER$' || fail "width $w: the line was not ended: $(screen | grep AFTER)"
	rows=$(between '^AFTER$')
	[ "$(wc -l <<<"$rows")" = 1 ] || fail "width $w: after the end, rows '$rows'"
	grep -q '100%' <<<"$rows" || fail "width $w: the last report is not 100%: '$rows'"
done

# Ctrl-C: the line is ended before the command dies.
cat > "$T/int.sh" <<EOF
trap 'echo INTERRUPTED' INT
echo START
'$PP' cat --progress '$T/f1' '$T/f2' | python3 '$T/slow.py'
EOF
run 200 "$T/int.sh"
for _ in $(seq 1 50); do sleep 0.2; between 'INTERRUPTED' | grep -q '/s' && break; done
tmux -L "$sock" send-keys C-c
for _ in $(seq 1 50); do sleep 0.1; screen | grep -q INTERRUPTED && break; done
screen | grep -q '^INTERRUPTED$' || fail "Ctrl-C: the progress line was not ended: $(screen | grep INTERRUPTED)"

# A reader that goes away: the command dies of SIGPIPE, its line ended first.
cat > "$T/early.py" <<'PY'
import sys, time
f = sys.stdin.buffer
for _ in range(4):
    f.read(1 << 20)
    time.sleep(0.3)
PY
cat > "$T/pipe.sh" <<EOF
echo START
'$PP' cat --progress '$T/f1' '$T/f2' | python3 '$T/early.py'
echo AFTER
EOF
run 200 "$T/pipe.sh"
for _ in $(seq 1 50); do sleep 0.2; screen | grep -q AFTER && break; done
screen | grep -q '^AFTER$' || fail "reader gone: the progress line was not ended: $(screen | grep AFTER)"

# relay -v: each log line starts a row; the progress line is redrawn below.
cat > "$T/relay.sh" <<EOF
echo START
exec '$PP' relay -v --progress 127.0.0.1:0 127.0.0.1:1
EOF
run 200 "$T/relay.sh"
port=
for _ in $(seq 1 50); do
	sleep 0.1
	port=$(screen | grep -Eo '^127\.0\.0\.1:[0-9]+' | head -n 1 | cut -d: -f2)
	[ -n "$port" ] && break
done
[ -n "$port" ] || fail "relay did not start: $(screen)"
for _ in 1 2 3; do
	sleep 0.7
	python3 -c "import socket; s = socket.create_connection(('127.0.0.1', $port)); s.recv(1)" 2>/dev/null
done
sleep 0.7
s=$(screen)
n=$(grep -c 'connect 127.0.0.1:1: Connection refused' <<<"$s")
[ "$n" = 3 ] || fail "relay: $n messages for 3 refused connections: $s"
bad=$(grep 'pagepipe relay:' <<<"$s" | grep -v '^pagepipe relay:')
[ -z "$bad" ] || fail "relay: log lines on the progress line: '$bad'"
grep -q 'connections' <<<"$(screen | sed '/^$/d' | tail -n 1)" ||
	fail "relay: the progress line is not the last row: $(screen)"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "progress lines fit, redraw, end and stay apart from messages"
exit 0
