"""The ASGI 3 server (ember.asgi) with hand-written apps, through real HTTP clients: the
scope, answers and their headers, HEAD, receive after the answer, and bodies streamed both ways
with backpressure. Failures, concurrency and lifespan are in test_asgi_server.py."""
import asyncio
import http.client
import json
import socket
import time

import pytest
import requests

from asgiutil import send_text



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
    await send_text(send, json.dumps(out).encode())


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
        await send_text(send, b"ok")

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
        await send_text(send, first["body"])
        seen.append((await waiter)["type"])
        seen.append((await receive())["type"])

    url = asgi(app)
    assert requests.post(url + "/", data=b"abc").text == "abc"
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [False, "http.disconnect", "http.disconnect"]


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
        await send_text(send, b"%d %d" % (total, events))

    url = asgi(app, dispatch=dispatch, max_body_bytes=1 << 20)
    data = bytes(range(256)) * (96 * 1024)  # 24 MiB, well over the buffered limit
    total, events = map(int, requests.post(url + "/", data=data).text.split())
    assert total == len(data) and events > 1
    chunks = (data[i:i + 100000] for i in range(0, 3000000, 100000))
    total, events = map(int, requests.put(url + "/", data=chunks).text.split())  # chunked, length unknown
    assert total == 3000000 and events > 1
    assert requests.post(url + "/", data=b"").text == "0 1"
    assert requests.get(url + "/", data=b"q" * (2 << 20)).status_code == 413  # GET stays buffered
