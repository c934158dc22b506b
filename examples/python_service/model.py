"""The C service's MLP (examples/inference_server/model.[ch]) in Python: the
same dims, the same deterministic weights (splitmix64 from the seed, Glorot
uniform W, small uniform b, every value bit for bit the C generator's), the
same weights file ("CEVMLP01", CRC-32), and forward passes on three devices:

numpy      the reference: accumulates in float64, rounds each layer's output
           to float32 as model_forward does (the CPU path in CI)
torch-cpu  the same arithmetic in torch (float64), when torch imports
cuda       float32 throughout on the GPU, TF32 off (the C service's
           CUBLAS_PEDANTIC_MATH): within 1e-5 relative of the reference

Layout: layer l maps dims[l] to dims[l+1], y = x W_l + b_l, W_l row-major
[dims[l]][dims[l+1]]; ReLU on every layer but the last.

Thread: a Model is read-only once made; any thread may run forward().
"""
import os
import struct
import zlib

import numpy as np

MAX_LAYERS = 3
MAX_DIM = 8192
MAGIC = b"CEVMLP01"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def parse_dims(text):
    """"64,256,256,16" -> [64, 256, 256, 16]; ValueError with the C service's reason."""
    parts = text.split(",")
    try:
        dims = [int(p, 10) for p in parts]
    except ValueError:
        dims = None
    if dims is None or any(not 1 <= d <= MAX_DIM for d in dims) or any(
            not p.strip().isdigit() for p in parts):
        raise ValueError(f"--layers: '{text}': want 3 or 4 sizes 1..{MAX_DIM} separated by commas")
    if len(dims) > MAX_LAYERS + 1:
        raise ValueError(f"--layers: '{text}': at most {MAX_LAYERS} layers "
                         f"({MAX_LAYERS + 1} sizes)")
    if len(dims) < 3:
        raise ValueError(f"--layers: '{text}': want 2 or 3 layers (3 or 4 sizes)")
    return dims


