#!/usr/bin/env python3
"""Streaming and WebSocket benchmark: `bench/run ws` (full) or `bench/run ws --quick` (CI smoke).

For each target, in one run on one machine (server pinned to CPU 0, clients to CPU 1):

* **hold**: N WebSocket connections on `/ws/chat` (10,000 in the full run): the server's RSS
  idle, with all open (and per connection), after one broadcast reached all of them, and 12 s
  after they all closed; the broadcast's time until the last connection had it.
* **echo**: C connections (1,000) each sending a 64-byte message to `/ws` and waiting for its
  echo, for S seconds: round trips per second, p50 / p90 / p99 / max latency, server CPU µs per
  round trip.
* **stream**: one `GET /stream?n=1024&size=1048576` (1 GiB, chunked) read by curl: MiB/s and
  server CPU ms per GiB; bare hyper streaming the same chunks is the ceiling.

Targets: the three reference apps (C, Python, .NET) and, as anchors, uvicorn with the
`websockets` library (`targets/py_ws.py`) and bare hyper (stream only). The load clients are
`bench-ws` (`bench/ws_load.rs`) and curl. PicoServer's published figure (10,000 WebSocket
connections in 398 MB) is printed beside ours; it is a Windows .NET server that cannot run here.
--quick asserts right answers and that every number was measured, never a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BENCH, ROOT, BenchError, Server, ember_lib_env, cpu_seconds, free_port, log, rss_kb, tree_pids  # noqa: E402

RESULTS = BENCH / "results"
RELEASE = ROOT / "target" / "release"
VENV = BENCH / ".venv"
PICOSERVER_10K_MB = 398


def _python() -> str:
    return str(VENV / "bin" / "python") if (VENV / "bin" / "python").exists() else sys.executable


def targets() -> dict[str, dict]:
    pin_env = {"EMBER_WORKERS": "1", **ember_lib_env()}
    return {
        "ember-c": {"argv": [str(ROOT / "samples" / "c" / "ember_ref"), "0"], "env": pin_env, "ws": True},
        "ember-py": {"argv": [_python(), str(ROOT / "samples" / "python" / "ember_ref.py"), "0"], "env": pin_env,
                     "ws": True},
        "ember-net": {"argv": ["mono", str(ROOT / "samples" / "dotnet" / "EmberRef.exe"), "0"], "env": pin_env,
                      "ws": True},
        "uvicorn": {"argv": [str(VENV / "bin" / "uvicorn"), "--host", "127.0.0.1", "--port", "{port}", "--ws",
                             "websockets", "--ws-ping-interval", "600", "--no-access-log", "--log-level", "warning",
                             "py_ws:app"],
                    "cwd": BENCH / "targets", "fixed_port": True, "ws": True},
        "hyper": {"argv": [str(RELEASE / "bench-hyper"), "0", "1"], "ws": False},
    }


def start(name: str, spec: dict, logdir: Path) -> Server:
    port = free_port() if spec.get("fixed_port") else None
    argv = [a.replace("{port}", str(port)) for a in spec["argv"]]
    return Server(name, argv, spec.get("env"), spec.get("cwd"), logdir, port, "0", ready_timeout=60.0)


def rss_mb(srv: Server) -> float:
    return rss_kb(tree_pids(srv.pid)) / 1024


def cpu(srv: Server) -> float:
    return cpu_seconds(tree_pids(srv.pid), srv.pid)


def hold(srv: Server, n: int, settle: float) -> dict:
    out: dict = {"connections": n, "rss_idle_mb": round(rss_mb(srv), 1)}
    client = subprocess.Popen(["taskset", "-c", "1", str(RELEASE / "bench-ws"), "hold", f"127.0.0.1:{srv.port}",
                               "/ws/chat", str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def expect(word: str, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        line = client.stdout.readline()
        if not line.startswith(word) or time.monotonic() > deadline:
            raise BenchError(f"bench-ws hold: expected {word!r}, got {line!r}")
        return line.split()

    try:
        words = expect("open", 300)
        out["open_ms"] = int(words[2])
        time.sleep(2)
        out["rss_open_mb"] = round(rss_mb(srv), 1)
        out["kb_per_connection"] = round((out["rss_open_mb"] - out["rss_idle_mb"]) * 1024 / n, 2)
        client.stdin.write("broadcast\n")
        client.stdin.flush()
        words = expect("received", 120)
        out["broadcast_received"], out["broadcast_ms"] = int(words[1]), int(words[2])
        out["rss_after_broadcast_mb"] = round(rss_mb(srv), 1)
        client.stdin.write("close\n")
        client.stdin.flush()
        words = expect("closed", 120)
        out["closed"] = int(words[1])
        time.sleep(settle)
        out["rss_after_close_mb"] = round(rss_mb(srv), 1)
    finally:
        client.kill()
        client.wait()
    if out["broadcast_received"] != n or out["closed"] != n:
        raise BenchError(f"{srv.name}: broadcast reached {out['broadcast_received']}, closed {out['closed']} of {n}")
    return out


def echo(srv: Server, conns: int, seconds: int) -> dict:
    before = cpu(srv)
    r = subprocess.run(["taskset", "-c", "1", str(RELEASE / "bench-ws"), "echo", f"127.0.0.1:{srv.port}", "/ws",
                        str(conns), str(seconds), "64"], capture_output=True, text=True, timeout=seconds + 180)
    if r.returncode != 0:
        raise BenchError(f"{srv.name}: bench-ws echo failed: {r.stderr.strip()[-300:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    used = cpu(srv) - before
    out["server_cpu_us_per_round_trip"] = round(used * 1e6 / max(out["round_trips"], 1), 2)
    if out["errors"] or not out["round_trips"]:
        raise BenchError(f"{srv.name}: echo had {out['errors']} errors, {out['round_trips']} round trips")
    return out


def stream(srv: Server, mib: int) -> dict:
    url = f"http://127.0.0.1:{srv.port}/stream?n={mib}&size=1048576"
    before, t = cpu(srv), time.monotonic()
    r = subprocess.run(["taskset", "-c", "1", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                        url], capture_output=True, text=True, timeout=600)
    elapsed, used = time.monotonic() - t, cpu(srv) - before
    code, size = r.stdout.split()
    if r.returncode != 0 or code != "200" or int(size) != mib << 20:
        raise BenchError(f"{srv.name}: stream answered {code}, {size} bytes, curl: {r.stderr.strip()}")
    return {"mib": mib, "mib_per_s": round(mib / elapsed, 1), "server_cpu_ms_per_gib": round(used * 1000 * 1024 / mib, 1)}


def report(results: dict, quick: bool) -> str:
    lines = ["# Streaming and WebSocket", "",
             f"`bench/run ws{' --quick' if quick else ''}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{os.cpu_count()} cores; server pinned to CPU 0 (one I/O thread), clients to CPU 1.", ""]
    hold_rows = [(k, v["hold"]) for k, v in results.items() if "hold" in v]
    if hold_rows:
        n = hold_rows[0][1]["connections"]
        lines += [f"## {n:,} WebSocket connections on /ws/chat (PicoServer's figure: 10,000 in {PICOSERVER_10K_MB} MB)", "",
                  "| target | idle MB | all open MB | KB/conn | broadcast to all ms | after broadcast MB | after close MB (12 s) |",
                  "|---|---|---|---|---|---|---|"]
        for k, h in hold_rows:
            lines.append(f"| {k} | {h['rss_idle_mb']} | {h['rss_open_mb']} | {h['kb_per_connection']} | "
                         f"{h['broadcast_ms']} | {h['rss_after_broadcast_mb']} | {h['rss_after_close_mb']} |")
        lines.append("")
    echo_rows = [(k, v["echo"]) for k, v in results.items() if "echo" in v]
    if echo_rows:
        lines += [f"## Echo: {echo_rows[0][1]['conns']:,} connections, 64-byte messages", "",
                  "| target | round trips/s | p50 µs | p90 µs | p99 µs | max µs | server CPU µs/round trip |",
                  "|---|---|---|---|---|---|---|"]
        for k, e in echo_rows:
            lines.append(f"| {k} | {e['per_s']:.0f} | {e['p50_us']} | {e['p90_us']} | {e['p99_us']} | {e['max_us']} | "
                         f"{e['server_cpu_us_per_round_trip']} |")
        lines.append("")
    st_rows = [(k, v["stream"]) for k, v in results.items() if "stream" in v]
    if st_rows:
        ceiling = results.get("hyper", {}).get("stream", {}).get("mib_per_s")
        lines += [f"## Streamed answer: {st_rows[0][1]['mib']} MiB in 1 MiB chunks, read by curl", "",
                  "| target | MiB/s | ÷ hyper | server CPU ms per GiB |", "|---|---|---|---|"]
        for k, s in st_rows:
            ratio = f"{s['mib_per_s'] / ceiling:.2f}" if ceiling else "–"
            lines.append(f"| {k} | {s['mib_per_s']} | {ratio} | {s['server_cpu_ms_per_gib']} |")
        lines.append("")
    errors = {k: v["error"] for k, v in results.items() if "error" in v}
    if errors:
        lines += ["## Not measured", ""] + [f"- {k}: {e}" for k, e in errors.items()] + [""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CI smoke: 200 connections, 2 s echo, 16 MiB stream")
    ap.add_argument("--targets", default="ember-c,ember-py,ember-net,uvicorn,hyper")
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--echo-connections", type=int, default=1000)
    ap.add_argument("--echo-seconds", type=int, default=10)
    ap.add_argument("--stream-mib", type=int, default=1024)
    ap.add_argument("--out", default=str(RESULTS / "ws"), help="results prefix (.json and .md are added)")
    ap.add_argument("--no-build", action="store_true", help="use the binaries that are there")
    ap.add_argument("--allow-missing", action="store_true", help="a target that cannot start is reported, not failed")
    args = ap.parse_args()
    if args.quick:
        args.connections, args.echo_connections, args.echo_seconds, args.stream_mib = 200, 50, 2, 16
        if args.out == str(RESULTS / "ws"):
            args.out = str(ROOT / "target" / "bench-ws-quick")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.connections + 100:
        raise SystemExit(f"the descriptor limit ({hard}) is below {args.connections} connections")
    for tool in ("taskset", "curl"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found")
    if not args.no_build:
        # Incremental: cheap when bench/run or the tests built them already.
        subprocess.run(["cargo", "build", "--release", "--bin", "bench-ws", "--bin", "bench-hyper"], cwd=ROOT, check=True)
        subprocess.run(["make", "-s", "-C", str(ROOT / "samples" / "c")], check=True)

    specs = targets()
    results: dict = {}
    logdir = ROOT / "target" / "bench-ws-logs"
    failed = False
    for name in [t for t in args.targets.split(",") if t]:
        spec = specs[name]
        log(f"{name}: starting")
        try:
            srv = start(name, spec, logdir)
        except (BenchError, OSError) as e:
            results[name] = {"error": f"did not start: {e}"}
            failed |= not args.allow_missing
            log(f"{name}: {results[name]['error']}")
            continue
        try:
            r: dict = {}
            if spec["ws"]:
                r["hold"] = hold(srv, args.connections, 2.0 if args.quick else 12.0)
                log(f"{name}: hold {r['hold']}")
                r["echo"] = echo(srv, args.echo_connections, args.echo_seconds)
                log(f"{name}: echo {r['echo']}")
            r["stream"] = stream(srv, args.stream_mib)
            log(f"{name}: stream {r['stream']}")
            results[name] = r
        except (BenchError, subprocess.TimeoutExpired, ValueError) as e:
            results[name] = {"error": str(e)}
            failed = True
            log(f"{name}: FAILED {e}")
        finally:
            srv.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(results, indent=1) + "\n")
    md = report(results, args.quick)
    Path(args.out + ".md").write_text(md + "\n")
    print(md)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
