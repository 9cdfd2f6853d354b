"""WSGI (PEP 3333) server on the Ember engine: ``ember.wsgi.serve(app)`` or
``python -m ember module:app --interface wsgi``.

The app runs on the engine's pool threads (blocking is fine there), one request per
thread at a time. The environ is built from the engine's info struct and one copy of
the request's text, decoded and split at its NULs in C (no ABI call, no copy per field;
see ``_wire.text_parts``).

Bodies:
- response: a list result goes out in one ``ember_request_respond`` (or
  ``ember_request_respond_small`` when its only headers are Content-Type and the body's
  own Content-Length: no header block built); any other iterable
  is streamed as it yields (``_stream_rest``: ``ember_response_begin`` / ``_write`` /
  ``_end``, waiting on this pool thread when the engine's queue is full), unless the app
  declared a Content-Length of at most ``_stream.COLLECT_MAX`` (collected, length kept).
- request: with pool or auto dispatch, POST, PUT, PATCH and other methods that carry bodies
  come through a route with ``EMBER_ROUTE_STREAM_BODY``: the app starts once the head is
  in, and ``wsgi.input`` reads the body as it comes (``_RawBody`` over
  ``ember_request_read``, blocking the pool thread). GET, HEAD, DELETE, OPTIONS (and
  every method with inline dispatch, which must not block) get a ``BytesIO`` over the
  buffered body.
"""

from __future__ import annotations

import ctypes
import io
import itertools
import logging
from typing import Any, Callable, Iterable, Iterator

from . import _lib, _stream, __version__
from ._host import AppServer, access, internal_error, refused
from ._wsgi_environ import add_headers as _add_headers, header_keys as _header_keys, peer as _peer
from ._wire import INFO, MEM, PROTOCOLS, REQUEST_BODY_STREAMED, picked, text_parts_slow, wsgi_path
from .response import NOCOPY_MIN, send as _send_any

# What a request needs of the info struct, unpacked in one call (the rest is skipped).
_INFO, _AT = picked("method_ptr", "method_len", "body_ptr", "body_len", "header_count", "http_version",
                    "content_length", "flags", "peer_ptr", "peer_len")
I_METHOD, I_BODY, I_HEADER_COUNT, I_VERSION = _AT["method_ptr"], _AT["body_ptr"], _AT["header_count"], _AT["http_version"]
I_LENGTH, I_FLAGS, I_PEER = _AT["content_length"], _AT["flags"], _AT["peer_ptr"]

log = logging.getLogger("ember.wsgi")

WSGIApp = Callable[[dict, Callable[..., Any]], Iterable[bytes]]

# Both only queue the answer (and copy the body, below NOCOPY_MIN): the GIL is kept.
_respond = _lib.held.ember_request_respond
_respond_small = _lib.held.ember_request_respond_small
_ERR_INVALID_ARG = _lib.ERR_INVALID_ARG
_OK = _lib.OK


class ErrorStream:
    """``wsgi.errors``: what the app writes goes to the ``ember.wsgi`` logger, a line at a time."""

    def write(self, text: str) -> int:
        for line in str(text).splitlines():
            if line.strip():
                log.error("%s", line)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass


class FileWrapper:
    """``wsgi.file_wrapper``: an iterable over a file-like object, closed with it."""

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def __iter__(self) -> "FileWrapper":
        return self

    def __next__(self) -> bytes:
        data = self.filelike.read(self.blksize)
        if data:
            return data
        raise StopIteration


class _RawBody(io.RawIOBase):
    """A streamed request body read from the engine (``ember_request_read``), blocking
    this pool thread until data comes; ``wsgi.input`` wraps it in a BufferedReader."""

    def __init__(self, handle: int, left: int) -> None:
        super().__init__()
        self.handle = handle
        self.left = left  # declared length still to come; -1: unknown (chunked)
        self.n = ctypes.c_size_t()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        left = self.left
        if left == 0:
            return 0
        cap = len(b) if left < 0 else min(len(b), left)
        if cap == 0:
            return 0
        rc = _stream.read(self.handle, (ctypes.c_char * cap).from_buffer(b), cap, _READ_WAIT_MS,
                          ctypes.byref(self.n))
        if rc != _OK:
            # Too large (the engine answered 413), too slow (408), or the client left.
            self.left = 0
            raise OSError(f"request body: {_lib.result_name(rc)}")
        got = self.n.value
        if got == 0:
            self.left = 0
        elif left > 0:
            self.left = left - got
        return got


