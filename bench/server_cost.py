#!/usr/bin/env python3
"""User-space instructions (callgrind, every process of the server summed) and system calls
(strace) per request, for any of bench/run's targets, at a chosen concurrency: counts, not
times, so they hold on a machine shared with other work, where req/s can drift by half.

    bench/server_cost.py ember-asgi granian-asgi uvicorn            # c = 1 and 50
    bench/server_cost.py --c 50 ember-wsgi-flask gunicorn-flask
    bench/server_cost.py --out bench/results/server-cost.md ember-asgi granian-asgi

Each target runs with one worker (the pinned mode's setting), under callgrind with
--trace-children=yes (a server that forks or spawns its workers is counted whole), twice:
with N1 and N2 keep-alive GETs spread over C connections; (count at N2 - count at N1) /
(N2 - N1) is one request's cost, start-up and shutdown cancel out. Under callgrind the
threads of a process run one at a time, so these are the instructions a request needs,
not the time lost to contention or in the kernel; the system calls show the kernel's side.
Needs valgrind and strace, and what bench/run builds (release engine, bench/.venv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, callgrind_count, free_port, tree_pids  # noqa: E402
from target_list import all_targets  # noqa: E402

LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")


def most_frequent(calls: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])[:4])


async def _client(port: int, path: str, n: int, keep_alive: bool) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    try:
        for i in range(n):
            if i and not keep_alive:  # a server that closes after every answer (gunicorn sync)
                w.close()
                r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(req)
            head = await r.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"answer: {head[:80]!r}")
            m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if not m:
                raise RuntimeError("the answer states no Content-Length")
            await r.readexactly(int(m.group(1)))
    finally:
        w.close()


def load(port: int, path: str, c: int, total: int, keep_alive: bool = True) -> None:
    async def main():
        await asyncio.gather(*(_client(port, path, total // c, keep_alive) for _ in range(c)))
    asyncio.run(main())


class Run:
    """One target started under a tool, in its own process group."""

    def __init__(self, t, pre: list[str], workdir: Path):
        self.port = free_port() if t.fixed_port else 0
        if t.prepare:
            t.prepare(self.port, workdir)
        argv = t.argv(self.port, 1, workdir)
        env = dict(os.environ, **t.env(1))
        self.out = workdir / "stdout"
        self.proc = subprocess.Popen(pre + argv, env=env, cwd=str(t.cwd or ROOT), stdout=open(self.out, "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        end = time.monotonic() + 300  # an interpreter under callgrind starts slowly
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{t.name} exited: {self.out.read_bytes()[-800:]!r}")
            if not self.port:
                m = LISTENING.search(self.out.read_bytes())
                if m:
                    self.port = int(m.group(1))
            if self.port:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    break
                except OSError:
                    pass
            time.sleep(0.3)
        else:
            raise RuntimeError(f"{t.name} did not start")
        load(self.port, t.path, 1, 20, t.keep_alive)  # first requests (imports, caches) out of the way
        time.sleep(1.0)

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass


def instructions(t, c: int, n: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        run = Run(t, ["valgrind", "--tool=callgrind", "--trace-children=yes",
                      f"--callgrind-out-file={d}/callgrind.%p"], d)
        try:
            load(run.port, t.path, c, n, t.keep_alive)
        finally:
            run.stop()
        time.sleep(0.5)
        total = sum(callgrind_count(f.read_text(errors="replace")) or 0 for f in d.glob("callgrind.*"))
        if not total:
            raise RuntimeError(f"{t.name}: no callgrind totals")
        return total


def syscalls(t, c: int, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        run = Run(t, [], d)
        out = d / "strace.out"
        try:
            pids = tree_pids(run.proc.pid)
            tracer = subprocess.Popen(["strace", "-f", "-c", "-o", str(out)] + [a for p in pids for a in ("-p", str(p))],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.5)
            load(run.port, t.path, c, n, t.keep_alive)
            tracer.send_signal(signal.SIGINT)
            tracer.wait(60)
        finally:
            run.stop()
        calls: dict[str, float] = {}
        for line in out.read_text().splitlines():
            f = line.split()
            if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
                calls[f[-1]] = int(f[3]) / n
        return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="+")
    ap.add_argument("--c", default="1,50", help="concurrency levels (default 1,50)")
    ap.add_argument("--n", type=int, default=500, help="N1 per connection-level unit (N2 = 5 x N1; default 500)")
    ap.add_argument("--out", help="also write a markdown table here (and .json beside it)")
    args = ap.parse_args()
    known = {t.name: t for t in all_targets()}
    rows = []
    for name in args.targets:
        t = known.get(name) or sys.exit(f"unknown target {name}; known: {', '.join(sorted(known))}")
        for c in (int(x) for x in args.c.split(",")):
            n1 = max(args.n, 20 * c)
            n1 -= n1 % c
            n2 = 5 * n1
            a, b = instructions(t, c, n1), instructions(t, c, n2)
            per = (b - a) / (n2 - n1)
            calls = syscalls(t, c, n2)
            total = sum(calls.values())
            rows.append({"target": name, "c": c, "n1": n1, "n2": n2, "instructions_per_request": round(per),
                         "syscalls_per_request": round(total, 3), "syscalls": {k: round(v, 4) for k, v in calls.items()}})
            print(f"{name} c={c}: {per:,.0f} instructions, {total:.2f} system calls per request ({most_frequent(calls)})", flush=True)
    if args.out:
        out = Path(args.out)
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        lines = [f"# Instructions and system calls per request ({stamp}, commit `{commit}`)", "",
                 "Written by `bench/server_cost.py` (callgrind, every process summed; strace -f). One worker each.", "",
                 "| target | c | user instructions / request | system calls / request | the most frequent |",
                 "|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['target']} | {r['c']} | {r['instructions_per_request']:,} | {r['syscalls_per_request']:.2f} "
                         f"| {most_frequent(r['syscalls'])} |")
        out.write_text("\n".join(lines) + "\n")
        out.with_suffix(".json").write_text(json.dumps({"when": stamp, "commit": commit, "rows": rows}, indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
