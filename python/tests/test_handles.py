"""Which objects name a stream or an event, with stand-ins for each library's
types (CI has none of them), and that wait() asks the right C constructor."""
import ctypes
import os

import pytest

import cudaev
from cudaev import _handles
from cudaev._handles import EVENT, NOTHING, STREAM, handle_of


def standin(module, name, **attrs):
    """An object whose type looks like `module.name`, with `attrs`."""
    tp = type(name, (), {})
    tp.__module__ = module
    obj = tp()
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


class IntLike:
    """A cuda.bindings handle: int(h) gives the address."""

    def __init__(self, v):
        self.v = v

    def __int__(self):
        return self.v


def binding(name, v):
    tp = type(name, (IntLike,), {})
    tp.__module__ = "cuda.bindings.driver" if name.startswith("CU") else "cuda.bindings.runtime"
    return tp(v)


class CoreStream:
    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


CASES = [
    (CoreStream(0x1234), STREAM, 0x1234),
    (standin("torch.cuda.streams", "Stream", cuda_stream=0x10), STREAM, 0x10),
    (standin("torch.cuda.streams", "ExternalStream", cuda_stream=0x11), STREAM, 0x11),
    (standin("torch.cuda.streams", "Event", cuda_event=0x12), EVENT, 0x12),
    (standin("cupy.cuda.stream", "Stream", ptr=0x20), STREAM, 0x20),
    (standin("cupy.cuda.stream", "ExternalStream", ptr=0x21), STREAM, 0x21),
    (standin("cupy.cuda.stream", "Event", ptr=0x22), EVENT, 0x22),
    (binding("CUstream", 0x30), STREAM, 0x30),
    (binding("CUevent", 0x31), EVENT, 0x31),
    (binding("cudaStream_t", 0x32), STREAM, 0x32),
    (binding("cudaEvent_t", 0x33), EVENT, 0x33),
    (standin("numba.cuda.cudadrv.driver", "Stream", handle=ctypes.c_void_p(0x40)), STREAM, 0x40),
    (standin("numba.cuda.cudadrv.driver", "Stream", handle=binding("CUstream", 0x41)),
     STREAM, 0x41),
    (standin("numba.cuda.cudadrv.driver", "Event", handle=ctypes.c_void_p(0x42)), EVENT, 0x42),
    (standin("pycuda._driver", "Stream", handle=0x50), STREAM, 0x50),
    (standin("pycuda._driver", "Event", handle=0x51), EVENT, 0x51),
    (cudaev.Stream(0x60), STREAM, 0x60),
    (cudaev.Event(0x61), EVENT, 0x61),
    (0x70, STREAM, 0x70),
    (0, STREAM, 0),
]


@pytest.mark.parametrize("obj,kind,handle", CASES, ids=lambda v: type(v).__name__)
def test_handle_of(obj, kind, handle):
    assert handle_of(obj) == (kind, handle)


@pytest.mark.parametrize("bad", ["stream", 1.5, None, object(), [1], True])
def test_unknown_objects_say_what_is_accepted(bad):
    with pytest.raises(TypeError, match="cudaev.wait accepts"):
        handle_of(bad) if not isinstance(bad, bool) else handle_of(standin("x", "Y"))
    with pytest.raises(TypeError):
        handle_of(bad)


def test_bad_handles():
    with pytest.raises(ValueError):
        handle_of(-1)
    with pytest.raises(ValueError):
        handle_of(1 << 64)
    with pytest.raises(ValueError, match="NULL event"):
        cudaev.Event(0)
    with pytest.raises(TypeError, match="__cuda_stream__"):
        handle_of(standin("m", "S", __cuda_stream__=lambda: 5))


class Recorder:
    """Stands in for the C loop: records which constructor wait() called."""

    def __init__(self):
        self.calls = []

    def stream(self, h, fut):
        self.calls.append(("stream", h))
        fut.set_result(None)
        return cudaev._native.Op  # anything with cancel(); never called here

    def event(self, h, fut):
        self.calls.append(("event", h))
        fut.set_result(None)
        return cudaev._native.Op


@pytest.mark.parametrize("obj,kind,handle", CASES, ids=lambda v: type(v).__name__)
async def test_wait_calls_the_right_constructor(obj, kind, handle, monkeypatch):
    import asyncio
    rec = Recorder()

    class St:
        native = rec
        finish = staticmethod(cudaev._attach.finish)

        @staticmethod
        def future():
            return asyncio.get_running_loop().create_future()

    monkeypatch.setattr(cudaev, "_attached", lambda: St)
    await cudaev.wait(obj)
    assert rec.calls == [("event" if kind == EVENT else "stream", handle)]


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="a GPU is here")
async def test_no_driver_is_a_cuda_error():
    # On a machine without NVIDIA's driver (or device), the library's code.
    for obj in (0, cudaev.Stream(2), cudaev.Event(0x1000)):
        with pytest.raises(cudaev.CudaError) as ei:
            await cudaev.wait(obj)
        assert ei.value.name in ("cudaErrorInsufficientDriver", "cudaErrorNoDevice")
    with pytest.raises(cudaev.CudaError):
        await cudaev.host_func(0, print)
    with pytest.raises(cudaev.CudaError):
        await cudaev.host_func(0, print, hold=True)
    with pytest.raises(TypeError, match="callable"):
        await cudaev.host_func(0, "not callable")
    with pytest.raises(TypeError, match="not an event"):
        await cudaev.host_func(cudaev.Event(5), print)


async def test_unrecorded_torch_event_is_done_without_the_loop(monkeypatch):
    # torch makes its CUDA event at the first record (cuda_event 0 before);
    # until then it is complete, and nothing is asked of the loop.
    ev = standin("torch.cuda.streams", "Event", cuda_event=0)
    assert handle_of(ev) == (NOTHING, 0)

    def no_loop():
        raise AssertionError("the loop was asked for an event with nothing recorded")

    monkeypatch.setattr(cudaev, "_attached", no_loop)
    assert await cudaev.wait(ev) is None
