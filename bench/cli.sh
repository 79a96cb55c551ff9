#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli.sh - the pagepipe command against the tools it stands in for, in one
# run: coreutils cat, dd and cp, pv, mbuffer and socat.  bench/run.sh calls
# it (so `make bench` does) when $B/pagepipe exists; by hand:
#
#     B=build bash bench/cli.sh
#
# Cases: (a) a large file into a pipe, (b) file to file, (c) pipe to pipe
# and buffering, (e) file to file between two processes that meet at a
# name (send/recv, a FIFO, socat), (d) a TCP relay on 127.0.0.1.  Each command moves the whole
# file PP_BENCH_RUNS times (default 3); the table gives the best rate, the
# median, and "pp / this", the pagepipe rate over the tool's (above 1.00x:
# pagepipe is faster).  Rates are MB/s (10^6 B/s) of wall time, from
# `date +%s%N` around the whole pipeline, page cache warm.
#
# The data file is $PP_BENCH_DIR/pagepipe-bench-<N>M.dat (default /tmp,
# 1024 MiB, 256 MiB with PP_BENCH_QUICK=1, PP_BENCH_MB to choose), the
# same file bench/splice-file.c makes; it is made once from /dev/urandom
# and kept for later runs.  Copies go next to it, so file to file stays on
# one file system, and are deleted at once.  The relay case sends the
# first PP_BENCH_RELAY_MB MiB of it (default 512, at most the file).
#
# Like every benchmark here, this prints numbers and never judges them by
# its exit status: it is non-zero only when it could not set up (no
# pagepipe binary, no room for the data file).  A tool that is not
# installed is skipped with a note; a command that fails is shown as
# "failed" in its row.

set -u
B=${B:-build}
cd "$(dirname "$0")/.." || exit 1

PP=$(realpath -e "$B/pagepipe" 2>/dev/null)
if [ -z "$PP" ] || [ ! -x "$PP" ]; then
	echo "cli.sh: $B/pagepipe not built (make first)" >&2
	exit 1
fi

if [ -n "${PP_BENCH_MB:-}" ]; then
	MB=$PP_BENCH_MB
elif [ "${PP_BENCH_QUICK:-0}" != 0 ]; then
	MB=256
else
	MB=1024
fi
case $MB in
'' | *[!0-9]* | 0) echo "cli.sh: PP_BENCH_MB must be a whole number of MiB" >&2; exit 1 ;;
esac
RUNS=${PP_BENCH_RUNS:-3}
case $RUNS in
'' | *[!0-9]* | 0) RUNS=3 ;;
esac
BYTES=$((MB * 1024 * 1024))
# The relay moves less by default: loopback TCP is the slowest case, and
# the script should stay within about two minutes on two CPUs.
RELAY_MB=${PP_BENCH_RELAY_MB:-$((MB < 512 ? MB : 512))}
case $RELAY_MB in
'' | *[!0-9]* | 0) RELAY_MB=$((MB < 512 ? MB : 512)) ;;
esac
[ "$RELAY_MB" -gt "$MB" ] && RELAY_MB=$MB
XBYTES=$BYTES	# what one run of the current section moves
DIR=${PP_BENCH_DIR:-/tmp}
DATA=$DIR/pagepipe-bench-${MB}M.dat

have() { command -v "$1" >/dev/null 2>&1; }

# --- cleanup: temp files and anything started in the background ----------

