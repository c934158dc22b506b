"""Where a decode step runs: the CPU backend (numpy on a worker thread, for
CI and machines without a GPU) and the torch backend (``decode_torch.py``).
Both offer what ``decode_engine.Engine`` asks: ``max_batch``, ``max_len``,
``enqueue(tokens, prev, positions, slots) -> step`` (a :class:`Step`),
``result(step, n)``, ``close()``, and ``reference()``: a one-slot model of
the same kind on the same device, for checking answers
(``decode_model.reference_check``).

Thread: ``enqueue``, ``result`` and ``close`` run on the event loop's
thread. At most two steps are outstanding (enqueued, their result not read
yet): the engine reads a step's result before it enqueues the step after
next, so two sets of host buffers, used in turn, suffice.
"""
import concurrent.futures

import numpy as np

from decode_model import Dims, NumpyModel


class Step:
    """An enqueued step: ``event`` completes when it is done; ``k`` says
    which of the backend's two buffer sets it uses; ``out``, the CPU
    backend's result."""

    __slots__ = ("event", "k", "out")

    def __init__(self, event, k):
        self.event, self.k, self.out = event, k, None


class CpuBackend:
    """The numpy model, stepped on one worker thread so that the event loop
    stays free while a step computes, as it does while the GPU works; the
    step's event is a ``waiting.HostEvent`` the worker sets."""

    name = "cpu"

    def __init__(self, weights, dims=Dims(), max_batch=64):
        self.dims, self.weights = dims, weights
        self.max_batch, self.max_len = max_batch, dims.max_len
        self.model = NumpyModel(weights, dims, max_batch)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="decode-cpu")
        self._last = np.zeros(max_batch, np.int64)  # the worker's: the last step's output

    def enqueue(self, tokens, prev, positions, slots):
        import waiting  # noqa: PLC0415 (the service's module, beside this one)

        step = Step(waiting.HostEvent(), 0)

        def work():  # on the worker, in enqueue order: _last is the step before's
            try:
                t = np.where(prev >= 0, self._last[np.maximum(prev, 0)], tokens)
                step.out = self._last = self.model.step(t, positions, slots)
            except Exception as e:  # reported through the event, as a device fault would be
                step.event.set(f"{type(e).__name__}: {e}")
                return
            step.event.set()

        self._pool.submit(work)
        return step

    def result(self, step, n):
        return step.out[:n]

    def reference(self):
        return NumpyModel(self.weights, self.dims, 1)

    def close(self):
        self._pool.shutdown(wait=True)


def make_backend(cfg, weights, dims=Dims()):
    """The backend the service's flags choose: ``--model-device cuda``:
    torch on ``cuda:--cuda-device`` (each step a CUDA graph unless
    ``--decode-graphs off``); ``cpu``: numpy on a worker thread, or
    torch on the CPU with ``--cpu-impl torch``. Raises ``SystemExit`` with
    the reason when torch cannot run."""
    max_batch = cfg.decode_max_batch
    if cfg.model_device == "cuda" or cfg.cpu_impl == "torch":
        device = f"cuda:{cfg.cuda_device}" if cfg.model_device == "cuda" else "cpu"
        try:
            import decode_torch  # noqa: PLC0415 (imports torch: only when asked)
            return decode_torch.TorchBackend(weights, dims, max_batch, device,
                                             graphs=cfg.decode_graphs == "on")
        except (ImportError, RuntimeError) as e:
            raise SystemExit(f"decode loop on {device}: {type(e).__name__}: {e}") from None
    return CpuBackend(weights, dims, max_batch)
