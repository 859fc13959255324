"""Spark's DDL for Iceberg tables through the real ADBC Flight SQL driver: CREATE SCHEMA,
CREATE TABLE with PARTITIONED BY transforms and TBLPROPERTIES, INSERT, CREATE TABLE AS SELECT,
DROP TABLE / SCHEMA; what Petrel created is read back by PyIceberg; mistakes are named and
create nothing; `--read-only` refuses DDL."""

import glob
import json

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pytest
from pyiceberg.table import StaticTable


def current_metadata(table_dir):
    files = glob.glob(f"{table_dir}/metadata/v*.metadata.json")
    return max(files, key=lambda p: int(p.rsplit("/v", 1)[1].split(".")[0]))


def test_create_insert_ctas_and_drop(tmp_path, start_petrel):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse))
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA iceberg.sales")
        assert cur.fetchall() == [(0,)]
        cur.execute(
            "CREATE TABLE iceberg.sales.orders (id BIGINT NOT NULL, customer STRING, ts TIMESTAMP, "
            "PRIMARY KEY (id)) USING iceberg PARTITIONED BY (days(ts), bucket(4, id)) "
            "TBLPROPERTIES ('format-version' = '2', 'write.target-file-size-bytes' = '1048576')"
        )
        cur.fetchall()
        cur.execute(
            "INSERT INTO iceberg.sales.orders VALUES "
            "(1, 'ann', TIMESTAMP '2024-03-01 10:00:00'), (2, 'bo', TIMESTAMP '2024-03-02 11:00:00'), "
            "(3, NULL, NULL)"
        )
        assert cur.fetchall() == [(3,)]
        cur.execute("CREATE TABLE iceberg.sales.named PARTITIONED BY (customer) AS "
                    "SELECT id, customer FROM iceberg.sales.orders WHERE customer IS NOT NULL")
        assert cur.fetchall() == [(2,)]
        cur.execute("SELECT id, customer FROM iceberg.sales.named ORDER BY id")
        assert cur.fetchall() == [(1, "ann"), (2, "bo")]

        # PyIceberg reads what Petrel created and wrote.
        static = StaticTable.from_metadata(current_metadata(warehouse / "sales" / "orders"))
        assert sorted((r["id"], r["customer"]) for r in static.scan().to_arrow().to_pylist()) == [
            (1, "ann"), (2, "bo"), (3, None)]
        assert [f.name for f in static.spec().fields] == ["ts_day", "id_bucket"]
        assert static.schema().identifier_field_names() == {"id"}
        assert static.properties["write.delete.mode"] == "merge-on-read"

        # Mistakes are named and create nothing.
        for sql, expected in [
            ("CREATE TABLE iceberg.sales.orders (a INT)", "already exists"),
            ("CREATE TABLE iceberg.sales.bad (d DOUBLE) PARTITIONED BY (bucket(4, d))", "bucket"),
            ("CREATE TABLE iceberg.sales.bad (a FOO)", "unknown column type FOO"),
            ("CREATE TABLE iceberg.sales.bad AS SELECT 1 AS a; DROP TABLE iceberg.sales.orders",
             "single SQL statement"),
            ("CREATE TABLE iceberg.sales.bad AS COPY (SELECT 1) TO '/tmp/x.csv'", "write refused"),
        ]:
            with pytest.raises(adbc_driver_manager.Error) as err:
                cur.execute(sql)
                cur.fetchall()
            assert expected in str(err.value), (sql, str(err.value))
        assert not (warehouse / "sales" / "bad").exists()

        cur.execute("DROP TABLE iceberg.sales.named PURGE")
        cur.fetchall()
        cur.execute("DROP TABLE iceberg.sales.orders")
        cur.fetchall()
        cur.execute("DROP SCHEMA iceberg.sales")
        cur.fetchall()
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'sales'")
        assert cur.fetchall() == [(0,)]


def test_read_only_refuses_ddl(tmp_path, start_petrel):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse), "--read-only")
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("CREATE SCHEMA iceberg.s")
            cur.fetchall()
        assert "read-only" in str(err.value)
        with pytest.raises(adbc_driver_manager.Error, match="read-only"):
            cur.execute("CREATE OR REPLACE TABLE iceberg.s.t AS SELECT 1 AS x")
    assert list(warehouse.iterdir()) == []


def test_embedded_default_creates_tables_beside_the_demo(tmp_path, start_petrel):
    server = start_petrel(cwd=str(tmp_path))
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE sightings (species STRING, n INT) PARTITIONED BY (species)")
        cur.fetchall()
        cur.execute("INSERT INTO sightings SELECT species, 1 FROM seabirds")
        inserted = cur.fetchall()[0][0]
        assert inserted > 0
        cur.execute("SELECT count(*) FROM petrel.demo.sightings")
        assert cur.fetchall() == [(inserted,)]
    assert (tmp_path / "petrel-warehouse" / "demo" / "sightings" / "metadata").is_dir()


def test_create_or_replace_table_keeps_history(tmp_path, start_petrel):
    """`CREATE OR REPLACE TABLE … AS SELECT` over Flight SQL: one commit on the same table (uuid,
    older snapshots kept), the new schema and spec current, PyIceberg reading the new rows now
    and the old rows at the old snapshot; `REPLACE TABLE` of a missing table is named."""
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse))
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        for sql in [
            "CREATE SCHEMA iceberg.db",
            "CREATE TABLE iceberg.db.t (id BIGINT, name STRING)",
            "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b')",
        ]:
            cur.execute(sql)
            cur.fetchall()
        before = StaticTable.from_metadata(current_metadata(warehouse / "db" / "t"))
        old_snapshot = before.current_snapshot().snapshot_id
        cur.execute("CREATE OR REPLACE TABLE iceberg.db.t PARTITIONED BY (tag) AS "
                    "SELECT upper(name) AS tag, id * 10 AS id FROM iceberg.db.t")
        assert cur.fetchall() == [(2,)]
        cur.execute("SELECT tag, id FROM iceberg.db.t ORDER BY id")
        assert cur.fetchall() == [("A", 10), ("B", 20)]
        cur.execute(f"SELECT * FROM iceberg.db.t FOR VERSION AS OF {old_snapshot} ORDER BY id")
        assert cur.fetchall() == [(1, "a"), (2, "b")]
        with pytest.raises(adbc_driver_manager.Error, match="does not exist"):
            cur.execute("REPLACE TABLE iceberg.db.missing AS SELECT 1 AS x")
    after = StaticTable.from_metadata(current_metadata(warehouse / "db" / "t"))
    assert after.metadata.table_uuid == before.metadata.table_uuid
    assert [(f.name, f.field_id) for f in after.schema().fields] == [("tag", 3), ("id", 1)]
    assert [f.name for f in after.spec().fields] == ["tag"]
    assert sorted(r["id"] for r in after.scan().to_arrow().to_pylist()) == [10, 20]
    assert sorted(r["id"] for r in after.scan(snapshot_id=old_snapshot).to_arrow().to_pylist()) == [1, 2]
    assert len(after.metadata.snapshots) == 2
    assert not (warehouse / "db" / "missing").exists()
