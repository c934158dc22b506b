"""The pieces without HTTP: the three waits, the model's weights and forward
pass, the body parser."""
import argparse
import asyncio
import sys
import threading
import time

import numpy as np
import pytest

import model
import parse
import waiting
from buckets import buckets


def cfg(mode):
    return argparse.Namespace(wait=mode)


class FakeCudaEvent:
    """A CUDA event's query()/synchronize(), failing as torch does on a fault."""

    def __init__(self, after_s, error=None):
        self.t = time.monotonic() + after_s
        self.error = error
        self.queries = 0

    def query(self):
        self.queries += 1
        done = time.monotonic() >= self.t
        if done and self.error:
            raise RuntimeError(f"CUDA error: {self.error}\nmore lines")
        return done

    def synchronize(self):
        time.sleep(max(0.0, self.t - time.monotonic()))
        if self.error:
            raise RuntimeError(f"CUDA error: {self.error}")


@pytest.mark.parametrize("mode", waiting.MODES)
def test_host_event_each_mode(mode):
    async def go():
        ev = waiting.HostEvent()
        threading.Timer(0.05, ev.set).start()
        t0 = time.monotonic()
        await waiting.wait_event(cfg(mode), ev)
        assert time.monotonic() - t0 >= 0.04
        assert ev.query()
        bad = waiting.HostEvent()
        threading.Timer(0.01, bad.set, ("stand-in fault",)).start()
        with pytest.raises(waiting.DeviceFault, match="stand-in fault"):
            await waiting.wait_event(cfg(mode), bad)
        never = waiting.HostEvent()
        with pytest.raises((TimeoutError, asyncio.TimeoutError)):
            await waiting.wait_event(cfg(mode), never, timeout=0.05)
        never.set()  # the executor's thread returns
    asyncio.run(go())


@pytest.mark.parametrize("mode", ("executor", "poll"))
def test_cuda_like_event(mode):
    async def go():
        ev = FakeCudaEvent(0.03)
        await waiting.wait_event(cfg(mode), ev)
        if mode == "poll":
            assert ev.queries > 1, "the poller yields and asks again"
        with pytest.raises(waiting.DeviceFault, match="illegal memory access") as e:
            await waiting.wait_event(cfg(mode), FakeCudaEvent(0.01, "an illegal memory access"))
        assert "\n" not in str(e.value)
    asyncio.run(go())


def test_poll_lets_the_loop_run():
    """While the poller waits, other tasks on the loop run."""
    async def go():
        ticks = 0

        async def other():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)
        t = asyncio.create_task(other())
        await waiting.wait_event(cfg("poll"), FakeCudaEvent(0.02))
        t.cancel()
        assert ticks > 1
    asyncio.run(go())


def test_prepare():
    waiting.prepare(cfg("poll"), need_cudaev=True)  # no cudaev needed
    with pytest.raises(SystemExit, match="--wait"):
        waiting.prepare(cfg("spin"), need_cudaev=False)
    try:
        import cudaev  # noqa: F401
    except ImportError:
        with pytest.raises(SystemExit, match="cannot import cudaev"):
            waiting.prepare(cfg("cudaev"), need_cudaev=True)
        waiting.prepare(cfg("cudaev"), need_cudaev=False)  # the CPU path goes on


def test_prepare_passes_spin_and_markers_to_cudaev(monkeypatch):
    calls = []

    class Stub:  # the two setters prepare() may call
        @staticmethod
        def set_spin(us):
            calls.append(("spin", us))

        @staticmethod
        def set_markers(kind):
            calls.append(("markers", kind))

    monkeypatch.setitem(sys.modules, "cudaev", Stub)
    monkeypatch.setattr(waiting, "_cudaev", None)
    waiting.prepare(argparse.Namespace(wait="cudaev"), need_cudaev=True)
    assert calls == []  # the package's defaults stay
    monkeypatch.setattr(waiting, "_cudaev", None)
    waiting.prepare(argparse.Namespace(wait="cudaev", cudaev_spin_us=0, cudaev_markers="auto"),
                    need_cudaev=True)
    assert calls == [("spin", 0), ("markers", "auto")]


