#!/usr/bin/env bash
# Fuzz smoke for CI: builds the cargo-fuzz targets (nightly, ASan) and runs each for a
# short time from the committed seeds. Any crash, panic, leak of an invariant or hang
# (-timeout) fails the run; its input is left in fuzz/artifacts/<target>/.
#
#   fuzz/run_ci.sh                 # every target, EMBER_FUZZ_SECONDS each (default 60)
#   EMBER_FUZZ_SECONDS=10 fuzz/run_ci.sh router
#   fuzz/run_ci.sh --build-only    # only build (CI starts it early, in the background)
#
# Installs what it needs: the nightly toolchain (rustup) and cargo-fuzz (crates.io).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${EMBER_FUZZ_SECONDS:-60}"
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(router abi request_head ws_frames)

fuzz/setup.sh
mkdir -p target
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

echo "== building fuzz targets (nightly, AddressSanitizer)"
for t in "${targets[@]}"; do
  cargo +nightly fuzz build "$t" 2>&1 | tail -n 2
done

[ "$build_only" = 1 ] && exit 0

passed=0
failed=0
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${seconds}s"
  mkdir -p "fuzz/corpus/$t"
  if fuzz/run_target.sh "$t" "$seconds" >"target/fuzz-$t.log" 2>&1; then
    passed=$((passed + 1))
    grep -E "^#[0-9]+[[:space:]]+DONE" "target/fuzz-$t.log" | tail -n 1 || true
    echo "ok   fuzz $t"
  else
    failed=$((failed + 1))
    echo "---- fuzz $t FAILED; the end of its log:"
    tail -n 80 "target/fuzz-$t.log"
    ls -1 "fuzz/artifacts/$t" 2>/dev/null | sed 's/^/  input: fuzz\/artifacts\/'"$t"'\//' || true
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
