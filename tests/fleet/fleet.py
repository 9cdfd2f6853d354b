#!/usr/bin/env python3
"""Fleet test: nginx (deploy/nginx-ember.conf) in front of the C, Python and .NET reference
apps, under continuous load from clients that check every answer byte for byte.

Phases (each counted separately):
  steady   all three up.
  kill     one app gets SIGKILL; nginx retries what it can on the others; the app is
           started again and the load goes on until it is back in rotation. A client-visible
           error here is allowed only for a request sent before the kill whose failed
           attempt nginx names as the killed app (its X-Upstream header, $upstream_addr).
  rolling  each app in turn: SIGTERM (refuse new connections for EMBER_REFUSE_MS while open
           ones finish, then stop; exit code 0 checked),
           start again, wait for health 200, next. No client-visible error allowed.

Usage: tests/fleet/fleet.py [--size ci|full] [--out bench/results/fleet.md]
Exit 0 when every rule held. Needs nginx, mono, the built reference apps.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps import ROOT, App, free_port  # noqa: E402

SIZES = {
    # clients, steady seconds per phase, restart rounds, and on SIGTERM the refusing phase
    # (EMBER_REFUSE_MS: more than nginx's upstream keepalive_timeout of 4 s, see
    # deploy/nginx-ember.conf; nginx open source has no active health checks, so there is no
    # draining phase before it)
    "ci": dict(clients=6, steady=3.0, rounds=1, refuse_ms=5000),
    "full": dict(clients=16, steady=20.0, rounds=3, refuse_ms=5000),
}
HOSTS = ("c", "python", "dotnet")


def render_nginx(tmp: str, listen: int, ports: list[int]) -> str:
    """The deploy config with this run's ports, wrapped in a main config of our own."""
    conf = open(os.path.join(ROOT, "deploy/nginx-ember.conf")).read()
    for default, port in zip((8081, 8082, 8083), ports):
        conf = conf.replace(f"127.0.0.1:{default}", f"127.0.0.1:{port}")
    conf, n = re.subn(r"listen 8080;", f"listen 127.0.0.1:{listen};", conf)
    assert n == 1, "deploy/nginx-ember.conf: expected one 'listen 8080;'"
    with open(os.path.join(tmp, "ember.conf"), "w") as f:
        f.write(conf)
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = f"""{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log notice;
events {{ worker_connections 4096; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    # The test's own: which upstream answered (or failed), so errors can be attributed.
    add_header X-Upstream $upstream_addr always;
    include {tmp}/ember.conf;
}}
"""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(main)
    return path


class Record:
    __slots__ = ("start", "end", "kind", "ok", "status", "upstream", "error")

    def __init__(self, start, end, kind, ok, status, upstream, error):
        self.start, self.end, self.kind, self.ok = start, end, kind, ok
        self.status, self.upstream, self.error = status, upstream, error


