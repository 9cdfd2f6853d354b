"""An asyncio loop that engine threads may borrow for a moment.

An ASGI app is a coroutine, and most requests to most apps finish without ever waiting
on anything. Handing every request to a loop thread costs two thread switches and a
wake-up per request, which is most of what a server spends in Python. So the loop
thread holds a lock (the *baton*) whenever it runs callbacks and gives it up only while
it sleeps in ``select()``. An engine thread that takes the baton is, for that moment,
the loop's thread: it marks the loop as running on itself, creates the request's task
and runs what is ready. A task that completes is answered right there, on the engine
thread, with no switch at all. A task that waits (a sleep, I/O, a thread pool) stays
on the loop like any other task, and the loop thread, woken if needed, carries on with
it once the baton is back. Only one thread ever runs the loop's callbacks at a time, so
asyncio's single-thread rules hold and anyio, Starlette and FastAPI see a real running
loop and a real current task.

Requirements: the loop is asyncio's own selector loop (not uvloop), built here; debug
mode off (asyncio's debug checks insist on the loop's own thread: there, every request
goes through ``call_soon_threadsafe`` instead).
"""

from __future__ import annotations

import asyncio
import selectors
import contextvars
import sys
import threading
import types
from asyncio import events
from typing import Any, Callable

# A borrowed pass runs at most this many ready callbacks; a task that keeps yielding
# (``while True: await asyncio.sleep(0)``) is then left to the loop thread.
_MAX_STEPS = 64


