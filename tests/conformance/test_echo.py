"""POST /echo: the request body and its Content-Type come back unchanged."""
import os

import requests

from rawhttp import RawConn, request_bytes


def _echo(app, body, content_type=None, **kw):
    headers = {"Content-Type": content_type} if content_type else {}
    r = requests.post(app.url + "/echo", data=body, headers=headers, timeout=20, **kw)
    assert r.status_code == 200, (r.status_code, r.content[:200])
    return r


def test_echo_returns_text_body_and_its_content_type(app):
    body = "héllo, wörld\nline 2".encode("utf-8")
    r = _echo(app, body, "text/plain; charset=utf-8")
    assert r.content == body
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_echo_returns_all_256_byte_values_unchanged(app):
    body = bytes(range(256)) * 4
    r = _echo(app, body, "application/x-test-binary")
    assert r.content == body
    assert r.headers["Content-Type"] == "application/x-test-binary"


def test_echo_without_content_type_answers_octet_stream(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", "3")], b"abc"))
        r = c.read_response()
    assert r.status == 200
    assert r.body == b"abc"
    assert r.header("content-type") == "application/octet-stream"


def test_echo_empty_body_returns_empty_200(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", "0"), ("Content-Type", "text/plain")]))
        r = c.read_response()
    assert r.status == 200
    assert r.body == b""
    assert r.header("content-length") == "0"
    assert r.header("content-type") == "text/plain"


def test_echo_512_kib_random_body_round_trips(app):
    body = os.urandom(512 * 1024)
    r = _echo(app, body, "application/octet-stream")
    assert len(r.content) == len(body)
    assert r.content == body


def test_echo_body_of_exactly_the_1_mib_limit_is_accepted(app):
    body = os.urandom(1048576)
    r = _echo(app, body, "application/octet-stream")
    assert r.content == body


def test_echo_chunked_request_body_is_reassembled(app):
    parts = [b"first-", b"x" * 70000, b"-last"]
    r = _echo(app, iter(parts), "text/plain")   # a generator makes requests send chunked
    assert r.content == b"".join(parts)


def test_echo_chunked_body_sent_raw_with_extension_and_trailer(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("POST", "/echo", [("Transfer-Encoding", "chunked"),
                                               ("Content-Type", "text/plain")])
               + b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
        r = c.read_response()
    assert r.status == 200
    assert r.body == b"hello world"


def test_echo_expect_100_continue_gets_interim_100_then_echo(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", "5"), ("Content-Type", "text/plain"),
                                               ("Expect", "100-continue")]))
        interim = c.read_response(timeout=3)   # the server must invite the body
        assert interim.status == 100, interim
        c.send(b"hello")
        r = c.read_response()
    assert r.status == 200 and r.body == b"hello"