def test_loop_metrics(monkeypatch):
    # No cudaev loop (other modes, or cudaev not importable): nothing to render.
    monkeypatch.setattr(waiting, "_cudaev", None)
    assert waiting.loop_metrics() is None

    class Stub:  # cudaev.stats()'s shape
        @staticmethod
        def stats():
            return {"passes": 7, "wakeups": 3, "gpu_completions": 5, "gpu_wakeups_armed": 2,
                    "timers_fired": 1, "spin_ns": 1500}

    monkeypatch.setattr(waiting, "_cudaev", Stub)
    text = waiting.loop_metrics()
    lines = {l.split()[0]: l.split()[1] for l in text.splitlines() if not l.startswith("#")}
    assert lines == {"cudaev_loop_passes_total": "7", "cudaev_loop_wakeups_total": "3",
                     "cudaev_loop_gpu_completions_total": "5",
                     "cudaev_loop_gpu_wakeups_armed_total": "2",
                     "cudaev_loop_timers_fired_total": "1",
                     "cudaev_loop_spin_seconds_total": "0.000001500"}
    assert "# TYPE cudaev_loop_passes_total counter" in text


def test_weights_and_forward():
    dims = [64, 256, 256, 16]
    m = model.Model.generate(dims, 1)
    assert [w.shape for w in m.w] == [(64, 256), (256, 256), (256, 16)]
    assert all(w.dtype == np.float32 for w in m.w + m.b)
    # The documented answer of the C service to [0.1] * 64 (docs/inference_server.md).
    y = m.forward(np.full((1, 64), 0.1, np.float32))[0]
    assert parse.format_json(y).startswith(b"[0.0322372839,0.215034887,-0.104975276,")
    assert not np.array_equal(model.Model.generate(dims, 2).w[0], m.w[0])
    # Rows are independent: a batch equals its rows one by one.
    x = np.random.default_rng(0).uniform(-1, 1, (9, 64)).astype(np.float32)
    assert np.array_equal(m.forward(x), np.concatenate([m.forward(r[None]) for r in x]))


def test_weights_file(tmp_path):
    m = model.Model.generate([8, 4, 3], 9)
    p = str(tmp_path / "w")
    m.save(p)
    back = model.Model.load(p, [8, 4, 3])
    assert back.seed == 9 and all(np.array_equal(a, b) for a, b in zip(back.w, m.w))
    with pytest.raises(ValueError, match="differ"):
        model.Model.load(p, [8, 4, 4])
    data = bytearray(open(p, "rb").read())
    data[40] ^= 0xFF
    open(p, "wb").write(data)
    with pytest.raises(ValueError, match="CRC"):
        model.Model.load(p)
    open(p, "wb").write(b"CEVM")
    with pytest.raises(ValueError, match="truncated"):
        model.Model.load(p)


def test_buckets():
    assert buckets(64) == [1, 2, 4, 8, 16, 32, 64]
    assert buckets(48) == [1, 2, 4, 8, 16, 32, 48]
    assert buckets(1) == [1]
    assert buckets(256, 32) == [32, 64, 128, 256]
    assert buckets(20, 32) == [20]


def test_parse_dims():
    assert model.parse_dims("64,256,256,16") == [64, 256, 256, 16]
    for bad in ("4,4", "1,2,3,4,5", "0,2,3", "a,b,c", "8192,8193,1", "", "4,,4"):
        with pytest.raises(ValueError, match="--layers"):
            model.parse_dims(bad)


def test_parse_bodies():
    assert parse.content_kind(None) == "json"
    assert parse.content_kind(" Application/JSON; charset=utf-8") == "json"
    assert parse.content_kind("application/octet-stream") == "raw"
    assert parse.content_kind("application/jsonx") is None
    assert parse.json_floats(b" [1, -2.5e1 ,3] ", 3).tolist() == [1.0, -25.0, 3.0]
    for bad, why in ((b"[1,2]", "wrong length"), (b"[1e39,1,1]", "out of float32"),
                     (b'[1,"2",3]', "not a number"), (b"[true,1,1]", "not a number"),
                     (b"\xff", "bad JSON"), (b"[NaN,1,1]", "bad JSON")):
        with pytest.raises(parse.BadBody, match=why):
            parse.json_floats(bad, 3)
    raw = np.array([1, 2, 3], "<f4").tobytes()
    assert parse.raw_floats(raw, 3).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(parse.BadBody, match="wrong length"):
        parse.raw_floats(raw[:-1], 3)
    with pytest.raises(parse.BadBody, match="not finite"):
        parse.raw_floats(np.array([1, np.inf, 3], "<f4").tobytes(), 3)
    assert parse.format_json(np.array([0.1, -1e-7, 16777216, np.nan], np.float32)) == \
        b"[0.100000001,-1.00000001e-07,16777216,null]\n"


