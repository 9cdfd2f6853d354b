#!/usr/bin/env python3
"""The Python reference app's GET / against bare hyper, on each request crossing:
the C extension (ember._speedups), ctypes (EMBER_PY_SPEEDUPS=0) and, with --base, the
binding of another checkout (e.g. main before the extension). Interleaved rounds like
bench/front_ab.py: every server runs at once pinned to CPU 0, wrk on CPU 1 alternates.

    flock /work/wt/bench.lock bench/py_crossing_ab.py [--base /work/wt/other] [--rounds 3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BENCH, ROOT, ember_lib_env  # noqa: E402
from front_ab import measure, stop_all, wrk  # noqa: E402
from front_cost import free_port, wait_port  # noqa: E402

RELEASE = ROOT / "target" / "release"
LIB = {"EMBER_DISPATCH": "inline", "EMBER_WORKERS": "1"}
PY = str(BENCH / ".venv" / "bin" / "python") if (BENCH / ".venv").exists() else sys.executable


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--c", type=int, default=50)
    ap.add_argument("--base", help="another checkout whose samples/python/ember_ref.py is the baseline")
    a = ap.parse_args()
    ref = str(ROOT / "samples" / "python" / "ember_ref.py")
    lib = {**LIB, **ember_lib_env()}
    servers = {
        "hyper": ([str(RELEASE / "bench-hyper"), "{port}", "1"], {}),
        "py-c": ([PY, ref, "{port}"], {**lib, "EMBER_PY_SPEEDUPS": "1"}),
        "py-ctypes": ([PY, ref, "{port}"], {**lib, "EMBER_PY_SPEEDUPS": "0"}),
    }
    if a.base:
        servers["py-base"] = ([PY, str(Path(a.base) / "samples" / "python" / "ember_ref.py"), "{port}"], lib)
    procs, ports = {}, {}
    rounds = []
    try:
        for name, (argv, env) in servers.items():
            port = free_port()
            argv = [x.replace("{port}", str(port)) for x in argv]
            procs[name] = subprocess.Popen(["taskset", "-c", "0", *argv], env=dict(os.environ, **env), cwd=ROOT,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True)
            ports[name] = port
        for name, p in procs.items():
            wait_port(ports[name], p, 120)
            wrk(ports[name], "/", a.c, 2)  # warm-up
        for r in range(a.rounds):
            got = {}
            for name in servers:
                got[name] = measure(procs[name].pid, ports[name], "/", a.c, a.seconds)
                rps = got[name][0]
                print(f"round {r + 1}: {name}: {rps:,.0f} req/s, {got[name][1]:.1f} µs CPU/req", flush=True)
            rounds.append(got)
    finally:
        stop_all(procs)
    print(f"\nc={a.c}, {a.seconds} s per point, {a.rounds} interleaved rounds: GET / ÷ bare hyper, "
          "median [range]; CPU µs/req (median)")
    for name in servers:
        ratios = [g[name][0] / g["hyper"][0] for g in rounds]
        print(f"- {name}: {statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}]; "
              f"{statistics.median(g[name][0] for g in rounds):,.0f} req/s; "
              f"CPU {statistics.median(g[name][1] for g in rounds):.1f} µs")


if __name__ == "__main__":
    main()
