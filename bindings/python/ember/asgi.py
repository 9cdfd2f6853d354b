"""ASGI 3 server on the Ember engine: ``ember.asgi.serve(app)`` or ``python -m ember module:app``.

The engine parses HTTP; per request Python builds the scope straight from the engine's
info struct (no ABI call), runs the app on a loop it borrows for the moment (``_loop.py``:
most requests complete without a thread switch) and answers with one
``ember_request_respond``.

Bodies:
- response: a body sent whole (``more_body`` false at once) goes out in one
  ``ember_request_respond``. A body sent in ``more_body`` chunks is streamed
  (``ember_response_begin`` / ``_write`` / ``_end``, chunked on HTTP/1.1) with the
  engine's backpressure, unless the app declared a Content-Length of at most
  ``_stream.COLLECT_MAX``: that one is collected and sent whole, keeping its length.
- ``http.disconnect`` comes from the engine's abort notice (the client left, the handler
  timeout, stop) or the end of the response; the events are registered only when the
  app streams or waits for it.
- request: POST, PUT, PATCH and other methods that carry bodies come through a route
  with ``EMBER_ROUTE_STREAM_BODY``: the app starts once the head is in, and each
  ``receive()`` hands it the next piece (``ember_request_read``, waiting for the READABLE
  event). GET, HEAD, DELETE and OPTIONS keep the buffered route: their (rare) body is in
  the info struct, one ``http.request`` event, no extra engine call.
- WebSocket: the engine's open callback (``ember_server_websocket`` on the same catch-all
  patterns as the HTTP route) builds a ``websocket`` scope like the HTTP one in
  ``ASGIServer._make_callback`` and starts a ``_WebSocketCycle`` beside ``_HTTPCycle``:
  ``websocket.connect`` first; ``websocket.accept`` -> ``ember_ws_accept`` (subprotocol
  and headers), ``websocket.close`` before accepting -> ``ember_ws_reject`` (403);
  messages from the engine's message callback go into an ``asyncio.Queue`` through the
  borrowed loop (``BorrowableLoop.run``); ``websocket.send`` -> ``ember_ws_send``,
  waiting for the writable event on ``EMBER_ERR_WOULD_BLOCK``; the close callback
  delivers ``websocket.disconnect`` with its code.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from typing import Any, Awaitable, Callable
from urllib.parse import unquote as _unquote

from . import _lib, _stream
from ._host import AppServer, access, internal_error as _internal_error, refused as _refused
from ._loop import BorrowableLoop
from ._wire import (HTTP_VERSIONS, I_BODY, I_FLAGS, I_HEADERS, I_LENGTH, I_METHOD, I_PATH, I_QUERY, I_REMOTE,
                    I_VERSION, INFO, MEM, METHODS, PAIR, REQUEST_BODY_STREAMED, AddrCache)
from .response import NOCOPY_MIN, send as _send_any

log = logging.getLogger("ember.asgi")

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]

_respond = _lib.lib.ember_request_respond
_OK = _lib.OK

# "2.3": send() does not raise when the client has gone. With the engine's abort notice
# (streaming ABI) this becomes "2.4".
_HTTP_ASGI = {"version": "3.0", "spec_version": "2.3"}

# A streamed request body is handed to the app in pieces of at most this size.
_READ_MAX = 65536
_LIFESPAN_ASGI = {"version": "3.0", "spec_version": "2.0"}


class LifespanFailure(RuntimeError):
    """The app's lifespan startup failed: the server does not start."""


class _Events:
    """The engine's events for one request (registered only when needed: a streamed
    answer, or an app waiting for ``http.disconnect``), handed to the loop."""

    __slots__ = ("loop", "writable", "readable", "gone", "ended")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.writable: asyncio.Future | None = None
        self.readable: asyncio.Future | None = None
        self.gone = False   # ABORTED: the client left, the handler timeout answered, or stop
        self.ended = False  # ABORTED or COMPLETED


