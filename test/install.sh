#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: `make install` into a DESTDIR gives a header, both libraries
# and a pkg-config file that an outside program compiles and links against;
# the shared library exports the public API and nothing internal.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

make -C "$top" -s install B="${B:-build}" DESTDIR="$dest" PREFIX=/usr >/dev/null ||
	fail "make install"
for f in usr/include/pagepipe.h usr/lib/libpagepipe.a usr/lib/libpagepipe.so \
	 usr/lib/libpagepipe.so.0 usr/lib/pkgconfig/libpagepipe.pc usr/bin/pagepipe; do
	[ -e "$dest/$f" ] || fail "missing $f"
done
# Every name a man page lists has a page: the extra names are .so links.
[ -f "$dest/usr/share/man/man3/pp_read.3" ] || fail "missing man3/pp_read.3"
[ "$(cat "$dest/usr/share/man/man3/pp_readv.3" 2>/dev/null)" = ".so man3/pp_read.3" ] ||
	fail "man3/pp_readv.3 is not a link to pp_read.3"
[ "$(cat "$dest/usr/share/man/man3/pp_close.3" 2>/dev/null)" = ".so man3/pp_pipe2.3" ] ||
	fail "man3/pp_close.3 is not a link to pp_pipe2.3"
if command -v man >/dev/null 2>&1; then
	MANPATH="$dest/usr/share/man" man -P cat pp_writev 2>/dev/null | grep -q pp_writev ||
		fail "man pp_writev does not show pp_write(3)"
fi
soname=$(readelf -d "$dest/usr/lib/libpagepipe.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libpagepipe.so.0 ] || fail "soname '$soname'"
internal=$(nm -D --defined-only "$dest/usr/lib/libpagepipe.so" | awk '{print $3}' | sed 's/@.*//' | grep -v '^pp_[a-z]' | grep -v '^PAGEPIPE' || true)
[ -z "$internal" ] || fail "exported beyond the API: $internal"
nm -D --defined-only "$dest/usr/lib/libpagepipe.so" | grep -q ' pp_splice@' || fail "pp_splice not exported"

cat > "$dest/prog.c" <<'C'
#include <pagepipe.h>
#include <string.h>
int main(void)
{
	struct pp_file *p[2];
	char buf[6];

	if (pp_pipe2(p, 0) || pp_write(p[1], "hello", 5) != 5 || pp_read(p[0], buf, 6) != 5)
		return 1;
	return memcmp(buf, "hello", 5) != 0;
}
C
export PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_LIBDIR="$dest/usr/lib/pkgconfig"
flags=$(pkg-config --cflags --libs libpagepipe) || fail "pkg-config"
cc -o "$dest/prog" "$dest/prog.c" $flags -Wl,-rpath,"$dest/usr/lib" || fail "compile: cc $flags"
"$dest/prog" || fail "program against the shared library"
cc -static-libgcc -o "$dest/prog-static" "$dest/prog.c" -I"$dest/usr/include" -D_GNU_SOURCE \
	"$dest/usr/lib/libpagepipe.a" -pthread || fail "static link"
"$dest/prog-static" || fail "program against the static library"
echo "install: ok"
