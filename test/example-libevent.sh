#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: examples/libevent-relay.c, pagepipes driven from a libevent loop
# through pp_file_event_fd(): 64 MiB relayed between threads, every byte
# checked, no wakeup with nothing to do.  Skips when pkg-config does not
# find libevent (Debian: libevent-dev).
set -u
b=${B:-build}
ex=$b/examples/libevent-relay
if [ ! -x "$ex" ]; then
	if pkg-config --exists libevent 2>/dev/null; then
		echo "FAIL: pkg-config finds libevent but $ex was not built"
		exit 1
	fi
	echo "libevent not found by pkg-config (install libevent-dev)"
	exit 77
fi
"$ex" 64
