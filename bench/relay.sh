#!/bin/bash
# SPDX-License-Identifier: MIT
#
# relay.sh - pagepipe relay against a bare splice loop and socat, on
# 127.0.0.1.  bench/run.sh calls it (so `make bench` does) when
# $B/pagepipe and the helpers exist; by hand:
#
#     B=build bash bench/relay.sh
#
# Each relay listens once and serves every run.  The sender is
# $B/bench/relay-peer client (sendfile(2) from a file in the page cache),
# the receiver relay-peer server (recv into 1 MiB, thrown away); neither is
# the relay's business, so only the relay's CPU is counted: utime + stime
# of its process from /proc/PID/stat, with cutime + cstime for socat, whose
# forked children do the work (read after they are reaped).  Rows:
#
#   bare splice loop  $B/bench/splice-relay: socket -> kernel pipe (1 MiB)
#                     -> socket, a blocking thread per direction, no library
#   socat -b 1048576  socat TCP-LISTEN:L,fork,reuseaddr,backlog=4096 TCP:T
#                     with 1 MiB reads
#   socat             the same with socat's default 8 KiB buffer
#   pagepipe relay    $B/pagepipe relay L T (default -j: the online CPUs, up to 8)
#   pagepipe relay -j 1  the same with one worker thread
#
# Sections: one-way (one connection, N MiB), two-way (one connection, N
# MiB each way at once), 100 connections at once (N/100 MiB each), and
# idle connections (PP_BENCH_IDLE, default 10000): the relay's RSS beside
# socat's fork-per-connection (RSS and PSS summed over all its processes).
# Columns: MB/s (10^6 B/s of payload, wall time from the first connect to
# the last end of file) and the relay's CPU milliseconds per GiB moved,
# the medians of PP_BENCH_RUNS (default 3) runs taken in turn (run 1 of
# every relay, then run 2...), and both over the bare splice loop's.
#
# Knobs: PP_BENCH_MB (default 1024, 256 with PP_BENCH_QUICK=1),
# PP_BENCH_RUNS, PP_BENCH_IDLE (default 10000, 1000 quick; at most what
# the open files hard limit lets the relay hold, two descriptors a
# connection), PP_BENCH_DIR (/tmp: the data file pagepipe-bench-<N>M.dat,
# shared with cli.sh), PP_BENCH_RELAY_CASES (default "oneway twoway many
# idle": which sections), PP_BENCH_SOCAT=0 (leave socat out: its idle case
# forks a process per connection).
#
# It prints numbers and never judges them: the exit status is non-zero
# only when it could not set up.  socat missing: its rows are skipped.

set -u
B=${B:-build}
cd "$(dirname "$0")/.." || exit 1

PP=$(realpath -e "$B/pagepipe" 2>/dev/null)
PEER=$(realpath -e "$B/bench/relay-peer" 2>/dev/null)
BARE=$(realpath -e "$B/bench/splice-relay" 2>/dev/null)
if [ -z "$PP" ] || [ -z "$PEER" ] || [ -z "$BARE" ]; then
	echo "relay.sh: $B/pagepipe, $B/bench/relay-peer or $B/bench/splice-relay not built (make bench)" >&2
	exit 1
fi

quick=${PP_BENCH_QUICK:-0}
[ "$quick" = 0 ] && quick=
MB=${PP_BENCH_MB:-$([ -n "$quick" ] && echo 256 || echo 1024)}
RUNS=${PP_BENCH_RUNS:-$([ -n "$quick" ] && echo 1 || echo 3)}
IDLE=${PP_BENCH_IDLE:-$([ -n "$quick" ] && echo 1000 || echo 10000)}
for v in MB RUNS IDLE; do
	case ${!v} in
	'' | *[!0-9]* | 0) echo "relay.sh: $v must be a whole number above 0" >&2; exit 1 ;;
	esac
