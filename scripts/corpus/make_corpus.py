#!/usr/bin/env python3
"""Generate the Iceberg test corpus (tables written by independent writers + the results Spark
computes for them), fully offline: only PyPI packages and a local JDK are used.

    python3 scripts/corpus/make_corpus.py [--out DIR] [--origin PREFIX] [--venvs DIR] [--keep-origin]
    python3 scripts/corpus/make_corpus.py --setup-only [--venvs DIR]

  --out     where the finished corpus goes (default: $PETREL_CACHE/iceberg-corpus, PETREL_CACHE
            defaulting to ~/.cache/petrel). Replaced if it already holds a corpus (index.json);
            refused if it is a non-empty folder holding something else.
  --origin  where the tables are written first (default /petrel-fixtures-origin/iceberg-corpus,
            which needs root). Any absolute folder works, also one whose path has spaces or `%`.
            Iceberg metadata holds absolute paths, so this prefix is part of the data: readers
            must resolve a moved table by replacing the metadata's `location` prefix with the
            table's current directory. The origin is deleted after the copy unless --keep-origin
            (and, like --out, is only ever deleted when it is empty or was made by this script).
  --venvs   folder for the two virtualenvs and the relocated Jackson jar (default:
            $PETREL_CACHE/corpus-venvs, a per-machine cache reused by later runs); created on
            first use with `pip install` (see scripts/corpus/README.md)
  --setup-only  only create the virtualenvs and the Jackson jar (scripts/setup-spark.sh uses it)

Writers: Spark 3.5.9 + Iceberg 1.10.2 (jars from the PyPI package snowpark-connect-deps-iceberg),
the Iceberg Java API inside Spark's JVM (equality deletes), PyIceberg 0.12.0 and
sidequery-pyiceberg 0.12.0.post2 (a PyIceberg fork that writes equality deletes; own venv).
Every table ends up Hadoop-style under OUT/warehouse/db/<table>/{metadata,data}, with
metadata/vN.metadata.json and metadata/version-hint.text; expected results are computed by Spark
through its Hadoop catalog (named `iceberg`, so queries read `iceberg.db.<table>`).

This module is also a library: a second corpus reuses run() with its own table list
(scripts/corpus/petrel_tables.py does).

This is Petrel's copy of the team's shared generator (shared/fixtures/make_corpus.py): same
tables (TABLES), so `make_corpus.py --out DIR --origin PREFIX` regenerates the shared corpus.
"""
import argparse, dataclasses, datetime as dt, decimal, json, math, os, re, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent
DEFAULT_ORIGIN = "/petrel-fixtures-origin/iceberg-corpus"
ORIGIN_MARK = ".petrel-corpus-origin"  # written into an origin; lets a later run delete it
CACHE = Path(os.environ.get("PETREL_CACHE") or Path.home() / ".cache" / "petrel")
DEFAULT_VENVS = CACHE / "corpus-venvs"
PY = "python3.11"  # PyPI wheels used here exist for CPython 3.11
SPARK_REQS = ["pyspark==3.5.9", "snowpark-connect-deps-iceberg==1.0.3", "pyiceberg[pyarrow,sql-sqlite]==0.12.0",
              "pyiceberg-core==0.10.1", "pyarrow==26.0.1", "sqlalchemy==2.1.9"]
SQ_REQS = ["sidequery-pyiceberg==0.12.0.post2", "pyiceberg-core==0.10.1", "pyarrow==26.0.1", "sqlalchemy==2.1.9"]
WRITERS = {"spark": "spark 3.5.9 / iceberg 1.10.2", "java": "iceberg 1.10.2 Java API (in Spark's JVM) + spark 3.5.9",
           "pyiceberg": "pyiceberg 0.12.0", "sidequery": "sidequery-pyiceberg 0.12.0.post2",
           "pyarrow+add_files": "pyarrow 26.0.1 files imported by spark 3.5.9 add_files + spark writes"}


@dataclasses.dataclass
class Table:
    """One corpus table. build(ctx) writes it: ctx is a SparkCtx for writer spark/java, a catalog
    context (cat, location) for pyiceberg/sidequery. queries: (id, ANSI SQL on iceberg.db.<name>)."""
    name: str
    writer: str
    build: Callable
    about: str
    queries: list = dataclasses.field(default_factory=list)


# ======================================================================= bootstrap (any python3)
def ensure_venvs(vdir: Path):
    """Create VDIR/spark and VDIR/sq virtualenvs (idempotent) and return their pythons."""
    out = {}
    for name, reqs in (("spark", SPARK_REQS), ("sq", SQ_REQS)):
        v = vdir / name
        marker = v / ".petrel-corpus-reqs"
        if not (marker.exists() and marker.read_text() == "\n".join(reqs)):
            if not (v / "bin/python").exists():
                subprocess.run([shutil.which(PY) or sys.executable, "-m", "venv", str(v)], check=True)
            subprocess.run([str(v / "bin/python"), "-m", "pip", "install", "-q", *reqs], check=True)
            marker.write_text("\n".join(reqs))
        out[name] = v / "bin/python"
    return out


def setup(vdir: Path):
    """The virtualenvs plus the relocated Jackson jar (built inside the Spark venv); idempotent."""
    vdir.mkdir(parents=True, exist_ok=True)
    pys = ensure_venvs(vdir)
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import make_corpus; "
            "print(make_corpus.shaded_jackson_jar(Path(sys.argv[2])))")
    subprocess.run([str(pys["spark"]), "-c", code, str(HERE), str(vdir)], check=True)
    return pys


