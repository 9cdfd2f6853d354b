"""A Response returned again and again is prepared once in the engine (ember_answer_new)
and answered with ember_request_respond_answer: what clients get must not change."""
import gc
import http.client
import threading

import requests

from ember import Response, _lib
from ember.response import NOCOPY_MIN


def get(port, method="GET", path="/"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        c.close()


def test_a_constant_response_is_prepared_and_answers_the_same(serve, dispatch):
    hello = Response(b'{"code": 1}', status=201, content_type="application/json",
                     headers=[("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Const", "yes")])

    def setup(app):
        app.get("/")(lambda req: hello)

    s = serve(setup, dispatch=dispatch)
    answers = [get(s.port) for _ in range(5)]
    assert isinstance(hello._prep, _lib.Answer) and hello._prep.value != 0
    for status, headers, body in answers:
        assert (status, body) == (201, b'{"code": 1}')
        names = [(k.lower(), v) for k, v in headers]
        assert ("content-type", "application/json") in names
        assert ("x-const", "yes") in names
        assert [v for k, v in names if k == "set-cookie"] == ["a=1", "b=2"]
        assert ("content-length", "11") in names
    # HEAD gets the head of the prepared answer and no body.
    status, headers, body = get(s.port, "HEAD")
    assert (status, body) == (201, b"")
    assert ("content-length", "11") in [(k.lower(), v) for k, v in headers]


def test_changing_a_prepared_response_drops_the_engines_copy(serve):
    r = Response("one", status=200)

    def setup(app):
        app.get("/")(lambda req: r)

    s = serve(setup, dispatch="inline")
    assert [get(s.port)[2] for _ in range(3)] == [b"one"] * 3
    old = r._prep
    assert isinstance(old, _lib.Answer)
    r.body = b"two"
    r.status = 202
    assert r._prep is None
    got = [get(s.port) for _ in range(3)]
    assert [(st, b) for st, _, b in got] == [(202, b"two")] * 3
    assert isinstance(r._prep, _lib.Answer) and r._prep is not old


def test_a_dropped_response_frees_its_prepared_answer(serve):
    holder = {"r": Response("bye")}

    def setup(app):
        app.get("/")(lambda req: holder["r"])

    s = serve(setup, dispatch="pool")
    assert get(s.port)[2] == b"bye" and get(s.port)[2] == b"bye"
    number = holder["r"]._prep.value
    holder["r"] = Response("next")
    gc.collect()
    # Freed with its Response: the engine no longer knows the handle.
    assert _lib.lib.ember_answer_free(number) == _lib.ERR_INVALID_HANDLE
    assert get(s.port)[2] == b"next"


def test_one_response_answers_many_threads_at_once(serve):
    shared = Response({"n": 1})

    def setup(app):
        app.get("/")(lambda req: shared)

    s = serve(setup, dispatch="pool", pool_threads=4)
    bad = []

    def client():
        with requests.Session() as session:
            for _ in range(40):
                r = session.get(s.url + "/")
                if (r.status_code, r.headers.get("content-type"), r.content) != (200, "application/json", b'{"n": 1}'):
                    bad.append((r.status_code, r.headers, r.content))

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
    assert isinstance(shared._prep, _lib.Answer)


def test_the_output_cache_marker_of_a_prepared_response_never_reaches_the_client(serve):
    cached = Response("cached", cache_for=30)

    def setup(app):
        app.get("/")(lambda req: cached)

    s = serve(setup, dispatch="inline")
    for _ in range(3):
        status, headers, body = get(s.port)
        assert (status, body) == (200, b"cached")
        assert "ember-cache" not in [k.lower() for k, _ in headers]


def test_large_bodies_are_lent_not_prepared(serve):
    big = Response(b"x" * NOCOPY_MIN)

    def setup(app):
        app.get("/")(lambda req: big)

    s = serve(setup, dispatch="inline")
    for _ in range(2):
        status, _, body = get(s.port)
        assert (status, len(body)) == (200, NOCOPY_MIN)
    assert big._prep == 0  # answered, but never copied into the engine
