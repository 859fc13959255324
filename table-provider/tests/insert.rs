//! `INSERT INTO` through DataFusion: tables created through Petrel's catalogs, rows written by
//! Petrel's writers (partitioned fan-out, rolling files, exact metrics) and committed as Iceberg
//! snapshots — then read back by Petrel, by PyIceberg and by Spark 3.5 + Iceberg 1.10
//! (`tests/spark/read_back.py`), compared with the rows the statements inserted.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use common::{query, read_back, rows_json, session, single_i64, warehouse_with_db};
use datafusion::prelude::SessionContext;
use iceberg::spec::{
    FormatVersion, NestedField, PartitionSpec, PrimitiveType, Schema, SortOrder,
    TableMetadataBuilder, Transform, Type,
};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, SqlCatalog, TableIdent};
use serde_json::Value;

fn field(id: i32, name: &str, ty: PrimitiveType, required: bool) -> Arc<NestedField> {
    let ty = Type::Primitive(ty);
    Arc::new(if required {
        NestedField::required(id, name, ty)
    } else {
        NestedField::optional(id, name, ty)
    })
}

/// Creates `db.<name>` with `fields`, partitioned by `partitions` (source column, transform).
async fn create(
    catalog: &dyn Catalog,
    name: &str,
    fields: Vec<Arc<NestedField>>,
    partitions: &[(&str, Transform)],
    version: FormatVersion,
    properties: &[(&str, &str)],
) {
    let schema = Schema::builder()
        .with_fields(fields)
        .build()
        .expect("schema");
    let mut spec = PartitionSpec::builder(schema.clone());
    for (column, transform) in partitions {
        let target = match transform {
            Transform::Identity => column.to_string(),
            Transform::Bucket(_) => format!("{column}_bucket"),
            Transform::Truncate(_) => format!("{column}_trunc"),
            Transform::Day => format!("{column}_day"),
            Transform::Month => format!("{column}_month"),
            Transform::Year => format!("{column}_year"),
            Transform::Hour => format!("{column}_hour"),
            _ => format!("{column}_p"),
        };
        spec = spec
            .add_partition_field(*column, target, *transform)
            .expect("partition field");
    }
    let spec = spec.build().expect("spec");
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), name);
    let location = catalog
        .default_table_location(&ident)
        .await
        .expect("location");
    let props: HashMap<String, String> = properties
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let metadata = TableMetadataBuilder::new(
        schema,
        spec,
        SortOrder::unsorted_order(),
        location,
        version,
        props,
    )
    .expect("metadata builder")
    .build()
    .expect("metadata")
    .metadata;
    catalog
        .create_table(&ident, metadata)
        .await
        .expect("create table");
}

async fn run(ctx: &SessionContext, sql: &str) -> u64 {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let column = batches[0].column(0);
    column
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .unwrap_or_else(|| panic!("{sql}: count column"))
        .value(0)
}

/// The rows of `sql` as sorted JSON texts.
async fn rows(ctx: &SessionContext, sql: &str, types: &[&str]) -> Vec<String> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let types: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    let mut out: Vec<String> = rows_json(&batches, &types)
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    out.sort();
    out
}

const PARTED: &str = "iceberg.db.parted";

/// The statements of the scenario, run through `ctx`; returns the expected (id, s, n) rows.
async fn insert_scenario(ctx: &SessionContext) -> Vec<(i64, Option<String>, i64)> {
    let mut model = Vec::new();
    let specials = ["a/b=c d%", "日本", "x+y", "plain", "q?x#1"];
    let mut values = Vec::new();
    for i in 0..40i64 {
        let s = (i % 6 != 5).then(|| specials[(i % 6) as usize % specials.len()].to_string());
        values.push(format!(
            "({i}, {}, TIMESTAMP '2024-0{}-1{} 0{}:00:00', {})",
            s.as_ref().map_or("NULL".into(), |s| format!("'{s}'")),
            1 + i % 3,
            i % 10,
            i % 10,
            i * 7
        ));
        model.push((i, s, i * 7));
    }
    let n = run(
        ctx,
        &format!("INSERT INTO {PARTED} VALUES {}", values.join(", ")),
    )
    .await;
    assert_eq!(n, 40);
    // From the same table: every row again with new ids.
    let n = run(
        ctx,
        &format!("INSERT INTO {PARTED} SELECT id + 1000, s, ts, n FROM {PARTED}"),
    )
    .await;
    assert_eq!(n, 40);
    let copies: Vec<_> = model
        .iter()
        .map(|(i, s, n)| (i + 1000, s.clone(), *n))
        .collect();
    model.extend(copies);
    // Many rows: files roll at the table's small target size.
    let n = run(
        ctx,
        &format!(
            "INSERT INTO {PARTED} SELECT value + 5000, 'plain', TIMESTAMP '2024-02-02 02:00:00', value \
             FROM generate_series(1, 20000)"
        ),
    )
    .await;
    assert_eq!(n, 20000);
    model.extend((1..=20000).map(|v| (v + 5000, Some("plain".to_string()), v)));
    model
}

