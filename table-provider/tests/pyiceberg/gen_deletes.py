#!/usr/bin/env python3
"""Write v2 Iceberg tables with merge-on-read delete files, plus the rows a reader must return.

    .venv/bin/python table-provider/tests/pyiceberg/gen_deletes.py OUT_DIR

(the virtualenv comes from `scripts/setup-python.sh`; PyIceberg 0.12.0, pyarrow 26).

Data files are appended with PyIceberg 0.12 (SqlCatalog "petrel_mor" on SQLite at
OUT_DIR/catalog.db, warehouse OUT_DIR/warehouse, namespace `db`). PyIceberg 0.12 cannot write delete
files, so this script writes them itself with pyarrow (Parquet, Iceberg field ids in the Arrow field
metadata `PARQUET:field_id`) and commits them through PyIceberg internals, mirroring what
`pyiceberg.table.update.snapshot._SnapshotProducer._commit` does for its own snapshots: a delete
manifest (ManifestWriterV2 with content DELETES), a new manifest list holding the new manifests plus
every manifest of the parent snapshot, and a transaction with AddSnapshotUpdate + SetSnapshotRefUpdate
(sequence number = last + 1).

Expected rows are NOT read back through any Iceberg reader: a small independent model below keeps
every data file's rows (in file order, read straight from the Parquet file PyIceberg wrote, so that
positions are the file's) and every delete file written, and applies the spec's rules:

  - a position delete applies to a data file when its `file_path` names it, the data file's data
    sequence number is <= the delete's, and both have the same spec and partition;
  - an equality delete applies when the data file's data sequence number is < the delete's and either
    the delete's spec is unpartitioned (global) or spec and partition are equal; a row is deleted when
    its equality columns equal a delete row's, null equal to null.

Each model result is cross-checked against PyIceberg's `table.scan(snapshot_id=...).to_arrow()` for
every snapshot PyIceberg can read: PyIceberg 0.12 applies position deletes but refuses equality deletes
("PyIceberg does not yet support equality deletes"), so snapshots with equality deletes are only
model-computed (expected.json says which, per table, in `pyiceberg_cross_check`). Any disagreement
aborts the script.

expected.json:

    {"catalog_name": "petrel_mor", "namespace": "db", "generator": {...},
     "tables": [{"name", "current": RESULT (SELECT *),
                 "queries": [{"sql" ({t} = the table), "result": RESULT}],
                 "limit": k (SELECT * ... LIMIT k returns min(k, count) rows of `current`),
                 "snapshots": [{"snapshot_id", "sequence_number", "result": RESULT (SELECT * as of it)}],
                 "metrics": {"rows_deleted_by_position", "rows_deleted_by_equality",
                             "delete_files_position", "delete_files_equality"} (SELECT *: positional
                             deletes are applied first, equality deletes count the rows left),
                 "error_delete_file": local path of the broken delete file (corrupt/missing tables:
                             every query must fail naming it),
                 "pyiceberg_cross_check": [...], "notes": "..."}]}

RESULT is gen_tables.py's format ({columns, types, count, rows}, rows normalised by its `norm`).
"""
import json
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry,
                                ManifestEntryStatus, ManifestWriterV2, write_manifest_list)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_tables import norm, type_str  # noqa: E402  (same directory; RESULT normalisation)

CATALOG = "petrel_mor"
NAMESPACE = "db"
POS_FILE_PATH_ID = 2147483546
POS_POS_ID = 2147483545


def local(uri: str) -> str:
    assert uri.startswith("file://"), uri
    return uri.removeprefix("file://")


def row_key(row: list) -> str:
    return json.dumps(row, sort_keys=True)


# ======================================================================= delete files + commits
class DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg's v2 manifest writer, for a manifest of delete files."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def field(name: str, typ: pa.DataType, field_id: int, nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable, metadata={b"PARQUET:field_id": str(field_id).encode()})


def new_delete_path(table: Table, kind: str) -> str:
    return f"{table.location()}/data/{kind}-deletes-{uuid.uuid4()}.parquet"


