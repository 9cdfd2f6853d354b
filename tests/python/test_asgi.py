"""The ASGI 3 server (ember.asgi) with hand-written apps, through real HTTP clients."""
import asyncio
import concurrent.futures
import contextvars
import http.client
import json
import logging
import socket
import time

import pytest
import requests

from ember.asgi import ASGIServer, LifespanFailure


@pytest.fixture
def asgi():
    """asgi(app, **options) -> base URL of a started ASGIServer on a free port."""
    started = []

    def make(app, **options):
        options.setdefault("port", 0)
        server = ASGIServer(app, **options)
        port = server.start()
        started.append(server)
        return "http://127.0.0.1:%d" % port

    yield make
    for server in started:
        server.stop(timeout=2)


async def read_body(receive):
    """The whole request body, however many http.request events it comes in."""
    parts = []
    while True:
        message = await receive()
        assert message["type"] == "http.request", message
        parts.append(message["body"])
        if not message.get("more_body"):
            return b"".join(parts)


async def _text(send, body, status=200, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain")] + list(headers)})
    await send({"type": "http.response.body", "body": body})


async def scope_echo(scope, receive, send):
    if scope["type"] != "http":
        return
    message = await receive()
    out = {k: scope[k] for k in ("type", "http_version", "method", "scheme", "path", "root_path")}
    out.update(raw_path=scope["raw_path"].decode("latin-1"), query_string=scope["query_string"].decode("latin-1"),
               headers=[[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]],
               client=list(scope["client"]), server=list(scope["server"]), asgi=scope["asgi"],
               state=sorted(scope["state"]), body=message["body"].decode("latin-1"),
               more_body=message["more_body"], message_type=message["type"],
               types=[type(scope["raw_path"]).__name__, type(scope["query_string"]).__name__,
                      type(scope["headers"][0][0]).__name__, type(scope["client"][1]).__name__])
    await _text(send, json.dumps(out).encode())


@pytest.mark.parametrize("dispatch", ["auto", "inline", "pool"])
def test_http_scope_has_every_field_of_the_spec(asgi, dispatch):
    url = asgi(scope_echo, dispatch=dispatch)
    port = int(url.rsplit(":", 1)[1])
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.putrequest("POST", "/st%C3%A4dte/a%20b?x=1&y=%20", skip_accept_encoding=True)
    c.putheader("X-Dup", "one")
    c.putheader("X-Dup", "two")
    c.putheader("Content-Length", "5")
    c.endheaders(b"hello")
    r = c.getresponse()
    assert r.status == 200
    got = json.loads(r.read())
    local_port = c.sock.getsockname()[1]
    c.close()
    assert got["type"] == "http" and got["http_version"] == "1.1" and got["method"] == "POST"
    assert got["scheme"] == "http" and got["root_path"] == ""
    assert got["path"] == "/städte/a b"
    assert got["raw_path"] == "/st%C3%A4dte/a%20b"
    assert got["query_string"] == "x=1&y=%20"
    assert ["x-dup", "one"] in got["headers"] and ["x-dup", "two"] in got["headers"]
    assert got["headers"].index(["x-dup", "one"]) < got["headers"].index(["x-dup", "two"])
    assert all(name == name.lower() for name, _ in got["headers"])
    assert got["client"] == ["127.0.0.1", local_port]
    assert got["server"] == ["127.0.0.1", port]
    assert got["asgi"]["version"] == "3.0" and got["asgi"]["spec_version"]
    assert got["body"] == "hello" and got["more_body"] is False and got["message_type"] == "http.request"
    assert got["types"] == ["bytes", "bytes", "bytes", "int"]


def test_the_scope_is_read_from_one_copy_of_the_requests_text(asgi, monkeypatch):
    # The engine ends each text view with a NUL, back to back (ember.h): the server splits
    # one copy of it, with headers of every shape (empty value, obs-text byte, repeated).
    import ember.asgi as asgi_mod

    def view_by_view(f):
        raise AssertionError("the one-copy read was not used")

    monkeypatch.setattr(asgi_mod, "text_parts_slow", view_by_view)
    seen = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        seen.append(scope)
        await _text(send, b"ok")

    url = asgi(app, dispatch="inline")
    port = int(url.rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /a%20b?x=1&y= HTTP/1.1\r\nHost: h\r\nX-E:\r\nX-O: \xe9\r\nX-D: 1\r\nX-D: 2\r\n\r\n"
              b"DELETE /z HTTP/1.1\r\nHost: h\r\n\r\n")
    data = b""
    while data.count(b"HTTP/1.1 200") < 2:
        chunk = s.recv(65536)
        assert chunk
        data += chunk
    s.close()
    a, b = seen
    assert a["method"] == "GET" and a["path"] == "/a b" and a["raw_path"] == b"/a%20b"
    assert a["query_string"] == b"x=1&y="
    assert a["headers"] == [(b"host", b"h"), (b"x-e", b""), (b"x-o", b"\xe9"), (b"x-d", b"1"), (b"x-d", b"2")]
    assert a["client"][0] == "127.0.0.1" and a["client"] == b["client"]
    assert b["method"] == "DELETE" and b["path"] == "/z" and b["query_string"] == b""
    assert b["headers"] == [(b"host", b"h")]


def test_content_type_with_a_stated_length_answers_whole_and_head_keeps_its_length(asgi):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b"0123456789"
        wrong = scope["path"] == "/wrong"
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"Content-Length", b"99" if wrong else b"10"), (b"content-type", b"text/x")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    url = asgi(app)
    r = requests.get(url + "/")
    assert r.status_code == 201 and r.content == b"0123456789"
    assert r.headers["content-type"] == "text/x" and r.headers["content-length"] == "10"
    r = requests.head(url + "/")
    assert r.status_code == 201 and r.headers["content-length"] == "10" and r.content == b""
    # A length that does not match the body goes the long way, where the engine counts
    # the body itself too.
    r = requests.get(url + "/wrong")
    assert r.status_code == 201 and r.headers["content-length"] == "10" and r.content == b"0123456789"


