#!/usr/bin/env bash
# The nightly toolchain with rust-src: cargo-fuzz and -Zbuild-std (ThreadSanitizer) need them.
set -euo pipefail
grep -q '^nightly' <<<"$(rustup toolchain list)" || rustup toolchain install nightly --profile minimal
grep -q '^rust-src' <<<"$(rustup component list --toolchain nightly --installed)" || rustup component add rust-src --toolchain nightly
