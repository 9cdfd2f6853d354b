#!/usr/bin/env bash
# The soak at full size (issue 12 item 5), a bench mode: bench/soak/soak.py against each
# host's reference app in turn, each until SOAK_REQUESTS requests (default 10,000,000) or
# SOAK_SECONDS seconds (default: no bound), whichever comes first; then bench/soak/plot.py
# draws bench/results/soak.png and writes bench/results/soak.md from every
# bench/results/soak-*.json.
#
#   bench/soak/run.sh                       # every host: C, Python, .NET inline, .NET pool
#   SOAK_SECONDS=900 bench/soak/run.sh net-inline c
#
# Hosts: c, c-inline, py, py-inline, net-inline, net-pool (SOAK_NET_APP overrides the .NET
# command, e.g. a copy of samples/dotnet while it is rebuilt). Client load: SOAK_PROCS client
# processes (default 2) with SOAK_CLIENTS threads each (default 8). No bench lock is taken
# (a soak measures correctness and memory, not speed); run it at `nice -n 10` on a shared
# machine. At ~3,000-5,000 requests/s (the Python clients are the limit), 10 million
# requests take 35-55 minutes per host.
set -uo pipefail
cd "$(dirname "$0")/../.."
requests="${SOAK_REQUESTS:-10000000}"
seconds=()
[ -n "${SOAK_SECONDS:-}" ] && seconds=(--seconds "$SOAK_SECONDS")
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(c py net-inline net-pool)
mkdir -p bench/results
status=0
for h in "${hosts[@]}"; do
  case "$h" in
    c) app=samples/c/ember_ref; dispatch=pool ;;
    c-inline) app=samples/c/ember_ref; dispatch=inline ;;
    py) app="python3 samples/python/ember_ref.py"; dispatch=pool ;;
    py-inline) app="python3 samples/python/ember_ref.py"; dispatch=inline ;;
    net-inline) app="${SOAK_NET_APP:-mono samples/dotnet/EmberRef.exe}"; dispatch=inline ;;
    net-pool) app="${SOAK_NET_APP:-mono samples/dotnet/EmberRef.exe}"; dispatch=pool ;;
    *) echo "unknown host $h" >&2; exit 2 ;;
  esac
  echo "== soak $h ($app, $dispatch): up to $requests requests ${SOAK_SECONDS:+or ${SOAK_SECONDS}s}"
  EMBER_DISPATCH=$dispatch python3 bench/soak/soak.py --app "$app" --requests "$requests" "${seconds[@]}" \
    --procs "${SOAK_PROCS:-2}" --clients "${SOAK_CLIENTS:-8}" --out "bench/results/soak-$h" || status=1
done
plot_py=bench/.venv/bin/python
[ -x "$plot_py" ] && "$plot_py" -c 'import matplotlib' 2>/dev/null || plot_py=python3
"$plot_py" bench/soak/plot.py || status=1
exit $status
