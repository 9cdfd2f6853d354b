#!/usr/bin/env bash
# Stripped size of every Ember build, side by side, into bench/results/sizes.md.
# Sizes are not timings: this may run on a busy machine and in CI.
#
#   bench/sizes.sh            build what is missing, measure, write bench/results/sizes.md
#                             (also one release build per cargo feature, and the crates and
#                             features that weigh in the full and the minimal library:
#                             bench/size_crates.py on unstripped builds)
#   bench/sizes.sh --check    CI: skip the nightly, per-feature and symbol builds, write
#                             target/sizes.md instead, and fail if the full library passes
#                             3.75 MiB or the minimal one 1.38 MiB (regression guards over
#                             today's sizes; the goals are missed, see README, Size)
#
# Builds (each stripped by its Cargo profile; `strip = true`):
#   full     cargo build --release                                       (default features)
#   minimal  cargo build --profile minimal --no-default-features          (HTTP/1.1 only, opt-level z)
#   minimal, nightly std  the same with `-Z build-std` (std rebuilt for size, no backtrace
#            symbolizer, no panic location strings, packed relocations; still panic = "unwind")
#   per feature  cargo build --release --no-default-features --features <f>   (release profile)
#   ember.dll x64 / x86 (scripts/windows.sh build), the managed Ember.dll, bare hyper.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
check=0
[[ "${1:-}" == --check ]] && check=1
out="bench/results/sizes.md"
[[ $check -eq 1 ]] && out="target/sizes.md"
mkdir -p bench/results target

[[ -f target/release/libember.so && -f target/release/bench-hyper ]] || cargo build --release -j2
cargo build -j2 --profile minimal --no-default-features --lib --target-dir target/minimal
minimal_so=target/minimal/minimal/libember.so

nightly_so=""
if [[ $check -eq 0 ]] && rustup run nightly rustc --version >/dev/null 2>&1 &&
   grep -q '^rust-src' <<<"$(rustup component list --toolchain nightly --installed 2>/dev/null)"; then
    RUSTFLAGS="-Zlocation-detail=none -C link-arg=-Wl,-z,pack-relative-relocs" \
        cargo +nightly build -j2 -Z build-std=std,panic_unwind -Z build-std-features= \
        --target x86_64-unknown-linux-gnu --profile minimal --no-default-features --lib \
        --target-dir target/minimal-nightly
    nightly_so=target/minimal-nightly/x86_64-unknown-linux-gnu/minimal/libember.so
fi
[[ -f target/windows/x64/ember.dll && -f target/windows/x86/ember.dll ]] || scripts/windows.sh build
[[ -f bindings/dotnet/bin/Ember.dll ]] || bindings/dotnet/build.sh >/dev/null

size_of() { stat -c %s "$1"; }
# Confirms a file carries no symbol table (what `strip` would remove).
stripped() {
    case "$1" in
        *.so) if readelf -S "$1" | grep -q '\.symtab'; then echo "no"; else echo "yes"; fi ;;
        *) echo "yes" ;;
    esac
}
kb() { awk -v b="$1" 'BEGIN { printf "%.0f KB", b / 1024 }'; }

full=$(size_of target/release/libember.so)
minimal=$(size_of "$minimal_so")
rows=()
row() { rows+=("| $1 | $(kb "$2") | $2 | $3 |"); }
row "libember.so, full (default features: HTTP/1.1 + HTTP/2, TLS, WebSocket, static files, gzip), release" "$full" "stripped: $(stripped target/release/libember.so)"
if [[ -f target/pgo/lib/libember.so ]]; then
    row "libember.so, full, profile-guided (scripts/pgo.sh: what dist/ ships)" "$(size_of target/pgo/lib/libember.so)" "stripped: $(stripped target/pgo/lib/libember.so)"
fi
if [[ $check -eq 0 ]]; then
    cargo build -j2 --release --no-default-features --features http2,ws,static,gzip,crossbeam --lib --target-dir target/notls
    row "libember.so, full without TLS (\`--no-default-features --features http2,ws,static,gzip,crossbeam\`)" "$(size_of target/notls/release/libember.so)" "stripped: yes"
fi
row "libember.so, minimal (HTTP/1.1 only: no HTTP/2, TLS, WebSocket, static files, compression), \`--profile minimal --no-default-features\`" "$minimal" "stripped: $(stripped "$minimal_so"); stable toolchain"
if [[ -n "$nightly_so" ]]; then
    nightly=$(size_of "$nightly_so")
    row "libember.so, minimal, nightly \`-Z build-std\` (std for size)" "$nightly" "stripped: $(stripped "$nightly_so"); needs glibc 2.36 (packed relocations)"
fi
# What each cargo feature adds: the release profile with that feature alone, against none.
feature_rows=()
if [[ $check -eq 0 ]]; then
    base=""
    for f in none http2 tls ws static gzip crossbeam brotli zstd mime-db; do
        args=(--no-default-features)
        [[ $f != none ]] && args+=(--features "$f")
        cargo build -j2 --release "${args[@]}" --lib --target-dir target/features
        b=$(size_of target/features/release/libember.so)
        [[ $f == none ]] && base=$b
        feature_rows+=("| \`$f\` | $b | $( [[ $f == none ]] && echo — || echo "+$((b - base))" ) |")
    done
