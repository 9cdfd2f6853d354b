"""ember.sse: event framing, EventStream (sync and async), Last-Event-ID, keep-alive, and
the iterable form; read with httpx line by line and parsed as the HTML standard says."""
import asyncio
import re
import threading
import time

import httpx
import pytest

import ember
from ember.sse import Event, EventStream, format_event


def parse(text):
    """The HTML standard's event-stream interpretation: (events, retry, comments)."""
    events, data, etype, last_id, retry, comments = [], [], "", "", None, []
    for line in re.split(r"\r\n|\r|\n", text):
        if line == "":
            if data:
                events.append({"type": etype or "message", "data": "\n".join(data), "id": last_id})
            data, etype = [], ""
            continue
        if line.startswith(":"):
            comments.append(line[1:].strip())
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            etype = value
        elif field == "id" and "\0" not in value:
            last_id = value
        elif field == "retry" and value.isdigit():
            retry = int(value)
    return events, retry, comments


def test_format_event_frames_fields_and_splits_data_lines():
    assert format_event("hi") == b"data: hi\n\n"
    assert format_event({"n": 1}, event="tick", id=1) == b'id: 1\nevent: tick\ndata: {"n": 1}\n\n'
    assert format_event("a\r\nb\rc\nd", retry=500) == b"retry: 500\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    assert format_event(b"bytes \xc3\xa9") == "data: bytes é\n\n".encode()
    assert format_event("", event="empty") == b"event: empty\ndata: \n\n"
    assert format_event(comment="two\nlines") == b": two\n: lines\n\n"
    # line breaks in event or id would forge fields
    for bad in ({"event": "a\nb"}, {"id": "1\r2"}, {"id": "nul\0"}):
        with pytest.raises(ValueError):
            format_event("x", **bad)
    with pytest.raises(ValueError):
        format_event("x", retry=-1)
    events, _, _ = parse(format_event("line1\nline2", event="multi", id="7").decode())
    assert events == [{"type": "multi", "data": "line1\nline2", "id": "7"}]


def _sse_app(app):
    @app.get("/sync")
    def sync_events(req):
        with EventStream(req, retry=1500, keepalive=None) as es:
            start = int(es.last_event_id or 0)
            for n in range(start + 1, 4):
                es.send(f"sync {n}\nsecond line", event="tick", id=n)
                time.sleep(0.05)

    @app.get("/async")
    async def async_events(req):
        async with EventStream(req, retry=1500, keepalive=None) as es:
            start = int(es.last_event_id or 0)
            for n in range(start + 1, 4):
                await es.send({"n": n}, event="tick", id=n)
                await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_event_stream_head_body_and_last_event_id(serve, dispatch, kind):
    if kind == "sync" and dispatch == "inline":
        pytest.skip("a sync handler that sleeps does not belong on an inline I/O thread")
    s = serve(_sse_app, dispatch=dispatch)
    with httpx.stream("GET", s.url + "/" + kind) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["transfer-encoding"] == "chunked"
        lines = list(r.iter_lines())
    events, retry, _ = parse("\n".join(lines) + "\n")
    assert retry == 1500
    assert [e["id"] for e in events] == ["1", "2", "3"] and {e["type"] for e in events} == {"tick"}
    if kind == "sync":
        assert events[0]["data"] == "sync 1\nsecond line"
    else:
        assert events[2]["data"] == '{"n": 3}'
    r = httpx.get(s.url + "/" + kind, headers={"Last-Event-ID": "2"})
    events, _, _ = parse(r.text)
    assert [e["id"] for e in events] == ["3"]


def test_events_arrive_as_sent_not_at_the_end(serve):
    def setup(app):
        @app.get("/paced")
        async def paced(req):
            async with EventStream(req, keepalive=None) as es:
                for n in range(3):
                    await es.send(n)
                    await asyncio.sleep(0.2)

    s = serve(setup)
    times = []
    with httpx.stream("GET", s.url + "/paced") as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                times.append(time.monotonic())
    assert len(times) == 3 and times[2] - times[0] >= 0.3


def test_keepalive_comments_flow_while_idle_and_stop_with_the_stream(serve):
    done = threading.Event()

    def setup(app):
        @app.get("/idle")
        async def idle(req):
            async with EventStream(req, keepalive=0.1) as es:
                await asyncio.sleep(0.55)
                await es.send("after the wait")
            done.set()

    s = serve(setup)
    r = httpx.get(s.url + "/idle", timeout=10)
    events, _, comments = parse(r.text)
    assert events == [{"type": "message", "data": "after the wait", "id": ""}]
    assert 3 <= comments.count("keep-alive") <= 6, comments
    assert done.wait(5)


def test_the_iterable_form_and_a_client_that_leaves(serve, dispatch):
    def setup(app):
        @app.get("/iter")
        def iterable(req):
            return ember.sse.stream((Event({"i": i}, event="item", id=i) if i % 2 else f"plain {i}"
                                     for i in range(4)), retry=100)

        @app.get("/aiter")
        async def aiterable(req):
            async def g():
                for i in range(2):
                    yield Event(i, id=i)
            return ember.sse.stream(g())

    s = serve(setup, dispatch=dispatch)
    r = httpx.get(s.url + "/iter")
    assert r.headers["content-type"] == "text/event-stream"
    events, retry, _ = parse(r.text)
    assert retry == 100
    assert events == [{"type": "message", "data": "plain 0", "id": ""},
                      {"type": "item", "data": '{"i": 1}', "id": "1"},
                      {"type": "message", "data": "plain 2", "id": "1"},
                      {"type": "item", "data": '{"i": 3}', "id": "3"}]
    events, _, _ = parse(httpx.get(s.url + "/aiter").text)
    assert [e["data"] for e in events] == ["0", "1"]


def test_a_sync_event_stream_to_a_departed_client_raises_client_disconnected(serve):
    seen = []

    def setup(app):
        @app.get("/forever")
        def forever(req):
            es = EventStream(req, keepalive=None)
            try:
                while True:
                    es.send("x" * 10000)
            except ember.ClientDisconnected:
                seen.append(es.aborted)

    s = serve(setup, dispatch="pool")
    with httpx.stream("GET", s.url + "/forever") as r:
        next(r.iter_bytes())
    from streamutil import wait_for
    assert wait_for(lambda: seen, 10) and seen == [True]
