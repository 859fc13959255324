//! Writes: Petrel's `INSERT INTO` against baselines measured in the same run.
//!
//! 1. **Throughput.** 5,000,000 rows of the read benchmarks' lineitem-like shape
//!    (`benches/common`: `id bigint, i int, d double, s string`, batches of 8,192 rows — DataFusion's
//!    batch size — in a two-partition `MemTable`) written by `INSERT INTO t SELECT * FROM src`
//!    into a fresh Iceberg table of a filesystem catalog, (a) unpartitioned and (b) partitioned
//!    by `truncate(10, i)` (100 partitions, every batch touching all of them), once with the
//!    default `write.distribution-mode` (`hash`: rows repartitioned on the partition key, one
//!    writer task and one file per partition) and once with `none` (each writer task writes
//!    its own file of every partition it sees). The floor is
//!    DataFusion writing the same batches as Parquet with the same compression —
//!    `COPY (SELECT * FROM src) TO '<dir>/' STORED AS PARQUET` with `zstd(1)`, the level
//!    Petrel's writer uses when the table sets none (`write.parquet.compression-level`).
//!    DataFusion's own partitioned `COPY … PARTITIONED BY (i_trunc)` (Hive directories over the
//!    same 100 values) is measured too, for reference, and once more without dictionary
//!    encoding (a diagnostic: what dictionaries cost in small files). Goals: ≥ 0.8 × the floor unpartitioned,
//!    ≥ 0.6 × partitioned. Then a load of a single table partition (`truncate(1000, i)`: every
//!    row's is 0, as a day's load into a daily table), hash-distributed with the partition split
//!    over the writer tasks every 32 MiB of rows (`write.spark.advisory-partition-size-bytes`),
//!    hash-distributed under the default advisory size (512 MiB: more than the whole load, so
//!    one task writes it), and with `none`.
//! 2. **Against PyIceberg.** The same rows are written to a Parquet file once; each round
//!    `benches/pyiceberg_append.py` reads it into one Arrow table (not timed) and times
//!    `table.append(arrow_table)` into a fresh SQL-catalog (SQLite) table on the local
//!    filesystem, unpartitioned and partitioned the same way; in the first round it also
//!    appends one row at a time, 200 times, to one table (each row its own Arrow table, made
//!    before the clock starts), against Petrel's single-row INSERTs on a SQL catalog below.
//!    Goal: Petrel ≥ 3 × faster.
//! 3. **Commit latency.** 200 single-row `INSERT INTO … VALUES (…)` one after the other into one
//!    table of the local filesystem catalog (then of a SQLite SQL catalog), each timed from
//!    `SessionContext::sql` to the collected count: parse, plan, load the table, write one data
//!    file, manifest, manifest list and metadata, swap. Goal: p50 < 20 ms.
//!
//! Cases run interleaved (one of each per round). The summary gives each case's median, best
//! and every round's wall time, and each ratio four ways: of the median wall times, the median
//! of the ratios within a round, of the best wall times, and of the median CPU times (the
//! process's user + system time, `/proc/self/stat`; Python's `time.process_time()`), which
//! other processes on a shared machine move least.
//!
//! Profiling: `PETREL_WRITES_PROFILE=flat|parted` runs only that INSERT (into a fresh table each
//! time) for 20 s after one `EXPLAIN ANALYZE`: the process to attach `perf record -p` to.
//!
//! Run: `cargo bench -p petrel-table-provider --bench writes`. Environment:
//! `PETREL_BENCH_ROWS` (5,000,000), `PETREL_BENCH_ROUNDS` (5), `PETREL_BENCH_INSERTS` (200),
//! `PETREL_BENCH_SPLIT_BYTES` (33,554,432: the one-partition case's advisory size),
//! `PETREL_BENCH_PYTHON` (default: the project's `.venv/bin/python`, then the Spark corpus venv
//! `~/.cache/petrel/corpus-venvs/spark/bin/python`; `none` skips PyIceberg). Scratch files go
//! to `target/petrel-bench-data/writes-<pid>/` and are removed at the end.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, Schema, SchemaRef, UInt64Type};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use iceberg::spec::{
    FormatVersion, NestedField, PartitionSpec, PrimitiveType, SortOrder, TableMetadataBuilder,
    Transform, Type,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use petrel_table_provider::catalog::Catalog;
