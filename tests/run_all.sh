#!/usr/bin/env bash
# Every test: Rust (unit + integration), C (plain and ASan/UBSan), the shared HTTP
# conformance suite against each host's reference app, descriptor exhaustion and valgrind
# on the C app, Python, .NET under Mono. (ThreadSanitizer and the fuzz smoke need nightly
# and long builds: .ci/run runs them, or tests/run_tsan.sh and fuzz/run_ci.sh.)
# Usage: tests/run_all.sh   (installs what it needs; see tests/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it began (seconds since the script did): CI's time budget is watched.
step_t0=$(date +%s)
step() { printf '\n=== %s [+%ss] ===\n' "$*" "$(( $(date +%s) - step_t0 ))"; }

step "setup"
tests/setup.sh

step "rust: cargo test"
cargo test --all-targets 2>&1 | tail -n 200

step "rust: brotli and zstd on the fly and the full MIME table (opt-in cargo features)"
cargo test --lib --features brotli,mime-db,zstd -- compress:: static_serve:: mime_types:: 2>&1 | tail -n 5
cargo test --features brotli,mime-db,zstd --test compression_zstd 2>&1 | tail -n 5
# The Python binding against that build's library (debug: built from the test build's
# dependencies, no second optimised link); EMBER_TEST_ZSTD=1 makes a library without zstd fail.
cargo build --features brotli,mime-db,zstd --lib 2>&1 | tail -n 2
EMBER_LIBRARY="$PWD/target/debug/libember.so" EMBER_TEST_ZSTD=1 PYTHONPATH="$PWD/bindings/python" \
  python3 -m pytest tests/python/test_compression_zstd.py -q -p no:cacheprovider 2>&1 | tail -n 3
# The C reference app (EMBER_COMPRESS_ZSTD from the header) on that library: the conformance
# files for compression and static files, with zstd among the codings it must negotiate.
cc -std=c99 -Wall -Wextra -Werror -O1 -pthread -Iinclude -o target/debug/ember_ref_zstd \
  samples/c/ember_ref.c samples/c/ref_slow.c samples/c/ref_fleet.c samples/c/ref_stream.c samples/c/ref_ws.c \
  samples/c/ref_front.c samples/c/sha256.c -Ltarget/debug -Wl,-rpath,"$PWD/target/debug" -lember
EMBER_COMPRESSION=gzip,br,zstd EMBER_CONFORMANCE_FILES="test_compression.py test_static_files.py" \
  tests/run_conformance.sh target/debug/ember_ref_zstd -q 2>&1 | tail -n 3

step "release build"
cargo build --release

step "C: samples, ABI tests, ASan/UBSan"
tests/run_c.sh

# Every host runs the whole suite in auto (the default) and pool dispatch, and its streaming,
# upload and WebSocket files in inline (CI time: README, the conformance suite).
step "conformance: C reference app (auto dispatch, the default)"
EMBER_DISPATCH=auto tests/run_conformance.sh samples/c/ember_ref
step "conformance: C reference app (pool dispatch)"
EMBER_DISPATCH=pool tests/run_conformance.sh samples/c/ember_ref
step "conformance: C reference app (inline dispatch, streaming files)"
EMBER_DISPATCH=inline EMBER_CONFORMANCE_FILES=streaming tests/run_conformance.sh samples/c/ember_ref

step "resource exhaustion: C reference app under ulimit -n 256, 1,000 clients"
tests/run_exhaustion.sh

step "hostile clients: HTTP/2 floods, slowloris, slow reader, header bombs, never-answered requests"
tests/run_hostile.sh

step "soak smoke (20 s): mixed requests against the C reference app, RSS growth checked"
bench/soak/soak.py --app samples/c/ember_ref --seconds 20

step "valgrind memcheck: C reference app through the conformance suite"
tests/run_valgrind.sh

step "python: binding tests + conformance"
tests/run_python.sh

step ".NET (Mono): binding tests + conformance"
tests/run_dotnet.sh

step "ASP.NET host (System.Web) and OWIN: sample site + conformance"
tests/run_aspnet.sh

step "fleet: SIGTERM on each host's app; nginx in front of the C, Python and .NET apps (SIGKILL, rolling restart)"
tests/run_fleet.sh

echo
echo "all test suites passed"
