#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Description: pagepipe relay with real clients and servers on 127.0.0.1:
# curl against python3 -m http.server, socat, large transfers both ways
# with a half-close in between, peers that close early (client and
# server), 100 connections open at once, and a target that stops reading.
set -u
# shellcheck source=relay-lib.sh
. "$(dirname "$0")/relay-lib.sh"
notes=()
sum() { sha256sum | cut -d' ' -f1; }

cat > "$T/peer.py" <<'PY'
import hashlib, os, socket, sys, threading

def serve(handler):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(256)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handler, args=(c,), daemon=True).start()

def hashecho(path):
    # Read to EOF (the relay's half-close), answer the hash, then send a file.
    def h(c):
        d = hashlib.sha256()
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            d.update(b)
        c.sendall((d.hexdigest() + "\n").encode())
        with open(path, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                c.sendall(b)
        c.close()
    return h

def echo(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.shutdown(socket.SHUT_WR)
    c.close()

def flood(c):
    # Streams until the peer goes away; the relay must survive that.
    buf = b"z" * 65536
    try:
        while True:
            c.sendall(buf)
    except OSError:
        pass
    c.close()

def slam(c):
    c.close()

def connect(port):
    return socket.create_connection(("127.0.0.1", int(port)), timeout=60)

def recv_all(c):
    out = []
    while True:
        b = c.recv(1 << 20)
        if not b:
            return b"".join(out)
        out.append(b)

def client_both(port, up, down):
    # Send a large file and half-close; expect its hash, then the other file.
    c = connect(port)
    def send():
        with open(up, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                c.sendall(b)
        c.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    data = recv_all(c)
    t.join()
    line, _, rest = data.partition(b"\n")
    want_up = hashlib.sha256(open(up, "rb").read()).hexdigest()
    want_down = hashlib.sha256(open(down, "rb").read()).hexdigest()
    ok = line.decode() == want_up and hashlib.sha256(rest).hexdigest() == want_down
    print("ok" if ok else "bad: up %s/%s down %d bytes" % (line[:16], want_up[:16], len(rest)))

def client_many(port, n):
    n = int(n)
    barrier = threading.Barrier(n, timeout=60)
    results = [None] * n
    def one(i):
        try:
            c = connect(port)
            payload = os.urandom(131072 + i)
            c.sendall(payload[:100])
            first = b""
            while len(first) < 100:
                first += c.recv(100 - len(first))
            barrier.wait()          # all n connections are open at once here
            c.sendall(payload[100:])
            c.shutdown(socket.SHUT_WR)
            results[i] = (first + recv_all(c)) == payload
            c.close()
        except Exception as e:
            results[i] = repr(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts: t.start()
    for t in ts: t.join()
    bad = [r for r in results if r is not True]
    print("ok" if not bad else "bad: %d of %d: %s" % (len(bad), n, bad[:3]))

def client_early(port):
    # Read a little of an endless stream, then close with unread data (a reset).
    c = connect(port)
    c.recv(10)
    c.close()
    print("ok")

def client_slammed(port):
    # The server closes at once: the client must see EOF, not hang.
    c = connect(port)
    c.settimeout(10)
    try:
        c.sendall(b"hello")
        print("ok" if recv_all(c) == b"" else "bad: data")
    except socket.timeout:
        print("bad: no EOF")
    except OSError:
        print("ok")

mode = sys.argv[1]
if mode == "hashecho": serve(hashecho(sys.argv[2]))
elif mode == "echo": serve(echo)
elif mode == "flood": serve(flood)
elif mode == "slam": serve(slam)
elif mode == "both": client_both(*sys.argv[2:5])
elif mode == "many": client_many(*sys.argv[2:4])
elif mode == "early": client_early(sys.argv[2])
elif mode == "slammed": client_slammed(sys.argv[2])
PY

relay_to() { start "relay$1" "$PP" relay -j "$RELAY_J" 127.0.0.1:0 "127.0.0.1:$1"; }

head -c 100000000 /dev/urandom > "$T/up"
head -c 120000000 /dev/urandom > "$T/down"

# Large transfers both ways, with the half-close carried through.
start hashecho python3 "$T/peer.py" hashecho "$T/down"; hport=$port
relay_to "$hport"; rport=$port
r=$(timeout 60 python3 "$T/peer.py" both "$rport" "$T/up" "$T/down")
[ "$r" = ok ] || fail "100 MB up, 120 MB down: $r"

# socat as the client: stdin up, half-close, the answer down.
if command -v socat >/dev/null; then
	timeout 60 socat -t 30 -T 60 - "TCP:127.0.0.1:$rport" < "$T/up" > "$T/socat.out"
	{ sum < "$T/up"; cat "$T/down"; } > "$T/socat.want"
	[ "$(head -n 1 "$T/socat.out")" = "$(sum < "$T/up")" ] || fail "socat: wrong hash of what it sent"
	[ "$(tail -c +66 "$T/socat.out" | sum)" = "$(sum < "$T/down")" ] || fail "socat: wrong data back"
else
	notes+=("socat missing (Debian package socat): socat client not tested")
fi

# curl against python3 -m http.server.
if command -v curl >/dev/null; then
	mkdir "$T/www"
	cp "$T/down" "$T/www/big.bin"
	(cd "$T/www" && exec python3 -u -m http.server --bind 127.0.0.1 0) > "$T/http.out" 2>&1 &
	pids+=($!)
	hp=
	for _ in $(seq 1 100); do
		hp=$(grep -Eo 'port [0-9]+' "$T/http.out" 2>/dev/null | head -n 1 | cut -d' ' -f2)
		[ -n "$hp" ] && break
		sleep 0.05
	done
	[ -n "$hp" ] || fail "http.server did not start: $(cat "$T/http.out")"
	relay_to "$hp"; cport=$port
	got=$(timeout 60 curl -fsS "http://127.0.0.1:$cport/big.bin" | sum)
	[ "$got" = "$(sum < "$T/down")" ] || fail "curl through the relay: wrong body"
	for i in 1 2 3 4 5; do
		timeout 30 curl -fsS -o /dev/null "http://127.0.0.1:$cport/big.bin" || fail "curl $i: exit $?"
	done
else
	notes+=("curl missing (Debian package curl): http.server case not tested")
fi

# 100 connections open at once, each echoed in full.
start echo python3 "$T/peer.py" echo; eport=$port
relay_to "$eport"; erport=$port
r=$(timeout 90 python3 "$T/peer.py" many "$erport" 100)
[ "$r" = ok ] || fail "100 concurrent connections: $r"

# A client that closes early on a server that never stops, many times over.
start flood python3 "$T/peer.py" flood; fport=$port
relay_to "$fport"; frport=$port; frpid=${pids[-1]}
for i in $(seq 1 20); do
	r=$(timeout 10 python3 "$T/peer.py" early "$frport")
	[ "$r" = ok ] || { fail "early client $i: $r"; break; }
done
# A server that closes at once.
start slam python3 "$T/peer.py" slam; sport=$port
relay_to "$sport"; srport=$port
r=$(timeout 20 python3 "$T/peer.py" slammed "$srport")
[ "$r" = ok ] || fail "server closing at once: $r"
# The relays survived all of it and still serve.
r=$(timeout 60 python3 "$T/peer.py" many "$erport" 5)
[ "$r" = ok ] || fail "echo relay after the rest: $r"
sleep 0.5
for p in "${pids[@]}"; do
	kill -0 "$p" 2>/dev/null || fail "a server or relay died: pid $p ($(cat "$T"/relay*.err | head -c 300))"
done
# The connections the early clients left must all be closed: no threads left over.
th=$(ls /proc/"$frpid"/task 2>/dev/null | wc -l)
# -j N worker threads, and one more where ThreadSanitizer runs its own.
[ "$th" -le $((RELAY_J + 1)) ] || fail "the flood relay still has $th threads after its clients left"

# Backpressure: a target that reads nothing.  The relay stops reading too,
# so the client blocks after the socket buffers and one pagepipe (some
# 20 MB), and the relay's memory stays small; then the target reads it all.
start stall python3 "$PEER" stall "$T/go"; stport=$port
relay_to "$stport"; strport=$port; strpid=${pids[-1]}
r=$(timeout 60 python3 "$PEER" backpressure "$strport" 256)
sent=$(echo "$r" | sed -n 's/^sent \([0-9]*\) bytes.*/\1/p')
[ "$(echo "$r" | tail -n 1)" = ok ] || fail "a target that does not read: $r"
rss=$(awk '$1 == "VmRSS:" { print $2 }' /proc/"$strpid"/status)
grep -q __tsan_init "$PP" || [ "${rss:-0}" -lt 65536 ] || fail "relay RSS $rss kB with a target that does not read"
echo "backpressure: $sent bytes sent before the client blocked, relay VmRSS $rss kB"
touch "$T/go"
for _ in $(seq 1 300); do [ "$(sed -n 2p "$T/stall.out")" ] && break; sleep 0.1; done
got=$(sed -n 2p "$T/stall.out")
[ -n "$sent" ] && [ "$got" = "$sent" ] || fail "the target read '$got' bytes of the $sent sent"

# A target nobody listens on: the client is closed, the relay says why, and goes on.
relay_to 1; dport=$port
r=$(timeout 20 python3 "$T/peer.py" slammed "$dport")
[ "$r" = ok ] || fail "dead target: $r"
sleep 0.2
grep -q "connect 127.0.0.1:1: Connection refused" "$T/relay1.err" || fail "no message for a dead target: $(cat "$T/relay1.err")"

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
for n in "${notes[@]}"; do echo "note: $n"; done
echo "relay passed every case"
exit 0