use petrel_table_provider::{
    FileSystemCatalog, IcebergCatalogProvider, Namespace, SqlCatalog, TableIdent,
};

mod common;
use common::timing::{Sample, env_usize, median, percentile, timed};
use common::{lineitem_batches, lineitem_schema};

/// DataFusion's default batch size: what an `INSERT … SELECT` receives.
const BATCH_ROWS: i64 = 8_192;
/// Input partitions of the source table (= the session's target partitions).
const PARTITIONS: usize = 2;
/// The partitioned table's transform: 100 partitions over `i` (0..999).
const TRUNCATE_WIDTH: u32 = 10;
/// `truncate(1000, i)`: one partition (every `i` is in 0..999).
const ONE_PARTITION_WIDTH: u32 = 1_000;

/// The count a DML statement (INSERT, COPY) returns.
async fn run_count(ctx: &SessionContext, sql: &str) -> u64 {
    let batches = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    batches[0].column(0).as_primitive::<UInt64Type>().value(0)
}

/// The shape as an Iceberg schema (field ids 1–4 as in the Arrow schema).
fn iceberg_schema() -> iceberg::spec::Schema {
    let f = |id, name: &str, ty, required| {
        let ty = Type::Primitive(ty);
        Arc::new(if required {
            NestedField::required(id, name, ty)
        } else {
            NestedField::optional(id, name, ty)
        })
    };
    iceberg::spec::Schema::builder()
        .with_fields(vec![
            f(1, "id", PrimitiveType::Long, true),
            f(2, "i", PrimitiveType::Int, false),
            f(3, "d", PrimitiveType::Double, false),
            f(4, "s", PrimitiveType::String, false),
        ])
        .build()
        .expect("schema")
}

/// Creates `db.<name>` in `catalog` (unpartitioned, or by `truncate(10, i)`), with the
/// default table properties.
async fn create_table(catalog: &dyn Catalog, name: &str, partitioned: bool) {
    create_table_with(catalog, name, partitioned.then_some(TRUNCATE_WIDTH), &[]).await;
}

/// Creates `db.<name>` in `catalog` (unpartitioned, or by `truncate(width, i)`) with the
/// table properties `properties`.
async fn create_table_with(
    catalog: &dyn Catalog,
    name: &str,
    truncate_width: Option<u32>,
    properties: &[(&str, &str)],
) {
    let schema = iceberg_schema();
    let mut spec = PartitionSpec::builder(schema.clone());
    if let Some(width) = truncate_width {
        spec = spec
            .add_partition_field("i", "i_trunc", Transform::Truncate(width))
            .expect("partition field");
    }
    let spec = spec.build().expect("spec");
    let ident = TableIdent::new(Namespace::from_dotted("db"), name);
    let location = catalog
        .default_table_location(&ident)
        .await
        .expect("location");
    let metadata = TableMetadataBuilder::new(
        schema,
        spec,
        SortOrder::unsorted_order(),
        location,
        FormatVersion::V2,
        properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
    .expect("builder")
    .build()
    .expect("metadata")
    .metadata;
    catalog
        .create_table(&ident, metadata)
        .await
        .expect("create table");
}

/// A session over `catalog` (as `iceberg`) with the source rows as `src`.
fn session(catalog: Arc<dyn Catalog>, source: Option<Arc<MemTable>>) -> SessionContext {
    let ctx = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(PARTITIONS)
            .with_batch_size(BATCH_ROWS as usize),
    );
    ctx.register_catalog("iceberg", Arc::new(IcebergCatalogProvider::new(catalog)));
    if let Some(source) = source {
        ctx.register_table("src", source).expect("src");
    }
    ctx
}

