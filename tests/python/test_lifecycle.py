"""Start, stop, restart, several servers, references released, shutdown paths."""
import asyncio
import gc
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import pytest
import requests

import ember
from conftest import ROOT, child_env


def _hello_app(**options):
    app = ember.Server(**options)

    @app.get("/")
    def hello(req):
        return "hello"

    return app


def test_start_stop_cycles_on_one_server_and_on_new_ones(dispatch):
    app = _hello_app(dispatch=dispatch)
    for _ in range(5):
        port = app.start()
        assert app.running and app.port == port
        assert requests.get("http://127.0.0.1:%d/" % port).text == "hello"
        app.stop()
        assert not app.running
        app.stop()  # idempotent
    for _ in range(5):
        other = _hello_app(dispatch=dispatch)
        port = other.start()
        assert requests.get("http://127.0.0.1:%d/" % port).text == "hello"
        other.stop()


def test_stopped_server_refuses_connections():
    app = _hello_app()
    port = app.start()
    app.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/" % port, timeout=2)


def test_two_servers_at_once_serve_their_own_routes():
    a, b = ember.Server(), ember.Server(dispatch="inline")
    a.add_route("GET", "/", lambda req: "a")
    b.add_route("GET", "/", lambda req: "b")
    pa, pb = a.start(), b.start()
    try:
        assert pa != pb
        for _ in range(3):
            assert requests.get("http://127.0.0.1:%d/" % pa).text == "a"
            assert requests.get("http://127.0.0.1:%d/" % pb).text == "b"
        a.stop()
        assert requests.get("http://127.0.0.1:%d/" % pb).text == "b"
    finally:
        a.stop()
        b.stop()


def test_handlers_are_garbage_after_stop():
    class Handler:
        def __call__(self, req):
            return "x"

    async def coro_handler(req):
        return "y"

    app = ember.Server()
    h = Handler()
    app.add_route("GET", "/", h)
    app.add_route("GET", "/c", coro_handler)
    app.start()
    native = app._native
    assert requests.get("http://127.0.0.1:%d/" % app.port).text == "x"
    assert requests.get("http://127.0.0.1:%d/c" % app.port).text == "y"
    app.stop()
    # The engine called every route's release callback, which dropped the handler.
    assert native.released == 2 and native.table == [None, None, None] and native.freed
    ref, cref, aref = weakref.ref(h), weakref.ref(coro_handler), weakref.ref(app)
    del h, coro_handler, app, native
    gc.collect()
    assert ref() is None and cref() is None and aref() is None


def test_context_manager_stops_the_server():
    with _hello_app() as app:
        port = app.start()
        assert requests.get("http://127.0.0.1:%d/" % port).text == "hello"
    assert not app.running


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stop_from_inside_a_handler_does_not_deadlock(dispatch, kind):
    app = ember.Server(dispatch=dispatch)

    if kind == "sync":
        @app.get("/stop")
        def stop(req):
            app.stop()
            return "stopping"
    else:
        @app.get("/stop")
        async def stop(req):
            app.stop()
            await asyncio.sleep(0.01)
            return "stopping"

    port = app.start()
    r = requests.get("http://127.0.0.1:%d/stop" % port, timeout=5)
    assert r.text == "stopping"
    assert app.wait(5), "server did not finish stopping"
    assert not app.running


def test_wait_returns_when_another_thread_stops():
    app = _hello_app()
    app.start()
    threading.Timer(0.2, app.stop).start()
    t0 = time.monotonic()
    assert app.wait(5)
    assert time.monotonic() - t0 < 3
    assert app.wait(0) is True


def test_graceful_stop_lets_an_in_flight_request_finish():
    app = ember.Server()

    @app.get("/slow")
    def slow(req):
        time.sleep(0.4)
        return "finished"

    port = app.start()
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=requests.get("http://127.0.0.1:%d/slow" % port, timeout=5).text))
    t.start()
    time.sleep(0.1)
    app.stop(timeout=5)
    t.join(5)
    assert result == {"r": "finished"}


def test_port_in_use_raises_ember_error_and_server_can_start_elsewhere():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    busy = s.getsockname()[1]
    app = _hello_app()
    try:
        with pytest.raises(ember.EmberError) as e:
            app.start(busy)
        assert e.value.name == "EMBER_ERR_BIND" and str(busy) in str(e.value)
        assert not app.running
        port = app.start(0)
        assert requests.get("http://127.0.0.1:%d/" % port).text == "hello"
    finally:
        app.stop()
        s.close()


def test_bad_route_pattern_raises_at_start():
    app = ember.Server()
    app.add_route("GET", "/x/{unclosed", lambda req: "x")
    with pytest.raises(ember.EmberError) as e:
        app.start()
    assert e.value.name == "EMBER_ERR_ROUTE"
    assert not app.running


def test_routes_cannot_change_while_running():
    app = _hello_app()
    app.start()
    try:
        with pytest.raises(RuntimeError):
            app.add_route("GET", "/late", lambda req: "")
    finally:
        app.stop()


def test_stats_count_requests():
    app = _hello_app()
    port = app.start()
    try:
        for _ in range(3):
            requests.get("http://127.0.0.1:%d/" % port)
        requests.get("http://127.0.0.1:%d/missing" % port)
        st = app.stats()
        assert st["requests"] >= 4 and st["responses_2xx"] >= 3 and st["responses_4xx"] >= 1
    finally:
        app.stop()


