"""A one-shot timer with microsecond precision that sleeps: a Linux timerfd
watched by the event loop (``loop.add_reader``).

The batch window is 200 us by default, and neither loop can wait that long:
asyncio's selector rounds a timeout up to a whole millisecond (a 200 us
window becomes 1.1 ms), and uvloop rounds a delay to the nearest millisecond,
so ``call_at(now + 0.0002)`` runs at once, as ``call_soon`` would. A batcher
that re-arms until its window has passed then spins a core through it. A
timerfd fires when asked, and the loop sleeps until it does, on asyncio and
uvloop alike.

libc's ``timerfd_create``/``timerfd_settime`` through ctypes (``os`` has them
only from Python 3.13; Debian's is 3.11).

Thread: every method runs on the event loop's thread; the callback runs there.
"""
import ctypes
import ctypes.util
import os

CLOCK_MONOTONIC = 1  # time.monotonic()'s clock on Linux
TFD_CLOEXEC, TFD_NONBLOCK = os.O_CLOEXEC, os.O_NONBLOCK
TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Libc:
    """libc's timerfd_create and timerfd_settime."""

    def __init__(self):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.create = libc.timerfd_create
        self.create.argtypes = (ctypes.c_int, ctypes.c_int)
        self.settime = libc.timerfd_settime
        self.settime.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec),
                                 ctypes.c_void_p)

    def timerfd_create(self):
        fd = self.create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"timerfd_create: {os.strerror(e)}")
        return fd

    def settime_abs(self, fd, when):
        """Arms ``fd`` to fire at monotonic time ``when`` (0: disarm)."""
        ns = 0 if when == 0 else max(1, int(round(when * 1e9)))
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(ns // 1_000_000_000, ns % 1_000_000_000))
        if self.settime(fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None) < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"timerfd_settime: {os.strerror(e)}")


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = _Libc()
    return _LIBC


class FdTimer:
    """``arm(when, callback)`` runs ``callback()`` once at monotonic time
    ``when`` (``time.monotonic()``, which is also asyncio's ``loop.time()``
    on Linux); a later ``arm`` replaces it; ``cancel()`` drops it. ``close()``
    releases the fd; the timer is unusable after it."""

    def __init__(self, loop):
        self._loop = loop
        self._api = _libc()
        self._fd = self._api.timerfd_create()
        self._callback = None
        loop.add_reader(self._fd, self._fired)

    @property
    def armed(self):
        return self._callback is not None

    def arm(self, when, callback):
        self._callback = callback
        self._api.settime_abs(self._fd, max(when, 1e-9))

    def cancel(self):
        if self._callback is not None:
            self._callback = None
            self._api.settime_abs(self._fd, 0)

    def _fired(self):
        try:
            os.read(self._fd, 8)
        except BlockingIOError:  # disarmed or re-armed after it became readable
            return
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()

    def close(self):
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
            self._callback = None
