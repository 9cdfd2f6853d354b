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
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (BENCH, CLK_TCK, ROOT, BenchError, Sampler, Server, cpu_busy_pct, cpu_times, free_port,
                      loadavg, log, others_cpu_seconds, others_snapshot, rss_kb, run_hey, run_wrk, tool_version, tree_pids, verify)
from ladder import DEFAULT_LEVELS, format_report, parse_levels, run_ladder
import tls as tls_bench
import front_targets

VENV = BENCH / ".venv"
BUILD = BENCH / "build"
TARGETS_DIR = BENCH / "targets"
REPORT_LUA = BENCH / "wrk" / "report.lua"
RELEASE = ROOT / "target" / "release"
NCPU = os.cpu_count() or 1


# ---------------------------------------------------------------- targets

class Target:
    def __init__(self, name, label, group, needs, argv, env=None, cwd=None, fixed_port=False,
                 quick=False, ready_timeout=30.0, stop_timeout=8.0, prepare=None, path="/", keep_alive=True,
                 expect=None, ctype="application/json", hey=True):
        self.name, self.label, self.group, self.needs = name, label, group, needs
        self.path = path  # what wrk, hey and the ladder request (answers the hello body)
        self.argv, self.env, self.cwd = argv, env or (lambda w: {}), cwd
        self.fixed_port, self.quick = fixed_port, quick
        self.ready_timeout, self.stop_timeout = ready_timeout, stop_timeout
        self.prepare = prepare  # (port, workdir) -> None: writes config files
        self.keep_alive = keep_alive  # False: the server closes after every answer (gunicorn sync)
        # The answer the checks want (bytes, or a file to read them from; None: the hello body),
        # its Content-Type, and whether the seeds' hey commands run (not for 10 MiB files).
        self.expect, self.ctype, self.hey = expect, ctype, hey

    def check(self, port, timeout=5.0):
        body = self.expect.read_bytes() if isinstance(self.expect, Path) else self.expect
        return verify(port, self.path, timeout=timeout, keep_alive=self.keep_alive, body=body, ctype=self.ctype)


def _py() -> str:
    return str(VENV / "bin" / "python")


def _ember_env(dispatch):
    def env(workers):
        return {"EMBER_DISPATCH": dispatch, "EMBER_WORKERS": str(workers),
                "EMBER_LIBRARY": str(RELEASE / "libember.so")}
    return env


def _ember_cli_env(workers):
    return {"EMBER_LIBRARY": str(RELEASE / "libember.so"),
            "PYTHONPATH": str(ROOT / "bindings" / "python")}


def _nginx_prepare(port, workdir: Path):
    text = (TARGETS_DIR / "nginx.conf.in").read_text()
    text = text.replace("@PREFIX@", str(workdir)).replace("@PORT@", str(port))
    (workdir / "nginx.conf").write_text(text)


ASPNET_SITE = BENCH / "aspnet" / "site"


def _aspnet_listener_prepare(port, workdir: Path):
    """HttpListener + HttpRuntime: ApplicationHost loads the host from the site's own bin/, so
    the target runs from a copy of the site with the exe inside."""
    site = workdir / "site"
    shutil.copytree(ASPNET_SITE, site)
    (site / "bin").mkdir(exist_ok=True)
    shutil.copy(BUILD / "HttpListenerAspNet.exe", site / "bin" / "HttpListenerAspNet.exe")


