"""A server's WebSocket side: the four C callbacks every endpoint shares, the table of
live connections they dispatch to, the async handler's runner, and broadcast (see
``ember.websocket`` for the user's side)."""

from __future__ import annotations

import asyncio
import ctypes
import logging
from typing import Any

from . import _lib
from .errors import EmberError, WebSocketClosed
from .request import Request
from .websocket import OPENING, AsyncWebSocket, Endpoint, WebSocket, _WsBase, encode_message

log = logging.getLogger("ember")

L = _lib.lib
_OK = _lib.OK


async def _run_async(ws: AsyncWebSocket) -> None:
    try:
        await ws.endpoint.handler(ws)
    except WebSocketClosed:
        return
    except asyncio.CancelledError:
        raise
    except BaseException:
        log.exception("ember: WebSocket handler for %s raised", ws.request.raw_path)
        try:
            ws._end(failed=True)
        except BaseException:
            pass
        return
    try:
        ws._end(failed=False)
    except BaseException:
        log.exception("ember: ending a WebSocket failed")


class WsHub:
    """A server's WebSocket endpoints and live connections, and the four C callbacks
    they all share (the endpoint's number is the callbacks' user_data)."""

    def __init__(self, table: list, runner: Any) -> None:
        self.table = table
        self.runner = runner
        self.conns: dict[int, _WsBase] = {}
        self.callbacks = (_lib.WS_OPEN_FN(self._on_open), _lib.WS_MESSAGE_FN(self._on_message),
                          _lib.WS_CLOSE_FN(self._on_close), _lib.WS_WRITABLE_FN(self._on_writable))
        self.handlers = _lib.WsHandlers(ctypes.sizeof(_lib.WsHandlers), *self.callbacks)

    def register(self, server_ptr: Any, endpoint: Endpoint, release_cb: Any, pattern: bytes) -> None:
        slot = len(self.table)
        self.table.append(endpoint)
        rc = L.ember_server_websocket(server_ptr, pattern, ctypes.byref(self.handlers), slot, release_cb)
        if rc != _OK:
            self.table[slot] = None  # on failure the engine took nothing
            raise EmberError(rc, _lib.last_error(), f"websocket {endpoint.pattern}")

    def forget(self, ws: _WsBase, state: str) -> None:
        ws.state = state
        self.conns.pop(ws.id, None)

    def _on_open(self, slot: int, ws_id: int, info: int) -> None:
        request = ws = None
        try:
            endpoint = self.table[slot]
            request = Request(0, info)
            request.handle = request._fields()[1]
            request._detach()
            if endpoint.is_async:
                ws = AsyncWebSocket(ws_id, request, endpoint, self, self.runner.loop)
                self.conns[ws_id] = ws
                self.runner.spawn(_run_async, ws)
                return
            ws = WebSocket(ws_id, request, endpoint, self)
            self.conns[ws_id] = ws
            verdict = endpoint.on_open(ws) if endpoint.on_open is not None else None
            if ws.state == OPENING:
                if verdict is False:
                    ws._refuse(403, b"", None)
                else:
                    ws._accept(None, None)
        except BaseException:
            log.exception("ember: WebSocket on_open raised; refusing with 500")
            try:
                if ws is not None and ws.state == OPENING:
                    ws._refuse(500, b"Internal Server Error", None)
                elif ws is None and request is not None:
                    L.ember_request_respond(request.handle, 500, b"", 0, b"", 0)
            except BaseException:
                pass

    def _on_message(self, _slot: int, ws_id: int, kind: int, data: int | None, n: int) -> None:
        try:
            ws = self.conns.get(ws_id)
            if ws is None:
                return
            payload = _lib.string_at(data, n) if n else b""
            ws._received(payload.decode("utf-8") if kind == _lib.WS_TEXT else payload, n)
        except BaseException:
            log.exception("ember: WebSocket message delivery failed")

    def _on_close(self, _slot: int, ws_id: int, code: int, reason: int | None, n: int) -> None:
        try:
            ws = self.conns.pop(ws_id, None)
            if ws is not None:
                text = _lib.string_at(reason, n).decode("utf-8", "replace") if n else ""
                ws._ended(code, text)
        except BaseException:
            log.exception("ember: WebSocket close delivery failed")

    def _on_writable(self, _slot: int, ws_id: int) -> None:
        try:
            ws = self.conns.get(ws_id)
            if ws is not None:
                ws._writable()
        except BaseException:
            log.exception("ember: WebSocket writable notice failed")


def broadcast(server_ptr: Any, group: str, message: Any, exclude: Any = None) -> int:
    """Sends ``message`` to every connection in ``group``; returns how many took it."""
    kind, data = encode_message(message)
    except_id = exclude.id if isinstance(exclude, _WsBase) else int(exclude or 0)
    sent = ctypes.c_size_t()
    rc = L.ember_server_ws_broadcast(server_ptr, group.encode("utf-8"), kind, data, len(data), except_id,
                                     ctypes.byref(sent))
    if rc != _OK:
        raise EmberError(rc, _lib.last_error(), "broadcast")
    return sent.value
