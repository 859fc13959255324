#!/usr/bin/env python3
"""Petrel's own Iceberg test tables: percent-encoded partition paths and NaN / signed-zero /
infinity floats from four writers, plus a differential oracle of random float predicates.

    python3 scripts/corpus/petrel_tables.py [--out OUT] [--origin ORIGIN] [--venvs DIR] [--keep-origin]

  --out     default $PETREL_CACHE/petrel-tables (PETREL_CACHE defaults to ~/.cache/petrel)
  --origin  default "$PETREL_CACHE/petrel-tables-origin/spark origin 50%": the tables are written
            there first, so every path inside their metadata starts with it. Keep a space and a `%`
            in it: that is what makes the table locations of enc_v2/enc_v3 contain them.
  --venvs, --keep-origin: as for make_corpus.py (same per-machine virtualenv cache)

Driven by make_corpus.run() (same folder), so the layout is the shared corpus' layout:
OUT/warehouse/db/<table>/{metadata,data}, OUT/expected/<table>.json, OUT/index.json, OUT/README.md,
plus OUT/differential/<nan table>.json (see scripts/corpus/README.md). One Spark session builds the
tables, computes the expected results and the differential counts, and (when PETREL_RELOCATE_CORPUS
and PETREL_RELOCATE_OUT are set, see relocate_corpus.py) relocates the fixture corpus to S3 paths.

Tables
  enc_v2, enc_v3   Spark, format 2 / 3, PARTITIONED BY (country, truncate(4, code)) with partition
                   values containing % + space / = # ? '' 'null' NULL and non-ASCII, so that Spark's
                   URL-encoded partition directories (country=a%2Fb%3Dc+d%25) are literal names on
                   disk and in the metadata; INSERT x2, DELETE, UPDATE, MERGE (merge-on-read), so
                   position deletes (v2: delete granularity `partition`, then `file`) or deletion
                   vectors (v3) sit in every partition.
  nan_spark        Spark SQL INSERT (Iceberg's Parquet writer), tiny row groups and pages
  nan_java         Iceberg Java API (GenericAppenderFactory data files + newAppend) through py4j
  nan_pyiceberg    PyIceberg 0.12 appends (pyarrow writer; bounds from Parquet stats, which skip NaN)
  nan_pyarrow      pyarrow files with page indexes imported by add_files, + two Spark-written files
  The four nan_* tables hold the same 24 logical files of rows (id, f double, g float, grp int).
"""
import json, math, os, random, re, struct, sys, time
from pathlib import Path
from urllib.parse import quote_plus

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_corpus as mc  # noqa: E402
import relocate_corpus  # noqa: E402
from make_corpus import MOR, Q, Table  # noqa: E402

DEFAULT_OUT = mc.CACHE / "petrel-tables"
DEFAULT_ORIGIN = str(mc.CACHE / "petrel-tables-origin" / "spark origin 50%")
SEED = 20261201


# ======================================================================= percent-encoded partitions
# identity partition values: every character Iceberg's partition path URL-encodes (Java URLEncoder:
# space -> '+', '+' -> %2B, '%' -> %25 ...), values that collide if a reader decodes ('%41' vs 'A',
# 'x+y' vs 'x y'), the empty string, the string 'null' and a real NULL (both give country=null)
ENC_COUNTRIES = ["a/b=c d%", "50% off", "%41", "A", "x+y", "x y", "k=v", "h#1", "q?x", "日本", "é",
                 "plain", "", "null", None]
# code prefixes: truncate(4, code) keeps exactly these 4 characters
ENC_CODES = ["%2Fx", "a b+", "c/d=", "e#f?", "日本語x", "éa%b", "plai", "100%"]


