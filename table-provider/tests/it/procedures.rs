//! Spark's maintenance procedures (`CALL iceberg.system.…`) and branch / tag statements through
//! Petrel's statement entry point, on both catalogs (filesystem and SQLite): rollback and
//! set-current then the rows read; `expire_snapshots` deleting exactly the files no retained
//! snapshot references (the directory listing checked against a model read from the manifests
//! by the test) while time travel to the retained snapshots still works; `remove_orphan_files`
//! finding planted orphans by age and never a referenced file; branches and tags created, read
//! and dropped; and Spark reading the result (rows, snapshots, refs).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use common::{query, session};
use datafusion::prelude::SessionContext;
use iceberg::spec::{DataContentType, FormatVersion, Manifest, ManifestList, ManifestStatus};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, SqlCatalog, TableIdent};

fn catalogs(dir: &Path) -> Vec<(&'static str, Arc<dyn Catalog>, PathBuf)> {
    let warehouse = dir.join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let fs: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("fs catalog"));
    let sql_wh = dir.join("sqlwh");
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(sql_wh.to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    vec![
        ("filesystem", fs, warehouse.join("db")),
        ("sql", sql, sql_wh.join("db")),
    ]
}

async fn setup(catalog: &Arc<dyn Catalog>, table: &str, props: &str) -> SessionContext {
    let ctx = session(vec![("iceberg", Arc::clone(catalog))]);
    let _ = catalog
        .create_namespace(&Namespace::new(vec!["db".into()]), true)
        .await;
    run(
        &ctx,
        &format!("CREATE TABLE iceberg.db.{table} (id BIGINT) TBLPROPERTIES ({props})"),
    )
    .await;
    ctx
}

async fn run(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

async fn error(ctx: &SessionContext, sql: &str) -> String {
    match query(ctx, sql).await {
        Ok(_) => panic!("{sql} succeeded"),
        Err(e) => e.to_string(),
    }
}

/// The `id`s a query returns, sorted.
async fn ids(ctx: &SessionContext, sql: &str) -> Vec<i64> {
    let mut out: Vec<i64> = run(ctx, sql)
        .await
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    out.sort_unstable();
    out
}

/// One row of longs (nulls as None), by column name.
fn long_row(batches: &[RecordBatch]) -> BTreeMap<String, Option<i64>> {
    assert_eq!(
        batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
        1,
        "one row"
    );
    let batch = batches.iter().find(|b| b.num_rows() == 1).expect("a row");
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| {
            let c = c.as_primitive::<Int64Type>();
            (f.name().clone(), (!c.is_null(0)).then(|| c.value(0)))
        })
        .collect()
}

fn ident(table: &str) -> TableIdent {
    TableIdent::new(Namespace::new(vec!["db".into()]), table)
}

