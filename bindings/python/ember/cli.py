"""The command line: ``python -m ember module:app`` (or the ``ember`` script).

    python -m ember myapp:app --host 0.0.0.0 --port 8000 --workers 4

Serves an ASGI 3 app (FastAPI, Starlette, Django's ASGI handler ...) or a WSGI app
(Flask, Django's WSGI handler ...); ``--interface auto`` tells them apart by whether the
app's ``__call__`` is a coroutine function. ``--workers N`` forks N processes that share
the port (SO_REUSEPORT); SIGTERM or SIGINT stops gracefully. Logging goes through the
``logging`` module (loggers ``ember``, ``ember.asgi``, ``ember.wsgi``, ``ember.access``).

Exit codes: 0 after a graceful stop, 1 bad arguments / app not importable / cannot
listen, 3 the app's startup (ASGI lifespan) failed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import logging
import os
import sys
from typing import Any, Callable, Sequence

log = logging.getLogger("ember")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_STARTUP_FAILED = 3


class AppLoadError(Exception):
    """The app named on the command line could not be loaded."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ember" if os.path.basename(sys.argv[0]) == "ember" else "python -m ember",
        description="Serve an ASGI or WSGI app on the Ember engine.",
        epilog="Example: python -m ember myapp:app --port 8000 --workers 4")
    p.add_argument("app", help="the app as module:attribute (attribute may be dotted; default attribute 'app')")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = a free one)")
    p.add_argument("--interface", choices=("auto", "asgi", "wsgi"), default="auto",
                   help="auto (default): ASGI when the app's __call__ is async, else WSGI")
    p.add_argument("--workers", type=int, default=1,
                   help="processes sharing the port through SO_REUSEPORT (default 1: no fork)")
    p.add_argument("--dispatch", choices=("auto", "inline", "pool"), default="auto",
                   help="where requests start: auto (default) = on the I/O threads while a spare one "
                        "stays free, a blocking call holds only its own connection (WSGI apps always "
                        "get the pool); inline = on the I/O threads, never block; pool = on a thread pool")
    p.add_argument("--io-threads", type=int, default=None,
                   help="engine I/O threads per process (default: one per core; 1 with --workers > 1)")
    p.add_argument("--pool-threads", type=int, default=0,
                   help="size of the thread pool: requests a WSGI app runs at once (0 = engine default)")
    p.add_argument("--root-path", default="", help="the path prefix the app is mounted at (SCRIPT_NAME)")
    p.add_argument("--lifespan", choices=("auto", "on", "off"), default="auto", help="ASGI lifespan (default auto)")
    p.add_argument("--factory", action="store_true", help="the attribute is a factory: call it to get the app")
    p.add_argument("--app-dir", default=".", help="directory put first on sys.path (default .)")
    p.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"), default="info")
    p.add_argument("--access-log", action="store_true", help="one log line per request (logger ember.access)")
    p.add_argument("--timeout-graceful-shutdown", type=float, default=10.0, metavar="SECONDS",
                   help="how long in-flight requests may finish on SIGTERM (default 10)")
    p.add_argument("--health-path", default=None, metavar="PATH",
                   help="the engine answers GET PATH itself: 200, or 503 while draining (behind a load balancer)")
    p.add_argument("--drain", type=float, default=0.0, metavar="SECONDS",
                   help="on SIGTERM/SIGINT first drain for this long (health 503, answers close their "
                        "connections, requests still served), then stop (default 0)")
    p.add_argument("--refuse", type=float, default=0.0, metavar="SECONDS",
                   help="then refuse new connections for this long while open ones finish, before "
                        "the stop (behind nginx open source: more than its upstream keepalive_timeout)")
    p.add_argument("--max-body-size", type=int, default=None, metavar="BYTES",
                   help="larger request bodies get 413 (engine defaults: 1 GiB for streamed bodies, "
                        "16 MiB for the buffered ones of GET, HEAD, DELETE, OPTIONS)")
    p.add_argument("--handler-timeout", type=float, default=None, metavar="SECONDS",
                   help="answer 503 when the app has not answered by then (engine default 30; 0 = off)")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from . import __version__

    try:
        from . import engine_version
        return f"ember {__version__} (engine {engine_version()})"
    except ImportError as e:  # the engine library is missing: say so, but still answer
        return f"ember {__version__} (engine not loadable: {e})"


