"""Issue 12 item 3: hostile clients against the reference app, scaled down for CI (the
full sizes: bench/hostile.py). Each test starts a fresh app, runs one attack while a
polite client is measured and the app's RSS and descriptors are sampled, and checks that
the app stayed up, kept answering the polite client, stayed within its memory bound and
cut the attacker off (tests/hostile/scenarios.py says which applies to which).

Run: tests/run_hostile.sh [app command]   (default samples/c/ember_ref)
"""
import json
import os

import pytest

from appproc import App
from scenarios import SCENARIOS, problems, run


@pytest.fixture
def app():
    the_app = App(os.environ.get("EMBER_APP", "samples/c/ember_ref"))
    the_app.start()
    yield the_app
    the_app.cleanup()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_hostile_client(app, name):
    outcome, report = run(app.proc.pid, app.port, name, "ci")
    print(json.dumps({"scenario": name, "outcome": outcome, "server": report}, indent=1))
    found = problems(name, outcome, report, app.alive())
    assert not found, "%s: %s\noutcome %s\nserver %s\n%s" % (name, "; ".join(found), dict(outcome), report,
                                                            app.output_tail())
