"""Streamed request bodies: ``req.stream``.

A route registered with ``stream_body=True`` (``@app.post("/upload", stream_body=True)``)
is called as soon as the request head is in; the body stays with the engine, which holds
a small window of it (64 KiB) and reads more from the client only as the handler takes
it (TCP flow control holds the client back), so a body of any size costs the same few
KiB. ``Expect: 100-continue`` is answered when the handler first reads. The limit is
``max_stream_body_bytes`` (engine default 1 GiB; 413), and the minimum body rate still
applies (408).

``req.stream`` is

- in a sync handler: a ``BodyStream``, a read-only binary file object
  (``io.RawIOBase``): ``read(n)``, ``readinto(buf)``, ``readall()``, ``readline()``, and
  iteration in chunks of up to 64 KiB (not lines: bodies are mostly not text). Reads
  block (in the engine, without the GIL) until data, the end (``b""``) or an error;
  ``BodyStream.timeout`` (seconds, None = no limit) bounds each wait (``ReadTimeout``).
  Sync stream-body handlers under inline dispatch run on a binding thread, because an
  I/O thread must not wait for a client.
- in a coroutine: an ``AsyncBodyStream``: ``await read(n)``, ``await readall()``,
  ``async for chunk in req.stream``; reads never block: they wait on the loop for the
  engine's readable notice.

Errors: ``BodyTooLarge`` (the engine answered 413), ``BodyTooSlow`` (408),
``ClientDisconnected``. On a route without ``stream_body`` the same objects read the
buffered body, so code can use ``req.stream`` either way.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
from typing import Any, AsyncIterator, Iterator

from . import _lib, _stream
from ._events import events_of
from .errors import BodyTooLarge, BodyTooSlow, ClientDisconnected, EmberError, ReadTimeout

CHUNK = 65536

_read = _stream.read
_OK = _lib.OK
_WOULD_BLOCK = _lib.ERR_WOULD_BLOCK


def _read_error(rc: int, timeout: float | None) -> EmberError:
    msg = _lib.last_error()
    if rc == _lib.ERR_TOO_LARGE:
        return BodyTooLarge(rc, msg, "read")
    if rc == _lib.ERR_TIMED_OUT:
        return BodyTooSlow(rc, msg, "read")
    if rc == _lib.ERR_CLIENT_GONE:
        return ClientDisconnected(rc, msg, "read")
    if rc == _WOULD_BLOCK:
        return ReadTimeout(rc, f"no body data within {timeout} s", "read")
    return EmberError(rc, msg, "read")


class BodyStream(io.RawIOBase):
    """A streamed request body as a binary file object (see the module doc)."""

    def __init__(self, handle: int, length: int | None, timeout: float | None = None) -> None:
        super().__init__()
        self.handle = handle
        #: The declared Content-Length, or None.
        self.length = length
        #: Seconds each read may wait (None = until data, the end, or an error).
        self.timeout = timeout
        #: Bytes read so far.
        self.consumed = 0
        self._eof = False
        self._n = ctypes.c_size_t()
        self._scratch = bytearray(CHUNK)
        self._scratch_c = (ctypes.c_char * CHUNK).from_buffer(self._scratch)
        self._scratch_mv = memoryview(self._scratch)

    def readable(self) -> bool:
        return True

    def _fill(self, cbuf: Any, cap: int) -> int:
        if self._eof:
            return 0
        ms = _lib.WAIT_FOREVER if self.timeout is None else max(0, int(self.timeout * 1000))
        rc = _read(self.handle, cbuf, cap, ms, ctypes.byref(self._n))
        if rc != _OK:
            raise _read_error(rc, self.timeout)
        got = self._n.value
        if got == 0:
            self._eof = True
        self.consumed += got
        return got

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        cap = len(view)
        if cap == 0:
            return 0
        return self._fill((ctypes.c_char * cap).from_buffer(view), cap)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        if size == 0:
            return b""
        if size <= CHUNK:
            got = self._fill(self._scratch_c, size)
            return self._scratch_mv[:got].tobytes()
        buf = bytearray(size)
        got = self.readinto(buf)
        del buf[got:]
        return bytes(buf)

    def readall(self) -> bytes:
        parts = []
        while True:
            chunk = self.read(CHUNK)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)

    def __iter__(self) -> Iterator[bytes]:  # type: ignore[override]
        while True:
            chunk = self.read(CHUNK)
            if not chunk:
                return
            yield chunk

    def __repr__(self) -> str:
        return f"<BodyStream {self.consumed} bytes read{', at end' if self._eof else ''}>"


class AsyncBodyStream:
    """A streamed request body read from a coroutine (see the module doc)."""

    def __init__(self, request: Any, length: int | None) -> None:
        self._request = request
        self.handle = request.handle
        #: The declared Content-Length, or None.
        self.length = length
        #: Bytes read so far.
        self.consumed = 0
        self._eof = False
        self._n = ctypes.c_size_t()
        self._listening = False
        self._scratch = bytearray(CHUNK)
        self._scratch_c = (ctypes.c_char * CHUNK).from_buffer(self._scratch)
        self._scratch_mv = memoryview(self._scratch)

    async def read(self, size: int = CHUNK) -> bytes:
        """Up to ``size`` bytes (``b""`` at the end); ``size`` < 0 reads all."""
        if size is None or size < 0:
            return await self.readall()
        if size == 0 or self._eof:
            return b""
        if size <= CHUNK:
            buf, cbuf = self._scratch_mv, self._scratch_c
        else:
            buf = memoryview(bytearray(size))
            cbuf = (ctypes.c_char * size).from_buffer(buf)
        while True:
            rc = _read(self.handle, cbuf, size, 0, ctypes.byref(self._n))
            if rc == _OK:
                break
            if rc != _WOULD_BLOCK:
                raise _read_error(rc, None)
            if not self._listening:
                # Data that came before the listener was in raised no event: read again.
                events_of(self._request, asyncio.get_running_loop())
                self._listening = True
                continue
            ev = self._request._events
            if ev.ended:
                raise ClientDisconnected(_lib.ERR_CLIENT_GONE, "the request ended", "read")
            # Cleared once this task runs again, i.e. after any abort that came meanwhile.
            ev.reading = True
            try:
                await ev.readable()
            finally:
                ev.reading = False
        got = self._n.value
        if got == 0:
            self._eof = True
            ev = self._request._events
            if ev is not None:
                ev.body_unread = False  # from here the abort cancels the handler again
            return b""
        self.consumed += got
        return buf[:got].tobytes()

    async def readall(self) -> bytes:
        parts = []
        while True:
            chunk = await self.read(CHUNK)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self.read(CHUNK)
            if not chunk:
                return
            yield chunk

    def __repr__(self) -> str:
        return f"<AsyncBodyStream {self.consumed} bytes read{', at end' if self._eof else ''}>"


class BufferedAsyncBody:
    """``req.stream`` in a coroutine on a route whose body is buffered."""

    def __init__(self, body: bytes) -> None:
        self._io = io.BytesIO(body)
        self.length = len(body)

    async def read(self, size: int = CHUNK) -> bytes:
        return self._io.read(-1 if size is None else size)

    async def readall(self) -> bytes:
        return self._io.read()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            chunk = self._io.read(CHUNK)
            if not chunk:
                return
            yield chunk
