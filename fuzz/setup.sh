#!/usr/bin/env bash
# Nightly with rust-src, and cargo-fuzz from crates.io.
set -euo pipefail
"$(dirname "$0")/../tests/setup_nightly.sh"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
