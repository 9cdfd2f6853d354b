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
- WebSocket (``_asgi_ws.py``): the engine's open callback (``ember_server_websocket`` on
  the same catch-all patterns as the HTTP route, through the binding's WebSocket layer,
  ``_wshub`` / ``websocket.AsyncWebSocket``) builds a ``websocket`` scope and runs a
  ``_WebSocketCycle`` as a task on the server's loop: ``websocket.connect`` first;
  ``websocket.accept`` -> ``ember_ws_accept`` (subprotocol and headers);
  ``websocket.close`` before accepting -> a 403 answer to the upgrade request; messages
  from the engine's message callback wait in the connection's bounded inbox and reach the
  loop through ``call_soon_threadsafe``; ``websocket.send`` -> ``ember_ws_send``, waiting
  for the writable notice on ``EMBER_ERR_WOULD_BLOCK``; the close callback delivers
  ``websocket.disconnect`` with its code and reason.
"""

from __future__ import annotations

import asyncio
import logging
import types
from typing import Any, Callable
from urllib.parse import unquote as _unquote

from . import _crossing, _lib
from ._asgi_http import ASGIApp, FastCycle, _LoggedHTTPCycle
from ._asgi_ws import WS_MAX_QUEUE, WS_MAX_QUEUE_BYTES, WS_PATTERNS, make_ws_handler
from ._host import AppServer, internal_error as _internal_error
from ._loop import BorrowableLoop
from ._wire import HTTP_VERSIONS, INFO, MEM, METHODS, REQUEST_BODY_STREAMED, AddrCache, picked, text_parts_slow

# What a request needs of the info struct, unpacked in one call (the rest is skipped).
_INFO, _AT = picked("method_ptr", "method_len", "body_ptr", "body_len", "header_count", "http_version",
                    "content_length", "flags", "peer_ptr", "peer_len")
I_METHOD, I_BODY, I_HEADER_COUNT, I_VERSION = _AT["method_ptr"], _AT["body_ptr"], _AT["header_count"], _AT["http_version"]
I_LENGTH, I_FLAGS, I_PEER = _AT["content_length"], _AT["flags"], _AT["peer_ptr"]

log = logging.getLogger("ember.asgi")

# The info struct's fields that _speedups_scope.c reads, as byte offsets (its F_* order),
# then the end of the last one (an engine's struct must be at least that long).
_OFFSET_FIELDS = ("size", "method_ptr", "method_len", "path_ptr", "path_len", "query_ptr", "query_len",
                  "body_ptr", "body_len", "headers", "header_count", "http_version", "content_length", "flags",
                  "peer_ptr", "peer_len")
_INFO_OFFSETS = tuple(getattr(_lib.RequestInfo, f).offset for f in _OFFSET_FIELDS) + (
    max(getattr(_lib.RequestInfo, f).offset + getattr(_lib.RequestInfo, f).size for f in _OFFSET_FIELDS),)


def _start_failed(handle: int, exc: BaseException) -> None:
    """The C crossing's request start raised (``on_request``'s except clause)."""
    try:
        log.error("ember: ASGI request could not be started", exc_info=exc)
        _internal_error(handle)
    except BaseException:
        pass

Coroutine = types.CoroutineType


async def _awaiting(awaitable: Any) -> Any:
    return await awaitable

# "2.3": send() does not raise when the client has gone. With the engine's abort notice
# (streaming ABI) this becomes "2.4".
_HTTP_ASGI = {"version": "3.0", "spec_version": "2.3"}

_LIFESPAN_ASGI = {"version": "3.0", "spec_version": "2.0"}


class LifespanFailure(RuntimeError):
    """The app's lifespan startup failed: the server does not start."""


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
    dispatch="auto", workers=0, pool_threads=0, reuse_port=False, **limits)``

    ``lifespan``: ``"auto"`` (run it; an app that raises before answering startup does
    not support it), ``"on"`` (an error there stops the server), ``"off"``. ``dispatch``,
    ``workers`` (engine I/O threads) and the limits are ``ember.Server``'s. Requests start
    on the engine's threads; ``auto`` (the default) runs them on the I/O thread like
    ``inline`` (ASGI apps await rather than block), and a sync call that does block in
    the app holds only its own connection. ``start()`` / ``stop()`` / ``run()``.
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 8000, *, root_path: str = "",
                 lifespan: str = "auto", dispatch: str = "auto", workers: int = 0, pool_threads: int = 0,
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
        # Inline and auto dispatch run on the I/O threads: never wait there for the baton.
        self._block = dispatch == "pool"
        self._template = [self._scope_template(port)]
        self._lifespan: _Lifespan | None = None
        self._install(stream_bodies=True)
        # WebSocket upgrades on the same paths (the engine tells them from plain requests).
        ws_handler = make_ws_handler(self)
        for pattern in WS_PATTERNS:
            self._server.websocket(pattern, ws_handler, max_queue=WS_MAX_QUEUE,
                                   max_queue_bytes=WS_MAX_QUEUE_BYTES)

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
        drive = self._loop.drive
        block = self._block
        unpack = _INFO.unpack_from
        full = INFO.unpack_from
        mem = MEM
        methods = METHODS
        versions = HTTP_VERSIONS
        cache = AddrCache()
        peers = cache._map  # looked up inline; AddrCache.get fills it
        clients = cache.get
        Cycle = _LoggedHTTPCycle if self.access_log else FastCycle
        slow_parts = text_parts_slow
        new = Cycle.__new__  # object.__new__, or the C crossing's Cycle's

        def on_request(_ud: int, handle: int, info: int) -> None:
            try:
                f = unpack(mem, info)
                # The text views in one copy, split at their NULs (_wire.text_parts, inline).
                hc = f[I_HEADER_COUNT]
                start = f[I_METHOD]
                end = f[I_PEER] + f[I_PEER + 1] + 1
                parts = mem[start:end].tobytes().split(b"\0", 5 + 2 * hc) if end > start else ()
                if len(parts) != 6 + 2 * hc or len(parts[0]) != f[I_METHOD + 1]:
                    parts = slow_parts(full(mem, info))
                method = parts[0]
                raw_path = parts[1]
                path = raw_path.decode("latin-1")
                if "%" in path:
                    path = _unquote(path)
                scope = template[0].copy()
                scope["method"] = methods.get(method) or method.decode("latin-1")
                scope["path"] = root + path if root else path
                scope["raw_path"] = raw_path
                scope["query_string"] = parts[2]
                peer = parts[3]
                client = peers.get(peer)
                scope["client"] = client if client is not None else clients(peer)
                if hc:
                    it = iter(parts[5:-1])
                    scope["headers"] = list(zip(it, it))
                else:
                    scope["headers"] = []
                scope["state"] = state.copy()
                if f[I_VERSION] != 11:
                    scope["http_version"] = versions.get(f[I_VERSION], "1.1")
                if f[I_FLAGS] & REQUEST_BODY_STREAMED:
                    body = f[I_LENGTH]  # read in receive(); this much is declared (-1: unknown)
                else:
                    n = f[I_BODY + 1]
                    body = mem[f[I_BODY]:f[I_BODY] + n].tobytes() if n else b""
                # Its three fields set here: no __init__ frame (about 1,000 instructions).
                cycle = new(Cycle)
                cycle.handle = handle
                cycle.body = body
                cycle.scope = scope
                coro = app(scope, cycle.receive, cycle.send)
                if type(coro) is not Coroutine:  # another awaitable: stepped through a coroutine
                    coro = _awaiting(coro)
                drive(coro, cycle, block)
            except BaseException:
                try:
                    log.exception("ember: ASGI request could not be started")
                    _internal_error(handle)
                except BaseException:
                    pass

        if Cycle is FastCycle and _crossing.speedups is not None:
            # The C crossing: the same steps in C (_speedups_scope.c), this function as
            # its fallback for an engine whose info struct lacks fields it reads.
            return _crossing.speedups.AsgiStart(
                app, template, root, state, drive, block, Cycle, peers, clients, _unquote, _awaiting,
                _start_failed, on_request, _INFO_OFFSETS)
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
