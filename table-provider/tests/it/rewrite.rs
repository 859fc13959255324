//! Compaction: `rewrite_data_files` (bin-pack, every delete applied, one `replace` snapshot
//! that leaves no delete file after a full rewrite) and `rewrite_position_delete_files` (one
//! position-delete file per data file), called as library functions.
//!
//! - Petrel's own tables (v2 partitioned with position deletes, v3 unpartitioned with deletion
//!   vectors): rows equal to a model kept by the test, `where` rewriting only the partition it
//!   selects, fewer files, no delete files, operation `replace`, the previous snapshot still
//!   readable; then Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB read them back.
//! - Corpus tables written by Spark (position deletes, deletion vectors) and the Iceberg Java API
//!   / PyIceberg forks (equality deletes, partitioned and global): rows equal to what Spark read
//!   before the rewrite, new files at the data sequence number of the snapshot read.
//! - Races: an equality delete committed while the rewrite ran still deletes the rewritten rows
//!   (the sequence-number trap); a DELETE of the same files makes the rewrite fail cleanly
//!   (nothing resurrected, nothing lost, the files it wrote deleted); a concurrent append only
//!   makes it retry.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use common::{
    assert_result, copy_dir, corpus_dir, duckdb_rows, pyiceberg_rows, query, read_back,
    result_rows, rows_json, run_ddl, session, snapshot_operations, warehouse_with_db, write_count,
};
use datafusion::prelude::SessionContext;
use iceberg::spec::{
    FormatVersion, ManifestContentType, ManifestList, deserialize_data_file_from_json,
    serialize_data_file_to_json,
};
use petrel_table_provider::commit::{DeleteFile, SnapshotChange, commit_snapshot};
use petrel_table_provider::maintenance::{
    RewriteDataFilesOptions, RewriteDataFilesResult, rewrite_data_files,
    rewrite_position_delete_files,
};
use petrel_table_provider::plan::DeleteKind;
use petrel_table_provider::{Catalog, Error, IcebergTableProvider, Namespace, TableIdent};
use serde_json::{Value, json};

fn ident(table: &str) -> TableIdent {
    TableIdent::new(Namespace::new(vec!["db".into()]), table)
}

/// The table as a provider at its current snapshot, writing through its catalog.
async fn provider(ctx: &SessionContext, table: &str) -> IcebergTableProvider {
    let provider = ctx
        .table_provider(format!("iceberg.db.{table}"))
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"));
    provider
        .as_any()
        .downcast_ref::<IcebergTableProvider>()
        .expect("an Iceberg table")
        .clone()
}

fn options(pairs: &[(&str, &str)]) -> RewriteDataFilesOptions {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    RewriteDataFilesOptions::parse(&map).expect("options")
}

async fn rewrite(
    ctx: &SessionContext,
    table: &str,
    filter: Option<&str>,
    opts: &[(&str, &str)],
) -> RewriteDataFilesResult {
    let provider = provider(ctx, table).await;
    rewrite_data_files(&ctx.state(), &provider, filter, &options(opts))
        .await
        .unwrap_or_else(|e| panic!("{table}: rewrite_data_files: {e}"))
}

/// Sorted JSON texts of the rows of `sql`.
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out: Vec<String> = rows_json(&batches, &[])
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    out.sort();
    out
}

/// What a table's current snapshot holds, as the scan planner sees it.
struct Current {
    snapshot_id: i64,
    sequence_number: i64,
    operation: String,
    summary: HashMap<String, String>,
    /// Data file → (data sequence number, the delete files applying to it, of which position
    /// deletes and deletion vectors).
    files: BTreeMap<String, (i64, usize, usize)>,
}

async fn current(ctx: &SessionContext, table: &str) -> Current {
    let provider = provider(ctx, table).await;
    let metadata = provider.table().metadata();
    let snapshot = metadata.current_snapshot().expect("a snapshot");
    let plan = provider.plan(&[], None, 1).await.expect("plan");
    let mut files = BTreeMap::new();
    for task in plan.tasks() {
        let positional = task
            .deletes
            .iter()
            .filter(|d| !matches!(d.kind, DeleteKind::Equality { .. }))
            .count();
        files.insert(
            task.file.path.clone(),
            (task.file.sequence_number, task.deletes.len(), positional),
        );
    }
    Current {
        snapshot_id: snapshot.snapshot_id(),
        sequence_number: snapshot.sequence_number(),
        operation: snapshot.summary().operation.as_str().to_string(),
        summary: snapshot.summary().additional_properties.clone(),
        files,
    }
}