def write_position_deletes(table: Table, entries: list[tuple[str, int]], spec_id: int, partition: tuple,
                           with_bounds: bool = True) -> DataFile:
    """A position delete file of (file_path, pos) rows, sorted as the spec requires."""
    entries = sorted(entries)
    uri = new_delete_path(table, "pos")
    schema = pa.schema([field("file_path", pa.string(), POS_FILE_PATH_ID, False),
                        field("pos", pa.int64(), POS_POS_ID, False)])
    pq.write_table(pa.Table.from_pylist([{"file_path": p, "pos": n} for p, n in entries], schema=schema), local(uri))
    bounds = {}
    if with_bounds:  # as Spark writes them: file_path bounds differ when several files are referenced
        bounds = {"lower_bounds": {POS_FILE_PATH_ID: entries[0][0].encode(), POS_POS_ID: min(n for _, n in entries).to_bytes(8, "little", signed=True)},
                  "upper_bounds": {POS_FILE_PATH_ID: entries[-1][0].encode(), POS_POS_ID: max(n for _, n in entries).to_bytes(8, "little", signed=True)}}
    df = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=uri, file_format=FileFormat.PARQUET,
                            partition=Record(*partition), record_count=len(entries),
                            file_size_in_bytes=os.path.getsize(local(uri)), sort_order_id=None,
                            equality_ids=None, key_metadata=None, **bounds)
    df.spec_id = spec_id  # not a manifest field: PyIceberg keeps it beside the record
    return df


def write_equality_deletes(table: Table, columns: list[str], keys: list[tuple], spec_id: int,
                           partition: tuple, with_metrics: bool = False) -> DataFile:
    """An equality delete file holding only the key columns (the table's field ids); with
    `with_metrics`, its manifest entry carries value and null counts and lower/upper bounds of the
    key columns, as Iceberg Java's writers record them."""
    schema = table.schema()
    fields = [schema.find_field(c) for c in columns]
    arrow_types = {LongType: pa.int64(), StringType: pa.string()}
    arrow_schema = pa.schema([field(f.name, arrow_types[type(f.field_type)], f.field_id, not f.required)
                              for f in fields])
    uri = new_delete_path(table, "eq")
    rows = [dict(zip(columns, k)) for k in keys]
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema), local(uri))
    metrics = {}
    if with_metrics:
        def encode(v):
            return v.to_bytes(8, "little", signed=True) if isinstance(v, int) else v.encode()
        metrics = {"value_counts": {}, "null_value_counts": {}, "lower_bounds": {}, "upper_bounds": {}}
        for i, f in enumerate(fields):
            values = [k[i] for k in keys]
            present = [v for v in values if v is not None]
            metrics["value_counts"][f.field_id] = len(values)
            metrics["null_value_counts"][f.field_id] = len(values) - len(present)
            if present:
                metrics["lower_bounds"][f.field_id] = encode(min(present))
                metrics["upper_bounds"][f.field_id] = encode(max(present))
    df = DataFile.from_args(content=DataFileContent.EQUALITY_DELETES, file_path=uri, file_format=FileFormat.PARQUET,
                            partition=Record(*partition), record_count=len(keys),
                            file_size_in_bytes=os.path.getsize(local(uri)), sort_order_id=None,
                            equality_ids=[f.field_id for f in fields], key_metadata=None, **metrics)
    df.spec_id = spec_id
    return df


def commit_delete_files(table: Table, files: list[DataFile]) -> tuple[int, int]:
    """Commits `files` as one new snapshot on main (as _SnapshotProducer._commit does).
    Returns (snapshot id, sequence number)."""
    md = table.metadata
    parent = md.current_snapshot()
    assert parent is not None
    snapshot_id = md.new_snapshot_id()
    sequence_number = md.next_sequence_number()
    commit_uuid = uuid.uuid4()
    locations = table.location_provider()
    compression = md.properties.get("write.avro.compression-codec", "gzip")
    by_spec: dict[int, list[DataFile]] = {}
    for f in files:
        by_spec.setdefault(f.spec_id, []).append(f)
    new_manifests = []
    for n, (spec_id, group) in enumerate(sorted(by_spec.items())):
        path = locations.new_metadata_location(f"{commit_uuid}-m{n}.avro")
        with DeleteManifestWriter(md.specs()[spec_id], md.schema(), table.io.new_output(path), snapshot_id,
                                  compression) as writer:
            for f in group:
                writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                   sequence_number=None, file_sequence_number=None, data_file=f))
        new_manifests.append(writer.to_manifest_file())
    list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit_uuid}.avro")
    with write_manifest_list(format_version=md.format_version, output_file=table.io.new_output(list_path),
                             snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id,
                             sequence_number=sequence_number, avro_compression=compression) as writer:
        writer.add_manifests(new_manifests + list(parent.manifests(table.io)))
    pos = [f for f in files if f.content == DataFileContent.POSITION_DELETES]
    eq = [f for f in files if f.content == DataFileContent.EQUALITY_DELETES]
    summary = Summary(Operation.DELETE, **{
        "added-delete-files": str(len(files)),
        "added-position-delete-files": str(len(pos)), "added-position-deletes": str(sum(f.record_count for f in pos)),
        "added-equality-delete-files": str(len(eq)), "added-equality-deletes": str(sum(f.record_count for f in eq)),
    })
    snapshot = Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id, manifest_list=list_path,
                        sequence_number=sequence_number, summary=summary, schema_id=md.current_schema_id)
    with table.transaction() as tx:
        tx._apply((AddSnapshotUpdate(snapshot=snapshot),
                   SetSnapshotRefUpdate(snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id,
                                        ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH)),
                  (AssertRefSnapshotId(snapshot_id=parent.snapshot_id, ref=MAIN_BRANCH),))
    assert table.metadata.current_snapshot_id == snapshot_id
    assert table.metadata.last_sequence_number == sequence_number
    return snapshot_id, sequence_number


