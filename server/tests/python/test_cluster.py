"""Issue #15: Petrel's Iceberg scans on a Ballista cluster of real processes on 127.0.0.1 —
`petrel scheduler`, two `petrel executor`s, and `petrel serve --engine ballista://...` in
front — queried over Flight SQL with the real ADBC driver.

- The whole fixture corpus (every table, snapshot, ref and recorded query; position deletes,
  deletion vectors, equality deletes) gives through the cluster exactly the checks it gives
  on a server without one (`check_corpus.py`, Spark's answers), and the queries really ran
  there (the front end logs each query it sends).
- With `--cluster-min-bytes` above what a query selects, it runs locally.
- A query cancelled by the client (CancelFlightInfo) cancels its job on the scheduler, which
  stops its tasks: the executors run the next query at once.
- An executor killed (SIGKILL) while it runs one of a query's tasks: the scheduler takes it as
  lost after its timeout (5 s here) and runs its tasks again on the other one; the answer is
  the exact one (or, had the retry been impossible, a clear error; never a hang).
- The scheduler killed (SIGKILL) mid-query: the query fails with an error naming the cluster,
  the front end keeps serving, and the executors, whose orphaned tasks nobody cancels, still
  stop on SIGTERM after their shutdown grace period.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from adbc_driver_flightsql import dbapi as flight_sql

from conftest import REPO, Petrel, petrel_bin

CHECK_CORPUS = REPO.parent / "shared" / "fixtures" / "check_corpus.py"
JOIN = (
    "SELECT count(*), sum(a.id + b.id) FROM iceberg.db.v2_mor a "
    "JOIN iceberg.db.v2_mor b ON a.id % 2 = b.id % 2"
)
SENT = "query sent to the Ballista cluster"
# 2706^3 joined rows: runs far longer than any test unless cancelled.
ENDLESS = ("SELECT count(*) FROM iceberg.db.v2_mor a JOIN iceberg.db.v2_mor b ON a.id % 1 = b.id % 1 "
           "JOIN iceberg.db.v2_mor c ON b.id % 1 = c.id % 1")
# How long a stopped executor waits for its tasks (`--shutdown-grace-secs`).
GRACE_SECS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A scheduler and two executors, each its own `petrel` process."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="petrel-cluster-"))
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PETREL_")}
        env["RUST_LOG"] = "warn,petrel_distributed=info,ballista_scheduler=info,ballista_executor=info"
        self.procs = {}
        self.logs = {}
        self._start("scheduler", ["scheduler", "--bind", f"127.0.0.1:{self.port}",
                                  "--executor-timeout-secs", "5"], env)
        self._wait_listening()
        for name in ("executor1", "executor2"):
            self._start(name, ["executor", "--scheduler", f"127.0.0.1:{self.port}",
                               "--flight-port", str(free_port()), "--grpc-port", str(free_port()),
                               "--concurrent-tasks", "2", "--heartbeat-secs", "1",
                               "--shutdown-grace-secs", str(GRACE_SECS),
                               "--work-dir", str(self.dir / name)], env)
        # Executors pull their tasks: each is ready once it polls the scheduler.
        deadline = time.time() + 60
        while not all("Starting poll work loop" in self.log(n) for n in ("executor1", "executor2")):
            self._alive()
            if time.time() > deadline:
                raise RuntimeError("executors did not start:\n" + self.log("executor1"))
            time.sleep(0.1)

    def _start(self, name, args, env):
        (self.dir / name).mkdir(exist_ok=True)
        self.logs[name] = self.dir / f"{name}.log"
        with open(self.logs[name], "w") as log:
            self.procs[name] = subprocess.Popen([petrel_bin(), *args], stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL, stderr=log, env=env)

    def _wait_listening(self):
        deadline = time.time() + 60
        while True:
            self._alive()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("the scheduler did not listen:\n" + self.log("scheduler"))
                time.sleep(0.1)

    def _alive(self):
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {self.log(name)}")

    def log(self, name) -> str:
        return self.logs[name].read_text()

    def engine(self) -> str:
        return f"ballista://127.0.0.1:{self.port}"

    def stop(self):
        """Stops every process and removes the cluster's directory (logs, shuffle files)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.stop()


def check_corpus(uri: str, corpus: Path) -> list[str]:
    out = subprocess.run([sys.executable, str(CHECK_CORPUS), "--uri", uri, "--corpus", str(corpus),
                          "--timeout", "120"], stdout=subprocess.PIPE, text=True, timeout=900)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stdout[-3000:]
    summary = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1])
    assert summary, lines[-5:]
    assert summary.group(2) == "0", [line for line in lines if line.startswith("FAIL")]
    # "PASS <table> <check> <detail> (<seconds>)": the checks, without the timing.
    return sorted(" ".join(line.split()[:3]) for line in lines if line.startswith("PASS"))


