//! The fixture corpus through a real REST catalog (`rustberg`, see `common::rustberg`;
//! skipped with a printed reason when it is not installed, unless `PETREL_REQUIRE_REST` is
//! set): every table registered by its current metadata file (`POST .../register`) reads with
//! the results Spark recorded — the same checks as the local corpus test (`corpus.rs`: the 137
//! results and the errors, `common::check_corpus` and `common::check_corpus_errors`).
//!
//! The corpus's metadata declares the location it was written at
//! (`file:///petrel-fixtures-origin/...`), not where its files are now, so rustberg runs with
//! `location_scope = "warehouse"` (a registered table's files anywhere in the warehouse) and
//! the warehouse `file:///`, which holds both.
//!
//! rustberg (0.3.0) registers a table only when both the metadata file named
//! (`metadata-location`) and the location that metadata declares are inside its one warehouse,
//! so a plain bucket copy of the corpus (an `s3://` metadata file declaring a `file://` location)
//! is refused with 400. On S3 the corpus goes through Iceberg's own relocation first:
//! `rest_corpus_s3.rs` registers the copy Spark's `rewrite_table_path` made (every path rewritten
//! to `s3://petrel-corpus/corpus/...`) in rustberg on a bucket; Iceberg 1.10.2 relocates four of
//! the eight tables, that module's doc says why not the others. The whole corpus on S3 is
//! `object_store_s3.rs`'s (a filesystem catalog); REST tables Petrel writes on S3 are
//! `rest_vended_credentials.rs`'s.

use crate::common;

use std::sync::Arc;

use common::rustberg::Rustberg;
use common::{check_corpus, check_corpus_errors, corpus_dir, corpus_tables, session};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, TableIdent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_registered_through_rest_matches_spark() {
    let Some(server) = Rustberg::start_with(
        Some("file:///"),
        "location_scope = \"warehouse\"",
        "",
        &[],
        None,
    ) else {
        return;
    };
    let rest = server.catalog("iceberg").await;
    let local = FileSystemCatalog::new(corpus_dir().join("warehouse").to_str().expect("utf8"))
        .expect("local catalog");
    let db = Namespace::new(vec!["db".into()]);
    rest.create_namespace(&db, false).await.expect("namespace");
    let tables = corpus_tables(&corpus_dir());
    for (table, _) in &tables {
        let ident = TableIdent::new(db.clone(), table.clone());
        let current = local.load_table(&ident).await.expect("local table");
        let location = match current.metadata_location() {
            l if l.contains("://") => l.to_string(),
            l => format!("file://{l}"),
        };
        rest.register_table(&ident, &location)
            .await
            .unwrap_or_else(|e| panic!("register {ident} ({location}): {e}"));
    }
    assert_eq!(
        rest.list_tables(&db).await.expect("list").len(),
        tables.len()
    );
    let ctx = session(vec![("iceberg", Arc::new(rest) as Arc<dyn Catalog>)]);
    let (compared, merged) = check_corpus(&ctx, &corpus_dir()).await;
    eprintln!("corpus through REST: {compared} results matched Spark ({merged} merge-on-read)");
    assert_eq!(compared, 137, "every corpus check ran");
    check_corpus_errors(&ctx).await;
}
