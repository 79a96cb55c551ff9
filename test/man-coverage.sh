#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: every name the installed libpagepipe.so exports (nm -D) has
# an installed man3 page, its own or a .so link to the page that documents
# it, and every link leads to a page that is installed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v nm >/dev/null || { echo "nm (binutils) is not installed"; exit 77; }

make -C "$top" -s install B="${B:-build}" DESTDIR="$dest" PREFIX=/usr >"$dest/log" 2>&1 ||
	{ cat "$dest/log"; fail "make install"; }
man3=$dest/usr/share/man/man3
exports=$(nm -D --defined-only "$dest/usr/lib/libpagepipe.so" | awk '{print $3}' |
	  sed 's/@.*//' | grep '^pp_' | sort -u)
[ -n "$exports" ] || fail "nm -D lists no pp_ names"
missing=
for n in $exports; do
	[ -f "$man3/$n.3" ] || missing="$missing $n"
done
[ -z "$missing" ] || fail "exported without a man3 page or alias:$missing"
for f in "$man3"/*.3; do
	target=$(sed -n 's/^\.so man3\///p' "$f")
	[ -z "$target" ] || [ -f "$man3/$target" ] ||
		fail "$(basename "$f") links to man3/$target, which is not installed"
done
echo "man-coverage: $(echo "$exports" | wc -l) exported names, each with a page"
