"""Bulk ingest (`CommandStatementIngest`) through the real ADBC Flight SQL driver's
`cursor.adbc_ingest`: every mode (create, append, replace, create_append) on a SQLite SQL
catalog and a filesystem warehouse, the failures ADBC users meet (create on an existing table,
append to a missing one, schema mismatches: error, nothing committed, no files left), many
types, a 200,000-row upload in 20 batches through a RecordBatchReader, each read back exactly
through Petrel and through PyIceberg; `--read-only` refuses ingest, and GetSqlInfo tells the
truth about ingest and DDL in both modes."""

import datetime as dt
import decimal
import glob
import os

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import StaticTable

from conftest import read_back
from flight_sql_commands import bytes_field, do_put_ingest, packed, statement_ingest, varint
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)


@pytest.fixture
def lake(tmp_path, start_petrel):
    """(catalog, start(*extra_args) -> server) over a fresh SQL catalog `lake` with namespace
    `w` (the server's default catalog and schema)."""
    db = tmp_path / "catalog.db"
    catalog = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("w")
    config = tmp_path / "petrel.toml"
    config.write_text(
        'default_catalog = "lake"\ndefault_schema = "w"\n'
        f'[[catalog]]\nname = "lake"\ntype = "sql"\npath = "{db}"\nwarehouse = "file://{tmp_path}"\n'
    )

    def start(*extra):
        return start_petrel("--config", str(config), *extra)

    return catalog, start


def connect(server):
    return flight_sql.connect(server.uri, autocommit=True)


def ingest(cur, name, data, mode, **names):
    names.setdefault("catalog_name", "lake")
    names.setdefault("db_schema_name", "w")
    return cur.adbc_ingest(name, data, mode=mode, **names)


def petrel_rows(cur, table, order="id"):
    cur.execute(f"SELECT * FROM {table} ORDER BY {order}")
    return cur.fetch_arrow_table().to_pylist()


def iceberg_rows(catalog, name, key="id"):
    table = catalog.load_table(name)
    rows = table.scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r[key]), len(table.metadata.snapshots)


def files_under(path):
    return sorted(p for p in glob.glob(f"{path}/**", recursive=True) if os.path.isfile(p))


SIMPLE = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", None, "c"]})


def test_create_many_types_read_back_by_petrel_and_pyiceberg(lake):
    catalog, start = lake
    server = start()
    utc = dt.timezone.utc
    ny = "America/New_York"
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "i8": pa.array([-128, 127, None], pa.int8()),
            "i16": pa.array([-32768, 32767, 0], pa.int16()),
            "i32": pa.array([-(2**31), 2**31 - 1, None], pa.int32()),
            "u32": pa.array([0, 2**32 - 1, 7], pa.uint32()),
            "f32": pa.array([1.5, -2.25, None], pa.float32()),
            "f64": pa.array([0.1, float("-inf"), 1e300], pa.float64()),
            "s": pa.array(["héllo", "", None], pa.string()),
            "ls": pa.array(["large", None, "z" * 100], pa.large_string()),
            "b": pa.array([b"\x00\x01", b"", None], pa.binary()),
            "flag": pa.array([True, False, None], pa.bool_()),
            "d": pa.array([dt.date(1970, 1, 1), dt.date(2024, 2, 29), None], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 3, 1, 10, 0, 0, 123456), None, dt.datetime(1900, 1, 1)],
                pa.timestamp("us"),
            ),
            "tstz": pa.array(
                [dt.datetime(2024, 3, 1, 10, 0, tzinfo=utc), None, dt.datetime(2000, 6, 1, tzinfo=utc)],
                pa.timestamp("us", tz="UTC"),
            ),
            "ts_ns": pa.array([1_700_000_000_123_456_000, None, 0], pa.timestamp("ns")),
            "ts_ny": pa.array(
                [dt.datetime(2024, 7, 1, 12, 0, tzinfo=utc), None, None], pa.timestamp("us", tz=ny)
            ),
            "dec": pa.array(
                [decimal.Decimal("12345678.90"), decimal.Decimal("-0.01"), None], pa.decimal128(10, 2)
            ),
        }
    )
    with connect(server) as conn, conn.cursor() as cur:
        assert ingest(cur, "types", data, "create") == 3
        got = petrel_rows(cur, "lake.w.types")
    expected = data.to_pylist()
    # Iceberg has one timestamp unit: nanoseconds become microseconds (these are exact).
    ts_ns = [dt.datetime(2023, 11, 14, 22, 13, 20, 123456), None, dt.datetime(1970, 1, 1)]
    for row, value in zip(expected, ts_ns):
        row["ts_ns"] = value
    assert got == expected

    table = catalog.load_table("w.types")
    assert table.metadata.format_version == 2
    assert table.properties["write.delete.mode"] == "merge-on-read"
    assert table.properties["write.parquet.compression-codec"] == "zstd"
    assert len(table.metadata.snapshots) == 1
    assert table.spec().is_unpartitioned()
    types = {f.name: f.field_type for f in table.schema().fields}
    assert types == {
        "id": LongType(),
        "i8": IntegerType(),
        "i16": IntegerType(),
        "i32": IntegerType(),
        "u32": LongType(),
        "f32": FloatType(),
        "f64": DoubleType(),
        "s": StringType(),
        "ls": StringType(),
        "b": BinaryType(),
        "flag": BooleanType(),
        "d": DateType(),
        "ts": TimestampType(),
        "tstz": TimestamptzType(),
        "ts_ns": TimestampType(),
        "ts_ny": TimestamptzType(),
        "dec": DecimalType(10, 2),
    }
    assert [f.field_id for f in table.schema().fields] == list(range(1, 18))
    rows, snapshots = iceberg_rows(catalog, "w.types")
    assert snapshots == 1
    assert rows == expected


