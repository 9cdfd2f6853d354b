#!/usr/bin/env bash
# The soak at full size (issue 12 item 5), a bench mode: bench/soak/soak.py against each
# host's reference app in turn, each until SOAK_REQUESTS requests (default 10,000,000) or
# SOAK_SECONDS seconds (default: no bound), whichever comes first; then bench/soak/plot.py
# draws bench/results/soak.png and writes bench/results/soak.md from every
# bench/results/soak-*.json.
#
#   bench/soak/run.sh                       # C, Python, .NET (auto dispatch, the default), .NET pool
#   SOAK_SECONDS=900 bench/soak/run.sh net-inline c
#
# Hosts: c, py, net (the default dispatch, auto), c-pool, py-pool, net-pool, c-inline,
# py-inline, net-inline (SOAK_NET_APP overrides the .NET command, e.g. a copy of samples/dotnet
# while it is rebuilt). Client: bench-soak (bench/soak_client.rs; `cargo build --release` first),
# SOAK_PROCS processes (default 1) of SOAK_CLIENTS connections (default 32); it checks every
# answer's status and body. The app is not pinned. On a shared machine run each host under the
# bench lock (the client loads both cores): `flock /work/wt/bench.lock bench/soak/run.sh c`.
# At 10,000-20,000 requests/s, 10 million requests take 8-17 minutes per host.
set -uo pipefail
cd "$(dirname "$0")/../.."
requests="${SOAK_REQUESTS:-10000000}"
seconds=()
[ -n "${SOAK_SECONDS:-}" ] && seconds=(--seconds "$SOAK_SECONDS")
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(c py net net-pool)
mkdir -p bench/results
status=0
net_app="${SOAK_NET_APP:-mono samples/dotnet/EmberRef.exe}"
for h in "${hosts[@]}"; do
  case "$h" in
    c|c-pool|c-inline) app=samples/c/ember_ref ;;
    py|py-pool|py-inline) app="python3 samples/python/ember_ref.py" ;;
    net|net-pool|net-inline) app="$net_app" ;;
    *) echo "unknown host $h" >&2; exit 2 ;;
  esac
  case "$h" in
    *-pool) dispatch=pool ;;
    *-inline) dispatch=inline ;;
    *) dispatch=auto ;;
  esac
  echo "== soak $h ($app, $dispatch): up to $requests requests ${SOAK_SECONDS:+or ${SOAK_SECONDS}s}"
  EMBER_DISPATCH=$dispatch python3 bench/soak/soak.py --app "$app" --requests "$requests" "${seconds[@]}" \
    --procs "${SOAK_PROCS:-1}" ${SOAK_CLIENTS:+--clients "$SOAK_CLIENTS"} --out "bench/results/soak-$h" || status=1
done
plot_py=bench/.venv/bin/python
[ -x "$plot_py" ] && "$plot_py" -c 'import matplotlib' 2>/dev/null || plot_py=python3
"$plot_py" bench/soak/plot.py || status=1
exit $status
