#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: docs/reliability.md's fault matrix names only what exists:
# each row's test is a test/<name>.c (or .sh) and each sub-test it names is
# a function of that test; each `identifier` with an underscore that a row
# quotes (a function, a variable, a fault site) is in src/, include/ or
# test/.  The matrix is living, not a record of one run: no row carries a
# commit id or a date, which belong to the dated log below it (and that log
# may name code that is gone).
# shellcheck disable=SC2016  # the backquotes are Markdown, matched literally
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
doc=$top/docs/reliability.md
fail=0
bad() { echo "FAIL: $*"; fail=1; }

rows=$(sed -n '/^## The fault matrix/,/^## /p' "$doc" | grep -E '^\| [0-9]+ ')
[ -n "$rows" ] || { echo "FAIL: no matrix rows in $doc"; exit 1; }
while IFS= read -r row; do
	num=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $2); print $2}')
	echo "$row" | grep -Pq '\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b|\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b' &&
		bad "row $num carries a commit id or a date: move it to the log"
	test=$(echo "$row" | awk -F'|' '{print $(NF-1)}')
	# "name `sub`, `sub2`" or "name, name2": the test names are the bare words.
	names=$(echo "$test" | sed 's/`[^`]*`//g; s/,/ /g')
	for n in $names; do
		[ -f "$top/test/$n.c" ] || [ -f "$top/test/$n.sh" ] || bad "row $num: no test/$n.c"
	done
	first=$(echo "$names" | awk '{print $1}')
	for sub in $(echo "$test" | grep -o '`[^`]*`' | tr -d '`' | tr ',' ' '); do
		pat=${sub//\*/[a-z_]*}
		grep -Eq "^static int $pat\(void\)" "$top/test/$first.c" 2>/dev/null ||
			bad "row $num: $first has no sub-test $sub"
	done
	rest=$(echo "$row" | awk -F'|' '{for (i = 3; i < NF - 1; i++) printf "%s ", $i}')
	for id in $(echo "$rest" | grep -o '`[A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]*\(()\)\?`' | tr -d '`()'); do
		grep -rqw -- "$id" "$top/src" "$top/include" "$top/test"/*.[ch] ||
			bad "row $num: \`$id\` is nowhere in src/, include/ or test/"
	done
done <<<"$rows"
[ "$fail" -eq 0 ] && echo "docs-matrix: $(echo "$rows" | wc -l) rows checked"
exit "$fail"
