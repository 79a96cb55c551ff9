#!/bin/sh
# SPDX-License-Identifier: MIT
#
# aliases.sh DIR PAGE... - for every name a man3 PAGE's NAME section lists
# besides its own, write DIR/NAME.3 as a one-line ".so man3/PAGE.3", so that
# `man pp_readv` finds pp_read(3) (liburing ships its links the same way).
# With -l, print the alias names instead of writing them.
set -eu
list=false
[ "${1:-}" = -l ] && { list=true; shift; }
dir=$1
shift
for page in "$@"; do
	base=$(basename "$page" .3)
	# The line after .SH NAME: "a, b, \%c \- what they do".
	names=$(sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/\\%//g;s/,/ /g;p;q;}' "$page")
	for n in $names; do
		[ "$n" = "$base" ] && continue
		if $list; then
			echo "$n"
		else
			printf '.so man3/%s.3\n' "$base" > "$dir/$n.3"
		fi
	done
done
