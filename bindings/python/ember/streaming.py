"""Streamed answers: the body goes out in pieces, as the program produces them.

Three ways to stream, all on the engine's ``ember_response_begin`` / ``write`` / ``end``
(chunked on HTTP/1.1, DATA frames on HTTP/2), all with its backpressure: a write into a
full queue (``EMBER_LIMIT_STREAM_QUEUE_BYTES``, ``Server(stream_queue_bytes=...)``) is
refused and waits, so memory per answer stays bounded whatever the client does.

1. **Return a generator** (or an async generator, or ``StreamingResponse(iterable,
   status, headers, content_type)``). Each item (``bytes`` or ``str``) is one write. A
   sync generator is pumped by the engine's events: it runs until the queue is full and
   goes on when the engine says the queue has room (``EMBER_EVENT_WRITABLE``), so no
   thread waits for a slow client, under any dispatch mode. An async generator runs on
   the asyncio loop, awaiting room. A generator that raises before its first item
   answers 500; later, the answer is cut (the client sees it incomplete). A client that
   leaves closes the generator (``GeneratorExit`` at its ``yield``).

2. **Write it yourself**: ``stream = req.stream_response(status=200, headers=None,
   content_type=None)`` sends the head and returns

   - in a sync handler (no running asyncio loop on this thread): a ``ResponseStream``.
     ``stream.write(data, timeout=None)`` blocks while the queue is full (in the engine's
     ``ember_response_wait_writable``, without the GIL). On an I/O thread (inline
     dispatch, or auto running the handler inline) it never blocks: it raises
     ``WouldBlock`` instead (use a generator, an async handler, or a ``pool=True`` route). ``try_write(data)`` never blocks (False = full).
   - in a coroutine: an ``AsyncResponseStream``; ``await stream.write(data)`` waits for
     the engine's writable notice on the loop.

   ``stream.close()`` ends the answer; ``stream.abort()`` cuts it. Both are context
   managers (``with`` / ``async with``): the block's end closes it, an exception in it
   aborts it. A stream the handler leaves open is closed when the handler returns,
   unless the handler returns the stream itself: then it is handed over (to a thread, a
   task) and stays open until closed (or garbage-collected, which closes it).

3. **SSE**: ``ember.sse.EventStream`` on top of 2.

Abort: a write after the client left (or after the handler timeout or a server stop
ended the request) raises ``ClientDisconnected``. An ``async def`` handler is cancelled
(``CancelledError`` at its current ``await``) when the engine reports the abort.

For adapters (ASGI/WSGI), which have a bare request handle and no ``Request``: call
``ember_response_begin`` (``_stream.begin``), then ``ResponseStream(handle)`` writes with
the blocking wait, and ``AsyncResponseStream(handle, events)`` with the writable event,
where ``events = ember._events.RequestEvents(handle, loop)`` was ``register()``-ed before
the first write (one listener per request: share it for the abort notice). ``close()``,
``abort()`` and the exceptions are the same as for handlers. The generator pumps that
drive returned iterables are in ``_pump.py``.
"""

from __future__ import annotations

import asyncio
import logging
import types
from typing import Any

from . import _lib, _stream
from ._events import RequestEvents, events_of
from .errors import ClientDisconnected, EmberError, StreamClosed, WouldBlock, WriteTimeout
from .response import _GIVE_BACK, NOCOPY_MIN, _has_type, _head, _lend_keys, _lent

log = logging.getLogger("ember")

_OK = _lib.OK
_WOULD_BLOCK = _lib.ERR_WOULD_BLOCK
_write = _stream.write
_write_nocopy = _lib.lib.ember_response_write_nocopy
_end = _stream.end
_abort = _lib.lib.ember_response_abort
_begin = _stream.begin
_wait = _stream.wait_writable
_get_running_loop = asyncio._get_running_loop

_OCTET = "application/octet-stream"
_TEXT = "text/plain; charset=utf-8"


def as_bytes(data: Any) -> bytes:
    """A chunk as bytes: ``bytes`` as is, ``str`` as UTF-8, any buffer copied."""
    t = type(data)
    if t is bytes:
        return data
    if t is str:
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"ember: a stream takes bytes or str, not {t.__name__}")


def stream_error(rc: int, what: str = "stream") -> EmberError:
    """The exception for a failed stream call (reads the engine's message first)."""
    msg = _lib.last_error()
    if rc == _lib.ERR_CLIENT_GONE or rc == _lib.ERR_TIMED_OUT:
        return ClientDisconnected(rc, msg or "the client disconnected or the server stopped", what)
    if rc == _lib.ERR_ALREADY_ANSWERED or rc == _lib.ERR_INVALID_HANDLE:
        return StreamClosed(rc, msg or "the stream is already closed", what)
    return EmberError(rc, msg, what)


