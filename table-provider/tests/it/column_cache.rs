//! The decoded-column cache (`scan::column_cache`): a scan that reads every row of data files
//! keeps their columns (from a file's second such read on), and the next such scan takes them
//! instead of reading the files again — with exactly the rows a read gives; a file with
//! position deletes is kept whole and its deleted rows masked. Scans with a limit or a filter
//! that partition values do not decide read their files as before.
//!
//! Counted with the scan's own metrics (`column_cache_files_hit` / `column_cache_files_read`)
//! on Petrel-written tables; the rows are checked against a model of what was inserted and
//! against a session without the cache.

use crate::common;

use std::sync::Arc;

use arrow::array::RecordBatch;
use common::{
    find_scan, query, run_ddl, run_plan, session, session_with_planner, sorted_rows,
    warehouse_with_db, write_count,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use parquet::file::reader::{FileReader, SerializedFileReader};
use petrel_table_provider::{Catalog, ColumnCache, ScanPlanner};

/// Rows per INSERT (one data file each).
const ROWS: i64 = 10_000;

/// A session over a fresh warehouse (catalog `iceberg`, namespace `db`) whose scans keep up to
/// `capacity` bytes of decoded columns, and a session over the same warehouse without a cache.
async fn sessions(
    dir: &std::path::Path,
    capacity: u64,
) -> (SessionContext, SessionContext, ColumnCache) {
    let (_warehouse, catalog) = warehouse_with_db(dir).await;
    let cache = ColumnCache::new(capacity);
    let planner = Arc::new(ScanPlanner::default().with_column_cache(cache.clone()));
    let cached = session_with_planner(vec![("iceberg", Arc::clone(&catalog))], planner);
    let plain = session(vec![("iceberg", catalog as Arc<dyn Catalog>)]);
    (cached, plain, cache)
}

/// What one query did: its batches, and its scan's files served from the cache, files read
/// (through the cache's path) and files planned.
struct Counted {
    batches: Vec<RecordBatch>,
    hit: usize,
    /// Of `hit`, the files taken with their deleted rows already masked out.
    masked: usize,
    read: usize,
    files: usize,
    /// Rows the scan's position deletes removed.
    deleted: usize,
    /// Cached batches a filtered scan skipped by their zones.
    pruned: usize,
}

/// Runs `sql` and counts what its scan did.
async fn run_counting(ctx: &SessionContext, sql: &str) -> Counted {
    let (plan, batches) = run_plan(ctx, sql).await;
    let count = |plan: &Arc<dyn ExecutionPlan>, name: &str| {
        find_scan(plan)
            .and_then(|scan| scan.metrics())
            .and_then(|m| m.sum_by_name(name))
            .map_or(0, |v| v.as_usize())
    };
    Counted {
        hit: count(&plan, "column_cache_files_hit"),
        masked: count(&plan, "column_cache_files_masked"),
        deleted: count(&plan, "rows_deleted_by_position"),
        read: count(&plan, "column_cache_files_read"),
        files: count(&plan, "files_scanned"),
        pruned: count(&plan, "column_cache_batches_pruned"),
        batches,
    }
}

/// Runs `sql` twice, checking `want` (the summary) and that both runs read every file (the
/// first read of a file keeps nothing; the second keeps its columns); the second run.
async fn read_twice(ctx: &SessionContext, sql: &str, want: Option<&str>) -> Counted {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let run = run_counting(ctx, sql).await;
        if let Some(want) = want {
            assert_eq!(summary_of(&run.batches), want, "{sql}");
        }
        assert_eq!(
            (run.hit, run.read),
            (0, run.files),
            "{sql}: every file read"
        );
        runs.push(run);
    }
    runs.pop().expect("two runs")
}

/// `SELECT *` of table `t`: the rows `want` (sorted) before and after a run whose `files`
/// files (or ranges) are all served from the cache; that run.
async fn all_rows_served(ctx: &SessionContext, want: &[String], files: usize) -> Counted {
    let all = "SELECT * FROM iceberg.db.t";
    assert_eq!(sorted_rows(ctx, all).await, want);
    let served = run_counting(ctx, all).await;
    assert_eq!((served.hit, served.read), (files, 0), "{all}");
    assert_eq!(sorted_rows(ctx, all).await, want);
    served
}

