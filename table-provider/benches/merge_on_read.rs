//! Merge-on-read: scans of one 5,000,000-row table in three versions that share the same data
//! files — no deletes, 10% of rows removed by position deletes, 1% removed by equality deletes
//! on a bigint key — through Petrel and through `iceberg-datafusion` 0.10.1 (iceberg-rust's own
//! DataFusion integration, same DataFusion 53.1 / arrow 58).
//!
//! Setup (cached under `target/petrel-bench-data/<DATA_VERSION>/`, so reruns skip it) writes:
//!
//! - 5 data files of 1,000,000 rows (row groups of 131,072 rows, snappy), columns
//!   `id bigint` (0..5M, unique), `i int`, `d double`, `s string`, with Iceberg field ids;
//! - one position delete file per data file (every row whose position is a multiple of 10);
//! - one equality delete file on `id` (every id ≡ 50 mod 100: 50,000 keys) whose rows also carry
//!   a wide `s` payload (128 characters);
//! - two equality delete files with 1,000,000 keys each and the same wide payload, for the
//!   memory measurement: dense (id ≡ 1 mod 5) and sparse (1000·j + 1, 5,000 of them ids);
//!
//! then commits, by hand with the `iceberg` crate's manifest writers, five Hadoop-layout tables
//! (`db.nodel`, `db.posdel`, `db.eqdel`, `db.eqmem`, `db.eqsparse`): snapshot 1 appends the data files, the
//! delete tables have a snapshot 2 that adds their delete files.
//!
//! Before timing, every engine's answers are checked against values computed here: `count(*)`
//! must be exactly 5,000,000 / 4,500,000 / 4,950,000 and the sums exact. An engine that fails
//! or answers wrongly on a version is not timed there; the summary says what it did.
//!
//! The memory of equality-delete sets is measured with a `MemoryPool` wrapper that records the
//! peak reservation of the consumer `IcebergEqualityDeletes[...]` while running
//! `SELECT count(*)` on `db.eqmem` (1,000,000 dense deleted keys: a bitset) and `db.eqsparse`
//! (1,000,000 keys spread over 10^9 values: a hash set).
//!
//! Petrel runs twice: as configured by default (its delete-file cache keeps parsed delete files
//! for later queries, so after the first run every query finds them parsed) and with that
//! cache disabled (every query reads and parses its delete files).
//!
//! After criterion's output, a table of medians over a fixed number of interleaved iterations,
//! measured in this same process, gives the ratios.
//!
//! Run: `cargo bench -p petrel-table-provider --bench merge_on_read`

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, Schema, SchemaRef};
use criterion::Criterion;
use datafusion::error::Result as DFResult;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryPool, MemoryReservation, UnboundedMemoryPool,
};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::prelude::{SessionConfig, SessionContext};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, ManifestFile,
    ManifestListWriter, ManifestWriterBuilder, Struct, TableMetadata,
};
use iceberg::table::StaticTable;
use iceberg_datafusion::IcebergStaticTableProvider;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use petrel_table_provider::catalog::Catalog;
use petrel_table_provider::{
    DeleteCache, FileSystemCatalog, IcebergCatalogProvider, ManifestCache, ScanPlanner,
};
use tokio::runtime::Runtime;

mod common;
use common::{d_of, field, i_of, lineitem_batch, lineitem_schema as data_schema};

/// Bump when the generated data changes: the cache directory is keyed by it.
const DATA_VERSION: &str = "mor-v2";
const FILES: i64 = 5;
const ROWS_PER_FILE: i64 = 1_000_000;
const ROWS: i64 = FILES * ROWS_PER_FILE;
const ROW_GROUP_ROWS: usize = 131_072;
/// Position deletes remove rows whose position in their file is a multiple of this (10%).
const POS_EVERY: i64 = 10;
/// Equality deletes remove ids ≡ EQ_REM (mod EQ_MOD): 1%.
const EQ_MOD: i64 = 100;
const EQ_REM: i64 = 50;
/// The memory table's equality deletes remove ids ≡ 1 (mod 5): 1,000,000 keys.
const MEM_MOD: i64 = 5;
const MEM_REM: i64 = 1;
/// The sparse memory table's equality deletes hold the keys j * SPARSE_STEP + 1 for j in
/// 0..1,000,000 (spread over 10^9 values: a hash set, not a bitset); 5,000 of them are ids.
const SPARSE_STEP: i64 = 1000;
const SPARSE_KEYS: i64 = 1_000_000;
/// Characters of the payload string carried by equality delete rows.
const PAYLOAD_CHARS: usize = 128;
/// Interleaved iterations behind each median of the summary table.
const SUMMARY_ITERATIONS: usize = 15;
/// A verification query that takes longer than this is cancelled and its engine not timed on
/// that version.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(90);

