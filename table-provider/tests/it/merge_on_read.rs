//! Merge-on-read cases the fixture corpus lacks, on v2 tables whose data files PyIceberg wrote
//! and whose delete files `tests/pyiceberg/gen_deletes.py` wrote and committed itself (generated
//! per run into a temporary directory, SQLite SQL catalog `petrel_mor`). The expected rows come
//! from that script's own model of the Iceberg delete rules (cross-checked against PyIceberg
//! where PyIceberg can read the snapshot), never from Petrel:
//!
//! - equality deletes with NULL keys (null equals null), two-column string keys with nulls,
//!   position and equality deletes on the same data file, 50 small equality delete files,
//!   a position delete file covering 5 data files, partition-scoped and global equality
//!   deletes across a partition evolution, keys re-inserted after their delete, equality
//!   delete files whose column metrics show they cannot match some data files (skipped there);
//! - projections without the key columns, filters, `count(*)`, `LIMIT`, and every snapshot
//!   (time travel: only the deletes committed by then apply);
//! - delete files that are corrupt or missing (the query fails naming the file);
//! - the delete metrics of `EXPLAIN ANALYZE`;
//! - a memory limit too small for the equality-delete sets (ResourcesExhausted).
//!
//! Needs the project's Python environment: `scripts/setup-python.sh` (PETREL_PYTHON overrides).

use crate::common;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use common::{Generated, assert_result, find_scan, query, rows_json, run_plan, session};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::prelude::{SessionConfig, SessionContext};
use petrel_table_provider::{IcebergCatalogProvider, SqlCatalog};
use serde_json::Value;

fn generated() -> &'static Generated {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    GENERATED.get_or_init(|| common::generated("pyiceberg-deletes"))
}

fn catalog(g: &Generated) -> Arc<SqlCatalog> {
    let name = g.expected["catalog_name"].as_str().expect("catalog_name");
    assert_eq!(name, "petrel_mor");
    Arc::new(SqlCatalog::open_sqlite(g.root.join("catalog.db"), name).expect("sql catalog"))
}

fn ctx(g: &Generated) -> SessionContext {
    session(vec![("mor", catalog(g))])
}

fn table<'a>(g: &'a Generated, name: &str) -> &'a Value {
    g.expected["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name} in expected.json"))
}

