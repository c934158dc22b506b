"""The HTTP side of one worker: routes, validation, answers, the drain.

The answers are the C service's (examples/inference_server/http.c), status
and one-line reason: 404 unknown path, 405 wrong method (with Allow), 415
Content-Type, 413 body over --max-body (at once from Content-Length, else at
the end of the body), 400 bad JSON / wrong length / non-finite, 408 body not
complete within --body-deadline-ms, 503 draining / restarting / queue full /
device fault / no device, 504 not answered within --deadline-ms of the body's
end. 200: the outputs (JSON or raw float32) with X-Batch-Id, X-Batch-Size,
X-Batch-Row and X-Device.

``make_app`` (server.py) puts one Service in ``app[SERVICE]``; other
endpoints (decode.py) may read ``service.draining`` and ``service.metrics``,
and append a function returning Prometheus lines to ``service.extra_metrics``.

Thread: the event loop's thread only.
"""
import asyncio
import time

from aiohttp import web

import batching
import parse
import waiting

SERVICE = "cudaev.service"
TEXT = "text/plain; charset=utf-8"


def text(status, line, close=False, headers=None):
    h = {"Content-Type": TEXT}
    if headers:
        h.update(headers)
    resp = web.Response(status=status, body=(line + "\n").encode(), headers=h)
    if close:
        resp.force_close()  # aiohttp writes "Connection: close" and closes after it
    return resp


