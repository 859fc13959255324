//! A scan partition reads its files as runs, and a file with positional deletes is a run of its
//! own whose deletes are loaded when it opens (`scan::merge_stream`). The runs after the
//! current one are opened ahead on tasks of their own: while a consumer holds the first batch
//! of the first file and polls nothing more, the next file's position deletes still load.
//! Before, the run ahead was only polled between runs and stood still while a file streamed.
//!
//! Checked with the scan's own delete metrics on a Petrel-written table: two data files, each
//! with a position delete file of its own; the first file's deletes and footer are cached by an
//! earlier query, so that its run opens at once and the second file's is the one left to load.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{find_scan, query, run_ddl, session, warehouse_with_db, write_count};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;

/// A count metric of the plan's Iceberg scan (0 before it is first set).
fn scan_count(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    find_scan(plan)
        .and_then(|scan| scan.metrics())
        .and_then(|m| m.sum_by_name(name))
        .map_or(0, |v| v.as_usize())
}

/// The data files of the plan's (only) partition, in the order it reads them.
fn partition_files(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let scan = find_scan(plan).expect("an Iceberg scan");
    let config = scan.children()[0]
        .as_any()
        .downcast_ref::<DataSourceExec>()
        .and_then(|exec| exec.data_source().as_any().downcast_ref::<FileScanConfig>())
        .expect("a Parquet scan");
    assert_eq!(config.file_groups.len(), 1, "one partition");
    config.file_groups[0]
        .files()
        .iter()
        .map(|f| f.object_meta.location.to_string())
        .collect()
}

/// The smallest `id` of a data file, from its footer.
fn min_id(path: &str) -> i64 {
    let file = std::fs::File::open(format!("/{path}")).expect("open data file");
    let reader = SerializedFileReader::new(file).expect("parquet footer");
    match reader.metadata().row_group(0).column(0).statistics() {
        Some(Statistics::Int64(s)) => *s.min_opt().expect("min"),
        other => panic!("id statistics: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_files_deletes_load_while_the_current_file_streams() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    // One partition: each INSERT writes one file, and the scan reads both in one partition,
    // in batches of 1,000 rows.
    for set in [
        "SET datafusion.execution.target_partitions = 1",
        "SET datafusion.execution.batch_size = 1000",
    ] {
        query(&ctx, set).await.expect(set);
    }
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (id bigint, v string)").await;
    for first in [0, 20_000] {
        let sql = format!(
            "INSERT INTO iceberg.db.t SELECT value + {first}, 'v' || value \
             FROM generate_series(0, 19999)"
        );
        assert_eq!(write_count(&ctx, &sql).await, 20_000);
    }
    for id in [7, 20_007] {
        let sql = format!("DELETE FROM iceberg.db.t WHERE id = {id}");
        assert_eq!(write_count(&ctx, &sql).await, 1);
    }
    let plan = ctx
        .sql("SELECT id FROM iceberg.db.t")
        .await
        .expect("plan")
        .create_physical_plan()
        .await
        .expect("physical plan");
    let files = partition_files(&plan);
    assert_eq!(files.len(), 2, "two data files: {files:?}");

    // Cache the deletes and footer of the file read first (a query only its rows match).
    let warm = if min_id(&files[0]) == 0 {
        "SELECT count(*) FROM iceberg.db.t WHERE id < 20000"
    } else {
        "SELECT count(*) FROM iceberg.db.t WHERE id >= 20000"
    };
    query(&ctx, warm).await.expect(warm);

    let mut stream = plan.execute(0, ctx.task_ctx()).expect("execute");
    let first = stream.next().await.expect("a batch").expect("no error");
    assert!(first.num_rows() > 0 && first.num_rows() <= 1000);
    // Nothing polls the stream now; the second file's run loads its deletes on its own.
    let deadline = Instant::now() + Duration::from_secs(10);
    while scan_count(&plan, "delete_files_position") < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        scan_count(&plan, "delete_files_position"),
        2,
        "the second file's deletes were not loaded while the first file streamed"
    );

    // The rest of the rows, and what the deletes loaded: one from the cache, one read.
    let mut rows = first.num_rows();
    while let Some(batch) = stream.next().await {
        rows += batch.expect("no error").num_rows();
    }
    assert_eq!(rows, 39_998);
    assert_eq!(scan_count(&plan, "delete_files_position"), 2);
    assert_eq!(scan_count(&plan, "delete_files_cached"), 1);
    assert_eq!(scan_count(&plan, "rows_deleted_by_position"), 2);
}
