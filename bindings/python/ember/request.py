"""The request a handler receives.

The engine hands the binding one ``ember_request_info`` struct per request (no further
ABI calls). A ``Request`` reads a field from it only when the handler first asks for it,
so a handler that looks at nothing costs nothing. The struct's views are only valid while
the engine's callback runs; before a request outlives that (kept by the handler, passed
to a coroutine, deferred), ``_detach()`` copies every field into Python objects.
"""

from __future__ import annotations

import json as _json
import struct
from asyncio import _get_running_loop
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote

from ._wire import MEM, PAIR as _PAIR, headers as _wire_pairs  # _PAIR: ember_header (ptr, len) x2

# ember_request_info in native layout: size, id, six (ptr, len) views, headers (ptr, count),
# params (ptr, count), http_version, content_length, flags. One unpack reads all of it.
_INFO = struct.Struct("@NQPNPNPNPNPNPNPNPNIqI")
_I_LENGTH = 19
_I_FLAGS = 20
_BODY_STREAMED = 1  # EMBER_REQUEST_BODY_STREAMED

_HTTP_VERSIONS = {10: "1.0", 11: "1.1", 20: "2"}


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _header_text(b: bytes) -> str:
    # Header values are raw bytes on the wire: UTF-8 when they are valid UTF-8 (what
    # modern clients send), otherwise Latin-1, which maps every byte and never fails.
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("latin-1")


# Views are read as slices of one memoryview over the address space (see _wire): no
# foreign call per field, as ctypes.string_at would make.
_pairs = _wire_pairs


