"""What a handler receives and what it may return."""
import json
import logging
import sys
import threading
import time

import requests

import ember
from ember import Response


def test_every_return_type_becomes_the_expected_response(serve, dispatch):
    results = {
        "str": "héllo",
        "bytes": b"\x00\x01raw",
        "dict": {"a": 1, "é": [True, None]},
        "list": [1, "two"],
        "none": None,
        "tuple2": (201, "created"),
        "tuple3": (202, {"queued": True}, {"X-Job": "7"}),
        "response": Response("<b>hi</b>", status=203, headers={"X-A": "1"}, content_type="text/html"),
        "bytearray": bytearray(b"ba"),
        "header_list": Response(b"", headers=[("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]),
    }

    def setup(app):
        @app.get("/r/{kind}")
        def handler(req):
            return results[req.params["kind"]]

    s = serve(setup, dispatch=dispatch)
    r = requests.get(s.url + "/r/str")
    assert (r.status_code, r.headers["content-type"], r.content) == (
        200, "text/plain; charset=utf-8", "héllo".encode())
    r = requests.get(s.url + "/r/bytes")
    assert (r.status_code, r.headers["content-type"], r.content) == (
        200, "application/octet-stream", b"\x00\x01raw")
    r = requests.get(s.url + "/r/dict")
    assert (r.headers["content-type"], r.json()) == ("application/json", {"a": 1, "é": [True, None]})
    assert requests.get(s.url + "/r/list").json() == [1, "two"]
    r = requests.get(s.url + "/r/none")
    assert (r.status_code, r.content) == (204, b"")
    r = requests.get(s.url + "/r/tuple2")
    assert (r.status_code, r.text) == (201, "created")
    r = requests.get(s.url + "/r/tuple3")
    assert (r.status_code, r.json(), r.headers["x-job"]) == (202, {"queued": True}, "7")
    r = requests.get(s.url + "/r/response")
    assert (r.status_code, r.text, r.headers["x-a"], r.headers["content-type"]) == (
        203, "<b>hi</b>", "1", "text/html")
    assert requests.get(s.url + "/r/bytearray").content == b"ba"
    r = requests.get(s.url + "/r/header_list")
    assert r.raw.headers.getlist("Set-Cookie") == ["a=1", "b=2"]


def test_unsupported_return_value_answers_500(serve, caplog):
    def setup(app):
        @app.get("/")
        def handler(req):
            return object()

    s = serve(setup)
    with caplog.at_level(logging.ERROR, logger="ember"):
        r = requests.get(s.url + "/")
    assert (r.status_code, r.text) == (500, "Internal Server Error")
    assert "TypeError" in caplog.text


def test_exception_answers_500_logs_traceback_and_server_keeps_serving(serve, dispatch, caplog):
    def setup(app):
        @app.get("/boom")
        def boom(req):
            raise ValueError("secret detail")

        @app.get("/ok")
        def ok(req):
            return "ok"

    s = serve(setup, dispatch=dispatch)
    with caplog.at_level(logging.ERROR, logger="ember"):
        r = requests.get(s.url + "/boom")
    assert r.status_code == 500
    assert "secret" not in r.text and "Traceback" not in r.text
    assert "ValueError: secret detail" in caplog.text and "Traceback" in caplog.text
    for _ in range(3):
        assert requests.get(s.url + "/ok").text == "ok"


def test_request_fields_are_all_readable(serve, dispatch):
    seen = {}

    def setup(app):
        @app.route(["POST", "PUT"], "/items/{kind}/{*rest}")
        def item(req):
            seen.update(
                method=req.method, path=req.path, raw_path=req.raw_path, query=req.query,
                query_list=req.query_list, query_string=req.query_string, params=req.params,
                x=req.headers["X-TEST"], xs=req.headers.get_all("x-rep"), rep=req.headers["x-rep"],
                has=("x-test" in req.headers, "nope" in req.headers), body=req.body, text=req.text,
                json=req.json(), remote=req.remote_addr, route=req.route, version=req.http_version,
            )
            return "ok"

    s = serve(setup, dispatch=dispatch)
    r = requests.post(s.url + "/items/book/a/b%20c?x=1&x=2&y=&z=%C3%A9",
                      json={"k": "v"}, headers={"X-Test": "yes", "X-Rep": "1, 2"})
    assert r.status_code == 200
    assert seen["method"] == "POST"
    assert seen["raw_path"] == "/items/book/a/b%20c"
    assert seen["path"] == "/items/book/a/b c"
    assert seen["query"] == {"x": "2", "y": "", "z": "é"}
    assert seen["query_list"] == [("x", "1"), ("x", "2"), ("y", ""), ("z", "é")]
    assert seen["query_string"] == "x=1&x=2&y=&z=%C3%A9"
    assert seen["params"] == {"kind": "book", "rest": "a/b c"}
    assert seen["x"] == "yes" and seen["rep"] == "1, 2" and seen["has"] == (True, False)
    assert seen["body"] == b'{"k": "v"}' and seen["text"] == '{"k": "v"}' and seen["json"] == {"k": "v"}
    assert seen["remote"].startswith("127.0.0.1:")
    assert seen["route"] == "/items/{kind}/{*rest}"
    assert seen["version"] == "1.1"
    assert requests.put(s.url + "/items/x/y", json=[], headers={"X-Test": "1", "X-Rep": "r"}).status_code == 200
    assert requests.get(s.url + "/items/x/y").status_code == 405


def test_repeated_request_headers_join_with_comma_and_get_all_splits_them(serve):
    import http.client

    got = {}

    def setup(app):
        @app.get("/")
        def h(req):
            got["joined"] = req.headers["x-rep"]
            got["all"] = req.headers.get_all("X-Rep")
            return ""

    s = serve(setup)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    c.putrequest("GET", "/")
    c.putheader("X-Rep", "one")
    c.putheader("X-Rep", "two")
    c.endheaders()
    assert c.getresponse().status == 200
    c.close()
    assert got == {"joined": "one, two", "all": ["one", "two"]}


def test_a_request_kept_after_the_handler_returned_still_reads(serve, dispatch):
    kept = []

    def setup(app):
        @app.post("/keep")
        def keep(req):
            kept.append(req)  # no field read before the handler returns
            return "kept"

    s = serve(setup, dispatch=dispatch)
    requests.post(s.url + "/keep?a=1", data=b"payload", headers={"X-K": "v"})
    requests.get(s.url + "/nothing-here")  # the engine reuses memory in between
    req = kept[0]
    assert (req.method, req.path, req.query, req.body, req.headers["x-k"]) == (
        "POST", "/keep", {"a": "1"}, b"payload", "v")


def test_keeping_a_request_needs_no_refcount_and_copies_only_kept_requests(serve, monkeypatch):
    # Issue 13: the kept-request check used sys.getrefcount, which only CPython has.
    # Without it the check must still see a kept request, and (here, on CPython) copy
    # nothing for the requests nobody kept.
    monkeypatch.delattr(sys, "getrefcount")
    copies = []
    detach = ember.Request._detach

    def counting_detach(self):
        copies.append(self.handle)
        detach(self)

    monkeypatch.setattr(ember.Request, "_detach", counting_detach)
    kept = []

    def setup(app):
        @app.get("/keep")
        def keep(req):
            kept.append(req)
            return "kept"

        @app.get("/drop")
        def drop(req):
            return req.query["n"]

    s = serve(setup)
    assert [requests.get(s.url + "/drop?n=%d" % i).text for i in range(5)] == ["0", "1", "2", "3", "4"]
    assert copies == []
    assert requests.get(s.url + "/keep?x=1", headers={"X-K": "v"}).text == "kept"
    requests.get(s.url + "/drop?n=9")  # the engine reuses memory in between
    assert len(copies) == 1
    assert (kept[0].query, kept[0].headers["x-k"]) == ({"x": "1"}, "v")


def test_deferred_answer_from_another_thread(serve, dispatch):
    def setup(app):
        @app.get("/later")
        def later(req):
            d = req.defer()
            threading.Timer(0.1, d.respond, args=({"late": req.query["n"]},)).start()
            return None

    s = serve(setup, dispatch=dispatch)
    t0 = time.monotonic()
    r = requests.get(s.url + "/later?n=5")
    assert r.json() == {"late": "5"} and time.monotonic() - t0 >= 0.09


def test_late_answer_after_handler_timeout_is_refused_quietly(serve):
    outcome = []

    def setup(app):
        @app.get("/slow")
        def slow(req):
            d = req.defer()

            def answer():
                outcome.append(d.respond("too late"))
            threading.Timer(0.8, answer).start()

    s = serve(setup, handler_timeout=0.3)
    r = requests.get(s.url + "/slow")
    assert r.status_code == 503
    time.sleep(0.8)
    assert outcome == [False]


def test_engine_404_and_405_with_allow(serve):
    def setup(app):
        @app.get("/only-get")
        def h(req):
            return "x"

    s = serve(setup)
    assert requests.get(s.url + "/missing").status_code == 404
    r = requests.delete(s.url + "/only-get")
    assert r.status_code == 405 and "GET" in r.headers["allow"]


def test_response_rejects_header_injection():
    import pytest

    with pytest.raises(ValueError):
        Response("x", headers={"X-A": "1\r\nSet-Cookie: evil=1"})
    with pytest.raises(ValueError):
        Response("x", headers={"Bad Name": "1"})
    with pytest.raises(ValueError):
        Response("x", status=42)


def test_engine_log_lines_reach_the_logging_module(serve, caplog):
    caplog.set_level(logging.INFO, logger="ember")

    def setup(app):
        @app.get("/")
        def h(req):
            return "x"

    serve(setup)
    assert any(r.name == "ember" and r.levelno == logging.INFO for r in caplog.records), caplog.text


def test_json_body_of_handler_result_keeps_unicode(serve):
    def setup(app):
        @app.get("/")
        def h(req):
            return {"word": "日本"}

    s = serve(setup)
    r = requests.get(s.url + "/")
    assert json.loads(r.content.decode("utf-8")) == {"word": "日本"}


def test_an_answer_the_engine_refuses_becomes_500_and_is_logged(serve, caplog):
    bad = Response("x", headers={"X(bad)": "1"})  # not an HTTP token; only the engine checks that

    def setup(app):
        @app.get("/")
        def h(req):
            return bad

    s = serve(setup)
    with caplog.at_level(logging.ERROR, logger="ember"):
        r = requests.get(s.url + "/")
    assert r.status_code == 500
    assert "EMBER_ERR_INVALID_ARG" in caplog.text
