"""Spark 3.5 + Iceberg 1.10 on tables in S3 (moto): reads tables that Petrel wrote, after running
the `--sql` statements (Spark writing to those tables), and prints what Spark sees as JSON.

    <spark venv python> s3_read_back.py --jars DIR --endpoint URL --access-key K --secret-key S
        --warehouse s3://bucket/prefix [--sql STATEMENT]... TABLE...

Spark's catalog `iceberg` is the Hadoop-layout warehouse `--warehouse`. A TABLE is
`iceberg.namespace.table`, or `name=s3://.../vN.metadata.json`: a table of another catalog (the
REST catalog), loaded by its metadata file. Spark's REST catalog client cannot run here: the
Iceberg Spark runtime on PyPI (snowpark-connect-deps-iceberg) leaves out the shaded Apache
HttpClient 5 it is built on, and no PyPI package ships that jar. Files are read and written through
Hadoop's S3A file system (the jars of scripts/setup-spark-s3.sh in `--jars`), `s3://` mapped to
it, path-style requests to `--endpoint`.

Per table the JSON holds `rows` (every row as an object, in the corpus's JSON form, sorted),
`snapshots` ([{snapshot_id, operation, added_records, deleted_records}] oldest first), `files`
([{file_path, content, partition, record_count}] of the `files` metadata table, sorted), and
`metric_mismatches` (each data file's bounds and null counts in Spark's `readable_metrics`
against the rows in the file itself, read as plain Parquet: merge-on-read deletes leave deleted
rows in their files, so the table's live rows cannot be the reference).
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import read_back  # noqa: E402  (also puts scripts/corpus on the path)
import make_corpus  # noqa: E402


def session(a):
    jars = Path(a.jars)
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": a.endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.access.key": a.access_key,
        "spark.hadoop.fs.s3a.secret.key": a.secret_key,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    return make_corpus.spark_session(
        a.warehouse, vdir,
        extra_jars=[str(jars / "hadoop-aws-3.3.1.jar"), str(jars / "aws-java-sdk-bundle-1.11.901.jar")],
        extra_conf=conf)


def metric_mismatches(spark, name, df, data_files):
    """Every data file's bounds and null counts (Spark's readable_metrics) against the values in
    the file (all data files read at once as Parquet, grouped by file)."""
    from pyspark.sql import functions as F
    metrics = {r["file_path"]: r["readable_metrics"] for r in data_files.select("file_path", "readable_metrics").collect()}
    columns = [f for f in df.schema.fields if f.dataType.typeName() not in ("struct", "array", "map", "binary")]
    raw = spark.read.parquet(*metrics).select(*[f.name for f in columns]).withColumn("_path", F.input_file_name())
    aggregates = []
    for f in columns:
        value = F.when(F.isnan(f.name), None).otherwise(F.col(f.name)) if f.dataType.typeName() in ("float", "double") \
            else F.col(f.name)
        aggregates += [F.min(value).alias(f"{f.name}_min"), F.max(value).alias(f"{f.name}_max"),
                       (F.count(F.lit(1)) - F.count(f.name)).alias(f"{f.name}_nulls")]
    actual = {r["_path"]: r for r in raw.groupBy("_path").agg(*aggregates).collect()}
    mismatches = []
    for path, m in sorted(metrics.items()):
        a = actual.get(path)
        if a is None:
            mismatches.append(f"{name}: no rows read from {path} (read: {sorted(actual)})")
            continue
        for f in columns:
            lower, upper, nulls = m[f.name]["lower_bound"], m[f.name]["upper_bound"], m[f.name]["null_value_count"]
            amin, amax, anulls = a[f"{f.name}_min"], a[f"{f.name}_max"], a[f"{f.name}_nulls"]
            if nulls != anulls:
                mismatches.append(f"{name}.{f.name} {path}: null count {nulls}, the file has {anulls}")
            exact = f.dataType.typeName() != "string"
            if amin is not None and (lower is None or lower > amin or (exact and lower != amin)):
                mismatches.append(f"{name}.{f.name} {path}: lower bound {lower!r}, the file's minimum {amin!r}")
            if amax is not None and (upper is None or upper < amax or (exact and upper != amax)):
                mismatches.append(f"{name}.{f.name} {path}: upper bound {upper!r}, the file's maximum {amax!r}")
    return mismatches


def read(spark, spec):
    name, _, path = spec.partition("=")
    if path:
        df = spark.read.format("iceberg").load(path)
        meta = lambda kind: spark.read.format("iceberg").load(f"{path}#{kind}")  # noqa: E731
    else:
        df = spark.table(name)
        meta = lambda kind: spark.table(f"{name}.{kind}")  # noqa: E731
    files = meta("files")
    data_files = files.where("content = 0")
    return name, {
        "rows": sorted((json.dumps(r, sort_keys=True) for r in read_back.records(df)), key=str),
        "snapshots": [
            {"snapshot_id": r["snapshot_id"], "operation": r["operation"],
             "added_records": int((r["summary"] or {}).get("added-records", 0)),
             "deleted_records": int((r["summary"] or {}).get("deleted-records", 0))}
            for r in meta("snapshots").orderBy("committed_at", "snapshot_id").collect()
        ],
        "files": sorted(
            (make_corpus.jval({"file_path": r["file_path"], "content": r["content"],
                               "partition": r["partition"].asDict(recursive=True) if r["partition"] else None,
                               "record_count": r["record_count"]})
             for r in files.select("file_path", "content", "partition", "record_count").collect()),
            key=lambda f: f["file_path"]),
        "metric_mismatches": metric_mismatches(spark, name, df, data_files),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jars", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret-key", required=True)
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--sql", action="append", default=[], help="a statement Spark runs first")
    ap.add_argument("tables", nargs="+")
    a = ap.parse_args()
    spark = session(a)
    for statement in a.sql:
        spark.sql(statement).collect()
    out = dict(read(spark, spec) for spec in a.tables)
    spark.stop()
    json.dump(out, sys.stdout, default=lambda b: b.hex() if isinstance(b, (bytes, bytearray)) else str(b))


if __name__ == "__main__":
    main()
