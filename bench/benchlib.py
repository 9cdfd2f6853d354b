"""Shared pieces of the Ember benchmark harness: processes, /proc sampling, load generators.

Standard library only. Every process this module starts is remembered by pid and stopped by
pid (never by name); every wait and every load run has a time bound.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import resource
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
EXPECTED_BODY = b'{"code": 1, "msg": "Hello WebAPI"}'
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
# The library the Ember targets load: the profile-guided build that scripts/release.sh ships
# (target/pgo/lib, made by scripts/pgo.sh when bench/run builds), or with BENCH_PGO=0 the
# plain `cargo build --release`. BENCH_LIB_DIR names any other folder with a libember.so
# (an A/B against a saved build).
BENCH_PGO = os.environ.get("BENCH_PGO", "1") != "0"
LIB_DIR = ROOT / "target" / "pgo" / "lib" if BENCH_PGO else ROOT / "target" / "release"
if os.environ.get("BENCH_LIB_DIR"):
    LIB_DIR = Path(os.environ["BENCH_LIB_DIR"]).resolve()


def ember_lib_env() -> dict[str, str]:
    """The environment that makes an Ember target load LIB_DIR's library: the bindings read
    EMBER_LIBRARY; the C programs are linked against target/release, and LD_LIBRARY_PATH
    comes before their RUNPATH."""
    if not (LIB_DIR / "libember.so").exists():
        raise BenchError(f"{LIB_DIR / 'libember.so'} is missing: scripts/pgo.sh builds it (BENCH_PGO=0: the plain build)")
    if not (LIB_DIR / "libember.so.0").exists():
        # Else the C programs (which ask for the soname) quietly load their RUNPATH's library.
        raise BenchError(f"{LIB_DIR / 'libember.so.0'} is missing: ln -s libember.so {LIB_DIR / 'libember.so.0'}")
    return {"EMBER_LIBRARY": str(LIB_DIR / "libember.so"), "LD_LIBRARY_PATH": str(LIB_DIR)}


def inherit_autogroup_nice(pid: int) -> None:
    """Gives a target's session the bench's own scheduling weight. With autogroup scheduling
    (Linux's default for desktops and many VMs: /proc/sys/kernel/sched_autogroup_enabled)
    a process's nice value counts only within its session, so builds and tests run under
    ``nice -n 19`` in other sessions still take an equal share from a server started in a
    session of its own; the session's nice (/proc/PID/autogroup) is what weighs. Best effort:
    without autogroup, or without the right to lower a nice value, nothing changes."""
    try:
        own = open("/proc/self/autogroup").read().split()[-1]
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(own)
    except (OSError, IndexError, ValueError):
        pass


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def callgrind_count(text: str) -> int | None:
    """The instructions a callgrind output file counted in all, or None."""
    m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    return int(m.group(1)) if m else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- /proc: process tree, RSS, CPU

def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    return data[data.rindex(")") + 2:].split()


def tree_pids(root: int) -> list[int]:
    """root and all its live descendants."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        f = _stat_fields(int(name))
        if f is None:
            continue
        children.setdefault(int(f[1]), []).append(int(name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_kb(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE_KB
        except (OSError, ValueError, IndexError):
            pass
    return total


def cpu_split(pids: list[int], root: int) -> tuple[float, float]:
    """(user, system) seconds of the live tree, plus the reaped children's time charged to
    the root. The system half is mostly the kernel's TCP work for the server's sockets."""
    user = sys_ = 0
    for p in pids:
        f = _stat_fields(p)
        if f is None:
            continue
        user += int(f[11])
        sys_ += int(f[12])
        if p == root:
            user += int(f[13])
            sys_ += int(f[14])
    return user / CLK_TCK, sys_ / CLK_TCK


def cpu_seconds(pids: list[int], root: int) -> float:
    """utime+stime of the live tree, plus the reaped children's time charged to the root."""
    return sum(cpu_split(pids, root))


def cpu_times() -> dict[str, list[int]]:
    """Per-CPU jiffies from /proc/stat: [task (user+nice+system), irq+softirq, steal, total]."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                parts = line.split()
                v = [int(x) for x in parts[1:9]] + [0] * max(0, 8 - len(parts[1:9]))
                out[parts[0]] = [v[0] + v[1] + v[2], v[5] + v[6], v[7], sum(v)]
    return out


def cpu_busy_pct(before: dict, after: dict) -> dict[str, dict[str, float]]:
    """Per CPU: % of the interval spent in tasks, in irq/softirq, and stolen by the hypervisor."""
    res = {}
    for cpu, a in after.items():
        b = before.get(cpu, [0, 0, 0, 0])
        tot = a[3] - b[3]
        if tot > 0:
            res[cpu] = {k: round(100.0 * (a[i] - b[i]) / tot, 1)
                        for i, k in enumerate(("task", "irq", "steal"))}
    return res


def others_snapshot(exclude: set[int]) -> dict[int, int]:
    """CPU ticks (own + reaped children's) of every process except `exclude`."""
    snap = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude:
            continue
        f = _stat_fields(int(name))
        if f is not None:
            snap[int(name)] = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return snap


def others_cpu_seconds(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU time that processes other than the excluded ones used between two snapshots.
    Processes that ended in between count through their parent's reaped-children time."""
    ticks = sum(t - before.get(pid, 0) for pid, t in after.items())
    return max(0, ticks) / CLK_TCK


def loadavg() -> list[float]:
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except (OSError, ValueError):
        return []


class Sampler(threading.Thread):
    """Samples the RSS of a process tree every `interval` s; keeps the peak and the CPU time."""

    def __init__(self, root: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.peak_kb = 0
        self.pids = tree_pids(root)
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._last_tree = 0.0

    def run(self) -> None:
        while not self._halt.is_set():
            now = time.monotonic()
            if now - self._last_tree > 1.0:
                pids = tree_pids(self.root)
                with self._lock:
                    self.pids = pids
                self._last_tree = now
            with self._lock:
                pids = list(self.pids)
            kb = rss_kb(pids)
            if kb > self.peak_kb:
                self.peak_kb = kb
            self._halt.wait(self.interval)

    def current_pids(self) -> list[int]:
        pids = tree_pids(self.root)
        with self._lock:
            self.pids = pids
        return pids

    def cpu(self) -> float:
        return cpu_seconds(self.current_pids(), self.root)

    def cpu_split(self) -> tuple[float, float]:
        return cpu_split(self.current_pids(), self.root)

    def stop(self) -> None:
        self._halt.set()


# ---------------------------------------------------------------- server processes

class Server:
    """A started target server: pid, port, logs; stop() ends it and its descendants by pid."""

    def __init__(self, name: str, argv: list[str], env: dict | None, cwd: Path | None,
                 logdir: Path, port: int | None, pin: str | None, ready_timeout: float,
                 stop_timeout: float = 8.0):
        self.name, self.port = name, port
        self.stop_timeout = stop_timeout
        self.exit_code: int | None = None
        self.stopped_gracefully: bool | None = None
        logdir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = logdir / f"{name}.stdout.log"
        self.stderr_path = logdir / f"{name}.stderr.log"
        full = (["taskset", "-c", pin] if pin is not None else []) + argv
        self.argv = full
        penv = dict(os.environ)
        if env:
            penv.update(env)
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(full, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                     env=penv, cwd=str(cwd) if cwd else None, start_new_session=True)
        self.pid = self.proc.pid
        self.known_pids: set[int] = {self.pid}
        inherit_autogroup_nice(self.pid)
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pat = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with {self.proc.returncode} before listening; "
                                 f"stderr: {self.stderr_tail()}")
            if self.port is None:
                data = self.stdout_path.read_bytes()
                first = data.split(b"\n", 1)[0]
                if b"\n" in data:
                    m = pat.fullmatch(first.strip())
                    if not m:
                        raise BenchError(f"{self.name}: first stdout line is {first[:200]!r}, "
                                         "not 'listening on http://127.0.0.1:PORT'")
                    self.port = int(m.group(1))
            if self.port is not None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise BenchError(f"{self.name} not listening after {timeout:.0f} s; stderr: {self.stderr_tail()}")

    def stderr_tail(self, n: int = 600) -> str:
        try:
            return self.stderr_path.read_bytes()[-n:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def remember_tree(self) -> None:
        if self.proc.poll() is None:
            self.known_pids.update(tree_pids(self.pid))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.returncode is None:
            self.remember_tree()
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.exit_code = self.proc.wait(timeout=self.stop_timeout)
                self.stopped_gracefully = True
            except subprocess.TimeoutExpired:
                self.stopped_gracefully = False
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.exit_code = self.proc.wait(timeout=10)
        else:
            self.exit_code = self.proc.returncode
        # Descendants (nginx/granian workers) that outlived their parent: by their own pids.
        for p in sorted(self.known_pids - {self.pid}):
            f = _stat_fields(p)
            if f is not None and f[0] != "Z":
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for fh in (self._out, self._err):
            try:
                fh.close()
            except OSError:
                pass


# ---------------------------------------------------------------- answer and keep-alive check

def verify(port: int, path: str = "/", timeout: float = 5.0, keep_alive: bool = True,
           body: bytes | None = None, ctype: str = "application/json") -> dict:
    """Two GETs on one connection: both 200, ``ctype``, the exact ``body`` (default: the hello
    body), connection kept. ``keep_alive=False`` (servers that close after every answer, e.g.
    gunicorn's sync workers): two GETs, each on its own connection."""
    expected_body = EXPECTED_BODY if body is None else body
    want_type = ctype
    if not keep_alive:
        seen = []
        for i in range(2):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            try:
                conn.request("GET", path, headers={"Accept": "*/*"})
                r = conn.getresponse()
                body = r.read()
                ctype = r.getheader("Content-Type", "")
                if r.status != 200 or body != expected_body or ctype.split(";")[0].strip().lower() != want_type:
                    raise BenchError(f"GET {path}: status {r.status}, Content-Type {ctype!r}, body {body[:200]!r}")
                seen.append({k.lower(): v for k, v in r.getheaders()})
            finally:
                conn.close()
        return {"ok": True, "keep_alive": False, "response_headers": seen[0]}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        seen = []
        sock = None
        for i in range(2):
            conn.request("GET", path, headers={"Accept": "*/*"})
            r = conn.getresponse()
            body = r.read()
            ctype = r.getheader("Content-Type", "")
            if r.status != 200:
                raise BenchError(f"GET {path}: status {r.status}, body {body[:200]!r}")
            if body != expected_body:
                raise BenchError(f"GET {path}: body {body[:200]!r} ({len(body)} bytes), expected "
                                 f"{expected_body[:200]!r} ({len(expected_body)} bytes)")
            if ctype.split(";")[0].strip().lower() != want_type:
                raise BenchError(f"GET {path}: Content-Type {ctype!r}, expected {want_type}")
            if r.will_close:
                raise BenchError(f"GET {path}: request {i + 1} answered with the connection closing "
                                 f"(Connection: {r.getheader('Connection')!r}); keep-alive is required")
            if sock is None:
                sock = conn.sock
            elif conn.sock is not sock:
                raise BenchError(f"GET {path}: the second request needed a new connection")
            seen.append({"status": r.status, "content_type": ctype,
                         "headers": {k.lower(): v for k, v in r.getheaders()}})
        return {"ok": True, "keep_alive": True, "response_headers": seen[0]["headers"]}
    finally:
        conn.close()


# ---------------------------------------------------------------- load generators

def _pin(cpu: str | None) -> list[str]:
    return ["taskset", "-c", cpu] if cpu is not None else []


def run_wrk(url: str, conns: int, duration: float, threads: int, pin: str | None,
            script: Path, timeout_s: int = 4) -> dict:
    """One wrk run; every figure of it from the Lua done() hook."""
    threads = max(1, min(threads, conns))
    duration = max(1, int(round(duration)))  # wrk takes whole seconds
    argv = _pin(pin) + ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s",
                        f"--timeout={timeout_s}s", "--latency", "-s", str(script), url]
    t0 = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, capture_output=True, timeout=duration + 60)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = p.stdout.decode("utf-8", "replace")
    m = re.search(r"^BENCHJSON (\{.*\})\s*$", out, re.M)
    if p.returncode != 0 or not m:
        raise BenchError(f"wrk failed (exit {p.returncode}): {out[-400:]} {p.stderr.decode()[-400:]}")
    d = json.loads(m.group(1))
    secs = d["duration_us"] / 1e6
    e = d["errors"]
    d["tool"] = "wrk"
    d["connections"] = conns
    d["threads"] = threads
    d["wall_s"] = round(time.monotonic() - t0, 3)
    d["load_cpu_s"] = round((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), 3)
    d["rps"] = d["requests"] / secs if secs > 0 else 0.0
    d["socket_errors"] = e["connect"] + e["read"] + e["write"] + e["timeout"]
    d["non_2xx_3xx"] = e["status"]
    d["ok"] = d["requests"] - e["status"]
    d["fail"] = e["status"] + d["socket_errors"]
    return d


_HEY_UNITS = {"secs": 1.0}


def parse_hey(out: str) -> dict:
    def num(pattern: str) -> float | None:
        m = re.search(pattern, out, re.M)
        return float(m.group(1)) if m else None

    d = {
        "total_s": num(r"^\s*Total:\s+([\d.]+) secs"),
        "slowest_s": num(r"^\s*Slowest:\s+([\d.]+) secs"),
        "fastest_s": num(r"^\s*Fastest:\s+([\d.]+) secs"),
        "average_s": num(r"^\s*Average:\s+([\d.]+) secs"),
        "rps": num(r"^\s*Requests/sec:\s+([\d.]+)"),
        "percentiles_s": {},
        "statuses": {},
        "errors": {},
    }
    for m in re.finditer(r"^\s*(\d+)%+ in ([\d.]+) secs", out, re.M):
        d["percentiles_s"][f"p{m.group(1)}"] = float(m.group(2))
    for m in re.finditer(r"^\s*\[(\d+)\]\s+(\d+) responses", out, re.M):
        d["statuses"][m.group(1)] = int(m.group(2))
    err = re.search(r"Error distribution:\n((?:\s+\[\d+\].*\n?)+)", out)
    if err:
        for m in re.finditer(r"\[(\d+)\]\s+(.*)", err.group(1)):
            d["errors"][m.group(2).strip()[:200]] = int(m.group(1))
    d["requests"] = sum(d["statuses"].values())
    d["ok"] = sum(n for s, n in d["statuses"].items() if s.startswith("2"))
    d["fail"] = d["requests"] - d["ok"] + sum(d["errors"].values())
    return d


def run_hey(url: str, args: list[str], pin: str | None, timeout: float) -> dict:
    """hey with the seeds' arguments; bounded by `timeout` seconds (then killed, reported)."""
    argv = _pin(pin) + ["hey"] + args + [url]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"hey {' '.join(args)} did not finish within {timeout:.0f} s")
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise BenchError(f"hey failed (exit {p.returncode}): {p.stderr.decode()[-400:]}")
    d = parse_hey(out)
    if d["rps"] is None:
        raise BenchError(f"cannot parse hey output: {out[-400:]}")
    d["tool"] = "hey"
    d["args"] = args
    d["wall_s"] = round(time.monotonic() - t0, 3)
    lat = d["percentiles_s"]
    d["latency_us"] = {k: round(v * 1e6) for k, v in lat.items()}
    if d["average_s"] is not None:
        d["latency_us"]["mean"] = round(d["average_s"] * 1e6, 2)
    if d["slowest_s"] is not None:
        d["latency_us"]["max"] = round(d["slowest_s"] * 1e6)
    return d


def tool_version(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    text = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:120] if text else "n/a"
