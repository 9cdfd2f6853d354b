#!/usr/bin/env python3
"""Instructions per request (callgrind) of the Python binding: the reference app
(samples/python/ember_ref.py: GET /, its prebuilt Response; GET /users/42, a fresh JSON
Response per request) and the ASGI server (samples/python/asgi_hello.py, GET /; and
bench/targets/py_hello.py's asgi_app, the one `bench/run` times against uvicorn and granian)
and the WSGI server (py_hello's wsgi_app; bench/targets/py_flask.py's Flask route). Counts, not times: they hold on a busy machine, so
they are what before/after comparisons of the binding's per-request cost use
(bench/results/py-cost.md).

    bench/py_cost.py                     # every case below
    bench/py_cost.py py-ref-inline py-ref-users-inline
    N1=200 N2=1200 bench/py_cost.py
    KEEP=/tmp/prof bench/py_cost.py     # also keeps each profile as /tmp/prof.<case>.<n>

Each case runs the server (one I/O thread) twice under callgrind, with N1 and N2
keep-alive GETs of the case's path from a client outside it on one connection; the difference divided by
N2 - N1 is one request's cost: interpreter start-up, imports and shutdown cancel out.
Every thread of the process counts (engine, Python, asyncio loop). Needs the release
build (target/release/libember.so) and valgrind.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from front_cost import callgrind_total, free_port, print_per_request  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N1 = int(os.environ.get("N1", "200"))
N2 = int(os.environ.get("N2", "1200"))
PY = os.environ.get("PYTHON", sys.executable)
LIB = Path(os.environ.get("EMBER_LIBRARY") or ROOT / "target" / "release" / "libember.so")


def ref(dispatch):
    def cmd(port):
        env = {"EMBER_DISPATCH": dispatch, "EMBER_WORKERS": "1"}
        return [PY, str(ROOT / "samples" / "python" / "ember_ref.py"), str(port)], env
    return cmd


def asgi(dispatch, spec="asgi_hello:app", app_dir=ROOT / "samples" / "python", interface="asgi"):
    def cmd(port):
        return [PY, "-m", "ember", spec, "--interface", interface, "--app-dir", str(app_dir),
                "--port", str(port), "--dispatch", dispatch, "--io-threads", "1",
                "--log-level", "warning"], {}
    return cmd


# case -> (command, path)
CASES = {
    "py-ref-inline": (ref("inline"), "/"),
    "py-ref-pool": (ref("pool"), "/"),
    "py-ref-users-inline": (ref("inline"), "/users/42"),
    "asgi-inline": (asgi("inline"), "/"),
    # The app the timed bench runs (bench/targets/py_hello.py: two prebuilt messages,
    # Content-Type and Content-Length, no receive()).
    "asgi-bench-inline": (asgi("inline", "py_hello:asgi_app", ROOT / "bench" / "targets"), "/"),
    # WSGI on the pool, as the timed bench runs it: py_hello's wsgi_app (the same answer
    # as asgi_app, a one-item list) and py_flask's Flask route (needs Flask installed).
    "wsgi-bench-pool": (asgi("pool", "py_hello:wsgi_app", ROOT / "bench" / "targets", "wsgi"), "/"),
    "wsgi-flask-pool": (asgi("pool", "py_flask:app", ROOT / "bench" / "targets", "wsgi"), "/"),
}


def measure(case: str, n: int) -> int:
    make, path = CASES[case]
    port = free_port()
    argv, extra = make(port)
    env = dict(os.environ, EMBER_LIBRARY=str(LIB), PYTHONPATH=str(ROOT / "bindings" / "python"), **extra)
    return callgrind_total(case, argv, env, port, path, n)


def main() -> None:
    if not LIB.is_file():
        sys.exit(f"py_cost: {LIB} is missing: cargo build --release first")
    # The counts are of the C crossing (ember._speedups) unless EMBER_PY_SPEEDUPS=0 asks for
    # ctypes: build the extension in place rather than measure the fallback unawares.
    if os.environ.get("EMBER_PY_SPEEDUPS", "1") != "0":
        from builds import build_py_speedups
        ok, out = build_py_speedups(PY, LIB)
        if not ok:
            sys.exit(f"py_cost: ember._speedups did not build or import (EMBER_PY_SPEEDUPS=0 measures ctypes):\n{out[-1500:]}")
    print_per_request(sys.argv[1:] or list(CASES), measure, N1, N2)


if __name__ == "__main__":
    main()
