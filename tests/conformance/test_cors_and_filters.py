"""CORS on `/api` (preflights answered by the engine) and request filtering: the denied
client address, the URL length limit, the allowed methods, denied path patterns."""
import socket

import pytest

from engine_features import get
from rawhttp import RawConn, request_bytes

ORIGIN = ("Origin", "https://app.example")


def _preflight(app, origin="https://app.example", method="POST", headers=None, path="/api/ping"):
    hs = [("Origin", origin), ("Access-Control-Request-Method", method)]
    if headers:
        hs.append(("Access-Control-Request-Headers", headers))
    return get(app, path, hs, method="OPTIONS")


def test_an_allowed_preflight_gets_204_from_the_engine(app):
    r = _preflight(app, headers="content-type, x-api-key")
    # /api/ping has no OPTIONS route: without the engine this would be 405.
    assert r.status == 204, r
    assert r.header("access-control-allow-origin") == "https://app.example"
    assert r.header("access-control-allow-methods") == "GET, POST"
    assert r.header("access-control-allow-headers").lower() == "content-type, x-api-key"
    assert r.header("access-control-max-age") == "600"
    assert "Origin" in r.header("vary")


@pytest.mark.parametrize("origin,method,headers", [
    ("https://evil.example", "POST", None), ("https://app.example", "DELETE", None),
    ("https://app.example", "GET", "x-other"), ("null", "GET", None),
])
def test_a_refused_preflight_gets_403_without_allow_origin(app, origin, method, headers):
    r = _preflight(app, origin, method, headers)
    assert r.status == 403
    assert r.header("access-control-allow-origin") is None


def test_answers_to_an_allowed_origin_carry_the_cors_headers(app):
    r = get(app, "/api/ping", [ORIGIN])
    assert r.status == 200 and r.body == b'{"pong": true}'
    assert r.header("access-control-allow-origin") == "https://app.example"
    assert r.header("access-control-expose-headers") == "X-Api-Version"
    assert r.header("x-api-version") == "1"
    assert "Origin" in r.header("vary", "")
    r = get(app, "/api/ping", [ORIGIN], method="POST", body=b"{}")
    assert r.status == 200 and r.header("access-control-allow-origin") == "https://app.example"


def test_other_origins_and_other_paths_get_no_cors_headers(app):
    r = get(app, "/api/ping", [("Origin", "https://evil.example")])
    assert r.status == 200 and r.header("access-control-allow-origin") is None
    assert get(app, "/api/ping").header("access-control-allow-origin") is None
    r = get(app, "/", [ORIGIN])
    assert r.status == 200 and r.header("access-control-allow-origin") is None
    # Outside /api an OPTIONS preflight is not the engine's: the router's 405.
    assert _preflight(app, path="/").status == 405


def _from(app, source):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((source, 0))
    except OSError as e:
        s.close()
        pytest.skip("cannot bind %s here: %s" % (source, e))
    s.settimeout(5)
    s.connect(("127.0.0.1", app.port))
    c = RawConn.__new__(RawConn)
    c.sock, c.buf, c.eof = s, b"", False
    return c


def test_the_denied_client_address_gets_403_and_others_are_served(app):
    with _from(app, "127.0.0.2") as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 403
    with _from(app, "127.0.0.3") as c:
        c.send(request_bytes("GET", "/"))
        assert c.read_response().status == 200


def test_a_target_over_8192_bytes_gets_414(app):
    assert get(app, "/users/" + "a" * 9000).status == 414
    assert get(app, "/users/" + "a" * 8000).status == 200
    assert get(app, "/inspect?q=" + "b" * 8200).status == 414


@pytest.mark.parametrize("method", ["TRACE", "BREW", "PROPFIND"])
def test_methods_outside_the_list_get_405_with_the_list(app, method):
    r = get(app, "/", method=method)
    assert r.status == 405
    allow = {m.strip() for m in r.header("allow").split(",")}
    assert allow == {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}


@pytest.mark.parametrize("path", [
    "/static/secret.bak", "/static/SECRET.BAK", "/static/secret%2ebak", "/static/docs/../secret.bak",
    "/private/anything", "/private/a/b", "/static/%2e%2e/private/x",
])
def test_denied_path_patterns_get_404(app, path):
    r = get(app, path)
    assert r.status == 404, (path, r)
    assert b"backup" not in r.body
