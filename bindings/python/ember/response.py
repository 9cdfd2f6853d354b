"""Responses, and turning whatever a handler returned into one engine call.

The engine takes status, headers and body in one ``ember_request_respond`` call, with
the headers as one ``"Name: value\\r\\n"`` block. A ``Response`` builds that block once,
when it is created, so a prebuilt ``Response`` returned by many requests costs nothing
but the call itself.
"""

from __future__ import annotations

import itertools
import json
import logging
from ctypes import byref
from collections.abc import Iterable, Mapping
from typing import Any, Union

from . import _crossing, _lib

log = logging.getLogger("ember")

_respond = _lib.held.ember_request_respond
_respond_nocopy = _lib.lib.ember_request_respond_nocopy
_respond_answer = _lib.held.ember_request_respond_answer
_answer_new = _lib.lib.ember_answer_new
_fast = _crossing.speedups
if _fast is not None:
    _respond_answer = _fast.respond_answer

# Bodies from this size on are lent to the engine instead of copied: it keeps a pointer
# into the bytes object, which stays here until the engine's release callback.
NOCOPY_MIN = 1 << 20
_lent: dict[int, bytes] = {}
_lend_keys = itertools.count(1)


def _give_back(key: int) -> None:
    _lent.pop(key, None)


_GIVE_BACK = _lib.RELEASE_FN(_give_back)

# Outcomes of a late answer that are nobody's fault: the engine already sent 503/504 for a
# timeout (or 413/408 for a streamed body it refused), the client left, or the server
# stopped. They are dropped quietly.
_QUIET = frozenset((_lib.ERR_ALREADY_ANSWERED, _lib.ERR_TIMED_OUT, _lib.ERR_CLIENT_GONE,
                    _lib.ERR_INVALID_HANDLE, _lib.ERR_TOO_LARGE))

HeadersLike = Union[Mapping[str, str], Iterable[tuple[str, str]], None]

_FORBIDDEN = ("\r", "\n", "\0")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


# Content-Type -> its header line, for Responses without other headers (bounded).
_TYPE_HEADS: dict[str, bytes] = {}


def _head(headers: HeadersLike, content_type: str | None) -> bytes:
    items = list(headers.items() if isinstance(headers, Mapping) else headers or ())
    if content_type is not None:
        items = [(k, v) for k, v in items if k.lower() != "content-type"]
        items.insert(0, ("Content-Type", content_type))
    lines = []
    for name, value in items:
        name, value = str(name), str(value)
        # A CR or LF here would let a value forge extra headers or a second response.
        if not name or ":" in name or " " in name or any(c in name or c in value for c in _FORBIDDEN):
            raise ValueError(f"ember: invalid header {name!r}: {value!r}")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("utf-8")


