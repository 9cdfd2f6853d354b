"""GET /stream?n=N&size=S: N writes of S bytes, write i being S copies of 'a' + (i mod 26),
streamed chunked on HTTP/1.1 and in DATA frames on HTTP/2 (tests/REFERENCE_APP.md). Also the
clients nobody likes: one that vanishes mid-stream, one that stops reading (the app's memory
must stay flat: backpressure, not buffering)."""
import hashlib
import socket
import string
import subprocess
import time

import httpx
import pytest

from procmem import assert_grown_below, rss_kib
from rawhttp import RawConn

BAD = b'{"error": "expected n=0..1048576&size=1..1048576"}'


def expected(n, size):
    letters = string.ascii_lowercase.encode()
    return b"".join(bytes([letters[i % 26]]) * size for i in range(n))


def expected_sha256(n, size):
    h = hashlib.sha256()
    blocks = {}
    for i in range(n):
        c = i % 26
        if c not in blocks:
            blocks[c] = bytes([0x61 + c]) * size
        h.update(blocks[c])
    return h.hexdigest()


def test_stream_small_is_chunked_with_the_pattern(app):
    with RawConn(app.port) as c:
        c.send(b"GET /stream?n=3&size=4 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        assert r.header("Content-Type") == "application/octet-stream"
        assert r.header("Transfer-Encoding") == "chunked" and r.header("Content-Length") is None
        assert r.body == b"aaaabbbbcccc"
        # the connection stays usable after a streamed answer
        c.send(b"GET /stream?n=27&size=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.body == expected(27, 3)
        assert r.body.endswith(b"aaa")


def test_stream_zero_writes_is_an_empty_200(app):
    r = httpx.get(app.url + "/stream?n=0&size=5", timeout=10)
    assert r.status_code == 200 and r.content == b""


@pytest.mark.parametrize("query", ["", "n=3", "size=3", "n=x&size=3", "n=3&size=0", "n=3&size=1048577",
                                   "n=1048577&size=1", "n=-1&size=1", "n=3&size=1.5"])
def test_stream_bad_parameters_are_400(app, query):
    r = httpx.get(app.url + "/stream?" + query, timeout=10)
    assert r.status_code == 400, query
    assert r.headers["content-type"].startswith("application/json")
    assert r.content == BAD


def test_stream_largest_parameters_are_accepted(app):
    # 1048576 writes of 1 MiB would be 1 TiB: read the first two writes and leave
    with RawConn(app.port) as c:
        c.send(b"GET /stream?n=1048576&size=1048576 HTTP/1.1\r\nHost: x\r\n\r\n")
        head = c._read_until(b"\r\n\r\n", time.monotonic() + 10)
        assert head.startswith(b"HTTP/1.1 200"), head
        got = b""
        while len(got) < 2 * 1048576 + 100:
            if not c._fill(time.monotonic() + 10):
                break
            got, c.buf = got + c.buf, b""
        assert b"a" * 65536 in got and b"b" * 65536 in got


def test_stream_64_mib_through_curl(app):
    n, size = 1024, 65536
    out = subprocess.run("curl -sS --max-time 60 '%s/stream?n=%d&size=%d' | sha256sum" % (app.url, n, size),
                         shell=True, capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0].decode() == expected_sha256(n, size)


def test_stream_over_http2_in_data_frames(app):
    n, size = 200, 10000
    with httpx.Client(http1=False, http2=True, timeout=30) as client:
        with client.stream("GET", app.url + "/stream?n=%d&size=%d" % (n, size)) as r:
            assert r.http_version == "HTTP/2" and r.status_code == 200
            assert r.headers["content-type"] == "application/octet-stream"
            body = b"".join(r.iter_raw())
    assert body == expected(n, size)


def test_stream_over_http2_several_at_once_on_one_connection(app):
    # Eight streams in flight on one connection, from one asyncio loop: httpcore's
    # synchronous HTTP/2 connection is not safe to share between threads (it takes the
    # next stream id and encodes headers outside its locks), and stop 22's CI once got a
    # PROTOCOL_ERROR from the server for what that race sent it.
    import asyncio

    connects = []

    async def trace(event, info):
        # httpcore's documented "trace" extension: one event per TCP connection made.
        if event == "connection.connect_tcp.complete":
            connects.append(info)

    async def run():
        async with httpx.AsyncClient(http1=False, http2=True, timeout=30) as client:
            async def one(k):
                r = await client.get(app.url + "/stream?n=%d&size=%d" % (30 + k, 1000 + k), extensions={"trace": trace})
                return r.http_version, r.content == expected(30 + k, 1000 + k)
            return await asyncio.gather(*(one(k) for k in range(8)))
    results = asyncio.run(run())
    assert results == [("HTTP/2", True)] * 8
    # One connection carried them all.
    assert len(connects) == 1


def test_stream_over_http2_through_curl(app):
    n, size = 300, 65536
    out = subprocess.run("curl -sS --http2-prior-knowledge --max-time 60 '%s/stream?n=%d&size=%d' | sha256sum"
                         % (app.url, n, size), shell=True, capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0].decode() == expected_sha256(n, size)


def test_stream_head_has_no_body(app):
    with RawConn(app.port) as c:
        c.send(b"HEAD /stream?n=3&size=4 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response(head_request=True)
        assert r.status == 200
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        r2 = c.read_response()
        assert r2.status == 200 and r2.body == b'{"code": 1, "msg": "Hello WebAPI"}', "HEAD sent a body"


def _vanish(port, reset):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /stream?n=1048576&size=65536 HTTP/1.1\r\nHost: x\r\n\r\n")
    got = 0
    while got < 1 << 20:
        got += len(s.recv(65536))
    if reset:   # RST instead of FIN
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_stream_client_vanishing_mid_stream_leaves_the_app_serving(app, reset):
    before = rss_kib(app.proc.pid)
    for _ in range(10):
        _vanish(app.port, reset)
    r = httpx.get(app.url + "/stream?n=5&size=7", timeout=10)
    assert r.status_code == 200 and r.content == expected(5, 7)
    assert httpx.get(app.url + "/", timeout=10).status_code == 200
    # ten 64 GiB streams were abandoned: none of them may still be producing into memory
    time.sleep(0.5)
    assert_grown_below(before, rss_kib(app.proc.pid), 64 * 1024, "after abandoned streams")


def test_stream_slow_reader_keeps_app_memory_flat(app):
    # A client that reads 1 MiB and then nothing for 2 s: without backpressure, the app
    # would queue the 1 GiB answer as fast as it can make it. Then it reads on and the
    # bytes must still be right.
    n, size = 16384, 65536   # 1 GiB
    s = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    try:
        s.sendall(b"GET /stream?n=%d&size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (n, size))
        buf = b""
        while len(buf) < 1 << 20:
            buf += s.recv(65536)
        before = rss_kib(app.proc.pid)
        peak = before
        for _ in range(20):
            time.sleep(0.1)
            peak = max(peak, rss_kib(app.proc.pid))
        assert_grown_below(before, peak, 48 * 1024, "while the client read nothing")
        # read 16 MiB more, de-chunking, and check the pattern
        body_start = buf.index(b"\r\n\r\n") + 4
        raw = bytearray(buf[body_start:])
        while len(raw) < 17 << 20:
            data = s.recv(1 << 20)
            assert data, "the stream ended early"
            raw += data
        body, pos = bytearray(), 0
        while len(body) < 16 << 20:
            eol = raw.index(b"\r\n", pos)
            chunk = int(raw[pos:eol].split(b";")[0], 16)
            body += raw[eol + 2:eol + 2 + chunk]
            pos = eol + 2 + chunk + 2
        want = expected(len(body) // size + 1, size)[:len(body)]
        assert bytes(body) == want
    finally:
        s.close()
    assert httpx.get(app.url + "/", timeout=10).status_code == 200
