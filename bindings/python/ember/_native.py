"""One engine server (``ember_server*``) and every C callback it may call.

The ctypes callback objects (handler, release, log, thread hooks, the WebSocket
callbacks) live here, and a ``_Native`` stays referenced until ``ember_server_free`` has
returned: after that the engine never calls back, and every registration's release
callback has dropped its handler.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from ctypes import byref
from typing import Any

from . import _crossing, _lib
from ._async import LoopRunner
from ._dispatch import (ASYNC, LOG_CB, OFFLOAD, RAW, SYNC, THREAD_START_CB, THREAD_STOP_CB, engine_min_level,
                        make_dispatch)
from .errors import EmberError, check

L = _lib.lib

#: Threads that run offloaded handlers (see _dispatch.OFFLOAD): a stop called on one
#: must not block on the request that thread is answering.
offload_threads: set[int] = set()


def _offload_thread_started() -> None:
    offload_threads.add(threading.get_ident())


class _Native:
    """One engine server and the callbacks it may call."""

    def __init__(self, runner: LoopRunner, inline: bool = False) -> None:
        from ._wshub import WsHub

        self.ptr = ctypes.POINTER(_lib.Server)()
        check(L.ember_server_new(byref(self.ptr)), "ember_server_new")
        # Slot 0 stays empty so that no registration's user_data is NULL.
        self.table: list = [None]
        self.released = 0
        self.inline = inline
        self.runner = runner
        self._offload: ThreadPoolExecutor | None = None
        dispatch = make_dispatch(self.table, runner, self.offload)
        sp = _crossing.speedups
        self.key = 0
        if sp is not None:
            # The C crossing: one C callback for every server; user_data says which.
            from ._dispatch import failed
            from .request import Request
            from .response import Response
            try:
                self.key = sp.register(dispatch, self.table, Request, Response, dispatch.finish, failed)
            except RuntimeError:
                # Its keys are never reused (a late callback must not reach a newer server):
                # past 4,095 servers in one process, the next ones cross through ctypes.
                self.key = 0
        if self.key:
            self.handler_cb = _crossing.C_HANDLER
        else:
            self.handler_cb = _lib.HANDLER_FN(dispatch)
        self.release_cb = _lib.RELEASE_FN(self._release)
        self.ws = WsHub(self.table, runner)
        self._cond = threading.Condition()
        self._waiters = 0
        self.closing = False
        self.freed = False

    def _release(self, slot: int) -> None:
        try:
            self.table[slot & _crossing.SLOT_MASK] = None
            self.released += 1
        except BaseException:
            pass

    def offload(self, fn: Any, *args: Any) -> None:
        """Runs ``fn(*args)`` on one of the binding's own threads (created on first use)."""
        pool = self._offload
        if pool is None:
            with self._cond:
                pool = self._offload
                if pool is None:
                    workers = max(8, 4 * (os.cpu_count() or 1))
                    pool = self._offload = ThreadPoolExecutor(workers, thread_name_prefix="ember-offload",
                                                              initializer=_offload_thread_started)
        pool.submit(fn, *args)

    def configure(self, workers: int, dispatch: int, pool_threads: int, limits: dict[int, int]) -> None:
        p = self.ptr
        check(L.ember_server_set_workers(p, workers), "ember_server_set_workers")
        check(L.ember_server_set_dispatch(p, dispatch), "ember_server_set_dispatch")
        check(L.ember_server_set_pool_threads(p, pool_threads), "ember_server_set_pool_threads")
        for limit, value in limits.items():
            check(L.ember_server_set_limit(p, limit, value), "ember_server_set_limit")
        check(L.ember_server_set_log(p, LOG_CB, 0, engine_min_level()), "ember_server_set_log")
        check(L.ember_server_set_thread_hooks(p, THREAD_START_CB, THREAD_STOP_CB, 0),
              "ember_server_set_thread_hooks")

    def add_route(self, route: Any) -> None:
        slot = len(self.table)
        cb = self.handler_cb
        data = _crossing.user_data(self.key, slot) if self.key else slot
        if route.raw and self.key:
            # The adapter's own function, called by the C crossing's handler (no ctypes
            # trampoline) with what the engine passes: no Request, no dispatch.
            self.table.append((route.fn, RAW))
        elif route.raw:
            data = slot
            # The adapter's own function is the C callback: no Request, no dispatch.
            cb = _lib.HANDLER_FN(route.fn)
            self.table.append(cb)
        else:
            if route.is_async:
                mode = ASYNC
            elif route.flags & _lib.ROUTE_STREAM_BODY and self.inline:
                mode = OFFLOAD
            else:
                mode = SYNC
            self.table.append((route.fn, mode))
        method = route.method.encode("ascii") if route.method else None
        if route.flags:
            from ._stream import route_flags
            rc = route_flags(self.ptr, method, wire_pattern(route.pattern), route.flags, cb, data,
                             self.release_cb)
        else:
            rc = L.ember_server_route(self.ptr, method, wire_pattern(route.pattern), cb, data, self.release_cb)
        if rc != _lib.OK:
            self.table[slot] = None  # on failure the engine took nothing
            raise EmberError(rc, _lib.last_error(), f"route {route.method or '*'} {route.pattern}")

    def add_websocket(self, endpoint: Any) -> None:
        self.ws.register(self.ptr, endpoint, self.release_cb, wire_pattern(endpoint.pattern))

    def enter(self) -> bool:
        """Marks a thread as using ptr (waiting); False once freeing has begun."""
        with self._cond:
            if self.closing:
                return False
            self._waiters += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._waiters -= 1
            self._cond.notify_all()

    def free(self) -> int:
        with self._cond:
            if self.closing:
                return _lib.OK
            self.closing = True
            # ember_server_free must not run while another thread is inside
            # ember_server_wait on the same pointer; waits come in short slices.
            while self._waiters:
                self._cond.wait()
        rc = L.ember_server_free(self.ptr)
        if rc == _lib.OK:
            self.freed = True
            if self.key:  # no callback runs any more
                _crossing.speedups.unregister(self.key)
            self.ws.conns.clear()
            pool, self._offload = self._offload, None
            if pool is not None:
                # Offloaded handlers still running find their requests ended (the engine
                # answers them with errors); they are not waited for.
                pool.shutdown(wait=False)
        else:
            with self._cond:
                self.closing = False
        return rc


def wire_pattern(pattern: str) -> bytes:
    """The engine matches the path as sent, and clients percent-encode non-ASCII text,
    so a literal like ``/städte`` is registered as ``/st%C3%A4dte`` to be reachable."""
    if pattern.isascii():
        return pattern.encode("ascii")
    parts = re.split(r"(\{[^}]*\})", pattern)  # parameter names stay as written
    for i in range(0, len(parts), 2):
        parts[i] = "".join(c if c.isascii() else "".join("%%%02X" % b for b in c.encode("utf-8"))
                           for c in parts[i])
    return "".join(parts).encode("utf-8")
