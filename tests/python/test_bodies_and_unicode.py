"""Large bodies, body limits, and non-ASCII text in paths, parameters and headers."""
import http.client
import os

import requests


def _echo_setup(app):
    @app.post("/echo")
    def echo(req):
        from ember import Response

        return Response(req.body, content_type=req.headers.get("content-type", "application/octet-stream"))


def test_10_mb_echo_round_trips_with_a_raised_body_limit(serve, dispatch):
    s = serve(_echo_setup, dispatch=dispatch, max_body_bytes=32 * 1024 * 1024)
    body = os.urandom(10 * 1024 * 1024)
    r = requests.post(s.url + "/echo", data=body, headers={"Content-Type": "application/x-bin"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-bin"
    assert len(r.content) == len(body) and r.content == body


def test_body_over_the_limit_gets_413(serve):
    s = serve(_echo_setup, max_body_bytes=1024)
    assert requests.post(s.url + "/echo", data=b"x" * 1024).status_code == 200
    assert requests.post(s.url + "/echo", data=b"x" * 1025).status_code == 413


def test_body_with_nul_bytes_and_every_byte_value_is_kept(serve):
    s = serve(_echo_setup)
    body = bytes(range(256)) * 4
    assert requests.post(s.url + "/echo", data=body).content == body


def test_unicode_in_path_params_query_and_headers(serve, dispatch):
    seen = {}

    def setup(app):
        @app.get("/städte/{name}")
        def city(req):
            seen.update(name=req.params["name"], path=req.path, q=req.query,
                        h=req.headers["x-stadt"], raw=req.raw_headers)
            return ember_response()

    def ember_response():
        from ember import Response

        return Response("grüße ✓", headers={"X-Reply": "grüße"})

    s = serve(setup, dispatch=dispatch)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    c.putrequest("GET", "/st%C3%A4dte/M%C3%BCnchen%20%E2%9C%93?q=%E6%97%A5%E6%9C%AC&k=%F0%9F%98%80")
    c.putheader("X-Stadt", "Zürich ✓".encode("utf-8"))
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    reply = r.getheader("x-reply")
    c.close()
    assert r.status == 200, body
    assert body.decode("utf-8") == "grüße ✓"
    assert reply.encode("latin-1").decode("utf-8") == "grüße"  # http.client reads Latin-1
    assert seen["name"] == "München ✓"
    assert seen["path"] == "/städte/München ✓"
    assert seen["q"] == {"q": "日本", "k": "😀"}
    assert seen["h"] == "Zürich ✓"


def test_latin1_header_value_that_is_not_utf8_still_reads(serve):
    seen = {}

    def setup(app):
        @app.get("/")
        def h(req):
            seen["v"] = req.headers["x-l1"]
            seen["raw"] = dict(req.raw_headers)[b"x-l1"]
            return ""

    s = serve(setup)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    c.putrequest("GET", "/")
    c.putheader("X-L1", "caf\xe9".encode("latin-1"))
    c.endheaders()
    assert c.getresponse().status == 200
    c.close()
    assert seen == {"v": "café", "raw": b"caf\xe9"}


def test_large_bodies_are_lent_to_the_engine_and_given_back(serve, dispatch):
    import asyncio
    import time

    from ember import response

    big = os.urandom(3 * response.NOCOPY_MIN + 7)

    def setup(app):
        @app.get("/big")
        def sync_big(req):
            return big

        @app.get("/big-async")
        async def async_big(req):
            await asyncio.sleep(0)
            return big

    s = serve(setup, dispatch=dispatch)
    for path in ("/big", "/big-async", "/big"):
        assert requests.get(s.url + path).content == big
    deadline = time.monotonic() + 2
    while response._lent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert response._lent == {}


def test_stop_gives_back_a_lent_body_the_client_never_read():
    import socket

    import ember
    from ember import response

    big = b"x" * (8 * response.NOCOPY_MIN)
    app = ember.Server()
    app.add_route("GET", "/big", lambda req: big)
    port = app.start()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
    s.recv(100)  # the answer has started; the rest stays unread
    assert len(response._lent) == 1  # the engine still reads from Python's bytes object
    app.stop(timeout=0.3)
    s.close()
    assert response._lent == {}
