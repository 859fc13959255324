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

/// Rows of `sql` as text lines (arrow's pretty table, header dropped).
async fn text_rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let table = arrow::util::pretty::pretty_format_batches(&batches)
        .expect("format")
        .to_string();
    table
        .lines()
        .skip(3)
        .filter(|l| l.starts_with('|'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// `REPLACE TABLE … AS SELECT` and `CREATE OR REPLACE TABLE` on both catalogs: one commit on the
/// same table (uuid, location, older snapshots kept), field ids as Iceberg Java's
/// `buildReplacement` assigns them (a name of the current schema keeps its id, new names get ids
/// above `last-column-id`), a new partition spec, the old snapshot still readable with its own
/// schema; a replace whose write fails changes nothing and leaves no file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_table_keeps_identity_and_history_on_both_catalogs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, catalog) in catalogs(dir.path()) {
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
        ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
        // Missing: REPLACE fails, CREATE OR REPLACE creates.
        let err = ddl(&ctx, "REPLACE TABLE iceberg.db.t (id BIGINT)")
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("does not exist"), "{kind}: {err}");
        ddl(
            &ctx,
            "CREATE OR REPLACE TABLE iceberg.db.t (id BIGINT NOT NULL, name STRING) \
             PARTITIONED BY (bucket(4, id))",
        )
        .await
        .expect("create or replace a missing table");
        query(&ctx, "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b')")
            .await
            .expect("insert");
        let before = catalog.load_table(&ident).await.expect("load");
        let old_snapshot = before.metadata().current_snapshot_id().expect("a snapshot");
        assert_eq!(before.metadata().last_column_id(), 2);

        let rows = ddl(
            &ctx,
            "REPLACE TABLE iceberg.db.t PARTITIONED BY (k) TBLPROPERTIES ('owner' = 'x') \
             AS SELECT 'k' || name AS k, id * 10 AS id FROM iceberg.db.t",
        )
        .await
        .expect("replace as select");
        assert_eq!(rows, 2, "{kind}");
        assert_eq!(
            text_rows(&ctx, "SELECT * FROM iceberg.db.t ORDER BY id").await,
            ["| ka | 10 |", "| kb | 20 |"],
            "{kind}"
        );
        let after = catalog.load_table(&ident).await.expect("load");
        let metadata = after.metadata();
        assert_eq!(metadata.uuid(), before.metadata().uuid(), "{kind}");
        assert_eq!(metadata.location(), before.metadata().location());
        let fields: Vec<(String, i32)> = metadata
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id))
            .collect();
        assert_eq!(fields, [("k".to_string(), 3), ("id".to_string(), 1)]);
        assert_eq!(metadata.last_column_id(), 3);
        let spec = metadata.default_partition_spec();
        let partition: Vec<(i32, i32, Transform)> = spec
            .fields()
            .iter()
            .map(|f| (f.source_id, f.field_id, f.transform))
            .collect();
        assert_eq!(partition, [(3, 1001, Transform::Identity)], "{kind}");
        assert_eq!(
            metadata.properties().get("owner").map(String::as_str),
            Some("x")
        );
        assert_eq!(
            metadata
                .properties()
                .get("write.delete.mode")
                .map(String::as_str),
            Some("merge-on-read"),
            "the table's properties stay"
        );
        let current = metadata.current_snapshot().expect("current");
        assert_eq!(current.parent_snapshot_id(), None);
        assert_eq!(current.schema_id(), Some(metadata.current_schema_id()));
        assert_eq!(metadata.snapshots().count(), 2);
        assert!(metadata.snapshot_by_id(old_snapshot).is_some());
        assert!(
            metadata
                .metadata_log()
                .iter()
                .any(|m| m.metadata_file == before.metadata_location()),
            "{kind}: the old metadata file is in the log"
        );
        // The old snapshot reads with its own schema.
        assert_eq!(
            text_rows(
                &ctx,
                &format!("SELECT * FROM iceberg.db.t FOR VERSION AS OF {old_snapshot} ORDER BY id")
            )
            .await,
            ["| 1 | a |", "| 2 | b |"],
            "{kind}"
        );

        // A replace whose write fails (a NULL into a NOT NULL column) changes nothing.
        let files = |dir: &std::path::Path| {
            let mut all: Vec<_> = walk(dir);
            all.sort();
            all
        };
        let table_dir = std::path::PathBuf::from(
            after
                .metadata()
                .location()
                .trim_start_matches("file://")
                .to_string(),
        );
        let files_before = files(&table_dir);
        let err = ddl(
            &ctx,
            "REPLACE TABLE iceberg.db.t (v BIGINT NOT NULL) \
             AS SELECT CASE WHEN id > 10 THEN NULL ELSE id END AS v FROM iceberg.db.t",
        )
        .await
        .expect_err("null into NOT NULL");
        assert!(
            err.to_string().to_lowercase().contains("null"),
            "{kind}: {err}"
        );
        let unchanged = catalog.load_table(&ident).await.expect("load");
        assert_eq!(
            unchanged.metadata_location(),
            after.metadata_location(),
            "{kind}"
        );
        assert_eq!(files(&table_dir), files_before, "{kind}: no file left");

        // CREATE OR REPLACE without a query: the new schema, no current snapshot, history kept.
        ddl(
            &ctx,
            "CREATE OR REPLACE TABLE iceberg.db.t (id BIGINT, note STRING)",
        )
        .await
        .expect("create or replace");
        assert_eq!(
            sql_count(&ctx, "SELECT count(*) FROM iceberg.db.t").await,
            0
        );
        let empty = catalog.load_table(&ident).await.expect("load");
        assert_eq!(empty.metadata().current_snapshot_id(), None, "{kind}");
        assert_eq!(empty.metadata().snapshots().count(), 2);
        assert_eq!(empty.metadata().uuid(), before.metadata().uuid());
        let fields: Vec<(String, i32)> = empty
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id))
            .collect();
        assert_eq!(fields, [("id".to_string(), 1), ("note".to_string(), 4)]);
        assert!(empty.metadata().default_partition_spec().is_unpartitioned());
        assert_eq!(
            sql_count(
                &ctx,
                &format!("SELECT count(*) FROM iceberg.db.t FOR VERSION AS OF {old_snapshot}")
            )
            .await,
            2
        );
        ddl(&ctx, "DROP TABLE iceberg.db.t PURGE")
            .await
            .expect("drop");
        ddl(&ctx, "DROP SCHEMA iceberg.db")
            .await
            .expect("drop schema");
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Spark reads a table Petrel replaced (`REPLACE TABLE … AS SELECT`): the new rows now, the old
/// rows at the old snapshot; and Spark's own `REPLACE TABLE … AS SELECT` of a twin table gives
/// the same field ids and partition spec (Iceberg Java is the model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_a_replaced_table_and_replaces_the_same_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let catalog: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
    for table in ["r", "twin"] {
        ddl(
            &ctx,
            &format!("CREATE TABLE iceberg.db.{table} (id BIGINT, name STRING)"),
        )
        .await
        .expect("create");
        query(
            &ctx,
            &format!("INSERT INTO iceberg.db.{table} VALUES (1, 'a'), (2, 'b')"),
        )
        .await
        .expect("insert");
    }
    ddl(
        &ctx,
        "REPLACE TABLE iceberg.db.r PARTITIONED BY (k) \
         AS SELECT concat('k', name) AS k, CAST(id * 10 AS BIGINT) AS id FROM iceberg.db.r",
    )
    .await
    .expect("replace");
    let seen = common::read_back_with(
        &warehouse,
        &["r", "twin"],
        &[
            "REPLACE TABLE iceberg.db.twin USING iceberg PARTITIONED BY (k) \
           AS SELECT concat('k', name) AS k, id * 10 AS id FROM iceberg.db.twin",
        ],
        true,
    );
    let r = &seen["r"];
    assert_eq!(
        r["spark"]["rows"],
        serde_json::json!([["ka", 10], ["kb", 20]])
    );
    let versions = r["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2);
    let columns = ["id", "name"];
    assert_eq!(
        common::result_rows(&versions[0]["spark"], &columns),
        ["[1,\"a\"]", "[2,\"b\"]"]
    );
    // Spark's replace of the twin: the same schema ids and spec as Petrel's.
    let twin = &seen["twin"];
    assert_eq!(
        twin["spark"]["rows"],
        serde_json::json!([["ka", 10], ["kb", 20]])
    );
    let schema_of = |table: &str| {
        let loaded = futures::executor::block_on(
            catalog.load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), table)),
        )
        .expect("load");
        let metadata = loaded.metadata();
        let fields: Vec<(String, i32)> = metadata
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id))
            .collect();
        let spec: Vec<(i32, i32, String)> = metadata
            .default_partition_spec()
            .fields()
            .iter()
            .map(|f| (f.source_id, f.field_id, f.name.clone()))
            .collect();
        let snapshots = metadata.snapshots().count();
        let parent = metadata
            .current_snapshot()
            .and_then(|s| s.parent_snapshot_id());
        (fields, spec, metadata.last_column_id(), snapshots, parent)
    };
    assert_eq!(schema_of("r"), schema_of("twin"));
    assert_eq!(
        schema_of("r").0,
        [("k".to_string(), 3), ("id".to_string(), 1)]
    );
}

