"""The ASGI server's ``websocket`` scope (ember.asgi) with a hand-written ASGI app, through
the websockets client: scope keys, echo of text and binary, subprotocols and accept
headers, refusal before accept (403) and the denial response, server and client close
codes, many messages in order, app errors, and HTTP on the same path."""
import asyncio
import time

import pytest
import requests
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from ember.asgi import ASGIServer


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


class EchoApp:
    """A raw ASGI app: HTTP answers "http"; on WebSocket, paths pick the behaviour."""

    def __init__(self):
        self.scopes = []
        self.disconnects = []
        self.send_errors = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"http " + scope["path"].encode()})
            return
        assert scope["type"] == "websocket"
        self.scopes.append(scope)
        first = await receive()
        assert first == {"type": "websocket.connect"}, first
        path = scope["path"][len(scope["root_path"]):]
        if path == "/refuse":
            await send({"type": "websocket.close", "code": 1008})
            return
        if path == "/deny":
            await send({"type": "websocket.http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"x-why", b"token")]})
            await send({"type": "websocket.http.response.body", "body": b"no ", "more_body": True})
            await send({"type": "websocket.http.response.body", "body": b"entry"})
            return
        if path == "/ignore":
            return  # returned without accepting: refused with 403
        if path == "/boom":
            raise RuntimeError("before accept")
        offered = scope["subprotocols"]
        await send({"type": "websocket.accept", "subprotocol": "chat" if "chat" in offered else None,
                    "headers": [(b"x-accepted", b"yes")]})
        if path == "/boom-after":
            raise RuntimeError("after accept")
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                self.disconnects.append((message["code"], message.get("reason", "")))
                try:
                    await send({"type": "websocket.send", "text": "too late"})
                except OSError as e:
                    self.send_errors.append(type(e).__name__)
                return
            assert message["type"] == "websocket.receive", message
            if message.get("text") == "close please":
                await send({"type": "websocket.close", "code": 4003, "reason": "asked"})
                continue
            if "text" in message and message["text"] is not None:
                await send({"type": "websocket.send", "text": message["text"]})
            else:
                await send({"type": "websocket.send", "bytes": message["bytes"]})


@pytest.fixture(params=["auto", "inline", "pool"])
def served(request):
    app = EchoApp()
    server = ASGIServer(app, port=0, dispatch=request.param, root_path="/r")
    port = server.start()
    yield app, port
    server.stop(timeout=2)


def test_scope_echo_subprotocol_and_client_close_code(served):
    app, port = served
    with connect("ws://127.0.0.1:%d/echo%%20x?a=1&b=2" % port, subprotocols=["x-other", "chat"],
                 additional_headers={"X-Client": "t"}) as c:
        assert c.subprotocol == "chat"
        assert c.response.headers["x-accepted"] == "yes"
        for m in ["hello", b"\x00\xffbin", "ünïcode", b"", "x" * 100_000]:
            c.send(m)
            assert c.recv(timeout=10) == m
        c.close(4001, "bye")
    assert wait_for(lambda: app.disconnects)
    assert app.disconnects == [(4001, "bye")]
    # send() after the disconnect raises an OSError (spec 2.4), the app catches it.
    assert wait_for(lambda: app.send_errors) and app.send_errors == ["ClientDisconnected"]
    scope = app.scopes[0]
    assert scope["asgi"]["version"] == "3.0" and scope["asgi"]["spec_version"] >= "2.3"
    assert scope["scheme"] == "ws" and scope["http_version"] == "1.1"
    assert scope["path"] == "/r/echo x" and scope["raw_path"] == b"/echo%20x" and scope["root_path"] == "/r"
    assert scope["query_string"] == b"a=1&b=2"
    assert scope["subprotocols"] == ["x-other", "chat"]
    assert (b"x-client", b"t") in scope["headers"] and (b"upgrade", b"websocket") in [
        (k, v.lower()) for k, v in scope["headers"]]
    assert scope["client"][0] == "127.0.0.1" and isinstance(scope["client"][1], int)
    assert scope["server"] == ("127.0.0.1", port)
    assert scope["state"] == {}
    assert "websocket.http.response" in scope["extensions"]


def test_many_messages_keep_their_order(served):
    _, port = served
    with connect("ws://127.0.0.1:%d/many" % port) as c:
        for i in range(2000):
            c.send(str(i) if i % 2 else str(i).encode())
        got = [c.recv(timeout=10) for _ in range(2000)]
    assert got == [str(i) if i % 2 else str(i).encode() for i in range(2000)]


def test_server_close_with_code_and_reason(served):
    app, port = served
    with connect("ws://127.0.0.1:%d/x" % port) as c:
        c.send("close please")
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=5)
    assert e.value.rcvd.code == 4003 and e.value.rcvd.reason == "asked"
    assert wait_for(lambda: app.disconnects) and app.disconnects[0][0] == 4003


@pytest.mark.parametrize("path,status", [("/refuse", 403), ("/ignore", 403), ("/boom", 500)])
def test_refusal_before_accept(served, path, status):
    _, port = served
    with pytest.raises(InvalidStatus) as e:
        connect("ws://127.0.0.1:%d%s" % (port, path), open_timeout=5)
    assert e.value.response.status_code == status


def test_denial_response(served):
    _, port = served
    with pytest.raises(InvalidStatus) as e:
        connect("ws://127.0.0.1:%d/deny" % port, open_timeout=5)
    r = e.value.response
    assert r.status_code == 401 and r.headers["x-why"] == "token" and r.body == b"no entry"


def test_app_error_after_accept_closes_1011_and_server_lives(served):
    _, port = served
    with connect("ws://127.0.0.1:%d/boom-after" % port) as c:
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=5)
    assert e.value.rcvd.code == 1011
    with connect("ws://127.0.0.1:%d/again" % port) as c:
        c.send("still here")
        assert c.recv(timeout=5) == "still here"


def test_http_and_websocket_on_the_same_path(served):
    _, port = served
    r = requests.get("http://127.0.0.1:%d/same" % port, timeout=5)
    assert r.status_code == 200 and r.text == "http /r/same"
    with connect("ws://127.0.0.1:%d/same" % port) as c:
        c.send(b"ws")
        assert c.recv(timeout=5) == b"ws"


def test_lifespan_state_reaches_the_websocket_scope():
    seen = {}

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            await receive()
            scope["state"]["db"] = "ready"
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        seen["state"] = dict(scope["state"])
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": scope["state"]["db"]})
        await send({"type": "websocket.close", "code": 1000})

    server = ASGIServer(app, port=0, lifespan="on")
    port = server.start()
    try:
        with connect("ws://127.0.0.1:%d/" % port) as c:
            assert c.recv(timeout=5) == "ready"
    finally:
        server.stop(timeout=2)
    assert seen["state"] == {"db": "ready"}
