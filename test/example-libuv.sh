#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: examples/libuv-relay.c, pagepipes driven from a libuv loop
# through pp_file_event_fd(): 64 MiB relayed between threads, every byte
# checked, no wakeup with nothing to do.  Skips when pkg-config does not
# find libuv (Debian: libuv1-dev).
set -u
b=${B:-build}
ex=$b/examples/libuv-relay
if [ ! -x "$ex" ]; then
	if pkg-config --exists libuv 2>/dev/null; then
		echo "FAIL: pkg-config finds libuv but $ex was not built"
		exit 1
	fi
	echo "libuv not found by pkg-config (install libuv1-dev)"
	exit 77
fi
"$ex" 64