def enc_row(i, v=None):
    k = i % len(ENC_COUNTRIES)
    prefix = ENC_CODES[(k + (i // len(ENC_COUNTRIES)) % 2) % len(ENC_CODES)]
    return (i, ENC_COUNTRIES[k], f"{prefix}-{i}", (i * 37) % 101 if v is None else v)


def enc_build(fv):
    def build(c):
        t, sql, spark = f"iceberg.db.enc_v{fv}", c.sql, c.spark
        schema = "id bigint, country string, code string, v int"
        sql(f"""CREATE TABLE {t} (id bigint, country string, code string, v int) USING iceberg
                PARTITIONED BY (country, truncate(4, code))
                TBLPROPERTIES ('format-version'='{fv}', {MOR}, 'write.delete.granularity'='partition')""")
        spark.createDataFrame([enc_row(i) for i in range(0, 300)], schema).createOrReplaceTempView("enc_src")
        sql(f"INSERT INTO {t} SELECT * FROM enc_src")
        spark.createDataFrame([enc_row(i) for i in range(300, 420)], schema).createOrReplaceTempView("enc_src")
        sql(f"INSERT INTO {t} SELECT * FROM enc_src")
        sql(f"DELETE FROM {t} WHERE id % 7 = 0")  # v2: one delete file per partition
        sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.granularity'='file')")
        sql(f"UPDATE {t} SET v = v + 1000 WHERE id % 5 = 1")  # v2: one delete file per data file
        spark.createDataFrame([enc_row(i, -i) for i in range(400, 450)], schema).createOrReplaceTempView("enc_src")
        sql(f"""MERGE INTO {t} t USING enc_src s ON t.id = s.id
                WHEN MATCHED AND t.id % 2 = 0 THEN DELETE
                WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *""")
        spark.catalog.dropTempView("enc_src")
    return build


def sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def enc_queries(name):
    qs = []
    for k, c in enumerate(ENC_COUNTRIES):
        cond = "country IS NULL" if c is None else f"country = {sql_str(c)}"
        qs.append(f"SELECT id, country, code, v FROM $T WHERE {cond}")
        qs.append(f"SELECT id, country, code, v FROM $T WHERE {cond} AND id < {150 + 10 * k}")
    qs += ["SELECT country, count(*) AS n FROM $T GROUP BY country",
           "SELECT country, count(*) AS n, sum(v) AS s FROM $T WHERE id >= 200 GROUP BY country",
           "SELECT id, country, code FROM $T WHERE country = 'x+y' OR country = 'x y'",
           "SELECT id, country, code FROM $T WHERE country IN ('%41', 'A')",
           "SELECT id, code FROM $T WHERE code >= '%2Fx' AND code < '%2Fy'",
           "SELECT id, code FROM $T WHERE code >= 'a b+' AND code < 'a b,'",
           "SELECT id, code FROM $T WHERE code > 'c/d' AND code < 'c/e'",
           "SELECT count(*) AS n FROM $T WHERE code >= '日本' AND code < '日本語y'",
           "SELECT id, code FROM $T WHERE code >= 'éa%b' AND code <= 'éa%b-9'",
           "SELECT id, code FROM $T WHERE code >= '100%' AND code < '100&'",
           "SELECT id, code FROM $T WHERE code = 'e#f?-3'",
           "SELECT count(*) AS n FROM $T WHERE code < 'a'",
           "SELECT id, country, code, v FROM $T WHERE country = 'x+y' AND code >= '日本語x-1' AND code < '日本語x-2'",
           "SELECT id, v FROM $T ORDER BY id DESC LIMIT 5"]
    return Q(name, *qs)


# ======================================================================= NaN / signed zero / infinity
F32 = lambda x: x if x is None else struct.unpack("<f", struct.pack("<f", x))[0]
NAN, INF = float("nan"), float("inf")
ORD = [k * 0.25 for k in range(-20, 21)] + [0.1, -0.1, 1.5, 2.5, 3.75]
HIGH = [50 + k * 0.5 for k in range(100)]
LOW = [-50 - k * 0.5 for k in range(100)]
BIG = {"f": 1e300, "g": 3e38}  # g is a float: 1e300 would overflow, 3e38 is near its max
PROFILES = {  # what a 50-row segment (one row group for the row-count based writers) may contain
    "mixed": ORD + [NAN, -0.0, 0.0, INF, -INF, None, "big", "-big", 0.1] * 3,
    "ordinary": ORD,
    "nan_only": [NAN],
    "null_only": [None],
    "nan_null": [NAN, None],
    "zeros": [-0.0, 0.0],
    "negzero": [-0.0],
    "inf": [INF, -INF],
    "high_nan": HIGH + [NAN] * 20,
    "low_null": LOW + [None] * 20,
    "huge": ORD + ["big", "-big"] * 10,
    "point1": [0.1, -0.1, 0.1, 0.2],
    "posinf_nan": [INF, NAN],
}
SEGMENT = 50
NFILES = 24


def nan_plan():
    """24 files of rows (id, f, g, grp): files 0..12 are uniform (one profile each, two segments),
    13..23 have three segments of random profiles. Deterministic (SEED)."""
    rng = random.Random(SEED)
    names = list(PROFILES)
    files, nid = [], 0
    for fi in range(NFILES):
        segs = [names[fi]] * 2 if fi < len(names) else [rng.choice(names) for _ in range(3)]
        rows = []
        for prof in segs:
            for _ in range(SEGMENT):
                vals = []
                for col in ("f", "g"):
                    v = rng.choice(PROFILES[prof])
                    v = BIG[col] if v == "big" else -BIG[col] if v == "-big" else v
                    vals.append(v if col == "f" else F32(v))
                rows.append((nid, vals[0], vals[1], fi)); nid += 1
        files.append({"profiles": segs, "rows": rows})
    return files


NAN_FILES = nan_plan()
NAN_DDL = "(id bigint, f double, g float, grp int)"
NAN_SCHEMA = "id bigint, f double, g float, grp int"
SMALL_PARQUET = ("'write.parquet.row-group-size-bytes'='1024', 'write.parquet.page-size-bytes'='64', "
                 "'write.parquet.page-row-limit'='10', 'write.parquet.row-group-check-min-record-count'='10', "
                 "'write.parquet.row-group-check-max-record-count'='10'")


def nan_create(c, name):
    c.sql(f"CREATE TABLE iceberg.db.{name} {NAN_DDL} USING iceberg TBLPROPERTIES ('format-version'='2', {SMALL_PARQUET})")


def spark_insert_files(c, name, files):
    """One INSERT whose input has one Spark partition per planned file => one data file each."""
    dfs = [c.spark.createDataFrame(f["rows"], NAN_SCHEMA).coalesce(1) for f in files]
    df = dfs[0]
    for d in dfs[1:]:
        df = df.union(d)
    df.createOrReplaceTempView("nan_src")
    c.sql(f"INSERT INTO iceberg.db.{name} SELECT * FROM nan_src")
    c.spark.catalog.dropTempView("nan_src")


def b_nan_spark(c):
    nan_create(c, "nan_spark")
    spark_insert_files(c, "nan_spark", NAN_FILES[:12])
    spark_insert_files(c, "nan_spark", NAN_FILES[12:])


def b_nan_java(c):
    """Data files written by Iceberg's generic Parquet writer (GenericAppenderFactory) through py4j.
    Records come from SparkValueConverter.convert(schema, Row) over rows Spark holds, because py4j
    cannot hand a java.lang.Float to GenericRecord.setField (it sends every Python float as a Double)."""
    nan_create(c, "nan_java")
    jvm = c.jvm
    table = c.table("nan_java")
    schema, pq = table.schema(), jvm.org.apache.iceberg.FileFormat.PARQUET
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(table, schema, table.spec(), table.properties(), None, None, None)
    conv = jvm.org.apache.iceberg.spark.SparkValueConverter
    for batch in (NAN_FILES[:12], NAN_FILES[12:]):
        app = table.newAppend()
        for fi, f in enumerate(batch):
            off = jvm.org.apache.iceberg.io.OutputFileFactory.builderFor(table, fi, 1).format(pq).build()
            w = factory.newDataWriter(off.newOutputFile(), pq, None)
            jrows = c.spark.createDataFrame(f["rows"], NAN_SCHEMA)._jdf.collectAsList()
            for i in range(len(f["rows"])):
                w.write(conv.convert(schema, jrows.get(i)))
            w.close()
            app.appendFile(w.toDataFile())
        app.commit()
        table.refresh()


def nan_arrow_schema():
    import pyarrow as pa
    return pa.schema([("id", pa.int64()), ("f", pa.float64()), ("g", pa.float32()), ("grp", pa.int32())])


def arrow_batch(rows):
    import pyarrow as pa
    cols = list(zip(*rows))
    return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(cols, nan_arrow_schema().types)],
                                      schema=nan_arrow_schema())


def b_nan_pyiceberg(cat, location):
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, LongType, DoubleType, FloatType, IntegerType
    sch = Schema(NestedField(1, "id", LongType()), NestedField(2, "f", DoubleType()),
                 NestedField(3, "g", FloatType()), NestedField(4, "grp", IntegerType()))
    props = {"format-version": "2", "write.parquet.row-group-limit": str(SEGMENT),
             "write.parquet.page-row-limit": "10", "write.parquet.page-size-bytes": "64",
             "write.target-file-size-bytes": "1"}  # streaming append: one data file per RecordBatch
    t = cat.create_table("db.nan_pyiceberg", schema=sch, location=location, properties=props)
    for lo, hi in ((0, 8), (8, 16), (16, 24)):
        batches = [arrow_batch(f["rows"]) for f in NAN_FILES[lo:hi]]
        t.append(pa.RecordBatchReader.from_batches(nan_arrow_schema(), batches))


def b_nan_pyarrow(c):
    import pyarrow as pa, pyarrow.parquet as pq
    nan_create(c, "nan_pyarrow")
    d = c.wh / "db" / "nan_pyarrow" / "data" / "imported"
    d.mkdir(parents=True)
    for i, f in enumerate(NAN_FILES[:22]):
        pq.write_table(pa.Table.from_batches([arrow_batch(f["rows"])]), d / f"pyarrow-{i:02d}.parquet",
                       row_group_size=SEGMENT, data_page_size=64, write_batch_size=10,
                       write_page_index=True, write_statistics=True)
    c.sql(f"CALL iceberg.system.add_files(table => 'db.nan_pyarrow', source_table => '`parquet`.`{d}`')")
    spark_insert_files(c, "nan_pyarrow", NAN_FILES[22:])  # Spark-written files next to imported ones


def nan_queries(name):
    return Q(name,
             "SELECT count(*) AS n FROM $T WHERE f > 100",
             "SELECT count(*) AS n FROM $T WHERE isnan(f)",
             "SELECT id, f, g FROM $T WHERE f = CAST('-0.0' AS DOUBLE)",
             "SELECT id, f, g FROM $T WHERE g = CAST(0.1 AS FLOAT)",
             "SELECT count(*) AS n FROM $T WHERE g = 0.1",
             "SELECT count(*) AS n FROM $T WHERE f IS NULL AND g IS NOT NULL",
             "SELECT grp, count(*) AS n, count(f) AS nf, count(g) AS ng FROM $T GROUP BY grp",
             "SELECT min(f) AS mn, max(f) AS mx, min(g) AS mng, max(g) AS mxg FROM $T",
             "SELECT id, f FROM $T WHERE f >= CAST('Infinity' AS DOUBLE)",
             "SELECT id, f, g FROM $T WHERE f < -1E299 OR g > 1E38")


NAN_TABLES = ["nan_spark", "nan_java", "nan_pyiceberg", "nan_pyarrow"]
NAN_ABOUT = {
    "nan_spark": "NaN/-0.0/inf/NULL/1e300 floats, 24 files x 2-3 tiny row groups, pages of 10 rows; Spark SQL INSERT (Iceberg's Parquet writer: NaN counted, excluded from bounds)",
    "nan_java": "same rows as nan_spark, written by the Iceberg Java API's generic Parquet writer (GenericAppenderFactory) and committed with newAppend()",
    "nan_pyiceberg": "same rows, PyIceberg 0.12 appends (pyarrow writer, bounds from Parquet statistics that ignore NaN, no NaN counts), 50-row row groups",
    "nan_pyarrow": "same rows: 22 files written by pyarrow with page indexes (which ignore NaN), imported by Spark add_files (footer metrics); 2 files by a Spark INSERT",
}
TABLES = [
    Table("enc_v2", "spark", enc_build(2),
          "v2 MOR, PARTITIONED BY (country, truncate(4, code)); partition values with % + space / = # ? '' 'null' NULL and non-ASCII => URL-encoded directory names; position deletes (granularity partition, then file) in every partition",
          enc_queries("enc_v2")),
    Table("enc_v3", "spark", enc_build(3),
          "enc_v2 in format 3: deletion vectors (Puffin) in every URL-encoded partition",
          enc_queries("enc_v3")),
    Table("nan_spark", "spark", b_nan_spark, NAN_ABOUT["nan_spark"], nan_queries("nan_spark")),
    Table("nan_java", "java", b_nan_java, NAN_ABOUT["nan_java"], nan_queries("nan_java")),
    Table("nan_pyiceberg", "pyiceberg", b_nan_pyiceberg, NAN_ABOUT["nan_pyiceberg"], nan_queries("nan_pyiceberg")),
    Table("nan_pyarrow", "pyarrow+add_files", b_nan_pyarrow, NAN_ABOUT["nan_pyarrow"], nan_queries("nan_pyarrow")),
]


# ======================================================================= differential predicates
def lit(v, kind="double"):
    """SQL text both Spark and DataFusion read with the same value (see README)."""
    if isinstance(v, str):
        return v  # already SQL
    t = "DOUBLE" if kind == "double" else "FLOAT"
    if math.isnan(v):
        return f"CAST('NaN' AS {t})"
    if math.isinf(v):
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS {t})"
    if v == 0 and math.copysign(1, v) < 0:
        return f"CAST('-0.0' AS {t})"
    s = repr(float(v))
    if "e" in s:
        m, e = s.split("e")
        s = f"{m.rstrip('0').rstrip('.') if '.' in m else m}E{int(e)}"
    return s if kind == "double" else f"CAST({s} AS FLOAT)"


