#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe tee into several files and a pipe at once (sizes
# around page boundaries and a large one), -a appends, "-" is standard
# output again, outputs that are pipes into other programs; standard input
# from a pipe and from a file.  -i and --output-error[=MODE] as in GNU tee:
# a reader gone away and a full disk under each MODE, -p, and no option
# with SIGPIPE ignored.
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

# -i: an interrupt does not stop it (SIGINT at its default first, since a
# background job starts with it ignored); without -i it does.
if env --default-signal=INT true 2>/dev/null; then
	for opt in -i ""; do
		# shellcheck disable=SC2086
		{ sleep 1; printf 'late'; } | env --default-signal=INT "$PP" tee $opt "$T/int" > "$T/into" &
		pid=$!
		sleep 0.4
		kill -INT "$pid"
		wait "$pid"; rc=$?
		if [ -n "$opt" ]; then
			[ $rc = 0 ] && [ "$(cat "$T/int")" = late ] && [ "$(cat "$T/into")" = late ] ||
				fail "tee -i: SIGINT stopped it (exit $rc)"
		else
			[ $rc = 130 ] || fail "tee without -i: SIGINT gave exit $rc, not 130"
		fi
	done
else
	echo "note: env has no --default-signal: tee -i not tested"
fi

# --output-error=MODE with a reader that goes away after one byte.
head -c 4194304 /dev/urandom > "$T/big"
# oe MODE...: exit status, then stderr, of tee MODE... into "| head -c 1".
oe() {
	"$PP" tee "$@" "$T/oe" < "$T/big" 2>"$T/oe.err" | head -c 1 >/dev/null
	echo "${PIPESTATUS[0]}"
}
for m in --output-error=warn-nopipe --output-error -p --output-error=exit-nopipe; do
	rc=$(oe "$m")
	[ "$rc" = 0 ] || fail "tee $m, reader gone: exit $rc"
	[ -s "$T/oe.err" ] && fail "tee $m, reader gone: said '$(cat "$T/oe.err")'"
	cmp -s "$T/big" "$T/oe" || fail "tee $m, reader gone: the file did not get everything"
done
rc=$(oe --output-error=warn)
[ "$rc" = 1 ] || fail "tee --output-error=warn, reader gone: exit $rc"
grep -q '^pagepipe tee: standard output: Broken pipe$' "$T/oe.err" ||
	fail "tee --output-error=warn, reader gone: said '$(cat "$T/oe.err")'"
cmp -s "$T/big" "$T/oe" || fail "tee --output-error=warn, reader gone: the file did not get everything"
rc=$(oe --output-error=exit)
[ "$rc" = 1 ] || fail "tee --output-error=exit, reader gone: exit $rc"
grep -q 'standard output: Broken pipe' "$T/oe.err" || fail "tee --output-error=exit: said '$(cat "$T/oe.err")'"
# No option, SIGPIPE ignored: as GNU tee, that output is dropped in silence.
rc=$( (trap '' PIPE; oe) )
[ "$rc" = 0 ] || fail "tee with SIGPIPE ignored, reader gone: exit $rc"
[ -s "$T/oe.err" ] && fail "tee with SIGPIPE ignored, reader gone: said '$(cat "$T/oe.err")'"
cmp -s "$T/big" "$T/oe" || fail "tee with SIGPIPE ignored: the file did not get everything"

# A full disk: the exit modes stop at once, the warn modes go on.
for m in exit exit-nopipe; do
	"$PP" tee --output-error=$m /dev/full "$T/full" < "$T/big" > /dev/null 2>"$T/oe.err"; rc=$?
	[ $rc = 1 ] || fail "tee --output-error=$m /dev/full: exit $rc"
	grep -q '^pagepipe tee: /dev/full: No space left on device$' "$T/oe.err" ||
		fail "tee --output-error=$m /dev/full: said '$(cat "$T/oe.err")'"
	[ "$(stat -c %s "$T/full")" -lt 4194304 ] || fail "tee --output-error=$m /dev/full: went on"
done
for m in warn warn-nopipe; do
	"$PP" tee --output-error=$m /dev/full "$T/full" < "$T/big" > /dev/null 2>"$T/oe.err"; rc=$?
	[ $rc = 1 ] || fail "tee --output-error=$m /dev/full: exit $rc"
	cmp -s "$T/big" "$T/full" || fail "tee --output-error=$m /dev/full: the file did not get everything"
done
"$PP" tee --output-error=bogus < /dev/null > /dev/null 2>"$T/oe.err"; rc=$?
[ $rc = 2 ] || fail "tee --output-error=bogus: exit $rc, not 2"
grep -q "invalid argument 'bogus' for '--output-error'" "$T/oe.err" ||
	fail "tee --output-error=bogus: said '$(cat "$T/oe.err")'"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "tee outputs all byte-exact"
exit 0
