"""The engine's events for one request, heard once and shared by whoever needs them.

``ember_request_on_event`` allows one listener per request, and each event costs a
crossing into Python, so the binding registers only for requests that need it: async
handlers (to cancel their coroutine when the client leaves), streamed answers that wait
for room (a generator being pumped, an async writer), async body readers, and handlers
that ask for ``on_abort``. Plain sync requests never register: they stay at one ABI call.

Events arrive on engine threads (pool threads, or I/O threads under inline dispatch),
one at a time per request. What runs there is short: a sync pump's next writes, a flag,
or a ``call_soon_threadsafe`` to hand the event to the request's asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

from . import _lib, _stream

log = logging.getLogger("ember")

_ENDED_ABORTED = frozenset((_lib.ERR_TIMED_OUT, _lib.ERR_CLIENT_GONE, _lib.ERR_INVALID_HANDLE))


class RequestEvents:
    """The events of one request: flags for everyone, futures for coroutines, and a
    callback into a sync pump."""

    __slots__ = ("handle", "loop", "task", "ended", "aborted", "pump", "quiet", "reading", "body_unread",
                 "_writable", "_readable", "_on_abort", "_lock", "__weakref__")

    def __init__(self, handle: int, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.handle = handle
        self.loop = loop
        #: The handler's task: cancelled when the request is aborted.
        self.task: asyncio.Task | None = None
        #: The final event came (or the request had ended before anyone listened).
        self.ended = False
        #: It was ABORTED: the client left, the handler timeout answered, or the server stopped.
        self.aborted = False
        #: A sync pump (``_pump._SyncPump``): kicked on WRITABLE, told about ABORTED.
        self.pump: Any = None
        #: Set when this program aborted the stream itself: its own task is not cancelled.
        self.quiet = False
        #: An async body reader waits for READABLE: the abort does not cancel its task,
        #: its next read says why the request ended.
        self.reading = False
        #: The handler's coroutine has a streamed body it has not read to the end: the
        #: abort neither cancels it nor keeps it from starting, so that its next read says
        #: why the request ended (an engine's 413 can come before the coroutine's first
        #: read, the sooner the faster the client sends).
        self.body_unread = False
        self._writable: asyncio.Future | None = None
        self._readable: asyncio.Future | None = None
        self._on_abort: list[Callable[[], Any]] | None = None
        self._lock = threading.Lock()

    def register(self) -> bool:
        """Starts listening; False when the request had already ended (then ``ended``
        and ``aborted`` say how, and no event will come)."""
        rc = _stream.listen(self.handle, self._on_event)
        if rc != _lib.OK:
            self.ended = True
            self.aborted = rc in _ENDED_ABORTED
            return False
        return True

    # -- on an engine thread ---------------------------------------------------------
    def _on_event(self, event: int) -> None:
        try:
            self._handle(event)
        except BaseException:  # logged here: nothing may reach the engine's thread
            log.exception("ember: handling request event %d failed", event)

    def _handle(self, event: int) -> None:
        if event == _lib.EVENT_ABORTED:
            self.aborted = self.ended = True
            pump = self.pump
            if pump is not None:
                pump.abort()
            with self._lock:
                callbacks, self._on_abort = self._on_abort, None
            for fn in callbacks or ():
                try:
                    fn()
                except BaseException:
                    log.exception("ember: an on_abort callback raised")
        elif event == _lib.EVENT_COMPLETED:
            self.ended = True
        elif event == _lib.EVENT_WRITABLE:
            pump = self.pump
            if pump is not None:
                pump.kick()
        loop = self.loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake, event)
            except RuntimeError:  # the loop is closed: the server has stopped
                pass

    # -- on the loop -----------------------------------------------------------------
    def _wake(self, event: int) -> None:
        final = event == _lib.EVENT_ABORTED or event == _lib.EVENT_COMPLETED
        if event == _lib.EVENT_WRITABLE or final:
            fut, self._writable = self._writable, None
            if fut is not None and not fut.done():
                fut.set_result(None)
        if event == _lib.EVENT_READABLE or final:
            fut, self._readable = self._readable, None
            if fut is not None and not fut.done():
                fut.set_result(None)
        # A coroutine waiting for its body is not cancelled: its next read says why the
        # request ended (BodyTooLarge / BodyTooSlow after the engine's 413 / 408,
        # ClientDisconnected), which a CancelledError would hide.
        if event == _lib.EVENT_ABORTED and not self.quiet and not self.reading and not self.body_unread:
            task = self.task
            if task is not None and not task.done():
                task.cancel()

    def writable(self) -> asyncio.Future:
        """A future (on ``loop``) done at the next WRITABLE or final event."""
        fut = self._writable
        if fut is None or fut.done():
            fut = self._writable = self.loop.create_future()
            if self.ended:
                fut.set_result(None)
        return fut

    def readable(self) -> asyncio.Future:
        """A future (on ``loop``) done at the next READABLE or final event."""
        fut = self._readable
        if fut is None or fut.done():
            fut = self._readable = self.loop.create_future()
            if self.ended:
                fut.set_result(None)
        return fut

    def add_abort_callback(self, fn: Callable[[], Any]) -> bool:
        """``fn()`` at ABORTED (on an engine thread); False if the request already ended."""
        with self._lock:
            if self.ended:
                return False
            if self._on_abort is None:
                self._on_abort = []
            self._on_abort.append(fn)
            return True


def events_of(request: Any, loop: asyncio.AbstractEventLoop | None = None) -> RequestEvents:
    """The request's events, registered on first use. ``loop``: the asyncio loop that
    coroutines waiting on them run on (set once known)."""
    ev = request._events
    if ev is None:
        ev = request._events = RequestEvents(request.handle, loop)
        ev.register()
    elif ev.loop is None and loop is not None:
        ev.loop = loop
    return ev
