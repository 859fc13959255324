#!/usr/bin/env python3
"""Write small Iceberg tables with PyIceberg, plus what PyIceberg reads back from them.

    .venv/bin/python table-provider/tests/pyiceberg/gen_tables.py OUT_DIR

(the virtualenv comes from `scripts/setup-python.sh`; PyIceberg 0.12.0, pyarrow 26.0.1).

The Rust integration tests of `table-provider` run this script into a temporary directory, open
`OUT_DIR/catalog.db` with Petrel's SQL catalog (the SQLite database that PyIceberg's SqlCatalog
`petrel_test` wrote; namespace `db`), read every table through DataFusion and compare with
`OUT_DIR/expected.json`. The data are deterministic (generated values, fixed seeds); snapshot ids,
timestamps, uuids in file names change with every run, so tests must read them from expected.json.

Layout:

    OUT_DIR/catalog.db                                        SqlCatalog "petrel_test" (kept)
    OUT_DIR/warehouse/db/<table>/metadata/NNNNN-<uuid>.metadata.json   (PyIceberg names, kept)
    OUT_DIR/warehouse/db/<table>/data/...                     Parquet data files
    OUT_DIR/expected.json                                     see below

expected.json:

    {"catalog_db": "catalog.db", "warehouse": "warehouse", "namespace": "db", "generator": {...},
     "tables": [{"name", "metadata_location", "metadata_file" (relative to OUT_DIR),
                 "format_version", "current_schema_id", "current_schema_columns",
                 "current_schema" (Iceberg schema JSON), "properties",
                 "partition_specs": {"<spec id>": [{"name", "field_id", "source_column", "source_id",
                                                    "transform"}]}, "default_spec_id",
                 "data_files" (live data files of the current snapshot),
                 "current": RESULT,
                 "snapshots": [{"snapshot_id", "parent_id", "timestamp_ms", "sequence_number",
                                "operation", "schema_id", "data_files", "result": RESULT}],
                 "refs": [{"name", "type": "branch"|"tag", "snapshot_id", "schema", "result": RESULT}],
                 "notes": "..."}]}

RESULT = {"columns", "types" (Iceberg type strings, below), "count", "rows"}, rows normalised as in
shared/fixtures/iceberg-corpus/README.md: integers and booleans as JSON; float/double as numbers with
"NaN"/"Infinity"/"-Infinity" strings (-0.0 stays -0.0); decimals as strings with the type's scale
("12.50"); dates "YYYY-MM-DD"; time `time.isoformat()`; timestamp (no zone) `datetime.isoformat()`
without offset; timestamptz ISO-8601 in UTC ending "+00:00"; binary and fixed as lowercase hex; uuid
as the 36-character string; struct as an object; list as an array; map<string,_> as an object (other
maps: [[k, v], ...] sorted by JSON text). Rows are a multiset, sorted by
`json.dumps(row, sort_keys=True)` (as make_corpus.py does).
Type strings: primitives as Iceberg's metadata JSON spells them ("int", "long", "decimal(9, 2)",
"fixed[4]", "timestamptz", ...); nested ones as "struct<a: int, b: string>", "list<int>",
"map<string, int>".

Which schema a result uses (Iceberg's reading rules):
  - `current`: `table.scan().to_arrow()` at the end: current snapshot, current schema.
  - `snapshots[].result`: the rows of that snapshot in the schema that snapshot was written with
    (`snapshot.schema_id`), captured right after the commit that made it and cross-checked at the
    end with `table.scan(snapshot_id=...)` (PyIceberg 0.12 projects snapshot.schema_id there).
  - `refs[]`: a tag reads with its snapshot's schema; a branch (main included) with the table's
    CURRENT schema. PyIceberg's scan(snapshot_id)/use_ref always uses the snapshot's schema, so a
    branch result is computed with PyIceberg's own ArrowScan over the ref snapshot's files with the
    current schema as the projection (field-id based: columns added later read as null).
"""
import datetime as dt
import decimal
import json
import math
import random
import shutil
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import (BucketTransform, DayTransform, HourTransform, IdentityTransform, MonthTransform,
                                  TruncateTransform, VoidTransform, YearTransform)
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType, FloatType,
                             IcebergType, IntegerType, ListType, LongType, MapType, NestedField, StringType,
                             StructType, TimestampType, TimestamptzType, TimeType, UUIDType)

