#!/usr/bin/env bash
# Runs one fuzz target for N seconds with the options it needs (used by run_ci.sh and
# run_long.sh). The working corpus is fuzz/corpus/<target> (git-ignored); the committed
# seeds in fuzz/seeds/<target> are read too but never written.
#   fuzz/run_target.sh <target> <seconds> [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
t="$1"; seconds="$2"; shift 2
mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
# -timeout above the harnesses' own 30 s liveness waits, so a slow server is reported by
# them, with what they saw, rather than as a bare libFuzzer timeout.
opts=(-max_total_time="$seconds" -rss_limit_mb=3072 -timeout=75 -print_final_stats=1)
case "$t" in
  router) opts+=(-max_len=4096) ;;
  # The engine keeps process-wide state on purpose (the request registry, runtimes that
  # wind down after the input): LeakSanitizer's per-input check would only report those.
  # len_control=0: an op sequence needs length to reach deep states; no slow ramp-up.
  abi) opts+=(-max_len=2048 -len_control=0 -detect_leaks=0) ;;
  request_head) opts+=(-max_len=16384 -detect_leaks=0 -dict=fuzz/dict/http.dict) ;;
  ws_frames) opts+=(-max_len=8192 -detect_leaks=0) ;;
esac
seeds=()
[ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
# The seeds only as a read-only second corpus: libFuzzer adds new inputs to the first.
exec cargo +nightly fuzz run "$t" "fuzz/corpus/$t" "${seeds[@]}" -- "${opts[@]}" "$@"