done
BYTES=$((MB * 1024 * 1024))
DIR=${PP_BENCH_DIR:-/tmp}
DATA=$DIR/pagepipe-bench-${MB}M.dat
HZ=$(getconf CLK_TCK)
CASES=${PP_BENCH_RELAY_CASES:-oneway twoway many idle}
have() {
	[ "$1" = socat ] && [ "${PP_BENCH_SOCAT:-1}" = 0 ] && return 1
	command -v "$1" >/dev/null 2>&1
}
want() { [[ " $CASES " == *" $1 "* ]]; }

TMP=
BG=()
cleanup() {
	local p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
	BG=()
	[ -n "$TMP" ] && rm -rf -- "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if [ "$(stat -c %s -- "$DATA" 2>/dev/null)" != "$BYTES" ]; then
	echo "making $DATA ($MB MiB from /dev/urandom, kept for later runs)"
	head -c "$BYTES" /dev/urandom >"$DATA.$$" && mv -f -- "$DATA.$$" "$DATA" ||
		{ echo "relay.sh: cannot make $DATA" >&2; rm -f -- "$DATA.$$"; exit 1; }
fi
dd if="$DATA" of=/dev/null bs=1M status=none || { echo "relay.sh: cannot read $DATA" >&2; exit 1; }
TMP=$(mktemp -d /tmp/pagepipe-relay-bench.XXXXXX) || exit 1

# bg NAME CMD...: start in the background; PID in $pid, the first line of
# its standard output (a port) in $port.
pid= port=
bg() {
	local name=$1 i
	shift
	"$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	pid=$!
	BG+=("$pid")
	port=
	for ((i = 0; i < 200; i++)); do
		port=$(head -n 1 "$TMP/$name.out" 2>/dev/null | grep -Eo '[0-9]+$')
		[ -n "$port" ] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "relay.sh: $name did not start: $(head -c 300 "$TMP/$name.err")" >&2
	return 1
}

stop() {
	local p keep=()
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	for p in "${BG[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	BG=("${keep[@]}")
}

# Is something listening on 127.0.0.1:$1?  From /proc: asking must not connect.
listening() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
		/proc/net/tcp 2>/dev/null
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 10000))
}

# socat prints no port: give it a free one and wait until it listens.
bg_socat() {
	local name=$1 lport i
	shift
	lport=$(free_port)
	# socat's listen backlog is 5 unless told: 100 connects at once would
	# overflow it and lose connections.  The other relays listen with 4096.
	socat "$@" "TCP-LISTEN:$lport,fork,reuseaddr,backlog=4096" "TCP:127.0.0.1:$SPORT" \
		>"$TMP/$name.out" 2>"$TMP/$name.err" &
	pid=$!
	BG+=("$pid")
	port=$lport
	for ((i = 0; i < 200; i++)); do
		listening "$lport" && return 0
		sleep 0.05
	done
	echo "relay.sh: $name did not start: $(head -c 300 "$TMP/$name.err")" >&2
	return 1
}

# CPU ticks of a process and of its reaped children.
cpu() { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# Wait until a forking relay has reaped the children of the last run, so
# that their CPU is in cutime and cstime.
reaped() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -z "$(cat /proc/"$1"/task/*/children 2>/dev/null | tr -d ' \n')" ] && return 0
		sleep 0.05
	done
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "" }'; }

ROWS=(bare socatb socat pp pp1)
declare -A LABEL=([bare]="bare splice loop (1 MiB kernel pipe)" [socatb]="socat -b 1048576"
	[socat]="socat (default 8 KiB)" [pp]="pagepipe relay" [pp1]="pagepipe relay -j 1")
declare -A RPID RPORT

start_relays() {
	RPID=() RPORT=()
	if bg bare "$BARE" "$SPORT"; then RPID[bare]=$pid RPORT[bare]=$port; fi
	if bg pp "$PP" relay --no-progress 127.0.0.1:0 "127.0.0.1:$SPORT"; then
		RPID[pp]=$pid RPORT[pp]=${port}
	fi
	if bg pp1 "$PP" relay -j 1 --no-progress 127.0.0.1:0 "127.0.0.1:$SPORT"; then
		RPID[pp1]=$pid RPORT[pp1]=${port}
	fi
	if have socat; then
		if bg_socat socatb -b 1048576; then RPID[socatb]=$pid RPORT[socatb]=$port; fi
		if bg_socat socat; then RPID[socat]=$pid RPORT[socat]=$port; fi
	fi
}

