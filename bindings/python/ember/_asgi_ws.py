"""The WebSocket side of the ASGI server (``ember.asgi``): the ``websocket`` scope and one
connection's ``receive`` / ``send``, on top of the binding's WebSocket layer
(``ember.websocket.AsyncWebSocket``, ``ember._wshub``).

The engine does the upgrade, the framing, ping/pong and the close handshake. Its open
callback (``ember_server_websocket`` on the same catch-all patterns as the HTTP route)
reaches ``_wshub``, which starts ``_WebSocketCycle.run`` as a task on the ASGI server's
loop (the one its HTTP requests borrow; a connection's task starts on the loop's thread). Messages from the engine's message callback wait in the
connection's inbox (bounded: ``max_queue`` / ``max_queue_bytes``; a peer that overruns it
while the app does not read is closed with 1008), handed over to the loop with
``call_soon_threadsafe``; ``websocket.send`` waits for the engine's writable notice while
the connection's send queue is full (``EMBER_ERR_WOULD_BLOCK``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import unquote as _unquote

from .errors import WebSocketClosed
from .response import Response
from .websocket import OPEN, OPENING, REFUSED, AsyncWebSocket

log = logging.getLogger("ember.asgi")

# "2.4": websocket.send on a closed connection raises an OSError subclass
# (ClientDisconnected), and websocket.disconnect carries the close reason.
WS_ASGI = {"version": "3.0", "spec_version": "2.4"}

#: The patterns the WebSocket endpoint is registered on (those of the HTTP route).
WS_PATTERNS = ("/", "/{*path}")

#: The bound on messages waiting for the app (``Endpoint.max_queue`` / ``max_queue_bytes``).
#: The engine cannot pause reading one connection, so a client that sends faster than the
#: app reads fills this queue, and one that overruns it is closed with 1008. ASGI clients
#: commonly send many small messages ahead of the replies (the servers they know stop
#: reading the socket instead): the bound is set by bytes, with a count far above the
#: binding's default of 1024.
WS_MAX_QUEUE = 65536
WS_MAX_QUEUE_BYTES = 16 << 20


class ClientDisconnected(OSError):
    """``websocket.send`` after the connection closed (ASGI spec 2.4: an OSError)."""


def _text_headers(headers: Any) -> list[tuple[str, str]]:
    # ASGI headers are bytes pairs; the binding's header writer takes text (and writes it
    # as UTF-8: ASCII, what header names and nearly all values are, goes out unchanged).
    out = []
    for name, value in headers or ():
        out.append((name.decode("latin-1") if isinstance(name, (bytes, bytearray)) else str(name),
                    value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else str(value)))
    return out


def _ended(ws: AsyncWebSocket) -> WebSocketClosed:
    # Raised out of the handler once the cycle has ended the connection itself: the
    # hub's runner (_wshub._run_async) then leaves it alone (no second close or refusal).
    return WebSocketClosed(ws.close_code or 1000, ws.close_reason, call="asgi")


class _WebSocketCycle:
    """One WebSocket connection: the ASGI app's ``receive`` and ``send``."""

    __slots__ = ("ws", "scope", "connected", "disconnected", "denial", "denial_body")

    def __init__(self, ws: AsyncWebSocket, scope: dict) -> None:
        self.ws = ws
        self.scope = scope
        self.connected = False       # websocket.connect delivered
        self.disconnected = False    # websocket.disconnect delivered
        self.denial: tuple | None = None  # websocket.http.response.start: (status, headers)
        self.denial_body: list = []

    async def run(self, app: Any) -> None:
        ws = self.ws
        try:
            result = await app(self.scope, self.receive, self.send)
        except asyncio.CancelledError:
            raise
        except BaseException:
            log.exception("Exception in ASGI application (websocket %s)", self.scope["path"])
            try:
                ws._end(failed=True)
            except BaseException:
                pass
            raise _ended(ws)
        if result is not None:
            log.error("ASGI callable should return None, but returned %r", result)
        try:
            # Returned without accepting: refused, as websocket.close would have.
            ws._end(failed=False)
        except BaseException:
            log.exception("ember: ending an ASGI WebSocket failed")
        raise _ended(ws)

    async def receive(self) -> dict:
        if not self.connected:
            self.connected = True
            return {"type": "websocket.connect"}
        ws = self.ws
        if self.disconnected or ws.state == REFUSED:
            return {"type": "websocket.disconnect", "code": ws.close_code or 1006,
                    "reason": ws.close_reason}
        if ws.state == OPENING:
            # Waiting for a message before accepting: nothing can come until the app
            # accepts (or the connection goes).
            await ws.wait_closed()
        try:
            message = await ws.receive()
        except WebSocketClosed as e:
            self.disconnected = True
            return {"type": "websocket.disconnect", "code": e.close_code or 1005, "reason": e.reason or ""}
        if type(message) is str:
            return {"type": "websocket.receive", "text": message}
        return {"type": "websocket.receive", "bytes": message}

    async def send(self, message: dict) -> None:
        kind = message["type"]
        ws = self.ws
        if kind == "websocket.send":
            if ws.state == OPENING:
                raise RuntimeError("Expected ASGI message 'websocket.accept' or 'websocket.close', "
                                   "but got 'websocket.send'")
            data = message.get("bytes")
            if data is None:
                data = message.get("text")
                if data is None:
                    raise TypeError("ASGI 'websocket.send' needs 'bytes' or 'text'")
            if ws.state != OPEN:
                raise ClientDisconnected(f"the WebSocket is {ws.state}")
            try:
                await ws.send(data)
            except WebSocketClosed as e:
                raise ClientDisconnected(str(e)) from None
        elif kind == "websocket.accept":
            if ws.state != OPENING:
                raise RuntimeError(f"Unexpected ASGI message 'websocket.accept': the WebSocket is {ws.state}")
            try:
                ws._accept(message.get("subprotocol"), _text_headers(message.get("headers")))
            except WebSocketClosed as e:
                raise ClientDisconnected(str(e)) from None
        elif kind == "websocket.close":
            if ws.state == OPENING:
                ws._refuse(403, b"", None)  # the spec: close before accept is a 403
            elif ws.state == OPEN:
                ws._close(message.get("code") or 1000, message.get("reason") or "")
            # already closed (or refused): nothing left to do
        elif kind == "websocket.http.response.start":
            if ws.state != OPENING or self.denial is not None:
                raise RuntimeError("Unexpected ASGI message 'websocket.http.response.start'")
            self.denial = (int(message["status"]), _text_headers(message.get("headers")))
        elif kind == "websocket.http.response.body":
            if self.denial is None or ws.state != OPENING:
                raise RuntimeError("Unexpected ASGI message 'websocket.http.response.body'")
            self.denial_body.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                status, headers = self.denial
                ws._refuse(status, Response(b"".join(self.denial_body), status, headers), None)
        else:
            raise RuntimeError(f"Unexpected ASGI message {kind!r} sent (websocket)")


