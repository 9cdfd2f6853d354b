"""Behind a load balancer: health path, drain, trusted proxies, through a real client."""
import json
import socket

import pytest

import ember


def _raw(port, head):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def _app(**options):
    app = ember.Server(**options)

    @app.get("/who")
    def who(req):
        return {"remote_addr": req.remote_addr}

    return app


def test_health_path_answers_200_then_503_while_draining_and_answers_close():
    app = _app(health_path="/healthz")
    port = app.start()
    try:
        ok = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200"), ok[:80]
        assert json.loads(ok.split(b"\r\n\r\n", 1)[1]) == {"status": "ok"}
        app.drain()
        app.drain()  # idempotent
        draining = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert draining.startswith(b"HTTP/1.1 503"), draining[:80]
        # Still served, but the keep-alive connection is closed after the answer.
        served = _raw(port, b"GET /who HTTP/1.1\r\nHost: t\r\n\r\n")
        assert served.startswith(b"HTTP/1.1 200"), served[:80]
        assert b"connection: close" in served.lower()
    finally:
        app.stop()


def test_drain_needs_a_running_server_and_health_path_is_checked():
    with pytest.raises(RuntimeError):
        _app().drain()
    with pytest.raises(ValueError):
        ember.Server(health_path="healthz")
    with pytest.raises(ember.EmberError):
        _app(trusted_proxies=["not-a-cidr"]).start()


def test_forwarded_for_is_believed_only_from_a_trusted_proxy():
    head = b"GET /who HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 203.0.113.7\r\nConnection: close\r\n\r\n"
    for trusted, want in ((["127.0.0.1"], "203.0.113.7"), (["10.0.0.0/8"], "127.0.0.1")):
        app = _app(trusted_proxies=trusted)
        port = app.start()
        try:
            body = json.loads(_raw(port, head).split(b"\r\n\r\n", 1)[1])
            assert body["remote_addr"].rsplit(":", 1)[0] == want, (trusted, body)
        finally:
            app.stop()


def test_stop_accepting_refuses_new_connections_and_serves_open_ones():
    app = _app(health_path="/healthz")
    port = app.start()
    try:
        kept = socket.create_connection(("127.0.0.1", port), timeout=5)
        kept.sendall(b"GET /who HTTP/1.1\r\nHost: t\r\n\r\n")
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")
        app.stop_accepting()
        app.stop_accepting()  # idempotent
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        # The open connection is still served, and closed after its answer (draining).
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        out = b""
        while True:
            chunk = kept.recv(65536)
            if not chunk:
                break
            out += chunk
        assert out.startswith(b"HTTP/1.1 503") and b"connection: close" in out.lower(), out[:200]
    finally:
        app.stop()
    with pytest.raises(RuntimeError):
        app.stop_accepting()