def test_root_path_prefixes_path_and_http_1_0_is_reported(asgi):
    url = asgi(scope_echo, root_path="/mount/")
    port = int(url.rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /x HTTP/1.0\r\nHost: a\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    got = json.loads(data.split(b"\r\n\r\n", 1)[1])
    assert got["root_path"] == "/mount" and got["path"] == "/mount/x" and got["raw_path"] == "/x"
    assert got["http_version"] == "1.0"


def test_response_chunks_headers_and_repeated_set_cookie(asgi):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"x-custom", b"v"),
                                (b"content-length", b"999")]})
        for part in (b"one ", b"two ", bytearray(b"three")):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    url = asgi(app)
    r = requests.get(url + "/")
    assert r.status_code == 201 and r.text == "one two three"
    assert r.headers["x-custom"] == "v"
    assert r.raw.headers.getlist("set-cookie") == ["a=1", "b=2"]
    assert r.headers["content-length"] == str(len("one two three"))  # the engine's own


def test_receive_after_the_response_reports_disconnect(asgi):
    seen = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        first = await receive()
        waiter = asyncio.ensure_future(receive())  # pending until the response is done
        await asyncio.sleep(0.05)
        seen.append(waiter.done())
        await _text(send, first["body"])
        seen.append((await waiter)["type"])
        seen.append((await receive())["type"])

    url = asgi(app)
    assert requests.post(url + "/", data=b"abc").text == "abc"
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [False, "http.disconnect", "http.disconnect"]


@pytest.mark.parametrize("dispatch", ["auto", "inline", "pool"])
def test_failing_apps_answer_500_and_the_server_keeps_serving(asgi, dispatch, caplog):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/raise":
            raise RuntimeError("boom before start")
        if path == "/raise-late":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await asyncio.sleep(0.01)
            raise RuntimeError("boom after start")
        if path == "/nothing":
            return
        if path == "/half":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
            return
        if path == "/inject":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"x-a", b"1\r\nx-b: 2")]})
            await send({"type": "http.response.body", "body": b"no"})
            return
        if path == "/bad-status":
            await send({"type": "http.response.start", "status": "200", "headers": []})
            return
        await _text(send, b"fine")

    url = asgi(app, dispatch=dispatch)
    with caplog.at_level(logging.ERROR, logger="ember"):
        for path in ("/raise", "/raise-late", "/nothing", "/inject", "/bad-status"):
            r = requests.get(url + path)
            assert r.status_code == 500, path
            assert r.text == "Internal Server Error" and "boom" not in r.text
            assert requests.get(url + "/ok").text == "fine"
        # A chunk went out streamed before the app gave up: the answer ends where it stands.
        r = requests.get(url + "/half")
        assert (r.status_code, r.text) == (200, "x")
        assert requests.get(url + "/ok").text == "fine"
    text = caplog.text
    assert "boom before start" in text and "boom after start" in text
    assert "returned without starting response" in text
    assert "returned without completing response" in text
    assert "line break" in text


