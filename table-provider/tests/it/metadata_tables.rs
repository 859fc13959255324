//! Metadata tables (`petrel_table_provider::metadata_tables`) against Spark 3.5 + Iceberg 1.10:
//! for tables Spark and Petrel write in the test (v2 merge-on-read with nested types, partition
//! evolution, a branch and a tag; v3 with deletion vectors and row lineage; equality deletes
//! through the Iceberg Java API; an unpartitioned table; a table Petrel wrote), every metadata
//! table's column names, types, nullability and rows equal Spark's `SELECT * FROM t.<meta>`
//! (one Spark run, `tests/spark/metadata_tables.py`), and so do the snapshot-scoped tables at
//! every snapshot (`VERSION AS OF`). Rows are compared as multisets.
//!
//! Normalised on both sides, and only this: timestamps are compared as microseconds since the
//! epoch (Python's datetimes and Arrow's are the same instants; a text form would differ in
//! format only), binary values as hex, map keys as text (JSON object keys).
//!
//! Metadata tables refuse INSERT, DELETE and UPDATE, and the whole-table ones time travel, with
//! the exact message.
//!
//! And for the fixture corpus (moved tables Spark cannot open where they are now): every
//! metadata table of every corpus table reads, and `delete_files` / `files` equal what Spark
//! recorded beside the tables (`expected/<table>.json`).

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Field, Float32Type, Float64Type, Int32Type, Int64Type, TimeUnit,
    TimestampMicrosecondType,
};
use common::{
    corpus_dir, corpus_tables, query, run_ddl, session, spark_script, warehouse_with_db,
    write_count,
};
use datafusion::prelude::SessionContext;
use petrel_table_provider::{Catalog, FileSystemCatalog, MetadataTableKind, Namespace, TableIdent};
use serde_json::{Value, json};

/// Spark's statements writing the test's tables (after Petrel wrote `pw`).
const SPARK_SQL: &[&str] = &[
    "CREATE TABLE iceberg.db.mix (id bigint, data string, ts timestamp, st struct<x: int, y: string>, tags array<string>, mp map<string, int>) USING iceberg PARTITIONED BY (bucket(4, id)) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    "INSERT INTO iceberg.db.mix VALUES (1, 'a', TIMESTAMP '2026-01-01 10:00:00', named_struct('x', 1, 'y', 'p'), array('t1'), map('k', 1)), (2, 'b', TIMESTAMP '2026-01-02 10:00:00', named_struct('x', 2, 'y', 'q'), array('t2', 't3'), map('k', 2)), (3, NULL, NULL, NULL, NULL, NULL)",
    "DELETE FROM iceberg.db.mix WHERE id = 2",
    "ALTER TABLE iceberg.db.mix ADD PARTITION FIELD days(ts)",
    "INSERT INTO iceberg.db.mix VALUES (4, 'd', TIMESTAMP '2026-01-03 10:00:00', named_struct('x', 4, 'y', 'r'), array(), map())",
    "ALTER TABLE iceberg.db.mix CREATE TAG t1",
    "ALTER TABLE iceberg.db.mix CREATE BRANCH b1 RETAIN 7 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
    "CREATE TABLE iceberg.db.dv (id int, v double) USING iceberg TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    "INSERT INTO iceberg.db.dv SELECT id, id * 1.5 FROM range(0, 100) AS r(id)",
    "INSERT INTO iceberg.db.dv SELECT id, id * 1.5 FROM range(100, 150) AS r(id)",
    "DELETE FROM iceberg.db.dv WHERE id % 10 = 0",
    "UPDATE iceberg.db.dv SET v = -1 WHERE id = 5",
    "CREATE TABLE iceberg.db.eq (id int, cat string) USING iceberg PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='2')",
    "INSERT INTO iceberg.db.eq VALUES (1, 'a'), (2, 'a'), (3, 'b')",
    "CREATE TABLE iceberg.db.flat (id int, name string) USING iceberg TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
    "INSERT INTO iceberg.db.flat VALUES (1, 'x'), (2, 'y'), (3, 'z')",
    "DELETE FROM iceberg.db.flat WHERE id = 2",
    "INSERT INTO iceberg.db.pw VALUES (5, 'spark')",
];