/// The Python interpreter for PyIceberg, if any.
fn python() -> Option<PathBuf> {
    match std::env::var("PETREL_BENCH_PYTHON") {
        Ok(v) if v == "none" => return None,
        Ok(v) => return Some(PathBuf::from(v)),
        Err(_) => {}
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    [
        Some(repo.join(".venv/bin/python")),
        home.map(|h| h.join(".cache/petrel/corpus-venvs/spark/bin/python")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.exists())
}

/// What one run of `pyiceberg_append.py` measured.
#[derive(Debug, Default)]
struct PyRound {
    /// Bulk appends by case (`unpartitioned`, `partitioned`).
    samples: HashMap<String, Sample>,
    /// Bytes and data files each bulk append wrote.
    sizes: HashMap<String, (u64, usize)>,
    /// Single-row appends, if asked for.
    single_row: Vec<Duration>,
    /// PyIceberg's and pyarrow's versions.
    versions: String,
}

/// One PyIceberg round (one bulk append of each case, then `single_rows` one-row appends), or
/// why there is none.
fn pyiceberg_round(
    python: &Path,
    data: &Path,
    workdir: &Path,
    rows: usize,
    single_rows: usize,
) -> Result<PyRound, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/pyiceberg_append.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(data)
        .arg(workdir)
        .arg("1")
        .arg(single_rows.to_string())
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let mut round = PyRound::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(latencies) = v["latencies"].as_array() {
            round.single_row = latencies
                .iter()
                .filter_map(|l| l.as_f64())
                .map(Duration::from_secs_f64)
                .collect();
            continue;
        }
        assert_eq!(v["rows"].as_u64(), Some(rows as u64), "PyIceberg rows");
        let secs = |k: &str| Duration::from_secs_f64(v[k][0].as_f64().unwrap_or(f64::NAN));
        round.samples.insert(
            v["case"].as_str().unwrap_or_default().to_string(),
            Sample {
                wall: secs("seconds"),
                cpu: secs("cpu_seconds"),
            },
        );
        round.sizes.insert(
            v["case"].as_str().unwrap_or_default().to_string(),
            (
                v["bytes"].as_u64().unwrap_or(0),
                v["files"].as_u64().unwrap_or(0) as usize,
            ),
        );
        round.versions = format!(
            "PyIceberg {}, pyarrow {}",
            v["pyiceberg"].as_str().unwrap_or("?"),
            v["pyarrow"].as_str().unwrap_or("?")
        );
    }
    Ok(round)
}

/// The size of the files under `dir`, recursively.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

fn count_files(dir: &Path, ext: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => count_files(&e.path(), ext),
            _ => usize::from(e.file_name().to_string_lossy().ends_with(ext)),
        })
        .sum()
}

/// The throughput cases, in the summary's order (indices are used below).
const CASES: [&str; 11] = [
    "DataFusion COPY, Parquet zstd(1) (floor)",
    "Petrel INSERT, unpartitioned",
    "DataFusion COPY PARTITIONED BY (100 Hive dirs)",
    "Petrel INSERT, truncate(10, i): 100 partitions, distribution hash (default)",
    "PyIceberg append, unpartitioned",
    "PyIceberg append, truncate(10, i)",
    "DataFusion COPY PARTITIONED BY, dictionary off (diagnostic)",
    "Petrel INSERT, truncate(10, i): 100 partitions, distribution none",
    "Petrel INSERT, one partition: hash, split (32 MiB; PETREL_BENCH_SPLIT_BYTES)",
    "Petrel INSERT, one partition: hash, not split (under the 512 MiB default)",
    "Petrel INSERT, one partition: distribution none",
];

fn main() {
    let rows = env_usize("PETREL_BENCH_ROWS", 5_000_000);
    let rounds = env_usize("PETREL_BENCH_ROUNDS", 5).max(1);
    let inserts = env_usize("PETREL_BENCH_INSERTS", 200).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(rows, rounds, inserts));
}

