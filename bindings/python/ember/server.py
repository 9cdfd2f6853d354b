"""The Server: routes, WebSocket endpoints, and the lifecycle.

Per started server the binding registers ONE ctypes handler callback for all routes;
the route's number is the registration's user_data, so dispatch is a list lookup. The
ctypes callback objects live in a ``_Native`` (``_native.py``) that stays referenced until
``ember_server_free`` has returned: after that the engine never calls back, and every
route's release callback has dropped its handler.
"""

from __future__ import annotations

import atexit
import ctypes
import inspect
import logging
import os
import sys
import threading
import time
from ctypes import byref, c_uint16
from typing import Any, Callable, Iterable, Union

from . import _lib, _run
from ._async import LoopRunner
from ._front import FrontMixin
from ._dispatch import engine_threads
from ._native import _Native, offload_threads
from .errors import check
from .request import Request
from .tls import TlsMixin, pop_options as _tls_options
from ._wshub import broadcast as _broadcast
from .websocket import Endpoint

log = logging.getLogger("ember")

Handler = Callable[[Request], Any]
Methods = Union[str, Iterable[str], None]

L = _lib.lib

# Running servers, so that interpreter exit can stop them (see _stop_all).
_running: set = set()


class _Route:
    __slots__ = ("method", "pattern", "fn", "is_async", "raw", "flags")

    def __init__(self, method: str | None, pattern: str, fn: Handler, raw: bool = False, flags: int = 0) -> None:
        self.method = method
        self.pattern = pattern
        self.fn = fn
        self.raw = raw
        self.flags = flags
        self.is_async = not raw and (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)))


def _methods(methods: Methods) -> list[str | None]:
    if methods is None or methods == "*":
        return [None]
    if isinstance(methods, str):
        methods = [methods]
    out = [m.upper() for m in methods]
    if not out:
        raise ValueError("ember: no methods given")
    return out


def _ms(seconds: float | None) -> int:
    return int(round(seconds * 1000))


_LIMIT_KEYS = {
    "max_header_bytes": (_lib.LIMIT_MAX_HEADER_BYTES, int),
    "max_headers": (_lib.LIMIT_MAX_HEADERS, int),
    "max_body_bytes": (_lib.LIMIT_MAX_BODY_BYTES, int),
    "header_timeout": (_lib.LIMIT_HEADER_TIMEOUT_MS, _ms),
    "idle_timeout": (_lib.LIMIT_IDLE_TIMEOUT_MS, _ms),
    "max_connections": (_lib.LIMIT_MAX_CONNECTIONS, int),
    "handler_timeout": (_lib.LIMIT_HANDLER_TIMEOUT_MS, _ms),
    "max_stream_body_bytes": (_lib.LIMIT_MAX_STREAM_BODY_BYTES, int),
    "stream_queue_bytes": (_lib.LIMIT_STREAM_QUEUE_BYTES, int),
    "ws_max_message_bytes": (_lib.LIMIT_WS_MAX_MESSAGE_BYTES, int),
    "ws_queue_bytes": (_lib.LIMIT_WS_QUEUE_BYTES, int),
    "ws_ping_interval": (_lib.LIMIT_WS_PING_INTERVAL_MS, _ms),
    "ws_max_connections": (_lib.LIMIT_WS_MAX_CONNECTIONS, int),
}


