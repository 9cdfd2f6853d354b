"""WebSocket endpoints through the websockets client: the async form (iteration, send
with backpressure, accept/refuse, close codes), the callback form (open/message/close/
writable, refusing, send's False), groups and broadcast, errors, and server stop."""
import asyncio
import threading
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

import ember
from streamutil import wait_for


def url(s, path):
    return "ws://127.0.0.1:%d%s" % (s.port, path)


def test_async_echo_keeps_kind_and_order_and_sees_the_request(serve, dispatch):
    seen = {}

    def setup(app):
        @app.websocket("/echo/{room}")
        async def echo(ws):
            seen["params"] = ws.request.params
            seen["query"] = ws.request.query
            seen["header"] = ws.request.headers.get("x-client")
            assert isinstance(ws, ember.AsyncWebSocket)
            await ws.accept()
            async for message in ws:
                await ws.send(message)
            seen["closed"] = (ws.close_code, ws.close_reason, ws.closed)

    s = serve(setup, dispatch=dispatch)
    with connect(url(s, "/echo/blue?a=1"), additional_headers={"X-Client": "t"}) as c:
        for m in ["hello", b"\x00\xffbin", "ünïcode", b"", "x" * 100_000]:
            c.send(m)
            assert c.recv(timeout=10) == m
        c.close(4001, "bye")
    assert wait_for(lambda: "closed" in seen)
    assert seen == {"params": {"room": "blue"}, "query": {"a": "1"}, "header": "t",
                    "closed": (4001, "bye", True)}


def test_async_handler_returning_closes_1000_and_raising_closes_1011(serve, dispatch):
    def setup(app):
        @app.websocket("/once")
        async def once(ws):
            await ws.send("only one")  # accepts on first use

        @app.websocket("/boom")
        async def boom(ws):
            await ws.receive()
            raise RuntimeError("handler bug")

        @app.websocket("/closer")
        async def closer(ws):
            await ws.accept()
            await ws.close(4003, "done here")
            await ws.wait_closed()

    s = serve(setup, dispatch=dispatch)
    with connect(url(s, "/once")) as c:
        assert c.recv(timeout=10) == "only one"
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=10)
        assert e.value.rcvd.code == 1000
    with connect(url(s, "/boom")) as c:
        c.send("trigger")
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=10)
        assert e.value.rcvd.code == 1011
    with connect(url(s, "/closer")) as c:
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=10)
        assert (e.value.rcvd.code, e.value.rcvd.reason) == (4003, "done here")


def test_async_refusal_subprotocol_and_returning_without_accepting(serve, dispatch):
    def setup(app):
        @app.websocket("/guarded")
        async def guarded(ws):
            if ws.request.headers.get("authorization") != "Bearer ok":
                await ws.refuse(401, "no entry")
                return
            await ws.accept(subprotocol="chat" if "chat" in ws.subprotocols else None)
            await ws.send("in")

        @app.websocket("/silent")
        async def silent(ws):
            return

        @app.websocket("/broken-open")
        async def broken_open(ws):
            raise ValueError("before accepting")

    s = serve(setup, dispatch=dispatch)
    with pytest.raises(InvalidStatus) as e:
        connect(url(s, "/guarded"))
    assert e.value.response.status_code == 401 and e.value.response.body == b"no entry"
    with connect(url(s, "/guarded"), additional_headers={"Authorization": "Bearer ok"},
                 subprotocols=["other", "chat"]) as c:
        assert c.subprotocol == "chat" and c.recv(timeout=10) == "in"
    with pytest.raises(InvalidStatus) as e:
        connect(url(s, "/silent"))
    assert e.value.response.status_code == 403
    with pytest.raises(InvalidStatus) as e:
        connect(url(s, "/broken-open"))
    assert e.value.response.status_code == 500


def test_async_send_waits_for_a_slow_reader_and_loses_nothing(serve, dispatch):
    waited = []

    def setup(app):
        @app.websocket("/firehose")
        async def firehose(ws):
            for i in range(200):
                t = time.monotonic()
                await ws.send(b"%04d" % i + b"." * 65532)
                waited.append(time.monotonic() - t)
            await ws.close()

    s = serve(setup, dispatch=dispatch, ws_queue_bytes=256 * 1024)
    with connect(url(s, "/firehose"), max_size=None, max_queue=4) as c:
        time.sleep(0.5)  # the server's queue fills meanwhile: sends wait
        got = [c.recv(timeout=10) for _ in range(200)]
    assert [m[:4] for m in got] == [b"%04d" % i for i in range(200)]
    assert max(waited) > 0.2  # some send really waited for room


