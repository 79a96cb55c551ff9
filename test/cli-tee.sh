#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe tee into several files and a pipe at once (sizes
# around page boundaries and a large one), -a appends, "-" is standard
# output again, outputs that are pipes into other programs; standard input
# from a pipe and from a file.
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-tee.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
sum() { sha256sum | cut -d' ' -f1; }

for n in 0 1 4095 4096 4097 1048577 67108864; do
	head -c "$n" /dev/urandom > "$T/in"
	want=$(sum < "$T/in")
	# From a pipe, to three files and the pipe on stdout.
	got=$(cat "$T/in" | "$PP" tee "$T/a" "$T/b" "$T/c" | sum)
	[ "$got" = "$want" ] || fail "tee $n: the pipe on stdout"
	for o in a b c; do
		[ "$(sum < "$T/$o")" = "$want" ] || fail "tee $n: file $o"
	done
	# From a file, stdout a file too.
	"$PP" tee "$T/d" < "$T/in" > "$T/e" || fail "tee $n from a file: exit $?"
	[ "$(sum < "$T/d")" = "$want" ] || fail "tee $n from a file: file d"
	[ "$(sum < "$T/e")" = "$want" ] || fail "tee $n from a file: stdout"
	# No FILE at all: a plain pass-through.
	got=$("$PP" tee < "$T/in" | sum)
	[ "$got" = "$want" ] || fail "tee $n with no FILE"
done

# -a appends; without it files are truncated.
printf 'old\n' > "$T/app"
printf 'new\n' | "$PP" tee -a "$T/app" > /dev/null
[ "$(cat "$T/app")" = "$(printf 'old\nnew')" ] || fail "tee -a did not append: $(cat "$T/app")"
printf 'x\n' | "$PP" tee "$T/app" > /dev/null
[ "$(cat "$T/app")" = x ] || fail "tee without -a did not truncate"

# "-" is standard output again, as in coreutils tee: two copies.
got=$(printf 'ab' | "$PP" tee -)
[ "$got" = abab ] || fail "tee - gave '$got'"

# Into a pipe that feeds another pagepipe, and a pipe into a file via process substitution.
head -c 3000000 /dev/urandom > "$T/in"
want=$(sum < "$T/in")
"$PP" tee >("$PP" cat > "$T/ps") < "$T/in" | "$PP" cat > "$T/po"
sleep 0.2
[ "$(sum < "$T/po")" = "$want" ] || fail "tee into a pipe of pagepipe cat"
for i in 1 2 3 4 5 6 7 8 9 10; do
	[ "$(sum < "$T/ps")" = "$want" ] && break
	sleep 0.2
done
[ "$(sum < "$T/ps")" = "$want" ] || fail "tee into a process-substitution pipe"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "tee outputs all byte-exact"
exit 0
