# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# relay-lib.sh - the setup every test/cli-relay*.sh shares; they source it
# after `set -u`.  Not a test itself: the Makefile leaves test/*-lib.sh out
# of TEST_SH.
#
# It runs the calling script twice, with one worker thread (RELAY_J=1)
# and then two (RELAY_J=2), where connections are spread over workers with
# an epoll instance each; skips (77) without the pagepipe binary or
# python3; and gives the script:
#   PP, PEER      the pagepipe binary under $B, test/relay-peer.py
#   T             a temporary directory, removed at exit
#   pids          background processes, killed at exit (file descriptor 3
#                 is closed first, for a control FIFO a script holds open)
#   fail MSG      report a failure and count it in $fails
#   start NAME CMD...
#                 run CMD in the background, its output in $T/NAME.out and
#                 $T/NAME.err, its pid added to pids; the port number that
#                 ends its first stdout line (a listener says it when it
#                 listens) goes into $port.  A failure if it does not
#                 come within 10 s.

if [ -z "${RELAY_J:-}" ]; then
	for j in 1 2; do
		echo "== relay -j $j"
		RELAY_J=$j bash "$0" "$@" || exit $?
	done
	exit 0
fi
B=${B:-build}
PP="$B/pagepipe"
# shellcheck disable=SC2034  # for the script that sources this
PEER=$(dirname "$0")/relay-peer.py
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing: relay tests need it"; exit 77; }
T=$(mktemp -d "/tmp/pp-$(basename "$0" .sh).XXXXXX")
pids=()
cleanup() {
	exec 2>/dev/null
	exec 3>&-
	for p in "${pids[@]}"; do kill -9 "$p"; done
	wait
	rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

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