fn parted_fields() -> Vec<Arc<NestedField>> {
    vec![
        field(1, "id", PrimitiveType::Long, true),
        field(2, "s", PrimitiveType::String, false),
        field(3, "ts", PrimitiveType::Timestamp, false),
        field(4, "n", PrimitiveType::Long, false),
    ]
}

async fn check_scenario(ctx: &SessionContext, model: &[(i64, Option<String>, i64)]) -> Vec<String> {
    let count = single_i64(
        &query(ctx, &format!("SELECT count(*) FROM {PARTED}"))
            .await
            .expect("count"),
    );
    assert_eq!(count as usize, model.len());
    let got = rows(
        ctx,
        &format!("SELECT id, s, n FROM {PARTED}"),
        &["bigint", "string", "bigint"],
    )
    .await;
    let mut want: Vec<String> = model
        .iter()
        .map(|(i, s, n)| serde_json::json!([i, s, n]).to_string())
        .collect();
    want.sort();
    assert_eq!(got, want, "Petrel reads back what it inserted");
    // Partition pruning works on what Petrel wrote.
    let sql = format!("SELECT count(*) FROM {PARTED} WHERE s = 'a/b=c d%'");
    let expected = model
        .iter()
        .filter(|(_, s, _)| s.as_deref() == Some("a/b=c d%"))
        .count();
    assert_eq!(
        single_i64(&query(ctx, &sql).await.expect("q")) as usize,
        expected
    );
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_commit_snapshots_that_petrel_pyiceberg_and_spark_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    create(
        catalog.as_ref(),
        "parted",
        parted_fields(),
        &[
            ("s", Transform::Identity),
            ("id", Transform::Bucket(4)),
            ("ts", Transform::Day),
            ("n", Transform::Truncate(100)),
        ],
        FormatVersion::V2,
        &[("write.target-file-size-bytes", "8192")],
    )
    .await;
    create(
        catalog.as_ref(),
        "lineage",
        parted_fields(),
        &[("s", Transform::Identity), ("ts", Transform::Month)],
        FormatVersion::V3,
        &[],
    )
    .await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let model = insert_scenario(&ctx).await;
    let petrel_rows = check_scenario(&ctx, &model).await;
    // Format 3: two appends into a table with row lineage.
    for _ in 0..2 {
        let n = run(
            &ctx,
            &format!("INSERT INTO iceberg.db.lineage SELECT * FROM {PARTED} WHERE id < 1000"),
        )
        .await;
        assert_eq!(n, 40);
    }

    let seen = read_back(&warehouse, &["parted", "lineage"]);
    let lineage = &seen["lineage"];
    assert_eq!(lineage["metric_mismatches"], serde_json::json!([]));
    assert_eq!(
        lineage["row_lineage"],
        serde_json::json!({"rows": 80, "row_ids": 80, "distinct": 80, "min": 0, "max": 79}),
        "Spark reads a distinct _row_id for every row"
    );
    let parted = &seen["parted"];
    assert_eq!(
        parted["metric_mismatches"],
        serde_json::json!([]),
        "Spark finds every file's bounds and null counts true of its rows"
    );
    assert_eq!(parted["spark"]["count"].as_u64(), Some(model.len() as u64));
    assert_eq!(
        parted["pyiceberg"].as_array().map(Vec::len),
        Some(model.len())
    );
    assert_eq!(
        parted["snapshots"].as_array().map(Vec::len),
        Some(3),
        "one snapshot per INSERT"
    );
    for s in parted["snapshots"].as_array().expect("snapshots") {
        assert_eq!(s["operation"], "append");
    }
    let files = parted["files"].as_array().expect("files");
    assert!(
        files.len() > 20,
        "rolled and fanned out: {} files",
        files.len()
    );
    // Row for row, Spark and PyIceberg read what Petrel reads (and what was inserted).
    let project = |row: &Value, keys: [&str; 3]| -> String {
        Value::Array(keys.iter().map(|k| row[*k].clone()).collect()).to_string()
    };
    let mut spark_rows: Vec<String> = parted["spark"]["rows"]
        .as_array()
        .expect("spark rows")
        .iter()
        .map(|r| Value::Array(vec![r[0].clone(), r[1].clone(), r[3].clone()]).to_string())
        .collect();
    spark_rows.sort();
    assert_eq!(spark_rows, petrel_rows, "Spark reads Petrel's rows");
    let mut pyiceberg_rows: Vec<String> = parted["pyiceberg"]
        .as_array()
        .expect("pyiceberg rows")
        .iter()
        .map(|r| {
            let row: Value = serde_json::from_str(r.as_str().expect("row text")).expect("row json");
            project(&row, ["id", "s", "n"])
        })
        .collect();
    pyiceberg_rows.sort();
    assert_eq!(pyiceberg_rows, petrel_rows, "PyIceberg reads Petrel's rows");
    // Spark sees the partition values Petrel wrote, special characters included.
    let special = files
        .iter()
        .filter(|f| f["partition"]["s"] == "a/b=c d%")
        .count();
    assert!(special > 0, "a partition with s = 'a/b=c d%': {files:?}");
    assert!(
        files.iter().any(|f| f["file_path"]
            .as_str()
            .is_some_and(|p| p.contains("/s=a%2Fb%3Dc+d%25/"))),
        "its directory is encoded as Iceberg Java encodes it"
    );
}

