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

/// The same checks three times with the decoded-column cache: the third pass takes the columns
/// of every file scanned whole from the cache (type promotion, renamed and added columns,
/// partition evolution, files without field ids, deletes of every kind) and must give the same
/// results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_matches_spark_again_from_the_column_cache() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let cache = ColumnCache::new(1 << 30);
    let planner = Arc::new(ScanPlanner::default().with_column_cache(cache.clone()));
    let ctx = session_with_planner(vec![("iceberg", Arc::new(catalog))], planner);
    // Three passes: a file's columns are kept from its second whole read on.
    let mut stats = Vec::new();
    for _ in 0..3 {
        let (compared, _) = check_corpus(&ctx, &corpus_dir()).await;
        assert_eq!(compared, 137);
        stats.push(cache.stats());
    }
    eprintln!("column cache after each pass: {stats:#?}");
    assert!(
        stats[1].entries > 0,
        "the second pass kept columns: {stats:?}"
    );
    assert!(
        stats[2].hits > stats[1].hits,
        "the third pass took files from the cache: {stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_errors_name_the_table_and_snapshot() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    check_corpus_errors(&ctx).await;
}
