#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: the pagepipe command's interface: --help, --version, usage
# errors (exit 2), and bad input (exit 1 with a message naming the path and
# the reason): missing files, directories, no permission, a full disk
# (/dev/full), bad sizes, copying a file onto itself.
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-errors.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0 skips=()
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC PATTERN CMD...: exit status RC and stderr matching PATTERN.
expect() {
	local want=$1 pat=$2; shift 2
	"$@" >"$T/out" 2>"$T/err" </dev/null
	local rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(head -c 300 "$T/err")"
	if [ -n "$pat" ] && ! grep -Eq -- "$pat" "$T/err"; then
		fail "'$*': stderr '$(head -c 300 "$T/err")' does not match '$pat'"
	fi
}

# --help and --version: stdout, exit 0.
for c in "" cat tee copy buffer relay; do
	# shellcheck disable=SC2086
	"$PP" $c --help >"$T/out" 2>"$T/err" || fail "pagepipe $c --help exited $?"
	grep -q '^Usage: pagepipe' "$T/out" || fail "pagepipe $c --help: no usage on stdout"
	[ -s "$T/err" ] && fail "pagepipe $c --help wrote to stderr"
done
"$PP" help cat | grep -q '^Usage: pagepipe cat' || fail "pagepipe help cat"
want="pagepipe $(sed -n 's/^#define PAGEPIPE_VERSION[[:space:]]*"\(.*\)"/\1/p' "$(dirname "$0")/../include/pagepipe.h")"
"$PP" --version | grep -q "^$want" || fail "--version is not '$want...': $("$PP" --version)"

# Usage errors: exit 2 and a pointer to --help.
expect 2 "Try 'pagepipe --help'" "$PP"
expect 2 "unknown command 'frobnicate'" "$PP" frobnicate
expect 2 "unrecognized option '--frob'" "$PP" --frob
expect 2 "unrecognized option '--frob'.*|Try 'pagepipe cat --help'" "$PP" cat --frob
expect 2 "invalid option|Try 'pagepipe tee --help'" "$PP" tee -z
expect 2 "missing operand" "$PP" copy onlyone
expect 2 "extra operand" "$PP" copy a b c
expect 2 "invalid number of bytes" "$PP" cat --bytes lots /dev/null
expect 2 "invalid buffer size" "$PP" buffer --size 3X
expect 2 "invalid buffer size" "$PP" buffer --size 2T
expect 2 "requires an argument" "$PP" buffer --size
expect 2 "missing operand" "$PP" relay 127.0.0.1:0
expect 2 "HOST:PORT" "$PP" relay nocolon 127.0.0.1:1

# Missing files and directories: the path and strerror, exit 1.
expect 1 "pagepipe cat: $T/nope: No such file or directory" "$PP" cat "$T/nope"
expect 1 "pagepipe cat: $T: Is a directory" "$PP" cat "$T"
expect 1 "pagepipe copy: $T/nope: No such file or directory" "$PP" copy "$T/nope" "$T/x"
[ -e "$T/x" ] && fail "copy of a missing file created the destination"
echo data > "$T/f"
expect 1 "pagepipe copy: $T/no/such/dir: No such file or directory" "$PP" copy "$T/f" "$T/no/such/dir"
expect 1 "pagepipe tee: $T/no/dir: No such file or directory" "$PP" tee "$T/no/dir"
expect 1 "same file" "$PP" copy "$T/f" "$T/f"
[ "$(cat "$T/f")" = data ] || fail "copy onto itself damaged the file"
expect 1 "input file is output file" sh -c "'$PP' cat '$T/f' >> '$T/f'"
[ "$(cat "$T/f")" = data ] || fail "cat f >> f damaged the file"
mkdir "$T/d"
"$PP" copy "$T/f" "$T/d" || fail "copy into a directory exited $?"
[ "$(cat "$T/d/f")" = data ] || fail "copy into a directory did not make d/f"
# A DST ending in a slash that is no directory: cp's "Not a directory".
expect 1 "pagepipe copy: $T/d/sub/: Not a directory" "$PP" copy "$T/f" "$T/d/sub/"
[ -e "$T/d/sub" ] && fail "copy to d/sub/ created d/sub"
expect 1 "pagepipe copy: $T/f/: Not a directory" "$PP" copy "$T/f" "$T/f/"
# Paths joined without a doubled slash, however DST ends.
expect 1 "^pagepipe copy: '$T/d/f' and '$T/d/f' are the same file\$" "$PP" copy "$T/d/f" "$T/d/"
expect 1 "^pagepipe copy: '$T/d/f' and '$T/d/f' are the same file\$" "$PP" copy "$T/d/f" "$T/d//"
mkdir -p "$T/e/f"
expect 1 "^pagepipe copy: $T/e/f: Is a directory\$" "$PP" copy "$T/f" "$T/e/"

# No permission.  Root reads everything, so drop to nobody where possible.
echo secret > "$T/locked"
chmod 000 "$T/locked"
chmod 755 "$T"
if [ "$(id -u)" != 0 ]; then
	expect 1 "locked: Permission denied" "$PP" cat "$T/locked"
	expect 1 "locked: Permission denied" "$PP" copy "$T/f" "$T/locked"
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups "$PP" --version >/dev/null 2>&1; then
	nob() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	expect 1 "pagepipe cat: $T/locked: Permission denied" nob "$PP" cat "$T/locked"
	expect 1 "pagepipe copy: $T/locked: Permission denied" nob "$PP" copy "$T/f" "$T/locked"
	expect 1 "pagepipe tee: $T/locked: Permission denied" nob "$PP" tee "$T/locked"
else
	skips+=("running as root and cannot switch to uid 65534 (setpriv): permission cases not tested")
fi

# A full disk: a clear message, exit 1, never success.
head -c 1048577 /dev/urandom > "$T/m"
expect 1 "pagepipe cat: write error.*: No space left on device" sh -c "'$PP' cat '$T/m' > /dev/full"
expect 1 "pagepipe cat: write error.*: No space left on device" sh -c "'$PP' cat --prefix x '$T/m' > /dev/full"
expect 1 "pagepipe cat: write error.*: No space left on device" sh -c "cat '$T/m' | '$PP' cat > /dev/full"
expect 1 "pagepipe copy: write error on /dev/full: No space left on device" "$PP" copy "$T/m" /dev/full
expect 1 "pagepipe buffer: write error.*: No space left on device" sh -c "'$PP' buffer < '$T/m' > /dev/full"
expect 1 "pagepipe tee: /dev/full: No space left on device" sh -c "'$PP' tee /dev/full < '$T/m' > '$T/teeout'"
cmp -s "$T/m" "$T/teeout" || fail "tee to /dev/full did not still fill its other output"
# A small file system, where one can be mounted: copy must fail, not claim success.
if [ "$(id -u)" = 0 ] && mkdir "$T/mnt" && mount -t tmpfs -o size=256k tmpfs "$T/mnt" 2>/dev/null; then
	expect 1 "pagepipe copy: write error on $T/mnt/m: No space left on device" "$PP" copy "$T/m" "$T/mnt/m"
	expect 1 "No space left on device" sh -c "'$PP' cat '$T/m' > '$T/mnt/c'"
	umount "$T/mnt"
else
	skips+=("cannot mount a small tmpfs: full file system tested with /dev/full only")
fi

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
for s in "${skips[@]}"; do echo "note: $s"; done
echo "all error cases behave"
exit 0