const DATA_SNAPSHOT: i64 = 1;
const DELETE_SNAPSHOT: i64 = 2;
const FIELD_ID_FILE_PATH: i32 = 2_147_483_546;
const FIELD_ID_POS: i32 = 2_147_483_545;

/// `sum(id), sum(d)` projects the equality key itself: it separates the cost of applying
/// equality deletes from the cost of decoding a key column the query would not read.
const QUERIES: [(&str, &str); 3] = [
    ("count(*)", "SELECT count(*) FROM {t}"),
    ("sum(i), sum(d)", "SELECT sum(i), sum(d) FROM {t}"),
    ("sum(id), sum(d)", "SELECT sum(id), sum(d) FROM {t}"),
];
/// (table, description, predicate of deleted ids).
const VERSIONS: [(&str, &str); 3] = [
    ("nodel", "no deletes"),
    ("posdel", "10% position deletes"),
    ("eqdel", "1% equality deletes"),
];

fn deleted(table: &str, id: i64) -> bool {
    match table {
        "posdel" => (id % ROWS_PER_FILE) % POS_EVERY == 0,
        "eqdel" => id % EQ_MOD == EQ_REM,
        "eqmem" => id % MEM_MOD == MEM_REM,
        "eqsparse" => id % SPARSE_STEP == 1,
        _ => false,
    }
}

/// Expected (count, sum(i), sum(d), sum(id)) of a table version.
fn expected(table: &str) -> (i64, i64, f64, i64) {
    let (mut count, mut si, mut sd, mut sid) = (0i64, 0i64, 0f64, 0i64);
    for id in 0..ROWS {
        if !deleted(table, id) {
            count += 1;
            si += i64::from(i_of(id));
            sd += d_of(id);
            sid += id;
        }
    }
    (count, si, sd, sid)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A wide, poorly compressible payload string.
fn payload(id: i64) -> String {
    let mut s = String::with_capacity(PAYLOAD_CHARS);
    let mut k = 0u64;
    while s.len() < PAYLOAD_CHARS {
        let _ = write!(s, "{:016x}", splitmix(((id as u64) << 8) | k));
        k += 1;
    }
    s.truncate(PAYLOAD_CHARS);
    s
}

fn write_parquet(path: &Path, schema: SchemaRef, batches: impl Iterator<Item = RecordBatch>) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_compression(Compression::SNAPPY)
        .build();
    let file = std::fs::File::create(path).expect("create parquet file");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("parquet writer");
    for b in batches {
        writer.write(&b).expect("write batch");
    }
    writer.close().expect("close parquet");
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").len()
}

fn url(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// Data file `f`: ids `f * ROWS_PER_FILE ..`.
fn write_data_file(path: &Path, f: i64) {
    let schema = data_schema();
    let batch_rows = 65_536i64;
    let first = f * ROWS_PER_FILE;
    let batches = (0..ROWS_PER_FILE)
        .step_by(batch_rows as usize)
        .map(|start| {
            let end = (start + batch_rows).min(ROWS_PER_FILE);
            lineitem_batch(&schema, first + start..first + end)
        });
    write_parquet(path, Arc::clone(&schema), batches);
}

fn write_position_deletes(path: &Path, data_path: &str) -> u64 {
    let schema = Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, false, FIELD_ID_FILE_PATH),
        field("pos", DataType::Int64, false, FIELD_ID_POS),
    ]));
    let positions: Vec<i64> = (0..ROWS_PER_FILE).step_by(POS_EVERY as usize).collect();
    let n = positions.len();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(StringArray::from(vec![data_path; n])),
            Arc::new(Int64Array::from(positions)),
        ],
    )
    .expect("batch");
    write_parquet(path, schema, std::iter::once(batch));
    n as u64
}

