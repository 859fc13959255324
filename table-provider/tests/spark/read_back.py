"""Reads tables that Petrel wrote with Spark 3.5 + Iceberg 1.10, with PyIceberg and with DuckDB's
iceberg extension, and prints what each engine sees as JSON: the rows (normalised as the corpus
README says), Spark's `files`, `snapshots`, `manifests` and `partitions` metadata tables, Spark's
and DuckDB's rows at every snapshot (time travel), and PyIceberg's rows.

    <spark venv python> read_back.py [--sql STATEMENT]... [--no-versions] [--light NAME]... WAREHOUSE TABLE[=METADATA_JSON]...

WAREHOUSE is a Hadoop-layout warehouse (Spark's catalog `iceberg`, namespace `db`). A TABLE of the
form `name=/path/vN.metadata.json` is read from that metadata file instead (a table of another
catalog, e.g. a SQL catalog: Spark loads it by path). Each `--sql` statement runs in Spark, in
order, before anything is read (e.g. `INSERT INTO iceberg.db.t VALUES ...`: Spark writing to a
Petrel table). A `--light` table gets Spark's rows and metadata tables only: no DuckDB and no
metric check (for large tables with many delete files, which DuckDB 1.5.5 reads very slowly).
Runs inside the Spark virtualenv of scripts/setup-spark.sh (pyspark, the Iceberg
runtime, pyiceberg, duckdb and its iceberg/avro/parquet extension wheels).

Per table the JSON holds:
  spark, pyiceberg, duckdb        rows ({columns, types, count, rows} for Spark and DuckDB; sorted
                                  JSON texts of row objects for PyIceberg)
  versions                        [{snapshot_id, spark, duckdb}] for every snapshot, oldest first:
                                  Spark `VERSION AS OF <id>`, DuckDB `snapshot_from_id => <id>`
                                  (empty with --no-versions)
  files (with content and equality_ids), snapshots, manifests, partitions, entries (counted by
                                  snapshot and status), refs (name, type, snapshot_id, and Spark's
                                  rows at the ref)
                                  Spark's metadata tables
  metric_mismatches, row_lineage  every file's bounds/null counts against its rows; v3 _row_ids
  metadata, duckdb_skipped, duckdb_error, pyiceberg_error    what was read, what DuckDB / PyIceberg
                                  could not (PyIceberg 0.12 refuses equality deletes)
"""
import argparse
import datetime as dt
import decimal
import importlib.util
import json
import math
import os
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import make_corpus  # noqa: E402

# Iceberg types DuckDB 1.5.5's iceberg extension cannot read. It fails the whole scan at bind time
# ("Unrecognized primitive type: timestamptz_ns"), so such a column is left out of DuckDB's copy
# of the metadata (see duckdb_metadata) and reported in `duckdb_skipped`; the other columns are
# still read. (timestamp_ns, uuid, time, fixed and the nested types it reads.)
DUCKDB_UNREADABLE = {"timestamptz_ns"}


def current_metadata(table_dir: Path) -> Path:
    """The current metadata file of a Hadoop-layout table as Iceberg Java finds it: the version of
    `version-hint.text`, then forward while the next version exists (a stale hint is harmless)."""
    md = table_dir / "metadata"
    version = int((md / "version-hint.text").read_text().strip())
    while (md / f"v{version + 1}.metadata.json").exists():
        version += 1
    return md / f"v{version}.metadata.json"


def pyiceberg_rows(metadata: Path):
    from pyiceberg.table import StaticTable
    static = StaticTable.from_metadata(str(metadata))
    arrow = static.scan().to_arrow()
    return sorted(json.dumps(make_corpus.jval(r), sort_keys=True, default=str) for r in arrow.to_pylist())


