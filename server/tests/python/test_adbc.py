"""The real ADBC Flight SQL driver (adbc-driver-flightsql from PyPI) against `petrel`."""

import datetime
import json
import subprocess
import threading
import time
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pytest

from conftest import expected


def normalise(value):
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, float) and value == int(value):
        return float(value)
    return value


def canonical(rows):
    return sorted(json.dumps([normalise(v) for v in r], default=str) for r in rows)


@pytest.fixture
def conn(corpus_server):
    with flight_sql.connect(corpus_server.uri, autocommit=True) as c:
        yield c


def test_queries_match_spark(conn, corpus):
    exp = expected(corpus, "pyiceberg_cow")
    with conn.cursor() as cur:
        cur.execute("SELECT * FROM iceberg.db.pyiceberg_cow")
        table = cur.fetch_arrow_table()
        assert table.num_rows == exp["current"]["count"]
        assert table.column_names == exp["current"]["columns"]
        assert canonical(table.to_pylist() and [list(r.values()) for r in table.to_pylist()]) == canonical(
            exp["current"]["rows"]
        )
        for q in exp["queries"]:
            cur.execute(q["sql"])
            got = [list(r.values()) for r in cur.fetch_arrow_table().to_pylist()]
            assert canonical(got) == canonical(q["result"]["rows"]), q["sql"]


def test_time_travel_every_snapshot(conn, corpus):
    exp = expected(corpus, "pyiceberg_cow")
    with conn.cursor() as cur:
        for snap in exp["snapshots"]:
            cur.execute(f"SELECT count(*) FROM pyiceberg_cow FOR VERSION AS OF {snap['snapshot_id']}")
            assert cur.fetchone()[0] == snap["version_as_of"]["count"], snap
        for ref in exp["refs"]:
            cur.execute(f"SELECT count(*) FROM pyiceberg_cow VERSION AS OF '{ref['name']}'")
            assert cur.fetchone()[0] == ref["version_as_of"]["count"]


def test_every_corpus_table_and_snapshot(conn, corpus):
    """Every corpus table (merge-on-read included), current and at every snapshot, has the
    row count Spark saw."""
    index = json.loads((corpus / "index.json").read_text())
    with conn.cursor() as cur:
        for entry in index["tables"]:
            exp = expected(corpus, entry["table"])
            cur.execute(f"SELECT count(*) FROM {entry['table']}")
            assert cur.fetchone()[0] == exp["current"]["count"], entry["table"]
            for snap in exp["snapshots"]:
                sql = f"SELECT count(*) FROM {entry['table']} FOR VERSION AS OF {snap['snapshot_id']}"
                cur.execute(sql)
                assert cur.fetchone()[0] == snap["version_as_of"]["count"], sql


def test_prepared_statements_with_parameters(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT id, name FROM pyiceberg_cow WHERE id = ?", (105,))
        assert cur.fetchall() == [(105, "name_105")]
        cur.execute("SELECT id, name FROM pyiceberg_cow WHERE id = $1 OR name = $2 ORDER BY id", (105, "name_107"))
        assert cur.fetchall() == [(105, "name_105"), (107, "name_107")]
        # The same prepared statement re-executed with new values.
        cur.adbc_prepare("SELECT name FROM pyiceberg_cow WHERE id = ?")
        for i in (110, 111):
            cur.execute("SELECT name FROM pyiceberg_cow WHERE id = ?", (i,))
            assert cur.fetchone() == (f"name_{i}",)
        # Multi-row parameter batch: one execution per row, results concatenated.
        params = pa.record_batch([pa.array([120, 121, 122], pa.int64())], names=["0"])
        cur.execute("SELECT id FROM pyiceberg_cow WHERE id = ?", params)
        assert sorted(r[0] for r in cur.fetchall()) == [120, 121, 122]


def test_session_options_current_schema(corpus_server):
    # ADBC reads/sets the current catalog and schema through Get/SetSessionOptions; its Go
    # driver keeps no cookies, so the session follows the connection.
    with flight_sql.connect(corpus_server.uri, autocommit=True) as conn:
        assert conn.adbc_current_catalog == "iceberg"
        assert conn.adbc_current_db_schema == "db"
        conn.adbc_current_db_schema = "information_schema"
        assert conn.adbc_current_db_schema == "information_schema"
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM tables WHERE table_schema = 'db'")
            assert cur.fetchone() == (8,)
    # Another connection still has the server's defaults.
    with flight_sql.connect(corpus_server.uri, autocommit=True) as conn:
        assert conn.adbc_current_db_schema == "db"


def test_superset_bare_timestamps(conn):
    # flightsql-dbapi (Superset) sends time-range bounds unquoted.
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pyiceberg_cow WHERE ts >= 2024-01-02 00:00:00.000000 AND ts < 2024-01-03 00:00:00.000000"
        )
        assert cur.fetchone() == (582,)


