"""The WSGI (PEP 3333) server (ember.wsgi) with hand-written apps, through real HTTP clients."""
import concurrent.futures
import http.client
import json
import logging
import threading
import time

import pytest
import requests

from ember.wsgi import WSGIServer


@pytest.fixture
def wsgi():
    """wsgi(app, **options) -> base URL of a started WSGIServer on a free port."""
    started = []

    def make(app, **options):
        options.setdefault("port", 0)
        server = WSGIServer(app, **options)
        port = server.start()
        started.append(server)
        return "http://127.0.0.1:%d" % port

    yield make
    for server in started:
        server.stop(timeout=2)


def environ_echo(environ, start_response):
    stream = environ["wsgi.input"]
    first_line = stream.readline()
    rest = stream.read()
    out = {k: v for k, v in environ.items() if isinstance(v, str)}
    out["first_line"] = first_line.decode("latin-1")
    out["rest"] = rest.decode("latin-1")
    out["version"] = list(environ["wsgi.version"])
    out["flags"] = [environ["wsgi.multithread"], environ["wsgi.multiprocess"], environ["wsgi.run_once"],
                    environ["wsgi.input_terminated"]]
    out["has"] = [k for k in ("wsgi.errors", "wsgi.file_wrapper", "wsgi.input") if k in environ]
    environ["wsgi.errors"].write("note from the app\n")
    body = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


