"""Building what the benchmark measures (the engine, bench-hyper, the samples, the C and .NET
hello targets) and the artefact sizes it reports (bench/harness.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from benchlib import BENCH, BENCH_PGO, ROOT, log
from target_list import BUILD, RELEASE, TARGETS_DIR, VENV


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


def build_py_speedups(python, lib: Path = RELEASE / "libember.so") -> tuple[bool, str]:
    """Builds ember._speedups (the request crossing in C) into the checkout's binding, which
    the Ember Python targets import: without it they cross by ctypes, the fallback of a
    Python the extension was not built for, about twice the instructions per request
    (bench/py_cost.py asgi-bench-inline, 2026-12-06: 33.7k with it, 61.7k without). A fresh
    clone has no build of it; tests/run_python.sh makes the same one."""
    ok, out = _run([str(python), "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT / "bindings" / "python")
    if not ok:
        return False, out
    return _run([str(python), "-c", "import ember._crossing as c; assert c.CROSSING == 'c', c.CROSSING"],
                cwd=ROOT / "bindings" / "python",
                env={"EMBER_LIBRARY": str(lib), "EMBER_PY_SPEEDUPS": "1"})


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
        if ok and BENCH_PGO:
            # What ships (scripts/release.sh) is the profile-guided library, target/pgo/lib:
            # the Ember targets load it (benchlib.ember_lib_env).
            log("scripts/pgo.sh: the profile-guided library (BENCH_PGO=0 measures the plain cargo build)")
            okp, outp = _run([str(ROOT / "scripts" / "pgo.sh")], cwd=ROOT, timeout=1800)
            rec("ember-pgo", okp, outp)
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
        if ok and st.get("ember-lib", {}).get("ok"):
            ok, out = build_py_speedups(VENV / "bin" / "python")
            rec("py-speedups", ok, out, note="" if ok else "the Ember Python targets would cross by ctypes")
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
