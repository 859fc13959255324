#!/usr/bin/env python3
"""Issue #15's benchmark: the same queries on one Petrel server and through a Ballista cluster of
1 and 2 executors (`petrel scheduler`, `petrel executor`, `petrel serve --engine ... 
--cluster-min-bytes 0`), all on 127.0.0.1, in one run, over Flight SQL with the ADBC driver.

    scripts/bench-cluster.py [--petrel-bin target/release/petrel] [--rounds 5]

Tables: the 5,000,000-row lineitem-like tables of scripts/bench-vs-duckdb.py (`plain`, `pos`
with Spark's position deletes, `eq` with an equality-delete file), built once by that script
into $PETREL_CACHE/bench-vs-duckdb (run it first). Every answer is checked against the one
recorded when the tables were built (counts and sums) or against the local run.

Prints, per query, the median wall time of each setup and the ratios cluster / local: what
going distributed costs a small query (job submission, stage scheduling, the result fetched
from an executor) and what it gives a scan-heavy one. On one 2-core machine the executors
share the cores with the front end and the scheduler, so the figures measure overhead, not
scale-out; docs/benchmarks.md has the analysis.
"""
import argparse
import datetime as dt
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PETREL_CACHE", Path.home() / ".cache" / "petrel"))
TABLES = CACHE / "bench-vs-duckdb"

