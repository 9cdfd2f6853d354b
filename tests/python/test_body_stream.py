"""Streamed request bodies: stream_body routes and req.stream (sync file object, async
reader), 100-continue, limits, clients that leave; through httpx, http.client, sockets."""
import asyncio
import hashlib
import http.client
import io
import json
import os
import socket
import threading
import time

import httpx
import pytest

import ember
from streamutil import read_head, reset_close, wait_for


def _digest_app(app):
    @app.post("/sync", stream_body=True)
    def sync_digest(req):
        assert isinstance(req.stream, ember.BodyStream) and req.body_streamed
        h, n = hashlib.sha256(), 0
        for chunk in req.stream:
            assert 0 < len(chunk) <= 65536
            h.update(chunk)
            n += len(chunk)
        return {"bytes": n, "sha256": h.hexdigest(), "declared": req.content_length}

    @app.post("/async", stream_body=True)
    async def async_digest(req):
        assert isinstance(req.stream, ember.AsyncBodyStream)
        h, n = hashlib.sha256(), 0
        async for chunk in req.stream:
            h.update(chunk)
            n += len(chunk)
        return {"bytes": n, "sha256": h.hexdigest(), "declared": req.content_length}


def _expected(body, declared=True):
    return {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest(),
            "declared": len(body) if declared else None}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_streamed_body_is_read_whole_with_length_and_chunked(serve, dispatch, kind):
    s = serve(_digest_app, dispatch=dispatch)
    body = os.urandom(3_000_000)
    assert httpx.post(s.url + "/" + kind, content=body).json() == _expected(body)

    def pieces():
        for i in range(0, len(body), 100_003):
            yield body[i:i + 100_003]
    assert httpx.post(s.url + "/" + kind, content=pieces()).json() == _expected(body, declared=False)
    assert httpx.post(s.url + "/" + kind, content=b"").json() == _expected(b"")


def test_read_readinto_readline_and_readall(serve, dispatch):
    seen = {}

    def setup(app):
        @app.post("/parts", stream_body=True)
        def parts(req):
            st = req.stream
            seen["first"] = st.read(5)
            buf = bytearray(4)
            seen["into"] = (st.readinto(buf), bytes(buf))
            seen["line"] = st.readline()
            seen["rest"] = st.read()
            seen["after"] = st.read(10)
            seen["consumed"] = st.consumed
            return "ok"

    s = serve(setup, dispatch=dispatch)
    assert httpx.post(s.url + "/parts", content=b"hello1234line two\nthe rest").text == "ok"
    assert seen == {"first": b"hello", "into": (4, b"1234"), "line": b"line two\n", "rest": b"the rest",
                    "after": b"", "consumed": 26}


def test_req_body_on_a_streamed_route_is_a_clear_error_and_req_stream_works_on_buffered_routes(serve):
    seen = {}

    def setup(app):
        @app.post("/streamed", stream_body=True)
        def streamed(req):
            try:
                req.body
            except RuntimeError as e:
                seen["error"] = str(e)
            return req.stream.read()

        @app.post("/buffered")
        def buffered(req):
            assert not req.body_streamed and isinstance(req.stream, io.BytesIO)
            return req.stream.read()

        @app.post("/buffered-async")
        async def buffered_async(req):
            return b"".join([chunk async for chunk in req.stream])

    s = serve(setup)
    assert httpx.post(s.url + "/streamed", content=b"abc").content == b"abc"
    assert "req.stream" in seen["error"]
    assert httpx.post(s.url + "/buffered", content=b"def").content == b"def"
    assert httpx.post(s.url + "/buffered-async", content=b"ghi").content == b"ghi"