def all_targets() -> list[Target]:
    T = []
    T.append(Target("hyper", "bare hyper (ceiling)", "ceiling", ["bench-hyper"],
                    lambda p, w, d: [str(RELEASE / "bench-hyper"), "0", str(w or NCPU)], quick=True))
    # auto is each binding's default (inline while an I/O thread stays free, else the pool).
    for disp in ("inline", "pool", "auto"):
        T.append(Target(f"ember-c-{disp}", f"Ember C ref app, {disp}", "ember", ["ember-lib", "samples-c"],
                        lambda p, w, d: [str(ROOT / "samples" / "c" / "ember_ref"), "0"],
                        env=_ember_env(disp), quick=True))
    for disp in ("inline", "pool", "auto"):
        T.append(Target(f"ember-py-{disp}", f"Ember Python ref app, {disp}", "ember", ["ember-lib", "venv"],
                        lambda p, w, d: [_py(), str(ROOT / "samples" / "python" / "ember_ref.py"), "0"],
                        env=_ember_env(disp), quick=True))
    for disp in ("inline", "pool", "auto"):
        T.append(Target(f"ember-net-{disp}", f"Ember .NET (Mono) ref app, {disp}", "ember",
                        ["ember-lib", "samples-dotnet"],
                        lambda p, w, d: ["mono", str(ROOT / "samples" / "dotnet" / "EmberRef.exe"), "0"],
                        env=_ember_env(disp), quick=True))
    T.append(Target("nginx", "nginx return 200 (1 worker)", "native", ["nginx"],
                    lambda p, w, d: ["nginx", "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")],
                    fixed_port=True, quick=True, prepare=_nginx_prepare))
    T.append(Target("libmicrohttpd", "libmicrohttpd hello", "native", ["c-targets"],
                    lambda p, w, d: [str(BUILD / "mhd_hello"), "0", str(w or NCPU)]))
    # CivetWeb serves one connection per thread: give it a thread for every wrk connection.
    T.append(Target("civetweb", "CivetWeb hello (300 threads)", "native", ["c-targets"],
                    lambda p, w, d: [str(BUILD / "civetweb_hello"), "0", "300"]))
    T.append(Target("granian-rsgi", "granian RSGI", "python", ["venv"],
                    lambda p, w, d: [str(VENV / "bin" / "granian"), "--interface", "rsgi", "--host", "127.0.0.1",
                                     "--port", str(p), "--workers", str(w or NCPU), "--no-ws",
                                     "--log-level", "warning", "py_hello:rsgi_app"],
                    cwd=TARGETS_DIR, fixed_port=True, quick=True))
    T.append(Target("granian-asgi", "granian ASGI", "python", ["venv"],
                    lambda p, w, d: [str(VENV / "bin" / "granian"), "--interface", "asgi", "--host", "127.0.0.1",
                                     "--port", str(p), "--workers", str(w or NCPU), "--no-ws",
                                     "--log-level", "warning", "py_hello:asgi_app"],
                    cwd=TARGETS_DIR, fixed_port=True))
    T.append(Target("uvicorn", "uvicorn (uvloop+httptools)", "python", ["venv"],
                    lambda p, w, d: [str(VENV / "bin" / "uvicorn"), "--host", "127.0.0.1", "--port", str(p),
                                     "--no-access-log", "--log-level", "warning"]
                    + (["--workers", str(w or NCPU)] if (w or NCPU) > 1 else []) + ["py_hello:asgi_app"],
                    cwd=TARGETS_DIR, fixed_port=True))
    # ASGI and WSGI apps: the same app file on Ember's command line and on the servers its
    # users run today. Processes = the mode's worker count, one I/O thread each for Ember.
    def ember_cli(spec, interface, dispatch):
        return lambda p, w, d: [_py(), "-m", "ember", spec, "--interface", interface, "--host", "127.0.0.1",
                                "--port", str(p), "--workers", str(w or NCPU), "--io-threads", "1",
                                "--dispatch", dispatch, "--log-level", "warning"]

    def granian(spec, interface):
        return lambda p, w, d: [str(VENV / "bin" / "granian"), "--interface", interface, "--host", "127.0.0.1",
                                "--port", str(p), "--workers", str(w or NCPU), "--no-ws", "--log-level", "warning",
                                spec]

    def uvicorn(spec):
        return lambda p, w, d: ([str(VENV / "bin" / "uvicorn"), "--host", "127.0.0.1", "--port", str(p),
                                 "--no-access-log", "--log-level", "warning"]
                                + (["--workers", str(w or NCPU)] if (w or NCPU) > 1 else []) + [spec])

    T.append(Target("ember-asgi", "Ember ASGI (python -m ember)", "ember", ["ember-lib", "venv"],
                    ember_cli("py_hello:asgi_app", "asgi", "inline"), env=_ember_cli_env, cwd=TARGETS_DIR,
                    fixed_port=True, quick=True))
    T.append(Target("ember-asgi-fastapi", "Ember ASGI, FastAPI JSON route", "ember", ["ember-lib", "venv"],
                    ember_cli("py_fastapi:app", "asgi", "inline"), env=_ember_cli_env, cwd=TARGETS_DIR,
                    fixed_port=True, quick=True))
    T.append(Target("uvicorn-fastapi", "uvicorn, FastAPI JSON route", "python", ["venv"],
                    uvicorn("py_fastapi:app"), cwd=TARGETS_DIR, fixed_port=True, quick=True))
    T.append(Target("granian-asgi-fastapi", "granian ASGI, FastAPI JSON route", "python", ["venv"],
                    granian("py_fastapi:app", "asgi"), cwd=TARGETS_DIR, fixed_port=True))
    T.append(Target("ember-wsgi-flask", "Ember WSGI, Flask route", "ember", ["ember-lib", "venv"],
                    ember_cli("py_flask:app", "wsgi", "pool"), env=_ember_cli_env, cwd=TARGETS_DIR,
                    fixed_port=True, quick=True))
    T.append(Target("gunicorn-flask", "gunicorn (sync workers), Flask route", "python", ["venv"],
                    lambda p, w, d: [str(VENV / "bin" / "gunicorn"), "--worker-class", "sync", "--workers",
                                     str(w or NCPU), "--bind", f"127.0.0.1:{p}", "--log-level", "warning",
                                     "py_flask:app"],
                    cwd=TARGETS_DIR, fixed_port=True, quick=True, keep_alive=False))
    T.append(Target("granian-wsgi-flask", "granian WSGI, Flask route", "python", ["venv"],
                    granian("py_flask:app", "wsgi"), cwd=TARGETS_DIR, fixed_port=True))
    T.append(Target("httplistener", "Mono HttpListener hello", "dotnet", ["httplistener"],
                    lambda p, w, d: ["mono", str(BUILD / "HttpListenerHello.exe"), str(p)],
                    fixed_port=True, quick=True))
    # The same ASP.NET application (bench/aspnet/site, a trivial .ashx through the whole
    # System.Web pipeline) on Ember's host and on the plain HttpListener + HttpRuntime host.
    T.append(Target("ember-aspnet", "Ember ASP.NET host (System.Web .ashx), pool", "aspnet", ["ember-lib", "aspnet-host"],
                    lambda p, w, d: ["mono", str(ROOT / "bindings" / "dotnet" / "bin" / "EmberAspNet.exe"),
                                     "--root", str(ASPNET_SITE), "--quiet", "--warmup", "/Hello.ashx", "0"],
                    env=_ember_env("pool"), quick=True, ready_timeout=120.0, stop_timeout=20.0, path="/Hello.ashx"))
    # The same host with the first design's bridge (one remoting call per request into the
    # application's domain), to measure the direct bridge against it in one run.
    T.append(Target("ember-aspnet-remoting", "Ember ASP.NET host, remoting bridge (EMBER_ASPNET_BRIDGE=remoting)", "aspnet",
                    ["ember-lib", "aspnet-host"],
                    lambda p, w, d: ["mono", str(ROOT / "bindings" / "dotnet" / "bin" / "EmberAspNet.exe"),
                                     "--root", str(ASPNET_SITE), "--quiet", "--warmup", "/Hello.ashx", "0"],
                    env=lambda w: dict(_ember_env("pool")(w), EMBER_ASPNET_BRIDGE="remoting"),
                    ready_timeout=120.0, stop_timeout=20.0, path="/Hello.ashx"))
    T.append(Target("httplistener-aspnet", "HttpListener + HttpRuntime (System.Web .ashx)", "aspnet",
                    ["httplistener-aspnet"],
                    lambda p, w, d: ["mono", str(d / "site" / "bin" / "HttpListenerAspNet.exe"), str(d / "site"), str(p)],
                    fixed_port=True, quick=True, ready_timeout=120.0, prepare=_aspnet_listener_prepare,
                    path="/Hello.ashx"))
    T.extend(front_targets.targets(Target, _ember_env, _py))
    return T


