//! Metadata tables and change feeds on a 10,000-file table, against planning a full scan of it,
//! in the same run; and the latency from a commit to a live `table_changes` stream receiving it.
//!
//! Table: the planning benchmark's (`benches/common/many_files.rs`: 10,000 data files in 100
//! manifests, one per `part` value, identity-partitioned), then one `INSERT` of `APPEND_ROWS`
//! rows into one partition: a 1-file append (one new manifest, one real Parquet file; the
//! 10,000 original files exist only in metadata).
//!
//! Timed, each as the median of `PETREL_BENCH_ITERATIONS` (20) runs, cold (the planner's
//! manifest cache emptied before each run, not timed: manifests are re-read and re-parsed, the
//! files are in the OS page cache) and warm (after one untimed run):
//!
//! - `full plan`: `ScanPlanner::plan` of the whole table (every manifest, 10,001 files): the
//!   baseline, as the issue names it ("reading the whole table's manifests");
//! - `files count`: `SELECT count(*) FROM iceberg.db.t.files` (SQL, through DataFusion);
//! - `files part=42`: `SELECT count(*) FROM iceberg.db.t.files WHERE partition.part = 42`
//!   (partition summaries prune the other 99 data manifests);
//! - `changes plan`: `ScanPlanner::plan_changes` of the last snapshot (the 1-file append);
//! - `changes query`: `SELECT count(*) FROM table_changes('iceberg.db.t', <parent>, <last>)`
//!   (SQL: the table loaded, the snapshot's changes planned, its one Parquet file read).
//!
//! Each row's ratio is `full plan ÷ it` (same temperature). The SQL rows include what a query
//! costs besides planning (parsing, loading the table's metadata file, DataFusion's planning);
//! `full plan` does not (the table is loaded once, untimed), so the ratios are conservative.
//! Goal (the issue's): a 1-file append's change feed ≥ 20× cheaper than a full plan.
//!
//! Stream latency: a `table_changes('iceberg.db.t', <current>, NULL, true, 100)` stream (100 ms
//! poll interval) is read by a task; `PETREL_BENCH_COMMITS` (100) single-row `INSERT`s follow
//! one after the other, each after the previous one was received plus a pseudo-random pause of
//! 0–99 ms (so commits fall anywhere in the poll cycle). Latency: from the INSERT returning
//! (the commit done) to the reader task receiving the row. p50 / p99 / max printed.
//!
//! Setup asserts every answer (file counts, change rows, manifests read) before timing.
//!
//! Run: `cargo bench -p petrel-table-provider --bench metadata_changes`

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array};
use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result as DFResult;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use petrel_table_provider::changes::TableChangesFunction;
use petrel_table_provider::plan::Predicate;
use petrel_table_provider::{
    Catalog, FileSystemCatalog, IcebergCatalogProvider, LoadedTable, ManifestCache, Namespace,
    NestedValuesTypes, PetrelQueryPlanner, RowLevelDml, ScanPlanner, ScanRequest, SnapshotSelector,
    TableIdent, rewrite_time_travel,
};
use tokio::runtime::Runtime;

mod common;
use common::many_files::{FILES, FILES_PER_MANIFEST, MANIFESTS};
use common::timing::{env_usize, median, percentile};

/// Rows of the appended file.
const APPEND_ROWS: i64 = 1_000;
/// The partition the append writes to.
const APPEND_PART: i32 = 7;
/// The partition the filtered files query reads.
const PART: i32 = 42;
/// Keys of the appended and streamed rows start here (above every original file's keys).
const NEW_KEYS: i64 = 100_000_000;

/// A session over `catalog` (as `iceberg`) planning with `planner`, with `table_changes`.
fn session(catalog: Arc<dyn Catalog>, planner: Arc<ScanPlanner>) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(2);
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_optimizer_rule(Arc::new(NestedValuesTypes::new()))
        .with_analyzer_rule(Arc::new(RowLevelDml::new()))
        .with_query_planner(Arc::new(PetrelQueryPlanner))
        .build();
    let ctx = SessionContext::new_with_state(state);
    ctx.register_catalog(
        "iceberg",
        Arc::new(IcebergCatalogProvider::with_planner(catalog, planner)),
    );
    let changes = TableChangesFunction::new(Arc::clone(ctx.state().catalog_list()));
    ctx.register_udtf("table_changes", Arc::new(changes));
    ctx
}

async fn run(ctx: &SessionContext, sql: &str) -> DFResult<Vec<RecordBatch>> {
    let sql = rewrite_time_travel(sql)?;
    ctx.sql(&sql).await?.collect().await
}

