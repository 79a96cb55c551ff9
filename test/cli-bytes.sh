#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe cat, copy and buffer are byte-exact (sha256sum) for
# sizes 0, 1, 4095, 4096, 4097, 1 MiB + 1 and 256 MiB, into a pipe, a file,
# a TCP socket and /dev/null, from a file and from a pipe; --prefix and
# --bytes produce exactly the seed's output.
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
command -v sha256sum >/dev/null || { echo "sha256sum missing"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-bytes.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
sum() { sha256sum | cut -d' ' -f1; }

# A TCP sink on 127.0.0.1: prints its port, then the sha256 of one connection.
have_py=0
command -v python3 >/dev/null && have_py=1
cat > "$T/sink.py" <<'PY'
import hashlib, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
h = hashlib.sha256()
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
print(h.hexdigest(), flush=True)
PY

# Write through a socket: stdout of the command is a connected TCP socket.
# The sink writes to a file, not a coproc: bash unsets a coproc's array as
# soon as it exits, which a fast sink did before its hash was read.
# Each call gets a file of its own, made empty before the sink starts: a
# shared one could still show the previous sink's port to the first look.
to_socket() {
	local out=$1; shift
	local port= rc pid so
	so=$(mktemp "$T/sink.XXXXXX")
	python3 "$T/sink.py" > "$so" &
	pid=$!
	for _ in $(seq 1 400); do
		port=$(grep -m 1 -E '^[0-9]+$' "$so" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.05
	done
	if [ -z "$port" ]; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		echo "to_socket: the sink never said its port" >&2
		return 1
	fi
	"$@" >/dev/tcp/127.0.0.1/"$port"
	rc=$?
	wait "$pid"
	sed -n 2p "$so" > "$out"
	rm -f "$so"
	return $rc
}

sizes="0 1 4095 4096 4097 1048577 268435456"
for n in $sizes; do
	f="$T/in.$n"
	head -c "$n" /dev/urandom > "$f"
	want=$(sum < "$f")

	# cat: file into a pipe, a file, a socket, /dev/null
	got=$("$PP" cat "$f" | sum)
	[ "$got" = "$want" ] || fail "cat $n into a pipe"
	"$PP" cat "$f" > "$T/out" || fail "cat $n into a file: exit $?"
	[ "$(sum < "$T/out")" = "$want" ] || fail "cat $n into a file"
	"$PP" cat "$f" > /dev/null || fail "cat $n into /dev/null: exit $?"
	if [ $have_py = 1 ]; then
		to_socket "$T/sock" "$PP" cat "$f" || fail "cat $n into a socket: exit $?"
		[ "$(cat "$T/sock")" = "$want" ] || fail "cat $n into a socket"
	fi

	# cat: a pipe on both sides, and a pipe into a file
	got=$(cat "$f" | "$PP" cat | sum)
	[ "$got" = "$want" ] || fail "cat $n pipe to pipe"
	cat "$f" | "$PP" cat - > "$T/out" || fail "cat $n pipe to file: exit $?"
	[ "$(sum < "$T/out")" = "$want" ] || fail "cat $n pipe to file"
	# A file on standard input, with its position honoured.
	got=$("$PP" cat < "$f" | sum)
	[ "$got" = "$want" ] || fail "cat $n stdin file"

	# copy: file to file, file to a pipe, a pipe to a file, to a socket
	"$PP" copy "$f" "$T/copy" || fail "copy $n: exit $?"
	[ "$(sum < "$T/copy")" = "$want" ] || fail "copy $n file to file"
	got=$("$PP" copy "$f" - | sum)
	[ "$got" = "$want" ] || fail "copy $n to stdout pipe"
	cat "$f" | "$PP" copy - "$T/copy2" || fail "copy $n stdin: exit $?"
	[ "$(sum < "$T/copy2")" = "$want" ] || fail "copy $n pipe to file"
	if [ $have_py = 1 ]; then
		to_socket "$T/sock" "$PP" copy "$f" - || fail "copy $n into a socket: exit $?"
		[ "$(cat "$T/sock")" = "$want" ] || fail "copy $n into a socket"
	fi

	# buffer: pipe to pipe, file to file, a small buffer so that it wraps
	got=$(cat "$f" | "$PP" buffer --size 1M | sum)
	[ "$got" = "$want" ] || fail "buffer $n pipe to pipe"
	"$PP" buffer -s 64K < "$f" > "$T/buf" || fail "buffer $n: exit $?"
	[ "$(sum < "$T/buf")" = "$want" ] || fail "buffer $n file to file"
	rm -f "$T/out" "$T/copy" "$T/copy2" "$T/buf"
	[ "$n" -ge 268435456 ] || continue
	# The big one also through a 512 MiB buffer, above the default limit.
	got=$(cat "$f" | "$PP" buffer --size 512M | sum)
	[ "$got" = "$want" ] || fail "buffer --size 512M of $n"
	rm -f "$f"
done

# Several files in one cat, a missing one in the middle: the rest still come.
printf 'a' > "$T/a"; printf 'bc' > "$T/b"
got=$("$PP" cat "$T/a" "$T/missing" - "$T/b" < "$T/a" 2>"$T/err"); rc=$?
[ "$got" = "aabc" ] || fail "cat of several files gave '$got'"
[ $rc = 1 ] || fail "cat with a missing file exited $rc, not 1"
grep -q "missing: No such file or directory" "$T/err" || fail "no message for the missing file"

# The seed: "hello: " then exactly the first 1000 bytes.
src=$(dirname "$0")/../include/pagepipe.h
want=$( { printf 'hello: '; head -c 1000 "$src"; } | sum)
got=$("$PP" cat --prefix 'hello: ' --bytes 1000 "$src" | sum)
[ "$got" = "$want" ] || fail "cat --prefix --bytes into a pipe"
"$PP" cat --prefix 'hello: ' --bytes 1000 "$src" > "$T/seed"
[ "$(sum < "$T/seed")" = "$want" ] || fail "cat --prefix --bytes into a file"
got=$(head -c 5000 "$src" | "$PP" cat --prefix 'hello: ' --bytes 1K | sum)
[ "$got" = "$( { printf 'hello: '; head -c 1024 "$src"; } | sum)" ] || fail "cat --bytes 1K from a pipe"
got=$("$PP" cat --bytes 0 "$src" | wc -c)
[ "$got" = 0 ] || fail "cat --bytes 0 gave $got bytes"
[ "$("$PP" cat --bytes 3 /dev/zero | wc -c)" = 3 ] || fail "cat --bytes 3 /dev/zero"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
[ $have_py = 1 ] || { echo "python3 missing: socket outputs not tested"; exit 77; }
echo "all byte-exact"
exit 0
