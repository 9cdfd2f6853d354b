"""Streaming a handler's result: the sync generator pump (driven by the engine's
WRITABLE events), the async pump (a coroutine on the loop), and what the dispatch does
around handlers that stream (see ``ember.streaming`` for the user's side)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from . import _lib
from ._events import RequestEvents, events_of
from .errors import ClientDisconnected, StreamClosed
from .streaming import (_EMPTY, AsyncResponseStream, ResponseStream, _begin, _head_for, _parts, _put, as_bytes,
                        stream_error)

log = logging.getLogger("ember")

_OK = _lib.OK
_WOULD_BLOCK = _lib.ERR_WOULD_BLOCK


def _close_iter(it: Any) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        try:
            close()
        except BaseException:
            log.exception("ember: closing a streamed generator raised")


class _SyncPump:
    """Drives a sync iterator into a stream on the engine's events: writes until the
    queue is full, then returns; the WRITABLE event (on an engine thread) goes on. One
    thread at a time runs it: a kick that finds it running asks the runner to go again."""

    __slots__ = ("stream", "it", "events", "lock", "active", "again", "pending", "done")

    def __init__(self, stream: ResponseStream, it: Any, first: bytes | None, events: RequestEvents) -> None:
        self.stream = stream
        self.it = it
        self.events = events
        self.lock = threading.Lock()
        self.active = False
        self.again = False
        self.pending = first
        self.done = False

    def kick(self) -> None:
        with self.lock:
            if self.done:
                return
            if self.active:
                self.again = True
                return
            self.active = True
        while True:
            try:
                self._run()
            except BaseException:
                log.exception("ember: streaming pump failed")
                self._finish("error")
            with self.lock:
                if self.again and not self.done:
                    self.again = False
                    continue
                self.active = False
                return

    abort = kick  # at ABORTED: the run sees the flag and closes the generator

    def _run(self) -> None:
        handle = self.stream.handle
        events = self.events
        while not self.done:
            if events.aborted:
                self._finish("aborted")
                return
            chunk = self.pending
            if chunk is None:
                try:
                    chunk = as_bytes(next(self.it))
                except StopIteration:
                    self._finish("end")
                    return
                except BaseException:
                    log.exception("ember: a streamed generator raised; the answer is cut")
                    self._finish("error")
                    return
                if not chunk:
                    continue
            rc = _put(handle, chunk)
            if rc == _OK:
                self.pending = None
            elif rc == _WOULD_BLOCK:
                self.pending = chunk  # WRITABLE follows (the refusal armed it)
                return
            else:
                self._finish("aborted")
                return

    def _finish(self, how: str) -> None:
        if self.done:
            return
        self.done = True
        stream = self.stream
        if how == "end":
            stream.close()
        elif how == "error":
            stream.abort()
        else:
            stream.closed = True  # the engine ended it
        it, self.it, self.pending = self.it, None, None
        self.events.pump = None
        _close_iter(it)


def stream_sync(request: Any, result: Any) -> None:
    """Streams a handler's sync iterable result (pumped by events); raises, before
    anything is sent, what a failing first item raised (the caller answers 500)."""
    status, headers, content_type, content = _parts(result)
    it = iter(content)
    try:
        first = next(it)
    except StopIteration:
        first = _EMPTY
    except BaseException:
        _close_iter(it)
        raise
    try:
        head = _head_for(headers, content_type, first)
        chunk = None if first is _EMPTY else as_bytes(first)
    except BaseException:
        _close_iter(it)
        raise
    rc = _begin(request.handle, status, head, len(head))
    if rc != _OK:
        _close_iter(it)
        raise stream_error(rc, "ember_response_begin")
    stream = ResponseStream(request.handle)
    request._stream = stream
    if first is _EMPTY or request.method == "HEAD":
        stream.close()
        _close_iter(it)
        return
    events = events_of(request)
    stream.events = events
    pump = _SyncPump(stream, it, chunk or None, events)
    events.pump = pump
    if events.ended:  # ended before we listened: nothing will come
        pump.abort()
    else:
        pump.kick()


async def stream_async(request: Any, result: Any) -> None:
    """Streams a handler's result (sync or async iterable) from a coroutine on the loop.
    A failing first item answers 500; later failures cut the answer."""
    from .response import fail

    status, headers, content_type, content = _parts(result)
    is_async = hasattr(content, "__aiter__")
    it = content.__aiter__() if is_async else iter(content)
    try:
        try:
            first = await it.__anext__() if is_async else next(it)
        except (StopIteration, StopAsyncIteration):
            first = _EMPTY
        except asyncio.CancelledError:
            raise
        except BaseException:
            fail(request.handle, request)
            return
        try:
            head = _head_for(headers, content_type, first)
            first = first if first is _EMPTY else as_bytes(first)
        except BaseException:
            fail(request.handle, request)
            return
        loop = asyncio.get_running_loop()
        events = events_of(request, loop)
        rc = _begin(request.handle, status, head, len(head))
        if rc != _OK:
            log.debug("ember: streamed answer not begun: %s", _lib.result_name(rc))
            return
        stream = AsyncResponseStream(request.handle, events)
        request._stream = stream
        if first is _EMPTY or request.method == "HEAD":
            stream.close()
            return
        try:
            await stream.write(first)
            if is_async:
                async for chunk in it:
                    await stream.write(chunk)
            else:
                for chunk in it:
                    await stream.write(chunk)
        except ClientDisconnected:
            stream.closed = True
            return
        except asyncio.CancelledError:
            stream.closed = stream.closed or events.aborted
            if not stream.closed:
                stream.abort()
            raise
        except BaseException:
            log.exception("ember: a streamed generator raised; the answer is cut")
            stream.abort()
            return
        stream.close()
    finally:
        if is_async:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except BaseException:
                    log.exception("ember: closing a streamed async generator raised")
        else:
            _close_iter(it)


# -- what the dispatch does around handlers -------------------------------------------------
def after_stream(stream: Any, result: Any) -> None:
    """A handler that began a streamed answer returned ``result``: the stream is closed
    unless the handler handed it over (returned it)."""
    if result is stream:
        return
    if result is not None:
        log.error("ember: a handler began a streamed answer and also returned %s; the return value "
                  "is ignored", type(result).__name__)
    if not stream.closed:
        stream.close()


_QUIET_ERRORS = (ClientDisconnected, StreamClosed)


def handler_failed(handle: int, request: Any, exc: BaseException) -> None:
    """A handler raised ``exc`` (being handled): 500 if nothing was sent yet, else the
    streamed answer is cut. A client that left or a body the engine refused (413/408)
    is no error of the program's: logged at debug level only."""
    from .errors import BodyTooLarge, BodyTooSlow
    from .response import INTERNAL_ERROR, deliver, fail

    stream = request._stream if request is not None else None
    quiet = isinstance(exc, _QUIET_ERRORS + (BodyTooLarge, BodyTooSlow))
    if stream is not None:
        if quiet:
            log.debug("ember: streamed answer ended: %s", exc)
        else:
            log.exception("ember: handler for %s raised after its answer began; the answer is cut",
                          _describe(request))
        stream.abort()
        return
    if request is not None:
        request._detach()
    if quiet:
        log.debug("ember: handler for %s stopped: %s", _describe(request), exc)
        deliver(handle, INTERNAL_ERROR.status, INTERNAL_ERROR._head, INTERNAL_ERROR.body, request)
        return
    fail(handle, request)


def _describe(request: Any) -> str:
    from .response import describe
    return describe(request)