def literal_pool(col):
    big = BIG[col]
    pool = [NAN, -0.0, 0.0, INF, -INF, 1e300, -1e300, big, -big, 0.1, -0.1, 1.5, 2.5, -2.5, 3.75, 5.0, -5.0,
            50.0, 75.5, 149.5, -50.0, -99.5, 1e-300, 0.2, 1.25, -1.25, 4.875]
    return pool


def gen_predicates(seed, n=150):
    """[(sql_where, variant with NULL-propagating isnan or None)]: fixed probes, then seeded random ones."""
    probes = ["f = CAST('-0.0' AS DOUBLE)", "f = 0.0", "f = CAST('0.0' AS DOUBLE)", "f <> 0.0",
              "f = CAST('NaN' AS DOUBLE)", "f <> CAST('NaN' AS DOUBLE)", "f > 1E300", "f >= 1E300",
              "f < CAST('NaN' AS DOUBLE)", "f > CAST('Infinity' AS DOUBLE)", "f IN (CAST('NaN' AS DOUBLE))",
              "f NOT IN (CAST('NaN' AS DOUBLE), 1.5)", "isnan(f)", "NOT isnan(f)", "f IS NULL",
              "g = 0.1", "g = CAST(0.1 AS FLOAT)", "f = 0.1", "g > 3E38", "g >= CAST(3E38 AS FLOAT)",
              "g = CAST('-0.0' AS DOUBLE)", "g < 0.0", "f BETWEEN CAST('-Infinity' AS DOUBLE) AND CAST('NaN' AS DOUBLE)",
              "f > 100 OR g > 100", "NOT (f > 100)", "f NOT BETWEEN -1E300 AND 1E300"]
    rng = random.Random(seed)

    def lits(col, k):
        pool = literal_pool(col)
        vals = []
        for _ in range(k):
            r = rng.random()
            if r < 0.25:  # a value present in the data, or next to one
                v = rng.choice(ORD + HIGH[:10] + LOW[:10]) + rng.choice([0, 0, 0, 0.125, -0.125])
                vals.append(v if col == "f" else F32(v))
            else:
                vals.append(rng.choice(pool))
        kind = "float" if col == "g" and rng.random() < 0.3 else "double"  # CAST(x AS FLOAT) rounds x
        return [lit(v, kind) for v in vals]

    def atom():
        col = rng.choice(["f", "f", "g"])
        r = rng.random()
        if r < 0.40:
            op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
            (l,) = lits(col, 1)
            return f"{col} {op} {l}" if rng.random() < 0.85 else f"{l} {op} {col}"
        if r < 0.55:
            ls = lits(col, rng.randint(1, 4))
            if rng.random() < 0.1:
                ls.append("NULL")
            neg = "NOT " if rng.random() < 0.4 else ""
            return f"{col} {neg}IN ({', '.join(ls)})"
        if r < 0.72:
            a, b = lits(col, 2)
            neg = "NOT " if rng.random() < 0.35 else ""
            return f"{col} {neg}BETWEEN {a} AND {b}"
        if r < 0.82:
            return f"{col} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
        if r < 0.90:
            return f"isnan({col})"
        return f"NOT ({atom()})"

    texts = list(probes)
    while len(texts) < n:
        k = rng.choice([1, 1, 2, 2, 3])
        text = atom()
        for _ in range(k - 1):
            text = f"({text}) {rng.choice(['AND', 'OR'])} ({atom()})"
        if rng.random() < 0.1:
            text = f"NOT ({text})"
        if text not in texts:
            texts.append(text)
    # Spark's isnan(NULL) is false, DataFusion's is NULL: the variant with NULL-propagating isnan
    nullable = lambda t: re.sub(r"isnan\(([fg])\)", r"(CASE WHEN \1 IS NULL THEN NULL ELSE isnan(\1) END)", t)
    return [(t, nullable(t) if "isnan(" in t else None) for t in texts]