/// A replacement staged before another writer commits goes through the commit loop: after an
/// append committed meanwhile it is rebuilt on the new base (the append's snapshot stays in the
/// history, nothing is lost); after a concurrent schema change that would give its columns other
/// field ids it fails, commits nothing and leaves no file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_racing_other_commits_on_both_catalogs() {
    use datafusion::dataframe::DataFrame;
    use datafusion::datasource::provider_as_source;
    use datafusion::logical_expr::LogicalPlanBuilder;
    use datafusion::logical_expr::dml::InsertOp;
    use iceberg::spec::{NestedField, Schema, TableMetadataBuilder};
    use petrel_table_provider::IcebergTableProvider;
    use petrel_table_provider::commit::TableReplacement;

    /// `INSERT INTO` the table `table` replaced by a schema (code STRING, id BIGINT): two rows.
    async fn staged_replace(ctx: &SessionContext, table: &str) -> DataFrame {
        let provider = ctx.table_provider(table).await.expect("provider");
        let iceberg = provider
            .as_any()
            .downcast_ref::<IcebergTableProvider>()
            .expect("iceberg");
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "code",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
            ])
            .build()
            .expect("schema");
        let replaced = iceberg
            .replacing(TableReplacement::unpartitioned(schema))
            .expect("staged");
        let values = ctx
            .sql("SELECT * FROM (VALUES ('x', CAST(10 AS BIGINT)), ('y', CAST(11 AS BIGINT))) AS v(code, id)")
            .await
            .expect("values")
            .into_unoptimized_plan();
        let plan = LogicalPlanBuilder::insert_into(
            values,
            table,
            provider_as_source(Arc::new(replaced)),
            InsertOp::Append,
        )
        .expect("insert")
        .build()
        .expect("plan");
        DataFrame::new(ctx.state(), plan)
    }

    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, catalog) in catalogs(dir.path()) {
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
        ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
        ddl(&ctx, "CREATE TABLE iceberg.db.t (id BIGINT, name STRING)")
            .await
            .expect("create");
        query(&ctx, "INSERT INTO iceberg.db.t VALUES (1, 'a')")
            .await
            .expect("insert");

        // Staged on the table with one snapshot; an append commits before the replace does.
        let replace = staged_replace(&ctx, "iceberg.db.t").await;
        query(&ctx, "INSERT INTO iceberg.db.t VALUES (2, 'b')")
            .await
            .expect("concurrent append");
        let appended = catalog.load_table(&ident).await.expect("load");
        let append_snapshot = appended.metadata().current_snapshot_id().expect("snapshot");
        replace.collect().await.expect("replace after a race");
        let after = catalog.load_table(&ident).await.expect("load");
        let metadata = after.metadata();
        assert_eq!(
            metadata.snapshots().count(),
            3,
            "{kind}: both old snapshots kept"
        );
        assert!(metadata.snapshot_by_id(append_snapshot).is_some());
        assert!(
            metadata
                .metadata_log()
                .iter()
                .any(|m| m.metadata_file == appended.metadata_location()),
            "{kind}: committed on top of the append"
        );
        let fields: Vec<(String, i32)> = metadata
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id))
            .collect();
        assert_eq!(fields, [("code".to_string(), 3), ("id".to_string(), 1)]);
        assert_eq!(
            text_rows(&ctx, "SELECT * FROM iceberg.db.t ORDER BY id").await,
            ["| x | 10 |", "| y | 11 |"]
        );
        assert_eq!(
            sql_count(
                &ctx,
                &format!("SELECT count(*) FROM iceberg.db.t FOR VERSION AS OF {append_snapshot}")
            )
            .await,
            2
        );

        // Staged again; meanwhile a schema change adds a column (last-column-id 3 → 4), so a
        // new name would now get another id: the replace fails and changes nothing.
        ddl(
            &ctx,
            "CREATE OR REPLACE TABLE iceberg.db.t (id BIGINT, name STRING)",
        )
        .await
        .expect("reset");
        let replace = staged_replace(&ctx, "iceberg.db.t").await;
        let base = catalog.load_table(&ident).await.expect("load");
        let mut evolved = base
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .to_vec();
        evolved.push(Arc::new(NestedField::optional(
            base.metadata().last_column_id() + 1,
            "extra",
            Type::Primitive(PrimitiveType::Int),
        )));
        let schema = Schema::builder()
            .with_fields(evolved)
            .build()
            .expect("schema");
        let metadata = TableMetadataBuilder::new_from_metadata(
            base.metadata().as_ref().clone(),
            Some(base.metadata_location().to_string()),
        )
        .add_current_schema(schema)
        .expect("schema change")
        .build()
        .expect("build")
        .metadata;
        let evolved = catalog.commit_table(&base, metadata).await.expect("commit");
        let table_dir = std::path::PathBuf::from(
            evolved
                .metadata()
                .location()
                .trim_start_matches("file://")
                .to_string(),
        );
        let mut files_before = walk(&table_dir);
        files_before.sort();
        let err = replace.collect().await.expect_err("ids would differ");
        assert!(
            err.to_string()
                .contains("changed while it was being replaced"),
            "{kind}: {err}"
        );
        let unchanged = catalog.load_table(&ident).await.expect("load");
        assert_eq!(
            unchanged.metadata_location(),
            evolved.metadata_location(),
            "{kind}"
        );
        let mut files_after = walk(&table_dir);
        files_after.sort();
        assert_eq!(
            files_after, files_before,
            "{kind}: the replace's files deleted"
        );
        ddl(&ctx, "DROP TABLE iceberg.db.t PURGE")
            .await
            .expect("drop");
        ddl(&ctx, "DROP SCHEMA iceberg.db")
            .await
            .expect("drop schema");
    }
}

