"""Finds libember and declares the C ABI (include/ember.h) for ctypes.

Every function the binding calls is declared here with argtypes and restype, so a wrong
argument fails in Python instead of corrupting memory in the engine. The library is a
``ctypes.CDLL``: ctypes releases the GIL around every call, which is what lets engine
threads run Python handlers while the main thread blocks in start/stop/wait.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_int32,
    c_size_t,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path

ENV_VAR = "EMBER_LIBRARY"

# Result codes (ember_result).
OK = 0
ERR_NULL = -1
ERR_INVALID_ARG = -2
ERR_STATE = -3
ERR_BIND = -4
ERR_ROUTE = -5
ERR_ALREADY_ANSWERED = -6
ERR_TIMED_OUT = -7
ERR_CLIENT_GONE = -8
ERR_INVALID_HANDLE = -9
ERR_NOT_FOUND = -10
ERR_BUFFER_TOO_SMALL = -11
ERR_PANIC = -12
ERR_RUNTIME = -13
ERR_WOULD_BLOCK = -14
ERR_TOO_LARGE = -15
# The library was built without the feature (the minimal build: no WebSocket, static files, TLS).
ERR_UNSUPPORTED = -16

DISPATCH_INLINE = 0
DISPATCH_POOL = 1
DISPATCH_AUTO = 2
#: ``Server(dispatch=...)`` names and the engine's numbers.
DISPATCH_MODES = {"auto": DISPATCH_AUTO, "pool": DISPATCH_POOL, "inline": DISPATCH_INLINE}

LIMIT_MAX_HEADER_BYTES = 1
LIMIT_MAX_HEADERS = 2
LIMIT_MAX_BODY_BYTES = 3
LIMIT_HEADER_TIMEOUT_MS = 4
LIMIT_IDLE_TIMEOUT_MS = 5
LIMIT_MAX_CONNECTIONS = 6
LIMIT_HANDLER_TIMEOUT_MS = 7

LOG_ERROR = 1
LOG_WARN = 2
LOG_INFO = 3
LOG_DEBUG = 4

WAIT_FOREVER = 0xFFFFFFFF

LISTEN_REUSE_PORT = 1
LISTEN_PROXY_PROTOCOL = 2

# Streaming (ABI 3). The streamed-answer and body-reading functions that the ASGI and WSGI
# adapters also use are declared once, in _stream.py; the rest are declared below.
LIMIT_STREAM_QUEUE_BYTES = 12
LIMIT_WS_MAX_MESSAGE_BYTES = 13
LIMIT_WS_QUEUE_BYTES = 14
LIMIT_WS_PING_INTERVAL_MS = 15
LIMIT_WS_MAX_CONNECTIONS = 16
LIMIT_MAX_STREAM_BODY_BYTES = 17

ROUTE_STREAM_BODY = 1
ROUTE_POOL = 2
REQUEST_BODY_STREAMED = 1
REQUEST_WEBSOCKET = 2

EVENT_WRITABLE = 1
EVENT_READABLE = 2
EVENT_ABORTED = 3
EVENT_COMPLETED = 4

WS_TEXT = 1
WS_BINARY = 2


def _library_name() -> str:
    if sys.platform == "darwin":
        return "libember.dylib"
    if sys.platform == "win32":
        return "ember.dll"
    return "libember.so"


def candidates() -> list[Path]:
    """The places searched for the library, in order."""
    name = _library_name()
    places: list[Path] = []
    env = os.environ.get(ENV_VAR)
    if env:
        places.append(Path(env))
    here = Path(__file__).resolve().parent
    places.append(here / name)
    # bindings/python/ember -> the checkout root, for developers running from source.
    root = here.parents[2]
    places.append(root / "target" / "release" / name)
    places.append(root / "target" / "debug" / name)
    return places


# The ABI these declarations mirror (include/ember.h's EMBER_ABI_VERSION). An engine of another
# version is refused: its structs or functions may not be what this module declares.
ABI_VERSION = 6


def _process_arch() -> str:
    import platform
    import struct

    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return "arm64"
    if struct.calcsize("P") == 4:
        return "x86"
    return "x64"


_ELF_MACHINES = {0x3E: "x64", 0x03: "x86", 0xB7: "arm64"}
_PE_MACHINES = {0x8664: "x64", 0x14C: "x86", 0xAA64: "arm64"}


def arch_problem(path: Path) -> str | None:
    """None if the library file suits this process, else what is wrong with it."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError as e:
        return f"cannot be read ({e})"
    want = _process_arch()
    if head[:4] == b"\x7fELF" and len(head) >= 20:
        if sys.platform == "win32":
            return "is a Linux (ELF) library, not a Windows DLL"
        got = _ELF_MACHINES.get(int.from_bytes(head[18:20], "little"), "another machine")
    elif head[:2] == b"MZ" and len(head) >= 64:
        if sys.platform != "win32":
            return f"is a Windows DLL, not a library for this OS (want {_library_name()})"
        pe = int.from_bytes(head[0x3C:0x40], "little")
        if head[pe:pe + 4] != b"PE\0\0":
            return None
        got = _PE_MACHINES.get(int.from_bytes(head[pe + 4:pe + 6], "little"), "another machine")
    elif sys.platform == "darwin":
        return None
    else:
        return "is not a shared library"
    return None if got == want else f"is built for {got}, but this Python is {want}"


