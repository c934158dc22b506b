"""A DistributedDataParallel training step over NCCL, one process a GPU,
started by torchrun (ddp.sh runs it on NVIDIA's libcudart.so.13 and with
ours preloaded); every result is hashed into a transcript per rank, and
the two runs' transcripts must be identical, bit for bit.

Covers: the NCCL process group (its own static runtime and ours sharing
each GPU's primary context), DDP's bucketed gradient all-reduce overlapped
with backward on PyTorch's streams, broadcast, all_gather, all_reduce of
several dtypes, a barrier, and peer copies between the ranks' GPUs in one
process (rank 0) when the GPUs can reach each other.

Each rank writes DDP_OUT/rank<R>.txt and names on stderr (first line) the
libcudart.so.13 its process resolves cudaMalloc to.
"""
import hashlib
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dropin import mapped_cudart  # noqa: E402


def h(t):
    t = t.detach().contiguous().cpu().reshape(-1)
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dist.init_process_group("nccl", device_id=dev)
    print(f"[cudart] rank {rank}: {mapped_cudart()}", file=sys.stderr, flush=True)
    lines = []

    def out(name, value):
        lines.append(f"{name}: {value}")

    out("world", world)
    out("device", torch.cuda.get_device_name(dev))

    # Collectives on their own.
    t = torch.arange(1 << 20, dtype=torch.float32, device=dev) * (rank + 1)
    dist.all_reduce(t)
    out("all_reduce f32", h(t))
    ti = torch.full((4099,), rank + 7, dtype=torch.int64, device=dev)
    dist.all_reduce(ti, op=dist.ReduceOp.MAX)
    out("all_reduce i64 max", h(ti))
    tb = torch.randn(12345, generator=torch.Generator().manual_seed(rank)).to(dev, torch.bfloat16)
    dist.all_reduce(tb)
    out("all_reduce bf16", h(tb))
    b = torch.randn(777, generator=torch.Generator().manual_seed(99)).to(dev) if rank == 0 \
        else torch.zeros(777, device=dev)
    dist.broadcast(b, src=0)
    out("broadcast", h(b))
    parts = [torch.empty(1000, device=dev) for _ in range(world)]
    dist.all_gather(parts, torch.full((1000,), float(rank), device=dev))
    out("all_gather", h(torch.cat(parts)))
    dist.barrier()

    # A DDP training step: the same model on every rank, different data.
    torch.manual_seed(1234)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
    model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[local],
                                                      bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1000 + rank)
    for step in range(5):
        x = torch.randn(64, 3, 32, 32, generator=g).to(dev)
        y = torch.randint(0, 10, (64,), generator=g).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        out(f"step {step} loss", h(loss))
        out(f"step {step} grad[0]", h(net[0].weight.grad))
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    out("params after training", h(flat))
    same = flat.clone()
    dist.broadcast(same, src=0)
    out("params equal to rank 0's", bool(torch.equal(same, flat)))

    # Peer copies in one process, between this rank's GPU and the next.
    if rank == 0 and torch.cuda.device_count() > 1:
        other = torch.device("cuda", (local + 1) % torch.cuda.device_count())
        out("can access peer", torch.cuda.can_device_access_peer(dev, other))
        src = torch.randn(1 << 22, generator=torch.Generator().manual_seed(5)).to(dev)
        there = src.to(other)
        back = there.to(dev)
        out("peer copy round trip", h(back))
        out("peer copy equal", bool(torch.equal(src, back)))

    torch.cuda.synchronize()
    print(f"[cudart] rank {rank}: {mapped_cudart()}", file=sys.stderr, flush=True)
    dist.destroy_process_group()
    with open(os.path.join(os.environ["DDP_OUT"], f"rank{rank}.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
