"""Dynamic batching: the queue, the window, the slots, and the awaited batch.

The policy is the C service's (examples/inference_server/policy.h): requests
wait in arrival order; a batch leaves when --max-batch are queued or when the
oldest has waited --batch-window-us; a draining server does not wait for the
window. A batch needs a free slot (--streams per device): its rows are copied
into the slot's pinned input buffer, the device runs the MLP, the answer comes
back into the slot's pinned output, and the batch is awaited with
``waiting.wait_event`` (the only thing the twins change).

Devices (one per worker process):
  CpuDevice    the model (numpy, or torch on the CPU) on a worker thread that
               completes a HostEvent: the GPU step with the GPU taken out, as
               the C service's CPU backend; --cpu-delay-us adds a GPU's latency
  TorchDevice  the model on the GPU with PyTorch: a CUDA stream per slot,
               pinned host buffers, an event recorded after the copy back;
               the copy up, the forward pass and the copy back are one CUDA
               graph per batch-size bucket (--cuda-graphs on, the default:
               one replay where op-by-op launches cost a worker more than
               the GPU's work)
A fault fails its batch (503) and every later one until the device is reset;
``device.recoverable`` says whether this process can reset it (the stand-in:
yes unless the fault was "sticky"; CUDA: never, a sticky error kills the
context), otherwise the worker drains and exits for the master to start a new
one.

Thread: everything here runs on the event loop's thread, except CpuDevice's
worker thread, which only computes into a slot and sets the slot's HostEvent.
"""
import asyncio
import collections
import queue
import threading
import time

import numpy as np

import fdtimer
import waiting
from buckets import buckets

FAULT_DEVICE, FAULT_STICKY = 1, 2


class QueueFull(Exception):
    pass


class Row:
    __slots__ = ("x", "future", "fault", "t")

    def __init__(self, x, future, fault):
        self.x, self.future, self.fault, self.t = x, future, fault, time.monotonic()


class Answer:
    """One row's result and where it came from (the X-Batch-* headers)."""
    __slots__ = ("y", "batch_id", "size", "row", "device")

    def __init__(self, y, batch_id, size, row, device):
        self.y, self.batch_id, self.size, self.row, self.device = y, batch_id, size, row, device


class Slot:
    """Pinned (or plain, on the CPU) staging for one batch in flight."""

    def __init__(self, index, inp, out):
        self.index, self.inp, self.out = index, inp, out  # numpy views [cap, dim]
        self.priv = None


class CpuDevice:
    """The stand-in device: one worker thread computing batches in order."""

    def __init__(self, model, cfg):
        self.model, self.cfg = model, cfg
        self.ordinal = 0
        self.faulted = self.sticky = False
        self.forward = model.forward
        if cfg.cpu_impl == "torch":
            import torch
            from model import TorchModel
            tm = TorchModel(model, torch, torch.device("cpu"))
            self.forward = lambda x: tm.forward(torch.from_numpy(x)).numpy()
        cap, i, o = cfg.max_batch, model.inputs, model.outputs
        self.slots = [Slot(k, np.zeros((cap, i), np.float32), np.zeros((cap, o), np.float32))
                      for k in range(cfg.streams)]
        self.jobs = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._worker, name="cpu-device", daemon=True)
        self.thread.start()

    @property
    def recoverable(self):
        return not self.sticky

    def _worker(self):
        delay = self.cfg.cpu_delay_us * 1e-6
        while True:
            job = self.jobs.get()
            if job is None:
                return
            slot, n, fault, event = job
            t0 = time.perf_counter()
            if delay:
                time.sleep(delay)
            if fault:
                self.faulted = True
                self.sticky = self.sticky or bool(fault & FAULT_STICKY)
            if self.faulted:
                slot.priv = 0.0
                event.set("cudaErrorIllegalAddress (stand-in device fault)")
                continue
            slot.out[:n] = self.forward(slot.inp[:n])
            slot.priv = time.perf_counter() - t0
            event.set()

    def launch(self, slot, n, fault):
        """Queues the batch in slot.inp[:n]; returns the event to await."""
        event = waiting.HostEvent()
        self.jobs.put((slot, n, fault, event))
        return event

    def batch_seconds(self, slot):
        return slot.priv or 0.0

    def reset(self):
        """A new worker thread: the stand-in's device reset."""
        self.close()
        self.faulted = False
        self.jobs = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._worker, name="cpu-device", daemon=True)
        self.thread.start()

    def close(self):
        self.jobs.put(None)
        self.thread.join()


