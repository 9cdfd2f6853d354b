#!/usr/bin/env python3
"""Issue 11's ratios over repeated runs of bench/run (each ratio taken within one run):
default (auto) dispatch ÷ inline for C, Python and .NET at every wrk concurrency and, where
both ladders ran, at every ladder level; inline ÷ bare hyper; server CPU µs per request; the
drift check of each run. Prints the median and the range over the runs as Markdown.

    bench/i11_report.py bench/results/i11-run-1 bench/results/i11-run-2 ... [--md FILE]
"""
import argparse
import json
import statistics
from pathlib import Path

PAIRS = [
    ("C auto ÷ C inline", "ember-c-auto", "ember-c-inline", 0.9),
    ("Python auto ÷ Python inline", "ember-py-auto", "ember-py-inline", 0.9),
    (".NET auto ÷ .NET inline", "ember-net-auto", "ember-net-inline", 0.9),
    ("C inline ÷ bare hyper", "ember-c-inline", "hyper", 1.0),
    ("Python inline ÷ bare hyper", "ember-py-inline", "hyper", 0.85),
    (".NET inline ÷ bare hyper", "ember-net-inline", "hyper", 0.95),
    ("C auto ÷ bare hyper", "ember-c-auto", "hyper", None),
]
# Out of the box (unpinned, no options: auto dispatch, one I/O thread per core) the goal is
# every reference app ≥ 0.9× bare hyper's multi-thread runtime.
UNPINNED_PAIRS = [
    ("C auto (default) ÷ bare hyper", "ember-c-auto", "hyper", 0.9),
    ("Python auto (default) ÷ bare hyper", "ember-py-auto", "hyper", 0.9),
    (".NET auto (default) ÷ bare hyper", "ember-net-auto", "hyper", 0.9),
]
TARGETS = ["hyper", "ember-c-inline", "ember-c-auto", "ember-py-inline", "ember-py-auto", "ember-net-inline",
           "ember-net-auto"]


def point(run, mode, target, c):
    """One wrk point of a run (a dict, empty when the target or level is missing)."""
    return ((run["runs"][mode].get(target) or {}).get("wrk") or {}).get(str(c)) or {}


def spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--md")
    ap.add_argument("--mode", default="pinned", choices=("pinned", "unpinned"))
    a = ap.parse_args()
    mode = a.mode
    runs = []
    for d in a.runs:
        p = Path(d) / "results.json"
        if p.exists():
            runs.append((d, json.loads(p.read_text())))
    conc = runs[0][1]["meta"]["plan"]["concurrency"]
    L = [f"Runs: {len(runs)} ({', '.join(Path(d).name for d, _ in runs)}); median [min–max] over the runs, "
         "each ratio taken within one run " + ("(pinned: server on CPU 0, wrk on CPU 1)." if mode == "pinned" else
        "(unpinned: no taskset, one I/O thread per core, wrk -t<cores>, both sharing every core)."), ""]
    L.append("| pair (req/s ratio) | goal | " + " | ".join(f"c={c}" for c in conc) + " |")
    L.append("|---|---|" + "---|" * len(conc))
    pairs = PAIRS
    if mode == "unpinned":
        # The default ÷ hyper pairs carry the goal there; their goal-less twin goes.
        extra = {(x, y) for _, x, y, _ in UNPINNED_PAIRS}
        pairs = [p for p in PAIRS if (p[1], p[2]) not in extra] + UNPINNED_PAIRS
    for label, x, y, goal in pairs:
        cells = []
        for c in conc:
            vals = []
            for _, R in runs:
                wx, wy = point(R, mode, x, c), point(R, mode, y, c)
                if wx and wy.get("rps"):
                    vals.append(wx["rps"] / wy["rps"])
            cells.append(spread(vals))
        L.append(f"| {label} | {'≥ %.2f' % goal if goal else ''} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("Server CPU µs per request (median over runs):")
    L.append("")
    L.append("| target | " + " | ".join(f"c={c}" for c in conc) + " |")
    L.append("|---|" + "---|" * len(conc))
    for t in TARGETS:
        cells = []
        for c in conc:
            vals = [point(R, mode, t, c).get("cpu_us_per_req") for _, R in runs]
            vals = [v for v in vals if v]
            cells.append(f"{statistics.median(vals):.1f}" if vals else "–")
        L.append(f"| {t} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("p99 latency at c=256, ms (median [min–max] over runs; the goal: the default dispatch no worse than hyper):")
    L.append("")
    L.append("| target | p99 c=256 ms | ÷ hyper's in the same run |")
    L.append("|---|---|---|")
    for t in TARGETS:
        ms, ratio = [], []
        for _, R in runs:
            w, h = point(R, mode, t, 256), point(R, mode, "hyper", 256)
            p, ph = (w.get("latency_us") or {}).get("p99"), (h.get("latency_us") or {}).get("p99")
            p, ph = p and p / 1000, ph and ph / 1000
            if p:
                ms.append(p)
                if ph:
                    ratio.append(p / ph)
        L.append(f"| {t} | {spread(ms)} | {spread(ratio)} |")
    L.append("")
    lad = [(R["ladders"].get("ember-c-auto"), R["ladders"].get("ember-c-inline")) for _, R in runs]
    lad = [(x, y) for x, y in lad if x and y and x.get("rows") and y.get("rows")]
    if lad:
        levels = [r["conc"] for r in lad[0][0]["rows"]]
        L.append("Ladder (1 → 256), C auto ÷ C inline per level, and failed requests:")
        L.append("")
        L.append("| | " + " | ".join(f"c={c}" for c in levels) + " | failures |")
        L.append("|---|" + "---|" * (len(levels) + 1))
        cells = []
        for i, _ in enumerate(levels):
            cells.append(spread([x["rows"][i]["rps"] / y["rows"][i]["rps"] for x, y in lad if y["rows"][i]["rps"]]))
        fails = sum(r["fail"] for x, y in lad for r in x["rows"] + y["rows"])
        L.append("| auto ÷ inline | " + " | ".join(cells) + f" | {fails} |")
        L.append("")
    L.append("Drift check (hyper re-run at the end of each run, c=50): " + ", ".join(
        f"{R['drift'].get('drift_pct', float('nan')):+.1f} %" if R.get("drift") else "–" for _, R in runs))
    L.append("")
    text = "\n".join(L)
    print(text)
    if a.md:
        Path(a.md).write_text(text)


if __name__ == "__main__":
    main()
