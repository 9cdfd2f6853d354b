#!/usr/bin/env python3
"""Soak (issue 12 item 5): mixed requests against one reference app for a while, its RSS
sampled every second; fails on an unexpected answer or on RSS growth after warm-up.

    bench/soak/soak.py --app samples/c/ember_ref --seconds 20          # the CI smoke
    bench/soak/soak.py --app "python3 samples/python/ember_ref.py" --seconds 3600 --out bench/results/soak-py
    bench/soak/soak.py --app samples/c/ember_ref --requests 10000000 --out bench/results/soak-c
                                                  # the full size; bench/soak/run.sh runs every host

The mix, per client connection: GET / , GET /users/{id}, POST /echo (0 B to 64 KiB), GET /inspect,
GET /fail (500), GET /slow?ms=5, an unknown path (404), a body over the limit (413), and
keep-alive churn (every 20th request closes its connection); every answer's status and body
are checked. The client: bench-soak (bench/soak_client.rs, built by `cargo build --release`;
one thread, tens of thousands of requests per second) when it is built, else the same mix in
Python (bench/soak/mix.py; a few thousand per second per process). --procs client processes
with --clients connections each (Python: threads); --requests stops at that many (--seconds
stays an upper bound). The run also stops early when the app dies (its exit and stderr tail
are recorded). Growth: the RSS peak of the last half against the peak of the first half after
warm-up (the first quarter); allowed 5% or 2 MB, whichever is larger.
"""
import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
from appproc import App  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mix  # noqa: E402


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


BENCH_SOAK = os.path.join(ROOT, "target", "release", "bench-soak")


class PyClients:
    """--procs Python processes of --clients threads each (bench/soak/mix.py)."""
    name = "python"

    def __init__(self, port, procs, clients, requests):
        ctx = multiprocessing.get_context("fork")
        self.counts = ctx.Array("q", procs, lock=False)
        self.errors = ctx.Array("q", procs, lock=False)
        self.errq, self.done = ctx.Queue(), ctx.Event()
        self.procs = [ctx.Process(target=mix.client_proc, args=(port, clients, i, i, self.counts, self.errors,
                                                                  self.errq, self.done), daemon=True)
                      for i in range(procs)]
        for p in self.procs:
            p.start()

    def total(self):
        return sum(self.counts[:])

    def running(self):
        return True

    def stop(self):
        """Stops every client; returns (requests, unexpected, the first descriptions)."""
        self.done.set()
        for p in self.procs:
            p.join(30)
        first = []
        while not self.errq.empty() and len(first) < 10:
            first.append(self.errq.get())
        return sum(self.counts[:]), sum(self.errors[:]), first


