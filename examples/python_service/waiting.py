"""How the Python service waits for the GPU: the one thing its twins change.

Every endpoint that waits for device work (``/v1/infer``'s batches here, the
decode loop's steps in ``decode.py``) awaits ``wait_event(cfg, event)``, so that
a load test comparing ``--wait`` modes measures the wait and nothing else:

``cudaev``
    ``await cudaev.wait(event)``: the event loop sleeps until cudaev's loop fd
    says the event completed; no thread and no polling.
``executor``
    ``await loop.run_in_executor(None, event.synchronize)``: what frameworks
    advise; a thread of the default pool blocks in ``cudaEventSynchronize``.
``poll``
    ``while not event.query(): await asyncio.sleep(0)``: what engine loops
    do; the event loop spins through ``query()`` while the GPU works.

``event`` is a ``torch.cuda.Event`` (or Stream) on the GPU path, or a
:class:`HostEvent`, the stand-in the CPU path completes from a worker thread;
``HostEvent`` offers ``query``/``synchronize`` as a CUDA event does, and in
``cudaev`` mode its asyncio future stands in for cudaev's promise, so every
mode runs without a GPU (and without the ``cudaev`` package).

Whatever the mode, a device error comes out as :class:`DeviceFault`.

Thread: every function here runs on the event loop's thread, except
``HostEvent.set``, which any thread may call (once).
"""
import asyncio
import threading

MODES = ("cudaev", "executor", "poll")

_cudaev = None  # the module, imported by prepare() in cudaev mode only


class DeviceFault(RuntimeError):
    """The device failed the work (a CUDA error, sticky or not)."""


def prepare(cfg, need_cudaev):
    """Imports what ``cfg.wait`` needs, once, before serving. ``need_cudaev``:
    the waits will see CUDA events (the GPU path), so ``cudaev`` must import;
    on the CPU path it is imported when present and not required.
    Raises ``SystemExit`` with a one-line reason when it cannot wait so."""
    global _cudaev
    if cfg.wait not in MODES:
        raise SystemExit(f"--wait: '{cfg.wait}': want one of {', '.join(MODES)}")
    if cfg.wait != "cudaev" or _cudaev is not None:
        return
    try:
        import cudaev  # noqa: PLC0415 (only this mode may need it)
    except ImportError as e:
        if need_cudaev:
            raise SystemExit(f"--wait cudaev: cannot import cudaev ({e}); build python/ or "
                             "use --wait executor|poll") from None
        return
    _cudaev = cudaev
    spin = getattr(cfg, "cudaev_spin_us", None)
    if spin is not None:
        cudaev.set_spin(spin)
    markers = getattr(cfg, "cudaev_markers", None)
    if markers is not None:
        cudaev.set_markers(markers)


_LOOP_COUNTERS = (
    ("passes", "Processing passes of the cudaev loop."),
    ("wakeups", "Passes woken through the cudaev loop's fd."),
    ("gpu_completions", "GPU completions the cudaev loop saw."),
    ("gpu_wakeups_armed", "Host functions the cudaev loop enqueued to wake itself."),
    ("timers_fired", "Timers of the cudaev loop that fired."),
)


def loop_metrics():
    """Prometheus lines of this event loop's cudaev loop (``cudaev.stats()``):
    how it found the GPU done, for dashboards and for the load tests. None
    when the waits are not cudaev's (then there is no such loop)."""
    if _cudaev is None:
        return None
    st = _cudaev.stats()
    o = []
    for key, help_ in _LOOP_COUNTERS:
        o.append(f"# HELP cudaev_loop_{key}_total {help_}\n# TYPE cudaev_loop_{key}_total "
                 f"counter\ncudaev_loop_{key}_total {st[key]}\n")
    o.append("# HELP cudaev_loop_spin_seconds_total Time the cudaev loop polled completions "
             "before sleeping.\n# TYPE cudaev_loop_spin_seconds_total counter\n"
             f"cudaev_loop_spin_seconds_total {st['spin_ns'] / 1e9:.9f}\n")
    return "".join(o)


class HostEvent:
    """A completion set by a host thread, shaped like a CUDA event for the
    three waits. ``set(error=None)`` marks it done (``error``: a message,
    the stand-in device's fault); it may be called once, from any thread."""

    __slots__ = ("_done", "_error", "_loop", "_future")

    def __init__(self, loop=None):
        self._done = threading.Event()
        self._error = None
        self._loop = loop or asyncio.get_running_loop()
        self._future = self._loop.create_future()

    def set(self, error=None):
        self._error = error
        self._done.set()
        try:
            self._loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:  # the loop is closed: nobody awaits any more
            pass

    def _resolve(self):
        if not self._future.done():
            self._future.set_result(None)

    def query(self):
        if not self._done.is_set():
            return False
        if self._error:
            raise DeviceFault(self._error)
        return True

    def synchronize(self):
        self._done.wait()
        if self._error:
            raise DeviceFault(self._error)

    async def promise(self):
        """The cudaev-mode wait: an asyncio future completed from the loop."""
        await asyncio.shield(self._future)
        if self._error:
            raise DeviceFault(self._error)


def _fault(e):
    return DeviceFault(f"{type(e).__name__}: {e}".splitlines()[0])


async def wait_event(cfg, event, timeout=None):
    """Waits for ``event`` the way ``cfg.wait`` says. Returns None once the
    work before it is done; raises :class:`DeviceFault` when the device failed
    it, ``TimeoutError`` after ``timeout`` seconds (None: no limit; the
    executor's thread stays blocked until the event ends, as it must)."""
    mode = cfg.wait
    try:
        if mode == "cudaev":
            if isinstance(event, HostEvent):
                aw = event.promise()
            elif _cudaev is None:
                raise DeviceFault("--wait cudaev: the cudaev package is not loaded")
            else:
                aw = _cudaev.wait(event)
        elif mode == "executor":
            aw = asyncio.get_running_loop().run_in_executor(None, event.synchronize)
        elif mode == "poll":
            aw = _poll(event)
        else:
            raise ValueError(f"wait mode {mode!r}")
        if timeout is None:
            return await aw
        return await asyncio.wait_for(aw, timeout)
    except (DeviceFault, asyncio.CancelledError, TimeoutError, asyncio.TimeoutError, ValueError):
        raise
    except RuntimeError as e:  # torch's CUDA errors (AcceleratorError is one)
        raise _fault(e) from e
    except Exception as e:  # cudaev.CudaError and the like
        if _cudaev is not None and isinstance(e, getattr(_cudaev, "CudaError", ())):
            raise _fault(e) from e
        raise


async def _poll(event):
    while not event.query():
        await asyncio.sleep(0)
