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