/// The single `bigint` of a `SELECT count(*)`.
async fn count(ctx: &SessionContext, sql: &str) -> i64 {
    let batches = run(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let column = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("count is a bigint");
    column.value(0)
}

struct Fixture {
    _dir: tempfile::TempDir,
    catalog: Arc<dyn Catalog>,
    planner: Arc<ScanPlanner>,
    ctx: SessionContext,
    ident: TableIdent,
    /// The table after the append.
    table: LoadedTable,
    parent: i64,
    last: i64,
}

impl Fixture {
    async fn build() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse = dir.path().to_str().expect("utf-8 tempdir").to_string();
        common::many_files::write_table(&warehouse).await;
        let catalog: Arc<dyn Catalog> =
            Arc::new(FileSystemCatalog::new(&warehouse).expect("catalog"));
        let planner = Arc::new(ScanPlanner::new(ManifestCache::default()));
        let ctx = session(Arc::clone(&catalog), Arc::clone(&planner));
        let ident = TableIdent::new(Namespace::from_dotted("db"), "t");
        let before = catalog.load_table(&ident).await.expect("load table");
        let parent = before.metadata().current_snapshot_id().expect("a snapshot");
        let insert = format!(
            "INSERT INTO iceberg.db.t SELECT {NEW_KEYS} + value, {APPEND_PART}, 'appended' \
             FROM generate_series(0, {}) ORDER BY 1",
            APPEND_ROWS - 1
        );
        run(&ctx, &insert).await.expect("append");
        let table = catalog.load_table(&ident).await.expect("load table");
        let last = table.metadata().current_snapshot_id().expect("a snapshot");
        assert_ne!(parent, last, "the append made a snapshot");
        Self {
            _dir: dir,
            catalog,
            planner,
            ctx,
            ident,
            table,
            parent,
            last,
        }
    }

    fn changes_sql(&self) -> String {
        format!(
            "SELECT count(*) FROM table_changes('iceberg.db.t', {}, {})",
            self.parent, self.last
        )
    }

    async fn full_plan(&self) -> usize {
        let request = ScanRequest {
            selector: SnapshotSelector::Current,
            filter: Predicate::True,
            limit: None,
            target_partitions: 8,
        };
        let plan = self
            .planner
            .plan(&self.table, &request)
            .await
            .expect("full plan");
        plan.metrics.files_selected
    }

    async fn changes_plan(&self) -> (usize, usize) {
        let snapshot = self
            .table
            .metadata()
            .snapshot_by_id(self.last)
            .expect("last snapshot");
        let schema = Arc::clone(self.table.metadata().current_schema());
        let plan = self
            .planner
            .plan_changes(&self.table, snapshot, &schema, &Predicate::True, 8)
            .await
            .expect("plan changes");
        assert!(
            plan.before.partitions.is_empty(),
            "an append removes nothing"
        );
        (plan.after.metrics.files_selected, plan.manifests_read)
    }
}

/// What is timed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    FullPlan,
    FilesCount,
    FilesPart,
    ChangesPlan,
    ChangesQuery,
}

impl Case {
    const ALL: [Case; 5] = [
        Case::FullPlan,
        Case::FilesCount,
        Case::FilesPart,
        Case::ChangesPlan,
        Case::ChangesQuery,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::FullPlan => "full plan (baseline)",
            Case::FilesCount => "t.files count(*)",
            Case::FilesPart => "t.files part=42 count(*)",
            Case::ChangesPlan => "table_changes plan",
            Case::ChangesQuery => "table_changes query",
        }
    }

    async fn once(self, f: &Fixture) {
        match self {
            Case::FullPlan => {
                std::hint::black_box(f.full_plan().await);
            }
            Case::FilesCount => {
                std::hint::black_box(
                    count(&f.ctx, "SELECT count(*) FROM iceberg.db.t.files").await,
                );
            }
            Case::FilesPart => {
                std::hint::black_box(
                    count(
                        &f.ctx,
                        &format!(
                            "SELECT count(*) FROM iceberg.db.t.files WHERE partition.part = {PART}"
                        ),
                    )
                    .await,
                );
            }
            Case::ChangesPlan => {
                std::hint::black_box(f.changes_plan().await);
            }
            Case::ChangesQuery => {
                std::hint::black_box(count(&f.ctx, &f.changes_sql()).await);
            }
        }
    }

    /// Median of `iterations` runs, cold or warm.
    async fn median(self, f: &Fixture, cold: bool, iterations: usize) -> Duration {
        if !cold {
            self.once(f).await;
        }
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            if cold {
                f.planner.cache().clear();
            }
            let started = Instant::now();
            self.once(f).await;
            samples.push(started.elapsed());
        }
        median(samples)
    }
}