class RustClients:
    """--procs bench-soak processes (bench/soak_client.rs) of --clients connections each; each
    process stops itself at its share of --requests, and every one stops when its stdin closes."""
    name = "rust"

    def __init__(self, port, procs, clients, requests):
        self.progress = [(0, 0)] * procs
        self.final = [None] * procs
        self.procs = []
        for i in range(procs):
            share = requests // procs + (1 if i < requests % procs else 0) if requests else 0
            p = subprocess.Popen([BENCH_SOAK, "127.0.0.1:%d" % port, str(clients), str(i + 1), str(share)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.procs.append(p)
            threading.Thread(target=self._read, args=(i, p), daemon=True).start()

    def _read(self, i, p):
        for line in p.stdout:
            if line.startswith(b"progress "):
                n, bad = line.split()[1:3]
                self.progress[i] = (int(n), int(bad))
            elif line.startswith(b"{"):
                self.final[i] = json.loads(line)

    def total(self):
        return sum(n for n, _ in self.progress)

    def running(self):
        return any(p.poll() is None for p in self.procs)

    def stop(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        requests, unexpected, first = 0, 0, []
        for i, p in enumerate(self.procs):
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            deadline = time.monotonic() + 5
            while self.final[i] is None and time.monotonic() < deadline:
                time.sleep(0.05)
            f = self.final[i]
            if f is None:
                # A client that died or hung: its last progress counts, and the run fails.
                n, bad = self.progress[i]
                f = {"requests": n, "unexpected": bad + 1,
                     "unexpected_first": ["bench-soak %d ended without its result (exit %r)" % (i, p.returncode)]}
            requests += f["requests"]
            unexpected += f["unexpected"]
            first += f["unexpected_first"]
        return requests, unexpected, first[:10]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--app", default="samples/c/ember_ref")
    ap.add_argument("--seconds", type=float, default=None, help="upper bound (default 20, none with --requests)")
    ap.add_argument("--requests", type=int, default=0, help="stop after this many requests (0: --seconds only)")
    ap.add_argument("--client", choices=["auto", "rust", "python"], default="auto",
                    help="rust: bench-soak (cargo build --release); auto: rust when it is built")
    ap.add_argument("--clients", type=int, default=None,
                    help="connections per client process (rust, default 32) or threads (python, default 8)")
    ap.add_argument("--procs", type=int, default=1, help="client processes")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    seconds = args.seconds if args.seconds is not None else (float("inf") if args.requests else 20.0)
    kind = args.client if args.client != "auto" else ("rust" if os.access(BENCH_SOAK, os.X_OK) else "python")
    if kind == "rust" and not os.access(BENCH_SOAK, os.X_OK):
        print("soak.py: %s is missing: cargo build --release" % BENCH_SOAK, file=sys.stderr)
        return 2
    if args.clients is None:
        args.clients = 32 if kind == "rust" else 8
    app = App(args.app)
    app.start()
    samples = []
    t0 = time.monotonic()
    clients = (RustClients if kind == "rust" else PyClients)(app.port, args.procs, args.clients, args.requests)
    while True:
        total = clients.total()
        now = time.monotonic() - t0
        alive = app.alive()
        if alive:
            samples.append((round(now, 1), rss_kb(app.proc.pid), total))
            if len(samples) % 60 == 0:  # a long run shows it is moving
                print("soak: %.0f s, %d requests, RSS %.1f MB" % (now, total, samples[-1][1] / 1024),
                      file=sys.stderr, flush=True)
        if not alive or now >= seconds or (args.requests and total >= args.requests) or not clients.running():
            break
        time.sleep(1)
    total, unexpected, first_errors = clients.stop()
    took = time.monotonic() - t0
    alive = app.alive()
    if alive:
        samples.append((round(took, 1), rss_kb(app.proc.pid), total))
    exit_desc, stderr_tail, stopped_clean = None, None, None
    if alive:
        # A graceful stop is part of the result: the app must still drain and exit 0.
        app.proc.send_signal(signal.SIGTERM)
        try:
            stopped_clean = app.proc.wait(15) == 0
        except Exception:
            stopped_clean = False
    else:
        exit_desc = app.exit_description()
        stderr_tail = app.output_tail(60)
    app.cleanup()
    n = len(samples)
    warm = samples[n // 4:]
    first, last = warm[:len(warm) // 2], warm[len(warm) // 2:]
    first_peak = max((kb for _, kb, _ in first), default=0)
    last_peak = max((kb for _, kb, _ in last), default=0)
    allowed = max(first_peak * 0.05, 2048)
    result = {"app": args.app, "dispatch": os.environ.get("EMBER_DISPATCH", "default"),
              "workers": os.environ.get("EMBER_WORKERS", "default"), "seconds": round(took, 1),
              "client": kind, "clients": args.clients, "procs": args.procs, "requests": total,
              "requests_per_s": round(total / took) if took > 0 else 0,
              "unexpected": unexpected, "unexpected_first": first_errors,
              "rss_start_mb": round(samples[0][1] / 1024, 1) if samples else 0,
              "rss_peak_mb": round(max(kb for _, kb, _ in samples) / 1024, 1) if samples else 0,
              "rss_first_half_peak_mb": round(first_peak / 1024, 1), "rss_last_half_peak_mb": round(last_peak / 1024, 1),
              "growth_mb": round((last_peak - first_peak) / 1024, 2), "allowed_mb": round(allowed / 1024, 2),
              "alive": alive, "stopped_clean": stopped_clean, "exit": exit_desc, "stderr_tail": stderr_tail,
              "samples": samples}
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(result, f, indent=0)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))
    failed = unexpected or not alive or not stopped_clean or last_peak - first_peak > allowed or n < 4
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
