"""Prints what Spark 3.5 + Iceberg 1.10 sees of the delete files of tables in a Hadoop-layout
warehouse, as JSON (used by tests/it/delete_writers.rs):

    <spark venv python> delete_files.py WAREHOUSE TABLE...

Per table (catalog `iceberg`, namespace `db`):
  delete_files      Spark's `delete_files` metadata table (content, path, format, spec, partition,
                    record count, sizes, bounds, referenced_data_file, content offset and size),
                    ordered by path and offset
  position_deletes  Spark's `position_deletes` metadata table as [data file, position] pairs,
                    sorted (the positions Spark reads from position-delete files and DVs)
"""
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import make_corpus  # noqa: E402


def main():
    warehouse, tables = Path(sys.argv[1]), sys.argv[2:]
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    spark = make_corpus.spark_session(warehouse, vdir)
    out = {}
    for name in tables:
        ident = f"iceberg.db.{name}"
        files = spark.sql(
            f"SELECT content, file_path, file_format, spec_id, partition, record_count, "
            f"file_size_in_bytes, value_counts, null_value_counts, lower_bounds, upper_bounds, "
            f"split_offsets, sort_order_id, referenced_data_file, content_offset, "
            f"content_size_in_bytes FROM {ident}.delete_files "
            f"ORDER BY file_path, content_offset")
        positions = spark.sql(f"SELECT file_path, pos FROM {ident}.position_deletes").collect()
        out[name] = {
            "delete_files": [make_corpus.jval(r.asDict(recursive=True)) for r in files.collect()],
            "position_deletes": sorted([r[0], r[1]] for r in positions),
        }
    spark.stop()
    json.dump(out, sys.stdout,
              default=lambda b: b.hex() if isinstance(b, (bytes, bytearray)) else str(b))


if __name__ == "__main__":
    main()
