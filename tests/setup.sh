#!/usr/bin/env bash
# Installs what the test suites need on a fresh Debian machine (idempotent, quiet).
set -euo pipefail

need=()
command -v curl >/dev/null || need+=(curl)
command -v gcc >/dev/null || need+=(gcc)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v mcs >/dev/null || need+=(mono-devel)
command -v valgrind >/dev/null || need+=(valgrind)
[ "${EMBER_SKIP_BENCH_TOOLS:-}" = 1 ] || command -v wrk >/dev/null || need+=(wrk)
command -v chromium >/dev/null || need+=(chromium)   # the conformance suite's browser test
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)   # the fleet test's balancer
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A mirror mid-sync fails one index file and update exits non-zero though the rest came:
  # retry, then install with what came (the install retries once after a fresh update).
  for i in 1 2 3 4 5; do apt-get update -qq && break; sleep 15; done
  apt-get install -y -qq "${need[@]}" >/dev/null ||
    { sleep 30; apt-get update -qq || true; apt-get install -y -qq "${need[@]}" >/dev/null; }
fi
# zstandard: decodes the zstd answers of tests/python/test_compression_zstd.py.
python3 -c 'import pytest, xdist, requests, httpx, h2, websockets.sync.client, zstandard' 2>/dev/null ||
  python3 -m pip install -q pytest pytest-xdist requests 'httpx[http2]' 'websockets>=13' zstandard
