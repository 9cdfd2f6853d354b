#!/usr/bin/env python3
"""Interleaved repeats of the front's head-to-head pairs, for a spread on a shared machine.

bench/run measures one target after the other, so load that comes and goes between two
targets shows up as a difference between them. Here every server of a pair runs at once
(all pinned to CPU 0, idle while the other is measured) and wrk (CPU 1) measures the two
sides of a pair one right after the other, in the order A B in odd rounds and B A in even
ones, so that a drift within a round favours neither side. Each round gives one ratio per
pair; the report gives the median and the range of the rounds, and the server CPU µs per
request of each side. Bare hyper answers any target the same way, so it is sent the very
request its Ember side gets (the same bytes to parse).

    flock /work/wt/bench.lock bench/front_ab.py [--rounds 3] [--seconds 5] [--c 50] [--json out.json]

Uses the binaries that are built (target/release, samples/c/ember_ref, the .NET and Python
reference apps, bench/.venv) and nginx; the files of bench/front_targets.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import front_targets  # noqa: E402
from benchlib import BENCH, ROOT, ember_lib_env  # noqa: E402
from front_cost import cpu_ticks, free_port, wait_port  # noqa: E402

RELEASE = ROOT / "target" / "release"
LIB = {"EMBER_DISPATCH": "inline", "EMBER_WORKERS": "1"}


def servers(tmp: Path) -> dict:
    """name -> (argv, env, path)."""
    www = {"EMBER_WWW": str(front_targets.WWW)}
    conf = (BENCH / "targets" / "nginx_static.conf.in").read_text()
    nginx_port = free_port()
    conf = conf.replace("@PREFIX@", str(tmp)).replace("@PORT@", str(nginx_port)).replace("@WWW@", str(front_targets.WWW))
    (tmp / "nginx.conf").write_text(conf)
    ref = str(ROOT / "samples" / "c" / "ember_ref")
    lib = {**LIB, **ember_lib_env()}
    return {
        "hyper": ([str(RELEASE / "bench-hyper"), "{port}", "1"], {}, "/"),
        "ember-static": ([ref, "{port}"], {**lib, **www}, None),
        "nginx-static": (["nginx", "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")],
                         {"PORT": str(nginx_port)}, None),
        "ember-py": ([str(BENCH / ".venv" / "bin" / "python"), str(ROOT / "samples" / "python" / "ember_ref.py"), "{port}"],
                     lib, None),
        "ember-net": (["mono", str(ROOT / "samples" / "dotnet" / "EmberRef.exe"), "{port}"], lib, None),
    }


PAIRS = [
    # (label, server A, path A, server B, path B)
    ("static 1 KiB: Ember ÷ nginx", "ember-static", "/static/1k.json", "nginx-static", "/static/1k.json"),
    ("static 10 MiB: Ember ÷ nginx", "ember-static", "/static/10m.bin", "nginx-static", "/static/10m.bin"),
    ("Python /cached ÷ bare hyper", "ember-py", front_targets.CACHED_PATH, "hyper", front_targets.CACHED_PATH),
    ("Python /cached ÷ its GET /", "ember-py", front_targets.CACHED_PATH, "ember-py", "/"),
    (".NET /cached ÷ bare hyper", "ember-net", front_targets.CACHED_PATH, "hyper", front_targets.CACHED_PATH),
    (".NET /cached ÷ its GET /", "ember-net", front_targets.CACHED_PATH, "ember-net", "/"),
]


def tree_ticks(pid: int) -> int:
    """CPU ticks of a process and its descendants (nginx's worker is the master's child;
    taskset execs, so the pid is the server's)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_ticks(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def wrk(port: int, path: str, c: int, seconds: int) -> float:
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{c}", f"-d{seconds}s", "--timeout", "8s",
                          f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, timeout=seconds + 60).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{path}: {errors.group(1)} answers were not 2xx")
    return float(m.group(1)) if m else 0.0


def measure(pid: int, port: int, path: str, c: int, seconds: int) -> tuple:
    """One wrk point against a running server: (req/s, the server tree's CPU µs per request)."""
    t0 = tree_ticks(pid)
    rps = wrk(port, path, c, seconds)
    cpu = (tree_ticks(pid) - t0) / os.sysconf("SC_CLK_TCK")
    return rps, cpu / max(rps * seconds, 1) * 1e6


