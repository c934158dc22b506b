#!/usr/bin/env python3
"""End-to-end tests of examples/inference_server and of its blocking twin:
each test starts the server on an ephemeral loopback port and drives it with
a real HTTP client (http.client, raw sockets for what http.client will not
send), checking every answer against the Python reference of the MLP
(mlp_ref.py, from the weights file the server wrote).

  service_test.py --server PATH [--backend cpu|gpu] [--twin] [TEST...]

--backend cpu (CI): the GPU step is the CPU reference on worker threads
completing promises; every test runs. --backend gpu: correctness under load
(relative error <= 1e-5), a device fault answered 503 and then served again,
resident memory and open fds flat over a load (INFER_SOAK_S seconds, default
30); exit 77 (skipped) without a GPU. --twin: the blocking twin (the tests
that apply to it). Output: one "ok"/"not ok" line per test; exit 0 when all
passed, 1 otherwise.
"""
import argparse
import http.client
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp_ref  # noqa: E402
from fault_test import (t_cloexec, t_fault, t_gpu_soak, t_restart,  # noqa: E402
                        t_soak_faults)
from harness import (CPU_LAYERS, SLOW, TOL, Server, check, check_answer,  # noqa: E402
                     check_cloexec, rand_input)
from http_test import (t_bad_requests, t_http1, t_limits, t_slow_clients,  # noqa: E402
                       t_socket_timing)

# ---- the tests ---------------------------------------------------------------

