"""req.stream_response (sync and async): writes and the with block, handing a stream over,
misuse, blocking writes and would-block, async streams and generators, cancellation, on_abort,
HTTP/2; through httpx and raw sockets. Returned generators are in test_stream_generators.py."""
import asyncio
import logging
import threading
import time

import httpx
import pytest

import ember
from streamutil import reset_close, stalled_get, wait_for


def test_stream_response_writes_and_the_with_block_ends_it(serve):
    def setup(app):
        @app.get("/manual")
        def manual(req):
            with req.stream_response(201, headers={"X-A": "1"}, content_type="text/plain") as out:
                assert isinstance(out, ember.ResponseStream)
                for i in range(5):
                    out.write("line %d\n" % i)
                out.write(b"")  # nothing, quietly
                assert out.try_write(memoryview(b"last\n"))

    s = serve(setup)
    r = httpx.get(s.url + "/manual")
    assert (r.status_code, r.headers["x-a"], r.headers["content-type"]) == (201, "1", "text/plain")
    assert r.text == "".join("line %d\n" % i for i in range(5)) + "last\n"


def test_a_stream_left_open_is_closed_when_the_handler_returns(serve, dispatch):
    def setup(app):
        @app.get("/open")
        def left_open(req):
            req.stream_response().write(b"not closed by me")

    s = serve(setup, dispatch=dispatch)
    r = httpx.get(s.url + "/open", timeout=5)
    assert r.content == b"not closed by me"


def test_a_returned_stream_is_handed_over_to_another_thread(serve, dispatch):
    def setup(app):
        @app.get("/handover")
        def handover(req):
            out = req.stream_response(content_type="text/plain")

            def later():
                for i in range(3):
                    time.sleep(0.05)
                    out.write("tick %d\n" % i)
                out.close()
            threading.Thread(target=later).start()
            return out

    s = serve(setup, dispatch=dispatch)
    r = httpx.get(s.url + "/handover", timeout=5)
    assert r.text == "tick 0\ntick 1\ntick 2\n"


def test_an_exception_inside_the_with_block_cuts_the_answer(serve, caplog):
    def setup(app):
        @app.get("/cut")
        def cut(req):
            with req.stream_response() as out:
                out.write(b"half")
                raise RuntimeError("broken mid-answer")

    s = serve(setup)
    with caplog.at_level(logging.ERROR, logger="ember"):
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(s.url + "/cut")
        # The with block cuts the answer before the exception reaches the logging dispatch.
        assert wait_for(lambda: "broken mid-answer" in caplog.text, 5)


def test_stream_misuse_raises_clear_errors(serve, dispatch):
    seen = {}

    def setup(app):
        @app.get("/twice")
        def twice(req):
            out = req.stream_response()
            try:
                req.stream_response()
            except ember.StreamClosed as e:
                seen["twice"] = str(e)
            out.write(b"ok")
            out.close()
            out.close()  # idempotent
            try:
                out.write(b"after close")
            except ember.StreamClosed as e:
                seen["after"] = str(e)
            try:
                out.write(12)
            except ember.StreamClosed:
                seen["int"] = "closed first"

        @app.get("/answered")
        def answered(req):
            ember.response.send(req.handle, 200, b"", b"plain")
            try:
                req.stream_response()
            except ember.EmberError as e:
                seen["answered"] = e.name
            return None

        @app.get("/badtype")
        def badtype(req):
            with req.stream_response() as out:
                try:
                    out.write(12)
                except TypeError as e:
                    seen["type"] = str(e)
                out.write(b"fine")

    s = serve(setup, dispatch=dispatch)
    assert httpx.get(s.url + "/twice").content == b"ok"
    # close() sent the answer, so the client can have it before the handler's write after close
    assert wait_for(lambda: "after" in seen)
    assert "already streams" in seen["twice"] and "after close" in seen["after"]
    assert httpx.get(s.url + "/answered").content == b"plain"
    assert wait_for(lambda: "answered" in seen)  # the handler goes on after its answer left
    assert seen["answered"] == "EMBER_ERR_ALREADY_ANSWERED"
    assert httpx.get(s.url + "/badtype").content == b"fine" and "bytes or str" in seen["type"]


def test_blocking_write_times_out_on_a_client_that_does_not_read(serve):
    outcome = []

    def setup(app):
        @app.get("/slowclient")
        def slowclient(req):
            out = req.stream_response()
            try:
                for _ in range(10000):
                    out.write(b"w" * 65536, timeout=0.3)
            except ember.WriteTimeout as e:
                outcome.append(("timeout", isinstance(e, TimeoutError)))
                out.abort()

    s = serve(setup, dispatch="pool")
    c = stalled_get(s.port, "/slowclient")
    try:
        assert wait_for(lambda: outcome, 10)
        assert outcome == [("timeout", True)]
    finally:
        reset_close(c)


def test_blocking_write_after_the_client_left_raises_client_disconnected(serve):
    outcome = []

    def setup(app):
        @app.get("/leaver")
        def leaver(req):
            out = req.stream_response()
            try:
                for _ in range(100000):
                    out.write(b"v" * 65536)
            except ember.ClientDisconnected as e:
                outcome.append(e.name)
                assert out.aborted
                out.close()  # quiet after a disconnect

    s = serve(setup, dispatch="pool")
    c = stalled_get(s.port, "/leaver")
    time.sleep(0.3)
    reset_close(c)
    assert wait_for(lambda: outcome, 10)
    assert outcome == ["EMBER_ERR_CLIENT_GONE"]