/// The readable tables (not the ones with broken delete files).
fn readable(g: &Generated) -> impl Iterator<Item = &Value> {
    g.expected["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .filter(|t| t.get("error_delete_file").is_none())
}

fn name(t: &Value) -> &str {
    t["name"].as_str().expect("name")
}

async fn explain_analyze(ctx: &SessionContext, sql: &str) -> String {
    let rows = query(ctx, &format!("EXPLAIN ANALYZE {sql}"))
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN ANALYZE {sql}: {e}"));
    arrow::util::pretty::pretty_format_batches(&rows)
        .expect("fmt")
        .to_string()
}

/// The metrics of the scan node after running `sql` to completion.
async fn executed_scan_metrics(ctx: &SessionContext, sql: &str) -> MetricsSet {
    let (plan, _) = run_plan(ctx, sql).await;
    find_scan(&plan)
        .and_then(|scan| scan.metrics())
        .unwrap_or_else(|| panic!("no scan metrics in {sql}"))
}

/// The value of metric `name` (`name=<digits>`) in an EXPLAIN ANALYZE text.
fn metric(text: &str, name: &str) -> Option<u64> {
    let needle = format!("{name}=");
    let at = text.find(&needle)? + needle.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_query_returns_the_independently_computed_rows() {
    let g = generated();
    let ctx = ctx(g);
    let mut compared = 0;
    for t in readable(g) {
        let name = name(t);
        let full = format!("mor.db.{name}");
        for q in t["queries"].as_array().expect("queries") {
            let sql = q["sql"].as_str().expect("sql").replace("{t}", &full);
            let batches = query(&ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert_result(&sql, &batches, &q["result"]);
            compared += 1;
        }
    }
    eprintln!("merge-on-read: {compared} results matched");
    assert!(compared >= 30, "only {compared} results compared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snapshot_applies_only_the_deletes_committed_by_then() {
    let g = generated();
    let ctx = ctx(g);
    let mut compared = 0;
    for t in readable(g) {
        let name = name(t);
        for s in t["snapshots"].as_array().expect("snapshots") {
            let id = s["snapshot_id"].as_i64().expect("snapshot_id");
            let sql = format!("SELECT * FROM mor.db.{name} FOR VERSION AS OF {id}");
            let batches = query(&ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            let what = format!("{name} at sequence number {}", s["sequence_number"]);
            assert_result(&what, &batches, &s["result"]);
            compared += 1;
        }
    }
    assert!(compared >= 70, "only {compared} snapshots compared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_returns_only_live_rows() {
    let g = generated();
    let ctx = ctx(g);
    for t in readable(g) {
        let name = name(t);
        let current = &t["current"];
        let limit = t["limit"].as_u64().expect("limit") as usize;
        let types: Vec<String> = current["types"]
            .as_array()
            .expect("types")
            .iter()
            .map(|v| v.as_str().expect("type").to_string())
            .collect();
        let live: Vec<String> = current["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(Value::to_string)
            .collect();
        for sql in [
            format!("SELECT * FROM mor.db.{name} LIMIT {limit}"),
            format!("SELECT * FROM mor.db.{name} LIMIT 1"),
        ] {
            let batches = query(&ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            let rows = rows_json(&batches, &types);
            let want = if sql.ends_with("LIMIT 1") { 1 } else { limit };
            assert_eq!(
                rows.len(),
                want.min(current["count"].as_u64().expect("count") as usize),
                "{sql}"
            );
            let mut pool = live.clone();
            for row in rows {
                let text = Value::Array(row).to_string();
                let at = pool
                    .iter()
                    .position(|r| *r == text)
                    .unwrap_or_else(|| panic!("{sql} returned a deleted or unknown row {text}"));
                pool.swap_remove(at);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_delete_files_fail_the_query_naming_the_file() {
    let g = generated();
    let ctx = ctx(g);
    for name in ["corrupt_delete", "missing_delete"] {
        let t = table(g, name);
        let path = t["error_delete_file"].as_str().expect("error_delete_file");
        assert!(
            !Path::new(path).exists() || name == "corrupt_delete",
            "{path} should be gone"
        );
        for sql in [
            format!("SELECT * FROM mor.db.{name}"),
            format!("SELECT payload FROM mor.db.{name}"),
            // (`count(*)` may be answered from the manifests without reading the delete file:
            // `metadata_answers`; counting a column reads it.)
            format!("SELECT count(payload) FROM mor.db.{name}"),
            format!("SELECT * FROM mor.db.{name} LIMIT 3"),
            format!("SELECT * FROM mor.db.{name} WHERE id > 0"),
        ] {
            match query(&ctx, &sql).await {
                Ok(batches) => panic!(
                    "{sql}: succeeded with {} rows despite the broken delete file {path}",
                    batches.iter().map(|b| b.num_rows()).sum::<usize>()
                ),
                Err(e) => {
                    let message = e.to_string();
                    assert!(
                        message.contains(path),
                        "{sql}: error does not name {path}: {message}"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_counts_the_deleted_rows_and_delete_files() {
    let g = generated();
    let ctx = ctx(g);
    for t in readable(g) {
        let name = name(t);
        let m = &t["metrics"];
        let sql = format!("SELECT * FROM mor.db.{name}");
        let metrics = executed_scan_metrics(&ctx, &sql).await;
        for key in [
            "rows_deleted_by_position",
            "rows_deleted_by_equality",
            "delete_files_position",
            "delete_files_equality",
            "equality_deletes_pruned",
        ] {
            let want = m[key].as_u64().expect("metric") as usize;
            // A scan left with no deletes at all (every one skipped by its metrics) has no
            // merge-on-read metrics: none counted is zero.
            let absent_is_zero = name == "eq_bounds_disjoint" && key != "equality_deletes_pruned";
            let got = metrics.sum_by_name(key).map(|v| v.as_usize());
            assert_eq!(
                if absent_is_zero { got.or(Some(0)) } else { got },
                Some(want),
                "{name}: {key} should be {want}: {metrics}"
            );
        }
    }
    // The named cases, spelt out.
    let text = explain_analyze(&ctx, "SELECT * FROM mor.db.eq_nulls").await;
    assert!(text.contains("rows_deleted_by_equality=7"), "{text}");
    assert!(text.contains("delete_files_equality=1"), "{text}");
    let text = explain_analyze(&ctx, "SELECT * FROM mor.db.pos_many_files").await;
    assert!(text.contains("rows_deleted_by_position=30"), "{text}");
    let text = explain_analyze(&ctx, "SELECT count(*) FROM mor.db.eq_and_pos_same_file").await;
    assert_eq!(metric(&text, "rows_deleted_by_position"), Some(5), "{text}");
    assert_eq!(metric(&text, "rows_deleted_by_equality"), Some(3), "{text}");
    let text = explain_analyze(&ctx, "SELECT payload FROM mor.db.many_small_deletes").await;
    assert_eq!(metric(&text, "delete_files_equality"), Some(50), "{text}");
    assert_eq!(
        metric(&text, "rows_deleted_by_equality"),
        Some(176),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equality_deletes_whose_metrics_miss_a_data_file_are_not_applied_to_it() {
    let g = generated();
    let ctx = ctx(g);
    // eq_bounds: 8 equality delete files over the 4 data files before them; by their bounds and
    // null counts,
    // 18 of the 26 (data file, delete file) pairs the spec's rules pair cannot match, and 2
    // delete files (only nulls; a key above every payload) match no data file at all.
    let sql = "SELECT * FROM mor.db.eq_bounds";
    let text = explain_analyze(&ctx, sql).await;
    assert_eq!(metric(&text, "equality_deletes_pruned"), Some(18), "{text}");
    assert_eq!(metric(&text, "delete_files_equality"), Some(6), "{text}");
    assert_eq!(metric(&text, "rows_deleted_by_equality"), Some(9), "{text}");
    assert_result(
        sql,
        &query(&ctx, sql).await.expect(sql),
        &table(g, "eq_bounds")["current"],
    );
    // Without `id` in the query, the scan adds it for the files with deletes on it; the data
    // file written after every delete file is read without it. In fresh sessions: once the
    // positions of every file are cached, a scan adds no key column at all.
    let payloads = table(g, "eq_bounds")["queries"]
        .as_array()
        .expect("queries")
        .iter()
        .find(|q| q["sql"] == "SELECT payload FROM {t}")
        .map(|q| q["result"].clone())
        .expect("the payload query");
    for sql in [
        // Unfiltered: the files with deletes record their positions.
        "SELECT payload FROM mor.db.eq_bounds",
        // Filtered: they are probed batch by batch.
        "SELECT payload FROM mor.db.eq_bounds WHERE payload <> 'none'",
    ] {
        let fresh = self::ctx(g);
        let (plan, batches) = run_plan(&fresh, sql).await;
        assert_result(sql, &batches, &payloads);
        let metrics = find_scan(&plan)
            .and_then(|scan| scan.metrics())
            .expect("scan metrics");
        let value = |name: &str| metrics.sum_by_name(name).map(|v| v.as_usize());
        assert_eq!(
            value("files_read_without_equality_keys"),
            Some(1),
            "{sql}: {metrics}"
        );
        assert_eq!(
            value("rows_deleted_by_equality"),
            Some(9),
            "{sql}: {metrics}"
        );
    }

    // eq_bounds_disjoint: the one delete file's keys lie outside both data files' ranges, so no
    // data file has deletes left: no set is built, and count(*) comes from the manifests.
    let sql = "SELECT * FROM mor.db.eq_bounds_disjoint";
    let metrics = executed_scan_metrics(&ctx, sql).await;
    let value = |name: &str| metrics.sum_by_name(name).map(|v| v.as_usize());
    assert_eq!(value("equality_deletes_pruned"), Some(2), "{metrics}");
    assert_eq!(value("delete_files_equality").unwrap_or(0), 0, "{metrics}");
    assert_eq!(value("equality_delete_keys").unwrap_or(0), 0, "{metrics}");
    let sql = "SELECT count(*) AS n FROM mor.db.eq_bounds_disjoint";
    let (plan, batches) = run_plan(&ctx, sql).await;
    assert!(
        find_scan(&plan).is_none(),
        "count(*) should be answered from the manifests"
    );
    let want =
        serde_json::json!({"columns": ["n"], "types": ["long"], "count": 1, "rows": [[200]]});
    assert_result(sql, &batches, &want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_too_small_for_equality_deletes_is_resources_exhausted() {
    let g = generated();
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(1024, 1.0)
        .build_arc()
        .expect("runtime");
    let config = SessionConfig::new().with_target_partitions(4);
    let limited = SessionContext::new_with_config_rt(config, runtime);
    limited.register_catalog("mor", Arc::new(IcebergCatalogProvider::new(catalog(g))));
    let sql = "SELECT * FROM mor.db.many_small_deletes";
    let err = query(&limited, sql)
        .await
        .expect_err("50 equality-delete sets cannot fit in 1 KiB");
    let message = err.to_string();
    assert!(
        matches!(err.find_root(), DataFusionError::ResourcesExhausted(_)),
        "not ResourcesExhausted: {err:?}"
    );
    assert!(
        message.contains("many_small_deletes"),
        "error does not name the table: {message}"
    );
    // The same query on a normal context is fine, and so is the limited context after.
    let batches = query(&ctx(g), sql).await.expect("unlimited query");
    assert_result(sql, &batches, &table(g, "many_small_deletes")["current"]);
    let small = query(&limited, "SELECT * FROM mor.db.pos_many_files")
        .await
        .expect("position deletes take no set memory");
    assert_result(
        "pos_many_files under the limit",
        &small,
        &table(g, "pos_many_files")["current"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_file_with_position_deletes_prunes_row_groups_by_statistics() {
    let g = generated();
    let ctx = ctx(g);
    let sql = "SELECT id FROM mor.db.pos_row_groups WHERE id >= 31000";
    let (plan, batches) = run_plan(&ctx, sql).await;
    let scan = find_scan(&plan).expect("scan");
    let child = scan.children()[0];
    let config = child
        .as_any()
        .downcast_ref::<DataSourceExec>()
        .and_then(|e| e.data_source().as_any().downcast_ref::<FileScanConfig>())
        .expect("parquet scan");
    let ranged = config
        .file_groups
        .iter()
        .flat_map(|g| g.files())
        .filter(|f| f.range.is_some())
        .count();
    assert!(
        ranged >= 2,
        "the 8-row-group file should be planned as several tasks: {:?}",
        config.file_groups
    );
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    // ids 31000..39999 minus every 7th position and position 39999; plus the 10 late rows.
    let want = (31_000..40_000)
        .filter(|p| p % 7 != 0 && *p != 39_999)
        .count()
        + 10;
    assert_eq!(rows, want);
    // Only row groups 6 and 7 (ids 30000..39999) of the file with deletes are decoded, and the
    // untouched file.
    let decoded = child
        .metrics()
        .and_then(|m| m.output_rows())
        .expect("output_rows");
    assert_eq!(decoded, 10_000 + 10, "rows the Parquet reader emitted");
    let metrics = scan.metrics().expect("metrics");
    let removed = metrics
        .sum_by_name("rows_deleted_by_position")
        .map(|v| v.as_usize());
    // Deleted rows of the two decoded row groups (the filter removes ids 30000..30999 after).
    let deleted_decoded = (30_000..40_000)
        .filter(|p| p % 7 == 0 || *p == 39_999)
        .count();
    assert_eq!(removed, Some(deleted_decoded));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parsed_delete_files_are_reused_by_later_queries() {
    let g = generated();
    let ctx = ctx(g);
    for (name, kind) in [
        ("pos_row_groups", "delete_files_position"),
        ("eq_nulls", "delete_files_equality"),
    ] {
        let t = table(g, name);
        let sql = format!("SELECT * FROM mor.db.{name}");
        let value = |m: &MetricsSet, key: &str| m.sum_by_name(key).map_or(0, |v| v.as_usize());
        let first = executed_scan_metrics(&ctx, &sql).await;
        let files = t["metrics"][kind].as_u64().expect("files") as usize;
        assert_eq!(value(&first, kind), files, "{name}: {first}");
        assert_eq!(value(&first, "delete_files_cached"), 0, "{name}: {first}");
        assert!(value(&first, "delete_bytes_read") > 0, "{name}: {first}");
        let second = executed_scan_metrics(&ctx, &sql).await;
        assert_eq!(value(&second, kind), files, "{name}: {second}");
        assert_eq!(
            value(&second, "delete_files_cached"),
            files,
            "{name}: {second}"
        );
        assert_eq!(value(&second, "delete_bytes_read"), 0, "{name}: {second}");
        // And the rows are still exact.
        let batches = query(&ctx, &sql).await.expect("query");
        assert_result(&sql, &batches, &t["current"]);
    }
}
