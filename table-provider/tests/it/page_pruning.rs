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

/// `iceberg.db.points` (`id bigint, qty int, comment string`) in a warehouse under `dir`:
/// 10,000 rows in key order, one data file of 10 pages of `id` (page 4: rows 4096..5120).
pub(crate) async fn points_table(dir: &std::path::Path) -> datafusion::prelude::SessionContext {
    let (warehouse, catalog) = warehouse_with_db(dir).await;
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
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_query_decodes_one_page_of_the_key_and_only_matching_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = points_table(dir.path()).await;

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

/// A file with position deletes is read through its page index too: the pages the filter
/// cannot match are skipped (their rows never decoded), and the deleted rows of the pages read
/// are still dropped — for a query and for the positional scan of a DELETE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_a_file_with_position_deletes_are_pruned_by_the_page_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = points_table(dir.path()).await;
    // Merge-on-read (Petrel's default): one row in ten becomes a position delete.
    let deleted = write_count(&ctx, "DELETE FROM iceberg.db.points WHERE id % 10 = 3").await;
    assert_eq!(deleted, 1000);

    // 4100..=4200 lies in the page of rows 4096..5120; ids ending in 3 are deleted.
    let sql = "SELECT count(*), sum(id) FROM iceberg.db.points WHERE id BETWEEN 4100 AND 4200";
    let (plan, batches) = run_plan(&ctx, sql).await;
    let want: Vec<i64> = (4100..=4200).filter(|i| i % 10 != 3).collect();
    assert_eq!(
        count_and_sum(&batches),
        (want.len() as i64, want.iter().sum::<i64>())
    );
    assert_eq!(
        pruning(&plan, "page_index_rows_pruned"),
        (10_000 - 1024, 1024)
    );
    // Each bound is a page predicate of its own: `>= 4100` prunes pages 0-3 and keeps 6,
    // `<= 4200` prunes pages 5-9 and keeps 5.
    assert_eq!(pruning(&plan, "page_index_pages_pruned"), (9, 11));

    // A deleted key in the page read: nothing.
    let batches = query(
        &ctx,
        "SELECT count(*) FROM iceberg.db.points WHERE id = 4323",
    )
    .await
    .expect("query");
    assert_eq!(common::single_i64(&batches), 0);

    // A DELETE's positional scan prunes the same way and finds exactly the live rows.
    let deleted = write_count(
        &ctx,
        "DELETE FROM iceberg.db.points WHERE id BETWEEN 4100 AND 4200",
    )
    .await;
    assert_eq!(deleted, want.len() as u64);
    let batches = query(&ctx, "SELECT count(*), sum(id) FROM iceberg.db.points")
        .await
        .expect("query");
    let live: Vec<i64> = (0..10_000)
        .filter(|i| i % 10 != 3 && !(4100..=4200).contains(i))
        .collect();
    assert_eq!(
        count_and_sum(&batches),
        (live.len() as i64, live.iter().sum::<i64>())
    );
}

/// The one row of a `count(*), sum(..)` answer.
fn count_and_sum(batches: &[arrow::array::RecordBatch]) -> (i64, i64) {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    let rows: Vec<(i64, i64)> = batches
        .iter()
        .flat_map(|b| {
            let (c, s) = (
                b.column(0).as_primitive::<Int64Type>(),
                b.column(1).as_primitive::<Int64Type>(),
            );
            (0..b.num_rows())
                .map(move |i| (c.value(i), s.value(i)))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0]
}
