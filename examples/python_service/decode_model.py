"""The decode loop's model: a tiny decoder-only transformer, its weights, and
the numpy implementation (the CPU path, and the CPU reference).

Dimensions (``Dims``, ``SIZES``): "small", the default, has 4 layers,
d_model 256, 4 heads of 64, vocabulary 512, 512 positions and a 1024-wide
MLP: its GPU step (tens to hundreds of microseconds) is shorter than an
engine's Python per step, the worst case for a wait. "large" (16 layers,
d_model 2048, 16 heads, vocabulary 8192, an 8192-wide MLP: 0.84 G
parameters, 3.4 GB in float32) has a GPU step of a millisecond or more, the
order of a real model's decode step, where the Python is the smaller part. Pre-LayerNorm blocks without learned norm
parameters, learned position embeddings, an untied output projection; the
next token is the greedy argmax of the logits, so an answer depends only on
the prompt and can be checked against a one-request-at-a-time reference.

The weights come from a fixed seed (numpy's PCG64), or from a ``.npz`` file
that ``save_weights`` wrote; the torch path (``decode_torch.py``) uses the
same arrays, so both paths compute the same tokens up to float rounding.

The KV cache is preallocated per sequence slot:
``[max_batch, layers, max_len, heads, head_dim]`` for keys and for values
(positions before heads, so that one position's heads are one contiguous
row to write). A step writes each row's key and value at its own position
and attends over positions ``0..pos`` of its own slot; entries past ``pos``
(left by a slot's previous sequence) are masked, so a slot is reused without
clearing.

Thread: a ``NumpyModel`` is used by one thread at a time (the engine's
worker thread, or the caller of ``reference_*``).
"""
import dataclasses
import os

import numpy as np


@dataclasses.dataclass(frozen=True)
class Dims:
    layers: int = 4
    d_model: int = 256
    heads: int = 4
    vocab: int = 512
    max_len: int = 512
    d_ff: int = 1024

    @property
    def head_dim(self):
        return self.d_model // self.heads


SIZES = {
    "small": Dims(),
    "large": Dims(layers=16, d_model=2048, heads=16, vocab=8192, max_len=512, d_ff=8192),
}

WEIGHT_NAMES = ("emb", "pos", "wqkv", "wo", "w1", "w2", "wout")


def make_weights(dims=Dims(), seed=1):
    """The weights for ``seed``: a dict of float32 arrays named WEIGHT_NAMES.
    Scales keep activations near unit variance and spread the logits
    (standard deviation about 2), so the argmax is rarely a near tie."""
    rng = np.random.Generator(np.random.PCG64(seed))
    d, L, f, V, T = dims.d_model, dims.layers, dims.d_ff, dims.vocab, dims.max_len

    def normal(shape, std):  # drawn in float32: the large model's 3.4 GB in seconds
        x = rng.standard_normal(shape, dtype=np.float32)
        x *= np.float32(std)
        return x

    return {
        "emb": normal((V, d), 1.0),
        "pos": normal((T, d), 0.5),
        "wqkv": normal((L, d, 3 * d), d**-0.5),
        "wo": normal((L, d, d), 0.5 * d**-0.5),
        "w1": normal((L, d, f), d**-0.5),
        "w2": normal((L, f, d), 0.5 * f**-0.5),
        "wout": normal((d, V), 2.0 * d**-0.5),
    }