NAMESPACE = "db"
decimal.getcontext().prec = 100  # decimal(38, 10) arithmetic below must not round (default: 28 digits)
UTC = dt.timezone.utc


# ======================================================================= normalisation
def type_str(t: IcebergType) -> str:
    """Iceberg type as a string: primitives as in metadata JSON, nested types in angle brackets."""
    if isinstance(t, StructType):
        return "struct<" + ", ".join(f"{f.name}: {type_str(f.field_type)}" for f in t.fields) + ">"
    if isinstance(t, ListType):
        return f"list<{type_str(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{type_str(t.key_type)}, {type_str(t.value_type)}>"
    return str(t)


def norm(v, t: IcebergType):
    """One value as PyArrow's to_pylist() hands it out -> JSON-ready value (module docstring)."""
    if v is None:
        return None
    if isinstance(t, (FloatType, DoubleType)):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return float(v)
    if isinstance(t, DecimalType):
        assert isinstance(v, decimal.Decimal) and v.as_tuple().exponent == -t.scale, (v, t)
        return format(v, "f")
    if isinstance(t, TimestamptzType):
        return v.astimezone(UTC).isoformat()
    if isinstance(t, (DateType, TimeType, TimestampType)):
        assert not isinstance(t, TimestampType) or v.tzinfo is None, v
        return v.isoformat()
    if isinstance(t, UUIDType):
        return str(v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v)))
    if isinstance(t, (BinaryType, FixedType)):
        return bytes(v).hex()
    if isinstance(t, StructType):
        return {f.name: norm(v.get(f.name), f.field_type) for f in t.fields}
    if isinstance(t, ListType):
        return [norm(x, t.element_type) for x in v]
    if isinstance(t, MapType):
        pairs = [(norm(k, t.key_type), norm(x, t.value_type)) for k, x in (v.items() if isinstance(v, dict) else v)]
        if isinstance(t.key_type, StringType):
            return dict(pairs)
        return sorted(([k, x] for k, x in pairs), key=json.dumps)
    return v  # bool, int, str


def result(arrow: pa.Table, schema: Schema) -> dict:
    """An Arrow table read with Iceberg schema `schema` -> RESULT."""
    names = [f.name for f in schema.fields]
    assert arrow.column_names == names, (arrow.column_names, names)
    cols = [arrow.column(i).to_pylist() for i in range(arrow.num_columns)]
    rows = [[norm(v, f.field_type) for v, f in zip(r, schema.fields)] for r in zip(*cols)]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return {"columns": names, "types": [type_str(f.field_type) for f in schema.fields], "count": len(rows), "rows": rows}


# ======================================================================= recording
class Recorder:
    """Commits through here so that every snapshot's result is captured right after its commit."""

    def __init__(self, table: Table, notes: str = ""):
        self.table = table
        self.snapshot_results: dict[int, dict] = {}
        self.notes = [notes] if notes else []

    def capture_main(self):
        """After a commit to main: the table's current schema is the new snapshot's schema."""
        t = self.table
        snap = t.current_snapshot()
        assert snap.schema_id == t.schema().schema_id, (snap.schema_id, t.schema().schema_id)
        self.snapshot_results[snap.snapshot_id] = result(t.scan().to_arrow(), t.schema())

    def append(self, df: pa.Table, branch: str | None = None, sleep_s: float = 0.0):
        if branch is None:
            self.table.append(df)
            self.capture_main()
        else:
            self.table.append(df, branch=branch)
            sid = self.table.metadata.refs[branch].snapshot_id
            scan = self.table.scan(snapshot_id=sid)  # the snapshot's schema (= current schema at commit)
            self.snapshot_results[sid] = result(scan.to_arrow(), scan.projection())
        time.sleep(sleep_s)

    def add_files(self, paths: list[str]):
        self.table.add_files(paths)
        self.capture_main()


def data_file_count(table: Table, snapshot_id: int | None) -> int:
    if snapshot_id is None:
        return 0
    return sum(1 for _ in table.scan(snapshot_id=snapshot_id).plan_files())


def branch_result(table: Table, snapshot_id: int) -> dict:
    """A branch reads with the table's current schema: PyIceberg's ArrowScan over the snapshot's files,
    projected onto the current schema (by field id; later columns come out null)."""
    schema = table.schema()
    tasks = table.scan(snapshot_id=snapshot_id).plan_files()
    arrow = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table(tasks)
    return result(arrow, schema)


