"""``POST /v1/generate``: an LLM-style decode loop with continuous batching,
each token streamed to its client as it is made (docs/python_service.md,
"The decode loop").

The service (``server.py``) calls ``add_arguments(parser)`` and
``setup(app, cfg)``: the decode loop runs on the device ``--model-device``
names (``cuda``: PyTorch on ``--cuda-device``; ``cpu``: numpy on a worker
thread, or torch with ``--cpu-impl torch``), each step awaited as ``--wait``
says, in every worker process.

Request: JSON ``{"prompt": [token ids] | "text", "max_tokens": N}``; a text
prompt is its UTF-8 bytes as token ids 0..255. Answer: 200 and one JSON
object per line, ``{"index": i, "token": t}`` per token as it is made, then
``{"done": true, "finish_reason": "length", "tokens": n}``; with ``Accept:
text/event-stream`` the same objects as server-sent events (``data: ...``
and a blank line). Errors, each a one-line reason: 415 (not JSON), 413
(body over --decode-max-body), 405 (not POST), 400 (bad JSON, prompt not a non-empty list
of token ids below the vocabulary or a non-empty string, max_tokens not an
integer), 422 (max_tokens below 1, or prompt plus max_tokens past the
model's positions), 503 (draining, or --decode-max-waiting requests already
wait). A client that disconnects leaves the batch at the next step
boundary.

Thread: everything here runs on the event loop's thread.
"""
import asyncio
import json
import os
import time

from aiohttp import web

import decode_backends
import decode_engine
import decode_metrics
import decode_model

try:
    DECODE = web.AppKey("decode", object)
except AttributeError:  # aiohttp before 3.9 keys apps by strings
    DECODE = "decode"


def add_arguments(parser):
    g = parser.add_argument_group("decode loop (POST /v1/generate)")
    g.add_argument("--decode-max-batch", type=int, default=64,
                   help="KV-cache slots: sequences decoded together (default 64)")
    g.add_argument("--decode-max-waiting", type=int, default=1024,
                   help="requests that may wait for a slot before 503 (default 1024)")
    g.add_argument("--decode-weights", default="",
                   help="an .npz of the weights: loaded when it exists, else made from "
                   "--decode-seed and written there (default: made, not written)")
    g.add_argument("--decode-seed", type=int, default=1, help="weights seed (default 1)")
    g.add_argument("--decode-size", choices=tuple(decode_model.SIZES), default="small",
                   help="the model's dimensions (decode_model.SIZES): small (the default: "
                   "a GPU step shorter than the engine's Python) or large (0.84 G parameters, "
                   "a step of a millisecond or more, like a real model's)")
    g.add_argument("--decode-graphs", choices=("on", "off"), default="on",
                   help="on a GPU, run each step as a CUDA graph captured at start (on, the "
                   "default, as engines do) or op by op from Python (off)")
    g.add_argument("--decode-overlap", choices=("on", "off"), default="on",
                   help="enqueue each step before awaiting the one before it, its inputs "
                   "read on the device (on, the default, as SGLang's and vLLM's overlap "
                   "scheduling do), or only after that step's tokens were delivered (off)")
    g.add_argument("--decode-max-body", type=int, default=1 << 16,
                   help="largest request body in bytes (default 65536)")
    g.add_argument("--decode-default-tokens", type=int, default=16,
                   help="max_tokens when a request gives none (default 16)")
    g.add_argument("--decode-drain-timeout", type=float, default=30.0,
                   help="seconds a drain lets running sequences finish before it stops "
                   "them (default 30)")


