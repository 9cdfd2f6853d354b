"""Graceful stop of the app on SIGTERM / SIGINT, each on a private app instance
(the shared session instance is stopped and checked in conftest.py)."""
import json
import signal
import socket
import threading
import time

import pytest

from appproc import App
from rawhttp import RawConn, request_bytes


@pytest.fixture
def private_app(app):
    other = App(app.cmdline)
    other.start()
    yield other
    other.cleanup()


def test_sigterm_lets_an_in_flight_request_finish_and_exits_0(private_app):
    with RawConn(private_app.port, timeout=10) as c:
        c.send(request_bytes("GET", "/slow?ms=1000"))
        time.sleep(0.3)
        rc = {}
        t = threading.Thread(target=lambda: rc.setdefault("rc", private_app.stop(signal.SIGTERM)))
        t.start()
        r = c.read_response(timeout=8)
        t.join(12)
    assert r.status == 200 and json.loads(r.body) == {"slept_ms": 1000}, r
    assert rc.get("rc") == 0, "after SIGTERM: %s" % private_app.exit_description()


def test_sigterm_with_an_idle_keep_alive_connection_exits_promptly(private_app):
    with RawConn(private_app.port, timeout=5) as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 200
        t0 = time.monotonic()
        rc = private_app.stop(signal.SIGTERM)
        elapsed = time.monotonic() - t0
        closed, _, _ = c.wait_closed(1.0)
    assert rc == 0, "after SIGTERM: %s" % private_app.exit_description()
    assert elapsed < 3.0, "an idle keep-alive connection delayed the stop by %.1f s" % elapsed
    assert closed


def test_sigint_stops_with_exit_code_0(private_app):
    rc = private_app.stop(signal.SIGINT)
    assert rc == 0, "after SIGINT: %s" % private_app.exit_description()


def test_port_is_closed_after_stop(private_app):
    port = private_app.port
    assert private_app.stop(signal.SIGTERM) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
