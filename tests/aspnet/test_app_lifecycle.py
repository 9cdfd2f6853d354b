"""Application lifecycle under EmberAspNet.exe, on a private copy of the sample site: compile
errors, application restarts when files change, Application_End on a graceful stop, bad
command lines."""
import collections
import os
import re
import subprocess
import threading
import time

import requests

from aspnet_helpers import EXE, SITE, host_cmdline, stop_cleanly
from appproc import App

BROKEN_PAGE = """<%@ Page Language="C#" %>
<script runat="server">
    protected void Page_Load(object sender, EventArgs e)
    {
        int x = "this is not an int";
    }
</script>
<html><body>never</body></html>
"""


# Holds its request thread inside the application's domain (synchronously) for ms milliseconds.
SLEEP_HANDLER = """<%@ WebHandler Language="C#" Class="Sleep" %>
using System.Web;

public class Sleep : IHttpHandler
{
    public bool IsReusable { get { return true; } }

    public void ProcessRequest(HttpContext context)
    {
        int ms = int.Parse(context.Request["ms"] ?? "0");
        System.Threading.Thread.Sleep(ms);
        context.Response.ContentType = "text/plain";
        context.Response.Write("slept " + ms);
    }
}
"""


def _started(app):
    page = requests.get(app.url + "/", timeout=60).content.decode("utf-8")
    return re.search(r'<span id="Started">(.*?)</span>', page).group(1)


def test_compile_error_shows_the_aspnet_error_page_and_other_pages_still_work(scratch_site):
    (scratch_site / "Broken.aspx").write_text(BROKEN_PAGE)
    cfg = scratch_site / "web.config"
    # customErrors as shipped by ASP.NET (RemoteOnly): a local client sees the details.
    cfg.write_text(re.sub(r"<customErrors.*?</customErrors>", "", cfg.read_text(), flags=re.S))
    app = App(host_cmdline(str(scratch_site)))
    app.start()
    try:
        r = requests.get(app.url + "/Broken.aspx", timeout=120)
        assert r.status_code == 500
        assert "Compilation Error" in r.text or "CS0029" in r.text, r.text[:3000]
        assert "Broken.aspx" in r.text
        assert requests.get(app.url + "/Hello.ashx?name=ok", timeout=60).json()["hello"] == "ok"
        assert requests.get(app.url + "/Broken.aspx", timeout=60).status_code == 500
    finally:
        stop_cleanly(app)
        app.cleanup()


def test_changed_web_config_restarts_the_application_in_a_fresh_domain(scratch_site):
    app = App(host_cmdline(str(scratch_site)))
    app.start()
    try:
        first = _started(app)
        time.sleep(1.1)
        cfg = scratch_site / "web.config"
        cfg.write_text(cfg.read_text().replace("timeout=\"20\"", "timeout=\"21\""))
        # ASP.NET notices the change, ends the application and unloads its domain; the next
        # requests go to a new domain, where Application_Start runs again.
        deadline = time.time() + 60
        restarted = None
        while time.time() < deadline:
            try:
                r = requests.get(app.url + "/", timeout=60)
                if r.status_code == 200:
                    s = re.search(r'<span id="Started">(.*?)</span>', r.content.decode("utf-8")).group(1)
                    if s != first:
                        restarted = s
                        break
                else:
                    assert r.status_code == 503, r.status_code   # only while the restart is under way
            except requests.ConnectionError:
                raise
            time.sleep(0.3)
        assert restarted, "the application did not restart after web.config changed"
        assert requests.get(app.url + "/Hello.ashx?name=again", timeout=60).json()["hello"] == "again"
        assert "ASP.NET application restarted" in app.output_tail(200)
    finally:
        stop_cleanly(app)
        app.cleanup()


def _wait_restart(app, first):
    """Polls / until Application_Start ran again in a new domain; returns its stamp or None."""
    deadline = time.time() + 60
    while time.time() < deadline:
        r = requests.get(app.url + "/", timeout=60)
        if r.status_code == 200:
            s = re.search(r'<span id="Started">(.*?)</span>', r.content.decode("utf-8")).group(1)
            if s != first:
                return s
        else:
            assert r.status_code == 503, r.status_code
        time.sleep(0.3)
    return None