class TorchDevice:
    """The MLP on a CUDA device with PyTorch (NVIDIA's runtime, as PyTorch
    loads it): a stream, pinned buffers and timing events per slot."""

    recoverable = False  # a sticky CUDA error kills the context: a new process it is

    def __init__(self, model, cfg):
        import torch
        from model import TorchModel
        self.torch, self.cfg = torch, cfg
        self.dev = torch.device("cuda", cfg.cuda_device)
        self.ordinal = cfg.cuda_device
        torch.cuda.set_device(self.dev)
        self.tm = TorchModel(model, torch, self.dev)
        cap, i, o = cfg.max_batch, model.inputs, model.outputs
        self.slots = []
        for k in range(cfg.streams):
            pin_in = torch.empty((cap, i), dtype=torch.float32, pin_memory=True)
            pin_out = torch.empty((cap, o), dtype=torch.float32, pin_memory=True)
            s = Slot(k, pin_in.numpy(), pin_out.numpy())
            s.priv = {
                "pin_in": pin_in, "pin_out": pin_out,
                "d_in": torch.empty((cap, i), dtype=torch.float32, device=self.dev),
                "stream": torch.cuda.Stream(self.dev),
                "start": torch.cuda.Event(enable_timing=True),
                "end": torch.cuda.Event(enable_timing=True),
            }
            self.slots.append(s)
        self.selfcheck(model)
        self.buckets = buckets(cap)
        if cfg.cuda_graphs == "on":
            for s in self.slots:
                self._capture(s)

    def _capture(self, slot):
        """One CUDA graph per batch bucket B, on the slot's stream, holding a
        whole batch: B rows copied up from the slot's pinned input, the
        forward pass, B rows copied back into its pinned output. A batch is
        then one replay between its two event records: the copies in the
        graph halve the CPU of a launch (37 us to 18 us at p50 on an H200,
        bench/RESULTS.md). The pad rows past a batch's n are the earlier
        batches' rows (the pinned input starts zeroed): each output row
        depends on its input row only, and those past n are never read. The
        slot's graphs share a memory pool: one slot runs one batch at a time,
        so they never run together (other slots' do, so each slot has its
        own pool)."""
        t, p = self.torch, slot.priv
        pool = t.cuda.graph_pool_handle()
        p["graphs"] = {}
        p["pin_in"].zero_()  # pad rows compute on zeros or past rows, never on garbage
        p["d_in"].zero_()

        def batch(B):
            x = p["d_in"][:B]
            x.copy_(p["pin_in"][:B], non_blocking=True)
            p["pin_out"][:B].copy_(self.tm.forward(x), non_blocking=True)

        for B in reversed(self.buckets):  # the largest first: the pool fits all
            with t.cuda.stream(p["stream"]):  # warm-up outside the capture (cuBLAS)
                batch(B)
            p["stream"].synchronize()
            g = t.cuda.CUDAGraph()
            with t.cuda.graph(g, pool=pool, stream=p["stream"]):
                batch(B)
            p["graphs"][B] = g
        t.cuda.synchronize(self.dev)

    def selfcheck(self, model):
        """A probe batch equals the reference (fp32, TF32 off: 1e-5 relative)."""
        x = np.random.default_rng(7).uniform(-1, 1, (8, model.inputs)).astype(np.float32)
        y = self.tm.forward(self.torch.from_numpy(x).to(self.dev)).cpu().numpy()
        ref = model.forward(x)
        err = float(np.abs(y - ref).max() / max(float(np.abs(ref).max()), 1e-30))
        if err > 1e-5:
            raise SystemExit(f"cuda self-check: relative error {err:.3g} against the reference")

    def launch(self, slot, n, fault):
        t, p = self.torch, slot.priv
        graphs = p.get("graphs")
        if graphs and not fault:
            # Padded up to the bucket; the rows past n are never read back
            # (each output row depends on its input row only).
            g = graphs[next(b for b in self.buckets if b >= n)]
            with t.cuda.stream(p["stream"]):
                p["start"].record(p["stream"])
                g.replay()
                p["end"].record(p["stream"])
            return p["end"]
        with t.cuda.stream(p["stream"]):
            p["start"].record(p["stream"])
            d_in = p["d_in"][:n]
            d_in.copy_(p["pin_in"][:n], non_blocking=True)
            if fault:
                # An index far out of bounds: a device-side assert, sticky, as
                # an illegal address is for the C service's kernel.
                t.zeros(1, device=self.dev)[t.full((1,), 1 << 40, device=self.dev)].sum()
            y = self.tm.forward(d_in)
            p["pin_out"][:n].copy_(y, non_blocking=True)
            p["end"].record(p["stream"])
        return p["end"]

    def batch_seconds(self, slot):
        p = slot.priv
        return p["start"].elapsed_time(p["end"]) * 1e-3

    def reset(self):
        raise RuntimeError("a CUDA context cannot be reset in this process")

    def close(self):
        pass


