"""Helpers shared by the System.Web host tests (imported by conftest.py and the tests)."""
import os
import signal
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.join(HERE, "..", "conformance") not in sys.path:
    sys.path.insert(0, os.path.join(HERE, "..", "conformance"))

from appproc import REPO_ROOT  # noqa: E402

EXE = os.path.join(REPO_ROOT, "bindings", "dotnet", "bin", "EmberAspNet.exe")
SITE = os.path.join(REPO_ROOT, "samples", "aspnet", "site")
# Pages compiled before the "listening" line, so no test waits for mcs.
WARMUP = ["/", "/api/items", "/Hello.ashx", "/Boom.aspx", "/static/site.css", "/users/1", "/echo", "/slow?ms=0"]


def host_cmdline(root, *extra):
    """EmberAspNet.exe's command line; the App helper appends the port argument 0."""
    if not os.path.exists(EXE):
        pytest.skip("EmberAspNet.exe is not built (bindings/dotnet/build.sh)")
    parts = ["mono", "--debug", EXE, "--root", root, "--handler-timeout", "10000"]
    for w in WARMUP:
        parts += ["--warmup", w]
    return " ".join(parts + list(extra))


def stop_cleanly(app):
    assert app.alive(), "the host died: %s\n%s" % (app.exit_description(), app.output_tail())
    code = app.stop(signal.SIGTERM, timeout=20)
    assert code == 0, "after SIGTERM the host ended with %r\n%s" % (code, app.output_tail())