def test_every_mode_on_the_sql_catalog(lake):
    catalog, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        # create, then create again: refused, nothing changes.
        assert ingest(cur, "t", SIMPLE, "create") == 3
        with pytest.raises(adbc_driver_manager.Error, match="already exists"):
            ingest(cur, "t", SIMPLE, "create")
        assert iceberg_rows(catalog, "w.t")[1] == 1

        # append: columns by name in any order, types cast as INSERT casts, an optional
        # column left out is NULL.
        more = pa.table({"name": ["d", "e"], "id": pa.array([4, 5], pa.int32())})
        assert ingest(cur, "t", more, "append") == 2
        assert ingest(cur, "t", pa.table({"ID": pa.array([6], pa.int16())}), "append") == 1

        # create_append: appends to an existing table, creates a missing one.
        assert ingest(cur, "t", pa.table({"id": [7], "name": ["g"]}), "create_append") == 1
        assert ingest(cur, "u", pa.table({"k": ["x", "y"]}), "create_append") == 2

        expected = [
            {"id": 1, "name": "a"}, {"id": 2, "name": None}, {"id": 3, "name": "c"},
            {"id": 4, "name": "d"}, {"id": 5, "name": "e"}, {"id": 6, "name": None},
            {"id": 7, "name": "g"},
        ]
        assert petrel_rows(cur, "lake.w.t") == expected
        assert iceberg_rows(catalog, "w.t") == (expected, 4), "one snapshot per ingest"
        assert iceberg_rows(catalog, "w.u", key="k") == ([{"k": "x"}, {"k": "y"}], 1)

        # append to a missing table: refused, and nothing is created.
        with pytest.raises(adbc_driver_manager.Error, match="does not exist"):
            ingest(cur, "missing", SIMPLE, "append")
        assert ("w", "missing") not in catalog.list_tables("w")

        # replace: the upload's schema and rows only, in one more snapshot of the same table.
        table_dir = catalog.load_table("w.t").location().removeprefix("file://")
        old_files = [f for f in files_under(table_dir) if f.endswith(".parquet")]
        replacement = pa.table({"id": pa.array([10, 11], pa.int64()), "score": [0.5, None]})
        assert ingest(cur, "t", replacement, "replace") == 2
        assert petrel_rows(cur, "lake.w.t") == [{"id": 10, "score": 0.5}, {"id": 11, "score": None}]
        rows, snapshots = iceberg_rows(catalog, "w.t")
        assert rows == [{"id": 10, "score": 0.5}, {"id": 11, "score": None}]
        assert snapshots == 5
        assert [f.name for f in catalog.load_table("w.t").schema().fields] == ["id", "score"]
        # The older snapshots still reference the old data files.
        assert old_files and all(os.path.exists(f) for f in old_files)

        # replace of a missing table creates it.
        assert ingest(cur, "v", SIMPLE, "replace") == 3
        assert iceberg_rows(catalog, "w.v") == (SIMPLE.to_pylist(), 1)


