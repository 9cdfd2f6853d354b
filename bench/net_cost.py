#!/usr/bin/env python3
"""Instructions per request (callgrind) of the .NET binding under Mono: the reference app
(samples/dotnet/EmberRef.exe: GET /, a prepared answer; GET /users/42, a route value and a
fresh JSON string per request; GET /api/ping, a JSON string and one extra header). Counts, not times: they hold on a busy machine, so they are
what before/after comparisons of the binding's per-request cost use
(bench/results/net-cost.md).

    bench/net_cost.py                     # every case below
    bench/net_cost.py net-ref-inline
    N1=300 N2=2300 bench/net_cost.py
    KEEP=/tmp/prof bench/net_cost.py      # also keeps each profile as /tmp/prof.<case>.<n>

Each case runs the server (mono, one I/O thread) twice under callgrind, with N1 and N2
keep-alive GETs of the case's path from a client outside it on one connection; the
difference divided by N2 - N1 is one request's cost: runtime start-up, JIT compilation of
the first requests and shutdown cancel out (N1 is large enough that every method on the
path is compiled by then). Every thread of the process counts (engine, Mono's GC and
finalizer). Needs the release build (target/release/libember.so), bindings/dotnet/build.sh
and samples/dotnet/build.sh, mono and valgrind.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from front_cost import callgrind_total, free_port, print_per_request  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N1 = int(os.environ.get("N1", "300"))
N2 = int(os.environ.get("N2", "2300"))
APP = ROOT / "samples" / "dotnet" / "EmberRef.exe"


def ref(dispatch):
    def cmd(port):
        return ["mono", str(APP), str(port)], {"EMBER_DISPATCH": dispatch, "EMBER_WORKERS": "1"}
    return cmd


# case -> (command, path)
CASES = {
    "net-ref-inline": (ref("inline"), "/"),
    "net-ref-users-inline": (ref("inline"), "/users/42"),
    "net-ref-ping-inline": (ref("inline"), "/api/ping"),
    "net-ref-auto": (ref("auto"), "/"),
}


def measure(case: str, n: int) -> int:
    make, path = CASES[case]
    port = free_port()
    argv, extra = make(port)
    return callgrind_total(case, argv, dict(os.environ, **extra), port, path, n)


def main() -> None:
    if not APP.is_file():
        sys.exit(f"net_cost: {APP} is missing: bindings/dotnet/build.sh && samples/dotnet/build.sh first")
    print_per_request(sys.argv[1:] or list(CASES), measure, N1, N2)


if __name__ == "__main__":
    main()