/// Every answer, before anything is timed.
async fn check(f: &Fixture) {
    assert_eq!(f.full_plan().await, FILES as usize + 1, "full plan");
    let files = count(&f.ctx, "SELECT count(*) FROM iceberg.db.t.files").await;
    assert_eq!(files, FILES + 1, "t.files");
    let part = count(
        &f.ctx,
        &format!("SELECT count(*) FROM iceberg.db.t.files WHERE partition.part = {PART}"),
    )
    .await;
    assert_eq!(part, FILES_PER_MANIFEST, "t.files part = {PART}");
    let (files_added, manifests_read) = f.changes_plan().await;
    assert_eq!(files_added, 1, "the append added one file");
    assert_eq!(
        manifests_read, 1,
        "planning the changes of a 1-file append must read exactly the one manifest the \
         append added, not {manifests_read} (of {MANIFESTS} + 1)"
    );
    let changes = count(&f.ctx, &f.changes_sql()).await;
    assert_eq!(changes, APPEND_ROWS, "table_changes rows");
    println!(
        "checked: full plan {} files ({MANIFESTS} + 1 manifests); t.files {files} rows; \
         part={PART}: {part}; the append's changes: {files_added} file, {manifests_read} \
         manifest(s) read, {changes} rows",
        FILES + 1
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(rt: &Runtime, f: &Fixture, iterations: usize) {
    let mut medians = Vec::new();
    for case in Case::ALL {
        let cold = rt.block_on(case.median(f, true, iterations));
        let warm = rt.block_on(case.median(f, false, iterations));
        medians.push((case, cold, warm));
    }
    let (_, base_cold, base_warm) = medians[0];
    println!();
    println!(
        "Metadata tables and change feeds, {FILES} + 1 data files in {MANIFESTS} + 1 manifests; \
         median of {iterations} runs (ms); ratio = full plan / case"
    );
    println!("| case                     | cold ms | ratio cold | warm ms | ratio warm |");
    println!("|--------------------------|--------:|-----------:|--------:|-----------:|");
    for (case, cold, warm) in medians {
        println!(
            "| {:<24} | {:>7.3} | {:>9.1}x | {:>7.3} | {:>9.1}x |",
            case.name(),
            ms(cold),
            base_cold.as_secs_f64() / cold.as_secs_f64(),
            ms(warm),
            base_warm.as_secs_f64() / warm.as_secs_f64(),
        );
    }
    println!("goal: table_changes over a 1-file append >= 20x cheaper than a full plan");
}

/// Commit-to-receive latency of a live stream with a 100 ms poll interval.
async fn stream_latency(f: &Fixture, commits: usize) {
    let reader_ctx = session(Arc::clone(&f.catalog), Arc::clone(&f.planner));
    let start = f
        .catalog
        .load_table(&f.ident)
        .await
        .expect("load")
        .metadata()
        .current_snapshot_id()
        .expect("snapshot");
    let sql = format!("SELECT key FROM table_changes('iceberg.db.t', {start}, NULL, true, 100)");
    let plan = reader_ctx
        .sql(&sql)
        .await
        .expect("stream query")
        .create_physical_plan()
        .await
        .expect("stream plan");
    let mut stream = execute_stream(plan, reader_ctx.task_ctx()).expect("stream");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(i64, Instant)>();
    let reader = tokio::spawn(async move {
        while let Some(batch) = stream.next().await {
            let received = Instant::now();
            let batch = batch.expect("stream batch");
            let keys = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("key is a bigint");
            for i in 0..keys.len() {
                if tx.send((keys.value(i), received)).is_err() {
                    return;
                }
            }
        }
    });

    let mut latencies = Vec::with_capacity(commits);
    let mut pause_seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for n in 0..commits {
        pause_seed = pause_seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pause = Duration::from_millis((pause_seed >> 33) % 100);
        tokio::time::sleep(pause).await;
        let key = NEW_KEYS + APPEND_ROWS + n as i64;
        run(
            &f.ctx,
            &format!("INSERT INTO iceberg.db.t VALUES ({key}, {APPEND_PART}, 'streamed')"),
        )
        .await
        .expect("insert");
        let committed = Instant::now();
        let (got, received) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("the stream delivers the commit within 30 s")
            .expect("the stream is open");
        assert_eq!(got, key, "the stream delivers commits in order, once");
        latencies.push(received.saturating_duration_since(committed));
    }
    reader.abort();
    latencies.sort();
    println!();
    println!(
        "Live stream, 100 ms poll interval, {commits} single-row commits: commit -> received \
         p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, min {:.1} ms",
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().expect("samples")),
        ms(latencies[0]),
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let iterations = env_usize("PETREL_BENCH_ITERATIONS", 20);
    let commits = env_usize("PETREL_BENCH_COMMITS", 100);
    let fixture = rt.block_on(Fixture::build());
    rt.block_on(check(&fixture));
    summary(&rt, &fixture, iterations);
    rt.block_on(stream_latency(&fixture, commits));
}