async fn current(catalog: &Arc<dyn Catalog>, table: &str) -> i64 {
    catalog
        .load_table(&ident(table))
        .await
        .expect("load")
        .metadata()
        .current_snapshot_id()
        .expect("a snapshot")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_and_set_current_snapshot_on_both_catalogs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, catalog, _) in catalogs(dir.path()) {
        let ctx = setup(&catalog, "t", "'format-version'='2'").await;
        let mut snaps = Vec::new();
        for id in 1..=3 {
            run(&ctx, &format!("INSERT INTO iceberg.db.t VALUES ({id})")).await;
            snaps.push(current(&catalog, "t").await);
        }
        let (s1, s2, s3) = (snaps[0], snaps[1], snaps[2]);

        // Planning (and EXPLAIN) runs nothing.
        let state = ctx.state();
        let planned = petrel_table_provider::statements::plan_statement(
            &state,
            &format!("CALL iceberg.system.rollback_to_snapshot('db.t', {s1})"),
        )
        .await
        .expect("plan")
        .expect("a CALL");
        assert!(petrel_table_provider::statements::is_procedure_call(
            &planned
        ));
        assert_eq!(current(&catalog, "t").await, s3, "{kind}: planning ran it");

        let out = run(
            &ctx,
            &format!("CALL iceberg.system.rollback_to_snapshot('db.t', {s1})"),
        )
        .await;
        assert_eq!(
            long_row(&out),
            BTreeMap::from([
                ("previous_snapshot_id".into(), Some(s3)),
                ("current_snapshot_id".into(), Some(s1)),
            ]),
            "{kind}"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.t").await,
            [1],
            "{kind}"
        );

        let out = run(
            &ctx,
            &format!(
                "CALL iceberg.system.set_current_snapshot(TABLE => 'iceberg.db.t', Snapshot_Id => {s3})"
            ),
        )
        .await;
        assert_eq!(
            long_row(&out),
            BTreeMap::from([
                ("previous_snapshot_id".into(), Some(s1)),
                ("current_snapshot_id".into(), Some(s3)),
            ]),
            "{kind}"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.t").await,
            [1, 2, 3],
            "{kind}"
        );

        // Back to s1, then a new snapshot on it: s2 and s3 are no longer ancestors.
        run(
            &ctx,
            &format!(
                "CALL iceberg.system.rollback_to_snapshot(table => 'db.t', snapshot_id => {s1})"
            ),
        )
        .await;
        run(&ctx, "INSERT INTO iceberg.db.t VALUES (4)").await;
        let s4 = current(&catalog, "t").await;
        let err = error(
            &ctx,
            &format!("CALL iceberg.system.rollback_to_snapshot('db.t', {s2})"),
        )
        .await;
        assert!(err.contains("not an ancestor"), "{kind}: {err}");
        // set_current_snapshot takes any snapshot, or a ref.
        run(
            &ctx,
            &format!("ALTER TABLE iceberg.db.t CREATE TAG before_four AS OF VERSION {s2}"),
        )
        .await;
        let out = run(
            &ctx,
            "CALL iceberg.system.set_current_snapshot(table => 'db.t', ref => 'before_four')",
        )
        .await;
        assert_eq!(long_row(&out)["current_snapshot_id"], Some(s2), "{kind}");
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.t").await,
            [1, 2],
            "{kind}"
        );
        assert_eq!(
            ids(
                &ctx,
                &format!("SELECT id FROM iceberg.db.t FOR VERSION AS OF {s4}")
            )
            .await,
            [1, 4],
            "{kind}"
        );

        // Mistakes are named.
        for (sql, expected) in [
            (
                "CALL iceberg.system.no_such_thing('db.t')".to_string(),
                "procedure system.no_such_thing",
            ),
            (
                "CALL iceberg.system.rollback_to_snapshot(table => 'db.t')".to_string(),
                "missing required argument snapshot_id",
            ),
            (
                "CALL iceberg.system.rollback_to_snapshot('db.t', 'abc')".to_string(),
                "argument snapshot_id must be a long",
            ),
            (
                "CALL iceberg.system.rollback_to_snapshot('db.nope', 1)".to_string(),
                "table iceberg.db.nope does not exist",
            ),
            (
                "CALL iceberg.system.rollback_to_snapshot('db.t', 12345)".to_string(),
                "has no snapshot with id 12345",
            ),
            (
                format!(
                    "CALL iceberg.system.set_current_snapshot(table => 'db.t', snapshot_id => {s1}, ref => 'main')"
                ),
                "either snapshot_id or ref",
            ),
            (
                "CALL nope.system.expire_snapshots('db.t')".to_string(),
                "catalog nope does not exist",
            ),
        ] {
            let err = error(&ctx, &sql).await;
            assert!(err.contains(expected), "{kind}: {sql}: {err}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_and_tags_on_both_catalogs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, catalog, _) in catalogs(dir.path()) {
        let ctx = setup(&catalog, "b", "'format-version'='2'").await;
        run(&ctx, "INSERT INTO iceberg.db.b VALUES (1)").await;
        let s1 = current(&catalog, "b").await;
        run(&ctx, "INSERT INTO iceberg.db.b VALUES (2)").await;
        let s2 = current(&catalog, "b").await;

        run(
            &ctx,
            &format!("ALTER TABLE iceberg.db.b CREATE BRANCH audit AS OF VERSION {s1}"),
        )
        .await;
        run(
            &ctx,
            "ALTER TABLE iceberg.db.b CREATE TAG v2 RETAIN 30 DAYS",
        )
        .await;
        run(
            &ctx,
            "ALTER TABLE iceberg.db.b CREATE BRANCH IF NOT EXISTS audit",
        )
        .await;
        let table = catalog.load_table(&ident("b")).await.expect("load");
        let refs: BTreeMap<&str, i64> = table
            .refs()
            .iter()
            .map(|(n, r)| (n.as_str(), r.snapshot_id))
            .collect();
        assert_eq!(
            refs,
            BTreeMap::from([("audit", s1), ("main", s2), ("v2", s2)]),
            "{kind}"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.b VERSION AS OF 'audit'").await,
            [1],
            "{kind}"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.b FOR VERSION AS OF 'v2'").await,
            [1, 2],
            "{kind}"
        );

        // Writes to a branch move that branch only.
        run(
            &ctx,
            "INSERT INTO iceberg.db.b.branch_audit VALUES (5), (6)",
        )
        .await;
        run(&ctx, "INSERT INTO iceberg.db.b.BRANCH_audit SELECT 7").await;
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.b.branch_audit").await,
            [1, 5, 6, 7],
            "{kind}"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.b").await,
            [1, 2],
            "{kind}"
        );
        assert_eq!(
            current(&catalog, "b").await,
            s2,
            "{kind}: main did not move"
        );
        let table = catalog.load_table(&ident("b")).await.expect("load");
        let head = table.refs()["audit"].snapshot_id;
        let mut chain = Vec::new();
        let mut at = table.metadata().snapshot_by_id(head);
        while let Some(s) = at {
            chain.push(s.snapshot_id());
            at = s
                .parent_snapshot_id()
                .and_then(|p| table.metadata().snapshot_by_id(p));
        }
        assert_eq!(chain.len(), 3, "{kind}: two commits on the branch over s1");
        assert_eq!(chain[2], s1, "{kind}");
        let err = error(&ctx, "INSERT INTO iceberg.db.b.tag_v2 VALUES (9)").await;
        assert!(err.contains("snapshot or tag"), "{kind}: {err}");
        // Row-level writes commit to main: refused on a branch rather than misapplied.
        for sql in [
            "DELETE FROM iceberg.db.b.branch_audit WHERE id = 5",
            "UPDATE iceberg.db.b.branch_audit SET id = 8 WHERE id = 5",
            "MERGE INTO iceberg.db.b.branch_audit t USING (SELECT 5 AS id) s ON t.id = s.id \
             WHEN MATCHED THEN DELETE",
        ] {
            let err = error(&ctx, sql).await;
            assert!(err.contains("branch or tag"), "{kind}: {sql}: {err}");
        }

        for (sql, expected) in [
            (
                "ALTER TABLE iceberg.db.b CREATE BRANCH audit",
                "already exists",
            ),
            (
                "ALTER TABLE iceberg.db.b DROP TAG audit",
                "audit is a branch, not a tag",
            ),
            (
                "ALTER TABLE iceberg.db.b DROP BRANCH main",
                "cannot be dropped",
            ),
            (
                "ALTER TABLE iceberg.db.b DROP BRANCH nope",
                "does not exist",
            ),
            (
                "ALTER TABLE iceberg.db.b REPLACE TAG nope",
                "does not exist",
            ),
        ] {
            let err = error(&ctx, sql).await;
            assert!(err.contains(expected), "{kind}: {sql}: {err}");
        }

        run(
            &ctx,
            &format!("ALTER TABLE iceberg.db.b REPLACE BRANCH audit AS OF VERSION {s2}"),
        )
        .await;
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.b VERSION AS OF 'audit'").await,
            [1, 2],
            "{kind}"
        );
        run(&ctx, "ALTER TABLE iceberg.db.b DROP TAG v2").await;
        run(&ctx, "ALTER TABLE iceberg.db.b DROP TAG IF EXISTS v2").await;
        run(&ctx, "ALTER TABLE iceberg.db.b DROP BRANCH audit").await;
        let table = catalog.load_table(&ident("b")).await.expect("load");
        let names: BTreeSet<&str> = table.refs().keys().map(String::as_str).collect();
        assert_eq!(names, BTreeSet::from(["main"]), "{kind}");
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.b").await,
            [1, 2],
            "{kind}"
        );
    }
}

