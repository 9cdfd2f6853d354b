#!/usr/bin/env bash
# Every release artifact into dist/, with SHA-256 checksums.
#
#   scripts/release.sh           build everything and write dist/
#   scripts/release.sh --test    the same, then run every delivery test (CI does this):
#                                Windows under Wine, NuGet consume, wheel install, pkg-config
#                                install, the minimal library, sizes
#
# dist/ (version from Cargo.toml):
#   ember-<v>-linux-x86_64.tar.gz       include/ember.h, lib/libember.so.<v> (+ .so.0, .so links),
#                                       lib/libember.a, lib/pkgconfig/ember.pc  (a `make install` tree)
#   ember-<v>-linux-x86_64-minimal.tar.gz   the same for the HTTP/1.1-only library
#   ember-<v>-windows-x64.zip, ember-<v>-windows-x86.zip
#                                       ember.h, ember.dll, ember.dll.a (mingw), ember.def (MSVC: lib /def)
#   Ember.<v>.nupkg                     the NuGet package
#   ember-<v>-py3-none-manylinux_*.whl  the Python wheel
#   SHA256SUMS
#
# The Linux library in the tarball, the wheel and the NuGet package is the profile-guided
# build (scripts/pgo.sh, target/pgo/lib); EMBER_PGO=0 ships the plain `cargo build --release`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
test_too=0
[[ "${1:-}" == --test ]] && test_too=1
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
dist="$root/dist"
rm -rf "$dist" && mkdir -p "$dist"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# Each step says when it began (seconds since the script did): CI's time budget is watched.
step_t0=$(date +%s)
step() { printf '\n=== %s [+%ss] ===\n' "$*" "$(( $(date +%s) - step_t0 ))"; }

step "linux: full library (make install tree)"
cargo build --release -j2
pgo=0
if [[ "${EMBER_PGO:-1}" != 0 ]]; then
    pgo=1
    scripts/pgo.sh
    export EMBER_NATIVE_LIB="$root/target/pgo/lib/libember.so"
fi
make -s install PGO=$pgo PREFIX=/usr/local DESTDIR="$stage/full" >/dev/null
tar -C "$stage/full/usr/local" -czf "$dist/ember-$version-linux-x86_64.tar.gz" include lib

step "linux: minimal library"
cargo build -j2 --profile minimal --no-default-features --lib --target-dir target/minimal
mkdir -p "$stage/min/include" "$stage/min/lib/pkgconfig"
cp include/ember.h "$stage/min/include/"
cp target/minimal/minimal/libember.so "$stage/min/lib/libember.so.$version"
ln -s "libember.so.$version" "$stage/min/lib/libember.so.0"
ln -s libember.so.0 "$stage/min/lib/libember.so"
cp target/minimal/minimal/libember.a "$stage/min/lib/"
sed -e 's|@PREFIX@|/usr/local|' -e 's|@LIBDIR@|${prefix}/lib|' -e "s|@VERSION@|$version|" ember.pc.in > "$stage/min/lib/pkgconfig/ember.pc"
tar -C "$stage/min" -czf "$dist/ember-$version-linux-x86_64-minimal.tar.gz" include lib

step "windows: x64 and x86"
scripts/windows.sh build
for arch in x64 x86; do
    d="$stage/ember-$version-windows-$arch"
    mkdir -p "$d"
    cp include/ember.h target/windows/$arch/ember.dll target/windows/$arch/ember.dll.a target/windows/$arch/ember.def "$d/"
    (cd "$stage" && zip -q -X -r "$dist/ember-$version-windows-$arch.zip" "ember-$version-windows-$arch")
done

step "NuGet package"
scripts/nuget.sh pack
cp "target/nuget/Ember.$version.nupkg" "$dist/"

step "Python wheel"
scripts/wheel.sh build
cp target/wheel/ember-*.whl "$dist/"

(cd "$dist" && sha256sum -- * > SHA256SUMS)
step "dist/"
ls -l "$dist"
cat "$dist/SHA256SUMS"

if [[ $test_too -eq 1 ]]; then
    failed=()
    # The test suites ran on the plain build; the shipped one is optimised otherwise. The
    # app is linked against target/release: LD_LIBRARY_PATH comes first.
    step "test: conformance suite on the shipped library (C reference app, auto dispatch)"
    LD_LIBRARY_PATH="$(dirname "${EMBER_NATIVE_LIB:-$root/target/release/libember.so}")" EMBER_DISPATCH=auto \
        tests/run_conformance.sh samples/c/ember_ref -q 2>&1 | tail -n 3 || failed+=(conformance)
    step "test: C install with pkg-config"; scripts/test_install.sh || failed+=(install)
    step "test: minimal library"; scripts/test_minimal.sh || failed+=(minimal)
    step "test: Windows under Wine"; scripts/windows.sh || failed+=(windows)
    step "test: NuGet consume"; scripts/nuget.sh || failed+=(nuget)
    step "test: wheel installed in a fresh venv"; scripts/wheel.sh || failed+=(wheel)
    step "sizes"; bench/sizes.sh --check || failed+=(sizes)
    (cd "$dist" && sha256sum --quiet -c SHA256SUMS) || failed+=(checksums)
    if [[ ${#failed[@]} -gt 0 ]]; then
        echo "release tests FAILED: ${failed[*]}"
        exit 1
    fi
    echo "release tests: all passed"
fi
