"""SIGTERM on each host's reference app: drain, refuse, finish what is in flight, stop, exit 0.

Through real sockets: a slow request is sent, then SIGTERM. While draining the health path
answers 503; once the drain time is over new connections are refused while the process still
lives (it waits for the slow request), and that request still gets its whole answer. With
EMBER_REFUSE_MS (the phase for nginx open source) new connections are refused at once while a
keep-alive connection opened before the signal is still served, its answer closing it."""

import json
import os
import signal
import socket
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from apps import HOSTS, App  # noqa: E402

SLOW_MS = 2000   # under the apps' 3 s handler timeout, with room for a loaded machine
DRAIN_MS = 400


def _read_answer(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_sigterm_drains_finishes_in_flight_refuses_new_and_exits_0(host):
    app = App(host, drain_ms=DRAIN_MS).start()
    try:
        app.wait_healthy()
        slow = socket.create_connection(("127.0.0.1", app.port), timeout=30)
        slow.sendall(f"GET /slow?ms={SLOW_MS} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        # The request must be in the app before the signal: the metrics count it as started.
        time.sleep(0.2)
        app.signal(signal.SIGTERM)

        # Draining: health says 503 (polled: the signal reaches the app asynchronously).
        statuses = []
        while True:
            st = app.health_status()
            statuses.append(st)
            if st != 200:
                break
        assert statuses[-1] == 503, f"{host}: health went {statuses[-5:]} instead of 503"

        # Then the stop: the listener is closed, while the process still waits for /slow.
        refused_while_alive = False
        while app.alive():
            try:
                socket.create_connection(("127.0.0.1", app.port), timeout=5).close()
            except (ConnectionRefusedError, ConnectionResetError):  # a reset: racing the close
                refused_while_alive = app.alive()
                break
            time.sleep(0.02)
        assert refused_while_alive, f"{host}: new connections were still accepted until exit"

        answer = _read_answer(slow)
        slow.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), f"{host}: {answer[:200]!r}"
        assert json.loads(body) == {"slept_ms": SLOW_MS}, f"{host}: {body!r}"
        assert b"connection: close" in head.lower(), f"{host}: a draining answer keeps its connection"
        assert app.wait(60) == 0, f"{host}: exit code"
    finally:
        app.stop()


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_second_signal_cuts_the_drain_short(host):
    # A drain of ten minutes: only the second SIGTERM can end it, so exiting proves it did.
    app = App(host, drain_ms=600000).start()
    try:
        app.wait_healthy()
        app.signal(signal.SIGTERM)
        while app.health_status() == 200:
            pass
        assert app.health_status() == 503
        app.signal(signal.SIGTERM)
        assert app.wait(60) == 0
    finally:
        app.stop()


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_sigterm_with_refuse_refuses_new_serves_open_and_exits_0(host):
    app = App(host, refuse_ms=600000).start()
    try:
        app.wait_healthy()
        kept = socket.create_connection(("127.0.0.1", app.port), timeout=30)
        kept.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        first = kept.recv(65536)
        assert first.startswith(b"HTTP/1.1 200") and b"connection: close" not in first.lower(), first
        slow = socket.create_connection(("127.0.0.1", app.port), timeout=30)
        slow.sendall(f"GET /slow?ms={SLOW_MS} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        time.sleep(0.2)
        app.signal(signal.SIGTERM)
        while True:  # until the signal has reached the app
            try:
                socket.create_connection(("127.0.0.1", app.port), timeout=5).close()
            except (ConnectionRefusedError, ConnectionResetError):
                # A connect racing the listener's close gets a reset instead of a refusal.
                break
            time.sleep(0.02)
        # Refusing, with ten minutes to go: the open connection is still served, then closed.
        kept.sendall(b"GET /users/7 HTTP/1.1\r\nHost: t\r\n\r\n")
        answer = _read_answer(kept)
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"id": "7"}'), answer
        assert b"connection: close" in answer.lower(), answer
        head, _, body = _read_answer(slow).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and json.loads(body) == {"slept_ms": SLOW_MS}, head
        assert app.alive(), f"{host}: the refusing phase ended early"
        app.signal(signal.SIGTERM)  # the second signal ends it
        assert app.wait(60) == 0
    finally:
        app.stop()

