"""Server-Sent Events (the HTML standard's ``text/event-stream``) on a streamed answer.

    @app.get("/events")
    async def events(req):
        async with ember.sse.EventStream(req, retry=1000) as es:
            start = int(es.last_event_id or 0)          # Last-Event-ID of a reconnect
            for n in range(start + 1, start + 4):
                await es.send({"n": n}, event="tick", id=n)
                await asyncio.sleep(1)

``EventStream(req, retry=None, keepalive=15.0, status=200, headers=None)`` answers with
``Content-Type: text/event-stream`` and ``Cache-Control: no-cache`` (and
``X-Accel-Buffering: no`` for nginx), then:

- ``send(data=None, *, event=None, id=None, retry=None)`` sends one event: ``id:``,
  ``event:``, ``retry:``, then ``data:`` lines, then a blank line. ``data`` is a ``str``
  (split into one ``data:`` line per line, at CR LF, CR or LF, as the standard's
  parser joins them back with LF), ``bytes`` (UTF-8), or anything else as JSON. An
  ``event`` or ``id`` with a line break (or an ``id`` with NUL) is a ``ValueError``:
  it would forge fields.
- ``comment(text)`` sends a comment line (ignored by clients).
- ``last_event_id``: the request's ``Last-Event-ID`` header (None if absent): where a
  reconnecting EventSource left off.
- A keep-alive comment (``: keep-alive``) goes out after ``keepalive`` seconds without
  a write (None = never), so proxies and clients do not time the stream out. One shared
  binding thread serves the timers of all streams; it never waits for a slow client
  (a keep-alive that finds the queue full is skipped).
- ``close()`` ends the stream; ``with`` / ``async with`` close it at the block's end.

Like ``req.stream_response``, it is sync in a sync handler (``send`` blocks while the
queue is full) and async inside a coroutine (``await es.send(...)``): ``send`` returns
what the underlying stream's ``write`` returns.

``format_event(...)`` builds the bytes of one event; ``stream(iterable, retry=None)``
returns a ``StreamingResponse`` that sends each item of a (sync or async) iterable as an
event (``Event(data, event=, id=, retry=)`` items or bare data), for handlers that return
a generator.
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import threading
import time
import weakref
from typing import Any

from . import _lib
from .streaming import StreamingResponse, _put

_LINES = re.compile(r"\r\n|\r|\n")
_KEEPALIVE = b": keep-alive\n\n"

HEADERS = [("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")]
CONTENT_TYPE = "text/event-stream"


def _field(name: str, value: Any) -> str:
    text = str(value)
    if "\n" in text or "\r" in text or (name == "id" and "\0" in text):
        raise ValueError(f"ember.sse: an event's {name} must be one line: {text!r}")
    return f"{name}: {text}\n"


def format_event(data: Any = None, *, event: str | None = None, id: Any = None, retry: int | None = None,
                 comment: str | None = None) -> bytes:
    """The bytes of one event (see the module doc), ending with the blank line."""
    out = []
    if comment is not None:
        out += [f": {line}\n" for line in _LINES.split(str(comment))]
    if id is not None:
        out.append(_field("id", id))
    if event is not None:
        out.append(_field("event", event))
    if retry is not None:
        if type(retry) is not int or retry < 0:
            raise ValueError(f"ember.sse: retry is a number of milliseconds, not {retry!r}")
        out.append(f"retry: {retry}\n")
    if data is not None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            text = bytes(data).decode("utf-8")
        elif isinstance(data, str):
            text = data
        else:
            text = json.dumps(data, ensure_ascii=False)
        out += [f"data: {line}\n" for line in _LINES.split(text)]
    out.append("\n")
    return "".join(out).encode("utf-8")


class Event:
    """One event for ``stream(...)``: ``Event(data, event=None, id=None, retry=None)``."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(self, data: Any = None, event: str | None = None, id: Any = None, retry: int | None = None) -> None:
        self.data, self.event, self.id, self.retry = data, event, id, retry

    def encode(self) -> bytes:
        return format_event(self.data, event=self.event, id=self.id, retry=self.retry)