stop_relays() {
	local r
	for r in "${!RPID[@]}"; do stop "${RPID[$r]}"; done
	RPID=() RPORT=()
}

# section TITLE CONNS PER_CONN BACK: every relay, RUNS times in turn.
section() {
	local title=$1 conns=$2 per=$3 back=$4 moved run r c0 c1 ns mbs ms base_mbs base_ms note
	moved=$((conns * (per + back)))
	echo
	echo "-- $title"
	if [ "$back" -gt 0 ]; then
		bg server "$PEER" server "$DATA" "$back" || return
	else
		bg server "$PEER" server || return
	fi
	SPORT=$port
	SERVER=$pid
	start_relays
	for r in "${ROWS[@]}"; do : >"$TMP/$r.mbs"; : >"$TMP/$r.ms"; : >"$TMP/$r.fail"; done
	for ((run = 0; run < RUNS; run++)); do
		for r in "${ROWS[@]}"; do
			[ -n "${RPID[$r]:-}" ] || continue
			c0=$(cpu "${RPID[$r]}")
			if ! ns=$("$PEER" client "${RPORT[$r]}" "$conns" "$DATA" "$per" "$back" 2>"$TMP/client.err"); then
				head -n 1 "$TMP/client.err" >>"$TMP/$r.fail"
				reaped "${RPID[$r]}"
				continue
			fi
			reaped "${RPID[$r]}"
			c1=$(cpu "${RPID[$r]}")
			awk -v b="$moved" -v ns="$ns" 'BEGIN { printf "%.1f\n", b * 1000 / ns }' >>"$TMP/$r.mbs"
			awk -v b="$moved" -v t=$((c1 - c0)) -v hz="$HZ" \
				'BEGIN { printf "%.0f\n", t * 1000 / hz / (b / 1073741824) }' >>"$TMP/$r.ms"
		done
	done
	stop_relays
	stop "$SERVER"
	base_mbs=$(median <"$TMP/bare.mbs")
	base_ms=$(median <"$TMP/bare.ms")
	printf '%-38s %9s %12s %10s %10s\n' "relay" "MB/s" "CPU ms/GiB" "MB/s / bare" "CPU / bare"
	for r in "${ROWS[@]}"; do
		if [[ $r == socat* ]] && ! have socat; then
			printf '%-38s %9s   %s\n' "${LABEL[$r]}" skipped "(socat not installed, or PP_BENCH_SOCAT=0)"
			continue
		fi
		note=
		if [ -s "$TMP/$r.fail" ]; then
			note="  ($(wc -l <"$TMP/$r.fail") of $RUNS runs failed: $(head -n 1 "$TMP/$r.fail" | head -c 120))"
		fi
		if [ ! -s "$TMP/$r.mbs" ]; then
			printf '%-38s %9s %s\n' "${LABEL[$r]}" failed "$note"
			continue
		fi
		mbs=$(median <"$TMP/$r.mbs")
		ms=$(median <"$TMP/$r.ms")
		awk -v l="${LABEL[$r]}" -v a="$mbs" -v c="$ms" -v ba="$base_mbs" -v bc="$base_ms" -v n="$note" 'BEGIN {
			printf "%-38s %9.0f %12.0f %10s %10s%s\n", l, a, c,
				(ba > 0 ? sprintf("%.2fx", a / ba) : "-"), (bc > 0 ? sprintf("%.2fx", c / bc) : "-"), n
		}'
	done
}

