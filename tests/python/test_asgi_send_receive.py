"""ASGI receive() and send() as apps use them beyond the plain ``await``, on whichever
crossing runs (the C crossing answers the common case in ``_speedups_asgi.c``, the ctypes
path in Python): the awaitables they return as tasks and under ``wait_for``, a header
value the engine refuses, a body sent twice, a bytearray body, status checks."""
import asyncio

import requests

from ember import _asgi_http, _crossing


def test_the_c_crossing_uses_the_c_cycle():
    if _crossing.speedups is not None:
        assert _asgi_http.FastCycle.__name__ == "_CHTTPCycle"
    else:
        assert _asgi_http.FastCycle is _asgi_http._HTTPCycle


def test_send_and_receive_awaitables_run_as_tasks_and_under_wait_for(asgi):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        message = await asyncio.wait_for(receive(), 5)
        assert message == {"type": "http.request", "body": b"", "more_body": False}
        start = send({"type": "http.response.start", "status": 202,
                      "headers": [(b"content-type", b"text/plain")]})
        assert asyncio.iscoroutine(start)
        await asyncio.create_task(start)
        await asyncio.gather(send({"type": "http.response.body", "body": b"via task"}))

    r = requests.get(asgi(app) + "/t")
    assert r.status_code == 202 and r.content == b"via task" and r.headers["content-type"] == "text/plain"


def test_a_line_break_in_the_content_type_is_a_500_and_misuse_raises(asgi):
    seen = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        if scope["path"] == "/break":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain\r\nx-forged: 1")]})
            await send({"type": "http.response.body", "body": b"no"})
            return
        try:
            await send({"type": "http.response.body", "body": b"too early"})
        except RuntimeError as e:
            seen.append(str(e))
        try:
            await send({"type": "http.response.start", "status": "200"})
        except TypeError as e:
            seen.append(str(e))
        await send({"type": "http.response.start", "status": 200, "headers": [[b"Content-Type", b"a/b"]]})
        await send({"type": "http.response.body", "body": bytearray(b"array"), "more_body": 0})
        try:
            await send({"type": "http.response.body", "body": b"twice"})
        except RuntimeError as e:
            seen.append(str(e))

    url = asgi(app)
    r = requests.get(url + "/break")
    assert r.status_code == 500 and "x-forged" not in r.headers
    r = requests.get(url + "/ok")
    assert r.status_code == 200 and r.content == b"array" and r.headers["content-type"] == "a/b"
    assert len(seen) == 3 and "http.response.start" in seen[0] and "status" in seen[1]
    assert "already completed" in seen[2]
