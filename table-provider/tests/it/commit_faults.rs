//! The commit loop under injected catalog failures, on a real filesystem catalog wrapped so
//! that its `commit_table` fails on cue:
//!
//! - a lost race (`CommitConflict`) is retried on the reloaded table and the INSERT succeeds
//!   with one snapshot and no file left from the lost attempts;
//! - more conflicts than `commit.retry.num-retries` fail the INSERT and delete everything it
//!   wrote;
//! - an unknown outcome (`CommitStateUnknown`, here after the swap really happened) is reported
//!   as such, never retried, and no file is deleted: the committed snapshot stays readable;
//! - any other commit error deletes what the INSERT wrote and commits nothing.
//! - the same for an upsert, whose data files and equality-delete files go or stay together.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use common::{query, session, single_i64};
use datafusion::prelude::SessionContext;
use iceberg::spec::TableMetadata;
use petrel_table_provider::ddl::{execute_ddl, parse_ddl};
use petrel_table_provider::{
    Catalog, Error, FileSystemCatalog, LoadedTable, Namespace, Result, TableIdent,
};

/// What the wrapped catalog's next commits do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Commit normally.
    None,
    /// Report a lost race without committing, this many times.
    Conflicts(u32),
    /// Commit, then report that the outcome is unknown.
    UnknownAfterSuccess,
    /// Fail without committing.
    Broken,
}

#[derive(Debug)]
struct FaultyCatalog {
    inner: FileSystemCatalog,
    fault: std::sync::Mutex<Fault>,
    commits: AtomicU32,
}

impl FaultyCatalog {
    fn set(&self, fault: Fault) {
        *self.fault.lock().expect("lock") = fault;
        self.commits.store(0, Ordering::SeqCst);
    }
}

#[async_trait]
impl Catalog for FaultyCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        self.inner.list_namespaces().await
    }
    async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }
    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        self.inner.load_table(ident).await
    }
    async fn create_namespace(&self, namespace: &Namespace, if_not_exists: bool) -> Result<()> {
        self.inner.create_namespace(namespace, if_not_exists).await
    }
    async fn drop_namespace(&self, namespace: &Namespace) -> Result<()> {
        self.inner.drop_namespace(namespace).await
    }
    async fn default_table_location(&self, ident: &TableIdent) -> Result<String> {
        self.inner.default_table_location(ident).await
    }
    async fn create_table(
        &self,
        ident: &TableIdent,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        self.inner.create_table(ident, metadata).await
    }
    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        self.inner.drop_table(ident, purge).await
    }
    async fn commit_table(
        &self,
        base: &LoadedTable,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        let n = self.commits.fetch_add(1, Ordering::SeqCst);
        let fault = *self.fault.lock().expect("lock");
        let table = base.ident().to_string();
        match fault {
            Fault::Conflicts(k) if n < k => Err(Error::CommitConflict {
                table,
                message: format!("injected conflict {}", n + 1),
            }),
            Fault::UnknownAfterSuccess => {
                self.inner.commit_table(base, metadata).await?;
                Err(Error::CommitStateUnknown {
                    table,
                    message: "injected: the connection dropped after the swap".into(),
                })
            }
            Fault::Broken => Err(Error::InvalidArgument("injected catalog failure".into())),
            _ => self.inner.commit_table(base, metadata).await,
        }
    }
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
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

async fn count(ctx: &SessionContext) -> i64 {
    single_i64(
        &query(ctx, "SELECT count(*) FROM iceberg.db.t")
            .await
            .expect("count"),
    )
}

