//! `write.distribution-mode`: an INSERT (CTAS, INSERT OVERWRITE) into a partitioned table
//! hash-distributes its rows on the partition key (the transformed values: truncate, bucket,
//! days; nulls; identity strings; void fields left out), so each table partition is written
//! by one writer task: one data file per partition value, counted in the `files` metadata table
//! against a model of the rows. `none` keeps each task's own files; an unpartitioned table is
//! written as before; an unknown mode is an error naming the property and the table. EXPLAIN
//! shows the repartition on the partition key below the write. A partition larger than the
//! advisory partition size is spread over every writer task, and Spark, PyIceberg and DuckDB
//! read the spread tables as the model has them.
//!
//! The source is an unpartitioned Iceberg table of 8 files whose rows interleave every
//! partition, so the scan's 4 partitions (the session's target) each carry rows of every
//! table partition.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray};
use common::{query, run_ddl, session, sorted_rows, warehouse_with_db, write_count};
use datafusion::prelude::SessionContext;
use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Transform, Type};
use iceberg::transform::create_transform_function;
use petrel_table_provider::Catalog;

/// Rows of the source table.
const ROWS: i64 = 40_000;
/// Files of the source table (one INSERT each).
const SOURCE_FILES: i64 = 8;
/// 2024-01-01T00:00:00 in microseconds.
const EPOCH_2024: i64 = 1_704_067_200_000_000;
const DAY_MICROS: i64 = 86_400_000_000;

/// One source row: (i, k, ts in micros, v) as the SQL below computes them.
fn source_row(i: i64) -> (i64, Option<String>, Option<i64>, i64) {
    let k = (i % 13 != 0).then(|| format!("k{}", i % 7));
    let ts = (i % 11 != 0).then_some(EPOCH_2024 + (i % 5) * DAY_MICROS + i);
    (i, k, ts, 3 * i)
}

/// The source table `iceberg.db.src` (i, k, ts, v): `ROWS` rows in `SOURCE_FILES` files, file
/// f holding the rows i ≡ f (mod `SOURCE_FILES`).
async fn create_source(ctx: &SessionContext) {
    run_ddl(
        ctx,
        "CREATE TABLE iceberg.db.src (i BIGINT NOT NULL, k STRING, ts TIMESTAMP, v BIGINT)",
    )
    .await;
    for f in 0..SOURCE_FILES {
        let sql = format!(
            "INSERT INTO iceberg.db.src SELECT i, \
               CASE WHEN i % 13 = 0 THEN NULL ELSE 'k' || CAST(i % 7 AS VARCHAR) END, \
               CASE WHEN i % 11 = 0 THEN NULL \
                 ELSE to_timestamp_micros({EPOCH_2024} + (i % 5) * {DAY_MICROS} + i) END, \
               3 * i \
             FROM (SELECT unnest(range({f}, {ROWS}, {SOURCE_FILES})) AS i)"
        );
        assert_eq!(
            write_count(ctx, &sql).await,
            (ROWS / SOURCE_FILES) as u64,
            "{sql}"
        );
    }
}

/// Iceberg's bucket of a string, by the `iceberg` crate's transform.
fn bucket(n: u32, s: &str) -> i32 {
    let out = create_transform_function(&Transform::Bucket(n))
        .expect("bucket")
        .transform(Arc::new(StringArray::from(vec![s])))
        .expect("bucket transform");
    out.as_any()
        .downcast_ref::<arrow::array::Int32Array>()
        .expect("int32")
        .value(0)
}

/// The model's partition tuple of a row of `PARTITIONED BY (truncate(10000, i), bucket(4, k),
/// days(ts))` as the `files` table prints it, and the rows of each.
fn model_partitions(rows: impl Iterator<Item = i64>) -> BTreeMap<String, u64> {
    let mut model = BTreeMap::new();
    for i in rows {
        let (i, k, ts, _) = source_row(i);
        let trunc = i - i.rem_euclid(10_000);
        let bucket = k.map(|k| bucket(4, &k));
        // The `files` table prints a `date` partition value as the date.
        let day = ts.map(|ts| {
            (chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")
                + chrono::Days::new(ts.div_euclid(DAY_MICROS) as u64))
            .to_string()
        });
        let key = serde_json::json!([trunc, bucket, day]).to_string();
        *model.entry(key).or_insert(0u64) += 1;
    }
    model
}

