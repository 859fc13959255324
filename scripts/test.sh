#!/usr/bin/env bash
# Petrel's whole test suite, on a fresh machine:
#   1. installs what the tests need: the Python environment (PyIceberg, pyarrow, the ADBC
#      Flight SQL driver, pytest) and arrow-rs's `flight_sql_client` CLI;
#   2. runs every Rust test with nextest (unit, fixture corpus, PyIceberg-written tables,
#      merge-on-read, the Flight SQL server driven by the real binary);
#   3. runs the Python client tests (real ADBC driver, pyarrow.flight, the CLI) against the
#      `petrel` binary step 2 built.
# Extra arguments go to nextest. Exits non-zero if either runner failed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-python.sh

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "cargo-nextest is missing; installing it" >&2
    cargo install --locked cargo-nextest
fi

if [ -z "${PETREL_FLIGHT_SQL_CLIENT:-}" ]; then
    tools="$PWD/target/tools"
    if [ ! -x "$tools/bin/flight_sql_client" ]; then
        echo "installing arrow-rs's flight_sql_client CLI into $tools" >&2
        cargo install --locked --root "$tools" arrow-flight --version 58.4.1 \
            --features "cli flight-sql tls-ring" --bin flight_sql_client
    fi
    export PETREL_FLIGHT_SQL_CLIENT="$tools/bin/flight_sql_client"
fi

status=0
cargo nextest run --workspace --no-fail-fast "$@" || status=$?
PETREL_BIN="$PWD/target/debug/petrel" .venv/bin/python -m pytest server/tests/python -q -rs || status=$?
exit "$status"