def test_a_peer_flooding_a_handler_that_does_not_read_is_closed_1008(serve, caplog):
    def setup(app):
        app.websocket("/deaf", max_queue=8, handler=deaf)

    async def deaf(ws):
        await ws.accept()
        await ws.wait_closed()

    s = serve(setup)
    with connect(url(s, "/deaf")) as c:
        with pytest.raises(ConnectionClosed) as e:
            for i in range(100):
                c.send("m%d" % i)
                time.sleep(0.005)
            c.recv(timeout=10)
        assert e.value.rcvd.code == 1008


BURST = 640


def test_callback_form_open_message_close_and_writable(serve, dispatch):
    log = []
    backlog = {}

    def on_open(ws):
        log.append(("open", ws.request.path))
        if ws.request.query.get("deny"):
            return False
        ws.accept(subprotocol="v1" if "v1" in ws.subprotocols else None)

    def on_message(ws, message):
        if message == "burst":
            # more than the queue: send says False, on_writable resumes. In pool dispatch
            # the I/O thread drains the queue while this runs, so the burst must also exceed
            # what the kernel takes on loopback (Linux 6.18: tcp_rmem max 32 MiB + wmem 4 MiB;
            # 64 x 64 KiB was all absorbed there and send never refused): 640 x 64 KiB.
            pending = backlog.setdefault(ws.id, [])
            for i in range(BURST):
                if pending or not ws.send(b"%04d" % i + b"#" * 65532):
                    pending.append(b"%04d" % i + b"#" * 65532)
            log.append(("refused", len(pending) > 0))
            return
        ws.send(message)

    def on_writable(ws):
        pending = backlog.get(ws.id, [])
        while pending and ws.send(pending[0]):
            pending.pop(0)

    def on_close(ws, code, reason):
        log.append(("close", code, reason))

    def setup(app):
        app.websocket("/cb", on_open=on_open, on_message=on_message, on_close=on_close,
                      on_writable=on_writable)

    s = serve(setup, dispatch=dispatch, ws_queue_bytes=256 * 1024)
    with pytest.raises(InvalidStatus) as e:
        connect(url(s, "/cb?deny=1"))
    assert e.value.response.status_code == 403
    with connect(url(s, "/cb"), subprotocols=["v1"], max_size=None) as c:
        assert c.subprotocol == "v1"
        c.send("ping")
        assert c.recv(timeout=10) == "ping"
        c.send("burst")
        time.sleep(0.3)
        got = [c.recv(timeout=10)[:4] for _ in range(BURST)]
        assert got == [b"%04d" % i for i in range(BURST)]
        c.close(1000, "finished")
    assert wait_for(lambda: log and log[-1][0] == "close")
    assert ("refused", True) in log
    assert log[-1] == ("close", 1000, "finished")
    assert log.count(("open", "/cb")) == 2


def test_callback_errors_refuse_with_500_or_close_with_1011(serve, caplog):
    def bad_open(ws):
        raise KeyError("open bug")

    def bad_message(ws, message):
        raise KeyError("message bug")

    def setup(app):
        app.websocket("/bad-open", on_open=bad_open, on_message=bad_message)
        app.websocket("/bad-message", on_message=bad_message)

    s = serve(setup)
    with pytest.raises(InvalidStatus) as e:
        connect(url(s, "/bad-open"))
    assert e.value.response.status_code == 500
    with connect(url(s, "/bad-message")) as c:
        c.send("x")
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=10)
        assert e.value.rcvd.code == 1011
    assert "message bug" in caplog.text and "open bug" in caplog.text


def test_groups_and_broadcast(serve, dispatch):
    def setup(app):
        def on_open(ws):
            ws.accept()
            room = ws.request.query.get("room")
            if room:
                ws.join(room)

        def on_message(ws, message):
            if message == "leave":
                ws.leave("red")
                ws.send("left")
                return
            target = "red" if message.startswith("red:") else "/chat"
            app.broadcast(target, message, exclude=ws if message.endswith("!") else None)

        app.websocket("/chat", on_open=on_open, on_message=on_message)

    s = serve(setup, dispatch=dispatch)
    a = connect(url(s, "/chat?room=red"))
    b = connect(url(s, "/chat?room=red"))
    c = connect(url(s, "/chat"))
    try:
        time.sleep(0.1)
        a.send("to all")
        assert [x.recv(timeout=10) for x in (a, b, c)] == ["to all"] * 3
        a.send("red: only")
        assert [x.recv(timeout=10) for x in (a, b)] == ["red: only"] * 2
        with pytest.raises(TimeoutError):
            c.recv(timeout=0.3)
        a.send("others!")
        assert [x.recv(timeout=10) for x in (b, c)] == ["others!"] * 2
        with pytest.raises(TimeoutError):
            a.recv(timeout=0.3)
        b.send("leave")
        assert b.recv(timeout=10) == "left"
        a.send("red: again")
        assert a.recv(timeout=10) == "red: again"
        with pytest.raises(TimeoutError):
            b.recv(timeout=0.3)
        assert s.app.broadcast("/chat", b"from outside") == 3
        assert [x.recv(timeout=10) for x in (a, b, c)] == [b"from outside"] * 3
        assert s.app.broadcast("nobody", "x") == 0
    finally:
        for x in (a, b, c):
            x.close()


