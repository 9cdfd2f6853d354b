"""Streamed answers and request events (ABI 3) for the ASGI and WSGI servers.

Declared here rather than in ``_lib`` so that the binding's core declarations stay the
engine team's. An answer is streamed only when the app streams: a body the app hands
over whole still goes out in one ``ember_request_respond``.

Events (``ember_request_on_event``) arrive on engine threads; one C callback serves every
request, and its ``user_data`` is a key into ``_listeners``, dropped at the request's
final event (ABORTED or COMPLETED, exactly one, last).
"""

from __future__ import annotations

import itertools
from ctypes import POINTER, CFUNCTYPE, c_char_p, c_int32, c_size_t, c_uint16, c_uint32, c_uint64, c_void_p
from typing import Callable

from . import _lib

ERR_WOULD_BLOCK = -14
ERR_TOO_LARGE = -15

EVENT_WRITABLE = 1
EVENT_READABLE = 2
EVENT_ABORTED = 3
EVENT_COMPLETED = 4

#: A body the app streams but whose declared Content-Length is at most this is collected
#: and sent whole, so the answer keeps that length instead of chunked framing.
COLLECT_MAX = 1 << 20

EVENT_FN = CFUNCTYPE(None, c_size_t, c_uint64, c_int32)

_L = _lib.lib
begin = _L.ember_response_begin
begin.restype, begin.argtypes = c_int32, [c_uint64, c_uint16, c_char_p, c_size_t]
write = _L.ember_response_write
write.restype, write.argtypes = c_int32, [c_uint64, c_char_p, c_size_t]
end = _L.ember_response_end
end.restype, end.argtypes = c_int32, [c_uint64]
wait_writable = _L.ember_response_wait_writable
wait_writable.restype, wait_writable.argtypes = c_int32, [c_uint64, c_uint32]
_on_event = _L.ember_request_on_event
_on_event.restype, _on_event.argtypes = c_int32, [c_uint64, EVENT_FN, c_size_t]

ROUTE_STREAM_BODY = 1  # ember_server_route_flags: the handler reads the body itself
ROUTE_POOL = 2  # ember_server_route_flags: never run inline under auto dispatch (it blocks)
LIMIT_STREAM_QUEUE_BYTES = 12
LIMIT_MAX_STREAM_BODY_BYTES = 17

route_flags = _L.ember_server_route_flags
route_flags.restype = c_int32
route_flags.argtypes = [POINTER(_lib.Server), c_char_p, c_char_p, c_uint32, _lib.HANDLER_FN, c_size_t,
                        _lib.RELEASE_FN]
read = _L.ember_request_read
read.restype, read.argtypes = c_int32, [c_uint64, c_void_p, c_size_t, c_uint32, POINTER(c_size_t)]

_listeners: dict[int, Callable[[int], None]] = {}
_keys = itertools.count(1)


def _dispatch(key: int, _req: int, event: int) -> None:
    try:
        if event == EVENT_ABORTED or event == EVENT_COMPLETED:
            fn = _listeners.pop(key, None)
        else:
            fn = _listeners.get(key)
        if fn is not None:
            fn(event)
    except BaseException:  # nothing may escape into the engine's thread
        pass


_EVENT_CB = EVENT_FN(_dispatch)


def listen(handle: int, fn: Callable[[int], None]) -> int:
    """``fn(event)`` for every event of the request from now on (on engine threads);
    returns the ember_result (on an ended request: why it ended, and nothing is called)."""
    key = next(_keys)
    _listeners[key] = fn
    rc = _on_event(handle, _EVENT_CB, key)
    if rc != _lib.OK:
        _listeners.pop(key, None)
    return rc


def declared_length(headers: object, name: object) -> int | None:
    """The Content-Length among response headers (``name`` in the headers' own type:
    ``b"content-length"`` for ASGI, ``"content-length"`` for WSGI), or None."""
    for key, value in headers:  # type: ignore[attr-defined]
        if len(key) == 14 and key.lower() == name:
            try:
                return int(value)
            except ValueError:
                return None
    return None