def stop_all(procs: dict) -> None:
    """SIGTERM each server's process group, then SIGKILL what has not left after 15 s."""
    for p in procs.values():
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs.values():
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--c", type=int, default=50)
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true", help="start the servers, one GET per pair, no load")
    a = ap.parse_args()
    front_targets.prepare_www()
    procs, ports = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, (argv, env, _) in servers(Path(tmp)).items():
                port = int(env.get("PORT", 0)) or free_port()
                argv = [x.replace("{port}", str(port)) for x in argv]
                full_env = dict(os.environ, **{k: v for k, v in env.items() if k != "PORT"})
                procs[name] = subprocess.Popen(["taskset", "-c", "0", *argv], env=full_env, cwd=ROOT,
                                               stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / f"{name}.err", "wb"),
                                               start_new_session=True)
                ports[name] = port
            for name, p in procs.items():
                try:
                    wait_port(ports[name], p, 120)
                except RuntimeError as e:
                    raise RuntimeError(f"{name}: {e}: {(Path(tmp) / f'{name}.err').read_text()[-500:]}") from None
            # The host answers /cached once; every request after that is the cache's.
            for srv in ("ember-py", "ember-net"):
                subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{ports[srv]}{front_targets.CACHED_PATH}"], check=True)
            if a.check:
                for label, sa, pa, sb, pb in PAIRS:
                    for srv, path in ((sa, pa), (sb, pb)):
                        code = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                               f"http://127.0.0.1:{ports[srv]}{path}"], capture_output=True, text=True).stdout
                        print(f"{srv} {path}: {code}")
                return
            for name in procs:  # warm-up
                path = {"ember-static": "/static/1k.json", "nginx-static": "/static/1k.json"}.get(name, "/")
                wrk(ports[name], path, a.c, 2)
            rounds = []
            for r in range(a.rounds):
                got = {}
                for label, sa, pa, sb, pb in PAIRS:
                    sides = [("a", sa, pa), ("b", sb, pb)]
                    for side, srv, path in sides if r % 2 == 0 else sides[::-1]:
                        got[(label, side)] = measure(procs[srv].pid, ports[srv], path, a.c, a.seconds)
                        rps, cpu = got[(label, side)]
                        print(f"round {r + 1}: {label}: {srv} {path}: {rps:,.0f} req/s, {cpu:.1f} µs CPU/req", flush=True)
                rounds.append(got)
            # The host must not have been called again: the body still counts one call.
            for srv in ("ember-py", "ember-net"):
                body = subprocess.run(["curl", "-s", f"http://127.0.0.1:{ports[srv]}{front_targets.CACHED_PATH}"],
                                      capture_output=True, check=True).stdout
                assert body == front_targets.CACHED_BODY, (srv, body)
        finally:
            stop_all(procs)
    report = {"c": a.c, "seconds": a.seconds, "rounds": [], "pairs": {}}
    sides = {(label, "a"): f"{sa} {pa}" for label, sa, pa, _, _ in PAIRS} | {(label, "b"): f"{sb} {pb}" for label, _, _, sb, pb in PAIRS}
    for got in rounds:
        report["rounds"].append({f"{label}: {sides[(label, side)]}": {"rps": v[0], "cpu_us_per_req": v[1]}
                                 for (label, side), v in got.items()})
    print(f"\nc={a.c}, {a.seconds} s per point, {a.rounds} rounds, each pair measured back to back (A B, then B A): "
          "median ratio [range]; CPU µs/req A / B (median)")
    for label, sa, pa, sb, pb in PAIRS:
        ratios = [g[(label, "a")][0] / g[(label, "b")][0] for g in rounds if g[(label, "b")][0]]
        cpu_a = statistics.median(g[(label, "a")][1] for g in rounds)
        cpu_b = statistics.median(g[(label, "b")][1] for g in rounds)
        report["pairs"][label] = {"ratios": ratios, "median": statistics.median(ratios), "cpu_us_a": cpu_a, "cpu_us_b": cpu_b}
        print(f"- {label}: {statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}]; "
              f"CPU {cpu_a:.1f} / {cpu_b:.1f} µs")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
