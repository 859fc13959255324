#!/usr/bin/env python3
"""Petrel (over Flight SQL, with the ADBC driver) against DuckDB's iceberg extension (in-process),
on the same Iceberg tables, in one run (issue #14).

    scripts/bench-vs-duckdb.py                  # everything: setup, tables, release build, bench
    scripts/bench-vs-duckdb.py --rounds 5 --first 3 --point-queries 30   # shorter
    scripts/bench-vs-duckdb.py --petrel-bin target/release/petrel --no-build

What it does:

1. `scripts/setup-spark.sh` (JDK, the corpus' Spark virtualenv with duckdb 1.5.5 and its iceberg,
   avro and parquet extensions as PyPI wheels: `INSTALL iceberg` would download from
   extensions.duckdb.org, the wheels need no network at run time), plus the ADBC Flight SQL
   driver in that virtualenv; then re-runs itself there.
2. The tables (once; cached in `$PETREL_CACHE/bench-vs-duckdb`, default ~/.cache/petrel):
   `scripts/bench_tables.py` writes 5,000,000 lineitem-like rows in 8 files with Spark 3.5.9 +
   Iceberg 1.10.2 as `db.plain`, `db.pos` (10% removed by Spark's merge-on-read DELETE: position
   deletes) and `db.eq` (1% removed by one equality-delete file on `l_orderkey` holding the full
   deleted rows, committed with the Iceberg Java API).
3. `cargo build --release -p petrel-server --bin petrel` (the release profile: no debug info),
   then starts that binary on 127.0.0.1 (an ephemeral port) over the tables' warehouse.
4. Checks both engines' answers to every query against the reference (Spark's count and sums,
   and a Python model of the generator for the filter), then times:
   - repeated queries: one server / one DuckDB connection, one warm-up, then `--rounds` rounds,
     each running every (table, query) on both engines, Petrel first in even rounds and DuckDB
     first in odd ones (an engine's query right after one of DuckDB's multi-threaded scans finds
     the CPU caches flushed: a metadata-answered `count(*)` then takes ~1.5 ms longer); medians.
     Twice: Petrel as it serves by default (whole scans of files without deletes take their
     decoded columns from the column cache after the warm-up), then a server started with
     `--column-cache 0` (every query decodes its files, as DuckDB does), each against DuckDB in
     the same rounds;
   - first query, twice, each sample timed after the connection is up (`SELECT 1`), OS page
     cache warm, nothing of the table cached (metadata, manifests, delete files, equality
     positions):
     - in a fresh process: a fresh Petrel server, and a fresh Python process for DuckDB
       (`--duckdb-first`, run by the bench): both pay their process's cold start (allocator,
       threads, code paged in);
     - in a running process, as after a commit: a fresh Petrel server that has first run the
       same query three times on another table (`WARM_UP`), and a fresh DuckDB connection in
       the bench's own process (which has run DuckDB queries before). Until 2026-12-06 the
       bench compared a fresh Petrel process with a fresh DuckDB connection in a warm process:
       ~5 ms of the difference it showed for plain sums was Petrel's process start;
   - point queries: `--clients` threads, each with its own connection, each running
     `--point-queries` `SELECT * FROM plain WHERE l_orderkey = <random>` (4 rows); p50 / p99,
     queries/s, and Petrel's server CPU time per query (from /proc).
   A DuckDB query that runs longer than `--timeout` seconds is interrupted and reported as such.
"""
import argparse, json, os, random, statistics, subprocess, sys, tempfile, threading, time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("PETREL_CACHE") or Path.home() / ".cache" / "petrel")
VENVS = CACHE / "corpus-venvs"
DATA = CACHE / "bench-vs-duckdb"
DATA_VERSION = 1  # bump when bench_tables.py changes what it writes
ADBC = ["adbc-driver-flightsql==1.13.0", "adbc-driver-manager==1.13.0"]
TABLES = ("plain", "pos", "eq")
FILTER = (600_000, 600_999)  # l_orderkey range of the selective filter: 1,000 orders, one file
# The table a "first query in a running process" sample warms its server with first.
WARM_UP = {"plain": "pos", "pos": "plain", "eq": "plain"}
QUERIES = {
    "count(*)": "SELECT count(*) FROM {t}",
    "sums": "SELECT sum(l_extendedprice), sum(l_quantity) FROM {t}",
    "filter": f"SELECT count(*), sum(l_extendedprice) FROM {{t}} WHERE l_orderkey BETWEEN {FILTER[0]} AND {FILTER[1]}",
}


