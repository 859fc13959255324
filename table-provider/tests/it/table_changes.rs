//! `table_changes(...)`: every snapshot's changes against Spark 3.5 + Iceberg 1.10's changelog
//! view where Spark computes one, and otherwise (delete files: Spark refuses them) against an
//! independent model, the difference of the two snapshots' full contents as Spark reads them,
//! paired by identifier fields into UPDATE_BEFORE / UPDATE_AFTER. And timestamp bounds: the
//! snapshots committed in (start, end], the same rows as the snapshot-id form.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::prelude::SessionContext;
use petrel_table_provider::changes::TableChangesFunction;
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, TableIdent};
use serde_json::Value;

use crate::common;

/// A session over `catalogs` with `table_changes` registered.
fn changes_session(catalogs: Vec<(&str, Arc<dyn Catalog>)>) -> SessionContext {
    let ctx = common::session(catalogs);
    let function = TableChangesFunction::new(Arc::clone(ctx.state().catalog_list()))
        .with_default_catalog("iceberg");
    ctx.register_udtf("table_changes", Arc::new(function));
    ctx
}

/// One change row as comparable text: the table's columns (current schema), then
/// `_change_type`, `_change_ordinal`, `_commit_snapshot_id`.
fn row_text(row: &[Value]) -> String {
    Value::Array(row.to_vec()).to_string()
}

/// Petrel's rows of `sql`, as sorted texts.
async fn petrel_rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = common::query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows: Vec<String> = common::rows_json(&batches, &[])
        .iter()
        .map(|r| row_text(r))
        .collect();
    rows.sort();
    rows
}

/// The rows of a `{columns, rows}` result (a snapshot's contents in that snapshot's schema)
/// projected onto `current` columns by field id: `renamed` maps each of its column names to
/// the current name of the same field (a column absent then reads as null).
fn contents_in_current_schema(
    result: &Value,
    current: &[String],
    renamed: &HashMap<String, String>,
) -> Vec<Vec<Value>> {
    let columns: Vec<String> = result["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            renamed
                .get(c.as_str().expect("name"))
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    result["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            current
                .iter()
                .map(|c| match columns.iter().position(|n| n == c) {
                    Some(i) => row[i].clone(),
                    None => Value::Null,
                })
                .collect()
        })
        .collect()
}

/// The model of one snapshot's changes: the multiset difference of the rows before and after,
/// a key's one deleted and one inserted row paired as an update (`identifiers`: column
/// indexes); sorted texts with `ordinal` and `snapshot_id`.
fn model_changes(
    before: &[Vec<Value>],
    after: &[Vec<Value>],
    identifiers: &[usize],
    ordinal: i64,
    snapshot_id: i64,
) -> Vec<String> {
    let mut counts: HashMap<String, (i64, Vec<Value>)> = HashMap::new();
    for row in before {
        counts.entry(row_text(row)).or_insert((0, row.clone())).0 -= 1;
    }
    for row in after {
        counts.entry(row_text(row)).or_insert((0, row.clone())).0 += 1;
    }
    let mut deleted = Vec::new();
    let mut inserted = Vec::new();
    for (_, (n, row)) in counts {
        for _ in 0..n.abs() {
            if n < 0 {
                deleted.push(row.clone());
            } else {
                inserted.push(row.clone());
            }
        }
    }
    let key = |row: &Vec<Value>| {
        row_text(
            &identifiers
                .iter()
                .map(|i| row[*i].clone())
                .collect::<Vec<_>>(),
        )
    };
    let mut out = Vec::new();
    let mut typed = |row: &Vec<Value>, change: &str| {
        let mut r = row.clone();
        r.push(Value::from(change));
        r.push(Value::from(ordinal));
        r.push(Value::from(snapshot_id));
        out.push(row_text(&r));
    };
    // Per identifier key: the rows deleted and the rows inserted with that key.
    type DeletedAndInserted<'a> = (Vec<&'a Vec<Value>>, Vec<&'a Vec<Value>>);
    let mut by_key: HashMap<String, DeletedAndInserted> = HashMap::new();
    if !identifiers.is_empty() {
        for row in &deleted {
            by_key.entry(key(row)).or_default().0.push(row);
        }
        for row in &inserted {
            by_key.entry(key(row)).or_default().1.push(row);
        }
    }
    let paired = |row: &Vec<Value>| {
        by_key
            .get(&key(row))
            .is_some_and(|(d, i)| d.len() == 1 && i.len() == 1)
    };
    for row in &deleted {
        typed(
            row,
            if !identifiers.is_empty() && paired(row) {
                "UPDATE_BEFORE"
            } else {
                "DELETE"
            },
        );
    }
    for row in &inserted {
        typed(
            row,
            if !identifiers.is_empty() && paired(row) {
                "UPDATE_AFTER"
            } else {
                "INSERT"
            },
        );
    }
    out.sort();
    out
}

