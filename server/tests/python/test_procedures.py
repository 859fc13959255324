"""Spark's maintenance procedures and branch / tag statements through the real ADBC Flight SQL
driver: `CALL iceberg.system.…` returns the procedure's rows with Spark's column names
(rollback_to_snapshot, expire_snapshots, remove_orphan_files), `ALTER TABLE … CREATE BRANCH`
and an INSERT into `t.branch_b` move only that branch; `--read-only` refuses a CALL."""

import json

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pytest


def test_procedures_and_branches_over_flight_sql(tmp_path, start_petrel):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse))
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA iceberg.db")
        cur.fetchall()
        cur.execute("CREATE TABLE iceberg.db.t (id BIGINT) TBLPROPERTIES ('format-version' = '2')")
        cur.fetchall()
        for i in (1, 2, 3):
            cur.execute(f"INSERT INTO iceberg.db.t VALUES ({i})")
            assert cur.fetchall() == [(1,)]
        meta = sorted((warehouse / "db" / "t" / "metadata").glob("snap-*.avro"))
        assert len(meta) == 3

        cur.execute("ALTER TABLE iceberg.db.t CREATE BRANCH audit")
        assert cur.fetchall() == [(0,)]
        cur.execute("INSERT INTO iceberg.db.t.branch_audit VALUES (10)")
        assert cur.fetchall() == [(1,)]
        cur.execute("SELECT id FROM iceberg.db.t.branch_audit ORDER BY id")
        assert cur.fetchall() == [(1,), (2,), (3,), (10,)]
        cur.execute("SELECT id FROM iceberg.db.t ORDER BY id")
        assert cur.fetchall() == [(1,), (2,), (3,)]

        # The first and last snapshots of main, from the metadata file Petrel wrote.
        versions = sorted((warehouse / "db" / "t" / "metadata").glob("v*.metadata.json"),
                          key=lambda p: int(p.name[1:].split(".")[0]))
        md = json.loads(versions[-1].read_text())
        main_chain, at = [], md["current-snapshot-id"]
        by_id = {s["snapshot-id"]: s for s in md["snapshots"]}
        while at is not None:
            main_chain.append(at)
            at = by_id[at].get("parent-snapshot-id")
        s3, s1 = main_chain[0], main_chain[-1]

        cur.execute(f"CALL iceberg.system.rollback_to_snapshot(table => 'db.t', snapshot_id => {s1})")
        assert [d[0] for d in cur.description] == ["previous_snapshot_id", "current_snapshot_id"]
        assert cur.fetchall() == [(s3, s1)]
        cur.execute("SELECT id FROM iceberg.db.t")
        assert cur.fetchall() == [(1,)]

        cur.execute("CALL iceberg.system.expire_snapshots('db.t', TIMESTAMP '2000-01-01 00:00:00')")
        assert [d[0] for d in cur.description] == [
            "deleted_data_files_count", "deleted_position_delete_files_count",
            "deleted_equality_delete_files_count", "deleted_manifest_files_count",
            "deleted_manifest_lists_count", "deleted_statistics_files_count"]
        assert cur.fetchall() == [(0, 0, 0, 0, 0, 0)]

        cur.execute("CALL iceberg.system.remove_orphan_files(table => 'db.t', dry_run => true)")
        assert [d[0] for d in cur.description] == ["orphan_file_location"]
        assert cur.fetchall() == []

        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("CALL iceberg.system.rollback_to_snapshot(table => 'db.t')")
            cur.fetchall()
        assert "missing required argument snapshot_id" in str(err.value)


def test_read_only_refuses_call(tmp_path, start_petrel):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse), "--read-only")
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("CALL iceberg.system.expire_snapshots(table => 'db.t')")
            cur.fetchall()
        assert "read-only" in str(err.value)