def table_entry(out: Path, rec: Recorder) -> dict:
    t = rec.table
    md = t.metadata
    schema = t.schema()
    by_id = {s.schema_id: s for s in md.schemas}
    snapshots = []
    for s in sorted(md.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms)):
        captured = rec.snapshot_results.get(s.snapshot_id)
        assert captured is not None, f"{t.name()}: snapshot {s.snapshot_id} was not captured at commit"
        scan = t.scan(snapshot_id=s.snapshot_id)
        assert scan.projection().schema_id == s.schema_id
        again = result(scan.to_arrow(), scan.projection())
        assert again == captured, f"{t.name()}: scan(snapshot_id={s.snapshot_id}) differs from the result at commit"
        snapshots.append({"snapshot_id": s.snapshot_id, "parent_id": s.parent_snapshot_id,
                          "timestamp_ms": s.timestamp_ms, "sequence_number": s.sequence_number,
                          "operation": s.summary.operation.value if s.summary else None,
                          "schema_id": s.schema_id, "data_files": data_file_count(t, s.snapshot_id),
                          "result": captured})
    refs = []
    for name, ref in sorted(md.refs.items(), key=lambda kv: (kv[1].snapshot_ref_type.value, kv[0])):
        kind = ref.snapshot_ref_type.value
        if kind == "tag":
            res, sch = rec.snapshot_results[ref.snapshot_id], "snapshot"
        else:
            res, sch = branch_result(t, ref.snapshot_id), "current"
        refs.append({"name": name, "type": kind, "snapshot_id": ref.snapshot_id,
                     "schema": sch, "schema_id": md.snapshot_by_id(ref.snapshot_id).schema_id if sch == "snapshot"
                     else schema.schema_id, "result": res})
    current = result(t.scan().to_arrow(), schema)
    main = next((r for r in refs if r["name"] == "main"), None)
    assert main is None or main["result"] == current, f"{t.name()}: refs[main] differs from current"
    specs = {}
    for sid, spec in sorted(t.specs().items()):
        specs[str(sid)] = [{"name": f.name, "field_id": f.field_id, "source_id": f.source_id,
                            "source_column": _column_name(md, f.source_id), "transform": str(f.transform)}
                           for f in spec.fields]
    loc = t.metadata_location
    return {"name": t.name()[-1], "metadata_location": loc,
            "metadata_file": str(Path(loc.removeprefix("file://")).relative_to(out)),
            "format_version": md.format_version, "current_schema_id": schema.schema_id,
            "current_schema_columns": [f.name for f in schema.fields],
            "current_schema": json.loads(schema.model_dump_json()),
            "properties": dict(md.properties), "partition_specs": specs, "default_spec_id": md.default_spec_id,
            "data_files": data_file_count(t, md.current_snapshot_id),
            "current": current, "snapshots": snapshots, "refs": refs, "notes": " ".join(rec.notes)}


def _column_name(md, field_id: int) -> str | None:
    """Name of a (possibly since dropped) field id: the newest schema that has it."""
    for s in sorted(md.schemas, key=lambda s: -s.schema_id):
        try:
            return s.find_column_name(field_id)
        except ValueError:
            continue
    return None


def arrow(table: Table, rows: list[dict]) -> pa.Table:
    """Rows as an Arrow table with the schema PyIceberg expects for the table's current schema."""
    return pa.Table.from_pylist(rows, schema=table.schema().as_arrow())


