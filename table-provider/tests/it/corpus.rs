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

use common::{check_corpus, check_corpus_errors, corpus_dir, session};
use petrel_table_provider::FileSystemCatalog;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_matches_spark_at_every_snapshot_and_ref() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let (compared, merged) = check_corpus(&ctx, &corpus_dir()).await;
    eprintln!("corpus: {compared} results matched Spark ({merged} of them merge-on-read)");
    assert_eq!(compared, 137, "every corpus check ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_errors_name_the_table_and_snapshot() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    check_corpus_errors(&ctx).await;
}
