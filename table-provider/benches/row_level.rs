//! Row-level writes: DELETE, UPDATE, upserts and compaction on the lineitem-like table
//! (`benches/common`: 5,000,000 rows, `id bigint, i int, d double, s string`), each against a
//! baseline measured in the same round.
//!
//! Each round, for each mode (`merge-on-read`, `copy-on-write`), a fresh table of a filesystem
//! catalog (format 2, `write.target-file-size-bytes` 8 MiB: about ten files) is filled by
//! `INSERT INTO t SELECT * FROM src` (not timed), then:
//!
//! 1. the plain scan `SELECT count(*), sum(i), sum(d) FROM t` (the read baseline);
//! 2. `DELETE FROM t WHERE id % 10 = 3` (10% of the rows, in every file): time and bytes
//!    written (the table directory's growth), then the scan again (read cost ÷ plain scan);
//! 3. `UPDATE t SET d = d + 1 WHERE id % 100 = 7` (1%): time and bytes, then the scan;
//! 4. `CALL iceberg.system.rewrite_data_files(table => 'db.t', options => map('rewrite-all',
//!    'true'))`, then the scan (goal ≤ 1.05 × the plain scan).
//!
//! Upserts: two tables with the same 5M rows, one plain and one with `PRIMARY KEY (id)` and
//! `write.upsert.enabled=true`; the same batch of 100,000 rows, half of them existing keys, is
//! appended to the first and upserted into the second (goal: upsert throughput ≥ 0.5 × the
//! append's), and the upserted table is scanned (read cost of its equality deletes).
//!
//! Every scan's result is checked against the values computed from the row formulas. A step
//! this build cannot run (an unknown procedure, a table property it ignores) is reported as
//! skipped, not measured.
//!
//! Run: `cargo bench -p petrel-table-provider --bench row_level`. Environment:
//! `PETREL_BENCH_ROWS` (5,000,000), `PETREL_BENCH_ROUNDS` (3). Scratch files go to
//! `target/petrel-bench-data/row-level-<pid>/` and are removed at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use datafusion::common::Result as DFResult;
use datafusion::dataframe::DataFrame;
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use petrel_table_provider::catalog::Catalog;
use petrel_table_provider::statements::plan_statement;
use petrel_table_provider::{
    FileSystemCatalog, IcebergCatalogProvider, NestedValuesTypes, PetrelQueryPlanner, RowLevelDml,
};

mod common;
use common::timing::{Sample, env_usize, median, timed};
use common::{d_of, i_of, lineitem_batch, lineitem_batches, lineitem_schema};

const BATCH_ROWS: i64 = 8_192;
const PARTITIONS: usize = 2;
/// The upsert batch: this many rows, half of them keys already in the table.
const UPSERT_ROWS: i64 = 100_000;

/// A session over `catalog` (as `iceberg`) planning Petrel's row-level writes and statements.
fn session(catalog: Arc<dyn Catalog>) -> SessionContext {
    let config = SessionConfig::new()
        .with_target_partitions(PARTITIONS)
        .with_batch_size(BATCH_ROWS as usize);
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_optimizer_rule(Arc::new(NestedValuesTypes::new()))
        .with_analyzer_rule(Arc::new(RowLevelDml::new()))
        .with_query_planner(Arc::new(PetrelQueryPlanner))
        .build();
    let ctx = SessionContext::new_with_state(state);
    ctx.register_catalog("iceberg", Arc::new(IcebergCatalogProvider::new(catalog)));
    ctx
}

/// Runs `sql` (Petrel's own statements included).
async fn exec(ctx: &SessionContext, sql: &str) -> DFResult<Vec<RecordBatch>> {
    let state = ctx.state();
    if let Some(plan) = plan_statement(&state, sql).await? {
        return DataFrame::new(state, plan).collect().await;
    }
    ctx.sql(sql).await?.collect().await
}