# ======================================================================= tables
def build_all_types(cat) -> Recorder:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "c_bool", BooleanType()),
        NestedField(3, "c_int", IntegerType()),
        NestedField(4, "c_long", LongType()),
        NestedField(5, "c_float", FloatType()),
        NestedField(6, "c_double", DoubleType()),
        NestedField(7, "c_dec9", DecimalType(9, 2)),
        NestedField(8, "c_dec38", DecimalType(38, 10)),
        NestedField(9, "c_date", DateType()),
        NestedField(10, "c_time", TimeType()),
        NestedField(11, "c_ts", TimestampType()),
        NestedField(12, "c_tstz", TimestamptzType()),
        NestedField(13, "c_string", StringType()),
        NestedField(14, "c_uuid", UUIDType()),
        NestedField(15, "c_fixed", FixedType(4)),
        NestedField(16, "c_binary", BinaryType()),
        NestedField(17, "c_struct", StructType(NestedField(18, "a", IntegerType()), NestedField(19, "b", StringType()))),
        NestedField(20, "c_list", ListType(21, IntegerType(), element_required=False)),
        NestedField(22, "c_map", MapType(23, StringType(), 24, IntegerType(), value_required=False)),
        NestedField(25, "c_list_struct", ListType(26, StructType(NestedField(27, "x", LongType()),
                                                                 NestedField(28, "y", StringType())),
                                                   element_required=False)),
    )
    t = cat.create_table(f"{NAMESPACE}.all_types", schema=schema)
    rec = Recorder(t, "Every Iceberg primitive plus struct, list, map, list<struct>; two appends of 30 rows. "
                      "Column k (1-based after id) is null when (id + k) % 6 == 0, except in ids 0-5 and 7, which hold "
                      "special values: NaN, +/-Infinity, -0.0, empty string/binary, empty list/map, nulls inside "
                      "list/map/struct, int/long min and max, +/-9999999.99 and +/-(10^38-1)/10^10 decimals, zero "
                      "decimals, float max, the smallest subnormal double, date 0001-01-01, 23:59:59.999999. "
                      "Dates and timestamps start before 1970; microsecond fractions. PyIceberg's create_table "
                      "re-assigns field ids (top-level 1..20, then nested): see current_schema for the real ids.")
    rng = random.Random(1)

    def row(i: int) -> dict:
        r = {
            "id": i,
            "c_bool": i % 3 == 0,
            "c_int": (i * 7919) % 20011 - 10000,
            "c_long": (i * 2654435761) % (2**40) - 2**39,
            "c_float": (i - 15) * 0.25,
            "c_double": (i - 15) * 1.125 + rng.randint(0, 1000) / 1024,
            "c_dec9": decimal.Decimal(f"{(i * 1234567) % 9999999 - 5000000}").scaleb(-2),
            "c_dec38": decimal.Decimal(f"{(i * 98765432123457) % 10**20}{i:06d}").scaleb(-10),
            "c_date": dt.date(1960, 1, 1) + dt.timedelta(days=i * 997),
            "c_time": (dt.datetime(2000, 1, 1) + dt.timedelta(seconds=i * 2711, microseconds=i * 137)).time(),
            "c_ts": dt.datetime(1965, 6, 1) + dt.timedelta(days=i * 431, seconds=i * 3607, microseconds=i * 11),
            "c_tstz": dt.datetime(1969, 12, 31, 23, tzinfo=UTC) + dt.timedelta(days=i * 389, seconds=i * 4001, microseconds=i),
            "c_string": f"str_{i}_" + "é" * (i % 3),
            "c_uuid": uuid.UUID(int=rng.getrandbits(128)),
            "c_fixed": bytes([i, 255 - i, i * 3 % 256, 7]),
            "c_binary": bytes(range(i % 5, i % 5 + i % 7)),
            "c_struct": {"a": i * 10, "b": f"b{i}"},
            "c_list": [i, i + 1, None if i % 4 == 0 else i + 2][: i % 4],
            "c_map": [(f"k{j}", i * j) for j in range(i % 3)],
            "c_list_struct": [{"x": i * 100 + j, "y": f"y{j}"} for j in range(i % 3)],
        }
        special = {
            0: {"c_float": float("nan"), "c_double": float("nan"), "c_string": "", "c_binary": b"", "c_list": [],
                "c_map": [], "c_list_struct": []},
            1: {"c_float": -0.0, "c_double": -0.0, "c_dec9": decimal.Decimal("-0.01"),
                "c_dec38": decimal.Decimal("-1").scaleb(-10)},
            2: {"c_float": float("inf"), "c_double": float("-inf"), "c_list": [None, 1, None],
                "c_map": [("k", None), ("", 0)], "c_struct": {"a": None, "b": None}},
            3: {"c_float": float("-inf"), "c_double": float("inf"), "c_list_struct": [None, {"x": None, "y": None}],
                "c_dec38": decimal.Decimal("9" * 38).scaleb(-10), "c_dec9": decimal.Decimal("9999999.99")},
            4: {"c_int": -2**31, "c_long": -2**63, "c_dec9": decimal.Decimal("-9999999.99"),
                "c_dec38": -decimal.Decimal("9" * 38).scaleb(-10)},
            5: {"c_int": 2**31 - 1, "c_long": 2**63 - 1, "c_dec9": decimal.Decimal("0.00"),
                "c_dec38": decimal.Decimal(0).scaleb(-10)},
            7: {"c_float": 3.4028234663852886e38, "c_double": 5e-324, "c_date": dt.date(1, 1, 1),
                "c_ts": dt.datetime(1900, 1, 1, 0, 0, 0, 1), "c_time": dt.time(23, 59, 59, 999999)},
        }
        r.update(special.get(i, {}))
        for k, name in enumerate(list(r)[1:], start=1):
            if (i + k) % 6 == 0 and i not in special:
                r[name] = None
        return r

    rec.append(arrow(t, [row(i) for i in range(0, 30)]))
    rec.append(arrow(t, [row(i) for i in range(30, 60)]))
    return rec