def make_ws_handler(server: Any) -> Any:
    """The async WebSocket handler (``ember.Server.websocket``) that runs ``server.app``
    with a ``websocket`` scope built like the HTTP one."""
    root = server.root_path
    app = server.app

    async def handler(ws: AsyncWebSocket) -> None:
        request = ws.request
        raw = request.raw_path
        path = _unquote(raw) if "%" in raw else raw
        host, port = server.host, server.port
        peer = request.remote_addr
        client = None
        if peer:
            h, _, p = peer.rpartition(":")
            client = (h.strip("[]"), int(p)) if p.isdigit() else (peer, 0)
        scope = {
            "type": "websocket", "asgi": WS_ASGI, "http_version": request.http_version,
            "scheme": "ws", "server": (host, port), "client": client, "root_path": root,
            "path": root + path if root else path, "raw_path": raw.encode("utf-8"),
            "query_string": request.query_string.encode("utf-8"), "headers": list(request.raw_headers),
            "subprotocols": ws.subprotocols, "state": server.state.copy(),
            "extensions": {"websocket.http.response": {}},
        }
        await _WebSocketCycle(ws, scope).run(app)

    return handler


__all__ = ["ClientDisconnected", "WS_ASGI", "WS_PATTERNS", "make_ws_handler"]
