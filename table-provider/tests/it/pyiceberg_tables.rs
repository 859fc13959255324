//! Tables written by PyIceberg (generated per run by `tests/pyiceberg/gen_tables.py` into a
//! temporary directory, with a SQLite SQL catalog) read through both Petrel catalogs and
//! compared with PyIceberg's own `scan().to_arrow()`: every Iceberg type, every partition
//! transform, partition and schema evolution, files without field ids (name mapping),
//! branches, tags and timestamps. Then pruning: every transform under many predicates gives
//! the rows of an unpruned scan, and the plan metrics show files really skipped.
//!
//! Needs the project's Python environment: `scripts/setup-python.sh` (PETREL_PYTHON overrides).

use crate::common;

use std::sync::{Arc, OnceLock};

use common::{
    Generated, assert_result, find_scan, plan_metrics, query, rows_json, run_plan, session,
    single_i64,
};
use datafusion::datasource::MemTable;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use petrel_table_provider::{FileSystemCatalog, LeafProjection, SqlCatalog};
use serde_json::Value;

fn generated() -> &'static Generated {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    GENERATED.get_or_init(|| common::generated("pyiceberg-tables"))
}

fn ctx(g: &Generated) -> SessionContext {
    let catalog_name = g.expected["catalog_name"].as_str().expect("catalog_name");
    let sql =
        SqlCatalog::open_sqlite(g.root.join("catalog.db"), catalog_name).expect("sql catalog");
    let fs = FileSystemCatalog::new(g.root.join("warehouse").to_str().expect("utf8"))
        .expect("fs catalog");
    session(vec![("pyi", Arc::new(sql)), ("fs", Arc::new(fs))])
}

fn tables(g: &Generated) -> &Vec<Value> {
    g.expected["tables"].as_array().expect("tables")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyiceberg_tables_match_pyiceberg_at_every_snapshot_and_ref() {
    let g = generated();
    let ctx = ctx(g);
    let mut compared = 0;
    for t in tables(g) {
        let name = t["name"].as_str().expect("name");
        for catalog in ["pyi", "fs"] {
            let batches = query(&ctx, &format!("SELECT * FROM {catalog}.db.{name}"))
                .await
                .unwrap_or_else(|e| panic!("{catalog}.db.{name}: {e}"));
            assert_result(
                &format!("{catalog}.db.{name} current"),
                &batches,
                &t["current"],
            );
            compared += 1;
        }
        let snapshots = t["snapshots"].as_array().expect("snapshots");
        // Snapshots on main's lineage are in the snapshot log: timestamps find them.
        let mut lineage = Vec::new();
        let mut cursor = t["refs"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == "main"))
            .and_then(|r| r["snapshot_id"].as_i64());
        while let Some(id) = cursor {
            lineage.push(id);
            cursor = snapshots
                .iter()
                .find(|s| s["snapshot_id"].as_i64() == Some(id))
                .and_then(|s| s["parent_id"].as_i64());
        }
        for s in snapshots {
            let id = s["snapshot_id"].as_i64().expect("id");
            let batches = query(
                &ctx,
                &format!("SELECT * FROM pyi.db.{name} FOR VERSION AS OF {id}"),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}@{id}: {e}"));
            assert_result(&format!("{name} snapshot {id}"), &batches, &s["result"]);
            compared += 1;
            if lineage.contains(&id) {
                let ms = s["timestamp_ms"].as_i64().expect("timestamp_ms");
                let ts = chrono::DateTime::from_timestamp_millis(ms).expect("ms");
                let literal = ts.format("%Y-%m-%d %H:%M:%S%.3f");
                let batches = query(
                    &ctx,
                    &format!(
                        "SELECT * FROM pyi.db.{name} FOR TIMESTAMP AS OF TIMESTAMP '{literal}'"
                    ),
                )
                .await
                .unwrap_or_else(|e| panic!("{name} as of {literal}: {e}"));
                assert_result(&format!("{name} as of {literal}"), &batches, &s["result"]);
                compared += 1;
            }
        }
        for r in t["refs"].as_array().expect("refs") {
            let ref_name = r["name"].as_str().expect("ref name");
            let batches = query(
                &ctx,
                &format!("SELECT * FROM pyi.db.{name} VERSION AS OF '{ref_name}'"),
            )
            .await
            .unwrap_or_else(|e| panic!("{name} ref {ref_name}: {e}"));
            assert_result(&format!("{name} ref {ref_name}"), &batches, &r["result"]);
            compared += 1;
        }
    }
    eprintln!("pyiceberg: {compared} results matched");
    assert!(compared > 80, "only {compared} results compared");
}

