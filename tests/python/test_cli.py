"""The command line: python -m ember module:app (ASGI or WSGI, --workers N, signals, exit codes)."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from conftest import ROOT, child_env

APPS = '''
import asyncio, json, os

async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["path"] == "/slow":
        await asyncio.sleep(1.0)
    body = json.dumps({"pid": os.getpid(), "kind": "asgi"}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})

def wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps({"pid": os.getpid(), "kind": "wsgi"}).encode()]

class Holder:
    app = staticmethod(wsgi_app)

def make_app():
    return asgi_app

async def failing_startup(scope, receive, send):
    assert scope["type"] == "lifespan"
    await receive()
    await send({"type": "lifespan.startup.failed", "message": "no database"})
'''


@pytest.fixture
def appdir(tmp_path):
    (tmp_path / "cliapps.py").write_text(APPS)
    return tmp_path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    def __init__(self, args, appdir):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "ember", "--app-dir", str(appdir),
                                      "--port", str(self.port)] + args,
                                     cwd=ROOT, env=child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.url = "http://127.0.0.1:%d" % self.port

    def wait_listening(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()
            try:
                return requests.get(self.url + "/", timeout=2).json()
            except requests.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("not listening")

    def stop(self, sig=signal.SIGTERM, timeout=20):
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err


def run_cli(args, appdir, timeout=30):
    return subprocess.run([sys.executable, "-m", "ember", "--app-dir", str(appdir)] + args, cwd=ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("spec,kind", [("cliapps:asgi_app", "asgi"), ("cliapps:wsgi_app", "wsgi"),
                                       ("cliapps:Holder.app", "wsgi")])
def test_auto_interface_serves_and_sigterm_stops_cleanly(appdir, spec, kind):
    r = Running([spec], appdir)
    assert r.wait_listening()["kind"] == kind
    code, err = r.stop()
    assert code == 0, err
    # auto dispatch is the default for both interfaces
    assert re.search(r"listening on http://127\.0\.0\.1:%d \(%s, auto dispatch" % (r.port, kind.upper()), err), err
    assert "stopped" in err


def test_factory_and_explicit_interface(appdir):
    r = Running(["cliapps:make_app", "--factory", "--interface", "asgi", "--dispatch", "pool"], appdir)
    assert r.wait_listening()["kind"] == "asgi"
    code, err = r.stop(signal.SIGINT)
    assert code == 0, err


def test_sigterm_lets_an_in_flight_request_finish(appdir):
    import threading
    r = Running(["cliapps:asgi_app"], appdir)
    r.wait_listening()
    result = {}
    t = threading.Thread(target=lambda: result.update(r=requests.get(r.url + "/slow", timeout=10)))
    t.start()
    time.sleep(0.3)
    code, err = r.stop()
    t.join()
    assert code == 0, err
    assert result["r"].status_code == 200


def test_workers_share_the_port_and_all_stop_on_sigterm(appdir):
    r = Running(["cliapps:asgi_app", "--workers", "2"], appdir)
    r.wait_listening()
    pids = set()
    deadline = time.monotonic() + 20
    while len(pids) < 2 and time.monotonic() < deadline:
        with requests.Session() as s:  # a new connection each time: the kernel picks a worker
            pids.add(s.get(r.url + "/", headers={"Connection": "close"}).json()["pid"])
    assert len(pids) == 2, pids
    assert r.proc.pid not in pids  # the supervisor serves nothing itself
    code, err = r.stop()
    assert code == 0, err
    assert "(2 workers" in err
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_worker_that_dies_is_replaced(appdir):
    r = Running(["cliapps:wsgi_app", "--workers", "2"], appdir)
    r.wait_listening()
    victim = r.wait_listening()["pid"]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 20
    pids = set()
    while len(pids) < 2 and time.monotonic() < deadline:
        try:
            pids.add(requests.get(r.url + "/", headers={"Connection": "close"}, timeout=2).json()["pid"])
        except requests.ConnectionError:
            time.sleep(0.05)
    assert victim not in pids and len(pids) == 2
    code, err = r.stop()
    assert code == 0, err
    assert "starting a new one" in err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_lifespan_startup_failure_exits_3_with_the_message(appdir, workers):
    p = run_cli(["cliapps:failing_startup", "--port", str(free_port()), "--workers", workers], appdir)
    assert p.returncode == 3, p.stderr
    assert "lifespan startup failed: no database" in p.stderr


def test_bad_app_names_exit_1_with_a_clear_message(appdir):
    p = run_cli(["nosuchmodule:app"], appdir)
    assert p.returncode == 1 and "cannot import module 'nosuchmodule'" in p.stderr
    p = run_cli(["cliapps:nothing"], appdir)
    assert p.returncode == 1 and "has no attribute 'nothing'" in p.stderr
    p = run_cli(["cliapps:APPS_MISSING.x"], appdir)
    assert p.returncode == 1


def test_port_in_use_exits_1(appdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = run_cli(["cliapps:asgi_app", "--port", str(port)], appdir)
    assert p.returncode == 1
    assert "Address already in use" in p.stderr or "EMBER_ERR_BIND" in p.stderr


def test_console_script_is_declared():
    text = open(os.path.join(ROOT, "bindings", "python", "pyproject.toml")).read()
    assert re.search(r'^\[project\.scripts\]\s*\nember = "ember\.cli:run"', text, re.M)
    p = subprocess.run([sys.executable, "-c", "import ember.cli, sys; sys.argv = ['ember', '--version']; ember.cli.run()"],
                       cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and p.stdout.startswith("ember "), p.stdout + p.stderr


def test_help_names_the_options():
    p = subprocess.run([sys.executable, "-m", "ember", "--help"], cwd=ROOT, env=child_env(),
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0
    for option in ("--host", "--port", "--interface", "--workers", "--dispatch", "--root-path", "--lifespan"):
        assert option in p.stdout


@pytest.mark.parametrize("spec,expected", [("asgi_hello:app", {"hello": "asgi"}),
                                           ("wsgi_hello:app", {"hello": "wsgi", "path": "/"})])
def test_the_samples_run_from_the_command_line(spec, expected):
    r = Running([spec], os.path.join(ROOT, "samples", "python"))
    try:
        assert r.wait_listening() == expected
        echo = requests.post(r.url + "/echo", data=b"\x00raw", headers={"Content-Type": "application/x-test"})
        assert (echo.content, echo.headers["content-type"]) == (b"\x00raw", "application/x-test")
    finally:
        code, err = r.stop()
    assert code == 0, err
