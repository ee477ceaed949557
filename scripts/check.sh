#!/usr/bin/env bash
# The whole check, as CI runs it (.ci/run calls this file) and as a developer runs it before a
# commit: formatting, lints, tests, docs, benchmark builds, and the Python package's wheel and
# test suite, and the Node package's addon and test suite. It installs what the tests need on a
# fresh Debian machine (redis-server, for the
# Redis tests; python3-venv, for the Python suite's virtualenv) when it is missing.
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

step "layers: no circle of imports across a crate's top-level modules, none from a layer above"
python3 scripts/layers.py crates/server/src
python3 scripts/layers.py crates/engine/src

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

# The Python package (python/): its wheel, built once under the test profile so that it reuses
# the dependencies the test build just compiled in target/, installed into a fresh virtualenv
# with pytest, Scrapy and Crawlee (its HTTP crawler with parsel; no browser) from PyPI, and its
# pytest suite. Exit status 5 (no tests collected) is a failure, and so is a skipped test
# (python/tests/conftest.py).
step "python: wheel (maturin, profile ci) in a fresh virtualenv, pytest"
venv=target/python-venv
rm -rf "$venv" target/python-wheels
if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    step "installing python3-venv (apt-get)"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$venv"
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check maturin pytest scrapy scrapy-redis \
    'crawlee[parsel]>=1,<2'
"$venv/bin/maturin" build --profile ci --manifest-path python/Cargo.toml \
    --interpreter "$venv/bin/python" --out target/python-wheels
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check target/python-wheels/urlseen-*.whl
"$venv/bin/urlseen" --version
pytest_status=0
"$venv/bin/python" -m pytest -p no:cacheprovider -q python/tests || pytest_status=$?
if [[ $pytest_status -eq 5 ]]; then
    echo "pytest collected no tests: the Python suite did not run" >&2
    exit 1
elif [[ $pytest_status -ne 0 ]]; then
    exit "$pytest_status"
fi

# The Node package (node/): its npm dependencies (Crawlee, from the npm registry, into
# node/node_modules: no global install), the addon built under the test profile so that it
# reuses what the test build compiled in target/, and its suite with node's test runner.
step "node: npm ci, addon (profile ci), node --test"
if ! command -v npm >/dev/null; then
    step "installing nodejs and npm (apt-get)"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
(cd node && npm ci --no-audit --no-fund --ignore-scripts && URLSEEN_CARGO_PROFILE=ci npm run build && npm test)

step "all checks passed"