async fn run(rows: usize, rounds: usize, inserts: usize) {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let root = target
        .join("petrel-bench-data")
        .join(format!("writes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("scratch dir");
    let root = std::fs::canonicalize(&root).expect("canonical root");

    let schema = lineitem_schema();
    let batches = lineitem_batches(&schema, rows as i64, BATCH_ROWS);
    let arrow_bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    let mut partitions = vec![Vec::new(); PARTITIONS];
    for (i, b) in batches.iter().enumerate() {
        partitions[i % PARTITIONS].push(b.clone());
    }
    let source = Arc::new(MemTable::try_new(Arc::clone(&schema), partitions).expect("source"));

    // PyIceberg's input: the same rows in one Parquet file (without field ids: PyIceberg
    // assigns its own when it creates the table from the Arrow schema).
    let python = python();
    let data_file = root.join("source.parquet");
    if python.is_some() {
        let plain: SchemaRef = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_metadata(HashMap::new()))
                .collect::<Vec<_>>(),
        ));
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build();
        let file = std::fs::File::create(&data_file).expect("source parquet");
        let mut writer =
            ArrowWriter::try_new(file, Arc::clone(&plain), Some(props)).expect("parquet writer");
        for b in &batches {
            let b = RecordBatch::try_new(Arc::clone(&plain), b.columns().to_vec()).expect("batch");
            writer.write(&b).expect("write");
        }
        writer.close().expect("close");
    }
    drop(batches);

    let warehouse = root.join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("warehouse");
    let fs_catalog: Arc<dyn Catalog> = Arc::new(
        FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("fs catalog"),
    );
    let db = Namespace::from_dotted("db");
    fs_catalog
        .create_namespace(&db, true)
        .await
        .expect("namespace");
    let ctx = session(Arc::clone(&fs_catalog), Some(Arc::clone(&source)));
    if let Ok(which) = std::env::var("PETREL_WRITES_PROFILE") {
        profile_loop(&ctx, fs_catalog.as_ref(), &warehouse, &which == "parted").await;
        let _ = std::fs::remove_dir_all(&root);
        return;
    }

    println!(
        "writes: {rows} rows × 4 columns (Int64, Int32, Float64, Utf8), {:.0} MiB in Arrow \
         memory, batches of {BATCH_ROWS}, {PARTITIONS} input partitions; {rounds} rounds; \
         {} cores",
        arrow_bytes as f64 / (1024.0 * 1024.0),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let split_bytes = std::env::var("PETREL_BENCH_SPLIT_BYTES").unwrap_or("33554432".into());
    let mut samples: HashMap<&str, Vec<(usize, Sample)>> = HashMap::new();
    let mut sizes: HashMap<&str, (u64, usize)> = HashMap::new();
    let mut python_note = None;
    let mut versions = String::new();
    let mut py_single_row = Vec::new();
    for round in 0..rounds {
        // 1. The floor: DataFusion's Parquet writer.
        let dir = root.join(format!("copy-{round}"));
        let sql = format!(
            "COPY (SELECT * FROM src) TO '{}/' STORED AS PARQUET \
             OPTIONS ('format.compression' 'zstd(1)')",
            dir.display()
        );
        let (n, s) = timed(run_count(&ctx, &sql)).await;
        assert_eq!(n, rows as u64, "{sql}");
        samples.entry(CASES[0]).or_default().push((round, s));
        sizes.insert(CASES[0], (dir_bytes(&dir), count_files(&dir, ".parquet")));
        let _ = std::fs::remove_dir_all(&dir);

        // 2. Petrel, unpartitioned.
        let name = format!("flat_{round}");
        create_table(fs_catalog.as_ref(), &name, false).await;
        let sql = format!("INSERT INTO iceberg.db.{name} SELECT * FROM src");
        let (n, s) = timed(run_count(&ctx, &sql)).await;
        assert_eq!(n, rows as u64, "{sql}");
        samples.entry(CASES[1]).or_default().push((round, s));
        let table_dir = warehouse.join("db").join(&name);
        sizes.insert(
            CASES[1],
            (
                dir_bytes(&table_dir.join("data")),
                count_files(&table_dir.join("data"), ".parquet"),
            ),
        );
        if round == 0 {
            verify(&ctx, &name, rows).await;
        }
        let _ = std::fs::remove_dir_all(&table_dir);

        // 3. DataFusion's partitioned COPY (reference).
        let dir = root.join(format!("copy-parted-{round}"));
        let sql = format!(
            "COPY (SELECT id, i, d, s, i - i % {TRUNCATE_WIDTH} AS i_trunc FROM src) \
             TO '{}/' STORED AS PARQUET PARTITIONED BY (i_trunc) \
             OPTIONS ('format.compression' 'zstd(1)')",
            dir.display()
        );
        let (n, s) = timed(run_count(&ctx, &sql)).await;
        assert_eq!(n, rows as u64, "{sql}");
        samples.entry(CASES[2]).or_default().push((round, s));
        sizes.insert(CASES[2], (dir_bytes(&dir), count_files(&dir, ".parquet")));
        let _ = std::fs::remove_dir_all(&dir);

        // 3b. The same without dictionary encoding (diagnostic: what dictionaries cost in
        // small files).
        let dir = root.join(format!("copy-parted-plain-{round}"));
        let sql = format!(
            "COPY (SELECT id, i, d, s, i - i % {TRUNCATE_WIDTH} AS i_trunc FROM src) \
             TO '{}/' STORED AS PARQUET PARTITIONED BY (i_trunc) \
             OPTIONS ('format.compression' 'zstd(1)', 'format.dictionary_enabled' 'false')",
            dir.display()
        );
        let (n, s) = timed(run_count(&ctx, &sql)).await;
        assert_eq!(n, rows as u64, "{sql}");
        samples.entry(CASES[6]).or_default().push((round, s));
        sizes.insert(CASES[6], (dir_bytes(&dir), count_files(&dir, ".parquet")));
        let _ = std::fs::remove_dir_all(&dir);

        // 4. Petrel, partitioned. 100 partitions (`truncate(10, i)`): rows hash-distributed on
        // the partition key (the default `write.distribution-mode` of a partitioned table),
        // then each writer task's own files (`none`). One partition (`truncate(1000, i)`: every
        // row's is 0, the load of a single day into a daily table): hash distribution with the
        // partition spread over the writer tasks past `split_bytes` of rows, with the default
        // advisory size (larger than the whole load: one task writes it), and `none`.
        let advisory = [(
            "write.spark.advisory-partition-size-bytes",
            split_bytes.as_str(),
        )];
        let none = [("write.distribution-mode", "none")];
        for (case, name, width, properties) in [
            (CASES[3], "parted", TRUNCATE_WIDTH, &[][..]),
            (CASES[7], "spread", TRUNCATE_WIDTH, &none[..]),
            (CASES[8], "one_split", ONE_PARTITION_WIDTH, &advisory[..]),
            (CASES[9], "one_whole", ONE_PARTITION_WIDTH, &[][..]),
            (CASES[10], "one_none", ONE_PARTITION_WIDTH, &none[..]),
        ] {
            let name = format!("{name}_{round}");
            create_table_with(fs_catalog.as_ref(), &name, Some(width), properties).await;
            let sql = format!("INSERT INTO iceberg.db.{name} SELECT * FROM src");
            let (n, s) = timed(run_count(&ctx, &sql)).await;
            assert_eq!(n, rows as u64, "{sql}");
            samples.entry(case).or_default().push((round, s));
            let table_dir = warehouse.join("db").join(&name);
            sizes.insert(
                case,
                (
                    dir_bytes(&table_dir.join("data")),
                    count_files(&table_dir.join("data"), ".parquet"),
                ),
            );
            if round == 0 {
                verify(&ctx, &name, rows).await;
            }
            let _ = std::fs::remove_dir_all(&table_dir);
        }

        // 5. PyIceberg, both cases, in its own process.
        if let Some(python) = &python {
            let workdir = root.join(format!("pyiceberg-{round}"));
            let single_rows = if round == 0 { inserts } else { 0 };
            match pyiceberg_round(python, &data_file, &workdir, rows, single_rows) {
                Ok(py) => {
                    versions = py.versions;
                    for (case, key) in [(CASES[4], "unpartitioned"), (CASES[5], "partitioned")] {
                        if let Some(s) = py.samples.get(key) {
                            samples.entry(case).or_default().push((round, *s));
                        }
                        if let Some(size) = py.sizes.get(key) {
                            sizes.insert(case, *size);
                        }
                    }
                    if round == 0 {
                        py_single_row = py.single_row;
                    }
                }
                Err(e) => python_note = Some(format!("PyIceberg failed: {e}")),
            }
            let _ = std::fs::remove_dir_all(&workdir);
        }
        eprintln!("writes: round {} of {rounds} done", round + 1);
    }
    if python.is_none() {
        python_note = Some("PyIceberg skipped: no Python found (PETREL_BENCH_PYTHON)".into());
    }
    drop(ctx);
    drop(source);

    // 3. Commit latency of single-row INSERTs.
    let mut latencies = Vec::new();
    {
        let ctx = session(Arc::clone(&fs_catalog), None);
        create_table(fs_catalog.as_ref(), "small", false).await;
        latencies.push((
            "filesystem catalog (Hadoop layout)",
            insert_latencies(&ctx, inserts).await,
        ));
    }
    {
        let sql_catalog: Arc<dyn Catalog> = Arc::new(
            SqlCatalog::open_sqlite(root.join("catalog.db"), "bench")
                .and_then(|c| c.with_warehouse(root.join("sql").to_str().expect("utf8")))
                .expect("sql catalog"),
        );
        sql_catalog
            .create_namespace(&db, true)
            .await
            .expect("namespace");
        let ctx = session(Arc::clone(&sql_catalog), None);
        create_table(sql_catalog.as_ref(), "small", false).await;
        latencies.push((
            "SQL catalog (SQLite)",
            insert_latencies(&ctx, inserts).await,
        ));
    }

    // Summary.
    let med = |case: &str| -> Option<(Duration, Duration)> {
        let s = samples.get(case)?;
        Some((
            median(s.iter().map(|(_, s)| s.wall).collect()),
            median(s.iter().map(|(_, s)| s.cpu).collect()),
        ))
    };
    let best_of = |case: &str| samples.get(case)?.iter().map(|(_, s)| s.wall).min();
    println!();
    println!(
        "| write {rows} rows | median s | best s | M rows/s | CPU s | MiB on disk | files | \
         every round, s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for case in CASES {
        let Some((wall, cpu)) = med(case) else {
            continue;
        };
        let best = best_of(case).unwrap_or_default();
        let (bytes, files) =
            sizes
                .get(case)
                .map_or(("—".to_string(), "—".to_string()), |(b, f)| {
                    (
                        format!("{:.1}", *b as f64 / (1024.0 * 1024.0)),
                        f.to_string(),
                    )
                });
        println!(
            "| {case} | {:.3} | {:.3} | {:.2} | {:.2} | {bytes} | {files} | {} |",
            wall.as_secs_f64(),
            best.as_secs_f64(),
            rows as f64 / wall.as_secs_f64() / 1e6,
            cpu.as_secs_f64(),
            samples[case]
                .iter()
                .map(|(_, s)| format!("{:.2}", s.wall.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    println!();
    // Four estimates of each ratio: of the median wall times, the median of the ratios
    // within a round (cases of one round run seconds apart, under similar load), of the best
    // wall times, and of the median CPU times (least moved by other processes).
    let ratios = |num: &str, den: &str| -> String {
        let (Some((n, n_cpu)), Some((d, d_cpu))) = (med(num), med(den)) else {
            return "— | — | — | —".into();
        };
        let per_round: Vec<f64> = samples[num]
            .iter()
            .filter_map(|(r, a)| {
                let (_, b) = samples[den].iter().find(|(q, _)| q == r)?;
                Some(a.wall.as_secs_f64() / b.wall.as_secs_f64())
            })
            .collect();
        let mut sorted = per_round.clone();
        sorted.sort_by(f64::total_cmp);
        let per_round = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
        let best = match (best_of(num), best_of(den)) {
            (Some(a), Some(b)) => a.as_secs_f64() / b.as_secs_f64(),
            _ => f64::NAN,
        };
        format!(
            "{:.2} | {per_round:.2} | {best:.2} | {:.2}",
            n.as_secs_f64() / d.as_secs_f64(),
            n_cpu.as_secs_f64() / d_cpu.as_secs_f64()
        )
    };
    println!("| ratio | median wall | per round | best wall | CPU | goal |");
    println!("|---|---:|---:|---:|---:|---|");
    for (name, num, den, goal) in [
        ("Petrel unpartitioned throughput ÷ floor", 0, 1, "≥ 0.8"),
        ("Petrel 100 partitions throughput ÷ floor", 0, 3, "≥ 0.6"),
        (
            "Petrel 100 partitions, distribution none, throughput ÷ floor",
            0,
            7,
            "(before hash)",
        ),
        (
            "Petrel 100 partitions ÷ DataFusion partitioned COPY",
            2,
            3,
            "(reference)",
        ),
        (
            "One partition, not split ÷ split (speed-up)",
            9,
            8,
            "(splitting)",
        ),
        ("One partition, none ÷ split", 10, 8, "(splitting)"),
        ("PyIceberg ÷ Petrel, unpartitioned (speed-up)", 4, 1, "≥ 3"),
        ("PyIceberg ÷ Petrel, 100 partitions (speed-up)", 5, 3, "≥ 3"),
        (
            "PyIceberg ÷ Petrel, 100 partitions, distribution none",
            5,
            7,
            "(before hash)",
        ),
    ] {
        println!("| {name} | {} | {goal} |", ratios(CASES[num], CASES[den]));
    }
    if !versions.is_empty() {
        println!("\n({versions})");
    }
    if let Some(note) = python_note {
        println!("\n{note}");
    }
    println!();
    println!(
        "| single-row INSERT, {inserts} in a row | p50 ms | p99 ms | max ms | mean ms | goal |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    if !py_single_row.is_empty() {
        latencies.push((
            "PyIceberg append of one row, SQL catalog (SQLite)",
            py_single_row,
        ));
    }
    let mut p50s = Vec::new();
    for (name, mut l) in latencies {
        l.sort();
        p50s.push(percentile(&l, 0.5));
        let mean = l.iter().sum::<Duration>() / l.len() as u32;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | p50 < 20 ms |",
            ms(percentile(&l, 0.5)),
            ms(percentile(&l, 0.99)),
            ms(*l.last().unwrap_or(&Duration::ZERO)),
            ms(mean)
        );
    }
    if let [_, sql, py] = p50s[..] {
        println!(
            "\nPyIceberg ÷ Petrel, one-row append p50 on a SQL catalog (speed-up): {:.2} (goal ≥ 3)",
            py.as_secs_f64() / sql.as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// `PETREL_WRITES_PROFILE=flat|parted`: only that INSERT, into a fresh table each time, for
/// 20 s after one `EXPLAIN ANALYZE` (the process to attach `perf record -p` to).
async fn profile_loop(ctx: &SessionContext, catalog: &dyn Catalog, warehouse: &Path, parted: bool) {
    let mut times = Vec::new();
    let started = Instant::now();
    for k in 0.. {
        let name = format!("profile_{k}");
        create_table(catalog, &name, parted).await;
        let sql = format!("INSERT INTO iceberg.db.{name} SELECT * FROM src");
        if k == 0 {
            let plan = ctx
                .sql(&format!("EXPLAIN ANALYZE {sql}"))
                .await
                .expect("explain")
                .collect()
                .await
                .expect("explain");
            println!(
                "{}",
                arrow::util::pretty::pretty_format_batches(&plan).expect("format")
            );
        } else {
            let t = Instant::now();
            run_count(ctx, &sql).await;
            times.push(t.elapsed());
        }
        let _ = std::fs::remove_dir_all(warehouse.join("db").join(&name));
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    let n = times.len();
    println!("profile: {n} INSERTs, median {:?}", median(times));
}

/// Checks what an INSERT wrote: the row count and the sum of `id`.
async fn verify(ctx: &SessionContext, table: &str, rows: usize) {
    let sql = format!("SELECT count(*), sum(id) FROM iceberg.db.{table}");
    let batches = match ctx.sql(&sql).await {
        Ok(df) => df.collect().await,
        Err(e) => Err(e),
    }
    .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let count = batches[0].column(0).as_primitive::<Int64Type>().value(0);
    let sum = batches[0].column(1).as_primitive::<Int64Type>().value(0);
    let n = rows as i64;
    assert_eq!((count, sum), (n, n * (n - 1) / 2), "{sql}");
}

/// `n` single-row INSERTs into `iceberg.db.small` (after 5 not counted), each timed end to
/// end.
async fn insert_latencies(ctx: &SessionContext, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for k in 0..n + 5 {
        let sql = format!("INSERT INTO iceberg.db.small VALUES ({k}, 1, 0.5, 'x')");
        let started = Instant::now();
        assert_eq!(run_count(ctx, &sql).await, 1);
        if k >= 5 {
            out.push(started.elapsed());
        }
    }
    let count = ctx
        .sql("SELECT count(*) FROM iceberg.db.small")
        .await
        .expect("count")
        .collect()
        .await
        .expect("count");
    assert_eq!(
        count[0].column(0).as_primitive::<Int64Type>().value(0),
        (n + 5) as i64
    );
    out
}