class Batcher:
    """The queue and the window in front of one device."""

    def __init__(self, cfg, device, metrics, on_unrecoverable, open_connections=None):
        self.cfg, self.device, self.metrics = cfg, device, metrics
        # --eager-batch: the worker's open connections (a callable); when each
        # has its request queued or in a batch, none can come to fill the window.
        self.open_connections = open_connections if cfg.eager_batch else None
        self.inflight_rows = 0
        self.window = cfg.batch_window_us * 1e-6
        self.queue = collections.deque()
        self.free = list(device.slots)
        self.loop = asyncio.get_running_loop()
        # The window is a timerfd: the loops' own timers cannot wait 200 us
        # without either adding most of a millisecond or spinning (fdtimer.py).
        self.timer = fdtimer.FdTimer(self.loop)
        self.draining = False
        self.batch_id = 0
        self.up = True
        self.inflight = set()
        self.on_unrecoverable = on_unrecoverable

    def submit(self, x, fault=0):
        """Queues one row; returns the future of its Answer. Raises QueueFull."""
        if len(self.queue) >= self.cfg.max_queue:
            raise QueueFull()
        row = Row(x, self.loop.create_future(), fault)
        self.queue.append(row)
        self.dispatch()
        return row.future

    def drain(self):
        """Stop waiting for windows: what is queued leaves now."""
        self.draining = True
        self.dispatch()

    def _take(self):
        q = self.queue
        while q and q[0].future.done():  # 504'd while queued
            q.popleft()
        if not q:
            return 0
        if len(q) >= self.cfg.max_batch:
            return self.cfg.max_batch
        age = time.monotonic() - q[0].t
        if self.draining or age >= self.window or self._none_to_come():
            return len(q)
        if not self.timer.armed:
            self.timer.arm(q[0].t + self.window, self.dispatch)
        return 0

    def _none_to_come(self):
        """True when every open connection has its request queued or in a
        batch, so that no other can arrive before an answer goes out (the C
        service's --eager-batch, policy.h); waiting for the window then only
        adds its length to every answer."""
        return (self.open_connections is not None
                and len(self.queue) + self.inflight_rows >= self.open_connections())

    def _batch_over(self, task, n):
        self.inflight.discard(task)
        self.inflight_rows -= n

    def dispatch(self):
        while self.free and self.up:
            n = self._take()
            if n == 0:
                break
            rows = [self.queue.popleft() for _ in range(n)]
            rows = [r for r in rows if not r.future.done()]
            if not rows:
                continue
            slot = self.free.pop()
            task = self.loop.create_task(self._run(slot, rows))
            self.inflight.add(task)
            self.inflight_rows += len(rows)
            task.add_done_callback(lambda t, n=len(rows): self._batch_over(t, n))
        if not self.queue:
            self.timer.cancel()

    async def _run(self, slot, rows):
        n = len(rows)
        self.batch_id += 1
        bid = self.batch_id
        fault = 0
        for i, r in enumerate(rows):
            slot.inp[i] = r.x
            fault |= r.fault
        self.metrics.inflight_batches += 1
        dev = self.device
        try:
            event = dev.launch(slot, n, fault)
            await waiting.wait_event(self.cfg, event)
        except waiting.DeviceFault as e:
            self._failed(rows, f"device fault: {e}")
            return
        except (RuntimeError, OSError, ValueError, TypeError, MemoryError) as e:
            # The launch itself failed (a CUDA error at enqueue, out of memory):
            # the batch is answered, never left to its deadline.
            why = (str(e).splitlines() or [""])[0]
            self._failed(rows, f"device fault: {type(e).__name__}: {why}")
            return
        except asyncio.CancelledError:  # a drain that gave up: the rows get 503
            for r in rows:
                if not r.future.done():
                    r.future.set_exception(waiting.DeviceFault("draining"))
            raise
        finally:
            self.metrics.inflight_batches -= 1
        self.metrics.batch_done(n, dev.batch_seconds(slot))
        out = slot.out
        for i, r in enumerate(rows):
            if not r.future.done():
                r.future.set_result(Answer(out[i].copy(), bid, n, i, dev.ordinal))
        self.free.append(slot)
        self.dispatch()

    def _failed(self, rows, why):
        for r in rows:
            if not r.future.done():
                r.future.set_exception(waiting.DeviceFault(why))
        if not self.up:
            return
        self.up = False
        if self.device.recoverable:
            self.loop.call_soon(self._reset)
        else:
            self.on_unrecoverable(why)

    def _reset(self):
        """The stand-in's reset once the failed batch is out: every slot back."""
        if any(not t.done() for t in self.inflight):
            self.loop.call_later(0.001, self._reset)
            return
        try:
            self.device.reset()
        except Exception as e:  # noqa: BLE001 (cannot reset: a new process)
            self.on_unrecoverable(f"device reset failed: {e}")
            return
        self.metrics.device_resets += 1
        self.free = list(self.device.slots)
        self.up = True
        self.dispatch()

    def close(self):
        """Releases the window's timer; nothing is dispatched after it."""
        self.up = False
        self.timer.close()

    def fail_queued(self, why):
        """Answers every queued row with ``why`` (a drain that gave up, a restart)."""
        while self.queue:
            r = self.queue.popleft()
            if not r.future.done():
                r.future.set_exception(waiting.DeviceFault(why))
