"""Deferred answers do not hold workers (50 concurrent slow requests), and clients that vanish
mid-request do not hurt the server."""
import http.client
import json
import socket
import struct
import threading
import time

from rawhttp import RawConn, request_bytes

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def test_50_concurrent_slow_requests_finish_together(app):
    n, ms = 50, 300
    # connect everything first so the measurement covers the requests, not 50 TCP handshakes
    conns = [http.client.HTTPConnection("127.0.0.1", app.port, timeout=10) for _ in range(n)]
    for c in conns:
        c.connect()
    results = [None] * n
    barrier = threading.Barrier(n + 1)

    def run(i):
        barrier.wait()
        try:
            conns[i].request("GET", "/slow?ms=%d" % ms)
            resp = conns[i].getresponse()
            results[i] = (resp.status, resp.read())
        except Exception as e:  # recorded, asserted below
            results[i] = ("error", repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join(15)
    wall = time.monotonic() - t0
    for c in conns:
        c.close()
    bad = [r for r in results if r is None or r[0] != 200]
    assert not bad, "%d of %d failed, e.g. %r" % (len(bad), n, bad[:3])
    assert all(json.loads(body) == {"slept_ms": ms} for _, body in results)
    assert wall < 2.5, "50 x /slow?ms=300 took %.2f s: deferred requests seem to hold workers" % wall


def test_client_closing_during_headers_does_not_hurt_server(app):
    for _ in range(5):
        with RawConn(app.port) as c:
            c.send(b"GET /users/1 HTTP/1.1\r\nHost: 127.")
    _assert_serving(app)


def test_client_closing_during_body_does_not_hurt_server(app):
    for _ in range(5):
        with RawConn(app.port) as c:
            c.send(request_bytes("POST", "/echo", [("Content-Length", "100000")], b"x" * 1000))
    _assert_serving(app)


def test_client_resetting_during_body_does_not_hurt_server(app):
    for _ in range(5):
        c = RawConn(app.port)
        c.send(request_bytes("POST", "/echo", [("Content-Length", "100000")], b"x" * 5000))
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()   # RST instead of FIN
    _assert_serving(app)


def test_client_gone_before_deferred_answer_does_not_hurt_server(app):
    for _ in range(5):
        with RawConn(app.port) as c:
            c.send(request_bytes("GET", "/slow?ms=200"))
            time.sleep(0.02)
    time.sleep(0.5)   # let the app's late answers hit the vanished clients
    _assert_serving(app)


def test_client_gone_before_echo_answer_is_written_does_not_hurt_server(app):
    for _ in range(5):
        c = RawConn(app.port)
        body = b"y" * (512 * 1024)
        c.send(request_bytes("POST", "/echo", [("Content-Length", str(len(body)))], body))
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    _assert_serving(app)


def _assert_serving(app):
    time.sleep(0.2)   # let the server finish its side of the vanished connections
    assert app.alive(), "the app died: %s\n%s" % (app.exit_description(), app.output_tail())
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/"))
        r = c.read_response()
    assert r.status == 200 and r.body == HELLO