def _safe_to_replace(p: Path, marker: str) -> bool:
    """Only ever rmtree a folder that is missing, empty, or holds `marker` (made by a corpus run)."""
    return not p.exists() or (p.is_dir() and (not any(p.iterdir()) or (p / marker).exists()))


def bootstrap(script: Path, argv, default_out: Path, default_origin: str):
    """Parse the CLI, make the venvs, and re-run `script` inside the Spark venv."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--origin", default=default_origin)
    ap.add_argument("--venvs", default=str(DEFAULT_VENVS))
    ap.add_argument("--keep-origin", action="store_true")
    ap.add_argument("--setup-only", action="store_true")
    a = ap.parse_args(argv)
    vdir = Path(a.venvs).expanduser().resolve()
    pys = setup(vdir)
    if a.setup_only:
        return
    out, origin = Path(a.out).expanduser().resolve(), Path(os.path.abspath(os.path.expanduser(a.origin)))
    if out == origin or origin in out.parents or out in origin.parents:
        sys.exit(f"--out {out} and --origin {origin} must not contain each other")
    for p, m in ((out, "index.json"), (origin, ORIGIN_MARK)):
        if not _safe_to_replace(p, m):
            sys.exit(f"{p} exists, is not empty and does not look like a corpus (no {m}); not replacing it")
    env = dict(os.environ, PETREL_CORPUS_INNER="1", PETREL_CORPUS_SQ_PY=str(pys["sq"]),
               PETREL_CORPUS_VENVS=str(vdir), TZ="UTC")
    cmd = [str(pys["spark"]), str(script), "--out", str(out), "--origin", str(origin)]
    sys.exit(subprocess.run(cmd + (["--keep-origin"] if a.keep_origin else []), env=env).returncode)


# ======================================================================= Spark + Iceberg jars
RELOCATE_JAVA = r'''
import java.io.*; import java.util.*; import java.util.jar.*;
import org.apache.xbean.asm9.*; import org.apache.xbean.asm9.commons.*;
public class Relocate {
  static final String F = "com/fasterxml/jackson/", T = "org/apache/iceberg/shaded/com/fasterxml/jackson/";
  static String n(String s) { return s.startsWith(F) ? T + s.substring(F.length()) : s; }
  static String d(String s) { String f = F.replace('/', '.'), t = T.replace('/', '.'); return s.startsWith(f) ? t + s.substring(f.length()) : s; }
  public static void main(String[] a) throws Exception {
    Remapper r = new Remapper() {
      public String map(String s) { return n(s); }
      public Object mapValue(Object v) { return v instanceof String ? d((String) v) : super.mapValue(v); } };
    Set<String> seen = new HashSet<>();
    try (JarOutputStream out = new JarOutputStream(new FileOutputStream(a[0]))) {
      for (int i = 1; i < a.length; i++) try (JarFile jf = new JarFile(a[i])) {
        for (Enumeration<JarEntry> en = jf.entries(); en.hasMoreElements();) {
          JarEntry e = en.nextElement(); String name = e.getName();
          if (e.isDirectory() || name.startsWith("META-INF/MANIFEST") || name.endsWith("module-info.class") || name.startsWith("META-INF/versions/")) continue;
          byte[] b = jf.getInputStream(e).readAllBytes(); String o;
          if (name.endsWith(".class")) { ClassWriter w = new ClassWriter(0); new ClassReader(b).accept(new ClassRemapper(w, r), 0); b = w.toByteArray(); o = n(name.substring(0, name.length() - 6)) + ".class"; }
          else if (name.startsWith("META-INF/services/")) { o = "META-INF/services/" + d(name.substring(18)); StringBuilder sb = new StringBuilder(); for (String l : new String(b, "UTF-8").split("\n")) sb.append(d(l.trim())).append('\n'); b = sb.toString().getBytes("UTF-8"); }
          else o = n(name);
          if (seen.add(o)) { out.putNextEntry(new JarEntry(o)); out.write(b); out.closeEntry(); }
        }
      }
    }
  }
}
'''


def shaded_jackson_jar(vdir: Path) -> Path:
    """The iceberg-spark-runtime jar shipped in snowpark-connect-deps-iceberg lacks Iceberg's relocated
    Jackson (org/apache/iceberg/shaded/com/fasterxml/jackson/...). Rebuild it the way Iceberg's own
    build does: relocate pyspark's Jackson 2.15.2 jars into that package with the ASM remapper that
    pyspark ships (xbean-asm9-shaded). Needs javac (JDK 17)."""
    jar = vdir / "iceberg-shaded-jackson-2.15.2.jar"
    if jar.exists():
        return jar
    import pyspark
    pj = Path(pyspark.__file__).parent / "jars"
    asm = next(pj.glob("xbean-asm9-shaded-*.jar"))
    with tempfile.TemporaryDirectory() as td:
        (Path(td) / "Relocate.java").write_text(RELOCATE_JAVA)
        subprocess.run(["javac", "-cp", str(asm), "Relocate.java"], cwd=td, check=True)
        ins = [str(next(pj.glob(f"{p}-2.*.jar"))) for p in
               ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")]
        subprocess.run(["java", "-cp", f"{asm}:{td}", "Relocate", str(jar) + ".tmp", *ins], check=True)
    os.replace(str(jar) + ".tmp", jar)
    return jar


def spark_session(warehouse: Path, vdir: Path, extra_jars=(), extra_conf=None):
    os.environ["TZ"] = "UTC"; time.tzset()  # pyspark converts timestamps with the process' zone
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import snowpark_connect_deps_iceberg as deps
    from pyspark.sql import SparkSession
    runtime = deps.get_jars_dir() / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    conf = {
        "spark.jars": ",".join([str(runtime), str(shaded_jackson_jar(vdir)), *extra_jars]),  # local jars only
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "3g",
        "spark.sql.session.timeZone": "UTC", "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.iceberg": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.iceberg.type": "hadoop", "spark.sql.catalog.iceberg.warehouse": str(warehouse),
        **(extra_conf or {}),
    }
    b = SparkSession.builder.master("local[2]").appName("petrel-corpus")
    for k, v in conf.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


class SparkCtx:
    """What a Spark/Java-API table builder gets."""

    def __init__(self, spark, origin: Path):
        self.spark, self.sql, self.origin, self.wh = spark, spark.sql, origin, origin / "warehouse"
        self.jvm = spark._jvm

    def table(self, name):
        return self.jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, f"iceberg.db.{name}")

    def create_java(self, name, schema: dict, spec_fields=(), props=None):
        """Create a table with the Iceberg Java API from an Iceberg schema JSON (for types Spark DDL lacks, e.g. uuid)."""
        jvm = self.jvm
        cat = self.spark._jsparkSession.sessionState().catalogManager().catalog("iceberg").icebergCatalog()
        sch = jvm.org.apache.iceberg.SchemaParser.fromJson(json.dumps({"type": "struct", "schema-id": 0, **schema}))
        spec = jvm.org.apache.iceberg.PartitionSpecParser.fromJson(sch, json.dumps({"spec-id": 0, "fields": list(spec_fields)}))
        jp = jvm.java.util.HashMap()
        for k, v in (props or {}).items():
            jp.put(k, v)
        cat.createTable(jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"db.{name}"), sch, spec, jp)

    def eq_delete(self, name, eq_cols, rows, spec_id=None):
        """Commit equality deletes through the Iceberg Java API (iceberg-data is inside the runtime jar).
        rows: dicts with eq_cols plus the partition source columns; int/string/None values only (py4j).
        spec_id: write the delete files under that spec (an unpartitioned spec => a global delete)."""
        jvm, gw = self.jvm, self.spark.sparkContext._gateway
        table = self.table(name)
        schema, pq = table.schema(), jvm.org.apache.iceberg.FileFormat.PARQUET
        spec = table.spec() if spec_id is None else table.specs().get(spec_id)
        ids = gw.new_array(jvm.int, len(eq_cols))
        for i, c in enumerate(eq_cols):
            ids[i] = schema.findField(c).fieldId()
        del_schema = schema.select(list(eq_cols))
        factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(schema, spec, ids, del_schema, None)
        off = jvm.org.apache.iceberg.io.OutputFileFactory.builderFor(table, 1, int(time.time() * 1000) % 2**31) \
            .format(pq).defaultSpec(spec).build()
        writers = {}
        for row in rows:
            full = jvm.org.apache.iceberg.data.GenericRecord.create(schema)
            for k, v in row.items():
                full.setField(k, v)
            pk = jvm.org.apache.iceberg.PartitionKey(spec, schema)
            pk.partition(full)
            key = pk.toPath() if spec.isPartitioned() else ""
            if key not in writers:
                if spec.isPartitioned():
                    writers[key] = factory.newEqDeleteWriter(off.newOutputFile(spec, pk.copy()), pq, pk.copy())
                else:
                    writers[key] = factory.newEqDeleteWriter(off.newOutputFile(), pq, None)
            rec = jvm.org.apache.iceberg.data.GenericRecord.create(del_schema)
            for c in eq_cols:
                rec.setField(c, row[c])
            writers[key].write(rec)
        rd = table.newRowDelta()
        for w in writers.values():
            w.close()
            rd.addDeletes(w.toDeleteFile())
        rd.commit()


# ======================================================================= PyIceberg-family writers
def sql_catalog(cdir: Path, origin: Path, name: str):
    """A throw-away SQLite catalog in `cdir` (a temp folder, so that the SQLAlchemy URL never holds
    the origin's path, which may contain spaces or `%`). Table locations are given explicitly."""
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog(name, uri=f"sqlite:///{cdir}/{name}.db", warehouse=f"file://{origin}/warehouse")
    if ("db",) not in cat.list_namespaces():
        cat.create_namespace("db")
    return cat


def run_catalog_writer(origin: Path, tables, writer: str):
    """Build every `writer` table with a SQL catalog; each table's location is WAREHOUSE/db/<name>."""
    with tempfile.TemporaryDirectory(prefix="petrel-catalog-") as cdir:
        cat = sql_catalog(Path(cdir), origin, writer)
        for t in tables:
            if t.writer == writer:
                t.build(cat, f"file://{origin}/warehouse/db/{t.name}")


def to_hadoop_layout(table_dir: Path):
    """PyIceberg names metadata files NNNNN-<uuid>.metadata.json; rename them to the Hadoop
    catalog's vN.metadata.json (N = NNNNN + 1, also inside metadata-log) and write version-hint.text."""
    md = table_dir / "metadata"
    files = sorted(p for p in md.glob("*.metadata.json") if re.match(r"\d{5}-", p.name))
    if not files:
        return
    renames = {p.name: f"v{int(p.name[:5]) + 1}.metadata.json" for p in files}
    for p in files:
        text = p.read_text()
        for old, new in renames.items():
            text = text.replace(old, new)
        (md / renames[p.name]).write_text(text)
        p.unlink()
    (md / "version-hint.text").write_text(str(max(int(p.name[:5]) + 1 for p in files)))


# ======================================================================= value normalisation
def _norm(v, t):
    """A Spark value of Spark type t -> JSON-ready value (see README: normalisation)."""
    from pyspark.sql import types as T
    if v is None:
        return None
    if isinstance(t, (T.FloatType, T.DoubleType)):
        return "NaN" if math.isnan(v) else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else float(v))
    if isinstance(t, T.DecimalType):
        return str(v)
    if isinstance(t, T.TimestampType):  # Iceberg timestamptz; Spark hands out UTC wall time (TZ=UTC)
        return v.replace(tzinfo=dt.timezone.utc).isoformat()
    if isinstance(t, (T.TimestampNTZType, T.DateType)):
        return v.isoformat()
    if isinstance(t, T.BinaryType):
        return bytes(v).hex()
    if isinstance(t, T.StructType):
        return {f.name: _norm(v[f.name], f.dataType) for f in t.fields}
    if isinstance(t, T.ArrayType):
        return [_norm(x, t.elementType) for x in v]
    if isinstance(t, T.MapType):
        if isinstance(t.keyType, T.StringType):
            return {k: _norm(x, t.valueType) for k, x in v.items()}
        return sorted(([_norm(k, t.keyType), _norm(x, t.valueType)] for k, x in v.items()), key=json.dumps)
    return v