# ----------------------------------------------------------------------------- DuckDB
def duckdb_connection():
    """DuckDB with the iceberg, avro and parquet extensions LOADed from their PyPI wheels (no
    autoinstall: nothing is downloaded)."""
    import duckdb
    con = duckdb.connect(config={"autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    for pkg, name in [("duckdb_extension_parquet", "parquet"), ("duckdb_extension_avro", "avro"),
                      ("duckdb_extension_iceberg", "iceberg")]:
        spec = importlib.util.find_spec(pkg)
        if spec is None:
            raise RuntimeError(f"{pkg} is not installed (scripts/setup-spark.sh installs it)")
        ext = next(Path(spec.origin).parent.glob(f"extensions/*/{name}.duckdb_extension"))
        try:
            con.execute(f"LOAD '{ext}'")
        except duckdb.Error:
            # parquet is linked into the duckdb wheel itself; loading its copy again may refuse.
            if name != "parquet":
                raise
    con.execute("SET TimeZone = 'UTC'")
    return con


def type_names(ty) -> set:
    """Every primitive type name in an Iceberg JSON type."""
    if isinstance(ty, str):
        return {ty}
    kind = ty["type"]
    if kind == "struct":
        return set().union(*(type_names(f["type"]) for f in ty["fields"]))
    if kind == "list":
        return type_names(ty["element"])
    if kind == "map":
        return type_names(ty["key"]) | type_names(ty["value"])
    return {kind}


def duckdb_metadata(metadata: Path, scratch: Path):
    """(metadata file DuckDB reads, skipped column names): the file itself, or, when a column has a
    type in DUCKDB_UNREADABLE, a copy whose schemas leave it out (data files are read by field id,
    so the remaining columns read as in the original)."""
    md = json.loads(metadata.read_text())
    current = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    skipped = [f["name"] for f in current["fields"] if type_names(f["type"]) & DUCKDB_UNREADABLE]
    if not skipped:
        return metadata, skipped
    for s in md["schemas"]:
        s["fields"] = [f for f in s["fields"] if not (type_names(f["type"]) & DUCKDB_UNREADABLE)]
    copy = scratch / f"{metadata.parent.parent.name}-{metadata.name}"
    copy.write_text(json.dumps(md))
    return copy, skipped


def ns_timestamp(ns: int, zone: bool) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    base = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=secs)
    text = base.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac:09d}".rstrip("0") if frac else "")
    return text + ("+00:00" if zone else "")


def norm(v, ty):
    """A DuckDB value (from Arrow) of Iceberg type `ty` in the corpus's JSON form, as
    make_corpus._norm gives Spark's."""
    if v is None:
        return None
    kind = ty if isinstance(ty, str) else ty["type"]
    if kind in ("float", "double"):
        v = float(v)
        return "NaN" if math.isnan(v) else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else v)
    if kind.startswith("decimal"):
        return str(v) if isinstance(v, decimal.Decimal) else str(decimal.Decimal(v))
    if kind in ("timestamp_ns", "timestamptz_ns") and isinstance(v, int):
        return ns_timestamp(v, kind == "timestamptz_ns")
    if kind == "timestamptz":
        return v.astimezone(dt.timezone.utc).isoformat()
    if kind in ("timestamp", "date", "time"):
        return v.isoformat()
    if kind == "uuid":
        return str(v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=v) if isinstance(v, bytes) else v)
    if kind == "binary" or kind.startswith("fixed"):
        return bytes(v).hex()
    if kind == "struct":
        return {f["name"]: norm(v.get(f["name"]), f["type"]) for f in ty["fields"]}
    if kind == "list":
        return [norm(x, ty["element"]) for x in v]
    if kind == "map":
        pairs = [(norm(k, ty["key"]), norm(x, ty["value"])) for k, x in (v.items() if isinstance(v, dict) else v)]
        if ty["key"] == "string":
            return dict(pairs)
        return sorted(([k, x] for k, x in pairs), key=json.dumps)
    return v


def duckdb_result(con, metadata: Path, fields, snapshot_id=None):
    """DuckDB's rows of `iceberg_scan(metadata)` (at `snapshot_id`) as {columns, types, count,
    rows}, rows normalised by the Iceberg types of `fields` and sorted."""
    import pyarrow as pa
    at = f", snapshot_from_id => {snapshot_id}" if snapshot_id is not None else ""
    table = con.execute(f"SELECT * FROM iceberg_scan('{metadata}'{at})").arrow().read_all()
    types = {f["name"]: f["type"] for f in fields}
    columns = []
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_timestamp(col.type) and col.type.unit == "ns":
            col = col.cast(pa.int64())  # Python datetimes stop at microseconds
        columns.append([norm(v, types[name]) for v in col.to_pylist()])
    rows = [list(r) for r in zip(*columns)] if columns else []
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return {"columns": table.column_names, "types": [types[c] if isinstance(types[c], str) else types[c]["type"]
                                                     for c in table.column_names],
            "ordered": False, "count": table.num_rows, "rows": rows}