async fn must(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    exec(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// count(*), sum(i), sum(d) of a table.
type Sums = (i64, i64, f64);

async fn scan(ctx: &SessionContext, table: &str) -> Sums {
    let sql = format!("SELECT count(*), sum(i), sum(d) FROM iceberg.db.{table}");
    let batches = must(ctx, &sql).await;
    let b = &batches[0];
    (
        b.column(0).as_primitive::<Int64Type>().value(0),
        b.column(1).as_primitive::<Int64Type>().value(0),
        b.column(2).as_primitive::<Float64Type>().value(0),
    )
}

/// The sums of the rows `ids` that `keep` keeps, with `d` raised by `bump(id)`.
fn model(
    ids: impl Iterator<Item = i64>,
    keep: impl Fn(i64) -> bool,
    bump: impl Fn(i64) -> f64,
) -> Sums {
    let mut out = (0, 0, 0.0);
    for id in ids.filter(|&id| keep(id)) {
        out.0 += 1;
        out.1 += i64::from(i_of(id));
        out.2 += d_of(id) + bump(id);
    }
    out
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                total += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
    total
}

fn count_data_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.join("data")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                n += 1;
            }
        }
    }
    n
}

/// What one case measured in one round.
#[derive(Debug, Clone, Copy)]
struct Measured {
    sample: Sample,
    bytes: u64,
}

#[derive(Default)]
struct Results {
    cases: BTreeMap<String, Vec<Measured>>,
    skipped: BTreeMap<String, String>,
}

impl Results {
    fn add(&mut self, case: &str, sample: Sample, bytes: u64) {
        self.cases
            .entry(case.to_string())
            .or_default()
            .push(Measured { sample, bytes });
    }

    fn wall(&self, case: &str) -> Option<Duration> {
        let v = self.cases.get(case)?;
        Some(median(v.iter().map(|m| m.sample.wall).collect()))
    }

    fn cpu(&self, case: &str) -> Option<Duration> {
        let v = self.cases.get(case)?;
        Some(median(v.iter().map(|m| m.sample.cpu).collect()))
    }

    fn bytes(&self, case: &str) -> Option<u64> {
        let v = self.cases.get(case)?;
        let mut b: Vec<u64> = v.iter().map(|m| m.bytes).collect();
        b.sort_unstable();
        b.get(b.len() / 2).copied()
    }

    /// The median over rounds of `a ÷ b` within each round.
    fn ratio(&self, a: &str, b: &str) -> Option<f64> {
        let (a, b) = (self.cases.get(a)?, self.cases.get(b)?);
        let mut r: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| x.sample.wall.as_secs_f64() / y.sample.wall.as_secs_f64())
            .collect();
        r.sort_by(f64::total_cmp);
        r.get(r.len() / 2).copied()
    }
}

fn main() {
    let rows = env_usize("PETREL_BENCH_ROWS", 5_000_000) as i64;
    let rounds = env_usize("PETREL_BENCH_ROUNDS", 3).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(rows, rounds));
}