def test_session_defaults_and_names(lake):
    catalog, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        # No catalog or schema named: the session's defaults (lake.w).
        assert cur.adbc_ingest("plain", SIMPLE, mode="create") == 3
        assert iceberg_rows(catalog, "w.plain") == (SIMPLE.to_pylist(), 1)
        # A table name that needs quoting in SQL is taken as it is.
        assert ingest(cur, "Mixed Case-name", SIMPLE, "create") == 3
        cur.execute('SELECT count(*) FROM lake.w."Mixed Case-name"')
        assert cur.fetchall() == [(3,)]
        # An unknown namespace or catalog is named.
        with pytest.raises(adbc_driver_manager.Error, match="nope does not exist"):
            ingest(cur, "t", SIMPLE, "create", db_schema_name="nope")
        with pytest.raises(adbc_driver_manager.Error, match="catalog other does not exist"):
            ingest(cur, "t", SIMPLE, "create", catalog_name="other")
        with pytest.raises(adbc_driver_manager.Error, match="temporary"):
            cur.adbc_ingest("tmp", SIMPLE, mode="create", temporary=True)
    assert sorted(t[1] for t in catalog.list_tables("w")) == ["Mixed Case-name", "plain"]


@pytest.mark.parametrize(
    "upload, message",
    [
        (pa.table({"id": [1], "name": ["a"], "extra": [1]}), "column extra is not a column of the table"),
        (pa.table({"name": ["a"]}), "no column id, which the table requires"),
        (pa.table({"id": pa.array([[1]], pa.list_(pa.int64())), "name": ["a"]}),
         "column id is List(.*) in the upload and cannot be cast"),
        (pa.table({"id": ["not a number"], "name": ["a"]}), "(?i)cast"),
        (pa.table({"id": pa.array([None], pa.int64()), "name": ["a"]}), "(?i)null"),
    ],
    ids=["unknown-column", "missing-required", "uncastable-type", "bad-value", "null-in-required"],
)
def test_append_mismatch_commits_nothing(lake, upload, message):
    catalog, start = lake
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType(), required=False),
    )
    catalog.create_table("w.strict", schema=schema)
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        assert ingest(cur, "strict", pa.table({"id": [1], "name": ["ok"]}), "append") == 1
        location = catalog.load_table("w.strict").location().removeprefix("file://")
        before = files_under(location)
        with pytest.raises(adbc_driver_manager.Error, match=message) as err:
            ingest(cur, "strict", upload, "append")
        assert "lake.w.strict" in str(err.value)
        assert petrel_rows(cur, "lake.w.strict") == [{"id": 1, "name": "ok"}]
    assert iceberg_rows(catalog, "w.strict") == ([{"id": 1, "name": "ok"}], 1)
    assert files_under(location) == before, "no files left behind"


def test_failed_create_leaves_no_table(lake, tmp_path):
    catalog, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        # UInt64 has no Iceberg type: refused before anything is created.
        with pytest.raises(adbc_driver_manager.Error, match="column u: Arrow type UInt64 has no Iceberg type"):
            ingest(cur, "bad", pa.table({"u": pa.array([1], pa.uint64())}), "create")
        # A replace whose upload cannot become a table keeps the old table.
        assert ingest(cur, "keep", SIMPLE, "create") == 3
        with pytest.raises(adbc_driver_manager.Error, match="UInt64 has no Iceberg type"):
            ingest(cur, "keep", pa.table({"u": pa.array([1], pa.uint64())}), "replace")
        assert petrel_rows(cur, "lake.w.keep") == SIMPLE.to_pylist()
    assert sorted(t[1] for t in catalog.list_tables("w")) == ["keep"]
    assert not (tmp_path / "w" / "bad").exists() and not (tmp_path / "w.db" / "bad").exists()



