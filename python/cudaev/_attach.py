"""One cudaev foreign-mode loop per running asyncio loop, attached on first use
(or per trio run: ``_trio``, looked at only when no asyncio loop runs).

The cudaev loop's eventfd joins the asyncio loop through ``add_reader``
(a hint: every wake-up drains everything), and so does its deadline, as a
timerfd the library re-arms whenever the deadline moves (``Loop.timer_fd``):
asyncio's and uvloop's timers count milliseconds, and the loop's deadlines
are often microseconds away (a wait about to end, polled for once the GPU is
expected there). Both readers call ``Loop.process``, so every cudaev
continuation and loop-thread host function runs on the asyncio loop's
thread, inside that call.
"""
from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _native

if TYPE_CHECKING:
    from . import _trio

__all__ = ["attached", "detach", "finish"]

_states: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Attached]" = \
    weakref.WeakKeyDictionary()
_lock = threading.Lock()  # guards _states; a loop only ever reads its own entry


async def finish(fut: "asyncio.Future[Any]", op: "_native.Op",
                 timeout: Optional[float]) -> Any:
    """Awaits fut; a cancelled await cancels the cudaev future too."""
    if timeout is None:
        try:
            return await fut
        except asyncio.CancelledError:
            op.cancel()
            raise
    async with asyncio.timeout(timeout):
        try:
            return await fut
        except asyncio.CancelledError:
            op.cancel()
            raise


class _Attached:
    __slots__ = ("native", "aloop_ref", "fd", "tfd", "finalizer", "__weakref__")

    finish = staticmethod(finish)

    def __init__(self, aloop: asyncio.AbstractEventLoop) -> None:
        native = _native.Loop()
        self.native = native
        self.aloop_ref = weakref.ref(aloop)
        self.fd = native.fd()
        self.tfd = -1
        added = False
        try:
            aloop.add_reader(self.fd, native.process)
            added = True
            self.tfd = native.timer_fd()
            aloop.add_reader(self.tfd, native.process_timer)
        except BaseException:
            if added:
                aloop.remove_reader(self.fd)
            native.destroy()
            raise
        # Runs when the asyncio loop object goes away (after close), or at exit.
        self.finalizer = weakref.finalize(aloop, _finalize, native)

    def future(self) -> "asyncio.Future[Any]":
        return self.aloop_ref().create_future()

    def close(self) -> None:
        aloop = self.aloop_ref()
        if aloop is not None and not aloop.is_closed():
            for fd in (self.fd, self.tfd):
                try:
                    aloop.remove_reader(fd)
                except (RuntimeError, ValueError, OSError):
                    pass
        self.finalizer.detach()
        self.native.destroy()


def _finalize(native: "_native.Loop") -> None:
    native.destroy()


def attached() -> Union[_Attached, "_trio.Attached"]:
    """The cudaev loop of the running asyncio loop (or trio run), attached on
    first use."""
    try:
        aloop = asyncio.get_running_loop()
    except RuntimeError:
        aloop = None
    if aloop is None:  # outside the except block: trio's errors do not chain asyncio's
        return _not_asyncio()
    st = _states.get(aloop)
    if st is None or st.native.closed:
        if aloop.is_closed():
            raise RuntimeError("cudaev: the asyncio loop is closed")
        st = _Attached(aloop)
        with _lock:
            _states[aloop] = st
    return st


def _not_asyncio() -> "_trio.Attached":
    # asyncio is looked at first (its check is the cheap one); trio only if
    # something imported it already, since cudaev never imports it.
    if "trio" in sys.modules:
        from . import _trio

        st = _trio.attached()
        if st is not None:
            return st
    raise RuntimeError("cudaev: no running asyncio event loop or trio run in this thread; call "
                       "cudaev.wait / cudaev.host_func from a coroutine (asyncio.run, "
                       "uvloop.run, loop.run_until_complete) or a trio task (trio.run; anyio.run "
                       "on either backend), on the thread that runs it")


def detach(loop: Optional[asyncio.AbstractEventLoop] = None) -> bool:
    """Detaches cudaev from an asyncio loop (default: the running one): removes
    its reader and deadline and destroys its cudaev loop; pending waits fail
    with CudaError(CUDAEV_ERROR_LOOP_DESTROYED). Not needed before closing a
    loop (that is noticed when the loop object goes away), but frees the
    eventfd at once. True if something was attached. Thread: the loop's.
    asyncio only: under trio the cudaev loop lasts as long as the run."""
    if loop is None:
        loop = asyncio.get_running_loop()
    with _lock:
        st = _states.pop(loop, None)
    if st is None:
        return False
    st.close()
    return True