def test_misuse_gets_clear_errors(serve):
    seen = {}

    def setup(app):
        @app.websocket("/misuse")
        async def misuse(ws):
            await ws.accept()
            try:
                await ws.accept()
            except ember.EmberError as e:
                seen["twice"] = e.name
            try:
                await ws.send(12)
            except TypeError:
                seen["type"] = True
            try:
                await ws.close(1005)
            except ValueError:
                seen["code"] = True
            message = await ws.receive()
            await ws.send(message)
            await ws.wait_closed()
            try:
                await ws.send("after close")
            except ember.WebSocketClosed as e:
                seen["after"] = e.close_code

    s = serve(setup)
    with connect(url(s, "/misuse")) as c:
        c.send("still fine")
        assert c.recv(timeout=10) == "still fine"
    assert wait_for(lambda: "after" in seen)
    assert seen == {"twice": "EMBER_ERR_ALREADY_ANSWERED", "type": True, "code": True, "after": 1000}
    with pytest.raises(TypeError):
        s.app.websocket("/x", handler=lambda ws: None)  # not a coroutine function
    with pytest.raises(TypeError):
        s.app.websocket("/y")(None)
    # a plain GET to a WebSocket path is the engine's 426
    assert httpx.get(s.url + "/misuse").status_code == 426


def test_stop_closes_connections_with_1001_and_tells_both_forms(serve):
    closes = []
    ended = threading.Event()

    def setup(app):
        app.websocket("/cb", on_message=lambda ws, m: None, on_close=lambda ws, code, r: closes.append(code))

        @app.websocket("/aw")
        async def aw(ws):
            async for _ in ws:
                pass
            closes.append(("async", ws.close_code))
            ended.set()

    app = ember.Server()
    setup(app)
    port = app.start(0)
    c1 = connect("ws://127.0.0.1:%d/cb" % port)
    c2 = connect("ws://127.0.0.1:%d/aw" % port)
    c2.send("hello")
    time.sleep(0.2)
    app.stop(timeout=2)
    for c in (c1, c2):
        with pytest.raises(ConnectionClosed) as e:
            c.recv(timeout=10)
        assert e.value.rcvd is None or e.value.rcvd.code == 1001
        c.close()
    assert 1001 in closes
    assert not app.running


def test_a_thousand_connections_echo(serve):
    def setup(app):
        @app.websocket("/ws")
        async def echo(ws):
            async for m in ws:
                await ws.send(m)

    s = serve(setup)
    from websockets.asyncio.client import connect as aconnect

    async def main():
        sem = asyncio.Semaphore(100)

        async def one(i):
            async with sem:
                return await aconnect(url(s, "/ws"), ping_interval=None, open_timeout=30)
        conns = await asyncio.gather(*(one(i) for i in range(1000)))
        await asyncio.gather(*(c.send("c%d" % i) for i, c in enumerate(conns)))
        got = await asyncio.gather(*(asyncio.wait_for(c.recv(), 30) for c in conns))
        await asyncio.gather(*(c.close() for c in conns))
        return got

    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    assert asyncio.run(main()) == ["c%d" % i for i in range(1000)]


def test_callback_form_misuse_and_raising_close_callbacks_are_logged(serve, caplog):
    seen = {}

    def on_open(ws):
        try:
            ws.send("too early")
        except ember.EmberError as e:
            seen["early"] = str(e)
        ws.accept()
        try:
            ws.accept()
        except ember.EmberError as e:
            seen["twice"] = e.name

    def on_close(ws, code, reason):
        seen["closed"] = code
        raise RuntimeError("close callback bug")

    def setup(app):
        app.websocket("/m", on_open=on_open, on_message=lambda ws, m: ws.send(m), on_close=on_close)

    s = serve(setup)
    with connect(url(s, "/m")) as c:
        c.send("fine")
        assert c.recv(timeout=10) == "fine"
    assert wait_for(lambda: "closed" in seen)
    assert "accept the WebSocket before sending" in seen["early"]
    assert seen["twice"] == "EMBER_ERR_ALREADY_ANSWERED" and seen["closed"] == 1000
    assert wait_for(lambda: "close callback bug" in caplog.text)
    with connect(url(s, "/m")) as c:  # and the endpoint goes on
        c.send("again")
        assert c.recv(timeout=10) == "again"