/// 8 writers × 25 single-row INSERTs into one table at once: 200 rows, 200 snapshots, every
/// statement acknowledged — on both catalogs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_all_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let fs: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(warehouse.join("sql").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    for catalog in [fs, sql] {
        catalog
            .create_namespace(&Namespace::new(vec!["db".into()]), true)
            .await
            .expect("namespace");
        create(
            catalog.as_ref(),
            "busy",
            vec![
                field(1, "writer", PrimitiveType::Int, true),
                field(2, "i", PrimitiveType::Int, true),
            ],
            &[],
            FormatVersion::V2,
            &[
                ("commit.retry.num-retries", "100"),
                ("commit.retry.min-wait-ms", "5"),
                ("commit.retry.max-wait-ms", "200"),
            ],
        )
        .await;
        let mut tasks = Vec::new();
        for writer in 0..8 {
            let catalog = Arc::clone(&catalog);
            tasks.push(tokio::spawn(async move {
                let ctx = session(vec![("iceberg", catalog)]);
                for i in 0..25 {
                    let n = run(
                        &ctx,
                        &format!("INSERT INTO iceberg.db.busy VALUES ({writer}, {i})"),
                    )
                    .await;
                    assert_eq!(n, 1);
                }
            }));
        }
        for task in tasks {
            task.await.expect("writer");
        }
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        let count = single_i64(
            &query(
                &ctx,
                "SELECT count(DISTINCT (writer, i)) FROM iceberg.db.busy",
            )
            .await
            .expect("count"),
        );
        assert_eq!(count, 200);
        let table = catalog
            .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), "busy"))
            .await
            .expect("load");
        assert_eq!(table.metadata().snapshots().count(), 200, "{catalog:?}");
    }
}

/// Every file under `dir` but metadata, recursively (data files, and any staging leftovers).
fn data_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(data_files(&path));
            } else if !path.to_string_lossy().contains("/metadata/") {
                out.push(path);
            }
        }
    }
    out
}

/// Bad rows fail the statement with an error naming the problem, commit nothing and leave no
/// data file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inserts_fail_clearly_and_leave_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    create(
        catalog.as_ref(),
        "strict",
        vec![
            field(1, "id", PrimitiveType::Long, true),
            field(
                2,
                "amount",
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                false,
            ),
            field(3, "s", PrimitiveType::String, false),
        ],
        &[("s", Transform::Identity)],
        FormatVersion::V2,
        &[("write.target-file-size-bytes", "4096")],
    )
    .await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let table = "iceberg.db.strict";
    assert_eq!(
        run(&ctx, &format!("INSERT INTO {table} VALUES (1, 1.50, 'a')")).await,
        1
    );
    let files_before = data_files(&warehouse);
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "strict");
    let version = |t: &petrel_table_provider::LoadedTable| t.metadata_location().to_string();
    let before = version(&catalog.load_table(&ident).await.expect("load"));

    for (sql, expected) in [
        (
            format!("INSERT INTO {table} VALUES (2, 1.00, 'b'), (NULL, 2.00, 'c')"),
            "non-nullable",
        ),
        (
            format!("INSERT INTO {table} VALUES ('x', 1.00, 'b')"),
            "Cannot cast",
        ),
        (
            format!("INSERT INTO {table} VALUES (3, 123456789012.34, 'b')"),
            "too large to store in a Decimal128 of precision 10",
        ),
        (
            format!("INSERT INTO {table} (id, nope) VALUES (4, 1)"),
            "nope",
        ),
        (format!("INSERT INTO {table} VALUES (5)"), "expected 3"),
        // Fails at row 30,000, after files of earlier rows were written and closed.
        (
            format!(
                "INSERT INTO {table} SELECT CAST(CASE WHEN value = 30000 THEN 'x' \
                 ELSE CAST(value AS VARCHAR) END AS BIGINT), 1.00, 'g' || (value % 3) \
                 FROM generate_series(1, 40000)"
            ),
            "Cannot cast string 'x'",
        ),
    ] {
        let err = query(&ctx, &sql).await.expect_err(&sql).to_string();
        assert!(err.contains(expected), "{sql}: {err}");
        assert_eq!(
            data_files(&warehouse),
            files_before,
            "{sql} left files behind"
        );
        let now = catalog.load_table(&ident).await.expect("load");
        assert_eq!(version(&now), before, "{sql} committed");
    }
    let count = single_i64(
        &query(&ctx, &format!("SELECT count(*) FROM {table}"))
            .await
            .expect("count"),
    );
    assert_eq!(count, 1);
    // A column list may leave nullable columns out.
    assert_eq!(
        run(&ctx, &format!("INSERT INTO {table} (id) VALUES (6)")).await,
        1
    );
    let got = rows(
        &ctx,
        &format!("SELECT id, amount, s FROM {table}"),
        &["bigint", "decimal(10,2)", "string"],
    )
    .await;
    assert_eq!(got, [r#"[1,"1.50","a"]"#, r#"[6,null,null]"#]);
}