/// Equality deletes on `id` (field 1) with a wide `s` payload (field 4).
fn write_equality_deletes(path: &Path, ids: Vec<i64>) -> u64 {
    let schema = Arc::new(Schema::new(vec![
        field("id", DataType::Int64, false, 1),
        field("s", DataType::Utf8, true, 4),
    ]));
    let n = ids.len();
    let batches: Vec<RecordBatch> = ids
        .chunks(65_536)
        .map(|chunk| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(chunk.to_vec())),
                    Arc::new(StringArray::from(
                        chunk.iter().map(|&id| payload(id)).collect::<Vec<_>>(),
                    )),
                ],
            )
            .expect("batch")
        })
        .collect();
    write_parquet(path, schema, batches.into_iter());
    n as u64
}

fn metadata_json(location: &str, snapshots: &[(i64, String)]) -> serde_json::Value {
    let current = snapshots.last().map(|s| s.0).expect("a snapshot");
    let ts = 1_700_000_000_000i64;
    serde_json::json!({
        "format-version": 2,
        "table-uuid": uuid::Uuid::new_v4().to_string(),
        "location": location,
        "last-sequence-number": snapshots.len(),
        "last-updated-ms": ts + snapshots.len() as i64,
        "last-column-id": 4,
        "current-schema-id": 0,
        "schemas": [{
            "type": "struct",
            "schema-id": 0,
            "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"},
                {"id": 2, "name": "i", "required": false, "type": "int"},
                {"id": 3, "name": "d", "required": false, "type": "double"},
                {"id": 4, "name": "s", "required": false, "type": "string"}
            ]
        }],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": current,
        "refs": {"main": {"snapshot-id": current, "type": "branch"}},
        "snapshots": snapshots.iter().map(|(id, list)| serde_json::json!({
            "snapshot-id": id,
            "parent-snapshot-id": if *id == DATA_SNAPSHOT { None } else { Some(DATA_SNAPSHOT) },
            "sequence-number": id,
            "timestamp-ms": ts + id,
            "manifest-list": list,
            "summary": {"operation": if *id == DATA_SNAPSHOT { "append" } else { "delete" }},
            "schema-id": 0
        })).collect::<Vec<_>>(),
        "snapshot-log": snapshots.iter().map(|(id, _)| serde_json::json!({
            "snapshot-id": id, "timestamp-ms": ts + id
        })).collect::<Vec<_>>(),
        "metadata-log": []
    })
}

async fn write_manifest(
    io: &FileIO,
    path: &str,
    snapshot: i64,
    metadata: &TableMetadata,
    deletes: bool,
    files: Vec<DataFile>,
) -> ManifestFile {
    let output = io.new_output(path).expect("output");
    let builder = ManifestWriterBuilder::new(
        output,
        Some(snapshot),
        Arc::clone(metadata.current_schema()),
        metadata.default_partition_spec().as_ref().clone(),
    );
    let mut writer = if deletes {
        builder.build_v2_deletes()
    } else {
        builder.build_v2_data()
    };
    for f in files {
        writer.add_file(f, snapshot).expect("add file");
    }
    let mut manifest = writer.write_manifest_file().await.expect("write manifest");
    manifest.sequence_number = snapshot;
    manifest.min_sequence_number = snapshot;
    manifest
}

async fn write_manifest_list(io: &FileIO, path: &str, snapshot: i64, manifests: Vec<ManifestFile>) {
    let output = io.new_output(path).expect("output");
    let parent = (snapshot != DATA_SNAPSHOT).then_some(DATA_SNAPSHOT);
    let mut list = ManifestListWriter::v2(
        output.writer().await.expect("writer"),
        snapshot,
        parent,
        snapshot,
    );
    list.add_manifests(manifests.into_iter())
        .expect("add manifests");
    list.close().await.expect("close manifest list");
}

