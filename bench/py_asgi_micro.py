#!/usr/bin/env python3
"""The ASGI server's Python side per request, without the engine: the server's real
``on_request`` callback called N times on a hand-made ``ember_request_info`` (the text
laid out as ember.h promises: ``GET /`` with one Host header), the app
``bench/targets/py_hello.py:asgi_app``, and ``ember_request_respond_small`` replaced by a
C no-op (libc ``labs``): on the ctypes path with the binding's own ``argtypes``, so the
ctypes crossing counts; on the C crossing (the default when ``ember._speedups`` is built;
``EMBER_PY_SPEEDUPS=0`` for ctypes) the address the extension calls.
The engine's own call into ``on_request`` (ctypes trampoline or C handler) is not counted.
Count it, collecting only inside the loop (bench/results/py-cost.md):

    valgrind --tool=callgrind --toggle-collect=starmap_next --callgrind-out-file=/tmp/cg \\
        "$(python3 -c 'import sys; print(sys.executable)')" bench/py_asgi_micro.py 2000
    # instructions per call = the "totals" line of /tmp/cg ÷ 2000

Needs target/release/libember.so (the server object is made, never started).
"""

import collections
import ctypes
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bindings" / "python"), str(ROOT / "bench" / "targets")]

from ember import _lib, _asgi_http  # noqa: E402
from ember.asgi import ASGIServer  # noqa: E402
import py_hello  # noqa: E402

noop = ctypes.PyDLL(None).labs  # labs(handle 0) == 0 == EMBER_OK
restype, argtypes = _lib._PROTOTYPES["ember_request_respond_small"]
noop.restype, noop.argtypes = restype, getattr(_lib, "_fast_argtypes", lambda a: a)(argtypes)
_asgi_http._respond_small = noop
if _asgi_http._fast is not None:
    # The C crossing (ember/_speedups_asgi.c) calls the engine's function by address:
    # the same no-op there, so both crossings count the same work around the call.
    _asgi_http._fast.asgi_bind(ctypes.cast(noop, ctypes.c_void_p).value, _asgi_http._HTTPCycle.send,
                               _asgi_http._HTTPCycle.receive, _asgi_http.NOCOPY_MIN, _lib.OK,
                               _lib.ERR_INVALID_ARG)

TEXT = b"GET\x00/\x00\x00127.0.0.1:50000\x00/{*path}\x00Host\x00127.0.0.1:8080\x00http\x00127.0.0.1:50000\x00"
buf = ctypes.create_string_buffer(TEXT, len(TEXT))
base = ctypes.addressof(buf)
info = _lib.RequestInfo()
info.size = ctypes.sizeof(info)
info.method_ptr, info.method_len = base, 3
info.path_ptr, info.path_len = base + 4, 1
info.query_ptr, info.query_len = base + 6, 0
info.remote_ptr, info.remote_len = base + 7, 15
info.route_ptr, info.route_len = base + 23, 8
info.header_count = 1
# The header array too (the C crossing reads it; the Python callback splits the text).
header = _lib.Header(base + 32, 4, base + 37, 14)
info.headers = ctypes.addressof(header)
assert ctypes.string_at(header.name_ptr, 4) == b"Host" and ctypes.string_at(header.value_ptr, 14) == b"127.0.0.1:8080"
info.http_version = 11
info.content_length = -1
info.peer_ptr, info.peer_len = base + len(TEXT) - 16, 15
assert ctypes.string_at(info.peer_ptr, 15) == b"127.0.0.1:50000"

server = ASGIServer(py_hello.asgi_app, port=0, dispatch="inline")
on_request = server._make_callback()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
collections.deque(itertools.starmap(on_request, itertools.repeat((0, 0, ctypes.addressof(info)), n)), maxlen=0)
print(f"{n} requests, carrier kept: {server._loop._carrier is not None}, crossing: {_asgi_http.FastCycle.__name__}")
