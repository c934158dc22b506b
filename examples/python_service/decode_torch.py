"""The decode model in PyTorch: the same weights and the same arithmetic as
``decode_model.NumpyModel`` (fp32, TF32 off), with the KV cache on the
device.

A step enqueues everything on the current stream and does not wait: the
inputs go up from a pinned buffer, the next tokens come back into another
(both non-blocking copies), and a ``torch.cuda.Event`` recorded after the
copy back is what the engine awaits. The pinned buffers are reused by the
next step only after the engine has awaited this one's event.

On a CPU device (``--decode-device cpu``, for trying the torch arithmetic
without a GPU) the step runs synchronously and its event is a completed
``waiting.HostEvent``.

Thread: the event loop's thread (see ``decode_backends``).
"""
import numpy as np
import torch

from decode_model import Dims


class TorchModel:
    def __init__(self, weights, dims=Dims(), max_batch=1, device="cuda"):
        self.dims, self.max_batch = dims, max_batch
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.w = {k: torch.from_numpy(v).to(self.device) for k, v in weights.items()}
        shape = (max_batch, dims.layers, dims.max_len, dims.heads, dims.head_dim)
        self.k = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self.v = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self.arange = torch.arange(dims.max_len, device=self.device)

    @staticmethod
    def _layernorm(x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5)

    @torch.inference_mode()
    def forward(self, tok, pos, slot, maxp):
        """Logits ``[B, vocab]`` for device int64 tensors ``tok``, ``pos``,
        ``slot``; ``maxp`` is ``max(pos) + 1`` (known on the host, so no
        device-to-host read is needed to size the attention)."""
        dims, w = self.dims, self.w
        B, H, hd, d = tok.shape[0], dims.heads, dims.head_dim, dims.d_model
        x = w["emb"][tok] + w["pos"][pos]
        masked = (self.arange[:maxp][None, :] > pos[:, None])[:, None, :]
        for layer in range(dims.layers):
            qkv = self._layernorm(x) @ w["wqkv"][layer]
            q, k, v = (qkv[:, i * d:(i + 1) * d].reshape(B, H, hd) for i in range(3))
            self.k[slot, layer, pos] = k
            self.v[slot, layer, pos] = v
            keys = self.k[slot, layer, :maxp]  # [B, maxp, H, hd]
            vals = self.v[slot, layer, :maxp]
            s = torch.einsum("bhd,bthd->bht", q, keys) * hd**-0.5
            s = s.masked_fill(masked, float("-inf"))
            p = torch.softmax(s, dim=-1)
            att = torch.einsum("bht,bthd->bhd", p, vals).reshape(B, d)
            x = x + att @ w["wo"][layer]
            x = x + torch.relu(self._layernorm(x) @ w["w1"][layer]) @ w["w2"][layer]
        return self._layernorm(x) @ w["wout"]

    def logits(self, tokens, positions, slots):
        """NumpyModel.logits on the device, synchronously (the reference)."""
        t = [torch.from_numpy(np.asarray(a, np.int64)).to(self.device)
             for a in (tokens, positions, slots)]
        return self.forward(*t, int(max(positions)) + 1).float().cpu().numpy()

    def step(self, tokens, positions, slots):
        return self.logits(tokens, positions, slots).argmax(-1)


class TorchBackend:
    name = "torch"

    def __init__(self, weights, dims=Dims(), max_batch=64, device="cuda"):
        self.weights, self.dims, self.device = weights, dims, device
        self.max_batch, self.max_len = max_batch, dims.max_len
        self.model = TorchModel(weights, dims, max_batch, device)
        pin = self.model.device.type == "cuda"
        # Tokens, positions and slots of n rows are its first 3n entries: one
        # contiguous pinned range, so one asynchronous copy.
        self.h_in = torch.empty((3 * max_batch,), dtype=torch.int64, pin_memory=pin)
        self.h_out = torch.empty((max_batch,), dtype=torch.int64, pin_memory=pin)
        self.d_in = torch.empty((3 * max_batch,), dtype=torch.int64, device=self.model.device)

    def enqueue(self, tokens, positions, slots):
        n = len(tokens)
        hin = self.h_in.numpy()
        hin[:n], hin[n:2 * n], hin[2 * n:3 * n] = tokens, positions, slots
        d_in = self.d_in[:3 * n]
        d_in.copy_(self.h_in[:3 * n], non_blocking=True)
        tok, pos, slot = d_in.view(3, n)
        nxt = self.model.forward(tok, pos, slot, int(positions.max()) + 1).argmax(-1)
        self.h_out[:n].copy_(nxt, non_blocking=True)
        if self.model.device.type == "cuda":
            event = torch.cuda.Event()
            event.record()
            return event
        import waiting  # noqa: PLC0415

        event = waiting.HostEvent()
        event.set()
        return event

    def result(self, n):
        return self.h_out[:n].numpy().copy()

    def reference(self):
        return TorchModel(self.weights, self.dims, 1, self.device)

    def close(self):
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()