/// The table's rows as `INSERT`s of `ROWS` rows starting at each of `firsts` write them.
fn insert_sql(table: &str, first: i64) -> String {
    format!(
        "INSERT INTO {table} SELECT value + {first}, CAST(value % 7 AS INT), \
         CAST(value AS DECIMAL(12, 2)) / 100, \
         CASE WHEN value % 5 = 0 THEN NULL ELSE 'n' || (value + {first}) END, \
         CAST(value AS DOUBLE) * 0.5, value % 2 = 0 \
         FROM generate_series(0, {})",
        ROWS - 1
    )
}

/// What the summary query gives over the rows of the INSERTs starting at `firsts`, without
/// the ids in `deleted`: count, count(name), sum(id), sum(k), sum(price) (as text),
/// sum(f), count of true `b`.
fn model(firsts: &[i64], deleted: &[i64]) -> String {
    let (mut count, mut names, mut ids, mut ks, mut cents, mut halves, mut trues) =
        (0i64, 0i64, 0i64, 0i64, 0i64, 0i64, 0i64);
    for first in firsts {
        for value in 0..ROWS {
            let id = value + first;
            if deleted.contains(&id) {
                continue;
            }
            count += 1;
            names += i64::from(value % 5 != 0);
            ids += id;
            ks += value % 7;
            cents += value;
            halves += value;
            trues += i64::from(value % 2 == 0);
        }
    }
    format!(
        "{count}|{names}|{ids}|{ks}|{}.{:02}|{:?}|{trues}",
        cents / 100,
        cents % 100,
        halves as f64 * 0.5
    )
}

const SUMMARY: &str = "SELECT count(*) AS c, count(name) AS names, sum(id) AS ids, sum(k) AS ks, \
     CAST(sum(price) AS VARCHAR) AS price, sum(f) AS f, \
     sum(CASE WHEN b THEN 1 ELSE 0 END) AS trues FROM iceberg.db.t";

/// The summary's one row as `a|b|…`.
fn summary_of(batches: &[RecordBatch]) -> String {
    let batch = arrow::compute::concat_batches(&batches[0].schema(), batches).expect("concat");
    assert_eq!(batch.num_rows(), 1);
    (0..batch.num_columns())
        .map(|c| arrow::util::display::array_value_to_string(batch.column(c), 0).expect("display"))
        .collect::<Vec<_>>()
        .join("|")
}

async fn table_of_three_files(ctx: &SessionContext) {
    table_of_three_files_with(ctx, "").await;
}

