//! Positional scans (`IcebergTableProvider::positional`): every row a scan returns, with its
//! data file and its position in that file, on the corpus tables Spark, the Java API and
//! PyIceberg wrote with position deletes, deletion vectors and equality deletes.
//!
//! Checked against the files themselves, not against Petrel's reader: each reported
//! (file, position) is looked up in the data file read raw with the `parquet` crate (no
//! deletes, no pruning), and its `id` must be the row's `id`. The rows must be exactly the
//! table's rows (the same multiset as a normal scan, whose results the corpus tests compare
//! with Spark's), each position reported once, and a filter must select exactly the rows whose
//! raw values match it.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use common::{corpus_dir, query, session};
use datafusion::prelude::SessionContext;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use petrel_table_provider::scan::{FILE_PATH_COLUMN, POSITION_COLUMN};
use petrel_table_provider::{Catalog, FileSystemCatalog, IcebergTableProvider};

/// The `id` column of a data file (as the manifests name it: where the corpus was written),
/// read raw from where the corpus is now, in file order.
fn raw_ids(path: &str) -> Vec<Option<i64>> {
    let relative = path
        .split_once("/warehouse/")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("{path} is not under a warehouse"));
    let local = corpus_dir().join("warehouse").join(relative);
    let file = std::fs::File::open(&local).unwrap_or_else(|e| panic!("{}: {e}", local.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .with_batch_size(100_000)
        .build()
        .expect("reader");
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let column = batch.column_by_name("id").expect("an id column");
        let column = arrow::compute::cast(column, &arrow::datatypes::DataType::Int64).expect("id");
        let ids = column.as_primitive::<Int64Type>();
        out.extend((0..ids.len()).map(|i| ids.is_valid(i).then(|| ids.value(i))));
    }
    out
}

/// Registers table `name` of the corpus as `pos` (positional) and returns the session.
async fn positional_session(name: &str) -> SessionContext {
    let warehouse = corpus_dir().join("warehouse");
    let catalog: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let ctx = session(vec![("iceberg", catalog)]);
    let provider = ctx
        .table_provider(format!("iceberg.db.{name}"))
        .await
        .expect("table");
    let provider = provider
        .as_any()
        .downcast_ref::<IcebergTableProvider>()
        .expect("an Iceberg table")
        .positional();
    ctx.register_table("pos", Arc::new(provider))
        .expect("register");
    ctx
}

/// (file, position, id) of every row `sql` returns (its columns: file, position, id).
async fn located(ctx: &SessionContext, sql: &str) -> Vec<(String, i64, Option<i64>)> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = Vec::new();
    for batch in &batches {
        let files = batch.column(0).as_string::<i32>();
        let positions = batch.column(1).as_primitive::<Int64Type>();
        let ids =
            arrow::compute::cast(batch.column(2), &arrow::datatypes::DataType::Int64).expect("id");
        let ids = ids.as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            out.push((
                files.value(i).to_string(),
                positions.value(i),
                ids.is_valid(i).then(|| ids.value(i)),
            ));
        }
    }
    out
}

async fn ids(ctx: &SessionContext, sql: &str) -> Vec<Option<i64>> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = Vec::new();
    for batch in &batches {
        let column =
            arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Int64).expect("id");
        let column = column.as_primitive::<Int64Type>();
        out.extend((0..column.len()).map(|i| column.is_valid(i).then(|| column.value(i))));
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_name_the_rows_in_their_files() {
    // Position deletes (v2), deletion vectors (v3), equality deletes (Java API, v2 and v3 with
    // DVs), and a copy-on-write table without deletes.
    for table in ["v2_mor", "v3_dv", "v2_eq_java", "v3_eq_dv", "pyiceberg_cow"] {
        let ctx = positional_session(table).await;
        let sql = format!("SELECT {FILE_PATH_COLUMN}, {POSITION_COLUMN}, id FROM pos");
        let rows = located(&ctx, &sql).await;
        // Exactly the table's rows.
        let mut seen_ids: Vec<Option<i64>> = rows.iter().map(|r| r.2).collect();
        seen_ids.sort();
        let plain = ids(&ctx, &format!("SELECT id FROM iceberg.db.{table}")).await;
        assert_eq!(
            seen_ids, plain,
            "{table}: the positional scan reads the table's rows"
        );
        assert!(!rows.is_empty(), "{table}");
        // Each position once, and each names the row in the raw file.
        let mut files: HashMap<String, Vec<Option<i64>>> = HashMap::new();
        let mut unique = HashSet::new();
        for (file, pos, id) in &rows {
            assert!(
                unique.insert((file.clone(), *pos)),
                "{table}: {file}@{pos} twice"
            );
            let raw = files.entry(file.clone()).or_insert_with(|| raw_ids(file));
            assert_eq!(
                raw.get(*pos as usize).copied().flatten(),
                *id,
                "{table}: {file} position {pos}"
            );
        }
        // A filter selects exactly the rows whose raw values match it.
        let filtered = located(
            &ctx,
            &format!("SELECT {FILE_PATH_COLUMN}, {POSITION_COLUMN}, id FROM pos WHERE id % 7 = 3"),
        )
        .await;
        let mut want: Vec<_> = rows
            .iter()
            .filter(|r| r.2.is_some_and(|id| id % 7 == 3))
            .cloned()
            .collect();
        let mut got = filtered;
        want.sort();
        got.sort();
        assert_eq!(got, want, "{table}: filtered positions");
        // Only the positions, no table column.
        let count = query(
            &ctx,
            &format!("SELECT count({POSITION_COLUMN}) FROM pos WHERE {POSITION_COLUMN} >= 0"),
        )
        .await
        .expect("count");
        assert_eq!(common::single_i64(&count) as usize, rows.len(), "{table}");
    }
}

/// `ORDER BY` over a table with deletes: the sort stays above the merge-on-read scan (it was
/// once pushed between the scan and its Parquet child, and the plan failed its sanity check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_with_deletes_sort() {
    for table in ["v2_mor", "v3_dv", "v2_eq_java"] {
        let ctx = positional_session(table).await;
        let sorted = ids(&ctx, &format!("SELECT id FROM iceberg.db.{table}")).await;
        let batches = query(
            &ctx,
            &format!("SELECT id FROM iceberg.db.{table} ORDER BY id"),
        )
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"));
        let mut got = Vec::new();
        for batch in &batches {
            let column = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Int64)
                .expect("id");
            let column = column.as_primitive::<Int64Type>();
            got.extend((0..column.len()).map(|i| column.is_valid(i).then(|| column.value(i))));
        }
        assert_eq!(got, sorted, "{table}: every row, in order");
    }
}
