"""Ember benchmark harness (entry point: bench/run, which sets up the machine first).

    bench/run [--quick] [--targets a,b,...] [--modes pinned,unpinned] [--no-build] ...

Builds what it measures, then for each mode (pinned: server on CPU 0, load on CPU 1; unpinned)
and each target: start it, check its answer and keep-alive, sample its idle RSS, warm up, run wrk
at each concurrency and the seeds' two hey commands, sample peak RSS and CPU time, check the
answer again, stop it by pid. Then the Hearth-style ladders and a drift re-check of the first
target. Writes results.json, results.md, the chart and the ladder reports to the output dir.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (BENCH, BENCH_PGO, ROOT, BenchError, Sampler, Server, cpu_busy_pct, cpu_times, free_port,
                      loadavg, log, others_cpu_seconds, others_snapshot, rss_kb, run_hey, run_wrk, tool_version, tree_pids)
from builds import artefact_sizes, build_all
from ladder import DEFAULT_LEVELS, format_report, parse_levels, run_ladder
from report import machine_info, versions, write_chart, write_markdown
from target_list import NCPU, Target, all_targets
import tls as tls_bench

REPORT_LUA = BENCH / "wrk" / "report.lua"


# ---------------------------------------------------------------- measuring one target

class Plan:
    def __init__(self, quick: bool, a):
        self.quick = quick
        self.concurrency = a.concurrency
        self.wrk_s = a.wrk_duration
        self.warmup_s = a.warmup
        self.hey_z = a.hey_z
        self.hey_n = a.hey_n
        self.hey_n_c = a.hey_n_c
        self.hey_z_c = a.hey_z_c
        self.noise_limit = a.noise_limit
        self.noise_retries = a.noise_retries if a.noise_retries is not None else (0 if quick else 2)


def measure_wrk_point(url, c, plan, wrk_threads, load_cpu, sampler, pinned, name, mode) -> dict:
    """One wrk point with its CPU figures. When other processes took more than
    plan.noise_limit % of the machine meanwhile, run it again (up to plan.noise_retries times)
    and keep the quietest attempt; every attempt's figures stay in the result."""
    attempts = []
    for i in range(plan.noise_retries + 1):
        excl = {os.getpid()} | set(sampler.current_pids())  # the harness's children time = wrk
        c0, j0, o0 = sampler.cpu_split(), cpu_times(), others_snapshot(excl)
        r = run_wrk(url, c, plan.wrk_s, wrk_threads, load_cpu, REPORT_LUA)
        j1, o1 = cpu_times(), others_snapshot(excl)
        c1 = sampler.cpu_split()
        r["cpu_s"] = (c1[0] - c0[0]) + (c1[1] - c0[1])
        r["cpu_us_per_req"] = r["cpu_s"] * 1e6 / r["requests"] if r["requests"] else None
        # The kernel's share (system time: loopback TCP for the most part) is a floor that
        # no server's own code removes; it bounds the ratios a server can reach.
        r["cpu_sys_us_per_req"] = (c1[1] - c0[1]) * 1e6 / r["requests"] if r["requests"] else None
        # Noise: how each CPU was used (task, irq+softirq, steal), and the CPU time of every other
        # process (neither the server's tree nor the harness and its wrk) as % of the machine.
        r["cpu_busy_pct"] = cpu_busy_pct(j0, j1)
        secs = r["duration_us"] / 1e6 or 1.0
        r["other_cpu_s"] = round(others_cpu_seconds(o0, o1), 3)
        r["other_load_pct"] = round(100.0 * r["other_cpu_s"] / (secs * NCPU), 1)
        if pinned:
            own = 100.0 * r["cpu_s"] / secs
            r["foreign_pct_on_server_cpu"] = round(max(0.0, r["cpu_busy_pct"].get("cpu0", {}).get("task", 0) - own), 1)
        attempts.append(r)
        if r["other_load_pct"] <= plan.noise_limit:
            break
        if i < plan.noise_retries:
            log(f"[{mode}] {name}: wrk c={c}: {r['rps']:.0f} req/s while {r['other_load_pct']:.0f} % of the machine "
                f"was busy elsewhere: again in 3 s")
            time.sleep(3)
    best = min(attempts, key=lambda x: x["other_load_pct"])
    if len(attempts) > 1:
        best["attempts"] = [{k: a[k] for k in ("rps", "other_load_pct", "requests")} for a in attempts]
    return best


