"""Runs ``async def`` handlers on an asyncio loop and answers them from that loop.

The engine's callback only schedules the coroutine and returns at once (the request is
answered later through the deferred path), so a slow coroutine never holds an engine
thread. The loop is the binding's own, in a daemon thread, unless the user gives one.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Callable

from .request import Request
from .response import answer, fail


class LoopRunner:
    """One asyncio loop that runs the coroutines of one server."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._given = loop
        self.loop: asyncio.AbstractEventLoop | None = loop
        self.thread: threading.Thread | None = None
        # The loop only keeps weak references to tasks; these keep running ones alive.
        self._tasks: set[asyncio.Task] = set()
        self._pending: collections.deque = collections.deque()
        self._wake_sent = False

    @property
    def thread_ident(self) -> int | None:
        return self.thread.ident if self.thread else None

    def start(self) -> None:
        if self._given is not None or self.thread is not None:
            return
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self.loop = loop
        self.thread = threading.Thread(target=run, name="ember-asyncio", daemon=True)
        self.thread.start()
        ready.wait()

    def submit(self, fn: Callable[[Request], Any] | None, request: Request, awaitable: Any = None) -> None:
        """Schedules ``fn(request)`` (or an awaitable already made) from any thread."""
        # Each call_soon_threadsafe wakes the loop through its self-pipe (a syscall and a
        # thread switch); under load one wake-up takes every request queued meanwhile.
        self._pending.append((fn, request, awaitable))
        if not self._wake_sent:
            self._wake_sent = True
            self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        # Cleared before popping: a submit that sees it cleared sends a new wake-up, and
        # one that still saw it set appended before the loop below empties the queue.
        self._wake_sent = False
        pending = self._pending
        while pending:
            self._spawn(*pending.popleft())

    def _spawn(self, fn: Callable | None, request: Request, awaitable: Any) -> None:
        events = request._events
        if events is not None and events.aborted and not events.body_unread:
            # The client left (or the handler timeout answered) before the coroutine began.
            if awaitable is not None and hasattr(awaitable, "close"):
                awaitable.close()
            return
        try:
            aw = awaitable if awaitable is not None else fn(request)
            task = self.loop.create_task(self._run(aw, request))
        except BaseException:
            fail(request.handle, request)
            return
        if events is not None:
            events.task = task  # the abort cancels it
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def spawn(self, coro_fn: Callable[..., Any], *args: Any) -> None:
        """Runs ``coro_fn(*args)`` as a task on the loop (from any thread)."""
        def start() -> None:
            task = self.loop.create_task(coro_fn(*args))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.loop.call_soon_threadsafe(start)

    @staticmethod
    async def _run(aw: Any, request: Request) -> None:
        from ._pump import after_stream, handler_failed, stream_async
        from .streaming import STREAM_TYPES

        try:
            result = await aw
        except asyncio.CancelledError:
            # Cancelled for the request's abort (the client left, the handler timeout
            # answered) or the server's shutdown: nobody is left to answer.
            stream = request._stream
            if stream is not None and not stream.closed:
                events = request._events
                if events is not None and events.aborted:
                    stream.closed = True  # the engine ended it
                else:
                    stream.abort()
            return
        except BaseException as e:
            handler_failed(request.handle, request, e)
            return
        stream = request._stream
        if stream is not None:
            after_stream(stream, result)
            return
        if result is None and request._deferred is not None:
            return
        if type(result) in STREAM_TYPES:
            await stream_async(request, result)
            return
        answer(request.handle, result, request)

    def stop(self) -> None:
        """Cancels what is still running and ends the loop thread (own loop only)."""
        loop, thread = self.loop, self.thread
        if thread is None or loop is None or loop.is_closed():
            return

        async def shutdown() -> None:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        if threading.get_ident() != thread.ident:
            thread.join(5)
            if not thread.is_alive():
                loop.close()
        self.thread = None
        self.loop = None