def _load() -> ctypes.CDLL:
    tried = []
    env_set = bool(os.environ.get(ENV_VAR))
    for i, path in enumerate(candidates()):
        if not path.is_file():
            tried.append(f"{path} (not found)")
        else:
            problem = arch_problem(path)
            if problem:
                raise ImportError(f"ember: {path} {problem}; install the Ember build for this platform")
            try:
                found = ctypes.CDLL(str(path))
            except OSError as e:
                tried.append(f"{path} ({e})")
            else:
                _check_abi(found, path)
                return found
        # An explicit EMBER_LIBRARY is a decision, not a hint: do not silently use another copy.
        if i == 0 and env_set:
            break
    raise ImportError(
        "ember: cannot load the native library " + _library_name() + "; tried:\n  "
        + "\n  ".join(tried)
        + f"\nSet {ENV_VAR} to its path, or run `cargo build --release` in the Ember checkout."
    )


def _check_abi(found: ctypes.CDLL, path: Path) -> None:
    try:
        fn = found.ember_abi_version
    except AttributeError:
        raise ImportError(f"ember: {path} has no ember_abi_version: it is not an Ember engine") from None
    fn.restype = c_uint32
    fn.argtypes = []
    got = fn()
    if got != ABI_VERSION:
        raise ImportError(
            f"ember: refusing the native library {path}: it has ABI version {got}, this binding "
            f"needs ABI version {ABI_VERSION}. Use the library from the same Ember release "
            f"(pip install the matching wheel, or rebuild the checkout).")


class Server(Structure):
    """Opaque ``ember_server``."""


# The info struct is declared flat (ptr, len pairs instead of nested ember_str) so that
# reading a field is one descriptor access and does not build a nested Structure object.
class RequestInfo(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("id", c_uint64),
        ("method_ptr", c_void_p), ("method_len", c_size_t),
        ("path_ptr", c_void_p), ("path_len", c_size_t),
        ("query_ptr", c_void_p), ("query_len", c_size_t),
        ("body_ptr", c_void_p), ("body_len", c_size_t),
        ("remote_ptr", c_void_p), ("remote_len", c_size_t),
        ("route_ptr", c_void_p), ("route_len", c_size_t),
        ("headers", c_void_p), ("header_count", c_size_t),
        ("params", c_void_p), ("param_count", c_size_t),
        ("http_version", c_uint32),
        ("content_length", ctypes.c_int64),
        ("flags", c_uint32),
        ("scheme_ptr", c_void_p), ("scheme_len", c_size_t),
        ("peer_ptr", c_void_p), ("peer_len", c_size_t),
    ]


class Header(Structure):
    _fields_ = [
        ("name_ptr", c_void_p), ("name_len", c_size_t),
        ("value_ptr", c_void_p), ("value_len", c_size_t),
    ]


class Str(Structure):
    _fields_ = [("ptr", c_void_p), ("len", c_size_t)]


class Stats(Structure):
    _fields_ = [("size", c_size_t)] + [
        (name, c_uint64)
        for name in (
            "requests", "responses_1xx", "responses_2xx", "responses_3xx", "responses_4xx",
            "responses_5xx", "active_connections", "total_connections", "active_requests",
            "bytes_read", "bytes_written", "responses_other", "held_requests",
        )
    ]


class Answer(c_uint64):
    """A prepared answer (``ember_answer_new``), freed with the object. Being a
    ``c_uint64``, it goes into ``ember_request_respond_answer`` as it is: ctypes builds no
    conversion object per call, as it does for a Python int."""

    __slots__ = ()

    def __del__(self) -> None:
        try:
            if self.value:
                _answer_free(self.value)
        except Exception:  # at interpreter exit the library may be gone already
            pass