def test_failed_write_after_create_drops_the_new_table(lake, tmp_path):
    """A write that fails after its table was created (a null in a NOT NULL column) leaves no
    table and no files; a replace that fails the same way leaves the old table as it was."""
    catalog, start = lake
    server = start()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])

    def bad():
        # The first batch is fine (the table gets created), the second has a null.
        good = pa.record_batch([pa.array([1], pa.int64()), pa.array(["a"])], schema=schema)
        null = pa.record_batch([pa.array([None], pa.int64()), pa.array(["b"])], schema=schema)
        return pa.RecordBatchReader.from_batches(schema, iter([good, null]))

    with connect(server) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="(?i)null") as err:
            ingest(cur, "fresh", bad(), "create")
        assert "lake.w.fresh" in str(err.value)
        assert ingest(cur, "old", SIMPLE, "create") == 3
        location = catalog.load_table("w.old").location().removeprefix("file://")
        before = files_under(location)
        with pytest.raises(adbc_driver_manager.Error, match="(?i)null"):
            ingest(cur, "old", bad(), "replace")
        assert petrel_rows(cur, "lake.w.old") == SIMPLE.to_pylist()
    assert sorted(t[1] for t in catalog.list_tables("w")) == ["old"]
    assert files_under(tmp_path / "w" / "fresh") == []
    assert files_under(location) == before

def old_table_state(catalog, name):
    """What a failed replace must leave unchanged: metadata file, uuid, snapshots, schema."""
    table = catalog.load_table(name)
    return (
        table.metadata_location,
        str(table.metadata.table_uuid),
        [s.snapshot_id for s in table.metadata.snapshots],
        table.schema().model_dump_json(),
    )