DIGEST_HOOK: Optional[Callable] = None  # (result dict) -> digest dict; set by a profile with large tables
DIGEST_ROWS = 20000
THREADS = 3  # concurrent Spark queries while computing expected results


def result(df, ordered=False):
    from pyspark.sql import types as T
    fields = df.schema.fields
    rows = [[_norm(x, f.dataType) for x, f in zip(r, fields)] for r in df.collect()]
    if not ordered:
        rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    res = {"columns": [f.name for f in fields], "types": [f.dataType.simpleString() for f in fields],
           "ordered": ordered, "count": len(rows), "rows": rows}
    has_float = any(isinstance(f.dataType, (T.FloatType, T.DoubleType)) for f in fields)
    if DIGEST_HOOK and len(rows) > DIGEST_ROWS and not has_float:
        res.update(DIGEST_HOOK(res)); del res["rows"]
    return res


def jval(v):
    if isinstance(v, (dt.datetime, dt.date)): return v.isoformat()
    if isinstance(v, decimal.Decimal): return str(v)
    if isinstance(v, (bytes, bytearray)): return v.hex()
    if isinstance(v, list): return [jval(x) for x in v]
    if isinstance(v, dict): return {k: jval(x) for k, x in v.items()}
    if hasattr(v, "asDict"): return {k: jval(x) for k, x in v.asDict().items()}
    return v


