//! `DELETE FROM t WHERE …` in merge-on-read mode: position-delete files in format 2, deletion
//! vectors in format 3 (a later DELETE of the same data file merges into one new file or vector
//! and removes the old one). The rows deleted are exactly those the WHERE clause selects —
//! subqueries, `WHERE false`, NULL-valued predicates — checked against a model of the rows,
//! then read back by Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB; Spark's metadata tables
//! show the delete files. Copy-on-write tables get their files rewritten. Tables Spark wrote
//! (copy-on-write, and v3 with Spark's own deletion vectors) are deleted from by Petrel and read
//! back by Spark. `LIMIT` is refused and changes nothing; `EXPLAIN DELETE` explains without
//! deleting.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{
    duckdb_rows, query, read_back, read_back_with, result_rows, run_ddl, session, snapshot_count,
    sorted_rows, warehouse_with_db, write_count,
};
use datafusion::prelude::SessionContext;
use serde_json::json;

/// (id, region, amount) rows as JSON texts, sorted.
async fn rows(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = format!("SELECT id, region, amount FROM {table}");
    sorted_rows(ctx, &sql).await
}

/// The model: rows by id.
#[derive(Clone, Default)]
struct Model(BTreeMap<i64, (String, Option<i64>)>);

impl Model {
    fn rows(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .0
            .iter()
            .map(|(id, (region, amount))| json!([id, region, amount]).to_string())
            .collect();
        out.sort();
        out
    }

