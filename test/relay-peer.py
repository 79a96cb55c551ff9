# SPDX-License-Identifier: MIT
# Servers and clients for the test/cli-relay-*.sh tests.  Servers print
# their port on the first line of standard output; clients print "ok" or
# "bad: why" as their last line.  Every wait has a timeout, so that a
# broken relay fails a test instead of hanging it.
import hashlib, os, resource, selectors, socket, sys, threading, time


def raise_nofile():
    # 1000 connections through a relay are 2000 descriptors on this side.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


def listener():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(4096)
    print(s.getsockname()[1], flush=True)
    return s


def serve_echo():
    # One thread for any number of connections: echo, and pass EOF back.
    raise_nofile()
    sel = selectors.DefaultSelector()
    ls = listener()
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is ls:
                try:
                    c, _ = ls.accept()
                except OSError:
                    continue
                c.setblocking(True)
                c.settimeout(5)
                sel.register(c, selectors.EVENT_READ)
                continue
            try:
                b = s.recv(65536)
                if b:
                    s.sendall(b)
                    continue
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            sel.unregister(s)
            s.close()


def serve_hash():
    # Read to EOF (the relay's half-close), answer the SHA-256, close.
    ls = listener()

    def one(c):
        d = hashlib.sha256()
        try:
            while True:
                b = c.recv(1 << 20)
                if not b:
                    break
                d.update(b)
            c.sendall((d.hexdigest() + "\n").encode())
        except OSError:
            pass
        c.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def serve_stall(ctl):
    # Accept one connection and read nothing until the file ctl exists;
    # then read to EOF and print the count.
    ls = listener()
    c, _ = ls.accept()
    while not os.path.exists(ctl):
        time.sleep(0.1)
    n = 0
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        n += len(b)
    print(n, flush=True)
    c.close()


def connect(port, timeout=30):
    return socket.create_connection(("127.0.0.1", int(port)), timeout=timeout)


def echo_once(c, data=b"x"):
    c.sendall(data)
    got = b""
    while len(got) < len(data):
        b = c.recv(len(data) - len(got))
        if not b:
            return False
        got += b
    return got == data


def closed_by_peer(c, timeout):
    # True when the relay closed c (EOF or reset) within timeout seconds.
    c.settimeout(timeout)
    try:
        return c.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def client_timeout(port, secs):
    # An idle connection and a busy one; with -T secs only the idle one ends.
    secs = float(secs)
    idle = connect(port)
    busy = connect(port)
    if not echo_once(idle) or not echo_once(busy):
        print("bad: no echo at the start")
        return
    t0 = time.monotonic()
    result = {}

    def watch_idle():
        result["closed"] = closed_by_peer(idle, 30 + 4 * secs)
        result["after"] = time.monotonic() - t0

    t = threading.Thread(target=watch_idle)
    t.start()
    # Busy: a byte each 0.2 s, for three timeouts.
    errors = 0
    while time.monotonic() - t0 < 3 * secs:
        try:
            if not echo_once(busy):
                errors += 1
                break
        except OSError:
            errors += 1
            break
        time.sleep(0.2)
    t.join()
    if not result["closed"]:
        print("bad: the idle connection was not closed")
    elif result["after"] < secs - 0.2:
        print("bad: the idle connection was closed after %.2f s, before the %.1f s timeout"
              % (result["after"], secs))
    elif errors:
        print("bad: the busy connection was closed")
    else:
        print("ok")


def client_limit(port, n):
    n = int(n)
    conns = [connect(port) for _ in range(n)]
    for i, c in enumerate(conns):
        if not echo_once(c):
            print("bad: connection %d of %d not served" % (i + 1, n))
            return
    extra = connect(port)
    try:
        extra.sendall(b"x")
    except OSError:
        pass
    if not closed_by_peer(extra, 20):
        print("bad: connection %d beyond --max-conns %d was not closed" % (n + 1, n))
        return
    # The others are still served.
    for i, c in enumerate(conns):
        if not echo_once(c):
            print("bad: connection %d lost after the refusal" % (i + 1))
            return
    # Once one ends, a new one is served (the relay sees the end first).
    conns[0].close()
    for attempt in range(200):
        c = connect(port)
        try:
            if echo_once(c):
                print("ok")
                return
        except OSError:
            pass
        c.close()
        time.sleep(0.1)
    print("bad: no connection served after one of %d ended" % n)


