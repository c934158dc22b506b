"""Recognising the objects that name a CUDA stream or event.

Duck-typed: nothing is imported; an object's type is only looked at by
name and module, so torch, CuPy, cuda-python, Numba or PyCUDA are never
loaded by cudaev.
"""
from __future__ import annotations

from typing import Any, Tuple

__all__ = ["STREAM", "EVENT", "NOTHING", "Stream", "Event", "handle_of"]

STREAM = 0
EVENT = 1
NOTHING = 2  # an event object with nothing recorded yet (torch makes its event at the first record)

_ACCEPTED = (
    "cudaev.wait accepts: an object with __cuda_stream__ (cuda.core's stream protocol), "
    "torch.cuda.Stream / ExternalStream / Event, cupy.cuda.Stream / ExternalStream / Event, "
    "cuda.bindings' CUstream / CUevent / cudaStream_t / cudaEvent_t, a Numba stream, "
    "PyCUDA's Stream / Event, cudaev.Stream(handle) / cudaev.Event(handle), or an int "
    "(a stream handle; wrap an event handle in cudaev.Event)"
)


class Stream:
    """A raw ``CUstream`` / ``cudaStream_t`` handle given as an int (0: the
    legacy default stream, 2: the per-thread default stream)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = _as_int(handle, "cudaev.Stream")

    def __repr__(self) -> str:
        return f"cudaev.Stream({self.handle:#x})"


class Event:
    """A raw ``CUevent`` / ``cudaEvent_t`` handle given as an int."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = _as_int(handle, "cudaev.Event")
        if self.handle == 0:
            raise ValueError("cudaev.Event: a NULL event handle names no event")

    def __repr__(self) -> str:
        return f"cudaev.Event({self.handle:#x})"


def _as_int(h: Any, what: str) -> int:
    if isinstance(h, bool):
        raise TypeError(f"{what}: a handle is an int, not a bool")
    if hasattr(h, "value") and not isinstance(h, int):  # ctypes.c_void_p
        h = h.value or 0
    try:
        v = int(h)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: {type(h).__name__} is no handle (an int is)") from None
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"{what}: {v} is no handle (0 <= handle < 2**64)")
    return v


def handle_of(x: Any) -> Tuple[int, int]:
    """(STREAM or EVENT, the handle as an int) for anything cudaev.wait accepts;
    TypeError naming what is accepted otherwise."""
    if isinstance(x, Stream):
        return STREAM, x.handle
    if isinstance(x, Event):
        return EVENT, x.handle
    if isinstance(x, int) and not isinstance(x, bool):
        return STREAM, _as_int(x, "cudaev.wait")
    tp = type(x)
    mod = tp.__module__ or ""
    name = tp.__name__
    # cuda.core's stream protocol: __cuda_stream__() -> (version, handle).
    proto = getattr(x, "__cuda_stream__", None)
    if proto is not None:
        got = proto() if callable(proto) else proto
        if not (isinstance(got, tuple) and len(got) == 2):
            raise TypeError(f"cudaev.wait: {name}.__cuda_stream__ gave {got!r}, "
                            "not (version, handle)")
        return STREAM, _as_int(got[1], "__cuda_stream__")
    # cuda.bindings (cuda-python): driver and runtime handle classes.
    if mod.startswith("cuda.") or mod.startswith("cuda_"):
        if name in ("CUstream", "cudaStream_t"):
            return STREAM, _as_int(x, name)
        if name in ("CUevent", "cudaEvent_t"):
            return EVENT, _as_int(x, name)
    # PyTorch: Stream / ExternalStream have .cuda_stream, Event .cuda_event.
    if mod.startswith("torch"):
        if hasattr(x, "cuda_stream"):
            return STREAM, _as_int(x.cuda_stream, name)
        if hasattr(x, "cuda_event"):
            h = _as_int(x.cuda_event, name)
            # torch.cuda.Event creates its CUDA event at the first record;
            # until then it is complete (query() True), as here.
            return (EVENT, h) if h != 0 else (NOTHING, 0)
    # CuPy: Stream / ExternalStream / Event carry .ptr.
    if mod.startswith("cupy"):
        if "Event" in name:
            return EVENT, _as_int(x.ptr, name)
        if "Stream" in name:
            return STREAM, _as_int(x.ptr, name)
    # Numba: a CUDA stream has .handle (ctypes c_void_p, or a binding object).
    if mod.startswith("numba"):
        if "Stream" in name:
            return STREAM, _as_int(x.handle, name)
        if "Event" in name:
            return EVENT, _as_int(x.handle, name)
    # PyCUDA: pycuda.driver.Stream / Event have .handle (an int).
    if mod.startswith("pycuda") or mod.startswith("_driver"):
        if "Stream" in name:
            return STREAM, _as_int(x.handle, name)
        if "Event" in name:
            return EVENT, _as_int(x.handle, name)
    raise TypeError(f"cudaev.wait: cannot tell which stream or event a "
                    f"{mod}.{name} names. {_ACCEPTED}.")
