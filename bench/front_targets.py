"""Benchmark targets of the engine's own features (issue 10), added to harness.all_targets():

- static files: the same 1 KB JSON file and 10 MiB binary file served by Ember (the C reference
  app's /static mount, EMBER_WWW pointing at bench/build/www) and by nginx (one worker,
  sendfile on, as Debian's default configuration has it);
- the output cache: /cached of the Python and .NET reference apps, answered by the engine
  without the host after the first request; compared with bare hyper and with the same apps'
  uncached GET / (ember-py-inline, ember-net-inline).

The files are made by prepare_www() (deterministic bytes), before any of these targets start.
"""

from __future__ import annotations

import random
from pathlib import Path

from benchlib import BENCH, ROOT

WWW = BENCH / "build" / "www"
ONE_KB = WWW / "1k.json"
TEN_MB = WWW / "10m.bin"
CACHED_PATH = "/cached?ttl=3600"
# The host runs once (the harness's first check); every later answer comes from the cache,
# so the body still says 1 after the load: the check after the run proves the host was skipped.
CACHED_BODY = b'{"calls": 1}'


def prepare_www() -> None:
    WWW.mkdir(parents=True, exist_ok=True)
    if not ONE_KB.exists() or ONE_KB.stat().st_size != 1024:
        head = b'{"code": 1, "msg": "Hello WebAPI", "pad": "'
        tail = b'"}'
        ONE_KB.write_bytes(head + b"x" * (1024 - len(head) - len(tail)) + tail)
    if not TEN_MB.exists() or TEN_MB.stat().st_size != 10 << 20:
        rnd = random.Random(10)
        TEN_MB.write_bytes(rnd.randbytes(10 << 20))


def _nginx_static_prepare(port, workdir: Path) -> None:
    prepare_www()
    text = (BENCH / "targets" / "nginx_static.conf.in").read_text()
    text = text.replace("@PREFIX@", str(workdir)).replace("@PORT@", str(port)).replace("@WWW@", str(WWW))
    (workdir / "nginx.conf").write_text(text)


def _www_prepare(port, workdir: Path) -> None:
    prepare_www()


def targets(Target, ember_env, py) -> list:
    def static_env(workers):
        env = ember_env("inline")(workers)
        env["EMBER_WWW"] = str(WWW)
        return env

    ember_c = lambda p, w, d: [str(ROOT / "samples" / "c" / "ember_ref"), "0"]  # noqa: E731
    nginx = lambda p, w, d: ["nginx", "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")]  # noqa: E731
    T = []
    for size, path, ctype, read in (("1k", "/static/1k.json", "application/json", ONE_KB),
                                    ("10m", "/static/10m.bin", "application/octet-stream", TEN_MB)):
        # hey's seeds' commands are for the hello answer; 50,000 downloads of 10 MiB are not.
        hey = size == "1k"
        T.append(Target(f"ember-static-{size}", f"Ember static file {size.upper()}B (C ref app)", "static",
                        ["ember-lib", "samples-c"], ember_c, env=static_env, quick=True, path=path,
                        prepare=_www_prepare, expect=read, ctype=ctype, hey=hey))
        T.append(Target(f"nginx-static-{size}", f"nginx static file {size.upper()}B (1 worker, sendfile)", "static",
                        ["nginx"], nginx, fixed_port=True, quick=True, path=path, prepare=_nginx_static_prepare,
                        expect=read, ctype=ctype, hey=hey))
    T.append(Target("ember-py-cached", "Ember Python ref app, /cached (output cache)", "cache", ["ember-lib", "venv"],
                    lambda p, w, d: [py(), str(ROOT / "samples" / "python" / "ember_ref.py"), "0"],
                    env=ember_env("inline"), quick=True, path=CACHED_PATH, expect=CACHED_BODY))
    T.append(Target("ember-net-cached", "Ember .NET ref app, /cached (output cache)", "cache",
                    ["ember-lib", "samples-dotnet"],
                    lambda p, w, d: ["mono", str(ROOT / "samples" / "dotnet" / "EmberRef.exe"), "0"],
                    env=ember_env("inline"), quick=True, path=CACHED_PATH, expect=CACHED_BODY))
    return T


HEAD_TO_HEAD = [
    ("Ember static 1 KB vs nginx", "ember-static-1k", "nginx-static-1k"),
    ("Ember static 10 MiB vs nginx", "ember-static-10m", "nginx-static-10m"),
    ("Ember Python /cached vs bare hyper", "ember-py-cached", "hyper"),
    ("Ember Python /cached vs its uncached GET /", "ember-py-cached", "ember-py-inline"),
    ("Ember .NET /cached vs bare hyper", "ember-net-cached", "hyper"),
    ("Ember .NET /cached vs its uncached GET /", "ember-net-cached", "ember-net-inline"),
]
