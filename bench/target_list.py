"""The benchmark's targets: every server bench/run can measure, how to start it, what it needs
built, and the answer its checks expect (bench/harness.py; the engine's own features add theirs
from front_targets.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from benchlib import BENCH, ROOT, ember_lib_env, verify
import front_targets

VENV = BENCH / ".venv"
BUILD = BENCH / "build"
TARGETS_DIR = BENCH / "targets"
RELEASE = ROOT / "target" / "release"
NCPU = os.cpu_count() or 1


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
        return {"EMBER_DISPATCH": dispatch, "EMBER_WORKERS": str(workers), **ember_lib_env()}
    return env


def _ember_cli_env(workers):
    return {**ember_lib_env(), "PYTHONPATH": str(ROOT / "bindings" / "python")}


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
