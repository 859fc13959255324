//! Reads every table of the fixture corpus (Spark, the Iceberg Java API, PyIceberg and a
//! PyIceberg fork wrote them) at every snapshot and ref, and runs the recorded queries,
//! comparing with what Spark computed (`expected/<table>.json`). The corpus was written at
//! another location and moved, so every read also exercises moved-table path mapping.
//!
//! Most of these tables carry deletes (position deletes from Spark's DELETE / UPDATE / MERGE,
//! deletes across partition evolution, v3 deletion vectors, equality deletes from the Java API
//! and from a PyIceberg fork, keys re-inserted after their delete): every one is merged on read.

use crate::common;

use std::sync::Arc;

use common::{check_corpus, check_corpus_errors, corpus_dir, session, session_with_planner};
use petrel_table_provider::{ColumnCache, FileSystemCatalog, ScanPlanner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_matches_spark_at_every_snapshot_and_ref() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let (compared, merged) = check_corpus(&ctx, &corpus_dir()).await;
    eprintln!("corpus: {compared} results matched Spark ({merged} of them merge-on-read)");
    assert_eq!(compared, 137, "every corpus check ran");
}

/// The same checks twice with the decoded-column cache: the second pass takes the columns of
/// every file scanned whole without deletes from the cache (type promotion, renamed and added
/// columns, partition evolution, files without field ids) and must give the same results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_matches_spark_again_from_the_column_cache() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let cache = ColumnCache::new(1 << 30);
    let planner = Arc::new(ScanPlanner::default().with_column_cache(cache.clone()));
    let ctx = session_with_planner(vec![("iceberg", Arc::new(catalog))], planner);
    let (compared, _) = check_corpus(&ctx, &corpus_dir()).await;
    assert_eq!(compared, 137);
    let first = cache.stats();
    let (compared, _) = check_corpus(&ctx, &corpus_dir()).await;
    assert_eq!(compared, 137);
    let second = cache.stats();
    eprintln!("column cache after one pass: {first:?}; after two: {second:?}");
    assert!(first.entries > 0, "the first pass kept columns: {first:?}");
    assert!(
        second.hits > first.hits,
        "the second pass took files from the cache: {first:?} then {second:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_errors_name_the_table_and_snapshot() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    check_corpus_errors(&ctx).await;
}