def norm_f(v):
    if v is None:
        return None
    return "NaN" if math.isnan(v) else "Infinity" if v == INF else "-Infinity" if v == -INF else float(v)


ORACLE_SCHEMA = "id bigint, f double, g float, grp int"


def oracle_view(spark, table):
    """The table's rows (one full scan: no filter, so no pushdown), checked against the plan and
    materialised as an in-memory relation `oracle_<table>` that Spark evaluates without Iceberg."""
    rows = spark.sql(f"SELECT id, f, g, grp FROM iceberg.db.{table}").collect()
    plan = {r[0]: r for f in NAN_FILES for r in f["rows"]}
    assert len(rows) == len(plan), (table, len(rows), len(plan))
    same = lambda x, y: (x is None and y is None) or (x is not None and y is not None and (
        (math.isnan(x) and math.isnan(y)) or struct.pack("<d", x) == struct.pack("<d", y)))
    for r in rows:  # the table holds exactly the planned rows (bit for bit, -0.0 included)
        want = plan[r.id]
        assert same(r.f, want[1]) and same(r.g, want[2]) and r.grp == want[3], (table, r, want)
    view = f"oracle_{table}"
    spark.createDataFrame([tuple(r) for r in rows], ORACLE_SCHEMA).createOrReplaceTempView(view)
    return view, len(rows)


