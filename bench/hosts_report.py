#!/usr/bin/env python3
"""Issue 9's host comparisons, gathered from one or more bench runs into one table.

    bench/hosts_report.py bench/results/hosts-py-1 bench/results/hosts-py-2 ... \
        --md bench/results/hosts.md --json bench/results/hosts.json

Each argument is a ``bench/run --out DIR`` directory (its results.json). Per run, per pair
(Ember's host against the server its users run today, on the same app), per concurrency:
the req/s ratio and the server CPU µs per request of both; per ladder level the req/s
ratio and the failures. Across runs: every run's ratio and the spread (min-max), since a
single run on a shared machine drifts. Ratios are only ever taken within one run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# (title, Ember target, anchor target, goal ratio)
PAIRS = [
    ("minimal ASGI app: Ember ÷ uvicorn (uvloop+httptools)", "ember-asgi", "uvicorn", 1.5),
    ("minimal ASGI app: Ember ÷ granian ASGI", "ember-asgi", "granian-asgi", 1.5),
    ("FastAPI JSON route: Ember ÷ uvicorn", "ember-asgi-fastapi", "uvicorn-fastapi", 1.5),
    ("FastAPI JSON route: Ember ÷ granian ASGI", "ember-asgi-fastapi", "granian-asgi-fastapi", 1.5),
    ("Flask route: Ember WSGI ÷ gunicorn (sync)", "ember-wsgi-flask", "gunicorn-flask", 2.0),
    ("Flask route: Ember WSGI ÷ granian WSGI", "ember-wsgi-flask", "granian-wsgi-flask", None),
    ("ASP.NET .ashx: EmberAspNet ÷ HttpListener + HttpRuntime", "ember-aspnet", "httplistener-aspnet", 3.0),
    ("ASP.NET .ashx: EmberAspNet direct bridge ÷ its remoting bridge", "ember-aspnet", "ember-aspnet-remoting", None),
    ("ASP.NET .ashx: EmberAspNet remoting bridge ÷ HttpListener + HttpRuntime", "ember-aspnet-remoting",
     "httplistener-aspnet", None),
]
LADDER_PAIRS = [("ASP.NET ladder: EmberAspNet ÷ HttpListener + HttpRuntime", "ember-aspnet",
                 "httplistener-aspnet", 3.0)]


def _load(d: Path) -> dict:
    return json.loads((d / "results.json").read_text())


def _point(run: dict, target: str, conc: str) -> dict | None:
    t = run.get("runs", {}).get("pinned", {}).get(target)
    if not t or t.get("status") != "ok":
        return None
    return (t.get("wrk") or {}).get(conc)


def gather(dirs: list[Path]) -> dict:
    out: dict = {"runs": [], "pairs": [], "ladders": [], "cpu": {}}
    runs = []
    for d in dirs:
        r = _load(d)
        runs.append((d.name, r))
        out["runs"].append({"dir": d.name, "started": r.get("meta", {}).get("started_utc"),
                            "commit": r.get("meta", {}).get("git_commit")})
    for title, a, b, goal in PAIRS:
        rows: dict = {}
        for name, r in runs:
            for conc in ("1", "8", "50", "256"):
                pa, pb = _point(r, a, conc), _point(r, b, conc)
                if not pa or not pb or not pb.get("rps"):
                    continue
                rows.setdefault(conc, []).append({
                    "run": name, "ember_rps": pa["rps"], "anchor_rps": pb["rps"],
                    "rps_ratio": pa["rps"] / pb["rps"],
                    "ember_cpu_us": pa.get("cpu_us_per_req"), "anchor_cpu_us": pb.get("cpu_us_per_req"),
                    "cpu_ratio": (pb["cpu_us_per_req"] / pa["cpu_us_per_req"]
                                  if pa.get("cpu_us_per_req") and pb.get("cpu_us_per_req") else None),
                    "ember_sys_us": pa.get("cpu_sys_us_per_req"), "anchor_sys_us": pb.get("cpu_sys_us_per_req"),
                    # What the CPU ratio would be if Ember's own code cost nothing and only
                    # the kernel's work for its sockets were left: no change to Ember beats it.
                    "ceiling": (pb["cpu_us_per_req"] / pa["cpu_sys_us_per_req"]
                                if pa.get("cpu_sys_us_per_req") and pb.get("cpu_us_per_req") else None),
                    "fail": (pa.get("fail") or 0) + (pb.get("fail") or 0),
                    "other_load_pct": max(pa.get("other_load_pct") or 0, pb.get("other_load_pct") or 0)})
        if rows:
            out["pairs"].append({"title": title, "ember": a, "anchor": b, "goal": goal, "points": rows})
    for title, a, b, goal in LADDER_PAIRS:
        levels: dict = {}
        for name, r in runs:
            la, lb = r.get("ladders", {}).get(a), r.get("ladders", {}).get(b)
            if not la or not lb or not la.get("rows") or not lb.get("rows"):
                continue
            rb = {row["conc"]: row for row in lb["rows"]}
            for row in la["rows"]:
                other = rb.get(row["conc"])
                if not other or not other.get("rps"):
                    continue
                levels.setdefault(str(row["conc"]), []).append({
                    "run": name, "ember_rps": row["rps"], "anchor_rps": other["rps"],
                    "rps_ratio": row["rps"] / other["rps"], "ember_fail": row["fail"], "anchor_fail": other["fail"],
                    "other_load_pct": max(row.get("other_load_pct") or 0, other.get("other_load_pct") or 0)})
        if levels:
            out["ladders"].append({"title": title, "ember": a, "anchor": b, "goal": goal, "levels": levels})
    # CPU µs per request of every target at c=50, per run (the bridge's cost is a difference).
    for name, r in runs:
        for target, t in r.get("runs", {}).get("pinned", {}).items():
            p = (t.get("wrk") or {}).get("50") if t.get("status") == "ok" else None
            if p and p.get("cpu_us_per_req"):
                out["cpu"].setdefault(target, []).append({"run": name, "cpu_us": p["cpu_us_per_req"],
                                                          "rps": p["rps"]})
    return out


def _spread(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}"


def markdown(g: dict, notes: list[str] | None = None) -> str:
    lines = ["# Issue 9: the app servers, side by side", "",
             "Generated by `bench/hosts_report.py` from " + ", ".join(f"`{r['dir']}`" for r in g["runs"]) + ".",
             "Pinned: server on CPU 0 (one worker / I/O thread), wrk on CPU 1. A ratio is always taken",
             "within one run; the range is over the runs. `CPU µs/req` is the server's CPU time per",
             "request (the steadier reading on a shared machine), the kernel's part (system time, the",
             "loopback TCP work for the server's sockets) in brackets; `cpu ratio` = anchor ÷ Ember;",
             "`ceiling` = anchor CPU ÷ Ember's kernel part: the CPU ratio Ember would reach if its own",
             "code (engine, bridge, Python) cost nothing, so a goal above it is out of any server's reach.", ""]
    for note in notes or ():
        lines += [f"- {note}"]
    if notes:
        lines.append("")
    for p in g["pairs"]:
        goal = f" (goal ≥ {p['goal']}×)" if p["goal"] else ""
        lines += [f"## {p['title']}{goal}", "",
                  "| c | req/s ratio per run | range | Ember CPU µs/req (kernel) | anchor CPU µs/req (kernel) "
                  "| cpu ratio | ceiling | fails | other load % |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for conc, rows in sorted(p["points"].items(), key=lambda kv: int(kv[0])):
            ratios = [x["rps_ratio"] for x in rows]

            def cpu(side: str) -> str:
                total = _spread([x[f"{side}_cpu_us"] for x in rows if x[f"{side}_cpu_us"]], "{:.1f}")
                ker = [x.get(f"{side}_sys_us") for x in rows if x.get(f"{side}_sys_us") is not None]
                return total + (f" ({_spread(ker, '{:.1f}')})" if ker else "")
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                conc, ", ".join(f"{x:.2f}" for x in ratios), _spread(ratios), cpu("ember"), cpu("anchor"),
                _spread([x["cpu_ratio"] for x in rows if x["cpu_ratio"]]),
                _spread([x["ceiling"] for x in rows if x.get("ceiling")]),
                sum(x["fail"] for x in rows), _spread([x["other_load_pct"] for x in rows], "{:.0f}")))
        lines.append("")
    for ld in g["ladders"]:
        lines += [f"## {ld['title']} (goal ≥ {ld['goal']}× at every level, zero failures)", "",
                  "| c | Ember req/s | anchor req/s | ratio per run | range | fails (Ember / anchor) | other load % |",
                  "|---|---|---|---|---|---|---|"]
        for conc, rows in sorted(ld["levels"].items(), key=lambda kv: int(kv[0])):
            ratios = [x["rps_ratio"] for x in rows]
            lines.append("| {} | {} | {} | {} | {} | {} / {} | {} |".format(
                conc, _spread([x["ember_rps"] for x in rows], "{:,.0f}"),
                _spread([x["anchor_rps"] for x in rows], "{:,.0f}"),
                ", ".join(f"{x:.2f}" for x in ratios), _spread(ratios),
                sum(x["ember_fail"] for x in rows), sum(x["anchor_fail"] for x in rows),
                _spread([x["other_load_pct"] for x in rows], "{:.0f}")))
        lines.append("")
    lines += ["## Server CPU µs per request at c=50, every target", "",
              "| target | CPU µs/req per run | req/s per run |", "|---|---|---|"]
    for target, rows in sorted(g["cpu"].items()):
        lines.append(f"| {target} | " + ", ".join(f"{x['cpu_us']:.1f}" for x in rows) + " | "
                     + ", ".join(f"{x['rps']:,.0f}" for x in rows) + " |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--note", action="append", help="a line of context for the top of the table (repeatable)")
    a = ap.parse_args()
    g = gather(a.dirs)
    md = markdown(g, a.note)
    if a.md:
        a.md.write_text(md)
    if a.json:
        a.json.write_text(json.dumps(g, indent=1))
    print(md)


if __name__ == "__main__":
    main()
