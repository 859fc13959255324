"""Builds the tables `bench-vs-duckdb.py` queries: 5,000,000 lineitem-like rows in 8 Parquet files,
written by Spark 3.5.9 + Iceberg 1.10.2 (Hadoop catalog, format v2), in three versions with the
same rows:

- `db.plain`: no deletes;
- `db.pos`:   `DELETE FROM ... WHERE pmod(l_orderkey * 7 + l_linenumber, 10) = 3` (every tenth row,
              spread evenly), run by Spark with `write.delete.mode=merge-on-read`: Spark's own
              file-scoped position-delete files, one per data file;
- `db.eq`:    one equality-delete file on `l_orderkey` whose rows are the full deleted rows (every
              column), committed with the Iceberg Java API (`FileMetadata.deleteFileBuilder` +
              `RowDelta`, the API's metrics from `ParquetUtil.fileMetrics`); 1% of the orders, hence
              1% of the rows. The file itself is written with pyarrow, with the table's field ids:
              the same shape as `GenericAppenderFactory.newEqDeleteWriter` with the full schema as
              its delete-row schema (what the corpus' `eq_delete` writes, there with the key only).

Data files are sorted by `l_orderkey` (8 disjoint ranges, Spark's default Parquet layout: zstd,
one row group per file). Runs inside the corpus' Spark virtualenv (scripts/setup-spark.sh). Writes `<out>/warehouse` and
`<out>/tables.json` (row counts and sums Spark reads back: the reference the benchmark checks
every engine against).
"""
import json, os, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "corpus"))
import make_corpus  # noqa: E402  (spark_session, the Jackson jar)

ROWS = 5_000_000
FILES = 8
# l_orderkey: 4 lines per order on average (1..7 lines, as TPC-H), dense from 1, sorted
LINEITEM = f"""
SELECT
  CAST(id DIV 4 + 1 AS BIGINT)                                   AS l_orderkey,
  CAST(pmod(id * 7919, 200000) + 1 AS BIGINT)                    AS l_partkey,
  CAST(pmod(id * 104729, 10000) + 1 AS INT)                      AS l_suppkey,
  CAST(id % 4 + 1 AS INT)                                        AS l_linenumber,
  CAST(pmod(id * 31, 50) + 1 AS DECIMAL(15,2))                   AS l_quantity,
  CAST((pmod(id * 7919, 200000) + 90000) * (pmod(id * 31, 50) + 1) / 100.0 AS DECIMAL(15,2)) AS l_extendedprice,
  CAST(pmod(id * 13, 11) / 100.0 AS DECIMAL(15,2))               AS l_discount,
  CAST(pmod(id * 17, 9) / 100.0 AS DECIMAL(15,2))                AS l_tax,
  element_at(array('A','N','R'), CAST(pmod(id * 3, 3) + 1 AS INT)) AS l_returnflag,
  element_at(array('F','O'), CAST(pmod(id, 2) + 1 AS INT))       AS l_linestatus,
  date_add(DATE '1992-01-02', CAST(pmod(id DIV 4, 2526) AS INT))  AS l_shipdate,
  date_add(DATE '1992-01-31', CAST(pmod(id DIV 4, 2466) AS INT))  AS l_commitdate,
  date_add(DATE '1992-01-03', CAST(pmod(id DIV 4, 2555) AS INT))  AS l_receiptdate,
  element_at(array('DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'), CAST(pmod(id * 5, 4) + 1 AS INT)) AS l_shipinstruct,
  element_at(array('REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'), CAST(pmod(id * 11, 7) + 1 AS INT)) AS l_shipmode,
  concat('comment ', CAST(pmod(id * 2654435761, 1000003) AS STRING), ' carefully final deposits') AS l_comment
FROM range(0, {ROWS}, 1, {FILES})
"""
POS_DELETE = "DELETE FROM iceberg.db.pos WHERE pmod(l_orderkey * 7 + l_linenumber, 10) = 3"
EQ_KEYS = "pmod(l_orderkey, 100) = 37"  # 1% of the orders, every line of each


def snapshots(spark, t):
    return spark.sql(f"SELECT count(*) FROM iceberg.db.{t}.snapshots").collect()[0][0]