# ----------------------------------------------------------------------------- Spark
def metric_mismatches(spark, t, df, files_df):
    """Every file's bounds and null counts (Spark's readable_metrics) against its rows."""
    mismatches = []
    view, files_view = f"rb_{t}", f"rb_{t}_files"
    df.select("*", "_file").createOrReplaceTempView(view)
    files_df.createOrReplaceTempView(files_view)
    for field in df.schema.fields:
        name = field.name
        kind = field.dataType.typeName()
        if kind in ("struct", "array", "map", "binary"):
            continue
        value = f"CASE WHEN isnan({name}) THEN NULL ELSE {name} END" if kind in ("float", "double") else name
        actual = {r[0]: r for r in spark.sql(
            f"SELECT _file, min({value}), max({value}), count(*) - count({name}) FROM {view} GROUP BY _file"
        ).collect()}
        for r in spark.sql(
            f"SELECT file_path, readable_metrics.{name}.lower_bound, readable_metrics.{name}.upper_bound, "
            f"readable_metrics.{name}.null_value_count FROM {files_view}"
        ).collect():
            path, lower, upper, nulls = r
            a = actual.get(path)
            if a is None:
                mismatches.append(f"{t}.{name}: no rows read from {path}")
                continue
            _, amin, amax, anulls = a
            if nulls != anulls:
                mismatches.append(f"{t}.{name} {path}: null count {nulls}, rows have {anulls}")
            if amin is not None and (lower is None or lower > amin):
                mismatches.append(f"{t}.{name} {path}: lower bound {lower!r} above min {amin!r}")
            if amax is not None and (upper is None or upper < amax):
                mismatches.append(f"{t}.{name} {path}: upper bound {upper!r} below max {amax!r}")
            if kind not in ("string",) and amin is not None and (lower != amin or upper != amax):
                mismatches.append(f"{t}.{name} {path}: bounds {lower!r}..{upper!r}, values {amin!r}..{amax!r}")
    return mismatches


def records(df, order=None):
    if order:
        df = df.orderBy(*order)
    return [make_corpus.jval(r.asDict(recursive=True)) for r in df.collect()]


