#!/usr/bin/env bash
# vendor/tokio: tokio from crates.io with one patch of Ember's (vendor/tokio-notify-limit.patch).
# Auto dispatch keeps a spare I/O worker for handlers that block; stock tokio wakes every
# parked worker it has work for, so the spare ran beside the others all the time. The patch
# adds `Handle::set_notify_limit`, which caps how many workers notifications keep awake; the
# auto dispatch monitor (src/sysmon.rs) lifts the cap only while a handler is stuck.
#
#   scripts/vendor_tokio.sh           rebuild vendor/tokio from the .crate and the patch
#   scripts/vendor_tokio.sh --check   fail if vendor/tokio differs from the .crate + the patch
#
# To move to a new tokio: set VERSION and SHA256 (crates.io's checksum, as in a Cargo.lock
# that uses it), run this script, fix the patch if it no longer applies, and re-run the tests
# and bench/dispatch_ab.py.
set -euo pipefail
VERSION=1.54.1
SHA256=b52fd3255258d26fac7264ab5a76b53c13367136dc011d3d6ad4f8ed070396a3
root=$(cd "$(dirname "$0")/.." && pwd)
patch_file="$root/vendor/tokio-notify-limit.patch"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

crate="$tmp/tokio-$VERSION.crate"
cached=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"tokio-$VERSION.crate" 2>/dev/null | head -1 || true)
if [ -n "$cached" ]; then
    cp "$cached" "$crate"
else
    curl -sSfL --retry 3 -o "$crate" "https://static.crates.io/crates/tokio/tokio-$VERSION.crate"
fi
echo "$SHA256  $crate" | sha256sum -c --quiet -

tar xzf "$crate" -C "$tmp"
src="$tmp/tokio-$VERSION"
# Only what building the library reads: not tokio's tests (1.6 MB) nor their [[test]]
# entries, nor its changelog and packaging leftovers.
rm -rf "$src/tests" "$src/CHANGELOG.md" "$src/Cargo.toml.orig" "$src/Cargo.lock" "$src/.cargo_vcs_info.json"
python3 - "$src/Cargo.toml" <<'PY'
import re, sys
p = sys.argv[1]
text = open(p).read()
# Drop every [[test]] / [[bench]] table: each runs to the next table header.
text = re.sub(r"^\[\[(test|bench)\]\]\n(?:(?!\[).*\n)*", "", text, flags=re.M)
open(p, "w").write(text)
PY
(cd "$src" && patch -s -p1 --no-backup-if-mismatch < "$patch_file")

if [ "${1:-}" = "--check" ]; then
    if ! diff -r "$src" "$root/vendor/tokio" >"$tmp/diff"; then
        head -50 "$tmp/diff"
        echo "vendor/tokio differs from tokio $VERSION + $(basename "$patch_file"): run scripts/vendor_tokio.sh" >&2
        exit 1
    fi
    echo "vendor/tokio = tokio $VERSION (sha256 checked) + $(basename "$patch_file")"
else
    rm -rf "$root/vendor/tokio"
    mv "$src" "$root/vendor/tokio"
    echo "vendor/tokio rebuilt: tokio $VERSION + $(basename "$patch_file")"
fi