ORDER_BY = re.compile(r"\border\s+by\b", re.I)


def expected_for(spark, origin: Path, t: Table):
    ident = f"iceberg.db.{t.name}"
    sql = spark.sql
    loc = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident) \
        .operations().current().metadataFileLocation()
    local = re.sub(r"^file:(//)?", "", loc)
    meta = json.load(open(local))
    snaps = sql(f"SELECT * FROM {ident}.snapshots ORDER BY committed_at").collect()
    e = {"table": t.name, "writer": WRITERS[t.writer], "about": t.about, "format_version": meta["format-version"],
         "metadata_location": loc, "metadata_file": str(Path(local).relative_to(origin)),
         "current": result(sql(f"SELECT * FROM {ident}")), "snapshots": [], "refs": [], "queries": []}
    for s in snaps:  # SQL VERSION AS OF reads with the snapshot's schema (the option form would not)
        e["snapshots"].append({"snapshot_id": s.snapshot_id, "parent_id": s.parent_id, "operation": s.operation,
                               "committed_at": s.committed_at.replace(tzinfo=dt.timezone.utc).isoformat(),
                               "summary": dict(s.summary),
                               "version_as_of": result(sql(f"SELECT * FROM {ident} VERSION AS OF {s.snapshot_id}"))})
    for r in sql(f"SELECT name, type, snapshot_id FROM {ident}.refs ORDER BY type, name").collect():
        e["refs"].append({"name": r.name, "type": r.type, "snapshot_id": r.snapshot_id,
                          "version_as_of": result(sql(f"SELECT * FROM {ident} VERSION AS OF '{r.name}'"))})
    for qid, q in t.queries:
        e["queries"].append({"id": qid, "sql": q, "result": result(sql(q), ordered=bool(ORDER_BY.search(q)))})
    e["delete_files"] = [jval(r.asDict()) for r in sql(
        f"SELECT content, file_format, spec_id, equality_ids, record_count, referenced_data_file, content_offset, "
        f"content_size_in_bytes FROM {ident}.delete_files ORDER BY content, file_path, content_offset").collect()]
    e["data_files"] = sql(f"SELECT count(*) FROM {ident}.files WHERE content = 0").collect()[0][0]
    if snaps:  # the SQL forms of time travel agree with each other
        first = snaps[0]
        v = sql(f"SELECT count(*) FROM {ident} VERSION AS OF {first.snapshot_id}").collect()[0][0]
        ts = sql(f"SELECT count(*) FROM {ident} TIMESTAMP AS OF '{first.committed_at.isoformat(sep=' ')}'").collect()[0][0]
        assert v == ts == e["snapshots"][0]["version_as_of"]["count"], (t.name, v, ts)
        if e["format_version"] >= 3:
            e["row_lineage"] = result(sql(f"SELECT id, _row_id, _last_updated_sequence_number FROM {ident}"))
    return e


