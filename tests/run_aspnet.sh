#!/usr/bin/env bash
# The System.Web host and the OWIN server under Mono:
#  1. builds the engine (cargo build --release) and bindings/dotnet (Ember.dll, Ember.AspNet.dll,
#     EmberAspNet.exe);
#  2. runs tests/aspnet (pytest): the sample Web Forms site (samples/aspnet/site) under
#     EmberAspNet.exe through real clients, and the OWIN server tests;
#  3. runs the shared conformance suite against EmberAspNet.exe serving the same site, with the
#     reference app's limits, minus the checks listed (with their reasons) in
#     tests/aspnet/conformance_deselect.txt. (Pool dispatch only: the System.Web host always
#     uses it, because HttpRuntime blocks the thread that runs a request.)
# Usage: tests/run_aspnet.sh [pytest args for step 2]     Exit code non-zero if anything failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
failed=()

if ! command -v mcs >/dev/null 2>&1 && ! command -v csc >/dev/null 2>&1; then
    echo "== installing mono-devel"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q || true
    apt-get install -y -q mono-devel
fi
python3 -c 'import pytest, requests' 2>/dev/null || python3 -m pip install -q pytest requests

echo "== cargo build --release"
cargo build --release
echo "== bindings/dotnet (Ember.dll, Ember.AspNet.dll, EmberAspNet.exe)"
bindings/dotnet/build.sh

echo "== tests/aspnet"
if ! timeout 1200 python3 -m pytest tests/aspnet -q "$@"; then failed+=("tests/aspnet"); fi

if [[ $# -eq 0 ]]; then
    deselect=()
    while read -r line; do
        line="${line%%#*}"
        line="${line//[[:space:]]/}"
        [[ -n "$line" ]] && deselect+=(--deselect "$line")
    done < tests/aspnet/conformance_deselect.txt
    app="mono bindings/dotnet/bin/EmberAspNet.exe --root samples/aspnet/site --quiet"
    app+=" --max-body 1048576 --header-timeout 1000 --idle-timeout 5000 --handler-timeout 3000"
    app+=" --max-header-bytes 16384 --max-headers 100 --metrics /metrics"
    app+=" --warmup / --warmup /users/1 --warmup /inspect --warmup /slow?ms=0 --warmup /echo"
    echo "== conformance: EmberAspNet.exe + samples/aspnet/site"
    # EMBER_REFERENCE_ROOT=1: the sample's Global.asax answers GET / with the reference app's
    # hello body (everything else is the Web Forms application as shipped).
    # One worker: two hosts of the same site would share its ASP.NET compilation folder.
    if ! EMBER_REFERENCE_ROOT=1 EMBER_DISPATCH=pool EMBER_CONFORMANCE_JOBS=1 tests/run_conformance.sh "$app" -- -q "${deselect[@]}"; then
        failed+=("conformance")
    fi
fi

if [[ ${#failed[@]} -ne 0 ]]; then
    echo
    echo "ASP.NET/OWIN: FAILED: ${failed[*]}"
    exit 1
fi
echo
echo "ASP.NET/OWIN: all passed"
