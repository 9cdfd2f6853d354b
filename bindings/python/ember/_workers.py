"""``--workers N``: N forked processes serving one port, as gunicorn does.

The supervisor first binds the port itself with SO_REUSEPORT but never listens on it:
that picks the port (also for ``--port 0``) and keeps it reserved while workers come and
go; a socket that does not listen gets no connections. Each worker then imports the app
(after the fork: the supervisor stays free of the app's threads and state), listens on
the same port with SO_REUSEPORT, and the kernel spreads connections among them.

- Startup: a worker reports readiness through a pipe. A worker that dies before it is
  ready (import error, lifespan failure, bind error) stops the whole start, with its
  exit code.
- A worker that dies later is replaced.
- SIGTERM / SIGINT: every worker gets SIGTERM and drains; the supervisor waits for them
  (SIGKILL after the graceful timeout plus a margin).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import select
import signal
import socket
import time

log = logging.getLogger("ember")

_RESTART_WINDOW = 10.0  # seconds: this many quick deaths in a row ...
_MAX_QUICK_DEATHS = 5   # ... and the supervisor gives up


def _reserve_port(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class _Worker:
    def __init__(self, pid: int, ready_fd: int, index: int) -> None:
        self.pid = pid
        self.ready_fd = ready_fd
        self.index = index
        self.ready = False
        self.started = time.monotonic()


def _child(args: argparse.Namespace, port: int, ready_w: int) -> int:
    from .cli import serve_one

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)

    def ready(bound: int) -> None:
        try:
            os.write(ready_w, b"1")
            os.close(ready_w)
        except OSError:
            pass

    return serve_one(args, port, reuse_port=True, ready=ready)


def supervise(args: argparse.Namespace) -> int:
    from .cli import EXIT_ERROR, EXIT_OK, _url_host

    try:
        reserved = _reserve_port(args.host, args.port)
    except OSError as e:
        log.error("cannot listen on %s:%d: %s", args.host, args.port, e.strerror or e)
        return EXIT_ERROR
    port = reserved.getsockname()[1]
    stopping = False
    # A self-pipe wakes the wait below on SIGTERM/SIGINT/SIGCHLD.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)

    def on_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    workers: dict[int, _Worker] = {}

    def spawn(index: int) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(r)
                os.close(wake_r)
                os.close(wake_w)
                reserved.close()
                code = _child(args, port, w)
            except BaseException:
                log.exception("worker failed")
            finally:
                logging.shutdown()
                os._exit(code)
        os.close(w)
        workers[pid] = _Worker(pid, r, index)

    previous = {sig: signal.signal(sig, on_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select
    exit_code = EXIT_OK
    quick_deaths: list[float] = []
    try:
        for i in range(args.workers):
            spawn(i)
        announced = False
        while not stopping:
            pending = [w.ready_fd for w in workers.values() if w.ready_fd >= 0]
            try:
                readable, _, _ = select.select(pending + [wake_r], [], [], 1.0)
            except InterruptedError:
                readable = []
            if wake_r in readable:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            for w in list(workers.values()):
                if not w.ready and w.ready_fd in readable:
                    if os.read(w.ready_fd, 1):
                        w.ready = True
                    os.close(w.ready_fd)
                    w.ready_fd = -1
            if not announced and len(workers) == args.workers and all(w.ready for w in workers.values()):
                announced = True
                log.info("listening on http://%s:%d (%d workers; Ctrl+C to stop)", _url_host(args.host), port,
                         args.workers)
            # Reap the dead.
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pid = 0
                if pid == 0:
                    break
                w = workers.pop(pid, None)
                if w is None:
                    continue
                code = os.waitstatus_to_exitcode(status)
                if w.ready_fd >= 0:
                    os.close(w.ready_fd)
                if not w.ready:
                    log.error("worker %d exited with %d before it was ready; stopping", pid, code)
                    exit_code = code if code > 0 else EXIT_ERROR
                    stopping = True
                    break
                now = time.monotonic()
                quick_deaths = [t for t in quick_deaths if now - t < _RESTART_WINDOW] + [now]
                if len(quick_deaths) > _MAX_QUICK_DEATHS:
                    log.error("workers keep dying (%d in %.0f s); stopping", len(quick_deaths), _RESTART_WINDOW)
                    exit_code = EXIT_ERROR
                    stopping = True
                    break
                log.warning("worker %d exited with %d; starting a new one", pid, code)
                spawn(w.index)
    finally:
        _stop_all(workers, args.timeout_graceful_shutdown + 5.0)
        signal.set_wakeup_fd(-1)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (wake_r, wake_w):
            os.close(fd)
        reserved.close()
    log.info("stopped")
    return exit_code


def _stop_all(workers: dict[int, _Worker], grace: float) -> None:
    for pid in workers:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while workers and time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            w = workers.pop(pid, None)
            if w is not None and w.ready_fd >= 0:
                os.close(w.ready_fd)
        else:
            time.sleep(0.05)
    for pid, w in workers.items():
        log.warning("worker %d did not stop in %.0f s: killed", pid, grace)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        if w.ready_fd >= 0:
            try:
                os.close(w.ready_fd)
            except OSError as e:
                if e.errno != errno.EBADF:
                    raise
    workers.clear()
