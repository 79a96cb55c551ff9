#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: the shared library loads with dlopen(3) after the program
# started (Python's ctypes, as a plugin host would), and works: a write and
# a read through a pagepipe, then a write after the reader closed, which
# gives EPIPE and raises SIGPIPE (ignored here, as Python does) through the
# thread-local flag the errno boundary reads.  That flag uses the
# initial-exec TLS model (wait.c), which a library loaded by dlopen() may
# only use while glibc has static TLS to spare: this is the check that it
# has.
set -u
b=${B:-build}
so=$b/libpagepipe.so
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$so" ] || fail "$so is not built"
command -v python3 >/dev/null || { echo "python3 is not installed"; exit 77; }
if ldd "$so" 2>/dev/null | grep -q 'lib[at]san'; then
	echo "a sanitizer build: its runtime must be loaded first, not by dlopen"
	exit 77
fi
python3 - "$so" <<'PY' || fail "the library loaded by dlopen"
import ctypes, errno, sys
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
P = ctypes.c_void_p
lib.pp_pipe2.argtypes = [ctypes.POINTER(P), ctypes.c_int]
lib.pp_write.argtypes = [P, ctypes.c_char_p, ctypes.c_size_t]
lib.pp_write.restype = ctypes.c_ssize_t
lib.pp_read.argtypes = [P, ctypes.c_char_p, ctypes.c_size_t]
lib.pp_read.restype = ctypes.c_ssize_t
lib.pp_close.argtypes = [P]
ends = (P * 2)()
assert lib.pp_pipe2(ends, 0) == 0, "pp_pipe2"
n = lib.pp_write(ends[1], b"hello, dlopen", 13)
assert n == 13, "pp_write returned %d, want 13" % n
buf = ctypes.create_string_buffer(64)
n = lib.pp_read(ends[0], buf, 64)
assert n == 13 and buf.raw[:13] == b"hello, dlopen", "pp_read returned %d: %r" % (n, buf.raw[:n])
assert lib.pp_close(ends[0]) == 0, "pp_close read end"
n = lib.pp_write(ends[1], b"x", 1)
e = ctypes.get_errno()
assert n == -1 and e == errno.EPIPE, "pp_write after the reader closed: %d errno %d, want -1 EPIPE" % (n, e)
assert lib.pp_close(ends[1]) == 0, "pp_close write end"
print("dlopen: ok")
PY