# ======================================================================= the independent model
class Model:
    """The files of one table as written, and the spec's delete rules over them."""

    def __init__(self, table: Table, notes: str):
        self.table = table
        self.notes = notes
        self.data: list[dict] = []      # {path, seq, spec_id, partition, rows (file order)}
        self.deletes: list[dict] = []   # {kind, path, seq, spec_id, partition, entries | columns+keys}
        self.snapshots: list[tuple[int, int]] = []  # (snapshot id, sequence number)
        self.specs_unpartitioned = {sid: spec.is_unpartitioned() for sid, spec in table.specs().items()}

    def refresh_specs(self):
        self.specs_unpartitioned = {sid: spec.is_unpartitioned() for sid, spec in self.table.specs().items()}

    # ---- writing
    def append(self, rows: list[dict]) -> list[str]:
        t = self.table
        t.append(pa.Table.from_pylist(rows, schema=t.schema().as_arrow()))
        snap = t.current_snapshot()
        new_files, read_back = [], []
        for manifest in snap.manifests(t.io):
            if manifest.content != ManifestContent.DATA:
                continue
            for e in manifest.fetch_manifest_entry(t.io, discard_deleted=True):
                if e.snapshot_id != snap.snapshot_id or e.status != ManifestEntryStatus.ADDED:
                    continue
                df = e.data_file
                assert e.sequence_number == snap.sequence_number, (e.sequence_number, snap.sequence_number)
                file_rows = pq.read_table(local(df.file_path)).to_pylist()  # file order = positions
                read_back += file_rows
                self.data.append({"path": df.file_path, "seq": e.sequence_number, "spec_id": manifest.partition_spec_id,
                                  "partition": tuple(df.partition[i] for i in range(len(df.partition))),
                                  "rows": file_rows})
                new_files.append(df.file_path)
        assert Counter(map(row_key, read_back)) == Counter(map(row_key, rows)), "data files do not hold the rows appended"
        self.snapshots.append((snap.snapshot_id, snap.sequence_number))
        return new_files

    def file(self, index: int) -> dict:
        return self.data[index]

    def commit(self, files: list[DataFile], described: list[dict]):
        sid, seq = commit_delete_files(self.table, files)
        for f, d in zip(files, described):
            self.deletes.append({**d, "path": f.file_path, "seq": seq, "spec_id": f.spec_id,
                                 "partition": tuple(f.partition[i] for i in range(len(f.partition)))})
        self.snapshots.append((sid, seq))

    def position_deletes(self, entries: list[tuple[str, int]], spec_id: int = 0, partition: tuple = (),
                         with_bounds: bool = True) -> tuple[DataFile, dict]:
        f = write_position_deletes(self.table, entries, spec_id, partition, with_bounds)
        return f, {"kind": "pos", "entries": set(entries)}

    def equality_deletes(self, columns: list[str], keys: list[tuple], spec_id: int = 0,
                         partition: tuple = (), with_metrics: bool = False) -> tuple[DataFile, dict]:
        f = write_equality_deletes(self.table, columns, keys, spec_id, partition, with_metrics)
        return f, {"kind": "eq", "columns": columns, "keys": set(keys), "metrics": with_metrics}

    def commit_one(self, made: tuple[DataFile, dict]):
        self.commit([made[0]], [made[1]])

    # ---- reading (the spec's rules)
    def live(self, seq: int | None = None) -> tuple[list[dict], dict]:
        """Rows live at sequence number `seq` (default: all), and delete statistics."""
        seq = max(s for _, s in self.snapshots) if seq is None else seq
        stats = {"rows_deleted_by_position": 0, "rows_deleted_by_equality": 0, "equality_deletes_pruned": 0}
        pos_files, eq_files = set(), set()
        out = []
        deletes = [d for d in self.deletes if d["seq"] <= seq]
        for data in (d for d in self.data if d["seq"] <= seq):
            same_partition = lambda d: d["spec_id"] == data["spec_id"] and d["partition"] == data["partition"]
            pos = [d for d in deletes if d["kind"] == "pos" and data["seq"] <= d["seq"] and same_partition(d)]
            eq = [d for d in deletes if d["kind"] == "eq" and data["seq"] < d["seq"]
                  and (self.specs_unpartitioned[d["spec_id"]] or same_partition(d))]
            # A reader skips an equality delete file whose metrics cannot meet the data file's
            # (Iceberg Java's DeleteFileIndex): the rows stay the same, the files applied do not.
            kept = [d for d in eq if may_match_by_metrics(data["rows"], d)]
            stats["equality_deletes_pruned"] += len(eq) - len(kept)
            eq = kept
            pos_files.update(d["path"] for d in pos)
            eq_files.update(d["path"] for d in eq)
            for position, row in enumerate(data["rows"]):
                if any((data["path"], position) in d["entries"] for d in pos):
                    stats["rows_deleted_by_position"] += 1
                    continue
                if any(tuple(row[c] for c in d["columns"]) in d["keys"] for d in eq):
                    stats["rows_deleted_by_equality"] += 1
                    continue
                out.append(row)
        stats["delete_files_position"] = len(pos_files)
        stats["delete_files_equality"] = len(eq_files)
        return out, stats

    def result(self, rows: list[dict], columns: list[str] | None = None) -> dict:
        schema = self.table.schema()
        fields = [schema.find_field(c) for c in (columns or [f.name for f in schema.fields])]
        out = [[norm(r[f.name], f.field_type) for f in fields] for r in rows]
        out.sort(key=row_key)
        return {"columns": [f.name for f in fields], "types": [type_str(f.field_type) for f in fields],
                "count": len(out), "rows": out}


