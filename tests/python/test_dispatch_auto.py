"""Auto dispatch (the default): handlers run on the I/O thread that read the request, and
one that blocks holds only its own connection. Which thread ran a handler is read from the
kernel's name for it: the engine names its I/O threads ``ember-io`` and its pool threads
``ember-cb-N``."""
import http.client
import threading

import ember
from ember.errors import WouldBlock


def _thread_name() -> str:
    with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
        return f.read().strip()


def _get(port, path, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def test_the_default_dispatch_is_auto_and_runs_fast_handlers_on_the_io_thread(serve):
    assert ember.Server().dispatch == "auto"
    s = serve(lambda app: app.get("/where")(lambda req: _thread_name()))
    for _ in range(5):
        assert _get(s.port, "/where") == (200, "ember-io")


def test_a_sleeping_sync_handler_under_auto_does_not_stall_other_connections(serve):
    started, release, done = threading.Event(), threading.Event(), threading.Event()
    where = []

    def setup(app):
        @app.get("/sleep")
        def sleep(req):
            import time
            where.append(_thread_name())
            started.set()
            # Blocks in time.sleep (as a database call would) until the test has its answers;
            # the cap only keeps a broken engine from hanging the test run.
            for _ in range(6000):
                if release.is_set():
                    break
                time.sleep(0.01)
            return "slept"

        app.get("/fast")(lambda req: "fast")

    # One I/O thread: the sleeper takes it (and the one inline slot); the spare I/O
    # thread must take over the other sockets.
    s = serve(setup, dispatch="auto", workers=1)
    slept = []

    def sleeper():
        slept.append(_get(s.port, "/sleep"))
        done.set()

    t = threading.Thread(target=sleeper)
    t.start()
    try:
        assert started.wait(30), "the sleeping handler never started"
        assert where == ["ember-io"], "the first request should run inline, on the I/O thread"
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        for _ in range(20):
            c.request("GET", "/fast")
            r = c.getresponse()
            assert (r.status, r.read()) == (200, b"fast")
            assert not done.is_set()  # every fast answer came while the handler slept
        c.close()
    finally:
        release.set()
        t.join(60)
    assert slept == [(200, "slept")]


def test_pool_and_stream_body_routes_run_on_the_pool_under_auto(serve):
    def setup(app):
        app.get("/pooled", pool=True)(lambda req: _thread_name())
        app.get("/plain")(lambda req: _thread_name())

        @app.post("/upload", stream_body=True)
        def upload(req):
            n = len(req.stream.readall())  # a blocking read: allowed on the pool
            return f"{_thread_name()} {n}"

    s = serve(setup, dispatch="auto")
    assert _get(s.port, "/plain") == (200, "ember-io")
    status, name = _get(s.port, "/pooled")
    assert status == 200 and name.startswith("ember-cb-")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("POST", "/upload", body=b"x" * 300_000)
    r = c.getresponse()
    name, n = r.read().decode().split()
    assert r.status == 200 and name.startswith("ember-cb-") and n == "300000"
    c.close()


def test_a_blocking_streamed_write_works_on_a_pool_route_under_auto(serve):
    # 4 MiB through a 64 KiB queue: write() waits for room, which only a pool thread may.
    chunk = b"y" * 65536

    def setup(app):
        @app.get("/big", pool=True)
        def big(req):
            with req.stream_response(content_type="application/octet-stream") as out:
                for _ in range(64):
                    out.write(chunk)

    s = serve(setup, dispatch="auto", stream_queue_bytes=65536)
    status, body = _get(s.port, "/big")
    assert status == 200 and len(body) == 64 * 65536


def test_a_blocking_streamed_write_inline_under_auto_raises_would_block(serve):
    # The same handler without pool=True runs on its connection's I/O thread, which is the
    # thread that would have to make room: the write refuses to wait instead of hanging.
    raised = []

    def setup(app):
        @app.get("/big")
        def big(req):
            out = req.stream_response(content_type="application/octet-stream")
            try:
                for _ in range(64):
                    out.write(b"y" * 65536)
            except WouldBlock as e:
                raised.append(e)
                out.abort()

    s = serve(setup, dispatch="auto", stream_queue_bytes=65536)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("GET", "/big")
    try:
        c.getresponse().read()
    except (http.client.HTTPException, ConnectionError):
        pass  # the aborted answer is cut (or never started, when the abort came first)
    c.close()
    assert len(raised) == 1


def test_dispatch_names_are_checked():
    try:
        ember.Server(dispatch="threads")
    except ValueError as e:
        assert "auto" in str(e)
    else:
        raise AssertionError("an unknown dispatch was accepted")
