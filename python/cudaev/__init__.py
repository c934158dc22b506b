"""cudaev: await CUDA streams and events from asyncio or trio, beside any CUDA runtime.

    import asyncio, torch, cudaev

    async def main():
        y = model(x)                                  # enqueue GPU work
        await cudaev.wait(torch.cuda.current_stream())  # everything so far is done
        ...

    asyncio.run(main())          # or uvloop.run(main()), trio.run(main), anyio.run(main)

No set-up: the first ``wait`` or ``host_func`` in a running asyncio loop
attaches a cudaev loop to it (its eventfd through ``add_reader``, its
deadline through ``call_at``); each asyncio loop, in each thread, gets its own.
Under trio (anyio's trio backend included) the first use in a ``trio.run``
attaches one to that run, driven by a system task until the run ends.
The process keeps its own CUDA runtime (PyTorch's, CuPy's, cuda-python's):
cudaev uses the bundled ``libcudaev.so.1``, which exports only ``cudaev_*``
names and talks to the driver.

Thread rule: ``wait`` and ``host_func`` are called from a coroutine (or
callback) running on an asyncio loop, or from a trio task; what they return
is awaited on that same loop (by that task, in that run). Every cudaev
callback runs on that loop's (run's) thread, never on a driver thread.

Public: wait, host_func, set_spin, set_markers, stats, Stream, Event, CudaError, detach.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Optional, TypeVar

from . import _native
from ._attach import attached as _attached
from ._attach import detach
from ._errors import CudaError, error_for
from ._handles import EVENT, NOTHING, STREAM, Event, Stream, handle_of

__all__ = ["wait", "host_func", "set_spin", "set_markers", "stats", "Stream", "Event", "CudaError",
           "detach"]
__version__ = "0.1.0"

_native._setup(error_for)

T = TypeVar("T")


def wait(x: Any, timeout: Optional[float] = None) -> Awaitable[None]:
    """Awaitable that completes when the GPU work ``x`` names has finished.

    ``x`` names a stream (meaning: everything enqueued on it so far, at the
    time of this call) or an event (its most recent record): any object with
    ``__cuda_stream__``, ``torch.cuda.Stream`` / ``ExternalStream`` /
    ``Event``, ``cupy.cuda.Stream`` / ``Event``, cuda.bindings' ``CUstream`` /
    ``CUevent`` / ``cudaStream_t`` / ``cudaEvent_t``, a Numba stream, PyCUDA's
    ``Stream`` / ``Event``, ``cudaev.Stream(h)`` / ``cudaev.Event(h)``, or an
    int (a stream handle).

    The work is captured here, when ``wait`` is called, not when the result
    is first awaited. Raises ``CudaError`` (code, name, message) for a CUDA
    error, sticky ones included; ``TimeoutError`` after ``timeout`` seconds
    (or under ``asyncio.timeout``); cancelling the awaiting task cancels the
    wait (the GPU work goes on) and releases everything it held (under trio:
    a cancel scope, ``trio.move_on_after`` / ``fail_after``, raising
    ``trio.Cancelled`` as trio does).
    ``TypeError`` for an object that names no stream or event; ``CudaError``
    at once when the work cannot be awaited (no driver, a bad handle).

    Thread: a thread running an asyncio loop, or a trio task; await the
    result there.
    """
    kind, h = handle_of(x)
    if kind == NOTHING:
        return _nothing()
    st = _attached()
    fut = st.future()
    op = st.native.event(h, fut) if kind == EVENT else st.native.stream(h, fut)
    return st.finish(fut, op, timeout)


async def _nothing() -> None:
    return None


def host_func(stream: Any, fn: Callable[..., T], *args: Any,
              hold: bool = False) -> Awaitable[T]:
    """Runs ``fn(*args)`` on this asyncio loop's thread when ``stream`` gets
    to this point; the awaitable gives fn's result (or raises its exception).

    fn runs inside the event loop, with the GIL, never on a driver thread
    (under trio: on the run's thread, inside the task that drives cudaev).

    By default (``hold=False``) the stream does not wait for fn: fn runs once
    everything enqueued on ``stream`` before this call has finished, and work
    enqueued later goes on meanwhile. fn may then call anything, CUDA
    included (a blocking call blocks this event loop, as in any callback).
    Cancelling the awaiting task before the stream got here means fn never
    runs.

    With ``hold=True`` work enqueued on ``stream`` after this call waits
    until fn returned (the stream is held at a gate this loop opens), which
    orders what fn enqueues before it. Then fn must not wait for the GPU:

    - MAY: enqueue work (kernel launches, async copies between device and
      pinned memory, event records, stream waits, graph launches), on any
      stream, ``stream`` included (that work runs after fn returns); queries
      (``stream.query()``, ``event.query()``) -- of kernels already loaded.
    - MUST NOT (deadlock: the GPU waits for fn, fn waits for the GPU): any
      synchronize (device, ``stream``, or any stream or event with work behind
      a pending host_func), synchronous copies (``.cpu()``, ``.item()``,
      ``cudaMemcpy``, copies to pageable memory), allocations that may
      synchronize (``cudaMalloc``/``cudaFree``/``cudaMallocHost``; PyTorch's
      caching allocator may call them when it must grow), module loads --
      and with CUDA's lazy loading (``CUDA_MODULE_LOADING=LAZY``, the default)
      the first launch of any kernel loads its module, which may synchronize
      the context: launch each kernel fn uses once before (or set
      ``CUDA_MODULE_LOADING=EAGER``) -- and blocking on another ``wait``'s
      result.
    - Python: while a held host_func is pending, no other thread may
      synchronize with work queued behind it, and the asyncio loop must keep
      running (a thread that blocks in ``torch.cuda.synchronize()`` waits for
      this loop to run fn). PyTorch and CuPy release the GIL in their
      synchronizing calls, so that wait does not stop this loop.

    Cancelling the awaiting task of a held host_func drops the result; fn
    still runs (the stream waits for it). Thread: a thread running an asyncio
    loop, or a trio task (then "the asyncio loop" above is the trio run).
    """
    kind, h = handle_of(stream)
    if kind != STREAM:
        raise TypeError("cudaev.host_func needs a stream, not an event")
    st = _attached()
    fut = st.future()
    if hold:
        op = st.native.host_func(h, fn, args, fut)
    else:
        op = st.native.host_after(h, fn, args, fut)
    return st.finish(fut, op, None)


def set_spin(us: int) -> None:
    """Sets how long (microseconds, at most 1,000,000) this loop's cudaev loop
    may poll for GPU work it expects to finish soon before it sleeps until a
    wake-up; 0 never polls. Default 50. The poll runs on the event loop's
    thread, in ``wait`` itself when it is the only wait in flight: it saves
    a wake-up's latency (tens of microseconds) and holds the event loop
    meanwhile, so a server whose loop always has other work may prefer 0.

    Thread: a thread running an asyncio loop (or a trio task).
    """
    if isinstance(us, bool) or not isinstance(us, int) or us < 0:
        raise ValueError(f"cudaev.set_spin: {us!r} is no number of microseconds (an int >= 0)")
    _attached().native.set_spin(us)


_MARKERS = {"auto": 0, "events": 1}


def set_markers(kind: str) -> None:
    """Sets how this loop's cudaev loop learns that awaited GPU work is done,
    for the waits made after the call: ``"events"`` (the default here) puts
    a pooled CUDA event behind the work and queries it (about a microsecond
    a look); ``"auto"`` (the C library's default) writes a word into pinned
    host memory where a wait is the stream's only one, which the loop reads
    for free but which carries a system-wide memory fence that delays the
    GPU work of other streams and processes running meanwhile (four workers
    of examples/python_service on one GPU: 302-313 us a batch on the GPU
    with words, 254-258 with events; bench/RESULTS.md). ``ValueError`` for
    another value.

    Thread: a thread running an asyncio loop (or a trio task).
    """
    if not isinstance(kind, str) or kind not in _MARKERS:
        raise ValueError(f"cudaev.set_markers: {kind!r}: want 'events' or 'auto'")
    _attached().native.set_markers(_MARKERS[kind])


def stats() -> Dict[str, Any]:
    """The counters of the running asyncio loop's cudaev loop (attached on
    first use), for dashboards and debugging: ``passes``, ``wakeups`` (passes
    woken through the fd), ``completions``, ``timers_fired``,
    ``gpu_completions`` (of which ``gpu_word_markers`` / ``gpu_event_markers``),
    ``gpu_failed``, ``gpu_wakeups_armed`` (host functions the loop enqueued to
    wake itself), ``spin_ns`` (time spent polling completions before
    sleeping), ``watchdog_checks``, ``watchdog_errors``, and
    ``gpu_latency_log2_ns`` (a list: bucket i counts GPU completions seen
    [2^i, 2^(i+1)) ns after their submission). Each only grows.

    Thread: a thread running an asyncio loop.
    """
    return _attached().native.stats()


# ---- private: promises and timers, which need no GPU (tests, benchmarks) ----

class _Promise:
    """A cudaev promise as an awaitable: ``await p`` after ``p.set(code)``."""

    __slots__ = ("fut", "op", "finish")

    def __init__(self) -> None:
        st = _attached()
        self.fut = st.future()
        self.op = st.native.promise(self.fut)
        self.finish = st.finish

    def set(self, code: int = 0) -> bool:
        return self.op.set(code)

    def wait(self, timeout: Optional[float] = None) -> Awaitable[None]:
        return self.finish(self.fut, self.op, timeout)


def _promise() -> _Promise:
    return _Promise()


def _timer(seconds: float) -> Awaitable[None]:
    """A cudaev timer future (through the loop's own deadline) as an awaitable."""
    st = _attached()
    fut = st.future()
    op = st.native.timer(max(0, int(seconds * 1e9)), fut)
    return st.finish(fut, op, None)