/// The data files of `iceberg.db.<table>` as (partition tuple as a JSON array, record count),
/// one entry per file.
async fn files(ctx: &SessionContext, table: &str, fields: &[&str]) -> Vec<(String, u64)> {
    let mut columns: Vec<String> = fields.iter().map(|f| format!("partition['{f}']")).collect();
    columns.push("record_count".into());
    let sql = format!(
        "SELECT {} FROM iceberg.db.\"{table}$files\" WHERE content = 0",
        columns.join(", ")
    );
    sorted_rows(ctx, &sql)
        .await
        .into_iter()
        .map(|row| {
            let mut values: Vec<serde_json::Value> = serde_json::from_str(&row).expect("row");
            let count = values.pop().and_then(|c| c.as_u64()).expect("record_count");
            (serde_json::Value::Array(values).to_string(), count)
        })
        .collect()
}

/// (count, sum(v)) of a query's single row.
async fn count_and_sum(ctx: &SessionContext, sql: &str) -> (i64, i64) {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let value = |c: usize| {
        batches[0]
            .column(c)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap_or_else(|| panic!("{sql}: column {c}"))
            .value(0)
    };
    (value(0), value(1))
}

/// The physical plan EXPLAIN prints for `sql`.
async fn physical_plan(ctx: &SessionContext, sql: &str) -> String {
    let batches = query(ctx, &format!("EXPLAIN {sql}"))
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN {sql}: {e}"));
    let mut plan = String::new();
    for batch in &batches {
        let kinds = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("plan_type");
        let texts = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("plan");
        for row in 0..batch.num_rows() {
            if kinds.value(row) == "physical_plan" {
                plan.push_str(texts.value(row));
            }
        }
    }
    plan
}

const INSERT_ALL: &str = "SELECT i, k, ts, v FROM iceberg.db.src";

