//! Filters that identity partition values decide: answered by pruning alone (no filter kept
//! above the scan) only where that is exact. Each filter runs on an identity-partitioned table
//! and on an unpartitioned table of the same rows, through a planner with a column cache (a
//! scan whose filters the partitions decide reads its files whole, from the cache from their
//! second read on), three times; every run must return the rows the filter's SQL semantics
//! select (NULL comparisons are never true, also under `NOT`).

use std::sync::Arc;

use petrel_table_provider::{ColumnCache, ScanPlanner};

use crate::common::{run_ddl, session_with_planner, sorted_rows, warehouse_with_db, write_count};

/// The rows of both tables: `cat` is 'a', 'b', 'c' or NULL, and so is `s` (a string partition
/// column) with `n` an int partition column; `id` 0..60.
const ROWS: &str = "SELECT value AS id, \
     CASE value % 4 WHEN 0 THEN 'a' WHEN 1 THEN 'b' WHEN 2 THEN 'c' END AS cat, \
     CASE WHEN value % 5 = 0 THEN NULL ELSE CAST(value % 3 AS INT) END AS n \
     FROM generate_series(0, 59)";

/// (filter, the ids it selects by SQL semantics).
fn cases() -> Vec<(&'static str, Vec<i64>)> {
    let ids = |pred: &dyn Fn(i64) -> bool| (0..60).filter(|v| pred(*v)).collect::<Vec<i64>>();
    let cat = |v: i64| match v % 4 {
        0 => Some('a'),
        1 => Some('b'),
        2 => Some('c'),
        _ => None,
    };
    let n = |v: i64| (v % 5 != 0).then_some(v % 3);
    vec![
        ("cat IN ('b', NULL)", ids(&|v| cat(v) == Some('b'))),
        (
            "cat IN ('b', NULL) AND id > 10",
            ids(&|v| cat(v) == Some('b') && v > 10),
        ),
        (
            "cat <> 'b' AND cat IN ('a', NULL)",
            ids(&|v| cat(v) == Some('a')),
        ),
        ("cat = 'b' OR cat = NULL", ids(&|v| cat(v) == Some('b'))),
        ("cat NOT IN ('a', NULL)", vec![]),
        ("NOT (cat IN ('b', NULL))", vec![]),
        ("NOT (cat = NULL)", vec![]),
        ("NOT (cat = 'b' OR cat = NULL)", vec![]),
        ("cat = NULL OR cat IS NULL", ids(&|v| cat(v).is_none())),
        ("n IN (1, NULL)", ids(&|v| n(v) == Some(1))),
        (
            "n IN (1, NULL) OR cat = 'c'",
            ids(&|v| n(v) == Some(1) || cat(v) == Some('c')),
        ),
        ("n BETWEEN NULL AND 2", vec![]),
        (
            "NOT (n BETWEEN NULL AND 0)",
            ids(&|v| n(v).is_some_and(|n| n > 0)),
        ),
        (
            "n IN (0, 2) AND cat IN ('a', 'b', NULL)",
            ids(&|v| matches!(n(v), Some(0 | 2)) && matches!(cat(v), Some('a' | 'b'))),
        ),
    ]
}

