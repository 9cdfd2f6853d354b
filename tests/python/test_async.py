"""async def handlers: run on an asyncio loop, answered through the deferred path."""
import asyncio
import concurrent.futures
import http.client
import logging
import threading
import time

import requests

import ember


def _get(port, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_100_concurrent_sleeping_handlers_finish_together(serve, dispatch):
    def setup(app):
        @app.get("/nap/{n}")
        async def nap(req):
            await asyncio.sleep(0.3)
            return {"n": req.params["n"]}

    s = serve(setup, dispatch=dispatch)
    _get(s.port, "/nap/warmup")
    start = threading.Barrier(100)

    def one(i):
        start.wait()
        return _get(s.port, "/nap/%d" % i)

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(100) as pool:
        results = list(pool.map(one, range(100)))
    elapsed = time.monotonic() - t0
    assert [st for st, _ in results] == [200] * 100
    assert [b for _, b in results] == [b'{"n": "%d"}' % i for i in range(100)]
    # Serially this would take 30 s; together it is one nap plus overhead.
    assert elapsed < 2.0, elapsed


def test_async_exception_answers_500_and_logs(serve, caplog):
    def setup(app):
        @app.get("/boom")
        async def boom(req):
            await asyncio.sleep(0)
            raise KeyError("hidden")

    s = serve(setup)
    with caplog.at_level(logging.ERROR, logger="ember"):
        r = requests.get(s.url + "/boom")
    assert r.status_code == 500 and "hidden" not in r.text
    assert "KeyError" in caplog.text


def test_async_handler_reads_request_after_awaiting(serve, dispatch):
    def setup(app):
        @app.post("/late-read/{id}")
        async def late(req):
            await asyncio.sleep(0.05)
            return {"id": req.params["id"], "body": req.text, "h": req.headers["x-h"],
                    "q": req.query}

    s = serve(setup, dispatch=dispatch)
    r = requests.post(s.url + "/late-read/7?a=b", data="payload", headers={"X-H": "v"})
    assert r.json() == {"id": "7", "body": "payload", "h": "v", "q": {"a": "b"}}


def test_sync_handler_returning_a_coroutine_is_awaited(serve):
    async def work(req):
        await asyncio.sleep(0.01)
        return "from coroutine"

    def setup(app):
        app.add_route("GET", "/", lambda req: work(req))

    s = serve(setup)
    assert requests.get(s.url + "/").text == "from coroutine"


def test_async_handlers_on_a_loop_the_user_owns():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    seen = {}
    try:
        app = ember.Server(loop=loop)

        @app.get("/")
        async def h(req):
            seen["loop"] = asyncio.get_running_loop()
            return "ok"

        port = app.start()
        assert requests.get("http://127.0.0.1:%d/" % port).text == "ok"
        app.stop()
        assert seen["loop"] is loop and loop.is_running()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_slow_coroutine_does_not_block_other_requests(serve):
    def setup(app):
        @app.get("/slow")
        async def slow(req):
            await asyncio.sleep(1.0)
            return "slow"

        @app.get("/fast")
        def fast(req):
            return "fast"

    s = serve(setup, dispatch="inline", workers=1)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(_get, s.port, "/slow") for _ in range(3)]
        time.sleep(0.05)
        t0 = time.monotonic()
        assert _get(s.port, "/fast") == (200, b"fast")
        assert time.monotonic() - t0 < 0.5
        assert [f.result()[1] for f in slow] == [b"slow"] * 3