#[tokio::test]
async fn hash_distribution_writes_one_file_per_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    assert!(ctx.state().config().target_partitions() >= 2);
    create_source(&ctx).await;
    let fields = ["i_trunc", "k_bucket", "ts_day"];
    let partitioned = "PARTITIONED BY (truncate(10000, i), bucket(4, k), days(ts))";
    for (table, properties) in [
        ("hashed", ""),
        (
            "ranged",
            " TBLPROPERTIES ('write.distribution-mode' = 'range')",
        ),
        (
            "spread",
            " TBLPROPERTIES ('write.distribution-mode' = 'none')",
        ),
    ] {
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{table} (i BIGINT NOT NULL, k STRING, ts TIMESTAMP, \
                 v BIGINT) {partitioned}{properties}"
            ),
        )
        .await;
    }

    // The plan: a hash repartition on the transformed partition key below the write.
    let key = "truncate[10000](i), bucket[4](k), day(ts)";
    for table in ["hashed", "ranged"] {
        let plan = physical_plan(
            &ctx,
            &format!("INSERT INTO iceberg.db.{table} {INSERT_ALL}"),
        )
        .await;
        assert!(
            plan.contains(&format!(
                "RepartitionExec: partitioning=Hash([writer_task({key}; split=536870912 bytes)], 4)"
            )),
            "{table}: {plan}"
        );
        let mode = if table == "hashed" { "hash" } else { "range" };
        assert!(
            plan.contains(&format!(
                "IcebergWriteExec: spec=0 distribution={mode}[{key}]"
            )),
            "{table}: {plan}"
        );
    }
    let plan = physical_plan(&ctx, &format!("INSERT INTO iceberg.db.spread {INSERT_ALL}")).await;
    assert!(!plan.contains("partitioning=Hash"), "{plan}");
    assert!(plan.contains("IcebergWriteExec: spec=0\n"), "{plan}");

    let model = model_partitions(0..ROWS);
    let model_files: Vec<(String, u64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert!(model.len() > 40, "{} partitions", model.len());
    for table in ["hashed", "ranged", "spread"] {
        let sql = format!("INSERT INTO iceberg.db.{table} {INSERT_ALL}");
        assert_eq!(write_count(&ctx, &sql).await, ROWS as u64, "{sql}");
        let sum: i64 = (0..ROWS).map(|i| source_row(i).3).sum();
        assert_eq!(
            count_and_sum(
                &ctx,
                &format!("SELECT count(*), sum(v) FROM iceberg.db.{table}")
            )
            .await,
            (ROWS, sum),
            "{table}"
        );
        // Every row read back exactly, nulls included.
        assert_eq!(
            sorted_rows(
                &ctx,
                &format!(
                    "SELECT * FROM iceberg.db.{table} EXCEPT ALL SELECT * FROM iceberg.db.src"
                )
            )
            .await,
            Vec::<String>::new(),
            "{table}"
        );
        assert_eq!(
            sorted_rows(
                &ctx,
                &format!(
                    "SELECT * FROM iceberg.db.src EXCEPT ALL SELECT * FROM iceberg.db.{table}"
                )
            )
            .await,
            Vec::<String>::new(),
            "{table}"
        );
        let files = files(&ctx, table, &fields).await;
        if table == "spread" {
            // Each of the 4 writer tasks wrote its own file of (nearly) every partition.
            let mut per_partition: BTreeMap<String, u64> = BTreeMap::new();
            for (partition, count) in &files {
                *per_partition.entry(partition.clone()).or_default() += count;
            }
            assert_eq!(per_partition, model, "{table}: rows per partition");
            assert!(
                files.len() > 2 * model.len(),
                "{table}: {} files for {} partitions",
                files.len(),
                model.len()
            );
        } else {
            // One file per partition value, with exactly its rows.
            assert_eq!(files, model_files, "{table}: files");
        }
    }

    // INSERT OVERWRITE replaces the partitions it writes (i_trunc = 0) with the same rows, each
    // with one file again.
    let overwrite = format!("INSERT OVERWRITE iceberg.db.hashed {INSERT_ALL} WHERE i < 10000");
    assert_eq!(write_count(&ctx, &overwrite).await, 10_000);
    assert_eq!(
        files(&ctx, "hashed", &fields).await,
        model_files,
        "files after INSERT OVERWRITE"
    );
    assert_eq!(
        count_and_sum(&ctx, "SELECT count(*), sum(v) FROM iceberg.db.hashed").await,
        (ROWS, (0..ROWS).map(|i| source_row(i).3).sum()),
    );

    // CTAS on a partitioned spec: one file per bucket (4 buckets and the null one).
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.ctas PARTITIONED BY (bucket(4, k)) AS SELECT * FROM iceberg.db.src",
    )
    .await;
    let mut buckets: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..ROWS {
        let bucket = source_row(i).1.map(|k| bucket(4, &k));
        *buckets
            .entry(serde_json::json!([bucket]).to_string())
            .or_default() += 1;
    }
    assert_eq!(
        files(&ctx, "ctas", &["k_bucket"]).await,
        buckets.into_iter().collect::<Vec<_>>(),
        "CTAS files"
    );
}

/// The day partition of each source row as the `files` table prints it, and its rows.
fn model_days(rows: impl Iterator<Item = i64>) -> BTreeMap<String, u64> {
    let mut model = BTreeMap::new();
    for i in rows {
        let day = source_row(i).2.map(|ts| {
            (chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")
                + chrono::Days::new(ts.div_euclid(DAY_MICROS) as u64))
            .to_string()
        });
        *model
            .entry(serde_json::json!([day]).to_string())
            .or_insert(0u64) += 1;
    }
    model
}

