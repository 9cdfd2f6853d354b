"""POST /upload: the body streamed to the app in pieces, answered with its byte count and
SHA-256 (tests/REFERENCE_APP.md). Content-Length and chunked bodies, Expect: 100-continue,
HTTP/2, a 50 MiB upload, the engine's 413 over 4 GiB, clients that leave mid-body."""
import hashlib
import json
import os
import socket
import subprocess
import time

import httpx

from procmem import assert_grown_below, rss_kib
from rawhttp import RawConn


def answer(body):
    return {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def check(r, want):
    assert r.status_code == 200, r.content
    assert r.headers["content-type"].startswith("application/json")
    assert json.loads(r.content) == want


def test_upload_small_body_with_content_length(app):
    body = b"hello, upload\x00\xff" * 3
    check(httpx.post(app.url + "/upload", content=body, timeout=10), answer(body))


def test_upload_empty_body(app):
    check(httpx.post(app.url + "/upload", content=b"", timeout=10), answer(b""))
    # and with no Content-Length at all (a POST without a body)
    with RawConn(app.port) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
    assert r.status == 200 and json.loads(r.body) == answer(b"")


def test_upload_answer_is_exact_json(app):
    r = httpx.post(app.url + "/upload", content=b"abc", timeout=10)
    assert r.content == (b'{"bytes": 3, "sha256": '
                         b'"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}')


def test_upload_all_byte_values_in_odd_sized_chunks(app):
    body = bytes(range(256)) * 1000 + b"tail"
    with RawConn(app.port, timeout=10) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(0, len(body), 7777):
            piece = body[i:i + 7777]
            c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        c.send(b"0\r\n\r\n")
        r = c.read_response(timeout=10)
        assert r.status == 200 and json.loads(r.body) == answer(body)
        # keep-alive after a streamed body
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        r = c.read_response(timeout=10)
        assert json.loads(r.body) == answer(b"ok")


def test_upload_expect_100_continue_is_answered_then_the_body_read(app):
    body = os.urandom(300000)
    with RawConn(app.port, timeout=10) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body))
        interim = c.read_response(timeout=10)
        assert interim.status == 100, interim
        c.send(body)
        r = c.read_response(timeout=10)
    assert r.status == 200 and json.loads(r.body) == answer(body)


def test_upload_expect_100_continue_through_curl(app, tmp_path):
    body = os.urandom(2 << 20)
    f = tmp_path / "body.bin"
    f.write_bytes(body)
    # curl waits for "100 Continue" (up to --expect100-timeout) before sending the body
    out = subprocess.run(["curl", "-sS", "-v", "--max-time", "30", "--expect100-timeout", "20",
                          "-H", "Expect: 100-continue", "-H", "Content-Type: application/octet-stream",
                          "--data-binary", "@%s" % f, app.url + "/upload"],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert b"< HTTP/1.1 100 Continue" in out.stderr
    assert json.loads(out.stdout) == answer(body)


def test_upload_50_mib_chunked_counts_and_hashes_right_with_flat_memory(app):
    # 50 MiB of varied bytes, sent chunked in 256 KiB pieces; the app holds none of it.
    block = os.urandom(1 << 20)
    total, h = 0, hashlib.sha256()
    before = rss_kib(app.proc.pid)
    with RawConn(app.port, timeout=30) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               b"Content-Type: application/octet-stream\r\n\r\n")
        for i in range(50):
            piece = block[i:] + block[:i]   # every MiB differs
            h.update(piece)
            total += len(piece)
            for j in range(0, len(piece), 256 << 10):
                part = piece[j:j + (256 << 10)]
                c.send(b"%x\r\n" % len(part) + part + b"\r\n")
        c.send(b"0\r\n\r\n")
        r = c.read_response(timeout=30)
    after = rss_kib(app.proc.pid)
    assert r.status == 200, r
    assert json.loads(r.body) == {"bytes": total, "sha256": h.hexdigest()}
    assert total == 50 << 20
    assert_grown_below(before, after, 40 * 1024, "for a 50 MiB upload")


def test_upload_through_curl_chunked(app, tmp_path):
    body = os.urandom(3 << 20)
    f = tmp_path / "body.bin"
    f.write_bytes(body)
    out = subprocess.run(["curl", "-sS", "--max-time", "30", "-H", "Transfer-Encoding: chunked",
                          "--data-binary", "@%s" % f, app.url + "/upload"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == answer(body)


def test_upload_over_http2(app):
    body = os.urandom(1 << 20) * 3

    def pieces():
        for i in range(0, len(body), 100000):
            yield body[i:i + 100000]
    with httpx.Client(http1=False, http2=True, timeout=30) as client:
        r = client.post(app.url + "/upload", content=pieces())
        assert r.http_version == "HTTP/2"
        check(r, answer(body))
        r = client.post(app.url + "/upload", content=b"x" * 5)   # with content-length
        check(r, answer(b"x" * 5))


def test_upload_over_4_gib_declared_is_413_before_the_body(app):
    with RawConn(app.port, timeout=10) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4294967297\r\nExpect: 100-continue\r\n\r\n")
        r = c.read_response(timeout=10)
    assert r.status == 413
    # exactly 4 GiB is allowed: the app starts reading, so the client is told to go on
    with RawConn(app.port, timeout=10) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4294967296\r\nExpect: 100-continue\r\n\r\n")
        r = c.read_response(timeout=10)
        assert r.status == 100


def test_upload_is_post_only(app):
    r = httpx.get(app.url + "/upload", timeout=10)
    assert r.status_code == 405
    assert "POST" in r.headers["allow"]


def test_upload_client_vanishing_mid_body_leaves_the_app_serving(app):
    for reset in (False, True, False, True):
        s = socket.create_connection(("127.0.0.1", app.port), timeout=5)
        s.sendall(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n")
        s.sendall(os.urandom(1 << 20))
        time.sleep(0.05)
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    body = b"after the vanishing clients"
    check(httpx.post(app.url + "/upload", content=body, timeout=10), answer(body))


def test_upload_many_at_once(app):
    import concurrent.futures
    bodies = [os.urandom(100000 + k) for k in range(16)]

    def one(body):
        return json.loads(httpx.post(app.url + "/upload", content=body, timeout=30).content)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, bodies))
    assert got == [answer(b) for b in bodies]