def may_match_by_metrics(rows: list[dict], delete: dict) -> bool:
    """Whether an equality delete file written with metrics may delete one of `rows` (a data file's),
    judged only from what the two files' metrics say (counts and bounds, computed here from the values
    themselves): the rule of Iceberg Java's DeleteFileIndex.canContainEqDeletesForFile. Files written
    without metrics always may. (Each such file is committed on its own here, so a reader's grouping of
    files committed together does not come in.)"""
    if not delete.get("metrics"):
        return True
    for i, c in enumerate(delete["columns"]):
        data_values = [r[c] for r in rows]
        delete_values = [k[i] for k in delete["keys"]]
        data_nulls = sum(v is None for v in data_values)
        delete_nulls = sum(v is None for v in delete_values)
        if data_nulls and delete_nulls:
            continue
        if data_nulls == len(data_values) and not delete_nulls:
            return False
        if delete_nulls == len(delete_values) and not data_nulls:
            return False
        data_present = [v for v in data_values if v is not None]
        delete_present = [v for v in delete_values if v is not None]
        if data_present and delete_present and (min(data_present) > max(delete_present)
                                                or min(delete_present) > max(data_present)):
            return False
    return True


def pyiceberg_result(table: Table, snapshot_id: int) -> dict:
    schema = table.schema()
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    assert arrow.column_names == [f.name for f in schema.fields]
    cols = [arrow.column(i).to_pylist() for i in range(arrow.num_columns)]
    rows = [[norm(v, f.field_type) for v, f in zip(r, schema.fields)] for r in zip(*cols)]
    rows.sort(key=row_key)
    return {"columns": [f.name for f in schema.fields], "types": [type_str(f.field_type) for f in schema.fields],
            "count": len(rows), "rows": rows}


