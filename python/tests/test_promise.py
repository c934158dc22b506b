"""Promises and timers through the package: completion, errors, timeouts,
cancellation, and that nothing is left behind."""
import asyncio
import gc
import time
import tracemalloc

import pytest

import cudaev
from cudaev import _native
from conftest import live_ops, open_fds


async def test_promise_success(event_loop):
    p = cudaev._promise()
    asyncio.get_running_loop().call_later(0.005, p.set, 0)
    assert await p.wait() is None
    assert p.set(0) is False  # already complete


async def test_promise_error_is_cuda_error():
    p = cudaev._promise()
    p.set(700)
    with pytest.raises(cudaev.CudaError) as ei:
        await p.wait()
    e = ei.value
    assert (e.code, e.name) == (700, "cudaErrorIllegalAddress")
    assert "illegal memory access" in e.message
    assert isinstance(e, RuntimeError)
    assert "cudaErrorIllegalAddress (700)" in str(e)


async def test_sticky_error_reaches_every_pending_wait():
    ps = [cudaev._promise() for _ in range(8)]
    waits = [asyncio.ensure_future(p.wait()) for p in ps]
    await asyncio.sleep(0)
    for p in ps:
        p.set(719)  # cudaErrorLaunchFailure, as a sticky fault gives every future
    res = await asyncio.gather(*waits, return_exceptions=True)
    assert [type(r) for r in res] == [cudaev.CudaError] * 8
    assert {r.code for r in res} == {719}


async def test_library_outcomes_map_to_asyncio_exceptions():
    p = cudaev._promise()
    p.set(_native.ERROR_TIMEOUT)
    with pytest.raises(TimeoutError):
        await p.wait()
    p = cudaev._promise()
    p.set(_native.ERROR_LOOP_DESTROYED)
    with pytest.raises(cudaev.CudaError) as ei:
        await p.wait()
    assert ei.value.name == "CUDAEV_ERROR_LOOP_DESTROYED"


async def test_timer_waits_at_least_its_time():
    t0 = time.monotonic()
    await cudaev._timer(0.03)
    dt = time.monotonic() - t0
    assert 0.03 <= dt < 1.0


async def test_timers_complete_in_deadline_order():
    order = []

    async def one(i, s):
        await cudaev._timer(s)
        order.append(i)

    await asyncio.gather(*(one(i, s) for i, s in enumerate([0.04, 0.01, 0.03, 0.02])))
    assert order == [1, 3, 2, 0]


async def test_cancel_releases_everything():
    base = live_ops()
    p = cudaev._promise()
    task = asyncio.ensure_future(p.wait())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert p.op.ready  # the cudaev future was cancelled too
    assert p.set(0) is False
    del p, task
    await asyncio.sleep(0.01)  # the continuation runs in a later pass
    assert live_ops() == base
    assert cudaev._attach.attached().native.pending() == 0


async def test_cancel_in_the_same_pass_as_completion(unraisable):
    p = cudaev._promise()
    task = asyncio.ensure_future(p.wait())
    await asyncio.sleep(0)
    p.set(0)
    task.cancel()  # the completion reaches a future already cancelled
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.01)
    assert unraisable == []


@pytest.mark.parametrize("how", ["argument", "asyncio.timeout", "wait_for"])
async def test_timeout(how):
    base = live_ops()
    p = cudaev._promise()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        if how == "argument":
            await p.wait(timeout=0.02)
        elif how == "asyncio.timeout":
            async with asyncio.timeout(0.02):
                await p.wait()
        else:
            await asyncio.wait_for(p.wait(), 0.02)
    # asyncio and uvloop may fire a timer up to ~1 ms early (clock granularity)
    assert 0.015 <= time.monotonic() - t0 < 1.0
    assert p.set(0) is False  # the cudaev future was cancelled
    del p
    await asyncio.sleep(0.01)
    assert live_ops() == base


async def test_timeout_not_reached():
    p = cudaev._promise()
    asyncio.get_running_loop().call_later(0.005, p.set, 0)
    await p.wait(timeout=5)


async def test_many_awaits_leak_nothing():
    n = 20000
    base = live_ops()

    async def batch(k):
        for _ in range(k):
            p = cudaev._promise()
            p.set(0)
            await p.wait()
        for _ in range(k // 4):
            p = cudaev._promise()
            t = asyncio.ensure_future(p.wait())
            await asyncio.sleep(0)
            t.cancel()
            await asyncio.gather(t, return_exceptions=True)

    await batch(1000)  # warm-up: caches, free lists, the cudaev loop's eventfd
    gc.collect()
    fds = open_fds()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    await batch(n)
    await asyncio.sleep(0.01)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert live_ops() == base
    assert cudaev._attach.attached().native.pending() == 0
    assert open_fds() == fds
    assert grown < 64 * 1024, f"{grown} bytes kept over {n} awaits"


async def test_timer_that_fires_early_is_armed_again():
    # uvloop's timers count milliseconds and may fire before a sub-millisecond
    # deadline; the library then tells no new deadline. Each wait must still end.
    for i in range(200):
        await asyncio.wait_for(cudaev._timer(0.0003 + (i % 7) * 0.00037), 2)


async def test_stats_count_what_the_loop_did():
    before = cudaev.stats()
    assert set(before) >= {"passes", "wakeups", "completions", "timers_fired",
                           "gpu_completions", "gpu_wakeups_armed", "spin_ns",
                           "gpu_latency_log2_ns"}
    assert len(before["gpu_latency_log2_ns"]) == 32
    for _ in range(5):
        p = cudaev._promise()
        p.set(0)
        await p.wait()
    await cudaev._timer(0.002)
    after = cudaev.stats()
    assert after["completions"] - before["completions"] >= 6
    assert after["timers_fired"] - before["timers_fired"] == 1
    assert after["passes"] > before["passes"]
    assert after["gpu_completions"] == before["gpu_completions"]  # no GPU work here


async def test_set_spin_checks_its_argument():
    cudaev.set_spin(0)
    cudaev.set_spin(50)
    for bad in (-1, 1.5, True, "50"):
        with pytest.raises(ValueError):
            cudaev.set_spin(bad)


async def test_set_markers_takes_its_two_kinds_only():
    cudaev.set_markers("auto")
    cudaev.set_markers("events")
    for bad in ("words", "", None, 1, "EVENTS", ["events"]):
        with pytest.raises(ValueError):
            cudaev.set_markers(bad)
