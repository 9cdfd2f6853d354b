"""WebSocket endpoints: ``@app.websocket(path)``, in an async or a sync (callback) form.

The engine does the protocol (upgrade, framing, fragments, UTF-8 checks, ping/pong, the
close handshake, limits); Python sees whole messages: ``str`` for text, ``bytes`` for
binary. Per connection, callbacks arrive one at a time, in order (open, messages,
close). Every connection of an endpoint is in the group named by its path pattern;
``app.broadcast(group, message)`` sends one frame, encoded once, to a whole group.

Async form: the handler is a coroutine function taking an ``AsyncWebSocket``::

    @app.websocket("/ws")
    async def echo(ws):
        await ws.accept()                 # optional: the first receive/send accepts
        async for message in ws:          # ends when the connection closes
            await ws.send(message)        # waits while the send queue is full

- ``await ws.refuse(status=403)`` (before accepting) answers the upgrade request with an
  HTTP status instead; returning without accepting refuses with 403; raising refuses
  with 500 before the accept and closes with 1011 after it. Returning closes with 1000.
- ``await ws.receive()`` raises ``WebSocketClosed`` (``.close_code``, ``.reason``) once
  the connection is closed; ``async for`` just ends.
- ``await ws.send(message)``: backpressure: when the engine's queue for the connection is
  full (``ws_queue_bytes``, default 1 MiB), it waits for the engine's writable notice;
  ``WebSocketClosed`` when the connection is closed.
- ``await ws.close(code=1000, reason="")`` starts the closing handshake;
  ``await ws.wait_closed()`` waits for its end.
- Received messages wait for the handler in a queue of at most ``max_queue`` messages /
  ``max_queue_bytes`` bytes (endpoint options, defaults 1024 and 16 MiB). A peer that
  overruns it while the handler is not reading is closed with 1008: memory stays
  bounded whatever the client sends.
- The coroutine is not cancelled when the peer leaves: its receive/iteration ends, its
  sends raise. ``ws.closed`` tells.

Sync form: callbacks on engine threads (like sync handlers; under inline dispatch they
must not block)::

    def on_message(ws, message):
        if not ws.send(message):          # False: the queue is full, nothing was sent
            ...                           # keep it and retry in on_writable(ws)

    app.websocket("/echo", on_open=None, on_message=on_message, on_close=None,
                  on_writable=None)

- ``on_open(ws)``: return False (or call ``ws.refuse(status)``) to refuse; raising
  refuses with 500. Without ``on_open`` every upgrade is accepted. ``ws.accept(
  subprotocol=...)`` inside it picks a subprotocol.
- ``on_message(ws, message)``; raising closes the connection with 1011.
- ``on_close(ws, code, reason)``: once per accepted connection.
- ``ws.send(message)`` never blocks: True when queued, False when the queue is full
  (nothing sent; ``on_writable(ws)`` follows once it has drained), ``WebSocketClosed`` when
  the connection is closed. Blocking would not help: the writable notice for this
  connection cannot run while its own callback waits for it.

Both forms: ``ws.id`` (the engine's handle), ``ws.request`` (the upgrade request: path,
params, headers, query), ``ws.subprotocols`` (offered), ``ws.join(group)``,
``ws.leave(group)``, ``ws.buffered`` (bytes queued to send). ``send``, ``close``,
``join``, ``leave`` and ``app.broadcast`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import inspect
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

from . import _lib
from .errors import EmberError, WebSocketClosed
from .request import Request
from .response import _head

if TYPE_CHECKING:
    from ._wshub import WsHub

log = logging.getLogger("ember")

L = _lib.lib
_OK = _lib.OK

OPENING, OPEN, CLOSED, REFUSED = "opening", "open", "closed", "refused"

#: How long a message callback waits for a caught-up coroutine to take its message (s).
HANDOVER_WAIT = 0.005


def encode_message(message: Any) -> tuple[int, bytes]:
    """(kind, payload): ``str`` is a text message, bytes-like a binary one."""
    t = type(message)
    if t is str:
        return _lib.WS_TEXT, message.encode("utf-8")
    if t is bytes:
        return _lib.WS_BINARY, message
    if isinstance(message, (bytearray, memoryview)):
        return _lib.WS_BINARY, bytes(message)
    raise TypeError(f"ember: a WebSocket message is str (text) or bytes (binary), not {t.__name__}")


class Endpoint:
    """A registered WebSocket path (kept in the server's callback table)."""

    __slots__ = ("pattern", "handler", "on_open", "on_message", "on_close", "on_writable", "is_async",
                 "max_queue", "max_queue_bytes")

    def __init__(self, pattern: str, handler: Callable | None, on_open: Callable | None,
                 on_message: Callable | None, on_close: Callable | None, on_writable: Callable | None,
                 max_queue: int, max_queue_bytes: int) -> None:
        if handler is not None:
            if not (inspect.iscoroutinefunction(handler)
                    or inspect.iscoroutinefunction(getattr(handler, "__call__", None))):
                raise TypeError("ember: a WebSocket handler is an async def taking the connection; "
                                "for callbacks use on_open=, on_message=, on_close=")
            if on_open or on_message or on_close or on_writable:
                raise TypeError("ember: give either an async handler or callbacks, not both")
        elif on_message is None:
            raise TypeError("ember: a WebSocket endpoint needs an async handler or on_message")
        for fn in (on_open, on_message, on_close, on_writable):
            if fn is not None and not callable(fn):
                raise TypeError(f"ember: {fn!r} is not callable")
        if max_queue < 1 or max_queue_bytes < 1:
            raise ValueError("ember: max_queue and max_queue_bytes must be at least 1")
        self.pattern = pattern
        self.handler = handler
        self.on_open = on_open
        self.on_message = on_message
        self.on_close = on_close
        self.on_writable = on_writable
        self.is_async = handler is not None
        self.max_queue = max_queue
        self.max_queue_bytes = max_queue_bytes


class _WsBase:
    __slots__ = ("id", "request", "endpoint", "state", "close_code", "close_reason", "_hub", "__weakref__")

    def __init__(self, ws_id: int, request: Request, endpoint: Endpoint, hub: "WsHub") -> None:
        self.id = ws_id
        #: The upgrade request (its fields are copied: valid for the connection's life).
        self.request = request
        self.endpoint = endpoint
        #: "opening", "open", "closed" or "refused".
        self.state = OPENING
        self.close_code: int | None = None
        self.close_reason = ""
        self._hub = hub

    @property
    def closed(self) -> bool:
        return self.state == CLOSED or self.state == REFUSED

    @property
    def subprotocols(self) -> list[str]:
        """The subprotocols the client offered (Sec-WebSocket-Protocol), in its order."""
        out = []
        for value in self.request.headers.get_all("sec-websocket-protocol"):
            out += [p.strip() for p in value.split(",") if p.strip()]
        return out

    def _accept(self, subprotocol: str | None, headers: Any) -> None:
        if self.state != OPENING:
            raise EmberError(_lib.ERR_ALREADY_ANSWERED, f"the WebSocket is already {self.state}", "accept")
        items = list(headers.items() if hasattr(headers, "items") else headers or ())
        if subprotocol is not None:
            items.append(("Sec-WebSocket-Protocol", subprotocol))
        head = _head(items, None)
        rc = L.ember_ws_accept(self.id, head, len(head))
        if rc != _OK:
            msg = _lib.last_error()
            if rc in (_lib.ERR_CLIENT_GONE, _lib.ERR_TIMED_OUT, _lib.ERR_INVALID_HANDLE):
                self._hub.forget(self, REFUSED)
                raise WebSocketClosed(1006, msg, rc, "accept")
            raise EmberError(rc, msg, "accept")
        self.state = OPEN

    def _refuse(self, status: int, body: Any, headers: Any) -> None:
        if self.state != OPENING:
            raise EmberError(_lib.ERR_ALREADY_ANSWERED, f"the WebSocket is already {self.state}", "refuse")
        from .response import Response
        r = body if isinstance(body, Response) else Response(body, status, headers)
        self._hub.forget(self, REFUSED)
        rc = L.ember_request_respond(self.request.handle, r.status, r._head, len(r._head), r.body, len(r.body))
        if rc != _OK and rc not in (_lib.ERR_CLIENT_GONE, _lib.ERR_TIMED_OUT, _lib.ERR_ALREADY_ANSWERED):
            log.error("ember: refusing a WebSocket upgrade failed: %s: %s", _lib.result_name(rc), _lib.last_error())

    def _end(self, failed: bool) -> None:
        """Ends the connection after its handler returned (refused 403 if it never
        accepted, else closed 1000) or raised (500, 1011). May raise like _refuse/_close."""
        if self.state == OPENING:
            self._refuse(500 if failed else 403, b"Internal Server Error" if failed else b"", None)
        elif self.state == OPEN:
            self._close(1011 if failed else 1000, "")

    def _close(self, code: int, reason: str) -> None:
        raw = reason.encode("utf-8")
        rc = L.ember_ws_close(self.id, code, raw, len(raw))
        if rc == _lib.ERR_INVALID_ARG:
            raise ValueError(f"ember: {_lib.last_error()}")
        if rc != _OK and rc not in (_lib.ERR_CLIENT_GONE, _lib.ERR_INVALID_HANDLE):
            raise EmberError(rc, _lib.last_error(), "close")

    def _send_raw(self, message: Any) -> int:
        kind, data = encode_message(message)
        return L.ember_ws_send(self.id, kind, data, len(data))

    def _gone(self, rc: int, call: str) -> EmberError:
        msg = _lib.last_error()
        if rc in (_lib.ERR_CLIENT_GONE, _lib.ERR_INVALID_HANDLE):
            return WebSocketClosed(self.close_code or 1006, self.close_reason, rc, call)
        if rc == _lib.ERR_STATE:
            return EmberError(rc, "accept the WebSocket before sending", call)
        return EmberError(rc, msg, call)

    def join(self, group: str) -> None:
        """Adds the connection to ``group``: ``app.broadcast(group, ...)`` reaches it."""
        rc = L.ember_ws_join(self.id, group.encode("utf-8"))
        if rc != _OK:
            raise self._gone(rc, "join")

    def leave(self, group: str) -> None:
        """Removes the connection from ``group`` (no error if it was not in it)."""
        rc = L.ember_ws_leave(self.id, group.encode("utf-8"))
        if rc != _OK:
            raise self._gone(rc, "leave")

    @property
    def buffered(self) -> int:
        """Bytes queued for the connection and not yet written (0 once closed)."""
        n = ctypes.c_size_t()
        rc = L.ember_ws_buffered(self.id, ctypes.byref(n))
        return n.value if rc == _OK else 0

    # -- engine callbacks, on engine threads ---------------------------------------------
    def _received(self, message: Any, size: int) -> None:
        raise NotImplementedError

    def _ended(self, code: int, reason: str) -> None:
        self.state = CLOSED
        self.close_code = code
        self.close_reason = reason

    def _writable(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id:#x} {self.request.raw_path} {self.state}>"


class WebSocket(_WsBase):
    """A connection of a sync (callback) endpoint. See the module doc."""

    __slots__ = ()

    def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        """Accepts the upgrade (in ``on_open``; otherwise done after it)."""
        self._accept(subprotocol, headers)

    def refuse(self, status: int = 403, body: Any = b"", headers: Any = None) -> None:
        """Answers the upgrade request with ``status`` instead of accepting it."""
        self._refuse(status, body, headers)

    def send(self, message: Any) -> bool:
        """Queues one message (``str`` text, ``bytes`` binary); never blocks. False: the
        queue is full, nothing was sent, ``on_writable`` follows. ``WebSocketClosed``
        once closed."""
        rc = self._send_raw(message)
        if rc == _OK:
            return True
        if rc == _lib.ERR_WOULD_BLOCK:
            return False
        raise self._gone(rc, "send")

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Starts the closing handshake (queued messages go first); ``on_close`` follows."""
        self._close(code, reason)

    def _received(self, message: Any, size: int) -> None:
        try:
            self.endpoint.on_message(self, message)
        except BaseException:
            log.exception("ember: WebSocket on_message for %s raised; closing with 1011", self.request.raw_path)
            try:
                self._close(1011, "")
            except BaseException:
                pass

    def _ended(self, code: int, reason: str) -> None:
        super()._ended(code, reason)
        fn = self.endpoint.on_close
        if fn is not None:
            try:
                fn(self, code, reason)
            except BaseException:
                log.exception("ember: WebSocket on_close for %s raised", self.request.raw_path)

    def _writable(self) -> None:
        fn = self.endpoint.on_writable
        if fn is not None:
            try:
                fn(self)
            except BaseException:
                log.exception("ember: WebSocket on_writable for %s raised", self.request.raw_path)


class AsyncWebSocket(_WsBase):
    """A connection of an async endpoint, used from its coroutine. See the module doc."""

    __slots__ = ("loop", "_lock", "_inbox", "_inbox_bytes", "_reader", "_writer", "_done")

    def __init__(self, ws_id: int, request: Request, endpoint: Endpoint, hub: "WsHub",
                 loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(ws_id, request, endpoint, hub)
        self.loop = loop
        self._lock = threading.Lock()
        self._inbox: collections.deque = collections.deque()
        self._inbox_bytes = 0
        self._reader: asyncio.Future | None = None  # set while receive() waits
        self._writer: asyncio.Future | None = None  # set while send() waits for room
        self._done: asyncio.Future | None = None

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        """Accepts the upgrade, with ``subprotocol`` (one the client offered) if given."""
        self._accept(subprotocol, headers)

    async def refuse(self, status: int = 403, body: Any = b"", headers: Any = None) -> None:
        """Answers the upgrade request with ``status`` instead of accepting it."""
        self._refuse(status, body, headers)

    async def receive(self) -> Any:
        """The next message (``str`` or ``bytes``); ``WebSocketClosed`` once closed and
        every received message was taken."""
        if self.state == OPENING:
            self._accept(None, None)
        while True:
            with self._lock:
                if self._inbox:
                    message, size, done = self._inbox.popleft()
                    self._inbox_bytes -= size
                    if done is not None:
                        self.loop.call_soon(done.set)  # runs once this step has ended
                    return message
                if self.state != OPEN:
                    raise WebSocketClosed(self.close_code or 1006, self.close_reason, _lib.ERR_CLIENT_GONE, "receive")
                fut = self._reader = self.loop.create_future()
            await fut

    def __aiter__(self) -> "AsyncWebSocket":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except WebSocketClosed:
            raise StopAsyncIteration from None

    async def send(self, message: Any) -> None:
        """Sends one message, waiting while the connection's queue is full;
        ``WebSocketClosed`` once closed."""
        if self.state == OPENING:
            self._accept(None, None)
        while True:
            rc = self._send_raw(message)
            if rc == _OK:
                return
            if rc != _lib.ERR_WOULD_BLOCK:
                raise self._gone(rc, "send")
            # The writable notice comes through call_soon_threadsafe: it cannot reach the
            # loop before this future exists (no await in between).
            fut = self._writer
            if fut is None or fut.done():
                fut = self._writer = self.loop.create_future()
            await fut

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Starts the closing handshake (queued messages go first)."""
        if self.state == OPENING:
            self._refuse(403, b"", None)
            return
        self._close(code, reason)

    async def wait_closed(self) -> None:
        """Waits until the connection is closed (or the upgrade refused)."""
        if self.closed:
            return
        if self._done is None:
            self._done = self.loop.create_future()
        await asyncio.shield(self._done)

    # -- engine callbacks (engine threads) -------------------------------------------------
    def _received(self, message: Any, size: int) -> None:
        ep = self.endpoint
        done = None
        with self._lock:
            if self._inbox and (len(self._inbox) >= ep.max_queue or self._inbox_bytes + size > ep.max_queue_bytes):
                overflow = True
            else:
                overflow = False
                if not self._inbox:
                    done = threading.Event()  # the coroutine is caught up: see below
                self._inbox.append((message, size, done))
                self._inbox_bytes += size
                fut, self._reader = self._reader, None
        if overflow:
            log.warning("ember: WebSocket %s: the handler is not reading (%d messages waiting); closing "
                        "with 1008", self.request.raw_path, len(self._inbox))
            try:
                self._close(1008, "receive queue full")
            except BaseException:
                pass
            return
        if fut is not None:
            self._post(self._wake, fut)
        if done is not None:
            # The engine counts a message as with the host once this callback returns,
            # and answers a peer's close only after that (RFC 6455 lets the close wait
            # for replies). A coroutine that has read everything before takes this
            # message at once, so the callback waits for that (at most HANDOVER_WAIT):
            # a reply it sends in the same step then goes out before the close. One that
            # is behind is not waited for.
            done.wait(HANDOVER_WAIT)

    def _ended(self, code: int, reason: str) -> None:
        with self._lock:
            super()._ended(code, reason)
            reader, self._reader = self._reader, None
        self._post(self._wake_all, reader)

    def _writable(self) -> None:
        self._post(self._wake_writer)

    def _post(self, fn: Callable, *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the server stopped
            pass

    # -- on the loop -----------------------------------------------------------------------
    @staticmethod
    def _wake(fut: asyncio.Future | None) -> None:
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _wake_writer(self) -> None:
        fut, self._writer = self._writer, None
        self._wake(fut)

    def _wake_all(self, reader: asyncio.Future | None) -> None:
        self._wake(reader)
        self._wake_writer()
        self._wake(self._done)

