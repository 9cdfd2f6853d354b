#!/usr/bin/env python3
"""Draws bench/results/soak.png (each app's RSS against requests served) and writes
bench/results/soak.md (one row per run) from every bench/results/soak-*.json that
bench/soak/soak.py wrote. The table is written even without matplotlib (then no PNG)."""
import glob
import json
import os
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results")


def verdict(r):
    bad = []
    if r["unexpected"]:
        bad.append("%d unexpected answers" % r["unexpected"])
    if not r["alive"]:
        bad.append("app died: %s" % r.get("exit"))
    elif r.get("stopped_clean") is False:
        bad.append("no clean stop on SIGTERM")
    if r["growth_mb"] > r["allowed_mb"]:
        bad.append("RSS grew %.1f MB (allowed %.1f)" % (r["growth_mb"], r["allowed_mb"]))
    return "pass" if not bad else "FAIL: " + "; ".join(bad)


def main():
    runs = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "soak-*.json"))):
        with open(path) as f:
            r = json.load(f)
        r["name"] = os.path.basename(path)[len("soak-"):-len(".json")]
        runs.append(r)
    if not runs:
        print("no bench/results/soak-*.json", file=sys.stderr)
        return 1
    lines = ["# Soak results", "",
             "Written by `bench/soak/plot.py` from `bench/results/soak-*.json` (`bench/soak/run.sh`). "
             "RSS growth: peak of the last half against the peak of the first half, after a quarter "
             "of warm-up; allowed 5% or 2 MB, whichever is larger.", "",
             "| run | app | dispatch | requests | seconds | req/s | unexpected | RSS start (MB) | "
             "RSS peak, first / last half (MB) | growth | result |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        first = r["rss_first_half_peak_mb"]
        pct = 100.0 * r["growth_mb"] / first if first else 0.0
        lines.append("| %s | `%s` | %s | %s | %s | %s | %d | %s | %s / %s | %+.2f MB (%+.1f%%) | %s |" % (
            r["name"], r["app"], r["dispatch"], format(r["requests"], ","), r["seconds"],
            format(r["requests_per_s"], ","), r["unexpected"], r.get("rss_start_mb", "?"),
            first, r["rss_last_half_peak_mb"], r["growth_mb"], pct, verdict(r)))
    lines.append("")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        lines.append("(no plot: matplotlib is missing; bench/run sets up bench/.venv with it)")
        plt = None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(10, 5.5))
        for r in runs:
            s = r["samples"]
            ax.plot([c / 1e6 for _, _, c in s], [kb / 1024 for _, kb, _ in s],
                    label="%s (%s requests)" % (r["name"], format(r["requests"], ",")))
        ax.set_xlabel("requests served (millions)")
        ax.set_ylabel("RSS (MB), sampled every second")
        ax.set_title("Ember soak: RSS of each reference app under the mixed load")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, "soak.png"), dpi=110)
        lines.append("![RSS against requests](soak.png)")
    with open(os.path.join(RESULTS, "soak.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
