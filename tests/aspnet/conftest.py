"""Fixtures for the System.Web host tests: EmberAspNet.exe serving samples/aspnet/site (or a
scratch copy of it), driven by real HTTP clients (requests, http.client, raw sockets)."""
import shutil

import pytest

from aspnet_helpers import SITE, host_cmdline, stop_cleanly
from appproc import App


@pytest.fixture(scope="module")
def site():
    """The sample site as committed, served by one host process for the module."""
    app = App(host_cmdline(SITE))
    app.start()
    yield app
    stop_cleanly(app)
    app.cleanup()


@pytest.fixture
def scratch_site(tmp_path):
    """A private copy of the sample site that a test may change (its own host process)."""
    root = tmp_path / "site"
    shutil.copytree(SITE, str(root), ignore=shutil.ignore_patterns("bin"))
    return root
