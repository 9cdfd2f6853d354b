"""The three reference apps (C, Python, .NET under Mono) as fleet members: started on a
fixed port with the load-balancer options of tests/REFERENCE_APP.md, signalled, watched."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

HOSTS = {
    "c": [os.path.join(ROOT, "samples/c/ember_ref")],
    "python": [sys.executable, os.path.join(ROOT, "samples/python/ember_ref.py")],
    "dotnet": ["mono", os.path.join(ROOT, "samples/dotnet/EmberRef.exe")],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """One reference app process. ``start()`` returns once it printed its listening line."""

    def __init__(self, host: str, port: int = 0, drain_ms: int = 0, refuse_ms: int = 0, health: str = "/healthz",
                 log_dir: str | None = None, extra_env: dict | None = None) -> None:
        self.host = host
        self.port = port
        self.drain_ms = drain_ms
        self.refuse_ms = refuse_ms
        self.health = health
        self.log_dir = log_dir
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 60.0) -> "App":
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(ROOT, "bindings/python") + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.update({"EMBER_HEALTH_PATH": self.health, "EMBER_TRUSTED_PROXIES": "127.0.0.1",
                    "EMBER_DRAIN_MS": str(self.drain_ms), "EMBER_REFUSE_MS": str(self.refuse_ms)})
        env.update(self.extra_env)
        self.starts += 1
        err = subprocess.DEVNULL
        if self.log_dir:
            err = open(os.path.join(self.log_dir, f"{self.host}-{self.starts}.log"), "wb")
        self.proc = subprocess.Popen(HOSTS[self.host] + [str(self.port)], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=err)
        if err is not subprocess.DEVNULL:
            err.close()
        line = [b""]
        reader = threading.Thread(target=lambda: line.__setitem__(0, self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        text = line[0].decode(errors="replace").strip()
        if not text.startswith("listening on http://127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"{self.host} app did not start: {text!r} (exit {self.proc.poll()})")
        self.port = int(text.rsplit(":", 1)[1])
        # Keep reading stdout so the app never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def health_status(self) -> int | None:
        """The health path's status, or None when nothing answers."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            c.request("GET", self.health)
            r = c.getresponse()
            r.read()
            c.close()
            return r.status
        except OSError:
            return None

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.health_status() != 200:
            if time.monotonic() > deadline or not self.alive():
                raise RuntimeError(f"{self.host} app never became healthy")
            time.sleep(0.05)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