/// Column names of `table`'s current schema, and for each schema id a map from that schema's
/// column names to the current names of the same fields.
async fn schemas_of(
    catalog: &dyn Catalog,
    table: &str,
) -> (
    Vec<String>,
    HashMap<i32, HashMap<String, String>>,
    Vec<usize>,
) {
    let loaded = catalog
        .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), table))
        .await
        .expect("load");
    let metadata = loaded.metadata();
    let current = metadata.current_schema();
    let names: Vec<String> = current
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    let mut by_schema = HashMap::new();
    for schema in metadata.schemas_iter() {
        let map = schema
            .as_struct()
            .fields()
            .iter()
            .filter_map(|f| {
                current
                    .field_by_id(f.id)
                    .map(|now| (f.name.clone(), now.name.clone()))
            })
            .collect();
        by_schema.insert(schema.schema_id(), map);
    }
    let identifiers = current
        .identifier_field_ids()
        .filter_map(|id| current.as_struct().fields().iter().position(|f| f.id == id))
        .collect();
    (names, by_schema, identifiers)
}

/// Spark's changelog of one snapshot (`changelog.py`'s step) as sorted texts over `current`
/// columns and the change columns; `None` where Spark did not compute one.
fn spark_changelog(step: &Value, current: &[String]) -> Option<Vec<String>> {
    if step["changelog"].is_null() {
        return None;
    }
    let mut columns: Vec<String> = current.to_vec();
    columns.extend(["_change_type", "_change_ordinal", "_commit_snapshot_id"].map(String::from));
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut rows: Vec<String> = common::result_rows(&step["changelog"], &names)
        .iter()
        .map(|r| serde_json::from_str::<Value>(r).expect("json").to_string())
        .collect();
    rows.sort();
    Some(rows)
}