def test_restart_under_load_answers_every_request_and_the_host_lives(scratch_site):
    # Requests keep entering the application's domain while ASP.NET unloads it, and one is
    # inside it (blocked in a handler) when the unload begins: each gets an answer (the old
    # domain's, the new one's, or 503 while the restart is under way), no connection breaks,
    # and the host serves from the new domain afterwards.
    (scratch_site / "Sleep.ashx").write_text(SLEEP_HANDLER)
    app = App(host_cmdline(str(scratch_site), "--warmup", "/Sleep.ashx?ms=0"))
    app.start()
    statuses = collections.Counter()
    errors = []
    slept = []
    stop = threading.Event()

    def hammer():
        with requests.Session() as s:
            while not stop.is_set():
                try:
                    r = s.get(app.url + "/Hello.ashx?name=h", timeout=60)
                    statuses[r.status_code] += 1
                    if r.status_code == 200 and r.json()["hello"] != "h":
                        errors.append("wrong body: " + r.text)
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    errors.append(repr(e))
                    return

    def sleeper():
        try:
            r = requests.get(app.url + "/Sleep.ashx?ms=3000", timeout=60)
            slept.append((r.status_code, r.text))
        except Exception as e:  # noqa: BLE001
            errors.append("sleeper: " + repr(e))

    try:
        first = _started(app)
        threads = [threading.Thread(target=hammer) for _ in range(4)] + [threading.Thread(target=sleeper)]
        for t in threads:
            t.start()
        time.sleep(1.1)
        cfg = scratch_site / "web.config"
        cfg.write_text(cfg.read_text().replace("timeout=\"20\"", "timeout=\"21\""))
        restarted = _wait_restart(app, first)
        stop.set()
        for t in threads:
            t.join(120)
        assert restarted, "the application did not restart after web.config changed"
        assert not errors, errors[:5]
        assert statuses[200] > 0 and set(statuses) <= {200, 503}, statuses
        assert len(slept) == 1 and slept[0][0] in (200, 503), slept
        if slept[0][0] == 200:
            assert slept[0][1] == "slept 3000"
        assert requests.get(app.url + "/Hello.ashx?name=after", timeout=60).json()["hello"] == "after"
        assert app.alive()
    finally:
        stop.set()
        stop_cleanly(app)
        app.cleanup()


def test_graceful_stop_runs_application_end(scratch_site, tmp_path):
    end_file = tmp_path / "end.txt"
    os.environ["EMBER_SAMPLE_END_FILE"] = str(end_file)
    try:
        app = App(host_cmdline(str(scratch_site)))
        app.start()
    finally:
        del os.environ["EMBER_SAMPLE_END_FILE"]
    try:
        assert requests.get(app.url + "/Hello.ashx", timeout=60).status_code == 200
    finally:
        stop_cleanly(app)
        app.cleanup()
    assert end_file.exists(), "Application_End did not run on SIGTERM"
    assert end_file.read_text().startswith("Application_End ")


def test_bad_command_lines_get_a_clear_message_and_exit_code_2(tmp_path):
    for args, needle in ((["--port", "1"], "--root is required"),
                         (["--root", str(tmp_path / "missing")], "no such application folder"),
                         (["--root", SITE, "--dispatch", "fast"], "--dispatch must be auto, pool or inline"),
                         (["--root", SITE, "--bogus"], "unknown argument --bogus")):
        p = subprocess.run(["mono", EXE] + args, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert needle in p.stderr, (args, p.stderr)


def test_port_in_use_is_reported_and_exit_code_1(site):
    p = subprocess.run(["mono", EXE, "--root", SITE, "--port", str(site.port)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "Address already in use" in p.stderr, p.stderr


def test_application_mounted_under_a_virtual_path(scratch_site):
    app = App(host_cmdline(str(scratch_site), "--vpath", "/shop").replace(" --warmup /", " --warmup /shop/"))
    app.start()
    try:
        r = requests.get(app.url + "/shop", allow_redirects=False, timeout=60)
        assert r.status_code == 301 and r.headers["Location"] == "/shop/"
        r = requests.get(app.url + "/shop/", timeout=60)
        assert r.status_code == 200 and "<h1>Web Forms on Ember</h1>" in r.text
        assert requests.get(app.url + "/shop/Hello.ashx?name=v", timeout=60).json()["hello"] == "v"
        assert requests.get(app.url + "/shop/static/readme.txt", timeout=60).text.startswith("Static content")
        assert requests.get(app.url + "/Hello.ashx", timeout=60).status_code == 404, "outside the mount: the engine's 404"
    finally:
        stop_cleanly(app)
        app.cleanup()
