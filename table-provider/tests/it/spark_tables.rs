//! Petrel's own Spark-written tables (`scripts/corpus/petrel_tables.py`, the `spark-tables`
//! dataset of `scripts/test-data.sh`), each compared with what Spark computed:
//!
//! - `enc_v2` / `enc_v3`: identity and truncate partitions whose values hold `%`, `+`, space,
//!   `/`, `=`, `#`, `?` and non-ASCII characters, so Spark wrote percent-encoded directory names
//!   (`country=a%2Fb%3Dc+d%25`, `country=%E6%97%A5%E6%9C%AC`) into the metadata, the position
//!   delete files and the deletion vectors. They are read where Spark wrote them (a directory
//!   whose name holds a space and a `%`) and from a moved copy.
//! - `nan_*`: the same float rows (NaN, ±0.0, ±infinity, NULL) written by Spark, the Iceberg
//!   Java API, PyIceberg and pyarrow (page indexes, imported by `add_files`), with 150 seeded
//!   predicates whose counts Spark computed over an in-memory copy of the rows (Spark's own
//!   Iceberg scan gets some of them wrong).

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{check_corpus, corpus_tables, dataset, query, run_plan, session, single_i64};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::prelude::SessionContext;
use petrel_table_provider::FileSystemCatalog;
use serde_json::Value;