def query(uri: str, sql: str):
    with flight_sql.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def test_corpus_through_the_cluster_matches_local(cluster, corpus, corpus_server, start_petrel):
    local = check_corpus(corpus_server.uri, corpus)
    front = start_petrel("--warehouse", str(corpus / "warehouse"), "--engine", cluster.engine(),
                         "--cluster-min-bytes", "0")
    remote = check_corpus(front.uri, corpus)
    assert remote == local
    assert len(local) > 60
    sent = front.log().count(SENT)
    # Each check is one query; a few are answered from the manifests alone (no scan to send).
    assert len(local) - 10 <= sent <= len(local), sent
    assert cluster.log("scheduler").count("job submitted") == sent


def test_small_queries_stay_local(cluster, corpus, start_petrel):
    front = start_petrel("--warehouse", str(corpus / "warehouse"), "--engine", cluster.engine(),
                         "--cluster-min-bytes", "1GiB")
    assert query(front.uri, JOIN) == [(3704436, 11132156616)]
    assert front.log().count(SENT) == 0
    assert cluster.log("scheduler").count("job submitted") == 0


def test_executor_killed_mid_query_is_retried(cluster, corpus, start_petrel):
    front = start_petrel("--warehouse", str(corpus / "warehouse"), "--engine", cluster.engine(),
                         "--cluster-min-bytes", "0")
    result = {}

    def run():
        try:
            result["rows"] = query(front.uri, JOIN)
        except Exception as e:  # noqa: BLE001 - the outcome is checked below
            result["error"] = str(e)

    executors = ("executor1", "executor2")
    before = {name: cluster.log(name).count("Received task") for name in executors}
    started = time.time()
    worker = threading.Thread(target=run)
    worker.start()
    # Kill the first executor that is handed one of the query's tasks, while it runs it.
    deadline = time.time() + 60
    victim = None
    while victim is None:
        assert time.time() < deadline, cluster.log("scheduler")
        victim = next((n for n in executors if cluster.log(n).count("Received task") > before[n]),
                      None)
        time.sleep(0.005)
    cluster.procs[victim].send_signal(signal.SIGKILL)
    cluster.procs[victim].wait()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the query hung after an executor was killed"
    # Either the tasks ran again on the other executor (the exact answer), or a clear error.
    if "rows" in result:
        assert result["rows"] == [(3704436, 11132156616)]
        # The scheduler noticed the loss and ran the lost tasks again.
        assert "on lost Executor" in cluster.log("scheduler"), cluster.log("scheduler")[-3000:]
    else:
        assert "Ballista cluster" in result["error"], result["error"]
    assert time.time() - started < 120
    assert front.log().count(SENT) == 1


def test_cancelled_query_cancels_its_cluster_job(cluster, corpus, start_petrel):
    front = start_petrel("--warehouse", str(corpus / "warehouse"), "--engine", cluster.engine(),
                         "--cluster-min-bytes", "0")
    errors = []
    with flight_sql.connect(front.uri, autocommit=True) as conn:
        cur = conn.cursor()

        def run():
            try:
                cur.execute(ENDLESS)
                cur.fetchall()
            except Exception as e:  # noqa: BLE001 - the outcome is checked below
                errors.append(str(e))

        worker = threading.Thread(target=run)
        worker.start()
        # Cancel once the job's tasks run on the executors.
        deadline = time.time() + 60
        while not (re.search(r"job submitted .*job_id: (\w+)", cluster.log("scheduler"))
                   and any("Received task" in cluster.log(n) for n in ("executor1", "executor2"))):
            assert time.time() < deadline and worker.is_alive(), (errors, cluster.log("scheduler")[-3000:])
            time.sleep(0.05)
        job = re.search(r"job submitted .*job_id: (\w+)", cluster.log("scheduler")).group(1)
        time.sleep(1.0)
        cur.adbc_cancel()
        worker.join(timeout=30)
        assert not worker.is_alive(), "the cancelled query did not return"
        assert errors and "cancel" in errors[0].lower(), errors
        cur.close()
    # The front end cancelled the job on the scheduler, which stopped its tasks.
    deadline = time.time() + 30
    while f"Job {job} Cancelled" not in cluster.log("scheduler"):
        assert time.time() < deadline, cluster.log("scheduler")[-3000:]
        time.sleep(0.1)
    assert f"Received cancellation request for job {job}" in cluster.log("scheduler")
    # The executors' slots are free again: the next query runs and is exact.
    started = time.time()
    assert query(front.uri, JOIN) == [(3704436, 11132156616)]
    assert time.time() - started < 60


