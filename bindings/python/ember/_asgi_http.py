"""The HTTP side of the ASGI server (``ember.asgi``): one request's ``receive`` / ``send``
and its answer (see the module doc of ``ember.asgi``)."""

from __future__ import annotations

import asyncio
import collections.abc
import ctypes
import logging
from typing import Any, Awaitable, Callable

from . import _lib, _stream
from ._crossing import speedups as _fast
from ._loop import _resume
from ._host import access, internal_error as _internal_error, refused as _refused
from .response import NOCOPY_MIN, send as _send_any

log = logging.getLogger("ember.asgi")

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]

_respond = _lib.held.ember_request_respond
_respond_small = _lib.held.ember_request_respond_small
_OK = _lib.OK
_ERR_INVALID_ARG = _lib.ERR_INVALID_ARG

# A streamed request body is handed to the app in pieces of at most this size.
_READ_MAX = 65536


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


def _is(name: Any, want: bytes) -> bool:
    return name == want or (type(name) is bytes and name.lower() == want)


# Content-Length texts by body length, remembered (bounded): ``b"%d" % n`` costs ~750
# instructions per answer, and an app answers the same few lengths again and again.
_LENGTHS: dict[int, bytes] = {}


def _length_text(n: int) -> bytes:
    if len(_LENGTHS) >= 1024:
        _LENGTHS.clear()
    text = _LENGTHS[n] = b"%d" % n
    return text


def _small_type(headers: Any, n: int, scope: dict) -> bytes | None:
    """The Content-Type of an answer whose headers are only that, and perhaps a
    Content-Length equal to ``n`` (not for HEAD, whose stated length the engine sends
    as it is), else None."""
    if len(headers) == 1:
        name, value = headers[0]
    else:
        (name, value), (name2, value2) = headers
        if name2 != b"content-length" and not _is(name2, b"content-length"):
            if not _is(name, b"content-length"):
                return None
            name, value, name2, value2 = name2, value2, name, value
        if value2 != (_LENGTHS.get(n) or _length_text(n)) or scope["method"] == "HEAD":
            return None
    if type(value) is bytes and (name == b"content-type" or _is(name, b"content-type")):
        return value
    return None


class _HTTPCycle:
    """One request: the app's ``receive`` and ``send``, and the answer."""

    # Until set, fields read these class defaults: a request sets three fields when it
    # starts, where eleven slots were each set (about 800 instructions per request).
    status = None
    headers = None
    parts = None
    done = False
    waiter = None
    events = None
    streaming = False
    collect = None  # declared Content-Length <= COLLECT_MAX: collect, keep the length

    def __init__(self, handle: int, body: bytes, scope: dict) -> None:
        self.handle = handle
        self.body = body
        self.scope = scope

    def finished(self, result: Any, exc: BaseException | None) -> None:
        """The app's coroutine ended (``exc``: what it raised): anything it left
        unanswered answers 500, and a waiting ``receive()`` wakes."""
        if exc is None and self.done and result is None and self.waiter is None:
            return  # the usual end: answered, nothing waits
        try:
            if exc is not None:
                if isinstance(exc, asyncio.CancelledError):
                    return
                log.error("Exception in ASGI application (%s %s)", self.scope["method"], self.scope["path"],
                          exc_info=exc)
                if not self.done:
                    self._fail()
                return
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
        finally:
            self._wake()

    async def rest(self, coro: Any, value: Any) -> None:
        """Goes on with the app's coroutine, which last yielded ``value`` (None: not
        started), as a task on the loop; then as ``finished``."""
        try:
            result = await _resume(coro, value)
        except BaseException as e:
            self.finished(None, e)
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        self.finished(result, None)

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
        n = len(body)
        headers = self.headers
        if n < NOCOPY_MIN and type(headers) in (list, tuple) and 0 < len(headers) <= 2:
            # Only a Content-Type, perhaps with a Content-Length that says the body's
            # length (the usual small JSON or text answer): one call with no header block
            # to build here or parse in the engine, which counts the body itself. A value
            # the engine refuses (a line break ...) goes the long way, which reports it.
            value = _small_type(headers, n, self.scope)
            if value is not None:
                rc = _respond_small(self.handle, self.status, value, len(value), body, n)
                if rc != _ERR_INVALID_ARG:
                    if rc != _OK:
                        _refused(rc, self.handle, f"{self.scope['method']} {self.scope['path']}", log)
                    if self.waiter is not None:
                        self._wake()
                    return
        head = self._head()
        if head is None:
            _internal_error(self.handle)
            return
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

    def _after_small(self, rc: int) -> None:
        # The C crossing's send() answered (``rc``) and comes here only when the engine
        # refused the answer or something waits for its end.
        if rc != _OK:
            _refused(rc, self.handle, f"{self.scope['method']} {self.scope['path']}", log)
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


if _fast is not None:
    class _CHTTPCycle(_fast.Cycle, _HTTPCycle):
        """The C crossing's cycle: the fields are C members, and ``receive`` / ``send``
        handle the common case in C (``_speedups_asgi.c``), calling ``_HTTPCycle``'s
        methods for everything else."""

    _fast.asgi_bind(ctypes.cast(_lib.lib.ember_request_respond_small, ctypes.c_void_p).value,
                    _HTTPCycle.send, _HTTPCycle.receive, NOCOPY_MIN, _OK, _ERR_INVALID_ARG)
    # What send() and receive() return when done in C: asyncio takes it as a coroutine.
    collections.abc.Coroutine.register(_fast.Done)
    FastCycle: type = _CHTTPCycle
else:
    FastCycle = _HTTPCycle


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