/// A table partition larger than `write.spark.advisory-partition-size-bytes` (Arrow bytes of
/// its rows) is written by every writer task, each its own file of it, as Spark splits a skewed
/// partition of its write; a smaller one by one task (one file). A load of a single partition
/// (a day) therefore still runs on every task. The rows are exact either way, in Petrel, Spark,
/// PyIceberg and DuckDB.
#[tokio::test]
async fn partitions_larger_than_the_advisory_size_are_split_over_the_writer_tasks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    let tasks = ctx.state().config().target_partitions();
    assert_eq!(tasks, 4);
    create_source(&ctx).await;
    // A day holds ~6,500 source rows, ~200 KiB of Arrow: 16 KiB splits it, 64 MiB does not.
    for (table, advisory) in [("split", 16 * 1024), ("whole", 64 * 1024 * 1024)] {
        create_by_day(&ctx, table, advisory).await;
    }
    let plan = physical_plan(&ctx, &format!("INSERT INTO iceberg.db.split {INSERT_ALL}")).await;
    assert!(
        plan.contains(
            "RepartitionExec: partitioning=Hash([writer_task(day(ts); split=16384 bytes)], 4)"
        ),
        "{plan}"
    );
    let model = model_days(0..ROWS);
    assert_eq!(model.len(), 6, "five days and the null partition");
    for table in ["split", "whole"] {
        let sql = format!("INSERT INTO iceberg.db.{table} {INSERT_ALL}");
        assert_eq!(write_count(&ctx, &sql).await, ROWS as u64, "{sql}");
        for (left, right) in [(table, "src"), ("src", table)] {
            let sql = format!(
                "SELECT * FROM iceberg.db.{left} EXCEPT ALL SELECT * FROM iceberg.db.{right}"
            );
            assert_eq!(sorted_rows(&ctx, &sql).await, Vec::<String>::new(), "{sql}");
        }
        let mut per_partition: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (partition, count) in files(&ctx, table, &["ts_day"]).await {
            per_partition.entry(partition).or_default().push(count);
        }
        let totals: BTreeMap<String, u64> = per_partition
            .iter()
            .map(|(p, counts)| (p.clone(), counts.iter().sum()))
            .collect();
        assert_eq!(totals, model, "{table}: rows per partition");
        for (partition, counts) in &per_partition {
            if table == "whole" {
                assert_eq!(counts.len(), 1, "{table} {partition}: {counts:?}");
                continue;
            }
            // Past its first 16 KiB a partition's rows go to every task in turn: each writes
            // its share.
            let total: u64 = counts.iter().sum();
            assert_eq!(counts.len(), tasks, "{table} {partition}: {counts:?}");
            assert!(
                counts.iter().all(|&c| c * 2 * tasks as u64 >= total),
                "{table} {partition}: {counts:?}"
            );
        }
    }

    // A load of one day alone is written by every task.
    create_by_day(&ctx, "one_day", 16 * 1024).await;
    let day_two =
        format!("INSERT INTO iceberg.db.one_day {INSERT_ALL} WHERE i % 5 = 2 AND i % 11 <> 0");
    let expected = (0..ROWS).filter(|i| i % 5 == 2 && i % 11 != 0).count() as u64;
    assert_eq!(write_count(&ctx, &day_two).await, expected);
    let files = files(&ctx, "one_day", &["ts_day"]).await;
    assert_eq!(files.len(), tasks, "{files:?}");
    assert!(
        files.iter().all(|(p, _)| p == "[\"2024-01-03\"]"),
        "{files:?}"
    );
    assert_eq!(files.iter().map(|(_, c)| c).sum::<u64>(), expected);
    assert_eq!(
        count_and_sum(&ctx, "SELECT count(*), sum(v) FROM iceberg.db.one_day").await,
        (
            expected as i64,
            (0..ROWS)
                .filter(|i| i % 5 == 2 && i % 11 != 0)
                .map(|i| source_row(i).3)
                .sum()
        ),
    );

    // Spark, PyIceberg and DuckDB read the spread tables' rows as the model has them, and every
    // file's bounds and null counts match its rows (Spark's `readable_metrics`).
    let seen = common::read_back_with(&warehouse, &["split", "one_day"], &[], false);
    let columns = ["i", "k", "v"];
    let model_rows = |keep: &dyn Fn(i64) -> bool| -> Vec<String> {
        let mut rows: Vec<String> = (0..ROWS)
            .filter(|&i| keep(i))
            .map(|i| {
                let (i, k, _, v) = source_row(i);
                serde_json::json!([i, k, v]).to_string()
            })
            .collect();
        rows.sort();
        rows
    };
    for (table, rows) in [
        ("split", model_rows(&|_| true)),
        ("one_day", model_rows(&|i| i % 5 == 2 && i % 11 != 0)),
    ] {
        let t = &seen[table];
        assert_eq!(t["metric_mismatches"], serde_json::json!([]), "{table}");
        assert_eq!(
            common::result_rows(&t["spark"], &columns),
            rows,
            "Spark reads {table}"
        );
        assert_eq!(
            common::pyiceberg_rows(t, &columns),
            rows,
            "PyIceberg reads {table}"
        );
        assert_eq!(
            common::duckdb_rows(t, &columns),
            rows,
            "DuckDB reads {table}"
        );
    }

    // An advisory size that is not a positive number is an error naming it; nothing written.
    create_by_day(&ctx, "bad_size", 0).await;
    let error = query(
        &ctx,
        &format!("INSERT INTO iceberg.db.bad_size {INSERT_ALL}"),
    )
    .await
    .expect_err("advisory size 0");
    assert!(
        error.to_string().contains(
            "table db.bad_size: property write.spark.advisory-partition-size-bytes=\"0\" is \
             invalid: expected a positive number of bytes"
        ),
        "{error}"
    );
    assert_eq!(
        sorted_rows(&ctx, "SELECT count(*) FROM iceberg.db.bad_size").await,
        vec!["[0]".to_string()]
    );
}