# How long one read of a streamed request body may wait for the client (the engine's
# minimum body rate usually ends a stalled upload first).
_READ_WAIT_MS = 60_000


class _StartResponse:
    """``start_response`` for one request (its bound method ``call``), and what it was given."""

    # Class-level defaults: a request that calls start_response once sets two fields.
    status: str | None = None
    headers: list | None = None
    written: list | None = None

    def call(self, status: str, headers: list, exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None:
            # Nothing has been sent before the app returns (the answer goes out whole),
            # so an error page may always replace the headers given before.
            exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response() called a second time without exc_info")
        if type(status) is not str:
            raise TypeError(f"WSGI status must be a str, got {type(status).__name__}")
        self.status = status
        self.headers = headers
        return self.write

    def write(self, data: bytes) -> None:
        # The legacy write() callable: kept in order, before the iterable's chunks.
        if self.status is None:
            raise AssertionError("write() before start_response()")
        if self.written is None:
            self.written = [data]
        else:
            self.written.append(data)


_STATUS_CODES: dict[str, int] = {}


def _status_code(status: str) -> int:
    code = _STATUS_CODES.get(status)
    if code is None:
        text = status.split(" ", 1)[0]
        if len(text) != 3 or not text.isdigit():
            raise ValueError(f"WSGI status {status!r} does not start with a 3-digit code")
        code = int(text)
        if len(_STATUS_CODES) < 256:
            _STATUS_CODES[status] = code
    return code


def _head(headers: list) -> bytes:
    head = "".join([f"{name}: {value}\r\n" for name, value in headers]).encode("latin-1")
    if head.count(b"\n") != len(headers):
        raise ValueError("a WSGI response header contains a line break")
    return head


def _small_type(headers: list, n: int, environ: dict) -> bytes | None:
    """The Content-Type of an answer whose headers are only that, and perhaps a
    Content-Length equal to ``n`` (not for HEAD, whose stated length is sent as it is),
    else None."""
    if len(headers) == 1:
        name, value = headers[0]
    elif len(headers) == 2:
        (name, value), (name2, value2) = headers
        if type(name2) is not str or type(name) is not str:
            return None
        if name2.lower() != "content-length":
            if name.lower() != "content-length":
                return None
            name, value, name2, value2 = name2, value2, name, value
        if value2 != str(n) or environ["REQUEST_METHOD"] == "HEAD":
            return None
    else:
        return None
    if type(value) is str and type(name) is str and name.lower() == "content-type":
        return value.encode("latin-1")
    return None


def _respond_with(handle: int, start: _StartResponse, result: Iterable[bytes], environ: dict,
                  can_stream: bool) -> tuple[int, int]:
    """Sends the app's answer: whole in one call when the result is a list (or the app
    declared a small Content-Length), else streamed as the iterable yields."""
    if type(result) is list and len(result) == 1 and start.written is None:
        body = result[0]
    elif type(result) is FileWrapper:
        body = result.filelike.read()
    elif type(result) is list or type(result) is tuple:
        body = b"".join((start.written or []) + list(result))
    else:
        chunks = start.written or []
        decided = not can_stream
        rest = iter(result)
        for chunk in rest:
            if not chunk:
                continue
            chunks.append(chunk)
            if not decided:
                decided = True
                if start.status is None:
                    raise AssertionError("the WSGI app yielded a body before calling start_response()")
                declared = _stream.declared_length(start.headers, "content-length")
                if declared is None or declared > _stream.COLLECT_MAX:
                    return _stream_rest(handle, start, chunks, rest, environ)  # streaming switch point
        body = b"".join(chunks)
    if start.status is None:
        raise AssertionError("the WSGI app returned without calling start_response()")
    if type(body) is not bytes:
        body = bytes(body)
    status = _status_code(start.status)
    n = len(body)
    if n < NOCOPY_MIN:
        ctype = _small_type(start.headers, n, environ)
        if ctype is not None:
            # Only a Content-Type (and the body's own length): no header block to build.
            rc = _respond_small(handle, status, ctype, len(ctype), body, n)
            if rc != _ERR_INVALID_ARG:
                if rc != _OK:
                    refused(rc, handle, f"{environ['REQUEST_METHOD']} {environ['RAW_URI']}", log)
                return status, n
        head = _head(start.headers)
        rc = _respond(handle, status, head, len(head), body, n)
    else:
        head = _head(start.headers)
        rc = _send_any(handle, status, head, body)
    if rc != _OK:
        refused(rc, handle, f"{environ['REQUEST_METHOD']} {environ['RAW_URI']}", log)
    return status, n


# How long a streamed write may wait for the client to take data before it is given up.
_WRITE_WAIT_MS = 60_000


def _stream_rest(handle: int, start: _StartResponse, chunks: list, rest: Iterator[bytes],
                 environ: dict) -> tuple[int, int]:
    """A streamed answer (chunked on HTTP/1.1): what came so far, then the rest of the
    iterable as it comes, waiting (on this pool thread) when the engine's queue is full."""
    status = _status_code(start.status)
    head = _head(start.headers)
    rc = _stream.begin(handle, status, head, len(head))
    if rc != _OK:
        refused(rc, handle, f"{environ['REQUEST_METHOD']} {environ['RAW_URI']}", log)
        return status, 0
    sent = 0
    try:
        for chunk in itertools.chain(chunks, rest):
            if not chunk:
                continue
            if type(chunk) is not bytes:
                chunk = bytes(chunk)
            while True:
                rc = _stream.write(handle, chunk, len(chunk))
                if rc == _stream.ERR_WOULD_BLOCK:
                    rc = _stream.wait_writable(handle, _WRITE_WAIT_MS)
                    if rc == _OK:
                        continue
                break
            if rc != _OK:
                log.debug("streamed answer to %s %s stopped: %s", environ["REQUEST_METHOD"], environ["RAW_URI"],
                          _lib.result_name(rc))
                return status, sent
            sent += len(chunk)
    except BaseException:
        # The head is out: no 500 any more. The answer ends where it stands.
        log.exception("Error while streaming the answer to %s %s", environ["REQUEST_METHOD"], environ["RAW_URI"])
    _stream.end(handle)
    return status, sent


class WSGIServer(AppServer):
    """Serves one WSGI app on the engine's thread pool.

    ``WSGIServer(app, host="127.0.0.1", port=8000, root_path="", dispatch="auto",
    workers=0, pool_threads=0, reuse_port=False, multiprocess=False, **limits)``

    ``root_path`` is the ``SCRIPT_NAME`` the app is mounted at (it is taken off the
    front of ``PATH_INFO``). ``pool_threads`` is how many requests run at once
    (0 = engine default). ``dispatch``: ``"auto"`` (default) and ``"pool"`` both run the
    app on the pool (its routes are ``EMBER_ROUTE_POOL``: a WSGI app blocks on its own
    streamed answer); ``"inline"`` runs it on the I/O threads (only for apps that never
    block). ``start()`` / ``stop()`` / ``run()``.
    """

    def __init__(self, app: WSGIApp, host: str = "127.0.0.1", port: int = 8000, *, root_path: str = "",
                 dispatch: str = "auto", workers: int = 0, pool_threads: int = 0, reuse_port: bool = False,
                 multiprocess: bool = False, access_log: bool = False, **limits: Any) -> None:
        self.app = app
        self.root_path = root_path.rstrip("/")
        self.multiprocess = multiprocess
        self.errors = ErrorStream()
        super().__init__(host, port, dispatch=dispatch, workers=workers, pool_threads=pool_threads,
                         reuse_port=reuse_port, access_log=access_log, **limits)
        self._template = [self._environ_template(port)]
        # Reading a streamed body and writing a streamed answer block, which only pool
        # threads may do: under auto dispatch the routes are EMBER_ROUTE_POOL, as the app
        # may block on its own answer (the I/O thread that must drain it).
        self._install(stream_bodies=dispatch != "inline", blocking=dispatch != "inline")

    def _environ_template(self, port: int) -> dict:
        return {
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(port),
            "SERVER_SOFTWARE": f"ember/{__version__}",
            "SCRIPT_NAME": self.root_path,
            "QUERY_STRING": "",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": self.errors,
            "wsgi.multithread": True,
            "wsgi.multiprocess": self.multiprocess,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
            "wsgi.file_wrapper": FileWrapper,
        }

    def _listening(self, port: int) -> None:
        self._template[0] = self._environ_template(port)
        self.port = port

    def _make_callback(self) -> Callable[[int, int, int], None]:
        template = self._template
        root = self.root_path
        app = self.app
        unpack = _INFO.unpack_from
        full = INFO.unpack_from
        slow_parts = text_parts_slow
        mem = MEM
        protocols = PROTOCOLS
        keys: dict[str, str | None] = {}  # header name -> environ key (None: dropped)
        known: dict[tuple, tuple | bool] = {}  # header names -> their keys (False: the long way)
        peers: dict[str, tuple[str, str]] = {}
        BytesIO = io.BytesIO
        BufferedReader = io.BufferedReader
        logged = self.access_log
        # A streamed write waits for the client when the engine's queue is full: that
        # blocks, which only pool threads may do.
        can_stream = self._server.dispatch != "inline"

        def on_request(_ud: int, handle: int, info: int) -> None:
            environ = None
            result = None
            try:
                f = unpack(mem, info)
                # The text views in one copy, decoded (latin-1, one char per byte) and split
                # at their NULs: [method, path, query, remote, route, name, value, ..., peer].
                hc = f[I_HEADER_COUNT]
                start = f[I_METHOD]
                end = f[I_PEER] + f[I_PEER + 1] + 1
                parts = str(mem[start:end], "latin-1").split("\0", 5 + 2 * hc) if end > start else ()
                if len(parts) != 6 + 2 * hc or len(parts[0]) != f[I_METHOD + 1]:
                    parts = [p.decode("latin-1") for p in slow_parts(full(mem, info))]
                environ = template[0].copy()
                environ["REQUEST_METHOD"] = parts[0]
                uri = path = parts[1]
                if "%" in path:
                    path = wsgi_path(path.encode("latin-1"))
                if root and path.startswith(root) and path[len(root):len(root) + 1] in ("", "/"):
                    path = path[len(root):]
                environ["PATH_INFO"] = path
                query = parts[2]
                if query:
                    environ["QUERY_STRING"] = query
                    environ["RAW_URI"] = environ["REQUEST_URI"] = uri + "?" + query
                else:
                    environ["RAW_URI"] = environ["REQUEST_URI"] = uri
                if f[I_VERSION] != 11:
                    environ["SERVER_PROTOCOL"] = protocols.get(f[I_VERSION], "HTTP/1.1")
                peer = parts[3]
                addr = peers.get(peer)
                if addr is None:
                    addr = _peer(peers, peer)
                environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = addr
                if hc:
                    # One environ key per header name, remembered per set of names: most
                    # requests of a client send the same names, then the values go in at once.
                    names = tuple(parts[5:-1:2])
                    ks = known.get(names)
                    if ks is None:
                        ks = _header_keys(known, keys, names)
                    if ks:
                        environ.update(zip(ks, parts[6:-1:2]))
                    else:
                        _add_headers(environ, keys, parts)
                if f[I_FLAGS] & REQUEST_BODY_STREAMED:
                    # Read as the app reads wsgi.input (a body of unknown length has no
                    # CONTENT_LENGTH; wsgi.input_terminated says to read to the end).
                    environ["wsgi.input"] = BufferedReader(_RawBody(handle, f[I_LENGTH]), 65536)
                else:
                    n = f[I_BODY + 1]
                    if n:
                        p = f[I_BODY]
                        environ["wsgi.input"] = BytesIO(mem[p:p + n].tobytes())
                        if "CONTENT_LENGTH" not in environ:  # it came chunked
                            environ["CONTENT_LENGTH"] = str(n)
                    else:
                        environ["wsgi.input"] = BytesIO()
                start = _StartResponse()
                result = app(environ, start.call)
                status, n = _respond_with(handle, start, result, environ, can_stream)
                if logged:
                    access.info('%s:%s - "%s %s %s" %d %d', environ["REMOTE_ADDR"], environ["REMOTE_PORT"],
                                environ["REQUEST_METHOD"], environ["RAW_URI"], environ["SERVER_PROTOCOL"],
                                status, n)
            except BaseException:
                try:
                    what = f"{environ.get('REQUEST_METHOD')} {environ.get('RAW_URI')}" if environ else "request"
                    log.exception("Error handling request %s", what)
                    internal_error(handle)
                except BaseException:
                    pass
            finally:
                close = getattr(result, "close", None) if type(result) is not list else None
                if close is not None:
                    try:
                        close()
                    except BaseException:
                        log.exception("close() of the WSGI response raised")

        return on_request


def serve(app: WSGIApp, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
    """Runs ``app`` until SIGINT/SIGTERM (see ``WSGIServer`` for the options)."""
    WSGIServer(app, host, port, **options).run()