# user_data is declared c_size_t in the callbacks: the binding passes small integers
# (route numbers), and an int argument is cheaper for ctypes to hand over than c_void_p.
# The request handle stays a plain int: a c_uint64 subclass here would skip the conversion
# when it goes back into an ABI call, but ctypes instantiates such a class for every call
# of the callback, which costs more (measured: about 1,000 instructions per request more,
# bench/results/py-cost.md).
HANDLER_FN = CFUNCTYPE(None, c_size_t, c_uint64, c_size_t)
RELEASE_FN = CFUNCTYPE(None, c_size_t)
LOG_FN = CFUNCTYPE(None, c_size_t, c_int32, c_void_p, c_size_t)
THREAD_FN = CFUNCTYPE(None, c_size_t)

# WebSocket callbacks; user_data is the endpoint's number, as for routes. Pointers that
# Python reads with string_at are declared c_void_p (an int), not c_char_p (which would
# copy up to a NUL).
WS_OPEN_FN = CFUNCTYPE(None, c_size_t, c_uint64, c_size_t)
WS_MESSAGE_FN = CFUNCTYPE(None, c_size_t, c_uint64, c_int32, c_void_p, c_size_t)
WS_CLOSE_FN = CFUNCTYPE(None, c_size_t, c_uint64, c_uint16, c_void_p, c_size_t)
WS_WRITABLE_FN = CFUNCTYPE(None, c_size_t, c_uint64)


class WsHandlers(Structure):
    """``ember_ws_handlers``."""
    _fields_ = [
        ("size", c_size_t),
        ("on_open", WS_OPEN_FN),
        ("on_message", WS_MESSAGE_FN),
        ("on_close", WS_CLOSE_FN),
        ("on_writable", WS_WRITABLE_FN),
    ]

_server_p = POINTER(Server)

_PROTOTYPES = {
    "ember_version": (c_char_p, []),
    "ember_abi_version": (c_uint32, []),
    "ember_result_name": (c_char_p, [c_int32]),
    "ember_last_error": (c_char_p, []),
    "ember_server_new": (c_int32, [POINTER(_server_p)]),
    "ember_server_free": (c_int32, [_server_p]),
    "ember_server_listen": (c_int32, [_server_p, c_char_p]),
    "ember_server_listen_flags": (c_int32, [_server_p, c_char_p, c_uint32]),
    "ember_server_set_workers": (c_int32, [_server_p, c_uint32]),
    "ember_server_set_dispatch": (c_int32, [_server_p, c_int32]),
    "ember_server_set_pool_threads": (c_int32, [_server_p, c_uint32]),
    "ember_server_set_limit": (c_int32, [_server_p, c_int32, c_uint64]),
    "ember_server_set_health_path": (c_int32, [_server_p, c_char_p]),
    "ember_server_add_trusted_proxy": (c_int32, [_server_p, c_char_p]),
    "ember_server_drain": (c_int32, [_server_p]),
    "ember_server_stop_accepting": (c_int32, [_server_p]),
    "ember_server_set_log": (c_int32, [_server_p, LOG_FN, c_size_t, c_int32]),
    "ember_server_set_thread_hooks": (c_int32, [_server_p, THREAD_FN, THREAD_FN, c_size_t]),
    "ember_server_route": (c_int32, [_server_p, c_char_p, c_char_p, HANDLER_FN, c_size_t, RELEASE_FN]),
    "ember_server_start": (c_int32, [_server_p]),
    "ember_server_port": (c_int32, [_server_p, c_size_t, POINTER(c_uint16)]),
    "ember_server_stop": (c_int32, [_server_p, c_uint32]),
    "ember_server_wait": (c_int32, [_server_p, c_uint32]),
    "ember_server_stats": (c_int32, [_server_p, POINTER(Stats), c_size_t]),
    "ember_last_error_copy": (c_int32, [c_char_p, c_size_t, POINTER(c_size_t)]),
    "ember_request_get_info": (c_int32, [c_uint64, POINTER(RequestInfo), c_size_t]),
    "ember_request_header": (c_int32, [c_uint64, c_char_p, POINTER(Str)]),
    "ember_request_param": (c_int32, [c_uint64, c_char_p, POINTER(Str)]),
    "ember_request_respond": (c_int32, [c_uint64, c_uint16, c_char_p, c_size_t, c_char_p, c_size_t]),
    "ember_answer_new": (c_int32, [c_uint16, c_char_p, c_size_t, c_char_p, c_size_t, POINTER(c_uint64)]),
    "ember_answer_free": (c_int32, [c_uint64]),
    "ember_request_respond_answer": (c_int32, [c_uint64, c_uint64]),
    "ember_request_respond_small": (c_int32, [c_uint64, c_uint16, c_char_p, c_uint32, c_char_p, c_uint32]),
    "ember_request_respond_nocopy": (c_int32, [c_uint64, c_uint16, c_char_p, c_size_t, c_char_p,
                                               c_size_t, RELEASE_FN, c_size_t]),
    "ember_response_write_nocopy": (c_int32, [c_uint64, c_char_p, c_size_t, RELEASE_FN, c_size_t]),
    "ember_response_abort": (c_int32, [c_uint64]),
    "ember_server_websocket": (c_int32, [_server_p, c_char_p, POINTER(WsHandlers), c_size_t, RELEASE_FN]),
    "ember_ws_accept": (c_int32, [c_uint64, c_char_p, c_size_t]),
    "ember_ws_send": (c_int32, [c_uint64, c_int32, c_char_p, c_size_t]),
    "ember_ws_close": (c_int32, [c_uint64, c_uint16, c_char_p, c_size_t]),
    "ember_ws_join": (c_int32, [c_uint64, c_char_p]),
    "ember_ws_leave": (c_int32, [c_uint64, c_char_p]),
    "ember_ws_buffered": (c_int32, [c_uint64, POINTER(c_size_t)]),
    "ember_server_ws_broadcast": (c_int32, [_server_p, c_char_p, c_int32, c_char_p, c_size_t, c_uint64,
                                            POINTER(c_size_t)]),
}

