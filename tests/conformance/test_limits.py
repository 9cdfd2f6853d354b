"""Configured limits: body 1 MiB -> 413, header block 16 KiB / 100 headers -> 431."""
import socket
import threading
import time

from rawhttp import ProtocolError, RawConn, request_bytes

MAX_BODY = 1048576
HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def test_content_length_over_1_mib_gets_413_before_the_body_is_sent(app):
    with RawConn(app.port, timeout=3) as c:
        t0 = time.monotonic()
        c.send(request_bytes("POST", "/echo", [("Content-Length", str(MAX_BODY + 1)),
                                               ("Content-Type", "application/octet-stream")]))
        r = c.read_response(timeout=3)   # no body byte was sent: the server must not wait for it
        assert r.status == 413, r
        assert time.monotonic() - t0 < 1.5


def test_expect_100_continue_with_oversize_length_gets_413_not_100(app):
    with RawConn(app.port, timeout=3) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", str(50 * MAX_BODY)),
                                               ("Expect", "100-continue")]))
        r = c.read_response(timeout=3)
        assert r.status == 413, "expected 413 instead of %d (interim 100 means the limit " \
                                "was not checked before inviting the body)" % r.status


def test_bytes_after_a_413_head_are_never_answered_as_a_request(app):
    with RawConn(app.port, timeout=3) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", str(MAX_BODY + 100))]))
        assert c.read_response(timeout=3).status == 413
        try:  # these bytes belong to the rejected body; they must not become a request
            c.send(request_bytes("GET", "/users/smuggled"))
        except OSError:
            return  # the server already closed: fine
        closed, extra, _ = c.wait_closed(2.0)
        assert b"HTTP/1." not in extra, "the rejected body was parsed as a request: %r" % extra[:300]


def _send_chunked_body_in_background(conn, total, chunk=65536):
    state = {"sent": 0, "error": None}

    def run():
        try:
            piece = b"z" * chunk
            while state["sent"] < total:
                conn.send(b"%x\r\n" % chunk + piece + b"\r\n")
                state["sent"] += chunk
            conn.send(b"0\r\n\r\n")
        except OSError as e:   # the server may stop reading and close after answering 413
            state["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, state


def test_chunked_body_over_1_mib_gets_413(app):
    with RawConn(app.port, timeout=10) as c:
        c.send(request_bytes("POST", "/echo", [("Transfer-Encoding", "chunked")]))
        t, state = _send_chunked_body_in_background(c, MAX_BODY + 4 * 65536)
        r = c.read_response(timeout=10)
        t.join(10)
    assert r.status == 413, r


def test_chunked_body_under_limit_is_accepted(app):
    total = MAX_BODY - 65536
    with RawConn(app.port, timeout=10) as c:
        c.send(request_bytes("POST", "/echo", [("Transfer-Encoding", "chunked")]))
        t, state = _send_chunked_body_in_background(c, total)
        r = c.read_response(timeout=10)
        t.join(10)
    assert r.status == 200
    assert len(r.body) == total and state["error"] is None


def test_content_length_one_over_limit_with_body_gets_413(app):
    with RawConn(app.port, timeout=10) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", str(MAX_BODY + 1))]))
        t = threading.Thread(target=lambda: _try_send(c, b"q" * (MAX_BODY + 1)), daemon=True)
        t.start()
        r = c.read_response(timeout=10)
        t.join(10)
    assert r.status == 413


def _try_send(conn, data):
    try:
        conn.send(data)
    except OSError:
        pass


def test_header_block_over_16_kib_gets_431(app):
    r = _exchange_tolerant(app, request_bytes("GET", "/", [("X-Big", "a" * 17000)]))
    assert r is not None and r.status == 431, r


def test_many_headers_totalling_over_16_kib_get_431(app):
    headers = [("X-Fill-%02d" % i, "b" * 400) for i in range(50)]   # ~21 KiB in 51 headers
    r = _exchange_tolerant(app, request_bytes("GET", "/", headers))
    assert r is not None and r.status == 431, r


def test_header_block_of_8_kib_is_accepted(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/", [("X-Big", "a" * 8000)]))
        r = c.read_response()
    assert r.status == 200 and r.body == HELLO


def test_101_header_fields_get_431(app):
    headers = [("X-H%03d" % i, "v") for i in range(100)]   # + Host = 101 fields
    r = _exchange_tolerant(app, request_bytes("GET", "/", headers))
    assert r is not None and r.status == 431, r


def test_100_header_fields_are_accepted(app):
    headers = [("X-H%03d" % i, "v") for i in range(99)]    # + Host = 100 fields
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/inspect", headers))
        r = c.read_response()
    assert r.status == 200
    assert r.body.count(b'"x-h') == 99


def test_server_serves_normally_after_limit_rejections(app):
    _exchange_tolerant(app, request_bytes("GET", "/", [("X-Big", "a" * 40000)]))
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().body == HELLO


def _exchange_tolerant(app, data):
    """Send a (large) request; the server may answer and close before reading all of it."""
    with RawConn(app.port, timeout=5) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            return c.read_response(timeout=5)
        except (socket.timeout, ConnectionResetError, ProtocolError):
            return None
