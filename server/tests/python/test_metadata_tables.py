"""Metadata tables (`t$files`, Spark's `t.files`) through the real ADBC Flight SQL driver against
`petrel` serving the fixture corpus: read as queries in both namings, checked against what Spark
3.5 + Iceberg 1.10 recorded beside the tables (`expected/<table>.json`); listed by GetTables only
under their own table type `METADATA TABLE`; refused as write targets (INSERT, DELETE, UPDATE) and,
for those describing the whole table, for time travel."""

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pytest

from conftest import expected

KINDS = ["snapshots", "history", "refs", "metadata_log_entries", "manifests", "all_manifests",
         "files", "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files",
         "entries", "all_entries", "partitions", "position_deletes"]
# Spark's `files` columns for a partitioned table (its schema, recorded from Spark 3.5 + Iceberg 1.10).
FILES_COLUMNS = ["content", "file_path", "file_format", "spec_id", "partition", "record_count",
                 "file_size_in_bytes", "column_sizes", "value_counts", "null_value_counts",
                 "nan_value_counts", "lower_bounds", "upper_bounds", "key_metadata", "split_offsets",
                 "equality_ids", "sort_order_id", "first_row_id", "referenced_data_file",
                 "content_offset", "content_size_in_bytes", "readable_metrics"]


@pytest.fixture
def conn(corpus_server):
    with flight_sql.connect(corpus_server.uri, autocommit=True) as c:
        yield c


def test_files_in_both_namings(conn, corpus):
    want = expected(corpus, "v3_dv")
    cur = conn.cursor()
    for name in ['iceberg.db."v3_dv$files"', "iceberg.db.v3_dv.files"]:
        cur.execute(f"SELECT * FROM {name}")
        table = cur.fetch_arrow_table()
        assert table.column_names == FILES_COLUMNS, name
        assert table.num_rows == want["data_files"] + len(want["delete_files"]), name
    cur.execute("SELECT content, file_format, spec_id, equality_ids, record_count, referenced_data_file, "
                "content_offset, content_size_in_bytes FROM iceberg.db.\"v3_dv$delete_files\"")
    rows = sorted(cur.fetchall(), key=str)
    recorded = sorted((tuple(d.values()) for d in want["delete_files"]), key=str)
    assert [tuple(r) for r in rows] == recorded
    cur.execute("SELECT snapshot_id, parent_id, operation FROM iceberg.db.v3_dv.snapshots")
    assert sorted(cur.fetchall()) == sorted(
        (s["snapshot_id"], s["parent_id"], s["operation"]) for s in want["snapshots"])
    cur.close()


def test_get_tables_lists_metadata_tables_only_when_asked(conn, corpus):
    tables = sorted(t for t in (p.name for p in (corpus / "warehouse" / "db").iterdir()))
    objects = conn.adbc_get_objects(depth="tables", table_types_filter=["METADATA TABLE"]).read_all().to_pylist()
    names = sorted(t["table_name"] for c in objects for s in c["catalog_db_schemas"] or []
                   for t in s["db_schema_tables"] or [])
    assert names == sorted(f"{t}${k}" for t in tables for k in KINDS)
    types = {t["table_type"] for c in objects for s in c["catalog_db_schemas"] or []
             for t in s["db_schema_tables"] or []}
    assert types == {"METADATA TABLE"}
    # Not by default.
    objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    names = [t["table_name"] for c in objects for s in c["catalog_db_schemas"] or [] for t in s["db_schema_tables"] or []]
    assert not [n for n in names if "$" in n]
    # Columns through GetTables' include_schema (ADBC's get_table_schema asks GetTables without
    # a table type, so it sees only tables).
    objects = conn.adbc_get_objects(depth="all", table_name_filter="v3_dv$snapshots",
                                    table_types_filter=["METADATA TABLE"]).read_all().to_pylist()
    found = [t for c in objects for s in c["catalog_db_schemas"] or [] for t in s["db_schema_tables"] or []]
    assert [t["table_name"] for t in found] == ["v3_dv$snapshots"]
    assert [c["column_name"] for c in found[0]["table_columns"]] == [
        "committed_at", "snapshot_id", "parent_id", "operation", "manifest_list", "summary"]


def test_metadata_tables_are_read_only(conn):
    cur = conn.cursor()
    for sql, refused in [
        ('INSERT INTO iceberg.db."v3_dv$snapshots" SELECT * FROM iceberg.db."v3_dv$snapshots"',
         "INSERT into iceberg.db.v3_dv$snapshots"),
        ("DELETE FROM iceberg.db.v3_dv.files WHERE record_count > 0", "DELETE from iceberg.db.v3_dv$files"),
        ('DELETE FROM iceberg.db."v3_dv$snapshots"', "DELETE from iceberg.db.v3_dv$snapshots"),
        ("UPDATE iceberg.db.v3_dv.entries SET status = 0", "UPDATE of iceberg.db.v3_dv$entries"),
    ]:
        with pytest.raises(adbc_driver_manager.ProgrammingError) as error:
            cur.execute(sql)
            cur.fetchall()
        assert str(error.value) == (
            f"UNAUTHORIZED: [FlightSQL] {refused} is not allowed: metadata tables ($snapshots, $files, …) "
            "are read-only (PermissionDenied; Prepare)"), sql
    cur.close()


def test_whole_table_metadata_tables_refuse_time_travel(conn, corpus):
    first = expected(corpus, "v3_dv")["snapshots"][0]
    snapshot = first["snapshot_id"]
    cur = conn.cursor()
    for meta in ["snapshots", "history", "refs", "metadata_log_entries", "all_manifests", "all_files",
                 "all_data_files", "all_delete_files", "all_entries"]:
        for sql in [f"SELECT * FROM iceberg.db.v3_dv.{meta} VERSION AS OF {snapshot}",
                    f'SELECT * FROM iceberg.db."v3_dv${meta}" FOR VERSION AS OF {snapshot}']:
            with pytest.raises(adbc_driver_manager.Error) as error:
                cur.execute(sql)
                cur.fetchall()
            assert str(error.value) == (
                f"INVALID_ARGUMENT: [FlightSQL] invalid argument: metadata table db.v3_dv${meta} describes "
                f"the whole table and cannot be read at a snapshot (snapshot {snapshot}); time travel "
                "applies to manifests, files, data_files, delete_files, entries, partitions and "
                "position_deletes (InvalidArgument; Prepare)"), sql
    # The snapshot-scoped ones take it: the first snapshot's files, as its summary counts them.
    cur.execute(f"SELECT count(*) FROM iceberg.db.v3_dv.files VERSION AS OF {snapshot}")
    assert cur.fetchall() == [(int(first["summary"]["total-data-files"]),)]
    cur.close()
