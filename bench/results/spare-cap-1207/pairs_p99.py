#!/usr/bin/env python3
"""p99 and req/s at given concurrency: hyper, C auto (old lib), C auto (cap lib), C inline (cap lib), pinned to core 0, wrk on core 1; rounds rotate order."""
import subprocess, sys, time, os, re, statistics, json
MAIN = "/work/main"
C = int(sys.argv[1]) if len(sys.argv) > 1 else 256
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
PIN = os.environ.get("PIN", "1") == "1"
servers = {
    "hyper": ([f"{MAIN}/target/release/bench-hyper", "{port}", "1"], {}),
}
APP = os.environ.get("APP", "c")
LIBS = os.environ.get("LIBS", "old,cap2").split(",")
ARGV = {"c": [f"{MAIN}/samples/c/ember_ref", "{port}"],
        "py": [f"{MAIN}/bench/.venv/bin/python", f"{MAIN}/samples/python/ember_ref.py", "{port}"],
        "net": ["mono", f"{MAIN}/samples/dotnet/EmberRef.exe", "{port}"]}[APP]
for lib in LIBS:
    for d in ("auto", "inline"):
        servers[f"{APP}-{d}-{lib}"] = (ARGV, {"EMBER_DISPATCH": d, "EMBER_WORKERS": "1" if PIN else "", "LD_LIBRARY_PATH": f"/work/exp/lib-{lib}", "EMBER_LIBRARY": f"/work/exp/lib-{lib}/libember.so"})
procs = {}
port = 19100
for name, (argv, env) in servers.items():
    port += 1
    e = dict(os.environ, **{k: v for k, v in env.items() if v})
    a = [x.replace("{port}", str(port)) for x in argv]
    if name == "hyper" and not PIN:
        a[-1] = "2"
    pre = ["taskset", "-c", "0"] if PIN else []
    procs[name] = (subprocess.Popen(pre + a, env=e, cwd=MAIN, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port)
time.sleep(1.5)
res = {n: [] for n in servers}
names = list(servers)
def unit(v, u):
    return float(v) * {"us": 0.001, "ms": 1, "s": 1000}[u]
for r in range(ROUNDS):
    order = names[r % len(names):] + names[: r % len(names)]
    for n in order:
        p = procs[n][1]
        pre = ["taskset", "-c", "1"] if PIN else []
        subprocess.run(pre + ["wrk", "-t1" if PIN else "-t2", f"-c{C}", "-d1s", f"http://127.0.0.1:{p}/"], capture_output=True)
        out = subprocess.run(pre + ["wrk", "-t1" if PIN else "-t2", f"-c{C}", "-d4s", "--latency", f"http://127.0.0.1:{p}/"], capture_output=True, text=True).stdout
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
        p99 = unit(m.group(1), m.group(2))
        res[n].append((rps, p99))
        print(f"round {r+1} {n}: {rps:,.0f} req/s p99 {p99:.2f} ms", flush=True)
for n, (pr, port) in procs.items():
    pr.terminate()
print(f"\nc={C} pinned={PIN} rounds={ROUNDS}: median [range]")
for n in names:
    rs = [x[0] for x in res[n]]; ps = [x[1] for x in res[n]]
    print(f"{n:16s} req/s {statistics.median(rs):9,.0f} [{min(rs):,.0f}–{max(rs):,.0f}]  p99 {statistics.median(ps):6.2f} ms [{min(ps):.2f}–{max(ps):.2f}]")
json.dump(res, open(f"/work/exp/p99-{APP}-c{C}-{'pin' if PIN else 'unpin'}.json", "w"))