class _BatonSelector(selectors.BaseSelector):
    """The loop's selector; gives the baton away while the loop thread sleeps in it."""

    def __init__(self, baton: threading.Lock) -> None:
        self._sel = selectors.DefaultSelector()
        self._baton = baton

    def register(self, fileobj: Any, events_: int, data: Any = None) -> selectors.SelectorKey:
        return self._sel.register(fileobj, events_, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._sel.unregister(fileobj)

    def modify(self, fileobj: Any, events_: int, data: Any = None) -> selectors.SelectorKey:
        return self._sel.modify(fileobj, events_, data)

    def select(self, timeout: float | None = None) -> list:
        self._baton.release()
        try:
            return self._sel.select(timeout)
        finally:
            self._baton.acquire()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._sel.get_key(fileobj)

    def get_map(self) -> Any:
        return self._sel.get_map()

    def close(self) -> None:
        self._sel.close()


def _noop() -> None:
    pass


class _Carrier:
    """A request carrier: a real asyncio task that requests run under (``current_task()``
    is it) while they are driven step by step on an engine thread, so that anyio and
    ``asyncio.timeout`` see a task, without the cost of a task per request. A request
    that waits is handed to it and finishes there; the next request gets a new carrier.
    Requests share a carrier only while they leave its context untouched."""

    __slots__ = ("task", "ctx", "job", "pending")


@types.coroutine
def _resume(coro: Any, value: Any, exc: BaseException | None = None) -> Any:
    """Goes on driving a coroutine that was started elsewhere and last yielded ``value``
    (a future it waits on, or None), inside the awaiting task."""
    try:
        if exc is not None:
            value = coro.throw(exc)
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:
                value = coro.throw(e)
            else:
                value = coro.send(sent)
    except StopIteration as stop:
        return stop.value


async def _carry(c: _Carrier) -> None:
    try:
        await c.job
    except asyncio.CancelledError:
        if c.pending is None:
            return  # retired without a request
        coro, _ = c.pending
        c.pending = None
        await _resume(coro, None, asyncio.CancelledError())
        return
    coro, value = c.pending
    c.pending = None
    await _resume(coro, value)


_Task = asyncio.Task
_Handle = events.Handle
# Python 3.11+: cancellation requests not yet taken back (earlier: none are counted).
_cancelling = getattr(asyncio.Task, "cancelling", lambda task: 0)
_enter_task = asyncio.tasks._enter_task
_leave_task = asyncio.tasks._leave_task
_get_running_loop = events._get_running_loop
_set_running_loop = events._set_running_loop


class _Loop(asyncio.SelectorEventLoop):
    """asyncio's selector loop with a leaner ``call_soon`` (it runs for every task step)
    and a note of new timers, which a borrowed pass must wake the loop thread for."""

    new_timer = False

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> Any:
        self.new_timer = True
        return super().call_at(when, callback, *args, context=context)

    def call_soon(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.Handle:
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle


class BorrowableLoop:
    """An asyncio loop in its own thread that engine threads can run tasks on directly.

    ``drive(coro, owner, block=True)`` runs a request's coroutine: on the calling thread
    when the baton is free (or, with ``block``, once it is), else by a hop to the loop
    thread. Returns nothing; the coroutine answers its request itself.
    """

    def __init__(self) -> None:
        self.baton = threading.Lock()
        self.loop = _Loop(_BatonSelector(self.baton))
        self._init_state()

    def _init_state(self) -> None:
        self.thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task] = set()
        self._debug = self.loop.get_debug()
        self._carrier: _Carrier | None = None
        # Per thread: marked as running this loop already (see _adopt_thread). Thread-local,
        # so a new thread that reuses an old one's id starts unmarked.
        self._adopted = threading.local()
        # Requests start from an empty context, as tasks created on a fresh loop would.
        self._base_ctx = contextvars.Context()

    # -- the loop thread -------------------------------------------------------------
    def start(self) -> None:
        if self.loop.is_closed() or self.loop.is_running():  # started again after a stop
            self.loop = _Loop(_BatonSelector(self.baton))
            self._init_state()
        ready = threading.Event()
        loop = self.loop

        def run() -> None:
            self.baton.acquire()
            try:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()
            finally:
                self.baton.release()

        self.thread = threading.Thread(target=run, name="ember-asgi-loop", daemon=True)
        self.thread.start()
        ready.wait()

    @property
    def thread_ident(self) -> int | None:
        return self.thread.ident if self.thread else None

    def call(self, coro: Any, timeout: float | None = None) -> Any:
        """Runs a coroutine on the loop from another thread and returns its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, grace: float = 2.0) -> None:
        """Cancels the tasks still running, ends the loop thread and closes the loop."""
        loop, thread = self.loop, self.thread
        if thread is None or loop.is_closed():
            return

        async def shutdown() -> None:
            tasks = [t for t in self._tasks if not t.done()]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=grace)
            try:
                await loop.shutdown_asyncgens()
                await loop.shutdown_default_executor()
            finally:
                loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        if threading.get_ident() != thread.ident:
            thread.join(grace + 5)
            if not thread.is_alive():
                loop.close()
        self.thread = None

    # -- starting request tasks ------------------------------------------------------
    def drive(self, coro: Any, owner: Any, block: bool = True) -> None:
        """Runs the request coroutine ``coro`` (not started yet): on this thread when the
        baton is free (or, with ``block``, once it is), else as a task on the loop thread.

        ``owner`` hears how it went: ``owner.finished(result, exc)`` when it ends without
        waiting (here, with the baton held; ``exc`` is what it raised, or None; skipped
        when it returned None with ``owner.done`` set and no ``owner.waiter``), and
        ``owner.rest(coro, value)``, a coroutine that goes on driving it (``_resume``) and
        does what ``finished`` would, when it waits or runs on the loop thread. The fast
        path wraps nothing: the app's own coroutine is stepped here."""
        loop = self.loop
        baton = self.baton
        if self._debug or not baton.acquire(block):
            loop.call_soon_threadsafe(self._spawn, owner.rest, coro, None)
            return
        try:
            # Not _get_running_loop(): with a loop running it checks the pid, a getpid()
            # system call per request (~0.3-1.5 us here); a thread-local is a plain read.
            if not self._adopted.__dict__:
                self._adopt_thread()
            loop.new_timer = False
            carrier = self._carrier
            if carrier is None or carrier.job.done():
                carrier = self._new_carrier()
            task = carrier.task
            _enter_task(loop, task)
            try:
                waiting_on = carrier.ctx.run(coro.send, None)
            except StopIteration as stop:
                _leave_task(loop, task)
                # The usual end (answered, returned None, nothing waits on it) needs no call.
                if stop.value is not None or not owner.done or owner.waiter is not None:
                    owner.finished(stop.value, None)
            except BaseException as e:
                _leave_task(loop, task)
                owner.finished(None, e)
            else:
                _leave_task(loop, task)
                # The request waits: its carrier task takes it over (see _carry), wrapped
                # so that its end is reported, and a fresh carrier serves the next request.
                rest = owner.rest(coro, waiting_on)
                first = rest.send(None)  # straight back to what the app waits on
                self._carrier = None
                if carrier.job.done():  # the carrier was cancelled meanwhile
                    self._keep(_Task(_resume(rest, first), loop=loop, context=carrier.ctx))
                else:
                    carrier.pending = (rest, first)
                    carrier.job.set_result(None)
            if self._carrier is carrier and (carrier.ctx != self._base_ctx or task.done() or _cancelling(task)):
                # The request changed context variables or its task's state: the next
                # request must not see that.
                self._carrier = None
                task.cancel()
            ready = loop._ready
            if ready:
                steps = 0
                while ready and steps < _MAX_STEPS:
                    handle = ready.popleft()
                    if not handle._cancelled:
                        handle._run()
                    steps += 1
                # The loop thread may be asleep with a timeout computed before this pass:
                # wake it when something new waits on it (ready callbacks, a new timer).
                if ready or loop.new_timer:
                    loop.call_soon_threadsafe(_noop)
            elif loop.new_timer:
                loop.call_soon_threadsafe(_noop)
        finally:
            baton.release()

    def _adopt_thread(self) -> None:
        # An engine thread serves only this loop's requests, so the loop stays marked as
        # running on it (setting and clearing that per request costs more than a pass),
        # with the loop's async generator hooks, as on the loop's own thread.
        _set_running_loop(self.loop)
        sys.set_asyncgen_hooks(firstiter=self.loop._asyncgen_firstiter_hook,
                               finalizer=self.loop._asyncgen_finalizer_hook)
        self._adopted.done = True

    def _new_carrier(self) -> "_Carrier":
        """A task parked on a future, to be the current task while requests run on the
        caller's thread. Runs its first step now (the baton is held)."""
        c = _Carrier()
        c.ctx = self._base_ctx.copy()
        c.job = self.loop.create_future()
        c.pending = None
        c.task = _Task(_carry(c), loop=self.loop, context=c.ctx, name="ember-asgi")
        self._keep(c.task)
        self._carrier = c
        ready = self.loop._ready
        while ready:
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()
            if c.task._fut_waiter is not None:  # parked on c.job
                break
        return c

    def _spawn(self, rest: Callable[..., Any], coro: Any, value: Any) -> None:
        self._keep(self.loop.create_task(rest(coro, value)))

    def _keep(self, task: asyncio.Task) -> None:
        # The loop holds tasks only weakly; a task waiting on a future that only it can
        # reach would otherwise be collected mid-request.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
