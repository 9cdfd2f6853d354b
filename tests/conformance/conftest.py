"""Session fixture: start the reference app named by env EMBER_APP, hand its port to the tests,
stop it with SIGTERM at the end and require a clean exit (code 0 within 10 s).

EMBER_APP is a command line (e.g. `samples/c/ember_ref`, `python3 samples/python/ember_ref.py`);
the suite appends the port argument `0`. Relative paths are resolved from the repository root.
EMBER_DISPATCH (auto | inline | pool) and EMBER_WORKERS pass through to the app unchanged.

If the app dies during a test, that test fails (with the app's output) and the app is restarted
so that the remaining tests still report their own results.
"""
import os
import resource
import signal
import subprocess
import time

import pytest

from appproc import REPO_ROOT, STOP_TIMEOUT_S, App
from sitecopy import prepare_www

# The app serves a copy of samples/www with symlinks added (EMBER_WWW; git keeps no link that
# leads out of a sample folder). Set here, before the test modules read it and the app inherits it.
prepare_www(REPO_ROOT)

# The 1,000-connection WebSocket test needs more descriptors than Debian's default soft limit
# (1024), in this process and in the app, which inherits the limit when it is started below.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
_want = 65536 if _hard == resource.RLIM_INFINITY else min(_hard, 65536)
if _soft != resource.RLIM_INFINITY and _soft < _want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (_want, _hard))


def pytest_report_header(config):
    header = "EMBER_APP=%r EMBER_DISPATCH=%r" % (
        os.environ.get("EMBER_APP"), os.environ.get("EMBER_DISPATCH", "(app default: auto)"))
    if os.environ.get("EMBER_CONFORMANCE_WS_CONNECTIONS"):
        header += "\nEMBER_CONFORMANCE_WS_CONNECTIONS=%s (instead of 1000)" % os.environ["EMBER_CONFORMANCE_WS_CONNECTIONS"]
    if os.environ.get("EMBER_CONFORMANCE_RSS") == "off":
        header += "\nEMBER_CONFORMANCE_RSS=off: the app's memory growth is not asserted (sanitizer build)"
    return header


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
