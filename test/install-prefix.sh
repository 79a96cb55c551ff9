#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: the installed libpagepipe.pc follows PREFIX, LIBDIR and
# INCDIR every time: `make install PREFIX=/opt/pp` after an install (or a
# build) with another PREFIX must not ship the .pc of the earlier one, and
# pkg-config then answers with the new directories.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
b=${B:-build}
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v pkg-config >/dev/null || { echo "pkg-config is not installed"; exit 77; }

# install DIR MAKE-ARGS...: make install into $dest/DIR.
install_to() {
	local d=$1
	shift
	make -C "$top" -s install B="$b" DESTDIR="$dest/$d" "$@" >"$dest/log" 2>&1 ||
		{ cat "$dest/log"; fail "make install $*"; }
}

# pc_says DIR PCDIR VAR WANT: the installed .pc, read by pkg-config, gives VAR=WANT.
pc_says() {
	local got
	got=$(PKG_CONFIG_LIBDIR="$dest/$1$2" pkg-config --variable="$3" libpagepipe) ||
		fail "pkg-config cannot read $dest/$1$2/libpagepipe.pc"
	[ "$got" = "$4" ] || fail "$1: $3 is '$got', want '$4' (make install $5)"
}

install_to a PREFIX=/usr
pc_says a /usr/lib/pkgconfig prefix /usr "PREFIX=/usr"
install_to b PREFIX=/opt/pp
pc_says b /opt/pp/lib/pkgconfig prefix /opt/pp "PREFIX=/opt/pp after PREFIX=/usr"
pc_says b /opt/pp/lib/pkgconfig libdir /opt/pp/lib "PREFIX=/opt/pp after PREFIX=/usr"
pc_says b /opt/pp/lib/pkgconfig includedir /opt/pp/include "PREFIX=/opt/pp after PREFIX=/usr"
install_to c PREFIX=/opt/pp LIBDIR=/opt/pp/lib64 INCDIR=/opt/pp/include/pp
pc_says c /opt/pp/lib64/pkgconfig libdir /opt/pp/lib64 "LIBDIR=/opt/pp/lib64"
pc_says c /opt/pp/lib64/pkgconfig includedir /opt/pp/include/pp "INCDIR=/opt/pp/include/pp"
[ -f "$dest/c/opt/pp/include/pp/pagepipe.h" ] || fail "INCDIR: no pagepipe.h in /opt/pp/include/pp"
[ -f "$dest/c/opt/pp/lib64/libpagepipe.a" ] || fail "LIBDIR: no libpagepipe.a in /opt/pp/lib64"
# The flags a user builds with name the directories the files went to.
flags=$(PKG_CONFIG_LIBDIR="$dest/c/opt/pp/lib64/pkgconfig" pkg-config --cflags --libs libpagepipe)
case " $flags " in
*" -I/opt/pp/include/pp "*" -L/opt/pp/lib64 "*) ;;
*) fail "pkg-config --cflags --libs: '$flags'";;
esac
# Back to the first PREFIX: the .pc changes back with it.
install_to d PREFIX=/usr
pc_says d /usr/lib/pkgconfig libdir /usr/lib "PREFIX=/usr again"
echo "install-prefix: ok"