# ======================================================================= the run
def run(script: Path, tables, title: str, default_out: Path, default_origin: str, readme_extra="", after=None,
        spark_extra=None):
    """Entry point for a corpus script: bootstrap outside the venv, generate inside it.
    after(spark, origin, tables, timings): optional, called once the expected results are written
    (same Spark session, before the copy-out); it may add files under the origin and return a dict
    that is merged into index.json. spark_extra(vdir): optional, (jars, conf) added to the Spark
    session."""
    argv = sys.argv[1:]
    if argv[:1] in (["--pyiceberg-worker"], ["--sidequery-worker"]):
        run_catalog_writer(Path(argv[1]), tables, argv[0][2:-7]); return
    if os.environ.get("PETREL_CORPUS_INNER") != "1":
        bootstrap(script, argv, default_out, default_origin); return
    ap = argparse.ArgumentParser(); ap.add_argument("--out"); ap.add_argument("--origin"); ap.add_argument("--keep-origin", action="store_true")
    a = ap.parse_args(argv)
    origin, out, vdir = Path(a.origin), Path(a.out), Path(os.environ["PETREL_CORPUS_VENVS"])
    assert origin.is_absolute() and origin != out
    assert _safe_to_replace(origin, ORIGIN_MARK) and _safe_to_replace(out, "index.json"), (origin, out)
    t0 = time.time(); timings = {}
    shutil.rmtree(origin, ignore_errors=True); (origin / "expected").mkdir(parents=True)
    (origin / ORIGIN_MARK).write_text("made by make_corpus.py; deleted/replaced by the next run\n")
    # 1. catalog writers in their own processes (the sidequery fork shadows pyiceberg => own venv)
    for writer, py in (("sidequery", os.environ["PETREL_CORPUS_SQ_PY"]), ("pyiceberg", sys.executable)):
        if any(t.writer == writer for t in tables):
            t = time.time()
            subprocess.run([py, str(script), f"--{writer}-worker", str(origin)], check=True)
            timings[writer] = round(time.time() - t, 1)
    for t in tables:
        if t.writer in ("pyiceberg", "sidequery"):
            to_hadoop_layout(origin / "warehouse/db" / t.name)
    # 2. Spark and the Java API
    t = time.time(); spark = spark_session(origin / "warehouse", vdir, *(spark_extra(vdir) if spark_extra else ((), None))); timings["spark_start"] = round(time.time() - t, 1)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS iceberg.db")
    ctx = SparkCtx(spark, origin)
    t = time.time()
    for tb in tables:
        if tb.writer not in ("pyiceberg", "sidequery"):
            t1 = time.time(); tb.build(ctx); print(f"built {tb.name} in {time.time() - t1:.1f}s", flush=True)
    timings["spark_tables"] = round(time.time() - t, 1)
    # 3. expected results, all computed by Spark through the Hadoop catalog (tables in parallel:
    #    Spark runs jobs from several threads, and most of the time is per-query driver overhead)
    t = time.time(); index = []
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda tb: expected_for(spark, origin, tb), tables))
    for tb, e in zip(tables, results):
        with open(origin / "expected" / f"{tb.name}.json", "w") as f:
            json.dump(e, f, ensure_ascii=False)
        index.append({"table": tb.name, "writer": e["writer"], "format_version": e["format_version"],
                      "metadata_file": e["metadata_file"], "rows": e["current"]["count"],
                      "snapshots": len(e["snapshots"]), "refs": [r["name"] for r in e["refs"]],
                      "queries": len(e["queries"]), "data_files": e["data_files"],
                      "delete_files": sorted({f"{'pos' if d['content'] == 1 else 'eq'}/{d['file_format']}" for d in e["delete_files"]}),
                      "about": tb.about})
    timings["expected"] = round(time.time() - t, 1)
    extra_index = after(spark, origin, tables, timings) if after else None
    spark.stop()
    timings["total"] = round(time.time() - t0, 1)
    json.dump({"title": title, "origin": str(origin), "tables": index, **(extra_index or {}), "timings_s": timings},
              open(origin / "index.json", "w"), indent=1, ensure_ascii=False)
    (origin / "README.md").write_text(readme(title, str(origin), index, readme_extra, {t.writer for t in tables}, script.name))
    # 4. copy out: no Hadoop .crc side files (the SQL catalogs lived in a temp folder)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(origin, out, ignore=shutil.ignore_patterns("*.crc", ORIGIN_MARK))
    if not a.keep_origin:
        shutil.rmtree(origin)
        if origin == Path(default_origin):
            try:
                origin.parent.rmdir()  # /petrel-fixtures-origin, only if it is empty
            except OSError:
                pass
    for i in index:
        print(f"{i['table']:20} v{i['format_version']} rows={i['rows']:7} snaps={i['snapshots']:2} refs={i['refs']} "
              f"files={i['data_files']:3} deletes={i['delete_files']}  [{i['writer']}]")
    print("timings:", timings, "->", out)