class _HTTPCycle:
    """One request: the app's ``receive`` and ``send``, and the answer."""

    __slots__ = ("handle", "body", "status", "headers", "parts", "done", "waiter", "scope", "events",
                 "streaming", "collect")

    def __init__(self, handle: int, body: bytes, scope: dict) -> None:
        self.handle = handle
        self.body = body
        self.scope = scope
        self.status = None
        self.headers = None
        self.parts = None
        self.done = False
        self.waiter = None
        self.events = None
        self.streaming = False
        self.collect = None  # declared Content-Length <= COLLECT_MAX: collect, keep the length

    async def run(self, app: ASGIApp) -> None:
        try:
            result = await app(self.scope, self.receive, self.send)
        except asyncio.CancelledError:
            raise
        except BaseException:
            log.exception("Exception in ASGI application (%s %s)", self.scope["method"], self.scope["path"])
            if not self.done:
                self._fail()
            return
        finally:
            self._wake()
        if self.done:
            if result is not None:
                log.error("ASGI callable should return None, but returned %r", result)
            return
        if self.status is None:
            log.error("ASGI callable returned without starting response (%s %s)",
                      self.scope["method"], self.scope["path"])
        else:
            log.error("ASGI callable returned without completing response (%s %s)",
                      self.scope["method"], self.scope["path"])
        self._fail()

    async def receive(self) -> dict:
        body = self.body
        if body is not None:
            if type(body) is int:  # a streamed body, this much left (-1: unknown)
                return await self._read(body)
            self.body = None
            return {"type": "http.request", "body": body, "more_body": False}
        if not self.done:
            # "disconnect": the engine's abort notice, or the end of the response.
            events = self._listen()
            if not events.ended:
                waiter = self.waiter
                if waiter is None or waiter.done():
                    waiter = self.waiter = events.loop.create_future()
                await waiter
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        kind = message["type"]
        if kind == "http.response.body":
            if self.status is None:
                raise RuntimeError("Expected ASGI message 'http.response.start', but got 'http.response.body'")
            if self.done:
                raise RuntimeError("Unexpected ASGI message 'http.response.body' sent, after response already completed")
            body = message.get("body", b"")
            if message.get("more_body", False):
                if self.streaming:
                    if body:
                        await self._write(body)
                    return
                if body:
                    if self.parts is None:
                        self.parts = [body]
                    else:
                        self.parts.append(body)
                if self.collect is None:
                    self.collect = _stream.declared_length(self.headers, b"content-length") or -1
                if not 0 <= self.collect <= _stream.COLLECT_MAX:
                    await self._begin()  # streaming switch point: chunked from here on
                return
            if self.streaming:
                if body:
                    await self._write(body)
                self._end()
                return
            self._answer(body)
        elif kind == "http.response.start":
            if self.status is not None:
                raise RuntimeError("Unexpected ASGI message 'http.response.start' sent, after response already started")
            status = message["status"]
            if type(status) is not int:
                raise TypeError(f"ASGI 'status' must be an int, got {status!r}")
            self.status = status
            self.headers = message.get("headers", ())
        else:
            raise RuntimeError(f"Unexpected ASGI message {kind!r} sent (HTTP)")

    async def _read(self, left: int) -> dict:
        """The next piece of a streamed request body (``ember_request_read``, waiting for
        the READABLE event when nothing is there yet)."""
        cap = _READ_MAX if left < 0 else min(left, _READ_MAX)
        if cap == 0:
            self.body = None
            return {"type": "http.request", "body": b"", "more_body": False}
        buf = bytearray(cap)
        view = (ctypes.c_char * cap).from_buffer(buf)
        n = ctypes.c_size_t()
        while True:
            rc = _stream.read(self.handle, view, cap, 0, ctypes.byref(n))
            if rc == _OK:
                got = n.value
                if got == 0:  # the end of a body of unknown length
                    self.body = None
                    return {"type": "http.request", "body": b"", "more_body": False}
                if left >= 0:
                    left -= got
                    self.body = left if left else None
                return {"type": "http.request", "body": bytes(buf[:got]) if got < cap else bytes(buf),
                        "more_body": left != 0}
            if rc != _stream.ERR_WOULD_BLOCK:
                # Too large (the engine answered 413), too slow (408), or the client left.
                log.debug("request body of %s %s ended: %s", self.scope["method"], self.scope["path"],
                          _lib.result_name(rc))
                self.body = None
                return {"type": "http.disconnect"}
            events = self.events
            if events is None:
                # Registered only now: data that came since the read raised no event, so
                # read once more before waiting for READABLE.
                events = self._listen()
                if not events.ended:
                    continue
            if events.ended:
                self.body = None
                return {"type": "http.disconnect"}
            waiter = events.readable = events.loop.create_future()
            await waiter

    def _head(self) -> bytes | None:
        lines: list = []
        count = 0
        for name, value in self.headers:
            lines += (name, b": ", value, b"\r\n")
            count += 1
        head = b"".join(lines)
        if head.count(b"\n") != count:
            # A line break inside a name or value would forge header lines.
            log.error("ASGI response header with a line break refused (%s %s)",
                      self.scope["method"], self.scope["path"])
            return None
        return head

    def _answer(self, body: Any) -> None:
        """The whole answer in one engine call (the common case)."""
        parts = self.parts
        if parts is not None:
            parts.append(body)
            body = b"".join(parts)
            self.parts = None
        elif type(body) is not bytes:
            body = bytes(body)
        self.done = True
        head = self._head()
        if head is None:
            _internal_error(self.handle)
            return
        n = len(body)
        if n < NOCOPY_MIN:
            rc = _respond(self.handle, self.status, head, len(head), body, n)
        else:
            rc = _send_any(self.handle, self.status, head, body)
        if rc != _OK:
            _refused(rc, self.handle, f"{self.scope['method']} {self.scope['path']}", log)
        self._wake()

    async def _begin(self) -> None:
        """Starts a streamed answer with what was collected so far."""
        head = self._head()
        if head is None:
            raise ValueError("ASGI response header with a line break")
        self._listen()
        rc = _stream.begin(self.handle, self.status, head, len(head))
        self.streaming = True
        if rc != _OK:
            self.done = True
            _refused(rc, self.handle, f"{self.scope['method']} {self.scope['path']}", log)
            self.events.gone = True
            self._wake()
            return
        parts, self.parts = self.parts, None
        for part in parts or ():
            await self._write(part)

    async def _write(self, chunk: Any) -> None:
        events = self.events
        if events.gone:
            return  # spec 2.3: the app is not told; it learns from http.disconnect
        if type(chunk) is not bytes:
            chunk = bytes(chunk)
        while True:
            rc = _stream.write(self.handle, chunk, len(chunk))
            if rc == _OK:
                return
            if rc != _stream.ERR_WOULD_BLOCK:
                events.gone = True
                self._wake()
                return
            # Backpressure: the engine's queue for this answer is full until WRITABLE.
            waiter = events.writable = events.loop.create_future()
            await waiter
            if events.gone:
                return

    def _end(self) -> None:
        self.done = True
        if not self.events.gone:
            rc = _stream.end(self.handle)
            if rc != _OK:
                _refused(rc, self.handle, f"{self.scope['method']} {self.scope['path']}", log)
        self._wake()

    def _listen(self) -> _Events:
        """Registers for the engine's events (once)."""
        events = self.events
        if events is None:
            events = self.events = _Events(asyncio.get_running_loop())
            rc = _stream.listen(self.handle, self._post)
            if rc != _OK:  # the request already ended: nobody is listening any more
                events.gone = events.ended = True
        return events

    def _post(self, event: int) -> None:
        # On an engine thread: over to the loop.
        try:
            self.events.loop.call_soon_threadsafe(self._on_event, event)
        except RuntimeError:  # the loop is closed: the server has stopped
            pass

    def _on_event(self, event: int) -> None:
        events = self.events
        if event == _stream.EVENT_WRITABLE or event == _stream.EVENT_READABLE:
            pass
        elif event == _stream.EVENT_ABORTED:
            events.gone = events.ended = True
        elif event == _stream.EVENT_COMPLETED:
            events.ended = True
        else:
            return
        for waiter in (events.writable, events.readable):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        if events.ended:
            self._wake()

    def _fail(self) -> None:
        self.done = True
        if self.streaming:
            # The head is out: no 500 any more. The stream is ended where it stands.
            if not self.events.gone:
                _stream.end(self.handle)
            return
        _internal_error(self.handle)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _LoggedHTTPCycle(_HTTPCycle):
    """With ``access_log``: a line per answer on the ``ember.access`` logger."""

    __slots__ = ()

    def _answer(self, body: Any) -> None:
        n = sum(map(len, self.parts or ())) + len(body)
        super()._answer(body)
        self._log(str(n))

    def _end(self) -> None:
        super()._end()
        self._log("streamed")

    def _log(self, size: str) -> None:
        scope = self.scope
        client = scope["client"] or ("-", 0)
        query = scope["query_string"]
        access.info('%s:%d - "%s %s%s HTTP/%s" %d %s', client[0], client[1], scope["method"],
                    scope["raw_path"].decode("latin-1"), "?" + query.decode("latin-1") if query else "",
                    scope["http_version"], self.status, size)


