#!/usr/bin/env python3
"""Petrel's fixed cost per query over ADBC (issue #14): server CPU and client CPU per query.

    ~/.cache/petrel/corpus-venvs/spark/bin/python scripts/bench-query-overhead.py \
        <petrel binary> [<petrel binary> ...] [--queries 300] [--rounds 5] [--idle-ms 0]

Needs the tables of `scripts/bench-vs-duckdb.py` (cached in `$PETREL_CACHE/bench-vs-duckdb`,
default ~/.cache/petrel) and the ADBC Flight SQL driver that script installs in the corpus'
Spark virtualenv. Each round starts every binary in turn (alternated, so two builds see the
same machine load) over that warehouse, opens one ADBC connection, and for each query runs 20
warm-ups then `--queries` timed executions (execute + fetch, checked):

- `SELECT 1`;
- `SELECT count(*) FROM plain` (5,000,000);
- the same `count(*)` with its text alternating between two spellings, as when a cursor cycles
  through queries: the driver then creates and closes a prepared statement per query;
- a point query `SELECT * FROM plain WHERE l_orderkey = <k>`, k random among the table's
  orders (4 rows each: one file of 8 by its metrics, one page by the page index).

It prints per query: the server's CPU time per query (user + system of the server process, from
`/proc/<pid>/stat`, 10 ms ticks: ±0.05 ms at 200 queries), the client's (this Python process
with the driver's Go runtime inside it, from `os.times`), the client's median wall time, and the
server's voluntary context switches per query (all its threads, `/proc/<pid>/task/*/status`:
each is a thread that went to sleep waiting, e.g. for a hand-off to another thread).

`--idle-ms N` pauses N ms before each timed query, so that each one arrives at an idle server
(its threads parked), as a dashboard's queries do between refreshes.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("PETREL_CACHE") or Path.home() / ".cache" / "petrel")
DATA = CACHE / "bench-vs-duckdb"


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid):
    """Voluntary context switches of all the process' threads so far."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return total


def queries(rows):
    """name -> (i -> SQL text, answer -> whether it is right)."""
    keys = rows // 4
    first = lambda t: t.column(0)[0].as_py()  # noqa: E731
    return {
        "SELECT 1": (lambda i: "SELECT 1", lambda t: first(t) == 1),
        "count(*)": (lambda i: "SELECT count(*) FROM plain", lambda t: first(t) == rows),
        # A new text each time, as when a cursor cycles through queries (bench-vs-duckdb.py):
        # ADBC then prepares and closes a statement per query (four RPCs, not two).
        "count(*) alternating": (lambda i: "SELECT count(*) FROM plain" + ("" if i % 2 else " -- again"),
                                 lambda t: first(t) == rows),
        "point": (lambda i: f"SELECT * FROM plain WHERE l_orderkey = {random.Random(i).randrange(1, keys + 1)}",
                  lambda t: t.num_rows == 4),
    }


def run(binary, n, rows, idle):
    import adbc_driver_flightsql.dbapi as flightsql

    tmp = tempfile.TemporaryDirectory()
    port = Path(tmp.name) / "port"
    proc = subprocess.Popen(
        [str(binary), "serve", "--warehouse", str(DATA / "warehouse"), "--bind", "127.0.0.1:0",
         "--port-file", str(port), "--default-catalog", "iceberg", "--default-schema", "db"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, RUST_LOG="warn"))
    try:
        deadline = time.time() + 30
        while not port.exists() or not port.read_text().strip():
            if proc.poll() is not None or time.time() > deadline:
                sys.exit(f"{binary} did not start")
            time.sleep(0.01)
        con = flightsql.connect("grpc://" + port.read_text().strip())
        cur = con.cursor()
        out = {}
        for name, (text, right) in queries(rows).items():
            def once(i):
                sql = text(i)
                cur.execute(sql)
                table = cur.fetch_arrow_table()
                if not right(table):
                    sys.exit(f"{binary}: wrong answer to {sql}: {table}")
            for i in range(20):
                once(i)
            walls = []
            server0, client0, switches0 = cpu_seconds(proc.pid), os.times(), context_switches(proc.pid)
            for i in range(n):
                if idle:
                    time.sleep(idle)
                t = time.perf_counter()
                once(i)
                walls.append(time.perf_counter() - t)
            server1, client1, switches1 = cpu_seconds(proc.pid), os.times(), context_switches(proc.pid)
            client = (client1.user - client0.user) + (client1.system - client0.system)
            out[name] = ((server1 - server0) / n * 1e3, client / n * 1e3, statistics.median(walls) * 1e3,
                         (switches1 - switches0) / n)
        cur.close()
        con.close()
        return out
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+", type=Path)
    ap.add_argument("--queries", type=int, default=300, help="timed queries per query kind (default 300)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each running every binary (default 5)")
    ap.add_argument("--idle-ms", type=float, default=0, help="pause before each timed query, ms (default 0)")
    a = ap.parse_args()
    info = json.loads((DATA / "tables.json").read_text())
    print(f"load average {os.getloadavg()[0]:.2f} at start; idle {a.idle_ms:g} ms before each query; per query: "
          f"server CPU ms / client CPU ms / client wall p50 ms / server context switches", flush=True)
    results = {b: [] for b in a.binaries}
    for _ in range(a.rounds):
        for b in a.binaries:
            r = run(b, a.queries, info["rows"], a.idle_ms / 1e3)
            results[b].append(r)
            print(f"{b}: " + "  ".join(f"{k} {s:.2f} / {c:.2f} / {w:.2f} / {x:.1f}" for k, (s, c, w, x) in r.items()),
                  flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end; medians over rounds:")
    for b, rs in results.items():
        print(f"{b}: " + "  ".join(
            f"{k} {statistics.median(r[k][0] for r in rs):.2f} / {statistics.median(r[k][1] for r in rs):.2f} / "
            f"{statistics.median(r[k][2] for r in rs):.2f} / {statistics.median(r[k][3] for r in rs):.1f}"
            for k in rs[0]))


if __name__ == "__main__":
    main()
