"""An application restart with a slow Application_End, under EmberAspNet.exe: Mono's System.Web
drops (never ends) the requests that reach the old domain while it ends; the host must take
them back and answer them (from a fresh domain, or its own 503 with Retry-After) instead of
leaving them to the engine's handler timeout."""
import collections
import re
import threading
import time

import requests

from aspnet_helpers import host_cmdline, stop_cleanly
from appproc import App

END_DELAY_MS = 1500
# What the engine answers when no handler answered within the handler timeout (a stall).
ENGINE_TIMEOUT_BODY = "503 Service Unavailable\n"


def _started(text):
    m = re.search(r'<span id="Started">(.*?)</span>', text)
    return m.group(1) if m else None


def test_requests_during_a_slow_application_end_are_answered_not_left_to_the_timeout(scratch_site):
    app = App(host_cmdline(str(scratch_site)), env={"EMBER_SAMPLE_END_DELAY_MS": str(END_DELAY_MS)})
    app.start()
    answers = collections.Counter()
    stalls = []      # nobody answered: the engine's handler-timeout 503, or no answer at all
    wrong = []       # any other answer that is not a 200 with the right body or a real 503
    errors = []
    stop = threading.Event()

    def classify(r, expect, method):
        if r.status_code == 200:
            if r.json()["hello"] != expect:
                wrong.append("wrong body: " + r.text)
            answers["200"] += 1
        elif r.status_code == 503 and r.text == ENGINE_TIMEOUT_BODY:
            stalls.append(method + ": the engine's 503")
        elif r.status_code == 503 and r.headers.get("Retry-After") == "1":
            answers["503 host"] += 1
        elif r.status_code == 503 and "Server Unavailable" in r.text:
            answers["503 System.Web"] += 1   # System.Web's own: its queue was disposed
        else:
            wrong.append("%d %r %r" % (r.status_code, dict(r.headers), r.text[:300]))

    def hammer(i):
        # GETs and form POSTs (their streamed bodies must follow a request to the fresh domain).
        with requests.Session() as s:
            n = 0
            while not stop.is_set():
                n += 1
                name = "c%d-%d" % (i, n)
                method = "POST" if i % 2 else "GET"
                try:
                    if method == "POST":
                        r = s.post(app.url + "/Hello.ashx", data={"name": name}, timeout=30)
                    else:
                        r = s.get(app.url + "/Hello.ashx", params={"name": name}, timeout=30)
                    classify(r, name, method)
                except requests.ReadTimeout:
                    # A streamed body the handler never read starts no handler timeout.
                    stalls.append(method + ": no answer in 30 s")
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    errors.append(repr(e))
                    return

    try:
        first = _started(requests.get(app.url + "/", timeout=60).text)
        assert first
        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.1)
        cfg = scratch_site / "web.config"
        cfg.write_text(cfg.read_text().replace("timeout=\"20\"", "timeout=\"21\""))
        # Wait for a new domain to serve, then keep the clients going past the old domain's
        # Application_End (END_DELAY_MS) and unload.
        restarted = None
        deadline = time.time() + 90
        while time.time() < deadline and not restarted:
            r = requests.get(app.url + "/", timeout=60)
            if r.status_code == 503 and r.text == ENGINE_TIMEOUT_BODY:
                stalls.append("GET /: the engine's 503")
            s = _started(r.text) if r.status_code == 200 else None
            if s and s != first:
                restarted = s
            time.sleep(0.2)
        time.sleep(END_DELAY_MS / 1000.0 + 2)
        stop.set()
        for t in threads:
            t.join(120)
        assert restarted, "the application did not restart after web.config changed"
        assert not errors, errors[:5]
        assert not stalls, "%d request(s) nobody answered (%s); answers %s\n%s" % (
            len(stalls), stalls[:5], dict(answers), app.output_tail(60))
        assert not wrong, wrong[:5]
        assert answers["200"] > 0, answers
        # The window was hit: the old domain handed requests back (its log line at unload).
        assert re.search(r"EmberAspNet: \d+ request\(s\) handed back", app.output_tail(400)), app.output_tail(60)
        assert requests.get(app.url + "/Hello.ashx?name=after", timeout=60).json()["hello"] == "after"
        assert app.alive()
    finally:
        stop.set()
        stop_cleanly(app)
        app.cleanup()
