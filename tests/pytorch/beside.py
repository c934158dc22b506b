"""PyTorch, unchanged and unpreloaded, awaits its own streams and events
through the standalone libcudaev.so.1 (loaded here with ctypes): PyTorch's
own NVIDIA libcudart.so.13 serves every cuda* call, ours only the cudaev_*
calls. The process proves both from itself (/proc/self/maps, dladdr).

usage: python3 beside.py PATH/TO/libcudaev.so.1
Prints "ok - ..." / "not ok - ..." lines and "beside-pytorch: N passed, N failed".
"""
import ctypes
import os
import sys
import threading

import torch

results = []


def check(ok, what, detail=""):
    results.append(bool(ok))
    print(f"{'ok' if ok else 'not ok'} - {what}{': ' + str(detail) if detail else ''}", flush=True)


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def file_of(addr):
    libc = ctypes.CDLL(None)
    info = DlInfo()
    if not libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.fname:
        return "?"
    return os.path.realpath(info.fname.decode())


def mapped(needle):
    paths = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if needle in p and p not in paths:
                paths.append(p)
    return paths


def main():
    ours = os.path.realpath(sys.argv[1])
    x = torch.ones(1 << 20, device="cuda")  # PyTorch loads and initialises its runtime
    torch.cuda.synchronize()
    ev = ctypes.CDLL(ours)
    ev.cudaev_error_name.restype = ctypes.c_char_p
    global_scope = ctypes.CDLL(None)
    cuda_malloc = file_of(ctypes.cast(global_scope.cudaMalloc, ctypes.c_void_p).value) \
        if hasattr(global_scope, "cudaMalloc") else "not in the global scope"
    print(f"# libcudart mapped: {mapped('libcudart')}", flush=True)
    print(f"# libcudaev mapped: {mapped('libcudaev')}", flush=True)
    rt_files = mapped("libcudart")
    check(rt_files and all(not p.startswith(os.path.dirname(ours)) for p in rt_files),
          "only PyTorch's own libcudart is mapped (nothing preloaded)", rt_files)
    check(cuda_malloc in rt_files, "cudaMalloc resolves to PyTorch's libcudart", cuda_malloc)
    loop_new = file_of(ctypes.cast(ev.cudaev_loop_new_thread, ctypes.c_void_p).value)
    check(loop_new == ours, "cudaev_loop_new_thread is libcudaev's", loop_new)
    check("LD_PRELOAD" not in os.environ, "no LD_PRELOAD")

    loop = ctypes.c_void_p()
    e = ev.cudaev_loop_new_thread(ctypes.byref(loop))
    check(e == 0, "a thread loop", e)

    def name(code):
        return ev.cudaev_error_name(code).decode()

    def await_stream(handle, what):
        f = ctypes.c_void_p()
        r = ev.cudaev_future_new_stream(loop, ctypes.c_void_p(handle), ctypes.byref(f))
        if r != 0:
            check(False, what, "cudaev_future_new_stream " + name(r))
            return
        early = ev.cudaev_future_ready(f)
        w = ev.cudaev_future_wait(f, ctypes.c_int64(10 * 10**9))
        check(w == 0, what, f"ready at once {early}, wait {name(w)}")
        ev.cudaev_future_release(f)

    # PyTorch's current stream, with a long matmul chain on it.
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(8):
        a = a @ a
        a = a / a.abs().max()
    await_stream(torch.cuda.current_stream().cuda_stream, "PyTorch's current (default) stream")
    check(torch.cuda.current_stream().query(), "the stream is done when the future is")

    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        b = x * 2
    await_stream(s.cuda_stream, "a torch.cuda.Stream")
    check(bool((b == 2).all()), "its result")

    e0 = torch.cuda.Event()
    with torch.cuda.stream(s):
        c = a @ a
        e0.record(s)
    f = ctypes.c_void_p()
    r = ev.cudaev_future_new_event(loop, ctypes.c_void_p(e0.cuda_event), ctypes.byref(f))
    w = ev.cudaev_future_wait(f, ctypes.c_int64(10 * 10**9)) if r == 0 else r
    check(w == 0 and e0.query(), "a torch.cuda.Event", name(w))
    if r == 0:
        ev.cudaev_future_release(f)

    # A future awaited on another thread while this one keeps PyTorch busy.
    box = {}

    def waiter(handle):
        g = ctypes.c_void_p()
        ev.cudaev_future_new_stream(loop, ctypes.c_void_p(handle), ctypes.byref(g))
        box["w"] = ev.cudaev_future_wait(g, ctypes.c_int64(10 * 10**9))
        ev.cudaev_future_release(g)

    s2 = torch.cuda.Stream()
    with torch.cuda.stream(s2):
        d = a @ a
    t = threading.Thread(target=waiter, args=(s2.cuda_stream,))
    t.start()
    _ = (x + 1).sum().item()
    t.join()
    check(box.get("w") == 0, "a future awaited on another Python thread", box.get("w"))
    del c, d
    ev.cudaev_loop_destroy(loop)
    n_ok = sum(results)
    print(f"beside-pytorch: {n_ok} passed, {len(results) - n_ok} failed", flush=True)
    return 0 if n_ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