    fn delete(&mut self, keep: impl Fn(i64, &str, Option<i64>) -> bool) -> u64 {
        let before = self.0.len();
        self.0
            .retain(|id, (region, amount)| keep(*id, region, *amount));
        (before - self.0.len()) as u64
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_read_deletes_exactly_the_rows_the_where_clause_selects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.banned (id BIGINT)").await;
    query(
        &ctx,
        "INSERT INTO iceberg.db.banned VALUES (7), (8), (1000)",
    )
    .await
    .expect("banned");

    let mut models = BTreeMap::new();
    for (table, version) in [("mor_v2", 2), ("mor_v3", 3)] {
        let name = format!("iceberg.db.{table}");
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE {name} (id BIGINT, region STRING, amount BIGINT) \
                 PARTITIONED BY (region) TBLPROPERTIES ('format-version'='{version}')"
            ),
        )
        .await;
        let mut model = Model::default();
        let mut values = Vec::new();
        for id in 0..60i64 {
            let region = ["north", "south", "east"][(id % 3) as usize];
            let amount = (id % 5 != 4).then_some(id * 10);
            values.push(format!(
                "({id}, '{region}', {})",
                amount.map_or("NULL".into(), |a| a.to_string())
            ));
            model.0.insert(id, (region.to_string(), amount));
        }
        query(
            &ctx,
            &format!("INSERT INTO {name} VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert");
        // Two files in region north: a second INSERT.
        query(
            &ctx,
            &format!("INSERT INTO {name} VALUES (100, 'north', 5)"),
        )
        .await
        .expect("insert");
        model.0.insert(100, ("north".into(), Some(5)));
        let mut expected_snapshots = 2;

        // A plain predicate across partitions.
        let n = write_count(&ctx, &format!("DELETE FROM {name} WHERE id < 5")).await;
        assert_eq!(n, model.delete(|id, _, _| id >= 5), "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model.rows(), "{table}");
        // NULL predicate results keep the row: amount > 300 is NULL where amount is NULL.
        let n = write_count(&ctx, &format!("DELETE FROM {name} WHERE amount > 300")).await;
        assert_eq!(
            n,
            model.delete(|_, _, amount| amount.is_none_or(|a| a <= 300)),
            "{table}"
        );
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model.rows(), "{table}");
        // A subquery (IN) and a correlated EXISTS: DataFusion's filter pushdown into
        // delete_from would lose both.
        let n = write_count(
            &ctx,
            &format!("DELETE FROM {name} WHERE id IN (SELECT id FROM iceberg.db.banned)"),
        )
        .await;
        assert_eq!(
            n,
            model.delete(|id, _, _| ![7, 8, 1000].contains(&id)),
            "{table}"
        );
        expected_snapshots += 1;
        let n = write_count(
            &ctx,
            &format!(
                "DELETE FROM {name} WHERE EXISTS (SELECT 1 FROM iceberg.db.banned b \
                 WHERE b.id = {name}.id + 2)"
            ),
        )
        .await;
        assert_eq!(
            n,
            model.delete(|id, _, _| ![5, 6, 998].contains(&id)),
            "{table}"
        );
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model.rows(), "{table}");
        // Again in a data file that already has deletes (v3: merged into one new vector).
        let n = write_count(
            &ctx,
            &format!("DELETE FROM {name} WHERE region = 'north' AND id < 30"),
        )
        .await;
        assert_eq!(
            n,
            model.delete(|id, region, _| !(region == "north" && id < 30)),
            "{table}"
        );
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model.rows(), "{table}");
        // Nothing selected: no snapshot.
        for sql in [
            format!("DELETE FROM {name} WHERE false"),
            format!("DELETE FROM {name} WHERE id = -1"),
            format!("DELETE FROM {name} WHERE region = NULL"),
        ] {
            assert_eq!(write_count(&ctx, &sql).await, 0, "{sql}");
        }
        assert_eq!(
            snapshot_count(catalog.as_ref(), table).await,
            expected_snapshots
        );
        // EXPLAIN plans and does not delete.
        let explained = query(&ctx, &format!("EXPLAIN DELETE FROM {name}"))
            .await
            .expect("explain");
        let text = arrow::util::pretty::pretty_format_batches(&explained)
            .expect("format")
            .to_string();
        assert!(text.contains("IcebergDelete"), "{text}");
        assert_eq!(
            rows(&ctx, &name).await,
            model.rows(),
            "{table}: EXPLAIN deleted nothing"
        );
        // Refused forms change nothing.
        let err = query(&ctx, &format!("DELETE FROM {name} WHERE id > 50 LIMIT 1"))
            .await
            .expect_err("LIMIT");
        assert!(err.to_string().contains("LIMIT is not supported"), "{err}");
        assert_eq!(
            snapshot_count(catalog.as_ref(), table).await,
            expected_snapshots
        );
        assert_eq!(rows(&ctx, &name).await, model.rows(), "{table}");
        models.insert(table, model);
    }

    // Spark, PyIceberg and DuckDB read the rows; Spark sees the delete files.
    let seen = read_back(&warehouse, &["mor_v2", "mor_v3"]);
    for (table, model) in &models {
        let t = &seen[*table];
        assert_eq!(
            result_rows(&t["spark"], &["id", "region", "amount"]),
            model.rows(),
            "Spark reads {table}"
        );
        assert_eq!(
            duckdb_rows(t, &["id", "region", "amount"]),
            model.rows(),
            "DuckDB reads {table}"
        );
        assert_eq!(
            t["pyiceberg"].as_array().map(Vec::len),
            Some(model.0.len()),
            "PyIceberg reads {table}"
        );
        let operations: Vec<&str> = t["snapshots"]
            .as_array()
            .expect("snapshots")
            .iter()
            .map(|s| s["operation"].as_str().expect("operation"))
            .collect();
        assert_eq!(
            operations,
            [
                "append", "append", "delete", "delete", "delete", "delete", "delete"
            ],
            "{table}"
        );
        // The live delete files Spark lists: Parquet position deletes in v2, Puffin deletion
        // vectors in v3.
        let files: Vec<&str> = t["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["file_path"].as_str().expect("path"))
            .collect();
        let (suffix, other) = if *table == "mor_v2" {
            ("-deletes.parquet", ".puffin")
        } else {
            ("-deletes.puffin", "-deletes.parquet")
        };
        assert!(
            files.iter().any(|f| f.ends_with(suffix)),
            "{table}: {files:?}"
        );
        assert!(
            !files.iter().any(|f| f.ends_with(other)),
            "{table}: {files:?}"
        );
        // Rows were deleted from three data files (each region's first file; the second north
        // file kept all its rows), by five statements: each later delete file or vector
        // absorbed the earlier one of its data file, so exactly one per data file is live.
        let live = files.iter().filter(|f| f.ends_with(suffix)).count();
        assert_eq!(live, 3, "{table}: {files:?}");
    }
}

/// A DELETE planned before other commits and run after them: an unrelated append (no row its
/// filter can match) does not make it fail (it retries on the new table and the appended rows
/// stay; a matching append fails it under serializable isolation: `row_level_concurrency.rs`),
/// a DELETE of the same data file that committed first does (a conflict error, nothing
/// committed, rows as the first DELETE left them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_retry_or_conflict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    for version in [2, 3] {
        let name = format!("iceberg.db.race_v{version}");
        let table = format!("race_v{version}");
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE {name} (id BIGINT, region STRING, amount BIGINT) \
                 TBLPROPERTIES ('format-version'='{version}')"
            ),
        )
        .await;
        query(
            &ctx,
            &format!("INSERT INTO {name} VALUES (1, 'a', 1), (2, 'a', 2), (3, 'a', 3)"),
        )
        .await
        .expect("insert");

        // Planned, then an append commits, then it runs: retried, succeeds.
        let delete = ctx
            .sql(&format!("DELETE FROM {name} WHERE id = 1"))
            .await
            .expect("plan");
        query(&ctx, &format!("INSERT INTO {name} VALUES (10, 'b', 10)"))
            .await
            .expect("append");
        let deleted = delete.collect().await.expect("retried after the append");
        assert_eq!(
            deleted[0]
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::UInt64Array>()
                .map(|c| c.value(0)),
            Some(1)
        );
        let expected = vec![
            json!([10, "b", 10]).to_string(),
            json!([2, "a", 2]).to_string(),
            json!([3, "a", 3]).to_string(),
        ];
        assert_eq!(
            rows(&ctx, &name).await,
            expected,
            "the appended id 10 stays"
        );

        // Two DELETEs of the same data file, the second planned before the first committed.
        let late = ctx
            .sql(&format!("DELETE FROM {name} WHERE id = 3"))
            .await
            .expect("plan");
        assert_eq!(
            write_count(&ctx, &format!("DELETE FROM {name} WHERE id = 2")).await,
            1
        );
        let before = snapshot_count(catalog.as_ref(), &table).await;
        let err = late.collect().await.expect_err("a conflicting delete");
        assert!(
            err.to_string().contains("conflicting concurrent commit"),
            "{err}"
        );
        assert_eq!(
            snapshot_count(catalog.as_ref(), &table).await,
            before,
            "nothing committed"
        );
        let expected = vec![
            json!([10, "b", 10]).to_string(),
            json!([3, "a", 3]).to_string(),
        ];
        assert_eq!(rows(&ctx, &name).await, expected);
        // Run again, it deletes.
        assert_eq!(
            write_count(&ctx, &format!("DELETE FROM {name} WHERE id = 3")).await,
            1
        );
    }
}

