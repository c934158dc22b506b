"""PyTorch on cudaev: a workload whose every result is hashed, run once on
NVIDIA's libcudart.so.13 and once with ours preloaded (run.sh); the two
transcripts must be identical, bit for bit.

Covers: tensors on the GPU, matmul (cuBLAS), a conv net training step with
autograd and an optimizer, streams and events, pinned-memory copies,
torch.cuda.graphs capture and replay, memory statistics.

The first line of stderr names the libcudart.so.13 this process mapped
(/proc/self/maps), so the runner can prove which runtime ran.
"""
import hashlib
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402


def mapped_cudart():
    """Every libcudart mapped, and the one the process's global symbol scope
    resolves cudaMalloc to (what PyTorch's own references bind to). PyTorch
    also dlopen()s its wheel's copy of NVIDIA's library by path; with ours
    preloaded that copy is mapped but first-in-scope is ours."""
    import ctypes
    paths = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "libcudart.so" in line and line.split()[-1] not in paths:
                paths.append(line.split()[-1])

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
    provider = "none"
    try:
        libc = ctypes.CDLL(None)
        addr = ctypes.cast(libc.cudaMalloc, ctypes.c_void_p).value
        info = DlInfo()
        if libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)):
            provider = os.path.realpath(info.fname.decode())
    except AttributeError:
        pass
    return f"mapped={','.join(paths) or 'none'} cudaMalloc-from={provider}"


def h(t):
    t = t.detach().contiguous().cpu().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def out(name, value):
    print(f"{name}: {value}", flush=True)


def main():
    torch.manual_seed(1234)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"[cudart] {mapped_cudart()}", file=sys.stderr, flush=True)
    out("cuda available", torch.cuda.is_available())
    out("device count", torch.cuda.device_count())
    out("device name", torch.cuda.get_device_name(0))
    out("capability", torch.cuda.get_device_capability(0))
    print(f"[cudart] {mapped_cudart()}", file=sys.stderr, flush=True)

    # Tensors and elementwise kernels.
    a = torch.randn(1024, 1024, device=dev)
    b = torch.randn(1024, 1024, device=dev)
    out("add", h(a + b))
    out("sin*exp", h(torch.sin(a) * torch.exp(b.clamp(max=3))))
    out("sum", h(a.sum(dim=1)))
    out("sort", h(torch.sort(a[:8], dim=1).values))

    # cuBLAS.
    out("matmul fp32", h(a @ b))
    out("matmul fp16", h(a.half() @ b.half()))
    out("matmul bf16", h(a.bfloat16() @ b.bfloat16()))
    out("bmm", h(torch.bmm(a.view(16, 64, 1024)[:, :, :64], b.view(16, 1024, 64)[:, :64, :])))

    # A conv net training step: autograd and an optimizer.
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (32,), device=dev)
    for step in range(3):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        out(f"train step {step} loss", h(loss))
    out("conv weight after training", h(net[0].weight))
    out("linear grad", h(net[8].weight.grad))

    # Streams and events.
    s = torch.cuda.Stream()
    e1, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s):
        e1.record()
        c = a @ a
        e2.record()
    torch.cuda.current_stream().wait_stream(s)
    e2.synchronize()
    out("stream matmul", h(c))
    out("event elapsed >= 0", e1.elapsed_time(e2) >= 0)
    out("event query", e2.query())
    out("stream query", s.query())

    # Pinned memory copies, both ways, async.
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    out("pinned", host.is_pinned())
    d = host.to(dev, non_blocking=True)
    back = torch.empty_like(host).pin_memory()
    back.copy_(d * 2, non_blocking=True)
    torch.cuda.synchronize()
    out("pinned roundtrip", h(back))
    pageable = torch.randn(4096)
    out("pageable roundtrip", h(pageable.to(dev).cpu()))

    # CUDA graphs: capture and replay.
    static_in = torch.randn(256, 256, device=dev)
    w = torch.randn(256, 256, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            static_out = torch.relu(static_in @ w)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = torch.relu(static_in @ w) + 1
    for i in range(3):
        static_in.copy_(torch.full((256, 256), float(i), device=dev) + a[:256, :256])
        g.replay()
        torch.cuda.synchronize()
        out(f"graph replay {i}", h(static_out))

    # Memory statistics (exact byte counts depend only on the allocator).
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    out("allocated bytes (current)", stats["allocated_bytes.all.current"])
    out("allocation count", stats["allocation.all.allocated"])
    free, total = torch.cuda.mem_get_info()
    out("mem_get_info total", total)
    torch.cuda.empty_cache()
    out("reserved after empty_cache", torch.cuda.memory_reserved())
    print(f"[cudart] {mapped_cudart()}", file=sys.stderr, flush=True)
    out("done", True)


if __name__ == "__main__":
    main()
