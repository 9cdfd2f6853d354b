"""The engine's callbacks into Python: requests (one C callback per server: a ``Request``
per call, the handler, its result turned into one ``ember_request_respond``, or
``ember_request_respond_answer`` for a Response answered before), log lines,
and the start and end of engine threads."""

from __future__ import annotations

import ctypes
import inspect
import logging
import sys
import threading
import weakref
from typing import Any, Callable

from . import _crossing, _lib
from ._async import LoopRunner
from ._events import events_of
from .request import Request
from .response import (_QUIET, INTERNAL_ERROR, NOCOPY_MIN, Response, answer, describe, encode, send,
                       send_response)
from ._pump import after_stream, handler_failed, stream_async, stream_sync
from .streaming import STREAM_TYPES, is_async_stream

log = logging.getLogger("ember")
#: Access log lines, when the access log goes to logging (``Server(access_log=True)``).
access_log = logging.getLogger("ember.access")
LOG_ACCESS = 5

# Threads the engine runs callbacks on (registered by the thread start hook). A stop
# called on one of them must not block: it would wait for the very handler calling it.
engine_threads: set[int] = set()

_LEVELS = {
    _lib.LOG_ERROR: logging.ERROR,
    _lib.LOG_WARN: logging.WARNING,
    _lib.LOG_INFO: logging.INFO,
    _lib.LOG_DEBUG: logging.DEBUG,
}


def engine_min_level() -> int:
    level = log.getEffectiveLevel()
    if level <= logging.DEBUG:
        return _lib.LOG_DEBUG
    if level <= logging.INFO:
        return _lib.LOG_INFO
    if level <= logging.WARNING:
        return _lib.LOG_WARN
    return _lib.LOG_ERROR


def _on_log(_user_data: int, level: int, msg: int, length: int) -> None:
    try:
        text = _lib.string_at(msg, length).decode("utf-8", "replace") if length else ""
        if level == LOG_ACCESS:
            access_log.info("%s", text)
        else:
            log.log(_LEVELS.get(level, logging.INFO), "%s", text)
    except BaseException:  # nothing may escape into the engine's thread
        pass


_pyapi = ctypes.pythonapi
_pyapi.PyGILState_Ensure.restype = ctypes.c_int
_pyapi.PyGILState_Ensure.argtypes = []
_pyapi.PyGILState_Release.restype = None
_pyapi.PyGILState_Release.argtypes = [ctypes.c_int]
_GIL_LOCKED = 0  # PyGILState_LOCKED


def _on_thread_start(_user_data: int) -> None:
    # ctypes gives a foreign thread a fresh Python thread state for every callback and
    # deletes it afterwards. One extra, never released PyGILState_Ensure keeps this
    # thread's state alive across callbacks, so each request skips that set-up.
    _pyapi.PyGILState_Ensure()
    engine_threads.add(threading.get_ident())


def _on_thread_stop(_user_data: int) -> None:
    engine_threads.discard(threading.get_ident())
    # Undoes the extra Ensure; ctypes' own release after this call then deletes the state.
    _pyapi.PyGILState_Release(_GIL_LOCKED)


# Shared by every server: these never change and never hold per-server state.
LOG_CB = _lib.LOG_FN(_on_log)
THREAD_START_CB = _lib.THREAD_FN(_on_thread_start)
THREAD_STOP_CB = _lib.THREAD_FN(_on_thread_stop)


# How a route's handler runs (the second item of its table entry).
SYNC = 0      # on the engine thread that called
ASYNC = 1     # a coroutine on the asyncio loop; cancelled when the request is aborted
OFFLOAD = 2   # a sync stream-body handler under inline dispatch: on a binding thread,
              # since reading the body waits for the client and an I/O thread must not
RAW = 3       # an adapter's own callback (ASGI, WSGI), called by the C crossing's handler
              # as fn(slot, handle, info): never reaches on_request below