def checks(spark, t):
    r = spark.sql(f"SELECT count(*), sum(l_extendedprice), sum(l_quantity) FROM iceberg.db.{t}").collect()[0]
    return {"count": r[0], "sum_extendedprice": str(r[1]), "sum_quantity": str(r[2])}


def main():
    out = Path(sys.argv[1]).resolve()
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS", make_corpus.DEFAULT_VENVS))
    wh = out / "warehouse"
    t0 = time.time()
    spark = make_corpus.spark_session(wh, vdir)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS iceberg.db")
    df = spark.sql(LINEITEM).sortWithinPartitions("l_orderkey", "l_linenumber")
    props = {"format-version": "2", "write.delete.mode": "merge-on-read",
             "write.target-file-size-bytes": str(1 << 30), "write.distribution-mode": "none"}
    for t in ("plain", "pos", "eq"):  # (steps a failed run finished are not repeated)
        if spark.catalog.tableExists(f"iceberg.db.{t}"):
            continue
        w = df.writeTo(f"iceberg.db.{t}").using("iceberg")
        for k, v in props.items():
            w = w.tableProperty(k, v)
        w.create()
        print(f"bench_tables: wrote db.{t} ({time.time() - t0:.0f}s)", flush=True)
    if snapshots(spark, "pos") == 1:
        spark.sql(POS_DELETE)
    print(f"bench_tables: position deletes on db.pos ({time.time() - t0:.0f}s)", flush=True)
    if snapshots(spark, "eq") == 1:
        eq_delete_full_rows(spark, wh)
    print(f"bench_tables: equality deletes on db.eq ({time.time() - t0:.0f}s)", flush=True)
    info = {"rows": ROWS, "files": FILES, "tables": {}}
    for t in ("plain", "pos", "eq"):
        tdir = wh / "db" / t / "metadata"
        hint = (tdir / "version-hint.text").read_text().strip()
        info["tables"][t] = {"metadata": str(tdir / f"v{hint}.metadata.json"), **checks(spark, t)}
    (out / "tables.json").write_text(json.dumps(info, indent=1))
    spark.stop()
    print(f"bench_tables: done in {time.time() - t0:.0f}s: {json.dumps(info['tables'])}", flush=True)


def eq_delete_full_rows(spark, wh: Path):
    import pyarrow as pa, pyarrow.parquet as pq
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, "iceberg.db.eq")
    schema = json.loads(jvm.org.apache.iceberg.SchemaParser.toJson(table.schema()))
    rows = spark.sql(f"SELECT * FROM iceberg.db.eq WHERE {EQ_KEYS} ORDER BY l_orderkey, l_linenumber")
    arrow_types = {"long": pa.int64(), "int": pa.int32(), "string": pa.string(), "date": pa.date32(),
                   "decimal(15, 2)": pa.decimal128(15, 2)}
    fields = [pa.field(f["name"], arrow_types[f["type"]], nullable=not f["required"],
                       metadata={b"PARQUET:field_id": str(f["id"]).encode()}) for f in schema["fields"]]
    collected = rows.collect()
    at = pa.Table.from_arrays([pa.array([r[i] for r in collected], f.type) for i, f in enumerate(fields)],
                              schema=pa.schema(fields))
    path = wh / "db" / "eq" / "data" / "eq-deletes-00000.parquet"
    pq.write_table(at, path, compression="zstd")
    key_id = next(f["id"] for f in schema["fields"] if f["name"] == "l_orderkey")
    ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    ids[0] = key_id
    conf = spark._jsc.hadoopConfiguration()
    hin = jvm.org.apache.iceberg.hadoop.HadoopInputFile.fromLocation(str(path), conf)
    metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(hin, jvm.org.apache.iceberg.MetricsConfig.forTable(table))
    delete = jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec()) \
        .ofEqualityDeletes(ids).withPath(str(path)).withFormat("PARQUET") \
        .withFileSizeInBytes(path.stat().st_size).withMetrics(metrics).build()
    table.newRowDelta().addDeletes(delete).commit()


if __name__ == "__main__":
    main()
