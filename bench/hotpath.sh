#!/usr/bin/env bash
# Instructions per request of a C hello app (bench/targets/hotpath_app.c: inline dispatch, one
# I/O worker) under callgrind: an instruction count, not a time, so it is steady on a busy machine.
#
#   bench/hotpath.sh [libember.so ...]      default: target/release/libember.so
#   EMBER_HOTPATH_ENV="EMBER_HOTPATH_METRICS=1 EMBER_HOTPATH_ACCESS_LOG=/tmp/a.log" bench/hotpath.sh
#   EMBER_HOTPATH_ENV="EMBER_HOTPATH_DISPATCH=auto" bench/hotpath.sh     (auto or pool dispatch)
#
# For each library: two runs, with N1 and N2 keep-alive GET / on one connection; the difference
# of the total instruction counts divided by N2 - N1 is the cost of one request (start-up and
# shutdown cancel out). The app uses only the oldest ABI (the new functions by weak reference),
# so an older library runs it too; LD_LIBRARY_PATH picks the library. Used to check that the
# access log and the metrics cost nothing when off (README, Observability).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N1=${N1:-500}
N2=${N2:-2500}
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
app="$build/hotpath_app"
cc -std=c99 -O2 -pthread -I"$root/include" -o "$app" "$root/bench/targets/hotpath_app.c" \
    -L"$root/target/release" -lember -pthread
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
libs=("$@")
[[ ${#libs[@]} -gt 0 ]] || libs=("$root/target/release/libember.so")

count() { # <lib> <requests> -> total Ir
    local lib="$1" n="$2" dir out port pid ir
    dir=$(mktemp -d)
    cp "$lib" "$dir/libember.so.0"
    out="$dir/callgrind.out"
    # shellcheck disable=SC2086
    env LD_LIBRARY_PATH="$dir" EMBER_DISPATCH=inline EMBER_WORKERS=1 ${EMBER_HOTPATH_ENV:-} \
        valgrind --tool=callgrind --callgrind-out-file="$out" "$app" 0 >"$dir/stdout" 2>"$dir/stderr" &
    pid=$!
    for _ in $(seq 600); do
        port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$dir/stdout" | head -n1)
        [[ -n "$port" ]] && break
        sleep 0.1
    done
    [[ -n "$port" ]] || { echo "the app did not start: $(tail -n 5 "$dir/stderr")" >&2; kill "$pid"; exit 1; }
    python3 - "$port" "$n" <<'EOF'
import http.client, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request("GET", "/")
    r = c.getresponse()
    assert r.status == 200 and r.read() == b'{"code": 1, "msg": "Hello WebAPI"}'
EOF
    kill -TERM "$pid"
    wait "$pid" || true
    ir=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out" | head -n1)
    [[ -n "$ir" ]] || ir=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$out" | head -n1)
    rm -rf "$dir"
    echo "$ir"
}

for lib in "${libs[@]}"; do
    a=$(count "$lib" "$N1")
    b=$(count "$lib" "$N2")
    echo "$lib: $(( (b - a) / (N2 - N1) )) instructions per request (${EMBER_HOTPATH_ENV:-defaults}; $a at $N1, $b at $N2)"
done