PART_SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "cat", StringType()),
    NestedField(3, "num", IntegerType()),
    NestedField(4, "name", StringType()),
    NestedField(5, "d", DateType()),
    NestedField(6, "ts", TimestampType()),
    NestedField(7, "tstz", TimestamptzType()),
    NestedField(8, "amount", DoubleType()),
)
FRUITS = ["apple", "apricot", "banana", "blueberry", "cherry", "date", "elderberry"]


def part_rows(lo: int, hi: int, null_col: str | None, ts_step: dt.timedelta = dt.timedelta(hours=7, minutes=13)):
    """Rows id lo..hi-1 for the part_* tables; `null_col` is null on every 13th row (id % 13 == 6)."""
    rows = []
    for i in range(lo, hi):
        r = {"id": i, "cat": "abcd"[(i // 3) % 4], "num": i * 3 - 50, "name": f"{FRUITS[i % 7]}_{i}",
             "d": dt.date(1965, 3, 1) + dt.timedelta(days=i * 97),
             "ts": dt.datetime(1969, 12, 31, 22, 0, 0) + ts_step * i,
             "tstz": dt.datetime(1969, 12, 29, 20, 0, 0, tzinfo=UTC) + dt.timedelta(hours=7, minutes=11) * i,
             "amount": i * 0.5}
        if null_col and i % 13 == 6:
            r[null_col] = None
        rows.append(r)
    return rows


def build_partitioned(cat, name: str, source: str, transform, field_name: str, ts_step=None,
                      appends=((0, 40), (40, 80), (80, 120))) -> Recorder:
    """A part_* table: PART_SCHEMA partitioned by one transform of `source`; three appends."""
    source_id = PART_SCHEMA.find_field(source).field_id
    spec = PartitionSpec(PartitionField(source_id, 1000, transform, field_name))
    t = cat.create_table(f"{NAMESPACE}.{name}", schema=PART_SCHEMA, partition_spec=spec)
    rec = Recorder(t, f"Partitioned by {transform}({source}); {len(appends)} appends of ids "
                      f"{', '.join(f'{a}..{b - 1}' for a, b in appends)}; {source} is null where id % 13 == 6. "
                      "Dates/timestamps start before 1970 (pre-epoch partition values).")
    kw = {"ts_step": ts_step} if ts_step else {}
    for lo, hi in appends:
        rec.append(arrow(t, part_rows(lo, hi, source, **kw)))
    return rec


def build_part_identity(cat):
    return build_partitioned(cat, "part_identity", "cat", IdentityTransform(), "cat")


def build_part_bucket_long(cat):
    return build_partitioned(cat, "part_bucket_long", "id", BucketTransform(8), "id_bucket")


def build_part_bucket_string(cat):
    return build_partitioned(cat, "part_bucket_string", "name", BucketTransform(4), "name_bucket")


def build_part_truncate_int(cat):
    return build_partitioned(cat, "part_truncate_int", "num", TruncateTransform(10), "num_trunc")


def build_part_truncate_string(cat):
    return build_partitioned(cat, "part_truncate_string", "name", TruncateTransform(3), "name_trunc")


def build_part_year(cat):
    return build_partitioned(cat, "part_year", "d", YearTransform(), "d_year")


def build_part_month(cat):
    return build_partitioned(cat, "part_month", "ts", MonthTransform(), "ts_month",
                             ts_step=dt.timedelta(days=3, hours=5, minutes=17, seconds=11))


def build_part_day(cat):
    return build_partitioned(cat, "part_day", "tstz", DayTransform(), "tstz_day")


def build_part_hour(cat):
    return build_partitioned(cat, "part_hour", "ts", HourTransform(), "ts_hour",
                             ts_step=dt.timedelta(minutes=23, seconds=7))


def build_part_void(cat):
    rec = build_partitioned(cat, "part_void", "cat", VoidTransform(), "cat_void")
    rec.notes.append("PyIceberg 0.12 creates and writes a void transform: every data file has partition "
                     "value null (one file per append).")
    return rec


def build_partition_evolution(cat):
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "cat", StringType()),
                    NestedField(3, "ts", TimestamptzType()), NestedField(4, "v", DoubleType()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
    t = cat.create_table(f"{NAMESPACE}.partition_evolution", schema=schema, partition_spec=spec)
    rec = Recorder(t, "spec 0 identity(cat): append ids 0..29; spec 1 adds day(ts): append 30..59; "
                      "spec 2 removes identity(cat): append 60..89. cat null where id % 11 == 5.")

    def rows(lo, hi):
        return arrow(t, [{"id": i, "cat": None if i % 11 == 5 else "xyz"[i % 3],
                          "ts": dt.datetime(2024, 2, 27, tzinfo=UTC) + dt.timedelta(hours=5 * i), "v": i / 4}
                         for i in range(lo, hi)])

    rec.append(rows(0, 30))
    with t.update_spec() as u:
        u.add_field("ts", DayTransform(), "ts_day")
    rec.append(rows(30, 60))
    with t.update_spec() as u:
        u.remove_field("cat")
    rec.append(rows(60, 90))
    rec.notes.append("Format v2: remove_field drops the field from the new spec (spec 2 = day(ts) only; "
                     "no void placeholder as in v1).")
    return rec


def build_schema_evolution(cat):
    schema = Schema(NestedField(1, "id", IntegerType()), NestedField(2, "name", StringType()),
                    NestedField(3, "price", FloatType()), NestedField(4, "amount", DecimalType(9, 2)),
                    NestedField(5, "info", StructType(NestedField(6, "a", IntegerType()))))
    t = cat.create_table(f"{NAMESPACE}.schema_evolution", schema=schema)
    rec = Recorder(t)
    rec.notes.append("Schema 0 (id int, name, price float, amount decimal(9,2), info struct<a int>): append ids 0..9.")
    rec.append(arrow(t, [{"id": i, "name": f"n{i}", "price": i * 1.5, "amount": decimal.Decimal(i * 125).scaleb(-2),
                          "info": {"a": i}} for i in range(0, 10)]))

    with t.update_schema() as u:
        u.add_column("qty", IntegerType())
        u.rename_column("name", "label")
        u.update_column("id", field_type=LongType())
        u.update_column("price", field_type=DoubleType())
        u.update_column("amount", field_type=DecimalType(18, 2))
        u.add_column(("info", "b"), StringType())
    rec.notes.append(f"Schema {t.schema().schema_id}: + qty int, name->label, id int->long, price float->double, "
                     "amount decimal(9,2)->decimal(18,2), + info.b string: append ids 10..19 (large values).")
    rec.append(arrow(t, [{"id": 2**33 + i, "label": f"l{i}", "price": 1e300 / (i + 1),
                          "amount": decimal.Decimal(10**15 + i).scaleb(-2), "info": {"a": -i, "b": f"b{i}"},
                          "qty": i} for i in range(10, 20)]))

    old_qty = t.schema().find_field("qty").field_id
    with t.update_schema() as u:
        u.delete_column("qty")
    with t.update_schema() as u:
        u.add_column("qty", LongType())
        u.move_after("qty", "id")
    new_qty = t.schema().find_field("qty").field_id
    rec.notes.append(f"Schema {t.schema().schema_id - 1}: drop qty (field id {old_qty}); schema {t.schema().schema_id}: "
                     f"add a new qty long (field id {new_qty}) moved after id; old qty values must not resurface: "
                     "append ids 20..29.")
    rec.append(arrow(t, [{"id": i, "qty": 1000 + i, "label": f"l{i}", "price": -i / 3,
                          "amount": decimal.Decimal(-i).scaleb(-2), "info": {"a": i, "b": None}} for i in range(20, 30)]))

    with t.update_schema() as u:
        u.rename_column(("info", "a"), "alpha")
    rec.notes.append(f"Schema {t.schema().schema_id}: rename info.a -> info.alpha: append ids 30..34.")
    rec.append(arrow(t, [{"id": i, "qty": None if i == 30 else i, "label": None, "price": None, "amount": None,
                          "info": None if i == 31 else {"alpha": i, "b": "z"}} for i in range(30, 35)]))
    return rec


def build_metrics_sorted(cat):
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()),
                    NestedField(3, "score", DoubleType()))
    t = cat.create_table(f"{NAMESPACE}.metrics_sorted", schema=schema)
    rec = Recorder(t, "Unpartitioned; 10 appends, append k (0..9) = one data file with ids k*1000..k*1000+99 "
                      "(rows shuffled inside the file), name 'name_<id 5 digits>', score = id/10: disjoint "
                      "id/name/score ranges per file for metrics pruning.")
    rng = random.Random(7)
    for k in range(10):
        ids = list(range(k * 1000, k * 1000 + 100))
        rng.shuffle(ids)
        rec.append(arrow(t, [{"id": i, "name": f"name_{i:05d}", "score": i / 10} for i in ids]))
    return rec


