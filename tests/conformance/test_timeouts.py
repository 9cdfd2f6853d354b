"""Timeouts: header read (1000 ms -> 408 + close), idle keep-alive (5000 ms), handler (3000 ms -> 503)."""
import time

import requests

from rawhttp import ProtocolError, RawConn, request_bytes

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def test_half_request_line_gets_408_then_close_within_3_s(app):
    with RawConn(app.port, timeout=6) as c:
        t0 = time.monotonic()
        c.send(b"GET /insp")
        r = c.read_response(timeout=5)
        elapsed = time.monotonic() - t0
        assert r.status == 408, r
        assert 0.8 <= elapsed <= 3.0, "408 after %.2f s, header timeout is 1000 ms" % elapsed
        closed, extra, _ = c.wait_closed(2.0)
        assert closed and extra == b"", "connection not closed after 408 (extra %r)" % extra[:100]


def test_headers_trickled_slowly_still_hit_the_header_timeout(app):
    # one byte every 200 ms never lets the head complete in time (slowloris)
    data = request_bytes("GET", "/", [("X-Pad", "p" * 40)])
    with RawConn(app.port, timeout=6) as c:
        t0 = time.monotonic()
        got = None
        for i in range(len(data) - 1):
            try:
                c.send(data[i:i + 1])
            except OSError:
                break
            if time.monotonic() - t0 > 4.0:
                break
            c.sock.settimeout(0.2)
            try:
                chunk = c.sock.recv(65536)
                got = chunk
                break
            except OSError:
                pass
        elapsed = time.monotonic() - t0
    assert got is not None and got.startswith(b"HTTP/1.1 408"), \
        "no 408 while trickling the header for %.1f s (got %r)" % (elapsed, got)
    assert elapsed <= 3.0, elapsed


def test_silent_connection_is_closed_not_held_forever(app):
    # a client that connects and sends nothing must not hold the connection open indefinitely
    # (the header timeout is 1 s, the idle timeout 5 s)
    with RawConn(app.port, timeout=10) as c:
        closed, extra, waited = c.wait_closed(8.0)
    assert closed, "silent connection still open after %.1f s" % waited
    assert extra == b"" or extra.startswith(b"HTTP/1.1 408"), extra[:100]


def test_idle_keep_alive_connection_survives_longer_than_header_timeout(app):
    with RawConn(app.port, timeout=5) as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 200
        time.sleep(2.5)   # > header timeout (1 s), < idle timeout (5 s)
        c.send(request_bytes("GET", "/users/again"))
        r = c.read_response()
        assert r.status == 200 and r.body == b'{"id": "again"}'


def test_idle_keep_alive_connection_is_closed_after_about_5_s(app):
    with RawConn(app.port, timeout=5) as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 200
        closed, extra, waited = c.wait_closed(9.0)
    assert closed, "idle keep-alive connection still open after %.1f s (idle timeout 5 s)" % waited
    assert 4.0 <= waited <= 8.0, "idle connection closed after %.2f s, expected ~5 s" % waited


def test_handler_timeout_answers_503_after_about_3_s_and_late_answer_is_harmless(app):
    t0 = time.monotonic()
    r = requests.get(app.url + "/slow?ms=5000", timeout=10)
    elapsed = time.monotonic() - t0
    assert r.status_code == 503, (r.status_code, r.content)
    assert 2.7 <= elapsed <= 4.5, "503 after %.2f s, handler timeout is 3000 ms" % elapsed
    # the app's late answer (at ~5 s) hits a timed-out request; the server must shrug it off
    time.sleep(max(0.0, 5.6 - (time.monotonic() - t0)))
    ok = requests.get(app.url + "/", timeout=5)
    assert ok.status_code == 200 and ok.content == HELLO


def test_late_answer_after_503_never_reaches_the_next_request_on_the_connection(app):
    with RawConn(app.port, timeout=10) as c:
        c.send(request_bytes("GET", "/slow?ms=4000"))
        assert c.read_response(timeout=8).status == 503
        # at ~4 s the app answers the timed-out request; the request now in flight on the same
        # connection (answered at ~4.5 s) must get its own answer, not the stale one
        c.send(request_bytes("GET", "/slow?ms=1500"))
        r = c.read_response(timeout=8)
    assert r.status == 200 and r.body == b'{"slept_ms": 1500}', r


def test_header_timeout_applies_to_the_next_request_on_a_keep_alive_connection(app):
    with RawConn(app.port, timeout=6) as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 200
        time.sleep(0.3)
        t0 = time.monotonic()
        c.send(b"GET /users/x HTT")
        r = c.read_response(timeout=5)
        elapsed = time.monotonic() - t0
    assert r.status == 408, r
    assert 0.8 <= elapsed <= 3.0, elapsed


def test_header_timeout_applies_to_a_partial_request_pipelined_behind_a_complete_one(app):
    with RawConn(app.port, timeout=8) as c:
        t0 = time.monotonic()
        c.send(request_bytes("GET", "/users/first") + b"GET /users/sec")
        assert c.read_response().body == b'{"id": "first"}'
        try:
            r = c.read_response(timeout=7)
        except ProtocolError:
            r = None
        elapsed = time.monotonic() - t0
    assert r is not None, "connection closed after %.2f s without a 408" % elapsed
    assert r.status == 408, r
    assert elapsed <= 3.0, "408 for the pipelined partial head after %.2f s (header timeout 1 s)" % elapsed


def test_slow_body_upload_is_not_cut_by_the_header_timeout(app):
    # the head arrives at once; the body then takes ~2 s (pauses < idle timeout)
    parts = [b"a" * 1000] * 5
    with RawConn(app.port, timeout=8) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", str(sum(map(len, parts))))]))
        for p in parts:
            time.sleep(0.45)
            c.send(p)
        r = c.read_response()
    assert r.status == 200 and r.body == b"".join(parts), r


def test_body_trickled_below_the_minimum_rate_gets_408_and_close(app):
    # Content-Length 1000, then one byte every 500 ms: 2 bytes/s is far below the engine's
    # minimum body rate (240 bytes/s once the 5 s grace has passed).
    with RawConn(app.port, timeout=12) as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n")
        t0 = time.monotonic()
        answered = None
        while time.monotonic() - t0 < 10.0:
            try:
                c.send(b"a")
            except OSError:
                break
            c.sock.settimeout(0.5)
            try:
                chunk = c.sock.recv(65536)
            except OSError:
                continue
            answered = chunk
            break
        elapsed = time.monotonic() - t0
    assert answered is not None and answered.startswith(b"HTTP/1.1 408"), \
        "no 408 for a trickled body after %.1f s (got %r)" % (elapsed, answered)
    assert b"connection: close" in answered.lower(), answered
    assert 4.5 <= elapsed <= 8.0, "408 after %.1f s; the grace period is 5 s" % elapsed