/// Table `t` with `properties` (`TBLPROPERTIES (…)` or nothing), three INSERTs of `ROWS` rows.
async fn table_of_three_files_with(ctx: &SessionContext, properties: &str) {
    run_ddl(
        ctx,
        &format!(
            "CREATE TABLE iceberg.db.t (id bigint, k int, price decimal(12, 2), name string, \
             f double, b boolean) {properties}"
        ),
    )
    .await;
    for first in [0, ROWS, 2 * ROWS] {
        assert_eq!(
            write_count(ctx, &insert_sql("iceberg.db.t", first)).await,
            ROWS as u64
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_scan_takes_every_file_from_the_cache_with_the_same_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    let expected = model(&[0, ROWS, 2 * ROWS], &[]);

    // The first whole read of a file keeps nothing; the second keeps its columns.
    let first = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&first.batches), expected);
    assert!(first.files >= 3, "each INSERT wrote a file or more");
    assert_eq!((first.hit, first.read), (0, first.files));
    assert_eq!(cache.stats().entries, 0, "the first read keeps nothing");
    let second = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&second.batches), expected);
    assert_eq!((second.hit, second.read), (0, first.files));
    let files = first.files as u64;
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (0, 2 * files));
    assert_eq!(
        stats.entries,
        6 * files,
        "six columns of each file: {stats:?}"
    );
    let third = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&third.batches), expected);
    assert_eq!(
        (third.hit, third.read),
        (first.files, 0),
        "the third takes every file from the cache"
    );
    assert_eq!(cache.stats().hits, files);

    // Every row, every column: as a session without the cache reads them, both times.
    let all = "SELECT * FROM iceberg.db.t";
    let want = sorted_rows(&plain, all).await;
    assert_eq!(want.len(), 3 * ROWS as usize);
    let again = all_rows_served(&ctx, &want, first.files).await;
    // The same batch schema as a read gives, field metadata (ids) included.
    let read = run_counting(&plain, all).await;
    assert_eq!(again.batches[0].schema(), read.batches[0].schema());

    // Other columns than the summary's, in another order: served by the same entries.
    let other = run_counting(&ctx, "SELECT count(name), sum(k) FROM iceberg.db.t").await;
    assert_eq!((other.hit, other.read), (first.files, 0));
    let fields: Vec<&str> = expected.split('|').collect();
    assert_eq!(
        summary_of(&other.batches),
        format!("{}|{}", fields[1], fields[3])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_file_is_read_and_a_deleted_row_is_masked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, _plain, _cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    let before = read_twice(&ctx, SUMMARY, None).await;

    // More files: read, the others from the cache.
    assert_eq!(
        write_count(&ctx, &insert_sql("iceberg.db.t", 3 * ROWS)).await,
        ROWS as u64
    );
    let firsts = [0, ROWS, 2 * ROWS, 3 * ROWS];
    let after = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&after.batches), model(&firsts, &[]));
    assert!(after.files > before.files);
    assert_eq!(
        (after.hit, after.read),
        (before.files, after.files - before.files)
    );

    // A position delete: the file it deletes from is still served from the cache, its deleted
    // row masked out, and so are the others.
    assert_eq!(
        write_count(&ctx, "DELETE FROM iceberg.db.t WHERE id = 12345").await,
        1
    );
    // (The new files are read a second time, and kept.)
    let new_files = after.files - before.files;
    for (hit, read) in [(before.files, new_files), (after.files, 0)] {
        let deleted = run_counting(&ctx, SUMMARY).await;
        assert_eq!(summary_of(&deleted.batches), model(&firsts, &[12345]));
        assert_eq!((deleted.hit, deleted.read), (hit, read));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_with_position_deletes_are_kept_whole_and_masked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, _cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    // Deleted before any scan.
    delete_rows(&ctx).await;
    let deleted = deleted_ids();
    let expected = model(&[0, ROWS, 2 * ROWS], &deleted);
    let all = "SELECT * FROM iceberg.db.t";
    let want = sorted_rows(&plain, all).await;
    assert_eq!(want.len(), 3 * ROWS as usize - deleted.len());

    let first = read_twice(&ctx, SUMMARY, Some(&expected)).await;
    let second = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&second.batches), expected);
    assert_eq!((second.hit, second.read), (first.files, 0));
    // Every column of every row left, from the cache and masked, as a read without it gives.
    all_rows_served(&ctx, &want, first.files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_whose_equality_deletes_delete_nothing_take_their_columns_from_the_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, _cache) = sessions(dir.path(), 256 << 20).await;
    // An upserting table: each INSERT also writes an equality delete file of its keys, with
    // their bounds.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id bigint NOT NULL, k int, price decimal(12, 2), \
         name string, f double, b boolean, PRIMARY KEY (id)) \
         TBLPROPERTIES ('write.upsert.enabled'='true')",
    )
    .await;
    for first in [0, ROWS, 2 * ROWS] {
        write_count(&ctx, &insert_sql("iceberg.db.t", first)).await;
    }
    // Replaces ids 5 and 25,000: its delete file's bounds span the second INSERT's files too,
    // which hold neither key, so their recorded equality positions are empty.
    write_count(
        &ctx,
        "INSERT INTO iceberg.db.t VALUES (5, 1, 1.00, 'five', 1.5, true), \
         (25000, 2, 2.00, 'twenty-five thousand', 2.5, false)",
    )
    .await;
    let want = summary_of(&run_counting(&plain, SUMMARY).await.batches);

    // The first scan records the equality positions; the next two apply them and read every
    // file through the cache (its second such read keeps a file's columns): those whose
    // positions are empty as plain files, the others masked; the fourth takes every file from
    // the cache.
    let first = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&first.batches), want);
    for _ in 0..2 {
        let read = run_counting(&ctx, SUMMARY).await;
        assert_eq!(summary_of(&read.batches), want);
        assert_eq!(
            (read.hit, read.read),
            (0, read.files),
            "every file read through the cache"
        );
    }
    let fourth = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&fourth.batches), want);
    assert_eq!(
        (fourth.hit, fourth.read),
        (fourth.files, 0),
        "every file from the cache"
    );
    let all = "SELECT * FROM iceberg.db.t";
    let rows = sorted_rows(&plain, all).await;
    assert_eq!(rows.len(), 3 * ROWS as usize);
    all_rows_served(&ctx, &rows, fourth.files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masked_columns_are_kept_until_their_files_deletes_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, _cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    // Each file has deletes: ids 3; 10,001 and 12,000–17,999; 20,001–29,999.
    delete_rows(&ctx).await;
    let mut deleted = deleted_ids();
    let firsts = [0, ROWS, 2 * ROWS];

    // The data files with deleted positions (the others have no mask to keep).
    let with_deletes = "SELECT CAST(count(DISTINCT file_path) AS BIGINT) AS n \
                        FROM iceberg.db.t.position_deletes";
    let masked_files = scalar_of(&ctx, with_deletes).await;
    assert!(masked_files > 1, "{masked_files} files with deletes");

    // Read, then kept whole; the third scan masks the cached columns and keeps them masked;
    // the fourth takes them masked, removing (and counting) the same rows.
    let first = read_twice(&ctx, SUMMARY, Some(&model(&firsts, &deleted))).await;
    assert_eq!(first.deleted, deleted.len());
    let files = first.files;
    for masked in [0, masked_files] {
        let run = run_counting(&ctx, SUMMARY).await;
        assert_eq!(summary_of(&run.batches), model(&firsts, &deleted));
        assert_eq!((run.hit, run.masked, run.read), (files, masked, 0));
        assert_eq!(run.deleted, deleted.len());
    }

    // Another delete in the file holding id 3 (the same batch of the INSERT, so the same
    // file): its masked columns no longer apply; it is masked again from its whole columns
    // (and kept so), the other files still taken masked.
    assert_eq!(
        write_count(&ctx, "DELETE FROM iceberg.db.t WHERE id = 4").await,
        1
    );
    assert_eq!(scalar_of(&ctx, with_deletes).await, masked_files);
    deleted.push(4);
    for masked in [masked_files - 1, masked_files] {
        let run = run_counting(&ctx, SUMMARY).await;
        assert_eq!(summary_of(&run.batches), model(&firsts, &deleted));
        assert_eq!((run.hit, run.masked, run.read), (files, masked, 0));
        assert_eq!(run.deleted, deleted.len());
    }
    let all = "SELECT * FROM iceberg.db.t";
    let want = sorted_rows(&plain, all).await;
    assert_eq!(want.len(), 3 * ROWS as usize - deleted.len());
    // `SELECT *` reads the same columns: taken masked.
    let served = all_rows_served(&ctx, &want, files).await;
    assert_eq!(served.masked, masked_files);
}

