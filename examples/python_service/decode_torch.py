"""The decode model in PyTorch: the same weights and the same arithmetic as
``decode_model.NumpyModel`` (fp32, TF32 off), with the KV cache on the
device.

A step enqueues everything on the current stream and does not wait: the
inputs go up from a pinned buffer, the next tokens come back into another
(both non-blocking copies), and a ``torch.cuda.Event`` recorded after the
copy back is what the engine awaits. A row may take its input from the
previous step's output on the device (``prev``: the engine's overlap), which
each step leaves in ``last``. Two sets of pinned buffers are used in turn: a
set is written again two steps later, when the engine has read the step
that used it.

On a CPU device (``--decode-device cpu``, for trying the torch arithmetic
without a GPU) the step runs synchronously and its event is a completed
``waiting.HostEvent``.

On a GPU the step is a CUDA graph (``--decode-graphs on``, the default), as
vLLM, SGLang and TensorRT-LLM run their decode steps: launched op by op from
Python, a step of this model is about a hundred launches, and the engine's
thread spends the whole step launching (the GPU finishes each op before the
next is enqueued). A graph per (batch size, attended length) bucket is
captured at start; a step pads its batch to the bucket (the pad rows write
a scratch KV slot) and attends over the bucket's length (masked past each
row's position, as the eager step is past the batch's longest), then one
replay enqueues it all. The eager path stays for ``--decode-graphs off``.

Thread: the event loop's thread (see ``decode_backends``).
"""
import numpy as np
import torch

from buckets import buckets
from decode_backends import Step
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

    @torch.inference_mode()
    def step_on_device(self, last, tok, pos, slot, prev, maxp):
        """The next tokens of one step, all on the device: row i's input is
        ``tok[i]``, or ``last[prev[i]]`` where ``prev[i] >= 0`` (the step
        before's output); leaves this step's output in ``last``."""
        tok = torch.where(prev >= 0, last[prev.clamp(min=0)], tok)
        out = self.forward(tok, pos, slot, maxp).argmax(-1)
        last[:out.shape[0]].copy_(out)
        return out

    def logits(self, tokens, positions, slots):
        """NumpyModel.logits on the device, synchronously (the reference)."""
        t = [torch.from_numpy(np.asarray(a, np.int64)).to(self.device)
             for a in (tokens, positions, slots)]
        return self.forward(*t, int(max(positions)) + 1).float().cpu().numpy()

    def step(self, tokens, positions, slots):
        return self.logits(tokens, positions, slots).argmax(-1)


class StepGraphs:
    """The decode step as CUDA graphs, one per (batch, length) bucket.

    Each graph reads its bucket's static device input (tokens, positions,
    slots, prev of B rows: 4B int64) and the model's ``last``, and leaves
    the next tokens in its static output and in ``last``; the caller copies
    in before ``replay`` and out after it, on the same stream. Every graph's
    memory comes from one pool: replays are serialized on one stream and
    each output is copied out before the next replay, so a later graph may
    reuse an earlier one's scratch. The KV cache
    has one slot more than the batch, ``scratch``, which the pad rows write.
    """

    def __init__(self, model, max_batch, last):
        self.model, self.scratch = model, max_batch
        self.batch_buckets = buckets(max_batch, 1)
        self.len_buckets = buckets(model.dims.max_len, min(32, model.dims.max_len))
        self.graphs = {}
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(model.device)
        for B in reversed(self.batch_buckets):  # the largest first: the pool fits all
            d_in = torch.zeros((4 * B,), dtype=torch.int64, device=model.device)
            d_in[2 * B:3 * B] = self.scratch
            d_in[3 * B:] = -1
            tok, pos, slot, prev = d_in.view(4, B)
            for T in reversed(self.len_buckets):
                # Warm up outside the capture (cuBLAS handles, lazily loaded
                # kernels), on a side stream as capture requires.
                side.wait_stream(torch.cuda.current_stream(model.device))
                with torch.cuda.stream(side):
                    model.step_on_device(last, tok, pos, slot, prev, T)
                torch.cuda.current_stream(model.device).wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    out = model.step_on_device(last, tok, pos, slot, prev, T)
                self.graphs[(B, T)] = (g, d_in, out)
        torch.cuda.synchronize(model.device)

    def bucket(self, n, length):
        B = next(b for b in self.batch_buckets if b >= n)
        T = next(t for t in self.len_buckets if t >= length)
        return self.graphs[(B, T)]


