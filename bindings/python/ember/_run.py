"""``Server.run``: serve until SIGINT/SIGTERM, optionally drain, then stop gracefully."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any, Callable

from .errors import EmberError

log = logging.getLogger("ember")


def until_signal(server: Any, port: int, host: str, timeout: float,
                 ready: Callable[[int], Any] | None, reuse_port: bool, drain: float,
                 refuse: float = 0.0) -> None:
    stop_requested = threading.Event()
    signals: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        def on_signal(signum: int, frame: Any) -> None:
            signals.append(signum)
            stop_requested.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        if not server.running:
            server.start(port, host, reuse_port)
        if ready is not None:
            ready(server._port)
        # Short slices: Python runs signal handlers only between them.
        while not stop_requested.is_set():
            if server.wait(0.2):
                break
        if signals and (drain > 0 or refuse > 0) and server.running:
            _drain_for(server, drain, refuse, signals)
    finally:
        try:
            server.stop(timeout)
            if not server._inside_handler():
                server.wait()
        finally:
            # Restored only now: a second SIGTERM/SIGINT during the graceful drain
            # must not meet the default action and kill the process.
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _drain_for(server: Any, drain: float, refuse: float, signals: list[int]) -> None:
    # Serving goes on while draining: a balancer with active checks needs its health
    # checks answered (503) and keeps sending what it already routed here until it
    # notices. Then, refusing new connections, what is open finishes and a balancer's idle
    # connections expire on its side. A second signal ends the wait.
    seen = len(signals)
    for seconds, step in ((drain, server.drain), (refuse, server.stop_accepting)):
        if seconds <= 0:
            continue
        try:
            step()
        except (RuntimeError, EmberError) as e:  # stopped meanwhile by another thread
            log.warning("ember: %s: %s", step.__name__, e)
            return
        log.info("ember: signal %d: %s for %.1f s", signals[0], step.__name__, seconds)
        deadline = time.monotonic() + seconds
        while len(signals) == seen:
            left = deadline - time.monotonic()
            if left <= 0 or server.wait(min(0.2, left)):
                break
        if len(signals) != seen:
            return