/// The two copies of the dataset: where Spark wrote it, and moved.
fn copies() -> [(&'static str, PathBuf); 2] {
    let root = dataset("spark-tables");
    [
        ("where written", root.join("origin 50%")),
        ("moved", root.join("moved")),
    ]
}

fn context(dir: &Path) -> SessionContext {
    let warehouse = dir.join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog");
    session(vec![("iceberg", Arc::new(catalog))])
}

fn metric(metrics: &MetricsSet, name: &str) -> usize {
    metrics.sum_by_name(name).map_or(0, |v| v.as_usize())
}

/// Runs `sql` (one count) through a scan and returns it with the Iceberg scan's metrics (the
/// session without `AggregateStatistics`, which would answer a count from the manifests).
async fn count_with_metrics(ctx: &SessionContext, sql: &str) -> (i64, MetricsSet) {
    let rules = ctx
        .state()
        .physical_optimizers()
        .iter()
        .filter(|r| r.name() != "aggregate_statistics")
        .cloned()
        .collect();
    let state = datafusion::execution::SessionStateBuilder::new_from_existing(ctx.state())
        .with_physical_optimizer_rules(rules)
        .build();
    let ctx = &SessionContext::new_with_state(state);
    let (plan, batches) = run_plan(ctx, sql).await;
    let metrics = common::find_scan(&plan)
        .and_then(datafusion::physical_plan::ExecutionPlan::metrics)
        .unwrap_or_else(|| panic!("no scan metrics in {sql}"));
    (single_i64(&batches), metrics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_matches_spark_where_written_and_moved() {
    for (copy, dir) in copies() {
        let ctx = context(&dir);
        let (compared, merged) = check_corpus(&ctx, &dir).await;
        let expected: usize = corpus_tables(&dir)
            .iter()
            .map(|(name, e)| common::corpus_cases(name, e).len())
            .sum();
        eprintln!(
            "spark tables ({copy}): {compared} results matched Spark, {merged} merged deletes"
        );
        assert_eq!(compared, expected, "{copy}");
        assert!(
            compared >= 150 && merged >= 80,
            "{copy}: {compared} / {merged}"
        );
    }
}

/// Each percent-encoded partition is read alone, finds its data files, and applies its delete
/// files: the rows deleted per partition add up to what the whole table deletes, which is its
/// data files' rows (the snapshot summary's `total-records`) minus Spark's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_encoded_partition_applies_its_deletes() {
    for (copy, dir) in copies() {
        let ctx = context(&dir);
        for (table, expected) in corpus_tables(&dir) {
            if !table.starts_with("enc_") {
                continue;
            }
            let current = expected["snapshots"]
                .as_array()
                .expect("snapshots")
                .last()
                .expect("a snapshot");
            let total_records: i64 = current["summary"]["total-records"]
                .as_str()
                .expect("total-records")
                .parse()
                .expect("number");
            let live = expected["current"]["count"].as_i64().expect("count");
            let data_files = expected["data_files"].as_u64().expect("data_files") as usize;
            let (count, metrics) =
                count_with_metrics(&ctx, &format!("SELECT count(*) FROM iceberg.db.{table}")).await;
            assert_eq!(count, live, "{copy} {table}");
            let deleted_in_table = metric(&metrics, "rows_deleted_by_position");
            assert_eq!(
                deleted_in_table as i64,
                total_records - live,
                "{copy} {table}"
            );

            let mut partitions = 0;
            let mut deleted_in_partitions = 0;
            for q in expected["queries"].as_array().expect("queries") {
                let sql = q["sql"].as_str().expect("sql");
                let Some((_, condition)) = sql.split_once(" WHERE ") else {
                    continue;
                };
                // `country = '<one value>'` or `country IS NULL`, nothing else.
                let is_one_country = condition == "country IS NULL"
                    || condition
                        .strip_prefix("country = '")
                        .and_then(|rest| rest.strip_suffix('\''))
                        .is_some_and(|value| !value.contains('\''));
                if !is_one_country {
                    continue;
                }
                let sql = format!("SELECT count(*) FROM iceberg.db.{table} WHERE {condition}");
                let (count, metrics) = count_with_metrics(&ctx, &sql).await;
                let what = format!("{copy} {table}: {condition}");
                assert_eq!(
                    count,
                    q["result"]["count"].as_i64().expect("count"),
                    "{what}"
                );
                let delete_files =
                    metric(&metrics, "delete_files_position") + metric(&metrics, "delete_files_dv");
                let deleted = metric(&metrics, "rows_deleted_by_position");
                assert!(
                    delete_files > 0 && deleted > 0,
                    "{what}: no delete applied: {metrics}"
                );
                let files = metric(&metrics, "files_scanned");
                assert!(
                    files > 0 && files < data_files,
                    "{what}: {files} of {data_files} files"
                );
                partitions += 1;
                deleted_in_partitions += deleted;
            }
            // Every value Spark wrote, special or plain, was read alone ('' and 'null' and NULL
            // share Spark's `country=null` directory).
            assert!(partitions >= 14, "{copy} {table}: {partitions} partitions");
            assert_eq!(
                deleted_in_partitions, deleted_in_table,
                "{copy} {table}: the partitions' deleted rows add up to the table's"
            );
        }
    }
}

/// 150 seeded float predicates (`=`, `<>`, `<`, `<=`, `>`, `>=`, IN, NOT IN, BETWEEN, NOT,
/// IS [NOT] NULL, isnan, AND/OR) with NaN, ±0.0, ±infinity, huge and ordinary literals, over the
/// same rows written by four writers: Petrel's count equals Spark's on every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn float_predicates_match_spark_on_every_writer() {
    let (_, dir) = &copies()[1];
    let ctx = context(dir);
    let mut checked = 0;
    let mut spark_iceberg_wrong = 0;
    let mut mismatches = Vec::new();
    for entry in std::fs::read_dir(dir.join("differential")).expect("differential/") {
        let path = entry.expect("entry").path();
        let oracle: Value = serde_json::from_slice(&std::fs::read(&path).expect("read"))
            .expect("differential json");
        let table = oracle["table"].as_str().expect("table");
        for p in oracle["predicates"].as_array().expect("predicates") {
            let predicate = p["sql_where"].as_str().expect("sql_where");
            // Spark's isnan(NULL) is false, DataFusion's is NULL: where that matters the oracle
            // also recorded the count with DataFusion's NULL.
            let want = p
                .get("count_if_isnan_null_is_null")
                .unwrap_or(&p["count"])
                .as_i64()
                .expect("count");
            let sql = format!("SELECT count(*) FROM iceberg.db.{table} WHERE {predicate}");
            let got = single_i64(
                &query(&ctx, &sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}")),
            );
            if got != want {
                mismatches.push(format!(
                    "{table}: WHERE {predicate}: Petrel {got}, Spark {want}"
                ));
            }
            spark_iceberg_wrong += usize::from(p["iceberg_count"] != p["count"]);
            checked += 1;
        }
    }
    eprintln!(
        "differential: {checked} predicates, {} mismatches; Spark's own Iceberg scan got {spark_iceberg_wrong} wrong",
        mismatches.len()
    );
    assert_eq!(checked, 600, "4 writers × 150 predicates");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// NaN-safety costs no pruning where Iceberg's metrics know there is no NaN: Spark and the
/// Java API record NaN counts, so `= NaN` skips the files without NaN; PyIceberg records none,
/// so its files are kept unless every value is null. Every writer finds the same NaN rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_known_to_hold_no_nan_still_prune() {
    let (_, dir) = &copies()[1];
    let ctx = context(dir);
    let mut counts = Vec::new();
    for (table, knows_nan_counts) in [
        ("nan_spark", true),
        ("nan_java", true),
        ("nan_pyiceberg", false),
        ("nan_pyarrow", false),
    ] {
        let sql =
            format!("SELECT count(*) FROM iceberg.db.{table} WHERE f = CAST('NaN' AS DOUBLE)");
        let (count, metrics) = count_with_metrics(&ctx, &sql).await;
        let (pruned, scanned) = (
            metric(&metrics, "files_pruned_by_metrics"),
            metric(&metrics, "files_scanned"),
        );
        eprintln!("{table}: {count} NaN rows; {pruned} files pruned, {scanned} scanned");
        if knows_nan_counts {
            assert!(
                pruned >= scanned,
                "{table}: files without NaN are skipped: {metrics}"
            );
        } else {
            assert!(
                scanned > pruned,
                "{table}: files are kept without NaN counts: {metrics}"
            );
        }
        counts.push(count);
    }
    assert!(
        counts[0] > 0 && counts.iter().all(|c| *c == counts[0]),
        "{counts:?}"
    );
}