/// For every snapshot of the corpus tables, `table_changes` over (parent, snapshot] equals
/// Spark's changelog view where Spark computes it (Spark reads the moved Spark-written tables
/// through a Hadoop mount table; it refuses delete files, and cannot follow the `file:` paths of
/// the PyIceberg-written ones), and always the difference of the two snapshots' contents as
/// Spark recorded them (`version_as_of`); the whole history in one call equals the snapshots'
/// changes with their ordinals. One Spark run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_changes_equal_spark_changelog_and_the_difference_of_contents() {
    let warehouse = common::corpus_dir().join("warehouse");
    let catalog: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let ctx = changes_session(vec![("iceberg", Arc::clone(&catalog))]);
    let corpus = common::corpus_tables(&common::corpus_dir());
    let index: Value = serde_json::from_slice(
        &std::fs::read(common::corpus_dir().join("index.json")).expect("index.json"),
    )
    .expect("index json");
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    if let Some(origin) = index["origin"].as_str() {
        args.push("--moved-from".into());
        args.push(origin.into());
    }
    args.push(warehouse.clone().into());
    args.extend(corpus.iter().map(|(t, _)| t.into()));
    let spark = common::spark_script("changelog.py", &args);
    let mut compared = 0;
    let mut with_deletes = 0;
    let mut by_spark = 0;
    for (table, expected) in corpus {
        let (current, by_schema, identifiers) = schemas_of(catalog.as_ref(), &table).await;
        let loaded = catalog
            .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), &table))
            .await
            .expect("load");
        let snapshots = expected["snapshots"].as_array().expect("snapshots");
        let contents = |id: i64| -> Vec<Vec<Value>> {
            let s = snapshots
                .iter()
                .find(|s| s["snapshot_id"].as_i64() == Some(id))
                .expect("recorded snapshot");
            let schema_id = loaded
                .metadata()
                .snapshot_by_id(id)
                .and_then(|s| s.schema_id())
                .unwrap_or(loaded.metadata().current_schema_id());
            contents_in_current_schema(&s["version_as_of"], &current, &by_schema[&schema_id])
        };
        for s in snapshots {
            let id = s["snapshot_id"].as_i64().expect("id");
            let parent = s["parent_id"].as_i64();
            let before = parent.map(&contents).unwrap_or_default();
            let expected_rows = model_changes(&before, &contents(id), &identifiers, 0, id);
            let start = parent.map_or("NULL".to_string(), |p| p.to_string());
            let sql = format!("SELECT * FROM table_changes('iceberg.db.{table}', {start}, {id})");
            let got = petrel_rows(&ctx, &sql).await;
            assert_eq!(
                got.len(),
                expected_rows.len(),
                "{table} snapshot {id} ({}): {sql}",
                s["operation"]
            );
            assert_eq!(got, expected_rows, "{table} snapshot {id}: {sql}");
            let step = spark[&table]["snapshots"]
                .as_array()
                .and_then(|steps| steps.iter().find(|s| s["snapshot_id"].as_i64() == Some(id)))
                .unwrap_or_else(|| panic!("Spark's answer for {table} {id}"));
            if let Some(spark_rows) = spark_changelog(step, &current) {
                assert_eq!(
                    got, spark_rows,
                    "{table} snapshot {id} against Spark: {sql}"
                );
                by_spark += 1;
            }
            compared += 1;
            with_deletes += usize::from(
                s["summary"]["total-delete-files"]
                    .as_str()
                    .is_some_and(|n| n != "0"),
            );
        }
        // The main branch's whole history at once: the same rows, ordinals counting up.
        let main: Vec<i64> = {
            let mut chain = Vec::new();
            let mut next = loaded.metadata().current_snapshot_id();
            while let Some(id) = next {
                chain.push(id);
                next = loaded
                    .metadata()
                    .snapshot_by_id(id)
                    .and_then(|s| s.parent_snapshot_id());
            }
            chain.reverse();
            chain
        };
        let mut expected_all = Vec::new();
        let mut before = Vec::new();
        for (ordinal, id) in main.iter().enumerate() {
            let after = contents(*id);
            expected_all.extend(model_changes(
                &before,
                &after,
                &identifiers,
                ordinal as i64,
                *id,
            ));
            before = after;
        }
        expected_all.sort();
        let sql = format!("SELECT * FROM table_changes('iceberg.db.{table}', NULL)");
        assert_eq!(
            petrel_rows(&ctx, &sql).await,
            expected_all,
            "{table}: {sql}"
        );
    }
    assert!(compared >= 30, "{compared} snapshots compared");
    assert!(
        by_spark >= 5,
        "{by_spark} snapshots compared with Spark's changelog"
    );
    assert!(
        with_deletes >= 15,
        "{with_deletes} snapshots with delete files"
    );
}