/// The same replace through a REST catalog (Rustberg), which builds the new metadata itself from
/// the updates Petrel sends (new schema, spec, snapshot, `main` moved to a snapshot without
/// parent): one commit on the same table, the old snapshot still read with its schema; a replace
/// whose write fails changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_table_through_a_rest_catalog() {
    let Some(server) = common::rustberg::Rustberg::start() else {
        return;
    };
    let catalog: Arc<dyn Catalog> = Arc::new(server.catalog("iceberg").await);
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
    ddl(&ctx, "CREATE SCHEMA iceberg.db").await.expect("schema");
    ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, name STRING)",
    )
    .await
    .expect("create");
    query(&ctx, "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b')")
        .await
        .expect("insert");
    let before = catalog.load_table(&ident).await.expect("load");
    let old_snapshot = before.metadata().current_snapshot_id().expect("snapshot");
    let rows = ddl(
        &ctx,
        "CREATE OR REPLACE TABLE iceberg.db.t PARTITIONED BY (k) \
         AS SELECT 'k' || name AS k, id * 10 AS id FROM iceberg.db.t",
    )
    .await
    .expect("replace");
    assert_eq!(rows, 2);
    let after = catalog.load_table(&ident).await.expect("load");
    let metadata = after.metadata();
    assert_eq!(metadata.uuid(), before.metadata().uuid());
    let fields: Vec<(String, i32)> = metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| (f.name.clone(), f.id))
        .collect();
    assert_eq!(fields, [("k".to_string(), 3), ("id".to_string(), 1)]);
    assert_eq!(metadata.default_partition_spec().fields().len(), 1);
    assert_eq!(metadata.snapshots().count(), 2);
    let current = metadata.current_snapshot().expect("current");
    assert_eq!(current.parent_snapshot_id(), None);
    assert_eq!(
        text_rows(&ctx, "SELECT * FROM iceberg.db.t ORDER BY id").await,
        ["| ka | 10 |", "| kb | 20 |"]
    );
    assert_eq!(
        text_rows(
            &ctx,
            &format!("SELECT * FROM iceberg.db.t FOR VERSION AS OF {old_snapshot} ORDER BY id")
        )
        .await,
        ["| 1 | a |", "| 2 | b |"]
    );
    let err = ddl(
        &ctx,
        "REPLACE TABLE iceberg.db.t (v BIGINT NOT NULL) AS SELECT CAST(NULL AS BIGINT) AS v",
    )
    .await
    .expect_err("null into NOT NULL");
    assert!(err.to_string().to_lowercase().contains("null"), "{err}");
    let unchanged = catalog.load_table(&ident).await.expect("load");
    assert_eq!(unchanged.metadata_location(), after.metadata_location());
}
