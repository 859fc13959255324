//! Row lineage (format 3) through Petrel's row-level writes: after INSERTs, UPDATEs, a MERGE
//! (update + insert), a copy-on-write DELETE and `rewrite_data_files`, in merge-on-read and
//! copy-on-write mode, the surviving rows keep their `_row_id`, updated rows get the commit's
//! sequence number as `_last_updated_sequence_number`, unchanged rows keep theirs, inserted rows
//! get fresh ids at or above the snapshot's `first-row-id` (the table's previous `next-row-id`)
//! and all ids are distinct. Spark 3.5 + Iceberg 1.10 reads Petrel's tables at every snapshot
//! (`tests/spark/row_lineage.py`) and, in the same run, performs the same statements on tables of
//! its own: both histories are checked against the same model, and Petrel's own view of the
//! lineage (`row_level::scan_with_lineage`) equals Spark's. The corpus' Spark-written v3 tables
//! (explicit `_row_id`s from Spark's UPDATE) read with the lineage Spark recorded.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use common::{
    corpus_dir, corpus_tables, query, run_ddl, session, spark_script, warehouse_with_db,
    write_count,
};
use datafusion::prelude::SessionContext;
use petrel_table_provider::row_level::scan_with_lineage;
use petrel_table_provider::{FileSystemCatalog, IcebergTableProvider};
use serde_json::Value;

/// The two modes: (table suffix, TBLPROPERTIES).
const MODES: [(&str, &str); 2] = [
    (
        "mor",
        "'format-version'='3', 'write.update.mode'='merge-on-read', \
         'write.merge.mode'='merge-on-read', 'write.delete.mode'='copy-on-write'",
    ),
    (
        "cow",
        "'format-version'='3', 'write.update.mode'='copy-on-write', \
         'write.merge.mode'='copy-on-write', 'write.delete.mode'='copy-on-write'",
    ),
];

/// One statement and what it does to the rows (ids): values set, rows deleted.
struct Step {
    sql: String,
    /// id → new value (updated or inserted rows).
    set: BTreeMap<i64, &'static str>,
    deleted: BTreeSet<i64>,
    /// `CALL … rewrite_data_files` (no row count).
    rewrite: bool,
}

fn steps(table: &str) -> Vec<Step> {
    let step = |sql: String, set: &[(i64, &'static str)], deleted: &[i64]| Step {
        sql,
        set: set.iter().copied().collect(),
        deleted: deleted.iter().copied().collect(),
        rewrite: false,
    };
    let t = format!("iceberg.db.{table}");
    let first: Vec<(i64, &str)> = (0..6).map(|id| (id, "a")).collect();
    let second: Vec<(i64, &str)> = (6..10).map(|id| (id, "a")).collect();
    let values = |rows: &[(i64, &str)]| {
        rows.iter()
            .map(|(id, v)| format!("({id}, '{v}')"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        step(
            format!("INSERT INTO {t} VALUES {}", values(&first)),
            &first,
            &[],
        ),
        step(
            format!("INSERT INTO {t} VALUES {}", values(&second)),
            &second,
            &[],
        ),
        step(
            format!("UPDATE {t} SET v = 'u' WHERE id IN (1, 7)"),
            &[(1, "u"), (7, "u")],
            &[],
        ),
        step(
            format!(
                "MERGE INTO {t} AS t \
                 USING (SELECT 2 AS id, 'm' AS v UNION ALL SELECT 100 AS id, 'n' AS v) s \
                 ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v \
                 WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
            ),
            &[(2, "m"), (100, "n")],
            &[],
        ),
        step(format!("DELETE FROM {t} WHERE id = 3"), &[], &[3]),
        step(
            format!("UPDATE {t} SET v = 'w' WHERE id = 1"),
            &[(1, "w")],
            &[],
        ),
        Step {
            sql: format!(
                "CALL iceberg.system.rewrite_data_files(table => 'db.{table}', \
                 options => map('rewrite-all', 'true'))"
            ),
            set: BTreeMap::new(),
            deleted: BTreeSet::new(),
            rewrite: true,
        },
    ]
}

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

/// id → (`_row_id`, `_last_updated_sequence_number`) of the rows of `table`'s current snapshot
/// as Petrel reads them (`row_level::scan_with_lineage`; the id is the first column).
async fn petrel_lineage(ctx: &SessionContext, table: &str) -> BTreeMap<i64, (i64, i64)> {
    let provider = provider(ctx, table).await;
    let plan = scan_with_lineage(&ctx.state(), &provider)
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"));
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"));
    let mut out = BTreeMap::new();
    for batch in &batches {
        let n = batch.num_columns();
        let ids = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Int64)
            .expect("integer ids");
        let ids = ids.as_primitive::<Int64Type>();
        let row_ids = batch.column(n - 2).as_primitive::<Int64Type>();
        let updated = batch.column(n - 1).as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            assert!(
                row_ids.is_valid(i) && updated.is_valid(i),
                "{table}: lineage"
            );
            let row = (row_ids.value(i), updated.value(i));
            assert!(out.insert(ids.value(i), row).is_none(), "{table}: id twice");
        }
    }
    out
}

/// id → (`_row_id`, `_last_updated_sequence_number`) of rows `[id, …, _row_id, seq]`.
fn lineage_of(rows: &Value) -> BTreeMap<i64, (i64, i64)> {
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let r = r.as_array().expect("row");
            let n = r.len();
            let int = |v: &Value| v.as_i64().expect("an integer");
            (int(&r[0]), (int(&r[n - 2]), int(&r[n - 1])))
        })
        .collect()
}

