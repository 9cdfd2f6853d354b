#!/usr/bin/env python3
"""Auto dispatch against inline, and inline against bare hyper, measured in pairs back to back.

Issue 11's ratios (auto ÷ inline ≥ 0.9, C inline ≥ 1.0× bare hyper) taken the way
front_ab.py takes the front's: every server runs at once (pinned to CPU 0, idle while the
others are measured), and wrk (CPU 1) measures the two sides of a pair one right after the
other, A B in odd rounds and B A in even ones, so that load coming and going on a shared
machine favours neither side. bench/run measures one target after the other, minutes
apart, and its ratios carry that drift (a re-run of one server moves 40–60 % here).

    flock /work/wt/bench.lock bench/dispatch_ab.py [--rounds 5] [--seconds 3] [--c 1,8,50,256] [--json out.json]

Each server has one I/O worker (`EMBER_WORKERS=1`; bare hyper one thread); the reference
apps answer `GET /` (the C app's hello, the Python and .NET apps' prepared answer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BENCH, ROOT, ember_lib_env  # noqa: E402
from front_ab import measure, stop_all, wrk  # noqa: E402
from front_cost import free_port, wait_port  # noqa: E402

PY = BENCH / ".venv" / "bin" / "python"
APPS = {
    "c": [str(ROOT / "samples" / "c" / "ember_ref"), "{port}"],
    "py": [str(PY if PY.exists() else Path(sys.executable)), str(ROOT / "samples" / "python" / "ember_ref.py"), "{port}"],
    "net": ["mono", str(ROOT / "samples" / "dotnet" / "EmberRef.exe"), "{port}"],
}
PAIRS = [
    # (label, server A, server B): the ratio is A's req/s ÷ B's
    ("C auto ÷ C inline", "c-auto", "c-inline"),
    ("Python auto ÷ Python inline", "py-auto", "py-inline"),
    (".NET auto ÷ .NET inline", "net-auto", "net-inline"),
    ("C inline ÷ bare hyper", "c-inline", "hyper"),
    ("C auto ÷ bare hyper", "c-auto", "hyper"),
    ("Python inline ÷ bare hyper", "py-inline", "hyper"),
    (".NET inline ÷ bare hyper", "net-inline", "hyper"),
]


def servers(apps: list) -> dict:
    """name -> (argv, env)."""
    out = {"hyper": ([str(ROOT / "target" / "release" / "bench-hyper"), "{port}", "1"], {})}
    for app in apps:
        for disp in ("inline", "auto"):
            out[f"{app}-{disp}"] = (APPS[app], {"EMBER_DISPATCH": disp, "EMBER_WORKERS": "1", **ember_lib_env()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--c", default="1,8,50,256", help="wrk concurrencies")
    ap.add_argument("--apps", default="c,py,net", help="reference apps (c, py, net)")
    ap.add_argument("--pairs", default="", help="only the pairs whose label contains one of these comma-separated words")
    ap.add_argument("--json")
    a = ap.parse_args()
    levels = [int(x) for x in a.c.split(",")]
    apps = [x for x in a.apps.split(",") if x]
    pairs = [p for p in PAIRS if p[1].split("-")[0] in apps + ["hyper"] and p[2].split("-")[0] in apps + ["hyper"]]
    if a.pairs:
        pairs = [p for p in pairs if any(w in p[0] for w in a.pairs.split(","))]
    procs, ports, rounds = {}, {}, []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, (argv, env) in servers(apps).items():
                ports[name] = free_port()
                argv = [x.replace("{port}", str(ports[name])) for x in argv]
                procs[name] = subprocess.Popen(["taskset", "-c", "0", *argv], env=dict(os.environ, **env), cwd=ROOT,
                                               stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / f"{name}.err", "wb"),
                                               start_new_session=True)
            for name, p in procs.items():
                try:
                    wait_port(ports[name], p, 120)
                except RuntimeError as e:
                    raise RuntimeError(f"{name}: {e}: {(Path(tmp) / f'{name}.err').read_text()[-500:]}") from None
                wrk(ports[name], "/", 50, 2)  # warm-up (and the JIT's first calls)
            for r in range(a.rounds):
                got = {}
                for c in levels:
                    for label, sa, sb in pairs:
                        sides = [("a", sa), ("b", sb)]
                        for side, srv in sides if r % 2 == 0 else sides[::-1]:
                            got[(label, c, side)] = rps, cpu = measure(procs[srv].pid, ports[srv], "/", c, a.seconds)
                            print(f"round {r + 1}: c={c}: {label}: {srv}: {rps:,.0f} req/s, {cpu:.1f} µs CPU/req", flush=True)
                rounds.append(got)
        finally:
            stop_all(procs)
    report = {"seconds": a.seconds, "rounds": a.rounds, "library": ember_lib_env().get("EMBER_LIBRARY", ""), "pairs": {}}
    print(f"\n{a.seconds} s per point, {a.rounds} rounds, each pair back to back (A B, then B A): "
          "median ratio [range]; CPU µs/req A / B (median)")
    print("| pair | " + " | ".join(f"c={c}" for c in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for label, _, _ in pairs:
        cells = []
        for c in levels:
            ratios = [g[(label, c, "a")][0] / g[(label, c, "b")][0] for g in rounds if g[(label, c, "b")][0]]
            cpu_a = statistics.median(g[(label, c, "a")][1] for g in rounds)
            cpu_b = statistics.median(g[(label, c, "b")][1] for g in rounds)
            report["pairs"].setdefault(label, {})[str(c)] = {"ratios": ratios, "median": statistics.median(ratios),
                                                             "cpu_us_a": cpu_a, "cpu_us_b": cpu_b}
            cells.append(f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}] ({cpu_a:.1f} / {cpu_b:.1f} µs)")
        print(f"| {label} | " + " | ".join(cells) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