async fn write_table(io: &FileIO, root: &Path, table: &str, snapshots: &[(i64, String)]) {
    let dir = root.join("warehouse/db").join(table);
    let json = metadata_json(&url(&dir), snapshots);
    std::fs::create_dir_all(dir.join("metadata")).expect("mkdir");
    let file = dir.join("metadata/v1.metadata.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&json).expect("json")).expect("write");
    std::fs::write(dir.join("metadata/version-hint.text"), "1").expect("write hint");
    // Check it parses as Iceberg metadata.
    StaticTable::from_metadata_file(
        &url(&file),
        iceberg::TableIdent::from_strs(["db", table]).expect("ident"),
        io.clone(),
    )
    .await
    .expect("metadata reads back");
}

/// Generates the tables (once per DATA_VERSION) and returns the cache root.
fn generate(rt: &Runtime) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let root = target.join("petrel-bench-data").join(DATA_VERSION);
    let done = root.join("COMPLETE");
    if done.exists() {
        eprintln!("merge_on_read: tables cached in {}", root.display());
        return std::fs::canonicalize(&root).expect("canonical root");
    }
    let started = Instant::now();
    let _ = std::fs::remove_dir_all(&root);
    for d in ["data", "deletes", "meta", "warehouse"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    let root = std::fs::canonicalize(&root).expect("canonical root");
    let io = FileIO::new_with_fs();
    // Schema and spec for the manifest writers.
    let template: TableMetadata = serde_json::from_value(metadata_json(
        "file:///x",
        &[(DATA_SNAPSHOT, "file:///x".into())],
    ))
    .expect("metadata");

    let mut data_files = Vec::new();
    let mut pos_files = Vec::new();
    for f in 0..FILES {
        let path = root.join(format!("data/part-{f}.parquet"));
        write_data_file(&path, f);
        let data_url = url(&path);
        let lo = f * ROWS_PER_FILE;
        let hi = lo + ROWS_PER_FILE - 1;
        data_files.push(
            DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(data_url.clone())
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::empty())
                .partition_spec_id(0)
                .record_count(ROWS_PER_FILE as u64)
                .file_size_in_bytes(file_size(&path))
                .lower_bounds(HashMap::from([(1, Datum::long(lo))]))
                .upper_bounds(HashMap::from([(1, Datum::long(hi))]))
                .build()
                .expect("data file"),
        );
        let del = root.join(format!("deletes/pos-{f}.parquet"));
        let n = write_position_deletes(&del, &data_url);
        pos_files.push(
            DataFileBuilder::default()
                .content(DataContentType::PositionDeletes)
                .file_path(url(&del))
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::empty())
                .partition_spec_id(0)
                .record_count(n)
                .file_size_in_bytes(file_size(&del))
                .lower_bounds(HashMap::from([(
                    FIELD_ID_FILE_PATH,
                    Datum::string(&data_url),
                )]))
                .upper_bounds(HashMap::from([(
                    FIELD_ID_FILE_PATH,
                    Datum::string(&data_url),
                )]))
                .build()
                .expect("position delete file"),
        );
    }
    let eq_file = |name: &str, ids: Vec<i64>| {
        let path = root.join(format!("deletes/{name}.parquet"));
        let (lo, hi) = (ids[0], ids[ids.len() - 1]);
        let n = write_equality_deletes(&path, ids);
        DataFileBuilder::default()
            .content(DataContentType::EqualityDeletes)
            .file_path(url(&path))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .partition_spec_id(0)
            .record_count(n)
            .file_size_in_bytes(file_size(&path))
            .equality_ids(Some(vec![1]))
            .lower_bounds(HashMap::from([(1, Datum::long(lo))]))
            .upper_bounds(HashMap::from([(1, Datum::long(hi))]))
            .build()
            .expect("equality delete file")
    };
    let eq = eq_file(
        "eq-1pct",
        (0..ROWS).filter(|id| deleted("eqdel", *id)).collect(),
    );
    let eqmem = eq_file(
        "eq-1m",
        (0..ROWS).filter(|id| deleted("eqmem", *id)).collect(),
    );
    let eqsparse = eq_file(
        "eq-1m-sparse",
        (0..SPARSE_KEYS).map(|j| j * SPARSE_STEP + 1).collect(),
    );

    rt.block_on(async {
        let meta = |name: &str| url(&root.join("meta").join(name));
        let data_manifest = write_manifest(
            &io,
            &meta("data-manifest.avro"),
            DATA_SNAPSHOT,
            &template,
            false,
            data_files,
        )
        .await;
        let data_list = meta("snap-1.avro");
        write_manifest_list(&io, &data_list, DATA_SNAPSHOT, vec![data_manifest.clone()]).await;
        write_table(&io, &root, "nodel", &[(DATA_SNAPSHOT, data_list.clone())]).await;
        for (table, files) in [
            ("posdel", pos_files),
            ("eqdel", vec![eq]),
            ("eqmem", vec![eqmem]),
            ("eqsparse", vec![eqsparse]),
        ] {
            let manifest = write_manifest(
                &io,
                &meta(&format!("{table}-deletes.avro")),
                DELETE_SNAPSHOT,
                &template,
                true,
                files,
            )
            .await;
            let list = meta(&format!("snap-2-{table}.avro"));
            write_manifest_list(
                &io,
                &list,
                DELETE_SNAPSHOT,
                vec![data_manifest.clone(), manifest],
            )
            .await;
            write_table(
                &io,
                &root,
                table,
                &[(DATA_SNAPSHOT, data_list.clone()), (DELETE_SNAPSHOT, list)],
            )
            .await;
        }
    });
    std::fs::write(&done, DATA_VERSION).expect("marker");
    eprintln!(
        "merge_on_read: generated tables in {} ({:.1?})",
        root.display(),
        started.elapsed()
    );
    root
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Engine {
    Petrel,
    /// Petrel with its delete-file cache disabled: every query reads its delete files.
    PetrelCold,
    IcebergRust,
}