lib = _load()
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError as e:
        raise ImportError(f"ember: {lib._name} lacks {_name}; is it an Ember build of ABI {ABI_VERSION}?") from e
    _fn.restype = _restype
    _fn.argtypes = _argtypes

string_at = ctypes.string_at
_answer_free = lib.ember_answer_free

# Calls that never block and are made once per request keep the GIL: ctypes then skips
# releasing and re-taking it around the call (a PyDLL view of the same library).
# They only claim the request and queue the answer (respond and respond_small also copy
# the body: the bindings use them below NOCOPY_MIN). Measured: about 800
# instructions per request less for the reference app (bench/results/py-cost.md).
held = ctypes.PyDLL(lib._name, handle=lib._handle)

# An int passed for a c_uint64 / c_size_t / c_uint32 / c_uint16 parameter goes through
# PyCSimpleType_from_param, which first asks isinstance(arg, type) through the ctypes
# metaclass and then looks the type's code up in a table: ~700 instructions per argument,
# 4,200 of a six-argument answer call. c_void_p's from_param takes an int (and c_char_p's
# a bytes) straight. Where integer arguments of up to 64 bits travel in one 64-bit
# register and the callee reads only its parameter's width (System V x86-64, Windows x64,
# AArch64 outside Apple, whose ABI wants the caller to extend narrow arguments), the
# per-request answer calls declare their integers c_void_p. The values are the same; a
# wider one is cut to the parameter's width as c_uint16 cut it.
_FAST_INTS = ctypes.sizeof(c_void_p) == 8 and (
    platform.machine().lower() in ("x86_64", "amd64") or
    (platform.machine().lower() in ("aarch64", "arm64") and sys.platform != "darwin"))


def _fast_argtypes(argtypes: list, first: int = 99) -> list:
    """``argtypes`` with its integers (among the first ``first``) declared c_void_p."""
    if not _FAST_INTS:
        return argtypes
    return [c_void_p if i < first and t in (c_uint64, c_size_t, c_uint32, c_uint16) else t
            for i, t in enumerate(argtypes)]


for _name in ("ember_request_respond_answer", "ember_request_respond_small", "ember_request_respond"):
    _fn = getattr(held, _name)
    _restype, _argtypes = _PROTOTYPES[_name]
    # respond_answer's answer stays c_uint64: an ``Answer`` (a c_uint64) passes as it is.
    _fn.restype = _restype
    _fn.argtypes = _fast_argtypes(_argtypes, 1 if _name == "ember_request_respond_answer" else 99)


def last_error() -> str:
    """The engine's message for the last failed call on this thread."""
    msg = lib.ember_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def result_name(code: int) -> str:
    name = lib.ember_result_name(code)
    return name.decode("ascii", "replace") if name else str(code)
