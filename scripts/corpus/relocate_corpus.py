"""A copy of the fixture corpus relocated to S3 by Iceberg's own relocation, Spark's
`rewrite_table_path` (Iceberg 1.10: RewriteTablePathSparkAction), for the REST-catalog-on-S3 test
(table-provider/tests/it/rest_corpus_s3.rs).

Run inside petrel_tables.py's Spark session (its `after` hook, so the test data phase still starts
Spark once) when PETREL_RELOCATE_CORPUS (the corpus folder) and PETREL_RELOCATE_OUT (where the
result goes) are set (scripts/test-data.sh sets them for the `spark-tables` dataset).

Every corpus table is registered by its current metadata file, spelt at the origin the corpus was
written at, in a throw-away Iceberg JDBC catalog (Derby in memory: the catalog must hand Spark the
metadata path as the metadata spells it, which a Hadoop catalog over the moved folder does not),
whose Hadoop file system maps the origin folder to the corpus folder (OriginFileSystem.java).
Then one `rewrite_table_path(source_prefix => <the table's location>, target_prefix =>
s3://petrel-corpus/corpus/db/<table>, staging_location => ...)` per table rewrites every metadata
version (no start/end version), so time travel and refs work on the copy.

What Iceberg 1.10.2 cannot relocate (recorded under not_relocated with the exception, never
faked; the test asserts the list):
  - v3 deletion vectors (v3_dv, v3_eq_dv): `java.lang.IllegalArgumentException: Content offset is
    required for DV` while rewriting the delete manifests (apache/iceberg#14351 fixes it later).
  - v2 position deletes (v2_mor, v2_evolved): the full run fails with
    `FileAlreadyExistsException` (a delete file carried into a later manifest is rewritten twice
    to one staging path, apache/iceberg#14814). Run one version at a time it "succeeds", but
    check_staged() finds the copy plan naming position delete files that were never written (only
    the last of each delete manifest is, apache/iceberg#12772) and the written ones changed size
    while the manifests keep the old size (apache/iceberg#15470).

Output (PETREL_RELOCATE_OUT):
  index.json       {bucket, prefix, origin, corpus, tables: [corpus index entries of the relocated
                   tables + metadata_location (the relocated current metadata file), versions],
                   not_relocated: [{table, error}], timings_s}
  expected/        the relocated tables' expected/<table>.json (Spark's results, unchanged)
  staging/<table>/ what rewrite_table_path wrote (metadata files, manifest lists, manifests,
                   position delete files) and its file-list (source,target per line)
  copy.json        {table: [{from: "staging/..." | "corpus/...", to: "s3://..."}]}: every file to
                   upload, staged files from this folder, unchanged ones (data files, equality
                   deletes) relative to the corpus folder
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUCKET = "petrel-corpus"
PREFIX = "corpus"
CATALOG = "corpus_src"


def origin_fs_jar(vdir: Path) -> Path:
    """OriginFileSystem.java compiled against pyspark's Hadoop client (cached by source hash)."""
    src = HERE / "OriginFileSystem.java"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    jar = vdir / f"petrel-origin-fs-{digest}.jar"
    if jar.exists():
        return jar
    import pyspark
    hadoop = next((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    with tempfile.TemporaryDirectory() as td:
        shutil.copy(src, td)
        subprocess.run(["javac", "--release", "11", "-cp", str(hadoop), "OriginFileSystem.java"], cwd=td, check=True)
        classes = [p.name for p in Path(td).glob("*.class")]
        subprocess.run(["jar", "cf", str(jar) + ".tmp", *classes], cwd=td, check=True)
    os.replace(str(jar) + ".tmp", jar)
    return jar


def requested():
    """(corpus, out) from the environment, or None."""
    corpus, out = os.environ.get("PETREL_RELOCATE_CORPUS"), os.environ.get("PETREL_RELOCATE_OUT")
    return (Path(corpus), Path(out)) if corpus and out else None


def spark_extra(vdir: Path):
    """(jars, conf) the Spark session needs for relocate(): the catalog CATALOG, whose file
    system reads the corpus's origin folder from the corpus folder."""
    req = requested()
    if req is None:
        return [], {}
    corpus, _ = req
    origin = json.loads((corpus / "index.json").read_text())["origin"]
    c = f"spark.sql.catalog.{CATALOG}"
    return [str(origin_fs_jar(vdir))], {
        c: "org.apache.iceberg.spark.SparkCatalog",
        f"{c}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{c}.uri": "jdbc:derby:memory:petrel_corpus_src;create=true",
        f"{c}.warehouse": "/nonexistent-petrel-relocation-warehouse",  # nothing is created there
        f"{c}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        f"{c}.hadoop.fs.file.impl": "OriginFileSystem",
        f"{c}.hadoop.fs.file.impl.disable.cache": "true",
        f"{c}.hadoop.petrel.origin.from": origin,
        f"{c}.hadoop.petrel.origin.to": str(corpus.resolve()),
    }


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _root_cause(e) -> str:
    """The innermost Java exception of a py4j error, as Java prints it (class: message)."""
    j = getattr(e, "java_exception", None)
    if j is None:
        return f"{type(e).__name__}: {e}"
    while j.getCause() is not None and j.getCause() != j:
        j = j.getCause()
    return j.toString()


def _plain(path: str) -> str:
    for scheme in ("file://", "file:"):
        if path.startswith(scheme):
            return path[len(scheme):]
    return path


class Incomplete(Exception):
    """rewrite_table_path returned, but its copy is not the table."""


def check_staged(out: Path, corpus: Path, files: dict):
    """Every staged file of the copy plan was written, and every rewritten position delete file
    has the size of the original (the rewritten manifests keep the original's file_size_in_bytes:
    `FileMetadata.deleteFileBuilder(spec).copy(file).withPath(...)`)."""
    staged = {dst: rel for dst, rel in files.items() if rel.startswith("staging/")}
    missing = sorted(rel for rel in staged.values() if not (out / rel).exists())
    deletes = [(dst, rel) for dst, rel in staged.items() if dst.endswith(".parquet") and "/data/" in dst]
    resized = []
    for dst, rel in deletes:
        if (out / rel).exists():
            original = corpus / "warehouse" / "db" / dst.split("/corpus/db/", 1)[1]
            if (out / rel).stat().st_size != original.stat().st_size:
                resized.append(f"{original.name} {original.stat().st_size} -> {(out / rel).stat().st_size} bytes")
    problems = []
    if missing:
        problems.append(
            f"the copy plan names {len(missing)} of {len(deletes)} rewritten position delete files at staging "
            f"paths never written (e.g. {Path(missing[0]).name}): Iceberg 1.10.2's RewriteTablePathUtil."
            "rewriteDeleteManifest queues the manifest reader's reused DeleteFile without copying it, so only "
            "the last position delete file of each delete manifest is rewritten (apache/iceberg#12772)")
    if resized:
        problems.append(
            f"{len(resized)} rewritten position delete files changed size ({resized[0]}) while the rewritten "
            "manifests keep the original file_size_in_bytes (apache/iceberg#15470)")
    if problems:
        raise Incomplete("; ".join(problems))


def relocate(spark, timings):
    """Relocates the corpus named by the environment (see the module doc); returns a summary."""
    req = requested()
    if req is None:
        return None
    corpus, out = req
    t0 = time.time()
    spark._jvm.java.lang.System.setProperty("derby.stream.error.file", os.devnull)
    index = json.loads((corpus / "index.json").read_text())
    origin = index["origin"]
    shutil.rmtree(out, ignore_errors=True)
    (out / "expected").mkdir(parents=True)
    done, failed, copy = [], [], {}
    for entry in index["tables"]:
        name = entry["table"]
        current = json.loads((corpus / entry["metadata_file"]).read_text())
        source = current["location"]  # as every path in the metadata spells the origin
        target = f"s3://{BUCKET}/{PREFIX}/db/{name}"
        versions = [os.path.basename(e["metadata-file"]) for e in current.get("metadata-log", [])]
        versions.append(os.path.basename(entry["metadata_file"]))
        spark.sql(f"CALL {CATALOG}.system.register_table(table => 'db.{name}', metadata_file => "
                  f"{_sql_str(source + '/metadata/' + versions[-1])})").collect()
        t1, files, staging = time.time(), {}, out / "staging" / name
        try:
            row = spark.sql(
                f"CALL {CATALOG}.system.rewrite_table_path(table => 'db.{name}', source_prefix => {_sql_str(source)}, "
                f"target_prefix => {_sql_str(target)}, staging_location => {_sql_str(str(staging) + '/')})"
            ).collect()[0]
            assert row.latest_version == versions[-1], (name, row.latest_version, versions[-1])
            for line in Path(_plain(row.file_list_location)).read_text().splitlines():
                src, dst = (_plain(p) for p in line.rsplit(",", 1))
                if src.startswith(str(staging) + "/"):
                    files[dst] = "staging/" + str(Path(src).relative_to(out / "staging"))
                elif src.startswith(origin + "/"):
                    files[dst] = "corpus/" + src[len(origin) + 1:]
                else:
                    raise ValueError(f"{name}: {src} is neither staged nor at the origin {origin}")
            check_staged(out, corpus, files)
        except Exception as e:  # noqa: BLE001 - recorded: a table Iceberg cannot relocate
            failed.append({"table": name, "error": _root_cause(e)})
            print(f"relocate {name}: not relocated: {failed[-1]['error']}", flush=True)
            shutil.rmtree(staging, ignore_errors=True)
            continue
        copy[name] = [{"from": f, "to": t} for t, f in sorted(files.items())]
        shutil.copy(corpus / "expected" / f"{name}.json", out / "expected" / f"{name}.json")
        done.append(dict(entry, metadata_location=f"{target}/metadata/{versions[-1]}", versions=len(versions)))
        print(f"relocate {name}: {len(versions)} metadata versions, {len(files)} files in {time.time() - t1:.1f}s",
              flush=True)
    timings["relocate"] = round(time.time() - t0, 1)
    (out / "copy.json").write_text(json.dumps(copy, indent=1))
    (out / "index.json").write_text(json.dumps(
        {"title": "The fixture corpus relocated to S3 by rewrite_table_path", "bucket": BUCKET, "prefix": PREFIX,
         "origin": origin, "corpus": str(corpus), "tables": done, "not_relocated": failed,
         "timings_s": {"relocate": timings["relocate"]}}, indent=1))
    return {"relocated": [t["table"] for t in done], "not_relocated": failed}
