"""Returned generators and StreamingResponse: chunked as they yield, str and empty bodies,
failures before and mid-stream, HEAD, a client leaving, stalled and slow readers; through httpx,
http.client and raw sockets. req.stream_response is in test_stream_response.py."""
import logging
import threading
import time

import httpx
import pytest

import ember
from streamutil import dechunk, read_all, reset_close, stalled_get


def test_a_returned_generator_is_sent_chunked_as_it_yields(serve, dispatch):
    def setup(app):
        @app.get("/gen/{n}")
        def gen(req):
            n = int(req.params["n"])
            return (b"%05d;" % i for i in range(n))

    s = serve(setup, dispatch=dispatch)
    r = httpx.get(s.url + "/gen/3")
    assert r.status_code == 200
    assert r.headers["transfer-encoding"] == "chunked" and "content-length" not in r.headers
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.content == b"00000;00001;00002;"
    # more than the engine's queue (256 KiB): pumped on writable events
    r = httpx.get(s.url + "/gen/60000")
    assert r.content == b"".join(b"%05d;" % i for i in range(60000))


def test_str_chunks_default_to_utf8_text_and_an_empty_generator_is_an_empty_200(serve, dispatch):
    def setup(app):
        @app.get("/text")
        def text(req):
            yield "grüße "
            yield "π"

        @app.get("/empty")
        def empty(req):
            return (x for x in ())

    s = serve(setup, dispatch=dispatch)
    r = httpx.get(s.url + "/text")
    assert r.headers["content-type"] == "text/plain; charset=utf-8" and r.text == "grüße π"
    r = httpx.get(s.url + "/empty")
    assert (r.status_code, r.content) == (200, b"")


def test_streaming_response_sets_status_headers_and_type_and_takes_any_iterable(serve, dispatch):
    def setup(app):
        @app.get("/sr")
        def sr(req):
            return ember.StreamingResponse(iter([b"a", "b", bytearray(b"c")]), status=207,
                                           headers={"X-Kind": "list"}, content_type="text/csv")

    s = serve(setup, dispatch=dispatch)
    r = httpx.get(s.url + "/sr")
    assert (r.status_code, r.headers["x-kind"], r.headers["content-type"], r.content) == (
        207, "list", "text/csv", b"abc")
    with pytest.raises(TypeError):
        ember.StreamingResponse(b"not an iterable of chunks")


def test_a_generator_failing_before_its_first_item_answers_500(serve, dispatch, caplog):
    def setup(app):
        @app.get("/early")
        def early(req):
            def g():
                raise KeyError("before anything")
                yield b""
            return g()

    s = serve(setup, dispatch=dispatch)
    with caplog.at_level(logging.ERROR, logger="ember"):
        r = httpx.get(s.url + "/early")
    assert r.status_code == 500 and b"before anything" not in r.content
    assert "KeyError" in caplog.text


def test_a_generator_failing_mid_stream_cuts_the_answer_and_the_server_goes_on(serve, dispatch, caplog):
    def setup(app):
        @app.get("/late")
        def late(req):
            def g():
                yield b"part one;"
                raise ValueError("mid-stream")
            return g()

    s = serve(setup, dispatch=dispatch)
    with caplog.at_level(logging.ERROR, logger="ember"):
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(s.url + "/late")
    assert "mid-stream" in caplog.text
    # the raw view: the terminating chunk never comes (what was still queued when the
    # answer was cut is dropped, possibly the head with it), and the connection closes
    import socket
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"GET /late HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = read_all(c)
    if raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        body, complete = dechunk(rest)
        assert head.startswith(b"HTTP/1.1 200") and b"part one;".startswith(body) and not complete
    assert httpx.get(s.url + "/late-nothing").status_code == 404


def test_head_of_a_streamed_route_sends_no_body_and_does_not_run_the_generator_dry(serve, dispatch):
    pulled = []

    def setup(app):
        @app.get("/forever")
        def forever(req):
            def g():
                i = 0
                while True:
                    pulled.append(i)
                    yield b"x" * 1000
                    i += 1
            return g()

    s = serve(setup, dispatch=dispatch)
    r = httpx.head(s.url + "/forever")
    assert r.status_code == 200 and r.content == b""
    assert len(pulled) == 1  # only the first item (for the head's type); then closed


def test_a_client_leaving_closes_the_generator(serve, dispatch):
    closed = threading.Event()

    def setup(app):
        @app.get("/endless")
        def endless(req):
            def g():
                try:
                    while True:
                        yield b"y" * 65536
                finally:
                    closed.set()
            return g()

    s = serve(setup, dispatch=dispatch)
    c = stalled_get(s.port, "/endless")
    time.sleep(0.3)
    reset_close(c)
    assert closed.wait(10), "the generator was not closed after the client left"
    assert httpx.get(s.url + "/nothing").status_code == 404


def test_stalled_generator_streams_hold_no_thread_and_little_memory(serve):
    # Two pool threads, five clients that read nothing: with the event-driven pump every
    # stream waits without a thread, so a plain request is still answered at once.
    made = []

    def setup(app):
        @app.get("/big")
        def big(req):
            def g():
                for i in range(100000):
                    made.append(1)
                    yield b"z" * 65536
            return g()

        @app.get("/ping")
        def ping(req):
            return "pong"

    s = serve(setup, dispatch="pool", pool_threads=2, stream_queue_bytes=262144)
    clients = [stalled_get(s.port, "/big") for _ in range(5)]
    try:
        time.sleep(0.5)
        t = time.monotonic()
        assert httpx.get(s.url + "/ping", timeout=5).text == "pong"
        assert time.monotonic() - t < 2
        # each stream produced about its queue plus what the sockets hold, not the 6 GiB
        assert len(made) < 5 * 200, len(made)
    finally:
        for c in clients:
            reset_close(c)


def test_a_slow_reader_gets_the_whole_stream_in_order(serve, dispatch):
    def setup(app):
        @app.get("/count")
        def count(req):
            return (b"%08d" % i * 128 for i in range(2000))

    s = serve(setup, dispatch=dispatch, stream_queue_bytes=16384)
    got = bytearray()
    with httpx.stream("GET", s.url + "/count") as r:
        for piece in r.iter_bytes(65536):
            got += piece
            time.sleep(0.02)
    assert bytes(got) == b"".join(b"%08d" % i * 128 for i in range(2000))
