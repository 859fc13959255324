"""Spark 3.5 + Iceberg 1.10's changelog view of every snapshot of some tables, and each snapshot's
full contents (the independent model where Spark refuses: delete files).

    <spark venv python> changelog.py [--sql STATEMENT]... [--moved-from DIR] WAREHOUSE TABLE...

WAREHOUSE is a Hadoop-layout warehouse (Spark's catalog `iceberg`, namespace `db`). Each `--sql`
statement runs in Spark first, in order (Spark writing test tables). Prints JSON: {table:
{"identifier_fields": [...], "snapshots": [{snapshot_id, parent_id, operation, schema_id,
"contents": {columns, rows} | null, "contents_error", "changelog": {columns, rows} | null,
"changelog_error": str | null}]}},
oldest first. The changelog of a snapshot is `create_changelog_view` over (parent, snapshot]
(with `compute_updates` when the table has identifier fields, carry-overs removed); rows are
normalised as the corpus's (`make_corpus._norm`). One Spark session for everything.
Runs inside the Spark virtualenv of scripts/setup-spark.sh.
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "corpus"))
import make_corpus  # noqa: E402


def rows(df):
    fields = df.schema.fields
    return {"columns": [f.name for f in fields],
            "rows": [[make_corpus._norm(r[f.name], f.dataType) for f in fields] for r in df.collect()]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sql", action="append", default=[], help="a statement Spark runs first")
    ap.add_argument("--moved-from", help="the absolute folder the tables were written in (their "
                    "metadata's paths): Spark reads it as the warehouse's parent folder (Hadoop viewfs)")
    ap.add_argument("warehouse", type=Path)
    ap.add_argument("tables", nargs="+")
    a = ap.parse_args()
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    spark = make_corpus.spark_session(a.warehouse, vdir)
    if a.moved_from:
        # Paths without a scheme resolve against fs.defaultFS: a mount table maps the folder the
        # tables were written in onto where they are now, everything else to the local disk.
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        conf.set("fs.defaultFS", "viewfs://moved/")
        conf.set(f"fs.viewfs.mounttable.moved.link.{a.moved_from}", f"file://{a.warehouse.resolve().parent}")
        conf.set("fs.viewfs.mounttable.moved.linkFallback", "file:///")
    for statement in a.sql:
        spark.sql(statement).collect()
    out = {}
    for name in a.tables:
        ident = f"iceberg.db.{name}"
        table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
        identifiers = sorted(table.schema().identifierFieldNames())
        steps = []
        snapshots = spark.sql(
            f"SELECT snapshot_id, parent_id, operation FROM {ident}.snapshots ORDER BY committed_at").collect()
        for sid, parent, operation in snapshots:
            step = {"snapshot_id": sid, "parent_id": parent, "operation": operation,
                    "schema_id": table.snapshot(sid).schemaId(),
                    "contents": None, "contents_error": None, "changelog": None, "changelog_error": None}
            try:
                step["contents"] = rows(spark.sql(f"SELECT * FROM {ident} VERSION AS OF {sid}"))
            except Exception as e:  # noqa: BLE001 - e.g. a moved table Spark cannot follow
                step["contents_error"] = str(e).splitlines()[0][:500]
            options = {"end-snapshot-id": str(sid)}
            if parent is not None:
                options["start-snapshot-id"] = str(parent)
            opts = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
            updates = ", compute_updates => true" if identifiers else ""
            try:
                spark.sql(f"CALL iceberg.system.create_changelog_view(table => '{ident}', "
                          f"options => map({opts}), changelog_view => 'petrel_changes'{updates})").collect()
                step["changelog"] = rows(spark.sql("SELECT * FROM petrel_changes"))
            except Exception as e:  # noqa: BLE001 - Spark's refusal is part of the answer
                step["changelog_error"] = str(e).splitlines()[0][:500]
            steps.append(step)
        out[name] = {"identifier_fields": identifiers, "snapshots": steps}
    spark.stop()
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