def test_replace_keeps_identity_and_history(lake):
    """`replace` with a different schema is one commit on the same table, as Iceberg's REPLACE
    TABLE AS SELECT: the new schema and rows are current for Petrel and PyIceberg, the uuid,
    location and older snapshots stay, and time travel to an old snapshot reads its rows with
    its schema. The model of the field ids is Iceberg Java's `buildReplacement`
    (`TypeUtil.assignFreshIds`): a name of the current schema keeps its id, new names get ids
    above `last-column-id`."""
    catalog, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        assert ingest(cur, "r", SIMPLE, "create") == 3
        assert ingest(cur, "r", pa.table({"id": pa.array([4], pa.int64()), "name": ["d"]}),
                      "append") == 1
        before = catalog.load_table("w.r")
        old_ids = [h.snapshot_id for h in before.history()]
        first, second = old_ids
        assert before.metadata.last_column_id == 2

        replacement = pa.table({
            "code": ["x", "y"],
            "id": pa.array([10, 11], pa.int64()),
            "score": pa.array([0.5, None], pa.float64()),
        })
        assert ingest(cur, "r", replacement, "replace") == 2
        expected = replacement.to_pylist()
        assert petrel_rows(cur, "lake.w.r") == expected
        cur.execute("SELECT * FROM lake.w.r ORDER BY id")
        assert cur.fetch_arrow_table().schema.names == ["code", "id", "score"]

        after = catalog.load_table("w.r")
        assert sorted(after.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
        assert [(f.name, f.field_id) for f in after.schema().fields] == [
            ("code", 3), ("id", 1), ("score", 4)]
        assert after.metadata.last_column_id == 4
        assert after.schema().schema_id == 1
        assert sorted(s.schema_id for s in after.metadata.schemas) == [0, 1]
        assert after.metadata.default_spec_id == 0 and list(after.spec().fields) == []
        # Same table: uuid, location, properties; one more metadata version logged.
        assert after.metadata.table_uuid == before.metadata.table_uuid
        assert after.location() == before.location()
        assert after.properties == before.properties
        assert before.metadata_location in [m.metadata_file for m in after.metadata.metadata_log]
        # History: the old snapshots, then the new one, which has no parent.
        snapshots = after.metadata.snapshots
        assert set(old_ids) < {s.snapshot_id for s in snapshots} and len(snapshots) == 3
        current = after.current_snapshot()
        assert current.snapshot_id not in old_ids
        assert current.parent_snapshot_id is None
        assert current.schema_id == 1
        assert current.summary["total-records"] == "2"
        assert current.summary["added-records"] == "2"
        assert [h.snapshot_id for h in after.history()] == [first, second, current.snapshot_id]

        # Time travel to the old snapshots: their rows, with their schema.
        cur.execute(f"SELECT * FROM lake.w.r FOR VERSION AS OF {second} ORDER BY id")
        assert cur.fetch_arrow_table().to_pylist() == SIMPLE.to_pylist() + [{"id": 4, "name": "d"}]
        cur.execute(f"SELECT * FROM lake.w.r FOR VERSION AS OF {first} ORDER BY id")
        assert cur.fetch_arrow_table().to_pylist() == SIMPLE.to_pylist()
        old = after.scan(snapshot_id=second).to_arrow().to_pylist()
        assert sorted(old, key=lambda r: r["id"]) == SIMPLE.to_pylist() + [{"id": 4, "name": "d"}]

        # Appending to the replaced table goes on from the new snapshot.
        assert ingest(cur, "r", pa.table({"id": pa.array([12], pa.int64())}), "append") == 1
        assert petrel_rows(cur, "lake.w.r") == expected + [{"code": None, "id": 12, "score": None}]
        latest = catalog.load_table("w.r").current_snapshot()
        assert latest.parent_snapshot_id == current.snapshot_id
        assert latest.summary["total-records"] == "3"

        # A daily reload: replace with the schema the table has reuses it (no new schema id).
        assert ingest(cur, "r", replacement.slice(0, 1), "replace") == 1
        assert petrel_rows(cur, "lake.w.r") == expected[:1]
        reloaded = catalog.load_table("w.r")
        assert reloaded.schema().schema_id == 1 and len(reloaded.metadata.schemas) == 2
        assert len(reloaded.metadata.snapshots) == 5
        assert reloaded.current_snapshot().parent_snapshot_id is None


def aborted_upload():
    """A stream the client gives up on after its first batch (the reader raises)."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])

    def batches():
        yield pa.record_batch([pa.array([100], pa.int64()), pa.array(["new"])], schema=schema)
        raise RuntimeError("client gave up")

    return pa.RecordBatchReader.from_batches(schema, batches())


def null_in_required_upload():
    """A new schema whose second batch puts a null into its NOT NULL column."""
    schema = pa.schema([pa.field("k", pa.string(), nullable=False), pa.field("v", pa.int32())])
    good = pa.record_batch([pa.array(["a"] * 1000), pa.array(range(1000), pa.int32())], schema=schema)
    null = pa.record_batch([pa.array([None], pa.string()), pa.array([1], pa.int32())], schema=schema)
    return pa.RecordBatchReader.from_batches(schema, iter([good, good, null]))


@pytest.mark.parametrize(
    "upload, message",
    [(aborted_upload, "(?i)client gave up|cancel|abort|stream"),
     (null_in_required_upload, "(?i)null")],
    ids=["client-aborts", "null-in-required"],
)
def test_failed_replace_changes_nothing(lake, upload, message):
    """A replace whose upload fails midway leaves the table exactly as it was: same metadata
    file, uuid, snapshots, schema and rows for Petrel and PyIceberg, and no file added under
    the table's directory."""
    catalog, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        assert ingest(cur, "keep", SIMPLE, "create") == 3
        state = old_table_state(catalog, "w.keep")
        location = catalog.load_table("w.keep").location().removeprefix("file://")
        before = files_under(location)
        with pytest.raises(Exception, match=message):
            ingest(cur, "keep", upload(), "replace")
    assert old_table_state(catalog, "w.keep") == state
    assert files_under(location) == before
    assert iceberg_rows(catalog, "w.keep") == (SIMPLE.to_pylist(), 1)
    with connect(server) as conn, conn.cursor() as cur:
        assert petrel_rows(cur, "lake.w.keep") == SIMPLE.to_pylist()
        # The next commit goes on from the same base.
        assert ingest(cur, "keep", pa.table({"id": pa.array([4], pa.int64())}), "append") == 1
    assert old_table_state(catalog, "w.keep")[1] == state[1]
    assert len(catalog.load_table("w.keep").metadata.snapshots) == 2
    assert iceberg_rows(catalog, "w.keep")[0] == SIMPLE.to_pylist() + [{"id": 4, "name": None}]
    after = files_under(location)
    # The append added exactly its own files: one data file, manifest, manifest list, metadata.
    added = sorted(set(after) - set(before))
    assert set(before) <= set(after)
    assert len([f for f in added if f.endswith(".parquet")]) == 1, added
    assert len(added) == 4, added


def test_failed_replace_on_the_filesystem_catalog_changes_nothing(tmp_path, start_petrel):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse))
    names = {"catalog_name": "iceberg", "db_schema_name": "db"}
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA iceberg.db")
        cur.fetchall()
        assert cur.adbc_ingest("t", SIMPLE, mode="create", **names) == 3
        before = files_under(warehouse / "db" / "t")
        with pytest.raises(adbc_driver_manager.Error, match="(?i)null"):
            cur.adbc_ingest("t", null_in_required_upload(), mode="replace", **names)
        assert files_under(warehouse / "db" / "t") == before
        assert petrel_rows(cur, "iceberg.db.t") == SIMPLE.to_pylist()
        replacement = pa.table({"k": ["a", "b"], "v": pa.array([1, 2], pa.int32())})
        assert cur.adbc_ingest("t", replacement, mode="replace", **names) == 2
        assert petrel_rows(cur, "iceberg.db.t", "k") == replacement.to_pylist()
        cur.execute("SELECT snapshot_id FROM iceberg.db.t.snapshots ORDER BY committed_at")
        snapshots = [r[0] for r in cur.fetchall()]
        assert len(snapshots) == 2
        cur.execute(f"SELECT * FROM iceberg.db.t FOR VERSION AS OF {snapshots[0]} ORDER BY id")
        assert cur.fetch_arrow_table().to_pylist() == SIMPLE.to_pylist()
    # v1 created the table, v2 the ingest's snapshot, v3 the replace (the failed one wrote none).
    static = StaticTable.from_metadata(str(warehouse / "db" / "t" / "metadata" / "v3.metadata.json"))
    assert [(f.name, f.field_id) for f in static.schema().fields] == [("k", 3), ("v", 4)]
    assert sorted(static.scan().to_arrow().to_pylist(), key=lambda r: r["k"]) == replacement.to_pylist()
    assert len(static.metadata.snapshots) == 2


