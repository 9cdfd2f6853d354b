#!/usr/bin/env python3
"""Instructions (callgrind, user space) and system calls (strace) per request for the
front's benchmark paths, Ember beside nginx and bare hyper: counts, not times, so they hold
on a machine shared with other work, where req/s can drift by half.

    bench/front_cost.py                  # every case below
    bench/front_cost.py static-1k nginx-static-1k
    N1=200 N2=1200 bench/front_cost.py

Each case runs twice under the tool, with N1 and N2 keep-alive GETs on one connection; the
difference divided by N2 - N1 is one request's cost (start-up and shutdown cancel out).
Needs the release build (target/release), samples/c/ember_ref, valgrind, strace, nginx.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import front_targets  # noqa: E402
from benchlib import BENCH, ROOT, callgrind_count, free_port  # noqa: E402,F401 (free_port: re-exported to the other cost scripts)

N1 = int(os.environ.get("N1", "300"))
N2 = int(os.environ.get("N2", "1300"))
REF = ROOT / "samples" / "c" / "ember_ref"
HYPER = ROOT / "target" / "release" / "bench-hyper"


def ember(path):
    def cmd(port, d):
        env = dict(os.environ, EMBER_WWW=str(front_targets.WWW), EMBER_DISPATCH="inline", EMBER_WORKERS="1")
        return [str(REF), str(port)], env
    return cmd, path


def hyper(port, d):
    return [str(HYPER), str(port), "1"], dict(os.environ)


def nginx(port, d):
    text = (BENCH / "targets" / "nginx_static.conf.in").read_text()
    # One process, so that the tools see the worker's work.
    text = text.replace("master_process on;", "master_process off;")
    text = text.replace("@PREFIX@", str(d)).replace("@PORT@", str(port)).replace("@WWW@", str(front_targets.WWW))
    (d / "nginx.conf").write_text(text)
    return ["nginx", "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")], dict(os.environ)


CASES = {
    "hyper": (hyper, "/"),
    "ember-root": ember("/"),
    "static-1k": ember("/static/1k.json"),
    "nginx-static-1k": (nginx, "/static/1k.json"),
    "cached": ember("/cached?ttl=3600"),
    "static-10m": ember("/static/10m.bin"),
    "nginx-static-10m": (nginx, "/static/10m.bin"),
}
# 10 MiB answers: fewer requests, no callgrind (it would take minutes per run).
BIG = {"static-10m", "nginx-static-10m"}


def wait_port(port: int, proc: subprocess.Popen, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("did not start")


def load(port: int, path: str, n: int) -> None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(n):
        c.request("GET", path)
        r = c.getresponse()
        got = 0
        while chunk := r.read(1 << 20):
            got += len(chunk)
        assert r.status == 200 and got, r.status
    c.close()


def callgrind_total(name: str, argv: list[str], env: dict, port: int, path: str, n: int) -> int:
    """Total instructions of a server run under callgrind from its start, serving n keep-alive
    GETs of path on one connection, then stopped. An interpreter or a managed runtime under
    callgrind starts slowly: up to 180 s. KEEP=<prefix> keeps the profile as
    <prefix>.<name>.<n> for callgrind_annotate."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "callgrind.out"
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        try:
            wait_port(port, proc, 180)
            load(port, path, n)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if os.environ.get("KEEP"):
            Path(f"{os.environ['KEEP']}.{name}.{n}").write_bytes(out.read_bytes())
        total = callgrind_count(out.read_text())
        if total is None:
            raise RuntimeError(f"{name}: no totals in the callgrind output")
        return total


def print_per_request(cases, measure, n1: int, n2: int) -> None:
    """For each case, (count at n2 - count at n1) / (n2 - n1): start-up and shutdown cancel out."""
    for case in cases:
        a, b = measure(case, n1), measure(case, n2)
        print(f"{case}: {(b - a) / (n2 - n1):,.0f} instructions per request "
              f"(N1={n1}: {a:,}, N2={n2}: {b:,})", flush=True)


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (clock ticks), its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def measure(case: str, tool: str, n: int) -> int:
    make, path = CASES[case]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        port = free_port()
        argv, env = make(port, d)
        out = d / "tool.out"
        # strace attaches after start-up and is stopped before the server (SIGINT makes it
        # detach and write its table); callgrind runs the server from the start.
        pre = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] if tool == "callgrind" else []
        proc = subprocess.Popen(pre + argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)
        tracer = None
        ticks = 0
        try:
            wait_port(port, proc)
            ticks = cpu_ticks(proc.pid)
            if tool == "strace":
                tracer = subprocess.Popen(["strace", "-f", "-c", "-o", str(out), "-p", str(proc.pid)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
            load(port, path, n)
            ticks = cpu_ticks(proc.pid) - ticks
        finally:
            if tracer is not None:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if tool == "cpu":
            return ticks
        text = out.read_text()
        if tool == "callgrind":
            return callgrind_count(text)
        total = [line.split() for line in text.splitlines() if line.rstrip().endswith("total")][-1]
        return int(total[3])  # % time, seconds, usecs/call, calls, [errors], "total"


def main() -> None:
    front_targets.prepare_www()
    cases = sys.argv[1:] or list(CASES)
    hz = os.sysconf("SC_CLK_TCK")
    for case in cases:
        row = []
        if case in BIG:
            n1, n2 = 4, 44
            a, b = measure(case, "strace", n1), measure(case, "strace", n2)
            row.append(f"{(b - a) / (n2 - n1):,.1f} syscalls")
            ticks = measure(case, "cpu", n2)
            row.append(f"{ticks / hz / n2 * 1000:,.2f} ms of server CPU (user + system; a time, so noisy)")
        else:
            for tool in ("callgrind", "strace"):
                a, b = measure(case, tool, N1), measure(case, tool, N2)
                row.append(f"{(b - a) / (N2 - N1):,.1f} {'instructions' if tool == 'callgrind' else 'syscalls'}")
        print(f"{case}: {', '.join(row)} per request", flush=True)


if __name__ == "__main__":
    main()
