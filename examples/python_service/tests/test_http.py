"""The Python service over HTTP on its CPU path: every 4xx the C service
gives, batching, the drain, faults, and a bounded load with no answer lost,
duplicated or wrong."""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import LAYERS, SERVER, SLOW, Server, raw_http

WAITS = ("cudaev", "executor", "poll")


def one_line(data, text=""):
    line = data.decode(errors="replace")
    return line.endswith("\n") and line.count("\n") == 1 and text in line


def test_usage():
    for bad in (["--bogus"], ["--max-batch", "0"], ["--port", "70000"], ["extra"],
                ["--wait", "spin"], ["--model-device", "tpu"]):
        p = subprocess.run([sys.executable, SERVER] + bad, capture_output=True, text=True,
                           timeout=60 * SLOW)
        assert p.returncode == 2 and p.stderr.strip(), (bad, p.returncode)
    p = subprocess.run([sys.executable, SERVER, "--model-device", "cpu", "--layers", "4,4",
                        "--port", "0"], capture_output=True, text=True, timeout=60 * SLOW)
    assert p.returncode == 1 and "--layers" in p.stderr


def test_bad_requests():
    with Server(["--max-body", "2048", "--body-deadline-ms", "500"]) as s:
        n = s.model.inputs
        good = json.dumps([0.25] * n)
        cases = [
            ("GET", "/nope", None, {}, 404, "no such endpoint"),
            ("GET", "/v1/infer", None, {}, 405, "POST"),
            ("DELETE", "/health", None, {}, 405, "GET"),
            ("POST", "/metrics", "x", {}, 405, "GET"),
            ("POST", "/v1/infer", good, {"Content-Type": "text/plain"}, 415, "Content-Type"),
            ("POST", "/v1/infer", good, {"Content-Type": "application/x-www-form-urlencoded"},
             415, "Content-Type"),
            ("POST", "/v1/infer", json.dumps([0.25] * (n - 1)), {}, 400, "wrong length"),
            ("POST", "/v1/infer", json.dumps([0.25] * (n + 1)), {}, 400, "wrong length"),
            ("POST", "/v1/infer", b"\0" * (4 * n - 4),
             {"Content-Type": "application/octet-stream"}, 400, "wrong length"),
            ("POST", "/v1/infer", struct.pack(f"<{n}f", *([float("nan")] + [0.0] * (n - 1))),
             {"Content-Type": "application/octet-stream"}, 400, "not finite"),
            ("POST", "/v1/infer", json.dumps([1e39] + [0.0] * (n - 1)), {}, 400,
             "out of float32 range"),
            ("POST", "/v1/infer", "x" * 3000, {}, 413, "limit"),
        ]
        for b in ["", "[", "[1,2", '{"a": 1}', "[1,,2]", "[1,2,]", "[NaN]", "[1e999]", '["1"]',
                  "[01]", "[.5]", "[+1]", "[1] x", "[[1]]", "[0x10]", "[-]", "[1.]", "[1e]",
                  "[Infinity]", "\ufeff[1]", "null", "[true]", "[" * 2000]:
            cases.append(("POST", "/v1/infer", b.encode(), {"Content-Type": "application/json"},
                          400, ""))
        c = s.conn()
        for method, path, body, headers, want, text in cases:
            what = f"{method} {path} {str(body)[:30]!r} {headers}"
            try:
                st, hd, data = s.request(method, path, body, headers, conn=c)
            except (OSError, ConnectionError):
                c.close()
                c = s.conn()
                st, hd, data = s.request(method, path, body, headers, conn=c)
            assert st == want, f"{what}: {st}, want {want}: {data!r}"
            assert one_line(data, text), f"{what}: reason {data!r} is not one line with {text!r}"
            if want == 405:
                assert "allow" in hd, what
            if hd.get("connection", "").lower() == "close":
                c.close()
                c = s.conn()
        x = np.full(n, 0.1, np.float32)
        st, _, y, _ = s.infer(x, conn=c)
        assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
        c.close()
        # What http.client will not send: a chunked body over the limit, a
        # body that stops (408 at the body deadline), a garbage request line.
        chunk = b"%x\r\n%s\r\n" % (1500, b"1" * 1500)
        got = raw_http(s.port, b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                               b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       chunk + chunk + b"0\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 413"), got[:80]
        t0 = time.monotonic()
        got = raw_http(s.port, b"POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                               b"\r\n[0.5,", read_timeout=10)
        took = time.monotonic() - t0
        assert got.startswith(b"HTTP/1.1 408") and b"within 500 ms" in got, got[:200]
        assert 0.4 < took < 5 * SLOW, took
        got = raw_http(s.port, b"GARBAGE\r\n\r\n")
        # aiohttp's parser answers this itself (HTTP/1.0 400), as MHD does for the C service.
        assert got == b"" or got.split(b" ")[1] == b"400", got[:60]
        m = s.metrics()
        for code in (400, 408, 413, 415):
            assert m[f'infer_requests_total{{code="{code}"}}'] > 0, code
        for code in (404, 405):
            assert m[f'infer_requests_total{{code="{code}"}}'] == 0, code
        assert m['infer_other_requests_total{path="other",code="404"}'] == 1
        for path in ("/v1/infer", "/health", "/metrics"):
            assert m[f'infer_other_requests_total{{path="{path}",code="405"}}'] == 1, path
        assert m['infer_http_timeouts_total{phase="body"}'] == 1
        assert s.stop() == 0


@pytest.mark.parametrize("wait", WAITS)
def test_batching(wait, rng):
    """A full batch leaves at once, a partial one after the window; each answer
    is its own row of its batch."""
    window = 0.4
    with Server(["--wait", wait, "--batch-window-us", str(int(window * 1e6)),
                 "--max-batch", "4"]) as s:

        def burst(k):
            xs = rng.uniform(-1, 1, (k, s.model.inputs)).astype(np.float32)
            conns = [s.conn() for _ in range(k)]
            for c in conns:
                c.connect()
            barrier = threading.Barrier(k)

            def one(i):
                barrier.wait()
                t0 = time.monotonic()
                r = s.infer(xs[i], conn=conns[i])
                return r + (time.monotonic() - t0,)
            with ThreadPoolExecutor(k) as ex:
                res = list(ex.map(one, range(k)))
            for c in conns:
                c.close()
            for x, (st, hd, y, _, _) in zip(xs, res):
                assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
            return res

        res = burst(4)
        assert len({r[1]["x-batch-id"] for r in res}) == 1
        assert sorted(int(r[1]["x-batch-row"]) for r in res) == [0, 1, 2, 3]
        assert all(r[1]["x-batch-size"] == "4" for r in res)
        if SLOW == 1:
            assert max(r[4] for r in res) < window * 0.75, "a full batch leaves at once"
        res = burst(2)
        assert len({r[1]["x-batch-id"] for r in res}) == 1
        assert all(r[1]["x-batch-size"] == "2" for r in res)
        assert min(r[4] for r in res) >= window * 0.9, "a partial batch waits for the window"
        m = s.metrics()
        assert m['infer_batch_size_bucket{le="4"}'] - m['infer_batch_size_bucket{le="2"}'] == 1
        assert m['infer_batch_size_bucket{le="2"}'] - m['infer_batch_size_bucket{le="1"}'] == 1
        assert m["infer_batch_rows_total"] == 6
        assert m[f'infer_wait_mode{{mode="{wait}"}}'] == 1
        assert s.stop() == 0


def test_eager_batch(rng):
    """--eager-batch: a partial batch leaves at once when every open connection
    has its request waiting, and waits for the window while another open
    connection could still send (the C service's policy)."""
    window = 0.6
    with Server(["--eager-batch", "--batch-window-us", str(int(window * 1e6))]) as s:
        x = rng.uniform(-1, 1, (2, s.model.inputs)).astype(np.float32)
        c = s.conn()
        t0 = time.monotonic()
        st, hd, y, _ = s.infer(x[0], conn=c)
        alone = time.monotonic() - t0
        assert st == 200 and np.array_equal(y, s.model.forward(x[:1])[0])
        assert alone < window * 0.5, f"alone on its worker it waited {alone:.3f} s"
        idle = s.conn()
        idle.connect()
        s.request("GET", "/health", conn=idle)  # surely accepted and counted as open
        t0 = time.monotonic()
        st, hd, y, _ = s.infer(x[1], conn=c)
        waited = time.monotonic() - t0
        assert st == 200 and hd["x-batch-size"] == "1"
        assert waited >= window * 0.9, f"with an idle connection open it waited {waited:.3f} s"
        idle.close()
        c.close()
        assert s.stop() == 0


@pytest.mark.parametrize("wait", WAITS)
def test_load(wait, rng):
    """2,000 requests over 64 keep-alive connections, two workers: every answer
    arrives once, for its own input, equal to the reference."""
    conns, per = 64, 2000 // 64 + 1
    total = conns * per
    with Server(["--wait", wait, "--cpu-delay-us", "200"], workers=2) as s:
        xs = rng.uniform(-1, 1, (total, s.model.inputs)).astype(np.float32)
        ref = s.model.forward(xs)
        fds0 = {}
        for _ in range(20):
            m = s.metrics()
            fds0.setdefault(m["infer_worker"], m["process_open_fds"])

        def client(i):
            c = s.conn()
            got = []
            for j in range(per):
                k = i * per + j
                st, hd, y, _ = s.infer(xs[k], raw=bool(k % 2), conn=c)
                got.append((k, st, y, hd.get("x-batch-id"), hd.get("x-batch-row")))
            c.close()
            return got
        with ThreadPoolExecutor(conns) as ex:
            res = [g for part in ex.map(client, range(conns)) for g in part]
        assert len(res) == total
        assert all(st == 200 for _, st, _, _, _ in res), {st for _, st, _, _, _ in res}
        wrong = [k for k, _, y, _, _ in res if not np.array_equal(y, ref[k])]
        assert not wrong, f"{len(wrong)} answers differ from their own input's reference"
        # Each answer is one row of one batch of one worker: no row answered twice.
        by_worker = {}
        m = s.metrics()
        assert m["infer_workers"] == 2
        rows = [(b, r) for _, _, _, b, r in res]
        # Batch ids are per worker; a (batch, row) pair may repeat across the
        # two workers, never three times.
        for pair in rows:
            by_worker[pair] = by_worker.get(pair, 0) + 1
        assert max(by_worker.values()) <= 2
        # The clients are gone: each worker's fds go back to what they were.
        deadline = time.monotonic() + 10 * SLOW
        while True:
            m = s.metrics()
            w = m["infer_worker"]
            if w in fds0 and m["process_open_fds"] <= fds0[w]:
                fds0.pop(w)
            if not fds0:
                break
            assert time.monotonic() < deadline, f"fds not back to idle: {fds0} now {m}"
            time.sleep(0.05)
        assert s.stop() == 0


def test_drain():
    """SIGTERM: everything in flight is answered, then the listener is gone,
    exit 0."""
    with Server(["--cpu-delay-us", "600000", "--batch-window-us", "1000000",
                 "--max-batch", "64"]) as s:
        xs = np.random.default_rng(3).uniform(-1, 1, (8, s.model.inputs)).astype(np.float32)
        conns = [s.conn() for _ in xs]
        for c in conns:
            c.connect()
        with ThreadPoolExecutor(len(xs)) as ex:
            futs = [ex.submit(s.infer, x, False, c) for x, c in zip(xs, conns)]
            time.sleep(0.3 * SLOW)  # all queued, inside the 1 s window
            t0 = time.monotonic()
            s.proc.send_signal(signal.SIGTERM)
            res = [f.result() for f in futs]
        took = time.monotonic() - t0
        for x, (st, hd, y, _) in zip(xs, res):
            assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
            assert hd.get("connection", "").lower() == "close"
        # The queue left without waiting for the rest of the window.
        assert took < 0.6 + 0.7 * SLOW + 0.5, took
        assert s.proc.wait(30 * SLOW) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


def test_drain_timeout():
    """A drain that runs out of time answers 503 and exits 1."""
    with Server(["--cpu-delay-us", "3000000", "--drain-timeout", "0.3"]) as s:
        x = np.zeros(s.model.inputs, np.float32)
        with ThreadPoolExecutor(1) as ex:
            f = ex.submit(s.infer, x)
            time.sleep(0.5 * SLOW)
            s.proc.send_signal(signal.SIGTERM)
            st, _, _, data = f.result()
        assert st == 503 and one_line(data, "draining"), (st, data)
        assert s.proc.wait(30 * SLOW) == 1


def test_deadline_and_queue_full():
    with Server(["--cpu-delay-us", "400000", "--deadline-ms", "600", "--max-queue", "1",
                 "--streams", "1", "--max-batch", "1", "--batch-window-us", "0"]) as s:
        x = np.zeros(s.model.inputs, np.float32)
        conns = [s.conn() for _ in range(3)]
        for c in conns:
            c.connect()
        with ThreadPoolExecutor(3) as ex:
            futs = [ex.submit(s.infer, x, False, c) for c in conns]
            res = [f.result() for f in futs]
        codes = sorted(r[0] for r in res)
        # One in the slot (200 at 0.4 s), one queued behind it (due at 0.8 s:
        # 504 at 0.6 s), one over the queue (503).
        assert codes == [200, 503, 504], codes
        assert any(one_line(r[3], "queue full") for r in res if r[0] == 503)
        assert all(one_line(r[3], "deadline of 600 ms") for r in res if r[0] == 504)
        time.sleep(0.5)
        # The late batch's end found its row answered; the slot serves again.
        st, _, y, _ = s.infer(x)
        assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
        m = s.metrics()
        assert m['infer_requests_total{code="504"}'] == 1
        assert m['infer_requests_total{code="503"}'] == 1


def test_fault_reset():
    """A device fault: its batch gets 503, the device is reset, serving goes on."""
    with Server(["--fault-injection"]) as s:
        x = np.full(s.model.inputs, 0.5, np.float32)
        st, _, _, data = s.infer(x, headers={"X-Inject-Fault": "1"})
        assert st == 503 and one_line(data, "device fault"), data
        deadline = time.monotonic() + 10 * SLOW
        while s.request("GET", "/health")[0] != 200:
            assert time.monotonic() < deadline, "the device did not come back"
            time.sleep(0.05)
        st, _, y, _ = s.infer(x)
        assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
        m = s.metrics()
        assert m["infer_device_resets_total"] == 1 and m["infer_process_restarts_total"] == 0
        assert s.stop() == 0


def test_fault_restart():
    """A fault the reset cannot clear (a sticky CUDA error): the worker drains and
    exits, the master starts another on the same socket, same port."""
    with Server(["--fault-injection"]) as s:
        x = np.full(s.model.inputs, 0.5, np.float32)
        st, _, _, data = s.infer(x, headers={"X-Inject-Fault": "sticky"})
        assert st == 503 and one_line(data, "device fault"), data
        deadline = time.monotonic() + 30 * SLOW
        while True:
            try:
                st, _, body = s.request("GET", "/health")
                if st == 200 and b"restarted 1 time" in body:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "no new worker"
            time.sleep(0.1)
        st, _, y, _ = s.infer(x)
        assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
        assert s.metrics()["infer_process_restarts_total"] == 1
        assert s.proc.poll() is None
        assert s.stop() == 0
        assert "starting it again" in s.output()


def test_workers_share_the_port():
    """--workers 3: three processes answer on one port (SO_REUSEPORT)."""
    with Server([], workers=3) as s:
        seen = set()
        for _ in range(60):
            seen.add(int(s.metrics()["infer_worker"]))
            if len(seen) == 3:
                break
        assert seen == {0, 1, 2}
        assert s.stop() == 0


def test_answers_equal_the_c_service():
    """The same requests to the C service's CPU backend: the same bytes back
    (JSON "%.9g" and raw float32), and the same weights file."""
    c_server = os.environ.get("PYSERVICE_C_SERVER")
    if not c_server or not os.access(c_server, os.X_OK):
        pytest.skip("PYSERVICE_C_SERVER (examples/inference_server) not given")
    with Server([]) as py, Server(["--backend", "cpu", "--layers", LAYERS, "--weights",
                                   os.path.join(py.dir, "c.weights")], cmd=[c_server]) as c:
        import model
        w = model.Model.load(os.path.join(py.dir, "c.weights"))
        assert all(np.array_equal(a, b) for a, b in zip(w.w + w.b, py.model.w + py.model.b))
        rng = np.random.default_rng(5)
        xs = np.concatenate([rng.uniform(-1, 1, (300, py.model.inputs)),
                             rng.uniform(-100, 100, (100, py.model.inputs))]).astype(np.float32)
        pc, cc = py.conn(), c.conn()
        for i, x in enumerate(xs):
            raw = bool(i % 2)
            a, b = py.infer(x, raw=raw, conn=pc), c.infer(x, raw=raw, conn=cc)
            assert a[0] == b[0] == 200
            assert a[3] == b[3], f"input {i}: {a[3]!r} != {b[3]!r}"
        # JSON in: the same numbers parsed the same way.
        for text in ("[" + ",".join(["1e-7"] * py.model.inputs) + "]",
                     "[" + ",".join(["0.1", "-2.5e3", "3.4028234e38", "123456789"] *
                                    (py.model.inputs // 4)) + "]"):
            a = py.request("POST", "/v1/infer", text, conn=pc)
            b = c.request("POST", "/v1/infer", text, conn=cc)
            assert a[0] == b[0] and a[2] == b[2], (a, b)
        pc.close()
        cc.close()


def test_torch_cpu():
    """--cpu-impl torch: PyTorch's CPU arithmetic (float64, each layer rounded
    to float32) gives the reference's answers, bit for bit."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch does not import")
    with Server(["--cpu-impl", "torch"]) as s:
        xs = np.random.default_rng(8).uniform(-3, 3, (200, s.model.inputs)).astype(np.float32)
        ref = s.model.forward(xs)
        c = s.conn()
        for i, x in enumerate(xs):
            st, _, y, _ = s.infer(x, raw=bool(i % 2), conn=c)
            assert st == 200 and np.array_equal(y, ref[i]), i
        c.close()
        assert s.stop() == 0


def test_slow_clients():
    """Headers trickled past --header-deadline-ms, and a kept-alive
    connection's next request line trickled: 408 and closed at the deadline;
    an idle kept-alive connection is not cut by it; good clients are served."""
    with Server(["--header-deadline-ms", "800"]) as s:
        def slow(first, drip, every=0.2, limit=6.0):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=limit * SLOW)
            sock.sendall(first)
            t0 = time.monotonic()
            got = b""
            sock.settimeout(every)
            while time.monotonic() - t0 < limit * SLOW:
                try:
                    b = sock.recv(65536)
                    if not b:
                        return got, time.monotonic() - t0
                    got += b
                except socket.timeout:
                    try:
                        sock.sendall(drip)
                    except OSError:
                        pass
            return got, None

        with ThreadPoolExecutor(6) as ex:
            hdr = [ex.submit(slow, b"GET /health HTTP/1.1\r\n", b"X-a: b\r\n") for _ in range(3)]
            keep = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /hea"
            nxt = [ex.submit(slow, keep, b"a") for _ in range(2)]
            x = np.full(s.model.inputs, 0.25, np.float32)
            for _ in range(5):
                st, _, y, _ = s.infer(x)
                assert st == 200 and np.array_equal(y, s.model.forward(x[None])[0])
            for f in hdr:
                got, took = f.result()
                assert got.startswith(b"HTTP/1.1 408") and b"within 800 ms" in got, got[:120]
                assert took is not None and 0.7 < took < 3 * SLOW, took
            for f in nxt:
                got, took = f.result()
                assert got.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 408" in got, got[:300]
                assert took is not None and took < 3 * SLOW, took
        # A kept-alive connection that says nothing is left to the idle timeout.
        c = s.conn()
        assert s.request("GET", "/health", conn=c)[0] == 200
        time.sleep(1.2)
        assert s.request("GET", "/health", conn=c)[0] == 200
        c.close()
        assert s.metrics()['infer_http_timeouts_total{phase="headers"}'] == 5
        assert s.stop() == 0


def test_slow_client_cut_is_not_a_reset():
    """A client trickling headers in step with the deadline (a byte may
    arrive as the 408 is written) reads the whole 408 and then the end of the
    stream, never a reset: the close lingers on the bytes still coming."""
    def trickle(port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        sock.settimeout(0.1)
        got = b""
        try:
            while True:
                try:
                    b = sock.recv(65536)
                    if not b:
                        return got
                    got += b
                except socket.timeout:
                    sock.sendall(b"X-a: b\r\n")
        except ConnectionResetError:
            return b"reset after %r" % got[:40]
        finally:
            sock.close()

    with Server(["--header-deadline-ms", "300"]) as s:
        with ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda _: trickle(s.port), range(48)))
        bad = [g[:80] for g in got if not g.startswith(b"HTTP/1.1 408")]
        assert not bad, bad
        assert s.stop() == 0


def test_workers_die_with_the_master():
    """A master killed outright (SIGKILL) takes its workers with it."""
    s = Server([], workers=2)
    with s:
        pid = s.proc.pid
        kids = [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
        assert len(kids) == 2
        s.proc.kill()
        s.proc.wait()
        deadline = time.monotonic() + 20 * SLOW
        while any(os.path.exists(f"/proc/{k}") and
                  open(f"/proc/{k}/stat").read().split()[2] != "Z" for k in kids):
            assert time.monotonic() < deadline, "a worker outlived its master"
            time.sleep(0.05)


def test_restart_answers_the_queue():
    """Requests queued behind a batch whose fault takes a restart get 503
    "restarting" at once, not their deadline's 504."""
    with Server(["--fault-injection", "--cpu-delay-us", "300000", "--max-batch", "1",
                 "--streams", "1", "--batch-window-us", "0", "--deadline-ms", "5000"]) as s:
        x = np.full(s.model.inputs, 0.5, np.float32)
        conns = [s.conn() for _ in range(3)]
        for c in conns:
            c.connect()
        with ThreadPoolExecutor(3) as ex:
            a = ex.submit(s.infer, x, False, conns[0], {"X-Inject-Fault": "sticky"})
            time.sleep(0.1 * SLOW)
            t0 = time.monotonic()
            rest = [ex.submit(s.infer, x, False, c) for c in conns[1:]]
            st, _, _, data = a.result()
            assert st == 503 and one_line(data, "device fault"), data
            for f in rest:
                st, _, _, data = f.result()
                assert st == 503 and one_line(data, "restarting"), (st, data)
            assert time.monotonic() - t0 < 2.5 * SLOW
        rc = s.stop()
        assert rc == 0, s.output()