class Headers(Mapping):
    """Request headers, looked up case-insensitively. A repeated header reads as its
    values joined with ``", "``; ``get_all(name)`` gives them one by one."""

    __slots__ = ("_map",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        m: dict[str, list[str]] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            v = _header_text(value)
            if key in m:
                m[key].append(v)
            else:
                m[key] = [v]
        self._map = m

    def __getitem__(self, name: str) -> str:
        return ", ".join(self._map[name.lower()])

    def get_all(self, name: str) -> list[str]:
        return list(self._map.get(name.lower(), ()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


class Request:
    """One HTTP request.

    Attributes (all read-only): ``method``, ``path`` (percent-decoded), ``raw_path`` (as
    sent), ``query`` (dict; the last value wins for a repeated name), ``query_list``
    (every pair), ``query_string`` (raw, without ``?``), ``params`` (route parameters,
    decoded), ``headers`` (case-insensitive), ``raw_headers`` (bytes pairs in arrival
    order), ``body`` (bytes), ``text``, ``json()``, ``remote_addr``, ``route`` (the
    matched pattern), ``http_version`` (``"1.0"``, ``"1.1"`` or ``"2"``),
    ``content_length`` (declared, or None), ``body_streamed``.

    Streaming (see ``ember.streaming`` and ``ember.body``): ``stream`` (the body as a file
    object, read in pieces on ``stream_body`` routes), ``stream_response(status, headers,
    content_type)`` (answer in pieces), ``on_abort(fn)``.
    """

    # Unset fields read these class defaults: a request sets only the two it is made
    # with (where 19 slots were each set to None: about 750 instructions per request).
    _f = _method = _raw_path = _query_string = _body = None
    _remote = _route = _raw_headers = _raw_params = None
    _headers = _params = _query_list = None
    _deferred = _events = _stream = _reader = None

    def __init__(self, handle: int, info: int | None) -> None:
        #: The engine's request handle (an integer token).
        self.handle = handle
        self._info = info

    # -- reading the engine's struct -------------------------------------------------
    def _fields(self) -> tuple:
        f = self._f
        if f is None:
            if self._info is None:
                raise RuntimeError("ember: request data is gone (the request was answered)")
            f = self._f = _INFO.unpack_from(MEM, self._info)
        return f

    def _view(self, i: int) -> bytes:
        # Views are fields 2..13 as (ptr, len) pairs; i is the pair number (0 = method).
        f = self._fields()
        n = f[3 + 2 * i]
        if not n:
            return b""
        p = f[2 + 2 * i]
        return MEM[p:p + n].tobytes()

    def _detach(self) -> None:
        """Copies everything out of the engine's memory; the struct is not read again."""
        if self._info is None:
            return
        for name in ("method", "raw_path", "query_string", "remote_addr", "route", "raw_headers"):
            getattr(self, name)  # each property caches what it reads
        if self._body is None:
            self._body = self._view(3)
        self._params_raw()
        # _f stays: flags and content length are read from it after this, too.
        self._info = None

    # -- fields ----------------------------------------------------------------------
    @property
    def method(self) -> str:
        if self._method is None:
            self._method = self._view(0).decode("ascii", "replace")
        return self._method

    @property
    def raw_path(self) -> str:
        if self._raw_path is None:
            self._raw_path = _text(self._view(1))
        return self._raw_path

    @property
    def path(self) -> str:
        return unquote(self.raw_path)

    @property
    def query_string(self) -> str:
        if self._query_string is None:
            self._query_string = _text(self._view(2))
        return self._query_string

    @property
    def query_list(self) -> list[tuple[str, str]]:
        if self._query_list is None:
            self._query_list = parse_qsl(self.query_string, keep_blank_values=True)
        return self._query_list

    @property
    def query(self) -> dict[str, str]:
        return dict(self.query_list)

    @property
    def body(self) -> bytes:
        """The whole body. On a ``stream_body`` route the body is not buffered: read
        ``stream`` instead (this raises RuntimeError there)."""
        if self.body_streamed:
            raise RuntimeError("ember: this route streams its body (stream_body=True): read req.stream")
        if self._body is None:
            self._body = self._view(3)
        return self._body

    @property
    def body_streamed(self) -> bool:
        """True on a ``stream_body`` route: the body is read from ``stream``."""
        return bool(self._fields()[_I_FLAGS] & _BODY_STREAMED)

    @property
    def content_length(self) -> int | None:
        """The declared Content-Length; None when the client did not state one."""
        n = self._fields()[_I_LENGTH]
        return None if n < 0 else n

    @property
    def stream(self) -> Any:
        """The body as a file object: a ``BodyStream`` (sync: ``read(n)``, ``readinto``,
        iteration in chunks) or, inside a coroutine, an ``AsyncBodyStream`` (``await
        read(n)``, ``async for``). See ``ember.body``."""
        reader = self._reader
        if reader is None:
            import io
            from . import body as _body
            in_loop = _get_running_loop() is not None
            if self.body_streamed:
                if in_loop:
                    reader = _body.AsyncBodyStream(self, self.content_length)
                else:
                    reader = _body.BodyStream(self.handle, self.content_length)
            else:
                reader = _body.BufferedAsyncBody(self.body) if in_loop else io.BytesIO(self.body)
            self._reader = reader
        return reader

    def stream_response(self, status: int = 200, headers: Any = None, content_type: str | None = None) -> Any:
        """Starts a streamed answer (head now, body in ``write`` calls) and returns a
        ``ResponseStream`` or, inside a coroutine, an ``AsyncResponseStream``. Default type
        application/octet-stream. See ``ember.streaming``."""
        from .streaming import begin
        return begin(self, status, headers, content_type)

    def on_abort(self, fn: Any) -> None:
        """Calls ``fn()`` (on an engine thread, once) if the request is aborted: the client
        leaves, the handler timeout answers, or the server stops, before the answer is
        complete. Costs one more engine call and event per request, so only asked for.
        Called at once if the request was aborted already."""
        from ._events import events_of
        ev = events_of(self)
        if not ev.add_abort_callback(fn) and ev.aborted:
            fn()
    @property
    def remote_addr(self) -> str:
        if self._remote is None:
            self._remote = _text(self._view(4))
        return self._remote

    @property
    def route(self) -> str:
        if self._route is None:
            self._route = _text(self._view(5))
        return self._route

    @property
    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        if self._raw_headers is None:
            f = self._fields()
            self._raw_headers = _pairs(f[14], f[15])
        return self._raw_headers

    @property
    def headers(self) -> Headers:
        if self._headers is None:
            self._headers = Headers(self.raw_headers)
        return self._headers

    def _params_raw(self) -> list[tuple[bytes, bytes]]:
        if self._raw_params is None:
            f = self._fields()
            self._raw_params = _pairs(f[16], f[17])
        return self._raw_params

    @property
    def params(self) -> dict[str, str]:
        if self._params is None:
            self._params = {_text(k): _text(v) for k, v in self._params_raw()}
        return self._params

    @property
    def http_version(self) -> str:
        v = self._fields()[18]
        return _HTTP_VERSIONS.get(v, str(v))

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def text(self) -> str:
        """The body decoded with the Content-Type's charset (UTF-8 if none)."""
        charset = "utf-8"
        for part in self.content_type.split(";")[1:]:
            k, _, v = part.strip().partition("=")
            if k.lower() == "charset" and v:
                charset = v.strip('"')
        try:
            return self.body.decode(charset, "replace")
        except LookupError:
            return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON (``json.JSONDecodeError`` if it is not)."""
        return _json.loads(self.body)

    def defer(self) -> "Deferred":
        """Answers later, from any thread: the handler returns ``None`` and whoever holds
        the returned ``Deferred`` calls ``respond(result)`` exactly once."""
        if self._deferred is None:
            self._deferred = Deferred(self.handle, self)
        return self._deferred

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.raw_path}>"


class Deferred:
    """A request answered after its handler returned (see ``Request.defer``)."""

    __slots__ = ("handle", "request", "_lock", "_done")

    def __init__(self, handle: int, request: Request) -> None:
        self.handle = handle
        self.request = request
        self._lock = threading.Lock()
        self._done = False

    def respond(self, result: Any = None) -> bool:
        """Sends ``result`` (anything a handler may return). True if the engine took it;
        False if the request had already been answered, timed out (the engine sent 503)
        or its client left."""
        from .response import answer

        with self._lock:
            if self._done:
                return False
            self._done = True
        return answer(self.handle, result, self.request)