class _TokenWriter:
    """A stream's lines (NDJSON, or server-sent events with ``sse``), and the
    engine's way to write a token straight to the client (``__call__``, the
    sequence's sink): one transport write on the engine's task, with no queue,
    no task switch and no aiohttp write per token. It declines (the token is
    queued for the stream's task, which writes through aiohttp and waits for
    the client to drain) when the connection's buffer holds more than
    SINK_HIGH bytes or it is closing. Frames chunks itself when aiohttp's
    response is chunked (HTTP/1.1); aiohttp ends the stream (write_eof)."""

    __slots__ = ("sse", "index", "transport", "chunked")
    SINK_HIGH = 64 * 1024

    def __init__(self, sse):
        self.sse, self.index = sse, 0
        self.transport, self.chunked = None, False

    def token(self, tok):
        # The bytes json.dumps({"index": i, "token": t}) makes, without it.
        line = '{"index": %d, "token": %d}' % (self.index, tok)
        self.index += 1
        return f"data: {line}\n\n" if self.sse else line + "\n"

    def end(self, reason):
        o = json.dumps({"done": True, "finish_reason": reason, "tokens": self.index})
        return f"data: {o}\n\n" if self.sse else o + "\n"

    def attach(self, transport, resp):
        self.transport = transport
        self.chunked = resp.headers.get("Transfer-Encoding", "").lower() == "chunked"

    def __call__(self, tok):
        t = self.transport
        if t is None or t.is_closing() or t.get_write_buffer_size() > self.SINK_HIGH:
            return False
        data = self.token(tok).encode()
        t.write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)
        return True


