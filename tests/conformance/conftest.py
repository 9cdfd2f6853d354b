"""Session fixture: start the reference app named by env EMBER_APP, hand its port to the tests,
stop it with SIGTERM at the end and require a clean exit (code 0 within 10 s).

EMBER_APP is a command line (e.g. `samples/c/ember_ref`, `python3 samples/python/ember_ref.py`);
the suite appends the port argument `0`. Relative paths are resolved from the repository root.
EMBER_DISPATCH (inline | pool) and EMBER_WORKERS pass through to the app unchanged.

If the app dies during a test, that test fails (with the app's output) and the app is restarted
so that the remaining tests still report their own results.
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


def pytest_report_header(config):
    return "EMBER_APP=%r EMBER_DISPATCH=%r" % (
        os.environ.get("EMBER_APP"), os.environ.get("EMBER_DISPATCH", "(app default: pool)"))


class App:
    """The running app: tests read .port / .url / .host at use time (they change on restart)."""
    host = "127.0.0.1"

    def __init__(self, cmdline):
        self.cmdline = cmdline
        self.argv = shlex.split(cmdline) + ["0"]
        self.proc = None
        self.port = None
        self.url = None
        self.death_reported = False
        self.deaths = []

    def start(self):
        self.stderr_file = tempfile.NamedTemporaryFile(prefix="ember_app_", suffix=".err", delete=False)
        self.stdout_lines = []
        try:
            # restore_signals (default) gives the app default SIGPIPE handling, like a shell would
            self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=self.stderr_file,
                                         env=dict(os.environ), start_new_session=True)
        except OSError as e:
            pytest.fail("could not start EMBER_APP %r: %s" % (self.cmdline, e), pytrace=False)
        first = []
        got_first = threading.Event()

        def read_first():  # in a thread, so the timeout holds even if the app prints nothing
            first.append(self.proc.stdout.readline())
            got_first.set()

        threading.Thread(target=read_first, daemon=True).start()
        if not got_first.wait(START_TIMEOUT_S):
            self.kill()
            pytest.fail("EMBER_APP %r printed no first line within %d s (expected "
                        "'listening on http://127.0.0.1:PORT')\n%s"
                        % (self.cmdline, START_TIMEOUT_S, self.output_tail()), pytrace=False)
        line = first[0].decode("utf-8", "replace").rstrip("\r\n")
        self.stdout_lines.append(line)
        m = LISTEN_RE.match(line)
        if not m:
            time.sleep(0.2)
            rc = self.proc.poll()
            self.kill()
            pytest.fail("EMBER_APP %r: first stdout line was %r (exit code %r), expected "
                        "'listening on http://127.0.0.1:PORT'\n%s"
                        % (self.cmdline, line, rc, self.output_tail()), pytrace=False)
        threading.Thread(target=self._drain, daemon=True).start()
        self.port = int(m.group(1))
        self.url = "http://127.0.0.1:%d" % self.port
        self.death_reported = False

    def _drain(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.stdout_lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def alive(self):
        return self.proc.poll() is None

    def exit_description(self):
        rc = self.proc.returncode
        if rc is not None and rc < 0:
            return "exit code %d (killed by signal %s)" % (rc, signal.Signals(-rc).name)
        return "exit code %r" % rc

    def output_tail(self, n=40):
        self.stderr_file.flush()
        with open(self.stderr_file.name, "rb") as f:
            err = f.read().decode("utf-8", "replace").splitlines()[-n:]
        return "--- app stdout (tail) ---\n%s\n--- app stderr (tail) ---\n%s" % (
            "\n".join(self.stdout_lines[-n:]), "\n".join(err))

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait(5)


@pytest.fixture(scope="session")
def app():
    cmdline = os.environ.get("EMBER_APP", "").strip()
    if not cmdline:
        pytest.skip("EMBER_APP is not set: set it to the reference app's command line, "
                    "e.g. EMBER_APP=samples/c/ember_ref (the suite appends the port argument 0)")
    the_app = App(cmdline)
    the_app.start()
    yield the_app

    # Teardown: graceful stop on SIGTERM, exit code 0 within 10 s.
    if not the_app.alive():
        pytest.fail("the app had exited (%s) before the final SIGTERM" % the_app.exit_description(),
                    pytrace=False)
    the_app.proc.send_signal(signal.SIGTERM)
    try:
        the_app.proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        the_app.kill()
        pytest.fail("the app did not exit within %d s of SIGTERM (killed it)\n%s"
                    % (STOP_TIMEOUT_S, the_app.output_tail()), pytrace=False)
    assert the_app.proc.returncode == 0, "after SIGTERM the app ended with %s, expected 0\n%s" % (
        the_app.exit_description(), the_app.output_tail())
    if not the_app.deaths:
        os.unlink(the_app.stderr_file.name)


@pytest.fixture(autouse=True)
def app_still_running(request):
    """Every test starts with the app running and must leave it running: no test may crash it."""
    if "app" not in request.fixturenames:
        yield
        return
    the_app = request.getfixturevalue("app")
    if not the_app.alive():
        unreported = not the_app.death_reported
        desc, tail = the_app.exit_description(), the_app.output_tail()
        the_app.deaths.append((request.node.nodeid, desc))
        the_app.start()   # so that the remaining tests still give their own results
        if unreported:
            pytest.fail("the app died between tests (before this one): %s\n%s" % (desc, tail),
                        pytrace=False)
    yield
    time.sleep(0.02)
    if not the_app.alive():
        the_app.death_reported = True
        pytest.fail("the app died during this test: %s\n%s"
                    % (the_app.exit_description(), the_app.output_tail()), pytrace=False)
