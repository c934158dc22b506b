"""The trio path: promises and timers through a trio run's own cudaev loop,
cancellation by trio's cancel scopes, timeouts, one loop per run (and per
thread), and the loop destroyed when the run ends."""
import gc
import os
import threading
import time
import tracemalloc

import pytest

trio = pytest.importorskip("trio", reason="trio does not import (Debian: python3-trio)")

import cudaev  # noqa: E402
from cudaev import _attach, _native, _trio  # noqa: E402
from conftest import live_ops, open_fds  # noqa: E402


def run(fn, *args):
    """trio.run(fn, *args), failing instead of hanging when a wait never ends."""
    async def bounded():
        with trio.fail_after(30):
            return await fn(*args)

    return trio.run(bounded)


def native_of_run():
    st = _attach.attached()
    assert isinstance(st, _trio.Attached)
    return st.native


def test_promise_round_trip():
    async def main():
        p = cudaev._promise()

        async def later():
            await trio.sleep(0.005)
            assert p.set(0) is True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            assert await p.wait() is None
        assert p.set(0) is False  # already complete
        p = cudaev._promise()
        p.set(0)
        await trio.sleep(0.005)  # completed before the await: the outcome was kept
        assert await p.wait() is None

    run(main)


def test_errors_are_cuda_errors():
    async def main():
        p = cudaev._promise()
        p.set(700)
        with pytest.raises(cudaev.CudaError) as ei:
            await p.wait()
        assert (ei.value.code, ei.value.name) == (700, "cudaErrorIllegalAddress")
        p = cudaev._promise()
        p.set(_native.ERROR_TIMEOUT)
        with pytest.raises(TimeoutError):
            await p.wait()
        # A cudaev future cancelled by other than the awaiting task: trio's
        # Cancelled belongs to its cancel scopes, so this is a CudaError.
        p = cudaev._promise()
        p.set(_native.ERROR_CANCELLED)
        with pytest.raises(cudaev.CudaError) as ei:
            await p.wait()
        assert ei.value.code == _native.ERROR_CANCELLED

    run(main)


def test_timers_complete_in_deadline_order():
    async def main():
        order = []

        async def one(i, s):
            t0 = trio.current_time()
            await cudaev._timer(s)
            assert trio.current_time() - t0 >= s - 1e-6
            order.append(i)

        async with trio.open_nursery() as nursery:
            for i, s in enumerate([0.04, 0.01, 0.03, 0.02]):
                nursery.start_soon(one, i, s)
        assert order == [1, 3, 2, 0]

    run(main)


def test_earlier_deadline_told_outside_the_driver_wakes_it():
    # The pass inside wait() (GPU waits) tells a new deadline on the caller's
    # task while the driver sleeps on the old one. A pass run here does the
    # same: it also drains the eventfd, so only the deadline can wake the driver.
    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cudaev._timer, 5.0)
            await trio.sleep(0.01)  # the driver now sleeps until the 5 s deadline
            t0 = time.monotonic()
            short = cudaev._timer(0.02)
            native_of_run().process()
            with trio.fail_after(2):
                await short
            assert time.monotonic() - t0 < 1.0
            nursery.cancel_scope.cancel()

    run(main)


def test_deadline_now_makes_the_driver_pass_at_once():
    # cb(0) from the library means "process now". The library wakes the
    # eventfd too whenever it says so; told here alone, only the deadline
    # can wake the driver.
    class Steps(trio.abc.Instrument):
        n = 0

        def before_task_step(self, task):
            if task.name == "cudaev loop driver":
                self.n += 1

    async def main():
        st = _attach.attached()
        await trio.sleep(0.01)  # the driver sleeps, with no deadline
        steps = Steps()
        trio.lowlevel.add_instrument(steps)
        await trio.sleep(0.01)
        assert steps.n == 0
        st._deadline(0)
        await trio.sleep(0.01)
        trio.lowlevel.remove_instrument(steps)
        st._deadline(-1)  # back to the library's deadline (none), which it tells no more
        assert steps.n >= 1

    run(main)


def test_sub_millisecond_timers_complete():
    async def main():
        for i in range(200):
            with trio.fail_after(2):
                await cudaev._timer(0.0003 + (i % 7) * 0.00037)

    run(main)


@pytest.mark.parametrize("how", ["move_on_after", "fail_after", "nursery cancel"])
def test_cancel_releases_everything(how):
    async def main():
        base = live_ops()
        p = cudaev._promise()
        if how == "move_on_after":
            with trio.move_on_after(0.01) as scope:
                await p.wait()
            assert scope.cancelled_caught
        elif how == "fail_after":
            with pytest.raises(trio.TooSlowError):
                with trio.fail_after(0.01):
                    await p.wait()
        else:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(p.wait)
                await trio.sleep(0.005)
                nursery.cancel_scope.cancel()
        assert p.op.ready  # the cudaev future was cancelled too
        assert p.set(0) is False
        del p
        await trio.sleep(0.01)  # the continuation runs in a later pass
        assert live_ops() == base
        assert native_of_run().pending() == 0

    run(main)