def cross_check(m: Model) -> list[str]:
    """Every snapshot: the model against PyIceberg's scan where PyIceberg can read it."""
    notes = []
    for sid, seq in m.snapshots:
        rows, _ = m.live(seq)
        want = m.result(rows)
        try:
            got = pyiceberg_result(m.table, sid)
        except (ValueError, NotImplementedError) as e:
            if "equality deletes" not in str(e):
                raise
            notes.append(f"seq {seq}: not checked (PyIceberg 0.12: no equality deletes)")
            continue
        if got != want:
            sys.exit(f"{m.table.name()} snapshot {sid} (seq {seq}): PyIceberg and the model disagree:\n"
                     f"  pyiceberg {got['count']} rows {got['rows'][:20]}\n  model     {want['count']} rows {want['rows'][:20]}")
        notes.append(f"seq {seq}: matches PyIceberg ({got['count']} rows)")
    return notes


# ======================================================================= tables
KEY_PAYLOAD = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "payload", StringType()))
# A query's column list meaning "the answer is `count(*) AS n`".
COUNT = ["<count>"]
ID_PAYLOAD = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "payload", StringType()))


def build_eq_nulls(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.eq_nulls", schema=KEY_PAYLOAD)
    m = Model(t, "Equality delete on id with a NULL key (deletes every null-id row written before it: null equals "
                 "null) and regular keys; then id 5 and a null id re-inserted (later sequence number: they survive).")
    m.append([{"id": i, "payload": f"a{i}"} for i in range(1, 21)] +
             [{"id": None, "payload": f"a_null{k}"} for k in range(3)])
    m.append([{"id": i, "payload": f"b{i}"} for i in range(21, 31)] + [{"id": None, "payload": "b_null0"}])
    m.commit_one(m.equality_deletes(["id"], [(None,), (5,), (6,), (25,), (99,)]))
    m.append([{"id": 5, "payload": "again5"}, {"id": None, "payload": "null_after"}])
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE id IS NULL", None, lambda r: r["id"] is None),
               ("SELECT * FROM {t} WHERE id <= 6", None, lambda r: r["id"] is not None and r["id"] <= 6),
               ("SELECT id FROM {t} WHERE payload LIKE 'a%'", ["id"], lambda r: r["payload"].startswith("a"))]
    return m, queries


def build_eq_two_strings(cat) -> tuple[Model, list]:
    schema = Schema(NestedField(1, "a", StringType()), NestedField(2, "b", StringType()),
                    NestedField(3, "payload", StringType()))
    t = cat.create_table(f"{NAMESPACE}.eq_two_strings", schema=schema)
    m = Model(t, "Equality deletes on the pair (a, b), with nulls in either key column: only rows whose whole "
                 "pair matches go; (x, p) re-inserted afterwards survives.")
    rows = []
    for a in ["x", "y", "z", None]:
        for b in ["p", "q", None]:
            for k in range(2):
                rows.append({"a": a, "b": b, "payload": f"{a}/{b}/{k}"})
    m.append(rows)
    m.commit_one(m.equality_deletes(["a", "b"], [("x", "p"), ("y", None), (None, "q"), (None, None), ("z", "nope"),
                                                 ("p", "x")]))
    m.append([{"a": "x", "b": "p", "payload": "x/p/again"}])
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE a = 'x'", None, lambda r: r["a"] == "x"),
               ("SELECT payload FROM {t} WHERE b IS NULL", ["payload"], lambda r: r["b"] is None)]
    return m, queries


def build_eq_and_pos_same_file(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.eq_and_pos_same_file", schema=ID_PAYLOAD)
    m = Model(t, "One data file with a position delete file and an equality delete file (committed together, in "
                 "one delete manifest) applying to it; the row at position 10 (id 10) is deleted by both.")
    [path] = m.append([{"id": i, "payload": f"p{i}"} for i in range(100)])
    assert [r["id"] for r in m.file(0)["rows"]] == list(range(100)), "PyIceberg reordered the rows"
    pos = m.position_deletes([(path, p) for p in (0, 10, 20, 30, 50)])
    eq = m.equality_deletes(["id"], [(10,), (40,), (41,), (99,), (500,)])
    m.commit([pos[0], eq[0]], [pos[1], eq[1]])
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE id < 45", None, lambda r: r["id"] < 45),
               ("SELECT id FROM {t} WHERE payload IN ('p10', 'p11', 'p40', 'p50', 'p98')", ["id"],
                lambda r: r["payload"] in ("p10", "p11", "p40", "p50", "p98"))]
    return m, queries


