#!/usr/bin/env python3
"""Hostile clients at the sizes of issue 12 item 3 (the CI test, tests/run_hostile.sh, runs
the same scenarios scaled down): 16 attacker connections per HTTP/2 attack for 30 s,
slowloris with 5,000 connections, 200 slow readers of 256 MiB answers, 10,000 HTTP/1
requests plus 8,000 HTTP/2 streams whose handler never answers, header bombs. Each
scenario runs against a fresh reference app; the figures (attacker cut off and when, the
app's RSS and descriptors, the polite probe's latency calm and under attack) go to
bench/results/hostile.json and a table to bench/results/hostile.md.

    bench/hostile.py [--app "samples/c/ember_ref"] [--only h1_slowloris,never_answered] [--size ci]

Load on 127.0.0.1 only; needs a raised descriptor limit (it raises its own soft limit).
"""
import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
import conftest  # noqa: E402,F401  (raises the descriptor limit)
from appproc import App  # noqa: E402
from scenarios import SCENARIOS, problems, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--app", default="samples/c/ember_ref")
    ap.add_argument("--only", default="")
    ap.add_argument("--size", default="bench", choices=["bench", "ci"])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "hostile"))
    args = ap.parse_args()
    names = [n for n in sorted(SCENARIOS) if not args.only or n in args.only.split(",")]
    results, failed = {}, []
    for name in names:
        app = App(args.app)
        app.start()
        try:
            outcome, report = run(app.proc.pid, app.port, name, args.size)
            found = problems(name, outcome, report, app.alive())
        finally:
            app.cleanup()
        results[name] = {"outcome": outcome, "server": report, "problems": found}
        print("%-24s %s" % (name, "ok" if not found else "; ".join(found)), flush=True)
        failed += [name] if found else []
    with open(args.out + ".json", "w") as f:
        json.dump({"app": args.app, "size": args.size, "results": results}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write("# Hostile clients (%s, size %s)\n\n" % (args.app, args.size))
        f.write("| scenario | attacker cut off | RSS base → peak MB | probe p50 / p99 ms calm | under attack | probe failures | verdict |\n")
        f.write("|---|---|---|---|---|---|---|\n")
        for name, r in results.items():
            o, s = r["outcome"], r["server"]
            cut = "%s / %s" % (o.get("cut_off", "-"), o.get("connections", o.get("requests", "-")))
            f.write("| %s | %s | %s → %s | %s / %s | %s / %s | %s | %s |\n" % (
                name, cut, s["rss_baseline_mb"], s["rss_peak_mb"], s["probe_calm"]["p50_ms"],
                s["probe_calm"]["p99_ms"], s["probe_attack"]["p50_ms"], s["probe_attack"]["p99_ms"],
                s["probe_attack"]["failures"], "ok" if not r["problems"] else "; ".join(r["problems"])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