def test_timeout_argument_raises_builtin_timeout_error():
    async def main():
        base = live_ops()
        p = cudaev._promise()
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await p.wait(timeout=0.02)
        assert 0.015 <= time.monotonic() - t0 < 1.0
        assert p.set(0) is False  # the cudaev future was cancelled
        del p
        await trio.sleep(0.01)
        assert live_ops() == base
        p = cudaev._promise()  # a timeout not reached
        p.set(0)
        assert await p.wait(timeout=5) is None

    run(main)


def test_one_loop_per_run_destroyed_at_its_end():
    natives, pending = [], []

    async def main():
        p = cudaev._promise()
        p.set(0)
        await p.wait()
        natives.append(native_of_run())
        await cudaev._timer(0.001)
        assert native_of_run() is natives[-1]  # the same loop for the whole run
        pending.append(cudaev._promise())  # still pending when the run ends

    run(main)  # warm-up: trio's own imports and caches
    gc.collect()
    fds = open_fds()
    for _ in range(20):
        run(main)
    gc.collect()
    assert open_fds() == fds
    assert len({id(n) for n in natives[1:]}) == 20
    assert all(n.closed for n in natives)
    # Each run's pending promise failed when its loop was destroyed.
    for p in pending:
        assert isinstance(p.fut.outcome.error, cudaev.CudaError)
        assert p.fut.outcome.error.name == "CUDAEV_ERROR_LOOP_DESTROYED"


def test_two_runs_in_two_threads():
    results, errors = {}, []
    barrier = threading.Barrier(2)

    async def work(name):
        barrier.wait()  # both runs attach at the same time
        natives = set()
        for i in range(200):
            p = cudaev._promise()
            p.set(0 if i % 2 else 700)
            try:
                await p.wait()
            except cudaev.CudaError as e:
                assert e.code == 700
            natives.add(id(native_of_run()))
        await cudaev._timer(0.005)
        results[name] = natives

    def thread(name):
        try:
            run(work, name)
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=thread, args=(n,)) for n in ("a", "b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors, errors
    assert len(results["a"]) == len(results["b"]) == 1
    assert results["a"] != results["b"]


def test_outside_the_run_thread_is_a_clear_error():
    def in_worker():
        with pytest.raises(RuntimeError, match="no running asyncio event loop or trio run"):
            cudaev._promise()
        return True

    async def main():
        assert await trio.to_thread.run_sync(in_worker)

    run(main)
    with pytest.raises(RuntimeError, match="trio"):
        cudaev.wait(0)


class Recorder:
    """Stands in for the C loop: completes the future inside the call, as the
    pass inside wait() does when the GPU finished already."""

    def __init__(self):
        self.calls = []

    def stream(self, h, fut):
        self.calls.append(("stream", h))
        fut.set_result(None)
        return _native.Op  # anything with cancel(); never called here

    def event(self, h, fut):
        self.calls.append(("event", h))
        fut.set_exception(cudaev.CudaError(719))
        return _native.Op


def test_wait_completed_inside_the_call(monkeypatch):
    rec = Recorder()

    class St:
        native = rec
        future = _trio.Future
        finish = staticmethod(_trio.finish)

    monkeypatch.setattr(cudaev, "_attached", lambda: St)

    async def main():
        assert await cudaev.wait(cudaev.Stream(7)) is None
        with pytest.raises(cudaev.CudaError) as ei:
            await cudaev.wait(cudaev.Event(8))
        assert ei.value.code == 719

    run(main)
    assert rec.calls == [("stream", 7), ("event", 8)]


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="a GPU is here")
def test_no_driver_is_a_cuda_error():
    async def main():
        for obj in (0, cudaev.Event(0x1000)):
            with pytest.raises(cudaev.CudaError) as ei:
                await cudaev.wait(obj)
            assert ei.value.name in ("cudaErrorInsufficientDriver", "cudaErrorNoDevice")
        for hold in (False, True):
            with pytest.raises(cudaev.CudaError):
                await cudaev.host_func(0, print, hold=hold)

    run(main)


def test_many_awaits_leak_nothing():
    n = 5000

    async def batch(k):
        for _ in range(k):
            p = cudaev._promise()
            p.set(0)
            await p.wait()
        for _ in range(k // 4):
            p = cudaev._promise()
            with trio.CancelScope() as scope:
                scope.cancel()
                await p.wait()  # blocks, then the cancel arrives: abort

    async def main():
        base = live_ops()
        await batch(500)  # warm-up: caches, free lists
        gc.collect()
        fds = open_fds()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        await batch(n)
        await trio.sleep(0.01)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert live_ops() == base
        assert native_of_run().pending() == 0
        assert open_fds() == fds
        assert grown < 64 * 1024, f"{grown} bytes kept over {n} awaits"

    run(main)