/// Every file under `dir`, recursively.
fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path);
            }
        }
    }
    out
}

fn local(location: &str) -> PathBuf {
    PathBuf::from(
        location
            .strip_prefix("file://")
            .or_else(|| location.strip_prefix("file:"))
            .unwrap_or(location),
    )
}

/// The model: for each snapshot of the table, the files it references (manifest list,
/// manifests, live data and delete files) and their kinds, read from the files themselves.
async fn files_by_snapshot(
    catalog: &Arc<dyn Catalog>,
    table: &str,
) -> BTreeMap<i64, BTreeMap<PathBuf, &'static str>> {
    let loaded = catalog.load_table(&ident(table)).await.expect("load");
    let metadata = loaded.metadata();
    let mut out = BTreeMap::new();
    for snapshot in metadata.snapshots() {
        let mut files = BTreeMap::new();
        let list_path = local(snapshot.manifest_list());
        files.insert(list_path.clone(), "manifest_lists");
        let list = ManifestList::parse_with_version(
            &std::fs::read(&list_path).expect("manifest list"),
            FormatVersion::V2,
        )
        .expect("parse list");
        for m in list.entries() {
            let path = local(&m.manifest_path);
            files.insert(path.clone(), "manifest_files");
            let manifest =
                Manifest::parse_avro(&std::fs::read(&path).expect("manifest")).expect("parse");
            for e in manifest.entries() {
                if e.status() != ManifestStatus::Deleted {
                    let kind = match e.content_type() {
                        DataContentType::Data => "data_files",
                        DataContentType::PositionDeletes => "position_delete_files",
                        DataContentType::EqualityDeletes => "equality_delete_files",
                    };
                    files.insert(local(e.file_path()), kind);
                }
            }
        }
        out.insert(snapshot.snapshot_id(), files);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_snapshots_deletes_exactly_the_unreachable_files_on_both_catalogs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, catalog, ns_dir) in catalogs(dir.path()) {
        let ctx = setup(
            &catalog,
            "e",
            "'format-version'='2', 'write.delete.mode'='merge-on-read'",
        )
        .await;
        run(&ctx, "INSERT INTO iceberg.db.e VALUES (1), (2)").await;
        let s1 = current(&catalog, "e").await;
        run(&ctx, "INSERT INTO iceberg.db.e VALUES (3)").await;
        let s2 = current(&catalog, "e").await;
        run(&ctx, "DELETE FROM iceberg.db.e WHERE id = 1").await;
        let s3 = current(&catalog, "e").await;
        run(&ctx, "INSERT OVERWRITE iceberg.db.e VALUES (10)").await;
        let s4 = current(&catalog, "e").await;
        run(&ctx, "INSERT INTO iceberg.db.e VALUES (11)").await;
        let s5 = current(&catalog, "e").await;
        run(
            &ctx,
            &format!("ALTER TABLE iceberg.db.e CREATE TAG keep AS OF VERSION {s2}"),
        )
        .await;

        // A tagged snapshot cannot be expired by id.
        let err = error(
            &ctx,
            &format!(
                "CALL iceberg.system.expire_snapshots(table => 'db.e', snapshot_ids => array({s2}))"
            ),
        )
        .await;
        assert!(
            err.contains("still referenced by refs: keep"),
            "{kind}: {err}"
        );

        let by_snapshot = files_by_snapshot(&catalog, "e").await;
        let table_dir = ns_dir.join("e");
        let before = listing(&table_dir);
        // Kept: s5 (main, retain_last 1), s2 (tag); s1, s3, s4 are older than now.
        let retained = [s5, s2];
        let kept: BTreeSet<&PathBuf> = retained
            .iter()
            .flat_map(|s| by_snapshot[s].keys())
            .collect();
        let gone: BTreeMap<PathBuf, &str> = by_snapshot
            .values()
            .flatten()
            .filter(|(f, _)| !kept.contains(f))
            .map(|(f, k)| (f.clone(), *k))
            .collect();
        assert!(
            gone.keys().all(|f| before.contains(f)),
            "{kind}: model files exist"
        );
        let count = |k: &str| Some(gone.values().filter(|v| **v == k).count() as i64);
        // This history: s1's, s3's and s4's manifest lists go; the delete file of s3 is in no
        // retained snapshot; the data file of (1, 2) is still in s2 (the tag).
        assert_eq!(count("manifest_lists"), Some(3), "{kind}: {gone:?}");
        assert_eq!(count("data_files"), Some(0), "{kind}: {gone:?}");
        let gone: BTreeSet<PathBuf> = gone.into_keys().collect();
        let expected_row = BTreeMap::from(
            [
                "data_files",
                "position_delete_files",
                "equality_delete_files",
                "manifest_files",
                "manifest_lists",
            ]
            .map(|k| {
                (
                    format!("deleted_{k}_count"),
                    by_snapshot
                        .values()
                        .flatten()
                        .filter(|(f, v)| **v == k && gone.contains(*f))
                        .map(|(f, _)| f)
                        .collect::<BTreeSet<_>>()
                        .len() as i64,
                )
            }),
        );

        let std_now = chrono::Utc::now() + chrono::Duration::seconds(1);
        let out = run(
            &ctx,
            &format!(
                "CALL iceberg.system.expire_snapshots(table => 'db.e', older_than => TIMESTAMP '{}', retain_last => 1)",
                std_now.format("%Y-%m-%d %H:%M:%S%.3f")
            ),
        )
        .await;
        let mut row = long_row(&out);
        assert_eq!(
            row.remove("deleted_statistics_files_count"),
            Some(Some(0)),
            "{kind}"
        );
        let row: BTreeMap<String, i64> = row
            .into_iter()
            .map(|(k, v)| (k, v.expect("a count")))
            .collect();
        assert_eq!(row, expected_row, "{kind}");
        assert!(
            expected_row["deleted_position_delete_files_count"] >= 1,
            "{kind}: {row:?}"
        );
        let after = listing(&table_dir);
        let expected: BTreeSet<PathBuf> = before.difference(&gone).cloned().collect();
        // Besides the deletions, the commit added one metadata file (the new current one).
        let added: Vec<&PathBuf> = after.difference(&before).collect();
        let new_metadata = catalog.load_table(&ident("e")).await.expect("load");
        assert_eq!(
            added,
            [&local(new_metadata.metadata_location())],
            "{kind}: only the new metadata file is new"
        );
        let after: BTreeSet<PathBuf> = after.intersection(&before).cloned().collect();
        assert_eq!(
            after, expected,
            "{kind}: exactly the unreachable files are deleted"
        );

        let table = catalog.load_table(&ident("e")).await.expect("load");
        let left: BTreeSet<i64> = table
            .metadata()
            .snapshots()
            .map(|s| s.snapshot_id())
            .collect();
        assert_eq!(left, BTreeSet::from([s2, s5]), "{kind}");
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.e").await,
            [10, 11],
            "{kind}"
        );
        assert_eq!(
            ids(
                &ctx,
                &format!("SELECT id FROM iceberg.db.e FOR VERSION AS OF {s2}")
            )
            .await,
            [1, 2, 3],
            "{kind}"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.e VERSION AS OF 'keep'").await,
            [1, 2, 3],
            "{kind}"
        );
        let err = error(
            &ctx,
            &format!("SELECT id FROM iceberg.db.e FOR VERSION AS OF {s1}"),
        )
        .await;
        assert!(err.contains("no snapshot"), "{kind}: {err}");
        let _ = (s3, s4);

        // Nothing more to expire: all zeros, nothing deleted.
        let out = run(
            &ctx,
            "CALL iceberg.system.expire_snapshots('db.e', TIMESTAMP '2000-01-01 00:00:00')",
        )
        .await;
        assert!(long_row(&out).values().all(|v| *v == Some(0)), "{kind}");
        let again: BTreeSet<PathBuf> = listing(&table_dir).intersection(&before).cloned().collect();
        assert_eq!(again, expected, "{kind}");
    }
}

