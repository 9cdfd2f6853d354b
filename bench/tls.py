"""The TLS part of the benchmark (called by harness.py): Ember's C reference app with its TLS
listener (inline dispatch, one I/O worker) against nginx (one worker), both with the same
certificate (EC P-256, made here with the openssl command line), pinned like the rest: server
on CPU 0, wrk on CPU 1.

Per server:
1. verify over TLS with Python's ssl module, checking the certificate: two GETs on one
   connection (status, exact body, application/json, the connection kept); Ember also gets an
   ALPN check (h2 offered → h2 chosen).
2. keep-alive: wrk over https at each concurrency → req/s, server CPU µs per request.
3. handshakes: wrk over https with `Connection: close`, so every request is a new connection
   with a full handshake (wrk does not resume sessions) → handshakes/s, server CPU µs each.

--quick runs each point for 2 s and asserts right answers and numbers, never a speed.
"""

from __future__ import annotations

import http.client
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import (BENCH, EXPECTED_BODY, ROOT, BenchError, ember_lib_env, Sampler, Server, free_port, log, rss_kb, run_wrk,
                      tree_pids)

REPORT_LUA = BENCH / "wrk" / "report.lua"
RELEASE = ROOT / "target" / "release"
TARGETS = ("ember-c-tls", "nginx-tls")
LABELS = {"ember-c-tls": "Ember C ref app, inline, TLS listener", "nginx-tls": "nginx (1 worker), ssl"}


def make_cert(d: Path) -> tuple[Path, Path]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   cwd=d, check=True, capture_output=True, timeout=60)
    return d / "cert.pem", d / "key.pem"


