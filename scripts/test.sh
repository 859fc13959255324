#!/usr/bin/env bash
# Petrel's whole test suite, on a fresh machine: installs what the tests need (the Python
# environment with PyIceberg, pyarrow and the ADBC Flight SQL driver), then runs every Rust
# test (unit, fixture corpus, PyIceberg-written tables, Flight SQL integration) with nextest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-python.sh

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "cargo-nextest is missing; installing it" >&2
    cargo install --locked cargo-nextest
fi

# Debug builds, light debug info (see Cargo.toml's profiles); the corpus lives in ../shared.
exec cargo nextest run --workspace --no-fail-fast "$@"