/// The live delete files of `table`'s current snapshot (from its manifests): path, and whether
/// it names its one data file (`referenced_data_file`).
async fn live_delete_files(catalog: &dyn Catalog, table: &str) -> Vec<(String, bool)> {
    let loaded = catalog.load_table(&ident(table)).await.expect("load");
    let metadata = loaded.metadata();
    let Some(snapshot) = metadata.current_snapshot() else {
        return Vec::new();
    };
    let bytes = loaded
        .io()
        .read(snapshot.manifest_list())
        .await
        .expect("list");
    let list =
        ManifestList::parse_with_version(&bytes, metadata.format_version()).expect("list parses");
    let mut out = Vec::new();
    for manifest_file in list.entries() {
        let bytes = loaded
            .io()
            .read(&manifest_file.manifest_path)
            .await
            .expect("manifest");
        let manifest = iceberg::spec::Manifest::parse_avro(&bytes).expect("manifest parses");
        if matches!(manifest.metadata().content(), ManifestContentType::Deletes) {
            out.extend(manifest.entries().iter().filter(|e| e.is_alive()).map(|e| {
                let file = e.data_file();
                (
                    file.file_path().to_string(),
                    file.referenced_data_file().is_some(),
                )
            }));
        }
    }
    out
}

fn parquet_files(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            n += parquet_files(&path);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            n += 1;
        }
    }
    n
}

/// Checks what every full rewrite must leave: rows as before, no delete files, the new data
/// files at the data sequence number of the snapshot read, the old snapshot unchanged.
async fn check_full_rewrite(
    ctx: &SessionContext,
    catalog: &dyn Catalog,
    table: &str,
    before: &Current,
    result: &RewriteDataFilesResult,
    rows_before: &[String],
    deletes_before: usize,
) {
    let after = current(ctx, table).await;
    assert_eq!(after.operation, "replace", "{table}");
    assert_eq!(Some(after.snapshot_id), result.snapshot_id, "{table}");
    assert_eq!(
        after.summary.get("total-delete-files").map(String::as_str),
        Some("0"),
        "{table}"
    );
    assert!(
        live_delete_files(catalog, table).await.is_empty(),
        "{table}"
    );
    assert_eq!(
        result.rewritten_data_files_count,
        before.files.len(),
        "{table}"
    );
    assert_eq!(result.added_data_files_count, after.files.len(), "{table}");
    assert!(
        after.files.len() <= before.files.len(),
        "{table}: no more files"
    );
    assert_eq!(
        result.removed_delete_files_count, deletes_before,
        "{table}: {result:?}"
    );
    for (path, (sequence_number, deletes, _)) in &after.files {
        assert_eq!(*deletes, 0, "{table}: {path} has deletes");
        assert_eq!(
            *sequence_number, before.sequence_number,
            "{table}: {path} keeps the data sequence number of the snapshot read"
        );
    }
    let sql = format!("SELECT * FROM iceberg.db.{table}");
    assert_eq!(rows(ctx, &sql).await, rows_before, "{table}: rows");
    let old = format!("{sql} VERSION AS OF {}", before.snapshot_id);
    assert_eq!(
        rows(ctx, &old).await,
        rows_before,
        "{table}: the snapshot before"
    );
}