def _encode_item(item: Any) -> bytes:
    return item.encode() if isinstance(item, Event) else format_event(item)


def stream(events: Any, *, retry: int | None = None, status: int = 200, headers: Any = None) -> StreamingResponse:
    """A ``StreamingResponse`` sending each item of ``events`` (iterable or async
    iterable of ``Event`` or data) as an event; no keep-alive timer (use ``EventStream``)."""
    first = [format_event(retry=retry)] if retry is not None else []
    if hasattr(events, "__aiter__"):
        async def agen() -> Any:
            for b in first:
                yield b
            async for item in events:
                yield _encode_item(item)
        content: Any = agen()
    else:
        content = itertools.chain(first, map(_encode_item, events))
    return StreamingResponse(content, status, list(HEADERS) + list(_items(headers)), CONTENT_TYPE)


def _items(headers: Any) -> list:
    if not headers:
        return []
    return list(headers.items() if hasattr(headers, "items") else headers)


class EventStream:
    """An SSE answer on a streamed response (see the module doc)."""

    def __init__(self, request: Any, *, retry: int | None = None, keepalive: float | None = 15.0,
                 status: int = 200, headers: Any = None) -> None:
        self.last_event_id: str | None = request.headers.get("last-event-id")
        self.keepalive = keepalive
        self._stream = request.stream_response(status, list(HEADERS) + _items(headers), CONTENT_TYPE)
        self._last = time.monotonic()
        if retry is not None:
            # The queue is empty now: this write is always taken, sync or async alike.
            raw = format_event(retry=retry)
            rc = _put(self._stream.handle, raw)
            if rc != _lib.OK:
                from .streaming import stream_error
                raise stream_error(rc, "EventStream")
        if keepalive is not None and keepalive > 0:
            _ticker.add(self)

    @property
    def stream(self) -> Any:
        """The underlying ``ResponseStream`` / ``AsyncResponseStream``."""
        return self._stream

    @property
    def closed(self) -> bool:
        return self._stream.closed

    @property
    def aborted(self) -> bool:
        return self._stream.aborted

    def send(self, data: Any = None, *, event: str | None = None, id: Any = None, retry: int | None = None) -> Any:
        """Sends one event. Sync: returns once queued; async: ``await`` it."""
        raw = format_event(data, event=event, id=id, retry=retry)
        self._last = time.monotonic()
        return self._stream.write(raw)

    def comment(self, text: str = "") -> Any:
        """Sends a comment line (clients ignore it; it keeps the connection busy)."""
        self._last = time.monotonic()
        return self._stream.write(format_event(comment=text))

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._stream.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> "EventStream":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self._stream.__aexit__(exc_type, exc, tb)

    def _tick(self, now: float) -> float | None:
        """Called by the ticker: a keep-alive if idle; the next due time, or None to stop."""
        stream = self._stream
        if stream.closed or stream.aborted:
            return None
        if now - self._last >= self.keepalive - 0.005:
            rc = _put(stream.handle, _KEEPALIVE)
            if rc not in (_lib.OK, _lib.ERR_WOULD_BLOCK):
                return None
            self._last = now
        return self._last + self.keepalive


class _Ticker:
    """One daemon thread that sends the keep-alives of every EventStream."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, es: EventStream) -> None:
        with self._cond:
            heapq.heappush(self._heap, (es._last + es.keepalive, next(self._seq), weakref.ref(es)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ember-sse-keepalive", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                due, _, ref = self._heap[0]
                now = time.monotonic()
                if due > now:
                    self._cond.wait(due - now)
                    continue
                heapq.heappop(self._heap)
            es = ref()
            if es is None:
                continue
            try:
                nxt = es._tick(now)
            except BaseException:
                nxt = None
            if nxt is not None:
                with self._cond:
                    heapq.heappush(self._heap, (nxt, next(self._seq), ref))


_ticker = _Ticker()