def measure_target(t: Target, mode: str, plan: Plan, rawdir: Path) -> dict:
    pinned = mode == "pinned"
    srv_cpu, load_cpu = ("0", "1") if pinned else (None, None)
    workers = 1 if pinned else 0
    wrk_threads = 1 if pinned else NCPU
    res: dict = {"target": t.name, "label": t.label, "group": t.group, "mode": mode, "status": "failed",
                 "workers": workers or NCPU}
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{t.name}-"))
    srv = None
    t_start = time.monotonic()
    try:
        port = free_port() if t.fixed_port else None
        if t.prepare:
            t.prepare(port, workdir)
        argv = t.argv(port, workers, workdir)
        env = t.env(workers)
        res["command"] = " ".join(argv)
        res["env"] = {k: v for k, v in env.items() if k.startswith("EMBER_") and k != "EMBER_LIBRARY"}
        log(f"[{mode}] {t.name}: starting {' '.join(argv)}")
        srv = Server(f"{mode}-{t.name}", argv, env, t.cwd, rawdir, port, srv_cpu, t.ready_timeout,
                     t.stop_timeout)
        res["pid"] = srv.pid
        res["loadavg_at_start"] = loadavg()
        url = f"http://127.0.0.1:{srv.port}{t.path}"
        res["url"] = url
        # the first request may compile the application (ASP.NET targets)
        v = t.check(srv.port, timeout=max(5.0, t.ready_timeout))
        res["verify"] = v
        time.sleep(0.5)
        srv.remember_tree()
        pids = tree_pids(srv.pid)
        res["processes"] = len(pids)
        res["rss_idle_kb"] = rss_kb(pids)
        sampler = Sampler(srv.pid)
        sampler.start()
        cpu0 = sampler.cpu()
        try:
            warm = run_wrk(url, 50, plan.warmup_s, wrk_threads, load_cpu, REPORT_LUA)
            res["warmup"] = {"seconds": plan.warmup_s, "requests": warm["requests"], "rps": warm["rps"]}
            srv.remember_tree()
            res["wrk"] = {}
            for c in plan.concurrency:
                r = measure_wrk_point(url, c, plan, wrk_threads, load_cpu, sampler, pinned, t.name, mode)
                res["wrk"][str(c)] = r
                log(f"[{mode}] {t.name}: wrk c={c}: {r['rps']:.0f} req/s, p99 {r['latency_us']['p99'] / 1000:.3f} ms, "
                    f"fail {r['fail']}, cpu {r['cpu_us_per_req'] or 0:.1f} us/req ({r['cpu_sys_us_per_req'] or 0:.1f} in the kernel)")
                if not srv.alive():
                    raise BenchError(f"server died during wrk c={c}: {srv.stderr_tail()}")
            res["hey"] = {}
            if plan.hey_z and t.hey:
                c0 = sampler.cpu()
                r = run_hey(url, ["-c", str(plan.hey_z_c), "-z", f"{plan.hey_z:g}s"], load_cpu, plan.hey_z + 60)
                r["cpu_s"] = sampler.cpu() - c0
                res["hey"]["z"] = r
                log(f"[{mode}] {t.name}: hey -c {plan.hey_z_c} -z {plan.hey_z:g}s: {r['rps']:.0f} req/s, "
                    f"p99 {r['latency_us'].get('p99', 0) / 1000:.3f} ms, fail {r['fail']}")
            if plan.hey_n and t.hey:
                c0 = sampler.cpu()
                r = run_hey(url, ["-n", str(plan.hey_n), "-c", str(plan.hey_n_c)], load_cpu, 180)
                r["cpu_s"] = sampler.cpu() - c0
                res["hey"]["n"] = r
                log(f"[{mode}] {t.name}: hey -n {plan.hey_n} -c {plan.hey_n_c}: {r['rps']:.0f} req/s, "
                    f"p99 {r['latency_us'].get('p99', 0) / 1000:.3f} ms, fail {r['fail']}")
            res["cpu_s_total"] = sampler.cpu() - cpu0
        finally:
            sampler.stop()
            sampler.join(timeout=2)
        res["rss_peak_kb"] = max(sampler.peak_kb, res["rss_idle_kb"])
        res["verify_after"] = t.check(srv.port)
        res["status"] = "ok"
    except (BenchError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        res["error"] = f"{type(e).__name__}: {e}"
        if srv is not None:
            res["server_stderr_tail"] = srv.stderr_tail()
        log(f"[{mode}] {t.name}: FAILED: {res['error']}")
    finally:
        if srv is not None:
            srv.stop()
            res["exit_code"] = srv.exit_code
            res["stopped_on_sigterm"] = srv.stopped_gracefully
        shutil.rmtree(workdir, ignore_errors=True)
    res["seconds"] = round(time.monotonic() - t_start, 1)
    return res


def drift_check(t: Target, first: dict, plan: Plan, rawdir: Path) -> dict:
    """The first target once more, pinned, wrk at every concurrency as in its first run."""
    p2 = Plan.__new__(Plan)
    p2.__dict__.update(plan.__dict__)
    p2.hey_z = 0
    p2.hey_n = 0
    again = measure_target(t, "pinned", p2, rawdir)
    out = {"target": t.name, "status": again["status"], "points": {}}
    if again.get("status") != "ok":
        out["error"] = again.get("error", "no figures to compare")
        return out
    out["run"] = again
    for c, w in again["wrk"].items():
        f = first.get("wrk", {}).get(c)
        if f and f["rps"]:
            out["points"][c] = {"first_rps": f["rps"], "again_rps": w["rps"],
                                "drift_pct": (w["rps"] - f["rps"]) * 100 / f["rps"],
                                "first_other_load_pct": f.get("other_load_pct"),
                                "again_other_load_pct": w.get("other_load_pct")}
    if "50" in out["points"]:
        out.update({k: out["points"]["50"][k] for k in ("first_rps", "again_rps", "drift_pct")})
    return out


def ceiling(R: dict, mode: str) -> dict[str, float]:
    """Bare hyper's req/s per concurrency in this mode: the better of its first run and (pinned)
    its re-run at the end, so a disturbed ceiling run does not flatter everyone else."""
    h = R["runs"].get(mode, {}).get("hyper")
    if not h or h.get("status") != "ok":
        return {}
    best = {c: w["rps"] for c, w in h["wrk"].items()}
    d = R.get("drift") or {}
    if mode == "pinned" and d.get("target") == "hyper":
        for c, p in d.get("points", {}).items():
            best[c] = max(best.get(c, 0.0), p["again_rps"])
    return best


# ---------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CI mode: few seconds per target, a subset of targets, "
                    "asserts correct answers and produced numbers only")
    ap.add_argument("--targets", help="comma-separated target names (default: all; quick: the quick subset)")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    ap.add_argument("--modes", default=None, help="pinned,unpinned (quick: pinned)")
    ap.add_argument("--concurrency", type=parse_levels, default=None, help="wrk concurrencies (default 1,8,50,256)")
    ap.add_argument("--wrk-duration", type=float, default=None, help="seconds per wrk point (full 5, quick 2; whole seconds)")
    ap.add_argument("--warmup", type=float, default=None, help="warm-up seconds (full 3, quick 1)")
    ap.add_argument("--hey-z", type=float, default=None, help="hey -z seconds (full 15, quick 2; 0 = skip)")
    ap.add_argument("--hey-z-c", type=int, default=50)
    ap.add_argument("--hey-n", type=int, default=None, help="hey -n requests (full 50000, quick 2000; 0 = skip)")
    ap.add_argument("--hey-n-c", type=int, default=100)
    ap.add_argument("--noise-limit", type=float, default=10.0,
                    help="%% of the machine busy with other work above which a wrk point is run again")
    ap.add_argument("--noise-retries", type=int, default=None, help="extra tries of a noisy wrk point (full 2, quick 0)")
    ap.add_argument("--ladder-targets", default=None,
                    help="targets that also get the ladder (full: hyper,ember-c-inline,ember-c-pool,ember-py-pool,"
                         "ember-net-pool,httplistener,ember-aspnet,httplistener-aspnet; quick: hyper,ember-aspnet,"
                         "httplistener-aspnet; 'none' = no ladder)")
    ap.add_argument("--ladder-levels", type=parse_levels, default=None, help="default 1,2,4,...,256 (quick 1,8)")
    ap.add_argument("--ladder-duration", type=float, default=None, help="seconds per level (full 3, quick 1; whole seconds)")
    ap.add_argument("--ladder-warmup", type=float, default=3.0)
    ap.add_argument("--no-drift", action="store_true")
    ap.add_argument("--no-tls", action="store_true", help="skip the TLS part (Ember's TLS listener vs nginx ssl)")
    ap.add_argument("--tls", action="store_true", help="run the TLS part also when --targets is given")
    ap.add_argument("--no-build", action="store_true", help="use the binaries that are there")
    ap.add_argument("--allow-missing", action="store_true",
                    help="quick mode: a target that cannot be built is reported, not a failure")
    ap.add_argument("--out", type=Path, default=None, help="output dir (full: bench/results, quick: bench/results/quick)")
    ap.add_argument("--max-minutes", type=float, default=None, help="skip what is left after this (full 55, quick 15)")
    a = ap.parse_args()

    q = a.quick
    targets = all_targets()
    if a.list:
        for t in targets:
            print(f"{t.name:16} {'quick ' if t.quick else '      '}{t.label}")
        return 0
    if a.targets:
        want = [x.strip() for x in a.targets.split(",") if x.strip()]
        unknown = set(want) - {t.name for t in targets}
        if unknown:
            ap.error(f"unknown targets: {', '.join(sorted(unknown))} (see --list)")
        targets = [t for t in targets if t.name in want]
    elif q:
        targets = [t for t in targets if t.quick]
    modes = (a.modes or ("pinned" if q else "pinned,unpinned")).split(",")
    for m in modes:
        if m not in ("pinned", "unpinned"):
            ap.error(f"unknown mode {m}")
    if "pinned" in modes and NCPU < 2:
        log("fewer than 2 CPUs: pinned mode is not possible, running unpinned only")
        modes = ["unpinned"]
    a.concurrency = a.concurrency or ([8, 50] if q else [1, 8, 50, 256])
    a.wrk_duration = a.wrk_duration if a.wrk_duration is not None else (2.0 if q else 5.0)
    a.warmup = a.warmup if a.warmup is not None else (1.0 if q else 3.0)
    a.hey_z = a.hey_z if a.hey_z is not None else (2.0 if q else 15.0)
    a.hey_n = a.hey_n if a.hey_n is not None else (2000 if q else 50000)
    if q and a.hey_n_c == 100:
        a.hey_n_c = 50
    ladder_names = a.ladder_targets or ("hyper,ember-aspnet,httplistener-aspnet" if q else
                                        "hyper,ember-c-inline,ember-c-pool,ember-py-pool,ember-net-pool,httplistener,"
                                        "ember-aspnet,httplistener-aspnet")
    ladder_names = [] if ladder_names == "none" else [x for x in ladder_names.split(",") if x]
    ladder_levels = a.ladder_levels or ([1, 8] if q else DEFAULT_LEVELS)
    ladder_s = a.ladder_duration if a.ladder_duration is not None else (1.0 if q else 3.0)
    ladder_warm = 1.0 if q and a.ladder_warmup == 3.0 else a.ladder_warmup
    out = a.out or (BENCH / "results" / "quick" if q else BENCH / "results")
    out.mkdir(parents=True, exist_ok=True)
    rawdir = out / "raw"
    rawdir.mkdir(exist_ok=True)
    max_s = (a.max_minutes or (15 if q else 55)) * 60
    plan = Plan(q, a)
    t0 = time.monotonic()

    # SIGTERM to the harness: unwind through the finally blocks, which stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    needed = set()
    for t in targets:
        needed.update(t.needs)
    run_tls = not a.no_tls and (a.tls or not a.targets) and "pinned" in modes
    if run_tls:
        needed.update(["ember-lib", "samples-c", "nginx"])
    builds = build_all(needed, a.no_build)

    R: dict = {"meta": {"quick": q, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "machine": machine_info(), "versions": versions(),
                        "ember_commit": tool_version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
                        "ember_library": "profile-guided (scripts/pgo.sh)" if BENCH_PGO else "plain cargo build --release",
                        "modes": modes,
                        "plan": {"concurrency": a.concurrency, "wrk_s": a.wrk_duration, "warmup_s": a.warmup,
                                 "hey_z": a.hey_z, "hey_z_c": a.hey_z_c, "hey_n": a.hey_n, "hey_n_c": a.hey_n_c,
                                 "ladder_levels": ladder_levels, "ladder_s": ladder_s, "ladder_warmup_s": ladder_warm}},
         "builds": builds, "runs": {m: {} for m in modes}, "ladders": {}, "sizes": artefact_sizes()}
    problems: list[str] = []
    interrupted = False
    try:
        for mode in modes:
            for t in targets:
                missing = [n for n in t.needs if not builds.get(n, {}).get("ok")]
                if missing:
                    R["runs"][mode][t.name] = {"target": t.name, "label": t.label, "group": t.group,
                                               "status": "unavailable", "error": "build failed: " + ", ".join(
                                                   f"{n} ({builds[n]['note'] or builds[n]['log_tail'][-300:]})"
                                                   for n in missing)}
                    continue
                if time.monotonic() - t0 > max_s:
                    R["runs"][mode][t.name] = {"target": t.name, "status": "skipped", "error": "time budget spent"}
                    continue
                R["runs"][mode][t.name] = measure_target(t, mode, plan, rawdir)
        for name in ladder_names:
            t = next((x for x in all_targets() if x.name == name), None)
            if t is None or time.monotonic() - t0 > max_s:
                continue
            if any(not builds.get(n, {}).get("ok") for n in t.needs) and name not in [x.name for x in targets]:
                continue
            if any(not builds.get(n, {}).get("ok") for n in t.needs):
                R["ladders"][name] = {"error": "not built"}
                continue
            R["ladders"][name] = ladder_for(t, ladder_levels, ladder_warm, ladder_s, rawdir, out, plan)
        if run_tls and time.monotonic() - t0 <= max_s:
            R["tls"] = tls_bench.run(plan, builds, rawdir)
        if not a.no_drift and targets and "pinned" in modes:
            first = targets[0]
            fr = R["runs"]["pinned"].get(first.name, {})
            if fr.get("status") == "ok" and time.monotonic() - t0 <= max_s + 120:
                R["drift"] = drift_check(first, fr, plan, rawdir)
                log(f"drift check {first.name}: c=50 {R['drift'].get('drift_pct', float('nan')):+.1f} %")
    except KeyboardInterrupt:
        interrupted = True
        problems.append("interrupted")
    # ratios to the bare hyper server of the same mode and run
    R["ceiling"] = {}
    for mode in modes:
        best = R["ceiling"][mode] = ceiling(R, mode)
        for name, r in R["runs"][mode].items():
            if r.get("status") == "ok" and best:
                r["ratio"] = {c: r["wrk"][c]["rps"] / best[c] for c in r["wrk"] if best.get(c)}
    R["meta"]["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    R["meta"]["elapsed_min"] = (time.monotonic() - t0) / 60

    # quick-mode assertions: right answers and numbers, never a speed
    for mode, runs in R["runs"].items():
        for name, r in runs.items():
            st = r.get("status")
            if st == "unavailable" and (a.allow_missing or not q):
                continue
            if st != "ok":
                problems.append(f"{mode}/{name}: {st}: {r.get('error', '')[:300]}")
                continue
            for c, w in r["wrk"].items():
                if not (w["requests"] > 0 and w["rps"] > 0 and w["latency_us"]["p99"] > 0):
                    problems.append(f"{mode}/{name}: wrk c={c} produced no numbers")
                if q and w["fail"]:
                    problems.append(f"{mode}/{name}: wrk c={c}: {w['fail']} failed requests")
            for k, h in r["hey"].items():
                if not (h["requests"] > 0 and h["rps"]):
                    problems.append(f"{mode}/{name}: hey {k} produced no numbers")
                if q and h["fail"]:
                    problems.append(f"{mode}/{name}: hey {k}: {h['fail']} failed requests {h['errors']}")
            if not r.get("rss_idle_kb"):
                problems.append(f"{mode}/{name}: no RSS figure")
    for name, lad in R["ladders"].items():
        if "error" in lad:
            problems.append(f"ladder {name}: {lad['error']}")
    problems.extend(tls_bench.problems(R.get("tls", {}), q, a.allow_missing))
    R["problems"] = problems

    (out / "results.json").write_text(json.dumps(R, indent=1, default=str) + "\n")
    write_markdown(R, out / "results.md")
    if R.get("tls"):
        with open(out / "results.md", "a") as f:
            f.write("\n".join(tls_bench.markdown(R["tls"])) + "\n")
    note = write_chart(R, out / "rps_by_concurrency.png")
    if note:
        log(note)
        if q:
            problems.append(note)
    log(f"wrote {out / 'results.md'}, {out / 'results.json'}" + ("" if note else f", {out / 'rps_by_concurrency.png'}"))
    print((out / "results.md").read_text())
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems))
    if q:
        n_ok = sum(1 for runs in R["runs"].values() for r in runs.values() if r.get("status") == "ok")
        n_ok += sum(1 for r in R.get("tls", {}).values() if r.get("status") == "ok")
        n_bad = len(problems)
        print(f"bench: {n_ok} passed, {n_bad} failed")
    return 1 if (problems and (q or interrupted)) else 0


