#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make demo: the seed's demonstration, then pagepipe cat against cat for a
# large file into a pipe, then two processes streaming through a kernel pipe
# and through a shared pagepipe (examples/shared-stream).  B is the build directory (binaries at $B/pagepipe);
# DEMO_FILE and DEMO_MB choose the large file (default /tmp, 512 MiB, kept
# between runs so that only the first run pays for making it).
set -eu
B=${B:-build}
PP="$B/pagepipe"
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/include/pagepipe.h"
mb=${DEMO_MB:-512}
big=${DEMO_FILE:-/tmp/pagepipe-demo-${mb}M}

echo "== The 2005 demonstration: a plain write, then a splice from the file =="
echo "\$ pagepipe cat --prefix 'hello: ' --bytes 1000 include/pagepipe.h | cat"
"$PP" cat --prefix 'hello: ' --bytes 1000 "$src" | cat
echo
echo "(\"hello: \" and the first 1000 bytes, on the ordinary pipe the shell made.)"
echo

if [ ! -f "$big" ] || [ "$(stat -c %s "$big")" != $((mb << 20)) ]; then
	echo "making $big ($mb MiB, once)..."
	head -c $((mb << 20)) /dev/urandom > "$big.tmp" && mv "$big.tmp" "$big"
fi
cat "$big" > /dev/null	# both sides start from the page cache

# Best of three wall-clock runs, in seconds.
best() {
	local b=999999999999999 t0 t1 t
	for _ in 1 2 3; do
		t0=$(date +%s%N)
		bash -c "$1" >/dev/null 2>&1
		t1=$(date +%s%N)
		t=$((t1 - t0))
		if [ $t -lt $b ]; then b=$t; fi
	done
	echo "$b"
}
mbps() { echo "$1" | awk -v mb="$mb" '{ printf "%8.0f", mb * 1048576 / 1e6 / ($1 / 1e9) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%5.1fx", b / a }'; }

echo "== $mb MiB file into a pipe, wall time, best of 3 =="
printf '%-34s %10s %10s %8s\n' "reader" "cat MB/s" "pagepipe" "ratio"
for reader in "dd of=/dev/null bs=1M" "'$PP' cat >/dev/null"; do
	label=${reader//\'$PP\'/pagepipe}
	c=$(best "cat '$big' | $reader")
	p=$(best "'$PP' cat '$big' | $reader")
	printf '%-34s %10s %10s %8s\n' "| $label" "$(mbps "$c")" "$(mbps "$p")" "$(ratio "$p" "$c")"
done
echo
echo "(pagepipe cat splices the file's pages into the pipe: no copy through its"
echo " own memory.  The second reader splices them on to /dev/null as well.)"

echo
echo "== Two processes, one stream: a forked child writes 1 GiB in 64 KiB writes =="
echo "\$ shared-stream 1024    (examples/shared-stream.c; best of 3 each)"
"$B/examples/shared-stream" 1024
echo
echo "(The pagepipe made with PP_O_SHARED keeps its ring and pages in a memfd"
echo " both processes map: a write is one copy into a shared page, a read one"
echo " copy out, and no system call when neither side has to wait.)"

echo
echo "== Two shells, one stream: $mb MiB file to file through a FIFO and cat, and through pagepipe send/recv =="
# The output file is made once at full size and rewritten in place (1<>),
# so that neither row pays for allocating its pages.
tmp=$(mktemp -d /tmp/pagepipe-demo.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp "$big" "$tmp/out"
mkfifo "$tmp/fifo"
f=$(best "cat '$tmp/fifo' 1<>'$tmp/out' & cat '$big' > '$tmp/fifo'; wait")
p=$(best "'$PP' recv '$tmp/sock' 1<>'$tmp/out' & '$PP' send -T 10 '$tmp/sock' < '$big'; wait")
printf '%-34s %10s %10s %8s\n' "" "FIFO MB/s" "send/recv" "ratio"
printf '%-34s %10s %10s %8s\n' "file -> file" "$(mbps "$f")" "$(mbps "$p")" "$(ratio "$p" "$f")"
cmp -s "$big" "$tmp/out" || { echo "send/recv: the output differs from the input"; exit 1; }
echo
echo "(\$ pagepipe recv SOCK > out   and   \$ pagepipe send SOCK < file: the"
echo " sender reads the file straight into pages the receiver maps, which it"
echo " writes straight out: two copies, where cat > fifo and cat fifo make four.)"
