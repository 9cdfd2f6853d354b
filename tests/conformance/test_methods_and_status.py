"""HEAD, unknown paths (404), wrong methods (405 + Allow) and HTTP/1.0 requests."""
import requests

from rawhttp import RawConn, exchange, request_bytes

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def _allow_set(resp):
    allow = resp.header("allow")
    assert allow is not None, "405 without an Allow header: %r" % resp
    return {m.strip().upper() for m in allow.split(",") if m.strip()}


def test_head_root_has_get_headers_and_no_body(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("HEAD", "/"))
        r = c.read_response(head_request=True)
        assert r.status == 200
        assert r.header("content-length") == str(len(HELLO))
        assert r.header("content-type") == "application/json"
        # If the server had sent a body after the HEAD response, the next response would not
        # start right at the buffer's beginning: send a GET on the same connection and parse it.
        c.send(request_bytes("GET", "/"))
        r2 = c.read_response()
        assert r2.status == 200 and r2.body == HELLO


def test_head_root_via_requests_has_empty_content(app):
    r = requests.head(app.url + "/", timeout=5)
    assert r.status_code == 200
    assert r.content == b""
    assert r.headers["Content-Length"] == str(len(HELLO))


def test_unknown_path_is_404(app):
    assert requests.get(app.url + "/no/such/path", timeout=5).status_code == 404
    assert requests.post(app.url + "/nope", data=b"x", timeout=5).status_code == 404


def test_unknown_path_404_keeps_connection_usable(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/missing"))
        assert c.read_response().status == 404
        c.send(request_bytes("GET", "/"))
        assert c.read_response().body == HELLO


def test_delete_root_is_405_with_allow_get_head(app):
    r = exchange(app.port, request_bytes("DELETE", "/"))
    assert r.status == 405
    assert {"GET", "HEAD"} <= _allow_set(r)
    assert "DELETE" not in _allow_set(r)


def test_post_to_get_only_route_is_405_with_allow_get_head(app):
    r = exchange(app.port, request_bytes("POST", "/users/1", [("Content-Length", "2")], b"{}"))
    assert r.status == 405
    assert {"GET", "HEAD"} <= _allow_set(r)
    assert "POST" not in _allow_set(r)


def test_get_on_post_only_echo_is_405_with_allow_post(app):
    r = exchange(app.port, request_bytes("GET", "/echo"))
    assert r.status == 405
    allow = _allow_set(r)
    assert "POST" in allow and "GET" not in allow


def test_http10_request_gets_response_and_connection_closes(app):
    with RawConn(app.port) as c:
        c.send(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        r = c.read_response()
        assert r.version in ("HTTP/1.0", "HTTP/1.1")
        assert r.status == 200
        assert r.body == HELLO
        closed, extra, _ = c.wait_closed(3.0)
        assert closed, "HTTP/1.0 without keep-alive: server should close the connection"
        assert extra == b""


def test_http10_without_host_header_is_answered(app):
    r = exchange(app.port, b"GET /users/7 HTTP/1.0\r\n\r\n")
    assert r.status == 200
    assert r.body == b'{"id": "7"}'


def test_http10_keep_alive_request_keeps_connection(app):
    with RawConn(app.port) as c:
        c.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.body == HELLO
        assert (r.header("connection") or "").lower() == "keep-alive"
        c.send(b"GET /users/2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        assert c.read_response().body == b'{"id": "2"}'


def test_absolute_form_request_target_is_routed_by_its_path(app):
    # RFC 9112 3.2.2: a server MUST accept the absolute-form
    r = exchange(app.port, b"GET http://127.0.0.1/users/abs?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert r.status == 200 and r.body == b'{"id": "abs"}'


def test_request_target_longer_than_header_limit_gets_414_or_431(app):
    r = exchange(app.port, request_bytes("GET", "/users/" + "a" * 20000))
    assert r.status in (414, 431), r


def test_head_on_users_route_has_no_body(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("HEAD", "/users/5") + request_bytes("GET", "/users/6"))
        r1 = c.read_response(head_request=True)
        r2 = c.read_response()
    assert r1.status == 200 and r1.header("content-length") == str(len(b'{"id": "5"}'))
    assert r2.body == b'{"id": "6"}'
