#!/usr/bin/env bash
# ThreadSanitizer (issue 12 item 2): the Rust unit and integration tests, and the C race
# tests (tests/c/test_races.c) against a TSan-instrumented libember. Nightly rustc with
# -Zsanitizer=thread and -Zbuild-std (std itself must be instrumented, or every Arc and
# channel in it looks like a race). The build is cached in target/tsan: the first one
# takes minutes, later ones only rebuild what changed.
#
# Any report not covered by tests/tsan.supp fails the run (each suppression says why it is
# not a race). Reports are kept in target/tsan/reports/.
#   tests/run_tsan.sh            # Rust tests, then the C race tests
#   tests/run_tsan.sh rust | c   # one half
#   tests/run_tsan.sh build      # only build (CI starts it early, in the background)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
what="${1:-all}"
tests/setup_nightly.sh

triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"
tdir="$root/target/tsan"
reports="$tdir/reports"
rm -rf "$reports" && mkdir -p "$reports"
export RUSTFLAGS="-Zsanitizer=thread"
export RUSTDOCFLAGS="-Zsanitizer=thread"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# Tests whose bound is a rate the debug TSan build cannot reach skip themselves on this.
export EMBER_TSAN=1
# halt_on_error=0: one run shows every report; the count decides. exitcode=66 tells a
# TSan failure from a test failure.
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 history_size=4 suppressions=$root/tests/tsan.supp log_path=$reports/tsan"
cargo_tsan() { cargo +nightly "$@" -Zbuild-std --target "$triple" --target-dir "$tdir"; }

if [ "$what" = build ]; then
  cargo_tsan test --lib --tests --no-run 2>&1 | tail -n 2
  cargo_tsan build --lib 2>&1 | tail -n 2
  exit 0
fi

fail=0
if [ "$what" = all ] || [ "$what" = rust ]; then
  echo "== TSan: cargo test (nightly, -Zbuild-std; first build takes a while)"
  # Two test threads: TSan's shadow memory and slowdown make more only slower here.
  # No backtraces: symbolizing one under TSan takes seconds, and a test whose handler
  # panics on purpose then waits past its client's timeout.
  if RUST_BACKTRACE=0 RUST_TEST_THREADS=2 cargo_tsan test --lib --tests >"$tdir/cargo-test.log" 2>&1; then
    grep -E '^(test result|     Running)' "$tdir/cargo-test.log" || true
  else
    grep -E '^(test result|     Running|test .* FAILED|error)|panicked' "$tdir/cargo-test.log" | head -n 60
    echo "---- TSan: cargo test failed (full output: $tdir/cargo-test.log)"
    fail=1
  fi
fi

if [ "$what" = all ] || [ "$what" = c ]; then
  echo "== TSan: C race tests against an instrumented libember"
  cargo_tsan build --lib 2>&1 | tail -n 2
  lib="$tdir/$triple/debug"
  out="$tdir/c"
  mkdir -p "$out"
  # gcc instruments the C side; the runtime is the one rustc ships (LLVM's), linked in
  # whole. gcc's own libtsan is too old for the Rust side: it lacks __tsan_memcpy and
  # friends. The engine comes in as the instrumented static library.
  rt="$(rustc +nightly --print sysroot)/lib/rustlib/$triple/lib/librustc-nightly_rt.tsan.a"
  flags=(-std=c99 -O1 -g -fsanitize=thread -pthread -Iinclude)
  gcc "${flags[@]}" -c tests/c/harness.c -o "$out/harness.o"
  gcc "${flags[@]}" -c tests/c/test_races.c -o "$out/test_races.o"
  g++ -o "$out/test_races" "$out/test_races.o" "$out/harness.o" "$lib/libember.a" \
    -Wl,--whole-archive "$rt" -Wl,--no-whole-archive -pthread -ldl -lm -lrt
  # (Captured first: grep -q closing the pipe early would trip pipefail.)
  syms="$(nm "$out/test_races")"
  [[ "$syms" == *" T __tsan_init"* ]] || { echo "---- test_races has no TSan runtime"; exit 1; }
  # The canary's deliberate race must be reported, or this half proves nothing.
  gcc "${flags[@]}" -c tests/c/tsan_canary.c -o "$out/tsan_canary.o"
  g++ -o "$out/tsan_canary" "$out/tsan_canary.o" "$lib/libember.a" \
    -Wl,--whole-archive "$rt" -Wl,--no-whole-archive -pthread -ldl -lm -lrt
  canary="$(TSAN_OPTIONS="exitcode=0" "$out/tsan_canary" 2>&1 || true)"
  if [[ "$canary" != *"WARNING: ThreadSanitizer: data race"* || "$canary" != *"bump"* ]]; then
    echo "---- TSan did not report the canary's race:"; echo "$canary" | head -n 20; exit 1
  fi
  echo "ok   TSan reports the canary's deliberate race"
  set +e
  timeout --kill-after=10 900 "$out/test_races" 2>&1 | tail -n 30
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "---- TSan: test_races exited $rc"
    fail=1
  fi
fi

n=$(cat "$reports"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
if [ "$n" -gt 0 ]; then
  echo "---- TSan: $n report(s); the first ones:"
  cat "$reports"/tsan.* | sed -n '/^WARNING: ThreadSanitizer/,/^SUMMARY/p' | head -n 150
  fail=1
fi
echo "tsan: $n unsuppressed report(s)"
[ "$fail" -eq 0 ]
