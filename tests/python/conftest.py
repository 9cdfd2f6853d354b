"""Fixtures for the binding tests: every test serves real HTTP on 127.0.0.1."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINDING = os.path.join(ROOT, "bindings", "python")
# EMBER_TEST_INSTALLED=1 (scripts/wheel.sh): test the installed package, not the checkout.
if os.environ.get("EMBER_TEST_INSTALLED") != "1" and BINDING not in sys.path:
    sys.path.insert(0, BINDING)

import ember  # noqa: E402


class Served:
    def __init__(self, app, port):
        self.app = app
        self.port = port
        self.url = "http://127.0.0.1:%d" % port


@pytest.fixture(params=["auto", "pool", "inline"])
def dispatch(request):
    return request.param


@pytest.fixture
def serve():
    """serve(setup, **server_options) -> Served; setup(app) registers the routes."""
    started = []

    def make(setup, **options):
        app = ember.Server(**options)
        setup(app)
        port = app.start(0)
        started.append(app)
        return Served(app, port)

    yield make
    for app in started:
        app.stop(timeout=2)


@pytest.fixture
def asgi():
    """asgi(app, **options) -> base URL of a started ASGIServer on a free port."""
    from ember.asgi import ASGIServer

    started = []

    def make(app, **options):
        options.setdefault("port", 0)
        server = ASGIServer(app, **options)
        port = server.start()
        started.append(server)
        return "http://127.0.0.1:%d" % port

    yield make
    for server in started:
        server.stop(timeout=2)


def child_env(**extra):
    """Environment for a subprocess that imports the binding from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = BINDING + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
