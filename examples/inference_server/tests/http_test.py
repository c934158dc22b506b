#!/usr/bin/env python3
"""The inference service's HTTP/1.1 tests (http1.h and its use in http.c):
every 4xx, the protocol's cases (pipelining, HEAD, 100-continue, HTTP/1.0,
431, lingering closes, mutated requests), the connection limit and the idle
timeout, slow clients cut at their deadlines, and --socket-timing. service_test.py runs them
with the rest (the functions take its parsed arguments)."""
import http.client
import json
import os
import random
import re
import select
import signal
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SLOW, Failure, Server, check, check_answer, infer_ok,  # noqa: E402
                     rand_input, raw_http)


def t_bad_requests(args):
    """Every 4xx: one line of reason each, the connection usable after."""
    with Server(args, ["--max-body", "2048"]) as s:
        n = s.model.inputs
        good = json.dumps([0.25] * n)
        cases = [
            ("GET", "/nope", None, {}, 404, "no such endpoint"),
            ("GET", "/v1/infer", None, {}, 405, "POST"),
            ("DELETE", "/health", None, {}, 405, "GET"),
            ("POST", "/metrics", "x", {}, 405, "GET"),
            ("POST", "/v1/infer", good, {"Content-Type": "text/plain"}, 415, "Content-Type"),
            ("POST", "/v1/infer", good, {"Content-Type": "application/x-www-form-urlencoded"}, 415,
             "Content-Type"),
            ("POST", "/v1/infer", json.dumps([0.25] * (n - 1)), {}, 400, "wrong length"),
            ("POST", "/v1/infer", json.dumps([0.25] * (n + 1)), {}, 400, "wrong length"),
            ("POST", "/v1/infer", b"\0" * (4 * n - 4), {"Content-Type": "application/octet-stream"},
             400, "wrong length"),
            ("POST", "/v1/infer", struct.pack(f"<{n}f", *([float("nan")] + [0.0] * (n - 1))),
             {"Content-Type": "application/octet-stream"}, 400, "not finite"),
            ("POST", "/v1/infer", "x" * 3000, {}, 413, "limit"),
        ]
        bad_json = ["", "[", "[1,2", '{"a": 1}', "[1,,2]", "[1,2,]", "[NaN]", "[1e999]", '["1"]',
                    "[01]", "[.5]", "[+1]", "[1] x", "[[1]]", "[0x10]", "[-]", "[1.]", "[1e]",
                    "[Infinity]", "\ufeff[1]", "null"]
        for b in bad_json:
            cases.append(("POST", "/v1/infer", b.encode(), {"Content-Type": "application/json"}, 400,
                          ""))
        c = s.conn()
        for method, path, body, headers, want, text in cases:
            try:
                st, hd, data, _ = s.request(method, path, body, headers, conn=c)
            except (http.client.HTTPException, OSError):
                c.close()
                c = s.conn()
                st, hd, data, _ = s.request(method, path, body, headers, conn=c)
            what = f"{method} {path} {str(body)[:30]!r} {headers}"
            check(st == want, f"{what}: {st}, want {want}: {data!r}")
            line = data.decode(errors="replace")
            check(line.endswith("\n") and line.count("\n") == 1 and text in line,
                  f"{what}: reason {line!r} is not one line naming {text!r}")
            if want == 405:
                check("allow" in hd, f"{what}: no Allow header")
            if hd.get("connection", "").lower() == "close":
                c.close()
                c = s.conn()
        # After all that, the same server still answers correctly.
        x = [0.1] * n
        st, _, y, _, _ = s.infer(x, conn=c)
        check(st == 200, "served after the errors")
        check_answer(s.model, x, y, "after the errors")
        c.close()
        # What http.client will not send: a chunked body over the limit, a
        # garbage request line.
        chunk = b"%x\r\n%s\r\n" % (1500, b"1" * 1500)
        got = raw_http(s.port, b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                               b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       chunk + chunk + b"0\r\n\r\n")
        check(got.startswith(b"HTTP/1.1 413"), f"chunked oversize: {got[:60]!r}")
        got = raw_http(s.port, b"GARBAGE\r\n\r\n")
        check(got == b"" or got.startswith(b"HTTP/1.1 400"), f"garbage: {got[:60]!r}")
        m = s.metrics()
        for code in (400, 413, 415):
            check(m[f'infer_requests_total{{code="{code}"}}'] > 0, f"{code} counted")
        for code in (404, 405):
            check(m[f'infer_requests_total{{code="{code}"}}'] == 0,
                  f"{code}: not an inference request")
        check(m.get('infer_other_requests_total{path="other",code="404"}', 0) >= 1,
              "404 counted apart")
        for path in ("/v1/infer", "/health", "/metrics"):
            check(m.get(f'infer_other_requests_total{{path="{path}",code="405"}}', 0) >= 1,
                  f"405 on {path} counted apart")
        s.stop()


