"""The request crossing: the C extension ember._speedups when it is built, ctypes when it
is not or when EMBER_PY_SPEEDUPS=0. Both must answer the same, and the extension must
refuse misuse with exceptions or engine error codes, never a crash."""
import glob
import os
import subprocess
import sys

import pytest
import requests

import ember
from ember import _crossing, _lib

from conftest import child_env

BUILT = bool(glob.glob(os.path.join(os.path.dirname(ember.__file__), "_speedups*")))
FORCED_OFF = os.environ.get("EMBER_PY_SPEEDUPS", "1") == "0"


def crossing_in_child(**env):
    out = subprocess.run([sys.executable, "-c", "import ember; print(ember.crossing)"],
                         env=child_env(**env), capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_the_built_extension_is_the_crossing_in_use():
    # The suite builds the extension (tests/run_python.sh, scripts/wheel.sh); finding it
    # built but unused would mean the fast path silently fell back.
    if FORCED_OFF:
        assert ember.crossing == "ctypes" and _crossing.speedups is None
    elif BUILT:
        assert ember.crossing == "c"
        assert _crossing.C_HANDLER is not None
    else:
        assert ember.crossing == "ctypes"
    if os.environ.get("EMBER_REQUIRE_SPEEDUPS") == "1":
        assert BUILT, "ember._speedups was not built"


def test_the_environment_variable_forces_ctypes():
    assert crossing_in_child(EMBER_PY_SPEEDUPS="0") == "ctypes"
    if BUILT:
        assert crossing_in_child(EMBER_PY_SPEEDUPS="1") == "c"


@pytest.mark.parametrize("flag", ["0", "1"])
def test_both_crossings_answer_alike(flag):
    code = (
        "import ember, sys\n"
        "app = ember.Server(dispatch='inline')\n"
        "app.get('/')(lambda r: {'code': 1})\n"
        "app.get('/u/{id}')(lambda r: ember.Response(r.params['id'], status=201, headers={'X-A': 'b'}))\n"
        "def fail(r): raise RuntimeError('boom')\n"
        "app.get('/fail')(fail)\n"
        "port = app.start(0)\n"
        "print(port, ember.crossing, flush=True)\n"
        "sys.stdin.read()\n"
        "app.stop(timeout=2)\n")
    p = subprocess.Popen([sys.executable, "-c", code], env=child_env(EMBER_PY_SPEEDUPS=flag),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port, crossing = p.stdout.readline().split()
        assert crossing == ("c" if flag == "1" and BUILT else "ctypes")
        base = "http://127.0.0.1:%s" % port
        for _ in range(3):  # the second answer of a constant Response is a prepared one
            r = requests.get(base + "/")
            assert (r.status_code, r.json()) == (200, {"code": 1})
            assert r.headers["content-type"] == "application/json"
        r = requests.get(base + "/u/42")
        assert (r.status_code, r.text, r.headers["x-a"]) == (201, "42", "b")
        assert requests.get(base + "/fail").status_code == 500
        assert requests.get(base + "/").status_code == 200  # still serving
    finally:
        _, err = p.communicate("", timeout=30)
    assert p.returncode == 0, err
    assert "RuntimeError: boom" in err  # the failure was logged


@pytest.mark.skipif(_crossing.speedups is None, reason="the C crossing is not in use")
def test_the_extension_refuses_misuse():
    sp = _crossing.speedups
    # A handle the engine never gave out: its error code, as through ctypes.
    assert sp.respond(12345, 200, b"", b"x") == _lib.ERR_INVALID_HANDLE
    assert sp.respond(0, 200, b"", b"") == _lib.lib.ember_request_respond(0, 200, b"", 0, b"", 0)
    assert sp.respond_answer(12345, 0) == _lib.lib.ember_request_respond_answer(12345, 0)
    assert sp.respond_answer(12345, _lib.Answer(0)) == _lib.lib.ember_request_respond_answer(12345, 0)
    with pytest.raises(TypeError):
        sp.respond(1, 200, "text", b"")
    with pytest.raises(TypeError):
        sp.respond(1, 200, b"", None)
    with pytest.raises(TypeError):
        sp.respond("1", 200, b"", b"")
    with pytest.raises(TypeError):
        sp.respond(1, 200, b"")
    with pytest.raises(TypeError):
        sp.register(42)
    with pytest.raises(TypeError):
        sp.register(print, (), object, object, print, print)
    with pytest.raises((ValueError, TypeError)):
        sp.bind(0, 0)
    sp.unregister(0)  # no such key: nothing happens
    sp.unregister(10**6)


@pytest.mark.skipif(_crossing.speedups is None, reason="the C crossing is not in use")
def test_a_server_the_extension_cannot_take_crosses_through_ctypes(monkeypatch):
    # The extension's server keys are never reused, so a long-lived process can run out of
    # them: such a server must still start and answer, through ctypes.
    def full(*args):
        raise RuntimeError("ember._speedups: too many servers in this process")

    monkeypatch.setattr(_crossing.speedups, "register", full, raising=False)
    app = ember.Server(dispatch="inline")
    app.get("/")(lambda r: ember.Response("via ctypes", status=200))
    port = app.start(0)
    try:
        r = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert (r.status_code, r.text) == (200, "via ctypes")
    finally:
        app.stop(timeout=2)
