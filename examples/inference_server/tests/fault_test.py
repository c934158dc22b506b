#!/usr/bin/env python3
"""The inference service's tests of faults and of what a long run must not
leak: a device fault and the reset, a fault that takes a restart (the exec of
the same process), the soak under faults, the GPU soak (resident memory and
open fds flat) and close-on-exec fds. service_test.py runs them with the rest
(the functions take its parsed arguments)."""
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SLOW, Failure, Server, check, check_answer, check_cloexec,  # noqa: E402
                     infer_ok, rand_input, raw_http)


def check_rss_flat(rss):
    """Resident memory samples (bytes) within 8 MiB or 5 % of their lowest."""
    check(max(rss) - min(rss) <= max(8 * 2**20, 0.05 * min(rss)), "RSS flat")


def t_fault(args):
    """A batch that faults the device: 503 for it, a reset, then correct
    answers again."""
    with Server(args, ["--fault-injection", "--batch-window-us", "0"]) as s:
        x = [0.3] * s.model.inputs
        st, _, y, _, _ = s.infer(x)
        check(st == 200, "before the fault")
        st, _, _, body, dt = s.infer(x, headers={"X-Inject-Fault": "1"})
        check(st == 503 and b"failed" in body, f"the faulting request: {st} {body!r}")
        for i in range(3):
            t0 = time.monotonic()
            while True:
                st, hd, y, body, _ = s.infer(x)
                if st == 200 or time.monotonic() - t0 > 30:
                    break
                time.sleep(0.1)
            check(st == 200, f"after the fault: {st} {body!r}")
            check_answer(s.model, x, y, "after the reset")
        m = s.metrics()
        check(m["infer_device_resets_total"] == 1, "one reset")
        check(any("reset and serving again" in l or "reset" in l for l in s.err), "reset logged")
        s.stop()


