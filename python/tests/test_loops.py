"""Several asyncio loops: each thread's loop has its own cudaev loop; closing
a loop detaches it; fds and loops do not pile up."""
import asyncio
import gc
import threading
import time

import pytest

import cudaev
from cudaev import _attach
from conftest import live_ops, open_fds


def run_in(new_loop, coro_fn):
    loop = new_loop()
    try:
        return loop.run_until_complete(coro_fn())
    finally:
        loop.close()


async def _use_cudaev():
    p = cudaev._promise()
    asyncio.get_running_loop().call_soon(p.set, 0)
    await p.wait()
    await cudaev._timer(0.001)
    return id(_attach.attached().native)


def test_two_loops_in_two_threads(new_loop):
    results, errors = {}, []
    barrier = threading.Barrier(2)

    async def work(name):
        barrier.wait()  # both loops attached at the same time
        natives = set()
        for i in range(200):
            p = cudaev._promise()
            asyncio.get_running_loop().call_soon(p.set, 0 if i % 2 else 700)
            try:
                await p.wait()
            except cudaev.CudaError as e:
                assert e.code == 700
            natives.add(id(_attach.attached().native))
        await cudaev._timer(0.005)
        results[name] = (natives, threading.get_ident())

    def thread(name):
        try:
            run_in(new_loop, lambda: work(name))
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=thread, args=(n,)) for n in ("a", "b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors, errors
    assert len(results["a"][0]) == len(results["b"][0]) == 1
    assert results["a"][0] != results["b"][0]
    assert results["a"][1] != results["b"][1]


def test_loop_close_then_new_loop_same_thread(new_loop):
    run_in(new_loop, _use_cudaev)
    gc.collect()
    # A new loop in the same thread attaches afresh and works.
    assert run_in(new_loop, _use_cudaev)


def test_fifty_loops_leak_no_fd(new_loop):
    run_in(new_loop, _use_cudaev)  # warm-up: libraries, caches
    gc.collect()
    fds = open_fds()
    for _ in range(50):
        run_in(new_loop, _use_cudaev)
    gc.collect()
    assert open_fds() == fds
    assert len(_attach._states) == 0


def test_asyncio_run_detaches(loop_kind):
    if loop_kind != "asyncio":
        pytest.skip("asyncio.run makes asyncio's own loop")
    asyncio.run(_use_cudaev())  # warm-up; it also drops the loop pytest had set
    gc.collect()
    fds = open_fds()
    for _ in range(20):
        asyncio.run(_use_cudaev())
    gc.collect()
    assert open_fds() == fds


def test_close_with_a_wait_pending(new_loop):
    """A loop closed while a wait is pending: the cudaev loop is destroyed
    when the loop goes, and nothing of it is kept."""
    base = live_ops()
    fds = open_fds()
    loop = new_loop()
    holder = []

    async def start():
        holder.append(cudaev._promise())
        holder.append(asyncio.ensure_future(holder[0].wait()))
        await asyncio.sleep(0)

    loop.run_until_complete(start())
    holder[1].cancel()  # what asyncio.run does with tasks left
    loop.run_until_complete(asyncio.gather(holder[1], return_exceptions=True))
    loop.close()
    del holder, loop
    gc.collect()
    assert live_ops() == base
    assert open_fds() == fds


async def test_detach_fails_pending_waits():
    p = cudaev._promise()
    t = asyncio.ensure_future(p.wait())
    await asyncio.sleep(0)
    assert cudaev.detach() is True
    with pytest.raises(cudaev.CudaError) as ei:
        await t
    assert ei.value.name == "CUDAEV_ERROR_LOOP_DESTROYED"
    assert cudaev.detach() is False
    # The next use attaches a new cudaev loop.
    await _use_cudaev()


def test_no_running_loop_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no running asyncio event loop"):
        cudaev.wait(0)
    with pytest.raises(RuntimeError, match="no running asyncio event loop"):
        cudaev._promise()


async def test_sub_millisecond_deadline_neither_early_nor_spinning():
    """The loop's deadline reaches the host loop as a timerfd: a 300 us timer
    fires no earlier than asked, and the wait costs a few passes, where
    uvloop's millisecond timers run it at once (then re-armed until due, a
    pass per turn) and asyncio's sleep until the next millisecond."""
    await cudaev._timer(0.001)  # attached, warm
    before = cudaev.stats()["passes"]
    for _ in range(20):
        t0 = time.monotonic()  # uvloop's loop.time() counts milliseconds
        await cudaev._timer(300e-6)
        assert time.monotonic() - t0 >= 300e-6
    passes = cudaev.stats()["passes"] - before
    assert passes <= 20 * 4, passes