def say(*a):
    print("bench-vs-duckdb:", *a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ bootstrap
def bootstrap():
    subprocess.run([str(REPO / "scripts/setup-spark.sh")], check=True)
    py = VENVS / "spark/bin/python"
    have = subprocess.run([str(py), "-c", "import adbc_driver_flightsql.dbapi"], capture_output=True)
    if have.returncode != 0:
        say("pip install", *ADBC, "into", VENVS / "spark")
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", *ADBC], check=True)
    env = dict(os.environ, PETREL_BENCH_INNER="1", TZ="UTC")
    os.execve(str(py), [str(py), __file__, *sys.argv[1:]], env)


def ensure_tables():
    info_path = DATA / "tables.json"
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if info.get("version") == DATA_VERSION and all(Path(i["metadata"]).exists() for i in info["tables"].values()):
            return info
    say("building the tables with Spark in", DATA, "(a few minutes)")
    if DATA.exists():
        if not (DATA / "tables.json").exists() and any(DATA.iterdir()) and not (DATA / "warehouse").exists():
            sys.exit(f"{DATA} exists and is not made by this script; remove it")
        subprocess.run(["rm", "-rf", str(DATA)], check=True)
    DATA.mkdir(parents=True)
    subprocess.run([sys.executable, str(REPO / "scripts/bench_tables.py"), str(DATA)], check=True,
                   env=dict(os.environ, PETREL_CORPUS_VENVS=str(VENVS)))
    info = json.loads(info_path.read_text())
    info["version"] = DATA_VERSION
    info_path.write_text(json.dumps(info, indent=1))
    return info


# ------------------------------------------------------------------------------- the reference
def model_filter(table):
    """(count, sum(l_extendedprice)) of the filter query, from the generator's formulas."""
    n, s = 0, Decimal(0)
    for k in range(FILTER[0], FILTER[1] + 1):
        for line in range(1, 5):
            i = (k - 1) * 4 + line - 1
            if table == "pos" and (k * 7 + line) % 10 == 3:
                continue
            if table == "eq" and k % 100 == 37:
                continue
            n += 1
            s += Decimal(((i * 7919) % 200000 + 90000) * ((i * 31) % 50 + 1)) / 100
    return n, s


def expected(info, table, query):
    t = info["tables"][table]
    if query == "count(*)":
        return (t["count"],)
    if query == "sums":
        return (Decimal(t["sum_extendedprice"]), Decimal(t["sum_quantity"]))
    return model_filter(table)


def normalise(row):
    return tuple(Decimal(str(v)) if not isinstance(v, int) else v for v in row)


# ---------------------------------------------------------------------------------- the engines
class Petrel:
    def __init__(self, binary: Path, warehouse: Path, args=()):
        self.binary, self.warehouse, self.args = binary, warehouse, list(args)
        self.proc = None

    def start(self):
        self.tmp = tempfile.TemporaryDirectory()
        port_file = Path(self.tmp.name) / "port"
        self.log = open(Path(self.tmp.name) / "log", "w")
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--warehouse", str(self.warehouse), "--bind", "127.0.0.1:0",
             "--port-file", str(port_file), "--default-catalog", "iceberg", "--default-schema", "db",
             *self.args],
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG="warn"))
        deadline = time.time() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"petrel did not start: {Path(self.tmp.name, 'log').read_text()}")
            time.sleep(0.01)
        self.uri = "grpc://" + port_file.read_text().strip()
        return self

    def connect(self):
        import adbc_driver_flightsql.dbapi as flightsql
        con = flightsql.connect(self.uri)
        cur = con.cursor()
        cur.execute("SELECT 1")
        cur.fetch_arrow_table()
        return con, cur

    def cpu_seconds(self):
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.tmp.cleanup()


def close(con, cur):
    cur.close()
    con.close()


def petrel_query(cur, sql):
    cur.execute(sql)
    return cur.fetch_arrow_table()