# ---------------------------------------------------------------- builds

def _run(argv, cwd=None, timeout=900, env=None) -> tuple[bool, str]:
    penv = dict(os.environ)
    if env:
        penv.update(env)
    try:
        p = subprocess.run(argv, cwd=str(cwd) if cwd else None, capture_output=True, timeout=timeout, env=penv)
    except subprocess.TimeoutExpired:
        return False, f"{' '.join(map(str, argv))}: timed out after {timeout} s"
    except OSError as e:
        return False, f"{argv[0]}: {e}"
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    return p.returncode == 0, out


def _build_hyper_standalone() -> tuple[bool, str]:
    """bench-hyper needs only hyper & co; when the engine crate does not compile, build the same
    source as its own crate (same lock file, offline first) so the ceiling is still measured."""
    d = ROOT / "target" / "bench-hyper-standalone"
    d.mkdir(parents=True, exist_ok=True)
    (d / "Cargo.toml").write_text(f"""[package]
name = "bench-hyper-standalone"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
[[bin]]
name = "bench-hyper"
path = "{BENCH / 'hyper_hello.rs'}"
[dependencies]
tokio = {{ version = "1", features = ["rt-multi-thread", "net", "time", "sync", "macros", "io-util"] }}
hyper = {{ version = "1", features = ["server", "http1"] }}
hyper-util = {{ version = "0.1", features = ["tokio"] }}
http-body-util = "0.1"
bytes = "1"
http = "1"
[profile.release]
lto = true
codegen-units = 1
opt-level = 3
""")
    if (ROOT / "Cargo.lock").exists():
        shutil.copy(ROOT / "Cargo.lock", d / "Cargo.lock")
    ok, out = _run(["cargo", "build", "--release", "--offline"], cwd=d)
    if not ok:
        ok, out = _run(["cargo", "build", "--release"], cwd=d)
    if ok:
        RELEASE.mkdir(parents=True, exist_ok=True)
        shutil.copy(d / "target" / "release" / "bench-hyper", RELEASE / "bench-hyper")
    return ok, out