def _loops():
    yield "asyncio", asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        return
    yield "uvloop", uvloop.new_event_loop


@pytest.mark.parametrize("name,new_loop", list(_loops()), ids=[n for n, _ in _loops()])
def test_fd_timer(name, new_loop):
    """The batch window's timer: fires once at its time, never before it (a
    200 us call_at runs at once on uvloop), sleeping meanwhile; a re-arm
    replaces the deadline; cancel and close drop it."""
    import fdtimer

    async def main():
        loop = asyncio.get_running_loop()
        t = fdtimer.FdTimer(loop)
        fired = []
        for delay in (200e-6, 2e-3):
            when = time.monotonic() + delay
            done = loop.create_future()
            t.arm(when, lambda: (fired.append(time.monotonic()), done.set_result(None)))
            await asyncio.wait_for(done, 5)
            await asyncio.sleep(0.005)
            assert len(fired) == 1 and fired[0] >= when, (delay, fired, when)
            fired.clear()
        # A re-arm replaces the deadline; cancel drops it.
        t.arm(time.monotonic() + 0.001, lambda: fired.append("first"))
        t.arm(time.monotonic() + 0.003, lambda: fired.append("second"))
        await asyncio.sleep(0.05)
        assert fired == ["second"]
        t.arm(time.monotonic() + 0.002, lambda: fired.append("cancelled"))
        t.cancel()
        assert not t.armed
        await asyncio.sleep(0.02)
        assert fired == ["second"]
        # The timer sleeps: a 20 ms wait costs the thread a small part of it
        # (a spinning one costs all of it).
        c0, w0 = time.thread_time(), time.monotonic()
        done = loop.create_future()
        t.arm(time.monotonic() + 0.02, lambda: done.set_result(None))
        await done
        assert time.thread_time() - c0 < 0.5 * (time.monotonic() - w0)
        t.close()

    loop = new_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


class FakeTransport:
    def __init__(self, buffered=0, closing=False):
        self.buffered, self.closing, self.out = buffered, closing, []

    def is_closing(self):
        return self.closing

    def get_write_buffer_size(self):
        return self.buffered

    def write(self, data):
        self.out.append(data)


class FakeResponse:
    def __init__(self, chunked):
        self.headers = {"Transfer-Encoding": "chunked"} if chunked else {}


def test_token_writer():
    """The engine's direct write: a chunk per token on HTTP/1.1, the bare
    line otherwise, the bytes json.dumps makes; declined (the token goes to
    the queue) past SINK_HIGH buffered bytes, on a closing connection, or
    before the stream attached it."""
    import json
    from decode import _TokenWriter
    w = _TokenWriter(sse=False)
    assert w.token(7) == json.dumps({"index": 0, "token": 7}) + "\n"
    assert not w(8)  # not attached yet
    t = FakeTransport()
    w.attach(t, FakeResponse(chunked=True))
    assert w(9)
    line = (json.dumps({"index": 1, "token": 9}) + "\n").encode()
    assert t.out == [b"%x\r\n%s\r\n" % (len(line), line)]
    t.buffered = _TokenWriter.SINK_HIGH + 1
    assert not w(10) and len(t.out) == 1 and w.index == 2
    t.buffered, t.closing = 0, True
    assert not w(10)
    s = _TokenWriter(sse=True)
    t = FakeTransport()
    s.attach(t, FakeResponse(chunked=False))
    assert s(3) and t.out == [b'data: {"index": 0, "token": 3}\n\n']
    assert s.end("length") == 'data: {"done": true, "finish_reason": "length", "tokens": 1}\n\n'