/// Statements Spark runs to write its tables: copy-on-write with and without identifier fields
/// (Spark's changelog answers: updates, carry-overs of rewritten files, a compaction), and
/// merge-on-read v2 (position deletes) and v3 (deletion vectors) with identifier fields (Spark
/// refuses: the model answers).
fn spark_statements() -> Vec<String> {
    let mut out = Vec::new();
    for (table, props, ids) in [
        (
            "cow_ids",
            "'format-version'='2', 'write.delete.mode'='copy-on-write', \
             'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write'",
            true,
        ),
        (
            "cow_plain",
            "'format-version'='2', 'write.delete.mode'='copy-on-write', \
             'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write'",
            false,
        ),
        (
            "mor_ids",
            "'format-version'='2', 'write.delete.mode'='merge-on-read', \
             'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'",
            true,
        ),
        (
            "dv_ids",
            "'format-version'='3', 'write.delete.mode'='merge-on-read', \
             'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'",
            true,
        ),
    ] {
        let t = format!("iceberg.db.{table}");
        out.push(format!(
            "CREATE TABLE {t} (id BIGINT NOT NULL, part STRING NOT NULL, v STRING, n INT) \
             USING iceberg PARTITIONED BY (part) TBLPROPERTIES ({props})"
        ));
        if ids {
            out.push(format!("ALTER TABLE {t} SET IDENTIFIER FIELDS id"));
        }
        out.push(format!(
            "INSERT INTO {t} SELECT id, IF(id % 2 = 0, 'even', 'odd'), CONCAT('v', id), \
             CAST(id AS INT) FROM range(0, 40)"
        ));
        out.push(format!("INSERT INTO {t} VALUES (100, 'odd', 'late', NULL)"));
        out.push(format!(
            "UPDATE {t} SET v = CONCAT(v, '!'), n = n + 1 WHERE id IN (1, 2, 3, 30)"
        ));
        out.push(format!("DELETE FROM {t} WHERE id IN (4, 5, 100)"));
        out.push(format!(
            "MERGE INTO {t} t USING (SELECT * FROM VALUES (6L, 'even', 'six', 6), \
             (7L, 'odd', 'seven', 7), (200L, 'even', 'new', 200) AS s(id, part, v, n)) s \
             ON t.id = s.id WHEN MATCHED AND s.id = 7 THEN DELETE WHEN MATCHED THEN UPDATE SET * \
             WHEN NOT MATCHED THEN INSERT *"
        ));
        // An update that changes nothing: every rewritten row is a carry-over.
        out.push(format!("UPDATE {t} SET v = v WHERE id < 10"));
        out.push(format!("CALL iceberg.system.rewrite_data_files(table => 'db.{table}', options => map('min-input-files', '1'))"));
        out.push(format!(
            "INSERT INTO {t} VALUES (300, 'odd', 'after compaction', 3)"
        ));
    }
    out
}