def test_bad_parameters_and_sql(conn):
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.ProgrammingError, match="INVALID_ARGUMENT"):
            cur.execute("SELECT id FROM pyiceberg_cow WHERE id = ?", ("not a number",))
        with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT"):
            cur.execute("SELECT id FROM pyiceberg_cow WHERE id = ?", (1, 2))
        with pytest.raises(adbc_driver_manager.ProgrammingError, match="INVALID_ARGUMENT"):
            cur.execute("SELEC 1")
        with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND"):
            cur.execute("SELECT * FROM no_such_table")
        with pytest.raises(adbc_driver_manager.Error, match="CREATE EXTERNAL TABLE is not allowed"):
            cur.execute("CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'")
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)


def test_get_objects_table_schema_and_info(conn):
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "Petrel"
    assert info["vendor_arrow_version"].startswith("58")
    objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    catalogs = {c["catalog_name"]: c for c in objects}
    assert "iceberg" in catalogs
    schemas = {s["db_schema_name"]: s for s in catalogs["iceberg"]["catalog_db_schemas"]}
    tables = {t["table_name"]: t for t in schemas["db"]["db_schema_tables"]}
    assert "pyiceberg_cow" in tables and len(tables) == 8
    columns = [c["column_name"] for c in tables["pyiceberg_cow"]["table_columns"]]
    assert columns == ["id", "ts", "name", "amount", "extra"]
    # Filtered by pattern.
    objects = conn.adbc_get_objects(depth="tables", table_name_filter="v3%").read_all().to_pylist()
    names = sorted(t["table_name"] for c in objects for s in c["catalog_db_schemas"] for t in s["db_schema_tables"])
    assert names == ["v3_dv", "v3_eq_dv"]
    schema = conn.adbc_get_table_schema("pyiceberg_cow", catalog_filter="iceberg", db_schema_filter="db")
    assert schema.names == ["id", "ts", "name", "amount", "extra"]
    assert schema.field("id").type == pa.int64()
    assert schema.field("ts").type == pa.timestamp("us")
    assert conn.adbc_get_table_types() == ["METADATA TABLE", "TABLE", "VIEW"]


def test_cancellation(corpus_server):
    with flight_sql.connect(corpus_server.uri, autocommit=True) as c:
        cur = c.cursor()
        errors = []

        def run():
            try:
                cur.execute("SELECT count(*) FROM generate_series(1, 100000000000)")
                cur.fetchall()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(1.0)
        cur.adbc_cancel()
        t.join(timeout=30)
        assert not t.is_alive(), "the cancelled query returned"
        assert errors and "cancel" in str(errors[0]).lower(), errors
        cur.close()
    # The server keeps serving.
    with flight_sql.connect(corpus_server.uri, autocommit=True) as c, c.cursor() as cur:
        cur.execute("SELECT count(*) FROM pyiceberg_cow")
        assert cur.fetchone() == (2910,)


def test_auth(start_petrel):
    h = subprocess.run(
        [__import__("conftest").petrel_bin(), "hash-password", "--password", "s3cret"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    server = start_petrel("--user", f"alice:{h}")
    # No credentials.
    with pytest.raises(adbc_driver_manager.Error, match="UNAUTHENTICATED"):
        with flight_sql.connect(server.uri, autocommit=True) as c, c.cursor() as cur:
            cur.execute("SELECT 1")
    # Wrong password.
    with pytest.raises(adbc_driver_manager.Error, match="UNAUTHENTICATED|nauthenticated"):
        with flight_sql.connect(
            server.uri, db_kwargs={"username": "alice", "password": "wrong"}, autocommit=True
        ) as c, c.cursor() as cur:
            cur.execute("SELECT 1")
    with flight_sql.connect(
        server.uri, db_kwargs={"username": "alice", "password": "s3cret"}, autocommit=True
    ) as c, c.cursor() as cur:
        cur.execute("SELECT count(*) FROM seabirds")
        assert cur.fetchone() == (10,)


def make_tls(dir: Path):
    def run(*args):
        subprocess.run(["openssl", *args], cwd=dir, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=petrel-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")
    (dir / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "san.ext")


def test_tls(start_petrel, tmp_path):
    make_tls(tmp_path)
    server = start_petrel(
        "--tls-cert", str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server.key"), tls=True
    )
    with flight_sql.connect(
        server.uri,
        db_kwargs={
            adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: (tmp_path / "ca.pem").read_text(),
        },
        autocommit=True,
    ) as c, c.cursor() as cur:
        cur.execute("SELECT species FROM seabirds WHERE id = 2")
        assert cur.fetchone() == ("Storm petrel",)
    # Without trusting the CA the connection fails.
    with pytest.raises(adbc_driver_manager.Error):
        with flight_sql.connect(server.uri, autocommit=True) as c, c.cursor() as cur:
            cur.execute("SELECT 1")
