#!/usr/bin/env python3
"""Soak (issue 12 item 5): mixed requests against one reference app for a while, its RSS
sampled every second; fails on an unexpected answer or on RSS growth after warm-up.

    bench/soak/soak.py --app samples/c/ember_ref --seconds 20          # the CI smoke
    bench/soak/soak.py --app "python3 samples/python/ember_ref.py" --seconds 3600 --out bench/results/soak-py
    bench/soak/soak.py --app samples/c/ember_ref --requests 10000000 --procs 2 --out bench/results/soak-c
                                                  # the full size; bench/soak/run.sh runs every host

The mix, per client thread: GET / , GET /users/{id}, POST /echo (0 B to 64 KiB), GET /inspect,
GET /fail (500), GET /slow?ms=5, an unknown path (404), a body over the limit (413), and
keep-alive churn (every 20th request closes its connection). --procs client processes with
--clients threads each (one Python process tops out at a few thousand requests per second,
below what the engine serves); --requests stops at that many (--seconds stays an upper bound).
The run also stops early when the app dies (its exit and stderr tail are recorded). Growth: the RSS peak of the
last half against the peak of the first half after warm-up (the first quarter); allowed
5% or 2 MB, whichever is larger.
"""
import argparse
import http.client
import json
import multiprocessing
import os
import signal
import random
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
from appproc import App  # noqa: E402

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def one(conn, rnd):
    """One request of the mix; returns (ok, description) after checking the answer."""
    kind = rnd.randrange(8)
    close = rnd.randrange(20) == 0
    headers = {"Connection": "close"} if close else {}
    if kind == 0:
        conn.request("GET", "/", headers=headers)
        want, check = 200, lambda b: b == HELLO
    elif kind == 1:
        uid = "u%d" % rnd.randrange(1000000)
        conn.request("GET", "/users/" + uid, headers=headers)
        want, check = 200, lambda b: json.loads(b) == {"id": uid}
    elif kind == 2:
        body = os.urandom(rnd.choice([0, 1, 100, 4096, 65536]))
        conn.request("POST", "/echo", body=body, headers=dict(headers, **{"Content-Type": "application/x-soak"}))
        want, check = 200, lambda b: b == body
    elif kind == 3:
        conn.request("GET", "/inspect?x=%d" % rnd.randrange(100), headers=headers)
        want, check = 200, lambda b: json.loads(b)["path"] == "/inspect"
    elif kind == 4:
        conn.request("GET", "/fail", headers=headers)
        want, check = 500, lambda b: True
    elif kind == 5:
        conn.request("GET", "/slow?ms=5", headers=headers)
        want, check = 200, lambda b: json.loads(b) == {"slept_ms": 5}
    elif kind == 6:
        conn.request("GET", "/no/such/path", headers=headers)
        want, check = 404, lambda b: True
    else:
        # Declared over the limit and not sent: the engine answers 413 from the head
        # (a client still writing the body would race the close: EPIPE).
        conn.putrequest("POST", "/echo")
        conn.putheader("Content-Length", str(1048576 + 1))
        conn.endheaders()
        want, check = 413, lambda b: True
    r = conn.getresponse()
    body = r.read()
    ok = r.status == want and check(body)
    # 413 closes (the rest of the body is unread), and so do answers to Connection: close.
    return ok, (kind, r.status), close or kind == 7 or r.getheader("Connection", "").lower() == "close"


def client(port, stop, counts, errors, seed):
    """One client thread of a client process; counts[0] and errors are its process's."""
    rnd = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    used, last = 0, time.monotonic()
    while not stop.is_set():
        start = time.monotonic()
        try:
            ok, what, closed = one(conn, rnd)
        except (OSError, http.client.HTTPException, ValueError) as e:
            # How long the connection sat idle before this request tells a server that
            # dropped a request from the keep-alive race (idle timeout) on a stalled client.
            ok, closed = False, True
            what = "%r after %.1f s (request %d on its connection, idle %.1f s before it)" % (
                e, time.monotonic() - start, used + 1, start - last)
        counts[0] += 1
        used, last = used + 1, time.monotonic()
        if not ok:
            errors.append(what)
        if closed:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            used = 0
    conn.close()


def client_proc(port, clients, seed, slot, shared_counts, shared_errors, errq, done):
    """A client process: `clients` threads until `done` is set. Its count and error count
    go to its own slot of the shared arrays (one writer per slot, no lock); its first errors
    through errq at the end."""
    stop = threading.Event()
    counts, errors = [0], []
    threads = [threading.Thread(target=client, args=(port, stop, counts, errors, seed * 1000 + i), daemon=True)
               for i in range(clients)]
    for t in threads:
        t.start()
    while not done.wait(0.1):
        shared_counts[slot], shared_errors[slot] = counts[0], len(errors)
    stop.set()
    for t in threads:
        t.join(15)
    shared_counts[slot], shared_errors[slot] = counts[0], len(errors)
    for e in errors[:10]:
        errq.put(str(e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--app", default="samples/c/ember_ref")
    ap.add_argument("--seconds", type=float, default=None, help="upper bound (default 20, none with --requests)")
    ap.add_argument("--requests", type=int, default=0, help="stop after this many requests (0: --seconds only)")
    ap.add_argument("--clients", type=int, default=8, help="client threads per process")
    ap.add_argument("--procs", type=int, default=1, help="client processes")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    seconds = args.seconds if args.seconds is not None else (float("inf") if args.requests else 20.0)
    app = App(args.app)
    app.start()
    ctx = multiprocessing.get_context("fork")
    shared_counts = ctx.Array("q", args.procs, lock=False)
    shared_errors = ctx.Array("q", args.procs, lock=False)
    errq, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=client_proc, args=(app.port, args.clients, i, i, shared_counts, shared_errors, errq, done),
                         daemon=True) for i in range(args.procs)]
    samples = []
    t0 = time.monotonic()
    for p in procs:
        p.start()
    while True:
        total = sum(shared_counts[:])
        now = time.monotonic() - t0
        alive = app.alive()
        if alive:
            samples.append((round(now, 1), rss_kb(app.proc.pid), total))
        if not alive or now >= seconds or (args.requests and total >= args.requests):
            break
        time.sleep(1)
    done.set()
    first_errors = []
    for p in procs:
        p.join(30)
    while not errq.empty() and len(first_errors) < 10:
        first_errors.append(errq.get())
    took = time.monotonic() - t0
    total, unexpected = sum(shared_counts[:]), sum(shared_errors[:])
    alive = app.alive()
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
              "clients": args.clients, "procs": args.procs, "requests": total,
              "requests_per_s": round(total / took) if took > 0 else 0,
              "unexpected": unexpected, "unexpected_first": first_errors,
              "rss_start_mb": round(samples[0][1] / 1024, 1) if samples else 0,
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