def ladder_for(t: Target, levels, warm, dur, rawdir: Path, out: Path, plan: Plan) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-ladder-{t.name}-"))
    srv = None
    try:
        port = free_port() if t.fixed_port else None
        if t.prepare:
            t.prepare(port, workdir)
        srv = Server(f"ladder-{t.name}", t.argv(port, 1, workdir), t.env(1), t.cwd, rawdir, port, "0",
                     t.ready_timeout, t.stop_timeout)
        t.check(srv.port, timeout=max(5.0, t.ready_timeout))
        log(f"ladder {t.name}: levels {levels}, {dur:g} s each")
        lad = run_ladder(f"http://127.0.0.1:{srv.port}{t.path}", levels, warm, dur, pin="1", threads=1,
                         server_pid=srv.pid, noise_limit=plan.noise_limit, noise_retries=plan.noise_retries)
        lad["target"] = t.name
        (out / f"ladder-{t.name}.txt").write_text(format_report(lad, f"{t.label}, server pinned to CPU 0"))
        log(f"ladder {t.name}: peak {lad['peak']['rps']:.0f} req/s at c={lad['peak']['conc']}, "
            f"fail {lad['totals']['fail']}")
        return lad
    except (BenchError, OSError, subprocess.SubprocessError) as e:
        log(f"ladder {t.name}: FAILED: {e}")
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--chart-from":  # redraw a chart from results.json
        res = json.loads(Path(sys.argv[2]).read_text())
        sys.exit(1 if write_chart(res, Path(sys.argv[2]).parent / "rps_by_concurrency.png") else 0)
    sys.exit(main())