fn set_age(path: &Path, age: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.set_modified(SystemTime::now() - age)
        .expect("set mtime");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_orphan_files_finds_planted_orphans_on_both_catalogs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let week = Duration::from_secs(7 * 24 * 3600);
    for (kind, catalog, ns_dir) in catalogs(dir.path()) {
        let ctx = setup(
            &catalog,
            "o",
            "'format-version'='2', 'write.delete.mode'='merge-on-read'",
        )
        .await;
        run(&ctx, "INSERT INTO iceberg.db.o VALUES (1), (2)").await;
        run(&ctx, "INSERT INTO iceberg.db.o VALUES (3)").await;
        run(&ctx, "DELETE FROM iceberg.db.o WHERE id = 2").await;
        let table_dir = ns_dir.join("o");
        // Every real file is old: only reachability keeps them.
        let real = listing(&table_dir);
        for f in &real {
            set_age(f, week);
        }
        let old_orphans = [
            table_dir.join("data/orphan-1.parquet"),
            table_dir.join("data/sub/orphan-2.parquet"),
            table_dir.join("metadata/orphan-m0.avro"),
        ];
        let fresh_orphan = table_dir.join("data/fresh.parquet");
        let hidden = table_dir.join("data/.orphan.parquet.crc");
        for f in old_orphans.iter().chain([&fresh_orphan, &hidden]) {
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, b"not referenced").expect("plant");
        }
        for f in old_orphans.iter().chain([&hidden]) {
            set_age(f, week);
        }
        let rows = |batches: &[RecordBatch]| -> BTreeSet<PathBuf> {
            batches
                .iter()
                .flat_map(|b| {
                    let c = b.column(0).as_string::<i32>();
                    (0..c.len()).map(|i| local(c.value(i))).collect::<Vec<_>>()
                })
                .collect()
        };
        let expected: BTreeSet<PathBuf> = old_orphans.iter().cloned().collect();

        let out = run(
            &ctx,
            "CALL iceberg.system.remove_orphan_files(table => 'db.o', dry_run => true)",
        )
        .await;
        assert_eq!(out[0].schema().field(0).name(), "orphan_file_location");
        assert_eq!(rows(&out), expected, "{kind}: dry run");
        assert!(
            old_orphans.iter().all(|f| f.exists()),
            "{kind}: dry run deletes nothing"
        );

        let out = run(&ctx, "CALL iceberg.system.remove_orphan_files('db.o')").await;
        assert_eq!(rows(&out), expected, "{kind}");
        assert!(old_orphans.iter().all(|f| !f.exists()), "{kind}: deleted");
        assert!(fresh_orphan.exists() && hidden.exists(), "{kind}");
        let mut left = real.clone();
        left.insert(fresh_orphan.clone());
        left.insert(hidden.clone());
        assert_eq!(
            listing(&table_dir),
            left,
            "{kind}: every referenced file stays"
        );
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.o").await,
            [1, 3],
            "{kind}"
        );

        // A cutoff in the future lists the fresh orphan too, and still nothing referenced;
        // deleting with a cutoff less than 24 hours ago is refused, as in Spark.
        let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1)).format("%Y-%m-%d %H:%M:%S");
        let out = run(
            &ctx,
            &format!(
                "CALL iceberg.system.remove_orphan_files(table => 'db.o', older_than => TIMESTAMP '{tomorrow}', dry_run => true)"
            ),
        )
        .await;
        assert_eq!(rows(&out), BTreeSet::from([fresh_orphan.clone()]), "{kind}");
        let err = error(
            &ctx,
            &format!(
                "CALL iceberg.system.remove_orphan_files(table => 'db.o', older_than => TIMESTAMP '{tomorrow}')"
            ),
        )
        .await;
        assert!(err.contains("less than 24 hours"), "{kind}: {err}");
        assert_eq!(listing(&table_dir), left, "{kind}");
        assert_eq!(
            ids(&ctx, "SELECT id FROM iceberg.db.o").await,
            [1, 3],
            "{kind}"
        );
    }
}

