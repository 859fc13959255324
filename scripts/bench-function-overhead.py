#!/usr/bin/env python3
"""What Petrel's guards on functions and operators cost: two Petrel binaries on the same
queries, alternated, in one run.

    .venv/bin/python scripts/bench-function-overhead.py <baseline binary> <binary> [--rounds 4]
    .venv/bin/python scripts/bench-function-overhead.py <baseline> <binary> --queries arithmetic \
        --warehouse ~/.cache/petrel/bench-vs-duckdb/warehouse
    .venv/bin/python scripts/bench-function-overhead.py <baseline> <binary> --queries copies \
        --warehouse ~/.cache/petrel/bench-vs-duckdb/warehouse
    .venv/bin/python scripts/bench-function-overhead.py <baseline> <binary> --queries averages

Each round starts both binaries in turn (the first one first in odd rounds, the other in even
rounds, so both see the same machine load) on an empty embedded warehouse, and runs each query
six times over one ADBC connection (the first run is a warm-up).

`--queries functions` (the default; bounded function outputs, `output_limits/`) needs no tables
(`generate_series`):

- `||`: `sum(length(CAST(v AS VARCHAR) || 'abc' || CAST(v AS VARCHAR)))` over 5,000,000 rows
  (two bounded `petrel_string_concat` calls per batch);
- `upper(replace(…))` over 5,000,000 rows (two bounded calls with one-value arguments);
- `sum(v)` over 20,000,000 rows (no function: the fixed cost of the rules and guards).

`--queries arithmetic` (checked `+`, `-`, `*` and sums, `checked_arithmetic/`, `checked_sum.rs`)
runs on the `plain` table of `scripts/bench-vs-duckdb.py` (5,000,000 rows; `--warehouse` is its
warehouse directory, served as catalog `iceberg`):

- `sum(v * 3 + 1)` over 20,000,000 rows of `generate_series` (BIGINT arithmetic and sum);
- `sum(l_orderkey)` (a BIGINT column's sum, no arithmetic);
- TPC-H Q1's decimal sums `sum(l_extendedprice * (1 - l_discount))` and
  `sum(l_extendedprice * (1 - l_discount) * (1 + l_tax))`.

`--queries copies` (the guards on the inputs of joins, windows and `unnest`,
`output_limits/copy_guard.rs`) runs on the same `plain` table, with its strings going through
each operator:

- a hash join of all 5,000,000 rows (probe side, `l_comment` and `l_shipmode`) with a tenth of
  them (build side, `l_comment`);
- `lag(l_comment)` over a quarter of the rows, partitioned by `l_shipmode`;
- `unnest` of a two-element list beside `l_comment` (10,000,000 rows out).

`--queries averages` (checked decimal `avg` and `sum(DISTINCT …)`, `checked_avg.rs`,
`checked_sum.rs`) needs no tables:

- TPC-H Q1's shape of decimal averages: `avg` of two decimal columns in 4 groups, over
  20,000,000 rows of `generate_series` (the grouped accumulator);
- the same averages without groups (the per-batch sums);
- two `sum(DISTINCT …)` of BIGINTs (100,000 and 70,000 distinct values) over 5,000,000 rows:
  two distinct arguments, so DataFusion keeps its distinct accumulators.

It prints each query's median wall time per binary and the ratio (binary ÷ baseline).
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import adbc_driver_flightsql.dbapi as flight_sql

FUNCTIONS = [
    (
        "||",
        "SELECT sum(length(CAST(v AS VARCHAR) || 'abc' || CAST(v AS VARCHAR))) "
        "FROM generate_series(1, 5000000) t(v)",
    ),
    (
        "upper(replace())",
        "SELECT sum(length(upper(replace(CAST(v AS VARCHAR), '1', 'one')))) "
        "FROM generate_series(1, 5000000) t(v)",
    ),
    ("sum(v)", "SELECT sum(v) FROM generate_series(1, 20000000) t(v)"),
]

ARITHMETIC = [
    ("sum(v * 3 + 1)", "SELECT sum(v * 3 + 1) FROM generate_series(1, 20000000) t(v)"),
    ("sum(l_orderkey)", "SELECT sum(l_orderkey) FROM iceberg.db.plain"),
    (
        "Q1 decimal sums",
        "SELECT sum(l_extendedprice * (1 - l_discount)), "
        "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) FROM iceberg.db.plain",
    ),
]

COPIES = [
    (
        "hash join",
        "SELECT count(*), max(b.l_comment), max(a.l_comment), max(a.l_shipmode) "
        "FROM iceberg.db.plain a JOIN (SELECT l_orderkey, l_linenumber, l_comment "
        "FROM iceberg.db.plain WHERE l_orderkey % 10 = 0) b "
        "ON a.l_orderkey = b.l_orderkey AND a.l_linenumber = b.l_linenumber",
    ),
    (
        "window lag",
        "SELECT count(c) FROM (SELECT lag(l_comment) OVER (PARTITION BY l_shipmode "
        "ORDER BY l_orderkey, l_linenumber) c FROM iceberg.db.plain WHERE l_orderkey % 4 = 0)",
    ),
    (
        "unnest",
        "SELECT count(*), max(l_comment), sum(e) FROM "
        "(SELECT unnest([1, 2]) e, l_comment FROM iceberg.db.plain)",
    ),
]

AVERAGES = [
    (
        "grouped decimal avg",
        "SELECT g, avg(p), avg(q) FROM (SELECT v % 4 g, CAST(v AS DECIMAL(15,2)) p, "
        "CAST(v % 50 AS DECIMAL(15,2)) q FROM generate_series(1, 20000000) t(v)) GROUP BY g",
    ),
    (
        "decimal avg",
        "SELECT avg(p), avg(q) FROM (SELECT CAST(v AS DECIMAL(15,2)) p, "
        "CAST(v % 50 AS DECIMAL(15,2)) q FROM generate_series(1, 20000000) t(v))",
    ),
    (
        "sum(DISTINCT) x2",
        "SELECT sum(DISTINCT v % 100000), sum(DISTINCT v % 70000) "
        "FROM generate_series(1, 5000000) t(v)",
    ),
]

QUERY_SETS = {
    "functions": FUNCTIONS,
    "arithmetic": ARITHMETIC,
    "copies": COPIES,
    "averages": AVERAGES,
}


def run(binary, port, data_dir, warehouse, queries):
    """Each query's timed runs (seconds) on a fresh server of `binary`."""
    tables = ["--warehouse", warehouse] if warehouse else []
    server = subprocess.Popen(
        [binary, "--bind", f"127.0.0.1:{port}", "--data-dir", data_dir, *tables],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                conn = flight_sql.connect(f"grpc://127.0.0.1:{port}")
                conn.cursor().execute("SELECT 1")
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        times = {}
        for name, sql in queries:
            runs = []
            for _ in range(6):
                started = time.perf_counter()
                cursor = conn.cursor()
                cursor.execute(sql)
                cursor.fetch_arrow_table()
                runs.append(time.perf_counter() - started)
            times[name] = runs[1:]
        conn.close()
        return times
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline")
    parser.add_argument("binary")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--port", type=int, default=50095)
    parser.add_argument("--queries", choices=sorted(QUERY_SETS), default="functions")
    parser.add_argument(
        "--warehouse", help="the bench tables' warehouse (for `arithmetic` and `copies`)"
    )
    args = parser.parse_args()
    queries = QUERY_SETS[args.queries]
    if args.queries in ("arithmetic", "copies") and not args.warehouse:
        parser.error(f"--queries {args.queries} needs --warehouse (scripts/bench-vs-duckdb.py's)")
    results = {label: {name: [] for name, _ in queries} for label in ("baseline", "binary")}
    with tempfile.TemporaryDirectory() as data_dir:
        for round_ in range(args.rounds):
            order = [("baseline", args.baseline), ("binary", args.binary)]
            if round_ % 2 == 0:
                order.reverse()
            for label, binary in order:
                times = run(binary, args.port, data_dir, args.warehouse, queries)
                for name, runs in times.items():
                    results[label][name].extend(runs)
    for name, _ in queries:
        base = statistics.median(results["baseline"][name]) * 1000
        new = statistics.median(results["binary"][name]) * 1000
        print(f"{name:18s} baseline {base:7.1f} ms  binary {new:7.1f} ms  ratio {new / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