def oracle_counts(spark, view, preds):
    """count_if(<predicate>) for every predicate (and its isnan variant), 40 per query."""
    exprs = [e for p, alt in preds for e in ([p, alt] if alt else [p])]
    counts = {}
    for i in range(0, len(exprs), 40):
        chunk = exprs[i:i + 40]
        r = spark.sql("SELECT " + ", ".join(f"count_if({e}) AS c{j}" for j, e in enumerate(chunk)) + f" FROM {view}").collect()[0]
        counts.update({e: r[j] for j, e in enumerate(chunk)})
    return counts


def fix_queries(spark, view, table, e):
    """The recorded queries of a nan table, answered over the in-memory copy: Spark through Iceberg
    prunes files by NaN-unaware bounds (see README), so its answers are kept only as iceberg_result."""
    fixed = 0
    for q in e["queries"]:
        res = mc.result(spark.sql(q["sql"].replace(f"iceberg.db.{table}", view)), ordered=q["result"]["ordered"])
        if res != q["result"]:
            q["iceberg_result"], q["result"] = q["result"], res
            fixed += 1
    return fixed


# ======================================================================= extra expected data
def local_path(p):
    return p[len("file://"):] if p.startswith("file://") else p[len("file:"):] if p.startswith("file:") else p


def file_stats(spark, origin, table):
    """Per data file: Iceberg metrics (Spark's files table, by column name) and the Parquet footer."""
    import pyarrow.parquet as pq
    tdir = origin / "warehouse" / "db" / table
    out = []
    for r in spark.sql(f"SELECT file_path, record_count, readable_metrics FROM iceberg.db.{table}.files "
                       f"WHERE content = 0 ORDER BY file_path").collect():
        m = r.readable_metrics
        cols = {}
        for c in ("id", "f", "g", "grp"):
            x = m[c]
            lo, hi = x.lower_bound, x.upper_bound
            if c in ("f", "g"):
                lo, hi = norm_f(lo), norm_f(hi)
            cols[c] = {"value_count": x.value_count, "null_value_count": x.null_value_count,
                       "nan_value_count": x.nan_value_count, "lower_bound": lo, "upper_bound": hi}
        path = Path(local_path(r.file_path))
        md = pq.ParquetFile(path).metadata
        rgs = []
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            cs = {}
            for j in range(rg.num_columns):
                cc = rg.column(j)
                st = cc.statistics
                name = cc.path_in_schema
                cs[name] = {"min": norm_f(st.min) if st is not None and st.has_min_max and name in ("f", "g") else
                            (st.min if st is not None and st.has_min_max else None),
                            "max": norm_f(st.max) if st is not None and st.has_min_max and name in ("f", "g") else
                            (st.max if st is not None and st.has_min_max else None),
                            "null_count": st.null_count if st is not None and st.has_null_count else None,
                            "column_index": cc.has_column_index}
            rgs.append({"rows": rg.num_rows, "columns": cs})
        out.append({"file": str(path.relative_to(tdir)), "file_path": r.file_path, "record_count": r.record_count,
                    "null_value_counts": {c: cols[c]["null_value_count"] for c in cols},
                    "nan_value_counts": {c: cols[c]["nan_value_count"] for c in cols},
                    "columns": cols, "parquet_created_by": md.created_by, "row_groups": rgs})
    return out