TMP=
BG_PIDS=()
cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${BG_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	BG_PIDS=()
	[ -n "$TMP" ] && rm -rf -- "$TMP"
	[ -n "${DATA_TMP:-}" ] && rm -f -- "$DATA_TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# --- the data file -------------------------------------------------------

# A file of the right size whose blocks cover it is taken as made (sparse is
# not enough: holes read as zero fill and never touch the page cache).
file_ok() {
	local st
	st=$(stat -c '%s %b %B' -- "$1" 2>/dev/null) || return 1
	set -- $st
	[ "$1" -eq "$BYTES" ] && [ $(($2 * $3)) -ge "$BYTES" ]
}

if ! file_ok "$DATA"; then
	echo "making $DATA ($MB MiB from /dev/urandom, kept for later runs)"
	DATA_TMP=$DATA.$$
	if ! head -c "$BYTES" /dev/urandom >"$DATA_TMP" || ! mv -f -- "$DATA_TMP" "$DATA"; then
		echo "cli.sh: cannot make $DATA" >&2
		exit 1
	fi
	DATA_TMP=
fi
TMP=$(mktemp -d "$DIR/pagepipe-cli.XXXXXX") || { echo "cli.sh: mktemp in $DIR failed" >&2; exit 1; }
OUT=$TMP/copy.out

warm() { dd if="$DATA" of=/dev/null bs=1M status=none; }
warm || { echo "cli.sh: cannot read $DATA" >&2; exit 1; }

# --- measuring -----------------------------------------------------------

# The sink of (a) and (c): a reader that copies each byte out of the pipe,
# as most consumers do.  (a) also runs with `pagepipe cat >/dev/null`,
# which splices the pipe away nearly for free, so the producer's own cost
# shows.
SINK_DD="dd of=/dev/null bs=1M status=none"

declare -A PPRATE	# section -> pagepipe's best rate, the base of the ratios
declare -A RESULT	# "section|tool" -> best rate
SECTION=
FIRST=1
NS=

# One run of a command line, in a child bash with pipefail so that a failed
# stage anywhere in the pipeline counts; sets NS to the nanoseconds taken.
# $CHECK, when set, must hold afterwards; $POST runs after the timed part
# (deleting a copy).
run_cmd() {
	local t0 t1 rc
	t0=$(date +%s%N)
	bash -o pipefail -c "$1" </dev/null >/dev/null 2>"$TMP/err"
	rc=$?
	t1=$(date +%s%N)
	NS=$((t1 - t0))
	if [ $rc -ne 0 ]; then
		echo "exit status $rc" >>"$TMP/err"
	elif [ -n "${CHECK:-}" ] && ! eval "$CHECK"; then
		echo "output is not $BYTES bytes" >>"$TMP/err"
		rc=1
	fi
	[ -n "${POST:-}" ] && eval "$POST"
	return $rc
}

mbps() { awk -v b="$XBYTES" -v ns="$1" 'BEGIN { printf "%.1f", (ns > 0 ? b * 1000 / ns : 0) }'; }

# measure TOOL RUNNER ARG: "RUNNER ARG" $RUNS times, then print a row.  The
# first row of a section is pagepipe's: it sets the base of "pp / this".
measure() {
	local tool=$1 runner=$2 arg=$3 i times=() best med ratio err=
	for ((i = 0; i < RUNS; i++)); do
		if ! "$runner" "$arg"; then
			err=$(head -c 200 "$TMP/err" | tr '\n' ' ')
			break
		fi
		times+=("$NS")
	done
	if [ -n "$err" ]; then
		[ $FIRST = 1 ] && PPRATE[$SECTION]=none
		FIRST=0
		printf '%-44s %10s %10s %11s   %s\n' "$tool" failed - - "$err"
		return
	fi
	# Sorted ascending by time: the first is the best, the middle the median.
	mapfile -t times < <(printf '%s\n' "${times[@]}" | sort -n)
	best=$(mbps "${times[0]}")
	med=$(mbps "${times[$((${#times[@]} / 2))]}")
	RESULT["$SECTION|$tool"]=$best
	if [ $FIRST = 1 ]; then
		PPRATE[$SECTION]=$best
		ratio=-
	elif [ "${PPRATE[$SECTION]}" = none ]; then
		ratio=-
	else
		ratio=$(awk -v a="${PPRATE[$SECTION]}" -v b="$best" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
	fi
	FIRST=0
	printf '%-44s %10s %10s %11s\n' "$tool" "$best" "$med" "$ratio"
}

# A row for something that could not even start.
fail_row() {
	[ $FIRST = 1 ] && PPRATE[$SECTION]=none
	FIRST=0
	printf '%-44s %10s   %s\n' "$1" failed "$2"
}

forget_pid() {
	local p keep=()
	for p in "${BG_PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	BG_PIDS=("${keep[@]}")
}

section() {
	SECTION=$1
	FIRST=1
	echo
	echo "-- $2"
	printf '%-44s %10s %10s %11s\n' "command" "best MB/s" "median" "pp / this"
}

skip() { printf '%-44s %10s   %s\n' "$1" skipped "($2 not installed)"; }

# --- header ----------------------------------------------------------------

echo
echo "== cli.sh: the pagepipe command against cat, dd, cp, pv, mbuffer, socat =="
echo "$MB MiB file $DATA (relay: $RELAY_MB MiB), page cache warm; best and median of $RUNS runs; MB/s = 10^6 B/s, wall time"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) CPUs"
missing=
for t in pv socat mbuffer python3; do have "$t" || missing="$missing $t"; done
[ -n "$missing" ] && echo "not installed:$missing (their rows are skipped; apt-get install -y pv socat mbuffer)"

F=$(printf %q "$DATA")
O=$(printf %q "$OUT")
Q=$(printf %q "$PP")

# --- (a) file to pipe ------------------------------------------------------

for sink in dd pp; do
	if [ $sink = dd ]; then
		S=$SINK_DD
		section "a-$sink" "(a) file -> pipe, sink: $S (copies out of the pipe)"
	else
		S="$Q cat >/dev/null"
		section "a-$sink" "(a) file -> pipe, sink: pagepipe cat >/dev/null (splices the pipe away)"
	fi
	measure "pagepipe cat FILE | sink" run_cmd "$Q cat $F | $S"
	measure "cat FILE | sink" run_cmd "cat $F | $S"
	if have pv; then measure "pv -q FILE | sink" run_cmd "pv -q $F | $S"; else skip "pv -q FILE | sink" pv; fi
	measure "dd if=FILE bs=1M | sink" run_cmd "dd if=$F bs=1M status=none | $S"
done

# --- (b) file to file ------------------------------------------------------

section b "(b) file -> file on the same file system ($(df -PT "$DIR" 2>/dev/null | awk 'NR == 2 { print $2 }')), copy deleted after each run"
CHECK='[ "$(stat -c %s -- "$OUT" 2>/dev/null)" = "$BYTES" ]'
POST='rm -f -- "$OUT"'
measure "pagepipe copy FILE OUT" run_cmd "$Q copy --no-progress $F $O"
measure "cat FILE > OUT" run_cmd "cat $F > $O"
measure "dd if=FILE of=OUT bs=1M" run_cmd "dd if=$F of=$O bs=1M status=none"
measure "cp FILE OUT" run_cmd "cp $F $O"
CHECK=
POST=
warm	# the copies may have pushed the file out of a small page cache

# --- (c) pipe to pipe ------------------------------------------------------

P="$Q cat $F"
S=$SINK_DD
section c "(c) pipe -> pipe: pagepipe cat FILE | <command> | $S"
measure "| pagepipe cat |" run_cmd "$P | $Q cat | $S"
measure "| cat |" run_cmd "$P | cat | $S"
if have pv; then measure "| pv -q |" run_cmd "$P | pv -q | $S"; else skip "| pv -q |" pv; fi
measure "| dd bs=1M |" run_cmd "$P | dd bs=1M status=none | $S"

section c-buf "(c) buffering, 16 MiB: pagepipe cat FILE | <command> | $S"
measure "| pagepipe buffer --size 16M |" run_cmd "$P | $Q buffer --no-progress --size 16M | $S"
if have pv; then measure "| pv -q -B 16m |" run_cmd "$P | pv -q -B 16m | $S"; else skip "| pv -q -B 16m |" pv; fi
if have mbuffer; then measure "| mbuffer -q -m 16M |" run_cmd "$P | mbuffer -q -m 16M | $S"; else skip "| mbuffer -q -m 16M |" mbuffer; fi

# --- (e) two processes, file to file ------------------------------------

# Two commands started apart, as from two shells, meet at a name and move
# the file: pagepipe send/recv at a Unix socket (a shared pagepipe between
# them), two cats at a FIFO (the kernel's way), socat at a Unix socket (the
# tool a user would pick), and one cat alone, the limit: the same read
# and write with nobody in between.
SOCK=$(printf %q "$TMP/sock")
FIFO=$(printf %q "$TMP/fifo")
mkfifo "$TMP/fifo"
waitsock="until [ -S $SOCK ]; do sleep 0.01; done"
section e "(e) two processes, file -> file: a receiver started first, then a sender, meeting at a name"
CHECK='[ "$(stat -c %s -- "$OUT" 2>/dev/null)" = "$BYTES" ]'
POST='rm -f -- "$OUT" "$TMP/sock"'
measure "pagepipe recv S > OUT & pagepipe send S < FILE" run_cmd \
	"$Q recv $SOCK > $O & $waitsock; $Q send $SOCK < $F; wait \$!"
measure "cat FIFO > OUT & cat FILE > FIFO" run_cmd "cat $FIFO > $O & cat $F > $FIFO; wait \$!"
if have socat; then
	measure "socat UNIX-LISTEN:S > OUT & socat FILE UNIX:S" run_cmd \
		"socat -u UNIX-LISTEN:$SOCK - > $O & $waitsock; socat -u FILE:$F UNIX-CONNECT:$SOCK; wait \$!"
else
	skip "socat UNIX-LISTEN:S > OUT & socat FILE UNIX:S" socat
fi
measure "limit: cat FILE > OUT (one process)" run_cmd "cat $F > $O"
CHECK=
POST=
warm

# --- (d) relay -------------------------------------------------------------

# Is something listening on 127.0.0.1:$1 (or any address)?  From /proc, so
# that asking does not open a connection a relay would pass on.
listening() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

wait_listening() {
	local i
	for ((i = 0; i < 200; i++)); do
		listening "$1" && return 0
		sleep 0.02
	done
	return 1
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The server: accept one connection, read it to the end, check the count.
# It gives up after a minute, so that it never outlives the benchmark.
SERVER='
import socket, sys
port, want = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
s.settimeout(60)
c, _ = s.accept()
c.settimeout(60)
buf = bytearray(1 << 20)
n = 0
while True:
    r = c.recv_into(buf)
    if not r:
        break
    n += r
if n != want:
    sys.stderr.write("server got %d bytes, not %d\n" % (n, want))
    sys.exit(1)
'

# One relayed transfer through the relay listening on port $1: the server
# comes up first (not timed), then the client sends the file; the time
# ends when the server has read all of it.  Sets NS.
relay_once() {
	local port=$1 spid t0 t1 rc
	: >"$TMP/err"
	python3 -c "$SERVER" "$SPORT" "$XBYTES" 2>>"$TMP/err" &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_listening "$SPORT"; then
		echo "server did not start" >>"$TMP/err"
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		forget_pid "$spid"
		return 1
	fi
	t0=$(date +%s%N)
	"$PP" cat --bytes "${RELAY_MB}M" "$DATA" 2>>"$TMP/err" >"/dev/tcp/127.0.0.1/$port"
	rc=$?
	wait "$spid" || rc=1
	t1=$(date +%s%N)
	forget_pid "$spid"
	NS=$((t1 - t0))
	return $rc
}

# Start a relay in the background; sets RPID.  With a port, wait until
# it listens.
start_bg() {
	local port=$1
	shift
	: >"$TMP/err"
	"$@" >"$TMP/relay.out" 2>>"$TMP/err" &
	RPID=$!
	BG_PIDS+=("$RPID")
	[ -z "$port" ] || wait_listening "$port"
}

stop_bg() {
	kill "$RPID" 2>/dev/null
	wait "$RPID" 2>/dev/null
	forget_pid "$RPID"
}

section d "(d) TCP relay, 127.0.0.1, $RELAY_MB MiB: pagepipe cat FILE >/dev/tcp/L -> relay -> T, python3 server (recv_into 1 MiB)"
XBYTES=$((RELAY_MB * 1024 * 1024))
if ! have python3; then
	skip "relay (python3 runs the server)" python3
else
	SPORT=$(free_port)
	# pagepipe relay: port 0, and it prints the port it got.
	start_bg "" "$PP" relay --no-progress "127.0.0.1:0" "127.0.0.1:$SPORT"
	rport=
	for ((i = 0; i < 200; i++)); do
		rport=$(sed -n 's/^127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$TMP/relay.out" 2>/dev/null | head -n 1)
		[ -n "$rport" ] && break
		sleep 0.02
	done
	if [ -n "$rport" ] && wait_listening "$rport"; then
		measure "pagepipe relay L T" relay_once "$rport"
	else
		fail_row "pagepipe relay L T" "(did not start: $(head -c 200 "$TMP/err" | tr '\n' ' '))"
	fi
	stop_bg

	if have socat; then
		# fork: one listener for all the runs, as pagepipe relay is.  socat
		# moves 8 KiB per read by default; -b raises that.
		for b in "" "-b 1048576 "; do
			lport=$(free_port)
			# shellcheck disable=SC2086
			if start_bg "$lport" socat $b "TCP-LISTEN:$lport,reuseaddr,fork" "TCP:127.0.0.1:$SPORT"; then
				measure "socat ${b}TCP-LISTEN:L,reuseaddr,fork TCP:T" relay_once "$lport"
			else
				fail_row "socat ${b}TCP-LISTEN:L,reuseaddr,fork TCP:T" "(did not start)"
			fi
			stop_bg
		done
	else
		skip "socat TCP-LISTEN:L,reuseaddr,fork TCP:T" socat
	fi
fi

# --- targets ---------------------------------------------------------------

# target LABEL WANT SECTION TOOL: pagepipe's rate in SECTION over TOOL's.
target() {
	local label=$1 want=$2 pp=${PPRATE[$3]:-} other=${RESULT["$3|$4"]:-}
	if [ -z "$pp" ] || [ -z "$other" ]; then
		printf '  %-58s target >= %4.2fx   measured: n/a\n' "$label" "$want"
		return
	fi
	awk -v l="$label" -v w="$want" -v a="$pp" -v b="$other" 'BEGIN {
		r = b > 0 ? a / b : 0; r = sprintf("%.2f", r) + 0
		printf "  %-58s target >= %4.2fx   measured %5.2fx  %s\n", l, w, r, (r >= w ? "(met)" : "(below)")
	}'
}

echo
echo "-- targets (issue 4), pagepipe rate / tool rate, best of $RUNS"
target "file -> pipe vs cat (sink dd)" 3 a-dd "cat FILE | sink"
target "file -> pipe vs cat (sink pagepipe cat)" 3 a-pp "cat FILE | sink"
target "file -> pipe vs pv (sink dd)" 1 a-dd "pv -q FILE | sink"
target "file -> pipe vs pv (sink pagepipe cat)" 1 a-pp "pv -q FILE | sink"
target "pipe -> pipe vs pv" 1 c "| pv -q |"
target "buffer vs pv -B 16m" 1 c-buf "| pv -q -B 16m |"
target "relay vs socat (default 8 KiB buffer)" 1 d "socat TCP-LISTEN:L,reuseaddr,fork TCP:T"
target "relay vs socat -b 1048576" 1 d "socat -b 1048576 TCP-LISTEN:L,reuseaddr,fork TCP:T"
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); other work on the machine moves these numbers"
exit 0