def test_environ_is_complete_and_decoded_per_pep_3333(wsgi, caplog):
    url = wsgi(environ_echo, root_path="/app")
    port = int(url.rsplit(":", 1)[1])
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.putrequest("POST", "/app/st%C3%A4dte/a%20b?q=%C3%A4&x", skip_accept_encoding=True)
    c.putheader("Content-Type", "text/plain; charset=utf-8")
    c.putheader("Content-Length", "12")
    c.putheader("X-Dup", "one")
    c.putheader("X-Dup", "two")
    c.putheader("X-Spoof_Me", "dropped")
    c.putheader("Cookie", "a=1")
    c.putheader("Cookie", "b=2")
    with caplog.at_level(logging.ERROR, logger="ember.wsgi"):
        c.endheaders(b"line1\nline2\n")
        r = c.getresponse()
        got = json.loads(r.read())
    local_port = c.sock.getsockname()[1]
    c.close()
    assert r.status == 200
    assert got["REQUEST_METHOD"] == "POST"
    assert got["SCRIPT_NAME"] == "/app"
    assert got["PATH_INFO"] == "/st\u00c3\u00a4dte/a b"  # UTF-8 bytes as latin-1 characters
    assert got["QUERY_STRING"] == "q=%C3%A4&x"
    assert got["RAW_URI"] == got["REQUEST_URI"] == "/app/st%C3%A4dte/a%20b?q=%C3%A4&x"
    assert got["SERVER_NAME"] == "127.0.0.1" and got["SERVER_PORT"] == str(port)
    assert got["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert got["REMOTE_ADDR"] == "127.0.0.1" and got["REMOTE_PORT"] == str(local_port)
    assert got["CONTENT_TYPE"] == "text/plain; charset=utf-8" and got["CONTENT_LENGTH"] == "12"
    assert "HTTP_CONTENT_TYPE" not in got and "HTTP_CONTENT_LENGTH" not in got
    assert got["HTTP_X_DUP"] == "one,two"
    assert got["HTTP_COOKIE"] == "a=1; b=2"
    assert "HTTP_X_SPOOF_ME" not in got
    assert got["HTTP_HOST"] == "127.0.0.1:%d" % port
    assert got["wsgi.url_scheme"] == "http"
    assert got["first_line"] == "line1\n" and got["rest"] == "line2\n"
    assert got["version"] == [1, 0]
    assert got["flags"] == [True, False, False, True]
    assert got["has"] == ["wsgi.errors", "wsgi.file_wrapper", "wsgi.input"]
    assert "note from the app" in caplog.text


def test_non_latin1_header_value_from_the_client_reads_as_latin1(wsgi):
    url = wsgi(environ_echo)
    port = int(url.rsplit(":", 1)[1])
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.putrequest("GET", "/")
    c.putheader("X-Name", "Gr\u00fc\u00dfe".encode("utf-8"))
    c.endheaders()
    got = json.loads(c.getresponse().read())
    assert got["HTTP_X_NAME"].encode("latin-1").decode("utf-8") == "Gr\u00fc\u00dfe"


def test_generators_write_and_close(wsgi):
    closed = []

    class Body:
        def __iter__(self):
            yield b"a"
            yield b""
            yield b"b"

        def close(self):
            closed.append(True)

    def app(environ, start_response):
        write = start_response("202 Accepted", [("X-One", "1"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        write(b"written-")
        return Body()

    url = wsgi(app)
    r = requests.get(url + "/")
    assert (r.status_code, r.text) == (202, "written-ab")
    assert r.raw.headers.getlist("set-cookie") == ["a=1", "b=2"]
    # close() runs after the last chunk is handed to the engine, so the client can hold the
    # whole answer a moment before it: wait for it rather than race it.
    deadline = time.monotonic() + 10
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed == [True]


def test_start_response_may_be_called_late_and_again_with_exc_info(wsgi):
    def app(environ, start_response):
        if environ["PATH_INFO"] == "/late":
            def body():
                start_response("200 OK", [("Content-Type", "text/plain")])
                yield b"late start"
            return body()
        start_response("200 OK", [("X-Old", "1")])
        try:
            raise KeyError("went wrong")
        except KeyError:
            import sys
            start_response("503 Service Unavailable", [("X-New", "1")], sys.exc_info())
        return [b"error page"]

    url = wsgi(app)
    assert requests.get(url + "/late").text == "late start"
    r = requests.get(url + "/err")
    assert (r.status_code, r.text) == (503, "error page")
    assert r.headers.get("x-new") == "1" and "x-old" not in r.headers


@pytest.mark.parametrize("dispatch", ["auto", "pool", "inline"])
def test_failing_apps_answer_500_close_is_still_called_and_the_server_lives(wsgi, dispatch, caplog):
    closed = []

    class Exploding:
        def __iter__(self):
            yield b"partial"
            raise RuntimeError("boom while iterating")

        def close(self):
            closed.append(True)

    def app(environ, start_response):
        path = environ["PATH_INFO"]
        if path == "/raise":
            raise RuntimeError("boom before start")
        if path == "/iter":
            start_response("200 OK", [])
            return Exploding()
        if path == "/twice":
            start_response("200 OK", [])
            start_response("200 OK", [])
        if path == "/never":
            return [b"no start_response"]
        if path == "/inject":
            start_response("200 OK", [("X-A", "1\r\nX-B: 2")])
            return [b"no"]
        if path == "/not-latin1":
            start_response("200 OK", [("X-A", "\u20ac")])
            return [b"no"]
        if path == "/str-body":
            start_response("200 OK", [])
            return ["text, not bytes"]
        if path == "/bad-status":
            start_response("OK", [])
            return [b"no"]
        start_response("200 OK", [])
        return [b"fine"]

    url = wsgi(app, dispatch=dispatch)
    with caplog.at_level(logging.ERROR, logger="ember"):
        for path in ("/raise", "/iter", "/twice", "/never", "/inject", "/not-latin1", "/str-body", "/bad-status"):
            if path == "/iter" and dispatch != "inline":
                continue  # streamed: see test_an_error_while_streaming_ends_the_answer_where_it_stands
            r = requests.get(url + path)
            assert (r.status_code, r.text) == (500, "Internal Server Error"), path
            assert requests.get(url + "/ok").text == "fine"
    assert closed == ([True] if dispatch == "inline" else [])
    assert "boom before start" in caplog.text
    if dispatch == "inline":
        assert "boom while iterating" in caplog.text


def test_an_error_while_streaming_ends_the_answer_where_it_stands(wsgi, caplog):
    closed = []

    class Exploding:
        def __iter__(self):
            yield b"partial"
            raise RuntimeError("boom while streaming")

        def close(self):
            closed.append(True)

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/ok":
            start_response("200 OK", [])
            return [b"fine"]
        start_response("200 OK", [])
        return Exploding()

    url = wsgi(app)
    with caplog.at_level(logging.ERROR, logger="ember"):
        r = requests.get(url + "/iter")
    # The head went out with the first chunk, so a 500 is no longer possible.
    assert r.status_code == 200 and r.text.startswith("partial")
    deadline = time.monotonic() + 5
    while not closed and time.monotonic() < deadline:  # close() runs once the answer has ended
        time.sleep(0.01)
    assert closed == [True]
    assert "boom while streaming" in caplog.text
    assert requests.get(url + "/ok").text == "fine"


def test_iterables_stream_as_they_yield_and_small_declared_lengths_are_kept(wsgi):
    go_on = threading.Event()

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/declared":
            start_response("200 OK", [("Content-Length", "6")])
            return iter([b"abc", b"def"])
        start_response("200 OK", [("Content-Type", "text/plain")])

        def body():
            yield b"first,"
            go_on.wait(10)  # held until the client has seen the first chunk
            yield b"second"
        return body()

    url = wsgi(app)
    with requests.get(url + "/stream", stream=True) as r:
        assert r.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.headers
        parts = r.iter_content(chunk_size=None)
        assert next(parts) == b"first,"
        go_on.set()
        assert b"".join(parts) == b"second"
    r = requests.get(url + "/declared")
    assert r.content == b"abcdef" and r.headers["content-length"] == "6"


def test_a_large_streamed_answer_to_a_slow_reader_arrives_whole(wsgi):
    chunk = bytes(range(256)) * 256  # 64 KiB

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return (chunk for _ in range(320))  # 20 MiB, more than the engine queues

    url = wsgi(app)
    total = 0
    with requests.get(url + "/", stream=True) as r:
        for i, part in enumerate(r.iter_content(chunk_size=1 << 20)):
            total += len(part)
            if i < 5:
                time.sleep(0.05)
    assert total == len(chunk) * 320


def test_pool_routes_ask_the_engine_never_to_run_the_app_inline():
    # The app blocks on its own streamed answer (and body): under the engine's auto
    # dispatch only EMBER_ROUTE_POOL keeps it off its connection's I/O thread.
    from ember import _lib

    pool = WSGIServer(lambda e, s: [], port=0)
    flags = [r.flags for r in pool.server._routes]
    assert flags and all(f & _lib.ROUTE_POOL for f in flags)
    assert any(f & _lib.ROUTE_STREAM_BODY for f in flags)
    inline = WSGIServer(lambda e, s: [], port=0, dispatch="inline")
    assert all(r.flags == 0 for r in inline.server._routes)


def test_file_wrapper_sends_the_whole_file(wsgi, tmp_path):
    data = bytes(range(256)) * 10000
    path = tmp_path / "blob.bin"
    path.write_bytes(data)

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return environ["wsgi.file_wrapper"](open(path, "rb"), 4096)

    url = wsgi(app)
    assert requests.get(url + "/").content == data


def test_blocking_apps_run_side_by_side_on_the_pool_threads(wsgi):
    threads = set()

    def app(environ, start_response):
        threads.add(threading.current_thread().name)
        time.sleep(0.5)
        start_response("200 OK", [])
        return [environ["QUERY_STRING"].encode()]

    url = wsgi(app, pool_threads=8, workers=1)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(lambda i: requests.get("%s/?%d" % (url, i)).text, range(8)))
    took = time.monotonic() - start
    assert texts == [str(i) for i in range(8)]
    assert took < 2.5, took
    assert len(threads) > 1


def test_chunked_upload_is_read_to_the_end_of_input(wsgi):
    def app(environ, start_response):
        stream = environ["wsgi.input"]
        if environ.get("CONTENT_LENGTH"):
            body = stream.read(int(environ["CONTENT_LENGTH"]))
        else:  # chunked: no length, wsgi.input_terminated says read to the end
            assert environ["wsgi.input_terminated"] is True
            body = stream.read()
        start_response("200 OK", [("X-Length", environ.get("CONTENT_LENGTH", "none"))])
        return [body]

    url = wsgi(app)
    parts = [b"x" * 1000, b"y" * 5]
    r = requests.post(url + "/", data=iter(parts))
    assert r.content == b"".join(parts) and r.headers["x-length"] == "none"


@pytest.mark.parametrize("chunked", [False, True])
def test_uploads_larger_than_the_buffered_limit_stream_through_wsgi_input(wsgi, chunked):
    def app(environ, start_response):
        stream = environ["wsgi.input"]
        total = 0
        lines = 0
        while True:
            block = stream.readline(1 << 16)
            if not block:
                break
            total += len(block)
            lines += block.endswith(b"\n")
        start_response("200 OK", [])
        return [b"%d %d" % (total, lines)]

    url = wsgi(app, max_body_bytes=1 << 20)  # buffered routes: 1 MiB; streamed: the stream limit
    line = b"z" * 1023 + b"\n"
    size = 24 << 20
    data = line * (size // len(line))
    body = (data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)) if chunked else data
    assert requests.post(url + "/", data=body).text == "%d %d" % (len(data), size // len(line))
    # GET keeps the buffered route and its limit
    assert requests.get(url + "/", data=b"q" * (2 << 20)).status_code == 413


def test_head_and_large_bodies(wsgi):
    big = b"z" * (3 << 20)

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [big]

    url = wsgi(app)
    assert requests.get(url + "/").content == big
    r = requests.head(url + "/")
    assert r.status_code == 200 and r.content == b""

