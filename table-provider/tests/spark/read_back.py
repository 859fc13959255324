"""Reads tables that Petrel wrote with Spark 3.5 + Iceberg 1.10 and with PyIceberg, and prints what
each engine sees as JSON: the rows (normalised as the corpus README says), Spark's `files` and
`snapshots` metadata tables, and PyIceberg's rows.

    <spark venv python> read_back.py WAREHOUSE TABLE [TABLE...]

WAREHOUSE is a Hadoop-layout warehouse (Spark's catalog `iceberg`, namespace `db`). Runs inside the
Spark virtualenv of scripts/setup-spark.sh (pyspark, the Iceberg runtime, pyiceberg).
"""
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import make_corpus  # noqa: E402


def pyiceberg_rows(table_dir: Path):
    from pyiceberg.table import StaticTable
    hint = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    static = StaticTable.from_metadata(str(table_dir / "metadata" / f"v{hint}.metadata.json"))
    arrow = static.scan().to_arrow()
    return sorted(json.dumps(make_corpus.jval(r), sort_keys=True, default=str) for r in arrow.to_pylist())


def main():
    warehouse, tables = Path(sys.argv[1]), sys.argv[2:]
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    spark = make_corpus.spark_session(warehouse, vdir)
    out = {}
    for t in tables:
        ident = f"iceberg.db.{t}"
        files = spark.sql(
            f"SELECT file_path, partition, record_count, value_counts, null_value_counts, nan_value_counts, "
            f"lower_bounds, upper_bounds FROM {ident}.files ORDER BY file_path").collect()
        snaps = spark.sql(f"SELECT snapshot_id, parent_id, operation, summary FROM {ident}.snapshots "
                          f"ORDER BY committed_at").collect()
        mismatches = []
        schema = spark.table(ident).schema
        for field in schema.fields:
            name = field.name
            kind = field.dataType.typeName()
            if kind in ("struct", "array", "map", "binary"):
                continue
            value = f"CASE WHEN isnan({name}) THEN NULL ELSE {name} END" if kind in ("float", "double") else name
            actual = {r[0]: r for r in spark.sql(
                f"SELECT _file, min({value}), max({value}), count(*) - count({name}) FROM {ident} GROUP BY _file"
            ).collect()}
            for r in spark.sql(
                f"SELECT file_path, readable_metrics.{name}.lower_bound, readable_metrics.{name}.upper_bound, "
                f"readable_metrics.{name}.null_value_count FROM {ident}.files"
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
        lineage = None
        version = json.loads((sorted((warehouse / "db" / t / "metadata").glob("v*.metadata.json"),
                                     key=lambda p: int(p.name[1:].split(".")[0]))[-1]).read_text())["format-version"]
        if version >= 3:
            r = spark.sql(f"SELECT count(*), count(_row_id), count(DISTINCT _row_id), "
                          f"min(_row_id), max(_row_id) FROM {ident}").collect()[0]
            lineage = {"rows": r[0], "row_ids": r[1], "distinct": r[2], "min": r[3], "max": r[4]}
        out[t] = {
            "row_lineage": lineage,
            "metric_mismatches": mismatches,
            "spark": make_corpus.result(spark.sql(f"SELECT * FROM {ident}")),
            "files": [make_corpus.jval(f.asDict(recursive=True)) for f in files],
            "snapshots": [make_corpus.jval(s.asDict(recursive=True)) for s in snaps],
            "pyiceberg": pyiceberg_rows(warehouse / "db" / t),
        }
    spark.stop()
    json.dump(out, sys.stdout, default=lambda b: b.hex() if isinstance(b, (bytes, bytearray)) else str(b))


if __name__ == "__main__":
    main()