def test_a_full_queue_on_an_inline_io_thread_raises_would_block_instead_of_stalling(serve):
    outcome = []

    def setup(app):
        @app.get("/inline-write")
        def inline_write(req):
            out = req.stream_response()
            try:
                for _ in range(1000):
                    out.write(b"i" * 65536)  # this thread is the one that would send it
            except ember.WouldBlock as e:
                outcome.append(isinstance(e, BlockingIOError))
                out.abort()

    s = serve(setup, dispatch="inline")
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(s.url + "/inline-write")
    assert outcome == [True]


def test_async_stream_waits_for_room_and_async_generators_stream(serve, dispatch):
    def setup(app):
        @app.get("/awrite")
        async def awrite(req):
            async with req.stream_response(content_type="text/plain") as out:
                assert isinstance(out, ember.AsyncResponseStream)
                for i in range(20000):
                    await out.write(b"%06d\n" % i)

        @app.get("/agen")
        async def agen(req):
            async def g():
                for i in range(3):
                    await asyncio.sleep(0.01)
                    yield "a%d " % i
            return ember.StreamingResponse(g(), headers={"X-Gen": "async"})

        @app.get("/agen-from-sync")
        def agen_from_sync(req):
            async def g():
                yield b"from "
                await asyncio.sleep(0)
                yield b"a sync handler"
            return g()

    s = serve(setup, dispatch=dispatch, stream_queue_bytes=4096)
    r = httpx.get(s.url + "/awrite")
    assert r.content == b"".join(b"%06d\n" % i for i in range(20000))
    r = httpx.get(s.url + "/agen")
    assert (r.text, r.headers["x-gen"], r.headers["content-type"]) == ("a0 a1 a2 ", "async",
                                                                        "text/plain; charset=utf-8")
    assert httpx.get(s.url + "/agen-from-sync").content == b"from a sync handler"


def test_async_handler_is_cancelled_when_the_client_leaves_mid_stream(serve, dispatch):
    seen = []

    def setup(app):
        @app.get("/acancel")
        async def acancel(req):
            out = req.stream_response()
            try:
                while True:
                    await out.write(b"c" * 65536)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            except ember.ClientDisconnected:
                seen.append("disconnected")

    s = serve(setup, dispatch=dispatch)
    c = stalled_get(s.port, "/acancel")
    time.sleep(0.3)
    reset_close(c)
    assert wait_for(lambda: seen, 10)
    assert seen[0] in ("cancelled", "disconnected")


def test_async_handler_is_cancelled_by_the_handler_timeout(serve, dispatch):
    seen = []

    def setup(app):
        @app.get("/forever")
        async def forever(req):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            return "too late"

    s = serve(setup, dispatch=dispatch, handler_timeout=0.3)
    r = httpx.get(s.url + "/forever", timeout=10)
    assert r.status_code == 503
    assert wait_for(lambda: seen == ["cancelled"], 5), seen


def test_async_generator_is_closed_when_the_client_leaves(serve, dispatch):
    closed = threading.Event()

    def setup(app):
        @app.get("/agen-endless")
        async def endless(req):
            async def g():
                try:
                    while True:
                        yield b"e" * 65536
                finally:
                    closed.set()
            return g()

    s = serve(setup, dispatch=dispatch)
    c = stalled_get(s.port, "/agen-endless")
    time.sleep(0.3)
    reset_close(c)
    assert closed.wait(10)


def test_on_abort_tells_a_deferred_sync_handler_that_the_request_timed_out(serve, dispatch):
    told = threading.Event()

    def setup(app):
        @app.get("/deferred")
        def deferred(req):
            req.defer()
            req.on_abort(told.set)

    s = serve(setup, dispatch=dispatch, handler_timeout=0.3)
    assert httpx.get(s.url + "/deferred", timeout=10).status_code == 503
    assert told.wait(5)


def test_streams_over_http2(serve, dispatch):
    def setup(app):
        @app.get("/h2gen")
        def h2gen(req):
            return (b"%04d" % i for i in range(5000))

        @app.get("/h2async")
        async def h2async(req):
            async with req.stream_response(content_type="text/plain") as out:
                for i in range(3):
                    await out.write("h2 %d;" % i)

    s = serve(setup, dispatch=dispatch, stream_queue_bytes=8192)
    with httpx.Client(http1=False, http2=True) as c:
        r = c.get(s.url + "/h2gen")
        assert r.http_version == "HTTP/2"
        assert r.content == b"".join(b"%04d" % i for i in range(5000))
        r = c.get(s.url + "/h2async")
        assert (r.http_version, r.text) == ("HTTP/2", "h2 0;h2 1;h2 2;")


def test_a_raising_on_abort_callback_is_logged_and_the_server_goes_on(serve, caplog):
    def setup(app):
        @app.get("/abort-bug")
        def abort_bug(req):
            req.defer()
            req.on_abort(lambda: 1 / 0)

    s = serve(setup, handler_timeout=0.2)
    assert httpx.get(s.url + "/abort-bug", timeout=10).status_code == 503
    assert wait_for(lambda: "ZeroDivisionError" in caplog.text, 5)
    assert httpx.get(s.url + "/nothing").status_code == 404