/// Equality deletes Spark's JVM commits through the Java API (Spark SQL cannot write them).
const EQ_DELETES: &[&str] =
    &[r#"{"table": "eq", "columns": ["id"], "rows": [{"id": 2, "cat": "a"}]}"#];

const TABLES: &[&str] = &["mix", "dv", "eq", "flat", "pw"];

/// A Spark schema type (its JSON form) as text: `struct<name!: type>` (`!`: not nullable).
fn spark_type(ty: &Value) -> String {
    if let Some(name) = ty.as_str() {
        return name.to_string();
    }
    match ty["type"].as_str() {
        Some("struct") => format!(
            "struct<{}>",
            ty["fields"]
                .as_array()
                .expect("fields")
                .iter()
                .map(|f| format!(
                    "{}{}: {}",
                    f["name"].as_str().expect("name"),
                    if f["nullable"].as_bool() == Some(false) {
                        "!"
                    } else {
                        ""
                    },
                    spark_type(&f["type"])
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some("array") => format!(
            "array<{}{}>",
            spark_type(&ty["elementType"]),
            if ty["containsNull"].as_bool() == Some(false) {
                "!"
            } else {
                ""
            }
        ),
        Some("map") => format!(
            "map<{}, {}{}>",
            spark_type(&ty["keyType"]),
            spark_type(&ty["valueType"]),
            if ty["valueContainsNull"].as_bool() == Some(false) {
                "!"
            } else {
                ""
            }
        ),
        other => panic!("unknown Spark type {other:?}"),
    }
}

/// An Arrow type in [`spark_type`]'s text (the names of Spark's SQL types).
fn arrow_type(ty: &DataType) -> String {
    let field = |f: &Field| {
        format!(
            "{}{}: {}",
            f.name(),
            if f.is_nullable() { "" } else { "!" },
            arrow_type(f.data_type())
        )
    };
    match ty {
        DataType::Boolean => "boolean".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "long".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 => "string".into(),
        DataType::Binary | DataType::FixedSizeBinary(_) => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp_ntz".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Struct(fields) => format!(
            "struct<{}>",
            fields
                .iter()
                .map(|f| field(f))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::List(element) => format!(
            "array<{}{}>",
            arrow_type(element.data_type()),
            if element.is_nullable() { "" } else { "!" }
        ),
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                panic!("map entries are a struct");
            };
            format!(
                "map<{}, {}{}>",
                arrow_type(kv[0].data_type()),
                arrow_type(kv[1].data_type()),
                if kv[1].is_nullable() { "" } else { "!" }
            )
        }
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn float(v: f64) -> Value {
    if v.is_nan() {
        json!("nan")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(v)
    }
}

/// Row `i` of `array` in `metadata_tables.py`'s normalised JSON.
fn value(array: &ArrayRef, i: usize) -> Value {
    if array.is_null(i) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Boolean => json!(array.as_boolean().value(i)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(i)),
        DataType::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(i))),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(i)),
        DataType::Date32 => json!(array.as_primitive::<Date32Type>().value(i)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            json!(array.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        DataType::Utf8 => json!(array.as_string::<i32>().value(i)),
        DataType::Binary => json!(hex(array.as_binary::<i32>().value(i))),
        DataType::FixedSizeBinary(_) => json!(hex(array.as_fixed_size_binary().value(i))),
        DataType::Struct(fields) => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), value(c, i)))
                    .collect(),
            )
        }
        DataType::List(_) => {
            let element = array.as_list::<i32>().value(i);
            Value::Array((0..element.len()).map(|j| value(&element, j)).collect())
        }
        DataType::Map(_, _) => {
            let entries = array.as_map().value(i);
            let (keys, values) = (entries.column(0), entries.column(1));
            Value::Object(
                (0..entries.len())
                    .map(|j| {
                        let key = match value(keys, j) {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        (key, value(values, j))
                    })
                    .collect(),
            )
        }
        other => panic!("no JSON form for {other:?}"),
    }
}