def build_all(needed: set[str], skip_build: bool) -> dict[str, dict]:
    st: dict[str, dict] = {}

    def rec(name, ok, out="", note=""):
        st[name] = {"ok": ok, "note": note, "log_tail": out[-1500:] if not ok else ""}
        log(f"build {name}: {'ok' if ok else 'FAILED'}{(' - ' + note) if note else ''}")

    if skip_build:
        for name in needed:
            rec(name, True, note="--no-build: using what is there")
        return st
    if needed & {"ember-lib", "bench-hyper", "samples-c", "samples-dotnet"}:
        log("cargo build --release (engine + bench-hyper)")
        ok, out = _run(["cargo", "build", "--release"], cwd=ROOT, timeout=1800)
        rec("ember-lib", ok and (RELEASE / "libember.so").exists(), out)
        if (RELEASE / "bench-hyper").exists() and ok:
            rec("bench-hyper", True)
        else:
            ok2, out2 = _run(["cargo", "build", "--release", "--bin", "bench-hyper"], cwd=ROOT)
            if ok2:
                rec("bench-hyper", True)
            else:
                ok3, out3 = _build_hyper_standalone()
                rec("bench-hyper", ok3, out3, note="built standalone (the engine crate does not compile)")
    if "samples-c" in needed:
        if st.get("ember-lib", {}).get("ok"):
            ok, out = _run(["make", "-C", str(ROOT / "samples" / "c")])
            rec("samples-c", ok and (ROOT / "samples" / "c" / "ember_ref").exists(), out)
        else:
            rec("samples-c", False, note="needs libember")
    if "samples-dotnet" in needed:
        if not st.get("ember-lib", {}).get("ok"):
            rec("samples-dotnet", False, note="needs libember")
        elif not (ROOT / "samples" / "dotnet" / "build.sh").exists():
            rec("samples-dotnet", False, note="samples/dotnet/build.sh missing")
        else:
            ok, out = _run(["sh", str(ROOT / "bindings" / "dotnet" / "build.sh")])
            if ok:
                ok, out2 = _run(["sh", str(ROOT / "samples" / "dotnet" / "build.sh")])
                out += out2
            rec("samples-dotnet", ok and (ROOT / "samples" / "dotnet" / "EmberRef.exe").exists(), out)
    if "c-targets" in needed:
        ok, out = _run(["make", "-C", str(TARGETS_DIR), f"OUT={BUILD}"])
        rec("c-targets", ok, out)
    if "aspnet-host" in needed:
        if not st.get("ember-lib", {}).get("ok"):
            rec("aspnet-host", False, note="needs libember")
        else:
            ok, out = _run(["sh", str(ROOT / "bindings" / "dotnet" / "build.sh")])
            rec("aspnet-host", ok and (ROOT / "bindings" / "dotnet" / "bin" / "EmberAspNet.exe").exists(), out)
    if "httplistener-aspnet" in needed:
        BUILD.mkdir(parents=True, exist_ok=True)
        ok, out = _run(["mcs", "-nologo", "-optimize+", "-r:Mono.Posix", "-r:System.Web",
                        f"-out:{BUILD / 'HttpListenerAspNet.exe'}", str(TARGETS_DIR / "HttpListenerAspNet.cs")])
        rec("httplistener-aspnet", ok, out)
    if "httplistener" in needed:
        BUILD.mkdir(parents=True, exist_ok=True)
        ok, out = _run(["mcs", "-nologo", "-optimize+", "-r:Mono.Posix",
                        f"-out:{BUILD / 'HttpListenerHello.exe'}", str(TARGETS_DIR / "HttpListenerHello.cs")])
        rec("httplistener", ok, out)
    if "nginx" in needed:
        rec("nginx", shutil.which("nginx") is not None, note="" if shutil.which("nginx") else "nginx not installed")
    if "venv" in needed:
        ok = all((VENV / "bin" / tool).exists() for tool in ("granian", "uvicorn", "gunicorn"))
        rec("venv", ok, note="" if ok else f"{VENV} lacks granian/uvicorn/gunicorn (bench/run sets it up)")
    return st


