#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe buffer takes sizes above 2 GiB and a percentage of
# physical memory (as mbuffer -m 10%), refuses what is out of range with
# a usage error, and its progress shows the input's and the output's rates
# apart.
set -u
B=${B:-build}
PP="$B/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-buffer.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
sum() { sha256sum | cut -d' ' -f1; }

head -c 3000000 /dev/urandom > "$T/in"
want=$(sum < "$T/in")
# The memory is taken as it fills, so a large buffer costs nothing here.
for s in 3G 4G 1T 10% 1% 90% 64K 4096; do
	got=$("$PP" buffer --size "$s" < "$T/in" 2>"$T/err" | sum)
	[ "$got" = "$want" ] || fail "buffer --size $s: wrong bytes: $(cat "$T/err")"
done
for s in 0% 91% 100% 10.5% %  -1% 2T 1025G 4095 3X; do
	"$PP" buffer --size "$s" < /dev/null > /dev/null 2>"$T/err"; rc=$?
	[ $rc = 2 ] || fail "buffer --size $s: exit $rc, not 2"
	grep -q "invalid buffer size: '$s'" "$T/err" || fail "buffer --size $s: said '$(cat "$T/err")'"
done

# Progress, one line a second into a file: the input's rate and the output's.
{ head -c 1048576 /dev/zero; sleep 1.5; head -c 1048576 /dev/zero; } |
	"$PP" buffer --progress > /dev/null 2>"$T/err"
grep -Eq 'in [0-9.]+[KMGT]?i?B/s out [0-9.]+[KMGT]?i?B/s' "$T/err" ||
	fail "buffer --progress: no separate in and out rates: $(cat "$T/err")"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "buffer sizes and rates"
exit 0