/// A DELETE's predicate in SQL and in the model.
type Deletion = (&'static str, fn(i64) -> bool);

/// (id, region, amount) rows of the model as JSON texts, sorted.
fn model_rows(model: &BTreeMap<i64, (String, i64)>) -> Vec<String> {
    let mut out: Vec<String> = model
        .iter()
        .map(|(id, (region, amount))| json!([id, region, amount]).to_string())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn petrel_deletes_are_compacted_away_and_spark_reads_the_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let tables = [
        ("part_v2", 2, "PARTITIONED BY (region)"),
        ("flat_v3", 3, ""),
    ];
    let mut models = BTreeMap::new();
    for (table, version, partitioning) in tables {
        let name = format!("iceberg.db.{table}");
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE {name} (id BIGINT, region STRING, amount BIGINT) {partitioning} \
                 TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')"
            ),
        )
        .await;
        let mut model = BTreeMap::new();
        // Four inserts: four small files per partition.
        for batch in 0..4i64 {
            let mut values = Vec::new();
            for i in 0..30i64 {
                let id = batch * 100 + i;
                let region = ["north", "south", "east"][(i % 3) as usize];
                values.push(format!("({id}, '{region}', {})", id * 7));
                model.insert(id, (region.to_string(), id * 7));
            }
            query(
                &ctx,
                &format!("INSERT INTO {name} VALUES {}", values.join(", ")),
            )
            .await
            .expect("insert");
        }
        // Two DELETEs: the second merges into the first's delete files / vectors.
        let deletes: [Deletion; 2] = [
            ("id % 10 = 3", |id| id % 10 == 3),
            ("id % 10 = 6 OR id = 101", |id| id % 10 == 6 || id == 101),
        ];
        for (predicate, deleted_by) in deletes {
            let sql = format!("DELETE FROM {name} WHERE {predicate}");
            let deleted = write_count(&ctx, &sql).await;
            let before = model.len();
            model.retain(|id, _| !deleted_by(*id));
            assert_eq!(deleted, (before - model.len()) as u64, "{sql}");
        }
        assert_eq!(
            rows(&ctx, &format!("SELECT id, region, amount FROM {name}")).await,
            model_rows(&model),
            "{table}: before"
        );
        models.insert(table, model);
    }

    // `where` on the partition column: only region north is rewritten (min-input-files 2).
    let before = current(&ctx, "part_v2").await;
    let result = rewrite(
        &ctx,
        "part_v2",
        Some("region = 'north'"),
        &[("min-input-files", "2")],
    )
    .await;
    let after = current(&ctx, "part_v2").await;
    let north = |c: &Current| -> Vec<String> {
        c.files
            .keys()
            .filter(|p| p.contains("region=north"))
            .cloned()
            .collect()
    };
    let others = |c: &Current| -> BTreeMap<String, (i64, usize, usize)> {
        c.files
            .iter()
            .filter(|(p, _)| !p.contains("region=north"))
            .map(|(p, v)| (p.clone(), *v))
            .collect()
    };
    assert_eq!(north(&before).len(), 4);
    assert_eq!(result.rewritten_data_files_count, 4, "{result:?}");
    assert_eq!(result.added_data_files_count, 1, "{result:?}");
    assert_eq!(
        result.removed_delete_files_count, 4,
        "one per north file: {result:?}"
    );
    assert_eq!(north(&after).len(), 1);
    assert_eq!(after.files[&north(&after)[0]].1, 0, "no deletes in north");
    assert_eq!(others(&after), others(&before), "south and east untouched");
    assert_eq!(after.operation, "replace");
    let part_rows = model_rows(&models["part_v2"]);
    assert_eq!(
        rows(&ctx, "SELECT id, region, amount FROM iceberg.db.part_v2").await,
        part_rows
    );

    // Four files per partition is below min-input-files (5 by default) and, with the delete
    // ratio threshold raised above the files' (at most 3 rows of 10 deleted), nothing happens.
    let nothing = rewrite(&ctx, "part_v2", None, &[("delete-ratio-threshold", "0.5")]).await;
    assert_eq!(nothing, RewriteDataFilesResult::default());
    assert_eq!(
        current(&ctx, "part_v2").await.snapshot_id,
        after.snapshot_id
    );

    // Everything, in both tables.
    for (table, _, _) in tables {
        let before = current(&ctx, table).await;
        let rows_before = rows(&ctx, &format!("SELECT * FROM iceberg.db.{table}")).await;
        let deletes = live_delete_files(catalog.as_ref(), table).await.len();
        let result = rewrite(&ctx, table, None, &[("rewrite-all", "true")]).await;
        check_full_rewrite(
            &ctx,
            catalog.as_ref(),
            table,
            &before,
            &result,
            &rows_before,
            deletes,
        )
        .await;
    }
    assert_eq!(
        current(&ctx, "part_v2").await.files.len(),
        3,
        "one file per region"
    );
    assert_eq!(current(&ctx, "flat_v3").await.files.len(), 1);

    // A small target size rolls several files.
    let small = rewrite(
        &ctx,
        "flat_v3",
        None,
        &[("rewrite-all", "true"), ("target-file-size-bytes", "1")],
    )
    .await;
    assert_eq!(small.rewritten_data_files_count, 1);
    assert!(small.added_data_files_count >= 1);

    let seen = read_back(&warehouse, &["part_v2", "flat_v3"]);
    for (table, model) in &models {
        let t = &seen[*table];
        let expected = model_rows(model);
        assert_eq!(
            result_rows(&t["spark"], &["id", "region", "amount"]),
            expected,
            "{table}: Spark"
        );
        assert_eq!(
            duckdb_rows(t, &["id", "region", "amount"]),
            expected,
            "{table}: DuckDB"
        );
        let pyiceberg = pyiceberg_rows(t, &["id", "region", "amount"]);
        assert_eq!(pyiceberg, expected, "{table}: PyIceberg");
        let files = t["files"].as_array().expect("files");
        assert!(
            files.iter().all(|f| f["content"] == 0),
            "{table}: Spark sees no delete files: {files:?}"
        );
        let operations = snapshot_operations(t);
        assert_eq!(
            operations.last().map(String::as_str),
            Some("replace"),
            "{table}: {operations:?}"
        );
        // Spark's time travel to every snapshot agrees with Petrel's.
        for version in t["versions"].as_array().expect("versions") {
            let id = version["snapshot_id"].as_i64().expect("id");
            let petrel = rows(
                &ctx,
                &format!("SELECT id, region, amount FROM iceberg.db.{table} VERSION AS OF {id}"),
            )
            .await;
            assert_eq!(
                result_rows(&version["spark"], &["id", "region", "amount"]),
                petrel,
                "{table} at {id}"
            );
        }
    }
}