ROWS = 200_000
BATCH = 10_000


def big_batches():
    schema = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string())])
    for start in range(0, ROWS, BATCH):
        ids = list(range(start, start + BATCH))
        yield pa.record_batch(
            [
                pa.array(ids, pa.int64()),
                pa.array([i * 0.5 if i % 7 else None for i in ids], pa.float64()),
                pa.array([f"row-{i}" for i in ids], pa.string()),
            ],
            schema=schema,
        )


def test_multi_batch_upload_streams_into_one_snapshot(lake):
    catalog, start = lake
    server = start()
    schema = next(big_batches()).schema
    reader = pa.RecordBatchReader.from_batches(schema, big_batches())
    with connect(server) as conn, conn.cursor() as cur:
        assert ingest(cur, "big", reader, "create") == ROWS
        cur.execute("SELECT count(*), sum(id), count(v), count(DISTINCT s) FROM lake.w.big")
        assert cur.fetchall() == [(ROWS, ROWS * (ROWS - 1) // 2, ROWS - (ROWS + 6) // 7, ROWS)]
        cur.execute("SELECT * FROM lake.w.big ORDER BY id")
        got = cur.fetch_arrow_table()
    expected = pa.Table.from_batches(list(big_batches()))
    assert got.equals(expected)
    table = catalog.load_table("w.big")
    assert len(table.metadata.snapshots) == 1
    assert table.current_snapshot().summary["added-records"] == str(ROWS)
    from_iceberg = table.scan().to_arrow().sort_by("id")
    assert from_iceberg.cast(expected.schema).equals(expected)


def test_filesystem_warehouse_modes_read_back_with_static_table(tmp_path, start_petrel):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = start_petrel("--warehouse", str(warehouse))
    names = {"catalog_name": "iceberg", "db_schema_name": "db"}
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA iceberg.db")
        cur.fetchall()
        assert cur.adbc_ingest("t", SIMPLE, mode="create", **names) == 3
        assert cur.adbc_ingest("t", SIMPLE.slice(0, 1), mode="create_append", **names) == 1
        assert petrel_rows(cur, "iceberg.db.t", "id, name") == [
            {"id": 1, "name": "a"}, {"id": 1, "name": "a"}, {"id": 2, "name": None},
            {"id": 3, "name": "c"},
        ]
        metadata = max(
            glob.glob(f"{warehouse}/db/t/metadata/v*.metadata.json"),
            key=lambda p: int(p.rsplit("/v", 1)[1].split(".")[0]),
        )
        static = StaticTable.from_metadata(metadata)
        assert len(static.metadata.snapshots) == 2
        assert sorted(static.scan().to_arrow().to_pylist(), key=lambda r: (r["id"], r["name"] or "")) == [
            {"id": 1, "name": "a"}, {"id": 1, "name": "a"}, {"id": 2, "name": None},
            {"id": 3, "name": "c"},
        ]
        # Spark 3.5 + Iceberg 1.10 and DuckDB read the ingested table too.
        seen = read_back(warehouse, ["t"], tmp_path)["t"]
        want = [[1, "a"], [1, "a"], [2, None], [3, "c"]]
        spark = seen["spark"]
        assert spark["columns"][:2] == ["id", "name"]
        assert sorted((r[0], r[1] or "") for r in spark["rows"]) == sorted((i, n or "") for i, n in want)
        assert seen["duckdb_error"] is None, seen["duckdb_error"]
        assert sorted((r[0], r[1] or "") for r in seen["duckdb"]["rows"]) == sorted(
            (i, n or "") for i, n in want)
        assert [s["operation"] for s in seen["snapshots"]] == ["append", "append"]
        assert cur.adbc_ingest("t", pa.table({"x": [True]}), mode="replace", **names) == 1
        assert petrel_rows(cur, "iceberg.db.t", "x") == [{"x": True}]
        # The replace is one more version of the same table: v1 (created), v2 and v3 (the
        # appends), v4 (the new schema and its first snapshot), with the older snapshots kept.
        versions = sorted(glob.glob(f"{warehouse}/db/t/metadata/v*.metadata.json"))
        assert [os.path.basename(v) for v in versions] == [
            f"v{i}.metadata.json" for i in range(1, 5)]
        metadata = versions[-1]
        static = StaticTable.from_metadata(metadata)
        assert static.scan().to_arrow().to_pylist() == [{"x": True}]
        assert len(static.metadata.snapshots) == 3


def sql_info(server, ids):
    """GetSqlInfo through pyarrow.flight: {info id: value}."""
    # CommandGetSqlInfo { repeated uint32 info = 1; } (packed)
    any_msg = packed("CommandGetSqlInfo", bytes_field(1, b"".join(varint(i) for i in ids)))
    client = flight.FlightClient(server.uri)
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(any_msg))
        table = client.do_get(info.endpoints[0].ticket).read_all()
    finally:
        client.close()
    return {r["info_name"]: r["value"] for r in table.to_pylist()}


READ_ONLY, BULK_INGESTION, INGEST_TRANSACTIONS = 3, 10, 11
TRANSACTION, DDL_CATALOG, DDL_SCHEMA, DDL_TABLE = 8, 500, 501, 502


def test_sql_info_tells_the_truth(lake):
    _, start = lake
    ids = [READ_ONLY, BULK_INGESTION, INGEST_TRANSACTIONS, TRANSACTION, DDL_CATALOG, DDL_SCHEMA, DDL_TABLE]
    assert sql_info(start(), ids) == {
        READ_ONLY: False, BULK_INGESTION: True, INGEST_TRANSACTIONS: False, TRANSACTION: 0,
        DDL_CATALOG: False, DDL_SCHEMA: True, DDL_TABLE: True,
    }
    assert sql_info(start("--read-only"), ids) == {
        READ_ONLY: True, BULK_INGESTION: False, INGEST_TRANSACTIONS: False, TRANSACTION: 0,
        DDL_CATALOG: False, DDL_SCHEMA: False, DDL_TABLE: False,
    }


def test_read_only_refuses_ingest(lake):
    catalog, start = lake
    catalog.create_table("w.t", schema=Schema(NestedField(1, "id", LongType(), required=False)))
    server = start("--read-only")
    with connect(server) as conn, conn.cursor() as cur:
        for mode in ["create", "append", "replace", "create_append"]:
            name = "t" if mode == "append" else "new"
            with pytest.raises(adbc_driver_manager.Error, match="read-only"):
                ingest(cur, name, pa.table({"id": [1]}), mode)
    assert [t[1] for t in catalog.list_tables("w")] == ["t"]
    assert iceberg_rows(catalog, "w.t") == ([], 0)


# ----------------------------------------------------------------------------- upsert=true
# ADBC's Flight SQL driver sends no `CommandStatementIngest.options`, so the upsert option is
# sent as a raw command over pyarrow.flight's DoPut (the protobuf written by hand).
def upsert_ingest(server, table, data, options):
    """A raw `CommandStatementIngest` (append to an existing table of lake.w) with `options`;
    returns DoPutUpdateResult.record_count."""
    command = statement_ingest(table, "w", "lake", options)
    # Several batches: order across them counts.
    return do_put_ingest(server.uri, command, data, max_chunksize=2)


def test_upsert_option_replaces_rows_by_key(lake, tmp_path):
    _, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE lake.w.keyed (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id))")
        cur.execute("CREATE TABLE lake.w.nokey (id BIGINT, name STRING)")
        first = pa.table({"id": pa.array([1, 2, 1, 3, 1], pa.int64()), "name": ["a", "b", "c", None, "e"]})
        # Each key once; within the upload the last row of a key wins.
        assert upsert_ingest(server, "keyed", first, {"upsert": "true"}) == 3
        second = pa.table({"id": pa.array([3, 4, 2], pa.int64()), "name": ["f", "g", "h"]})
        assert upsert_ingest(server, "keyed", second, {"upsert": "true"}) == 3
        assert petrel_rows(cur, "lake.w.keyed") == [
            {"id": 1, "name": "e"},
            {"id": 2, "name": "h"},
            {"id": 3, "name": "f"},
            {"id": 4, "name": "g"},
        ]
        # Without the option the same table appends.
        assert upsert_ingest(server, "keyed", pa.table({"id": pa.array([4], pa.int64()), "name": ["i"]}), {}) == 1
        assert [r["name"] for r in petrel_rows(cur, "lake.w.keyed") if r["id"] == 4] in (["g", "i"], ["i", "g"])
        # The upserts committed equality deletes on the key (field id 1): one overwrite each.
        location = next(p for p in glob.glob(f"{tmp_path}/**/keyed", recursive=True))
        deletes = [p for p in files_under(location) if p.endswith("-deletes.parquet")]
        assert deletes, files_under(location)
        import pyarrow.parquet as pq
        for path in deletes:
            schema = pq.read_schema(path)
            assert schema.names == ["id"], schema
        # No identifier fields, and a bad value: refused, nothing written.
        before = files_under(tmp_path)
        with pytest.raises(pa.ArrowNotImplementedError, match="identifier fields"):
            upsert_ingest(server, "nokey", first, {"upsert": "true"})
        with pytest.raises(pa.ArrowInvalid, match="expected true or false"):
            upsert_ingest(server, "keyed", first, {"upsert": "maybe"})
        assert files_under(tmp_path) == before


