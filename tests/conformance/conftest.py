"""Session fixture: start the reference app named by env EMBER_APP, hand its port to the tests,
stop it with SIGTERM at the end and require a clean exit (code 0 within 10 s).

EMBER_APP is a command line (e.g. `samples/c/ember_ref`, `python3 samples/python/ember_ref.py`);
the suite appends the port argument `0`. Relative paths are resolved from the repository root.
EMBER_DISPATCH (inline | pool) and EMBER_WORKERS pass through to the app unchanged.
"""
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import time

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 10
LISTEN_RE = re.compile(r"^listening on http://127\.0\.0\.1:(\d+)\s*$")


class App:
    def __init__(self, proc, port, stderr_file, stdout_lines):
        self.proc = proc
        self.port = port
        self.host = "127.0.0.1"
        self.url = "http://127.0.0.1:%d" % port
        self._stderr_file = stderr_file
        self._stdout_lines = stdout_lines

    def output_tail(self, n=40):
        self._stderr_file.flush()
        with open(self._stderr_file.name, "rb") as f:
            err = f.read().decode("utf-8", "replace").splitlines()[-n:]
        out = self._stdout_lines[-n:]
        return "--- app stdout (tail) ---\n%s\n--- app stderr (tail) ---\n%s" % (
            "\n".join(out), "\n".join(err))


def pytest_report_header(config):
    return "EMBER_APP=%r EMBER_DISPATCH=%r" % (
        os.environ.get("EMBER_APP"), os.environ.get("EMBER_DISPATCH", "(app default: pool)"))


def _drain(stream, lines):
    for raw in iter(stream.readline, b""):
        lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))


@pytest.fixture(scope="session")
def app():
    cmdline = os.environ.get("EMBER_APP", "").strip()
    if not cmdline:
        pytest.skip("EMBER_APP is not set: set it to the reference app's command line, "
                    "e.g. EMBER_APP=samples/c/ember_ref (the suite appends the port argument 0)")
    argv = shlex.split(cmdline) + ["0"]
    stderr_file = tempfile.NamedTemporaryFile(prefix="ember_app_stderr_", suffix=".log", delete=False)
    try:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr_file,
                                env=dict(os.environ), start_new_session=True)
    except OSError as e:
        pytest.fail("could not start EMBER_APP %r: %s" % (cmdline, e))

    # Read the first stdout line in a thread so the 30 s timeout holds even if the app is silent.
    first = []
    got_first = threading.Event()

    def read_first():
        first.append(proc.stdout.readline())
        got_first.set()

    threading.Thread(target=read_first, daemon=True).start()
    if not got_first.wait(START_TIMEOUT_S):
        _kill(proc)
        pytest.fail("EMBER_APP %r printed no first line within %d s (expected "
                    "'listening on http://127.0.0.1:PORT')" % (cmdline, START_TIMEOUT_S))
    line = first[0].decode("utf-8", "replace").rstrip("\r\n")
    m = LISTEN_RE.match(line)
    if not m:
        rc = proc.poll()
        _kill(proc)
        with open(stderr_file.name, "rb") as f:
            err = f.read().decode("utf-8", "replace")[-3000:]
        pytest.fail("EMBER_APP %r: first stdout line was %r (exit code %r), expected "
                    "'listening on http://127.0.0.1:PORT'\nstderr:\n%s" % (cmdline, line, rc, err))
    stdout_lines = [line]
    threading.Thread(target=_drain, args=(proc.stdout, stdout_lines), daemon=True).start()

    the_app = App(proc, int(m.group(1)), stderr_file, stdout_lines)
    yield the_app

    # Teardown: graceful stop on SIGTERM, exit code 0 within 10 s.
    if proc.poll() is not None:
        pytest.fail("the app had already exited (code %r) before SIGTERM\n%s"
                    % (proc.returncode, the_app.output_tail()))
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill(proc)
        pytest.fail("the app did not exit within %d s of SIGTERM (killed it)\n%s"
                    % (STOP_TIMEOUT_S, the_app.output_tail()))
    assert rc == 0, "the app exited with code %r after SIGTERM, expected 0\n%s" % (
        rc, the_app.output_tail())
    os.unlink(stderr_file.name)


def _kill(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.wait(5)


@pytest.fixture(autouse=True)
def app_still_running(request):
    """After every test the app must still be running: no test may crash it."""
    yield
    if "app" in request.fixturenames:
        the_app = request.getfixturevalue("app")
        time.sleep(0.01)
        assert the_app.proc.poll() is None, (
            "the app died during this test (exit code %r)\n%s"
            % (the_app.proc.returncode, the_app.output_tail()))