class _BadRequest(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status


def _weights(cfg, dims):
    path = cfg.decode_weights
    if path and os.path.exists(path):
        try:
            return decode_model.load_weights(path, dims)
        except (OSError, ValueError) as e:
            raise SystemExit(f"--decode-weights: {e}") from None
    w = decode_model.make_weights(dims, cfg.decode_seed)
    if path:
        decode_model.save_weights(path, w)
    return w


class DecodeService:
    """The engine, its backend and metrics, as one app holds them; the
    backend is made at the app's start-up (``start``), on the loop."""

    def __init__(self, cfg):
        if cfg.decode_max_batch < 1:
            raise SystemExit("--decode-max-batch: want at least 1")
        self.cfg, self.dims = cfg, decode_model.SIZES[cfg.decode_size]
        self.metrics = decode_metrics.DecodeMetrics(cfg.decode_max_batch)
        self.backend = self.engine = None
        self.service = None  # the service's Service, for its drain state
        self.streams = 0  # answers being streamed
        self.streams_done = asyncio.Event()
        self.streams_done.set()

    def start(self):
        import waiting  # noqa: PLC0415 (the service's module, beside this one)

        cfg = self.cfg
        self.backend = decode_backends.make_backend(cfg, _weights(cfg, self.dims), self.dims)
        self.engine = decode_engine.Engine(self.backend, lambda ev: waiting.wait_event(cfg, ev),
                                           self.metrics, cfg.decode_max_waiting,
                                           overlap=cfg.decode_overlap == "on")
        self.engine.start()

    async def drain(self):
        """Lets running and waiting sequences finish, and their answers
        reach their clients, for up to --decode-drain-timeout seconds; then
        stops the rest (their streams end with finish_reason "drain").
        Idempotent."""
        if self.engine is None:
            return
        deadline = time.monotonic() + self.cfg.decode_drain_timeout
        await self.engine.drain(self.cfg.decode_drain_timeout)
        try:
            await asyncio.wait_for(self.streams_done.wait(),
                                   max(0.5, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            pass

    async def close(self):
        await self.drain()
        if self.engine is not None:
            await self.engine.close()
        if self.backend is not None:
            self.backend.close()

    def parse(self, body):
        """The prompt and max_tokens of a request body, or _BadRequest."""
        try:
            req = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise _BadRequest(400, f"body is not JSON: {e}") from None
        if not isinstance(req, dict):
            raise _BadRequest(400, "body must be a JSON object")
        prompt = req.get("prompt")
        if isinstance(prompt, str):
            prompt = list(prompt.encode())
        elif isinstance(prompt, list):
            for t in prompt:
                if type(t) is not int or not 0 <= t < self.dims.vocab:
                    raise _BadRequest(400, f"prompt: {json.dumps(t)[:40]} is not a token id "
                                      f"0..{self.dims.vocab - 1}")
        else:
            raise _BadRequest(400, "prompt: want a list of token ids or a string")
        if not prompt:
            raise _BadRequest(400, "prompt is empty")
        n = req.get("max_tokens", self.cfg.decode_default_tokens)
        if type(n) is not int:
            raise _BadRequest(400, "max_tokens: want an integer")
        room = self.dims.max_len - len(prompt) + 1
        if room < 1:
            raise _BadRequest(422, f"prompt: {len(prompt)} tokens, the model has "
                              f"{self.dims.max_len} positions")
        if not 1 <= n <= room:
            raise _BadRequest(422, f"max_tokens: {n}, want 1..{room} for a prompt of "
                              f"{len(prompt)} tokens ({self.dims.max_len} positions)")
        return prompt, n

    async def handle(self, request):
        status = 200
        try:
            if request.method != "POST":
                status = 405
                return web.Response(status=405, text="method not allowed: use POST\n",
                                    headers={"Allow": "POST"})
            if request.content_type != "application/json":
                raise _BadRequest(415, "Content-Type: want application/json")
            limit = self.cfg.decode_max_body
            if request.content_length is not None and request.content_length > limit:
                raise _BadRequest(413, f"body: {request.content_length} bytes, at most {limit}")
            chunks, size = [], 0
            while size <= limit:  # read() may answer with less than it was asked
                chunk = await request.content.read(limit + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            body = b"".join(chunks)
            if size > limit:
                raise _BadRequest(413, f"body: over {limit} bytes")
            prompt, n = self.parse(body)
            if self.service is not None and self.service.draining:
                raise _BadRequest(503, self.service.drain_reason)
            try:
                seq = self.engine.submit(prompt, n)
            except decode_engine.Busy as e:
                raise _BadRequest(503, str(e)) from None
        except _BadRequest as e:
            status = e.status
            return web.Response(status=e.status, text=f"{e}\n")
        finally:
            if status != 200:
                self.metrics.request(status)
        self.metrics.request(200)
        return await self._stream(request, seq)

    async def _stream(self, request, seq):
        sse = "text/event-stream" in request.headers.get("Accept", "")
        resp = web.StreamResponse(headers={
            "Content-Type": "text/event-stream" if sse else "application/x-ndjson",
            "Cache-Control": "no-cache", "X-Sequence-Id": str(seq.id)})
        out = _TokenWriter(sse)
        self.streams += 1
        self.streams_done.clear()
        try:
            await resp.prepare(request)
            done = False
            while not done:
                # Tokens that came while the last write drained go out in one write.
                toks = [await seq.queue.get()]
                while not seq.queue.empty():
                    toks.append(seq.queue.get_nowait())
                lines = []
                for t in toks:
                    if t is decode_engine.END:
                        lines.append(out.end(seq.finish_reason))
                        done = True
                        break
                    lines.append(out.token(t))
                await resp.write("".join(lines).encode())
                # Written through aiohttp once (its headers are out), the
                # stream takes later tokens straight from the engine.
                if not done and seq.sink is None:
                    out.attach(request.transport, resp)
                    seq.sink = out
            await resp.write_eof()
        except ConnectionError:  # the client left; aiohttp 3.9+ says so on write
            pass
        finally:
            seq.sink = None
            self.engine.cancel(seq)
            self.streams -= 1
            if not self.streams:
                self.streams_done.set()
        return resp


def setup(app, cfg):
    """Adds POST /v1/generate to ``app`` and the decode loop's lines to the
    service's /metrics. The engine starts with the app; at the app's
    shutdown (after the service's own drain) it drains: running and
    waiting sequences get --decode-drain-timeout seconds to finish."""
    import service  # noqa: PLC0415 (the service's module, beside this one)

    svc = DecodeService(cfg)
    app[DECODE] = svc
    svc.service = app.get(service.SERVICE)
    if svc.service is not None:
        svc.service.extra_metrics.append(svc.metrics.render)
    app.router.add_route("*", "/v1/generate", svc.handle)

    async def start(app):
        svc.start()

    # aiohttp runs on_shutdown only for a runner with sites (server.py has
    # none: it serves on its own sockets), so cleanup drains as well.
    async def drain(app):
        await svc.drain()

    async def close(app):
        await svc.close()

    app.on_startup.append(start)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(close)
    return svc
