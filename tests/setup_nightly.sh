#!/usr/bin/env bash
# The nightly toolchain with rust-src: cargo-fuzz and -Zbuild-std (ThreadSanitizer) need them.
set -euo pipefail
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
rustup component list --toolchain nightly --installed | grep -q '^rust-src' || rustup component add rust-src --toolchain nightly