def test_adbc_ingest_into_an_upsert_table_upserts(lake, tmp_path):
    """A table with identifier fields and `write.upsert.enabled=true` (Flink's property) makes
    every ingest an upsert, as it makes every INSERT one: ADBC's `adbc_ingest` (append and
    create_append, no ingest options) replaces the rows with the upload's keys, with equality
    deletes on the key, a key repeated in the upload keeping its last row."""
    catalog, start = lake
    server = start()
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE lake.w.flink (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id)) "
            "TBLPROPERTIES ('format-version'='2', 'write.upsert.enabled'='true')"
        )
        cur.fetchall()
        first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
        assert ingest(cur, "flink", first, "append") == 3
        # Key 2 twice (its last row wins), key 4 new: two rows written.
        second = pa.table({"id": pa.array([2, 4, 2], pa.int64()), "name": ["x", "d", "y"]})
        assert ingest(cur, "flink", second, "append") == 2
        third = pa.table({"id": pa.array([3], pa.int64()), "name": [None]})
        assert ingest(cur, "flink", third, "create_append") == 1
        assert petrel_rows(cur, "lake.w.flink") == [
            {"id": 1, "name": "a"},
            {"id": 2, "name": "y"},
            {"id": 3, "name": None},
            {"id": 4, "name": "d"},
        ]
    table = catalog.load_table("w.flink")
    assert table.properties["write.upsert.enabled"] == "true"
    assert table.schema().identifier_field_ids == [1]
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    assert len(snapshots) == 3, "one commit per ingest"
    # Each ingest's snapshot: one equality delete per key written (the writers are split by
    # key, so a file each per writer), the key column only, plus the new rows; the first one's
    # deletes find nothing to delete, but are written all the same.
    for snapshot, written in zip(snapshots, [3, 2, 1]):
        summary = snapshot.summary
        assert summary.operation.value == "overwrite", summary
        assert summary["added-records"] == str(written), summary
        assert summary["added-equality-deletes"] == str(written), summary
    deletes = [p for p in files_under(tmp_path) if "/flink/" in p and p.endswith("-deletes.parquet")]
    assert deletes
    for path in deletes:
        assert pq.read_schema(path).names == ["id"]