/// Spark's tables and Petrel's upsert tables (equality deletes, v2 and v3, identifier field
/// `id`): every snapshot's `table_changes` equals Spark's changelog view where Spark computes
/// one (copy-on-write: updates, carry-overs, a compaction changing nothing) and the model of
/// the contents Spark reads where it refuses (position deletes, deletion vectors, equality
/// deletes). One Spark run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_and_upsert_tables_equal_spark_changelog_or_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    let ctx = changes_session(vec![("iceberg", Arc::clone(&catalog))]);
    for (table, version) in [("upsert_v2", 2), ("upsert_v3", 3)] {
        common::run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{table} (id BIGINT NOT NULL, v STRING, n INT, \
                 PRIMARY KEY (id)) USING iceberg TBLPROPERTIES ('format-version'='{version}', \
                 'write.upsert.enabled'='true')"
            ),
        )
        .await;
        for sql in [
            format!("INSERT INTO iceberg.db.{table} VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)"),
            // Two updates and a new key.
            format!(
                "INSERT INTO iceberg.db.{table} VALUES (1, 'a2', 10), (3, 'c2', 30), (4, 'd', 4)"
            ),
            // The same row again (a carry-over) and an update.
            format!("INSERT INTO iceberg.db.{table} VALUES (2, 'b', 2), (4, 'd2', 40)"),
            format!("DELETE FROM iceberg.db.{table} WHERE id = 3"),
        ] {
            common::write_count(&ctx, &sql).await;
        }
    }
    let statements = spark_statements();
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for s in &statements {
        args.push("--sql".into());
        args.push(s.into());
    }
    args.push(warehouse.clone().into());
    let tables = [
        "cow_ids",
        "cow_plain",
        "mor_ids",
        "dv_ids",
        "upsert_v2",
        "upsert_v3",
    ];
    args.extend(tables.iter().map(Into::into));
    let spark = common::spark_script("changelog.py", &args);

    let (mut by_spark, mut by_model, mut updates_spark, mut updates_model) = (0, 0, 0, 0);
    let mut refused_with_deletes = 0;
    for table in tables {
        let (current, by_schema, identifiers) = schemas_of(catalog.as_ref(), table).await;
        let steps = spark[table]["snapshots"].as_array().expect("snapshots");
        let contents = |id: i64| -> Vec<Vec<Value>> {
            let s = steps
                .iter()
                .find(|s| s["snapshot_id"].as_i64() == Some(id))
                .expect("snapshot");
            let schema_id = s["schema_id"].as_i64().expect("schema id") as i32;
            contents_in_current_schema(&s["contents"], &current, &by_schema[&schema_id])
        };
        for s in steps {
            let id = s["snapshot_id"].as_i64().expect("id");
            let parent = s["parent_id"].as_i64();
            let start = parent.map_or("NULL".to_string(), |p| p.to_string());
            let sql = format!("SELECT * FROM table_changes('iceberg.db.{table}', {start}, {id})");
            let got = petrel_rows(&ctx, &sql).await;
            let expected = if s["changelog"].is_null() {
                let error = s["changelog_error"].as_str().unwrap_or_default();
                assert!(
                    error.contains("Delete files are currently not supported"),
                    "{table} {id}: Spark refused for another reason: {error}"
                );
                refused_with_deletes += 1;
                by_model += 1;
                let before = parent.map(&contents).unwrap_or_default();
                let rows = model_changes(&before, &contents(id), &identifiers, 0, id);
                updates_model += rows.iter().filter(|r| r.contains("UPDATE_AFTER")).count();
                rows
            } else {
                by_spark += 1;
                let rows = spark_changelog(s, &current).expect("Spark's changelog");
                updates_spark += rows.iter().filter(|r| r.contains("UPDATE_AFTER")).count();
                rows
            };
            assert_eq!(
                got, expected,
                "{table} snapshot {id} ({}): {sql}",
                s["operation"]
            );
        }
    }
    assert!(
        by_spark >= 14,
        "{by_spark} snapshots compared with Spark's changelog"
    );
    assert!(
        by_model >= 10,
        "{by_model} snapshots compared with the model"
    );
    assert!(refused_with_deletes > 0);
    assert!(updates_spark >= 5, "{updates_spark} updates from Spark");
    assert!(updates_model >= 5, "{updates_model} updates from the model");
}

/// A commit time (epoch milliseconds) as SQL timestamp text, UTC: `2026-12-01 20:01:51.123`.
fn timestamp_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("a commit time")
        .naive_utc()
        .format("%Y-%m-%d %H:%M:%S%.3f")
        .to_string()
}