def build_many_small_deletes(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.many_small_deletes", schema=ID_PAYLOAD)
    m = Model(t, "50 equality delete files of 3-4 ids, one commit each, over 3 data files; a 4th data file "
                 "appended after the 25th delete re-inserts ids 0, 1, 5 (survive) and 360 (deleted again by "
                 "delete 30), and deletes 25..49 also delete ids 1000+k of that file.")
    for f in range(3):
        m.append([{"id": i, "payload": f"f{f}_{i}"} for i in range(f * 200, f * 200 + 200)])
    for k in range(50):
        if k == 25:
            m.append([{"id": i, "payload": f"f3_{i}"} for i in range(1000, 1050)] +
                     [{"id": i, "payload": f"re_{i}"} for i in (0, 1, 5, 360)])
        keys = [(k * 12,), (k * 12 + 1,), (k * 12 + 5,)] + ([(1000 + k,)] if k >= 25 else [])
        m.commit_one(m.equality_deletes(["id"], keys))
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE id < 30 OR id >= 1020", None, lambda r: r["id"] < 30 or r["id"] >= 1020),
               ("SELECT payload FROM {t} WHERE payload LIKE 're_%'", ["payload"], lambda r: r["payload"].startswith("re_"))]
    return m, queries


def build_pos_many_files(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.pos_many_files", schema=ID_PAYLOAD)
    m = Model(t, "One position delete file (file_path bounds differ, as Spark writes them) referencing rows of 5 "
                 "data files; a 6th data file appended afterwards is untouched.")
    paths = []
    for f in range(5):
        paths += m.append([{"id": f * 100 + i, "payload": f"f{f}_{i}"} for i in range(40)])
    entries = [(p, n) for p in paths for n in (0, 3, 7, 39)] + [(paths[2], n) for n in range(10, 20)]
    m.commit_one(m.position_deletes(entries))
    m.append([{"id": 900 + i, "payload": f"f5_{i}"} for i in range(10)])
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE id BETWEEN 200 AND 215", None, lambda r: 200 <= r["id"] <= 215),
               ("SELECT id FROM {t} WHERE payload LIKE 'f2_%'", ["id"], lambda r: r["payload"].startswith("f2_"))]
    return m, queries


def build_pos_row_groups(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.pos_row_groups", schema=ID_PAYLOAD,
                         properties={"write.parquet.row-group-limit": "5000", "read.split.target-size": "20000"})
    m = Model(t, "One data file of 8 row groups of 5,000 rows (ids 0..39999 in order), planned as several tasks at "
                 "its split offsets; position deletes of every 7th row, all of row group 2, a 4,500-row run inside "
                 "row group 5, and a delete file for positions 20000..20009 and 39999; a second data file "
                 "appended later is untouched.")
    [path] = m.append([{"id": i, "payload": f"r{i}"} for i in range(40_000)])
    rows = m.file(0)["rows"]
    assert [r["id"] for r in rows] == list(range(40_000)), "PyIceberg reordered the rows"
    row_groups = pq.ParquetFile(local(path)).metadata.num_row_groups
    assert row_groups == 8, f"expected 8 row groups, PyIceberg wrote {row_groups}"
    positions = sorted(set(range(0, 40_000, 7)) | set(range(10_000, 15_000)) | set(range(25_500, 30_000)))
    m.commit_one(m.position_deletes([(path, p) for p in positions]))
    m.commit_one(m.position_deletes([(path, p) for p in list(range(20_000, 20_010)) + [39_999]]))
    m.append([{"id": 100_000 + i, "payload": f"late{i}"} for i in range(10)])
    queries = [("SELECT id FROM {t} WHERE id >= 31000", ["id"], lambda r: r["id"] >= 31_000),
               ("SELECT * FROM {t} WHERE id BETWEEN 24000 AND 26000", None, lambda r: 24_000 <= r["id"] <= 26_000),
               ("SELECT payload FROM {t} WHERE id < 12 OR id > 39990", ["payload"],
                lambda r: r["id"] < 12 or r["id"] > 39_990),
               ("SELECT count(*) AS n FROM {t} WHERE id < 20005", COUNT, lambda r: r["id"] < 20_005)]
    return m, queries


