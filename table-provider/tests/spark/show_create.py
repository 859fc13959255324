"""Spark 3.5 + Iceberg 1.10's `SHOW CREATE TABLE` for every table of namespace `db` of a
Hadoop-layout warehouse, after creating a few tables there that exercise its format (types,
NOT NULL, comments, partition transforms and buckets, table comment, sort order, identifier
fields, properties that need escaping, a column name that needs quoting).

    show_create.py WAREHOUSE   ->  JSON {table: createtab_stmt} on stdout

Run with the Spark virtualenv of scripts/setup-spark.sh (server/tests/python/test_catalog_views.py
does). One Spark session per run.
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import make_corpus  # noqa: E402

CREATE = [
    """CREATE TABLE iceberg.db.bi_types (
      id BIGINT NOT NULL COMMENT 'the key', i INT, s STRING, d DATE, ts TIMESTAMP,
      tsn TIMESTAMP_NTZ, dec DECIMAL(10,2), f FLOAT, db DOUBLE, b BOOLEAN, bin BINARY,
      st STRUCT<x: INT NOT NULL COMMENT 'inner', y: STRING>, arr ARRAY<BIGINT>,
      mp MAP<STRING, DOUBLE>, `odd col` INT)
    USING iceberg PARTITIONED BY (bucket(4, id), days(ts), truncate(3, s), i)
    TBLPROPERTIES ('format-version'='2', 'custom.key'='v a\\'l')""",
    "ALTER TABLE iceberg.db.bi_types WRITE ORDERED BY id DESC NULLS LAST, bucket(8, s)",
    "ALTER TABLE iceberg.db.bi_types SET IDENTIFIER FIELDS id",
    "CREATE TABLE iceberg.db.bi_plain (a INT, b STRING) USING iceberg",
    """CREATE TABLE iceberg.db.bi_years (a INT, t TIMESTAMP, t2 TIMESTAMP_NTZ) USING iceberg
    PARTITIONED BY (years(t), hours(t2), bucket(8, a)) COMMENT 'a table\\'s comment'
    TBLPROPERTIES ('format-version'='3', 'write.format.default'='ORC')""",
    "CREATE TABLE iceberg.db.bi_months (a INT, t DATE) USING iceberg PARTITIONED BY (months(t))",
]


def main():
    warehouse = Path(sys.argv[1])
    scratch = warehouse.parent / "spark-scratch"
    scratch.mkdir(exist_ok=True)
    spark = make_corpus.spark_session(warehouse, scratch)
    for statement in CREATE:
        spark.sql(statement).collect()
    out = {}
    for row in spark.sql("SHOW TABLES IN iceberg.db").collect():
        name = row["tableName"]
        out[name] = spark.sql(f"SHOW CREATE TABLE iceberg.db.{name}").collect()[0][0]
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