def build_struct_wide(cat):
    inner = StructType(NestedField(6, "x", IntegerType()), NestedField(7, "y", StringType()))
    schema = Schema(NestedField(1, "id", LongType()),
                    NestedField(2, "s", StructType(NestedField(3, "a", LongType()), NestedField(4, "payload", StringType()),
                                                   NestedField(5, "inner", inner))))
    t = cat.create_table(f"{NAMESPACE}.struct_wide", schema=schema)
    rec = Recorder(t, "Struct leaf projection: s struct<a long, payload string (200 random chars), inner struct<x int, "
                      "y string>>; append 1: ids 0..2999, s null when id % 97 == 0, inner null when id % 13 == 0.")
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

    def row(i):
        if i % 97 == 0:
            return {"id": i, "s": None}
        return {"id": i, "s": {"a": i * 3, "payload": "".join(rng.choice(alphabet) for _ in range(200)),
                               "inner": None if i % 13 == 0 else {"x": i % 1000, "y": f"y{i}"}}}
    rec.append(arrow(t, [row(i) for i in range(3000)]))
    with t.update_schema() as u:
        u.add_column(("s", "late"), LongType())
        u.rename_column(("s", "a"), "alpha")
    rec.notes.append(f"Schema {t.schema().schema_id}: + s.late long, s.a renamed s.alpha; append 2: ids 3000..3009 "
                     "with late = id.")
    rec.append(arrow(t, [{"id": i, "s": {"alpha": i * 3, "payload": "p", "inner": {"x": 1, "y": "z"}, "late": i}}
                         for i in range(3000, 3010)]))
    return rec