def _https_port_of(srv: Server, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in srv.stdout_path.read_bytes().decode("utf-8", "replace").splitlines():
            if line.startswith("listening on https://127.0.0.1:"):
                return int(line.rsplit(":", 1)[1])
        if not srv.alive():
            break
        time.sleep(0.05)
    raise BenchError(f"{srv.name}: no 'listening on https://127.0.0.1:PORT' line; stderr: {srv.stderr_tail()}")


def start(name: str, workdir: Path, cert: Path, key: Path, rawdir: Path, pin: str | None) -> tuple[Server, int]:
    if name == "ember-c-tls":
        env = {"EMBER_DISPATCH": "inline", "EMBER_WORKERS": "1", "EMBER_TLS_CERT": str(cert), "EMBER_TLS_KEY": str(key),
               **ember_lib_env()}
        srv = Server(f"pinned-{name}", [str(ROOT / "samples" / "c" / "ember_ref"), "0"], env, None, rawdir, None, pin, 30)
        return srv, _https_port_of(srv)
    port = free_port()
    text = (BENCH / "targets" / "nginx-tls.conf.in").read_text()
    for k, v in (("@PREFIX@", workdir), ("@PORT@", port), ("@CERT@", cert), ("@KEY@", key)):
        text = text.replace(k, str(v))
    (workdir / "nginx.conf").write_text(text)
    argv = ["nginx", "-p", str(workdir), "-c", str(workdir / "nginx.conf"), "-e", str(workdir / "error.log")]
    return Server(f"pinned-{name}", argv, {}, None, rawdir, port, pin, 30), port


def verify_tls(port: int, cafile: Path, want_h2: bool) -> dict:
    ctx = ssl.create_default_context(cafile=str(cafile))
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
    try:
        socks = []
        for _ in range(2):
            conn.request("GET", "/", headers={"Accept": "*/*"})
            r = conn.getresponse()
            body, ctype = r.read(), r.getheader("Content-Type", "")
            if r.status != 200 or body != EXPECTED_BODY or ctype.split(";")[0].strip().lower() != "application/json":
                raise BenchError(f"GET / over TLS: status {r.status}, Content-Type {ctype!r}, body {body[:200]!r}")
            socks.append(id(conn.sock))
        if socks[0] != socks[1] or conn.sock is None:
            raise BenchError("GET / over TLS: the connection was not kept alive")
        version = conn.sock.version()
    finally:
        conn.close()
    out = {"ok": True, "tls_version": version}
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost") as s:
        out["alpn"] = s.selected_alpn_protocol()
    if want_h2 and out["alpn"] != "h2":
        raise BenchError(f"ALPN: offered h2 and http/1.1, the server chose {out['alpn']!r}")
    return out


def _close_script(workdir: Path) -> Path:
    """report.lua with every request asking for Connection: close."""
    p = workdir / "close.lua"
    p.write_text('wrk.headers["Connection"] = "close"\ndofile("%s")\n' % str(REPORT_LUA).replace("\\", "/"))
    return p


def measure(name: str, plan, rawdir: Path) -> dict:
    res: dict = {"target": name, "label": LABELS[name], "status": "failed", "keepalive": {}, "handshake": {}}
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    srv = None
    try:
        cert, key = make_cert(workdir)
        srv, port = start(name, workdir, cert, key, rawdir, "0")
        url = f"https://127.0.0.1:{port}/"
        res["url"] = url
        res["verify"] = verify_tls(port, cert, want_h2=name == "ember-c-tls")
        time.sleep(0.3)
        srv.remember_tree()
        res["rss_idle_kb"] = rss_kb(tree_pids(srv.pid))
        sampler = Sampler(srv.pid)
        sampler.start()
        try:
            run_wrk(url, 50, plan.warmup_s, 1, "1", REPORT_LUA)
            for c in plan.concurrency:
                for kind, script in (("keepalive", REPORT_LUA), ("handshake", _close_script(workdir))):
                    c0 = sampler.cpu()
                    r = run_wrk(url, c, plan.wrk_s, 1, "1", script)
                    r["cpu_s"] = sampler.cpu() - c0
                    r["cpu_us_per_req"] = r["cpu_s"] * 1e6 / r["requests"] if r["requests"] else None
                    res[kind][str(c)] = r
                    log(f"[tls] {name}: {kind} c={c}: {r['rps']:.0f}/s, fail {r['fail']}, "
                        f"cpu {r['cpu_us_per_req'] or 0:.1f} us each")
                    if not srv.alive():
                        raise BenchError(f"server died: {srv.stderr_tail()}")
        finally:
            sampler.stop()
            sampler.join(timeout=2)
        res["rss_peak_kb"] = max(sampler.peak_kb, res["rss_idle_kb"])
        res["verify_after"] = verify_tls(port, cert, want_h2=name == "ember-c-tls")
        res["status"] = "ok"
    except (BenchError, OSError, subprocess.SubprocessError, ValueError, KeyError, ssl.SSLError) as e:
        res["error"] = f"{type(e).__name__}: {e}"
        if srv is not None:
            res["server_stderr_tail"] = srv.stderr_tail()
        log(f"[tls] {name}: FAILED: {res['error']}")
    finally:
        if srv is not None:
            srv.stop()
            res["stopped_on_sigterm"] = srv.stopped_gracefully
        shutil.rmtree(workdir, ignore_errors=True)
    return res


def run(plan, builds: dict, rawdir: Path) -> dict:
    out = {}
    for name in TARGETS:
        needs = ["ember-lib", "samples-c"] if name == "ember-c-tls" else ["nginx"]
        missing = [n for n in needs if not builds.get(n, {}).get("ok")]
        if shutil.which("openssl") is None:
            missing.append("openssl (command)")
        if missing:
            out[name] = {"target": name, "status": "unavailable", "error": "missing: " + ", ".join(missing)}
            continue
        out[name] = measure(name, plan, rawdir)
    return out


def problems(tls: dict, quick: bool, allow_missing: bool) -> list[str]:
    found = []
    for name, r in tls.items():
        if r.get("status") == "unavailable" and (allow_missing or not quick):
            continue
        if r.get("status") != "ok":
            found.append(f"tls/{name}: {r.get('status')}: {r.get('error', '')[:300]}")
            continue
        for kind in ("keepalive", "handshake"):
            for c, w in r[kind].items():
                if not (w["requests"] > 0 and w["rps"] > 0):
                    found.append(f"tls/{name}: {kind} c={c} produced no numbers")
                if quick and w["fail"]:
                    found.append(f"tls/{name}: {kind} c={c}: {w['fail']} failed requests")
    return found


def markdown(tls: dict) -> list[str]:
    if not tls:
        return []
    lines = ["", "## TLS (pinned: server on CPU 0, wrk on CPU 1; same EC P-256 certificate)", "",
             "| target | c | keep-alive req/s | CPU µs/req | handshakes/s (Connection: close) | CPU µs/handshake | TLS | ALPN |",
             "|---|---|---|---|---|---|---|---|"]
    base = tls.get("nginx-tls", {})
    for name, r in tls.items():
        if r.get("status") != "ok":
            lines.append(f"| {name} | | {r.get('status')}: {r.get('error', '')[:80]} | | | | | |")
            continue
        for c in r["keepalive"]:
            k, h = r["keepalive"][c], r["handshake"][c]
            ratio = ""
            if name != "nginx-tls" and base.get("status") == "ok" and c in base["keepalive"]:
                kb, hb = base["keepalive"][c]["rps"], base["handshake"][c]["rps"]
                # A point nginx did not serve (0/s on a starved machine) has no ratio.
                ratio = (f" ({k['rps'] / kb:.2f}× nginx)" if kb else " (nginx: 0)",
                         f" ({h['rps'] / hb:.2f}× nginx)" if hb else " (nginx: 0)")
            ka_ratio, hs_ratio = ratio if ratio else ("", "")
            lines.append(f"| {name} | {c} | {k['rps']:,.0f}{ka_ratio} | {k['cpu_us_per_req'] or 0:.1f} | "
                         f"{h['rps']:,.0f}{hs_ratio} | {h['cpu_us_per_req'] or 0:.1f} | {r['verify']['tls_version']} | "
                         f"{r['verify']['alpn']} |")
    return lines