/// The one Int64 value `sql` gives.
async fn scalar_of(ctx: &SessionContext, sql: &str) -> usize {
    let batches = query(ctx, sql).await.expect(sql);
    let column = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .expect("Int64");
    usize::try_from(column.value(0)).expect("a count")
}

/// The deletes of [`delete_rows`]: single rows, a run longer than the reader's skip threshold
/// (4,096 rows), and all of the third INSERT's rows but its first and last.
fn deleted_ids() -> Vec<i64> {
    let mut deleted: Vec<i64> = vec![3, 10001, 29999];
    deleted.extend(12_000..=17_999);
    deleted.extend(20_001..29_999);
    deleted
}

async fn delete_rows(ctx: &SessionContext) {
    let deletes = [
        ("id IN (3, 10001, 29999)", 3),
        ("id BETWEEN 12000 AND 17999", 6000),
        ("id > 20000 AND id < 29999", 9998),
    ];
    for (filter, rows) in deletes {
        let sql = format!("DELETE FROM iceberg.db.t WHERE {filter}");
        assert_eq!(write_count(ctx, &sql).await, rows, "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_ranges_of_files_with_deletes_are_kept_each_and_masked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, _cache) = sessions(dir.path(), 256 << 20).await;
    // Small row groups, one writer per INSERT: each file gets its rows in two writes (8,192
    // rows, then the rest), so two row groups; and DataFusion splits the files into byte
    // ranges across partitions (a range reads the row groups that start in it).
    query(&ctx, "SET datafusion.execution.target_partitions = 1")
        .await
        .expect("set");
    table_of_three_files_with(
        &ctx,
        "TBLPROPERTIES ('write.parquet.row-group-size-bytes'='4096')",
    )
    .await;
    delete_rows(&ctx).await;
    let data = dir.path().join("warehouse/db/t/data");
    let most_groups = std::fs::read_dir(&data)
        .expect("data directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
        .map(|path| {
            let file = std::fs::File::open(&path).expect("open");
            SerializedFileReader::new(file)
                .expect("footer")
                .metadata()
                .num_row_groups()
        })
        .max();
    assert!(
        most_groups >= Some(2),
        "row groups per file: {most_groups:?}"
    );
    for session in [&ctx, &plain] {
        for set in [
            "SET datafusion.optimizer.repartition_file_min_size = 1",
            "SET datafusion.execution.target_partitions = 6",
        ] {
            query(session, set).await.expect(set);
        }
    }
    let expected = model(&[0, ROWS, 2 * ROWS], &deleted_ids());
    let all = "SELECT * FROM iceberg.db.t";
    let want = sorted_rows(&plain, all).await;
    assert_eq!(want.len(), 3 * ROWS as usize - deleted_ids().len());

    let first = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&first.batches), expected);
    assert_eq!(first.hit, 0);
    assert!(
        first.read > first.files,
        "files split into ranges: {} ranges of {} files",
        first.read,
        first.files
    );
    let kept = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&kept.batches), expected);
    assert_eq!((kept.hit, kept.read), (0, first.read));
    let second = run_counting(&ctx, SUMMARY).await;
    assert_eq!(summary_of(&second.batches), expected);
    assert_eq!((second.hit, second.read), (first.read, 0));
    all_rows_served(&ctx, &want, first.read).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_read_the_files_and_partition_filters_use_the_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, _plain, _cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    read_twice(&ctx, SUMMARY, None).await;

    // A limit: the scan stops early, as before.
    let limited = run_counting(&ctx, "SELECT id FROM iceberg.db.t LIMIT 5").await;
    assert_eq!((limited.hit, limited.read), (0, 0));
    assert_eq!(
        limited.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        5
    );

    // An identity-partitioned table: a filter on the partition column is decided by the
    // planner, so the scan of the files it keeps uses the cache.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.p (id bigint, part int) PARTITIONED BY (part)",
    )
    .await;
    assert_eq!(
        write_count(
            &ctx,
            "INSERT INTO iceberg.db.p SELECT value, CAST(value % 3 AS INT) \
             FROM generate_series(0, 8999)"
        )
        .await,
        9000
    );
    let sql = "SELECT count(*), sum(id) FROM iceberg.db.p WHERE part = 1";
    let want = format!("3000|{}", (0..9000i64).filter(|v| v % 3 == 1).sum::<i64>());
    let first = read_twice(&ctx, sql, Some(&want)).await;
    assert!(first.files >= 1);
    let second = run_counting(&ctx, sql).await;
    assert_eq!(summary_of(&second.batches), want);
    assert_eq!((second.hit, second.read), (first.files, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_too_large_for_the_cache_are_read_every_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A file's columns may take a quarter of the capacity: 16 KiB here, less than one file.
    let (ctx, _plain, cache) = sessions(dir.path(), 64 << 10).await;
    table_of_three_files(&ctx).await;
    let expected = model(&[0, ROWS, 2 * ROWS], &[]);
    for _ in 0..3 {
        let run = run_counting(&ctx, SUMMARY).await;
        assert_eq!(summary_of(&run.batches), expected);
        assert_eq!((run.hit, run.read), (0, run.files));
    }
    assert_eq!(cache.stats().entries, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_batch_size_is_another_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, _cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    let all = "SELECT * FROM iceberg.db.t";
    let want = sorted_rows(&plain, all).await;
    let kept = read_twice(&ctx, all, None).await;
    assert_eq!((run_counting(&ctx, all).await.hit), kept.files);
    query(&ctx, "SET datafusion.execution.batch_size = 777")
        .await
        .expect("set batch size");
    // Batches of another size: read (twice, to be kept).
    let first = read_twice(&ctx, all, None).await;
    assert!(first.batches.iter().all(|b| b.num_rows() <= 777));
    let second = run_counting(&ctx, all).await;
    assert_eq!((second.hit, second.read), (first.files, 0));
    assert!(second.batches.iter().all(|b| b.num_rows() <= 777));
    assert_eq!(sorted_rows(&ctx, all).await, want);
}

/// Filters on data, of every kind of column (zones or none, nulls, expressions the zones
/// cannot decide), each over all three files.
const FILTERS: [&str; 8] = [
    "id BETWEEN 12000 AND 12999",
    "id IN (5, 15005, 29999)",
    "name = 'n12346'",
    "name IS NULL AND k = 3",
    "name LIKE 'n2%' AND price > 50",
    "f > 4000.0",
    "b AND id % 1000 = 8",
    "price < 1 OR k = 6",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_scans_are_served_without_the_batches_their_filters_rule_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, plain, cache) = sessions(dir.path(), 256 << 20).await;
    table_of_three_files(&ctx).await;
    // Batches of 1,000 rows: ten per file.
    for session in [&ctx, &plain] {
        query(session, "SET datafusion.execution.batch_size = 1000")
            .await
            .expect("set batch size");
    }

    // A point query: one file left by its metrics (the INSERT's two writer tasks wrote its
    // first 8,192 rows, one batch of the generator, to this file: ids 10000..=18191, nine
    // batches). Its first read is remembered, its second reads the file whole (no filter)
    // and keeps its three columns, the third is served from them, eight of the file's nine
    // batches skipped by their zones.
    let point = "SELECT id, name, price FROM iceberg.db.t WHERE id = 12346";
    let want = sorted_rows(&plain, point).await;
    assert_eq!(want, [r#"[12346,"n12346","23.46"]"#]);
    for (run, (hit, read, entries)) in [(0, 1, 0), (0, 1, 3), (1, 0, 3)].into_iter().enumerate() {
        let counted = run_counting(&ctx, point).await;
        assert_eq!(counted.files, 1, "run {run}");
        assert_eq!((counted.hit, counted.read), (hit, read), "run {run}");
        assert_eq!(cache.stats().entries, entries, "run {run}");
        assert_eq!(counted.pruned, if hit == 1 { 8 } else { 0 }, "run {run}");
        assert_eq!(rows_of(&counted.batches), want, "run {run}");
    }
    // What was kept is the whole file: every row of it, as a read gives them.
    let file = "SELECT id, name, price FROM iceberg.db.t WHERE id >= 10000 AND id < 18192";
    let served = run_counting(&ctx, file).await;
    assert_eq!((served.hit, served.read, served.pruned), (1, 0, 0));
    let all = sorted_rows(&plain, file).await;
    assert_eq!(all.len(), 8192);
    assert_eq!(rows_of(&served.batches), all);

    // Every kind of filter over every file: the same rows as without the cache, on the
    // first run, the filling one and the served ones.
    for filter in FILTERS {
        let sql = format!("SELECT * FROM iceberg.db.t WHERE {filter}");
        let want = sorted_rows(&plain, &sql).await;
        assert!(!want.is_empty(), "{filter} matches rows");
        for run in 0..4 {
            let counted = run_counting(&ctx, &sql).await;
            assert_eq!(rows_of(&counted.batches), want, "{filter}, run {run}");
            if run == 3 {
                assert_eq!(
                    (counted.hit, counted.read),
                    (counted.files, 0),
                    "{filter}: served from the cache"
                );
            }
        }
    }
    // The range and the point filters skip batches by zones; float and expression filters
    // cannot.
    let pruned = |filter: &str| {
        let sql = format!("SELECT * FROM iceberg.db.t WHERE {filter}");
        let ctx = ctx.clone();
        async move { run_counting(&ctx, &sql).await.pruned }
    };
    assert_eq!(
        pruned(FILTERS[0]).await,
        8,
        "one batch of the one file holds 12000..12999"
    );
    assert_eq!(
        pruned(FILTERS[1]).await,
        17,
        "one batch of each of three files holds an id"
    );
    // Strings by byte order: 'n12346' lies between many batches' min and max ('n1' ..
    // 'n999' for ids 1..999), so 15 of the 33 batches are skipped.
    assert_eq!(pruned(FILTERS[2]).await, 15);
    assert_eq!(pruned(FILTERS[5]).await, 0, "no zones for doubles");
    assert_eq!(pruned(FILTERS[6]).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_scans_keep_files_only_into_free_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 3 MiB, of which whole reads of `t` and `w` keep ~2.8 MiB. Each INSERT writes two files
    // (its two writer tasks): one of 8,192 rows, one of 1,808.
    let (ctx, plain, cache) = sessions(dir.path(), 3 << 20).await;
    table_of_three_files(&ctx).await;
    let create = |table: &str| {
        format!(
            "CREATE TABLE iceberg.db.{table} (id bigint, k int, price decimal(12, 2), \
             name string, f double, b boolean)"
        )
    };
    run_ddl(&ctx, &create("w")).await;
    for first in [0, ROWS, 2 * ROWS] {
        write_count(&ctx, &insert_sql("iceberg.db.w", first)).await;
    }
    read_twice(&ctx, SUMMARY, None).await;
    read_twice(&ctx, &SUMMARY.replace("iceberg.db.t", "iceberg.db.w"), None).await;
    let kept = cache.stats();
    assert_eq!(kept.entries, 72, "six columns of twelve files: {kept:?}");
    let free = kept.capacity_bytes - kept.bytes;
    // A file of `u`: six columns of 8,192 rows (8 + 4 + 16 + 32 + 8 + 1 bytes a row
    // estimated) do not fit in what is left; of 1,808 rows they do.
    assert!(8192 * 69 > free && 1808 * 69 < free, "{kept:?}");
    run_ddl(&ctx, &create("u")).await;
    assert_eq!(
        write_count(&ctx, &insert_sql("iceberg.db.u", 0)).await,
        ROWS as u64
    );
    let sql = "SELECT * FROM iceberg.db.u WHERE id % 100 = 1";
    let want = sorted_rows(&plain, sql).await;
    assert_eq!(want.len(), 100);
    // Both files read twice; the small one kept at its second read and served after, the
    // large one read every time.
    assert_eq!(
        hits_and_reads(&ctx, sql, &want, 4).await,
        [(0, 2), (0, 2), (1, 1), (1, 1)]
    );
    let after = cache.stats();
    assert_eq!(after.entries, 78, "nothing pushed out: {after:?}");
    assert!(after.bytes <= after.capacity_bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_larger_than_its_estimate_is_read_not_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 4 MiB: a file may take 1 MiB. 8,192 rows of a 200-character string are estimated at
    // 40 bytes a row (320 KiB: read whole to be kept) but take ~1.7 MiB: the recording
    // stops, the rows still flow to the query, and the file is not kept.
    let (ctx, plain, cache) = sessions(dir.path(), 4 << 20).await;
    run_ddl(&ctx, "CREATE TABLE iceberg.db.s (id bigint, s string)").await;
    assert_eq!(
        write_count(
            &ctx,
            "INSERT INTO iceberg.db.s SELECT value, repeat('x', 200) || value \
             FROM generate_series(0, 9999)"
        )
        .await,
        10_000
    );
    let sql = "SELECT id, s FROM iceberg.db.s WHERE id % 1000 = 3";
    let want = sorted_rows(&plain, sql).await;
    assert_eq!(want.len(), 10);
    // The INSERT wrote two files (its two writer tasks): the smaller (1,808 rows, ~0.4 MiB)
    // is kept at its second read and served after; the larger is read every time.
    assert_eq!(
        hits_and_reads(&ctx, sql, &want, 4).await,
        [(0, 2), (0, 2), (1, 1), (1, 1)]
    );
    assert_eq!(cache.stats().entries, 2, "two columns of one file");
}

/// Runs `sql` `runs` times, checking each run's rows against `want` (as `sorted_rows` gives
/// them); each run's files served from the cache and files read.
async fn hits_and_reads(
    ctx: &SessionContext,
    sql: &str,
    want: &[String],
    runs: usize,
) -> Vec<(usize, usize)> {
    let mut counts = Vec::with_capacity(runs);
    for run in 0..runs {
        let counted = run_counting(ctx, sql).await;
        assert_eq!(rows_of(&counted.batches), want, "{sql}: run {run}");
        counts.push((counted.hit, counted.read));
    }
    counts
}

/// The rows of `batches` as `sorted_rows` gives a query's.
fn rows_of(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows: Vec<String> = common::rows_json(batches, &[])
        .into_iter()
        .map(|r| serde_json::Value::Array(r).to_string())
        .collect();
    rows.sort();
    rows
}
