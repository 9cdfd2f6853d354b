"""Real frameworks on Ember, each answer compared with the same app on the server its users
run today: uvicorn for ASGI, gunicorn (sync workers) for WSGI.

Runs in the venv tests/run_python.sh makes (tests/frameworks/requirements.txt, plus the
binding installed with pip, so the ``ember`` console script is the one under test).
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
BIN = Path(sys.executable).parent

# Headers whose values must match between Ember and the reference server (when present
# in either). date/server/connection differ by nature; content-length is compared
# through the body.
COMPARED = ("content-type", "location", "cache-control", "x-stamp", "x-tea", "etag", "last-modified",
            "x-frame-options", "x-content-type-options", "referrer-policy", "vary", "allow")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ember_command():
    script = BIN / "ember"
    if script.exists():  # installed by pip: the console script itself is under test
        return [str(script)]
    return [sys.executable, "-m", "ember"]


class Proc:
    def __init__(self, name, argv, port, env=None):
        self.name, self.port = name, port
        self.url = "http://127.0.0.1:%d" % port
        penv = dict(os.environ)
        penv.update(env or {})
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(argv, cwd=str(APPS), env=penv, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited early: %s" % (name, self.output()))
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("%s not listening: %s" % (name, self.output()))

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Pair:
    """The same app on Ember and on the reference server, and a client for each."""

    def __init__(self, spec, interface, extra=()):
        self.spec, self.interface = spec, interface
        p1, p2 = free_port(), free_port()
        env = {"PYTHONPATH": str(APPS)}
        self.ember = Proc("ember-" + spec.replace(":", "-"),
                          ember_command() + [spec, "--interface", interface, "--port", str(p1), "--app-dir",
                                             str(APPS)] + list(extra), p1, env)
        if interface == "asgi":
            ref = [sys.executable, "-m", "uvicorn", spec, "--port", str(p2), "--app-dir", str(APPS),
                   "--no-access-log", "--log-level", "warning"]
        else:
            ref = [sys.executable, "-m", "gunicorn", "--worker-class", "sync", "--workers", "1",
                   "--bind", "127.0.0.1:%d" % p2, "--chdir", str(APPS), "--log-level", "warning", spec]
        try:
            self.ref = Proc("ref-" + spec.replace(":", "-"), ref, p2, env)
        except BaseException:
            self.ember.stop()
            raise
        self.a = httpx.Client(base_url=self.ember.url, timeout=10)
        self.b = httpx.Client(base_url=self.ref.url, timeout=10)

    def fresh_connections(self):
        """New clients: after an app error uvicorn closes the connection (Ember keeps it)."""
        self.a.close()
        self.b.close()
        self.a = httpx.Client(base_url=self.ember.url, timeout=10)
        self.b = httpx.Client(base_url=self.ref.url, timeout=10)

    def both(self, method, path, **kw):
        """The same request to both servers: (ember's answer, the reference's answer)."""
        return self.a.request(method, path, **kw), self.b.request(method, path, **kw)

    def same(self, method, path, compare_body=True, **kw):
        """Sends the request to both and asserts status, the compared headers, the cookies
        set and the body are equal; returns Ember's answer."""
        a, b = self.both(method, path, **kw)
        what = "%s %s" % (method, path)
        assert a.status_code == b.status_code, (what, a.status_code, b.status_code, a.text[:300], b.text[:300])
        for name in COMPARED:
            va, vb = a.headers.get(name), b.headers.get(name)
            if name == "allow" and va and vb:  # Werkzeug lists the methods of a set: any order
                va, vb = sorted(va.split(", ")), sorted(vb.split(", "))
            assert va == vb, (what, name, va, vb)
        assert a.headers.get_list("set-cookie") == b.headers.get_list("set-cookie"), what
        if method == "HEAD":  # no body, but the length GET would send
            assert a.headers.get("content-length") == b.headers.get("content-length"), what
        if compare_body:
            assert a.content == b.content, (what, a.content[:300], b.content[:300])
            if method != "HEAD" and a.status_code not in (204, 304):
                # The same framing: chunked where the reference streams, else the length.
                chunked = a.headers.get("transfer-encoding") == "chunked"
                assert chunked == (b.headers.get("transfer-encoding") == "chunked"), what
                if not chunked:
                    assert a.headers.get("content-length") == str(len(a.content)), what
        assert "uvicorn" not in a.headers.get("server", "") and "gunicorn" not in a.headers.get("server", "")
        return a

    def close(self):
        self.a.close()
        self.b.close()
        codes = (self.ember.stop(), self.ref.stop())
        return codes


@pytest.fixture(scope="module")
def pair_factory():
    made = []

    def make(spec, interface, extra=()):
        p = Pair(spec, interface, extra)
        made.append(p)
        return p

    yield make
    for p in made:
        ember_log = p.ember.output() if not p.ember.log.closed else ""
        code, _ = p.close()
        assert code == 0, "Ember did not stop cleanly on SIGTERM (%s): %s" % (code, ember_log)

