"""The ASGI 3 server (ember.asgi) with hand-written apps, through real HTTP clients: failing
apps, requests waiting without engine threads, a context per request, timeouts, lifespan,
restart, an app stopping its own server, and many threads at once. The scope and bodies are in
test_asgi_http.py."""
import asyncio
import concurrent.futures
import contextvars
import logging
import time

import pytest
import requests

from asgiutil import read_body, send_text
from ember.asgi import ASGIServer, LifespanFailure



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
        await send_text(send, b"fine")

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
        await send_text(send, scope["query_string"])

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
        await send_text(send, b"ok")

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
            await send_text(send, b"in time")
        except TimeoutError:
            await send_text(send, b"timed out", status=504)

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
        await send_text(send, scope["state"]["db"].encode() + b" %d" % len(scope["state"]))

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
        await send_text(send, b"served")

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
        await send_text(send, big if scope["path"] == "/big" else body)

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
        await send_text(send, b"bye")
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
        await send_text(send, b"%s:%s" % (rid.encode(), body))

    url = asgi(app, dispatch=dispatch, workers=workers, pool_threads=4)

    def one(i):
        with requests.Session() as s:
            return s.post("%s/?%d" % (url, i), data=b"b%d" % i).text

    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        texts = list(pool.map(one, range(600)))
    assert texts == ["%d:b%d" % (i, i) for i in range(600)]