/// Predicates by source column of the `part_*` tables (see gen_tables.py's PART_SCHEMA).
const PREDICATES: &[&str] = &[
    "id = 17",
    "id IN (3, 50, 99)",
    "id < 30",
    "id >= 100",
    "id BETWEEN 40 AND 45",
    "id <> 5",
    "NOT (id > 10)",
    "cat = 'b'",
    "cat IN ('a', 'd')",
    "cat IS NULL",
    "cat IS NOT NULL",
    "cat LIKE 'c%'",
    "cat > 'b'",
    "num = 7",
    "num < 0",
    "num >= 200",
    "num BETWEEN -20 AND 20",
    "name = 'banana_2'",
    "name LIKE 'ban%'",
    "name LIKE 'blueb%'",
    "name < 'b'",
    "d = DATE '1965-03-01'",
    "d < DATE '1970-01-01'",
    "d >= DATE '1990-01-01'",
    "d IS NULL",
    "ts < TIMESTAMP '1970-01-01 00:00:00'",
    "ts >= TIMESTAMP '1970-01-20 00:00:00'",
    "ts = TIMESTAMP '1969-12-31 22:00:00'",
    "ts > TIMESTAMP '1970-01-05 03:00:00'",
    "tstz < TIMESTAMP '1970-01-01T00:00:00Z'",
    "tstz > TIMESTAMP '1970-01-15T00:00:00Z'",
    "tstz IS NULL",
    "id = 17 OR cat = 'a'",
    "amount > 30.0",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transform_prunes_without_changing_results() {
    let g = generated();
    let ctx = ctx(g);
    let mut pruned_somewhere = 0;
    for t in tables(g) {
        let name = t["name"].as_str().expect("name");
        if !name.starts_with("part_") {
            continue;
        }
        // The unpruned rows, as a plain in-memory table.
        let all = query(&ctx, &format!("SELECT * FROM pyi.db.{name}"))
            .await
            .expect("full scan");
        let schema = all[0].schema();
        let mem = MemTable::try_new(schema, vec![all]).expect("memtable");
        ctx.register_table(format!("mem_{name}"), Arc::new(mem))
            .expect("register");
        for predicate in PREDICATES {
            let petrel = format!("SELECT * FROM pyi.db.{name} WHERE {predicate} ORDER BY name, id");
            let plain = format!("SELECT * FROM mem_{name} WHERE {predicate} ORDER BY name, id");
            let got = query(&ctx, &petrel)
                .await
                .unwrap_or_else(|e| panic!("{petrel}: {e}"));
            let want = query(&ctx, &plain).await.expect("memtable query");
            let fmt = |b: &[arrow::array::RecordBatch]| {
                arrow::util::pretty::pretty_format_batches(b)
                    .expect("fmt")
                    .to_string()
            };
            let (got, want) = (fmt(&got), fmt(&want));
            assert!(
                got == want,
                "{name} WHERE {predicate}:\n{}\n---- unpruned:\n{}",
                &got[..got.len().min(3000)],
                &want[..want.len().min(3000)]
            );
            let m = plan_metrics(&ctx, &petrel).await;
            assert_eq!(
                m.files_selected + m.files_pruned_by_partition + m.files_pruned_by_metrics,
                m.data_files_seen,
                "{name} WHERE {predicate}: {m:?}"
            );
            if m.files_pruned_by_partition > 0 || m.manifests_pruned > 0 {
                pruned_somewhere += 1;
            }
        }
    }
    assert!(
        pruned_somewhere >= 30,
        "partition pruning fired for only {pruned_somewhere} queries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_partition_value_scans_exactly_its_files() {
    let g = generated();
    let ctx = ctx(g);
    // part_identity: 3 appends × 5 partitions (a, b, c, d, null) = 15 files.
    let m = plan_metrics(&ctx, "SELECT * FROM pyi.db.part_identity WHERE cat = 'b'").await;
    assert_eq!(
        (m.files_selected, m.files_pruned_by_partition),
        (3, 12),
        "{m:?}"
    );
    let m = plan_metrics(&ctx, "SELECT * FROM pyi.db.part_identity WHERE cat IS NULL").await;
    assert_eq!(
        (m.files_selected, m.files_pruned_by_partition),
        (3, 12),
        "{m:?}"
    );
    // Identity-partition filters are exact: no FilterExec above the scan.
    let plan = ctx
        .sql("EXPLAIN SELECT id FROM pyi.db.part_identity WHERE cat = 'b'")
        .await
        .expect("explain")
        .collect()
        .await
        .expect("explain rows");
    let text = arrow::util::pretty::pretty_format_batches(&plan)
        .expect("fmt")
        .to_string();
    assert!(!text.contains("FilterExec"), "{text}");
    assert!(text.contains("IcebergScanExec"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_range_on_sorted_files_skips_the_others_by_metrics() {
    let g = generated();
    let ctx = ctx(g);
    // metrics_sorted: 10 files with disjoint id ranges k*1000..k*1000+99.
    let sql = "SELECT count(*) AS n FROM pyi.db.metrics_sorted WHERE id BETWEEN 3000 AND 3050";
    let m = plan_metrics(&ctx, sql).await;
    assert_eq!(
        (m.files_selected, m.files_pruned_by_metrics),
        (1, 9),
        "{m:?}"
    );
    let batches = query(&ctx, sql).await.expect("query");
    let n = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .expect("count")
        .value(0);
    assert_eq!(n, 51);
    let m = plan_metrics(
        &ctx,
        "SELECT * FROM pyi.db.metrics_sorted WHERE name >= 'name_09000'",
    )
    .await;
    assert_eq!(
        (m.files_selected, m.files_pruned_by_metrics),
        (1, 9),
        "{m:?}"
    );
    // EXPLAIN ANALYZE shows the counts.
    let rows = ctx
        .sql(&format!("EXPLAIN ANALYZE {sql}"))
        .await
        .expect("explain analyze")
        .collect()
        .await
        .expect("rows");
    let text = arrow::util::pretty::pretty_format_batches(&rows)
        .expect("fmt")
        .to_string();
    for needle in [
        "IcebergScanExec",
        "files_pruned_by_metrics=9",
        "snapshot=",
        "row_groups_pruned_statistics",
        "bytes_scanned",
    ] {
        assert!(
            text.contains(needle),
            "EXPLAIN ANALYZE lacks {needle}:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_without_filter_stops_planning_early() {
    let g = generated();
    let ctx = ctx(g);
    let m = plan_metrics(&ctx, "SELECT * FROM pyi.db.metrics_sorted LIMIT 10").await;
    assert!(m.stopped_by_limit, "{m:?}");
    assert_eq!(m.files_selected, 1, "{m:?}");
    let batches = query(&ctx, "SELECT * FROM pyi.db.metrics_sorted LIMIT 10")
        .await
        .expect("query");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
}

/// Runs `sql` and returns the plan's Petrel scan's leaf projection and its Parquet scan's
/// `bytes_scanned`, with the rows.
async fn run_scan(
    ctx: &SessionContext,
    sql: &str,
) -> (
    Option<LeafProjection>,
    usize,
    Vec<arrow::array::RecordBatch>,
) {
    let (plan, batches) = run_plan(ctx, sql).await;
    let scan = find_scan(&plan).expect("scan");
    let bytes = scan.children()[0]
        .metrics()
        .and_then(|m| m.sum_by_name("bytes_scanned"))
        .map_or(0, |v| v.as_usize());
    (scan.leaf_projection().cloned(), bytes, batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn struct_fields_are_read_without_the_rest_of_the_struct() {
    let g = generated();
    let ctx = ctx(g);
    let t = tables(g)
        .iter()
        .find(|t| t["name"] == "struct_wide")
        .expect("struct_wide");
    // PyIceberg's rows, projected here: id, s.alpha, s.inner.x, s.late.
    let current = &t["current"];
    assert_eq!(current["columns"], serde_json::json!(["id", "s"]));
    let mut expected: Vec<Vec<Value>> = current["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let s = &row[1];
            let field = |v: &Value, name: &str| v.get(name).cloned().unwrap_or(Value::Null);
            vec![
                row[0].clone(),
                field(s, "alpha"),
                field(&field(s, "inner"), "x"),
                field(s, "late"),
            ]
        })
        .collect();
    expected.sort_by_key(|r| r[0].as_i64());
    assert_eq!(expected.len(), 3010);

    for catalog in ["pyi", "fs"] {
        let sql = format!(
            "SELECT id, s.alpha, s['inner']['x'], s.late FROM {catalog}.db.struct_wide ORDER BY id"
        );
        let (leaves, _, batches) = run_scan(&ctx, &sql).await;
        assert!(leaves.is_some(), "{sql}: struct s not narrowed");
        let types: Vec<String> = ["long", "long", "int", "long"].map(String::from).into();
        assert_eq!(rows_json(&batches, &types), expected, "{sql}");
    }

    // Bytes: the 200-character payload is most of the struct; reading s.alpha skips it.
    let (whole_leaves, whole, _) = run_scan(&ctx, "SELECT s FROM pyi.db.struct_wide").await;
    let (narrow_leaves, narrow, batches) =
        run_scan(&ctx, "SELECT s.alpha FROM pyi.db.struct_wide").await;
    assert!(whole_leaves.is_none() && narrow_leaves.is_some());
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        3010,
        "rows"
    );
    assert!(
        narrow * 10 < whole,
        "SELECT s.alpha scanned {narrow} bytes, SELECT s {whole}"
    );
    // The struct used whole as well as by field: read whole.
    let (leaves, _, _) = run_scan(&ctx, "SELECT s.alpha, s FROM pyi.db.struct_wide").await;
    assert!(leaves.is_none());

    // With a filter or an aggregate between the use and the scan (the optimizer rule), still
    // narrowed, and exact.
    let alpha_sum: i64 = expected.iter().filter_map(|r| r[1].as_i64()).sum();
    for (sql, want) in [
        (
            "SELECT count(*) FROM pyi.db.struct_wide WHERE s.inner.x = 5",
            expected.iter().filter(|r| r[2] == 5).count() as i64,
        ),
        (
            "SELECT count(s.alpha) FROM pyi.db.struct_wide WHERE s.late IS NULL AND s.alpha < 300",
            expected
                .iter()
                .filter(|r| r[3].is_null() && r[1].as_i64().is_some_and(|a| a < 300))
                .count() as i64,
        ),
        ("SELECT sum(s.alpha) FROM pyi.db.struct_wide", alpha_sum),
    ] {
        let (leaves, _, batches) = run_scan(&ctx, sql).await;
        assert!(leaves.is_some(), "{sql}: struct s not narrowed");
        assert_eq!(single_i64(&batches), want, "{sql}");
    }
    // A filter using the struct whole: not narrowed, exact.
    let sql = "SELECT count(s.alpha) FROM pyi.db.struct_wide WHERE s IS NOT NULL";
    let (leaves, _, batches) = run_scan(&ctx, sql).await;
    assert!(leaves.is_none(), "{sql}: narrowed although s is used whole");
    assert_eq!(
        single_i64(&batches) as usize,
        expected.iter().filter(|r| !r[1].is_null()).count()
    );
}
