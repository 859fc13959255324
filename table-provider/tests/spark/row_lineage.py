"""Row lineage as Spark 3.5 + Iceberg 1.10 reads it: for each table, at every snapshot (oldest
first), every row's columns with its `_row_id` and `_last_updated_sequence_number`.

    <spark venv python> row_lineage.py [--sql STATEMENT]... WAREHOUSE TABLE...

WAREHOUSE is a Hadoop-layout warehouse (Spark's catalog `iceberg`, namespace `db`). Each `--sql`
statement runs in Spark first, in order (e.g. Spark performing the same writes on a table of its
own, as the reference). Prints JSON: {table: [{snapshot_id, operation, columns, rows}]}.
Runs inside the Spark virtualenv of scripts/setup-spark.sh.
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "corpus"))
import make_corpus  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sql", action="append", default=[], help="a statement Spark runs first")
    ap.add_argument("warehouse", type=Path)
    ap.add_argument("tables", nargs="+")
    a = ap.parse_args()
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    spark = make_corpus.spark_session(a.warehouse, vdir)
    for statement in a.sql:
        spark.sql(statement).collect()
    out = {}
    for name in a.tables:
        ident = f"iceberg.db.{name}"
        steps = []
        for s in spark.sql(f"SELECT snapshot_id, operation FROM {ident}.snapshots ORDER BY committed_at").collect():
            df = spark.sql(f"SELECT *, _row_id, _last_updated_sequence_number FROM {ident} VERSION AS OF {s[0]}")
            steps.append({"snapshot_id": s[0], "operation": s[1], "columns": df.columns,
                          "rows": [list(r) for r in df.collect()]})
        out[name] = steps
    spark.stop()
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