/// Copies corpus table `table` into `warehouse` as `name`.
fn copy_corpus(warehouse: &Path, table: &str, name: &str) {
    copy_dir(
        &corpus_dir().join("warehouse/db").join(table),
        &warehouse.join("db").join(name),
    );
}

fn expected(table: &str) -> Value {
    let path = corpus_dir().join("expected").join(format!("{table}.json"));
    serde_json::from_slice(&std::fs::read(path).expect("expected json")).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_and_java_deletes_are_applied_and_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let tables = [
        "v2_mor",
        "v3_dv",
        "v2_eq_java",
        "v3_eq_dv",
        "eq_sidequery",
        "eq_sidequery_part",
        "v2_evolved",
    ];
    for table in tables {
        copy_corpus(&warehouse, table, table);
    }
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    for table in tables {
        let expected = expected(table);
        let sql = format!("SELECT * FROM iceberg.db.{table}");
        let before = current(&ctx, table).await;
        assert!(
            before.files.values().any(|(_, d, _)| *d > 0),
            "{table} has deletes to apply"
        );
        let rows_before = rows(&ctx, &sql).await;
        let deletes = live_delete_files(catalog.as_ref(), table).await.len();
        let result = rewrite(&ctx, table, None, &[("rewrite-all", "true")]).await;
        // What Spark read before the rewrite is what Petrel reads after it.
        let batches = query(&ctx, &sql).await.expect("select");
        assert_result(
            &format!("{table} after rewrite"),
            &batches,
            &expected["current"],
        );
        check_full_rewrite(
            &ctx,
            catalog.as_ref(),
            table,
            &before,
            &result,
            &rows_before,
            deletes,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_delete_files_are_merged_per_data_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    copy_corpus(&warehouse, "v2_mor", "v2_mor");
    copy_corpus(&warehouse, "v3_dv", "v3_dv");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);

    let listed = live_delete_files(catalog.as_ref(), "v2_mor").await;
    assert!(
        listed.iter().any(|(_, file_scoped)| !file_scoped),
        "Spark wrote partition-scoped position deletes"
    );
    let deletes_before = listed.len();
    let provider = provider(&ctx, "v2_mor").await;
    // A filter no data file can match rewrites nothing.
    let none = rewrite_position_delete_files(&ctx.state(), &provider, Some("id < 0"))
        .await
        .expect("with a filter");
    assert_eq!(none.rewritten_delete_files_count, 0, "{none:?}");
    assert_eq!(none.snapshot_id, None);
    let result = rewrite_position_delete_files(&ctx.state(), &provider, None)
        .await
        .expect("rewrite_position_delete_files");
    assert!(result.rewritten_delete_files_count > 0, "{result:?}");
    assert!(result.added_bytes_count > 0, "{result:?}");
    let after = current(&ctx, "v2_mor").await;
    assert_eq!(after.operation, "replace");
    let with_deletes = after.files.values().filter(|(_, _, p)| *p > 0).count();
    assert!(
        after.files.values().all(|(_, _, p)| *p <= 1),
        "one per data file"
    );
    assert_eq!(
        live_delete_files(catalog.as_ref(), "v2_mor").await.len(),
        deletes_before - result.rewritten_delete_files_count + result.added_delete_files_count
    );
    assert_eq!(result.added_delete_files_count, with_deletes);
    let batches = query(&ctx, "SELECT * FROM iceberg.db.v2_mor")
        .await
        .expect("select");
    assert_result(
        "v2_mor after rewrite_position_delete_files",
        &batches,
        &expected("v2_mor")["current"],
    );
    // Again: nothing left to do.
    let provider = self::provider(&ctx, "v2_mor").await;
    let again = rewrite_position_delete_files(&ctx.state(), &provider, None)
        .await
        .expect("again");
    assert_eq!(again.rewritten_delete_files_count, 0, "{again:?}");
    assert_eq!(current(&ctx, "v2_mor").await.snapshot_id, after.snapshot_id);

    // Format 3: deletion vectors are one per data file already.
    let provider = self::provider(&ctx, "v3_dv").await;
    let v3 = rewrite_position_delete_files(&ctx.state(), &provider, None)
        .await
        .expect("v3");
    assert_eq!(
        v3.rewritten_delete_files_count + v3.added_delete_files_count,
        0
    );
}

/// `file` (a delete file of `table`'s spec `spec_id`) copied to a new path, as a new delete file.
async fn copied_delete_file(
    catalog: &dyn Catalog,
    table: &str,
    file: &iceberg::spec::DataFile,
    spec_id: i32,
) -> iceberg::spec::DataFile {
    let loaded = catalog.load_table(&ident(table)).await.expect("load");
    let metadata = loaded.metadata();
    let spec = metadata.partition_spec_by_id(spec_id).expect("spec");
    let schema = metadata.current_schema();
    let partition_type = spec.partition_type(schema).expect("partition type");
    let path = file.file_path().to_string();
    let copy = path.replace(".parquet", "-copy.parquet");
    let bytes = loaded.io().read(&path).await.expect("read delete file");
    loaded.io().create(&copy, bytes).await.expect("write copy");
    let text = serialize_data_file_to_json(file.clone(), &partition_type, FormatVersion::V2)
        .expect("json");
    let mut json: Value = serde_json::from_str(&text).expect("json");
    json["file_path"] = Value::from(copy);
    deserialize_data_file_from_json(&json.to_string(), spec_id, &partition_type, schema)
        .expect("data file")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_never_resurrect_or_lose_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    copy_corpus(&warehouse, "eq_sidequery", "eq_race");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);

    // 1. An equality delete committed after the rewrite read its snapshot. eq_sidequery deletes
    //    keys and re-inserts one later; committing one of its equality-delete files again (a
    //    new sequence number) deletes the re-inserted rows too. The rewritten rows must stay
    //    under it: with the commit's own sequence number they would come back.
    let stale = provider(&ctx, "eq_race").await;
    let loaded = catalog.load_table(&ident("eq_race")).await.expect("load");
    let snapshot = loaded.metadata().current_snapshot().expect("snapshot");
    let bytes = loaded
        .io()
        .read(snapshot.manifest_list())
        .await
        .expect("list");
    let list = ManifestList::parse_with_version(&bytes, FormatVersion::V2).expect("list");
    let mut equality = None;
    for manifest_file in list.entries() {
        let bytes = loaded
            .io()
            .read(&manifest_file.manifest_path)
            .await
            .expect("m");
        let manifest = iceberg::spec::Manifest::parse_avro(&bytes).expect("m");
        let spec_id = manifest.metadata().partition_spec().spec_id();
        if let Some(entry) = manifest.entries().iter().find(|e| {
            e.is_alive()
                && e.data_file().content_type() == iceberg::spec::DataContentType::EqualityDeletes
        }) {
            equality = Some((entry.data_file().clone(), spec_id));
        }
    }
    let (file, spec_id) = equality.expect("an equality-delete file");
    let copy = copied_delete_file(catalog.as_ref(), "eq_race", &file, spec_id).await;
    let change = SnapshotChange {
        added_deletes: vec![DeleteFile {
            spec_id,
            file: copy,
        }],
        ..SnapshotChange::default()
    };
    commit_snapshot(catalog.as_ref(), loaded, change)
        .await
        .expect("equality delete again");
    let sql = "SELECT * FROM iceberg.db.eq_race";
    let expected_rows = rows(&ctx, sql).await;
    assert!(
        expected_rows.len()
            < expected("eq_sidequery")["current"]["count"]
                .as_u64()
                .expect("n") as usize,
        "the copied equality delete deletes re-inserted rows"
    );
    let result = rewrite_data_files(
        &ctx.state(),
        &stale,
        None,
        &options(&[("rewrite-all", "true")]),
    )
    .await
    .expect("a concurrent equality delete is no conflict");
    assert!(result.snapshot_id.is_some());
    assert_eq!(rows(&ctx, sql).await, expected_rows, "no row resurrected");

    // 2. A DELETE of the same files committed while the rewrite ran: the rewrite fails with a
    //    conflict, deletes what it wrote, and the DELETE's rows stay deleted.
    let ctx2 = ctx.clone();
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.race (id BIGINT, region STRING, amount BIGINT) \
         TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')",
    )
    .await;
    let mut model = BTreeMap::new();
    for batch in 0..3i64 {
        let values: Vec<String> = (0..20i64)
            .map(|i| {
                let id = batch * 100 + i;
                model.insert(id, ("r".to_string(), id));
                format!("({id}, 'r', {id})")
            })
            .collect();
        query(
            &ctx,
            &format!("INSERT INTO iceberg.db.race VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert");
    }
    let data_dir = warehouse.join("db/race/data");
    let stale = provider(&ctx, "race").await;
    assert_eq!(
        write_count(&ctx2, "DELETE FROM iceberg.db.race WHERE id % 4 = 0").await,
        15
    );
    model.retain(|id, _| id % 4 != 0);
    let files_before = parquet_files(&data_dir);
    let e = rewrite_data_files(
        &ctx.state(),
        &stale,
        None,
        &options(&[("rewrite-all", "true")]),
    )
    .await
    .expect_err("a DELETE of the rewritten files conflicts");
    assert!(matches!(e, Error::ConcurrentModification { .. }), "{e}");
    assert_eq!(
        parquet_files(&data_dir),
        files_before,
        "the rewrite's files are deleted"
    );
    let race_sql = "SELECT id, 'r' AS region, amount FROM iceberg.db.race";
    let model_rows_now: Vec<String> = model
        .iter()
        .map(|(id, (r, a))| json!([id, r, a]).to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        rows(&ctx, race_sql).await,
        model_rows_now,
        "nothing resurrected"
    );

    // 3. An append while the rewrite ran: a retry, and both land.
    let stale = provider(&ctx, "race").await;
    query(&ctx, "INSERT INTO iceberg.db.race VALUES (999, 'r', 999)")
        .await
        .expect("append");
    model.insert(999, ("r".into(), 999));
    let result = rewrite_data_files(
        &ctx.state(),
        &stale,
        None,
        &options(&[("rewrite-all", "true")]),
    )
    .await
    .expect("appends do not conflict");
    assert_eq!(result.rewritten_data_files_count, 3);
    let after = current(&ctx, "race").await;
    assert_eq!(
        after.files.len(),
        2,
        "the rewritten file and the appended one"
    );
    assert!(live_delete_files(catalog.as_ref(), "race").await.is_empty());
    assert_eq!(rows(&ctx, race_sql).await, model_rows(&model));

    // 4. A DELETE and a rewrite racing for real, several rounds: whichever wins, the rows are
    //    the model's (the DELETE's rows gone exactly when it reported success).
    for round in 0..4i64 {
        let values: Vec<String> = (0..10i64)
            .map(|i| {
                let id = 1000 + round * 100 + i;
                model.insert(id, ("r".to_string(), id));
                format!("({id}, 'r', {id})")
            })
            .collect();
        query(
            &ctx,
            &format!("INSERT INTO iceberg.db.race VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert");
        let victim = 1000 + round * 100 + 3;
        let stale = provider(&ctx, "race").await;
        let state = ctx.state();
        let all = options(&[("rewrite-all", "true")]);
        let delete_sql = format!(
            "DELETE FROM iceberg.db.race WHERE id = {victim} OR id = {}",
            victim + 1
        );
        let (deleted, rewritten) = tokio::join!(
            query(&ctx2, &delete_sql),
            rewrite_data_files(&state, &stale, None, &all)
        );
        match &rewritten {
            Ok(_) => {}
            Err(Error::ConcurrentModification { .. }) => {}
            Err(e) => panic!("round {round}: rewrite: {e}"),
        }
        match deleted {
            Ok(_) => {
                model.remove(&victim);
                model.remove(&(victim + 1));
            }
            Err(e) => assert!(
                e.to_string().contains("concurrent") || e.to_string().contains("Concurrent"),
                "round {round}: DELETE: {e}"
            ),
        }
        assert_eq!(
            rows(&ctx, race_sql).await,
            model_rows(&model),
            "round {round}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_statements_options_and_filters() {
    let unknown = BTreeMap::from([("no-such-option".to_string(), "1".to_string())]);
    let e = RewriteDataFilesOptions::parse(&unknown).expect_err("unknown option");
    assert!(e.to_string().contains("no-such-option"), "{e}");
    let bad = BTreeMap::from([("min-input-files".to_string(), "zero".to_string())]);
    assert!(RewriteDataFilesOptions::parse(&bad).is_err());
    let unsafe_seq = BTreeMap::from([(
        "use-starting-sequence-number".to_string(),
        "false".to_string(),
    )]);
    assert!(RewriteDataFilesOptions::parse(&unsafe_seq).is_err());

    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (id BIGINT)").await;
    // No snapshot: nothing to do.
    assert_eq!(
        rewrite(&ctx, "t", None, &[]).await,
        RewriteDataFilesResult::default()
    );
    query(&ctx, "INSERT INTO iceberg.db.t VALUES (1)")
        .await
        .expect("insert");
    let provider = provider(&ctx, "t").await;
    let e = rewrite_data_files(&ctx.state(), &provider, Some("nope = 1"), &options(&[]))
        .await
        .expect_err("unknown column");
    assert!(e.to_string().contains("nope"), "{e}");
    // A filter matching no file rewrites nothing.
    let none = rewrite(&ctx, "t", Some("id > 100"), &[("rewrite-all", "true")]).await;
    assert_eq!(none, RewriteDataFilesResult::default());

    // Over SQL: CALL, Spark's argument names and output columns.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.c (id BIGINT, part STRING) PARTITIONED BY (part) \
         TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
    )
    .await;
    for values in ["(1, 'a'), (2, 'b')", "(3, 'a'), (4, 'b')", "(5, 'a')"] {
        query(&ctx, &format!("INSERT INTO iceberg.db.c VALUES {values}"))
            .await
            .expect("insert");
    }
    assert_eq!(
        write_count(&ctx, "DELETE FROM iceberg.db.c WHERE id IN (1, 4)").await,
        2
    );
    let call = "CALL iceberg.system.rewrite_position_delete_files(table => 'db.c')";
    let batches = query(&ctx, call)
        .await
        .unwrap_or_else(|e| panic!("{call}: {e}"));
    let schema = batches[0].schema();
    let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        columns,
        [
            "rewritten_delete_files_count",
            "added_delete_files_count",
            "rewritten_bytes_count",
            "added_bytes_count"
        ]
    );
    assert_eq!(
        rows_json(&batches, &[])[0][..2],
        [json!(0), json!(0)],
        "Petrel's deletes are one per data file already"
    );
    let call = "CALL iceberg.system.rewrite_data_files(table => 'db.c', \
                where => 'part = ''a''', options => map('min-input-files', '2'))";
    let batches = query(&ctx, call)
        .await
        .unwrap_or_else(|e| panic!("{call}: {e}"));
    let schema = batches[0].schema();
    let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        columns,
        [
            "rewritten_data_files_count",
            "added_data_files_count",
            "rewritten_bytes_count",
            "failed_data_files_count",
            "removed_delete_files_count"
        ]
    );
    let row = &rows_json(&batches, &[])[0];
    assert_eq!(
        [&row[0], &row[1], &row[3], &row[4]],
        [&json!(3), &json!(1), &json!(0), &json!(1)],
        "{row:?}"
    );
    assert_eq!(
        rows(&ctx, "SELECT id, part FROM iceberg.db.c").await,
        ["[2,\"b\"]", "[3,\"a\"]", "[5,\"a\"]"]
    );
    let bad = "CALL iceberg.system.rewrite_data_files(table => 'db.c', strategy => 'sort')";
    assert!(query(&ctx, bad).await.is_err(), "{bad}");
}