class _Lifespan:
    """The lifespan protocol: startup before the server listens, shutdown after it stopped."""

    def __init__(self, app: ASGIApp, state: dict, mode: str) -> None:
        self.app = app
        self.state = state
        self.mode = mode
        self.queue: asyncio.Queue | None = None
        self.started = self.finished = None
        self.startup_failed = self.shutdown_failed = False
        self.message = ""
        self.error: BaseException | None = None
        self.task: asyncio.Task | None = None
        self.unsupported = False

    async def _main(self) -> None:
        scope = {"type": "lifespan", "asgi": _LIFESPAN_ASGI, "state": self.state}
        try:
            await self.app(scope, self._receive, self._send)
        except BaseException as e:
            self.error = e
            if self.mode == "auto" and not self.started.is_set():
                self.unsupported = True
                log.info("ASGI 'lifespan' protocol appears unsupported (%s: %s)", type(e).__name__, e)
            else:
                log.error("Exception in 'lifespan' protocol", exc_info=e)
        finally:
            self.started.set()
            self.finished.set()

    async def _receive(self) -> dict:
        return await self.queue.get()

    async def _send(self, message: dict) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self.started.set()
        elif kind == "lifespan.startup.failed":
            self.startup_failed = True
            self.message = message.get("message", "")
            self.started.set()
        elif kind == "lifespan.shutdown.complete":
            self.finished.set()
        elif kind == "lifespan.shutdown.failed":
            self.shutdown_failed = True
            self.message = message.get("message", "")
            self.finished.set()
        else:
            raise RuntimeError(f"Unexpected ASGI message {kind!r} sent (lifespan)")

    async def startup(self) -> None:
        self.queue = asyncio.Queue()
        self.started = asyncio.Event()
        self.finished = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._main())
        await self.queue.put({"type": "lifespan.startup"})
        await self.started.wait()
        if self.startup_failed:
            raise LifespanFailure("the app's lifespan startup failed" + (f": {self.message}" if self.message else ""))
        if self.error is not None and not self.unsupported:
            raise LifespanFailure(f"the app's lifespan startup raised {type(self.error).__name__}: {self.error}")

    async def shutdown(self, timeout: float) -> None:
        if self.task is None or self.task.done() or self.unsupported:
            return
        await self.queue.put({"type": "lifespan.shutdown"})
        try:
            await asyncio.wait_for(self.finished.wait(), timeout)
        except asyncio.TimeoutError:
            log.warning("lifespan shutdown did not finish in %.1f s", timeout)
            self.task.cancel()
            return
        if self.shutdown_failed:
            log.error("the app's lifespan shutdown failed%s", f": {self.message}" if self.message else "")