def make_dispatch(table: list, runner: LoopRunner,
                  offload: Callable[..., Any] | None = None) -> Callable[[int, int, int], None]:
    """The function behind the server's single handler callback. ``offload(fn, *args)``
    runs a call on a binding thread (OFFLOAD routes)."""
    respond = _lib.held.ember_request_respond
    respond_answer = _lib.held.ember_request_respond_answer
    fast = _crossing.speedups
    if fast is not None:  # the C crossing: (handle, status, head, body), no ctypes conversion
        respond4 = fast.respond
        respond_answer = fast.respond_answer
    nocopy_min = NOCOPY_MIN
    OK = _lib.OK
    submit = runner.submit
    refcount = getattr(sys, "getrefcount", None)
    unkept = _unkept_count()
    ref = weakref.ref

    def on_request(slot: int, handle: int, info: int) -> None:
        request = None
        try:
            fn, mode = table[slot]
            request = Request(handle, info)
            if mode:
                request._detach()
                if mode == ASYNC:
                    watch(request, runner)
                    submit(fn, request)
                else:
                    offload(run_detached, fn, request, runner)
                return
            result = fn(request)
            stream = request._stream
            # A request the handler kept (stored, captured, deferred, held by its result)
            # must not point into engine memory after the answer, so it is copied out
            # first. One not kept is dropped here: after the answer call its views may be
            # gone. Whether it was kept is its reference count where the interpreter has
            # one (CPython; cheaper than a weak reference), else a weak reference once
            # ours is dropped (exact where objects die with their last reference, a copy
            # too many elsewhere, never a dangling view).
            if refcount is not None:
                if refcount(request) > unkept:
                    request._detach()
                else:
                    request = None
            else:
                kept = ref(request)
                request = None
                request = kept()
                if request is not None:
                    request._detach()
        except BaseException as e:
            failed(handle, info, request, e)
            return
        finish(handle, info, request, stream, result)

    def finish(handle: int, info: int, request: Request | None, stream: Any, result: Any) -> None:
        """Answers with what a SYNC handler returned; ``request`` is None unless the handler
        kept it (then it is detached). The C crossing calls this for every result but a
        prepared Response, which it answers itself."""
        try:
            if type(result) is not Response:
                if stream is not None:
                    after_stream(stream, result)
                    return
                if result is None and request is not None and request._deferred is not None:
                    return
                if type(result) in STREAM_TYPES:
                    if request is None:
                        request = Request(handle, info)  # not answered yet: the views still hold
                    start_stream(request, result, runner)
                    return
                if inspect.isawaitable(result):
                    if request is None:
                        request = Request(handle, info)
                    request._detach()
                    watch(request, runner)
                    submit(None, request, result)
                    return
                status, head, body = encode(result)
            else:
                prep = result._prep
                # A Response answered before has a prepared copy in the engine: one short call.
                rc = respond_answer(handle, prep) if prep else send_response(handle, result)
                if rc != OK:
                    respond_failed(rc, handle, result._status, result._head, result._body, request)
                return
            n = len(body)
            if n < nocopy_min:
                rc = (respond4(handle, status, head, body) if fast is not None
                      else respond(handle, status, head, len(head), body, n))
            else:
                rc = send(handle, status, head, body)
            if rc != OK:
                respond_failed(rc, handle, status, head, body, request)
        except BaseException as e:
            failed(handle, info, request, e)

    on_request.finish = finish  # type: ignore[attr-defined]
    return on_request


def failed(handle: int, info: int, request: Request | None, e: BaseException) -> None:
    """A handler (or answering for it) raised ``e``: 500 and a log line with its traceback."""
    try:
        if request is None:
            request = Request(handle, info)
        try:
            raise e  # handled again, so that logging's exc_info finds it
        except BaseException:
            handler_failed(handle, request, e)
    except BaseException:
        pass


def _unkept_count() -> int:
    """What ``sys.getrefcount(request)`` gives in ``on_request`` for a request held by
    its local variable alone: measured in code of the same shape (a local passed to the
    call), since interpreters differ in the references a call's argument holds."""
    if not hasattr(sys, "getrefcount"):
        return 0
    getrefcount = sys.getrefcount
    request = object()
    return getrefcount(request)


def watch(request: Request, runner: LoopRunner, handler: bool = True) -> None:
    """Listens for the request's events on behalf of its coroutine: the abort cancels it
    (a handler's, once it has read a streamed body to the end)."""
    events = events_of(request, runner.loop)
    if handler and request.body_streamed:
        events.body_unread = True


def start_stream(request: Request, result: Any, runner: LoopRunner) -> None:
    """A handler returned a generator / async generator / StreamingResponse."""
    if is_async_stream(result):
        request._detach()
        watch(request, runner, handler=False)
        runner.submit(None, request, stream_async(request, result))
    else:
        stream_sync(request, result)


def run_detached(fn: Callable[[Request], Any], request: Request, runner: LoopRunner) -> None:
    """Runs a sync handler away from the engine's thread (OFFLOAD) and answers for it."""
    try:
        result = fn(request)
        stream = request._stream
        if stream is not None:
            after_stream(stream, result)
        elif result is None and request._deferred is not None:
            return
        elif type(result) in STREAM_TYPES:
            start_stream(request, result, runner)
        elif inspect.isawaitable(result):
            watch(request, runner)
            runner.submit(None, request, result)
        else:
            answer(request.handle, result, request)
    except BaseException as e:
        try:
            handler_failed(request.handle, request, e)
        except BaseException:
            pass


def respond_failed(rc: int, handle: int, status: int, head: bytes, body: bytes, request: Request) -> None:
    if rc in _QUIET:
        log.debug("ember: answer for %s dropped: %s", describe(request), _lib.result_name(rc))
        return
    msg = _lib.last_error()  # first: any other ember_ call may replace it
    log.error("ember: answering %s failed: %s: %s", describe(request), _lib.result_name(rc), msg)
    if rc == _lib.ERR_INVALID_ARG:
        send(handle, INTERNAL_ERROR.status, INTERNAL_ERROR._head, INTERNAL_ERROR.body)