def build_eq_partitioned(cat) -> tuple[Model, list]:
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "cat", StringType()),
                    NestedField(3, "payload", StringType()))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="cat"))
    t = cat.create_table(f"{NAMESPACE}.eq_partitioned", schema=schema, partition_spec=spec)
    m = Model(t, "identity(cat): equality deletes on id scoped to partition a (ids 2,3,4) and b (id 9): the same ids "
                 "elsewhere survive. Then partition evolution to unpartitioned (spec 1); a spec-1 file with ids 11 "
                 "and 7 in cat a; a spec-0 partition-a delete of ids 11, 5 (applies to the spec-0 file only); a "
                 "global spec-1 delete of ids 7, 12 (every partition, both specs); id 7 re-inserted after.")
    m.append([{"id": i, "cat": c, "payload": f"{c}{i}"} for c in "abc" for i in range(1, 11)])
    assert len(m.data) == 3, m.data
    m.commit_one(m.equality_deletes(["id"], [(2,), (3,), (4,)], spec_id=0, partition=("a",)))
    m.commit_one(m.equality_deletes(["id"], [(9,)], spec_id=0, partition=("b",)))
    with t.update_spec() as u:
        u.remove_field("cat")
    m.refresh_specs()
    new_spec = t.spec()
    assert new_spec.spec_id == 1 and new_spec.is_unpartitioned(), new_spec
    m.append([{"id": i, "cat": "d", "payload": f"d{i}"} for i in range(11, 16)] +
             [{"id": 11, "cat": "a", "payload": "a11_spec1"}, {"id": 7, "cat": "a", "payload": "a7_spec1"}])
    assert m.data[-1]["spec_id"] == 1
    m.commit_one(m.equality_deletes(["id"], [(11,), (5,)], spec_id=0, partition=("a",)))
    m.commit_one(m.equality_deletes(["id"], [(7,), (12,)], spec_id=1, partition=()))
    m.append([{"id": 7, "cat": "e", "payload": "e7_after"}])
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE cat = 'a'", None, lambda r: r["cat"] == "a"),
               ("SELECT cat, payload FROM {t} WHERE id IN (2, 5, 7, 9, 11)", ["cat", "payload"],
                lambda r: r["id"] in (2, 5, 7, 9, 11))]
    return m, queries