class Service:
    def __init__(self, cfg, model, metrics):
        self.cfg, self.model, self.metrics = cfg, model, metrics
        self.max_body = cfg.max_body or model.inputs * 32 + 1024
        self.batcher = None  # made on the loop (start)
        self.device = None
        self.draining = False
        self.drain_reason = "draining"
        self.active = 0  # inference requests between arrival and answer
        self.idle = asyncio.Event()
        self.idle.set()
        self.on_unrecoverable = None  # set by the worker: start the restart
        self.extra_metrics = []  # other endpoints' render() functions, appended to /metrics
        self.open_connections = None  # a callable, set by make_app (--eager-batch)

    def start(self, device):
        self.device = device
        self.batcher = batching.Batcher(self.cfg, device, self.metrics, self._unrecoverable,
                                        self.open_connections)

    def _unrecoverable(self, why):
        if self.on_unrecoverable:
            self.on_unrecoverable(why)

    # ---- routes ---------------------------------------------------------------

    def _other(self, path, resp):
        self.metrics.other_request(path, resp.status)
        return resp

    def not_allowed(self, path, allow):
        return self._other(path, text(405, f"method not allowed: use {allow}", self.draining,
                                      {"Allow": allow}))

    async def health(self, request):
        if request.method not in ("GET", "HEAD"):
            return self.not_allowed("/health", "GET, HEAD")
        if self.draining:
            return self._other("/health", text(503, self.drain_reason, True))
        if self.batcher is None or not self.batcher.up:
            return self._other("/health", text(503, "no device is serving"))
        r = self.metrics.restarts
        if r:
            return self._other("/health", text(
                200, f"ok; worker restarted {r} time{'s' if r != 1 else ''} after a device "
                     f"fault its reset could not clear"))
        return self._other("/health", text(200, "ok"))

    async def scrape(self, request):
        if request.method not in ("GET", "HEAD"):
            return self.not_allowed("/metrics", "GET, HEAD")
        m = self.metrics
        if self.batcher is not None:
            m.queue_depth = len(self.batcher.queue)
        m.active_requests = self.active
        # Counted before rendering, as the C service counts a scrape once answered.
        m.other_request("/metrics", 200)
        body = m.render() + "".join(f() for f in self.extra_metrics)
        return web.Response(body=body.encode(),
                            headers={"Content-Type": "text/plain; version=0.0.4"})

    async def not_found(self, request):
        return self._other("other", text(
            404, f"no such endpoint: {request.path[:200]} (try POST /v1/infer, GET /health, "
                 f"GET /metrics)", self.draining))

    async def infer(self, request):
        if request.method != "POST":
            return self.not_allowed("/v1/infer", "POST")
        t0 = time.monotonic()
        self.active += 1
        self.idle.clear()
        try:
            resp = await self._infer(request, t0)
        finally:
            self.active -= 1
            if self.active == 0:
                self.idle.set()
        self.metrics.request(resp.status, time.monotonic() - t0)
        return resp

    async def _infer(self, request, t0):
        cfg = self.cfg
        if self.draining:
            return text(503, self.drain_reason, True)
        ct = request.headers.get("Content-Type")
        kind = parse.content_kind(ct)
        if kind is None:
            return text(415, f"unsupported Content-Type '{ct[:100]}': use application/json or "
                             "application/octet-stream", True)
        cl = request.content_length
        if cl is not None and cl > self.max_body:
            return text(413, f"body of {cl} bytes is over the limit of {self.max_body}", True)
        fault = 0
        if cfg.fault_injection:
            f = request.headers.get("X-Inject-Fault")
            fault = {"1": batching.FAULT_DEVICE,
                     "sticky": batching.FAULT_DEVICE | batching.FAULT_STICKY}.get(f, 0)
        try:
            async with asyncio.timeout(cfg.body_deadline_ms * 1e-3):
                body, over = await self._read_body(request, cl)
        except asyncio.IncompleteReadError:
            return text(400, "body shorter than its Content-Length", True)
        except TimeoutError:
            self.metrics.timeout("body")
            return await self._cut(request, text(
                408, f"request body not complete within {cfg.body_deadline_ms} ms", True))
        if over:
            return text(413, f"body is over the limit of {self.max_body} bytes", True)
        n = self.model.inputs
        try:
            x = parse.raw_floats(body, n) if kind == "raw" else parse.json_floats(body, n)
        except parse.BadBody as e:
            return text(400, str(e))
        if self.draining:
            return text(503, self.drain_reason, True)
        b = self.batcher
        if b is None or not b.up:
            return text(503, "no device is serving")
        try:
            fut = b.submit(x, fault)
        except batching.QueueFull:
            return text(503, "queue full: try again later")
        try:
            a = await asyncio.wait_for(fut, cfg.deadline_ms * 1e-3)
        except (TimeoutError, asyncio.TimeoutError):
            return text(504, f"deadline of {cfg.deadline_ms} ms passed")
        except waiting.DeviceFault as e:
            return text(503, str(e), self.draining)
        body = parse.format_raw(a.y) if kind == "raw" else parse.format_json(a.y)
        h = {"Content-Type": "application/octet-stream" if kind == "raw" else "application/json",
             "X-Batch-Id": str(a.batch_id), "X-Batch-Size": str(a.size),
             "X-Batch-Row": str(a.row), "X-Device": str(a.device)}
        resp = web.Response(body=body, headers=h)
        if self.draining:
            resp.force_close()
        return resp

    async def _cut(self, request, resp):
        """Sends resp, then closes the connection at once: aiohttp would
        otherwise linger up to 10 s reading the rest of a body that a slow
        client may never send (the C service shuts the socket, conn.c)."""
        await resp.prepare(request)
        await resp.write_eof()
        request.protocol.force_close()
        return resp

    async def _read_body(self, request, cl):
        """The body, or (None, True) once it passed --max-body (the rest is
        read and dropped, as the C service does with a chunked body)."""
        if cl is not None:
            return await request.content.readexactly(cl) if cl else b"", False
        parts, got = [], 0
        while True:
            chunk = await request.content.readany()
            if not chunk:
                break
            got += len(chunk)
            if got <= self.max_body:
                parts.append(chunk)
        return (None, True) if got > self.max_body else (b"".join(parts), False)

    # ---- the drain --------------------------------------------------------------

    async def drain(self, timeout, reason="draining"):
        """Stops taking requests (the caller closed the listener), sends the
        queue without waiting for the window and waits for every inference in
        flight. Returns True when all were answered within ``timeout``; else
        the rest get 503 and it returns False."""
        self.draining = True
        self.drain_reason = reason
        if self.batcher is not None:
            if not self.batcher.up:  # a device that will not come back: nothing queued leaves
                self.batcher.fail_queued(reason)
            self.batcher.drain()
        try:
            await asyncio.wait_for(self.idle.wait(), timeout)
            return True
        except (TimeoutError, asyncio.TimeoutError):
            if self.batcher is not None:
                self.batcher.fail_queued(reason)
                for t in list(self.batcher.inflight):
                    t.cancel()
            return False