async fn snapshots(catalog: &FaultyCatalog) -> usize {
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
    catalog
        .load_table(&ident)
        .await
        .expect("load")
        .metadata()
        .snapshots()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_outcomes_decide_retries_and_cleanup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let catalog = Arc::new(FaultyCatalog {
        inner: FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"),
        fault: std::sync::Mutex::new(Fault::None),
        commits: AtomicU32::new(0),
    });
    let ctx = session(vec![("iceberg", Arc::clone(&catalog) as Arc<dyn Catalog>)]);
    for sql in [
        "CREATE SCHEMA iceberg.db",
        "CREATE TABLE iceberg.db.t (id BIGINT, part INT) PARTITIONED BY (part) \
         TBLPROPERTIES ('commit.retry.num-retries'='3', 'commit.retry.min-wait-ms'='1', \
         'commit.retry.max-wait-ms'='5')",
    ] {
        execute_ddl(&ctx, parse_ddl(sql).expect("parse").expect("ddl"))
            .await
            .expect(sql);
    }
    let table_dir = warehouse.join("db").join("t");
    let insert = "INSERT INTO iceberg.db.t VALUES (1, 1), (2, 2), (3, 3)";

    // Three conflicts, then success on the fourth attempt (the third retry).
    catalog.set(Fault::Conflicts(3));
    query(&ctx, insert).await.expect("retried until it won");
    assert_eq!(catalog.commits.load(Ordering::SeqCst), 4);
    assert_eq!(count(&ctx).await, 3);
    assert_eq!(snapshots(&catalog).await, 1);
    let settled = files_under(&table_dir);
    let manifest_lists = settled
        .iter()
        .filter(|p| p.to_string_lossy().contains("/snap-"))
        .count();
    assert_eq!(
        manifest_lists, 1,
        "lost attempts' manifest lists are deleted"
    );

    // Four conflicts: out of retries; the INSERT fails and leaves nothing.
    catalog.set(Fault::Conflicts(4));
    let err = query(&ctx, insert).await.expect_err("out of retries");
    assert!(err.to_string().contains("injected conflict 4"), "{err}");
    assert_eq!(catalog.commits.load(Ordering::SeqCst), 4);
    assert_eq!(files_under(&table_dir), settled, "nothing left behind");
    assert_eq!(count(&ctx).await, 3);

    // Any other failure: no retry, nothing left.
    catalog.set(Fault::Broken);
    let err = query(&ctx, insert).await.expect_err("broken catalog");
    assert!(
        err.to_string().contains("injected catalog failure"),
        "{err}"
    );
    assert_eq!(catalog.commits.load(Ordering::SeqCst), 1);
    assert_eq!(files_under(&table_dir), settled, "nothing left behind");

    // Unknown outcome (the swap happened): reported, not retried, nothing deleted, and the
    // snapshot it made is intact.
    catalog.set(Fault::UnknownAfterSuccess);
    let err = query(&ctx, insert).await.expect_err("unknown outcome");
    assert!(
        err.to_string().contains("dropped after the swap"),
        "the error says the outcome is unknown: {err}"
    );
    assert_eq!(catalog.commits.load(Ordering::SeqCst), 1, "never retried");
    catalog.set(Fault::None);
    assert_eq!(snapshots(&catalog).await, 2);
    assert_eq!(
        count(&ctx).await,
        6,
        "the data files of the unknown commit were kept"
    );
}

/// An upsert (data files and equality-delete files in one commit) under the same faults: a
/// failed commit deletes both kinds of files; an unknown outcome is not retried and keeps them,
/// and the upsert it made is what the table reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_upserts_leave_no_data_or_delete_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let catalog = Arc::new(FaultyCatalog {
        inner: FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"),
        fault: std::sync::Mutex::new(Fault::None),
        commits: AtomicU32::new(0),
    });
    let ctx = session(vec![("iceberg", Arc::clone(&catalog) as Arc<dyn Catalog>)]);
    for sql in [
        "CREATE SCHEMA iceberg.db",
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) \
         PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('write.upsert.enabled'='true', \
         'commit.retry.num-retries'='1', 'commit.retry.min-wait-ms'='1')",
    ] {
        execute_ddl(&ctx, parse_ddl(sql).expect("parse").expect("ddl"))
            .await
            .expect(sql);
    }
    let table_dir = warehouse.join("db").join("t");
    query(
        &ctx,
        "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    .await
    .expect("first upsert");
    let settled = files_under(&table_dir);
    let upsert = "INSERT INTO iceberg.db.t VALUES (1, 'x'), (4, 'y')";
    let values = |ctx: SessionContext| async move {
        let batches = query(&ctx, "SELECT v FROM iceberg.db.t ORDER BY id")
            .await
            .expect("read");
        common::rows_json(&batches, &[])
            .into_iter()
            .map(|r| r[0].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };

    for fault in [Fault::Broken, Fault::Conflicts(2)] {
        catalog.set(fault);
        query(&ctx, upsert).await.expect_err("commit fails");
        assert_eq!(
            files_under(&table_dir),
            settled,
            "{fault:?}: nothing left behind"
        );
    }
    assert_eq!(values(ctx.clone()).await, ["a", "b", "c"]);

    catalog.set(Fault::UnknownAfterSuccess);
    query(&ctx, upsert).await.expect_err("unknown outcome");
    assert_eq!(catalog.commits.load(Ordering::SeqCst), 1, "never retried");
    catalog.set(Fault::None);
    let kept = files_under(&table_dir);
    assert!(
        kept.iter()
            .any(|p| p.to_string_lossy().ends_with("-deletes.parquet") && !settled.contains(p)),
        "the unknown commit's equality deletes are kept"
    );
    assert_eq!(values(ctx.clone()).await, ["x", "b", "c", "y"]);
}