/// The `[id]` rows of a Spark result, sorted.
fn spark_ids(result: &serde_json::Value) -> Vec<i64> {
    let mut ids: Vec<i64> = common::result_rows(result, &["id"])
        .iter()
        .map(|r| serde_json::from_str::<Vec<i64>>(r).unwrap_or_else(|e| panic!("{r}: {e}"))[0])
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_rows_snapshots_and_refs_after_maintenance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    let ctx = setup(&catalog, "m", "'format-version'='2'").await;
    run(&ctx, "INSERT INTO iceberg.db.m VALUES (1)").await;
    let s1 = current(&catalog, "m").await;
    run(&ctx, "INSERT INTO iceberg.db.m VALUES (2)").await;
    let s2 = current(&catalog, "m").await;
    run(&ctx, "INSERT INTO iceberg.db.m VALUES (3)").await;
    let s3 = current(&catalog, "m").await;
    run(
        &ctx,
        &format!("CALL iceberg.system.rollback_to_snapshot('db.m', {s2})"),
    )
    .await;
    run(
        &ctx,
        &format!("ALTER TABLE iceberg.db.m CREATE BRANCH dev AS OF VERSION {s1}"),
    )
    .await;
    run(&ctx, "INSERT INTO iceberg.db.m.branch_dev VALUES (10)").await;
    run(&ctx, "ALTER TABLE iceberg.db.m CREATE TAG v1").await;
    let table = catalog.load_table(&ident("m")).await.expect("load");
    let s4 = table.refs()["dev"].snapshot_id;
    // Expired: s3 (on no branch any more) and s1 (beyond retain_last on main and dev).
    let now = (chrono::Utc::now() + chrono::Duration::seconds(1)).format("%Y-%m-%d %H:%M:%S%.3f");
    run(
        &ctx,
        &format!(
            "CALL iceberg.system.expire_snapshots(table => 'db.m', older_than => TIMESTAMP '{now}', retain_last => 1)"
        ),
    )
    .await;
    let out = run(
        &ctx,
        "CALL iceberg.system.remove_orphan_files(table => 'db.m', dry_run => true, older_than => TIMESTAMP '2200-01-01 00:00:00')",
    )
    .await;
    assert_eq!(
        out.iter().map(RecordBatch::num_rows).sum::<usize>(),
        0,
        "expire_snapshots left no orphan"
    );
    let _ = (s1, s3);

    let seen = common::read_back(&warehouse, &["m"]);
    let m = &seen["m"];
    assert_eq!(spark_ids(&m["spark"]), [1, 2], "Spark reads main");
    let snapshots: BTreeSet<i64> = m["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["snapshot_id"].as_i64().expect("id"))
        .collect();
    assert_eq!(snapshots, BTreeSet::from([s2, s4]), "Spark's snapshots");
    let refs: BTreeMap<String, (String, i64, Vec<i64>)> = m["refs"]
        .as_array()
        .expect("refs")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().expect("name").to_string(),
                (
                    r["type"].as_str().expect("type").to_string(),
                    r["snapshot_id"].as_i64().expect("snapshot"),
                    spark_ids(&r["spark"]),
                ),
            )
        })
        .collect();
    assert_eq!(
        refs,
        BTreeMap::from([
            ("dev".to_string(), ("BRANCH".to_string(), s4, vec![1, 10])),
            ("main".to_string(), ("BRANCH".to_string(), s2, vec![1, 2])),
            ("v1".to_string(), ("TAG".to_string(), s2, vec![1, 2])),
        ]),
        "Spark's refs and its rows at each"
    );
    // Time travel to both retained snapshots, in Spark and DuckDB.
    for v in m["versions"].as_array().expect("versions") {
        let id = v["snapshot_id"].as_i64().expect("id");
        let expected: Vec<i64> = if id == s2 { vec![1, 2] } else { vec![1, 10] };
        assert_eq!(spark_ids(&v["spark"]), expected, "Spark at {id}");
    }
    assert_eq!(
        common::duckdb_rows(m, &["id"]),
        ["[1]", "[2]"],
        "DuckDB reads main"
    );
}