def duckdb_connection(info):
    import importlib.util, duckdb
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for pkg, name in [("duckdb_extension_parquet", "parquet"), ("duckdb_extension_avro", "avro"),
                      ("duckdb_extension_iceberg", "iceberg")]:
        spec = importlib.util.find_spec(pkg)
        if spec is None:
            sys.exit(f"{pkg} is not installed (scripts/setup-spark.sh installs it)")
        ext = next(Path(spec.origin).parent.glob(f"extensions/*/{name}.duckdb_extension"))
        try:
            con.execute(f"LOAD '{ext}'")
        except duckdb.Error:
            if name != "parquet":  # parquet is linked into the duckdb wheel itself
                raise
    for t in TABLES:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM iceberg_scan('{info['tables'][t]['metadata']}')")
    return con


class Interrupted(Exception):
    pass


def duckdb_query(con, sql, timeout):
    timer = threading.Timer(timeout, con.interrupt)
    timer.start()
    try:
        return con.execute(sql).arrow().read_all()
    except Exception as e:  # duckdb.InterruptException
        if "nterrupt" in type(e).__name__ + str(e):
            raise Interrupted() from e
        raise
    finally:
        timer.cancel()


def rows(table):
    return [tuple(c[i].as_py() for c in table.columns) for i in range(table.num_rows)]


def petrel_first(binary, warehouse, sql, warm_up=None):
    """ms of `sql` on a fresh Petrel server, after `warm_up` (another table's query) ran three times."""
    srv = Petrel(binary, warehouse).start()
    try:
        pc, c = srv.connect()
        for _ in range(3 if warm_up else 0):
            petrel_query(c, warm_up)
        ms = timed(lambda: petrel_query(c, sql))[0]
        close(pc, c)
        return ms
    finally:
        srv.stop()


def duckdb_first_in_fresh_process(sql, timeout):
    """ms of `sql` on DuckDB in a fresh Python process (this script's `--duckdb-first`)."""
    out = subprocess.run([sys.executable, __file__, "--duckdb-first", sql, "--timeout", str(timeout)],
                         capture_output=True, text=True, timeout=timeout + 120,
                         env=dict(os.environ, PETREL_BENCH_INNER="1"))
    if out.returncode != 0:
        sys.exit(f"DuckDB's first {sql!r} in a fresh process failed: {out.stderr[-2000:]}")
    return float(out.stdout.split()[-1])


def duckdb_first_here(sql, timeout):
    """The child of `duckdb_first_in_fresh_process`: connect, `SELECT 1`, time `sql`, print ms."""
    info = json.loads((DATA / "tables.json").read_text())
    d = duckdb_connection(info)
    d.execute("SELECT 1").fetchall()
    print(f"{timed(lambda: duckdb_query(d, sql, timeout))[0]:.3f}")


def timed(f):
    t = time.perf_counter()
    r = f()
    return (time.perf_counter() - t) * 1000, r


