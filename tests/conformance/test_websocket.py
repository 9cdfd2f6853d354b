"""GET /ws (echo) and GET /ws/chat (broadcast) through the `websockets` client library
(tests/REFERENCE_APP.md): echo of text and binary up to the 1 MiB message limit, fragmented
messages, close handshakes, 1009 over the limit, the HTTP side of the upgrade, a chat among
several clients, a burst to a client that reads late, and 1,000 connections at once. Frame-level
cases (bad frames, pings between fragments, invalid UTF-8) are in test_ws_autobahn.py."""
import asyncio
import os
import socket
import threading
import time

import httpx
import pytest
from websockets.asyncio.client import connect as aconnect
from websockets.exceptions import ConnectionClosed, InvalidMessage
from websockets.sync.client import connect

from rawws import BINARY, RawWs

MAX_MESSAGE = 1 << 20   # the engine's default EMBER_LIMIT_WS_MAX_MESSAGE_BYTES


def ws_url(app, path="/ws"):
    return "ws://127.0.0.1:%d%s" % (app.port, path)


def client(app, path="/ws", **kw):
    kw.setdefault("max_size", None)
    kw.setdefault("compression", None)
    kw.setdefault("open_timeout", 10)
    kw.setdefault("close_timeout", 10)
    return connect(ws_url(app, path), **kw)


@pytest.mark.parametrize("message", ["hello", "", "héllo wörld ✓ 🎉", "x" * 125, "y" * 126, "z" * 65536,
                                     "\u0000 nul inside"], ids=["ascii", "empty", "unicode", "125", "126",
                                                                 "64k", "nul"])
def test_ws_echo_text(app, message):
    with client(app) as ws:
        ws.send(message)
        got = ws.recv(timeout=10)
    assert isinstance(got, str) and got == message


@pytest.mark.parametrize("message", [b"", bytes(range(256)) * 4, os.urandom(70000)], ids=["empty", "bytes", "70k"])
def test_ws_echo_binary(app, message):
    with client(app) as ws:
        ws.send(message)
        got = ws.recv(timeout=10)
    assert isinstance(got, bytes) and got == message


def test_ws_echo_keeps_order_and_kind_over_many_messages(app):
    sent = [("t%d" % i) if i % 3 else os.urandom(i) for i in range(200)]
    with client(app) as ws:
        for m in sent:
            ws.send(m)
        got = [ws.recv(timeout=10) for _ in sent]
    assert got == sent


def test_ws_echo_with_the_clients_default_offer_of_compression(app):
    # Browsers and this library offer permessage-deflate; the app accepts without extensions.
    with connect(ws_url(app), open_timeout=10) as ws:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        assert ws.subprotocol is None
        ws.send("plain, please")
        assert ws.recv(timeout=10) == "plain, please"


