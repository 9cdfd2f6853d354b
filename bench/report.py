"""The benchmark's reports: results.md (tables, head to head, ladders, drift, sizes), the chart,
and the machine and tool versions recorded with them (bench/harness.py)."""

from __future__ import annotations

import platform
from pathlib import Path

from benchlib import tool_version
import front_targets
from target_list import NCPU, VENV, _py, all_targets


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
              ["p99 c=50 ms", "p99 c=256 ms", "hey -z req/s", "hey -z p99 ms", "hey -n req/s",
               "fail", "RSS idle/peak MB", "CPU µs/req c=50 (kernel)"] + \
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
            cells.append(f"{w50['cpu_us_per_req']:.1f}" + (f" ({w50['cpu_sys_us_per_req']:.1f})"
                                                            if w50.get("cpu_sys_us_per_req") is not None else "")
                         if w50 and w50.get("cpu_us_per_req") else "–")
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