def readme(title, origin, index, extra, writers, generator):
    spell = [f"`{origin}/...` (Spark's Hadoop catalog, the Java API)"]
    if "pyarrow+add_files" in writers:
        spell.append(f"`file:{origin}/...` (files imported by Spark's `add_files`)")
    if writers & {"pyiceberg", "sidequery"}:
        spell.append(f"`file://{origin}/...` (PyIceberg writers)")
    rows = "\n".join(f"| `{i['table']}` | {i['writer']} | v{i['format_version']} | {i['rows']} | {i['snapshots']} | "
                     f"{', '.join(i['refs'])} | {i['data_files']} | {', '.join(i['delete_files']) or '-'} | {i['about']} |"
                     for i in index)
    return f"""# {title}

Apache Iceberg tables written by independent writers, with the results Spark 3.5.9 + Iceberg 1.10.2
computed for them. Generated by `{generator}`; do not edit by hand.

## Layout

```
warehouse/db/<table>/metadata/   vN.metadata.json, version-hint.text, manifest lists/manifests (Avro), puffin
warehouse/db/<table>/data/       data files and delete files (Parquet)
expected/<table>.json            what Spark read (below)
index.json                       the table list with row/snapshot counts
```

**Origin prefix.** The tables were written at `{origin}` and then moved. Paths inside the
metadata are absolute and start with that prefix, spelt {", ".join(spell)}.
A reader must resolve a moved table by replacing the metadata's `location` with the table's
current directory (`<corpus>/warehouse/db/<table>`). Position-delete files also hold data-file
paths at the origin (their `file_path` column), spelt as in the manifests.
Snapshot ids, timestamps and file names change each time the corpus is regenerated.

PyIceberg-family tables were written through a SQLite SQL catalog with their location set to
`warehouse/db/<table>`; the catalog database was dropped and PyIceberg's metadata file names
(`NNNNN-<uuid>.metadata.json`) were renamed to the Hadoop form `v<NNNNN+1>.metadata.json`
(only the file names and the `metadata-log` entries changed), with a `version-hint.text`.

## Tables

| table | writer | format | rows | snapshots | refs | data files | delete files | what it exercises |
|---|---|---|---|---|---|---|---|---|
{rows}
{extra}
## expected/<table>.json

Computed by Spark 3.5.9 + Iceberg 1.10.2 reading each table through its Hadoop catalog named
`iceberg` (so every SQL text below runs verbatim against `iceberg.db.<table>`):

- `current`: `SELECT * FROM iceberg.db.<table>`
- `snapshots[]`: every snapshot (branch snapshots included), with `snapshot_id`, `parent_id`,
  `operation`, `summary` and `version_as_of`: `SELECT * FROM iceberg.db.<table> VERSION AS OF <snapshot_id>`
  (Spark reads a snapshot with the schema that snapshot had)
- `refs[]`: every branch and tag (`main` included): `SELECT * FROM iceberg.db.<table> VERSION AS OF '<name>'`
  (a branch is read with the table's current schema, Iceberg's rule for branches: `refs[main]` can
  have a column that the latest snapshot's `version_as_of` lacks)
- `queries[]`: `{{id, sql, result}}`, predicate queries in plain ANSI SQL
- `delete_files`, `data_files`: from Spark's `delete_files` / `files` metadata tables
- `metadata_location` (at the origin) and `metadata_file` (relative to the corpus root): the current metadata

A result is `{{columns, types (Spark SQL types), ordered, count, rows}}`. Rows of an unordered result are
a multiset (stored sorted by their JSON text); `ordered` is true when the query has ORDER BY.
A result with more than {DIGEST_ROWS} rows and no float column may hold `digest` (SHA-256 of the sorted
canonical row texts) and `column_stats` instead of `rows`.

Values are normalised: integers and booleans as JSON; float/double as JSON numbers, with NaN and
infinities as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`; decimals as strings (`"12.50"`, Spark's
scale); dates as `YYYY-MM-DD`; `timestamp` (Iceberg timestamptz) as ISO-8601 in UTC with `+00:00`;
`timestamp_ntz` (Iceberg timestamp) as ISO-8601 without zone; binary as lowercase hex; uuid as the
36-character string Spark reads; struct as an object, list as an array, map<string,_> as an object.
Compare floats with a relative tolerance (1e-9) and decimals by value.
"""


# ======================================================================= the visible tables
MOR = "'write.delete.mode'='merge-on-read','write.update.mode'='merge-on-read','write.merge.mode'='merge-on-read'"


def b_v2_mor(c):
    sql = c.sql
    sql(f"""CREATE TABLE iceberg.db.v2_mor (id int, ts timestamp, name string, amount double) USING iceberg
            PARTITIONED BY (days(ts), bucket(4, id)) TBLPROPERTIES ('format-version'='2', {MOR})""")
    sql("""INSERT INTO iceberg.db.v2_mor SELECT CAST(id AS int),
           timestamp'2024-01-01 00:00:00' + make_interval(0,0,0, CAST(id % 5 AS int), CAST(id % 24 AS int), 0, 0),
           concat('name_', CAST(id AS string)), CAST(id AS double) * 1.5 FROM range(0, 3000)""")
    sql("DELETE FROM iceberg.db.v2_mor WHERE id % 10 = 3")
    sql("UPDATE iceberg.db.v2_mor SET amount = -1.0, name = concat(name, '_upd') WHERE id % 10 = 7")
    sql("""MERGE INTO iceberg.db.v2_mor t USING (SELECT CAST(id AS int) id, timestamp'2024-01-03 12:00:00' ts,
             concat('merged_', CAST(id AS string)) name, CAST(id AS double) amount FROM range(2990, 3010)) s
           ON t.id = s.id WHEN MATCHED AND s.id % 2 = 0 THEN DELETE
           WHEN MATCHED THEN UPDATE SET t.name = s.name, t.amount = s.amount WHEN NOT MATCHED THEN INSERT *""")


