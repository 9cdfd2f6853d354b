"""What the ASGI and WSGI servers share: an ``ember.Server`` whose one catch-all route
is the adapter's own C callback, and the start / stop / run lifecycle around it."""

from __future__ import annotations

import logging
from typing import Any, Callable

from . import _lib
from .response import _QUIET
from ._stream import ROUTE_POOL as _ROUTE_POOL, ROUTE_STREAM_BODY as _ROUTE_STREAM_BODY
from .server import Server

log = logging.getLogger("ember")
access = logging.getLogger("ember.access")

_respond = _lib.held.ember_request_respond
_ERROR_HEAD = b"Content-Type: text/plain; charset=utf-8\r\n"
_ERROR_BODY = b"Internal Server Error"


def internal_error(handle: int) -> None:
    """Answers 500 with a plain body (never the exception's text)."""
    rc = _respond(handle, 500, _ERROR_HEAD, len(_ERROR_HEAD), _ERROR_BODY, len(_ERROR_BODY))
    if rc != _lib.OK and rc not in _QUIET:
        log.error("answering 500 failed: %s", _lib.result_name(rc))


def refused(rc: int, handle: int, what: str, logger: logging.Logger) -> None:
    """Reports an answer the engine did not take; one it refused as invalid becomes a 500."""
    if rc in _QUIET:
        logger.debug("answer for %s dropped: %s", what, _lib.result_name(rc))
        return
    msg = _lib.last_error()  # first: any other engine call may replace it
    logger.error("the engine refused the answer to %s: %s: %s", what, _lib.result_name(rc), msg)
    if rc == _lib.ERR_INVALID_ARG:
        internal_error(handle)


class AppServer:
    """Base of ``ASGIServer`` and ``WSGIServer``: subclasses give ``_make_callback()``
    (the C callback for every request) and may hook ``_startup``/``_shutdown``."""

    def __init__(self, host: str, port: int, *, dispatch: str, workers: int, pool_threads: int,
                 reuse_port: bool, access_log: bool = False, loop: Any = None, **limits: Any) -> None:
        self.host = host
        self.port = port
        self.reuse_port = reuse_port
        self.access_log = access_log
        self._server = Server(workers=workers, dispatch=dispatch, pool_threads=pool_threads, loop=loop, **limits)
        self._started = False

    def _install(self, stream_bodies: bool, blocking: bool = False) -> None:
        callback = self._make_callback()
        # ``blocking``: the callback waits on its own streamed answer, which its
        # connection's I/O thread must drain, so the engine must never run it there
        # (EMBER_ROUTE_POOL: the engine's auto dispatch would otherwise run quick
        # handlers inline; pool dispatch always uses the pool anyway).
        base = _ROUTE_POOL if blocking else 0
        # Every path ("/" apart because the wildcard needs at least one character).
        # ``stream_bodies``: requests of methods that carry bodies (POST, PUT, PATCH, any
        # other) start once their head is in and read the body as it comes; GET, HEAD,
        # DELETE and OPTIONS keep the buffered route, where a body (rare) is in the info
        # struct and reading costs no engine call.
        for pattern in ("/", "/{*path}"):
            if stream_bodies:
                self._server._add_raw_route(["GET", "DELETE", "OPTIONS"], pattern, callback, flags=base)
                self._server._add_raw_route(None, pattern, callback, flags=base | _ROUTE_STREAM_BODY)
            else:
                self._server._add_raw_route(None, pattern, callback, flags=base)

    def _make_callback(self) -> Callable[[int, int, int], None]:
        raise NotImplementedError

    def _listening(self, port: int) -> None:
        """Called with the bound port as soon as it is known."""
        self.port = port

    def _startup(self) -> None:
        pass

    def _shutdown(self, timeout: float) -> None:
        pass

    def start(self) -> int:
        """Listens and returns the port (ember.EmberError on failure, e.g. address in use)."""
        self._startup()
        try:
            port = self._server.start(self.port, self.host, reuse_port=self.reuse_port)
        except BaseException:
            self._shutdown(1.0)
            raise
        self._listening(port)
        self._started = True
        return port

    def stop(self, timeout: float = 5.0) -> None:
        """Stops listening, lets in-flight requests finish (up to ``timeout`` s), then the
        rest are closed."""
        if not self._started:
            return
        self._started = False
        self._server.stop(timeout)
        self._server.wait()
        self._shutdown(timeout)

    def run(self, ready: Callable[[int], Any] | None = None, timeout: float = 5.0, drain: float = 0.0,
            refuse: float = 0.0) -> None:
        """Serves until SIGINT/SIGTERM (main thread) or ``stop()``, then stops gracefully
        (after ``drain`` seconds of draining and ``refuse`` seconds refusing new connections
        when a signal stopped it; see ``Server.run``).
        ``ready(port)`` is called once listening."""
        self._startup()

        def on_ready(port: int) -> None:
            self._listening(port)
            if ready is not None:
                ready(port)

        try:
            self._server.run(self.port, self.host, timeout=timeout, ready=on_ready, reuse_port=self.reuse_port,
                             drain=drain, refuse=refuse)
        finally:
            self._shutdown(timeout)

    @property
    def server(self) -> Server:
        """The underlying ``ember.Server`` (stats, running state)."""
        return self._server

    def __enter__(self) -> "AppServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