/// A session over a warehouse in `dir` with the empty table `db.parted`, identity-partitioned
/// by `cat` and `n`, planned with a column cache as the server plans (a scan whose filters the
/// partitions decide reads its files whole, from the cache from the second read on).
async fn session_with_parted_table(dir: &std::path::Path) -> datafusion::prelude::SessionContext {
    let (_, catalog) = warehouse_with_db(dir).await;
    let planner = Arc::new(ScanPlanner::default().with_column_cache(ColumnCache::new(64 << 20)));
    let ctx = session_with_planner(vec![("iceberg", catalog)], planner);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.parted (id bigint, cat string, n int) PARTITIONED BY (cat, n)",
    )
    .await;
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_comparisons_on_identity_partitions_keep_their_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = session_with_parted_table(dir.path()).await;
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.flat (id bigint, cat string, n int)",
    )
    .await;
    for table in ["parted", "flat"] {
        let sql = format!("INSERT INTO iceberg.db.{table} {ROWS}");
        assert_eq!(write_count(&ctx, &sql).await, 60);
    }
    for (filter, ids) in cases() {
        let want: Vec<String> = {
            let mut rows: Vec<String> = ids.iter().map(|id| format!("[{id}]")).collect();
            rows.sort();
            rows
        };
        for table in ["parted", "flat", "parted", "parted"] {
            let sql = format!("SELECT id FROM iceberg.db.{table} WHERE {filter}");
            assert_eq!(sorted_rows(&ctx, &sql).await, want, "{sql}");
            let count = format!("SELECT count(*) FROM iceberg.db.{table} WHERE {filter}");
            assert_eq!(
                sorted_rows(&ctx, &count).await,
                vec![format!("[{}]", ids.len())],
                "{count}"
            );
        }
    }
}

/// A filter over identity partition columns that reaches the scan in a form pruning cannot
/// answer completely is applied by the scan itself. DataFusion decides a filter is exact on
/// the form it offers, and passes the scan a form simplified since (`x IN ('b', NULL)` became
/// `x = 'b' OR NULL` and returned every row); so the scan is given such filters directly here,
/// as DataFusion gives the filters it removed from above the scan. With the columns projected
/// or not, twice each (the second read from the column cache), and with a limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_filters_pruning_cannot_answer_are_applied_by_the_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = session_with_parted_table(dir.path()).await;
    let sql = format!("INSERT INTO iceberg.db.parted {ROWS}");
    assert_eq!(write_count(&ctx, &sql).await, 60);
    let provider = ctx
        .table_provider("iceberg.db.parted")
        .await
        .expect("provider");
    let schema =
        datafusion::common::DFSchema::try_from(provider.schema().as_ref().clone()).expect("schema");
    let cat = |v: i64| match v % 4 {
        0 => Some("a"),
        1 => Some("b"),
        2 => Some("c"),
        _ => None,
    };
    for (filter, want) in [
        (
            "upper(cat) = 'B'",
            (0..60)
                .filter(|v| cat(*v) == Some("b"))
                .collect::<Vec<i64>>(),
        ),
        (
            "cat = 'b' OR NULL",
            (0..60).filter(|v| cat(*v) == Some("b")).collect(),
        ),
        (
            "character_length(cat) = 1 AND n + 1 = 2",
            (0..60)
                .filter(|v| cat(*v).is_some() && v % 5 != 0 && v % 3 == 1)
                .collect(),
        ),
    ] {
        let expr = ctx.parse_sql_expr(filter, &schema).expect(filter);
        // Every column (the filter's included), only `id` (widened, then projected back), and
        // `id` with a limit.
        let runs = [
            (None, None),
            (None, None),
            (Some(vec![0]), None),
            (Some(vec![0]), None),
            (Some(vec![0]), Some(3)),
        ];
        for (projection, limit) in runs {
            let plan = provider
                .scan(
                    &ctx.state(),
                    projection.as_ref(),
                    std::slice::from_ref(&expr),
                    limit,
                )
                .await
                .expect("scan");
            let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
                .await
                .expect("collect");
            let mut ids: Vec<i64> = batches
                .iter()
                .flat_map(|b| {
                    assert_eq!(
                        b.num_columns(),
                        projection.as_ref().map_or(3, Vec::len),
                        "{filter}"
                    );
                    let ids = b
                        .column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::Int64Array>();
                    ids.expect("id column").values().to_vec()
                })
                .collect();
            ids.sort();
            match limit {
                None => assert_eq!(ids, want, "{filter} {projection:?}"),
                Some(limit) => {
                    assert!(ids.len() >= limit.min(want.len()), "{filter}: {ids:?}");
                    assert!(ids.iter().all(|id| want.contains(id)), "{filter}: {ids:?}");
                }
            }
        }
    }
}