def build_time_travel(cat):
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "v", StringType()))
    t = cat.create_table(f"{NAMESPACE}.time_travel", schema=schema)
    rec = Recorder(t)
    pause = 0.03  # distinct, increasing snapshot timestamps (ms) for timestamp-as-of tests

    def rows(lo, hi, **extra):
        return arrow(t, [{"id": i, "v": f"v{i}", **extra} for i in range(lo, hi)])

    for lo in (0, 10, 20):
        rec.append(rows(lo, lo + 10), sleep_s=pause)
    s1, s2, s3 = [s.snapshot_id for s in sorted(t.metadata.snapshots, key=lambda s: s.sequence_number)]
    t.manage_snapshots().create_tag(s1, "t1").create_branch(s2, "b1").commit()
    rec.append(rows(100, 105), branch="b1", sleep_s=pause)
    with t.update_schema() as u:
        u.add_column("extra", StringType())
    rec.append(rows(30, 35, extra="e"), sleep_s=pause)
    rec.notes.append("main: appends ids 0..9 (tag t1), 10..19 (branch b1 created here), 20..29; then ids 100..104 "
                     "appended to branch b1 (parent = the 2nd snapshot; its schema_id is schema 0, the current "
                     "schema at that commit, and its snapshot result is scan(snapshot_id=...) = schema 0); then "
                     "column `extra` string added and ids 30..34 (extra='e') appended to main. refs: t1 (tag) uses "
                     "its snapshot's schema (no `extra`); b1 and main (branches) use the current schema, so b1 "
                     "has `extra` = null (computed with ArrowScan over b1's files projected onto the current schema). "
                     f"Commits are {int(pause * 1000)} ms apart.")
    return rec