/// A value as text with object keys sorted (a canonical form to sort and compare rows by).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, String> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            format!(
                "{{{}}}",
                sorted
                    .iter()
                    .map(|(k, v)| format!("{k:?}:{v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The rows of `batches` as canonical texts, sorted.
fn petrel_rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows = Vec::new();
    for batch in batches {
        for i in 0..batch.num_rows() {
            let row: serde_json::Map<String, Value> = batch
                .schema()
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(f, c)| (f.name().clone(), value(c, i)))
                .collect();
            rows.push(canonical(&Value::Object(row)));
        }
    }
    rows.sort();
    rows
}

/// Runs `sql` and compares its columns and rows with Spark's `expected`
/// (`{schema, rows}`); a difference is returned as text.
async fn compare(ctx: &SessionContext, what: &str, sql: &str, expected: &Value) -> Option<String> {
    let batches = match query(ctx, sql).await {
        Ok(b) => b,
        Err(e) => return Some(format!("{what}: {sql} failed: {e}")),
    };
    let frame = ctx
        .sql(&petrel_table_provider::rewrite_time_travel(sql).expect("rewrite"))
        .await
        .expect("plans again");
    let schema = frame.schema().as_arrow().clone();
    let spark_fields: Vec<String> = expected["schema"]["fields"]
        .as_array()
        .expect("Spark schema")
        .iter()
        .map(|f| {
            format!(
                "{}{}: {}",
                f["name"].as_str().expect("name"),
                if f["nullable"].as_bool() == Some(false) {
                    "!"
                } else {
                    ""
                },
                spark_type(&f["type"])
            )
        })
        .collect();
    let petrel_fields: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| {
            format!(
                "{}{}: {}",
                f.name(),
                if f.is_nullable() { "" } else { "!" },
                arrow_type(f.data_type())
            )
        })
        .collect();
    if spark_fields != petrel_fields {
        return Some(format!(
            "{what}: columns differ\n  petrel {petrel_fields:?}\n  spark  {spark_fields:?}"
        ));
    }
    let actual = petrel_rows(&batches);
    let mut wanted: Vec<String> = expected["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(canonical)
        .collect();
    wanted.sort();
    if actual != wanted {
        let missing: Vec<&String> = wanted.iter().filter(|r| !actual.contains(r)).collect();
        let extra: Vec<&String> = actual.iter().filter(|r| !wanted.contains(r)).collect();
        return Some(format!(
            "{what}: rows differ ({} petrel, {} spark)\n  only petrel: {extra:#?}\n  only spark: {missing:#?}",
            actual.len(),
            wanted.len()
        ));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metadata_table_equals_sparks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    // A table Petrel writes (Spark appends to it too).
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.pw (id bigint, name string) USING iceberg \
         PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('format-version'='2')",
    )
    .await;
    write_count(
        &ctx,
        "INSERT INTO iceberg.db.pw VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    .await;
    write_count(&ctx, "INSERT INTO iceberg.db.pw VALUES (4, 'd')").await;

    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for statement in SPARK_SQL {
        args.push("--sql".into());
        args.push((*statement).into());
    }
    for d in EQ_DELETES {
        args.push("--eq-delete".into());
        args.push((*d).into());
    }
    args.push(warehouse.clone().into());
    args.extend(TABLES.iter().map(Into::into));
    let spark = spark_script("metadata_tables.py", &args);

    let mut failures = Vec::new();
    let mut compared = 0;
    let mut spark_failed = Vec::new();
    for table in TABLES {
        let tables = &spark[table]["tables"];
        for kind in MetadataTableKind::ALL {
            let expected = &tables[kind.name()];
            if let Some(error) = expected.get("error") {
                spark_failed.push(format!("{table}.{kind}: {error}"));
                // Spark cannot read it; Petrel must still answer.
                if let Err(e) =
                    query(&ctx, &format!("SELECT * FROM iceberg.db.{table}.{kind}")).await
                {
                    failures.push(format!("{table}.{kind}: {e}"));
                }
                continue;
            }
            // Spark's four-part name and Trino's quoted one.
            for sql in [
                format!("SELECT * FROM iceberg.db.{table}.{kind}"),
                format!("SELECT * FROM iceberg.db.\"{table}${kind}\""),
            ] {
                compared += 1;
                if let Some(f) = compare(&ctx, &format!("{table}.{kind}"), &sql, expected).await {
                    failures.push(f);
                }
            }
        }
        let versions = spark[table]["versions"].as_object().expect("versions");
        for (snapshot, metas) in versions {
            for (meta, expected) in metas.as_object().expect("metas") {
                if expected.get("error").is_some() {
                    spark_failed.push(format!("{table}.{meta} at {snapshot}"));
                    continue;
                }
                compared += 1;
                let sql =
                    format!("SELECT * FROM iceberg.db.{table}.{meta} VERSION AS OF {snapshot}");
                if let Some(f) =
                    compare(&ctx, &format!("{table}.{meta}@{snapshot}"), &sql, expected).await
                {
                    failures.push(f);
                }
            }
        }
    }
    eprintln!(
        "compared {compared} metadata tables with Spark's; Spark could not read: {spark_failed:#?}"
    );
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Spark reads all but `mix.position_deletes` (Iceberg 1.10 fails on a table with a list
    // column: "Invalid partition field parent: list<string>").
    assert!(compared > 5 * 16, "{compared}");
}

/// Every metadata table of every corpus table reads; `delete_files` and the count of data files
/// equal what Spark recorded beside the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_metadata_tables_match_sparks_recorded_answers() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog: std::sync::Arc<dyn Catalog> = std::sync::Arc::new(
        FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"),
    );
    let ctx = session(vec![("iceberg", catalog)]);
    let mut checked = 0;
    for (table, expected) in corpus_tables(&corpus_dir()) {
        for kind in MetadataTableKind::ALL {
            let sql = format!("SELECT * FROM iceberg.db.{table}.{kind}");
            query(&ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let sql = format!(
            "SELECT content, file_format, spec_id, equality_ids, record_count, \
             referenced_data_file, content_offset, content_size_in_bytes \
             FROM iceberg.db.{table}.delete_files"
        );
        let batches = query(&ctx, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let actual = petrel_rows(&batches);
        let mut wanted: Vec<String> = expected["delete_files"]
            .as_array()
            .expect("delete_files")
            .iter()
            .map(canonical)
            .collect();
        wanted.sort();
        assert_eq!(actual, wanted, "{table}: delete_files");
        let sql = format!("SELECT count(*) FROM iceberg.db.\"{table}$files\" WHERE content = 0");
        let count = common::single_i64(&query(&ctx, &sql).await.expect("count"));
        assert_eq!(
            Some(count),
            expected["data_files"].as_i64(),
            "{table}: data files"
        );
        checked += 1;
    }
    assert_eq!(checked, 8, "corpus tables");
}

/// The text of the error `sql` fails with (panics if it succeeds).
async fn error_of(ctx: &SessionContext, sql: &str) -> String {
    match query(ctx, sql).await {
        Ok(batches) => panic!("{sql} succeeded: {} batch(es)", batches.len()),
        Err(e) => e.strip_backtrace(),
    }
}

/// Metadata tables refuse writes (`INSERT`, `DELETE`, `UPDATE`) naming the table, and those that
/// describe the whole table (`snapshots`, `history`, `refs`, `metadata_log_entries`, the `all_*`
/// tables) refuse time travel, in Spark's naming and Trino's; the snapshot-scoped ones read at a
/// snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_tables_refuse_writes_and_whole_table_time_travel() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.ro (id bigint, name string) USING iceberg \
         TBLPROPERTIES ('format-version'='2')",
    )
    .await;
    write_count(&ctx, "INSERT INTO iceberg.db.ro VALUES (1, 'a'), (2, 'b')").await;
    write_count(&ctx, "INSERT INTO iceberg.db.ro VALUES (3, 'c')").await;
    let table = catalog
        .load_table(&TableIdent::new(Namespace::from_dotted("db"), "ro"))
        .await
        .expect("load ro");
    let current = table.metadata().current_snapshot().expect("a snapshot");
    let first = current.parent_snapshot_id().expect("a parent");

    for kind in MetadataTableKind::ALL {
        let meta = kind.name();
        let name = format!("db.ro${meta}");
        // The first column, to write an UPDATE every metadata table could take.
        let column = ctx
            .sql(&format!("SELECT * FROM iceberg.db.\"ro${meta}\""))
            .await
            .unwrap_or_else(|e| panic!("{meta}: {e}"))
            .schema()
            .field(0)
            .name()
            .clone();
        for (what, sql) in [
            (
                "INSERT",
                format!(
                    "INSERT INTO iceberg.db.\"ro${meta}\" SELECT * FROM iceberg.db.\"ro${meta}\""
                ),
            ),
            ("DELETE", format!("DELETE FROM iceberg.db.ro.{meta}")),
            (
                "DELETE",
                format!("DELETE FROM iceberg.db.\"ro${meta}\" WHERE {column} IS NULL"),
            ),
            (
                "UPDATE",
                format!("UPDATE iceberg.db.ro.{meta} SET {column} = {column}"),
            ),
        ] {
            let refused = format!(
                "External error: invalid argument: metadata table {name} is read-only: {what} \
                 is not allowed"
            );
            // (DataFusion names the statement's table around a DELETE's or UPDATE's error.)
            let expected = match what {
                "INSERT" => refused,
                _ => format!("{what} operation on table 'iceberg.{name}'\ncaused by\n{refused}"),
            };
            assert_eq!(error_of(&ctx, &sql).await, expected, "{sql}");
        }
    }

    let whole_table = [
        "snapshots",
        "history",
        "refs",
        "metadata_log_entries",
        "all_manifests",
        "all_files",
        "all_data_files",
        "all_delete_files",
        "all_entries",
    ];
    for kind in MetadataTableKind::ALL {
        let meta = kind.name();
        let spark = format!("SELECT count(*) FROM iceberg.db.ro.{meta} VERSION AS OF {first}");
        let trino =
            format!("SELECT count(*) FROM iceberg.db.\"ro${meta}\" FOR VERSION AS OF {first}");
        let by_ref = format!("SELECT count(*) FROM iceberg.db.ro.{meta} VERSION AS OF 'main'");
        if whole_table.contains(&meta) {
            for (sql, selector) in [
                (&spark, format!("snapshot {first}")),
                (&trino, format!("snapshot {first}")),
                (&by_ref, "ref \"main\"".to_string()),
            ] {
                assert_eq!(
                    error_of(&ctx, sql).await,
                    format!(
                        "External error: invalid argument: metadata table db.ro${meta} \
                         describes the whole table and cannot be read at a snapshot \
                         ({selector}); time travel applies to manifests, files, data_files, \
                         delete_files, entries, partitions and position_deletes"
                    ),
                    "{sql}"
                );
            }
        } else {
            for sql in [&spark, &trino, &by_ref] {
                query(&ctx, sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        }
    }
    // At the first snapshot, one data file; now two.
    let files = |sql: String| {
        let ctx = &ctx;
        async move {
            let batches = query(ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            batches[0].column(0).as_primitive::<Int64Type>().value(0)
        }
    };
    assert_eq!(
        files(format!(
            "SELECT count(*) FROM iceberg.db.ro.files VERSION AS OF {first}"
        ))
        .await,
        1
    );
    assert_eq!(
        files("SELECT count(*) FROM iceberg.db.ro.files".into()).await,
        2
    );
}