class Server(TlsMixin, FrontMixin):
    """An HTTP server running inside this process.

    ``Server(workers=0, dispatch="auto", pool_threads=0, loop=None, **limits)``

    - ``workers``: engine I/O threads (0 = one per core).
    - ``dispatch``: ``"auto"`` (default): on the I/O thread while a spare one stays free,
      else on the pool; a handler that blocks holds only its own connection (the engine
      hands the other sockets to the spare thread after 2 ms), fast ones pay no thread
      hand-off. Inline, ``ResponseStream.write`` into a full queue raises ``WouldBlock``:
      ``pool=True`` routes (and ``stream_body`` ones) always run on the pool. ``"pool"``:
      every handler on a bounded thread pool; ``"inline"``: on the I/O threads, never block.
    - ``pool_threads``: size of that pool (0 = engine default).
    - ``loop``: an asyncio loop (running in some thread) for ``async def`` handlers;
      by default the binding runs its own loop in a daemon thread.
    - limits (None = engine default): ``max_body_bytes`` (413), ``max_header_bytes``
      and ``max_headers`` (431), ``max_connections``, and in seconds
      ``header_timeout`` (408), ``idle_timeout``, ``handler_timeout`` (503); 0 turns a
      timeout off. Streaming: ``max_stream_body_bytes`` (413 on ``stream_body`` routes),
      ``stream_queue_bytes`` (a streamed answer's queue). WebSocket:
      ``ws_max_message_bytes`` (close 1009), ``ws_queue_bytes`` (send queue),
      ``ws_ping_interval`` (seconds; 0 = no pings), ``ws_max_connections`` (per path).
    - ``access_log``, ``access_log_format``, ``metrics_path``; TLS listeners with
      ``listen_tls``: see ``ember.tls.TlsMixin``.

    Register routes with ``@app.get(path)``, ``@app.post(path)``, ``@app.route(methods,
    path)``, WebSocket endpoints with ``@app.websocket(path)``, before ``start()``;
    patterns take ``{name}`` parameters and a trailing ``{*rest}``. A stopped server can
    be started again.
    """

    def __init__(self, *, workers: int = 0, dispatch: str = "auto", pool_threads: int = 0,
                 loop: Any = None, health_path: str | None = None, trusted_proxies: Iterable[str] = (),
                 **limits: float | None) -> None:
        if health_path is not None and not health_path.startswith("/"):
            raise ValueError(f"ember: a health path starts with '/': {health_path!r}")
        # Behind a load balancer: the engine answers `health_path` itself (200, or 503 once
        # drain() was called), and only `trusted_proxies` (CIDRs) may name the client
        # through Forwarded / X-Forwarded-For / X-Forwarded-Proto or the PROXY protocol.
        self.health_path = health_path
        self.trusted_proxies = [str(c) for c in trusted_proxies]
        if dispatch not in _lib.DISPATCH_MODES:
            raise ValueError("ember: dispatch is 'auto', 'pool' or 'inline'")
        self.workers = workers
        self.dispatch = dispatch
        self.pool_threads = pool_threads
        self._limits: dict[int, int] = {}
        self._extras = _tls_options(limits)
        self._tls_listeners: list = []
        self._tls_ports: list = []
        for key, value in limits.items():
            if key not in _LIMIT_KEYS:
                raise TypeError(f"ember: unknown option {key!r}")
            if value is not None:
                code, conv = _LIMIT_KEYS[key]
                if value < 0:
                    raise ValueError(f"ember: {key} must not be negative")
                self._limits[code] = conv(value)
        self._routes: list[_Route] = []
        self._websockets: list[Endpoint] = []
        self._loop = loop
        self._runner: LoopRunner | None = None
        self._native: _Native | None = None
        self._lock = threading.RLock()
        self._stop_lock = threading.Lock()
        self._port: int | None = None

    # -- routes ----------------------------------------------------------------------
    def add_route(self, methods: Methods, path: str, handler: Handler, *, stream_body: bool = False,
                  pool: bool = False) -> None:
        """Registers ``handler`` for ``path`` and each method (``None``/``"*"`` = any).
        ``stream_body``: the handler is called once the head is in and reads the body
        from ``req.stream`` in pieces (see ``ember.body``). ``pool``: under auto dispatch
        the handler always runs on a pool thread (EMBER_ROUTE_POOL), for one that waits on
        its own streamed answer (``ResponseStream.write`` into a full queue)."""
        if not callable(handler):
            raise TypeError("ember: a handler must be callable")
        if not path.startswith("/"):
            raise ValueError(f"ember: a route pattern starts with '/': {path!r}")
        flags = (_lib.ROUTE_STREAM_BODY if stream_body else 0) | (_lib.ROUTE_POOL if pool else 0)
        with self._lock:
            if self._native is not None:
                raise RuntimeError("ember: add routes before start() (or after stop())")
            for m in _methods(methods):
                self._routes.append(_Route(m, path, handler, flags=flags))

    def websocket(self, path: str, handler: Callable | None = None, *, on_open: Callable | None = None,
                  on_message: Callable | None = None, on_close: Callable | None = None,
                  on_writable: Callable | None = None, max_queue: int = 1024,
                  max_queue_bytes: int = 16 << 20) -> Any:
        """A WebSocket endpoint on ``path``: ``@app.websocket(path)`` on an ``async def
        handler(ws)``, or ``app.websocket(path, on_message=fn, ...)`` with callbacks.
        See ``ember.websocket``."""
        if not path.startswith("/"):
            raise ValueError(f"ember: a WebSocket pattern starts with '/': {path!r}")

        def register(fn: Callable | None) -> Any:
            endpoint = Endpoint(path, fn, on_open, on_message, on_close, on_writable, max_queue, max_queue_bytes)
            with self._lock:
                if self._native is not None:
                    raise RuntimeError("ember: add WebSocket endpoints before start() (or after stop())")
                self._websockets.append(endpoint)
            return fn

        if handler is None and on_message is None:
            return register  # used as a decorator
        register(handler)
        return handler

    def broadcast(self, group: str, message: Any, exclude: Any = None) -> int:
        """Sends ``message`` (``str`` text, ``bytes`` binary) to every WebSocket in
        ``group`` (an endpoint's path pattern, or a name connections joined), except
        ``exclude`` (a connection). The frame is encoded once. Returns how many
        connections it was queued to; one whose send queue is full misses it. Any thread."""
        native = self._native
        if native is None or not native.enter():
            raise RuntimeError("ember: server not running")
        try:
            return _broadcast(native.ptr, group, message, exclude)
        finally:
            native.leave()

    def _add_raw_route(self, methods: Methods, path: str, fn: Callable[[int, int, int], None],
                       flags: int = 0) -> None:
        """For the adapters (ASGI, WSGI): ``fn(user_data, handle, info_address)`` is the
        engine's callback itself. It must answer (or hand the handle on) and must never
        raise: nothing catches for it. ``flags``: ``EMBER_ROUTE_*``."""
        with self._lock:
            if self._native is not None:
                raise RuntimeError("ember: add routes before start() (or after stop())")
            for m in _methods(methods):
                self._routes.append(_Route(m, path, fn, raw=True, flags=flags))

    def route(self, methods: Methods, path: str, *, stream_body: bool = False,
              pool: bool = False) -> Callable[[Handler], Handler]:
        """Decorator: ``@app.route(["GET", "HEAD"], "/x")``."""
        def register(fn: Handler) -> Handler:
            self.add_route(methods, path, fn, stream_body=stream_body, pool=pool)
            return fn
        return register

    def get(self, path: str, *, pool: bool = False) -> Callable[[Handler], Handler]:
        return self.route("GET", path, pool=pool)

    def post(self, path: str, *, stream_body: bool = False, pool: bool = False) -> Callable[[Handler], Handler]:
        return self.route("POST", path, stream_body=stream_body, pool=pool)

    def put(self, path: str, *, stream_body: bool = False, pool: bool = False) -> Callable[[Handler], Handler]:
        return self.route("PUT", path, stream_body=stream_body, pool=pool)

    def delete(self, path: str, *, pool: bool = False) -> Callable[[Handler], Handler]:
        return self.route("DELETE", path, pool=pool)

    def patch(self, path: str, *, stream_body: bool = False, pool: bool = False) -> Callable[[Handler], Handler]:
        return self.route("PATCH", path, stream_body=stream_body, pool=pool)

    # -- lifecycle -------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._native is not None

    @property
    def port(self) -> int | None:
        """The bound port while running."""
        return self._port if self._native is not None else None

    def start(self, port: int = 0, host: str = "127.0.0.1", reuse_port: bool = False) -> int:
        """Starts listening on ``host:port`` (0 = a free port) and returns the port.
        Returns once the engine listens; raises EmberError (e.g. ``EMBER_ERR_BIND``).
        ``reuse_port``: SO_REUSEPORT, so that several processes share the port."""
        with self._lock:
            if self._native is not None:
                raise RuntimeError("ember: server already running")
            runner = LoopRunner(self._loop)
            native = _Native(runner, inline=self.dispatch == "inline")
            try:
                native.configure(self.workers, _lib.DISPATCH_MODES[self.dispatch], self.pool_threads,
                                 self._limits)
                for r in self._routes:
                    native.add_route(r)
                for endpoint in self._websockets:
                    native.add_websocket(endpoint)
                if self.health_path is not None:
                    check(L.ember_server_set_health_path(native.ptr, self.health_path.encode("utf-8")),
                          "ember_server_set_health_path")
                for cidr in self.trusted_proxies:
                    check(L.ember_server_add_trusted_proxy(native.ptr, cidr.encode("ascii")),
                          "ember_server_add_trusted_proxy")
                self._apply_front(native.ptr)
                addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
                if reuse_port:
                    check(L.ember_server_listen_flags(native.ptr, addr.encode("ascii"), _lib.LISTEN_REUSE_PORT),
                          "ember_server_listen_flags")
                else:
                    check(L.ember_server_listen(native.ptr, addr.encode("ascii")), "ember_server_listen")
                self._configure_extras(native.ptr)
                # Started before the engine so a request for a coroutine never waits for it;
                # cheap when unused (one idle thread), and needed anyway for awaitable results.
                runner.start()
                check(L.ember_server_start(native.ptr), "ember_server_start")
                out = c_uint16()
                check(L.ember_server_port(native.ptr, 0, byref(out)), "ember_server_port")
                self._started_extras(native.ptr)
            except BaseException:
                L.ember_server_stop(native.ptr, 0)
                native.free()
                runner.stop()
                raise
            self._runner = runner
            self._native = native
            self._port = out.value
            _running.add(self)
            return out.value

    def drain(self) -> None:
        """Starts draining ahead of a stop (a rolling restart behind a load balancer): the
        health path answers 503 and every HTTP/1.1 answer closes its connection, so the
        balancer takes this process out; requests are still served until ``stop()``."""
        native = self._native
        if native is None:
            raise RuntimeError("ember: drain() needs a running server")
        check(L.ember_server_drain(native.ptr), "ember_server_drain")

    def stop_accepting(self) -> None:
        """Drains and closes the listeners: new connections are refused (a balancer without
        active health checks, like nginx open source, then retries elsewhere, even a POST),
        open ones are still served, each answer closing its connection, until ``stop()``."""
        native = self._native
        if native is None:
            raise RuntimeError("ember: stop_accepting() needs a running server")
        check(L.ember_server_stop_accepting(native.ptr), "ember_server_stop_accepting")

    def stop(self, timeout: float = 5.0) -> None:
        """Stops gracefully: no new connections, in-flight requests get up to ``timeout``
        seconds, then the rest are closed. Idempotent. Called from a handler (or from
        any running event loop), it starts the shutdown and returns at once; ``wait()``
        blocks until it is done."""
        native = self._native
        if native is None:
            return
        ms = max(0, _ms(timeout))
        if self._inside_handler():
            # A blocking stop here would wait for the very handler calling it. On an
            # engine thread the engine only starts the shutdown and returns; on an event
            # loop it would block, so there the stop is left to the thread below. Freeing
            # must wait for the calling handler in either case.
            if threading.get_ident() in engine_threads:
                L.ember_server_stop(native.ptr, ms)
            threading.Thread(target=self._finish_stop, args=(native, ms),
                             name="ember-stop", daemon=False).start()
            return
        self._finish_stop(native, ms)

    def _inside_handler(self) -> bool:
        ident = threading.get_ident()
        if ident in engine_threads or ident in offload_threads:
            return True
        runner = self._runner
        if runner is not None and runner.thread_ident == ident:
            return True
        try:
            import asyncio
            asyncio.get_running_loop()
            return True
        except RuntimeError:
            return False

    def _finish_stop(self, native: _Native, ms: int) -> None:
        with self._stop_lock:
            if native.freed:
                return
            rc = L.ember_server_stop(native.ptr, ms)
            if rc != _lib.OK:
                msg = _lib.last_error()
                log.warning("ember: stop: %s: %s", _lib.result_name(rc), msg)
            rc = native.free()
            if rc != _lib.OK:
                msg = _lib.last_error()
                log.error("ember: free: %s: %s", _lib.result_name(rc), msg)
                return
            runner = self._runner
            with self._lock:
                if self._native is native:
                    self._native = None
                    self._runner = None
                    _running.discard(self)
            if runner is not None:
                runner.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the server has stopped (True) or ``timeout`` seconds passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            native = self._native
            if native is None:
                return True
            slice_ms = 200
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                slice_ms = max(1, min(slice_ms, int(left * 1000)))
            if native.enter():
                try:
                    rc = L.ember_server_wait(native.ptr, slice_ms)
                finally:
                    native.leave()
                if rc == _lib.OK and self._native is native:
                    # Engine stopped; the Python side finishes in _finish_stop.
                    time.sleep(0.01)
                elif rc not in (_lib.OK, _lib.ERR_TIMED_OUT):
                    # EMBER_ERR_STATE: called from one of this server's own handlers,
                    # where the engine refuses to block; wait here instead of spinning.
                    time.sleep(slice_ms / 1000)
            else:
                time.sleep(0.01)

    def run(self, port: int = 8080, host: str = "127.0.0.1", timeout: float = 5.0,
            ready: Callable[[int], Any] | None = None, reuse_port: bool = False,
            drain: float = 0.0, refuse: float = 0.0) -> None:
        """Starts (unless running), blocks until SIGINT (Ctrl+C) or SIGTERM, then stops
        gracefully. ``ready(port)`` is called once listening, with the signal handlers
        already in place: a signal right after it (say, after printing the port) still
        stops the server gracefully.

        ``drain`` (seconds, 0 = none): behind a load balancer, a signal first starts
        ``drain()`` (the health path answers 503, answers close their connections) and
        keeps serving for that long, so the balancer moves away before the stop; a second
        signal cuts the drain short. ``refuse`` (seconds, 0 = none): then ``stop_accepting()``
        for that long: new connections are refused, open ones finish (behind nginx open
        source, which has no active health checks, this is the phase that matters: use
        ``drain=0, refuse=`` more than nginx's upstream ``keepalive_timeout``). Then
        ``stop(timeout)`` gives in-flight requests up to ``timeout`` seconds."""
        _run.until_signal(self, port, host, timeout, ready, reuse_port, drain, refuse)

    def stats(self) -> dict[str, int]:
        """Engine counters: requests, responses by class, connections, bytes."""
        native = self._native
        if native is None or not native.enter():
            raise RuntimeError("ember: server not running")
        try:
            s = _lib.Stats()
            check(L.ember_server_stats(native.ptr, byref(s), ctypes.sizeof(s)), "ember_server_stats")
        finally:
            native.leave()
        return {name: getattr(s, name) for name, _ in _lib.Stats._fields_ if name != "size"}

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"port {self._port}" if self.running else "stopped"
        ws = f", {len(self._websockets)} WebSocket endpoints" if self._websockets else ""
        return f"<ember.Server {state}, {len(self._routes)} routes{ws}>"