def build_name_mapped(cat, out: Path):
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()),
                    NestedField(3, "score", DoubleType()), NestedField(4, "d", DateType()))
    t = cat.create_table(f"{NAMESPACE}.name_mapped", schema=schema)
    data = out / "warehouse" / NAMESPACE / "name_mapped" / "data"
    data.mkdir(parents=True, exist_ok=True)
    f1 = pa.table({"id": pa.array(range(0, 20), pa.int64()), "name": [f"a{i}" for i in range(20)],
                   "score": [i * 0.1 for i in range(20)],
                   "d": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(20)]})
    # second file: other column order, a null in every column
    f2 = pa.table({"d": [None] + [dt.date(2023, 6, 1) + dt.timedelta(days=i) for i in range(1, 15)],
                   "score": [-i * 1.0 for i in range(15)], "name": [None] + [f"b{i}" for i in range(1, 15)],
                   "id": pa.array([None] + list(range(100, 114)), pa.int64())})
    paths = []
    for n, tbl in (("plain-1.parquet", f1), ("plain-2.parquet", f2)):
        p = data / n
        pq.write_table(tbl, p)
        assert all(b"PARQUET:field_id" not in (f.metadata or {}) for f in pq.read_schema(p)), p
        paths.append(f"file://{p}")
    rec = Recorder(t, "Two Parquet files written by plain pyarrow.parquet.write_table WITHOUT field ids "
                      "(data/plain-1.parquet: id, name, score, d; data/plain-2.parquet: columns in the order d, "
                      "score, name, id, and a row with id, name and d null) imported with table.add_files(); PyIceberg set "
                      "schema.name-mapping.default, so a reader must map columns by name.")
    rec.add_files(paths)
    assert "schema.name-mapping.default" in t.properties, t.properties
    return rec


def build_empty_table(cat):
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType()))
    t = cat.create_table(f"{NAMESPACE}.empty_table", schema=schema)
    return Recorder(t, "Created, never written: no snapshot, no refs.")


# ======================================================================= main
def main(argv):
    if len(argv) != 1:
        sys.exit(f"usage: {Path(__file__).name} OUT_DIR")
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for p in ("catalog.db", "expected.json"):  # start over: only our own products are removed
        (out / p).unlink(missing_ok=True)
    shutil.rmtree(out / "warehouse", ignore_errors=True)
    (out / "warehouse").mkdir()

    t0 = time.time()
    cat = SqlCatalog("petrel_test", uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}/warehouse")
    cat.create_namespace(NAMESPACE)
    builders = [build_all_types, build_part_identity, build_part_bucket_long, build_part_bucket_string,
                build_part_truncate_int, build_part_truncate_string, build_part_year, build_part_month,
                build_part_day, build_part_hour, build_part_void, build_partition_evolution,
                build_schema_evolution, build_struct_wide, build_metrics_sorted, build_time_travel,
                lambda c: build_name_mapped(c, out), build_empty_table]
    tables = []
    for build in builders:
        rec = build(cat)
        expected_loc = f"file://{out}/warehouse/{NAMESPACE}/{rec.table.name()[-1]}"
        assert rec.table.location() == expected_loc, (rec.table.location(), expected_loc)
        tables.append(table_entry(out, rec))
        e = tables[-1]
        print(f"{e['name']:22} rows={e['current']['count']:5} snapshots={len(e['snapshots']):2} "
              f"files={e['data_files']:3} refs={[r['name'] for r in e['refs']]}", flush=True)

    import pyiceberg
    doc = {"catalog_db": "catalog.db", "warehouse": "warehouse", "namespace": NAMESPACE,
           "catalog_name": "petrel_test",
           "generator": {"script": "table-provider/tests/pyiceberg/gen_tables.py", "pyiceberg": pyiceberg.__version__,
                         "pyarrow": pa.__version__},
           "tables": tables}
    with open(out / "expected.json", "w") as f:
        json.dump(doc, f, ensure_ascii=False)
    print(f"wrote {len(tables)} tables and {out / 'expected.json'} in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main(sys.argv[1:])
