"""The decode loop (POST /v1/generate) on its CPU backend, over real HTTP:
streaming order and completeness (JSON lines and server-sent events), join
and leave (more streams than slots, arriving and ending mid-run, every
answer checked against the model run one request at a time), a client that
disconnects, bad input, the bounds of max_tokens, 503 when too many wait,
drain on SIGTERM, and idle CPU under each --wait mode.

Run: /usr/bin/python3 -m pytest -q examples/python_service/tests/test_decode.py
"""
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time

import aiohttp
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = os.path.dirname(HERE)
sys.path.insert(0, SERVICE)

import decode_model  # noqa: E402
from conftest import raw_http  # noqa: E402

# One BLAS thread: the test measures the service, not OpenBLAS's pool, and
# the CI machine's cores are shared.
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
REF = decode_model.NumpyModel(decode_model.make_weights(), max_batch=1)


class Server:
    """server.py with one worker on the CPU device, the decode loop in it."""

    def __init__(self, tmp_path, *args):
        port_file = tmp_path / f"port{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SERVICE, "server.py"), "--port", "0",
             "--port-file", str(port_file), "--model-device", "cpu", "--loop", "asyncio", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"server did not start: {self.proc.stdout.read()}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}"

    def stop(self, signal_it=True):
        if signal_it and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        rest = self.proc.stdout.read()
        self.proc.stdout.close()
        return rc, rest

    def pids(self):
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            return [self.proc.pid] + [int(p) for p in f.read().split()]

    def cpu_seconds(self):
        """User + system time of the master and its workers."""
        total = 0
        for pid in self.pids():
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def metrics(self):
        async def get():
            async with aiohttp.ClientSession() as s:
                return await self.metrics_async(s)
        return asyncio.run(get())

    async def metrics_async(self, session):
        async with session.get(self.url + "/metrics") as r:
            text = await r.text()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("decode"), "--wait", "executor", "--decode-max-batch", "4")
    yield s
    rc, rest = s.stop()
    assert rc == 0, rest


