//! Bad input never panics and never returns wrong rows: a missing or corrupt metadata file,
//! manifest list, manifest or data file gives an error naming the table and the file, and the
//! same session keeps answering good queries.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{copy_dir, corpus_dir, query, session};
use datafusion::prelude::SessionContext;
use petrel_table_provider::FileSystemCatalog;

/// A writable copy of the corpus table `pyiceberg_cow` (no deletes) and a session over it.
fn copy_of_table() -> (tempfile::TempDir, PathBuf, SessionContext) {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("warehouse/db/pyiceberg_cow");
    copy_dir(&corpus_dir().join("warehouse/db/pyiceberg_cow"), &table);
    let catalog = FileSystemCatalog::new(dir.path().join("warehouse").to_str().expect("utf8"))
        .expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    (dir, table, ctx)
}

fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

const QUERY: &str = "SELECT count(*) FROM iceberg.db.pyiceberg_cow";

async fn assert_fails_naming(ctx: &SessionContext, needles: &[&str]) {
    let err = query(ctx, "SELECT * FROM iceberg.db.pyiceberg_cow")
        .await
        .expect_err("query over a broken table must fail");
    let msg = err.to_string();
    for needle in needles {
        assert!(msg.contains(needle), "error lacks {needle:?}: {msg}");
    }
    // The session still serves other queries.
    let ok = query(ctx, "SELECT 1 AS one")
        .await
        .expect("session still works");
    assert_eq!(ok[0].num_rows(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_data_file_names_table_and_file() {
    let (_dir, table, ctx) = copy_of_table();
    assert!(query(&ctx, QUERY).await.is_ok());
    let victim = files_with(&table.join("data"), ".parquet")
        .pop()
        .expect("a data file");
    std::fs::remove_file(&victim).expect("remove");
    let name = victim
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert_fails_naming(&ctx, &["db.pyiceberg_cow", &name]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_data_file_names_table_and_file() {
    let (_dir, table, ctx) = copy_of_table();
    let victim = files_with(&table.join("data"), ".parquet")
        .pop()
        .expect("a data file");
    std::fs::write(&victim, b"this is not parquet at all").expect("overwrite");
    let name = victim
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert_fails_naming(&ctx, &["db.pyiceberg_cow", &name]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_manifest_names_table_and_file() {
    let (_dir, table, ctx) = copy_of_table();
    for manifest in files_with(&table.join("metadata"), ".avro") {
        let name = manifest
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !name.starts_with("snap-") {
            std::fs::write(&manifest, b"garbage").expect("overwrite");
        }
    }
    assert_fails_naming(&ctx, &["db.pyiceberg_cow", "cannot read manifest", ".avro"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_manifest_list_names_table_and_file() {
    let (_dir, table, ctx) = copy_of_table();
    for list in files_with(&table.join("metadata"), ".avro") {
        let name = list
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if name.starts_with("snap-") {
            std::fs::write(&list, b"garbage").expect("overwrite");
        }
    }
    assert_fails_naming(
        &ctx,
        &["db.pyiceberg_cow", "cannot read manifest list", "snap-"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_metadata_file_names_table_and_file() {
    let (_dir, table, ctx) = copy_of_table();
    let hint = std::fs::read_to_string(table.join("metadata/version-hint.text")).expect("hint");
    let current = table.join(format!("metadata/v{}.metadata.json", hint.trim()));
    std::fs::write(&current, b"{ not json").expect("overwrite");
    assert_fails_naming(
        &ctx,
        &[
            "db.pyiceberg_cow",
            "cannot read metadata file",
            &format!("v{}.metadata.json", hint.trim()),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_hint_falls_back_to_the_highest_metadata_version() {
    let (_dir, table, ctx) = copy_of_table();
    let before = query(&ctx, QUERY).await.expect("query");
    std::fs::remove_file(table.join("metadata/version-hint.text")).expect("remove hint");
    let after = query(&ctx, QUERY).await.expect("query without hint");
    assert_eq!(
        arrow::util::pretty::pretty_format_batches(&before)
            .expect("fmt")
            .to_string(),
        arrow::util::pretty::pretty_format_batches(&after)
            .expect("fmt")
            .to_string()
    );
}
