"""Apache Superset 6.1 over Petrel: add Petrel as a database, run a SQL Lab query and a chart
query (GROUP BY a day time grain, a time-range filter, ORDER BY a metric, LIMIT), all through
Superset's REST API, and compare the rows with a model of the table built from Spark's answers
(the corpus' `expected/v2_mor.json`).

Superset runs from its own virtualenv (scripts/setup-superset.sh: Superset, flightsql-dbapi's
`datafusion://` SQLAlchemy dialect, Petrel's engine spec from client-examples/superset, and a
metadata database made once per install), as `superset run` on 127.0.0.1 with a free port.
Skipped only when that virtualenv is missing and PETREL_REQUIRE_SUPERSET is unset
(scripts/test.sh sets it).
"""

import collections
import datetime as dt
import http.cookiejar
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import expected

VENV = Path(os.environ.get("PETREL_SUPERSET_VENV") or Path.home() / ".cache" / "petrel" / "superset-venv")
TEMPLATE = VENV / "petrel-metadata-template.db"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Superset:
    """A `superset run` process with a copy of the template metadata database, and a REST
    client logged in as admin (access token + CSRF token + session cookie)."""

    def __init__(self, scratch: Path):
        self.dir = scratch
        shutil.copy(TEMPLATE, scratch / "superset.db")
        (scratch / "superset_config.py").write_text(
            'SECRET_KEY = "petrel-superset-test"\n'
            f'SQLALCHEMY_DATABASE_URI = "sqlite:///{scratch / "superset.db"}"\n'
        )
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env.update(SUPERSET_CONFIG_PATH=str(scratch / "superset_config.py"),
                   SUPERSET_HOME=str(scratch), FLASK_APP="superset")
        self.log_path = scratch / "superset.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [str(VENV / "bin" / "superset"), "run", "-h", "127.0.0.1", "-p", str(self.port),
                 "--with-threads"],
                cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"superset exited: {self.log()}")
            try:
                with urllib.request.urlopen(f"{self.base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"superset did not start: {self.log()}")
            time.sleep(0.5)
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.token = None
        self.csrf = None
        status, login = self.call("POST", "/api/v1/security/login", {
            "username": "admin", "password": "admin", "provider": "db", "refresh": True})
        assert status == 200, login
        self.token = login["access_token"]
        status, csrf = self.call("GET", "/api/v1/security/csrf_token/")
        assert status == 200, csrf
        self.csrf = csrf["result"]

    def log(self) -> str:
        return self.log_path.read_text()[-5000:]

    def call(self, method: str, path: str, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, method=method, data=data)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if self.csrf:
            req.add_header("X-CSRFToken", self.csrf)
            req.add_header("Referer", self.base)
        try:
            with self.opener.open(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            body = e.read().decode()
            try:
                return e.code, json.loads(body)
            except ValueError:
                return e.code, body

    def ok(self, method: str, path: str, body=None, status=200):
        got, answer = self.call(method, path, body)
        assert got == status, f"{method} {path}: {got} {answer}\n{self.log()}"
        return answer

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def superset(tmp_path_factory):
    if not (VENV / "bin" / "superset").exists() or not TEMPLATE.exists():
        if os.environ.get("PETREL_REQUIRE_SUPERSET"):
            pytest.fail(f"Superset is not installed in {VENV}: run scripts/setup-superset.sh")
        pytest.skip(f"Superset is not installed in {VENV} (scripts/setup-superset.sh)")
    s = Superset(tmp_path_factory.mktemp("superset"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def v2_mor(corpus):
    """The rows of db.v2_mor as Spark reads them: (id, ts, name, amount)."""
    current = expected(corpus, "v2_mor")["current"]
    assert current["columns"] == ["id", "ts", "name", "amount"]
    return [(r[0], dt.datetime.fromisoformat(r[1]), r[2], r[3]) for r in current["rows"]]


def test_superset_adds_petrel_and_charts_it(superset, corpus_server, corpus, v2_mor):
    uri = f"datafusion://{corpus_server.addr}?insecure=true"
    assert superset.ok("POST", "/api/v1/database/test_connection/",
                       {"database_name": "petrel", "sqlalchemy_uri": uri}) == {"message": "OK"}
    db = superset.ok("POST", "/api/v1/database/", {
        "database_name": "petrel", "sqlalchemy_uri": uri, "expose_in_sqllab": True}, status=201)
    db_id = db["id"]
    assert db["result"]["driver"] == "flightsql"

    # What Superset's database browser lists (schemas, tables, a table's columns).
    tables = sorted(p.name for p in (corpus / "warehouse" / "db").iterdir() if p.is_dir())
    assert superset.ok("GET", f"/api/v1/database/{db_id}/schemas/")["result"] == ["db"]
    listed = superset.ok("GET", f"/api/v1/database/{db_id}/tables/?q=(schema_name:db)")
    assert sorted(t["value"] for t in listed["result"]) == tables
    meta = superset.ok("GET", f"/api/v1/database/{db_id}/table_metadata/?name=v2_mor&schema=db")
    assert [(c["name"], c["type"]) for c in meta["columns"]] == [
        ("id", "INTEGER"), ("ts", "TIMESTAMP"), ("name", "TEXT"), ("amount", "FLOAT")]

    # SQL Lab: Superset adds its own LIMIT to the statement.
    lab = superset.ok("POST", "/api/v1/sqllab/execute/", {
        "database_id": db_id, "schema": "db", "runAsync": False,
        "sql": 'SELECT "id", name, amount FROM db.v2_mor WHERE id BETWEEN 100 AND 120 ORDER BY id'})
    assert lab["status"] == "success", lab
    model = sorted((i, n, a) for i, _, n, a in v2_mor if 100 <= i <= 120)
    assert [(r["id"], r["name"], r["amount"]) for r in lab["data"]] == model
    assert len(model) == 19

    # A chart: daily totals from 2024-01-02 (inclusive) to 2024-01-05 (exclusive), largest
    # first, top 2 — GROUP BY date_trunc('day', ts), a time-range filter, ORDER BY, LIMIT.
    dataset = superset.ok("POST", "/api/v1/dataset/", {
        "database": db_id, "schema": "db", "table_name": "v2_mor"}, status=201)
    total = {"expressionType": "SIMPLE", "column": {"column_name": "amount"},
             "aggregate": "SUM", "label": "total"}
    chart = superset.ok("POST", "/api/v1/chart/data", {
        "datasource": {"id": dataset["id"], "type": "table"}, "force": True,
        "result_format": "json", "result_type": "full",
        "queries": [{
            "columns": [{"sqlExpression": "ts", "label": "day", "columnType": "BASE_AXIS",
                         "timeGrain": "P1D", "expressionType": "SQL"}],
            "metrics": [total, "count"],
            "filters": [{"col": "ts", "op": "TEMPORAL_RANGE",
                         "val": "2024-01-02T00:00:00 : 2024-01-05T00:00:00"}],
            "orderby": [[total, False]],
            "row_limit": 2,
        }]})
    result = chart["result"][0]
    assert result["status"] == "success", result
    query = result["query"]
    assert "date_trunc('day', ts)" in query and "LIMIT 2" in query, query
    assert "TIMESTAMP '2024-01-02 00:00:00.000000'" in query, query

    days = collections.defaultdict(lambda: [0.0, 0])
    lo = dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)
    hi = dt.datetime(2024, 1, 5, tzinfo=dt.timezone.utc)
    for _, ts, _, amount in v2_mor:
        if lo <= ts < hi:
            day = ts.replace(hour=0, minute=0, second=0, microsecond=0)
            days[day][0] += amount
            days[day][1] += 1
    top = sorted(days.items(), key=lambda kv: -kv[1][0])[:2]
    epoch_ms = lambda d: d.timestamp() * 1000  # noqa: E731  (Superset sends times as epoch ms)
    assert [(r["day"], r["total"], r["count"]) for r in result["data"]] == [
        (epoch_ms(day), t, n) for day, (t, n) in top]
    assert len(days) == 3 and len(result["data"]) == 2