def b_v2_evolved(c):
    sql = c.sql
    sql(f"""CREATE TABLE iceberg.db.v2_evolved (id int, name string, price float, ts timestamp) USING iceberg
            PARTITIONED BY (bucket(4, id)) TBLPROPERTIES ('format-version'='2', {MOR})""")
    sql("""INSERT INTO iceberg.db.v2_evolved SELECT CAST(id AS int), concat('n', CAST(id AS string)),
           CAST(id AS float) / 4, timestamp'2024-03-01 00:00:00' + make_interval(0,0,0, CAST(id % 3 AS int), 0,0,0) FROM range(0, 500)""")
    sql("ALTER TABLE iceberg.db.v2_evolved ADD COLUMN qty int")
    sql("ALTER TABLE iceberg.db.v2_evolved RENAME COLUMN name TO label")
    sql("ALTER TABLE iceberg.db.v2_evolved ALTER COLUMN id TYPE bigint")
    sql("ALTER TABLE iceberg.db.v2_evolved ALTER COLUMN price TYPE double")
    sql("ALTER TABLE iceberg.db.v2_evolved ADD PARTITION FIELD days(ts)")
    sql("ALTER TABLE iceberg.db.v2_evolved DROP PARTITION FIELD bucket(4, id)")
    sql("""INSERT INTO iceberg.db.v2_evolved SELECT id, concat('m', CAST(id AS string)), CAST(id AS double) / 8,
           timestamp'2024-04-01 00:00:00' + make_interval(0,0,0, CAST(id % 3 AS int), 0,0,0), CAST(id % 7 AS int) FROM range(500, 700)""")
    sql("ALTER TABLE iceberg.db.v2_evolved ADD COLUMN note string")
    sql("ALTER TABLE iceberg.db.v2_evolved DROP COLUMN qty")
    sql("DELETE FROM iceberg.db.v2_evolved WHERE id % 9 = 0")  # position deletes in both specs
    sql("UPDATE iceberg.db.v2_evolved SET note = 'touched' WHERE id % 50 = 1")


def b_v3_dv(c):
    sql = c.sql
    sql(f"""CREATE TABLE iceberg.db.v3_dv (id bigint, ts timestamp, name string) USING iceberg
            PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('format-version'='3', {MOR})""")
    sql("INSERT INTO iceberg.db.v3_dv SELECT id, timestamp'2024-01-01 00:00:00', concat('n', CAST(id AS string)) FROM range(0, 1000)")
    sql("DELETE FROM iceberg.db.v3_dv WHERE id % 7 = 0")
    sql("UPDATE iceberg.db.v3_dv SET name = 'upd' WHERE id % 11 = 0")
    sql("DELETE FROM iceberg.db.v3_dv WHERE id % 13 = 0")  # merges into the existing DVs


def b_v2_eq_java(c):
    sql = c.sql
    sql("""CREATE TABLE iceberg.db.v2_eq_java (id int, data string, cat string) USING iceberg
           PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='2')""")
    sql("""INSERT INTO iceberg.db.v2_eq_java SELECT CAST(id AS int), concat('d', CAST(id % 50 AS string)),
           CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END FROM range(0, 1000)""")
    catof = lambda i: "even" if i % 2 == 0 else "odd"
    c.eq_delete("v2_eq_java", ["id"], [{"id": i, "cat": catof(i)} for i in range(0, 100, 3)])
    c.eq_delete("v2_eq_java", ["data"], [{"data": d, "cat": "odd"} for d in ("d7", "d9")])
    c.eq_delete("v2_eq_java", ["id", "data"], [{"id": i, "data": f"d{i % 50}", "cat": catof(i)} for i in range(200, 260, 4)])
    sql("INSERT INTO iceberg.db.v2_eq_java VALUES (3, 'reinserted', 'odd'), (7, 'd7', 'odd')")


def b_v3_eq_dv(c):
    sql = c.sql
    sql(f"""CREATE TABLE iceberg.db.v3_eq_dv (id int, data string) USING iceberg
            PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('format-version'='3', {MOR})""")
    sql("INSERT INTO iceberg.db.v3_eq_dv SELECT CAST(id AS int), concat('d', CAST(id AS string)) FROM range(0, 600)")
    c.eq_delete("v3_eq_dv", ["id"], [{"id": i} for i in range(0, 600, 5)])
    sql("DELETE FROM iceberg.db.v3_eq_dv WHERE id % 7 = 0")


def _sq_schema():
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, LongType, StringType
    sch = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "data", StringType()),
                 NestedField(3, "cat", StringType(), required=True), identifier_field_ids=[1])
    asch = pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string()), pa.field("cat", pa.string(), False)])
    rows = lambda it, f: pa.Table.from_pylist([{"id": i, "data": f(i), "cat": "even" if i % 2 == 0 else "odd"} for i in it], schema=asch)
    return sch, rows


def b_eq_sidequery(cat, location):
    sch, rows = _sq_schema()
    t = cat.create_table("db.eq_sidequery", schema=sch, location=location, properties={"format-version": "2"})
    t.append(rows(range(1000), lambda i: f"d{i % 50}"))
    t.upsert_by_equality_delete(rows(range(0, 100, 10), lambda i: f"upd{i}"), join_cols=["id"],
                                delete_df=rows(range(500, 520), lambda i: None))
    t.upsert_by_equality_delete(rows(range(0, 30, 10), lambda i: f"upd2_{i}"), join_cols=["id"])
    t.append(rows([505], lambda i: "reinserted"))  # newer sequence number: survives the older eq delete


def b_eq_sidequery_part(cat, location):
    from pyiceberg.partitioning import PartitionSpec, PartitionField
    from pyiceberg.transforms import IdentityTransform
    sch, rows = _sq_schema()
    t = cat.create_table("db.eq_sidequery_part", schema=sch, location=location, properties={"format-version": "2"},
                         partition_spec=PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "cat")))
    t.append(rows(range(1000), lambda i: f"d{i % 50}"))
    t.upsert_by_equality_delete(rows(range(0, 200, 7), lambda i: f"upd{i}"), join_cols=["id", "cat"])


