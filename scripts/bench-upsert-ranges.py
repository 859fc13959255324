#!/usr/bin/env python3
"""Scans of upserted tables whose data files hold key ranges, for one or more Petrel binaries.

    scripts/bench-upsert-ranges.py BINARY [BINARY...] [--rounds N] [--rows N] [--commits N]
        [--after-commits N] [--warehouse DIR]

Tables (made once in the warehouse with the first binary, kept for later runs; all four hold the
same 5,000,000 rows `id, a = id % 1000, price = id * 0.01, s`, loaded by 10 INSERTs of 500,000
consecutive ids, so each INSERT's data files hold one range of ids):

- `plain`: no key, nothing else (the baseline);
- `ranges`: `PRIMARY KEY (id)`; then an upsert (`CommandStatementIngest` with `upsert=true`) of
  50,000 rows, ids 4,975,000..5,024,999: half replace the newest ids, half are new. Its
  equality delete file's bounds meet only the last INSERT's files (recent rows updated, as an
  orders table's are);
- `spread`: the same, but the upsert replaces ids 0 and 4,999,999 and adds 1,000 new ones: the
  bounds span every file, and only two files hold a deleted key;
- `commits`: `PRIMARY KEY (id)`, then `--commits` (300) upserts of 20 existing ids each, spread
  over the whole range (as a CDC stream commits): one equality group per commit, each applying
  to every older data file (~45,000 pairs a scan lays out). Made when missing, also in a
  warehouse made before it existed.

For each binary, each round starts a fresh server (`serve --warehouse`), runs `SELECT 1`, then
`SELECT count(*), sum(price), sum(a)` of a table once (the first query: nothing of the table is
cached, as after a commit) and 5 times more (repeated: median). Binaries alternate in order per
round. Prints the medians over rounds and each figure ÷ the same binary's `plain`; every answer
is checked against the rows' formulas.

Then the first query after a commit in a running server (`--after-commits`, 3; 0 skips it):
for each binary, each round copies the warehouse, starts a server over the copy, and per table
runs the query 4 times (the table's files, deletes and positions then cached as a dashboard's
repeated query finds them), then `--after-commits` times: a commit of 20 rows (an upsert of 20
existing ids spread over the range into the keyed tables, an append of 20 new ids to `plain`),
the query once (timed: "after a commit"), and 3 times more (repeated: median). Prints the
medians over rounds and commits, and "after a commit" ÷ repeated.

Needs `adbc-driver-flightsql` and pyarrow (`scripts/setup-spark.sh`'s virtualenv has both).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa

# The hand-written ingest command the server tests use (ADBC sends no ingest options).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server", "tests", "python"))
from flight_sql_commands import do_put_ingest, statement_ingest  # noqa: E402

QUERY = "SELECT count(*), sum(price), sum(a) FROM iceberg.db.{}"
TABLES = ("plain", "ranges", "spread", "commits")
COMMIT_KEYS = 20
LOADS = 10


def start(binary, warehouse):
    """A server over `warehouse`, its URI, and its log directory (for `stop`)."""
    work = tempfile.mkdtemp(prefix="petrel-bench-")
    port_file = os.path.join(work, "port")
    server = subprocess.Popen(
        [binary, "serve", "--warehouse", warehouse, "--bind", "127.0.0.1:0", "--port-file", port_file,
         "--default-catalog", "iceberg", "--default-schema", "db"],
        stdout=open(os.path.join(work, "log"), "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while not (os.path.exists(port_file) and open(port_file).read().strip()):
        if server.poll() is not None or time.time() > deadline:
            sys.exit(f"{binary} did not start: see {work}/log")
        time.sleep(0.02)
    return server, "grpc://" + open(port_file).read().strip(), work


def stop(server, work):
    server.terminate()
    server.wait()
    shutil.rmtree(work, ignore_errors=True)


def upsert(uri, table, data):
    """Appends `data` to iceberg.db.`table` as an upsert (ingest option upsert=true)."""
    do_put_ingest(uri, statement_ingest(table, "db", "iceberg", {"upsert": "true"}), data)


def upsert_ids(table, rows, commits):
    """The ids of each upsert of `table`, one list per commit."""
    if table == "ranges":
        return [list(range(rows - rows // 200, rows + rows // 200))]
    if table == "commits":
        return [sorted({(j * 4999 + k * 5003) % rows for k in range(COMMIT_KEYS)}) for j in range(commits)]
    return [[0, rows - 1] + list(range(rows, rows + rows // 5000))]


def expected(table, rows, commits, more=()):
    """count(*), sum(price), sum(a) of `table` by the rows' formulas, with the ids `more`
    upserted (or, in `plain`, appended: new ids) since it was made."""
    ids = set(range(rows))
    replaced = set().union(*upsert_ids(table, rows, commits)) if table != "plain" else set()
    replaced |= set(more)
    kept = ids - replaced
    count = len(kept) + len(replaced)
    price = sum(i * 0.01 for i in kept) + len(replaced) * 1.0
    a = sum(i % 1000 for i in kept) + len(replaced) * 7
    return count, price, a


def setup(binary, warehouse, rows, commits, tables):
    """Makes `tables` in `warehouse` (the schema too, when it is new)."""
    server, uri, work = start(binary, warehouse)
    try:
        with flightsql.connect(uri) as conn, conn.cursor() as cur:
            cur.execute("CREATE SCHEMA IF NOT EXISTS iceberg.db")
            for table in tables:
                key = ", PRIMARY KEY (id)" if table != "plain" else ""
                cur.execute(f"CREATE TABLE iceberg.db.{table} (id BIGINT NOT NULL, a BIGINT, price DOUBLE, "
                            f"s STRING{key})")
                step = rows // LOADS
                for low in range(0, rows, step):
                    cur.execute(f"INSERT INTO iceberg.db.{table} SELECT value, value % 1000, "
                                f"CAST(value AS DOUBLE) * 0.01, concat('s', CAST(value % 977 AS VARCHAR)) "
                                f"FROM generate_series({low}, {min(low + step, rows) - 1})")
                for ids in (upsert_ids(table, rows, commits) if table != "plain" else []):
                    ids = pa.array(ids, pa.int64())
                    upsert(uri, table, pa.table({"id": ids, "a": pa.array([7] * len(ids), pa.int64()),
                                                 "price": pa.array([1.0] * len(ids)),
                                                 "s": pa.array(["u"] * len(ids))}))
    finally:
        stop(server, work)


def check(table, got, rows, commits, more=()):
    """`got` against `table`'s rows, with the ids `more` replaced or added since it was made."""
    count, price, a = expected(table, rows, commits, more)
    if got[0] != count or got[2] != a or abs(got[1] - price) > 1e-6 * abs(price):
        sys.exit(f"{table}: got {got}, want ({count}, {price}, {a})")