def test_executors_stop_after_their_scheduler_died(cluster, corpus, start_petrel):
    front = start_petrel("--warehouse", str(corpus / "warehouse"), "--engine", cluster.engine(),
                         "--cluster-min-bytes", "0")
    executors = ("executor1", "executor2")
    errors = []

    def run():
        try:
            query(front.uri, ENDLESS)
        except Exception as e:  # noqa: BLE001 - the outcome is checked below
            errors.append(str(e))

    worker = threading.Thread(target=run)
    worker.start()
    # Kill the scheduler once a task has run for 3 s (the endless join, not a short scan task).
    deadline = time.time() + 120
    first_seen = {}
    while True:
        running = {(n, tid) for n in executors for tid in running_tasks(cluster.log(n))}
        first_seen = {task: first_seen.get(task, time.time()) for task in running}
        busy = {n for (n, _), seen in first_seen.items() if time.time() - seen >= 3}
        if busy:
            break
        assert time.time() < deadline and worker.is_alive(), (errors, cluster.log("scheduler")[-3000:])
        time.sleep(0.1)
    cluster.procs["scheduler"].kill()
    cluster.procs["scheduler"].wait()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the query hung after its scheduler was killed"
    assert errors and "Ballista cluster" in errors[0], errors
    # The front end keeps serving (a query that reads no Iceberg table runs locally).
    assert query(front.uri, "SELECT 41 + 1") == [(42,)]
    # The executors still run the orphaned tasks; SIGTERM stops them after the grace period.
    for name in executors:
        cluster.procs[name].send_signal(signal.SIGTERM)
    for name in executors:
        try:
            cluster.procs[name].wait(timeout=GRACE_SECS + 15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} ignored SIGTERM:\n{cluster.log(name)[-3000:]}")
    # The executors that ran the endless task waited out the grace period.
    for name in busy:
        assert "the executor stops anyway" in cluster.log(name), cluster.log(name)[-2000:]


def running_tasks(log: str) -> set[str]:
    """The task ids an executor's log shows received and not yet done."""
    received = set(re.findall(r"Received task: \[TID (\d+) ", log))
    return received - set(re.findall(r"Done with task TID (\d+) ", log))


def test_big_files_run_on_the_cluster(cluster, start_petrel, tmp_path):
    """Files over DataFusion's 10 MB repartition threshold: the scheduler must not split them
    into byte ranges its executors would not rebuild (every such query failed before). Writes
    never go to the cluster, even when they read an Iceberg table."""
    from pyiceberg.table import StaticTable
    import pyarrow.compute as pc

    front = start_petrel("--warehouse", str(tmp_path), "--engine", cluster.engine(),
                         "--cluster-min-bytes", "0")
    n = 2_000_000
    with flight_sql.connect(front.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA iceberg.db")
        cur.execute("CREATE TABLE iceberg.db.big AS SELECT value AS id, md5(CAST(value AS VARCHAR)) AS h "
                    f"FROM generate_series(1, {n})")
        cur.fetchall()
        # An INSERT reading the Iceberg table itself: a write, so it runs on the front end.
        cur.execute("INSERT INTO iceberg.db.big SELECT id, h FROM iceberg.db.big WHERE id <= 10")
        assert cur.fetchall() == [(10,)]
    assert front.log().count(SENT) == 0
    assert cluster.log("scheduler").count("job submitted") == 0
    files = list((tmp_path / "db" / "big" / "data").rglob("*.parquet"))
    assert files and max(f.stat().st_size for f in files) > 10 * 1024 * 1024, files
    # The model: ids 1..n once, 1..10 twice; 3 hex digits of md5 take all 4096 values.
    expected = [(n + 10, n * (n + 1) // 2 + 55, 4096)]
    rows = query(front.uri, "SELECT count(*), sum(id), count(DISTINCT substr(h, 1, 3)) FROM iceberg.db.big")
    assert rows == expected
    assert front.log().count(SENT) == 1
    # PyIceberg reads the same table (the metadata file the filesystem catalog's hint names).
    metadata = tmp_path / "db" / "big" / "metadata"
    version = (metadata / "version-hint.text").read_text().strip()
    arrow = StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json")).scan().to_arrow()
    assert [(arrow.num_rows, pc.sum(arrow["id"]).as_py(),
             len(pc.unique(pc.utf8_slice_codeunits(arrow["h"], 0, 3))))] == expected