class Response:
    """An HTTP response: ``Response(body, status=200, headers=None, content_type=None)``.

    ``body`` may be ``bytes`` (default type ``application/octet-stream``), ``str``
    (UTF-8, ``text/plain; charset=utf-8``), a ``dict``/``list`` (JSON,
    ``application/json``) or ``None`` (empty). ``headers`` is a mapping or a list of
    ``(name, value)`` pairs (repeat a name to send it twice). Content-Length is the
    engine's. ``cache_for=N`` lets the engine's output cache (``Server.output_cache``)
    keep the answer N seconds (1 to 31536000) and answer repeats without calling Python:
    it adds ``Ember-Cache: N``, which the engine takes off before sending. One instance
    may answer many requests: from its second answer on, the engine keeps a prepared copy
    (``ember_answer_new``) and each further answer is one short engine call.
    """

    __slots__ = ("_status", "_body", "_head", "_prep")

    def __init__(self, body: Any = b"", status: int = 200, headers: HeadersLike = None,
                 content_type: str | None = None, *, cache_for: int | None = None) -> None:
        if type(body) is bytes:
            default_type = "application/octet-stream" if body else None
        elif isinstance(body, (bytes, bytearray, memoryview)):
            body = bytes(body)
            default_type = "application/octet-stream" if body else None
        elif isinstance(body, str):
            body = body.encode("utf-8")
            default_type = "text/plain; charset=utf-8"
        elif body is None:
            body, default_type = b"", None
        elif isinstance(body, (dict, list)):
            body = _dumps(body)
            default_type = "application/json"
        else:
            raise TypeError(f"ember: cannot send a {type(body).__name__} as a body")
        if type(status) is not int or not 100 <= status <= 999:
            raise ValueError(f"ember: invalid status {status!r}")
        if headers is None:
            # The usual Response: a Content-Type at most. Its header line is remembered per
            # type, since a program uses a handful (a fresh JSON Response per request then
            # builds no header block).
            if content_type is None:
                content_type = default_type
            head = _TYPE_HEADS.get(content_type) if type(content_type) is str else None
            if head is None:
                head = _head(None, content_type)
                if type(content_type) is str and len(_TYPE_HEADS) < 64:
                    _TYPE_HEADS[content_type] = head
        else:
            if content_type is None and default_type is not None and not _has_type(headers):
                content_type = default_type
            head = _head(headers, content_type)
        self._status = status
        self._body = body
        if cache_for is not None:
            if type(cache_for) is not int or not 1 <= cache_for <= 31536000:
                raise ValueError(f"ember: cache_for must be 1 to 31536000 seconds, not {cache_for!r}")
            head += b"Ember-Cache: %d\r\n" % cache_for
        self._head = head
        self._prep = None

    # status and body are properties so that changing one also drops the engine's prepared
    # copy (see send_response); the binding itself reads the slots.
    @property
    def status(self) -> int:
        return self._status

    @status.setter
    def status(self, value: int) -> None:
        if type(value) is not int or not 100 <= value <= 999:
            raise ValueError(f"ember: invalid status {value!r}")
        self._status = value
        self._prep = None

    @property
    def body(self) -> bytes:
        return self._body

    @body.setter
    def body(self, value: bytes) -> None:
        self._body = bytes(value)
        self._prep = None

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The headers as ``(name, value)`` pairs."""
        out = []
        for line in self._head.decode("utf-8").split("\r\n"):
            if line:
                k, _, v = line.partition(": ")
                out.append((k, v))
        return out

    def __repr__(self) -> str:
        return f"<Response {self._status} {len(self._body)} bytes>"


def _has_type(headers: HeadersLike) -> bool:
    if not headers:
        return False
    keys = headers.keys() if isinstance(headers, Mapping) else (k for k, _ in headers)
    return any(str(k).lower() == "content-type" for k in keys)


_TEXT = b"Content-Type: text/plain; charset=utf-8\r\n"
_OCTET = b"Content-Type: application/octet-stream\r\n"
_JSON = b"Content-Type: application/json\r\n"

INTERNAL_ERROR = Response("Internal Server Error", status=500)


def encode(result: Any) -> tuple[int, bytes, bytes]:
    """(status, header block, body) for a handler's return value; TypeError if it is
    not one of: Response, str, bytes, dict, list, None (204), (status, body) or
    (status, body, headers)."""
    t = type(result)
    if t is Response:
        return result._status, result._head, result._body
    if t is str:
        return 200, _TEXT, result.encode("utf-8")
    if t is bytes:
        return 200, _OCTET, result
    if t is dict or t is list:
        return 200, _JSON, _dumps(result)
    if result is None:
        return 204, b"", b""
    if t is tuple and 2 <= len(result) <= 3:
        r = Response(result[1], result[0], result[2] if len(result) == 3 else None)
        return r._status, r._head, r._body
    if isinstance(result, Response):
        return result._status, result._head, result._body
    if isinstance(result, (str, bytes, bytearray, memoryview, dict, list)):
        r = Response(result)
        return r._status, r._head, r._body
    raise TypeError(
        f"ember: a handler returned {t.__name__}; return a Response, str, bytes, dict, "
        "list, None or (status, body[, headers])"
    )


def send(handle: int, status: int, head: bytes, body: bytes) -> int:
    """The one ABI call that answers a request; returns the ember_result."""
    n = len(body)
    if n < NOCOPY_MIN:
        if _fast is not None:
            return _fast.respond(handle, status, head, body)
        return _respond(handle, status, head, len(head), body, n)
    key = next(_lend_keys)
    _lent[key] = body
    rc = _respond_nocopy(handle, status, head, len(head), body, n, _GIVE_BACK, key)
    if rc != _lib.OK:
        _lent.pop(key, None)  # on failure the engine took nothing
    return rc


def send_response(handle: int, r: Response) -> int:
    """Answers with a Response that has no prepared copy yet (``r._prep`` is falsy).

    The first answer is an ordinary one. A second answer means the handler returns this
    instance again and again (a constant): the engine then gets a checked copy once, and
    this and every further answer is ``ember_request_respond_answer`` with two integer
    arguments, instead of a header block parsed and a body copied each time. Bodies lent
    to the engine (``NOCOPY_MIN`` and up) are never copied into it."""
    body = r._body
    n = len(body)
    if r._prep is None or n >= NOCOPY_MIN:
        r._prep = 0
        return send(handle, r._status, r._head, body)
    head = r._head
    prep = _lib.Answer()
    if _answer_new(r._status, head, len(head), body, n, byref(prep)) != _lib.OK:
        # Cannot happen for a Response that passed its own checks; answer the usual way,
        # which reports whatever is wrong.
        return send(handle, r._status, head, body)
    # Racing threads may each prepare one; the losers' copies are freed with their Answer.
    r._prep = prep
    return _respond_answer(handle, prep)


def describe(request: Any) -> str:
    try:
        return f"{request.method} {request.raw_path}"
    except Exception:  # the request data may already be gone
        return "request"


def fail(handle: int, request: Any = None) -> bool:
    """Logs the exception being handled and answers 500 without details."""
    log.exception("ember: handler for %s raised", describe(request))
    return deliver(handle, INTERNAL_ERROR.status, INTERNAL_ERROR._head, INTERNAL_ERROR.body, request)


def deliver(handle: int, status: int, head: bytes, body: bytes, request: Any = None) -> bool:
    rc = send(handle, status, head, body)
    if rc == _lib.OK:
        return True
    if rc in _QUIET:
        log.debug("ember: answer for %s dropped: %s", describe(request), _lib.result_name(rc))
        return False
    msg = _lib.last_error()
    log.error("ember: answering %s failed: %s: %s", describe(request), _lib.result_name(rc), msg)
    if status != 500 and rc == _lib.ERR_INVALID_ARG:
        # The engine refused this answer (bad header or status); the client still needs one.
        send(handle, INTERNAL_ERROR.status, INTERNAL_ERROR._head, INTERNAL_ERROR.body)
    return False


def answer(handle: int, result: Any, request: Any = None) -> bool:
    """Encodes a handler's result and sends it; a result that cannot be sent answers 500."""
    try:
        status, head, body = encode(result)
    except Exception:
        return fail(handle, request)
    return deliver(handle, status, head, body, request)
