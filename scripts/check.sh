#!/usr/bin/env bash
# The whole check, as CI runs it (.ci/run calls this file) and as a developer runs it before a
# commit: formatting, lints, tests, docs and benchmark builds. It installs what the tests need
# on a fresh Debian machine (redis-server, for the Redis tests) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain: $(cargo --version)"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt clippy

# The server's compatibility tests drive it with real clients: redis-cli (redis-tools) and
# redis-py; the Redis tests start their own redis-server instances on free ports.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    step "installing redis-server and redis-tools (apt-get)"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
if ! python3 -c 'import redis' 2>/dev/null; then
    step "installing redis-py (pip)"
    python3 -m pip install --quiet redis 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages redis
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "cargo test (profile ci: optimized, with debug assertions)"
cargo test --workspace --profile ci

step "cargo doc (-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# The benchmarks are built (and linked) under the test profile, reusing the test build: the same
# targets `cargo bench --no-run` would build, without a second, LTO-optimized build of the
# workspace that would add minutes to CI and check nothing more.
step "benches compile (profile ci)"
cargo build --workspace --benches --profile ci

step "all checks passed"