class ASGIServer(AppServer):
    """Serves one ASGI 3 app.

    ``ASGIServer(app, host="127.0.0.1", port=8000, root_path="", lifespan="auto",
    dispatch="inline", workers=0, pool_threads=0, reuse_port=False, **limits)``

    ``lifespan``: ``"auto"`` (run it; an app that raises before answering startup does
    not support it), ``"on"`` (an error there stops the server), ``"off"``. ``dispatch``,
    ``workers`` (engine I/O threads) and the limits are ``ember.Server``'s. Requests start
    on the engine's threads; ``inline`` (the default) suits ASGI apps, which must not
    block anyway. ``start()`` / ``stop()`` / ``run()``.
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 8000, *, root_path: str = "",
                 lifespan: str = "auto", dispatch: str = "inline", workers: int = 0, pool_threads: int = 0,
                 reuse_port: bool = False, access_log: bool = False, **limits: Any) -> None:
        if lifespan not in ("auto", "on", "off"):
            raise ValueError("ember: lifespan is 'auto', 'on' or 'off'")
        self.app = app
        self.root_path = root_path.rstrip("/")
        self.lifespan_mode = lifespan
        self.state: dict = {}
        self._loop = BorrowableLoop()
        super().__init__(host, port, dispatch=dispatch, workers=workers, pool_threads=pool_threads,
                         reuse_port=reuse_port, access_log=access_log, loop=self._loop.loop, **limits)
        # Inline dispatch runs on the I/O threads: never wait there for the baton.
        self._block = dispatch != "inline"
        self._template = [self._scope_template(port)]
        self._lifespan: _Lifespan | None = None
        self._install(stream_bodies=True)

    def _scope_template(self, port: int) -> dict:
        return {"type": "http", "asgi": _HTTP_ASGI, "http_version": "1.1", "server": (self.host, port),
                "client": None, "scheme": "http", "method": "GET", "root_path": self.root_path,
                "path": "/", "raw_path": b"/", "query_string": b"", "headers": [], "state": None}

    def _listening(self, port: int) -> None:
        self._template[0] = self._scope_template(port)
        self.port = port

    def _make_callback(self) -> Callable[[int, int, int], None]:
        # Per request the scope starts as a copy of this template (cheaper than a literal).
        template = self._template
        root = self.root_path
        app = self.app
        state = self.state
        run = self._loop.run
        block = self._block
        unpack = INFO.unpack_from
        pairs = PAIR.iter_unpack
        pair_size = PAIR.size
        mem = MEM
        methods = METHODS
        versions = HTTP_VERSIONS
        cache = AddrCache()
        peers = cache._map  # looked up inline; AddrCache.get fills it
        clients = cache.get
        Cycle = _LoggedHTTPCycle if self.access_log else _HTTPCycle
        cycle_run = Cycle.run

        def on_request(_ud: int, handle: int, info: int) -> None:
            try:
                f = unpack(mem, info)
                p = f[I_METHOD]
                method = mem[p:p + f[I_METHOD + 1]].tobytes()
                p = f[I_PATH]
                raw_path = mem[p:p + f[I_PATH + 1]].tobytes()
                path = raw_path.decode("latin-1")
                if "%" in path:
                    path = _unquote(path)
                p, n = f[I_QUERY], f[I_QUERY + 1]
                p2, n2 = f[I_BODY], f[I_BODY + 1]
                p3, n3 = f[I_HEADERS], f[I_HEADERS + 1]
                scope = template[0].copy()
                scope["method"] = methods.get(method) or method.decode("latin-1")
                scope["path"] = root + path if root else path
                scope["raw_path"] = raw_path
                scope["query_string"] = mem[p:p + n].tobytes() if n else b""
                p = f[I_REMOTE]
                peer = mem[p:p + f[I_REMOTE + 1]].tobytes()
                client = peers.get(peer)
                scope["client"] = client if client is not None else clients(peer)
                scope["headers"] = [(mem[a:a + b].tobytes(), mem[c:c + d].tobytes())
                                    for a, b, c, d in pairs(mem[p3:p3 + pair_size * n3])] if n3 else []
                scope["state"] = state.copy()
                if f[I_VERSION] != 11:
                    scope["http_version"] = versions.get(f[I_VERSION], "1.1")
                if f[I_FLAGS] & REQUEST_BODY_STREAMED:
                    body = f[I_LENGTH]  # read in receive(); this much is declared (-1: unknown)
                else:
                    body = mem[p2:p2 + n2].tobytes() if n2 else b""
                run(cycle_run, Cycle(handle, body, scope), app, block=block)
            except BaseException:
                try:
                    log.exception("ember: ASGI request could not be started")
                    _internal_error(handle)
                except BaseException:
                    pass

        return on_request

    # -- lifecycle -------------------------------------------------------------------
    def _startup(self) -> None:
        self._loop.start()
        self._server._loop = self._loop.loop
        if self.lifespan_mode != "off":
            self._lifespan = _Lifespan(self.app, self.state, self.lifespan_mode)
            try:
                self._loop.call(self._lifespan.startup())
            except BaseException:
                self._loop.stop()
                raise

    def _shutdown(self, timeout: float) -> None:
        try:
            if self._lifespan is not None:
                self._loop.call(self._lifespan.shutdown(timeout), timeout + 1)
        except BaseException:
            log.exception("lifespan shutdown")
        finally:
            self._lifespan = None
            self._loop.stop()


def serve(app: ASGIApp, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
    """Runs ``app`` until SIGINT/SIGTERM (see ``ASGIServer`` for the options)."""
    ASGIServer(app, host, port, **options).run()
