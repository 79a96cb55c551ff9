#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: the seed's demonstration on a terminal:
# `pagepipe cat --prefix 'hello: ' --bytes 1000 FILE | less` in a tmux
# pane, the screen read back with capture-pane: "hello: " and then the
# first 1000 bytes of FILE, on the ordinary pipe the shell made.
set -u
B=${B:-build}
PP="$(cd "$(dirname "${B:-build}/x")" && pwd)/pagepipe"
[ -x "$PP" ] || { echo "no $PP: build with make tools"; exit 77; }
command -v tmux >/dev/null || { echo "tmux missing (Debian package tmux): skipped"; exit 77; }
command -v less >/dev/null || { echo "less missing (Debian package less): skipped"; exit 77; }
T=$(mktemp -d /tmp/pp-cli-less.XXXXXX)
sock="pp-less-$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$T"' EXIT
src=$(cd "$(dirname "$0")/.." && pwd)/include/pagepipe.h

# The expected screen: what less shows of the same bytes, without the pipe trick.
{ printf 'hello: '; head -c 1000 "$src"; } | expand > "$T/want"
lines=$(wc -l < "$T/want")
rows=$((lines + 10))

tmux -L "$sock" -f /dev/null new-session -d -x 200 -y "$rows" \
	"env LESS= LESSOPEN= TERM=screen sh -c \"'$PP' cat --prefix 'hello: ' --bytes 1000 '$src' | less\""
screen=""
for _ in $(seq 1 50); do
	sleep 0.1
	screen=$(tmux -L "$sock" capture-pane -p 2>/dev/null) || continue
	grep -q '(END)' <<<"$screen" && break
done
printf '%s\n' "$screen" > "$T/screen"
# less ends the text with "(END)" on its prompt line; what is above it is the file.
got=$(sed -n '/(END)/q;p' "$T/screen" | sed -e 's/[[:space:]]*$//')
want=$(sed -e 's/[[:space:]]*$//' "$T/want")
if [ "$got" != "$want" ]; then
	echo "FAIL: the screen is not 'hello: ' and the first 1000 bytes"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -20
	exit 1
fi
head -n 1 "$T/screen" | grep -q '^hello: /\* SPDX-License-Identifier: MIT \*/' || {
	echo "FAIL: first line: $(head -n 1 "$T/screen")"; exit 1; }
tmux -L "$sock" send-keys q
echo "less shows hello: and the first 1000 bytes ($lines lines)"
exit 0