class TorchBackend:
    name = "torch"

    def __init__(self, weights, dims=Dims(), max_batch=64, device="cuda", graphs=True):
        self.weights, self.dims, self.device = weights, dims, device
        self.max_batch, self.max_len = max_batch, dims.max_len
        on_gpu = torch.device(device).type == "cuda"
        graphs = graphs and on_gpu
        # With graphs the cache has a scratch slot for the pad rows.
        self.model = TorchModel(weights, dims, max_batch + graphs, device)
        # The last step's output, where the next step's rows with a prev read it.
        self.last = torch.zeros((max_batch,), dtype=torch.int64, device=self.model.device)
        # Tokens, positions, slots and prev of n rows are the first 4n entries
        # of a set: one contiguous pinned range, so one asynchronous copy.
        self.h_in = torch.empty((2, 4 * max_batch), dtype=torch.int64, pin_memory=on_gpu)
        self.h_out = torch.empty((2, max_batch), dtype=torch.int64, pin_memory=on_gpu)
        self.k = 0  # the set the next step uses
        # One event a set, made once: a new torch.cuda.Event a step is a
        # CUDA event created and destroyed a step.
        self.events = (torch.cuda.Event(), torch.cuda.Event()) if on_gpu else None
        self.graphs = StepGraphs(self.model, max_batch, self.last) if graphs else None
        if self.graphs is None:  # the graphs own their device inputs
            self.d_in = torch.empty((4 * max_batch,), dtype=torch.int64,
                                    device=self.model.device)

    def _enqueue_graph(self, k, tokens, prev, positions, slots):
        n = len(tokens)
        g, d_in, out = self.graphs.bucket(n, int(positions.max()) + 1)
        B = d_in.shape[0] // 4
        hin = self.h_in[k].numpy()
        hin[:n], hin[B:B + n], hin[2 * B:2 * B + n], hin[3 * B:3 * B + n] = \
            tokens, positions, slots, prev
        hin[n:B] = 0
        hin[B + n:2 * B] = 0
        hin[2 * B + n:3 * B] = self.graphs.scratch
        hin[3 * B + n:4 * B] = -1
        d_in.copy_(self.h_in[k, :4 * B], non_blocking=True)
        g.replay()
        self.h_out[k, :n].copy_(out[:n], non_blocking=True)

    def enqueue(self, tokens, prev, positions, slots):
        k, self.k = self.k, self.k ^ 1
        if self.graphs is not None:
            self._enqueue_graph(k, tokens, prev, positions, slots)
        else:
            n = len(tokens)
            hin = self.h_in[k].numpy()
            hin[:n], hin[n:2 * n], hin[2 * n:3 * n], hin[3 * n:4 * n] = \
                tokens, positions, slots, prev
            d_in = self.d_in[:4 * n]
            d_in.copy_(self.h_in[k, :4 * n], non_blocking=True)
            tok, pos, slot, prv = d_in.view(4, n)
            nxt = self.model.step_on_device(self.last, tok, pos, slot, prv,
                                            int(positions.max()) + 1)
            self.h_out[k, :n].copy_(nxt, non_blocking=True)
        if self.model.device.type == "cuda":
            # A set's event is recorded again only when its set is: two steps
            # later, once the engine has awaited it and read the step.
            event = self.events[k]
            event.record()
            return Step(event, k)
        import waiting  # noqa: PLC0415

        event = waiting.HostEvent()
        event.set()
        return Step(event, k)

    def result(self, step, n):
        return self.h_out[step.k, :n].numpy().copy()

    def reference(self):
        return TorchModel(self.weights, self.dims, 1, self.device)

    def close(self):
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()
