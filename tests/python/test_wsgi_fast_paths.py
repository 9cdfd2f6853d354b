"""The WSGI server's short ways (ember.wsgi): header keys remembered per set of names, and
the small answer (Content-Type and the body's own Content-Length in one engine call), each
checked against what the long way gives, through real HTTP clients."""
import http.client
import json

import pytest
import requests

from ember.wsgi import WSGIServer


@pytest.fixture
def wsgi():
    started = []

    def make(app, **options):
        server = WSGIServer(app, port=0, **options)
        port = server.start()
        started.append(server)
        return port

    yield make
    for server in started:
        server.stop(timeout=2)


def headers_echo(environ, start_response):
    out = {k: v for k, v in environ.items() if k.startswith(("HTTP_", "CONTENT_"))}
    body = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def get(c, headers):
    c.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
    for name, value in headers:
        c.putheader(name, value)
    c.endheaders()
    r = c.getresponse()
    return json.loads(r.read())


def test_the_same_header_names_again_give_each_request_its_own_values(wsgi):
    port = wsgi(headers_echo)
    c = http.client.HTTPConnection("127.0.0.1", port)
    names = ["Host", "X-A", "Content-Type"]
    for i in range(3):  # the first request learns the keys, the next ones reuse them
        got = get(c, [(n, f"{n}-{i}") for n in names])
        assert got == {"HTTP_HOST": "Host-%d" % i, "HTTP_X_A": "X-A-%d" % i, "CONTENT_TYPE": "Content-Type-%d" % i}
    # Same names in another case are another set, with the same keys.
    assert get(c, [("host", "h"), ("x-a", "1"), ("content-type", "t")]) == {
        "HTTP_HOST": "h", "HTTP_X_A": "1", "CONTENT_TYPE": "t"}
    # Names that share a key, or carry "_", take the long way, every time.
    for _ in range(2):
        assert get(c, [("Host", "h"), ("X-A", "1"), ("x-a", "2"), ("X_A", "no")]) == {
            "HTTP_HOST": "h", "HTTP_X_A": "1,2"}
        assert get(c, [("Host", "h"), ("Cookie", "a=1"), ("Cookie", "b=2")]) == {
            "HTTP_HOST": "h", "HTTP_COOKIE": "a=1; b=2"}
    c.close()


@pytest.mark.parametrize("dispatch", ["pool", "inline"])
def test_a_content_type_with_the_bodys_length_answers_as_the_long_way_does(wsgi, dispatch):
    def app(environ, start_response):
        body = b"0123456789"
        path = environ["PATH_INFO"]
        if path == "/type-only":
            headers = [("content-type", "text/x")]
        elif path == "/wrong":  # a stated length that is not the body's
            headers = [("Content-Type", "text/x"), ("Content-Length", "99")]
        elif path == "/bad":  # a type the engine refuses: the long way reports it
            headers = [("Content-Type", "text/x\x01")]
        elif path == "/three":
            headers = [("Content-Type", "text/x"), ("Content-Length", "10"), ("X-More", "1")]
        else:
            headers = [("Content-Length", "10"), ("Content-Type", "text/x")]
        start_response("201 Created", headers)
        return [b"" if environ["REQUEST_METHOD"] == "HEAD" else body]

    url = "http://127.0.0.1:%d" % wsgi(app, dispatch=dispatch)
    for path in ("/", "/type-only", "/wrong", "/three"):
        r = requests.get(url + path)
        assert r.status_code == 201 and r.content == b"0123456789", path
        assert r.headers["content-type"] == "text/x" and r.headers["content-length"] == "10", path
    assert requests.get(url + "/three").headers["x-more"] == "1"
    r = requests.head(url + "/")
    assert r.status_code == 201 and r.headers["content-length"] == "10" and r.content == b""
    r = requests.get(url + "/bad")
    assert r.status_code == 500
