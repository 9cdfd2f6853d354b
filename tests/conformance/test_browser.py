"""A real browser against the app: headless Chromium (Debian's `chromium`, installed by
tests/setup.sh and tests/run_conformance.sh) loads a page from a small static server of this
test, and the page opens `new WebSocket("ws://…/ws")`, two on `/ws/chat` and
`new EventSource("http://…/sse")`, then posts what it saw back to the static server.

The page comes from another origin (the static server's port) than the app. WebSocket is not
bound by CORS, but EventSource is, and the reference app sends no CORS headers (nor should it);
so Chromium runs with --disable-web-security, for this test page only."""
import http.server
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading

import pytest

PAGE = """<!doctype html><meta charset="utf-8"><title>ember test</title><script>
const APP = "127.0.0.1:%(port)d";
const out = {ws: [], ws_close: null, chat: [], sse: [], sse_after_end: null, errors: []};
let pending = 3, posted = false;
function done() { if (--pending === 0) post(); }
function post() {
  if (posted) return;
  posted = true;
  fetch("/result", {method: "POST", body: JSON.stringify(out)});
}
setTimeout(() => { out.errors.push("timeout"); post(); }, 20000);

// 1. echo: a text and a binary message, then a clean close
const ws = new WebSocket("ws://" + APP + "/ws");
ws.binaryType = "arraybuffer";
ws.onopen = () => { ws.send("hello from chromium \\u2713"); ws.send(new Uint8Array([0, 1, 2, 255]).buffer); };
ws.onmessage = (e) => {
  out.ws.push(typeof e.data === "string" ? e.data : Array.from(new Uint8Array(e.data)));
  if (out.ws.length === 2) ws.close(1000, "done");
};
ws.onclose = (e) => { out.ws_close = [e.code, e.wasClean]; done(); };
ws.onerror = () => out.errors.push("ws error");

// 2. chat: two sockets; what one sends, both receive
const a = new WebSocket("ws://" + APP + "/ws/chat"), b = new WebSocket("ws://" + APP + "/ws/chat");
let open = 0, got = 0;
const both = () => { if (++open === 2) setTimeout(() => a.send("chat from a"), 100); };
a.onopen = both; b.onopen = both;
const heard = (who) => (e) => {
  out.chat.push(who + ": " + e.data);
  if (++got === 2) { a.close(); b.close(); done(); }
};
a.onmessage = heard("a"); b.onmessage = heard("b");

// 3. Server-Sent Events: three ticks, then the stream ends and the browser means to reconnect
const es = new EventSource("http://" + APP + "/sse");
es.addEventListener("tick", (e) => out.sse.push({id: e.lastEventId, data: e.data}));
es.onerror = () => {
  if (out.sse.length < 3) { out.errors.push("sse error after " + out.sse.length + " events"); }
  out.sse_after_end = es.readyState;   // 0 = CONNECTING: it will reconnect (with Last-Event-ID)
  es.close();
  done();
};
</script>"""

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--mute-audio",
                  # the page's origin is not the app's; see the module docstring
                  "--disable-web-security"]


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class PageServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, page):
        self.page = page.encode()
        self.result = None
        self.got = threading.Event()
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.server.page)))
        self.end_headers()
        self.wfile.write(self.server.page)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.result = json.loads(body)
        self.server.got.set()
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_chromium_websocket_chat_and_event_source(app):
    browser = chromium_path()
    # Not a skip: tests/setup.sh and tests/run_conformance.sh install Debian's chromium.
    assert browser, "chromium is not installed (apt-get install chromium; tests/setup.sh does it)"
    server = PageServer(PAGE % {"port": app.port})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    profile = tempfile.mkdtemp(prefix="ember_chromium_")
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([browser] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile,
                                                          "http://127.0.0.1:%d/page.html" % server.server_port],
                            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        if not server.got.wait(60):
            log.seek(0)
            pytest.fail("the page reported nothing within 60 s; chromium said:\n%s"
                        % log.read().decode("utf-8", "replace")[-3000:])
        result = server.result
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # chromium's own process group (new session)
        except OSError:
            pass
        proc.wait(10)
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
        log.close()
    assert result["errors"] == [], result
    assert result["ws"] == ["hello from chromium \u2713", [0, 1, 2, 255]]
    assert result["ws_close"] == [1000, True]
    assert sorted(result["chat"]) == ["a: chat from a", "b: chat from a"]
    assert result["sse"] == [{"id": str(n), "data": '{"n": %d}' % n} for n in (1, 2, 3)]
    assert result["sse_after_end"] == 0, "after the stream ended the EventSource should be reconnecting"
