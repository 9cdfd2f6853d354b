"""GET /sse: three Server-Sent Events 100 ms apart, then the end (tests/REFERENCE_APP.md).
Parsed with the event-stream rules of the HTML standard, over HTTP/1.1 (chunked) and HTTP/2,
through curl, httpx and a raw socket; Last-Event-ID resumes. The browser's EventSource is in
test_browser.py."""
import socket
import subprocess
import time

import httpx

from rawhttp import RawConn

EVENTS = b"".join(b'id: %d\nevent: tick\ndata: {"n": %d}\n\n' % (n, n) for n in (1, 2, 3))
RETRY = b"retry: 1000\n\n"


def parse_event_stream(raw):
    """The HTML standard's 'event stream interpretation' (9.2.6): returns (events, retry),
    events as dicts with type, data, last_event_id. An event not ended by a blank line is
    dropped, as a browser drops it."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    events, retry = [], None
    data, etype, last_id = "", "", ""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for line in lines[:-1]:   # the last piece has no line end: incomplete
        if line == "":
            if data:
                events.append({"type": etype or "message", "data": data[:-1], "last_event_id": last_id})
            data, etype = "", ""
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            etype = value
        elif field == "data":
            data += value + "\n"
        elif field == "id" and "\0" not in value:
            last_id = value
        elif field == "retry" and value.isdigit():
            retry = int(value)
    return events, retry


def expected_events(first=1):
    return [{"type": "tick", "data": '{"n": %d}' % n, "last_event_id": str(n)} for n in range(first, 4)]


def test_sse_parser_follows_the_standard():
    # The parser itself, on the standard's own corner cases, so the checks below mean something.
    raw = b"\xef\xbb\xbfretry: 5\r\n: comment\rdata:a\ndata:  b\nid: 7\n\nevent: x\n\ndata\n\ndata: cut"
    events, retry = parse_event_stream(raw)
    assert retry == 5
    assert events == [{"type": "message", "data": "a\n b", "last_event_id": "7"},
                      {"type": "message", "data": "", "last_event_id": "7"}]


def test_sse_head_and_exact_bytes_over_http11_chunked(app):
    with RawConn(app.port) as c:
        c.send(b"GET /sse HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        r = c.read_response()
    assert r.status == 200
    assert r.header("Content-Type").split(";")[0].strip() == "text/event-stream"
    assert r.header("Cache-Control") == "no-cache"
    assert r.header("Transfer-Encoding") == "chunked" and r.header("Content-Length") is None
    assert r.body == RETRY + EVENTS
    events, retry = parse_event_stream(r.body)
    assert retry == 1000 and events == expected_events()


def test_sse_events_arrive_as_they_are_written_not_at_the_end(app):
    # Event 1 must reach the client before event 3 is written (>= 200 ms later): the
    # answer streams, it is not collected and sent at the end.
    s = socket.create_connection(("127.0.0.1", app.port), timeout=5)
    try:
        s.sendall(b"GET /sse HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got, first_at = b"", None
        while True:
            data = s.recv(4096)
            if not data:
                break
            got += data
            if first_at is None and b'data: {"n": 1}' in got:
                first_at = time.monotonic()
        ended_at = time.monotonic()
    finally:
        s.close()
    assert first_at is not None, got
    assert ended_at - first_at >= 0.15, "all events came at once (%.3f s apart)" % (ended_at - first_at)


def test_sse_through_curl(app):
    out = subprocess.run(["curl", "-sS", "-N", "--max-time", "10", app.url + "/sse"],
                         capture_output=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout == RETRY + EVENTS


def test_sse_through_httpx_line_by_line(app):
    with httpx.Client(timeout=10) as client:
        with client.stream("GET", app.url + "/sse", headers={"Accept": "text/event-stream"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = list(r.iter_lines())
    # iter_lines splits at line ends, so each blank line between events is an empty string
    assert lines[:2] == ["retry: 1000", ""]
    assert lines[2:6] == ["id: 1", "event: tick", 'data: {"n": 1}', ""]
    assert "\n".join(lines) + "\n" == (RETRY + EVENTS).decode()


def test_sse_over_http2(app):
    with httpx.Client(http1=False, http2=True, timeout=10) as client:
        r = client.get(app.url + "/sse")
    assert r.http_version == "HTTP/2"
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache"
    assert r.content == RETRY + EVENTS


def test_sse_last_event_id_resumes_after_it(app):
    for last, first in (("1", 2), ("2", 3)):
        r = httpx.get(app.url + "/sse", headers={"Last-Event-ID": last}, timeout=10)
        assert r.status_code == 200
        events, retry = parse_event_stream(r.content)
        assert retry == 1000
        assert events == expected_events(first), (last, r.content)


def test_sse_last_event_id_past_the_end_or_not_a_number(app):
    for last, want in (("99", RETRY), ("0", RETRY + EVENTS), ("abc", RETRY + EVENTS), ("-1", RETRY + EVENTS)):
        r = httpx.get(app.url + "/sse", headers={"Last-Event-ID": last}, timeout=10)
        assert r.status_code == 200 and r.content == want, (last, r.content)


def test_sse_last_event_id_3_gets_the_head_and_an_ended_stream(app):
    start = time.monotonic()
    r = httpx.get(app.url + "/sse", headers={"Last-Event-ID": "3"}, timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.content == RETRY
    assert time.monotonic() - start < 2.5, "the ended stream was held open"


def test_sse_client_leaving_early_does_not_hurt_the_app(app):
    # Leave right after the first event; the app's next write finds the client gone.
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", app.port), timeout=5)
        s.sendall(b"GET /sse HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b'"n": 1' not in got:
            got += s.recv(4096)
        s.close()
    time.sleep(0.4)   # the remaining writes of all five have happened by now
    assert httpx.get(app.url + "/sse", timeout=10).content == RETRY + EVENTS