def _run_child(code, timeout=20, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          env=child_env(**env), capture_output=True, text=True, timeout=timeout)


def test_missing_library_gives_an_import_error_naming_every_place_tried():
    missing = "/nonexistent/dir/libember.so"
    p = _run_child("import ember", EMBER_LIBRARY=missing)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and missing in p.stderr and "EMBER_LIBRARY" in p.stderr


def test_every_lookup_place_is_listed_when_none_has_the_library(tmp_path):
    # Copy the package alone somewhere without a target/ folder next to it.
    import shutil

    pkg = tmp_path / "ember"
    shutil.copytree(os.path.join(ROOT, "bindings", "python", "ember"), pkg,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "EMBER_LIBRARY"}
    env["PYTHONPATH"] = str(tmp_path)
    p = subprocess.run([sys.executable, "-c", "import ember"], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert str(pkg / "libember.so") in p.stderr
    assert os.path.join("target", "release", "libember.so") in p.stderr
    assert os.path.join("target", "debug", "libember.so") in p.stderr


def test_interpreter_exit_with_a_running_server_is_clean(dispatch):
    p = _run_child("""
        import asyncio, os, threading, time, urllib.request, ember
        app = ember.Server(dispatch=os.environ["DISPATCH"])
        app.add_route("GET", "/", lambda req: "hi")
        @app.get("/nap")
        async def nap(req):
            await asyncio.sleep(30)
        @app.get("/block")
        def block(req):
            time.sleep(0.3)
            return "done"
        port = app.start()
        assert urllib.request.urlopen("http://127.0.0.1:%d/" % port).read() == b"hi"
        for path in ("/nap", "/block"):  # left in flight at exit
            threading.Thread(target=urllib.request.urlopen,
                             args=("http://127.0.0.1:%d%s" % (port, path),), daemon=True).start()
        time.sleep(0.1)
        print("exiting", flush=True)
    """, DISPATCH=dispatch)
    assert p.returncode == 0, p.stderr
    assert "exiting" in p.stdout
    assert "Fatal" not in p.stderr and "Segmentation" not in p.stderr, p.stderr


def test_interpreter_exit_is_bounded_when_a_handler_never_returns(dispatch):
    # Issue 13: exit used to wait without limit for a handler blocked on a pool thread.
    started = time.monotonic()
    p = _run_child("""
        import os, socket, threading, ember
        ember.server.EXIT_TIMEOUT = 2.0
        app = ember.Server(dispatch=os.environ["DISPATCH"])
        entered = threading.Event()
        @app.get("/stuck")
        def stuck(req):
            entered.set()
            threading.Event().wait()  # never returns
        port = app.start()
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /stuck HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        assert entered.wait(5)
        print("exiting", flush=True)
    """, timeout=30, DISPATCH=dispatch)
    took = time.monotonic() - started
    assert "exiting" in p.stdout
    assert "a handler still runs 2.0 s after exit began" in p.stderr, p.stderr
    assert p.returncode == 1, p.stderr  # ended on purpose, not by a signal or an abort
    assert took < 15, took


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_stops_gracefully_on_signal(sig):
    code = """
        import ember
        app = ember.Server()
        app.add_route("GET", "/", lambda req: "hi")
        app.run(0, ready=lambda port: print(port, flush=True))
        print("stopped cleanly", flush=True)
    """
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=child_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        assert requests.get("http://127.0.0.1:%d/" % port, timeout=5).text == "hi"
        p.send_signal(sig)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "stopped cleanly" in out


def test_hello_sample_serves_and_stops_on_sigint():
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "samples", "python", "hello.py")],
                         cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                r = requests.get("http://127.0.0.1:8080/hello/w%C3%B6rld", timeout=1)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or p.poll() is not None:
                    pytest.skip("hello.py could not listen on 8080: %r" % p.stderr.read())
                time.sleep(0.1)
        assert r.json() == {"hello": "wörld"}
        p.send_signal(signal.SIGINT)
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0


def test_wait_inside_a_handler_returns_after_its_timeout():
    app = ember.Server()

    @app.get("/")
    def h(req):
        t0 = time.monotonic()
        done = app.wait(0.3)
        return {"done": done, "waited": round(time.monotonic() - t0, 1)}

    port = app.start()
    try:
        assert requests.get("http://127.0.0.1:%d/" % port, timeout=5).json() == {"done": False, "waited": 0.3}
    finally:
        app.stop()


def test_engine_calls_do_not_hold_the_gil():
    app = _hello_app()
    app.start()
    counter = [0]
    running = [True]

    def spin():
        while running[0]:
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = counter[0]
        assert app.wait(0.5) is False  # blocks in ember_server_wait slices
        during_wait = counter[0] - before
        before = counter[0]
        app.stop(timeout=1)
        assert during_wait > 1000, during_wait
    finally:
        running[0] = False
        t.join()


def test_second_signal_during_the_drain_does_not_kill_the_process():
    code = """
        import time, ember
        app = ember.Server()
        @app.get("/slow")
        def slow(req):
            time.sleep(1.0)
            return "drained"
        app.run(0, ready=lambda port: print(port, flush=True))
        print("stopped cleanly", flush=True)
    """
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=child_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        result = {}
        t = threading.Thread(target=lambda: result.update(
            r=requests.get("http://127.0.0.1:%d/slow" % port, timeout=10).text))
        t.start()
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=10)
        t.join(10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "stopped cleanly" in out and result == {"r": "drained"}