def b_pyiceberg_cow(cat, location):
    import pyarrow as pa
    from pyiceberg.expressions import EqualTo, LessThan, GreaterThanOrEqual
    from pyiceberg.partitioning import PartitionSpec, PartitionField
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import BucketTransform, DayTransform
    from pyiceberg.types import NestedField, LongType, StringType, TimestampType, DoubleType
    sch = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType()),
                 NestedField(3, "name", StringType()), NestedField(4, "amount", DoubleType()))
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day"), PartitionField(1, 1001, BucketTransform(4), "id_bucket"))
    asch = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("name", pa.string()), ("amount", pa.float64())])
    rows = lambda lo, hi: pa.Table.from_pylist([{"id": i, "ts": dt.datetime(2024, 1, 1) + dt.timedelta(days=i % 5, hours=i % 24),
                                                 "name": f"name_{i}", "amount": i * 1.5} for i in range(lo, hi)], schema=asch)
    t = cat.create_table("db.pyiceberg_cow", schema=sch, partition_spec=spec, location=location, properties={"format-version": "2"})
    t.append(rows(0, 3000)); t.append(rows(3000, 3100))
    t.delete(EqualTo("id", 5)); t.delete(LessThan("id", 100))
    t.overwrite(rows(9000, 9010), overwrite_filter=GreaterThanOrEqual("id", 3000))
    t.update_schema().add_column("extra", StringType()).commit()


def Q(t, *qs):
    return [(f"q{i + 1}", q.replace("$T", f"iceberg.db.{t}")) for i, q in enumerate(qs)]


TABLES = [
    Table("v2_mor", "spark", b_v2_mor,
          "v2 merge-on-read: position deletes from DELETE, UPDATE and MERGE; partitioned by days(ts), bucket(4, id); ts is timestamptz",
          Q("v2_mor", "SELECT id, name, amount FROM $T WHERE id BETWEEN 100 AND 120",
            "SELECT count(*) AS n FROM $T WHERE ts >= TIMESTAMP '2024-01-03 00:00:00+00:00' AND ts < TIMESTAMP '2024-01-04 00:00:00+00:00'",
            "SELECT * FROM $T WHERE name LIKE 'merged%'",
            "SELECT id, amount FROM $T ORDER BY id LIMIT 5")),
    Table("v2_evolved", "spark", b_v2_evolved,
          "v2 schema evolution (add/rename/drop column, int->bigint, float->double) and partition evolution bucket(4,id) -> days(ts); MOR deletes across both specs",
          Q("v2_evolved", "SELECT id, label, note FROM $T WHERE note = 'touched'",
            "SELECT count(*) AS n FROM $T WHERE price > 50",
            "SELECT id, label FROM $T WHERE label LIKE 'm6%'",
            "SELECT id, price FROM $T ORDER BY id DESC LIMIT 5")),
    Table("v3_dv", "spark", b_v3_dv,
          "v3 deletion vectors (Puffin) from DELETE, UPDATE and a second DELETE that merges into the existing DVs; row lineage",
          Q("v3_dv", "SELECT count(*) AS n FROM $T WHERE name = 'upd'",
            "SELECT id, name FROM $T WHERE id BETWEEN 10 AND 30",
            "SELECT id FROM $T ORDER BY id DESC LIMIT 5")),
    Table("v2_eq_java", "java", b_v2_eq_java,
          "v2 equality deletes (Java API) on id, on data, on (id, data), partition-scoped by identity(cat); keys re-inserted afterwards",
          Q("v2_eq_java", "SELECT * FROM $T WHERE cat = 'odd' AND id < 30",
            "SELECT id, data FROM $T WHERE data IN ('d7', 'd9')",
            "SELECT cat, count(*) AS n FROM $T GROUP BY cat")),
    Table("v3_eq_dv", "java", b_v3_eq_dv,
          "v3 with equality deletes (Java API) and deletion vectors (Spark) on the same data files",
          Q("v3_eq_dv", "SELECT * FROM $T WHERE id BETWEEN 0 AND 40",
            "SELECT count(*) AS n FROM $T")),
    Table("eq_sidequery", "sidequery", b_eq_sidequery,
          "v2 unpartitioned equality deletes from upserts (key id) and delete-only rows; a deleted key re-inserted later",
          Q("eq_sidequery", "SELECT id, data FROM $T WHERE data LIKE 'upd%'",
            "SELECT id, data FROM $T WHERE id BETWEEN 495 AND 525",
            "SELECT count(*) AS n FROM $T")),
    Table("eq_sidequery_part", "sidequery", b_eq_sidequery_part,
          "v2 equality deletes partition-scoped by identity(cat), key (id, cat)",
          Q("eq_sidequery_part", "SELECT * FROM $T WHERE cat = 'even' AND id < 30",
            "SELECT count(*) AS n FROM $T WHERE data LIKE 'upd%'")),
    Table("pyiceberg_cow", "pyiceberg", b_pyiceberg_cow,
          "PyIceberg copy-on-write deletes and overwrite; partitioned by day(ts), bucket(4, id); a column added last; ts is timestamp without zone",
          Q("pyiceberg_cow", "SELECT * FROM $T WHERE id >= 9000",
            "SELECT count(*) AS n FROM $T WHERE ts >= TIMESTAMP '2024-01-02 00:00:00' AND ts < TIMESTAMP '2024-01-03 00:00:00'",
            "SELECT id, name FROM $T WHERE name IN ('name_100', 'name_101', 'name_5')",
            "SELECT count(*) AS n FROM $T WHERE extra IS NULL")),
]

if __name__ == "__main__":
    run(Path(__file__).resolve(), TABLES, "Petrel Iceberg test corpus", CACHE / "iceberg-corpus", DEFAULT_ORIGIN)