const ENGINES: [Engine; 3] = [Engine::Petrel, Engine::PetrelCold, Engine::IcebergRust];

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Petrel => "petrel",
            Engine::PetrelCold => "petrel-no-delete-cache",
            Engine::IcebergRust => "iceberg-datafusion",
        }
    }

    fn table(self, table: &str) -> String {
        match self {
            Engine::Petrel => format!("iceberg.db.{table}"),
            Engine::PetrelCold => format!("cold.db.{table}"),
            Engine::IcebergRust => format!("ib_{table}"),
        }
    }
}

async fn session(root: &Path, pool: Option<Arc<dyn MemoryPool>>) -> SessionContext {
    // DataFusion's defaults: target_partitions = number of cores.
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(pool) = pool {
        runtime = runtime.with_memory_pool(pool);
    }
    let ctx = SessionContext::new_with_config_rt(
        SessionConfig::new(),
        runtime.build_arc().expect("runtime env"),
    );
    let catalog = FileSystemCatalog::new(root.join("warehouse").to_str().expect("utf8"))
        .expect("filesystem catalog");
    let catalog: Arc<dyn Catalog> = Arc::new(catalog);
    ctx.register_catalog(
        "iceberg",
        Arc::new(IcebergCatalogProvider::new(Arc::clone(&catalog))),
    );
    let no_delete_cache = ScanPlanner::with_caches(ManifestCache::default(), DeleteCache::new(0));
    ctx.register_catalog(
        "cold",
        Arc::new(IcebergCatalogProvider::with_planner(
            catalog,
            Arc::new(no_delete_cache),
        )),
    );
    for table in ["nodel", "posdel", "eqdel"] {
        let metadata = root.join(format!("warehouse/db/{table}/metadata/v1.metadata.json"));
        let static_table = StaticTable::from_metadata_file(
            &url(&metadata),
            iceberg::TableIdent::from_strs(["db", table]).expect("ident"),
            FileIO::new_with_fs(),
        )
        .await
        .expect("static table");
        let provider = IcebergStaticTableProvider::try_new_from_table(static_table.into_table())
            .await
            .expect("iceberg-datafusion provider");
        ctx.register_table(format!("ib_{table}"), Arc::new(provider))
            .expect("register");
    }
    ctx
}

async fn run(ctx: &SessionContext, sql: &str) -> DFResult<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

/// The single row of a result, as (count or sum(i), sum(d)).
fn values(batches: &[RecordBatch]) -> Result<(i64, Option<f64>), String> {
    let batch = batches.iter().find(|b| b.num_rows() > 0).ok_or("no rows")?;
    let first = batch.column(0);
    let v0 = first
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| format!("first column is {}", first.data_type()))?
        .value(0);
    let v1 =
        (batch.num_columns() > 1).then(|| batch.column(1).as_primitive::<Float64Type>().value(0));
    Ok((v0, v1))
}

/// `fut`, or None when it has not finished after `limit` (it is then dropped, which cancels
/// the query). A thread is the timer: the workspace's tokio has no `time` feature.
async fn with_timeout<F: std::future::Future>(fut: F, limit: Duration) -> Option<F::Output> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = tx.send(());
    });
    let fut = std::pin::pin!(fut);
    match futures::future::select(fut, rx).await {
        futures::future::Either::Left((out, _)) => Some(out),
        futures::future::Either::Right(_) => None,
    }
}