/// Tables Spark created, wrote and deleted from (copy-on-write by default; merge-on-read v3
/// with its own deletion vectors), then deleted from by Petrel: Spark reads the model's rows,
/// the copy-on-write table has no delete file, and each v3 data file has one deletion vector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn petrel_deletes_from_tables_spark_wrote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let values: Vec<String> = (0..40)
        .map(|i| format!("({i}, '{}', {})", ["x", "y"][i % 2], i * 3))
        .collect();
    let values = values.join(", ");
    let create = |name: &str, props: &str| {
        format!(
            "CREATE TABLE iceberg.db.{name} (id BIGINT, region STRING, amount BIGINT) USING iceberg \
             PARTITIONED BY (region) TBLPROPERTIES ({props})"
        )
    };
    let cow = create("spark_cow", "'format-version'='2'");
    let dv = create(
        "spark_dv",
        "'format-version'='3', 'write.delete.mode'='merge-on-read'",
    );
    let fill_cow = format!("INSERT INTO iceberg.db.spark_cow VALUES {values}");
    let fill_dv = format!("INSERT INTO iceberg.db.spark_dv VALUES {values}");
    read_back_with(
        &warehouse,
        &["spark_cow", "spark_dv"],
        &[
            &cow,
            &fill_cow,
            "DELETE FROM iceberg.db.spark_cow WHERE id < 4",
            &dv,
            &fill_dv,
            "DELETE FROM iceberg.db.spark_dv WHERE id < 4",
        ],
        false,
    );
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let mut model = Model::default();
    for i in 4..40i64 {
        model
            .0
            .insert(i, (["x", "y"][(i % 2) as usize].to_string(), Some(i * 3)));
    }
    for table in ["spark_cow", "spark_dv"] {
        let name = format!("iceberg.db.{table}");
        assert_eq!(
            rows(&ctx, &name).await,
            model.rows(),
            "{table} as Spark left it"
        );
        let n = write_count(
            &ctx,
            &format!("DELETE FROM {name} WHERE id % 5 = 0 AND region = 'x'"),
        )
        .await;
        let mut after = model.clone();
        assert_eq!(
            n,
            after.delete(|id, region, _| !(id % 5 == 0 && region == "x"))
        );
        assert_eq!(rows(&ctx, &name).await, after.rows(), "{table}");
    }
    let mut after = model.clone();
    after.delete(|id, region, _| !(id % 5 == 0 && region == "x"));
    let seen = read_back(&warehouse, &["spark_cow", "spark_dv"]);
    for table in ["spark_cow", "spark_dv"] {
        let t = &seen[table];
        assert_eq!(
            result_rows(&t["spark"], &["id", "region", "amount"]),
            after.rows(),
            "Spark reads {table}"
        );
        let last = t["snapshots"]
            .as_array()
            .and_then(|s| s.last())
            .expect("snapshots");
        let files: Vec<&str> = t["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["file_path"].as_str().expect("path"))
            .collect();
        if table == "spark_cow" {
            assert_eq!(last["operation"], "overwrite", "{last}");
            assert!(
                !files
                    .iter()
                    .any(|f| f.contains("delete") || f.ends_with(".puffin")),
                "{files:?}"
            );
        } else {
            assert_eq!(last["operation"], "delete", "{last}");
            // Two data files (regions x and y); Spark's DELETE gave both a vector, Petrel's
            // replaced x's with a merged one: still one vector per data file.
            let vectors = files.iter().filter(|f| f.ends_with(".puffin")).count();
            assert_eq!(vectors, 2, "{files:?}");
        }
    }
}