def _splitmix64(seed, count):
    """The first ``count`` outputs of splitmix64 from state ``seed``: the state
    only ever adds the golden gamma, so output i is a function of seed + (i+1)
    gamma and the whole stream is one vectorised expression."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _uniform(bits):
    """model.c's uniform(): the top 24 bits, in [-1, 1), exact in float32."""
    return ((bits >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0).astype(np.float32)


class Model:
    def __init__(self, dims, w, b, seed=0):
        self.dims, self.w, self.b, self.seed = list(dims), w, b, seed
        self.w64 = [x.astype(np.float64) for x in w]
        self.b64 = [x.astype(np.float64) for x in b]

    @property
    def inputs(self):
        return self.dims[0]

    @property
    def outputs(self):
        return self.dims[-1]

    @classmethod
    def generate(cls, dims, seed):
        sizes = [(dims[l] * dims[l + 1], dims[l + 1]) for l in range(len(dims) - 1)]
        u = _uniform(_splitmix64(seed, sum(a + c for a, c in sizes)))
        w, b, at = [], [], 0
        for l, (nw, nb) in enumerate(sizes):
            k, n = dims[l], dims[l + 1]
            scale = np.float32(np.sqrt(6.0 / float(k + n)))
            w.append((u[at:at + nw] * scale).reshape(k, n))  # float32 * float32, as in C
            at += nw
            b.append(u[at:at + nb] * np.float32(0.1))
            at += nb
        return cls(dims, w, b, seed)

    @classmethod
    def load(cls, path, dims=None):
        """Reads a weights file; ValueError with the C service's reasons."""
        data = open(path, "rb").read()
        if len(data) < 12:
            raise ValueError(f"{path}: truncated")
        if data[:8] != MAGIC:
            raise ValueError(f"{path}: not a weights file (magic)")
        (nl,) = struct.unpack_from("<I", data, 8)
        if not 2 <= nl <= MAX_LAYERS:
            raise ValueError(f"{path}: bad layer count")
        at = 12 + 4 * (nl + 1) + 8
        if len(data) < at:
            raise ValueError(f"{path}: truncated")
        got = list(struct.unpack_from(f"<{nl + 1}I", data, 12))
        (seed,) = struct.unpack_from("<Q", data, at - 8)
        if any(not 1 <= d <= MAX_DIM for d in got):
            raise ValueError(f"{path}: bad size")
        if dims is not None and list(dims) != got:
            raise ValueError(f"{path}: its layers differ from --layers")
        w, b = [], []
        for l in range(nl):
            k, n = got[l], got[l + 1]
            if len(data) < at + 4 * (k * n + n):
                raise ValueError(f"{path}: truncated")
            w.append(np.frombuffer(data, "<f4", k * n, at).reshape(k, n).copy())
            at += 4 * k * n
            b.append(np.frombuffer(data, "<f4", n, at).copy())
            at += 4 * n
        if len(data) < at + 4:
            raise ValueError(f"{path}: truncated")
        if struct.unpack_from("<I", data, at)[0] != zlib.crc32(data[:at]):
            raise ValueError(f"{path}: CRC mismatch")
        if len(data) != at + 4:
            raise ValueError(f"{path}: trailing bytes")
        return cls(got, w, b, seed)

    def save(self, path):
        parts = [MAGIC, struct.pack("<I", len(self.dims) - 1),
                 struct.pack(f"<{len(self.dims)}I", *self.dims), struct.pack("<Q", self.seed)]
        for w, b in zip(self.w, self.b):
            parts += [w.astype("<f4").tobytes(), b.astype("<f4").tobytes()]
        blob = b"".join(parts)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(blob + struct.pack("<I", zlib.crc32(blob)))
        os.replace(tmp, path)

    def forward(self, x):
        """The reference: float32 rows [n, inputs] in, float32 [n, outputs] out."""
        h = np.asarray(x, dtype=np.float32).astype(np.float64)
        last = len(self.w64) - 1
        for l, (w, b) in enumerate(zip(self.w64, self.b64)):
            h = h @ w + b
            if l < last:
                np.maximum(h, 0.0, out=h)
            h = h.astype(np.float32).astype(np.float64)
        return h.astype(np.float32)


def load_or_generate(cfg, log=print):
    """The model ``cfg`` asks for, as the C service makes it: --weights FILE
    is read, or generated from --seed and written there when missing."""
    dims = parse_dims(cfg.layers)
    if cfg.weights and os.path.exists(cfg.weights):
        m = Model.load(cfg.weights, dims)
        log(f"weights read from {cfg.weights}")
        return m
    m = Model.generate(dims, cfg.seed)
    if cfg.weights:
        m.save(cfg.weights)
        log(f"weights generated (seed {cfg.seed}) and written to {cfg.weights}")
    return m


class TorchModel:
    """The model on a torch device: float64 on the CPU (the reference's
    arithmetic), float32 on CUDA with TF32 off."""

    def __init__(self, model, torch, device):
        self.torch, self.device = torch, device
        cuda = device.type == "cuda"
        dt = torch.float32 if cuda else torch.float64
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.dtype = dt
        self.w = [torch.from_numpy(w).to(device=device, dtype=dt) for w in model.w]
        self.b = [torch.from_numpy(b).to(device=device, dtype=dt) for b in model.b]

    def forward(self, x):
        """x: a [n, inputs] float32 tensor on the device; returns [n, outputs]
        float32 (on the CPU each layer is rounded to float32 as the reference
        does)."""
        t = self.torch
        h = x.to(self.dtype)
        last = len(self.w) - 1
        for l, (w, b) in enumerate(zip(self.w, self.b)):
            h = t.addmm(b, h, w)
            if l < last:
                h = t.relu(h)
            if self.dtype != t.float32:
                h = h.to(t.float32).to(self.dtype)
        return h.to(t.float32)