/// Creates `iceberg.db.<name>` (i, k, ts, v) `PARTITIONED BY (days(ts))` through SQL, with
/// `write.spark.advisory-partition-size-bytes` = `advisory`.
async fn create_by_day(ctx: &SessionContext, name: &str, advisory: u64) {
    run_ddl(
        ctx,
        &format!(
            "CREATE TABLE iceberg.db.{name} (i BIGINT NOT NULL, k STRING, ts TIMESTAMP, \
             v BIGINT) PARTITIONED BY (days(ts)) \
             TBLPROPERTIES ('write.spark.advisory-partition-size-bytes' = '{advisory}')"
        ),
    )
    .await;
}

/// Creates `db.<name>` (i, k, ts, v) partitioned by `partitions` (source column, transform),
/// with `properties`.
async fn create(
    catalog: &dyn Catalog,
    name: &str,
    partitions: &[(&str, Transform)],
    properties: &[(&str, &str)],
) {
    let fields = vec![
        NestedField::required(1, "i", Type::Primitive(PrimitiveType::Long)).into(),
        NestedField::optional(2, "k", Type::Primitive(PrimitiveType::String)).into(),
        NestedField::optional(3, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
        NestedField::optional(4, "v", Type::Primitive(PrimitiveType::Long)).into(),
    ];
    crate::insert::create(
        catalog,
        name,
        fields,
        partitions,
        FormatVersion::V2,
        properties,
    )
    .await;
}

#[tokio::test]
async fn identity_strings_void_fields_unpartitioned_tables_and_bad_modes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    create_source(&ctx).await;
    // Identity on a string with a void field beside it: hashed on k alone.
    create(
        catalog.as_ref(),
        "by_k",
        &[("k", Transform::Identity), ("v", Transform::Void)],
        &[],
    )
    .await;
    // Only void fields: unpartitioned, so no distribution (Spark's adjustment).
    create(catalog.as_ref(), "all_void", &[("k", Transform::Void)], &[]).await;
    create(catalog.as_ref(), "plain", &[], &[]).await;
    create(
        catalog.as_ref(),
        "bad_mode",
        &[("k", Transform::Identity)],
        &[("write.distribution-mode", "round-robin")],
    )
    .await;

    let plan = physical_plan(&ctx, &format!("INSERT INTO iceberg.db.by_k {INSERT_ALL}")).await;
    assert!(
        plan.contains(
            "RepartitionExec: partitioning=Hash([writer_task(identity(k); split=536870912 bytes)], 4)"
        ),
        "{plan}"
    );
    assert!(
        plan.contains("IcebergWriteExec: spec=0 distribution=hash[identity(k)]"),
        "{plan}"
    );
    for table in ["all_void", "plain"] {
        let plan = physical_plan(
            &ctx,
            &format!("INSERT INTO iceberg.db.{table} {INSERT_ALL}"),
        )
        .await;
        assert!(!plan.contains("partitioning=Hash"), "{table}: {plan}");
        assert!(
            plan.contains("IcebergWriteExec: spec=0\n"),
            "{table}: {plan}"
        );
    }

    let sum: i64 = (0..ROWS).map(|i| source_row(i).3).sum();
    let mut by_k: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..ROWS {
        let k = source_row(i).1;
        *by_k
            .entry(serde_json::json!([k, null]).to_string())
            .or_default() += 1;
    }
    assert_eq!(by_k.len(), 8, "7 strings and null");
    for table in ["by_k", "all_void", "plain"] {
        let sql = format!("INSERT INTO iceberg.db.{table} {INSERT_ALL}");
        assert_eq!(write_count(&ctx, &sql).await, ROWS as u64, "{sql}");
        assert_eq!(
            count_and_sum(
                &ctx,
                &format!("SELECT count(*), sum(v) FROM iceberg.db.{table}")
            )
            .await,
            (ROWS, sum),
            "{table}"
        );
    }
    // One file per string (and one for null).
    assert_eq!(
        files(&ctx, "by_k", &["k", "v_void"]).await,
        by_k.into_iter().collect::<Vec<_>>()
    );
    // Unpartitioned: each of the 4 writer tasks wrote its file, as before.
    let per_task = |files: Vec<(String, u64)>| {
        (
            files.len(),
            files.iter().map(|(_, count)| count).sum::<u64>(),
        )
    };
    assert_eq!(per_task(files(&ctx, "plain", &[]).await), (4, ROWS as u64));
    assert_eq!(
        per_task(files(&ctx, "all_void", &["k_void"]).await),
        (4, ROWS as u64)
    );

    // An unknown mode: the statement fails naming the property and the table, nothing written.
    let error = query(
        &ctx,
        &format!("INSERT INTO iceberg.db.bad_mode {INSERT_ALL}"),
    )
    .await
    .expect_err("unknown distribution mode");
    assert!(
        error.to_string().contains(
            "table db.bad_mode: property write.distribution-mode=\"round-robin\" is invalid: \
             expected none, hash or range"
        ),
        "{error}"
    );
    assert_eq!(
        count_and_sum(
            &ctx,
            "SELECT count(*), coalesce(sum(v), 0) FROM iceberg.db.bad_mode"
        )
        .await,
        (0, 0)
    );
}

