"""The MLP of examples/inference_server in Python: reads the weights file the
service writes (model.h has the format) and computes the reference forward
pass, in double, rounding each layer's output to float32 as the GPU stores
it. Uses numpy when it is there (the GPU machine has it), plain Python
otherwise (CI: small models)."""
import struct
import zlib

try:
    import numpy as np
except ImportError:  # plain Python below
    np = None


class Model:
    def __init__(self, path):
        data = open(path, "rb").read()
        if data[:8] != b"CEVMLP01":
            raise ValueError(f"{path}: not a weights file")
        (nl,) = struct.unpack_from("<I", data, 8)
        dims = list(struct.unpack_from(f"<{nl + 1}I", data, 12))
        at = 12 + 4 * (nl + 1)
        (self.seed,) = struct.unpack_from("<Q", data, at)
        at += 8
        self.dims, self.w, self.b = dims, [], []
        for l in range(nl):
            k, n = dims[l], dims[l + 1]
            self.w.append(struct.unpack_from(f"<{k * n}f", data, at))
            at += 4 * k * n
            self.b.append(struct.unpack_from(f"<{n}f", data, at))
            at += 4 * n
        (crc,) = struct.unpack_from("<I", data, at)
        if crc != zlib.crc32(data[:at]) or at + 4 != len(data):
            raise ValueError(f"{path}: CRC or size mismatch")
        if np is not None:
            self.nw = [np.array(w, dtype=np.float64).reshape(dims[l], dims[l + 1])
                       for l, w in enumerate(self.w)]
            self.nb = [np.array(b, dtype=np.float64) for b in self.b]

    @property
    def inputs(self):
        return self.dims[0]

    @property
    def outputs(self):
        return self.dims[-1]

    def forward(self, x):
        """One row in, one row out (lists of floats)."""
        return self.forward_many([x])[0]

    def forward_many(self, rows):
        nl = len(self.dims) - 1
        if np is not None:
            h = np.array(rows, dtype=np.float32).astype(np.float64)
            for l in range(nl):
                h = h @ self.nw[l] + self.nb[l]
                if l < nl - 1:
                    h = np.maximum(h, 0)
                h = h.astype(np.float32).astype(np.float64)
            return h.tolist()
        out = []
        for x in rows:
            h = [f32(v) for v in x]
            for l in range(nl):
                k, n = self.dims[l], self.dims[l + 1]
                w, acc = self.w[l], list(self.b[l])
                for i in range(k):
                    xi, row = h[i], i * n
                    if xi == 0.0:
                        continue
                    for j in range(n):
                        acc[j] += xi * w[row + j]
                h = [f32(v if (l == nl - 1 or v > 0) else 0.0) for v in acc]
            out.append(h)
        return out


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def rel_err(got, ref):
    """max |got - ref| / max |ref| (the servers' own measure, gpu.c)."""
    diff = max(abs(a - b) for a, b in zip(got, ref))
    mag = max(abs(b) for b in ref)
    return 0.0 if diff == 0 else (float("inf") if mag == 0 else diff / mag)