/// Snapshot id → (sequence number, first-row-id), from the table's newest metadata file.
fn snapshot_numbers(warehouse: &std::path::Path, table: &str) -> HashMap<i64, (i64, i64)> {
    let dir = warehouse.join("db").join(table).join("metadata");
    let newest: Value = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".metadata.json"))
        .map(|p| serde_json::from_slice::<Value>(&std::fs::read(&p).expect("read")).expect("json"))
        .max_by_key(|m| {
            (
                m["last-sequence-number"].as_i64().unwrap_or(0),
                m["last-updated-ms"].as_i64().unwrap_or(0),
            )
        })
        .expect("a metadata file");
    newest["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| {
            (
                s["snapshot-id"].as_i64().expect("snapshot-id"),
                (
                    s["sequence-number"].as_i64().expect("sequence-number"),
                    s["first-row-id"].as_i64().expect("first-row-id"),
                ),
            )
        })
        .collect()
}

/// Checks the lineage Spark read at each snapshot of `table` against the model of `steps`.
fn check_history(table: &str, history: &Value, steps: &[Step], numbers: &HashMap<i64, (i64, i64)>) {
    let history = history
        .as_array()
        .unwrap_or_else(|| panic!("{table}: {history}"));
    assert_eq!(
        history.len(),
        steps.len(),
        "{table}: one snapshot per statement"
    );
    let mut model: BTreeMap<i64, String> = BTreeMap::new();
    // id → (row id, last updated sequence number) at the previous snapshot.
    let mut before: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (seen, step) in history.iter().zip(steps) {
        let what = format!("{table} after {:?}", step.sql);
        let snapshot = seen["snapshot_id"].as_i64().expect("snapshot_id");
        let (sequence, first_row_id) = numbers[&snapshot];
        for id in &step.deleted {
            model.remove(id);
        }
        for (id, v) in &step.set {
            model.insert(*id, (*v).to_string());
        }
        let columns: Vec<&str> = seen["columns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c.as_str().expect("name"))
            .collect();
        assert_eq!(
            columns,
            ["id", "v", "_row_id", "_last_updated_sequence_number"],
            "{what}"
        );
        let mut now: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        let mut values: BTreeMap<i64, String> = BTreeMap::new();
        for row in seen["rows"].as_array().expect("rows") {
            let id = row[0].as_i64().expect("id");
            let row_id = row[2]
                .as_i64()
                .unwrap_or_else(|| panic!("{what}: id {id} has no _row_id"));
            let updated = row[3]
                .as_i64()
                .unwrap_or_else(|| panic!("{what}: id {id} has no sequence number"));
            values.insert(id, row[1].as_str().expect("v").to_string());
            assert!(
                now.insert(id, (row_id, updated)).is_none(),
                "{what}: id {id} twice"
            );
        }
        assert_eq!(values, model, "{what}: rows");
        let distinct: BTreeSet<i64> = now.values().map(|(r, _)| *r).collect();
        assert_eq!(
            distinct.len(),
            now.len(),
            "{what}: _row_ids distinct: {now:?}"
        );
        for (id, (row_id, updated)) in &now {
            match before.get(id) {
                Some((old_row_id, old_updated)) => {
                    assert_eq!(row_id, old_row_id, "{what}: id {id} keeps its _row_id");
                    let expected = if step.set.contains_key(id) {
                        sequence
                    } else {
                        *old_updated
                    };
                    assert_eq!(
                        *updated, expected,
                        "{what}: id {id}'s _last_updated_sequence_number"
                    );
                }
                None => {
                    assert!(step.set.contains_key(id), "{what}: id {id} appeared");
                    assert!(
                        *row_id >= first_row_id,
                        "{what}: inserted id {id} has _row_id {row_id}, below the snapshot's \
                         first-row-id {first_row_id}"
                    );
                    assert_eq!(*updated, sequence, "{what}: inserted id {id}");
                }
            }
        }
        before = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_level_writes_keep_row_lineage_as_spark_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let mut spark_sql: Vec<String> = Vec::new();
    let mut tables: Vec<(String, Vec<Step>)> = Vec::new();
    for (mode, props) in MODES {
        // Petrel's table.
        let table = format!("petrel_{mode}");
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{table} (id BIGINT, v STRING) TBLPROPERTIES ({props})"
            ),
        )
        .await;
        let plan = steps(&table);
        for step in &plan {
            if step.rewrite {
                // The same CALL statement Spark runs (its snapshot is checked below).
                query(&ctx, &step.sql)
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", step.sql));
            } else {
                let changed = write_count(&ctx, &step.sql).await;
                assert_eq!(
                    changed as usize,
                    step.set.len() + step.deleted.len(),
                    "{}",
                    step.sql
                );
            }
        }
        let batches = query(&ctx, &format!("SELECT count(*) FROM iceberg.db.{table}"))
            .await
            .expect("count");
        assert_eq!(common::single_i64(&batches), 10, "{table}: rows");
        tables.push((table, plan));

        // Spark's reference table: the same statements, run by Spark.
        let reference = format!("spark_{mode}");
        spark_sql.push(format!(
            "CREATE TABLE iceberg.db.{reference} (id BIGINT, v STRING) USING iceberg \
             TBLPROPERTIES ({props})"
        ));
        let plan = steps(&reference);
        spark_sql.extend(plan.iter().map(|s| s.sql.clone()));
        tables.push((reference, plan));
    }

    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for statement in &spark_sql {
        args.push("--sql".into());
        args.push(statement.into());
    }
    args.push(warehouse.clone().into());
    args.extend(tables.iter().map(|(t, _)| t.into()));
    let seen = spark_script("row_lineage.py", &args);
    for (table, plan) in &tables {
        let numbers = snapshot_numbers(&warehouse, table);
        check_history(table, &seen[table], plan, &numbers);
    }
    for (mode, _) in MODES {
        // Petrel's tables have the lineage Spark gives its own after the same statements, at
        // every snapshot, up to the ids of the row the MERGE inserts: those follow from the
        // layout of the files written (Spark's copy-on-write MERGE writes it into the rewritten
        // file, Petrel into a file of its own), and both are fresh (checked above).
        let (petrel, spark) = (
            &seen[format!("petrel_{mode}")],
            &seen[format!("spark_{mode}")],
        );
        let merged: BTreeSet<i64> = BTreeSet::from([100]);
        let masked = |rows: &Value| -> BTreeMap<i64, (Option<i64>, i64)> {
            lineage_of(rows)
                .into_iter()
                .map(|(id, (row_id, seq))| (id, ((!merged.contains(&id)).then_some(row_id), seq)))
                .collect()
        };
        for (i, (p, s)) in petrel
            .as_array()
            .expect("history")
            .iter()
            .zip(spark.as_array().expect("history"))
            .enumerate()
        {
            assert_eq!(
                masked(&p["rows"]),
                masked(&s["rows"]),
                "{mode}: snapshot {i}: Petrel's lineage and Spark's"
            );
        }
        // Petrel's view of its tables' lineage is Spark's.
        let table = format!("petrel_{mode}");
        let last = seen[&table]
            .as_array()
            .and_then(|h| h.last())
            .expect("a snapshot");
        assert_eq!(
            petrel_lineage(&ctx, &table).await,
            lineage_of(&last["rows"]),
            "{table}: Petrel's and Spark's _row_id / _last_updated_sequence_number"
        );
    }
}

