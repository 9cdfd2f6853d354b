"""Each request costs one ABI call: none to read it, one to answer it."""
import asyncio
import collections

import requests

import ember
from ember import _lib, response, server


class _Counting:
    """Stands in for the loaded library and counts every ember_ call made through it."""

    def __init__(self, lib):
        self._lib = lib
        self.calls = collections.Counter()

    def __getattr__(self, name):
        fn = getattr(self._lib, name)

        def counted(*args):
            self.calls[name] += 1
            return fn(*args)

        return counted


def test_one_abi_call_per_request_for_plain_and_async_handlers(monkeypatch, dispatch):
    counting = _Counting(_lib.lib)
    monkeypatch.setattr(_lib, "lib", counting)
    # Calls that keep the GIL go through the PyDLL view of the same library: one count.
    held = _Counting(_lib.held)
    held.calls = counting.calls
    monkeypatch.setattr(_lib, "held", held)
    monkeypatch.setattr(server, "L", counting)
    monkeypatch.setattr(response, "_respond", counting.ember_request_respond)

    app = ember.Server(dispatch=dispatch)

    @app.get("/sync/{id}")
    def sync(req):
        return {"id": req.params["id"], "q": req.query, "ua": req.headers.get("user-agent")}

    @app.get("/async")
    async def coro(req):
        await asyncio.sleep(0)
        return req.body

    port = app.start()
    try:
        with requests.Session() as s:
            s.get("http://127.0.0.1:%d/sync/0" % port)  # connection set up
            counting.calls.clear()
            for i in range(25):
                assert s.get("http://127.0.0.1:%d/sync/%d?a=b" % (port, i)).status_code == 200
                assert s.get("http://127.0.0.1:%d/async" % port).status_code == 200
        assert dict(counting.calls) == {"ember_request_respond": 50}
    finally:
        app.stop()
