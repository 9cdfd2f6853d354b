"""Every route of the reference app contract (tests/REFERENCE_APP.md), except /echo (test_echo.py)."""
import http.client
import json
import time

import requests

from rawhttp import RawConn, request_bytes

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def test_root_returns_exact_hello_body_and_json_content_type(app):
    r = requests.get(app.url + "/", timeout=5)
    assert r.status_code == 200
    assert r.content == HELLO
    assert r.headers["Content-Type"] == "application/json"
    assert r.headers["Content-Length"] == str(len(HELLO))


def test_root_via_http_client_has_http11_status_line(app):
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=5)
    try:
        conn.request("GET", "/")
        resp = conn.getresponse()
        assert (resp.version, resp.status) == (11, 200)
        assert resp.read() == HELLO
    finally:
        conn.close()


def _user(app, raw_path):
    r = requests.get(app.url + raw_path, timeout=5)
    assert r.status_code == 200, (raw_path, r.status_code, r.content)
    assert r.headers["Content-Type"] == "application/json"
    return json.loads(r.content.decode("utf-8"))


def test_users_plain_id_is_echoed_as_json(app):
    assert _user(app, "/users/42") == {"id": "42"}
    assert _user(app, "/users/abc-DEF_1.2~x") == {"id": "abc-DEF_1.2~x"}


def test_users_plain_id_body_bytes_match_contract_format(app):
    r = requests.get(app.url + "/users/42", timeout=5)
    assert r.content == b'{"id": "42"}'


def test_users_percent_encoded_id_is_decoded(app):
    assert _user(app, "/users/hello%20world") == {"id": "hello world"}
    assert _user(app, "/users/100%25") == {"id": "100%"}


def test_users_percent_encoded_slash_stays_inside_the_id_segment(app):
    assert _user(app, "/users/a%2Fb") == {"id": "a/b"}


def test_users_id_with_quote_and_backslash_is_json_escaped(app):
    # a raw '"' or '\' in the id would break the JSON unless escaped; json.loads proves it is valid
    assert _user(app, "/users/a%22b%5Cc") == {"id": 'a"b\\c'}


def test_users_unicode_id_percent_encoded_utf8_is_decoded(app):
    assert _user(app, "/users/%C3%A9l%C3%A8ve") == {"id": "élève"}
    assert _user(app, "/users/%E6%97%A5%E6%9C%AC%F0%9F%98%80") == {"id": "日本😀"}


def test_users_unicode_id_sent_by_requests_is_decoded(app):
    # requests percent-encodes non-ASCII path characters as UTF-8
    assert _user(app, "/users/Zürich") == {"id": "Zürich"}


def test_users_query_string_is_not_part_of_the_id(app):
    assert _user(app, "/users/42?x=1&y=%2F") == {"id": "42"}


def test_users_with_empty_id_or_extra_segment_is_404(app):
    assert requests.get(app.url + "/users/", timeout=5).status_code == 404
    assert requests.get(app.url + "/users/1/extra", timeout=5).status_code == 404


def test_inspect_reports_method_path_and_raw_query(app):
    r = requests.get(app.url + "/inspect?a=1&b=two%20words&c&d=%C3%A9", timeout=5)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    data = r.json()
    assert data["method"] == "GET"
    assert data["path"] == "/inspect"
    assert data["query"] == "a=1&b=two%20words&c&d=%C3%A9"


def test_inspect_without_query_reports_empty_query(app):
    data = requests.get(app.url + "/inspect", timeout=5).json()
    assert data["query"] == ""
    assert data["path"] == "/inspect"


def test_inspect_header_names_are_lower_case_with_values_kept(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/inspect", [("X-Mixed-CASE", "Some Value"),
                                                 ("ACCEPT", "text/x-test")]))
        r = c.read_response()
    assert r.status == 200
    headers = json.loads(r.body)["headers"]
    assert all(name == name.lower() for name in headers), headers
    assert headers["x-mixed-case"] == "Some Value"
    assert headers["accept"] == "text/x-test"
    assert headers["host"] == "127.0.0.1"


def test_inspect_repeated_header_values_are_joined_with_comma_space(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/inspect", [("X-Rep", "one"), ("X-Rep", "two")]))
        r = c.read_response()
    assert json.loads(r.body)["headers"]["x-rep"] == "one, two"


def test_inspect_remote_addr_is_loopback_with_the_clients_port(app):
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/inspect"))
        r = c.read_response()
        client_port = c.local_port()
    assert json.loads(r.body)["remote_addr"] == "127.0.0.1:%d" % client_port


def test_slow_answers_after_the_requested_delay(app):
    t0 = time.monotonic()
    r = requests.get(app.url + "/slow?ms=400", timeout=10)
    elapsed = time.monotonic() - t0
    assert r.status_code == 200
    assert r.json() == {"slept_ms": 400}
    assert r.headers["Content-Type"] == "application/json"
    assert 0.38 <= elapsed < 2.0, elapsed


def test_slow_zero_ms_answers_immediately(app):
    r = requests.get(app.url + "/slow?ms=0", timeout=5)
    assert r.status_code == 200
    assert r.json() == {"slept_ms": 0}


def test_fail_returns_500_and_server_keeps_serving(app):
    r = requests.get(app.url + "/fail", timeout=5)
    assert r.status_code == 500
    for _ in range(3):
        ok = requests.get(app.url + "/", timeout=5)
        assert ok.status_code == 200 and ok.content == HELLO
    assert requests.get(app.url + "/fail", timeout=5).status_code == 500