def save_weights(path, weights):
    """Writes ``weights`` to ``path`` (an ``.npz``), atomically: a reader
    never sees a half-written file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        np.savez(f, **weights)
    os.replace(tmp, path)


def load_weights(path, dims=Dims()):
    """Reads weights that ``save_weights`` wrote. Raises ``ValueError`` with
    the reason when an array is missing or has the wrong shape or type."""
    want = make_shapes(dims)
    with np.load(path) as z:
        out = {}
        for name in WEIGHT_NAMES:
            if name not in z.files:
                raise ValueError(f"{path}: no array '{name}'")
            a = z[name]
            if a.shape != want[name] or a.dtype != np.float32:
                raise ValueError(f"{path}: '{name}' is {a.dtype}{list(a.shape)}, "
                                 f"want float32{list(want[name])}")
            out[name] = a
    return out


def make_shapes(dims):
    d, L, f, V, T = dims.d_model, dims.layers, dims.d_ff, dims.vocab, dims.max_len
    return {"emb": (V, d), "pos": (T, d), "wqkv": (L, d, 3 * d), "wo": (L, d, d),
            "w1": (L, d, f), "w2": (L, f, d), "wout": (d, V)}


def _layernorm(x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


class NumpyModel:
    """The model on the CPU with a KV cache of ``max_batch`` slots."""

    def __init__(self, weights, dims=Dims(), max_batch=1):
        self.dims, self.w, self.max_batch = dims, weights, max_batch
        shape = (max_batch, dims.layers, dims.max_len, dims.heads, dims.head_dim)
        self.k = np.zeros(shape, np.float32)
        self.v = np.zeros(shape, np.float32)

    def logits(self, tokens, positions, slots):
        """One decode step for a batch: row i feeds ``tokens[i]`` at position
        ``positions[i]`` of slot ``slots[i]`` (writing its key and value
        there) and returns that row's logits for the next token,
        ``[B, vocab]`` float32. The arrays are int64 of length B; slots are
        distinct."""
        dims, w = self.dims, self.w
        B, H, hd = len(tokens), dims.heads, dims.head_dim
        x = w["emb"][tokens] + w["pos"][positions]
        maxp = int(positions.max()) + 1
        masked = (np.arange(maxp)[None, :] > positions[:, None])[:, None, :]  # [B,1,maxp]
        scale = np.float32(hd**-0.5)
        for layer in range(dims.layers):
            qkv = _layernorm(x) @ w["wqkv"][layer]
            q, k, v = (qkv[:, i * dims.d_model:(i + 1) * dims.d_model].reshape(B, H, hd)
                       for i in range(3))
            self.k[slots, layer, positions] = k
            self.v[slots, layer, positions] = v
            keys = self.k[slots, layer, :maxp]  # [B, maxp, H, hd]
            vals = self.v[slots, layer, :maxp]
            s = np.einsum("bhd,bthd->bht", q, keys) * scale
            s = np.where(masked, np.float32(-np.inf), s)
            s = np.exp(s - s.max(-1, keepdims=True))
            p = s / s.sum(-1, keepdims=True)
            att = np.einsum("bht,bthd->bhd", p, vals).reshape(B, dims.d_model)
            x = x + att @ w["wo"][layer]
            x = x + np.maximum(_layernorm(x) @ w["w1"][layer], 0) @ w["w2"][layer]
        return (_layernorm(x) @ w["wout"]).astype(np.float32)

    def step(self, tokens, positions, slots):
        """The greedy next token of each row (int64 [B])."""
        return self.logits(tokens, positions, slots).argmax(-1)


def reference_generate(model, prompt, max_tokens):
    """One request alone, in slot 0 of ``model`` (any object with
    ``logits``/``step`` as NumpyModel's): the tokens greedy decoding gives,
    fed one at a time as the engine feeds them."""
    out, seq = [], list(prompt)
    for pos in range(len(prompt) + max_tokens - 1):
        t = model.step(np.array([seq[pos]]), np.array([pos]), np.array([0]))
        if pos >= len(prompt) - 1:
            out.append(int(t[0]))
            seq.append(out[-1])
    return out


def reference_check(model, prompt, served, tol=1e-3):
    """Checks ``served`` (the tokens a service streamed for ``prompt``)
    against ``model`` alone, teacher-forced on the served tokens: each served
    token's logit must be the row's maximum within ``tol``. That passes a
    token that differs from the reference's argmax only at a near tie (float
    rounding differs between batch sizes and devices), and fails anything
    else. Returns ``(ok, exact, message)``: ``exact`` counts tokens equal to
    the reference's own argmax; ``message`` names the first bad one."""
    seq, exact = list(prompt) + list(served), 0
    for i in range(len(prompt) + len(served) - 1):
        lg = model.logits(np.array([seq[i]]), np.array([i]), np.array([0]))[0]
        if i < len(prompt) - 1:
            continue
        j = i - (len(prompt) - 1)
        tok = served[j]
        best = int(np.argmax(lg))
        exact += tok == best
        if not (0 <= tok < len(lg)) or lg[tok] < lg[best] - tol:
            return False, exact, (f"token {j}: served {tok}, reference {best} "
                                  f"(logits {lg[best]:.6f} vs "
                                  f"{lg[tok] if 0 <= tok < len(lg) else float('nan'):.6f})")
    return True, exact, ""
