"""cudaev on a GPU, beside PyTorch's own NVIDIA runtime: wait on each kind of
object the machine has, host_func, a sticky fault, and the GIL deadlock that
a driver-thread Python callback runs into and cudaev does not.

Runs under pytest, or alone (`python3 test_gpu.py`: a small runner prints
"ok/not ok/skip" lines and "gpu-python: N passed, N failed, N skipped").
Each object kind is skipped when its library is not installed.
"""
import asyncio
import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading

try:
    import pytest

    skip = pytest.skip
    Skipped = pytest.skip.Exception
except ImportError:
    pytest = None

    class Skipped(Exception):
        pass

    def skip(why):
        raise Skipped(why)

import cudaev

if not os.path.exists("/dev/nvidia0"):
    if pytest and __name__ != "__main__":
        pytest.skip("no NVIDIA GPU here (no /dev/nvidia0)", allow_module_level=True)
    print("SKIP: no NVIDIA GPU here (no /dev/nvidia0)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(os.path.realpath(cudaev.__file__))
LOOPS = ["asyncio"]
try:
    import uvloop

    LOOPS.append("uvloop")
except ImportError:
    uvloop = None


def need(mod):
    try:
        return __import__(mod, fromlist=["_"])
    except Exception as e:
        skip(f"{mod} not importable: {e}")


def run(coro_fn):
    """Runs coro_fn() on every loop kind the machine has."""
    for kind in LOOPS:
        loop = uvloop.new_event_loop() if kind == "uvloop" else asyncio.new_event_loop()
        try:
            loop.run_until_complete(coro_fn())
        finally:
            cudaev.detach(loop)
            loop.close()


def torch_sleep(torch, ms, stream=None):
    """Keeps `stream` busy for about `ms` ms (torch.cuda._sleep, calibrated)."""
    global _cyc
    if "_cyc" not in globals():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(10_000_000)
        e.record()
        e.synchronize()
        _cyc = 10_000_000 / s.elapsed_time(e)
    if stream is None:
        torch.cuda._sleep(int(_cyc * ms))
    else:
        with torch.cuda.stream(stream):
            torch.cuda._sleep(int(_cyc * ms))


async def check_waits(x, is_done, busy):
    """busy() enqueues ~50 ms of work that x then names; the await must end
    after it (is_done() True), and not before (is_done() False at first)."""
    busy()
    w = cudaev.wait(x)
    assert not is_done(), "the work finished before it was awaited: make busy() longer"
    await w
    assert is_done()


def mapped(needle):
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if needle in p and p not in out:
                out.append(p)
    return out


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def file_of(addr):
    info = DlInfo()
    if not ctypes.CDLL(None).dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.fname:
        return "?"
    return os.path.realpath(info.fname.decode())


# ---- the runtime is NVIDIA's, the futures are ours ---------------------------

def test_pytorch_keeps_nvidias_runtime():
    torch = need("torch")
    torch.ones(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    rt = mapped("libcudart")
    print(f"# libcudart mapped: {rt}")
    assert rt, "PyTorch mapped no libcudart"
    assert all(PKG not in p for p in rt), rt
    assert all(("site-packages" in p or "dist-packages" in p) for p in rt), rt
    assert "LD_PRELOAD" not in os.environ
    ours = os.path.join(PKG, "libcudaev.so.1")
    lib = ctypes.CDLL(ours)  # already loaded by cudaev._native: the same handle
    for sym in ("cudaev_future_new_event", "cudaev_loop_new_foreign"):
        try:
            addr = ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
        except AttributeError:
            continue
        assert file_of(addr) == os.path.realpath(ours), (sym, file_of(addr))
    assert os.path.realpath(ours) in mapped("libcudaev")


# ---- each kind of object -----------------------------------------------------

def test_wait_torch():
    torch = need("torch")

    async def go():
        s = torch.cuda.Stream()
        await check_waits(s, s.query, lambda: torch_sleep(torch, 50, s))
        cur = torch.cuda.current_stream()
        await check_waits(cur, cur.query, lambda: torch_sleep(torch, 50))
        ext = torch.cuda.ExternalStream(s.cuda_stream)
        await check_waits(ext, ext.query, lambda: torch_sleep(torch, 50, s))
        ev = torch.cuda.Event()
        await check_waits(ev, ev.query, lambda: (torch_sleep(torch, 50, s), ev.record(s)))
        await check_waits(s.cuda_stream, s.query, lambda: torch_sleep(torch, 50, s))
        await check_waits(cudaev.Event(ev.cuda_event), ev.query,
                          lambda: (torch_sleep(torch, 50, s), ev.record(s)))

    run(go)


def test_wait_on_done_event_completes_in_the_call():
    """An event whose work has finished gives an awaitable that is done when
    wait() returns: nothing goes to the GPU or through the loop. The same
    event recorded again behind pending work is not mistaken for done.
    (torch creates its event at the first record: before, it is complete,
    as its query() says, with no handle to wait on.)"""
    torch = need("torch")

    async def go():
        s = torch.cuda.Stream()
        ev = torch.cuda.Event()
        assert ev.query()
        await cudaev.wait(ev)  # nothing recorded yet: done
        torch_sleep(torch, 20, s)
        ev.record(s)
        ev.synchronize()
        st0 = cudaev.stats()
        w = cudaev.wait(ev)
        st1 = cudaev.stats()
        assert st1["passes"] == st0["passes"] and st1["gpu_completions"] == st0["gpu_completions"]
        await w
        torch_sleep(torch, 50, s)
        ev.record(s)
        await check_waits(ev, ev.query, lambda: None)

    run(go)


def test_markers_are_events_by_default_and_words_when_auto():
    """The package's loops mark awaited work with events (no word, whose
    system-wide fence would delay other streams' and processes' work);
    set_markers("auto") gives a lone wait a word again. Counted by the
    loop's own stats, for a stream wait and an event wait alike."""
    torch = need("torch")

    async def go():
        s = torch.cuda.Stream()
        ev = torch.cuda.Event()
        for kind, word in (("events", 0), ("auto", 1), ("events", 0)):
            cudaev.set_markers(kind)
            for x in (s, ev):
                torch_sleep(torch, 2, s)
                ev.record(s)
                st0 = cudaev.stats()
                await cudaev.wait(x)
                st1 = cudaev.stats()
                words = st1["gpu_word_markers"] - st0["gpu_word_markers"]
                events = st1["gpu_event_markers"] - st0["gpu_event_markers"]
                assert (words, events) == (word, 1 - word), (kind, type(x).__name__, words, events)

    run(go)


def test_wait_cupy():
    cp = need("cupy")
    torch = need("torch")

    async def go():
        s = cp.cuda.Stream(non_blocking=True)
        ts = torch.cuda.ExternalStream(s.ptr)
        await check_waits(s, lambda: s.done, lambda: torch_sleep(torch, 50, ts))
        ev = cp.cuda.Event()
        await check_waits(ev, lambda: ev.done, lambda: (torch_sleep(torch, 50, ts), ev.record(s)))

    run(go)


def test_wait_cuda_core():
    core = None
    for name in ("cuda.core", "cuda.core.experimental"):
        try:
            core = __import__(name, fromlist=["Device"])
            if hasattr(core, "Device"):
                break
        except Exception:
            core = None
    if core is None:
        skip("cuda.core not importable")
    torch = need("torch")
    dev = core.Device()
    dev.set_current()

    async def go():
        s = dev.create_stream()
        h = int(s.handle)
        ts = torch.cuda.ExternalStream(h)
        await check_waits(s, ts.query, lambda: torch_sleep(torch, 50, ts))

    run(go)


def test_wait_cuda_bindings():
    torch = need("torch")
    try:
        from cuda.bindings import driver, runtime
    except Exception as e:
        skip(f"cuda.bindings not importable: {e}")

    async def go():
        torch.cuda.current_stream()  # the primary context is current
        err, s = driver.cuStreamCreate(0)
        assert err == driver.CUresult.CUDA_SUCCESS
        err, ev = driver.cuEventCreate(0)
        ts = torch.cuda.ExternalStream(int(s))
        await check_waits(s, ts.query, lambda: torch_sleep(torch, 50, ts))
        await check_waits(ev, lambda: driver.cuEventQuery(ev)[0] == driver.CUresult.CUDA_SUCCESS,
                          lambda: (torch_sleep(torch, 50, ts), driver.cuEventRecord(ev, s)))
        err, rs = runtime.cudaStreamCreate()
        err, rev = runtime.cudaEventCreate()
        trs = torch.cuda.ExternalStream(int(rs))
        await check_waits(rs, trs.query, lambda: torch_sleep(torch, 50, trs))
        await check_waits(rev, lambda: runtime.cudaEventQuery(rev)[0] == 0,
                          lambda: (torch_sleep(torch, 50, trs), runtime.cudaEventRecord(rev, rs)))
        driver.cuStreamDestroy(s)
        driver.cuEventDestroy(ev)
        runtime.cudaStreamDestroy(rs)
        runtime.cudaEventDestroy(rev)

    run(go)


def test_wait_numba():
    torch = need("torch")
    try:
        from numba import cuda as ncuda
    except Exception as e:
        skip(f"numba not importable: {e}")

    async def go():
        s = ncuda.stream()
        ts = torch.cuda.ExternalStream(int(getattr(s.handle, "value", s.handle) or 0))
        await check_waits(s, ts.query, lambda: torch_sleep(torch, 50, ts))
        ev = ncuda.event()
        await check_waits(ev, ev.query, lambda: (torch_sleep(torch, 50, ts), ev.record(s)))

    run(go)


# ---- host_func -----------------------------------------------------------------

def test_host_func_runs_on_the_loop_thread_and_may_enqueue():
    torch = need("torch")

    async def go():
        s = torch.cuda.Stream()
        x = torch.zeros(1, device="cuda")
        y = torch.zeros(1, device="cuda")
        me = threading.get_ident()
        seen = []

        def fn(k):
            seen.append(threading.get_ident())
            with torch.cuda.stream(s):
                x.add_(k)  # enqueued from inside the callback
            return k * 2

        torch_sleep(torch, 20, s)
        with torch.cuda.stream(s):
            y.fill_(7)
        rs = [cudaev.host_func(s, fn, k) for k in range(1, 11)]
        assert await asyncio.gather(*rs) == [k * 2 for k in range(1, 11)]
        assert seen == [me] * 10
        # fn ran after the stream got there: y was written before; and fn
        # may block (no gate holds the stream): a synchronous read is fine.
        assert await cudaev.host_func(s, lambda: y.item()) == 7.0
        await cudaev.wait(s)
        assert x.item() == sum(range(1, 11))

        def boom():
            raise KeyError("from fn")

        try:
            await cudaev.host_func(s, boom)
            raise AssertionError("host_func swallowed fn's exception")
        except KeyError as e:
            assert "from fn" in str(e)

    run(go)


HOLD = textwrap.dedent(r"""
    import asyncio, sys, threading, torch, cudaev
    warm = sys.argv[1] == "warm"
    s = torch.cuda.Stream()
    x = torch.zeros(1, device="cuda")
    h = torch.zeros(1).pin_memory()
    if warm:  # every kernel fn and the gated work use, loaded before
        x.add_(1); x.copy_(h, non_blocking=True); x.zero_(); torch.cuda.synchronize()
    async def main():
        me = threading.get_ident()
        seen = []
        def fn(k):
            seen.append(threading.get_ident())
            h[0] += k              # the host writes what the work behind the gate reads
            with torch.cuda.stream(s):
                x.add_(k)          # enqueued on the held stream: after the copy below
            return k * 2
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)
        rs = [cudaev.host_func(s, fn, k, hold=True) for k in range(1, 11)]
        with torch.cuda.stream(s):
            x.copy_(h, non_blocking=True)  # behind the gates: reads h after every fn
        assert await asyncio.gather(*rs) == [k * 2 for k in range(1, 11)]
        await cudaev.wait(s)
        assert seen == [me] * 10
    asyncio.run(main())
    print("done", x.item(), flush=True)
""")


def test_host_func_hold_orders_work_behind_fn():
    need("torch")
    p = subprocess.run([sys.executable, "-c", HOLD, "warm"], capture_output=True, text=True,
                       timeout=60)
    # copy_ reads h (55) after all ten fns; their add_s come after it: 55 + 55.
    assert p.returncode == 0 and "done 110.0" in p.stdout, (p.returncode, p.stdout,
                                                           p.stderr[-2000:])
    # Without the warm-up, fn's first add_ loads its kernel lazily (CUDA's
    # default), which may synchronize the context behind the gate: recorded,
    # not asserted (the docstring of host_func tells users to warm up).
    env = dict(os.environ, CUDA_MODULE_LOADING="LAZY")
    try:
        q = subprocess.run([sys.executable, "-c", HOLD, "cold"], capture_output=True, text=True,
                           timeout=20, env=env)
        outcome = f"rc {q.returncode}: {q.stdout.strip()}"
    except subprocess.TimeoutExpired:
        outcome = "hung (killed after 20 s)"
    print(f"# hold=True without a warm-up, lazy loading: {outcome}")


# ---- sticky fault --------------------------------------------------------------

TRAP = textwrap.dedent(r"""
    import asyncio, ctypes, json, sys, time, torch, cudaev
    # A store to address 0 (an illegal address, sticky), then a trap.
    PTX = b'''.version 7.0
    .target sm_75
    .address_size 64
    .visible .entry trapk() {
      .reg .u64 %rd;
      mov.u64 %rd, 0;
      st.global.u32 [%rd], 1;
      trap;
      ret;
    }
    '''
    cu = ctypes.CDLL("libcuda.so.1")
    async def main():
        torch.zeros(1, device="cuda")
        # Loaded before the GPU is busy: a module load may synchronize the
        # context, which would let every
        # wait end before the fault.
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        assert cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(PTX)) == 0
        assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"trapk") == 0
        t = torch.cuda.Stream()
        streams = [torch.cuda.Stream() for _ in range(6)]
        cyc = 4_000_000_000
        waits, t0 = [], time.perf_counter()
        async def timed(x):
            try:
                await cudaev.wait(x)
            finally:
                ends.append(round(time.perf_counter() - t0, 3))
        ends = []
        for s in streams:
            with torch.cuda.stream(s):
                torch.cuda._sleep(cyc)
            waits.append(asyncio.ensure_future(timed(s)))
        ev = torch.cuda.Event(); ev.record(streams[0])
        waits.append(asyncio.ensure_future(timed(ev)))
        await asyncio.sleep(0.05)
        r = cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(t.cuda_stream), None, None)
        t_launch = round(time.perf_counter() - t0, 3)
        res = await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 30)
        try:
            torch.cuda.synchronize()
            after = "synchronize: ok"
        except Exception as e:
            after = f"synchronize: {type(e).__name__}: {str(e)[:80]}"
        print(json.dumps({"launch": r, "t_launch": t_launch, "ends": ends, "after": after, "results": [
            [type(x).__name__, getattr(x, "code", None), getattr(x, "name", None)] for x in res]}))
    (__import__(sys.argv[1]).run if sys.argv[1] == "uvloop" else asyncio.run)(main())
""")


def test_sticky_fault_raises_in_every_pending_wait():
    need("torch")
    for kind in LOOPS:
        p = subprocess.run([sys.executable, "-c", TRAP, kind], capture_output=True, text=True,
                           timeout=120)
        out = [l for l in p.stdout.splitlines() if l.startswith("{")]
        assert out, f"{kind}: no result (rc {p.returncode}): {p.stderr[-2000:]}"
        r = json.loads(out[-1])
        print(f"# {kind}: {r}")
        assert r["launch"] == 0
        kinds = {tuple(x) for x in r["results"]}
        assert len(r["results"]) == 7
        assert len(kinds) == 1, kinds
        (tname, code, name), = kinds
        assert tname == "CudaError" and code not in (0, None), kinds


# ---- the GIL deadlock -----------------------------------------------------------

GIL = textwrap.dedent(r"""
    import asyncio, ctypes, sys, threading, time, torch, cudaev
    mode = sys.argv[1]
    x = torch.zeros(1, device="cuda")
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    stop = False
    # Threads that hold the GIL across CUDA calls: PyDLL keeps the GIL during
    # the call; each synchronizes its own stream, with work of its own.
    cu = ctypes.PyDLL("libcuda.so.1")
    def holder():
        mine = torch.cuda.Stream()
        while not stop:
            with torch.cuda.stream(mine):
                torch.cuda._sleep(100000)
            cu.cuStreamSynchronize(ctypes.c_void_p(mine.cuda_stream))
    ts = [threading.Thread(target=holder, daemon=True) for _ in range(2)]
    for t in ts: t.start()
    def fn():
        with torch.cuda.stream(s):
            x.add_(1)   # enqueue torch work from the callback
    N = 50
    if mode == "cudaev":
        async def main():
            await asyncio.gather(*(cudaev.host_func(s, fn) for _ in range(N)))
            await cudaev.wait(s)
        asyncio.run(main())
    else:
        # A driver-thread Python callback: cuLaunchHostFunc with a ctypes callable.
        CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        cbs = [CB(lambda _: fn()) for _ in range(N)]
        lib = ctypes.CDLL("libcuda.so.1")
        for cb in cbs:
            r = lib.cuLaunchHostFunc(ctypes.c_void_p(s.cuda_stream), cb, None)
            assert r == 0, r
        s.synchronize()
    stop = True
    print("done", x.item(), flush=True)
""")


def test_gil_deadlock_cudaev_completes_driver_thread_callback_does_not():
    need("torch")
    p = subprocess.run([sys.executable, "-c", GIL, "cudaev"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "done 50.0" in p.stdout, (p.returncode, p.stdout, p.stderr[-2000:])
    try:
        q = subprocess.run([sys.executable, "-c", GIL, "driver"], capture_output=True,
                           text=True, timeout=30)
        outcome = f"rc {q.returncode}: {q.stdout.strip()} {q.stderr.strip()[-300:]}"
        clean = q.returncode == 0 and "done 50.0" in q.stdout
    except subprocess.TimeoutExpired:
        outcome, clean = "hung (killed after 30 s)", False
    print(f"# driver-thread callback: {outcome}")
    assert not clean, "the driver-thread variant completed cleanly: the deadlock claim is wrong"


if __name__ == "__main__":
    passed = failed = skipped = 0
    for name, fn in list(globals().items()):
        if not name.startswith("test_"):
            continue
        try:
            fn()
            print(f"ok - {name}", flush=True)
            passed += 1
        except Skipped as e:
            print(f"skip - {name}: {e}", flush=True)
            skipped += 1
        except BaseException as e:
            print(f"not ok - {name}: {type(e).__name__}: {e}", flush=True)
            failed += 1
    print(f"gpu-python: {passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)
