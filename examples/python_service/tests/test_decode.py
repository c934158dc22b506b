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

# One BLAS thread: the test measures the service, not OpenBLAS's pool, and
# the CI machine's cores are shared.
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
REF = decode_model.NumpyModel(decode_model.make_weights(), max_batch=1)


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SERVICE, "decode.py"), "--port", "0",
             "--decode-backend", "cpu", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line}{self.proc.stdout.read()}")
        self.url = f"http://127.0.0.1:{m.group(1)}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        rest = self.proc.stdout.read()
        self.proc.stdout.close()
        return rc, rest

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def metrics(self):
        async def get():
            async with aiohttp.ClientSession() as s, s.get(self.url + "/metrics") as r:
                return await r.text()
        text = asyncio.run(get())
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


@pytest.fixture(scope="module")
def server():
    s = Server("--wait", "executor", "--decode-max-batch", "4")
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
                out.append((r.status, ""))
        return out
    got = asyncio.run(go())
    for (kw, code, words), (status, text) in zip(cases, got):
        assert status == code and words in text and text.count("\n") == 1, (kw, status, text)
    assert got[-1][0] == 405
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


def test_busy_and_drain():
    """One slot, one waiting place: a third request gets 503. SIGTERM lets
    the running and the waiting stream finish (exit 0), and /health says
    503 meanwhile."""
    s = Server("--wait", "poll", "--decode-max-batch", "1", "--decode-max-waiting", "1")
    try:
        async def go():
            async with aiohttp.ClientSession() as c:
                got_first = asyncio.Event()

                async def mark(n):
                    got_first.set()
                a = asyncio.create_task(stream(c, s.url, [1], 40, on_token=mark))
                await got_first.wait()
                b = asyncio.create_task(stream(c, s.url, [2], 10))
                await asyncio.sleep(0.2)  # b is queued: the one waiting place is taken
                async with c.post(s.url + "/v1/generate", json={"prompt": [3]}) as r:
                    busy = (r.status, await r.text())
                s.proc.send_signal(signal.SIGTERM)
                await asyncio.sleep(0.3)
                async with c.get(s.url + "/health") as r:
                    health = r.status
                return busy, health, await a, await b
        busy, health, (ta, fa), (tb, fb) = asyncio.run(go())
        assert busy[0] == 503 and "already wait" in busy[1], busy
        assert health == 503
        assert ta == decode_model.reference_generate(REF, [1], 40) and fa["finish_reason"] == "length"
        assert tb == decode_model.reference_generate(REF, [2], 10) and fb["finish_reason"] == "length"
    finally:
        rc, rest = s.stop()
    assert rc == 0, rest


@pytest.mark.parametrize("mode", ["executor", "poll", "cudaev"])
def test_idle_cpu(mode):
    """With no request the engine awaits; the process uses at most 1 % of a
    core over 2 s, after serving some."""
    s = Server("--wait", mode, "--decode-max-batch", "4")
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