fi
row "ember.dll x64 (full, x86_64-pc-windows-gnu)" "$(size_of target/windows/x64/ember.dll)" "stripped by the profile"
row "ember.dll x86 (full, i686-pc-windows-gnu)" "$(size_of target/windows/x86/ember.dll)" "stripped by the profile"
row "Ember.dll, the managed .NET binding" "$(size_of bindings/dotnet/bin/Ember.dll)" "IL; needs the native engine beside it"
row "bare hyper hello server (bench/hyper_hello.rs), executable" "$(size_of target/release/bench-hyper)" "same profile; tokio + hyper http1, no FFI"
row "PicoServer.dll (quoted, not measured here)" "51200" "a managed layer over the .NET runtime's HttpListener"

# Which crates weigh: the symbol tables of unstripped builds of the same two libraries
# (bench/size_crates.py; stripping them gives the bytes above).
bloat_full=""
bloat_min=""
if [[ $check -eq 0 ]]; then
    CARGO_PROFILE_RELEASE_STRIP=false cargo build -j2 --release --lib --target-dir target/symbols
    CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_MINIMAL_STRIP=false cargo build -j2 \
        --profile minimal --no-default-features --lib --target-dir target/symbols
    bloat_full=$(python3 bench/size_crates.py target/symbols/release/libember.so 30)
    bloat_min=$(python3 bench/size_crates.py target/symbols/minimal/libember.so 30)
fi

# The floor: tokio + hyper http1 + hyper-util and one catch_unwind C entry, built like the
# minimal library (bench/size_floor/floor.sh): what no engine on this stack gets under.
floor=""
if [[ $check -eq 0 ]]; then
    floor=$(FLOOR_NIGHTLY=$([[ -n "$nightly_so" ]] && echo 1 || echo 0) bench/size_floor/floor.sh)
fi

{
    echo "# Binary sizes"
    echo
    echo "Written by \`bench/sizes.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit \`$(git rev-parse --short HEAD)\`,"
    echo "$(rustc --version). Sizes in bytes of the files as built (each profile strips)."
    echo
    echo "| build | size | bytes | note |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Goals (issue 14): full ≤ 2.5 MB, minimal ≤ 600 KB. Full: $(kb "$full") ($( [[ $full -le 2621440 ]] && echo met || echo missed ))."
    echo "Minimal: $(kb "$minimal") on stable$( [[ -n "$nightly_so" ]] && echo ", $(kb "$nightly") with nightly build-std" )"
    echo "($( [[ $minimal -le 614400 || ( -n "$nightly_so" && ${nightly:-999999999} -le 614400 ) ]] && echo met || echo "missed: see README, Size" ))."
    echo
    if [[ -n "$floor" ]]; then
        echo "## The floor (bench/size_floor: tokio + hyper http1 + hyper-util, one C entry, the minimal profile's settings)"
        echo
        echo '```'
        echo "$floor"
        echo '```'
        echo
    fi
    if [[ ${#feature_rows[@]} -gt 0 ]]; then
        echo "## Each cargo feature alone (release profile, \`--no-default-features --features <f>\`)"
        echo
        echo "| feature | bytes | over none |"
        echo "|---|---|---|"
        printf '%s\n' "${feature_rows[@]}"
        echo
        echo "Features together cost a little less than the sum (std, tokio and hyper code they share)."
        echo
    fi
    if [[ -n "$bloat_full" ]]; then
        echo "## Where the bytes go (bench/size_crates.py: symbols of unstripped builds, by crate and feature)"
        echo
        echo "Full (\`CARGO_PROFILE_RELEASE_STRIP=false cargo build --release\`):"
        echo
        echo '```'
        echo "$bloat_full"
        echo '```'
        echo
        echo "Minimal (the same, \`--profile minimal --no-default-features\`):"
        echo
        echo '```'
        echo "$bloat_min"
        echo '```'
        echo
    fi
    echo "PicoServer's DLL is tens of KB because the HTTP server it wraps (HttpListener) is part of the"
    echo ".NET runtime; Ember's managed Ember.dll is the comparable file, and the native engine carries"
    echo "its own HTTP/1.1 and HTTP/2 stack, tokio and the Rust standard library."
} > "$out"
cat "$out"

if [[ $check -eq 1 ]]; then
    # The goal (2.5 MB) is reported above; what fails CI is growth past where TLS and the
    # per-crate opt-levels of Cargo.toml put it (3,728,256 bytes on 2026-12-03), plus the
    # 2026-12-04 work (prepared answers, the front's early answers with foldhash, per-thread
    # reuse in the engine: 3,795,696 bytes, +0.8 %) and rustls back at opt-level 3 for the TLS
    # keep-alive path (3,858,408 bytes), with ~2 % room above that.
    [[ $full -le 3932160 ]] || { echo "sizes: full library $full bytes > 3.75 MiB"; exit 1; }
    # The minimal library without WebSocket, static files and compression: 1,457,744 bytes
    # on 2026-12-03 (1,708,416 when they were always in), 1,498,976 on main ee81460 and
    # 1,415,992 without crossbeam-channel (2026-12-05, the `crossbeam` feature off), with ~2 %
    # room above that.
    [[ $minimal -le 1447035 ]] || { echo "sizes: minimal library $minimal bytes > 1.38 MiB"; exit 1; }
fi