#: At interpreter exit, running servers get this long (seconds) to stop: up to 2 s of
#: graceful drain, the rest for handlers still running to return. If one is still
#: blocked then, the process ends at once with status 1 (see _stop_all).
EXIT_TIMEOUT = 5.0


def _stop_all() -> None:
    # At interpreter exit engine threads must stop calling into Python before the
    # interpreter is torn down; free() joins them. A handler that never returns would
    # hold free() (and so the exit) for ever, so the stop runs on a daemon thread and
    # the exit waits for it only up to EXIT_TIMEOUT. Past that the interpreter must not
    # be torn down either: the stuck thread, its thread-exit hook or a log line would
    # call into a finalizing interpreter, which ends that thread from inside the engine
    # and aborts the process. So the process ends here, after flushing the logs.
    servers = list(_running)
    if not servers:
        return
    done = threading.Event()

    def stop_them() -> None:
        for server in servers:
            try:
                server.stop(timeout=min(2.0, EXIT_TIMEOUT))
            except BaseException:
                pass
        done.set()

    threading.Thread(target=stop_them, name="ember-exit", daemon=True).start()
    if done.wait(EXIT_TIMEOUT):
        return
    log.error("ember: a handler still runs %.1f s after exit began; ending the process (status 1) "
              "without waiting for it", EXIT_TIMEOUT)
    try:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    finally:
        os._exit(1)


atexit.register(_stop_all)
