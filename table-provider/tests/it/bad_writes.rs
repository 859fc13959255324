//! Writes that must fail: wrong types, NULL into a NOT NULL column (in `VALUES` and found only
//! while writing), unknown columns, decimals that overflow, a partition transform on a column
//! of the wrong type. Each fails with an error saying what was wrong, commits nothing, and
//! leaves no file behind: no data file, no manifest, no metadata version — on both catalogs.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{query, session};
use datafusion::prelude::SessionContext;
use petrel_table_provider::ddl::{execute_ddl, parse_ddl};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, SqlCatalog, TableIdent};

async fn ddl(ctx: &SessionContext, sql: &str) -> petrel_table_provider::Result<u64> {
    let statement = parse_ddl(sql)?.unwrap_or_else(|| panic!("{sql} is not DDL"));
    execute_ddl(ctx, statement).await
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn table_dir(location: &str) -> PathBuf {
    PathBuf::from(location.trim_start_matches("file://"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_writes_fail_clearly_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let fs: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("fs catalog"));
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(dir.path().join("sqlwh").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    for (kind, catalog) in [("filesystem", fs), ("sql", sql)] {
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
        ddl(
            &ctx,
            "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, name STRING, \
             amount DECIMAL(5, 2), ts TIMESTAMP) PARTITIONED BY (days(ts), bucket(4, id)) \
             TBLPROPERTIES ('write.target-file-size-bytes'='1024')",
        )
        .await
        .expect("create");
        let inserted = query(
            &ctx,
            "INSERT INTO iceberg.db.t VALUES (1, 'a', 1.25, TIMESTAMP '2024-01-01 10:00:00')",
        )
        .await
        .expect("a good insert");
        assert_eq!(inserted.len(), 1);
        let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
        let before = catalog.load_table(&ident).await.expect("load");
        let location = table_dir(before.metadata().location());
        let files_before = files_under(&location);
        assert!(!files_before.is_empty());

        for (sql, needles) in [
            (
                "INSERT INTO iceberg.db.t VALUES ('one', 'a', 1.0, TIMESTAMP '2024-01-01 00:00:00')",
                &["one", "Int64"][..],
            ),
            (
                "INSERT INTO iceberg.db.t VALUES (NULL, 'a', 1.0, TIMESTAMP '2024-01-01 00:00:00')",
                &["id", "null"][..],
            ),
            (
                "INSERT INTO iceberg.db.t (id, nope) VALUES (1, 2)",
                &["nope"][..],
            ),
            (
                "INSERT INTO iceberg.db.t VALUES (2, 'b', 12345.67, TIMESTAMP '2024-01-02 00:00:00')",
                &["12345.67", "precision 5"][..],
            ),
            (
                "INSERT INTO iceberg.db.t VALUES (3, 'c')",
                &["got 2 values", "expected 4"][..],
            ),
            // The NULL is found while writing, after earlier batches were written to files.
            (
                "INSERT INTO iceberg.db.t SELECT CASE WHEN v = 30000 THEN NULL ELSE v END, \
                 repeat('x', 50), 1.5, to_timestamp_micros(1709251200000000 + v * 3600000000) \
                 FROM generate_series(1, 40000) AS s(v)",
                &["column id is NOT NULL", "1 row(s)"][..],
            ),
            // A NOT NULL column the INSERT leaves out.
            (
                "INSERT INTO iceberg.db.t (name) VALUES ('x')",
                &["column id is NOT NULL", "leaves out"][..],
            ),
        ] {
            let err = query(&ctx, sql)
                .await
                .expect_err(&format!("{kind}: {sql} must fail"));
            let text = err.to_string();
            for needle in needles {
                assert!(
                    text.to_lowercase().contains(&needle.to_lowercase()),
                    "{kind}: {sql}: the error names {needle}: {text}"
                );
            }
            let after = catalog.load_table(&ident).await.expect("load");
            assert_eq!(
                after.metadata_location(),
                before.metadata_location(),
                "{kind}: {sql}: nothing committed"
            );
            assert_eq!(
                files_under(&location),
                files_before,
                "{kind}: {sql}: no data file, manifest or metadata version left behind"
            );
        }
        let rows = query(&ctx, "SELECT count(*) FROM iceberg.db.t")
            .await
            .expect("count");
        assert_eq!(common::single_i64(&rows), 1, "{kind}");

        // A partition transform on a column of the wrong type creates nothing.
        for (sql, needle) in [
            (
                "CREATE TABLE iceberg.db.bad (name STRING) PARTITIONED BY (days(name))",
                "day",
            ),
            (
                "CREATE TABLE iceberg.db.bad (flag BOOLEAN) PARTITIONED BY (bucket(4, flag))",
                "bucket",
            ),
            (
                "CREATE TABLE iceberg.db.bad (x DOUBLE) PARTITIONED BY (truncate(4, x))",
                "truncate",
            ),
            (
                "CREATE TABLE iceberg.db.bad (x BIGINT) PARTITIONED BY (days(y))",
                "y",
            ),
        ] {
            let err = ddl(&ctx, sql)
                .await
                .expect_err(&format!("{kind}: {sql} must fail"));
            assert!(
                err.to_string().to_lowercase().contains(needle),
                "{kind}: {sql}: {err}"
            );
            let bad = TableIdent::new(Namespace::new(vec!["db".into()]), "bad");
            assert!(
                catalog.load_table(&bad).await.is_err(),
                "{kind}: {sql}: no table"
            );
        }
    }
}

/// A statement dropped in the middle of writing (the client went away) stops its writer tasks
/// and deletes every file they started, finished or not; nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_dropped_midway_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let catalog: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("fs catalog"));
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
    ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, name STRING) \
         PARTITIONED BY (bucket(8, id)) TBLPROPERTIES ('write.target-file-size-bytes'='4096')",
    )
    .await
    .expect("create");
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
    let before = catalog.load_table(&ident).await.expect("load");
    let location = table_dir(before.metadata().location());
    let files_before = files_under(&location);

    let insert_ctx = ctx.clone();
    let insert = tokio::spawn(async move {
        query(
            &insert_ctx,
            "INSERT INTO iceberg.db.t SELECT v, repeat('x', 40) FROM generate_series(1, 20000000) AS s(v)",
        )
        .await
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while files_under(&location).len() < files_before.len() + 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the insert wrote no files"
        );
        assert!(
            !insert.is_finished(),
            "the insert ended before it was dropped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    insert.abort();
    assert!(insert.await.expect_err("aborted").is_cancelled());

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while files_under(&location) != files_before && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // No upload still in flight adds a file later.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        files_under(&location),
        files_before,
        "every started file is deleted"
    );
    let after = catalog.load_table(&ident).await.expect("load");
    assert_eq!(
        after.metadata_location(),
        before.metadata_location(),
        "nothing committed"
    );
}