def artefact_sizes() -> dict:
    out: dict = {"picoserver_claim_bytes": 50 * 1024}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flag in (("libember.so", "--strip-all"), ("libember.a", "--strip-debug")):
            src = RELEASE / name
            if not src.exists():
                out[name] = None
                continue
            dst = Path(tmp) / name
            shutil.copy(src, dst)
            ok, msg = _run(["strip", flag, str(dst)], timeout=120)
            out[name] = {"bytes": src.stat().st_size, "stripped_bytes": dst.stat().st_size if ok else None,
                         "strip": f"strip {flag}", "error": None if ok else msg[-300:]}
        if (RELEASE / "libember.a").exists():
            # What a C program actually links in: a hello world built against the static library.
            hello = ROOT / "samples" / "c" / "hello.c"
            exe = Path(tmp) / "hello_static"
            if hello.exists():
                ok, msg = _run(["cc", "-O2", "-I", str(ROOT / "include"), "-o", str(exe), str(hello),
                                str(RELEASE / "libember.a"), "-lpthread", "-ldl", "-lm"], timeout=300)
                if ok:
                    _run(["strip", "--strip-all", str(exe)])
                    out["hello_static_exe_stripped_bytes"] = exe.stat().st_size
    return out


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
        c0, j0, o0 = sampler.cpu(), cpu_times(), others_snapshot(excl)
        r = run_wrk(url, c, plan.wrk_s, wrk_threads, load_cpu, REPORT_LUA)
        j1, o1 = cpu_times(), others_snapshot(excl)
        r["cpu_s"] = sampler.cpu() - c0
        r["cpu_us_per_req"] = r["cpu_s"] * 1e6 / r["requests"] if r["requests"] else None
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
                    f"fail {r['fail']}, cpu {r['cpu_us_per_req'] or 0:.1f} us/req")
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


# ---------------------------------------------------------------- reports

def _fmt_rps(x):
    return "–" if x is None else f"{x:,.0f}"


def _mb(kb):
    return "–" if not kb else f"{kb / 1024:.1f}"


