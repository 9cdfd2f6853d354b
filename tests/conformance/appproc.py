"""Starting and stopping one reference app process (used by conftest.py and test_lifecycle.py)."""
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


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
LISTEN_RE = re.compile(r"^listening on http://127\.0\.0\.1:(\d+)\s*$")


class App:
    """The running app: tests read .port / .url / .host at use time (they change on restart)."""
    host = "127.0.0.1"

    def __init__(self, cmdline, env=None):
        self.cmdline = cmdline
        self.extra_env = dict(env or {})
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
            # restore_signals (default) gives the app default SIGPIPE handling, like a shell
            # would. SIGINT is made default too: a suite started in the background of a
            # script inherits it ignored, and a shell wrapper (tests/windows/wine_app.sh)
            # cannot trap a signal ignored at its start, so the app never saw its Ctrl+C.
            self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=self.stderr_file,
                                         env=dict(os.environ, **self.extra_env), start_new_session=True,
                                         preexec_fn=_default_sigint)
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

    def wait_line(self, pattern, timeout=10):
        """The first match of a regex on an stdout line after the first (e.g. the
        `listening on https://...` line of an app started with TLS)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.stdout_lines):
                m = re.match(pattern, line)
                if m:
                    return m
            if not self.alive():
                break
            time.sleep(0.02)
        return None

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

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Send sig and wait; returns the exit code, or None if it had to be killed."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def cleanup(self):
        self.kill()
        try:
            os.unlink(self.stderr_file.name)
        except OSError:
            pass