async def stream(session, url, prompt, max_tokens, sse=False, on_token=None):
    """Reads one stream to its end: (tokens, final object, per-line index)."""
    headers = {"Accept": "text/event-stream"} if sse else {}
    body = {"prompt": prompt, "max_tokens": max_tokens}
    async with session.post(url + "/v1/generate", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        assert r.headers["Content-Type"].startswith(
            "text/event-stream" if sse else "application/x-ndjson")
        tokens, final = [], None
        async for raw in r.content:
            line = raw.decode().rstrip("\n")
            if sse:
                if not line:
                    continue
                assert line.startswith("data: "), line
                line = line[len("data: "):]
            obj = json.loads(line)
            assert final is None, f"a line after the final one: {obj}"
            if obj.get("done"):
                final = obj
                continue
            assert obj["index"] == len(tokens), (obj, len(tokens))
            tokens.append(obj["token"])
            if on_token:
                await on_token(len(tokens))
        return tokens, final


def check(prompt, tokens):
    ok, exact, msg = decode_model.reference_check(REF, prompt, tokens)
    assert ok, msg
    return exact


def test_stream_order_and_completeness(server):
    async def go():
        async with aiohttp.ClientSession() as s:
            a = await stream(s, server.url, [1, 2, 3], 20)
            b = await stream(s, server.url, [1, 2, 3], 20, sse=True)
            c = await stream(s, server.url, "hi", 5)
        return a, b, c
    (ta, fa), (tb, fb), (tc, fc) = asyncio.run(go())
    want = decode_model.reference_generate(REF, [1, 2, 3], 20)
    assert ta == want and tb == want
    assert fa == fb == {"done": True, "finish_reason": "length", "tokens": 20}
    assert tc == decode_model.reference_generate(REF, list(b"hi"), 5)
    assert fc["tokens"] == 5


def _raw_generate(url, version, prompt, n):
    """POST /v1/generate over a raw socket; the whole answer's bytes."""
    body = json.dumps({"prompt": prompt, "max_tokens": n}).encode()
    return raw_http(int(url.rsplit(":", 1)[1]),
                    b"POST /v1/generate HTTP/%s\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                    % (version.encode(), len(body), body), read_timeout=30)


def test_stream_bytes(server):
    """The bytes on the wire: HTTP/1.1 chunks (tokens after the first written
    by the engine itself, framed by it) and HTTP/1.0's close-delimited body
    both carry exactly the lines json.dumps makes."""
    want = decode_model.reference_generate(REF, [4, 5], 12)
    lines = [json.dumps({"index": i, "token": t}) + "\n" for i, t in enumerate(want)]
    lines.append(json.dumps({"done": True, "finish_reason": "length", "tokens": 12}) + "\n")
    head, _, body = _raw_generate(server.url, "1.1", [4, 5], 12).partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head, head
    data = b""
    while True:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            assert rest == b"\r\n", rest
            break
        assert rest[n:n + 2] == b"\r\n", rest[:n + 2]
        data += rest[:n]
        body = rest[n + 2:]
    assert data.decode() == "".join(lines)
    head, _, body = _raw_generate(server.url, "1.0", [4, 5], 12).partition(b"\r\n\r\n")
    assert b"chunked" not in head, head
    assert body.decode() == "".join(lines)


def test_join_and_leave(server):
    """Ten streams on four slots: the first runs alone for a while, the
    others join mid-run (some wait for a slot), leave at different lengths,
    and each answer is the one it gets alone."""
    rng = np.random.default_rng(7)
    specs = [([int(t) for t in rng.integers(0, 512, rng.integers(1, 9))],
              int(rng.integers(3, 40))) for _ in range(10)]
    specs[0] = (specs[0][0], 60)
    before = server.metrics()

    async def go():
        async with aiohttp.ClientSession() as s:
            started = asyncio.Event()

            async def mark(n):
                if n == 5:
                    started.set()
            first = asyncio.create_task(stream(s, server.url, *specs[0], on_token=mark))
            await started.wait()
            rest = [asyncio.create_task(stream(s, server.url, p, n)) for p, n in specs[1:]]
            return await asyncio.gather(first, *rest)
    results = asyncio.run(go())
    exact = total = 0
    for (prompt, n), (tokens, final) in zip(specs, results):
        assert len(tokens) == n and final["tokens"] == n and final["finish_reason"] == "length"
        exact += check(prompt, tokens)
        total += n
    # Tolerance covers a near tie after BLAS rounding; it should be rare.
    assert exact >= total - 2, f"{exact}/{total} tokens equal the reference's argmax"
    after = server.metrics()
    steps = after["decode_steps_total"] - before["decode_steps_total"]
    alone = after['decode_step_batch_bucket{le="1"}'] - before['decode_step_batch_bucket{le="1"}']
    full = steps - (after['decode_step_batch_bucket{le="2"}']
                    - before['decode_step_batch_bucket{le="2"}'])
    assert alone > 0 and full > 0, (steps, alone, full)  # ran alone, and ran batched
    assert after["decode_tokens_total"] - before["decode_tokens_total"] == total
    assert after["decode_active_sequences"] == 0 and after["decode_waiting_sequences"] == 0


def test_client_disconnect(server):
    before = server.metrics()

    async def go():
        async with aiohttp.ClientSession() as s:
            async with s.post(server.url + "/v1/generate",
                              json={"prompt": [5], "max_tokens": 500}) as r:
                for _ in range(3):
                    await r.content.readline()
            # Leaving the block without reading on closes the connection.
    asyncio.run(go())
    deadline = time.monotonic() + 10
    while True:
        m = server.metrics()
        gone = (m.get('decode_sequences_total{reason="cancelled"}', 0)
                - before.get('decode_sequences_total{reason="cancelled"}', 0))
        if gone == 1 and m["decode_active_sequences"] == 0:
            break
        assert time.monotonic() < deadline, f"sequence still running: {m}"
        time.sleep(0.05)
    made = m["decode_tokens_total"] - before["decode_tokens_total"]
    assert made < 100, f"{made} tokens made after the client left"

    # Every slot is free again: four streams at once all run.
    async def four():
        async with aiohttp.ClientSession() as s:
            return await asyncio.gather(*(stream(s, server.url, [i], 4) for i in range(4)))
    for i, (tokens, _) in enumerate(asyncio.run(four())):
        assert tokens == decode_model.reference_generate(REF, [i], 4)


def test_bad_input(server):
    cases = [
        ({"data": b"[1,2", "headers": {"Content-Type": "application/json"}}, 400, "not JSON"),
        ({"json": [1, 2]}, 400, "JSON object"),
        ({"json": {"prompt": []}}, 400, "empty"),
        ({"json": {"prompt": ""}}, 400, "empty"),
        ({"json": {"prompt": [1, 512]}}, 400, "not a token id"),
        ({"json": {"prompt": [1, -1]}}, 400, "not a token id"),
        ({"json": {"prompt": [1, 2.0]}}, 400, "not a token id"),
        ({"json": {"prompt": [True]}}, 400, "not a token id"),
        ({"json": {"prompt": {"a": 1}}}, 400, "want a list"),
        ({"json": {"max_tokens": 3}}, 400, "want a list"),
        ({"json": {"prompt": [1], "max_tokens": "3"}}, 400, "integer"),
        ({"json": {"prompt": [1], "max_tokens": 2.5}}, 400, "integer"),
        ({"json": {"prompt": [1], "max_tokens": 0}}, 422, "want 1..512"),
        ({"json": {"prompt": [1], "max_tokens": -4}}, 422, "want 1..512"),
        ({"json": {"prompt": [1, 2], "max_tokens": 512}}, 422, "want 1..511"),
        ({"json": {"prompt": [0] * 513}}, 422, "513 tokens"),
        ({"data": b"{}", "headers": {"Content-Type": "text/plain"}}, 415, "application/json"),
        ({"data": b"{" + b" " * 70000 + b"}",
          "headers": {"Content-Type": "application/json"}}, 413, "at most 65536"),
    ]

    async def go():
        out = []
        async with aiohttp.ClientSession() as s:
            for kw, _, _ in cases:
                async with s.post(server.url + "/v1/generate", **kw) as r:
                    out.append((r.status, await r.text()))
            async with s.get(server.url + "/v1/generate") as r:
                out.append((r.status, r.headers.get("Allow")))
        return out
    got = asyncio.run(go())
    for (kw, code, words), (status, text) in zip(cases, got):
        assert status == code and words in text and text.count("\n") == 1, (kw, status, text)
    assert got[-1] == (405, "POST")
    assert server.metrics()['decode_requests_total{code="400"}'] >= 12


def test_max_tokens_bounds(server):
    """max_tokens 1 gives one token; the longest request the positions
    allow (prompt + max_tokens - 1 = 512) runs to the last position."""
    prompt = [int(t) for t in np.random.default_rng(3).integers(0, 512, 506)]

    async def go():
        async with aiohttp.ClientSession() as s:
            return await asyncio.gather(stream(s, server.url, [9], 1),
                                        stream(s, server.url, prompt, 7))
    (one, f1), (edge, f2) = asyncio.run(go())
    assert one == decode_model.reference_generate(REF, [9], 1) and f1["tokens"] == 1
    assert len(edge) == 7 and f2["tokens"] == 7
    check(prompt, edge)


def test_busy_and_drain(tmp_path):
    """One slot, one waiting place: a third request gets 503. SIGTERM lets
    the running and the waiting stream finish (exit 0)."""
    s = Server(tmp_path, "--wait", "poll", "--decode-max-batch", "1", "--decode-max-waiting", "1")
    try:
        async def go():
            async with aiohttp.ClientSession() as c:
                got_first = asyncio.Event()

                async def mark(n):
                    got_first.set()
                a = asyncio.create_task(stream(c, s.url, [1], 40, on_token=mark))
                await got_first.wait()
                b = asyncio.create_task(stream(c, s.url, [2], 10))
                deadline = time.monotonic() + 10
                while (await s.metrics_async(c))["decode_waiting_sequences"] != 1:
                    assert time.monotonic() < deadline, "the second request never queued"
                    await asyncio.sleep(0.02)
                async with c.post(s.url + "/v1/generate", json={"prompt": [3]}) as r:
                    busy = (r.status, await r.text())
                s.proc.send_signal(signal.SIGTERM)
                return busy, await a, await b
        busy, (ta, fa), (tb, fb) = asyncio.run(go())
        assert busy[0] == 503 and "already wait" in busy[1], busy
        assert ta == decode_model.reference_generate(REF, [1], 40)
        assert tb == decode_model.reference_generate(REF, [2], 10)
        assert fa["finish_reason"] == fb["finish_reason"] == "length"
    finally:
        # The SIGTERM above drains; a second one would make it give up.
        rc, rest = s.stop(signal_it=False)
    assert rc == 0, rest


@pytest.mark.parametrize("mode", ["executor", "poll", "cudaev"])
def test_idle_cpu(tmp_path, mode):
    """With no request the engine awaits; the process uses at most 1 % of a
    core over 2 s, after serving some."""
    s = Server(tmp_path, "--wait", mode, "--decode-max-batch", "4")
    try:
        async def go():
            async with aiohttp.ClientSession() as c:
                return await asyncio.gather(*(stream(c, s.url, [i], 8) for i in range(4)))
        for i, (tokens, _) in enumerate(asyncio.run(go())):
            assert tokens == decode_model.reference_generate(REF, [i], 8)
        time.sleep(0.5)  # the last answers' writes and the worker's wind-down
        t0, c0 = time.monotonic(), s.cpu_seconds()
        time.sleep(2.0)
        used = (s.cpu_seconds() - c0) / (time.monotonic() - t0)
        assert used <= 0.01, f"--wait {mode}: idle process used {used:.1%} of a core"
    finally:
        rc, rest = s.stop()
    assert rc == 0, rest


def test_torch_cpu_path(tmp_path):
    """--cpu-impl torch: the torch model (the GPU path's arithmetic) on the
    CPU serves the numpy reference's answers. Skipped without torch."""
    pytest.importorskip("torch")
    s = Server(tmp_path, "--wait", "executor", "--cpu-impl", "torch", "--decode-max-batch", "4")
    try:
        async def go():
            async with aiohttp.ClientSession() as c:
                return await asyncio.gather(stream(c, s.url, [1, 2, 3], 12),
                                            stream(c, s.url, [7], 6))
        (a, _), (b, _) = asyncio.run(go())
        check([1, 2, 3], a)
        check([7], b)
        assert len(a) == 12 and len(b) == 6
    finally:
        rc, rest = s.stop()
    assert rc == 0, rest
