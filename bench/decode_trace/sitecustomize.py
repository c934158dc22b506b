"""bench/decode_trace.py's tracer, loaded by the decode service's Python
(this folder first on PYTHONPATH) when DECODE_TRACE names an output prefix.

It records, in the service's process, for every decode step: the batch
size, when the wait was called, when the GPU finished the step (a thread
spinning on the step's CUDA event: DECODE_TRACE_WATCH, bench's
libwait_watch.so), when the engine resumed, and the cudaev loop's counters
around the wait; when each of the engine's parts between waits ran
(result, _deliver, _boundary, enqueue); and every call of the cudaev
loop's two readers (its eventfd and its timerfd). With each part and at
each wait's call and resume, the engine thread's counters
(wait_watch_counters: instructions, cycles, CPU time, context switches,
the CPU it ran on),
to tell more work from a slower CPU. Written as JSON to
DECODE_TRACE.<pid> every 128 steps and at exit.

A diagnostic: the watcher costs a core, and the wrappers a few
microseconds a step. Never compare its CPU or throughput with an
untraced run's."""
import atexit
import ctypes
import json
import os
import sys
import time

_out = os.environ.get("DECODE_TRACE")
if _out:
    sys.path.insert(0, os.environ["DECODE_TRACE_SERVICE"])
    import decode_engine
    import decode_torch
    import waiting

    _watch = ctypes.CDLL(os.environ["DECODE_TRACE_WATCH"])
    _watch.wait_watch.argtypes = [ctypes.c_void_p]
    _watch.wait_watch_done.restype = ctypes.c_int64
    _watch.wait_watch_counters.argtypes = [ctypes.c_void_p]
    _cbuf = (ctypes.c_int64 * 6)()
    _cbuf_at = ctypes.addressof(_cbuf)

    def _counters():
        _watch.wait_watch_counters(_cbuf_at)
        return list(_cbuf)
    _now = time.monotonic_ns
    _steps, _readers, _parts = [], [], []
    _state = {"n": -1, "hooked": False}
    _COUNTERS = ("passes", "wakeups", "gpu_wakeups_armed", "spin_ns")

    def _dump():
        with open(f"{_out}.{os.getpid()}", "w") as f:
            json.dump({"steps": _steps, "readers": _readers, "parts": _parts}, f)

    def _hook_readers():
        """Times the cudaev loop's reader calls (once it is attached)."""
        import asyncio

        import cudaev._attach as attach
        aloop = asyncio.get_running_loop()
        st = attach._states.get(aloop)
        if st is None:
            return
        native = st.native

        def reader(kind, fn):
            def call():
                t = _now()
                fn()
                _readers.append((kind, t, _now()))
            return call
        aloop.remove_reader(st.fd)
        aloop.add_reader(st.fd, reader("fd", native.process))
        aloop.remove_reader(st.tfd)
        aloop.add_reader(st.tfd, reader("timer", native.process_timer))
        _state["hooked"] = True

    _wait = waiting.wait_event

    async def _timed_wait(cfg, event, timeout=None):
        handle = getattr(event, "cuda_event", None)
        if handle is None:
            return await _wait(cfg, event, timeout)
        cudaev = waiting._cudaev if cfg.wait == "cudaev" else None
        s0 = cudaev.stats() if cudaev is not None else None
        _watch.wait_watch(handle)
        c_call = _counters()
        t_call = _now()
        r = await _wait(cfg, event, timeout)
        t_resume = _now()
        c_resume = _counters()
        # A poller may see the event done before the watcher does: give the
        # watcher 50 us (its time may then be after the resume).
        done = _watch.wait_watch_done()
        while not done and _now() < t_resume + 50000:
            done = _watch.wait_watch_done()
        rec = {"n": _state["n"], "call": t_call, "gpu_done": done, "resume": t_resume,
               "c_call": c_call, "c_resume": c_resume}
        if s0 is not None:
            s1 = cudaev.stats()
            rec["loop"] = {k: s1[k] - s0[k] for k in _COUNTERS}
            if not _state["hooked"]:
                _hook_readers()
        _steps.append(rec)
        if len(_steps) % 128 == 0:
            _dump()
        return r

    waiting.wait_event = _timed_wait

    def _timed(cls, name):
        fn = getattr(cls, name)

        def call(*a, **k):
            c0 = _counters()
            t = _now()
            try:
                return fn(*a, **k)
            finally:
                t1 = _now()
                c1 = _counters()
                _parts.append((name, t, t1) + tuple(b - a for a, b in zip(c0[:5], c1[:5])))
        setattr(cls, name, call)

    _enqueue = decode_torch.TorchBackend.enqueue

    def _enqueue_noting_n(self, tokens, *rest):
        _state["n"] = len(tokens)
        return _enqueue(self, tokens, *rest)

    decode_torch.TorchBackend.enqueue = _enqueue_noting_n
    for cls, name in ((decode_engine.Engine, "_deliver"), (decode_engine.Engine, "_boundary"),
                      (decode_torch.TorchBackend, "enqueue"),
                      (decode_torch.TorchBackend, "result")):
        _timed(cls, name)
    atexit.register(_dump)