/// Runs every query of every version once and compares with the expected values.
/// Returns, per (engine, table), None when correct, or what went wrong.
async fn verify(ctx: &SessionContext) -> HashMap<(Engine, &'static str), Option<String>> {
    let mut out = HashMap::new();
    for (table, _) in VERSIONS {
        let (count, si, sd, sid) = expected(table);
        for engine in ENGINES {
            let mut problem = None;
            for (qname, q) in QUERIES {
                let sql = q.replace("{t}", &engine.table(table));
                let started = Instant::now();
                let got = match with_timeout(run(ctx, &sql), VERIFY_TIMEOUT).await {
                    Some(Ok(b)) => values(&b),
                    Some(Err(e)) => Err(format!("error: {e}")),
                    None => Err(format!(
                        "did not finish within {VERIFY_TIMEOUT:?} (cancelled)"
                    )),
                };
                eprintln!(
                    "merge_on_read: verify {} {table} {qname}: {:.1?}",
                    engine.name(),
                    started.elapsed()
                );
                let want = match qname {
                    "count(*)" => (count, None),
                    "sum(id), sum(d)" => (sid, Some(sd)),
                    _ => (si, Some(sd)),
                };
                match got {
                    Ok(v) if v == want => {}
                    Ok(v) => {
                        problem = Some(format!("{qname}: wrong answer {v:?}, expected {want:?}"));
                        break;
                    }
                    Err(e) => {
                        problem = Some(format!("{qname}: {e}"));
                        break;
                    }
                }
            }
            eprintln!(
                "merge_on_read: verify {} {table}: {}",
                engine.name(),
                problem.as_deref().unwrap_or("ok")
            );
            out.insert((engine, table), problem);
        }
    }
    out
}

/// A pool that records, per consumer name, the current and peak reserved bytes.
#[derive(Debug, Default)]
struct PeakPool {
    inner: UnboundedMemoryPool,
    usage: Mutex<HashMap<String, (usize, usize)>>,
}

impl PeakPool {
    fn track(&self, reservation: &MemoryReservation, delta: isize) {
        let mut usage = self.usage.lock().expect("lock");
        let entry = usage
            .entry(reservation.consumer().name().to_string())
            .or_default();
        entry.0 = entry.0.saturating_add_signed(delta);
        entry.1 = entry.1.max(entry.0);
    }

    fn peak_of(&self, prefix: &str) -> usize {
        self.usage
            .lock()
            .expect("lock")
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, (_, peak))| *peak)
            .sum()
    }
}