/// Timestamp bounds (`TIMESTAMP '…'` or a string, either end, mixed with a snapshot id) select
/// exactly the snapshots committed in (start, end] — a start at a commit's own instant excludes
/// that commit, an end at it includes it — and give the same rows as the snapshot-id form of
/// that range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_bounds_select_the_snapshots_committed_in_the_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    let ctx = changes_session(vec![("iceberg", Arc::clone(&catalog))]);
    common::run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.timed (id BIGINT NOT NULL, v STRING) USING iceberg \
         TBLPROPERTIES ('format-version'='2')",
    )
    .await;
    for sql in [
        "INSERT INTO iceberg.db.timed VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO iceberg.db.timed VALUES (3, 'c')",
        "DELETE FROM iceberg.db.timed WHERE id = 2",
        "UPDATE iceberg.db.timed SET v = 'c2' WHERE id = 3",
        "INSERT INTO iceberg.db.timed VALUES (4, 'd')",
    ] {
        common::write_count(&ctx, sql).await;
        // Commit times at least 20 ms apart: `t - 1` and `t + 1` fall between two commits.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The snapshots (id, commit time), oldest first.
    let table = catalog
        .load_table(&TableIdent::new(Namespace::from_dotted("db"), "timed"))
        .await
        .expect("load timed");
    let metadata = table.metadata();
    let mut snapshots = Vec::new();
    let mut next = metadata.current_snapshot_id();
    while let Some(id) = next {
        let s = metadata.snapshot_by_id(id).expect("ancestor");
        snapshots.push((id, s.timestamp_ms()));
        next = s.parent_snapshot_id();
    }
    snapshots.reverse();
    assert_eq!(snapshots.len(), 5, "one snapshot per statement");
    for pair in snapshots.windows(2) {
        assert!(pair[1].1 - pair[0].1 >= 20, "commits 20 ms apart: {pair:?}");
    }
    let id = |i: usize| snapshots[i].0;
    let at =
        |i: usize, delta: i64| format!("TIMESTAMP '{}'", timestamp_text(snapshots[i].1 + delta));
    let string_at = |i: usize| format!("'{}'", timestamp_text(snapshots[i].1));

    // (timestamp form, snapshot-id form, the snapshots in range)
    let cases: Vec<(String, String, Vec<usize>)> = vec![
        // A start at a commit's instant excludes it; an end at one includes it.
        (
            at(0, 0) + ", " + &at(3, 0),
            format!("{}, {}", id(0), id(3)),
            vec![1, 2, 3],
        ),
        // Before the first commit: from the first snapshot; just after a commit: up to it.
        (
            at(0, -1) + ", " + &at(2, 1),
            format!("NULL, {}", id(2)),
            vec![0, 1, 2],
        ),
        // Between commits at both ends.
        (
            at(1, 1) + ", " + &at(4, -1),
            format!("{}, {}", id(1), id(3)),
            vec![2, 3],
        ),
        // A string start, no end: up to the current snapshot.
        (
            string_at(2) + ", NULL",
            format!("{}, NULL", id(2)),
            vec![3, 4],
        ),
        // A string end; a snapshot id start.
        (
            format!("{}, {}", id(0), string_at(2)),
            format!("{}, {}", id(0), id(2)),
            vec![1, 2],
        ),
        // Start at the last commit: nothing after it.
        (at(4, 0), format!("{}", id(4)), vec![]),
        // After the last commit.
        (at(4, 1), format!("{}", id(4)), vec![]),
    ];
    for (by_time, by_id, expected) in cases {
        let sql_time = format!("SELECT * FROM table_changes('db.timed', {by_time})");
        let sql_id = format!("SELECT * FROM table_changes('db.timed', {by_id})");
        let rows = petrel_rows(&ctx, &sql_time).await;
        assert_eq!(
            rows,
            petrel_rows(&ctx, &sql_id).await,
            "{sql_time} vs {sql_id}"
        );
        let in_range = petrel_rows(
            &ctx,
            &format!(
                "SELECT DISTINCT _change_ordinal, _commit_snapshot_id FROM \
                 table_changes('db.timed', {by_time})"
            ),
        )
        .await;
        let expected: Vec<String> = expected
            .iter()
            .enumerate()
            .map(|(ordinal, &i)| format!("[{ordinal},{}]", id(i)))
            .collect();
        assert_eq!(in_range, expected, "{sql_time}");
    }
    // The rows of one range, exactly: the DELETE of id 2, then the UPDATE of id 3 (no
    // identifier fields: a DELETE and an INSERT).
    let rows = petrel_rows(
        &ctx,
        &format!(
            "SELECT * FROM table_changes('db.timed', {}, {})",
            at(1, 1),
            at(4, -1)
        ),
    )
    .await;
    assert_eq!(
        rows,
        vec![
            format!("[2,\"b\",\"DELETE\",0,{}]", id(2)),
            format!("[3,\"c\",\"DELETE\",1,{}]", id(3)),
            format!("[3,\"c2\",\"INSERT\",1,{}]", id(3)),
        ]
    );
}