def t_restart(args):
    """A fault the device's reset does not clear (the stand-in's "sticky"):
    503 for what it hit, a drain, an exec of the same process that keeps the
    listening socket; clients connecting all along lose nothing, and the
    new process serves correct answers and says what happened."""
    with Server(args, ["--fault-injection", "--batch-window-us", "0", "--cpu-delay-us", "20000",
                       "--cpu-devices", "2"]) as s:
        pid = s.proc.pid
        rng = random.Random(9)
        x0 = rand_input(s.model, rng)
        st, _, y, _, _ = s.infer(x0)
        check(st == 200, "before the fault")
        stop = threading.Event()
        results, lock = [], threading.Lock()

        def client(seed):
            r = random.Random(seed)
            while not stop.is_set():
                x = rand_input(s.model, r)
                try:
                    st, _, y, body, _ = s.infer(x)  # a new connection each time
                except (http.client.HTTPException, OSError) as e:
                    st, y, body = None, None, repr(e).encode()
                with lock:
                    results.append((st, x, y, body))
        ts = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in ts:
            t.start()
        time.sleep(0.3)
        st, _, _, body, _ = s.infer(x0, headers={"X-Inject-Fault": "sticky"})
        check(st == 503 and b"failed" in body, f"the faulting request: {st} {body!r}")
        # Connections made while the old process drains wait in the backlog
        # of the listening socket the new process inherits.
        t0 = time.monotonic()
        while not any("restarting the process" in l for l in s.err):
            check(time.monotonic() - t0 < 10 * SLOW, "no restart:\n" + s.log())
            time.sleep(0.002)
        backlog = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(20)]
        body = json.dumps(x0).encode()
        for k in backlog:
            k.sendall(b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        for k in backlog:
            k.settimeout(30 * SLOW)
            got = b""
            while True:
                b = k.recv(65536)
                if not b:
                    break
                got += b
            k.close()
            check(got.startswith(b"HTTP/1.1 200") or b"restarting" in got,
                  f"a connection made during the restart: {got[:200]!r}")
            if got.startswith(b"HTTP/1.1 200"):
                check_answer(s.model, x0, json.loads(got.partition(b"\r\n\r\n")[2]), "backlog")
        time.sleep(0.5)
        stop.set()
        for t in ts:
            t.join()
        lost = [r for r in results if r[0] is None]
        check(not lost, f"{len(lost)} of {len(results)} requests lost: {lost[0][3]!r}" if lost else "")
        for st, x, y, body in results:
            if st == 200:
                check_answer(s.model, x, y, "around the restart")
            else:
                check(st == 503 and (b"failed" in body or b"restarting" in body),
                      f"around the restart: {st} {body!r}")
        served_after = sum(1 for r in results[-20:] if r[0] == 200)
        check(served_after == 20, f"the last requests: {[r[0] for r in results[-20:]]}")
        check(s.proc.pid == pid and s.proc.poll() is None, "the same process")
        m = s.metrics()
        check(m["infer_process_restarts_total"] == 1, "restart counted")
        check(m["infer_device_resets_total"] == 1, "the reset before it counted")
        st, _, hbody, _ = s.request("GET", "/health")
        check(st == 200 and b"restarted 1 time" in hbody, f"/health: {hbody!r}")
        print(f"# {len(results)} requests around the restart: "
              f"{sum(1 for r in results if r[0] == 200)} x 200, "
              f"{sum(1 for r in results if r[0] == 503)} x 503")
        s.stop()


def t_cloexec(args):
    """Every fd the service opens (sockets, epoll, eventfds, timerfds, the
    driver's, the library's) is close-on-exec: read from /proc/PID/fdinfo
    while it serves, with a connection open."""
    with Server(args, ["--cpu-devices", "2"] if args.backend == "cpu" else []) as s:
        c = s.conn()
        st, _, y, _, _ = s.infer([0.5] * s.model.inputs, conn=c)
        check(st == 200, "serves")
        s.metrics()
        check_cloexec(s.proc.pid, "serving")
        c.close()
        s.stop()


def t_soak_faults(args):
    """A bounded soak (INFER_FAULT_SOAK_S, default 30 s) at a few hundred
    connections: good clients (keep-alive, every answer checked), malformed
    requests, clients that disconnect mid-request or before the answer,
    bodies still arriving at the body deadline, device faults (one that a reset
    clears, then one that takes a restart). No live client loses a
    response or gets one twice (each answer is its own input's), RSS stays
    flat, no fd leaks, and the service answers correctly afterwards."""
    secs = float(os.environ.get("INFER_FAULT_SOAK_S", "30"))
    deadline_ms = 1000
    idle_s = 30
    # The header and body deadlines bound what a client that leaves
    # halfway through its request costs, not the idle timeout, which stays
    # long so that no good client, however starved of the CPU, meets it.
    # The header deadline still leaves a starved client seconds between its
    # connect and its request.
    with Server(args, ["--fault-injection", "--cpu-devices", "2", "--deadline-ms",
                       str(deadline_ms), "--body-deadline-ms", str(deadline_ms),
                       "--header-deadline-ms", "5000", "--batch-window-us", "500",
                       "--connection-timeout", str(idle_s)]) as s:
        pid, n = s.proc.pid, s.model.inputs
        time.sleep(0.2)
        fds_idle = len(os.listdir(f"/proc/{pid}/fd"))
        stop = threading.Event()
        lock = threading.Lock()
        stats = {"good": 0, "200": 0, "503": 0, "504": 0, "bad": 0, "cut": 0, "slow": 0,
                 "slow 408": 0}
        errors = []
        restart_window = [None, None]  # monotonic times: sticky fault sent, restarted

        def note(key, k=1):
            with lock:
                stats[key] += k

        def across_restart(since, now):
            """Whether an exchange that began at `since` and failed at `now`
            overlapped the restart: the sticky fault sent, the new process
            up. A connection open across the exec is closed by it, however
            long its client then waits before it uses it again. For a
            keep-alive connection `since` is when its last answered request
            was sent: sent before the new process was up, its answer may be
            the old process's however late a starved client thread read it
            (under a sanitizer, seconds), and the connection the old one's."""
            a, b = restart_window
            return a is not None and now >= a and (b is None or since <= b)

        def good(seed):
            rng = random.Random(seed)

            def reconnect(old=None):
                """A new connection, and its age: when it was opened."""
                if old is not None:
                    old.close()
                return s.conn(), time.monotonic()

            # `last`: when this connection's last answered request was sent
            # (or when it was opened): what the server had done by then, not
            # when a starved client thread got round to reading the answer.
            c, last = reconnect()
            while not stop.is_set():
                x = rand_input(s.model, rng)
                sent = time.monotonic()
                try:
                    st, _, y, body, _ = s.infer(x, raw=rng.random() < 0.3, conn=c)
                except (http.client.HTTPException, OSError) as e:
                    # Only a keep-alive connection open across the restart's
                    # exec may go without an answer (or one idle for the
                    # idle timeout, which no client here comes near).
                    now = time.monotonic()
                    if not across_restart(last, now) and now - last < idle_s - 1:
                        errors.append(f"good client: {e!r} outside the restart")
                    c, last = reconnect(c)
                    continue
                last = sent
                note("good")
                if st == 200:
                    note("200")
                    try:
                        check_answer(s.model, x, y, "soak")
                    except Failure as f:
                        errors.append(str(f))
                elif st in (503, 504):
                    note(str(st))
                    if st == 503 or b"deadline" not in body:
                        c, last = reconnect(c)
                else:
                    errors.append(f"good client: {st} {body[:100]!r}")
            c.close()

        bad_bodies = [b"[1,2", b"{}", b"[" + b"1," * (n - 1) + b"x]", b"[" + b"0.5," * n + b"0.5]",
                      b"\xff\xfe", b"[1e999" + b",0" * (n - 1) + b"]"]

        def malformed(seed):
            rng = random.Random(seed)
            while not stop.is_set():
                kind = rng.randrange(3)
                if kind == 0:
                    body = rng.choice(bad_bodies)
                    req = (b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                           b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                    want = (b"HTTP/1.1 400",)
                elif kind == 1:
                    req = b"GARBAGE \x01\x02\r\n\r\n"
                    want = (b"HTTP/1.1 400", b"")
                else:
                    req = b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                    want = (b"HTTP/1.1 404",)
                since = time.monotonic()
                try:
                    got = raw_http(s.port, req)
                except OSError as e:
                    if not across_restart(since, time.monotonic()):
                        errors.append(f"malformed: {e!r}")
                    continue
                if not any(got.startswith(w) if w else got == w for w in want) and \
                        b"restarting" not in got and not across_restart(since, time.monotonic()):
                    errors.append(f"malformed {req[:30]!r}: {got[:80]!r}")
                note("bad")

        def cutter(seed):
            rng = random.Random(seed)
            body = json.dumps([0.25] * n).encode()
            while not stop.is_set():
                try:
                    k = socket.create_connection(("127.0.0.1", s.port), timeout=5)
                    head = (b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                            b"\r\nContent-Length: %d\r\n\r\n" % len(body))
                    cut = rng.randrange(3)
                    if cut == 0:
                        k.sendall(head[:rng.randrange(1, len(head))])
                    elif cut == 1:
                        k.sendall(head + body[:len(body) // 2])
                    else:
                        k.sendall(head + body)  # and gone before the answer
                    k.close()
                except OSError:
                    pass
                note("cut")
                time.sleep(0.005)

        def slow(seed):
            body = json.dumps([0.25] * n).encode()
            while not stop.is_set():
                try:
                    k = socket.create_connection(("127.0.0.1", s.port), timeout=10)
                    k.sendall(b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                              b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body[:10]))
                    time.sleep(deadline_ms / 1000 + 0.2)
                    try:
                        k.sendall(body[10:])
                    except OSError:
                        pass
                    k.settimeout(10 * SLOW)
                    got = k.recv(200)
                    k.close()
                    # A body still arriving at the body deadline gets 408 and
                    # the connection's end (200 where the loaded server read
                    # the headers late, which is when the deadline starts).
                    if got.startswith(b"HTTP/1.1 408"):
                        note("slow 408")
                    elif got and not got.startswith(b"HTTP/1.1 200") and b"restarting" not in got:
                        errors.append(f"slow sender: {got[:80]!r}")
                except OSError:
                    pass
                note("slow")

        threads = ([threading.Thread(target=good, args=(i,)) for i in range(200)] +
                   [threading.Thread(target=malformed, args=(1000 + i,)) for i in range(16)] +
                   [threading.Thread(target=cutter, args=(2000 + i,)) for i in range(16)] +
                   [threading.Thread(target=slow, args=(3000 + i,)) for i in range(8)])
        for t in threads:
            t.start()
        samples = []
        t0 = time.monotonic()
        faulted = {"device": False, "sticky": False}
        while time.monotonic() - t0 < secs:
            time.sleep(1.0)
            el = time.monotonic() - t0
            if el > 0.2 * secs and not faulted["device"]:
                faulted["device"] = True
                st, _, _, body, _ = s.infer([0.1] * n, headers={"X-Inject-Fault": "1"})
                check(st == 503, f"device fault: {st} {body!r}")
            if el > 0.35 * secs and not faulted["sticky"]:
                faulted["sticky"] = True
                restart_window[0] = time.monotonic()
                st, _, _, body, _ = s.infer([0.1] * n, headers={"X-Inject-Fault": "sticky"})
                check(st == 503, f"sticky fault: {st} {body!r}")
                while not any("restart 1 after" in l for l in s.out):
                    check(time.monotonic() - restart_window[0] < 20 * SLOW, "no restart\n" + s.log())
                    time.sleep(0.01)
                restart_window[1] = time.monotonic()
            if el > 0.55 * secs:  # the restarted process, warmed up
                st = open(f"/proc/{pid}/status").read()
                rss = int(re.search(r"VmRSS:\s+(\d+)", st).group(1)) * 1024
                samples.append((el, rss, len(os.listdir(f"/proc/{pid}/fd"))))
        stop.set()
        for t in threads:
            t.join(30 * SLOW)
        check(not errors, f"{len(errors)} errors, e.g. {errors[:3]}")
        rss = [x[1] for x in samples]
        print(f"# {secs:.0f} s: {stats}; RSS {min(rss) / 2**20:.1f}-{max(rss) / 2**20:.1f} MiB "
              f"after the restart; fds {[x[2] for x in samples]}")
        # Sanitizers keep freed memory in quarantine (ASan: up to 256 MiB),
        # so RSS says nothing about leaks there; fds still do.
        if SLOW == 1:
            check_rss_flat(rss)
        check(stats["200"] > 10 * secs, f"too few answers: {stats}")
        # Every client gone: the fds are what they were at the start.
        t1 = time.monotonic()
        while len(os.listdir(f"/proc/{pid}/fd")) != fds_idle and time.monotonic() - t1 < 10 * SLOW:
            time.sleep(0.2)
        check(len(os.listdir(f"/proc/{pid}/fd")) == fds_idle,
              f"fds {len(os.listdir(f'/proc/{pid}/fd'))} once idle, {fds_idle} at the start")
        check_cloexec(pid, "after the soak and the restart")
        m = s.metrics()
        check(m["infer_process_restarts_total"] == 1 and m["infer_device_resets_total"] == 2,
              "one reset that worked, one that took a restart")
        check(m["infer_active_requests"] <= 1 and m["infer_queue_depth"] == 0, "nothing left over")
        c = s.conn()
        infer_ok(s, random.Random(77), 20, conn=c, what="after the soak")
        c.close()
        s.stop()


def t_gpu_soak(args):
    """Resident memory and open fds stay flat over a load."""
    secs = float(os.environ.get("INFER_SOAK_S", "30"))
    with Server(args, ["--batch-window-us", "500"]) as s:
        stop = threading.Event()
        counts, errors = [0], []
        rng = random.Random(5)
        x = rand_input(s.model, rng)

        def client():
            c = s.conn()
            while not stop.is_set():
                try:
                    st, _, _, _, _ = s.infer(x, conn=c)
                    counts[0] += 1
                    if st != 200:
                        errors.append(st)
                except (http.client.HTTPException, OSError) as e:
                    errors.append(repr(e))
                    c.close()
                    c = s.conn()
            c.close()
        ts = [threading.Thread(target=client) for _ in range(32)]
        for t in ts:
            t.start()
        samples = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < secs:
            time.sleep(min(2.0, secs / 10))
            m = s.metrics()
            samples.append((time.monotonic() - t0, m["process_resident_memory_bytes"],
                            m["process_open_fds"]))
        stop.set()
        for t in ts:
            t.join()
        check(not errors, f"errors under load: {errors[:5]}")
        warm = [x for x in samples if x[0] >= secs / 3] or samples
        rss = [x[1] for x in warm]
        fds = [x[2] for x in warm]
        print(f"# {counts[0]} requests in {secs:.0f} s; RSS {min(rss) / 2**20:.1f}-"
              f"{max(rss) / 2**20:.1f} MiB, fds {min(fds):.0f}-{max(fds):.0f} after warm-up")
        check_rss_flat(rss)
        check(max(fds) - min(fds) <= 4, "open fds flat")
        s.stop()