def read_table(spark, con, scratch, warehouse: Path, spec: str, with_versions: bool, light: bool = False):
    name, _, path = spec.partition("=")
    if path:
        # Another catalog's table: Spark loads the metadata file by path.
        path = path.removeprefix("file://")
        metadata = Path(path)
        reader = lambda: spark.read.format("iceberg")  # noqa: E731
        main = lambda snapshot=None: (reader().option("snapshot-id", snapshot) if snapshot else reader()).load(path)  # noqa: E731
        meta = lambda kind: reader().load(f"{path}#{kind}")  # noqa: E731
    else:
        ident = f"iceberg.db.{name}"
        metadata = current_metadata(warehouse / "db" / name)
        main = lambda snapshot=None: (  # noqa: E731
            spark.sql(f"SELECT * FROM {ident} VERSION AS OF {snapshot}") if snapshot else spark.table(ident))
        meta = lambda kind: spark.table(f"{ident}.{kind}")  # noqa: E731
    df = main()
    files = meta("files")
    snaps = records(meta("snapshots").select("snapshot_id", "parent_id", "operation", "summary", "committed_at"),
                    ["committed_at"])
    for s in snaps:
        del s["committed_at"]
    md = json.loads(metadata.read_text())
    lineage = None
    if md["format-version"] >= 3:
        r = df.select("*", "_row_id").selectExpr(
            "count(*)", "count(_row_id)", "count(DISTINCT _row_id)", "min(_row_id)", "max(_row_id)").collect()[0]
        lineage = {"rows": r[0], "row_ids": r[1], "distinct": r[2], "min": r[3], "max": r[4]}
    fields = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])["fields"]
    duck_md, skipped = duckdb_metadata(metadata, scratch)
    duck_error = None
    try:
        if light:
            raise RuntimeError("not read (--light)")
        duck = duckdb_result(con, duck_md, fields)
    except Exception as e:  # reported, and the test comparing rows fails naming it
        duck, duck_error = None, f"{type(e).__name__}: {e}"
    py_rows, py_error = None, None
    try:
        py_rows = pyiceberg_rows(metadata)
    except Exception as e:  # PyIceberg 0.12 refuses equality deletes: reported, not fatal
        py_error = f"{type(e).__name__}: {e}"
    refs = records(meta("refs").select("name", "type", "snapshot_id"), ["name"])
    for r in refs:
        at = (spark.sql(f"SELECT * FROM {ident} VERSION AS OF '{r['name']}'") if not path
              else reader().option("branch" if r["type"] == "BRANCH" else "tag", r["name"]).load(path))
        r["spark"] = make_corpus.result(at)
    versions = []
    for s in (snaps if with_versions else []):
        sid = s["snapshot_id"]
        v = {"snapshot_id": sid, "spark": make_corpus.result(main(sid))}
        try:
            v["duckdb"] = duckdb_result(con, duck_md, fields, sid)
        except Exception as e:
            v["duckdb"], v["duckdb_error"] = None, f"{type(e).__name__}: {e}"
        versions.append(v)
    return name, {
        "metadata": str(metadata),
        "row_lineage": lineage,
        "metric_mismatches": [] if light else metric_mismatches(spark, name, df, files),
        "spark": make_corpus.result(df),
        # An unpartitioned table's `files` and `partitions` have no `partition` column.
        "files": records(files.select("content", "file_path", *partition(files), "record_count",
                                      "equality_ids", "value_counts",
                                      "null_value_counts", "nan_value_counts", "lower_bounds",
                                      "upper_bounds"), ["file_path"]),
        "snapshots": snaps,
        # Branches and tags (Spark's `refs`), and Spark's rows at each (`VERSION AS OF 'name'`).
        "refs": refs,
        # The current snapshot's manifests (Spark's `manifests`: no row counts), by path.
        "manifests": records(meta("manifests").select(
            "content", "path", "added_snapshot_id", "added_data_files_count", "existing_data_files_count",
            "deleted_data_files_count", "partition_summaries"), ["path"]),
        "partitions": records(meta("partitions").select(*partition(meta("partitions")), "record_count",
                                                        "file_count")),
        # What the manifests themselves hold (their entries), per snapshot and status (1: added).
        "entries": records(meta("entries").groupBy("snapshot_id", "status").count(), ["snapshot_id", "status"]),
        "versions": versions,
        "pyiceberg": py_rows,
        "pyiceberg_error": py_error,
        "duckdb": duck,
        "duckdb_error": duck_error,
        "duckdb_skipped": skipped,
    }


def partition(df):
    """`["partition"]` when the metadata table `df` has that column (a partitioned table)."""
    return ["partition"] if "partition" in df.columns else []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sql", action="append", default=[], help="a statement Spark runs first")
    ap.add_argument("--no-versions", action="store_true", help="no time travel to every snapshot")
    ap.add_argument("--light", action="append", default=[], help="a table read by Spark only")
    ap.add_argument("warehouse", type=Path)
    ap.add_argument("tables", nargs="+")
    a = ap.parse_args()
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    spark = make_corpus.spark_session(a.warehouse, vdir)
    for statement in a.sql:
        spark.sql(statement).collect()
    con = duckdb_connection()
    out = {}
    with tempfile.TemporaryDirectory(prefix="read-back-") as scratch:
        for spec in a.tables:
            light = spec.partition("=")[0] in a.light
            name, seen = read_table(spark, con, Path(scratch), a.warehouse, spec, not a.no_versions, light)
            out[name] = seen
    spark.stop()
    json.dump(out, sys.stdout, default=lambda b: b.hex() if isinstance(b, (bytes, bytearray)) else str(b))


if __name__ == "__main__":
    main()