@pytest.mark.parametrize("dispatch", ["auto", "inline", "pool"])
def test_waiting_requests_do_not_hold_engine_threads(asgi, dispatch):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await asyncio.sleep(0.5)
        await _text(send, scope["query_string"])

    url = asgi(app, dispatch=dispatch, workers=1, pool_threads=2)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(60) as pool:
        texts = list(pool.map(lambda i: requests.get("%s/?%d" % (url, i)).text, range(60)))
    took = time.monotonic() - start
    assert texts == [str(i) for i in range(60)]
    assert took < 4.0, took  # 60 x 0.5 s run side by side, not one after another


def test_each_request_runs_in_a_task_with_its_own_context(asgi):
    var = contextvars.ContextVar("var", default="unset")
    seen = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        task = asyncio.current_task()
        seen.append((var.get(), task is not None))
        var.set(scope["query_string"].decode())
        if scope["path"] == "/wait":
            await asyncio.sleep(0.01)
            seen.append((var.get(), asyncio.current_task() is task))
        await _text(send, b"ok")

    url = asgi(app)
    for q in ("a", "b"):
        requests.get(url + "/?" + q)
    requests.get(url + "/wait?c")
    requests.get(url + "/?d")
    assert seen == [("unset", True), ("unset", True), ("unset", True), ("c", True), ("unset", True)]


def test_asyncio_timeout_cancels_a_request_that_waits_too_long(asgi):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        try:
            async with asyncio.timeout(0.1):
                await asyncio.sleep(5 if scope["path"] == "/slow" else 0)
            await _text(send, b"in time")
        except TimeoutError:
            await _text(send, b"timed out", status=504)

    url = asgi(app)
    assert requests.get(url + "/fast").text == "in time"
    start = time.monotonic()
    r = requests.get(url + "/slow")
    assert (r.status_code, r.text) == (504, "timed out")
    assert time.monotonic() - start < 3


def test_lifespan_startup_state_and_shutdown():
    events = []

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                events.append(message["type"])
                if message["type"] == "lifespan.startup":
                    scope["state"]["db"] = "connected"
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        scope["state"]["scribble"] = True  # a per-request copy
        await _text(send, scope["state"]["db"].encode() + b" %d" % len(scope["state"]))

    server = ASGIServer(app, port=0)
    port = server.start()
    assert events == ["lifespan.startup"]
    assert requests.get("http://127.0.0.1:%d/" % port).text == "connected 2"
    assert requests.get("http://127.0.0.1:%d/" % port).text == "connected 2"
    server.stop()
    assert events == ["lifespan.startup", "lifespan.shutdown"]
    assert server.state == {"db": "connected"}


def test_lifespan_startup_failure_stops_the_server_with_the_apps_message():
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.failed", "message": "database unreachable"})

    server = ASGIServer(app, port=0)
    with pytest.raises(LifespanFailure, match="database unreachable"):
        server.start()
    assert not server.server.running


def test_lifespan_exception_is_a_failure_when_on_and_unsupported_when_auto():
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            raise ValueError("no lifespan here")
        await _text(send, b"served")

    with pytest.raises(LifespanFailure, match="no lifespan here"):
        ASGIServer(app, port=0, lifespan="on").start()
    server = ASGIServer(app, port=0)  # auto
    port = server.start()
    try:
        assert requests.get("http://127.0.0.1:%d/" % port).text == "served"
    finally:
        server.stop()


def test_head_large_bodies_and_restart(asgi):
    big = bytes(range(256)) * 8192  # 2 MiB: lent to the engine, not copied

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        await _text(send, big if scope["path"] == "/big" else body)

    server = ASGIServer(app, port=0)
    for _ in range(2):
        port = server.start()
        url = "http://127.0.0.1:%d" % port
        assert requests.get(url + "/big").content == big
        upload = b"\x00\xff" * 300000
        assert requests.post(url + "/echo", data=upload).content == upload
        r = requests.head(url + "/big")
        assert r.status_code == 200 and r.content == b""
        server.stop()