# ------------------------------------------------------------------------------------ the bench
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="rounds of repeated queries (default 10; even, for the alternating order)")
    ap.add_argument("--first", type=int, default=5, help="first-query samples per (table, query) (default 5)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--point-queries", type=int, default=50, help="point queries per client (default 50)")
    ap.add_argument("--timeout", type=float, default=30, help="seconds before a DuckDB query is interrupted")
    ap.add_argument("--petrel-bin", type=Path, default=REPO / "target/release/petrel")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo build --release first")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: repeated,first,point")
    ap.add_argument("--duckdb-first", metavar="SQL", help=argparse.SUPPRESS)  # the bench's own child process
    a = ap.parse_args()
    if a.duckdb_first:
        duckdb_first_here(a.duckdb_first, a.timeout)
        return
    skip = set(filter(None, a.skip.split(",")))
    if os.environ.get("PETREL_BENCH_INNER") != "1":
        bootstrap()
    info = ensure_tables()
    if not a.no_build:
        say("cargo build --release -p petrel-server --bin petrel")
        subprocess.run(["cargo", "build", "--release", "-p", "petrel-server", "--bin", "petrel"], cwd=REPO, check=True)
    import duckdb
    warehouse = DATA / "warehouse"
    out = [f"# Petrel vs DuckDB {duckdb.__version__} iceberg_scan — {info['rows']:,} rows, {info['files']} files, "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
           f"{os.getloadavg()[0]:.1f} at start", ""]

    # correctness first: both engines, every query and table, against the reference
    server = Petrel(a.petrel_bin, warehouse).start()
    con, cur = server.connect()
    duck = duckdb_connection(info)
    duck_ok = {}
    for t in TABLES:
        for q, sql in QUERIES.items():
            want = expected(info, t, q)
            got = normalise(rows(petrel_query(cur, sql.format(t=f"iceberg.db.{t}")))[0])
            if got != want:
                sys.exit(f"Petrel's answer to {q} on {t} is {got}, expected {want}")
            try:
                dgot = normalise(rows(duckdb_query(duck, sql.format(t=t), a.timeout))[0])
                duck_ok[t, q] = dgot == want or f"wrong: {dgot} (expected {want})"
            except Interrupted:
                duck_ok[t, q] = f"> {a.timeout:.0f} s (interrupted)"
            except Exception as e:
                duck_ok[t, q] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            say(f"checked {t} {q}: Petrel ok, DuckDB {duck_ok[t, q]}")
    cases = [(t, q) for t in TABLES for q in QUERIES]
    duck_cases = [c for c in cases if duck_ok[c] is True]

    def table_md(title, petrel_ms, duck_ms, samples):
        lines = [f"## {title}", "", "| table | query | Petrel ms | ÷ own plain | DuckDB ms | ÷ own plain | DuckDB ÷ Petrel | samples (Petrel, ms) |",
                 "|---|---|---:|---:|---:|---:|---:|---|"]
        for t, q in cases:
            p = statistics.median(petrel_ms[t, q])
            pp = statistics.median(petrel_ms["plain", q])
            if (t, q) in duck_ms:
                d = statistics.median(duck_ms[t, q])
                dp = statistics.median(duck_ms["plain", q]) if ("plain", q) in duck_ms else None
                dcol = f"{d:.1f} | {d / dp:.2f} | {d / p:.2f}" if dp else f"{d:.1f} | — | {d / p:.2f}"
            else:
                dcol = f"{duck_ok[t, q]} | — | —"
            lines.append(f"| {t} | {q} | {p:.1f} | {p / pp:.2f} | {dcol} | {' '.join(f'{x:.0f}' for x in samples[t, q])} |")
        return lines + [""]

    # repeated queries: the default server (column cache on), then one without the cache
    if "repeated" not in skip:
        for label, args in (("", ()), (", server with `--column-cache 0`", ("--column-cache", "0"))):
            if args:
                close(con, cur)
                server.stop()
                server = Petrel(a.petrel_bin, warehouse, args).start()
                con, cur = server.connect()
            pm, dm = {c: [] for c in cases}, {c: [] for c in duck_cases}
            for t, q in cases:  # warm-up
                petrel_query(cur, QUERIES[q].format(t=f"iceberg.db.{t}"))
            def petrel_run(t, q):
                pm[t, q].append(timed(lambda: petrel_query(cur, QUERIES[q].format(t=f"iceberg.db.{t}")))[0])

            def duck_run(t, q):
                if (t, q) in dm:
                    dm[t, q].append(timed(lambda: duckdb_query(duck, QUERIES[q].format(t=t), a.timeout))[0])

            for r in range(a.rounds):
                # ABBA: the engine that runs first alternates by round, so that each engine runs
                # right after the other's queries equally often (DuckDB's in-process scans flush
                # the CPU caches both engines share).
                order = (petrel_run, duck_run) if r % 2 == 0 else (duck_run, petrel_run)
                for t, q in cases:
                    for run in order:
                        run(t, q)
                say(f"repeated{label}: round {r + 1}/{a.rounds}")
            out += table_md(f"Repeated query (median of {a.rounds}; one server, one connection{label})", pm, dm, pm)
    close(con, cur)
    server.stop()

    # first query: in fresh processes, then a table's first in running processes
    if "first" not in skip:
        fresh_p, fresh_d = {c: [] for c in cases}, {c: [] for c in duck_cases}
        warm_p, warm_d = {c: [] for c in cases}, {c: [] for c in duck_cases}
        for s in range(a.first):
            for t, q in cases:
                sql = QUERIES[q].format(t=f"iceberg.db.{t}")
                fresh_p[t, q].append(petrel_first(a.petrel_bin, warehouse, sql))
                warm_up = QUERIES[q].format(t=f"iceberg.db.{WARM_UP[t]}")
                warm_p[t, q].append(petrel_first(a.petrel_bin, warehouse, sql, warm_up))
                if (t, q) in fresh_d:
                    fresh_d[t, q].append(duckdb_first_in_fresh_process(QUERIES[q].format(t=t), a.timeout))
                    d = duckdb_connection(info)
                    warm_d[t, q].append(timed(lambda: duckdb_query(d, QUERIES[q].format(t=t), a.timeout))[0])
                    d.close()
            say(f"first: sample {s + 1}/{a.first}")
        out += table_md(f"First query in a fresh process (a fresh Petrel server / a fresh Python process for "
                        f"DuckDB per sample; median of {a.first})", fresh_p, fresh_d, fresh_p)
        out += table_md(f"First query of a table in a running process, as after a commit (a fresh Petrel server "
                        f"that has run the same query 3 times on another table / a fresh DuckDB connection in the "
                        f"bench's process; median of {a.first})", warm_p, warm_d, warm_p)

    # point queries at N clients
    if "point" not in skip:
        out += ["## Point queries: `SELECT * FROM plain WHERE l_orderkey = <random>` (4 rows)", "",
                "| engine | clients | queries | p50 ms | p99 ms | max ms | queries/s | server CPU ms/query |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        server = Petrel(a.petrel_bin, warehouse).start()
        conns = [server.connect() for _ in range(a.clients)]
        keys = info["rows"] // 4

        def petrel_point(i, lat):
            _, c = conns[i]
            rnd = random.Random(i)
            for _ in range(a.point_queries):
                k = rnd.randrange(1, keys + 1)
                ms, tb = timed(lambda: petrel_query(c, f"SELECT * FROM iceberg.db.plain WHERE l_orderkey = {k}"))
                if tb.num_rows != 4:
                    raise RuntimeError(f"point query for {k}: {tb.num_rows} rows, expected 4")
                lat.append(ms)

        dcon = duckdb_connection(info)

        def duck_point(i, lat):
            c = dcon.cursor()
            rnd = random.Random(i)
            for _ in range(a.point_queries):
                k = rnd.randrange(1, keys + 1)
                ms, tb = timed(lambda: c.execute(f"SELECT * FROM plain WHERE l_orderkey = {k}").arrow().read_all())
                if tb.num_rows != 4:
                    raise RuntimeError(f"DuckDB point query for {k}: {tb.num_rows} rows, expected 4")
                lat.append(ms)

        def run(worker, clients, cpu=None):
            lats = [[] for _ in range(clients)]
            c0 = cpu() if cpu else None
            t0 = time.perf_counter()
            threads = [threading.Thread(target=worker, args=(i, lats[i])) for i in range(clients)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            wall = time.perf_counter() - t0
            cpu_ms = (cpu() - c0) * 1000 if cpu else None
            all_l = sorted(x for l in lats for x in l)
            if len(all_l) != clients * a.point_queries:
                sys.exit("a point-query client failed (see above)")
            p = lambda f: all_l[min(len(all_l) - 1, int(f * len(all_l)))]
            return (f"{statistics.median(all_l):.1f} | {p(0.99):.1f} | {all_l[-1]:.1f} | {len(all_l) / wall:.0f} | "
                    + (f"{cpu_ms / len(all_l):.2f}" if cpu_ms is not None else "—"))

        for clients in (1, a.clients):
            run(petrel_point, clients, server.cpu_seconds)  # warm-up round, not reported
            out.append(f"| Petrel (ADBC, Flight SQL) | {clients} | {clients * a.point_queries} | "
                       + run(petrel_point, clients, server.cpu_seconds) + " |")
            out.append(f"| DuckDB iceberg_scan (in-process) | {clients} | {clients * a.point_queries} | "
                       + run(duck_point, clients) + " |")
            say(f"point queries at {clients} clients done")
        for pc, c in conns:
            close(pc, c)
        server.stop()
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
