"""The exceptions the binding raises.

``EmberError`` is the base of all of them: a failed engine call, with the engine's code
and message. The others name the outcomes a streaming or WebSocket handler may want to
catch on its own:

- ``ClientDisconnected``: the client left (or the handler timeout answered, or the server
  stopped) while a stream was written or a body read. Nothing more can be sent.
- ``StreamClosed``: the stream was already closed (by this program).
- ``WriteTimeout`` / ``ReadTimeout``: a blocking write or read waited the ``timeout`` it
  was given; the request is still alive.
- ``WouldBlock``: a write found the queue full on an engine I/O thread (inline
  dispatch, or auto running the handler inline), where the wait could never end.
- ``BodyTooLarge`` / ``BodyTooSlow``: a streamed request body passed the limit or came
  too slowly; the engine has answered 413 / 408 itself.
- ``WebSocketClosed``: the WebSocket connection is closed; ``code`` and ``reason`` say how.
"""

from __future__ import annotations

from . import _lib


class EmberError(RuntimeError):
    """An Ember call failed. ``code`` is the ``ember_result`` (negative), ``name`` its
    stable name (e.g. ``"EMBER_ERR_BIND"``), and the message is the engine's own."""

    def __init__(self, code: int, message: str, call: str = "") -> None:
        self.code = code
        self.name = _lib.result_name(code)
        self.call = call
        prefix = f"{call}: " if call else ""
        super().__init__(f"{prefix}{self.name}: {message}" if message else f"{prefix}{self.name}")


class ClientDisconnected(EmberError):
    """The client went away (or the handler timeout answered, or the server stopped)."""


class StreamClosed(EmberError):
    """The stream was already closed or aborted by this program."""


class WriteTimeout(EmberError, TimeoutError):
    """A blocking write waited its ``timeout`` for room in the stream's queue."""


class ReadTimeout(EmberError, TimeoutError):
    """A blocking body read waited its ``timeout`` and no data came."""


class WouldBlock(EmberError, BlockingIOError):
    """A write found the queue full on an engine I/O thread (inline dispatch, or auto
    running the handler inline), where a blocking wait would stall the connection that
    must drain it. Return a generator or use an ``async def`` handler there (they wait for
    the engine's writable notice instead), or register the route with ``pool=True``."""


class BodyTooLarge(EmberError):
    """The streamed request body passed the limit; the engine answered 413."""


class BodyTooSlow(EmberError):
    """The streamed request body came slower than the minimum rate; the engine answered 408."""


class WebSocketClosed(EmberError):
    """The WebSocket connection is closed. ``close_code`` is the WebSocket close code
    (1000 normal, 1001 going away / server stop, 1005 none given, 1006 dropped ...),
    ``reason`` the peer's (or server's) reason text."""

    def __init__(self, close_code: int = 1006, reason: str = "", code: int = _lib.ERR_CLIENT_GONE,
                 call: str = "") -> None:
        self.close_code = close_code
        self.reason = reason
        super().__init__(code, f"WebSocket closed ({close_code}{': ' + reason if reason else ''})", call)


def check(code: int, call: str) -> None:
    """Raises EmberError for a failed result; reads the message on the failing thread."""
    if code != _lib.OK:
        raise EmberError(code, _lib.last_error(), call)