def timed(cur, table, n, checked):
    """`n` runs of the query on `table`, each answer passed to `checked`: their times in ms."""
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        cur.execute(QUERY.format(table))
        got = cur.fetchone()
        samples.append((time.perf_counter() - t) * 1000)
        checked(got)
    return samples


def commit_ids(table, rows, commit):
    """The 20 ids of the `commit`-th commit after the tables were made: new ids appended to
    `plain`, existing ids spread over the range upserted into the others."""
    if table == "plain":
        return list(range(rows + commit * COMMIT_KEYS, rows + (commit + 1) * COMMIT_KEYS))
    return sorted({(commit * 7919 + k * 249_989 + 17) % rows for k in range(COMMIT_KEYS)})


def after_commits(binaries, warehouse, rounds, rows, commits, count):
    """First query after each of `count` commits in a running server, and repeated (module docs)."""
    after = {(b, t): [] for b in binaries for t in TABLES}
    repeated = {(b, t): [] for b in binaries for t in TABLES}
    for round_ in range(rounds):
        order = binaries if round_ % 2 == 0 else binaries[::-1]
        for binary in order:
            copy = tempfile.mkdtemp(prefix="petrel-bench-warehouse-")
            shutil.rmtree(copy)
            shutil.copytree(warehouse, copy)
            server, uri, work = start(binary, copy)
            try:
                with flightsql.connect(uri) as conn, conn.cursor() as cur:
                    for table in TABLES:
                        more = set()
                        for _ in range(4):
                            cur.execute(QUERY.format(table))
                            check(table, cur.fetchone(), rows, commits)
                        for commit in range(count):
                            ids = commit_ids(table, rows, commit)
                            more |= set(ids)
                            data = pa.table({"id": pa.array(ids, pa.int64()),
                                             "a": pa.array([7] * len(ids), pa.int64()),
                                             "price": pa.array([1.0] * len(ids)),
                                             "s": pa.array(["u"] * len(ids))})
                            options = {} if table == "plain" else {"upsert": "true"}
                            do_put_ingest(uri, statement_ingest(table, "db", "iceberg", options), data)
                            samples = timed(cur, table, 4, lambda got: check(table, got, rows, commits, more))
                            after[(binary, table)].append(samples[0])
                            repeated[(binary, table)].append(statistics.median(samples[1:]))
            finally:
                stop(server, work)
                shutil.rmtree(copy, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"\n# First query after a commit, in a running server — {count} commits per table, {rounds} rounds, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load:.1f}\n")
    print("| binary | table | after a commit ms | repeated ms | after ÷ repeated |")
    print("|---|---|---:|---:|---:|")
    for binary in binaries:
        for table in TABLES:
            f = statistics.median(after[(binary, table)])
            r = statistics.median(repeated[(binary, table)])
            print(f"| {binary} | {table} | {f:.1f} | {r:.1f} | {f / r:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--commits", type=int, default=300, help="upsert commits of the `commits` table")
    parser.add_argument("--after-commits", type=int, default=3,
                        help="commits per table in the after-a-commit part (0: skip it)")
    parser.add_argument("--skip-fresh", action="store_true",
                        help="skip the fresh-server part (first and repeated queries)")
    parser.add_argument("--warehouse", default=os.path.expanduser("~/.cache/petrel/bench-upsert-ranges"))
    args = parser.parse_args()
    marker = os.path.join(args.warehouse, "bench-rows")
    if not os.path.exists(marker) or open(marker).read() != str(args.rows):
        print(f"bench-upsert-ranges: making the tables in {args.warehouse}", file=sys.stderr)
        shutil.rmtree(args.warehouse, ignore_errors=True)
        os.makedirs(args.warehouse)
        setup(args.binaries[0], args.warehouse, args.rows, args.commits, TABLES)
        with open(marker, "w") as f:
            f.write(str(args.rows))
        with open(os.path.join(args.warehouse, "bench-commits"), "w") as f:
            f.write(str(args.commits))
    commits_marker = os.path.join(args.warehouse, "bench-commits")
    if not os.path.exists(commits_marker) or open(commits_marker).read() != str(args.commits):
        print(f"bench-upsert-ranges: making the commits table ({args.commits} upserts)", file=sys.stderr)
        if os.path.exists(os.path.join(args.warehouse, "db", "commits")):
            server, uri, work = start(args.binaries[0], args.warehouse)
            try:
                with flightsql.connect(uri) as conn, conn.cursor() as cur:
                    cur.execute("DROP TABLE iceberg.db.commits")
            finally:
                stop(server, work)
        setup(args.binaries[0], args.warehouse, args.rows, args.commits, ("commits",))
        with open(commits_marker, "w") as f:
            f.write(str(args.commits))
    if not args.skip_fresh:
        fresh_servers(args)
    if args.after_commits > 0:
        after_commits(args.binaries, args.warehouse, args.rounds, args.rows, args.commits, args.after_commits)