def test_decode_sizes():
    """--decode-size picks decode_model.SIZES: small is the default Dims,
    large the 0.84 G parameters the docs quote (counted from the shapes, not
    made), and every size takes the load test's prompts (ids below 512)."""
    import decode
    import decode_model

    assert decode_model.SIZES["small"] == decode_model.Dims()
    large = decode_model.SIZES["large"]
    n = sum(int(np.prod(s)) for s in decode_model.make_shapes(large).values())
    assert 0.83e9 < n < 0.85e9, n
    for dims in decode_model.SIZES.values():
        assert dims.d_model % dims.heads == 0 and dims.vocab >= 512
    p = argparse.ArgumentParser()
    decode.add_arguments(p)
    assert p.parse_args([]).decode_size == "small"
    cfg = p.parse_args(["--decode-size", "large"])
    assert decode.DecodeService(cfg).dims == large
    with pytest.raises(SystemExit):
        p.parse_args(["--decode-size", "huge"])


class _StepLog:
    """A decode backend whose "model" is a function of the input token and
    position, that logs its enqueues and reads and completes each step 1 ms
    after it was enqueued, after the one before it (one stream)."""

    max_batch, max_len = 4, 64

    def __init__(self):
        self.log, self.k, self.last, self.done_at = [], 0, np.zeros(4, np.int64), 0.0

    @staticmethod
    def f(tok, pos):
        return (tok * 7 + pos * 3 + 1) % 101

    def enqueue(self, tokens, prev, positions, slots):
        import decode_backends

        assert len(set(slots.tolist())) == len(slots)
        t = np.where(prev >= 0, self.last[np.maximum(prev, 0)], tokens)
        step = decode_backends.Step(asyncio.Event(), self.k)
        step.out = self.last = self.f(t, positions)
        loop = asyncio.get_running_loop()
        self.done_at = max(self.done_at, loop.time()) + 0.001
        loop.call_at(self.done_at, step.event.set)
        self.log.append(("enqueue", self.k, int((prev >= 0).sum())))
        self.k += 1
        return step

    def result(self, step, n):
        self.log.append(("result", step.k))
        return step.out[:n]


@pytest.mark.parametrize("overlap", [True, False])
def test_engine_overlap(overlap):
    """With overlap the engine enqueues step n+1 (its decoding rows reading
    step n's output through prev) before it reads step n, never more than
    two ahead; without, one step at a time with every input from the host.
    Either way each sequence gets what feeding it one token at a time gives,
    while sequences join and leave."""
    import decode_engine
    import decode_metrics

    def reference(prompt, n):
        seq, out = list(prompt), []
        for pos in range(len(prompt) + n - 1):
            tok = int(_StepLog.f(np.int64(seq[pos]), pos))
            if pos >= len(prompt) - 1:
                out.append(tok)
                seq.append(tok)
        return out

    async def go():
        b = _StepLog()
        e = decode_engine.Engine(b, lambda ev: ev.wait(), decode_metrics.DecodeMetrics(4),
                                 overlap=overlap)
        e.start()

        async def one(prompt, n, delay):
            await asyncio.sleep(delay)
            seq = e.submit(prompt, n)
            got = []
            while (tok := await seq.queue.get()) is not decode_engine.END:
                got.append(tok)
            assert seq.finish_reason == "length"
            return prompt, n, got

        runs = [([5, 9, 2], 12, 0), ([1], 20, 0), ([8, 8], 3, 0.004), ([3, 1, 4, 1, 5], 9, 0.006),
                ([7], 5, 0.02), ([2, 7], 6, 0.02)]
        res = await asyncio.gather(*(one(*r) for r in runs))
        await e.close()
        return b.log, res

    log, res = asyncio.run(go())
    for prompt, n, got in res:
        assert got == reference(prompt, n), prompt
    ahead = most = 0
    for entry in log:
        ahead += 1 if entry[0] == "enqueue" else -1
        most = max(most, ahead)
    assert most == (2 if overlap else 1)
    from_device = sum(entry[2] for entry in log if entry[0] == "enqueue")
    assert (from_device > 0) == overlap