impl MemoryPool for PeakPool {
    fn register(&self, consumer: &MemoryConsumer) {
        self.inner.register(consumer)
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.inner.unregister(consumer)
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
        self.track(reservation, additional as isize);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
        self.track(reservation, -(shrink as isize));
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> DFResult<()> {
        self.inner.try_grow(reservation, additional)?;
        self.track(reservation, additional as isize);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.inner.reserved()
    }
}

/// The metrics (aggregated by name) of the first node of `plan` that has `name`, as
/// EXPLAIN ANALYZE shows them.
fn find_metrics(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Option<MetricsSet> {
    if let Some(m) = plan.metrics()
        && m.sum_by_name(name).is_some()
    {
        return Some(m.aggregate_by_name());
    }
    plan.children()
        .into_iter()
        .find_map(|c| find_metrics(c, name))
}

/// The metrics of every node from `IcebergScanExec` down, by node name.
fn scan_metrics(plan: &Arc<dyn ExecutionPlan>) -> String {
    fn walk(plan: &Arc<dyn ExecutionPlan>, inside: bool, out: &mut Vec<String>) {
        let inside = inside || plan.name().contains("IcebergScan");
        if inside && let Some(m) = plan.metrics() {
            out.push(format!("{}: {}", plan.name(), m.aggregate_by_name()));
        }
        for c in plan.children() {
            walk(c, inside, out);
        }
    }
    let mut out = Vec::new();
    walk(plan, false, &mut out);
    out.join("; ")
}

struct MemoryReport {
    keys: usize,
    peak: usize,
    count_ok: bool,
    plan_metrics: Vec<(String, String)>,
    delete_file_bytes: u64,
    payload_uncompressed: i64,
}

fn memory_report(rt: &Runtime, root: &Path, table: &str, delete_file: &str) -> MemoryReport {
    let pool = Arc::new(PeakPool::default());
    let (metrics, count) = rt.block_on(async {
        let ctx = session(root, Some(Arc::clone(&pool) as Arc<dyn MemoryPool>)).await;
        // What EXPLAIN ANALYZE runs: execute the physical plan, then read its metrics.
        let plan = ctx
            .sql(&format!("SELECT count(*) FROM iceberg.db.{table}"))
            .await
            .expect("sql")
            .create_physical_plan()
            .await
            .expect("physical plan");
        let batches = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
            .await
            .expect("count");
        let count = values(&batches).expect("count value").0;
        (
            find_metrics(&plan, "equality_delete_keys").expect("scan metrics"),
            count,
        )
    });
    let keys = metrics
        .sum_by_name("equality_delete_keys")
        .map_or(0, |v| v.as_usize());
    let plan_metrics = [
        "equality_delete_keys",
        "rows_deleted_by_equality",
        "delete_files_equality",
        "delete_bytes_read",
        "delete_build_time",
    ]
    .iter()
    .filter_map(|m| {
        metrics
            .sum_by_name(m)
            .map(|v| (m.to_string(), v.to_string()))
    })
    .collect();
    let delete_path = root.join(format!("deletes/{delete_file}.parquet"));
    let reader = parquet::file::reader::SerializedFileReader::new(
        std::fs::File::open(&delete_path).expect("open"),
    )
    .expect("parquet");
    let payload_uncompressed = parquet::file::reader::FileReader::metadata(&reader)
        .row_groups()
        .iter()
        .map(|rg| rg.column(1).uncompressed_size())
        .sum();
    MemoryReport {
        keys,
        peak: pool.peak_of("IcebergEqualityDeletes"),
        count_ok: count == expected(table).0,
        plan_metrics,
        delete_file_bytes: file_size(&delete_path),
        payload_uncompressed,
    }
}

struct Case {
    engine: Engine,
    table: &'static str,
    query: &'static str,
    sql: String,
}

/// Profiling mode (`PETREL_MOR_PROFILE_SQL="SELECT …"`): runs only that query, through Petrel,
/// for 20 s, so that `perf record -p` sees nothing else; prints the median.
fn profile_loop(rt: &Runtime, ctx: &SessionContext, sql: &str) {
    let mut times = Vec::new();
    let started = Instant::now();
    rt.block_on(async {
        while started.elapsed() < Duration::from_secs(20) {
            let t = Instant::now();
            std::hint::black_box(run(ctx, sql).await.expect("query"));
            times.push(t.elapsed());
        }
    });
    times.sort();
    println!(
        "{sql}: median {:.1?} over {} runs",
        times[times.len() / 2],
        times.len()
    );
}

fn main() {
    let rt = Runtime::new().expect("tokio runtime");
    let root = generate(&rt);
    let ctx = rt.block_on(session(&root, None));
    if let Ok(sql) = std::env::var("PETREL_MOR_PROFILE_SQL") {
        profile_loop(&rt, &ctx, &sql);
        return;
    }
    let verified = rt.block_on(verify(&ctx));

    let mut cases = Vec::new();
    for (table, _) in VERSIONS {
        for (qname, q) in QUERIES {
            for engine in ENGINES {
                if verified[&(engine, table)].is_none() {
                    cases.push(Case {
                        engine,
                        table,
                        query: qname,
                        sql: q.replace("{t}", &engine.table(table)),
                    });
                }
            }
        }
    }

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("merge_on_read");
        for case in &cases {
            group.bench_function(
                format!("{}/{}/{}", case.engine.name(), case.table, case.query),
                |b| b.to_async(&rt).iter(|| run(&ctx, &case.sql)),
            );
        }
        group.finish();
    }
    criterion.final_summary();

    // Summary: interleaved rounds, one iteration of every case per round, medians.
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    rt.block_on(async {
        for case in &cases {
            run(&ctx, &case.sql).await.expect("warm-up");
        }
        for _ in 0..SUMMARY_ITERATIONS {
            for (case, s) in cases.iter().zip(samples.iter_mut()) {
                let started = Instant::now();
                let batches = run(&ctx, &case.sql).await.expect("query");
                s.push(started.elapsed());
                std::hint::black_box(batches);
            }
        }
    });
    let median = |engine: Engine, table: &str, query: &str| -> Option<f64> {
        let i = cases
            .iter()
            .position(|c| c.engine == engine && c.table == table && c.query == query)?;
        let mut s = samples[i].clone();
        s.sort();
        Some(s[s.len() / 2].as_secs_f64() * 1e3)
    };
    let memories = [
        (
            "db.eqmem, keys id ≡ 1 mod 5: dense",
            memory_report(&rt, &root, "eqmem", "eq-1m"),
        ),
        (
            "db.eqsparse, keys 1000·j + 1: sparse",
            memory_report(&rt, &root, "eqsparse", "eq-1m-sparse"),
        ),
    ];
    // Where MOR time goes: the scan node's metrics for one run of each MOR version.
    let breakdown: Vec<(String, String)> = rt.block_on(async {
        let mut out = Vec::new();
        for table in ["nodel", "posdel", "eqdel"] {
            let sql = format!("SELECT sum(i), sum(d) FROM iceberg.db.{table}");
            let started = Instant::now();
            let plan = ctx
                .sql(&sql)
                .await
                .expect("sql")
                .create_physical_plan()
                .await
                .expect("plan");
            datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
                .await
                .expect("collect");
            let elapsed = started.elapsed();
            let metrics = scan_metrics(&plan);
            out.push((format!("{table} ({elapsed:.1?})"), metrics));
        }
        out
    });

    let fmt_ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
    let fmt_x = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.2}"));
    println!();
    println!(
        "## Merge-on-read: {} rows, {} data files, medians of {SUMMARY_ITERATIONS} interleaved iterations (ms)",
        ROWS, FILES
    );
    println!();
    println!(
        "| version | query | Petrel | Petrel ÷ no-delete | Petrel, no delete cache | its ÷ no-delete | iceberg-datafusion | iceberg-df ÷ its no-delete | iceberg-df ÷ Petrel | iceberg-df ÷ Petrel no cache |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (table, desc) in VERSIONS {
        for (qname, _) in QUERIES {
            let p = median(Engine::Petrel, table, qname);
            let p0 = median(Engine::Petrel, "nodel", qname);
            let c = median(Engine::PetrelCold, table, qname);
            let c0 = median(Engine::PetrelCold, "nodel", qname);
            let r = median(Engine::IcebergRust, table, qname);
            let r0 = median(Engine::IcebergRust, "nodel", qname);
            let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
            let r_cell = match &verified[&(Engine::IcebergRust, table)] {
                None => fmt_ms(r),
                Some(_) => "failed (see below)".to_string(),
            };
            println!(
                "| {desc} | `{qname}` | {} | {} | {} | {} | {} | {} | {} | {} |",
                fmt_ms(p),
                fmt_x(ratio(p, p0)),
                fmt_ms(c),
                fmt_x(ratio(c, c0)),
                r_cell,
                fmt_x(ratio(r, r0)),
                fmt_x(ratio(r, p)),
                fmt_x(ratio(r, c)),
            );
        }
    }
    println!();
    for ((engine, table), problem) in &verified {
        if let Some(problem) = problem {
            println!("- {} on {table}: {problem}", engine.name());
        }
    }
    println!();
    println!("Scan node metrics, `sum(i), sum(d)` (one run each):");
    for (table, metrics) in &breakdown {
        println!("- {table}: {metrics}");
    }
    println!();
    for (label, memory) in &memories {
        let raw = memory.keys * 8;
        println!(
            "Equality-delete set memory ({label}: {} deleted bigint keys, payload `s` of {PAYLOAD_CHARS} chars per delete row):",
            memory.keys
        );
        println!(
            "- peak reservation of IcebergEqualityDeletes[...]: {} bytes ({:.2} MB) = {:.2}× the raw {:.2} MB of keys; count(*) correct: {}",
            memory.peak,
            memory.peak as f64 / 1e6,
            memory.peak as f64 / raw.max(1) as f64,
            raw as f64 / 1e6,
            memory.count_ok
        );
        println!(
            "- delete file: {} bytes on disk, payload column {} bytes uncompressed",
            memory.delete_file_bytes, memory.payload_uncompressed
        );
        println!(
            "- scan metrics (as EXPLAIN ANALYZE shows them): {}",
            memory
                .plan_metrics
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