def client_inflight(port, path, ctl):
    # Send half of the file, say "half", wait for "go" on ctl, send the rest.
    data = open(path, "rb").read()
    half = len(data) // 2
    c = connect(port, timeout=60)
    c.sendall(data[:half])
    print("half", flush=True)
    with open(ctl) as f:
        if f.readline().strip() != "go":
            print("bad: no go")
            return
    c.sendall(data[half:])
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = c.recv(4096)
        if not b:
            break
        got += b
    want = hashlib.sha256(data).hexdigest()
    print("ok" if got.decode().strip() == want else "bad: server got %r, want %s" % (got[:70], want))


def client_hold(port):
    # One connection, echoed once, then held until the relay closes it.
    c = connect(port)
    if not echo_once(c):
        print("bad: no echo")
        return
    print("ready", flush=True)
    print("closed" if closed_by_peer(c, 60) else "bad: still open after 60 s", flush=True)


def client_idle(port, n, ctl):
    # n connections open at once, each echoed once; "ready"; hold until ctl ends.
    raise_nofile()
    n = int(n)
    conns = []
    for i in range(n):
        try:
            c = connect(port)
            if not echo_once(c):
                print("bad: connection %d not echoed" % (i + 1), flush=True)
                return
        except OSError as e:
            print("bad: connection %d: %s" % (i + 1, e), flush=True)
            return
        conns.append(c)
    print("ready", flush=True)
    with open(ctl) as f:
        f.read()
    # Still served after being held.
    bad = sum(1 for c in conns[:: max(1, n // 50)] if not echo_once(c))
    for c in conns:
        c.close()
    print("ok" if not bad else "bad: %d held connections no longer echo" % bad, flush=True)


def client_fdlimit(port, n):
    # More connections than the relay has descriptors for: some are served,
    # the others wait or are closed; once all end, a new one is served.
    n = int(n)
    conns = [connect(port) for _ in range(n)]
    for c in conns:
        try:
            c.sendall(b"x")
        except OSError:
            pass
    served = 0
    # One 3 s wait for them all: those left in the backlog are not served
    # until others close, and waiting 3 s for each took a minute.
    deadline = time.time() + 3
    for c in conns:
        c.settimeout(max(0.05, deadline - time.time()))
        try:
            if c.recv(1) == b"x":
                served += 1
        except OSError:
            pass
    for c in conns:
        c.close()
    for attempt in range(200):
        try:
            c = connect(port)
            if echo_once(c):
                print("served %d of %d" % (served, n))
                print("ok")
                return
        except OSError:
            pass
        time.sleep(0.1)
    print("bad: no connection served after the shortage (%d of %d had been)" % (served, n))


def client_backpressure(port, limit_mb):
    # Send into a target that does not read: the relay must stop reading
    # too, so the sender blocks after the socket buffers and one pagepipe.
    c = connect(port)
    c.setblocking(False)
    buf = b"b" * 65536
    sent = 0
    limit = int(limit_mb) << 20
    sel = selectors.DefaultSelector()
    sel.register(c, selectors.EVENT_WRITE)
    while sent < limit:
        if not sel.select(timeout=3):
            break           # no room for 3 s: the relay stopped reading
        try:
            sent += c.send(buf)
        except BlockingIOError:
            pass
    print("sent %d bytes before blocking" % sent, flush=True)
    print("ok" if sent < limit else "bad: %d bytes taken with the target not reading" % sent)
    c.close()


def client_echo(port, data):
    c = connect(port)
    ok = echo_once(c, data.encode())
    c.shutdown(socket.SHUT_WR)
    ok = ok and closed_by_peer(c, 20)
    c.close()
    print("ok" if ok else "bad: echo")


mode, args = sys.argv[1], sys.argv[2:]
{
    "echo": serve_echo,
    "hash": serve_hash,
    "stall": serve_stall,
    "timeout": client_timeout,
    "limit": client_limit,
    "inflight": client_inflight,
    "hold": client_hold,
    "idle": client_idle,
    "say": client_echo,
    "fdlimit": client_fdlimit,
    "backpressure": client_backpressure,
}[mode](*args)
