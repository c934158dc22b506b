"""The header deadline (--header-deadline-ms): a client must complete a
request's line and headers within it, counted from the connection's start, or
for a later request on a kept-alive connection from its first byte; else it
gets the C service's 408 (examples/inference_server/conn.c) and the connection
is closed, however steadily it trickles. aiohttp has no such deadline (its
keep-alive timeout restarts with every byte, which a slowloris client uses).

How: each connection's protocol is aiohttp's RequestHandler behind a small
forwarding protocol (RequestHandler has __slots__, so its methods cannot be
wrapped in place), which arms one loop timer when bytes start a request; the
middleware, which runs once aiohttp has parsed a request's headers, disarms it
for the life of that request. The 408 is written on the transport itself:
aiohttp writes nothing while it waits for headers.

The close lingers (as nginx's lingering_close): the 408 is followed by a FIN,
and what the client still sends is read and dropped until it closes or
LINGER_S pass. Closed at once, a socket with unread bytes of the trickle
sends a reset, which can reach the client before it has read the 408.

Thread: the event loop's thread only.
"""
import asyncio

from aiohttp import web

LINGER_S = 2.0


class _Proxy(asyncio.Protocol):
    __slots__ = ("inner", "owner", "transport", "timer", "busy", "cut")

    def __init__(self, owner, inner):
        self.owner, self.inner = owner, inner
        self.transport = self.timer = None
        self.busy = self.cut = False

    def connection_made(self, transport):
        self.transport = transport
        self.owner.conns[self.inner] = self
        self.inner.connection_made(transport)
        self.arm()

    def data_received(self, data):
        if self.cut:
            return  # the rest of a cut request is dropped
        if self.timer is None and not self.busy:
            self.arm()
        self.inner.data_received(data)

    def eof_received(self):
        if self.cut:
            return False  # the client has closed its side: the transport closes
        return self.inner.eof_received()

    def connection_lost(self, exc):
        self.disarm()
        self.owner.conns.pop(self.inner, None)
        self.inner.connection_lost(exc)

    def pause_writing(self):
        self.inner.pause_writing()

    def resume_writing(self):
        self.inner.resume_writing()

    def arm(self):
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.owner.deadline_s, self.fire)

    def disarm(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def fire(self):
        self.timer = None
        t = self.transport
        if self.busy or t is None or t.is_closing():
            return
        self.cut = True
        self.owner.metrics.timeout("headers")
        body = f"request headers not complete within {self.owner.deadline_ms} ms\n".encode()
        t.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        if t.can_write_eof():
            t.write_eof()
            self.timer = asyncio.get_running_loop().call_later(LINGER_S, t.close)
        else:
            t.close()


class HeaderDeadlines:
    def __init__(self, deadline_ms, metrics):
        self.deadline_ms = deadline_ms
        self.deadline_s = deadline_ms * 1e-3
        self.metrics = metrics
        self.conns = {}  # aiohttp's protocol -> its proxy

    def wrap(self, factory):
        """A protocol factory for loop.create_server around aiohttp's."""
        return lambda: _Proxy(self, factory())

    @web.middleware
    async def middleware(self, request, handler):
        p = self.conns.get(request.protocol)
        if p is None:
            return await handler(request)
        p.disarm()
        p.busy = True
        try:
            return await handler(request)
        finally:
            p.busy = False
