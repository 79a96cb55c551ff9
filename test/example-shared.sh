#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: examples/shared-send.c and shared-recv.c, two unrelated
# processes (neither forked from the other) on one PP_O_SHARED pagepipe:
# the read end passed over a Unix socket (pp_export, SCM_RIGHTS,
# pp_import), 32 MiB written and read, the same count and checksum on both
# sides; then a receiver that dies: the sender dies of SIGPIPE.  And
# examples/shared-stream, the demo of a forked pair (make demo).
set -u
b=${B:-build}
send=$b/examples/shared-send
recv=$b/examples/shared-recv
for x in "$send" "$recv"; do
	[ -x "$x" ] || { echo "FAIL: $x not built"; exit 1; }
done
dir=$(mktemp -d /tmp/pagepipe-shared.XXXXXX)
trap 'rm -rf "$dir"; kill $rpid 2>/dev/null' EXIT
rpid=
sock=$dir/sock

start_recv() {
	"$recv" "$sock" >"$dir/recv.out" 2>"$dir/recv.err" &
	rpid=$!
	for _ in $(seq 200); do
		[ -S "$sock" ] && return 0
		sleep 0.01
	done
	echo "FAIL: shared-recv did not listen"; exit 1
}

start_recv
timeout 60 "$send" "$sock" 32M >"$dir/send.out" || { echo "FAIL: shared-send: $?"; exit 1; }
timeout 60 tail --pid="$rpid" -f /dev/null
wait "$rpid" || { echo "FAIL: shared-recv: $(cat "$dir/recv.err")"; exit 1; }
if ! cmp -s "$dir/send.out" "$dir/recv.out" || ! grep -q "^33554432 bytes" "$dir/recv.out"; then
	echo "FAIL: sender says '$(cat "$dir/send.out")', receiver '$(cat "$dir/recv.out")'"
	exit 1
fi

# The receiver killed while the sender still writes: SIGPIPE (the sender
# does not ignore it, as a writer to a kernel pipe would not), not a hang.
start_recv
timeout 60 "$send" "$sock" 100G >"$dir/send.out" 2>"$dir/send.err" &
spid=$!
sleep 0.2
kill -9 "$rpid"
wait "$rpid" 2>/dev/null
wait "$spid"
rc=$?
if [ "$rc" != 141 ]; then
	echo "FAIL: after the receiver died the sender exited $rc: $(cat "$dir/send.err")"
	exit 1
fi
# examples/shared-stream (make demo): 16 MiB through each pipe, every byte checked.
out=$(timeout 60 "$b/examples/shared-stream" 16) || { echo "FAIL: shared-stream: $out"; exit 1; }
echo "$out" | grep -q "^pagepipe / kernel" || { echo "FAIL: shared-stream printed: $out"; exit 1; }
echo "32 MiB passed between unrelated processes; SIGPIPE once the reader died; shared-stream ran"
exit 0
