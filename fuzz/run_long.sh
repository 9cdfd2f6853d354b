#!/usr/bin/env bash
# The long fuzz runs (a bench mode, not CI): each target for EMBER_FUZZ_LONG_SECONDS
# (default 1800 = 30 min), one after another, on one core each (-jobs is not used, so
# the numbers are comparable between runs). Results go to fuzz/results/long-runs.md
# (appended: date, commit, target, time, executions, coverage, corpus, outcome), which
# the README quotes. A crash stops that target, keeps its input in fuzz/artifacts/ and
# is recorded as such; the other targets still run.
#
#   fuzz/run_long.sh                      # all targets, 30 min each (about 1.5 hours)
#   EMBER_FUZZ_LONG_SECONDS=600 fuzz/run_long.sh abi
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${EMBER_FUZZ_LONG_SECONDS:-1800}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(router abi request_head ws_frames)
fuzz/setup.sh || exit 1
mkdir -p fuzz/results target
out=fuzz/results/long-runs.md
[ -f "$out" ] || printf '| date (UTC) | commit | target | seconds | executions | exec/s | coverage (edges) | corpus | outcome |\n|---|---|---|---|---|---|---|---|---|\n' >"$out"
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src fuzz/fuzz_targets || echo '+dirty')"
status=0
for t in "${targets[@]}"; do
  cargo +nightly fuzz build "$t" 2>&1 | tail -n 1
  log="target/fuzz-long-$t.log"
  start=$(date +%s)
  echo "== $t for ${seconds}s (log: $log)"
  fuzz/run_target.sh "$t" "$seconds" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+')
  corpus=$(ls "fuzz/corpus/$t" | wc -l)
  if [ $rc -eq 0 ]; then
    outcome="no crash"
  else
    status=1
    art=$(grep -oE 'fuzz/artifacts/[^ ]+' "$log" | head -n 1)
    why=$(grep -m1 -E 'panicked at|ERROR: (AddressSanitizer|libFuzzer)' "$log" | cut -c1-120)
    outcome="FAILED (exit $rc): ${why:-see log} ${art:+input $art}"
  fi
  row="| $(date -u '+%Y-%m-%d %H:%M') | $commit | $t | $took | ${execs:-?} | ${rate:-?} | ${cov:-?} | $corpus | $outcome |"
  echo "$row" | tee -a "$out"
done
exit $status