class Load:
    """Clients on keep-alive connections to nginx; every answer is checked exactly."""

    def __init__(self, port: int, clients: int) -> None:
        self.port = port
        self.records: list[Record] = []
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)

    def _one(self, conn: http.client.HTTPConnection, rnd: random.Random) -> tuple[str, bool, int, str]:
        pick = rnd.random()
        if pick < 0.35:
            kind, method, path, body = "GET /", "GET", "/", None
            want = b'{"code": 1, "msg": "Hello WebAPI"}'
        elif pick < 0.6:
            n = rnd.randrange(1, 10**6)
            kind, method, path, body = "GET /users", "GET", f"/users/{n}", None
            want = json.dumps({"id": str(n)}).encode()
        elif pick < 0.93:
            body = rnd.randbytes(rnd.randrange(0, 4096))
            kind, method, path, want = "POST /echo", "POST", "/echo", body
        else:
            ms = rnd.randrange(20, 300)
            kind, method, path, body = "GET /slow", "GET", f"/slow?ms={ms}", None
            want = json.dumps({"slept_ms": ms}).encode()
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        got = r.read()
        upstream = r.getheader("X-Upstream", "")
        if kind == "GET /slow":  # the apps' own JSON spacing differs; compare values
            try:
                ok = r.status == 200 and json.loads(got) == json.loads(want)
            except ValueError:
                ok = False
        else:
            ok = r.status == 200 and got == want
        return kind, ok, r.status, upstream

    def _client(self, i: int) -> None:
        rnd = random.Random(i)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.stop_flag.is_set():
            start = time.monotonic()
            try:
                kind, ok, status, upstream = self._one(conn, rnd)
                err = "" if ok else f"status {status} or wrong body"
            except (OSError, http.client.HTTPException) as e:
                kind, ok, status, upstream, err = "?", False, 0, "", f"{type(e).__name__}: {e}"
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.records.append(Record(start, time.monotonic(), kind, ok, status, upstream, err))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="ci")
    ap.add_argument("--out", help="write a Markdown report here")
    ap.add_argument("--victim", choices=HOSTS, action="append",
                    help="an app killed with SIGKILL (repeatable; default: python for ci, all three for full)")
    ap.add_argument("--keep-logs", action="store_true", help="keep the apps' and nginx's logs (printed path)")
    args = ap.parse_args()
    size = SIZES[args.size]
    args.victim = args.victim or (["python"] if args.size == "ci" else list(HOSTS))
    if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
        print("fleet: nginx not found (apt-get install nginx)", file=sys.stderr)
        return 1
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"

    tmp = tempfile.mkdtemp(prefix="ember-fleet-")
    os.chmod(tmp, 0o755)
    ports = [free_port() for _ in HOSTS]
    apps = {h: App(h, port, refuse_ms=size["refuse_ms"], log_dir=tmp) for h, port in zip(HOSTS, ports)}
    listen = free_port()
    nginx = None
    events: list[tuple[float, str]] = []
    failures: list[str] = []
    kills: list[tuple[float, int]] = []

    def note(what: str) -> None:
        events.append((time.monotonic(), what))
        print(f"fleet: {what}", flush=True)

    try:
        for a in apps.values():
            a.start()
        for a in apps.values():
            a.wait_healthy()
        conf = render_nginx(tmp, listen, ports)
        nginx = subprocess.Popen([nginx_bin, "-p", tmp, "-c", conf], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
                c.request("GET", "/")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or nginx.poll() is not None:
                raise RuntimeError(f"nginx did not come up (see {tmp}/error.log)")
            time.sleep(0.1)

        load = Load(listen, size["clients"])
        t0 = time.monotonic()
        load.start()
        note(f"load started: {size['clients']} clients; apps on {dict(zip(HOSTS, ports))}, nginx on {listen}")
        time.sleep(size["steady"])

        phases: list[tuple[str, float, float]] = [("steady", t0, time.monotonic())]

        # --- kill -9, one victim at a time ---
        for name in args.victim:
            victim = apps[name]
            t_kill = time.monotonic()
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            kills.append((t_kill, time.monotonic(), victim.port))
            note(f"SIGKILL {name} (pid {victim.pid})")
            time.sleep(size["steady"])
            victim.start()
            victim.wait_healthy()
            note(f"{name} restarted and healthy")
            time.sleep(size["steady"])
            phases.append((f"kill {name}", t_kill, time.monotonic()))

        # --- rolling restarts: SIGTERM, the app refuses, finishes, exits 0; start it again ---
        t_roll = time.monotonic()
        for rnd in range(size["rounds"]):
            for h in HOSTS:
                a = apps[h]
                a.signal(signal.SIGTERM)
                note(f"round {rnd + 1}: SIGTERM {h} (refusing new connections for {size['refuse_ms']} ms)")
                code = a.wait(120)
                if code != 0:
                    failures.append(f"{h} exited {code} after SIGTERM")
                note(f"round {rnd + 1}: {h} exited {code}")
                a.start()
                a.wait_healthy()
                note(f"round {rnd + 1}: {h} restarted and healthy")
        time.sleep(size["steady"])
        phases.append(("rolling", t_roll, time.monotonic()))
        load.stop()
        note("load stopped")
        # Phases end where the next begins, and the last when the load stopped, so every
        # answer is counted in exactly one.
        phases = [(n, lo, phases[i + 1][1] if i + 1 < len(phases) else time.monotonic())
                  for i, (n, lo, _) in enumerate(phases)]
    finally:
        if nginx is not None:
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(30)
            except subprocess.TimeoutExpired:
                nginx.kill()
        for a in apps.values():
            a.stop()

    return report(load.records, phases, events, kills, args, size, failures, tmp)


def report(records, phases, events, kills, args, size, failures, tmp) -> int:
    rows = []
    kill_errors = []
    for (name, lo, hi) in phases:
        # A request counts in the phase where it ended (one in flight at a SIGKILL ends in
        # the kill phase).
        rs = [r for r in records if lo <= r.end < hi]
        errors = [r for r in rs if not r.ok]
        retried = sum(1 for r in rs if r.ok and "," in r.upstream)
        rows.append((name, len(rs), len(errors), retried, hi - lo))
        if name == "steady" and errors:
            failures.append(f"steady: {len(errors)} errors")
        if name.startswith("kill"):
            t_kill, t_dead, port = next(k for k in kills if k[0] == lo)
            # Allowed only: sent while the killed app could still take it (before it was
            # reaped), still open at the SIGKILL, and nginx names the killed app as the
            # attempt that failed.
            outside = [r for r in errors if not (r.start < t_dead and r.end >= t_kill and f":{port}" in r.upstream)]
            if outside:
                failures.append(f"{name}: {len(outside)} errors not in flight on the killed app")
            kill_errors += errors
        if name == "rolling" and errors:
            failures.append(f"rolling: {len(errors)} client-visible errors")
    in_flight_at_kill = sum(1 for r in records for (t, _, _) in kills if r.start < t <= r.end)

    lines = [f"# Fleet test ({args.size}): nginx in front of the C, Python and .NET reference apps", "",
             f"{size['clients']} clients on keep-alive connections to nginx (GET /, GET /users/N, "
             f"POST /echo of 0-4 KiB, GET /slow?ms=20..300), every answer checked byte for byte. "
             f"Config: deploy/nginx-ember.conf. On SIGTERM each app refuses new connections for "
             f"{size['refuse_ms']} ms (EMBER_REFUSE_MS), then stops; "
             f"{size['rounds']} rolling round(s). SIGKILL, one at a time: {', '.join(args.victim)}.", "",
             "| phase | requests | client-visible errors | answered after nginx retried | seconds |",
             "|---|---|---|---|---|"]
    for name, n, e, retried, secs in rows:
        lines.append(f"| {name} | {n} | {e} | {retried} | {secs:.1f} |")
    lines += ["", f"Requests in flight (through nginx, to any app) at the SIGKILLs: {in_flight_at_kill}; "
              f"errors among them: {len(kill_errors)} "
              f"({', '.join(sorted({r.kind + ' ' + str(r.status) for r in kill_errors})) or 'none'}).", ""]
    for r in kill_errors[:10] + [r for (n, lo, hi) in phases if not n.startswith("kill") for r in records
                                 if lo <= r.end < hi and not r.ok][:10]:
        lines.append(f"- error: {r.kind} status {r.status} upstream {r.upstream!r} {r.error}")
    lines += ["", "Events:", ""]
    t0 = events[0][0] if events else 0
    for t, what in events:
        lines.append(f"- {t - t0:6.1f} s {what}")
    lines += ["", "Result: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)), ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if failures or args.keep_logs:
        print(f"fleet: logs kept in {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