# RSS and PSS in kB, summed over a process and its children, and how many.
mem_of() {
	local pids
	pids=$(echo "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null))
	set -- $pids
	echo "$(cd /proc && awk '$1 == "VmRSS:" { s += $2 } END { print s + 0 }' $(printf '%s/status ' "$@") 2>/dev/null)" \
		"$(cd /proc && awk '$1 == "Pss:" { s += $2 } END { print s + 0 }' $(printf '%s/smaps_rollup ' "$@") 2>/dev/null)" \
		"$#"
}

# idle_one LABEL PORT PID: IDLE connections through the relay, each echoed
# once, then its memory; again after 3 s of quiet.
idle_one() {
	local label=$1 rport=$2 rpid=$3 m0 m1 m2 cpid i
	m0=$(mem_of "$rpid")
	rm -f "$TMP/ctl"
	mkfifo "$TMP/ctl"
	"$PEER" idle "$rport" "$IDLE" <"$TMP/ctl" >"$TMP/idle.out" 2>"$TMP/idle.err" &
	cpid=$!
	BG+=("$cpid")
	exec 9>"$TMP/ctl"
	for ((i = 0; i < 3000; i++)); do
		grep -q ready "$TMP/idle.out" && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q ready "$TMP/idle.out"; then
		printf '%-38s %s\n' "$label" "failed: $(head -c 200 "$TMP/idle.err" | tr '\n' ' ')"
		exec 9>&-
		stop "$cpid"
		return
	fi
	m1=$(mem_of "$rpid")
	sleep 3
	m2=$(mem_of "$rpid")
	exec 9>&-
	wait "$cpid" 2>/dev/null
	set -- $m0 $m1 $m2
	awk -v l="$label" -v r0="$1" -v r1="$4" -v p1="$5" -v n1="$6" -v r2="$7" -v p2="$8" -v c="$IDLE" 'BEGIN {
		printf "%-38s %10.1f %10.1f %10.1f %10.1f %7d %10.2f\n", l, r0 / 1024, r1 / 1024, p1 / 1024,
			r2 / 1024, n1, (r1 - r0) / c
	}'
}

echo
echo "== relay.sh: pagepipe relay against a bare splice loop and socat, 127.0.0.1 =="
echo "$MB MiB, sendfile sender, discarding receiver; medians of $RUNS interleaved runs; relay CPU = utime + stime (+ reaped children for socat)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) CPUs"
if [ "${PP_BENCH_SOCAT:-1}" = 0 ]; then
	echo "socat left out (PP_BENCH_SOCAT=0)"
elif ! have socat; then
	echo "socat not installed: its rows are skipped (apt-get install -y socat)"
fi

want oneway && section "one-way, 1 connection, $MB MiB" 1 "$BYTES" 0
want twoway && section "two-way, 1 connection, $MB MiB each way at once" 1 "$BYTES" "$BYTES"
want many && section "one-way, 100 connections at once, $((BYTES / 100)) bytes each" 100 $((BYTES / 100)) 0
want idle || exit 0

# The relay holds two descriptors a connection and cannot go past the hard
# limit (raising it needs CAP_SYS_RESOURCE); the peers hold one each.
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$IDLE" -gt $(((hard - 64) / 2)) ]; then
	echo
	echo "(the open files hard limit is $hard: $(((hard - 64) / 2)) idle connections, not $IDLE)"
	IDLE=$(((hard - 64) / 2))
fi
echo
echo "-- $IDLE idle connections (each echoed one byte, then quiet); memory in MiB"
printf '%-38s %10s %10s %10s %10s %7s %10s\n' "relay" "RSS before" "RSS" "PSS" "RSS +3 s" "procs" "KiB/conn"
if bg hold "$PEER" hold; then
	SPORT=$port
	HOLD=$pid
	if bg pp "$PP" relay --no-progress 127.0.0.1:0 "127.0.0.1:$SPORT"; then
		idle_one "pagepipe relay" "$port" "$pid"
		stop "$pid"
	fi
	if have socat; then
		if bg_socat socat-idle; then
			idle_one "socat fork per connection" "$port" "$pid"
			stop "$pid"
		fi
	else
		printf '%-38s %s\n' "socat fork per connection" "skipped (socat not installed or left out)"
	fi
	stop "$HOLD"
fi
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); other work on the machine moves these numbers"
exit 0