def _put(handle: int, data: bytes) -> int:
    """One write, copied by the engine, or lent when large (the engine then holds the
    bytes object until its release callback; on refusal it is released at once)."""
    n = len(data)
    if n < NOCOPY_MIN:
        return _write(handle, data, n)
    key = next(_lend_keys)
    _lent[key] = data
    return _write_nocopy(handle, data, n, _GIVE_BACK, key)


class _StreamBase:
    __slots__ = ("handle", "events", "closed", "_gone", "__weakref__")

    def __init__(self, handle: int, events: RequestEvents | None = None) -> None:
        self.handle = handle
        self.events = events
        self.closed = False
        self._gone = False

    @property
    def aborted(self) -> bool:
        """True once the client is known to have left (or the request was ended for it)."""
        ev = self.events
        return self._gone or (ev is not None and ev.aborted)

    def _failed(self, rc: int, what: str) -> EmberError:
        err = stream_error(rc, what)
        if isinstance(err, ClientDisconnected):
            self._gone = True
        return err

    def close(self) -> None:
        """Ends the answer once what is queued is sent. Idempotent; quiet when the client
        already left."""
        if self.closed:
            return
        self.closed = True
        rc = _end(self.handle)
        if rc != _OK and rc not in (_lib.ERR_CLIENT_GONE, _lib.ERR_TIMED_OUT, _lib.ERR_ALREADY_ANSWERED):
            log.error("ember: ending a stream failed: %s: %s", _lib.result_name(rc), _lib.last_error())

    def abort(self) -> None:
        """Cuts the answer: queued data is dropped and the client sees it incomplete
        (HTTP/1.1: the connection closes without the last chunk; HTTP/2: a stream reset)."""
        if self.closed:
            return
        self.closed = True
        ev = self.events
        if ev is not None:
            ev.quiet = True  # our own abort: the handler's task is not cancelled for it
        _abort(self.handle)

    def __del__(self) -> None:
        try:
            if not self.closed:
                self.close()
        except BaseException:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else "aborted" if self.aborted else "open"
        return f"<{type(self).__name__} {self.handle:#x} {state}>"


class ResponseStream(_StreamBase):
    """A streamed answer written from sync code (any thread). See the module doc."""

    __slots__ = ("timeout",)

    def __init__(self, handle: int, events: RequestEvents | None = None, timeout: float | None = None) -> None:
        super().__init__(handle, events)
        #: Default for ``write``: seconds to wait for room (None = until the client reads
        #: or leaves).
        self.timeout = timeout

    def write(self, data: Any, timeout: float | None = ...) -> None:  # type: ignore[assignment]
        """Sends ``data`` (bytes or str), waiting while the queue is full: up to
        ``timeout`` seconds (``WriteTimeout``), default ``self.timeout``.
        ``ClientDisconnected`` when the client left; ``WouldBlock`` on an I/O thread
        under inline dispatch, where waiting is not allowed."""
        if self.closed:
            raise StreamClosed(_lib.ERR_ALREADY_ANSWERED, "write after close", "ResponseStream.write")
        data = as_bytes(data)
        if not data:
            return
        handle = self.handle
        rc = _put(handle, data)
        if rc == _OK:
            return
        if timeout is ...:
            timeout = self.timeout
        deadline = None if timeout is None else _now() + timeout
        while rc == _WOULD_BLOCK:
            if deadline is None:
                ms = _lib.WAIT_FOREVER
            else:
                ms = max(0, int((deadline - _now()) * 1000))
            rc = _wait(handle, ms)
            if rc == _OK:
                rc = _put(handle, data)
                continue
            if rc == _WOULD_BLOCK:
                raise WriteTimeout(rc, f"no room in the stream's queue within {timeout} s", "ResponseStream.write")
            if rc == _lib.ERR_STATE:
                raise WouldBlock(rc, "the stream's queue is full and this is an engine I/O thread (inline "
                                 "dispatch, or auto running the handler inline), which must not wait: "
                                 "return a generator, use an async handler, or register the route "
                                 "with pool=True", "ResponseStream.write")
        if rc != _OK:
            raise self._failed(rc, "ResponseStream.write")

    def try_write(self, data: Any) -> bool:
        """Sends ``data`` if the queue has room (True), else sends nothing (False). Never
        blocks. ``ClientDisconnected`` when the client left."""
        if self.closed:
            raise StreamClosed(_lib.ERR_ALREADY_ANSWERED, "write after close", "ResponseStream.try_write")
        data = as_bytes(data)
        if not data:
            return True
        rc = _put(self.handle, data)
        if rc == _OK:
            return True
        if rc == _WOULD_BLOCK:
            return False
        raise self._failed(rc, "ResponseStream.try_write")

    def __enter__(self) -> "ResponseStream":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class AsyncResponseStream(_StreamBase):
    """A streamed answer written from a coroutine on ``events.loop``. See the module doc."""

    __slots__ = ()

    async def write(self, data: Any) -> None:
        """Sends ``data`` (bytes or str), waiting on the loop while the queue is full.
        ``ClientDisconnected`` when the client left."""
        if self.closed:
            raise StreamClosed(_lib.ERR_ALREADY_ANSWERED, "write after close", "AsyncResponseStream.write")
        data = as_bytes(data)
        if not data:
            return
        handle = self.handle
        while True:
            rc = _put(handle, data)
            if rc == _OK:
                return
            if rc != _WOULD_BLOCK:
                raise self._failed(rc, "AsyncResponseStream.write")
            ev = self.events
            # No await between the refused write and the future: the WRITABLE that the
            # refusal arms reaches the loop only after this coroutine yields.
            fut = ev.writable()
            await fut
            if ev.aborted:
                self._gone = True
                raise ClientDisconnected(_lib.ERR_CLIENT_GONE, "the client disconnected or the server stopped",
                                         "AsyncResponseStream.write")

    async def aclose(self) -> None:
        """``close()``, awaitable for symmetry (ending never waits)."""
        self.close()

    async def __aenter__(self) -> "AsyncResponseStream":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _now() -> float:
    import time
    return time.monotonic()


