"""``POST /v1/generate``: an LLM-style decode loop with continuous batching,
each token streamed to its client as it is made (docs/python_service.md,
"The decode loop").

The service (``server.py``) calls ``add_arguments(parser)`` and
``setup(app, cfg)``; run alone (``python3 decode.py --port 8080``) this file
serves the endpoint with ``/metrics`` and ``/health`` beside it.

Request: JSON ``{"prompt": [token ids] | "text", "max_tokens": N}``; a text
prompt is its UTF-8 bytes as token ids 0..255. Answer: 200 and one JSON
object per line, ``{"index": i, "token": t}`` per token as it is made, then
``{"done": true, "finish_reason": "length", "tokens": n}``; with ``Accept:
text/event-stream`` the same objects as server-sent events (``data: ...``
and a blank line). Errors, each a one-line reason: 415 (not JSON), 413
(body over --decode-max-body), 400 (bad JSON, prompt not a non-empty list
of token ids below the vocabulary or a non-empty string, max_tokens not an
integer), 422 (max_tokens below 1, or prompt plus max_tokens past the
model's positions), 503 (draining, or --decode-max-waiting requests already
wait). A client that disconnects leaves the batch at the next step
boundary.

Thread: everything here runs on the event loop's thread.
"""
import argparse
import asyncio
import json
import os
import signal
import sys

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
    g.add_argument("--decode-backend", default="auto", choices=("auto", "torch", "cpu"),
                   help="torch on the GPU, or numpy on a CPU worker thread; auto: torch when "
                   "it sees a CUDA device (default auto)")
    g.add_argument("--decode-device", default="cuda", help="torch device (default cuda)")
    g.add_argument("--decode-max-batch", type=int, default=64,
                   help="KV-cache slots: sequences decoded together (default 64)")
    g.add_argument("--decode-max-waiting", type=int, default=1024,
                   help="requests that may wait for a slot before 503 (default 1024)")
    g.add_argument("--decode-weights", default="",
                   help="an .npz of the weights: loaded when it exists, else made from "
                   "--decode-seed and written there (default: made, not written)")
    g.add_argument("--decode-seed", type=int, default=1, help="weights seed (default 1)")
    g.add_argument("--decode-max-body", type=int, default=1 << 16,
                   help="largest request body in bytes (default 65536)")
    g.add_argument("--decode-default-tokens", type=int, default=16,
                   help="max_tokens when a request gives none (default 16)")
    g.add_argument("--decode-drain-timeout", type=float, default=30.0,
                   help="seconds a drain lets running sequences finish before it stops "
                   "them (default 30)")


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
    """The engine, its backend and metrics, as one app holds them."""

    def __init__(self, cfg):
        import waiting  # noqa: PLC0415 (the service's module, beside this one)

        if cfg.decode_max_batch < 1:
            raise SystemExit("--decode-max-batch: want at least 1")
        self.cfg, self.dims = cfg, decode_model.Dims()
        self.backend = decode_backends.make_backend(
            cfg.decode_backend, _weights(cfg, self.dims), self.dims, cfg.decode_max_batch,
            cfg.decode_device)
        waiting.prepare(cfg, need_cudaev=self.backend.name == "torch")
        self.metrics = decode_metrics.DecodeMetrics(cfg.decode_max_batch)
        self.engine = decode_engine.Engine(self.backend, lambda ev: waiting.wait_event(cfg, ev),
                                           self.metrics, cfg.decode_max_waiting)

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
            if request.content_type != "application/json":
                raise _BadRequest(415, "Content-Type: want application/json")
            limit = self.cfg.decode_max_body
            if request.content_length is not None and request.content_length > limit:
                raise _BadRequest(413, f"body: {request.content_length} bytes, at most {limit}")
            body = await request.content.read(limit + 1)
            if len(body) > limit:
                raise _BadRequest(413, f"body: over {limit} bytes")
            prompt, n = self.parse(body)
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
        fmt = (lambda o: f"data: {json.dumps(o)}\n\n") if sse else (lambda o: json.dumps(o) + "\n")
        resp = web.StreamResponse(headers={
            "Content-Type": "text/event-stream" if sse else "application/x-ndjson",
            "Cache-Control": "no-cache", "X-Sequence-Id": str(seq.id)})
        index = 0
        try:
            await resp.prepare(request)
            done = False
            while not done:
                # Tokens that came while the last write drained go out in one write.
                toks = [await seq.queue.get()]
                while not seq.queue.empty():
                    toks.append(seq.queue.get_nowait())
                out = []
                for t in toks:
                    if t is decode_engine.END:
                        out.append(fmt({"done": True, "finish_reason": seq.finish_reason,
                                        "tokens": index}))
                        done = True
                        break
                    out.append(fmt({"index": index, "token": t}))
                    index += 1
                await resp.write("".join(out).encode())
            await resp.write_eof()
        except ConnectionError:  # the client left; aiohttp 3.9+ says so on write
            pass
        finally:
            self.engine.cancel(seq)
        return resp


def setup(app, cfg):
    """Adds POST /v1/generate to ``app``; the engine starts with the app
    and, at its shutdown, drains (--decode-drain-timeout). The service's
    /metrics appends ``app[decode.DECODE].metrics.render()``."""
    svc = DecodeService(cfg)
    app[DECODE] = svc
    app.router.add_post("/v1/generate", svc.handle)

    async def start(app):
        svc.engine.start()

    async def drain(app):
        await svc.engine.drain(cfg.decode_drain_timeout)

    async def close(app):
        await svc.engine.close()
        svc.backend.close()

    app.on_startup.append(start)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(close)
    return svc


async def _serve(cfg):
    app = web.Application()
    svc = setup(app, cfg)

    async def metrics(request):
        return web.Response(text=svc.metrics.render(), content_type="text/plain")

    async def health(request):
        if svc.engine.draining:
            return web.Response(status=503, text="draining\n")
        return web.Response(text="ok\n")

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"decode: listening on {cfg.host}:{port} (backend {svc.backend.name}, "
          f"--wait {cfg.wait})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv=None):
    p = argparse.ArgumentParser(description="The decode loop alone (POST /v1/generate).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="0: any free port (printed)")
    p.add_argument("--wait", default="cudaev", help="cudaev, executor or poll (default cudaev)")
    p.add_argument("--uvloop", action="store_true", help="run on uvloop")
    add_arguments(p)
    cfg = p.parse_args(argv)
    if cfg.uvloop:
        import uvloop  # noqa: PLC0415

        uvloop.install()
    asyncio.run(_serve(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