def test_an_app_may_stop_its_own_server_from_a_request():
    holder = {}

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await _text(send, b"bye")
        holder["server"].server.stop(timeout=1)

    server = ASGIServer(app, port=0, lifespan="off")
    holder["server"] = server
    port = server.start()
    assert requests.get("http://127.0.0.1:%d/" % port).text == "bye"
    assert server.server.wait(5)


@pytest.mark.parametrize("dispatch,workers", [("auto", 2), ("inline", 2), ("pool", 2)])
def test_mixed_fast_and_waiting_requests_from_many_threads_all_get_their_own_answer(asgi, dispatch, workers):
    var = contextvars.ContextVar("request_id", default=None)

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        rid = scope["query_string"].decode()
        assert var.get() is None, "context leaked from another request"
        var.set(rid)
        n = int(rid)
        if n % 3 == 0:
            await asyncio.sleep(0.001 * (n % 7))
        elif n % 3 == 1:
            await asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.001)
        body = await read_body(receive)
        assert var.get() == rid
        await _text(send, b"%s:%s" % (rid.encode(), body))

    url = asgi(app, dispatch=dispatch, workers=workers, pool_threads=4)

    def one(i):
        with requests.Session() as s:
            return s.post("%s/?%d" % (url, i), data=b"b%d" % i).text

    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        texts = list(pool.map(one, range(600)))
    assert texts == ["%d:b%d" % (i, i) for i in range(600)]


def test_more_body_chunks_stream_with_backpressure_and_disconnect_is_reported(asgi):
    import threading
    go_on = threading.Event()
    seen = {}

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/declared":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"6")]})
            await send({"type": "http.response.body", "body": b"abc", "more_body": True})
            await send({"type": "http.response.body", "body": b"def"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        if path == "/big":
            chunk = bytes(range(256)) * 256
            for _ in range(640):  # 40 MiB through a queue of a few hundred KiB
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        if path == "/hold":
            await send({"type": "http.response.body", "body": b"first,", "more_body": True})
            await asyncio.get_running_loop().run_in_executor(None, go_on.wait, 10)
            await send({"type": "http.response.body", "body": b"second"})
            return
        if path == "/forever":
            await send({"type": "http.response.body", "body": b"tick", "more_body": True})
            await receive()  # the body
            seen["disconnect"] = (await asyncio.wait_for(receive(), 10))["type"]
            return

    url = asgi(app)
    with requests.get(url + "/hold", stream=True) as r:
        assert r.headers.get("transfer-encoding") == "chunked"
        parts = r.iter_content(chunk_size=None)
        assert next(parts) == b"first,"
        go_on.set()
        assert b"".join(parts) == b"second"
    r = requests.get(url + "/declared")
    assert r.content == b"abcdef" and r.headers["content-length"] == "6"
    total = 0
    with requests.get(url + "/big", stream=True) as r:
        for i, part in enumerate(r.iter_content(chunk_size=1 << 20)):
            total += len(part)
            if i < 5:
                time.sleep(0.05)
    assert total == 65536 * 640
    port = int(url.rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"tick" in s.recv(4096)
    s.close()
    deadline = time.monotonic() + 10
    while "disconnect" not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen.get("disconnect") == "http.disconnect"


@pytest.mark.parametrize("dispatch", ["auto", "inline", "pool"])
def test_request_bodies_stream_into_receive_beyond_the_buffered_limit(asgi, dispatch):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        total = events = 0
        while True:
            message = await receive()
            total += len(message["body"])
            events += 1
            if not message.get("more_body"):
                break
        await _text(send, b"%d %d" % (total, events))

    url = asgi(app, dispatch=dispatch, max_body_bytes=1 << 20)
    data = bytes(range(256)) * (96 * 1024)  # 24 MiB, well over the buffered limit
    total, events = map(int, requests.post(url + "/", data=data).text.split())
    assert total == len(data) and events > 1
    chunks = (data[i:i + 100000] for i in range(0, 3000000, 100000))
    total, events = map(int, requests.put(url + "/", data=chunks).text.split())  # chunked, length unknown
    assert total == 3000000 and events > 1
    assert requests.post(url + "/", data=b"").text == "0 1"
    assert requests.get(url + "/", data=b"q" * (2 << 20)).status_code == 413  # GET stays buffered
