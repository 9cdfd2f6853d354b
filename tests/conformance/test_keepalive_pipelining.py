"""Persistent connections: several requests on one socket, and pipelined requests."""
import http.client
import json
import time

from rawhttp import RawConn, request_bytes


def test_keep_alive_serves_several_requests_on_the_same_socket(app):
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=5)
    try:
        seen_addrs = set()
        sock = None
        for i in range(6):
            conn.request("GET", "/inspect?i=%d" % i)
            resp = conn.getresponse()
            assert resp.status == 200
            data = json.loads(resp.read())
            assert data["query"] == "i=%d" % i
            seen_addrs.add(data["remote_addr"])
            if sock is None:
                sock = conn.sock
            assert conn.sock is sock, "http.client had to reconnect: server closed the connection"
            assert not resp.will_close
        # the server saw one and the same client address/port for every request
        assert seen_addrs == {"127.0.0.1:%d" % sock.getsockname()[1]}
    finally:
        conn.close()


def test_keep_alive_mixes_methods_and_bodies_on_one_connection(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("POST", "/echo", [("Content-Length", "5")], b"hello"))
        assert c.read_response().body == b"hello"
        c.send(request_bytes("GET", "/users/9"))
        assert c.read_response().body == b'{"id": "9"}'
        c.send(request_bytes("HEAD", "/"))
        assert c.read_response(head_request=True).status == 200
        c.send(request_bytes("GET", "/nope"))
        assert c.read_response().status == 404
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 200


def test_three_pipelined_requests_in_one_write_get_three_ordered_responses(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/users/1") + request_bytes("GET", "/users/2")
               + request_bytes("GET", "/users/3"))
        bodies = [c.read_response().body for _ in range(3)]
    assert bodies == [b'{"id": "1"}', b'{"id": "2"}', b'{"id": "3"}']


def test_pipelined_responses_keep_request_order_behind_a_slow_request(app):
    with RawConn(app.port) as c:
        t0 = time.monotonic()
        c.send(request_bytes("GET", "/slow?ms=300") + request_bytes("GET", "/users/fast")
               + request_bytes("POST", "/echo", [("Content-Length", "4")], b"last"))
        r1, r2, r3 = (c.read_response() for _ in range(3))
        assert time.monotonic() - t0 >= 0.29
    assert json.loads(r1.body) == {"slept_ms": 300}
    assert r2.body == b'{"id": "fast"}'
    assert r3.body == b"last"


def test_connection_close_request_header_closes_after_response(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/", [("Connection", "close")]))
        r = c.read_response()
        assert r.status == 200
        closed, extra, _ = c.wait_closed(3.0)
        assert closed and extra == b""
