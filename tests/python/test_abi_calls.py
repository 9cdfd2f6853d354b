"""Each request costs one ABI call: none to read it, one to answer it."""
import asyncio
import collections

import requests

import ember
from ember import _crossing, _lib, response, server


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


class _Renamed:
    """The extension's answer functions, counted under the engine function they call."""

    def __init__(self, counting):
        self._c = counting

    def __getattr__(self, name):
        if name in ("respond", "respond_answer"):
            fn = getattr(self._c._lib, name)

            def counted(*args):
                self._c.calls["ember_request_" + name] += 1
                return fn(*args)
            return counted
        return getattr(self._c._lib, name)


def test_one_abi_call_per_request_for_plain_and_async_handlers(monkeypatch, dispatch):
    counting = _Counting(_lib.lib)
    monkeypatch.setattr(_lib, "lib", counting)
    # Calls that keep the GIL go through the PyDLL view of the same library: one count.
    held = _Counting(_lib.held)
    held.calls = counting.calls
    monkeypatch.setattr(_lib, "held", held)
    monkeypatch.setattr(server, "L", counting)
    monkeypatch.setattr(response, "_respond", counting.ember_request_respond)
    if _crossing.speedups is not None:
        # The C crossing answers through the extension, which calls the engine directly.
        fast = _Counting(_crossing.speedups)
        fast.calls = counting.calls
        monkeypatch.setattr(_crossing, "speedups", _Renamed(fast))
        monkeypatch.setattr(response, "_fast", _Renamed(fast))

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
