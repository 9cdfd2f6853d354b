"""The sample Web Forms application (samples/aspnet/site) under EmberAspNet.exe, through real
clients: a browser-like requests.Session for postbacks and session state, raw sockets for
keep-alive, concurrent clients for the thread hand-off into the application's domain."""
import concurrent.futures
import html
import http.client
import json
import re
import socket
import time

import os

import requests

import aspnet_helpers  # noqa: F401  (puts the conformance helpers on sys.path)
from appproc import REPO_ROOT
from rawhttp import RawConn, request_bytes


def _field(page, name):
    m = re.search(r'name="%s"[^>]*value="([^"]*)"' % re.escape(name), page) or \
        re.search(r'value="([^"]*)"[^>]*name="%s"' % re.escape(name), page)
    return html.unescape(m.group(1)) if m else None


def _span(page, ident):
    m = re.search(r'<span id="%s">(.*?)</span>' % re.escape(ident), page)
    return html.unescape(m.group(1)) if m else None


def test_home_page_renders_the_form_with_view_state_and_starts_a_session(site):
    r = requests.get(site.url + "/", timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "<h1>Web Forms on Ember</h1>" in r.text
    assert _field(r.text, "__VIEWSTATE"), "the form carries view state"
    assert "ASP.NET_SessionId" in r.cookies
    assert _span(r.text, "Visits") == "1"
    # Global.asax: Application_Start ran once, Application_BeginRequest numbers every request.
    assert _span(r.text, "Started")
    assert int(r.headers["X-Request-Number"]) >= 1


def test_postback_keeps_view_state_across_round_trips(site):
    s = requests.Session()
    page = s.get(site.url + "/", timeout=30).content.decode("utf-8")
    for expected_clicks, name in ((1, "Ada"), (2, "Zoë & \"co\"")):
        form = {"__VIEWSTATE": _field(page, "__VIEWSTATE"), "NameBox": name, "GreetButton": "Greet"}
        for extra in ("__VIEWSTATEGENERATOR", "__EVENTVALIDATION", "__EVENTTARGET", "__EVENTARGUMENT"):
            v = _field(page, extra)
            if v is not None:
                form[extra] = v
        r = s.post(site.url + "/Default.aspx", data=form, timeout=30)
        assert r.status_code == 200, r.text[:2000]
        page = r.content.decode("utf-8")   # Mono sends text/html without a charset
        assert _span(page, "Greeting") == "Hello, %s!" % name   # HtmlEncode'd and decoded back
        assert _span(page, "Clicks") == str(expected_clicks), "click count lives in view state"
        assert _field(page, "NameBox") == name


def test_request_validation_refuses_markup_in_a_postback(site):
    s = requests.Session()
    page = s.get(site.url + "/", timeout=30).text
    form = {"__VIEWSTATE": _field(page, "__VIEWSTATE"), "NameBox": "<script>x</script>", "GreetButton": "Greet"}
    r = s.post(site.url + "/Default.aspx", data=form, timeout=30)
    assert r.status_code == 500 and 'id="error-page"' in r.text
    assert "<script>x</script>" not in r.text


def test_session_state_follows_the_cookie(site):
    a, b = requests.Session(), requests.Session()
    assert _span(a.get(site.url + "/", timeout=30).text, "Visits") == "1"
    assert _span(a.get(site.url + "/", timeout=30).text, "Visits") == "2"
    assert _span(b.get(site.url + "/", timeout=30).text, "Visits") == "1", "another client, another session"
    # The .ashx handler reads the same session.
    j = a.get(site.url + "/Hello.ashx", params={"name": "x"}, timeout=30).json()
    assert j["visits"] == 2


def test_ashx_json_handler_get_post_unicode_and_path_info(site):
    r = requests.get(site.url + "/Hello.ashx", params={"name": "Zoë \"q\""}, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    # A new client: the read-only session exists, Session_Start (Global.asax) set visits to 0.
    assert r.json() == {"hello": "Zoë \"q\"", "method": "GET", "visits": 0}
    r = requests.post(site.url + "/Hello.ashx", data={"name": "form"}, timeout=30)
    assert r.json()["hello"] == "form" and r.json()["method"] == "POST"
    # /Hello.ashx/more: the handler is found, the rest is path info
    assert requests.get(site.url + "/Hello.ashx/more?name=pi", timeout=30).json()["hello"] == "pi"


def test_a_throwing_page_gets_the_error_page_with_500_and_the_server_lives(site):
    for _ in range(3):
        r = requests.get(site.url + "/Boom.aspx", timeout=30)
        assert r.status_code == 500
        assert 'id="error-page"' in r.text, "customErrors shows Error.aspx in place"
        assert "InvalidOperationException" not in r.text, "no details leak with customErrors On"
    r = requests.get(site.url + "/fail", timeout=30)
    assert r.status_code == 500
    assert requests.get(site.url + "/", timeout=30).status_code == 200
    assert "unhandled InvalidOperationException in /Boom.aspx" in "\n".join(site.stdout_lines) + site.output_tail(400)


def test_missing_page_is_404_with_the_not_found_page(site):
    r = requests.get(site.url + "/no-such-page.aspx", timeout=30)
    assert r.status_code == 404 and 'id="not-found-page"' in r.text


def test_static_content_conditional_get_and_folder_redirect(site):
    r = requests.get(site.url + "/static/site.css", timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/css")
    with open(os.path.join(REPO_ROOT, "samples", "aspnet", "site", "static", "site.css"), "rb") as f:
        assert r.content == f.read()
    assert r.headers.get("Last-Modified")
    r3 = requests.get(site.url + "/static", allow_redirects=False, timeout=30)
    assert r3.status_code == 301 and r3.headers["Location"] == "/static/"
    r4 = requests.get(site.url + "/static/readme.txt", timeout=30)
    assert r4.text.startswith("Static content")


def test_config_and_code_files_are_never_served(site):
    for path in ("/web.config", "/App_Code/ReferenceHandlers.cs", "/Global.asax"):
        r = requests.get(site.url + path, timeout=30)
        assert r.status_code in (403, 404), (path, r.status_code)
        assert "ReferenceHandlers" not in r.text and "<configuration>" not in r.text


def test_bodies_large_small_chunked_reach_the_application_intact(site):
    # 300 KiB: the first 64 KiB preloaded, the rest through ReadEntityBody
    body = bytes(range(256)) * 1200
    r = requests.post(site.url + "/echo", data=body, headers={"Content-Type": "application/x-test"}, timeout=30)
    assert r.status_code == 200 and r.content == body
    assert r.headers["Content-Type"] == "application/x-test"
    r = requests.post(site.url + "/echo", data=iter([b"chunk-one ", b"chunk-two"]), timeout=30)
    assert r.content == b"chunk-one chunk-two"
    r = requests.post(site.url + "/echo", data=b"", timeout=30)
    assert r.status_code == 200 and r.content == b""


def test_keep_alive_serves_pages_handlers_and_static_on_one_connection(site):
    with RawConn(site.port) as c:
        for path in ("/Hello.ashx?name=k", "/static/readme.txt", "/users/7", "/Hello.ashx?name=k2"):
            c.send(request_bytes("GET", path))
            r = c.read_response()
            assert r.status == 200, (path, r)
    conn = http.client.HTTPConnection("127.0.0.1", site.port, timeout=30)
    for i in range(5):
        conn.request("GET", "/inspect?i=%d" % i, headers={"X-Rep": "a", "X-Other": "b"})
        resp = conn.getresponse()
        data = json.loads(resp.read())
        assert data["query"] == "i=%d" % i and data["headers"]["x-other"] == "b"
        assert data["remote_addr"].startswith("127.0.0.1:")
    conn.close()


def test_head_answers_without_a_body(site):
    r = requests.head(site.url + "/Hello.ashx?name=h", timeout=30)
    assert r.status_code == 200 and r.content == b""


def test_many_concurrent_clients_with_slow_async_handlers(site):
    def one(i):
        if i % 2:
            r = requests.get(site.url + "/slow", params={"ms": 300}, timeout=30)
            return r.status_code, r.json()["slept_ms"]
        r = requests.get(site.url + "/Hello.ashx", params={"name": str(i)}, timeout=30)
        return r.status_code, r.json()["hello"]

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(40) as ex:
        results = list(ex.map(one, range(80)))
    assert all(code == 200 for code, _ in results)
    assert [v for i, (_, v) in enumerate(results) if i % 2 == 0] == [str(i) for i in range(0, 80, 2)]
    assert time.time() - t0 < 25


def test_client_vanishing_mid_request_does_not_hurt_the_host(site):
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", site.port))
        s.sendall(request_bytes("POST", "/echo", [("Content-Length", "100000")], b"x" * 1000))
        s.close()
        s = socket.create_connection(("127.0.0.1", site.port))
        s.sendall(request_bytes("GET", "/slow?ms=200"))
        s.close()
    time.sleep(0.5)
    assert requests.get(site.url + "/Hello.ashx", timeout=30).status_code == 200


def test_web_api_controller_json_xml_model_binding_and_404(site):
    r = requests.get(site.url + "/api/items", headers={"Accept": "application/json"}, timeout=60)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.json() == [{"name": "kettle", "count": 2}, {"name": "cup", "count": 6}]
    assert requests.get(site.url + "/api/items/5", headers={"Accept": "application/json"},
                        timeout=30).json() == {"name": "item 5", "count": 5}
    r = requests.get(site.url + "/api/items/3", headers={"Accept": "application/xml"}, timeout=30)
    assert r.headers["Content-Type"].startswith("application/xml") and "<name>item 3</name>" in r.text
    r = requests.post(site.url + "/api/items", json={"name": "pot", "count": 1},
                      headers={"Accept": "application/json"}, timeout=30)
    assert r.status_code == 201 and r.json() == {"name": "pot", "count": 2}
    r = requests.post(site.url + "/api/items", json={"count": 1}, headers={"Accept": "application/json"}, timeout=30)
    assert r.status_code == 400
    assert requests.get(site.url + "/api/items/0", headers={"Accept": "application/json"}, timeout=30).status_code == 404


def test_flushed_answer_streams_chunk_by_chunk(site):
    # Response.Flush() hands what was written to the client at once (a chunk), before the
    # handler goes on: the first line arrives well before the last.
    s = socket.create_connection(("127.0.0.1", site.port), timeout=30)
    try:
        s.sendall(request_bytes("GET", "/flush?parts=3&ms=300", [("Connection", "close")]))
        got, first_at = b"", None
        while True:
            data = s.recv(4096)
            if not data:
                break
            got += data
            if first_at is None and b"part 0\n" in got:
                first_at = time.monotonic()
        ended_at = time.monotonic()
    finally:
        s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0]
    assert b"transfer-encoding: chunked" in head.lower()
    assert first_at is not None and ended_at - first_at >= 0.45, "all parts came at once"
    r = requests.get(site.url + "/flush?parts=4", timeout=30)
    assert r.text == "part 0\npart 1\npart 2\npart 3\n"


def test_uploads_reach_the_application_as_they_arrive_and_hash_right(site):
    import hashlib
    body = os.urandom(3 << 20)   # under System.Web's default maxRequestLength (4 MiB)
    want = {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    r = requests.post(site.url + "/count", data=body, timeout=60)
    assert r.status_code == 200 and r.json() == want
    pieces = [body[i:i + 100000] for i in range(0, len(body), 100000)]
    r = requests.post(site.url + "/count", data=iter(pieces), timeout=60)   # chunked
    assert r.status_code == 200 and r.json() == want


def test_is_client_connected_turns_false_when_the_client_leaves(site):
    s = socket.create_connection(("127.0.0.1", site.port), timeout=30)
    s.sendall(request_bytes("GET", "/watch"))
    deadline = time.monotonic() + 20
    while requests.get(site.url + "/watch?result=1", timeout=30).text != "watching":
        assert time.monotonic() < deadline, "the watcher never started"
        time.sleep(0.05)
    s.close()
    while True:
        seen = requests.get(site.url + "/watch?result=1", timeout=30).text
        if seen not in ("watching", "pending"):
            break
        assert time.monotonic() < deadline, "no answer from the watcher"
        time.sleep(0.05)
    assert seen == "client left"