def test_ws_echo_of_exactly_the_message_limit(app):
    text, data = "é" * (MAX_MESSAGE // 2), os.urandom(MAX_MESSAGE)
    with client(app) as ws:
        ws.send(text)
        assert ws.recv(timeout=20) == text
        ws.send(data)
        assert ws.recv(timeout=20) == data


def test_ws_fragmented_messages_are_reassembled(app):
    with client(app) as ws:
        ws.send(["frag", "men", "ted ✓"])
        assert ws.recv(timeout=10) == "fragmented ✓"
        ws.send([b"\x00\x01", b"", b"\x02" * 70000])
        assert ws.recv(timeout=10) == b"\x00\x01" + b"\x02" * 70000


def closed_by_server_with(ws, message):
    """Sends `message`, expects the server to close the connection; returns its close code."""
    closed = None
    try:
        try:
            ws.send(message)
        except ConnectionClosed as sending:
            # The server may close before the last fragment is out (it counts as it reads).
            closed = sending
        if closed is None:
            with pytest.raises(ConnectionClosed) as e:
                ws.recv(timeout=10)
            closed = e.value
    finally:
        try:
            ws.close()
        except ConnectionClosed:
            pass
    assert closed.rcvd is not None, "no close frame from the server: %r" % closed
    return closed.rcvd.code


def test_ws_fragmented_message_over_the_limit_is_closed_1009(app):
    ws = client(app)
    assert closed_by_server_with(ws, [b"a" * (MAX_MESSAGE // 2 + 1), b"b" * (MAX_MESSAGE // 2 + 1)]) == 1009


@pytest.mark.parametrize("kind", ["text", "binary"])
def test_ws_message_over_the_limit_is_closed_1009(app, kind):
    message = "a" * (MAX_MESSAGE + 1) if kind == "text" else b"a" * (MAX_MESSAGE + 1)
    assert closed_by_server_with(client(app), message) == 1009
    with client(app) as ws:   # the app goes on
        ws.send("next")
        assert ws.recv(timeout=10) == "next"


@pytest.mark.parametrize("code,reason", [(1000, ""), (1000, "bye"), (1001, "leaving"), (4000, "app code")])
def test_ws_close_handshake_started_by_the_client(app, code, reason):
    with client(app) as ws:
        ws.send("before close")
        assert ws.recv(timeout=10) == "before close"
        ws.close(code, reason)
    # the server answered with a close frame echoing the code (RFC 6455 §5.5.1)
    assert ws.protocol.close_rcvd is not None, "no close frame from the server"
    assert ws.protocol.close_rcvd.code == code
    assert ws.protocol.close_rcvd_then_sent is False   # we sent first, the server answered


def test_ws_ping_from_the_client_is_answered(app):
    with client(app) as ws:
        for payload in (b"", b"p1", bytes(125)):
            waiter = ws.ping(payload)
            assert waiter.wait(10), "no pong for %r" % payload
        ws.send("still echoing")
        assert ws.recv(timeout=10) == "still echoing"


def test_ws_plain_get_is_426_with_upgrade_header(app):
    r = httpx.get(app.url + "/ws", timeout=10)
    assert r.status_code == 426
    assert r.headers.get("upgrade", "").lower() == "websocket"
    r = httpx.get(app.url + "/ws/chat", timeout=10)
    assert r.status_code == 426


@pytest.mark.parametrize("headers,status", [
    ({"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}, 400),   # no key
    ({"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "8",
      "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 426),
    ({"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
      "Sec-WebSocket-Key": "short"}, 400),
], ids=["no-key", "version-8", "bad-key"])
def test_ws_bad_upgrade_requests_are_refused(app, headers, status):
    r = httpx.get(app.url + "/ws", headers=headers, timeout=10)
    assert r.status_code == status
    if status == 426:
        assert r.headers.get("sec-websocket-version") == "13" or r.status_code == 426


def test_ws_post_upgrade_is_not_a_websocket(app):
    r = httpx.post(app.url + "/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                             "Sec-WebSocket-Version": "13",
                                             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, timeout=10)
    assert r.status_code in (400, 405)


def test_ws_burst_to_a_client_that_reads_late_loses_nothing(app):
    # The client's receive buffer is small and it reads nothing until the whole 3 MiB burst
    # is sent: the echo meets backpressure (a full send queue) and must still deliver every
    # message, in order.
    messages = [os.urandom(96 * 1024) for _ in range(32)]
    ws = RawWs(app.port, "/ws", timeout=20, rcvbuf=16384)
    errors = []

    def burst():
        try:
            for m in messages:
                ws.send_frame(BINARY, m)
        except OSError as e:
            errors.append(e)
    t = threading.Thread(target=burst)
    t.start()
    time.sleep(1.0)
    got = [ws.recv_message() for _ in messages]
    t.join(20)
    ws.close()
    assert not errors
    assert [op for op, _ in got] == [BINARY] * len(messages)
    assert [p for _, p in got] == messages


def test_ws_chat_broadcasts_to_every_client_sender_included(app):
    clients = [client(app, "/ws/chat") for _ in range(5)]
    try:
        time.sleep(0.2)   # all five joined before the first message
        for i, ws in enumerate(clients):
            ws.send("from %d" % i)
            ws.send(b"bin %d" % i)
        for ws in clients:
            got = [ws.recv(timeout=10) for _ in range(10)]
            # each sender's messages arrive in the order sent, each with its kind
            for i in range(5):
                mine = [m for m in got if m in ("from %d" % i, b"bin %d" % i)]
                assert mine == ["from %d" % i, b"bin %d" % i], got
    finally:
        for ws in clients:
            ws.close()


def test_ws_chat_goes_on_after_clients_leave_abruptly(app):
    stay = client(app, "/ws/chat")
    leaving = [client(app, "/ws/chat") for _ in range(3)]
    time.sleep(0.2)
    for ws in leaving:
        ws.socket.shutdown(socket.SHUT_RDWR)   # gone without a close frame
        ws.socket.close()
    time.sleep(0.2)
    for i in range(20):
        stay.send("after %d" % i)
    got = [stay.recv(timeout=10) for _ in range(20)]
    stay.close()
    assert got == ["after %d" % i for i in range(20)]


def test_ws_chat_is_separate_from_echo(app):
    with client(app, "/ws/chat") as chat, client(app, "/ws") as echo:
        time.sleep(0.1)
        echo.send("echo only")
        assert echo.recv(timeout=10) == "echo only"
        chat.send("chat only")
        assert chat.recv(timeout=10) == "chat only"
        with pytest.raises(TimeoutError):
            echo.recv(timeout=0.3)


# scripts/windows.sh lowers this under Wine, whose socket emulation stalls the app's
# connections past a few hundred (seen with Wine 8.0: 600 opened, 197 echoed); everywhere
# else the suite runs with 1,000.
WS_CONNECTIONS = int(os.environ.get("EMBER_CONFORMANCE_WS_CONNECTIONS", "1000"))


def test_ws_1000_connections_echo_then_close(app):
    # 1,000 connections open at once, an echo on every one, then all closed cleanly.
    # (conftest.py raised the open-files limit for this process and the app.)
    count = WS_CONNECTIONS

    async def main():
        # At most 50 handshakes in flight: the point is 1,000 open at once, not a burst of
        # handshakes against the app's 1 s header timeout on a loaded machine.
        sem = asyncio.Semaphore(50)

        retried = []

        async def open_one(i):
            # A handshake the app closed unanswered is its 1 s header timeout at work when this
            # client's loop, busy with hundreds of sockets, sends the request late (seen under
            # ASan in CI: 17 of 1,000). That is the limit doing its job, not the subject here:
            # such an open is tried again, twice at most, and the count is printed.
            for attempt in range(3):
                async with sem:
                    try:
                        return await aconnect(ws_url(app), compression=None, open_timeout=30, close_timeout=30,
                                              ping_interval=None, max_size=None)
                    except InvalidMessage:
                        if attempt == 2:
                            raise
                        retried.append(i)
        def failures(results, step):
            bad = [(i, repr(r)) for i, r in enumerate(results) if isinstance(r, BaseException)]
            assert not bad, "%s: %d of %d failed, e.g. %s" % (step, len(bad), count, bad[:3])

        conns = await asyncio.gather(*(open_one(i) for i in range(count)), return_exceptions=True)
        failures(conns, "open")
        if retried:
            print("handshakes tried again after the header timeout: %d" % len(retried))
        failures(await asyncio.gather(*(ws.send("conn %d" % i) for i, ws in enumerate(conns)),
                                      return_exceptions=True), "send")
        got = await asyncio.gather(*(asyncio.wait_for(ws.recv(), 30) for ws in conns), return_exceptions=True)
        failures(got, "echo")
        assert got == ["conn %d" % i for i in range(count)]
        failures(await asyncio.gather(*(ws.close() for ws in conns), return_exceptions=True), "close")
        return [ws.close_code for ws in conns]

    codes = asyncio.run(main())
    assert codes == [1000] * count
    with client(app) as ws:   # and the app goes on
        ws.send("after 1000")
        assert ws.recv(timeout=10) == "after 1000"
