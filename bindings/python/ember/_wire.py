"""Reading a request's fields out of the engine's ``ember_request_info`` at the lowest
cost Python allows; shared by the ASGI and WSGI adapters.

Every ``ctypes.string_at`` is a foreign call (~0.4 µs). Instead, one memoryview spans
the whole address space and a view is read as a slice of it: ``MEM[p:p + n].tobytes()``
runs in C without a foreign call (~0.1 µs). It reads exactly the bytes the engine
points to, as ``string_at`` would, and only while those views are valid (see
``ember_request_info`` in include/ember.h: until the first answer call).

The struct layout is derived from ``_lib.RequestInfo`` (the one mirror of the C struct),
so a field added there needs no change here.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from urllib.parse import unquote, unquote_to_bytes

from . import _lib

MEM = memoryview((ctypes.c_char * sys.maxsize).from_address(0)).cast("B")

_CODES = {ctypes.c_uint64: "Q", ctypes.c_void_p: "P", ctypes.c_size_t: "N", ctypes.c_uint32: "I",
          ctypes.c_uint16: "H", ctypes.c_int32: "i", ctypes.c_int64: "q"}
_NAMES = [name for name, _ in _lib.RequestInfo._fields_]
INFO = struct.Struct("@" + "".join(_CODES[t] for _, t in _lib.RequestInfo._fields_))
assert INFO.size <= ctypes.sizeof(_lib.RequestInfo)
PAIR = struct.Struct("@PNPN")  # ember_header: name (ptr, len), value (ptr, len)

# Field positions in the unpacked tuple.
I_METHOD = _NAMES.index("method_ptr")
I_PATH = _NAMES.index("path_ptr")
I_QUERY = _NAMES.index("query_ptr")
I_BODY = _NAMES.index("body_ptr")
I_REMOTE = _NAMES.index("remote_ptr")
I_ROUTE = _NAMES.index("route_ptr")
I_HEADERS = _NAMES.index("headers")
I_VERSION = _NAMES.index("http_version")
I_LENGTH = _NAMES.index("content_length")  # declared Content-Length, -1 when none
I_FLAGS = _NAMES.index("flags")
I_HEADER_COUNT = _NAMES.index("header_count")
I_PEER = _NAMES.index("peer_ptr")  # the last text view (ember.h: ember_request_info)

def picked(*names: str) -> tuple[struct.Struct, dict[str, int]]:
    """A struct that unpacks only the named fields of the info struct (the others are
    skipped as padding: no int object is made for them), and each name's position."""
    fmt, at, pos = "@", 0, {}
    fields = {name: (getattr(_lib.RequestInfo, name).offset, t) for name, t in _lib.RequestInfo._fields_}
    for name in sorted(names, key=lambda n: fields[n][0]):
        offset, t = fields[name]
        fmt += f"{offset - at}x{_CODES[t]}" if offset > at else _CODES[t]
        at = offset + ctypes.sizeof(t)
        pos[name] = len(pos)
    st = struct.Struct(fmt)
    assert st.size == at  # no alignment padding crept in
    return st, pos


REQUEST_BODY_STREAMED = 1  # info.flags: read the body with ember_request_read

HTTP_VERSIONS = {10: "1.0", 11: "1.1", 20: "2"}
PROTOCOLS = {10: "HTTP/1.0", 11: "HTTP/1.1", 20: "HTTP/2"}
METHODS = {m.encode(): m for m in ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")}


def text_parts(f: tuple) -> list[bytes] | None:
    """The request's text views from one copy: ``[method, path, query, remote, route,
    name, value, ...]`` (each header's name and value, then the rest), or None when
    the text is not laid out as ember.h promises (every view but the body followed by a
    NUL, back to back from ``method`` to ``peer_addr``).

    One copy and one split in C, where a slice and a copy per view cost ~1,500
    instructions each (5k of them for three headers)."""
    start = f[I_METHOD]
    end = f[I_PEER] + f[I_PEER + 1] + 1
    if end <= start:
        return None
    hc = f[I_HEADER_COUNT]
    parts = MEM[start:end].tobytes().split(b"\0", 5 + 2 * hc)
    if len(parts) != 6 + 2 * hc or len(parts[0]) != f[I_METHOD + 1]:
        return None
    return parts


def text_parts_slow(f: tuple) -> list[bytes]:
    """What ``text_parts`` gives, read view by view (an engine without the layout)."""
    out = [view(f[i], f[i + 1]) for i in (I_METHOD, I_PATH, I_QUERY, I_REMOTE, I_ROUTE)]
    for name, value in headers(f[I_HEADERS], f[I_HEADER_COUNT]):
        out += (name, value)
    out.append(b"")
    return out


def view(ptr: int, n: int) -> bytes:
    return MEM[ptr:ptr + n].tobytes() if n else b""


def headers(ptr: int, count: int) -> list[tuple[bytes, bytes]]:
    """The request headers as (name, value) bytes pairs in arrival order."""
    if not count:
        return []
    mem = MEM
    return [(mem[np:np + nl].tobytes(), mem[vp:vp + vl].tobytes())
            for np, nl, vp, vl in PAIR.iter_unpack(mem[ptr:ptr + PAIR.size * count])]


def split_addr(addr: str) -> tuple[str, int] | None:
    """"127.0.0.1:53412" or "[::1]:53412" -> (host, port)."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        return None
    if host.startswith("["):
        host = host[1:-1]
    return host, int(port)


class AddrCache:
    """Remote address text -> (host, port), remembered per peer: every request on a
    keep-alive connection names the same peer. Bounded; cleared when full."""

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[bytes, tuple[str, int] | None] = {}

    def get(self, raw: bytes) -> tuple[str, int] | None:
        m = self._map
        try:
            return m[raw]
        except KeyError:
            if len(m) >= 4096:
                m.clear()
            v = m[raw] = split_addr(raw.decode("latin-1"))
            return v


def decode_path(raw: bytes) -> str:
    """The path with percent escapes decoded as UTF-8 (ASGI ``path``)."""
    text = raw.decode("latin-1")
    return unquote(text) if "%" in text else text


def wsgi_path(raw: bytes) -> str:
    """PEP 3333: the URL-decoded path bytes as a latin-1 "native string"."""
    return unquote_to_bytes(raw).decode("latin-1") if b"%" in raw else raw.decode("latin-1")