def begin(request: Any, status: int = 200, headers: Any = None, content_type: str | None = None,
          flavor: str | None = None) -> ResponseStream | AsyncResponseStream:
    """Starts a streamed answer for ``request`` (a ``Request``) and returns its stream:
    async inside a running asyncio loop (or ``flavor="async"``), else sync."""
    if request._stream is not None:
        raise StreamClosed(_lib.ERR_ALREADY_ANSWERED, "this request already streams its answer",
                           "stream_response")
    if type(status) is not int:
        raise TypeError(f"ember: status must be an int, not {type(status).__name__}")
    if content_type is None and not _has_type(headers):
        content_type = _OCTET
    head = _head(headers, content_type)
    loop = _get_running_loop() if flavor is None else (asyncio.get_running_loop() if flavor == "async" else None)
    events = events_of(request, loop) if loop is not None else request._events
    rc = _begin(request.handle, status, head, len(head))
    if rc != _OK:
        raise stream_error(rc, "ember_response_begin")
    stream = AsyncResponseStream(request.handle, events) if loop is not None else ResponseStream(request.handle, events)
    request._stream = stream
    return stream


# -- handlers that return what is to be streamed ------------------------------------------
class StreamingResponse:
    """A streamed answer a handler returns: ``content`` is an iterable or async iterable
    of ``bytes``/``str`` chunks (a generator, an async generator, a file opened in binary
    mode ...). ``content_type`` defaults to text/plain (UTF-8) when the first chunk is a
    ``str``, else application/octet-stream."""

    __slots__ = ("content", "status", "headers", "content_type")

    def __init__(self, content: Any, status: int = 200, headers: Any = None, content_type: str | None = None) -> None:
        if not (hasattr(content, "__iter__") or hasattr(content, "__aiter__")) or isinstance(content, (str, bytes)):
            raise TypeError("ember: StreamingResponse takes an iterable or async iterable of chunks")
        if type(status) is not int or not 100 <= status <= 999:
            raise ValueError(f"ember: invalid status {status!r}")
        self.content = content
        self.status = status
        self.headers = headers
        self.content_type = content_type


STREAM_TYPES = (types.GeneratorType, types.AsyncGeneratorType, StreamingResponse)

_EMPTY = object()  # "the iterable had no first item"


def is_async_stream(result: Any) -> bool:
    content = result.content if type(result) is StreamingResponse else result
    return hasattr(content, "__aiter__")


def _parts(result: Any) -> tuple[int, Any, str | None, Any]:
    if type(result) is StreamingResponse:
        return result.status, result.headers, result.content_type, result.content
    return 200, None, None, result


def _head_for(headers: Any, content_type: str | None, first: Any) -> bytes:
    if content_type is None and not _has_type(headers):
        content_type = _TEXT if type(first) is str else _OCTET
    return _head(headers, content_type)