def partition_dirs(origin, table):
    d = origin / "warehouse" / "db" / table / "data"
    return sorted(str(p.relative_to(d)) for p in d.glob("*/*") if p.is_dir())


def check_encoded_dirs(dirs):
    """Spark must have written URL-encoded (java.net.URLEncoder) directory names, not decoded ones."""
    names = {x.split("/")[0] for x in dirs}
    for c in ENC_COUNTRIES:
        want = "country=null" if c is None else "country=" + quote_plus(c, safe="*")
        assert want in names, (want, sorted(names))
    for literal in ("country=a%2Fb%3Dc+d%25", "country=%E6%97%A5%E6%9C%AC", "country=%C3%A9", "country=x%2By",
                    "country=x+y", "country=%2541", "country=", "country=50%25+off", "country=h%231", "country=q%3Fx"):
        assert literal in names, (literal, sorted(names))
    codes = {x.split("/")[1] for x in dirs}
    for c in ENC_CODES:
        assert "code_trunc=" + quote_plus(c[:4], safe="*") in codes, (c, sorted(codes))


def after(spark, origin, tables, timings):
    from concurrent.futures import ThreadPoolExecutor
    t0 = time.time()
    extra = {"differential": [], "encoded_partitions": {}}
    for name in ("enc_v2", "enc_v3"):
        p = origin / "expected" / f"{name}.json"
        e = json.loads(p.read_text())
        dirs = partition_dirs(origin, name)
        check_encoded_dirs(dirs)
        e["partition_dirs"] = dirs
        dp = spark.sql(f"SELECT file_path, file_format FROM iceberg.db.{name}.delete_files ORDER BY file_path LIMIT 1").collect()
        df = spark.sql(f"SELECT file_path FROM iceberg.db.{name}.files WHERE content = 0 ORDER BY file_path LIMIT 1").collect()
        e["sample_paths"] = {"data_file": df[0].file_path, "delete_file": dp[0].file_path}
        if dp[0].file_format == "PARQUET":  # what position deletes store in their file_path column
            import pyarrow.parquet as pq
            e["sample_paths"]["position_delete_file_path"] = pq.read_table(local_path(dp[0].file_path)).column("file_path")[0].as_py()
        p.write_text(json.dumps(e, ensure_ascii=False))
        extra["encoded_partitions"][name] = len(dirs)
    preds = gen_predicates(SEED)
    (origin / "differential").mkdir(exist_ok=True)
    diffs = {}
    for name in NAN_TABLES:
        p = origin / "expected" / f"{name}.json"
        e = json.loads(p.read_text())
        e["data_file_stats"] = file_stats(spark, origin, name)
        view, nrows = oracle_view(spark, name)
        fixed = fix_queries(spark, view, name, e)
        p.write_text(json.dumps(e, ensure_ascii=False))
        counts = oracle_counts(spark, view, preds)
        spark.catalog.dropTempView(view)
        diffs[name] = {"table": name, "seed": SEED, "rows": nrows,
                       "query": f"SELECT count(*) FROM iceberg.db.{name} WHERE <sql_where>", "predicates": [
                           dict({"id": f"p{i:03d}", "sql_where": q, "count": counts[q]},
                                **({"count_if_isnan_null_is_null": counts[alt]} if alt and counts[alt] != counts[q] else {}))
                           for i, (q, alt) in enumerate(preds)]}
        print(f"{name}: {fixed} of {len(e['queries'])} recorded queries differ through Iceberg (kept as iceberg_result)", flush=True)
    timings["oracle"] = round(time.time() - t0, 1)
    t1 = time.time()
    jobs = [(name, d) for name in NAN_TABLES for d in diffs[name]["predicates"]]

    def iceberg_count(job):
        # = SELECT count(*) FROM iceberg.db.<name> WHERE <sql_where> (same plan, same pushdown), with
        # all files in one read task and AQE off: half the per-query overhead of 600 small queries
        name, d = job
        return spark.read.option("split-size", str(1 << 30)).option("file-open-cost", "1") \
            .table(f"iceberg.db.{name}").where(d["sql_where"]).count()
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    with ThreadPoolExecutor(mc.THREADS) as pool:
        for (name, d), n in zip(jobs, pool.map(iceberg_count, jobs)):
            d["iceberg_count"] = n
    timings["iceberg_counts"] = round(time.time() - t1, 1)
    for name in NAN_TABLES:
        d = diffs[name]
        (origin / "differential" / f"{name}.json").write_text(json.dumps(d, indent=1, ensure_ascii=False))
        bad = [x for x in d["predicates"] if x["count"] != x["iceberg_count"]]
        counts = [x["count"] for x in d["predicates"]]
        print(f"differential {name}: {len(counts)} predicates, counts {min(counts)}..{max(counts)} of {d['rows']} rows, "
              f"{len(set(counts))} distinct; iceberg_count differs for {len(bad)}: "
              + "; ".join(f"{x['id']} [{x['sql_where']}] {x['count']} vs {x['iceberg_count']}" for x in bad[:3]), flush=True)
        extra["differential"].append({"table": name, "file": f"differential/{name}.json", "predicates": len(counts),
                                      "iceberg_count_differs": len(bad)})
    # the fixture corpus relocated to S3 with rewrite_table_path, in this Spark session
    relocated = relocate_corpus.relocate(spark, timings)
    if relocated is not None:
        extra["corpus_relocated"] = relocated
    return extra


