"""Prints Spark 3.5 + Iceberg 1.10's metadata tables of tables in a Hadoop-layout warehouse as JSON
(used by tests/it/metadata_tables.rs):

    <spark venv python> metadata_tables.py [--sql STATEMENT]... [--eq-delete JSON]... WAREHOUSE TABLE...

Each `--sql` statement runs first, in order (the test's tables are written by Spark itself). Each
`--eq-delete` is `{"table", "columns", "rows"}`: equality deletes committed through the Iceberg Java
API (Spark SQL cannot write them), after the statements.

Per table (catalog `iceberg`, namespace `db`) and metadata table `m`: `SELECT * FROM
iceberg.db.<table>.<m>` as {"schema": Spark's schema JSON, "rows": [row objects]}, and the same at
every snapshot (`VERSION AS OF <id>`) for the metadata tables Spark time-travels.

Values are normalised so that the Rust side can compare them exactly: timestamps as microseconds
since the epoch (Spark's Python rows are datetimes in the session zone, UTC; microseconds avoid a
text format), binary as hex, maps as objects (keys as text), structs as objects.
"""
import argparse
import datetime as dt
import decimal
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import make_corpus  # noqa: E402

METADATA_TABLES = [
    "snapshots", "history", "refs", "metadata_log_entries", "manifests", "all_manifests", "files",
    "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files", "entries",
    "all_entries", "partitions", "position_deletes",
]
# The metadata tables Spark reads at a snapshot (VERSION AS OF); the others refuse or ignore it.
TIME_TRAVEL = ["files", "data_files", "delete_files", "entries", "manifests", "partitions"]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def norm(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        delta = v - EPOCH
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {str(k): norm(x) for k, x in v.items()}
    if hasattr(v, "asDict"):
        return {k: norm(x) for k, x in v.asDict().items()}
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    return v


def dump(spark, sql):
    """Spark's schema and rows of `sql`, or {"error"} where Spark fails (reported, not hidden: the
    test says which metadata tables Spark could not read)."""
    try:
        df = spark.sql(sql)
        return {"schema": json.loads(df.schema.json()), "rows": [norm(r.asDict()) for r in df.collect()]}
    except Exception as e:  # noqa: BLE001 (py4j wraps every JVM error)
        return {"error": str(e).splitlines()[0][:500]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sql", action="append", default=[])
    parser.add_argument("--eq-delete", action="append", default=[])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("tables", nargs="*")
    args = parser.parse_args()
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    spark = make_corpus.spark_session(args.warehouse, vdir)
    for statement in args.sql:
        spark.sql(statement).collect()
    ctx = make_corpus.SparkCtx(spark, args.warehouse.parent)
    for spec in args.eq_delete:
        d = json.loads(spec)
        ctx.eq_delete(d["table"], d["columns"], d["rows"])
    out = {}
    for name in args.tables:
        ident = f"iceberg.db.{name}"
        tables = {m: dump(spark, f"SELECT * FROM {ident}.{m}") for m in METADATA_TABLES}
        versions = {}
        for s in spark.sql(f"SELECT snapshot_id FROM {ident}.snapshots").collect():
            versions[str(s.snapshot_id)] = {
                m: dump(spark, f"SELECT * FROM {ident}.{m} VERSION AS OF {s.snapshot_id}")
                for m in TIME_TRAVEL}
        out[name] = {"tables": tables, "versions": versions}
    spark.stop()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