async fn run(rows: i64, rounds: usize) {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let root = target
        .join("petrel-bench-data")
        .join(format!("row-level-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let warehouse = root.join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("scratch dir");
    let warehouse = std::fs::canonicalize(&warehouse).expect("canonical warehouse");
    let catalog: Arc<dyn Catalog> = Arc::new(
        FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("fs catalog"),
    );
    let ctx = session(catalog);
    must(&ctx, "CREATE SCHEMA iceberg.db").await;

    let schema = lineitem_schema();
    let mut partitions = vec![Vec::new(); PARTITIONS];
    for (i, b) in lineitem_batches(&schema, rows, BATCH_ROWS)
        .into_iter()
        .enumerate()
    {
        partitions[i % PARTITIONS].push(b);
    }
    let source = MemTable::try_new(Arc::clone(&schema), partitions).expect("source");
    ctx.register_table("src", Arc::new(source)).expect("src");
    let upsert_ids = (rows - UPSERT_ROWS / 2)..(rows + UPSERT_ROWS / 2);
    let batch = MemTable::try_new(
        Arc::clone(&schema),
        vec![vec![lineitem_batch(&schema, upsert_ids.clone())]],
    )
    .expect("upsert batch");
    ctx.register_table("batch", Arc::new(batch)).expect("batch");

    println!(
        "row-level writes: {rows} rows × 4 columns, {rounds} rounds, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let plain = model(0..rows, |_| true, |_| 0.0);
    let deleted = model(0..rows, |id| id % 10 != 3, |_| 0.0);
    let updated = model(
        0..rows,
        |id| id % 10 != 3,
        |id| if id % 100 == 7 { 1.0 } else { 0.0 },
    );
    let mut results = Results::default();
    for round in 0..rounds {
        for (mode, short) in [("merge-on-read", "mor"), ("copy-on-write", "cow")] {
            let table = format!("{short}_{round}");
            must(
                &ctx,
                &format!(
                    "CREATE TABLE iceberg.db.{table} (id BIGINT NOT NULL, i INT, d DOUBLE, \
                     s STRING) TBLPROPERTIES ('write.delete.mode'='{mode}', \
                     'write.update.mode'='{mode}', 'write.target-file-size-bytes'='8388608')"
                ),
            )
            .await;
            must(
                &ctx,
                &format!("INSERT INTO iceberg.db.{table} SELECT * FROM src"),
            )
            .await;
            let dir = warehouse.join("db").join(&table);
            if round == 0 {
                println!("  {table}: {} data files", count_data_files(&dir));
            }
            let (sums, s) = timed(scan(&ctx, &table)).await;
            assert_eq!(sums, plain, "{table}: plain scan");
            results.add(&format!("{short}: plain scan"), s, 0);

            let before = dir_bytes(&dir);
            let (_, s) = timed(must(
                &ctx,
                &format!("DELETE FROM iceberg.db.{table} WHERE id % 10 = 3"),
            ))
            .await;
            results.add(&format!("{short}: DELETE 10%"), s, dir_bytes(&dir) - before);
            let (sums, s) = timed(scan(&ctx, &table)).await;
            assert_eq!(sums, deleted, "{table}: after DELETE");
            results.add(&format!("{short}: scan after DELETE"), s, 0);

            let before = dir_bytes(&dir);
            let (_, s) = timed(must(
                &ctx,
                &format!("UPDATE iceberg.db.{table} SET d = d + 1 WHERE id % 100 = 7"),
            ))
            .await;
            results.add(&format!("{short}: UPDATE 1%"), s, dir_bytes(&dir) - before);
            let (sums, s) = timed(scan(&ctx, &table)).await;
            assert_eq!(sums, updated, "{table}: after UPDATE");
            results.add(&format!("{short}: scan after UPDATE"), s, 0);

            // rewrite-all: with Spark's defaults, files near the target size whose deletes remove
            // under 30% of their rows are left as they are (and so are their deletes).
            let call = format!(
                "CALL iceberg.system.rewrite_data_files(table => 'db.{table}', \
                 options => map('rewrite-all', 'true'))"
            );
            let (rewritten, s) = timed(exec(&ctx, &call)).await;
            match rewritten {
                Ok(_) => {
                    results.add(&format!("{short}: rewrite_data_files"), s, 0);
                    let (sums, s) = timed(scan(&ctx, &table)).await;
                    assert_eq!(sums, updated, "{table}: after rewrite_data_files");
                    results.add(&format!("{short}: scan after rewrite"), s, 0);
                }
                Err(e) => {
                    results
                        .skipped
                        .insert("rewrite_data_files".into(), e.to_string());
                }
            }
            must(&ctx, &format!("DROP TABLE iceberg.db.{table} PURGE")).await;
        }

        // Upsert against a plain append of the same batch.
        let append = format!("append_{round}");
        let upsert = format!("upsert_{round}");
        must(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{append} (id BIGINT NOT NULL, i INT, d DOUBLE, s STRING) \
                 TBLPROPERTIES ('write.target-file-size-bytes'='8388608')"
            ),
        )
        .await;
        must(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{upsert} (id BIGINT NOT NULL, i INT, d DOUBLE, s STRING, \
                 PRIMARY KEY (id)) TBLPROPERTIES ('write.upsert.enabled'='true', \
                 'write.target-file-size-bytes'='8388608')"
            ),
        )
        .await;
        for t in [&append, &upsert] {
            must(
                &ctx,
                &format!("INSERT INTO iceberg.db.{t} SELECT * FROM src"),
            )
            .await;
        }
        let (scan_sums, s) = timed(scan(&ctx, &append)).await;
        assert_eq!(scan_sums, plain, "{append}: plain scan");
        results.add("upsert: plain scan", s, 0);
        let (_, s) = timed(must(
            &ctx,
            &format!("INSERT INTO iceberg.db.{append} SELECT * FROM batch"),
        ))
        .await;
        results.add("upsert: append of the batch", s, 0);
        let (_, s) = timed(must(
            &ctx,
            &format!("INSERT INTO iceberg.db.{upsert} SELECT * FROM batch"),
        ))
        .await;
        let upserted = model(0..(rows + UPSERT_ROWS / 2), |_| true, |_| 0.0);
        let (sums, scan_sample) = timed(scan(&ctx, &upsert)).await;
        if sums == upserted {
            results.add("upsert: upsert of the batch", s, 0);
            results.add("upsert: scan after upsert", scan_sample, 0);
        } else {
            results.skipped.insert(
                "upsert".into(),
                format!(
                    "the table kept {} rows, not {}: upserts not applied",
                    sums.0, upserted.0
                ),
            );
        }
        for t in [&append, &upsert] {
            must(&ctx, &format!("DROP TABLE iceberg.db.{t} PURGE")).await;
        }
    }

    println!(
        "\n{:<34} {:>10} {:>10} {:>12}",
        "case (median of rounds)", "wall", "cpu", "bytes"
    );
    for case in results.cases.keys() {
        println!(
            "{case:<34} {:>10.1?} {:>10.1?} {:>12}",
            results.wall(case).unwrap_or_default(),
            results.cpu(case).unwrap_or_default(),
            results.bytes(case).unwrap_or_default()
        );
    }
    println!("\nratios (median of the per-round ratios of wall times):");
    let ratio = |label: &str, a: &str, b: &str, goal: &str| {
        if let Some(r) = results.ratio(a, b) {
            println!("  {label:<52} {r:>6.2}×  {goal}");
        }
    };
    ratio(
        "DELETE 10%: copy-on-write ÷ merge-on-read",
        "cow: DELETE 10%",
        "mor: DELETE 10%",
        "",
    );
    for short in ["mor", "cow"] {
        ratio(
            &format!("{short}: scan after DELETE ÷ plain scan"),
            &format!("{short}: scan after DELETE"),
            &format!("{short}: plain scan"),
            "",
        );
        ratio(
            &format!("{short}: scan after UPDATE ÷ plain scan"),
            &format!("{short}: scan after UPDATE"),
            &format!("{short}: plain scan"),
            "",
        );
        ratio(
            &format!("{short}: scan after rewrite_data_files ÷ plain scan"),
            &format!("{short}: scan after rewrite"),
            &format!("{short}: plain scan"),
            "(goal ≤ 1.05)",
        );
    }
    ratio(
        "upsert throughput ÷ append throughput",
        "upsert: append of the batch",
        "upsert: upsert of the batch",
        "(goal ≥ 0.5)",
    );
    ratio(
        "scan after upsert ÷ plain scan",
        "upsert: scan after upsert",
        "upsert: plain scan",
        "",
    );
    if let (Some(mor), Some(cow)) = (
        results.bytes("mor: DELETE 10%"),
        results.bytes("cow: DELETE 10%"),
    ) {
        println!(
            "  DELETE 10% bytes written: merge-on-read {:.1} MiB, copy-on-write {:.1} MiB",
            mor as f64 / 1048576.0,
            cow as f64 / 1048576.0
        );
    }
    for (what, why) in &results.skipped {
        println!("skipped {what}: {why}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