README_EXTRA = f"""
## Petrel-specific data

- `expected/enc_v2.json`, `expected/enc_v3.json` also hold `partition_dirs` (every
  `country=<..>/code_trunc=<..>` directory under `data/`, as named on disk: URL-encoded by Iceberg with
  `java.net.URLEncoder`, never to be decoded by a reader) and `sample_paths` (a data file path, a delete
  file path and, for v2, the `file_path` value inside a position-delete file, all spelt as in the metadata).
- `expected/nan_*.json` also hold `data_file_stats`: per data file, Iceberg's metrics from Spark's `files`
  table (`record_count`, `null_value_counts`, `nan_value_counts`, per column `lower_bound`/`upper_bound`)
  and the Parquet footer (row groups, their min/max/null_count, whether a column index exists).
- `differential/<nan table>.json`: `{{table, seed, rows, query, predicates: [{{id, sql_where, count,
  iceberg_count[, count_if_isnan_null_is_null]}}]}}`. `count` is what Spark 3.5.9 computes for
  `SELECT count(*) FROM iceberg.db.<table> WHERE <sql_where>` over an in-memory copy of the table's rows
  (`count_if` over a local relation: no Iceberg, no filter pushdown); `iceberg_count` is the same query
  through the Iceberg source (file/row-group pruning included), kept so disagreements are visible.
  `count_if_isnan_null_is_null` appears when the answer changes if `isnan(NULL)` is NULL (DataFusion)
  instead of false (Spark). Seed {SEED}; the same predicates for each table, and the four tables hold the
  same rows, so `count` agrees across them.
"""

if __name__ == "__main__":
    mc.run(Path(__file__).resolve(), TABLES, "Petrel's own Iceberg test tables", DEFAULT_OUT, DEFAULT_ORIGIN,
           readme_extra=README_EXTRA, after=after, spark_extra=relocate_corpus.spark_extra)