def test_expect_100_continue_is_sent_only_when_the_handler_reads(serve, dispatch):
    gate = threading.Event()

    def setup(app):
        @app.post("/gated", stream_body=True)
        def gated(req):
            gate.wait(10)
            return {"n": len(req.stream.read())}

    s = serve(setup, dispatch=dispatch)
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(b"POST /gated HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    c.settimeout(0.5)
    with pytest.raises(socket.timeout):
        c.recv(100)  # nothing yet: the handler has not read
    gate.set()
    head, rest = read_head(c)
    assert head.startswith(b"HTTP/1.1 100")
    c.sendall(b"hello")
    raw = rest + read_all_until(c, b'{"n": 5}')
    assert b"200 OK" in raw and raw.endswith(b'{"n": 5}')
    c.close()


def read_all_until(c, tail, timeout=10):
    c.settimeout(timeout)
    out = b""
    while not out.endswith(tail):
        got = c.recv(65536)
        if not got:
            break
        out += got
    return out


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_body_over_the_stream_limit_gets_413_and_the_handler_hears_body_too_large(serve, kind):
    seen = []

    def setup(app):
        @app.post("/limited", stream_body=True)
        def limited(req):
            try:
                req.stream.read()
            except ember.BodyTooLarge as e:
                seen.append(e.name)
                raise

        @app.post("/alimited", stream_body=True)
        async def alimited(req):
            try:
                await req.stream.readall()
            except ember.BodyTooLarge as e:
                seen.append(e.name)
                raise

    s = serve(setup, max_stream_body_bytes=100_000)
    path = "/limited" if kind == "sync" else "/alimited"

    def chunks():  # chunked, so the engine cannot refuse it from the head alone
        for _ in range(10):
            yield b"x" * 50_000
    r = httpx.post(s.url + path, content=chunks())
    assert r.status_code == 413
    assert wait_for(lambda: seen, 5) and seen == ["EMBER_ERR_TOO_LARGE"]
    # declared too large: refused before the handler runs
    r = httpx.post(s.url + path, content=b"y" * 100_001)
    assert r.status_code == 413 and len(seen) == 1


def test_a_coroutine_whose_body_was_refused_before_its_first_read_still_hears_why(serve):
    # The engine's 413 comes while the coroutine sleeps, before it reads: the abort must
    # not cancel it (it used to), its first read raises BodyTooLarge.
    seen = []

    def setup(app):
        @app.post("/late", stream_body=True)
        async def late(req):
            await asyncio.sleep(0.5)
            try:
                await req.stream.readall()
            except ember.BodyTooLarge as e:
                seen.append(e.name)
                raise

    s = serve(setup, max_stream_body_bytes=100_000)

    def chunks():
        for _ in range(10):
            yield b"x" * 50_000
    r = httpx.post(s.url + "/late", content=chunks())
    assert r.status_code == 413
    assert wait_for(lambda: seen, 5) and seen == ["EMBER_ERR_TOO_LARGE"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_client_leaving_mid_body_raises_client_disconnected(serve, dispatch, kind):
    seen = []

    def setup(app):
        @app.post("/leave", stream_body=True)
        def leave(req):
            try:
                req.stream.read()
            except ember.ClientDisconnected:
                seen.append("gone")

        @app.post("/aleave", stream_body=True)
        async def aleave(req):
            try:
                await req.stream.readall()
            except ember.ClientDisconnected:
                seen.append("gone")
            except asyncio.CancelledError:
                seen.append("gone")
                raise

    s = serve(setup, dispatch=dispatch)
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" % (
        b"leave" if kind == "sync" else b"aleave"))
    c.sendall(b"z" * 200_000)
    time.sleep(0.2)
    reset_close(c)
    assert wait_for(lambda: seen == ["gone"], 10), seen
    assert httpx.get(s.url + "/nothing").status_code == 404


def test_read_timeout_bounds_a_blocking_read(serve):
    seen = []

    def setup(app):
        @app.post("/patient", stream_body=True)
        def patient(req):
            req.stream.timeout = 0.3
            first = req.stream.read(3)
            try:
                req.stream.read(10)
            except ember.ReadTimeout as e:
                seen.append(isinstance(e, TimeoutError))
            return first

    s = serve(setup, dispatch="pool")
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(b"POST /patient HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
    raw = read_all_until(c, b"abc")
    assert raw.startswith(b"HTTP/1.1 200") and seen == [True]
    c.close()


def test_inline_dispatch_runs_sync_stream_body_handlers_off_the_io_thread(serve):
    threads = []

    def setup(app):
        @app.post("/where", stream_body=True)
        def where(req):
            threads.append(threading.current_thread().name)
            return {"n": len(req.stream.read())}

        @app.get("/ping")
        def ping(req):
            return "pong"

    s = serve(setup, dispatch="inline", workers=1)
    # A slow body: the one I/O thread must stay free for the other client meanwhile.
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(b"POST /where HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc")
    time.sleep(0.2)
    assert httpx.get(s.url + "/ping", timeout=5).text == "pong"
    c.sendall(b"def")
    raw = read_all_until(c, b'{"n": 6}')
    assert raw.endswith(b'{"n": 6}')
    assert threads and threads[0].startswith("ember-offload")
    c.close()


def test_streamed_body_over_http2(serve, dispatch):
    s = serve(_digest_app, dispatch=dispatch)
    body = os.urandom(500_000)
    with httpx.Client(http1=False, http2=True) as c:
        for kind in ("sync", "async"):
            r = c.post(s.url + "/" + kind, content=body)
            assert r.http_version == "HTTP/2" and r.json()["sha256"] == hashlib.sha256(body).hexdigest()


def test_http_client_upload_with_expect_and_many_at_once(serve):
    s = serve(_digest_app)
    bodies = [os.urandom(200_000 + i) for i in range(12)]

    def one(body):
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=20)
        c.request("POST", "/sync", body=body, headers={"Content-Type": "application/octet-stream"})
        r = c.getresponse()
        out = json.loads(r.read())
        c.close()
        return out

    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        assert list(pool.map(one, bodies)) == [_expected(b) for b in bodies]