def read_all(sock, timeout=5.0):
    """Everything the server sends until it closes (b"reset" on a reset)."""
    sock.settimeout(timeout * SLOW)
    got = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                return got
            got += b
    except ConnectionResetError:
        return got + b"<reset>"
    except socket.timeout:
        return got + b"<timeout>"


def t_http1(args):
    """The HTTP/1.1 layer: pipelined requests answered in order, inference
    ones included; a query string does not change the route; HTTP/1.1
    without Host is a 400; HEAD without a body; Expect: 100-continue; HTTP/1.0
    closes unless asked to keep alive; a head over the buffer or with too
    many fields gets 431; an early 413 while the body still comes is read
    whole, never a reset (the close lingers); a client that half-closes
    after its request still gets its answer; 300 mutated requests leave the
    service answering correctly; one that leaves mid-request costs nothing
    (the fds come back)."""
    with Server(args, ["--max-body", "4096"]) as s:
        n = s.model.inputs
        pid = s.proc.pid
        time.sleep(0.2)
        fds_idle = len(os.listdir(f"/proc/{pid}/fd"))
        x = [0.125] * n
        body = json.dumps(x).encode()
        post = (b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        health = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        last = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        k = socket.create_connection(("127.0.0.1", s.port))
        k.sendall(health + post + health + post + last)
        got = read_all(k)
        k.close()
        statuses = re.findall(rb"HTTP/1.1 (\d+) ", got)
        check(statuses == [b"200"] * 5, f"pipelined: {statuses}")
        parts = got.split(b"HTTP/1.1 200 OK\r\n")[1:]
        check([p.endswith(b"ok\n") for p in parts] == [True, False, True, False, True],
              f"pipelined answers out of order: {got[:400]!r}")
        for p in (parts[1], parts[3]):
            y = json.loads(p.partition(b"\r\n\r\n")[2])
            check_answer(s.model, x, y, "pipelined inference")
        check(b"<reset>" not in got and b"<timeout>" not in got, "pipelined: closed cleanly")

        # 200 requests pipelined in one write and again in random pieces, with
        # heads of up to 3 KB that straddle the connection's 8 KiB buffer: each
        # answer in order, each inference its own input's.
        rng = random.Random(3)
        reqs, inputs = [], []
        for i in range(200):
            if i % 3 == 0:
                reqs.append(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " +
                            b"p" * rng.randrange(0, 3000) + b"\r\n\r\n")
                inputs.append(None)
            else:
                xi = rand_input(s.model, rng)
                bi = json.dumps(xi).encode()
                reqs.append(b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(bi), bi))
                inputs.append(xi)
        data = b"".join(reqs) + last
        for pieces in (False, True):
            k = socket.create_connection(("127.0.0.1", s.port))
            if pieces:
                i = 0
                while i < len(data):
                    j = i + rng.randrange(1, 700)
                    k.sendall(data[i:j])
                    i = j
            else:
                k.sendall(data)
            got = read_all(k, 20)
            k.close()
            answers = []
            while got.startswith(b"HTTP/1.1 "):
                head, _, rest = got.partition(b"\r\n\r\n")
                size = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                answers.append((head, rest[:size]))
                got = rest[size:]
            check(len(answers) == len(reqs) + 1 and got == b"",
                  f"pipelined ({'pieces' if pieces else 'one write'}): {len(answers)} answers, "
                  f"then {got[:60]!r}")
            for (head, b), xi in zip(answers, inputs):
                check(head.startswith(b"HTTP/1.1 200"), f"pipelined: {head[:40]!r}")
                if xi is None:
                    check(b == b"ok\n", f"pipelined health: {b!r}")
                else:
                    check_answer(s.model, xi, json.loads(b), "pipelined inference")

        got = raw_http(s.port, b"GET /health?probe=1 HTTP/1.1\r\nHost: x\r\n"
                               b"Connection: close\r\n\r\n")
        check(got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n"),
              f"a query after the path: {got[-80:]!r}")
        got = raw_http(s.port, b"GET /health HTTP/1.1\r\n\r\n")
        check(got.startswith(b"HTTP/1.1 400") and b"Host" in got and b"Connection: close" in got,
              f"HTTP/1.1 without Host: {got[-120:]!r}")
        got = raw_http(s.port, b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, _, rest = got.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200") and b"Content-Length: 3" in head and rest == b"",
              f"HEAD: {got!r}")

        k = socket.create_connection(("127.0.0.1", s.port), timeout=5 * SLOW)
        k.sendall(b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        cont = k.recv(100)
        check(cont == b"HTTP/1.1 100 Continue\r\n\r\n", f"100-continue: {cont!r}")
        k.sendall(body)
        k.shutdown(socket.SHUT_WR)  # and a half-close: the answer still comes
        got = read_all(k)
        k.close()
        check(got.startswith(b"HTTP/1.1 200"), f"after 100-continue and a half-close: {got[:80]!r}")

        got = raw_http(s.port, b"GET /health HTTP/1.0\r\n\r\n")
        check(got.startswith(b"HTTP/1.1 200") and b"Connection: close" in got,
              f"HTTP/1.0: {got[:200]!r}")
        k = socket.create_connection(("127.0.0.1", s.port), timeout=5 * SLOW)
        k.sendall(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        first = k.recv(4096)
        k.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        rest = read_all(k)
        k.close()
        check(b"Connection: keep-alive" in first and rest.startswith(b"HTTP/1.1 200"),
              f"HTTP/1.0 keep-alive: {first[:200]!r} then {rest[:60]!r}")

        got = raw_http(s.port, b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
        check(got.startswith(b"HTTP/1.1 431"), f"a head over 8 KiB: {got[:80]!r}")
        many = b"".join(b"X-F%d: v\r\n" % i for i in range(60))
        got = raw_http(s.port, b"GET /health HTTP/1.1\r\n" + many + b"\r\n")
        check(got.startswith(b"HTTP/1.1 431"), f"60 header fields: {got[:80]!r}")

        # 413 from the head while 100 KB of body keep coming: the answer, a
        # FIN, and no reset however the bytes race the close.
        for _ in range(20):
            k = socket.create_connection(("127.0.0.1", s.port), timeout=5 * SLOW)
            k.sendall(b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n")
            try:
                k.sendall(b"1" * 100000)
            except OSError:
                pass
            got = read_all(k)
            k.close()
            check(got.startswith(b"HTTP/1.1 413") and b"Connection: close" in got and
                  b"<reset>" not in got, f"early 413: {got[-60:]!r}")

        # Answered from its head (415), then a Transfer-Encoding that
        # http-parser refuses only after the head: the 415, the close, and
        # the service still up. Then 300 mutated requests (a fixed seed):
        # whatever they get, the service answers correctly after them.
        got = raw_http(s.port, b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                               b"c?hunked\r\nContent-Type: text/x\r\n\r\n5\r\n[0.1,\r\n0\r\n\r\n")
        check(got.startswith(b"HTTP/1.1 415"), f"415 then a refused Transfer-Encoding: {got[:80]!r}")
        frng = random.Random(7)
        seeds = [post, health, b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                 b"chunked\r\nContent-Type: application/json\r\n\r\n5\r\n[0.1,\r\n0\r\n\r\n",
                 b"GET /metrics HTTP/1.1\r\nHost: y\r\nExpect: 100-continue\r\n"
                 b"Content-Length: 3\r\n\r\nabc", b"HEAD /health HTTP/1.0\r\n\r\n"]
        for _ in range(300):
            data = bytearray(b"".join(frng.choice(seeds) for _ in range(frng.randrange(1, 4))))
            for _ in range(frng.randrange(1, 8)):
                i = frng.randrange(len(data) + 1)
                op = frng.randrange(4)
                if op == 0 and i < len(data):
                    data[i] = frng.randrange(256)
                elif op == 1:
                    data[i:i] = bytes(frng.randrange(256) for _ in range(frng.randrange(1, 20)))
                elif op == 2:
                    del data[i:i + frng.randrange(1, 20)]
                else:
                    data[i:i] = frng.choice([b"\r\n", b":", b" ", b"\r\n\r\n", b"\x00", b"?",
                                             b"Transfer-Encoding: chunked\r\n",
                                             b"Content-Length: 99999999999999999999\r\n"])
            k = socket.create_connection(("127.0.0.1", s.port), timeout=5 * SLOW)
            k.sendall(bytes(data))
            if frng.random() < 0.5:
                k.shutdown(socket.SHUT_WR)
            read_all(k, 0.3)
            k.close()
        st, _, y, _, _ = s.infer(x)
        check(st == 200, f"served after 300 mutated requests: {st}")
        check_answer(s.model, x, y, "after 300 mutated requests")

        # Clients that leave: mid-head, mid-body, and with an inference
        # request in flight.
        for data in (b"GET /hea", post[:len(post) - 5], post):
            k = socket.create_connection(("127.0.0.1", s.port))
            k.sendall(data)
            k.close()
        t0 = time.monotonic()
        while len(os.listdir(f"/proc/{pid}/fd")) != fds_idle and time.monotonic() - t0 < 5 * SLOW:
            time.sleep(0.05)
        check(len(os.listdir(f"/proc/{pid}/fd")) == fds_idle, "fds back after clients left")
        st, _, y, _, _ = s.infer(x)
        check(st == 200, "served after all that")
        check_answer(s.model, x, y, "after all that")
        m = s.metrics()
        check(m["infer_active_requests"] == 1, "no request left open but /metrics itself")
        s.stop()


def slow_client(port, first, drip, every=0.3, limit=15.0):
    """Sends `first`, then drip(j) every `every` seconds (j = 0, 1, ...) until
    the server answers or closes; returns (seconds from the start to the
    end of the stream, everything read)."""
    k = socket.create_connection(("127.0.0.1", port), timeout=limit * SLOW)
    t0 = time.monotonic()
    k.sendall(first)
    got, j, sending = b"", 0, True
    while time.monotonic() - t0 < limit * SLOW:
        ready, _, _ = select.select([k], [], [], every)
        if ready:
            try:
                b = k.recv(4096)
            except ConnectionResetError:
                break
            if not b:
                break
            got += b
            continue
        if sending:
            try:
                k.sendall(drip(j))
                j += 1
            except OSError:  # the server closed: what it sent is still to read
                sending = False
    k.close()
    return time.monotonic() - t0, got


def check_408(got, phase, ms, what):
    head, _, body = got.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 408 "), f"{what}: {got[:80]!r}, want a 408")
    check(re.search(rb"\r\nconnection: close\r\n", head + b"\r\n", re.I) is not None,
          f"{what}: no Connection: close")
    m = re.search(rb"content-length: *(\d+)", head, re.I)
    want = b"request %s not complete within %d ms\n" % (phase.encode(), ms)
    check(m is not None and int(m.group(1)) == len(body) and body == want,
          f"{what}: body {body!r}, want {want!r}")


def t_slow_clients(args):
    """Clients too slow to send a request: headers a line at a time (a
    slowloris), a body a byte at a time, a kept-alive connection's next
    request line a byte at a time (due from its first byte). Each gets a 408
    with its reason and its connection is closed at its deadline, though it
    never goes idle for the idle timeout; good clients are served all along;
    /metrics counts the cuts; nothing about them reads as the server's error
    on stderr; the fds come back to their idle level. Then the connection slots a slowloris
    holds come free at the header deadline."""
    ms = 1000
    idle_s = 2
    with Server(args, ["--header-deadline-ms", str(ms), "--body-deadline-ms", str(ms),
                       "--connection-timeout", str(idle_s), "--batch-window-us", "200"]) as s:
        pid, n = s.proc.pid, s.model.inputs
        time.sleep(0.2)
        fds_idle = len(os.listdir(f"/proc/{pid}/fd"))
        body = json.dumps([0.25] * n).encode()
        post = (b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        results, lock, errors = [], threading.Lock(), []

        def headers(i):
            r = slow_client(s.port, b"POST /v1/infer HTTP/1.1\r\n",
                            lambda j: b"X-Slow-%d: %d\r\n" % (j, i))
            with lock:
                results.append(("headers", r))

        def body_(i):
            r = slow_client(s.port, post + body[:5], lambda j: body[5 + j:6 + j])
            with lock:
                results.append(("body", r))

        def idle(i):
            # One request answered, then the next request line a byte at a
            # time, the first 0.3 s after the answer: due --header-deadline-ms
            # after that first byte (the idle timeout never fires: bytes keep
            # coming).
            line = b"GET /health HTTP/1.1\r\n"
            k = socket.create_connection(("127.0.0.1", s.port), timeout=15 * SLOW)
            k.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            first = k.recv(4096)
            t0 = time.monotonic()
            got, j = b"", 0
            while time.monotonic() - t0 < 15 * SLOW:
                ready, _, _ = select.select([k], [], [], 0.3)
                if ready:
                    b = k.recv(4096)
                    if not b:
                        break
                    got += b
                elif j < len(line):
                    k.sendall(line[j:j + 1])
                    j += 1
            k.close()
            with lock:
                results.append(("idle", (time.monotonic() - t0, got)))
                if not first.startswith(b"HTTP/1.1 200"):
                    errors.append(f"idle client's first request: {first[:60]!r}")

        stop = threading.Event()
        served = [0]

        def good(seed):
            rng = random.Random(seed)
            c = s.conn()
            while not stop.is_set():
                x = rand_input(s.model, rng)
                try:
                    st, _, y, data, dt = s.infer(x, conn=c)
                    if st != 200:
                        errors.append(f"good client: {st} {data[:80]!r}")
                    else:
                        check_answer(s.model, x, y, "good client")
                        if dt > 2 * SLOW:
                            errors.append(f"good client waited {dt:.2f} s")
                    with lock:
                        served[0] += 1
                except (Failure, http.client.HTTPException, OSError) as e:
                    errors.append(f"good client: {e!r}")
                    c.close()
                    c = s.conn()
                time.sleep(0.01)
            c.close()

        goods = [threading.Thread(target=good, args=(i,)) for i in range(4)]
        slow = ([threading.Thread(target=headers, args=(i,)) for i in range(20)] +
                [threading.Thread(target=body_, args=(i,)) for i in range(20)] +
                [threading.Thread(target=idle, args=(i,)) for i in range(5)])
        for t in goods + slow:
            t.start()
        for t in slow:
            t.join(30 * SLOW)
        stop.set()
        for t in goods:
            t.join(30 * SLOW)
        check(not errors, f"{len(errors)} errors, e.g. {errors[:3]}")
        check(len(results) == 45, f"{len(results)} slow clients finished, want 45")
        for kind, (secs, got) in results:
            phase = "body" if kind == "body" else "headers"
            check_408(got, phase, ms, f"slow {kind}")
            # The idle client starts its clock when it has read the answer
            # and sends its first byte 0.3 s later.
            due = ms / 1000 + (0.3 if kind == "idle" else 0)
            early = 0.2
            check(due - early <= secs <= due + 1.5 * SLOW,
                  f"slow {kind}: cut after {secs:.2f} s, due after {due:.1f} s")
        check(served[0] >= 20, f"good clients served {served[0]} requests meanwhile")
        m = s.metrics()
        check(m['infer_http_timeouts_total{phase="headers"}'] == 25, "header timeouts counted")
        check(m['infer_http_timeouts_total{phase="body"}'] == 20, "body timeouts counted")
        check(m['infer_requests_total{code="408"}'] == 20, "the 408s of inference requests")
        t1 = time.monotonic()
        while len(os.listdir(f"/proc/{pid}/fd")) != fds_idle and time.monotonic() - t1 < 5 * SLOW:
            time.sleep(0.1)
        check(len(os.listdir(f"/proc/{pid}/fd")) == fds_idle,
              f"fds {len(os.listdir(f'/proc/{pid}/fd'))} after, {fds_idle} before")
        print(f"# 45 slow clients cut at their deadlines (408 each) while 4 good clients "
              f"got {served[0]} answers")
        s.stop()
        # Not a line: "Application reported internal error", "closed by
        # remote side", or anything else.
        check(not s.err, "stderr:\n" + s.log())

    # The slots: a slowloris holding every connection the service takes
    # delays a good client by the header deadline at most.
    with Server(args, ["--header-deadline-ms", str(ms), "--max-connections", "8"]) as s:
        hold = [threading.Thread(target=slow_client, args=(
            s.port, b"GET /health HTTP/1.1\r\n", lambda j: b"X-Slow: %d\r\n" % j))
            for _ in range(8)]
        for t in hold:
            t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        st, _, data, _ = s.request("GET", "/health")
        waited = time.monotonic() - t0
        check(st == 200, f"the good client: {st} {data!r}")
        check(waited <= ms / 1000 + 1.0 * SLOW,
              f"the good client waited {waited:.2f} s for a slot, the deadline is {ms} ms")
        for t in hold:
            t.join(30 * SLOW)
        print(f"# with every slot held by a slowloris, a good client waited {waited:.2f} s")
        s.stop()


def t_limits(args):
    """Connection limit and idle timeout: a connection over the limit waits
    (unserved) until idle ones time out, then it is served."""
    with Server(args, ["--max-connections", "8", "--connection-timeout", "2"]) as s:
        socks = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(8)]
        time.sleep(0.2)
        t0 = time.monotonic()
        extra = socket.create_connection(("127.0.0.1", s.port))
        extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        extra.settimeout(0.8)
        try:
            got = extra.recv(100)
        except socket.timeout:
            got = None
        check(got is None, f"9th connection served at once: {got!r}")
        # The idle ones are closed after about 2 s; then the 9th is served.
        socks[0].settimeout(10 * SLOW)
        try:
            data = socks[0].recv(100)
        except ConnectionResetError:
            data = b""
        idle = time.monotonic() - t0
        check(data == b"" and 1.5 < idle < 6 * SLOW, f"idle connection timed out after {idle:.1f} s")
        extra.settimeout(10 * SLOW)
        got = extra.recv(100)
        check(got.startswith(b"HTTP/1.1 200"), f"9th connection served once others left: {got!r}")
        for k in socks + [extra]:
            k.close()
        s.stop()


def t_socket_timing(args):
    """--socket-timing: how long each inference request waited in its socket,
    from the kernel's receive timestamps (a request sent while the service is
    stopped, SIGSTOP, shows the stop), and how long its answer waited to be
    written (every one, briefly). Without the flag, neither metric."""
    with Server(args, []) as s:
        s.infer(rand_input(s.model, random.Random(1)))
        m = s.metrics()
        check("infer_socket_wait_seconds_count" not in m and "infer_send_wait_seconds_count" not in m,
              "no socket timing by default")
        s.stop()
    with Server(args, ["--socket-timing"]) as s:
        rng = random.Random(2)
        c = s.conn()
        infer_ok(s, rng, 10, conn=c)
        # The client has the 10th answer once the service's send returned,
        # and the service counts its send wait just after: stopped in
        # between, that answer would show the stop. Wait for the count.
        deadline = time.monotonic() + 10
        while s.metrics().get("infer_send_wait_seconds_count") != 10:
            check(time.monotonic() < deadline, "10 send waits counted within 10 s")
            time.sleep(0.01)
        # One request written while every thread of the service is stopped:
        # its bytes wait in the socket until SIGCONT.
        x = rand_input(s.model, rng)
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            c.request("POST", "/v1/infer", body=json.dumps(x),
                      headers={"Content-Type": "application/json"})
            time.sleep(0.4)
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
        r = c.getresponse()
        y = json.loads(r.read())
        check(r.status == 200, f"the stopped request: {r.status}")
        check_answer(s.model, x, y, "the stopped request")
        c.close()
        m = s.metrics()
        check(m.get("infer_socket_wait_seconds_count") == 11,
              f"11 waits counted, not {m.get('infer_socket_wait_seconds_count')}")
        fast = m['infer_socket_wait_seconds_bucket{le="0.25"}']
        check(fast == 10, f"10 requests read within 250 ms, not {fast}")
        check(m['infer_socket_wait_seconds_bucket{le="1"}'] == 11,
              "the stopped request waited 0.25-1 s")
        check(0.4 <= m["infer_socket_wait_seconds_sum"] < 1 + 10 * 0.25, "the waits' sum")
        check(m.get("infer_send_wait_seconds_count") == 11
              and m['infer_send_wait_seconds_bucket{le="0.25"}'] == 11,
              "11 answers written, each within 250 ms of being ready")
        s.stop()
