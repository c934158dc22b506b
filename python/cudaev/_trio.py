"""One cudaev foreign-mode loop per trio run, attached on first use.

A system task of the run drives it: it waits for the loop's eventfd
(``wait_readable``; a hint: every wake-up drains everything) inside a cancel
scope whose deadline follows the library's (``cudaev_loop_set_timer_cb``),
then calls ``Loop.process``. The library tells a new deadline at the end of a
pass, on the driver itself, or during the pass a ``wait`` takes at once, on
the caller's task; either way it lands on the scope the driver sleeps in (or
on the next one). Every cudaev continuation and loop-thread host function
thus runs on the run's thread, inside ``Loop.process``. At the end of a run
trio cancels its system tasks: the driver destroys the loop on its way out.

Imported only once trio is: cudaev never imports trio itself.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import outcome
import trio

from . import _native
from ._errors import CudaError

__all__ = ["Attached", "Future", "attached", "finish"]


class Future:
    """What the extension completes (it calls these methods by name, inside
    ``Loop.process``), once, for one trio task: the outcome goes to the task
    if it waits already, else it is kept until the task comes for it."""

    __slots__ = ("outcome", "task")

    def __init__(self) -> None:
        self.outcome: Optional[outcome.Outcome] = None  # kept for a task not waiting yet
        self.task: Optional[trio.lowlevel.Task] = None  # the task waiting

    def done(self) -> bool:
        # Asked only after one of the calls below raised, to tell a future
        # settled already from an error: each is settled once, so it is an
        # error (trio refused the reschedule), and the extension reports it.
        return self.outcome is not None

    def set_result(self, value: Any) -> None:
        self._settle(outcome.Value(value))

    def set_exception(self, exc: BaseException) -> None:
        self._settle(outcome.Error(exc))

    def cancel(self) -> None:
        # Only a cudaev future cancelled by someone other than the waiting
        # task gets here (a promise set to CUDAEV_ERROR_CANCELLED): a task's
        # own cancellation drops this object first (Op.cancel). trio.Cancelled
        # belongs to trio's cancel scopes, so this is a CudaError.
        self._settle(outcome.Error(CudaError(_native.ERROR_CANCELLED)))

    def _settle(self, result: outcome.Outcome) -> None:
        task = self.task
        if task is None:
            self.outcome = result
        else:
            self.task = None
            trio.lowlevel.reschedule(task, result)


async def _result(fut: Future, op: "_native.Op") -> Any:
    done = fut.outcome
    if done is not None:
        # Complete before the await (the pass inside wait() may do that):
        # the schedule point every trio function has, keeping the outcome.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return done.unwrap()
    fut.task = trio.lowlevel.current_task()

    def abort(_: Any) -> trio.lowlevel.Abort:
        # A cancel scope of the task's fired: the cudaev future is cancelled
        # too (Op.cancel drops fut at once; its Op goes in a later pass).
        fut.task = None
        op.cancel()
        return trio.lowlevel.Abort.SUCCEEDED

    return await trio.lowlevel.wait_task_rescheduled(abort)


async def finish(fut: Future, op: "_native.Op", timeout: Optional[float]) -> Any:
    """Awaits fut for the current task; ``timeout`` raises the builtin
    TimeoutError, as on asyncio (trio.fail_after would raise TooSlowError)."""
    if timeout is None:
        return await _result(fut, op)
    with trio.move_on_at(trio.current_time() + timeout):
        return await _result(fut, op)
    raise TimeoutError(f"cudaev: the work did not complete within timeout={timeout}")


class Attached:
    """A trio run's cudaev loop and what its driver needs."""

    __slots__ = ("native", "fd", "deadline", "scope")

    future = Future
    finish = staticmethod(finish)

    def __init__(self) -> None:
        native = _native.Loop()
        self.native = native
        self.fd = native.fd()
        self.deadline = math.inf  # the driver's next deadline, on trio's clock
        self.scope: Optional[trio.CancelScope] = None  # the one the driver sleeps in
        native.set_timer_cb(self._deadline)  # tells the deadline at once

    def _deadline(self, ns: int) -> None:
        if ns < 0:
            at = math.inf
        elif ns == 0:
            at = -math.inf
        else:
            at = trio.current_time() + ns * 1e-9
        self.deadline = at
        if self.scope is not None:
            self.scope.deadline = at  # wakes the driver if it moved earlier


async def _drive(st: Attached) -> None:
    native = st.native
    try:
        while True:
            scope = trio.CancelScope(deadline=st.deadline)
            st.scope = scope
            with scope:
                await trio.lowlevel.wait_readable(st.fd)
            st.scope = None
            # A pass at the deadline may find nothing due yet (the library
            # tells no new deadline within 10 us of the one it told): the
            # old one, now past, brings the driver back on the scheduler's
            # next round for another pass.
            native.process()
    finally:
        # The run is ending (or the driver failed): pending waits fail with
        # CUDAEV_ERROR_LOOP_DESTROYED, and the eventfd is closed.
        st.scope = None
        trio.lowlevel.notify_closing(st.fd)
        native.destroy()


_state: trio.lowlevel.RunVar = trio.lowlevel.RunVar("cudaev")


def attached() -> Optional[Attached]:
    """The cudaev loop of the trio run on this thread, attached on first use;
    None when this thread runs no trio."""
    try:
        st = _state.get(None)
    except RuntimeError:  # outside a trio run
        return None
    if st is None:
        st = Attached()
        try:
            trio.lowlevel.spawn_system_task(_drive, st, name="cudaev loop driver")
        except BaseException:
            st.native.destroy()
            raise
        _state.set(st)
    elif st.native.closed:
        raise RuntimeError("cudaev: this trio run is ending (its system tasks were cancelled) "
                           "and its cudaev loop is gone; wait for GPU work before the run ends")
    return st