#[tokio::test]
async fn updates_hash_distribute_the_rows_they_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    create_source(&ctx).await;
    // Written with `none`: each of the 4 tasks' own file of every bucket.
    for (table, update_mode) in [("upd_hash", None), ("upd_none", Some("none"))] {
        let update_mode = update_mode
            .map(|m| format!(", 'write.update.distribution-mode' = '{m}'"))
            .unwrap_or_default();
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{table} (i BIGINT NOT NULL, k STRING, ts TIMESTAMP, \
                 v BIGINT) PARTITIONED BY (bucket(4, k)) \
                 TBLPROPERTIES ('write.distribution-mode' = 'none'{update_mode})"
            ),
        )
        .await;
        let sql = format!("INSERT INTO iceberg.db.{table} {INSERT_ALL}");
        assert_eq!(write_count(&ctx, &sql).await, ROWS as u64);
    }
    let mut buckets: BTreeMap<String, u64> = BTreeMap::new();
    for i in (0..ROWS).filter(|i| i % 2 == 0) {
        let bucket = source_row(i).1.map(|k| bucket(4, &k));
        *buckets
            .entry(serde_json::json!([bucket]).to_string())
            .or_default() += 1;
    }
    let updated: u64 = buckets.values().sum();
    let sum: i64 = (0..ROWS)
        .map(|i| source_row(i).3 + i64::from(i % 2 == 0))
        .sum();
    for table in ["upd_hash", "upd_none"] {
        let before = files(&ctx, table, &["k_bucket"]).await;
        assert!(before.len() > 2 * buckets.len(), "{table}: {before:?}");
        let sql = format!("UPDATE iceberg.db.{table} SET v = v + 1 WHERE i % 2 = 0");
        assert_eq!(write_count(&ctx, &sql).await, updated, "{sql}");
        assert_eq!(
            count_and_sum(
                &ctx,
                &format!("SELECT count(*), sum(v) FROM iceberg.db.{table}")
            )
            .await,
            (ROWS, sum),
            "{table}"
        );
        // The files the UPDATE added (merge-on-read: the old files stay, with deletes).
        let mut added = files(&ctx, table, &["k_bucket"]).await;
        for file in &before {
            let at = added.iter().position(|f| f == file).expect("old file kept");
            added.remove(at);
        }
        if table == "upd_hash" {
            // One file per bucket with exactly the bucket's updated rows.
            assert_eq!(
                added,
                buckets.clone().into_iter().collect::<Vec<_>>(),
                "{table}"
            );
        } else {
            let mut per_bucket: BTreeMap<String, u64> = BTreeMap::new();
            for (bucket, count) in &added {
                *per_bucket.entry(bucket.clone()).or_default() += count;
            }
            assert_eq!(per_bucket, buckets, "{table}");
            assert!(added.len() > buckets.len(), "{table}: {added:?}");
        }
    }
}