def t_usage(args):
    """--help, --version and usage errors, like a daemon."""
    p = subprocess.run([args.server, "--help"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and "Usage:" in p.stdout and "--batch-window-us" in p.stdout and
          "--header-deadline-ms" in p.stdout and "--body-deadline-ms" in p.stdout, "--help")
    p = subprocess.run([args.server, "--version"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and p.stdout.strip(), "--version")
    for bad in (["--bogus"], ["--max-batch", "0"], ["--port", "70000"], ["extra"],
                ["--backend", "tpu"], ["--max-batch"]):
        p = subprocess.run([args.server] + bad, capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and p.stderr.strip(), f"{bad}: exit {p.returncode}, want 2")
    p = subprocess.run([args.server, "--backend", "cpu", "--layers", "4,4", "--port", "0"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "--layers" in p.stderr, "--layers 4,4 refused")


def t_weights(args):
    """The weights file: written when missing, read back, refused when corrupt."""
    with Server(args, []) as s:
        check(any("written to" in l for l in s.out), "first start writes the weights")
        first = s.model.w[0][:4]
        s.stop()
    with Server(args, ["--weights", s.weights, "--seed", "7"]) as s2:
        check(any("read from" in l for l in s2.out), "second start reads them")
        check(s2.model.w[0][:4] == first, "same weights")
        st, _, y, _, _ = s2.infer([0.5] * s2.model.inputs)
        check(st == 200, "serves")
        check_answer(s2.model, [0.5] * s2.model.inputs, y, "after reading the file")
        s2.stop()
    data = bytearray(open(s.weights, "rb").read())
    data[40] ^= 0xFF
    open(s.weights, "wb").write(data)
    p = subprocess.run([args.server, "--backend", args.backend, "--port", "0", "--weights",
                        s.weights, "--layers", CPU_LAYERS], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 1 and "CRC" in p.stderr, "a corrupt weights file is refused")


def t_endpoints(args):
    """health, metrics, JSON and raw inference, keep-alive."""
    with Server(args, []) as s:
        st, hd, body, _ = s.request("GET", "/health")
        check(st == 200 and body == b"ok\n", f"/health: {st} {body!r}")
        st, _, _, _ = s.request("HEAD", "/health")
        check(st == 200, "HEAD /health")
        rng = random.Random(1)
        c = s.conn()
        for i in range(20):
            x = rand_input(s.model, rng)
            st, hd, y, _, _ = s.infer(x, raw=bool(i % 2), conn=c)
            check(st == 200, f"request {i}: {st}")
            check(hd.get("content-type") == ("application/octet-stream" if i % 2 else
                                             "application/json"), "content type")
            check_answer(s.model, x, y, f"request {i}")
        # Keep-alive: one connection served them all, /health on it too.
        st, hd, _, _ = s.request("GET", "/health", conn=c)
        check(st == 200 and hd.get("connection", "").lower() != "close", "keep-alive after 200s")
        c.close()
        m = s.metrics()
        # Inference requests apart from the rest: 20 answers, and 3 health checks.
        check(m['infer_requests_total{code="200"}'] == 20, "inference requests counted")
        check(m['infer_other_requests_total{path="/health",code="200"}'] == 3,
              "health checks counted apart")
        for name in ("infer_queue_depth", "infer_inflight_batches", "process_open_fds",
                     "infer_batch_size_count", "infer_gpu_batch_seconds_count",
                     "infer_request_duration_seconds_count", "process_threads"):
            check(name in m, f"/metrics has {name}")
        if not args.twin:
            check(m["infer_loop_threads"] == 1, "one loop thread")
            check('cudaev_loop_pending{device="0"}' in m, "loop stats")
        s.stop()


def t_batching(args):
    """A full batch leaves at once; a partial one after the window; each
    answer is its own row of its batch."""
    window = 0.4
    with Server(args, ["--batch-window-us", str(int(window * 1e6)), "--max-batch", "4"]) as s:
        rng = random.Random(2)

        def burst(k):
            xs = [rand_input(s.model, rng) for _ in range(k)]
            barrier = threading.Barrier(k)

            def one(x):
                c = s.conn()
                c.connect()
                barrier.wait()
                r = s.infer(x, conn=c)
                c.close()
                return r
            with ThreadPoolExecutor(k) as ex:
                res = list(ex.map(one, xs))
            for x, (st, hd, y, _, _) in zip(xs, res):
                check(st == 200, f"burst of {k}: {st}")
                check_answer(s.model, x, y, f"burst of {k}")
            return res

        res = burst(4)
        ids = {r[1]["x-batch-id"] for r in res}
        rows = sorted(int(r[1]["x-batch-row"]) for r in res)
        check(len(ids) == 1 and rows == [0, 1, 2, 3], f"4 requests, one batch of 4: {ids} {rows}")
        check(all(r[1]["x-batch-size"] == "4" for r in res), "batch size 4")
        check(max(r[4] for r in res) < window * 0.75 * SLOW or SLOW > 1,
              f"a full batch leaves before the window: {max(r[4] for r in res):.3f} s")
        res = burst(2)
        ids = {r[1]["x-batch-id"] for r in res}
        check(len(ids) == 1 and all(r[1]["x-batch-size"] == "2" for r in res),
              "2 requests, one batch of 2")
        check(min(r[4] for r in res) >= window * 0.9, f"a partial batch waits for the window: "
              f"{min(r[4] for r in res):.3f} s")
        res = burst(6)
        sizes = sorted(int(r[1]["x-batch-size"]) for r in res)
        by_batch = {}
        for r in res:
            by_batch.setdefault(r[1]["x-batch-id"], []).append(int(r[1]["x-batch-row"]))
        check(sizes == [2, 2, 4, 4, 4, 4], f"6 requests: batches of 4 and 2: {sizes}")
        check(all(sorted(v) == list(range(len(v))) for v in by_batch.values()),
              f"rows of each batch: {by_batch}")
        m = s.metrics()
        check(m['infer_batch_size_bucket{le="4"}'] - m['infer_batch_size_bucket{le="2"}'] >= 2,
              "batch size histogram")
        s.stop()


def t_eager_batch(args):
    """--eager-batch: a partial batch leaves at once when every open
    connection has its request waiting, and still waits for the window
    while another connection is open and could send."""
    window = 0.4
    with Server(args, ["--batch-window-us", str(int(window * 1e6)), "--max-batch", "8",
                       "--eager-batch"]) as s:
        rng = random.Random(5)

        def burst(k):
            xs = [rand_input(s.model, rng) for _ in range(k)]
            conns = [s.conn() for _ in range(k)]
            for c in conns:
                # A /health round trip on each: the server has accepted
                # (and counts) every connection before the burst; a
                # connect() alone may still sit in the accept queue, and a
                # slow server then sees fewer open connections than requests.
                st, _, _, _ = s.request("GET", "/health", conn=c)
                check(st == 200, f"/health before the burst: {st}")
            barrier = threading.Barrier(k)

            def one(x, c):
                barrier.wait()
                return s.infer(x, conn=c)
            with ThreadPoolExecutor(k) as ex:
                res = list(ex.map(one, xs, conns))
            for c in conns:
                c.close()
            for x, (st, hd, y, _, _) in zip(xs, res):
                check(st == 200, f"burst of {k}: {st}")
                check_answer(s.model, x, y, f"burst of {k}")
            return res

        # Let the connections of earlier calls (/health at start-up) close.
        time.sleep(0.3)
        res = burst(3)
        ids = {r[1]["x-batch-id"] for r in res}
        check(len(ids) == 1 and all(r[1]["x-batch-size"] == "3" for r in res),
              f"3 connections, 3 requests: one batch of 3: {ids}")
        took = max(r[4] for r in res)
        check(took < window * 0.75 * SLOW or SLOW > 1,
              f"nobody else could send: the batch left before the window: {took:.3f} s")
        # An idle connection could still send: the window applies.
        idle = socket.create_connection(("127.0.0.1", s.port))
        time.sleep(0.2)
        res = burst(2)
        idle.close()
        check(all(r[1]["x-batch-size"] == "2" for r in res), "2 requests, one batch of 2")
        took = min(r[4] for r in res)
        check(took >= window * 0.9, f"an idle connection open: the window: {took:.3f} s")
        s.stop()


def t_load(args, clients=200, per_client=20, extra=(), layers_check=True):
    """No lost, duplicated or misrouted answer under concurrent load."""
    extra = list(extra) + ["--batch-window-us", "2000"]
    with Server(args, extra) as s:
        before = s.metrics()['infer_requests_total{code="200"}']
        rng = random.Random(3)
        inputs = [[rand_input(s.model, rng) for _ in range(per_client)] for _ in range(clients)]
        refs = [s.model.forward_many(xs) for xs in inputs]
        errors, seen = [], {}
        lock = threading.Lock()

        def client(i):
            c = s.conn(timeout=60)
            for j, x in enumerate(inputs[i]):
                try:
                    st, hd, y, _, _ = s.infer(x, raw=bool((i + j) % 3 == 0), conn=c)
                except (http.client.HTTPException, OSError) as e:
                    with lock:
                        errors.append(f"client {i} request {j}: {e!r}")
                    c.close()
                    c = s.conn(timeout=60)
                    continue
                with lock:
                    if st != 200:
                        errors.append(f"client {i} request {j}: {st}")
                        continue
                    err = mlp_ref.rel_err(y, refs[i][j])
                    if err > TOL:
                        errors.append(f"client {i} request {j}: relative error {err:.3g}")
                    key = (hd["x-device"], hd["x-batch-id"], hd["x-batch-row"])
                    if key in seen:
                        errors.append(f"row {key} answered twice")
                    seen[key] = (i, j)
            c.close()

        t0 = time.monotonic()
        with ThreadPoolExecutor(clients) as ex:
            list(ex.map(client, range(clients)))
        secs = time.monotonic() - t0
        check(not errors, f"{len(errors)} bad answers, e.g. {errors[:5]}")
        total = clients * per_client
        check(len(seen) == total, f"{len(seen)} answers, want {total}")
        m = s.metrics()
        check(m['infer_requests_total{code="200"}'] - before == total, "200s counted once each")
        rows = m["infer_batch_rows_total"]
        check(rows >= total, "rows counted")
        devices = {k[0] for k in seen}
        print(f"# {total} answers in {secs:.2f} s ({total / secs:.0f}/s), "
              f"{m['infer_batch_size_count']:.0f} batches (mean {rows / m['infer_batch_size_count']:.1f} "
              f"rows), devices {sorted(devices)}")
        if "--cpu-devices" in extra:
            want = int(extra[extra.index("--cpu-devices") + 1])
            check(len(devices) == want, f"every device used: {sorted(devices)}")
        elif args.backend == "gpu":
            want = sum(1 for l in s.out if re.match(r"device \d+ \(", l))
            check(len(devices) == want, f"every GPU used: {sorted(devices)} of {want}")
        s.stop()


def t_multi_device(args):
    """Several stand-in devices, each its own cudaev loop on the one thread."""
    t_load(args, clients=48, per_client=10, extra=["--cpu-devices", "3", "--streams", "2"])


def t_deadline(args):
    """504 for a request in flight and for one still queued; the late batch
    end is ignored; the server keeps serving."""
    with Server(args, ["--cpu-delay-us", "300000", "--deadline-ms", "500", "--max-batch", "1",
                       "--streams", "1", "--batch-window-us", "0"]) as s:
        x = [0.5] * s.model.inputs
        res = [None] * 3

        def one(i):
            time.sleep(0.05 * i)
            res[i] = s.infer(x)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = [r[0] for r in res]
        check(codes == [200, 504, 504], f"codes {codes}, want [200, 504, 504]")
        check(all(0.45 < r[4] < 0.9 * SLOW + 0.5 for r in res[1:]),
              f"504s at the deadline: {[round(r[4], 3) for r in res]}")
        check(b"deadline" in res[1][3], "reason names the deadline")
        time.sleep(0.8)  # the abandoned batches end meanwhile
        m = s.metrics()
        check(m["infer_inflight_batches"] == 0 and m["infer_queue_depth"] == 0, "nothing left")
        check(m['infer_requests_total{code="504"}'] == 2, "504s counted")
        st, _, body, _ = s.request("GET", "/health")
        check(st == 200, "still healthy")
        s.stop()


def t_queue_full(args):
    """Over --max-queue: 503 at once, with a reason."""
    with Server(args, ["--cpu-delay-us", "400000", "--max-queue", "2", "--max-batch", "1",
                       "--streams", "1", "--batch-window-us", "0"]) as s:
        x = [0.5] * s.model.inputs
        res = [None] * 5

        def one(i):
            time.sleep(0.04 * i)
            res[i] = s.infer(x)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(5)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = sorted(r[0] for r in res)
        check(codes == [200, 200, 200, 503, 503], f"codes {codes}")
        check(all(b"queue full" in r[3] for r in res if r[0] == 503), "reason: queue full")
        s.stop()


def t_loop_threads(args):
    """--loop-threads 2: two complete servers on one port (SO_REUSEPORT),
    both serving correct answers; a device fault restarts the process with
    both listening sockets handed over; SIGTERM drains both."""
    with Server(args, ["--loop-threads", "2", "--fault-injection", "--batch-window-us", "0"]) as s:
        rng = random.Random(11)

        def one(i):
            x = rand_input(s.model, rng)
            st, _, y, _, _ = s.infer(x)  # a connection each: the kernel spreads them
            return x, st, y
        with ThreadPoolExecutor(16) as ex:
            res = list(ex.map(one, range(200)))
        for x, st, y in res:
            check(st == 200, f"answer: {st}")
            check_answer(s.model, x, y, "two loop threads")
        m = s.metrics()
        check(m["infer_loop_threads"] == 2, "two loop threads in /metrics")
        per = [m.get(f'infer_loop_thread_answers_total{{thread="{i}"}}', 0) for i in (0, 1)]
        check(all(p > 0 for p in per), f"both threads answered: {per}")
        check_cloexec(s.proc.pid, "two loop threads")
        st, _, _, body, _ = s.infer([0.1] * s.model.inputs, headers={"X-Inject-Fault": "1"})
        check(st == 503, f"the faulting request: {st} {body!r}")
        t0 = time.monotonic()
        while not any("restart 1 after" in l for l in s.out):
            check(time.monotonic() - t0 < 20 * SLOW, "no restart\n" + s.log())
            time.sleep(0.01)
        with ThreadPoolExecutor(16) as ex:
            res = list(ex.map(one, range(100)))
        for x, st, y in res:
            check(st == 200, f"after the restart: {st}")
            check_answer(s.model, x, y, "after the restart")
        m = s.metrics()
        check(m["infer_process_restarts_total"] == 1 and m["infer_loop_threads"] == 2,
              "restarted with two loop threads")
        s.stop()


def t_drain(args):
    """SIGTERM: no new connections, everything in flight answered, exit 0."""
    with Server(args, ["--cpu-delay-us", "300000", "--batch-window-us", "0", "--max-batch",
                       "2", "--streams", "1"]) as s:
        rng = random.Random(4)
        xs = [rand_input(s.model, rng) for _ in range(5)]
        res = [None] * 5

        def one(i):
            res[i] = s.infer(xs[i])
        ts = [threading.Thread(target=one, args=(i,)) for i in range(5)]
        for t in ts:
            t.start()
        time.sleep(0.15)
        s.send(signal.SIGTERM)
        time.sleep(0.1)
        refused = False
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        except OSError:
            refused = True
        for t in ts:
            t.join()
        for x, r in zip(xs, res):
            check(r[0] == 200, f"in-flight request during the drain: {r[0]} {r[3]!r}")
            check_answer(s.model, x, r[2], "during the drain")
        check(refused, "new connections refused while draining")
        rc = s.stop(timeout=10)
        check(rc == 0 and any("draining" in l for l in s.out), "drained, exit 0")


def t_drain_timeout(args):
    """A drain that cannot finish: 503 after --drain-timeout, exit 1."""
    with Server(args, ["--cpu-delay-us", "5000000", "--batch-window-us", "0",
                       "--drain-timeout", "1", "--deadline-ms", "60000"]) as s:
        res = []
        t = threading.Thread(target=lambda: res.append(s.infer([0.5] * s.model.inputs)))
        t.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        s.send(signal.SIGINT)
        t.join()
        check(res[0][0] == 503 and b"shutting down" in res[0][3], f"{res[0][0]} {res[0][3]!r}")
        check(time.monotonic() - t0 < 4 * SLOW, "answered at the drain timeout")
        s.stop(want=1, timeout=20)


# ---- GPU -------------------------------------------------------------------------

def t_gpu_load(args):
    """Results equal the CPU reference under load, on every device."""
    t_load(args, clients=64, per_client=40, extra=["--streams", "4"])


CPU_TESTS = [t_usage, t_weights, t_endpoints, t_socket_timing, t_bad_requests, t_http1, t_batching, t_eager_batch,
             t_load, t_multi_device, t_deadline, t_queue_full, t_fault, t_restart, t_drain,
             t_drain_timeout, t_limits, t_slow_clients, t_cloexec, t_loop_threads, t_soak_faults]
TWIN_TESTS = [t_usage, t_endpoints, t_bad_requests, t_batching, t_eager_batch, t_load,
              t_multi_device, t_deadline, t_queue_full, t_fault, t_drain]
GPU_TESTS = [t_endpoints, t_gpu_load, t_fault, t_gpu_soak, t_cloexec, t_drain]
GPU_TWIN_TESTS = [t_endpoints, t_gpu_load, t_drain]


def have_gpu(args):
    if not (os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")):
        return "no NVIDIA GPU on this machine (no /dev/nvidia0)"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--twin", action="store_true")
    ap.add_argument("--expect-cudart", help="the libcudart.so.13 the server must load")
    ap.add_argument("tests", nargs="*")
    args = ap.parse_args()
    if args.backend == "gpu":
        why = have_gpu(args)
        if why:
            print(f"SKIP: {why}")
            return 77
        tests = GPU_TWIN_TESTS if args.twin else GPU_TESTS
    else:
        tests = TWIN_TESTS if args.twin else CPU_TESTS
    if args.tests:
        tests = [t for t in tests if t.__name__[2:] in args.tests]
    failed = 0
    print(f"1..{len(tests)}")
    for i, t in enumerate(tests, 1):
        t0 = time.monotonic()
        try:
            t(args)
            print(f"ok {i} - {t.__name__[2:]} ({time.monotonic() - t0:.1f}s)", flush=True)
        except Exception as e:  # a failure or a crash of the test itself
            failed += 1
            print(f"not ok {i} - {t.__name__[2:]} ({time.monotonic() - t0:.1f}s)")
            for line in str(e).splitlines() or [repr(e)]:
                print("# " + line)
            sys.stdout.flush()
    print(f"# {len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