/// Spark-written v3 tables of the corpus (a DELETE, an UPDATE writing rows with explicit
/// `_row_id`s, deletion vectors, equality deletes): Petrel reads the lineage Spark recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_written_lineage_reads_as_spark_reads_it() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let (mut tables, mut updated) = (0, 0);
    for (table, expected) in corpus_tables(&corpus_dir()) {
        if expected["row_lineage"].is_null() {
            continue;
        }
        tables += 1;
        assert_eq!(
            expected["row_lineage"]["columns"],
            serde_json::json!(["id", "_row_id", "_last_updated_sequence_number"])
        );
        let spark = lineage_of(&expected["row_lineage"]["rows"]);
        // Rows an UPDATE rewrote: their files store the `_row_id`s explicitly.
        updated += spark.values().filter(|(_, seq)| *seq > 1).count();
        assert_eq!(petrel_lineage(&ctx, &table).await, spark, "{table}");
    }
    assert_eq!(tables, 2, "v3_dv and v3_eq_dv");
    assert!(updated > 0, "some rows with explicit _row_ids");
}

/// A copy-on-write DELETE rewrites the manifest of the files it keeps, and in format 3 writes out
/// each kept file's inherited `first_row_id`; the partition tuples of a spec whose field names
/// are not in alphabetical order (`ts_day`, `id_bucket`) stay in the spec's order (they came back
/// swapped, so partition filters pruned every file), as in format 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_on_write_delete_keeps_multi_field_partition_tuples() {
    let dir = tempfile::tempdir().expect("dir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    for version in [2, 3] {
        let table = format!("iceberg.db.parts_v{version}");
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, name STRING) USING iceberg \
                 PARTITIONED BY (days(ts), bucket(4, id)) TBLPROPERTIES ('format-version' = \
                 '{version}', 'write.delete.mode' = 'copy-on-write')"
            ),
        )
        .await;
        let inserted = write_count(
            &ctx,
            &format!(
                "INSERT INTO {table} VALUES (1, TIMESTAMP '2024-01-01 10:00:00', 'a'), \
                 (2, TIMESTAMP '2024-01-02 10:00:00', 'b'), (3, TIMESTAMP '2024-01-03 10:00:00', \
                 'c'), (4, TIMESTAMP '2024-01-04 10:00:00', 'd')"
            ),
        )
        .await;
        assert_eq!(inserted, 4);
        assert_eq!(
            write_count(&ctx, &format!("DELETE FROM {table} WHERE id = 1")).await,
            1
        );
        for (filter, want) in [
            ("true", 3),
            (
                "ts >= TIMESTAMP '2024-01-03 00:00:00' AND ts < TIMESTAMP '2024-01-04 00:00:00'",
                1,
            ),
            ("id = 3", 1),
            ("id = 1", 0),
        ] {
            let sql = format!("SELECT count(*) FROM {table} WHERE {filter}");
            let batches = query(&ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            let n = batches[0].column(0).as_primitive::<Int64Type>().value(0);
            assert_eq!(n, want, "format {version}: {sql}");
        }
    }
}
