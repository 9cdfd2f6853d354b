"""FastAPI and Starlette on Ember, compared answer by answer with uvicorn."""
import time

import pytest


@pytest.fixture(scope="module")
def fastapi(pair_factory):
    return pair_factory("fastapi_app:app", "asgi", ["--lifespan", "on"])


@pytest.fixture(scope="module")
def starlette(pair_factory):
    return pair_factory("starlette_app:app", "asgi")


def test_fastapi_path_params_and_query(fastapi):
    assert fastapi.same("GET", "/items/42?q=ember").json() == {"item_id": 42, "q": "ember"}
    fastapi.same("GET", "/items/7")
    fastapi.same("GET", "/")


def test_fastapi_json_body_and_422_validation_error(fastapi):
    r = fastapi.same("POST", "/items", json={"name": "lamp", "price": 10, "tags": ["a", "b"]})
    assert r.status_code == 201 and r.json() == {"name": "lamp", "price_with_tax": 12.0, "tags": ["a", "b"]}
    r = fastapi.same("POST", "/items", json={"name": "lamp", "price": "not a number"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "price"]
    assert fastapi.same("GET", "/items/not-an-int").status_code == 422
    assert fastapi.same("POST", "/items", content=b"{broken", headers={"content-type": "application/json"}).status_code == 422


def test_fastapi_dependency_with_header(fastapi):
    r = fastapi.same("GET", "/paged?skip=5&limit=2", headers={"X-Tenant": "acme"})
    assert r.json() == {"skip": 5, "limit": 2, "tenant": "acme"}
    fastapi.same("GET", "/paged")


def test_fastapi_sync_route_runs_in_the_thread_pool(fastapi):
    assert fastapi.same("GET", "/sync?n=12").json() == {"square": 144}


def test_fastapi_background_task_runs_after_the_answer(fastapi):
    for i in range(3):
        assert fastapi.same("POST", "/background?word=w%d" % i).json() == {"queued": "w%d" % i}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        a, b = fastapi.both("GET", "/background")
        if a.json() == b.json() == {"done": ["w0", "w1", "w2"]}:
            break
        time.sleep(0.05)
    assert a.json() == {"done": ["w0", "w1", "w2"]}


def test_fastapi_streaming_response(fastapi):
    r = fastapi.same("GET", "/stream?n=20")
    assert r.text == "".join("line %d\n" % i for i in range(20))


def test_fastapi_lifespan_state_errors_and_404(fastapi):
    assert fastapi.same("GET", "/state").text == "hello from lifespan"
    assert fastapi.same("GET", "/teapot").status_code == 418
    assert fastapi.same("GET", "/nowhere").status_code == 404
    assert fastapi.same("DELETE", "/items/1").status_code == 405
    a, b = fastapi.both("GET", "/crash")
    assert a.status_code == b.status_code == 500
    fastapi.fresh_connections()
    assert fastapi.same("GET", "/items/1").status_code == 200  # still serving
    fastapi.same("HEAD", "/", compare_body=False)


def test_starlette_routes_forms_cookies_redirects_middleware(starlette):
    assert starlette.same("GET", "/").json() == {"code": 1, "msg": "Hello WebAPI"}
    assert starlette.same("GET", "/users/z%C3%BCrich?x=1").text == "user zürich 1"
    assert starlette.same("POST", "/form", data={"a": "1", "b": "two"}).json() == {"a": "1", "b": "two"}
    body = bytes(range(256)) * 1000
    assert starlette.same("PUT", "/echo", content=body, headers={"content-type": "application/x-raw"}).content == body
    r = starlette.same("GET", "/cookies")
    assert r.headers["set-cookie"].startswith("seen=1")
    assert starlette.same("GET", "/cookies", headers={"cookie": "seen=1"}).text == "cookie 1"
    assert starlette.same("GET", "/go").status_code == 303
    assert starlette.same("GET", "/state").text == "yes"
    assert starlette.same("GET", "/missing").status_code == 404
    assert starlette.same("GET", "/form").status_code == 405
    starlette.same("HEAD", "/users/x", compare_body=False)


# -- WebSocket: the Starlette endpoint through the websockets client, on both servers ------

def ws_transcript(proc):
    """One scripted session against ``proc``: what a client sees, to compare."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    base = "ws://127.0.0.1:%d" % proc.port
    out = {}
    with connect(base + "/ws/blue?who=me", subprotocols=["x-none", "chat.v2"],
                 additional_headers={"X-Client": "t"}) as c:
        out["subprotocol"] = c.subprotocol
        out["hello"] = c.recv(timeout=10)
        for m in ["plain", "rev:abc", b"\x00\x01\xfe\xff", "ünïcode", b""]:
            c.send(m)
            out.setdefault("echo", []).append(c.recv(timeout=10))
        for i in range(300):
            c.send(str(i) if i % 3 else bytes([i % 256]))
        out["order_ok"] = [c.recv(timeout=10) for _ in range(300)] == [
            str(i) if i % 3 else bytes([i % 256]) for i in range(300)]
        c.close(4011, "client done")
    with connect(base + "/ws/green") as c:
        c.recv(timeout=10)
        c.send("bye")
        try:
            c.recv(timeout=10)
        except ConnectionClosed as e:
            out["server_close"] = (e.rcvd.code, e.rcvd.reason)
    try:
        connect(base + "/ws/locked", open_timeout=10)
    except InvalidStatus as e:
        out["refused"] = e.response.status_code
    return out


def test_starlette_websocket_same_as_uvicorn(starlette):
    a, b = ws_transcript(starlette.ember), ws_transcript(starlette.ref)
    assert a == b
    assert a["subprotocol"] == "chat.v2" and a["order_ok"] is True
    assert a["echo"] == ["plain", "cba:ver", b"\x00\x01\xfe\xff", "ünïcode", b""]
    assert a["hello"] == ('{"room":"blue","who":"me","header":"t","offered":["x-none","chat.v2"]}')
    assert a["server_close"] == (4005, "bye green") and a["refused"] == 403
    # The client's close code reached the app as websocket.disconnect on both servers.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ca, cb = starlette.both("GET", "/ws-closes")
        if 4011 in ca.json() and 4011 in cb.json():
            break
        time.sleep(0.05)
    assert ca.json() == cb.json() == [4011]
