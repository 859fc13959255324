//! A point query on a sorted key reads what it needs: the page index selects the key's page
//! (row selection), and with the predicate pushed into the Parquet reader (late
//! materialisation) the other columns are decoded only at the rows the predicate keeps. Checked
//! with the Parquet scan's own metrics, exact numbers, on a Petrel-written file with known
//! pages.

use crate::common;

use std::sync::Arc;

use common::{find_scan, query, run_ddl, run_plan, session, warehouse_with_db, write_count};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricValue;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::ReadOptionsBuilder;

/// The Parquet scan's (pruned, matched) of a pruning metric, summed over its files.
fn pruning(plan: &Arc<dyn ExecutionPlan>, name: &str) -> (usize, usize) {
    let scan = find_scan(plan).expect("an Iceberg scan");
    let metrics = scan.children()[0].metrics().expect("Parquet scan metrics");
    let mut total = (0, 0);
    for m in metrics.iter() {
        if let MetricValue::PruningMetrics {
            name: n,
            pruning_metrics,
        } = m.value()
            && n.as_ref() == name
        {
            total.0 += pruning_metrics.pruned();
            total.1 += pruning_metrics.matched();
        }
    }
    total
}

/// A count metric of the Parquet scan (0 when absent).
fn count(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    let scan = find_scan(plan).expect("an Iceberg scan");
    scan.children()[0]
        .metrics()
        .and_then(|m| m.sum_by_name(name))
        .map_or(0, |v| v.as_usize())
}

/// Rows of each data page of column `column` of the table's only data file.
fn page_rows(warehouse: &std::path::Path, table: &str, column: usize) -> Vec<i64> {
    let data = warehouse.join("db").join(table).join("data");
    let files: Vec<_> = std::fs::read_dir(&data)
        .expect("data dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert_eq!(files.len(), 1, "one data file: {files:?}");
    let reader = SerializedFileReader::new_with_options(
        std::fs::File::open(&files[0]).expect("open"),
        ReadOptionsBuilder::new().with_page_index().build(),
    )
    .expect("parquet reader");
    let metadata = reader.metadata();
    assert_eq!(metadata.num_row_groups(), 1);
    let offsets = &metadata.offset_index().expect("offset index")[0][column];
    let locations = offsets.page_locations();
    let total = metadata.row_group(0).num_rows();
    locations
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let end = locations.get(i + 1).map_or(total, |n| n.first_row_index);
            end - p.first_row_index
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_query_decodes_one_page_of_the_key_and_only_matching_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    // One partition: the INSERT writes one file.
    ctx.sql("SET datafusion.execution.target_partitions = 1")
        .await
        .expect("set");
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.points (id bigint, qty int, comment string) USING iceberg \
         TBLPROPERTIES ('write.parquet.page-row-limit' = '1000')",
    )
    .await;
    // 10,000 rows in key order, one data file.
    let inserted = write_count(
        &ctx,
        "INSERT INTO iceberg.db.points SELECT value, CAST(value % 7 AS INT), \
         concat('comment of row ', CAST(value AS VARCHAR)) FROM range(0, 10000)",
    )
    .await;
    assert_eq!(inserted, 10_000);
    // The writer closes a page at the first write batch (1,024 rows) past the limit.
    let pages = page_rows(&warehouse, "points", 0);
    assert_eq!(pages.iter().sum::<i64>(), 10_000);
    assert_eq!(pages.len(), 10, "{pages:?}");
    assert_eq!(pages[4], 1024, "{pages:?}");

    let sql = "SELECT * FROM iceberg.db.points WHERE id = 4321";
    let (plan, batches) = run_plan(&ctx, sql).await;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 1);
    let shown = arrow::util::pretty::pretty_format_batches(&batches)
        .expect("format")
        .to_string();
    assert!(
        shown.contains("| 4321 | 2   | comment of row 4321 |"),
        "{shown}"
    );
    // One row group, kept by its statistics; the page index keeps the one page of `id` that
    // holds 4321 (rows 4096..5120) and prunes the other nine.
    assert_eq!(pruning(&plan, "row_groups_pruned_statistics"), (0, 1));
    assert_eq!(pruning(&plan, "page_index_pages_pruned"), (9, 1));
    assert_eq!(
        pruning(&plan, "page_index_rows_pruned"),
        (10_000 - 1024, 1024)
    );
    // The predicate runs on that page's 1,024 decoded keys and keeps one row: the other
    // columns are decoded at that row only.
    assert_eq!(count(&plan, "pushdown_rows_matched"), 1);
    assert_eq!(count(&plan, "pushdown_rows_pruned"), 1023);

    // The same answer without a pushed predicate (a key the page index cannot prune with).
    let batches = query(
        &ctx,
        "SELECT count(*) FROM iceberg.db.points WHERE id + 0 = 4321",
    )
    .await
    .expect("query");
    assert_eq!(common::single_i64(&batches), 1);
}