def fresh_servers(args):
    """First and repeated queries in fresh servers (module docs)."""
    first = {(b, t): [] for b in args.binaries for t in TABLES}
    repeated = {(b, t): [] for b in args.binaries for t in TABLES}
    for round_ in range(args.rounds):
        order = args.binaries if round_ % 2 == 0 else args.binaries[::-1]
        for binary in order:
            for table in TABLES:
                server, uri, work = start(binary, args.warehouse)
                try:
                    with flightsql.connect(uri) as conn, conn.cursor() as cur:
                        cur.execute("SELECT 1")
                        cur.fetchall()
                        samples = timed(cur, table, 6, lambda got: check(table, got, args.rows, args.commits))
                finally:
                    stop(server, work)
                first[(binary, table)].append(samples[0])
                repeated[(binary, table)].append(statistics.median(samples[1:]))
    load = os.getloadavg()[0]
    print(f"# Upserted key ranges — {args.rows:,} rows, {args.rounds} rounds, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load:.1f}\n")
    print("| binary | table | first ms | ÷ plain | repeated ms | ÷ plain |")
    print("|---|---|---:|---:|---:|---:|")
    for binary in args.binaries:
        base_first = statistics.median(first[(binary, "plain")])
        base_repeated = statistics.median(repeated[(binary, "plain")])
        for table in TABLES:
            f = statistics.median(first[(binary, table)])
            r = statistics.median(repeated[(binary, table)])
            print(f"| {binary} | {table} | {f:.1f} | {f / base_first:.2f} | {r:.1f} | {r / base_repeated:.2f} |")


if __name__ == "__main__":
    main()