QUERIES = [
    ("plain", "sums", "SELECT sum(l_extendedprice), sum(l_quantity) FROM iceberg.db.plain"),
    ("pos", "sums", "SELECT sum(l_extendedprice), sum(l_quantity) FROM iceberg.db.pos"),
    ("eq", "sums", "SELECT sum(l_extendedprice), sum(l_quantity) FROM iceberg.db.eq"),
    ("plain", "group by", "SELECT l_returnflag, l_linestatus, count(*), sum(l_extendedprice) "
                          "FROM iceberg.db.plain GROUP BY 1, 2 ORDER BY 1, 2"),
    ("plain", "filter (small)", "SELECT count(*), sum(l_extendedprice) FROM iceberg.db.plain "
                                "WHERE l_orderkey BETWEEN 600000 AND 600999"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, log):
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited:\n{Path(log).read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not listen on {port}")


class Setup:
    """A front end, and with `executors` > 0 a scheduler and that many executors."""

    def __init__(self, binary, warehouse, executors, workdir):
        self.procs = []
        env = {k: v for k, v in os.environ.items() if not k.startswith("PETREL_")}
        env.setdefault("RUST_LOG", "warn,ballista_executor=info")
        args = []
        if executors:
            sched = free_port()
            # Two task slots per executor; the scheduler plans for all of them.
            self._start([binary, "scheduler", "--bind", f"127.0.0.1:{sched}", "--parallelism",
                         str(2 * executors)], env, workdir, "scheduler", sched)
            for i in range(executors):
                log = workdir / f"executor{i}.log"
                self._start([binary, "executor", "--scheduler", f"127.0.0.1:{sched}",
                             "--flight-port", str(free_port()), "--grpc-port", str(free_port()),
                             "--concurrent-tasks", "2", "--work-dir", str(workdir / f"ex{i}")],
                            env, workdir, f"executor{i}")
                deadline = time.time() + 60
                while "Starting poll work loop" not in log.read_text():
                    if time.time() > deadline:
                        sys.exit(f"executor {i} did not start:\n{log.read_text()[-3000:]}")
                    time.sleep(0.1)
            args = ["--engine", f"ballista://127.0.0.1:{sched}", "--cluster-min-bytes", "0"]
        port = free_port()
        self._start([binary, "serve", "--bind", f"127.0.0.1:{port}", "--warehouse",
                     str(warehouse), *args], env, workdir, "serve", port)
        self.uri = f"grpc://127.0.0.1:{port}"

    def _start(self, cmd, env, workdir, name, port=None):
        (workdir / name).mkdir(exist_ok=True)
        log = workdir / f"{name}.log"
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(log, "w"), env=env)
        self.procs.append(proc)
        if port:
            wait_port(port, proc, name, log)

    def stop(self):
        for p in reversed(self.procs):
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


RECEIVED = re.compile(r"^(\S+Z) .*Received task: \[TID \d+ (\w+)/(\d+)\.\d+/(\d+)\.\d+\]")
DONE = re.compile(r"^(\S+Z) .*Done with task TID \d+ (\w+)/(\d+)\.\d+/(\d+)\.\d+")
PLAN = re.compile(r"^=== \[(\w+)/(\d+)/(\d+)\] Physical plan with metrics ===")
SHUFFLE_BYTES = re.compile(r"ShuffleReaderExec: .*Bytes=(?:Exact|Inexact)\((\d+)\)")


def stamp(text):
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def stage_profile(logs):
    """Per job, in the order the executors first saw them: per stage, the tasks' run times
    (received to done, in ms) and the shuffle bytes the stage's tasks read."""
    jobs = {}
    for log in logs:
        current = None
        for line in log.read_text().splitlines():
            if m := RECEIVED.match(line):
                job = jobs.setdefault(m.group(2), {"first": stamp(m.group(1)), "tasks": {}})
                job["first"] = min(job["first"], stamp(m.group(1)))
                job["tasks"].setdefault((int(m.group(3)), int(m.group(4))), {})["start"] = stamp(m.group(1))
            elif m := DONE.match(line):
                task = jobs.setdefault(m.group(2), {"first": stamp(m.group(1)), "tasks": {}})["tasks"]
                task.setdefault((int(m.group(3)), int(m.group(4))), {})["end"] = stamp(m.group(1))
            elif m := PLAN.match(line):
                current = (m.group(1), int(m.group(2)), int(m.group(3)))
            elif current and (m := SHUFFLE_BYTES.search(line)):
                job, stage, part = current
                task = jobs.setdefault(job, {"first": 0, "tasks": {}})["tasks"].setdefault((stage, part), {})
                task["bytes"] = task.get("bytes", 0) + int(m.group(1))
                current = None
    ordered = sorted(jobs.items(), key=lambda kv: kv[1]["first"])
    profiles = []
    for _, job in ordered:
        stages = {}
        for (stage, _), task in job["tasks"].items():
            st = stages.setdefault(stage, {"tasks": 0, "ms": [], "bytes": 0})
            st["tasks"] += 1
            if "start" in task and "end" in task:
                st["ms"].append((task["end"] - task["start"]) * 1000)
            st["bytes"] += task.get("bytes", 0)
        profiles.append(stages)
    return profiles


def describe(stages):
    parts = []
    for stage in sorted(stages):
        st = stages[stage]
        longest = max(st["ms"]) if st["ms"] else float("nan")
        parts.append(f"stage {stage}: {st['tasks']} tasks, longest {longest:.0f} ms, "
                     f"shuffle in {st['bytes']:,} B")
    return "; ".join(parts)


def timed(cur, sql):
    started = time.perf_counter()
    cur.execute(sql)
    rows = cur.fetchall()
    return (time.perf_counter() - started) * 1000, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--petrel-bin", default=str(REPO / "target" / "release" / "petrel"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--executors", default="0,1,2", help="setups to run (0: no cluster)")
    a = ap.parse_args()
    from adbc_driver_flightsql import dbapi as flight_sql

    meta = json.loads((TABLES / "tables.json").read_text()) if (TABLES / "tables.json").exists() \
        else sys.exit(f"no tables in {TABLES}: run scripts/bench-vs-duckdb.py once first")
    warehouse = TABLES / "warehouse"
    setups = [int(x) for x in a.executors.split(",")]
    results = {}
    answers = {}
    stages_of = {}
    for executors in setups:
        with tempfile.TemporaryDirectory(prefix="petrel-bench-cluster-") as tmp:
            setup = Setup(a.petrel_bin, warehouse, executors, Path(tmp))
            try:
                with flight_sql.connect(setup.uri, autocommit=True) as conn, conn.cursor() as cur:
                    for table, name, sql in QUERIES:
                        timed(cur, sql)  # warm-up: caches on every process
                        samples = []
                        for _ in range(a.rounds):
                            ms, rows = timed(cur, sql)
                            samples.append(ms)
                        key = (table, name)
                        if name == "sums":
                            t = meta["tables"][table]
                            want = [(Decimal(t["sum_extendedprice"]), Decimal(t["sum_quantity"]))]
                            assert [tuple(Decimal(str(v)) for v in r) for r in rows] == want, (key, rows)
                        answers.setdefault(key, rows)
                        assert rows == answers[key], (key, executors, rows, answers[key])
                        results[(key, executors)] = samples
                        print(f"{executors} executors  {table:5} {name:15} "
                              f"{statistics.median(samples):9.1f} ms", file=sys.stderr)
                if executors:
                    profiles = stage_profile(sorted(Path(tmp).glob("executor*.log")))
                    # Each query ran 1 + rounds jobs in order: the last one's stages.
                    per_query = a.rounds + 1
                    for i, (table, name, _) in enumerate(QUERIES):
                        job = (i + 1) * per_query - 1
                        if job < len(profiles):
                            stages_of[(table, name, executors)] = describe(profiles[job])
            finally:
                setup.stop()
    head = "| table | query | " + " | ".join(
        "local ms" if e == 0 else f"{e} executor{'s' if e > 1 else ''} ms" for e in setups)
    ratios = [e for e in setups if e]
    head += "".join(f" | {e} ÷ local" for e in ratios) + " |"
    print(head)
    print("|" + "---|" * (2 + len(setups) + len(ratios)))
    for table, name, _ in QUERIES:
        med = {e: statistics.median(results[((table, name), e)]) for e in setups}
        line = f"| {table} | {name} | " + " | ".join(f"{med[e]:.1f}" for e in setups)
        if 0 in med:
            line += "".join(f" | {med[e] / med[0]:.2f}" for e in ratios)
        print(line + " |")
    if stages_of:
        print()
        print("Stages of the last run of each query (executors' task logs: received to done):")
        print()
        for (table, name, executors), text in sorted(stages_of.items()):
            print(f"- {table} {name}, {executors} executor{'s' if executors > 1 else ''}: {text}")


if __name__ == "__main__":
    main()
