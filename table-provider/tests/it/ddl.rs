//! Spark's DDL through `ddl::parse_ddl` / `ddl::execute_ddl` on both catalogs: schemas, tables
//! with every column kind, `PRIMARY KEY`, `PARTITIONED BY` transforms and `TBLPROPERTIES`,
//! `CREATE TABLE … AS SELECT`, drops — and Spark, PyIceberg and DuckDB reading what was created.

use crate::common;

use std::sync::Arc;

use common::{query, session, single_i64};
use datafusion::prelude::SessionContext;
use iceberg::spec::{FormatVersion, PrimitiveType, Transform, Type};
use petrel_table_provider::ddl::{execute_ddl, parse_ddl};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, SqlCatalog, TableIdent};

async fn ddl(ctx: &SessionContext, sql: &str) -> petrel_table_provider::Result<u64> {
    let statement = parse_ddl(sql)?.unwrap_or_else(|| panic!("{sql} is not DDL"));
    execute_ddl(ctx, statement).await
}

async fn sql_count(ctx: &SessionContext, sql: &str) -> i64 {
    single_i64(
        &query(ctx, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}")),
    )
}

fn catalogs(dir: &std::path::Path) -> Vec<(&'static str, Arc<dyn Catalog>)> {
    let warehouse = dir.join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let fs: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("fs catalog"));
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(dir.join("sqlwh").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    vec![("filesystem", fs), ("sql", sql)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_insert_ctas_and_drop_on_both_catalogs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, catalog) in catalogs(dir.path()) {
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        assert_eq!(
            ddl(&ctx, "CREATE SCHEMA iceberg.sales")
                .await
                .expect("schema"),
            0
        );
        assert_eq!(
            ddl(&ctx, "CREATE SCHEMA IF NOT EXISTS iceberg.sales")
                .await
                .expect("again"),
            0
        );
        let err = ddl(&ctx, "CREATE SCHEMA iceberg.sales")
            .await
            .expect_err("exists");
        assert!(err.to_string().contains("sales"), "{kind}: {err}");

        ddl(
            &ctx,
            "CREATE TABLE iceberg.sales.orders (
               id BIGINT NOT NULL, customer STRING, ts TIMESTAMP, amount DECIMAL(12, 2),
               tags ARRAY<STRING>, attrs MAP<STRING, INT>, point STRUCT<x: DOUBLE, y: DOUBLE>,
               PRIMARY KEY (id)
             ) USING iceberg
             PARTITIONED BY (days(ts), bucket(8, id), truncate(3, customer))
             TBLPROPERTIES ('format-version' = '3', 'write.target-file-size-bytes' = '1000000')",
        )
        .await
        .expect("create table");
        let ident = TableIdent::new(Namespace::new(vec!["sales".into()]), "orders");
        let table = catalog.load_table(&ident).await.expect("load");
        let metadata = table.metadata();
        assert_eq!(metadata.format_version(), FormatVersion::V3);
        let schema = metadata.current_schema();
        assert_eq!(schema.identifier_field_ids().collect::<Vec<_>>(), [1]);
        let id = schema.field_by_name("id").expect("id");
        assert!(id.required);
        assert_eq!(*id.field_type, Type::Primitive(PrimitiveType::Long));
        // Ids are unique across nested fields too.
        assert!(schema.field_by_name("point.y").is_some());
        let spec: Vec<(String, Transform)> = metadata
            .default_partition_spec()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.transform))
            .collect();
        assert_eq!(
            spec,
            [
                ("ts_day".to_string(), Transform::Day),
                ("id_bucket".to_string(), Transform::Bucket(8)),
                ("customer_trunc".to_string(), Transform::Truncate(3)),
            ]
        );
        let props = metadata.properties();
        assert_eq!(
            props.get("write.delete.mode").map(String::as_str),
            Some("merge-on-read")
        );
        assert_eq!(
            props
                .get("write.parquet.compression-codec")
                .map(String::as_str),
            Some("zstd")
        );
        assert_eq!(
            props
                .get("write.target-file-size-bytes")
                .map(String::as_str),
            Some("1000000")
        );
        assert!(!props.contains_key("format-version"));

        let inserted = query(
            &ctx,
            "INSERT INTO iceberg.sales.orders (id, customer, ts, amount) \
             SELECT value AS id, 'c' || (value % 5) AS customer, \
             to_timestamp_seconds(1714521600 + value * 3600) AS ts, \
             CAST(value AS DECIMAL(12, 2)) AS amount FROM generate_series(1, 100)",
        )
        .await
        .unwrap_or_else(|e| panic!("{kind}: insert: {e}"));
        assert_eq!(inserted[0].num_rows(), 1);
        assert_eq!(
            sql_count(&ctx, "SELECT count(*) FROM iceberg.sales.orders").await,
            100
        );

        // CTAS without columns: the schema comes from the query.
        let rows = ddl(
            &ctx,
            "CREATE TABLE iceberg.sales.big PARTITIONED BY (customer) AS \
             SELECT id, customer, amount FROM iceberg.sales.orders WHERE amount > 50",
        )
        .await
        .expect("ctas");
        assert_eq!(rows, 50);
        assert_eq!(
            sql_count(&ctx, "SELECT count(*) FROM iceberg.sales.big").await,
            50
        );
        assert_eq!(
            sql_count(
                &ctx,
                "SELECT count(*) FROM iceberg.sales.big WHERE customer = 'c1'"
            )
            .await,
            10
        );

        // Mistakes are named and create nothing.
        for (sql, expected) in [
            (
                "CREATE TABLE iceberg.sales.orders (a INT)",
                "already exists",
            ),
            (
                "CREATE TABLE iceberg.sales.bad (d DOUBLE) PARTITIONED BY (bucket(4, d))",
                "bucket",
            ),
            (
                "CREATE TABLE iceberg.sales.bad (a INT) PARTITIONED BY (nope)",
                "nope is not a column",
            ),
            ("CREATE TABLE iceberg.nowhere.t (a INT)", "nowhere"),
            (
                "CREATE TABLE iceberg.sales.bad AS SELECT 1 / 0 AS x",
                "Divide by zero",
            ),
        ] {
            let err = ddl(&ctx, sql).await.expect_err(sql).to_string();
            assert!(err.contains(expected), "{kind}: {sql}: {err}");
        }
        let err = catalog
            .load_table(&TableIdent::new(
                Namespace::new(vec!["sales".into()]),
                "bad",
            ))
            .await
            .expect_err("no table bad");
        assert!(
            matches!(err, petrel_table_provider::Error::NotFound(_)),
            "{kind}: {err}"
        );

        let err = ddl(&ctx, "DROP SCHEMA iceberg.sales")
            .await
            .expect_err("not empty");
        assert!(err.to_string().contains("not empty"), "{kind}: {err}");
        ddl(&ctx, "DROP TABLE iceberg.sales.big PURGE")
            .await
            .expect("drop");
        ddl(&ctx, "DROP TABLE IF EXISTS iceberg.sales.big")
            .await
            .expect("drop again");
        ddl(&ctx, "DROP TABLE iceberg.sales.orders")
            .await
            .expect("drop");
        ddl(&ctx, "DROP SCHEMA iceberg.sales")
            .await
            .expect("drop schema");
        ddl(&ctx, "DROP SCHEMA IF EXISTS iceberg.sales")
            .await
            .expect("drop schema again");
    }
}