def write_markdown(R: dict, path: Path) -> None:
    L = []
    m = R["meta"]
    L.append(f"# Ember benchmark results ({'quick' if m['quick'] else 'full'} run)")
    L.append("")
    L.append(f"- Date (UTC): {m['finished_utc']}; run took {m['elapsed_min']:.1f} min")
    L.append(f"- Machine: {m['machine']['cpu']}, {m['machine']['cpus']} CPUs, {m['machine']['mem']}, "
             f"{m['machine']['os']}; kernel {m['machine']['kernel']}")
    L.append(f"- Ember commit: `{m['ember_commit']}`")
    L.append(f"- Load: wrk {m['plan']['wrk_s']:g} s per point after a {m['plan']['warmup_s']:g} s warm-up; "
             f"hey `-c {m['plan']['hey_z_c']} -z {m['plan']['hey_z']:g}s` and `-n {m['plan']['hey_n']} "
             f"-c {m['plan']['hey_n_c']}`; loopback only (127.0.0.1)")
    L.append("- pinned: server `taskset -c 0` with 1 I/O worker/process, load `taskset -c 1` (wrk -t1); "
             f"unpinned: no taskset, workers = {NCPU}, wrk -t{NCPU}; the two share the machine's {NCPU} cores")
    L.append("- ratio = req/s ÷ bare hyper's req/s at the same concurrency in the same mode of the same run "
             "(pinned: the better of hyper's first run and its re-run at the end, see the drift check)")
    L.append("")
    for mode, runs in R["runs"].items():
        if not runs:
            continue
        conc = R["meta"]["plan"]["concurrency"]
        L.append(f"## {mode}")
        L.append("")
        hdr = ["target"] + [f"c={c} req/s (×hyper)" for c in conc] + \
              ["p99 c=50 ms", "p99 c=256 ms", f"hey -z req/s", "hey -z p99 ms", "hey -n req/s",
               "fail", "RSS idle/peak MB", "CPU µs/req c=50"] + \
              ["other load % (c=50)"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        for name, r in runs.items():
            if r.get("status") != "ok":
                err = " ".join(str(r.get("error", "")).split())[:200].replace("|", "/")
                if r.get("exit_code") is not None and r["exit_code"] < 0 and r["exit_code"] != -15:
                    err += f" (the server died of signal {-r['exit_code']})"
                L.append(f"| {name} | " + f"**{r.get('status')}**: {err}"
                         + " |" * (len(hdr) - 1))
                continue
            cells = [name]
            for c in conc:
                w = r["wrk"].get(str(c))
                ratio = r.get("ratio", {}).get(str(c))
                cells.append("–" if not w else f"{_fmt_rps(w['rps'])}" + (f" ({ratio:.2f})" if ratio else ""))

            def p99(c):
                w = r["wrk"].get(str(c))
                return "–" if not w else f"{w['latency_us']['p99'] / 1000:.2f}"
            cells += [p99(50), p99(256)]
            hz, hn = r["hey"].get("z"), r["hey"].get("n")
            cells.append(_fmt_rps(hz["rps"]) if hz else "–")
            cells.append(f"{hz['latency_us'].get('p99', 0) / 1000:.2f}" if hz else "–")
            cells.append(_fmt_rps(hn["rps"]) if hn else "–")
            fails = sum(w["fail"] for w in r["wrk"].values()) + sum(h["fail"] for h in r["hey"].values())
            cells.append(str(fails))
            cells.append(f"{_mb(r['rss_idle_kb'])} / {_mb(r['rss_peak_kb'])}")
            w50 = r["wrk"].get("50")
            cells.append(f"{w50['cpu_us_per_req']:.1f}" if w50 and w50.get("cpu_us_per_req") else "–")
            cells.append(f"{w50['other_load_pct']:.0f}" if w50 and "other_load_pct" in w50 else "–")
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
    L += head_to_head(R)
    if R.get("ladders"):
        L.append("## Ladders (Hearth-style, pinned)")
        L.append("")
        L.append("| target | peak req/s | at conc | p99 at peak ms | worst p99 ms | requests | fail | report |")
        L.append("|---|---|---|---|---|---|---|---|")
        for name, lad in R["ladders"].items():
            if "error" in lad:
                L.append(f"| {name} | **failed**: {lad['error'][:150]} | | | | | | |")
                continue
            p, t = lad["peak"], lad["totals"]
            L.append(f"| {name} | {p['rps']:,.0f} | {p['conc']} | {p['p99_ms']:.2f} | {t['worst_p99_ms']:.2f} | "
                     f"{t['requests']:,} | {t['fail']} | [ladder-{name}.txt](ladder-{name}.txt) |")
        L.append("")
    d = R.get("drift")
    if d:
        L.append("## Drift check")
        L.append("")
        if d.get("points"):
            L.append(f"{d['target']} pinned, re-run at the end (wrk req/s; other load % in brackets):")
            L.append("")
            L.append("| c | first | at the end | drift |")
            L.append("|---|---|---|---|")
            for c, p in sorted(d["points"].items(), key=lambda x: int(x[0])):
                L.append(f"| {c} | {p['first_rps']:,.0f} ({p['first_other_load_pct']}) | {p['again_rps']:,.0f} "
                         f"({p['again_other_load_pct']}) | {p['drift_pct']:+.1f} % |")
        else:
            L.append(f"{d['target']}: {d.get('error')}")
        L.append("")
    s = R.get("sizes")
    if s:
        L.append("## Artefact sizes")
        L.append("")
        for name in ("libember.so", "libember.a"):
            v = s.get(name)
            if v:
                st = v["stripped_bytes"]
                L.append(f"- `{name}`: {v['bytes'] / 1024:,.0f} KiB as built, "
                         f"{(st or 0) / 1024:,.0f} KiB after `{v['strip']}`")
            else:
                L.append(f"- `{name}`: not built")
        if s.get("hello_static_exe_stripped_bytes"):
            L.append(f"- samples/c/hello.c linked statically against libember.a, stripped: "
                     f"{s['hello_static_exe_stripped_bytes'] / 1024:,.0f} KiB")
        L.append("- PicoServer claims ~50 KB (a managed assembly on top of the .NET runtime's HttpListener; "
                 "Ember carries its own HTTP/1.1+HTTP/2 stack, tokio and the Rust std)")
        L.append("")
    L.append("## Exit on SIGTERM")
    L.append("")
    bad = []
    for mode, runs in R["runs"].items():
        for name, r in runs.items():
            if r.get("stopped_on_sigterm") is False:
                bad.append(f"{mode}/{name} (needed SIGKILL)")
            elif r.get("exit_code") is not None and r["exit_code"] < 0 and r["exit_code"] != -15:
                bad.append(f"{mode}/{name} (died of signal {-r['exit_code']} before the SIGTERM)")
            elif r.get("exit_code") not in (0, None, -15, 143) and r.get("stopped_on_sigterm"):
                bad.append(f"{mode}/{name} (exit {r.get('exit_code')})")
    L.append("every target stopped on SIGTERM" if not bad else "not clean: " + ", ".join(bad))
    L.append("")
    path.write_text("\n".join(L))


HEAD_TO_HEAD = [
    ("Ember C inline vs bare hyper", "ember-c-inline", "hyper"),
    ("Ember C pool vs bare hyper", "ember-c-pool", "hyper"),
    ("Ember C auto vs bare hyper", "ember-c-auto", "hyper"),
    ("Ember C auto (default) vs C inline", "ember-c-auto", "ember-c-inline"),
    ("Ember Python auto (default) vs Python inline", "ember-py-auto", "ember-py-inline"),
    ("Ember .NET auto (default) vs .NET inline", "ember-net-auto", "ember-net-inline"),
    ("Ember Python inline vs bare hyper", "ember-py-inline", "hyper"),
    ("Ember .NET inline vs bare hyper", "ember-net-inline", "hyper"),
    ("Ember C inline vs nginx", "ember-c-inline", "nginx"),
    ("Ember C inline vs libmicrohttpd", "ember-c-inline", "libmicrohttpd"),
    ("Ember C pool vs CivetWeb", "ember-c-pool", "civetweb"),
    ("Ember Python inline vs granian RSGI", "ember-py-inline", "granian-rsgi"),
    ("Ember Python pool vs granian RSGI", "ember-py-pool", "granian-rsgi"),
    ("Ember Python pool vs granian ASGI", "ember-py-pool", "granian-asgi"),
    ("Ember Python pool vs uvicorn", "ember-py-pool", "uvicorn"),
    ("Ember ASGI vs uvicorn (same ASGI app)", "ember-asgi", "uvicorn"),
    ("Ember ASGI vs granian ASGI (same ASGI app)", "ember-asgi", "granian-asgi"),
    ("Ember ASGI vs uvicorn, FastAPI", "ember-asgi-fastapi", "uvicorn-fastapi"),
    ("Ember ASGI vs granian ASGI, FastAPI", "ember-asgi-fastapi", "granian-asgi-fastapi"),
    ("Ember WSGI vs gunicorn sync, Flask", "ember-wsgi-flask", "gunicorn-flask"),
    ("Ember WSGI vs granian WSGI, Flask", "ember-wsgi-flask", "granian-wsgi-flask"),
    ("Ember .NET inline vs HttpListener", "ember-net-inline", "httplistener"),
    ("Ember .NET pool vs HttpListener", "ember-net-pool", "httplistener"),
] + front_targets.HEAD_TO_HEAD


def head_to_head(R: dict) -> list[str]:
    conc = R["meta"]["plan"]["concurrency"]
    L = []
    for mode, runs in R["runs"].items():
        rows = []
        for label, a, b in HEAD_TO_HEAD:
            ra, rb = runs.get(a, {}), runs.get(b, {})
            if ra.get("status") != "ok" or rb.get("status") != "ok":
                continue
            cells = []
            for c in conc:
                wa, wb = ra["wrk"].get(str(c)), rb["wrk"].get(str(c))
                cells.append(f"{wa['rps'] / wb['rps']:.2f}" if wa and wb and wb["rps"] else "–")
            rows.append(f"| {label} | " + " | ".join(cells) + " |")
        if rows:
            L.append(f"## Head to head, {mode} (req/s ratio, wrk)")
            L.append("")
            L.append("| pair | " + " | ".join(f"c={c}" for c in conc) + " |")
            L.append("|---|" + "---|" * len(conc))
            L += rows
            L.append("")
    return L


def write_chart(R: dict, path: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"no chart: {e}"
    modes = [m for m, runs in R["runs"].items() if runs]
    if not modes:
        return "no chart: no runs"
    fig, axes = plt.subplots(1, len(modes), figsize=(7.5 * len(modes), 6), squeeze=False)
    styles = {"ceiling": ("black", "-", 2.5), "ember": (None, "-", 2.0), "native": (None, "--", 1.3),
              "python": (None, ":", 1.6), "dotnet": (None, "-.", 1.6)}
    names = [t.name for t in all_targets()]
    palette = plt.get_cmap("tab20").colors
    for ax, mode in zip(axes[0], modes):
        for name, r in R["runs"][mode].items():
            # Static files are another answer than the hello: their own table rows only.
            if r.get("status") != "ok" or r.get("group") == "static":
                continue
            xs = sorted(int(c) for c in r["wrk"])
            ys = [r["wrk"][str(c)]["rps"] for c in xs]
            color, ls, lw = styles.get(r["group"], (None, "-", 1.5))
            if color is None:
                color = palette[names.index(name) % len(palette)] if name in names else None
            ax.plot(xs, ys, marker="o", markersize=3, label=name, color=color, linestyle=ls, linewidth=lw)
        ax.set_xscale("log", base=2)
        ax.set_xticks(R["meta"]["plan"]["concurrency"])
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("concurrent connections (wrk)")
        ax.set_ylabel("requests / second")
        ax.set_title(f"GET / hello, {mode}" + (" (server CPU 0, load CPU 1)" if mode == "pinned" else ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.suptitle(f"Ember vs alternatives - {R['meta']['machine']['cpu']}, {R['meta']['finished_utc'][:10]}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None


def machine_info() -> dict:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1048576:.1f} GiB RAM"
                break
    except OSError:
        pass
    osname = platform.platform()
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                osname = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {"cpu": cpu, "cpus": NCPU, "mem": mem, "os": osname, "kernel": platform.release()}


def versions() -> dict:
    def dpkg(pkg):
        return tool_version(["dpkg-query", "-W", "-f", "${Version}", pkg])
    return {
        "rustc": tool_version(["rustc", "--version"]),
        "wrk": tool_version(["wrk", "-v"]),
        "hey": dpkg("hey"),
        "nginx": tool_version(["nginx", "-v"]),
        "libmicrohttpd": dpkg("libmicrohttpd-dev"),
        "civetweb": dpkg("libcivetweb-dev"),
        "mono": tool_version(["mono", "--version"]),
        "python": tool_version([_py(), "--version"]),
        "granian": tool_version([str(VENV / "bin" / "granian"), "--version"]),
        "uvicorn": tool_version([str(VENV / "bin" / "uvicorn"), "--version"]),
        "gunicorn": tool_version([str(VENV / "bin" / "gunicorn"), "--version"]),
        "fastapi": tool_version([_py(), "-c", "import fastapi; print(fastapi.__version__)"]),
        "flask": tool_version([_py(), "-c", "import importlib.metadata as m; print(m.version('flask'))"]),
    }


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