def load_app(spec: str, app_dir: str = ".", factory: bool = False) -> Any:
    """``"package.module:attr.sub"`` -> the object (``factory``: the result of calling it)."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise AppLoadError(f"app {spec!r} must be given as module:attribute")
    path = os.path.abspath(app_dir)
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        if getattr(e, "name", None) == module_name:
            raise AppLoadError(f"cannot import module {module_name!r}: {e}") from e
        raise
    names = attr.split(".") if attr else ["app"]
    obj: Any = module
    for name in names:
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise AppLoadError(f"module {module_name!r} has no attribute {'.'.join(names)!r}") from None
    if factory:
        obj = obj()
    if not callable(obj):
        raise AppLoadError(f"{spec} is a {type(obj).__name__}, not an ASGI or WSGI app")
    return obj


def detect_interface(app: Any) -> str:
    """"asgi" when calling the app gives a coroutine (async function or async __call__)."""
    if inspect.isclass(app):
        return "asgi" if asyncio.iscoroutinefunction(getattr(app, "__call__", None)) else "wsgi"
    if asyncio.iscoroutinefunction(app) or inspect.iscoroutinefunction(app):
        return "asgi"
    call = getattr(app, "__call__", None)
    if call is not None and asyncio.iscoroutinefunction(call):
        return "asgi"
    return "wsgi"


def _limits(args: argparse.Namespace) -> dict:
    limits: dict = {}
    if args.max_body_size is not None:
        limits["max_body_bytes"] = args.max_body_size
        limits["max_stream_body_bytes"] = args.max_body_size
    if args.handler_timeout is not None:
        limits["handler_timeout"] = args.handler_timeout
    if args.health_path is not None:
        limits["health_path"] = args.health_path
    return limits


def build_server(args: argparse.Namespace, app: Any, interface: str, port: int, reuse_port: bool) -> Any:
    io_threads = args.io_threads if args.io_threads is not None else (1 if args.workers > 1 else 0)
    common = dict(root_path=args.root_path, workers=io_threads, pool_threads=args.pool_threads,
                  reuse_port=reuse_port, access_log=args.access_log, **_limits(args))
    if interface == "asgi":
        from .asgi import ASGIServer
        return ASGIServer(app, args.host, port, lifespan=args.lifespan, dispatch=args.dispatch, **common)
    from .wsgi import WSGIServer
    return WSGIServer(app, args.host, port, dispatch=args.dispatch, multiprocess=args.workers > 1,
                      **common)


def serve_one(args: argparse.Namespace, port: int, reuse_port: bool = False,
              ready: Callable[[int], None] | None = None) -> int:
    """Loads the app and serves it in this process until SIGTERM/SIGINT; the exit code."""
    from .asgi import LifespanFailure
    from .errors import EmberError

    try:
        app = load_app(args.app, args.app_dir, args.factory)
    except AppLoadError as e:
        log.error("%s", e)
        return EXIT_ERROR
    except BaseException:
        log.exception("importing %s raised", args.app)
        return EXIT_ERROR
    interface = detect_interface(app) if args.interface == "auto" else args.interface
    try:
        server = build_server(args, app, interface, port, reuse_port)
    except (TypeError, ValueError) as e:
        log.error("%s", e)
        return EXIT_ERROR

    def on_ready(bound: int) -> None:
        if ready is not None:
            ready(bound)
        else:
            log.info("listening on http://%s:%d (%s, %s dispatch; Ctrl+C to stop)",
                     _url_host(args.host), bound, interface.upper(), server.server.dispatch)

    try:
        server.run(ready=on_ready, timeout=args.timeout_graceful_shutdown, drain=args.drain, refuse=args.refuse)
    except LifespanFailure as e:
        log.error("%s", e)
        return EXIT_STARTUP_FAILED
    except EmberError as e:
        log.error("%s", e)
        return EXIT_ERROR
    log.info("stopped")
    return EXIT_OK


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def configure_logging(level: str) -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("ember").setLevel(getattr(logging, level.upper()))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    if args.workers < 1:
        log.error("--workers must be at least 1")
        return EXIT_ERROR
    if args.workers == 1:
        return serve_one(args, args.port)
    from ._workers import supervise

    return supervise(args)


def run() -> None:
    """Entry point of the ``ember`` console script."""
    sys.exit(main())
