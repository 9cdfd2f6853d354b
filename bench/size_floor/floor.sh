#!/usr/bin/env bash
# Stripped bytes of the size floor (bench/size_floor): tokio + hyper http1 + hyper-util, one
# extern "C" start function with catch_unwind, ember's `minimal` profile settings (opt-level z,
# fat LTO, one codegen unit, panic = unwind, strip). Multi-thread and current-thread runtimes,
# stable, and nightly with std rebuilt for size (the flags bench/sizes.sh uses for the minimal
# library, plus optimize_for_size). Each library is also started and asked for one answer.
#   bench/size_floor/floor.sh            all builds
#   FLOOR_NIGHTLY=0 bench/size_floor/floor.sh   stable only
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
tgt="${FLOOR_TARGET_DIR:-$here/../../target/size_floor}"
triple=x86_64-unknown-linux-gnu
check() { # <lib dir> : the library answers one request
    local dir="$1" app log pid port body
    app="$dir/floor_app"; log="$(mktemp)"
    cc -O2 -o "$app" floor.c -L"$dir" -Wl,-rpath,"$dir" -lember_floor
    "$app" >"$log" & pid=$!
    for _ in $(seq 50); do port="$(sed -n 's#^listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$log")"; [[ -n "$port" ]] && break; sleep 0.1; done
    body="$(curl -s --max-time 5 "http://127.0.0.1:$port/x" || true)"
    kill "$pid"; wait "$pid" 2>/dev/null || true; rm -f "$log"
    [[ "$body" == hello ]] && echo "serves" || echo "DOES NOT SERVE ($body)"
}
row() { # <label> <lib dir>
    local so="$2/libember_floor.so"
    printf '%-58s %9d bytes  %s\n' "$1" "$(stat -c %s "$so")" "$(check "$2")"
}
for rt in multi current; do
    feats=(); [[ $rt == current ]] && feats=(--no-default-features)
    cargo build -q -j2 --release "${feats[@]}" --target-dir "$tgt/stable-$rt"
    row "stable, $rt-thread runtime" "$tgt/stable-$rt/release"
    if [[ "${FLOOR_NIGHTLY:-1}" != 0 ]]; then
        RUSTFLAGS="-Zlocation-detail=none" cargo +nightly build -q -j2 \
            -Z build-std=std,panic_unwind -Z build-std-features=optimize_for_size --target $triple \
            --release "${feats[@]}" --target-dir "$tgt/nightly-$rt"
        row "nightly build-std (optimize_for_size), $rt-thread runtime" "$tgt/nightly-$rt/$triple/release"
    fi
done