def build_eq_bounds(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.eq_bounds", schema=KEY_PAYLOAD)
    m = Model(t, "Equality delete files with column metrics (bounds, value and null counts) next to ones without: "
                 "a reader may skip a delete file for a data file when the metrics show no key can match "
                 "(ranges apart, nulls only on one side); the rows are those of the plain spec rules. The last "
                 "data file comes after every delete file.")
    for f in range(3):
        m.append([{"id": i, "payload": f"p{i}"} for i in range(f * 100, f * 100 + 100)])
    m.commit_one(m.equality_deletes(["id"], [(10,), (20,)], with_metrics=True))            # file 0 only
    m.commit_one(m.equality_deletes(["id"], [(150,), (199,)], with_metrics=True))          # file 1 only
    m.commit_one(m.equality_deletes(["id"], [(None,), (5,)], with_metrics=True))           # file 0: no null data
    m.commit_one(m.equality_deletes(["id"], [(None,)], with_metrics=True))                 # none: only nulls
    m.append([{"id": None, "payload": "rnull1"}, {"id": None, "payload": "rnull2"}, {"id": 5, "payload": "r5"}] +
             [{"id": i, "payload": f"r{i}"} for i in range(300, 310)])
    m.commit_one(m.equality_deletes(["id"], [(None,), (305,)], with_metrics=True))         # file 3: nulls both
    m.commit_one(m.equality_deletes(["id"], [(7,), (1000,)]))                              # all: no metrics
    m.commit_one(m.equality_deletes(["payload"], [("p150",)], with_metrics=True))          # files 0, 1 by bounds
    m.commit_one(m.equality_deletes(["payload"], [("q1",)], with_metrics=True))            # none
    m.append([{"id": i, "payload": f"s{i}"} for i in range(400, 410)])                     # after every delete
    queries = [("SELECT payload FROM {t}", ["payload"], lambda r: True),
               ("SELECT * FROM {t} WHERE id < 50 OR id IS NULL", None, lambda r: r["id"] is None or r["id"] < 50),
               ("SELECT count(*) AS n FROM {t} WHERE id >= 200", COUNT, lambda r: r["id"] is not None and r["id"] >= 200)]
    return m, queries


def build_eq_bounds_disjoint(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.eq_bounds_disjoint", schema=KEY_PAYLOAD)
    m = Model(t, "An equality delete file with metrics whose keys lie outside every data file's range: it applies "
                 "by the spec's rules but can delete nothing, so a reader may skip it everywhere (and count "
                 "rows from the manifests).")
    for f in range(2):
        m.append([{"id": i, "payload": f"p{i}"} for i in range(f * 100, f * 100 + 100)])
    m.commit_one(m.equality_deletes(["id"], [(500,), (510,)], with_metrics=True))
    return m, [("SELECT payload FROM {t}", ["payload"], lambda r: True)]


def build_corrupt_delete(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.corrupt_delete", schema=ID_PAYLOAD)
    m = Model(t, "A position delete file overwritten with garbage after the commit: reads must fail naming it.")
    [path] = m.append([{"id": i, "payload": f"p{i}"} for i in range(20)])
    made = m.position_deletes([(path, 1), (path, 2), (path, 3)])
    m.commit_one(made)
    return m, []


def build_missing_delete(cat) -> tuple[Model, list]:
    t = cat.create_table(f"{NAMESPACE}.missing_delete", schema=ID_PAYLOAD)
    m = Model(t, "An equality delete file removed from disk after the commit: reads must fail naming it.")
    m.append([{"id": i, "payload": f"p{i}"} for i in range(20)])
    m.commit_one(m.equality_deletes(["id"], [(4,), (5,)]))
    return m, []


def entry(m: Model, queries: list) -> dict:
    rows, stats = m.live()
    e = {"name": m.table.name()[-1], "current": m.result(rows), "limit": 7, "metrics": stats,
         "queries": [{"sql": "SELECT * FROM {t}", "result": m.result(rows)},
                     {"sql": "SELECT count(*) AS n FROM {t}",
                      "result": {"columns": ["n"], "types": ["long"], "count": 1, "rows": [[len(rows)]]}}],
         "snapshots": [{"snapshot_id": sid, "sequence_number": seq, "result": m.result(m.live(seq)[0])}
                       for sid, seq in m.snapshots],
         "data_files": len(m.data), "delete_files": len(m.deletes),
         "notes": m.notes}
    for sql, columns, pred in queries:
        matching = [r for r in rows if pred(r)]
        result = ({"columns": ["n"], "types": ["long"], "count": 1, "rows": [[len(matching)]]} if columns is COUNT
                  else m.result(matching, columns))
        e["queries"].append({"sql": sql, "result": result})
    e["pyiceberg_cross_check"] = cross_check(m)
    return e


def main(argv):
    if len(argv) != 1:
        sys.exit(f"usage: {Path(__file__).name} OUT_DIR")
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for p in ("catalog.db", "expected.json"):
        (out / p).unlink(missing_ok=True)
    shutil.rmtree(out / "warehouse", ignore_errors=True)
    (out / "warehouse").mkdir()
    t0 = time.time()
    cat = SqlCatalog(CATALOG, uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}/warehouse")
    cat.create_namespace(NAMESPACE)
    tables = []
    for build in [build_eq_nulls, build_eq_two_strings, build_eq_and_pos_same_file, build_many_small_deletes,
                  build_pos_many_files, build_pos_row_groups, build_eq_partitioned, build_eq_bounds,
                  build_eq_bounds_disjoint, build_corrupt_delete, build_missing_delete]:
        m, queries = build(cat)
        e = entry(m, queries)
        name = e["name"]
        if name == "corrupt_delete":
            [d] = m.deletes
            with open(local(d["path"]), "wb") as f:
                f.write(b"this is not a parquet file\n" * 40)
            e["error_delete_file"] = local(d["path"])
        elif name == "missing_delete":
            [d] = m.deletes
            os.remove(local(d["path"]))
            e["error_delete_file"] = local(d["path"])
        tables.append(e)
        checked = sum("matches" in n for n in e["pyiceberg_cross_check"])
        print(f"{name:22} rows={e['current']['count']:4} snapshots={len(e['snapshots']):2} data={e['data_files']:2} "
              f"deletes={e['delete_files']:2} pyiceberg-checked={checked}/{len(e['snapshots'])} {e['metrics']}", flush=True)

    import pyiceberg
    doc = {"catalog_name": CATALOG, "catalog_db": "catalog.db", "warehouse": "warehouse", "namespace": NAMESPACE,
           "generator": {"script": "table-provider/tests/pyiceberg/gen_deletes.py", "pyiceberg": pyiceberg.__version__,
                         "pyarrow": pa.__version__},
           "tables": tables}
    with open(out / "expected.json", "w") as f:
        json.dump(doc, f, ensure_ascii=False)
    print(f"wrote {len(tables)} tables and {out / 'expected.json'} in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main(sys.argv[1:])
