#!/usr/bin/env bash
# Builds the engine, the C samples and the C tests, then runs the tests twice: plainly
# and under AddressSanitizer + UBSan. Exits non-zero if anything fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$root/target/c-tests"
total_pass=0
total_fail=0
broken=()

echo "== cargo build --release"
cargo build --release

echo "== samples/c"
make -C samples/c
# websocket_sample.py and the conformance files run below need these clients.
python3 -c 'import pytest, httpx, h2, websockets.asyncio.client' 2>/dev/null ||
  python3 -m pip install -q pytest 'httpx[http2]' 'websockets>=13'

# Runs one test program; its last line must be "N passed, N failed".
run_one() {
  local name="$1"; shift
  local log rc last
  log="$(mktemp)"
  set +e
  # The programs' own watchdog covers each test; this covers a hang at exit.
  timeout --kill-after=10 600 "$@" >"$log" 2>&1
  rc=$?
  set -e
  last="$(tail -n 1 "$log")"
  if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    total_pass=$((total_pass + BASH_REMATCH[1]))
    total_fail=$((total_fail + BASH_REMATCH[2]))
  else
    total_fail=$((total_fail + 1)) # crashed or hung before its summary
  fi
  if [[ $rc -ne 0 ]]; then
    broken+=("$name (exit $rc)")
    echo "---- $name: exit $rc"
    cat "$log"
  else
    echo "ok   $name: $last"
  fi
  rm -f "$log"
}

run_suite() {
  local variant="$1" dir="$out/$1"
  run_one "$variant/header_c99" "$dir/header_c99"
  run_one "$variant/header_cxx" "$dir/header_cxx"
  local t
  for t in test_abi test_lifecycle test_requests test_prepared test_dispatch test_races test_stop_load test_answer_edges test_lifetime_edges test_contract test_tls_observe test_front test_stream test_stream_end test_body test_ws; do
    run_one "$variant/$t" "$dir/$t"
  done
  run_one "$variant/test_ref_app" "$dir/test_ref_app" "$2"
  run_one "$variant/websocket_sample" python3 "$root/tests/c/websocket_sample.py" "$dir/websocket"
}

echo "== hello smoke test"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
samples/c/hello "$port" >/dev/null &
hello_pid=$!
reply=""
for _ in $(seq 50); do
  if reply="$(curl -s --max-time 2 "http://127.0.0.1:$port/")" && [[ -n "$reply" ]]; then break; fi
  sleep 0.1
done
kill "$hello_pid" 2>/dev/null || true
wait "$hello_pid" 2>/dev/null || true
if [[ "$reply" == "Hello from Ember" ]]; then
  echo "ok   hello: $reply"; total_pass=$((total_pass + 1))
else
  echo "---- hello: got '$reply'"; total_fail=$((total_fail + 1)); broken+=("hello")
fi

echo "== tests (plain)"
make -C tests/c OUT="$out/plain"
run_suite plain "$root/samples/c/ember_ref"

echo "== tests (AddressSanitizer + UBSan)"
make -C tests/c OUT="$out/asan" SANITIZE=1
for bin in test_abi test_lifecycle test_requests test_prepared test_dispatch test_races test_answer_edges test_lifetime_edges test_contract test_tls_observe test_front test_stream test_stream_end test_body test_ws \
           test_ref_app ember_ref websocket header_c99 header_cxx; do
  # The sanitizer must really be in there, or this half proves nothing.
  # (Captured first: grep -q closing the pipe early would trip pipefail.)
  libs="$(ldd "$out/asan/$bin")"
  syms="$(nm "$out/asan/$bin")"
  if [[ "$libs" != *libasan.so* || "$libs" != *libubsan.so* || "$syms" != *__asan_init* ]]; then
    echo "---- $bin is not linked with libasan/libubsan"; broken+=("asan link: $bin"); total_fail=$((total_fail + 1))
  fi
done
# And its runtime really starts (help=1 makes ASan list its flags at startup).
asan_help="$(ASAN_OPTIONS=help=1 "$out/asan/header_c99" 2>&1 || true)"
if [[ "$asan_help" != *"Available flags for AddressSanitizer"* ]]; then
  echo "---- ASan runtime did not start"; broken+=("asan runtime"); total_fail=$((total_fail + 1))
fi
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
run_suite asan "$out/asan/ember_ref"

# The streaming and WebSocket routes and the engine's front (static files, compression, output
# cache, CORS, filters) of the reference app under the sanitizers, through the conformance
# suite's real clients (memory growth is not asserted: ASan keeps freed memory). Auto (the
# default) runs handlers inline and stream events on the pool, so with inline it covers both.
for mode in auto inline; do
  echo "== conformance streaming/WebSocket/front files against the ASan ember_ref ($mode dispatch)"
  log="$(mktemp)"
  if EMBER_DISPATCH=$mode EMBER_CONFORMANCE_RSS=off EMBER_APP="$out/asan/ember_ref" timeout 900 python3 -m pytest -q \
       tests/conformance/test_sse.py tests/conformance/test_stream.py tests/conformance/test_upload.py \
       tests/conformance/test_websocket.py tests/conformance/test_ws_autobahn.py \
       tests/conformance/test_static_files.py tests/conformance/test_compression.py \
       tests/conformance/test_output_cache.py tests/conformance/test_cors_and_filters.py >"$log" 2>&1; then
    echo "ok   asan/conformance-streaming ($mode): $(tail -n 1 "$log")"
    total_pass=$((total_pass + 1))
  else
    echo "---- asan/conformance-streaming ($mode)"; cat "$log"
    broken+=("asan conformance-streaming ($mode)"); total_fail=$((total_fail + 1))
  fi
  rm -f "$log"
done
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "$total_pass passed, $total_fail failed"
if [[ ${#broken[@]} -gt 0 || $total_fail -gt 0 ]]; then
  printf 'failed: %s\n' "${broken[@]}"
  exit 1
fi