/// A table created by DDL, filled by INSERT, read by Spark, PyIceberg and DuckDB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_a_ddl_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let catalog: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let ctx = session(vec![("iceberg", catalog)]);
    ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
    ddl(
        &ctx,
        "CREATE TABLE iceberg.db.events (id INT NOT NULL, d DATE, f FLOAT, label VARCHAR(10)) \
         PARTITIONED BY (months(d)) TBLPROPERTIES ('write.metadata.metrics.default' = 'full')",
    )
    .await
    .expect("create");
    query(
        &ctx,
        "INSERT INTO iceberg.db.events VALUES \
         (1, DATE '2024-01-31', 0.5, 'a label longer than sixteen characters'), \
         (2, DATE '2024-02-01', CAST('NaN' AS FLOAT), NULL), \
         (3, NULL, NULL, 'n')",
    )
    .await
    .expect("insert");
    let seen = common::read_back(&warehouse, &["events"]);
    let events = &seen["events"];
    assert_eq!(events["metric_mismatches"], serde_json::json!([]));
    let model = serde_json::json!([
        [
            1,
            "2024-01-31",
            0.5,
            "a label longer than sixteen characters"
        ],
        [2, "2024-02-01", "NaN", null],
        [3, null, null, "n"]
    ]);
    assert_eq!(events["spark"]["rows"], model);
    // DuckDB reads the same rows, and the same at the one snapshot, as Spark does.
    let columns = ["id", "d", "f", "label"];
    let mut want: Vec<String> = model
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r.to_string())
        .collect();
    want.sort();
    assert_eq!(common::duckdb_rows(events, &columns), want);
    let versions = events["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 1, "one INSERT, one snapshot");
    assert_eq!(common::result_rows(&versions[0]["spark"], &columns), want);
    assert_eq!(common::result_rows(&versions[0]["duckdb"], &columns), want);
    assert_eq!(events["pyiceberg"].as_array().map(Vec::len), Some(3));
    let mut partitions: Vec<String> = events["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["partition"]["d_month"].to_string())
        .collect();
    partitions.sort();
    // Months since 1970: January and February 2024, and NULL.
    assert_eq!(partitions, ["648", "649", "null"]);
}
