//! `INSERT OVERWRITE`, dynamic as Spark's default: the partitions the new rows land in are
//! replaced, the others kept; an unpartitioned table is replaced whole. Checked against a model
//! of the rows, then read back by Spark 3.5 + Iceberg 1.10 and PyIceberg (rows, snapshot
//! operations and summaries, time travel to each snapshot, row lineage in format 3).

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{
    duckdb_rows, query, read_back, read_back_with, rows_json, run_ddl, session, warehouse_with_db,
    write_count,
};
use datafusion::prelude::SessionContext;
use petrel_table_provider::{Catalog, Namespace, TableIdent};
use serde_json::{Value, json};

/// `(id, region, amount)` rows of `sql`, sorted.
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Row> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out: Vec<Row> = rows_json(&batches, &[])
        .into_iter()
        .map(|r| {
            (
                r[0].as_i64().expect("id"),
                r[1].as_str().expect("region").to_string(),
                r[2].as_i64().expect("amount"),
            )
        })
        .collect();
    out.sort();
    out
}

/// `(id, region, amount)`.
type Row = (i64, String, i64);

fn values(rows: &[(i64, &str, i64)]) -> String {
    rows.iter()
        .map(|(id, region, amount)| format!("({id}, '{region}', {amount})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The model: rows by region, replaced region by region as Spark's dynamic overwrite does.
#[derive(Default, Clone)]
struct Model(BTreeMap<String, Vec<Row>>);

impl Model {
    fn insert(&mut self, rows: &[(i64, &str, i64)]) {
        for (id, region, amount) in rows {
            self.0
                .entry(region.to_string())
                .or_default()
                .push((*id, region.to_string(), *amount));
        }
    }

    fn overwrite(&mut self, rows: &[(i64, &str, i64)]) {
        for (_, region, _) in rows {
            self.0.remove(*region);
        }
        self.insert(rows);
    }

    fn rows(&self) -> Vec<Row> {
        let mut out: Vec<_> = self.0.values().flatten().cloned().collect();
        out.sort();
        out
    }
}

async fn snapshot_ids(catalog: &dyn Catalog, table: &str) -> Vec<i64> {
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), table);
    let loaded = catalog.load_table(&ident).await.expect("load");
    let mut snapshots: Vec<_> = loaded.metadata().snapshots().cloned().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    snapshots.iter().map(|s| s.snapshot_id()).collect()
}

fn spark_rows(result: &Value) -> Vec<Row> {
    let mut out: Vec<_> = result["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r[0].as_i64().expect("id"),
                r[1].as_str().expect("region").to_string(),
                r[2].as_i64().expect("amount"),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwrite_replaces_written_partitions_and_whole_unpartitioned_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let mut history: BTreeMap<&str, Vec<Vec<Row>>> = BTreeMap::new();

    for (table, version) in [("by_region", 2), ("by_region_v3", 3)] {
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.{table} (id BIGINT, region STRING, amount BIGINT) \
                 PARTITIONED BY (region) TBLPROPERTIES ('format-version'='{version}')"
            ),
        )
        .await;
        let name = format!("iceberg.db.{table}");
        let mut model = Model::default();
        let mut seen = Vec::new();
        let first = [
            (1, "a", 10),
            (2, "a", 20),
            (3, "b", 30),
            (4, "c", 40),
            (5, "b", 50),
        ];
        assert_eq!(
            write_count(
                &ctx,
                &format!("INSERT INTO {name} VALUES {}", values(&first))
            )
            .await,
            5
        );
        model.insert(&first);
        seen.push(model.rows());
        // Replaces region b (two rows, one file) and adds region d; a and c stay.
        let second = [(6, "b", 60), (7, "d", 70)];
        assert_eq!(
            write_count(
                &ctx,
                &format!("INSERT OVERWRITE TABLE {name} VALUES {}", values(&second))
            )
            .await,
            2
        );
        model.overwrite(&second);
        seen.push(model.rows());
        assert_eq!(
            rows(&ctx, &format!("SELECT * FROM {name}")).await,
            model.rows()
        );
        // From a query over the same table: region a's rows, doubled, replace region a.
        assert_eq!(
            write_count(
                &ctx,
                &format!(
                    "INSERT OVERWRITE {name} SELECT id + 100, region, amount * 2 FROM {name} \
                     WHERE region = 'a'"
                )
            )
            .await,
            2
        );
        model.overwrite(&[(101, "a", 20), (102, "a", 40)]);
        seen.push(model.rows());
        assert_eq!(
            rows(&ctx, &format!("SELECT * FROM {name}")).await,
            model.rows()
        );
        // Nothing written: nothing replaced, no snapshot.
        assert_eq!(
            write_count(
                &ctx,
                &format!("INSERT OVERWRITE {name} SELECT * FROM {name} WHERE id < 0")
            )
            .await,
            0
        );
        assert_eq!(snapshot_ids(catalog.as_ref(), table).await.len(), 3);
        // Time travel to every snapshot reads that snapshot's rows.
        for (i, id) in snapshot_ids(catalog.as_ref(), table)
            .await
            .into_iter()
            .enumerate()
        {
            assert_eq!(
                rows(&ctx, &format!("SELECT * FROM {name} VERSION AS OF {id}")).await,
                seen[i],
                "{table} at snapshot {i}"
            );
        }
        history.insert(table, seen);
    }

    // Unpartitioned: everything is replaced, even by an empty result.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.flat (id BIGINT, region STRING, amount BIGINT)",
    )
    .await;
    let first = [(1, "a", 1), (2, "b", 2), (3, "c", 3)];
    write_count(
        &ctx,
        &format!("INSERT INTO iceberg.db.flat VALUES {}", values(&first)),
    )
    .await;
    write_count(&ctx, "INSERT INTO iceberg.db.flat VALUES (4, 'd', 4)").await;
    assert_eq!(
        write_count(&ctx, "INSERT OVERWRITE iceberg.db.flat VALUES (9, 'z', 9)").await,
        1
    );
    assert_eq!(
        rows(&ctx, "SELECT * FROM iceberg.db.flat").await,
        vec![(9, "z".to_string(), 9)]
    );
    assert_eq!(
        write_count(
            &ctx,
            "INSERT OVERWRITE iceberg.db.flat SELECT * FROM iceberg.db.flat WHERE false"
        )
        .await,
        0
    );
    assert_eq!(rows(&ctx, "SELECT * FROM iceberg.db.flat").await, vec![]);
    assert_eq!(snapshot_ids(catalog.as_ref(), "flat").await.len(), 4);
    let refused = query(&ctx, "REPLACE INTO iceberg.db.flat VALUES (1, 'a', 1)").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("INSERT OVERWRITE")),
        "{refused:?}"
    );

    // Spark and PyIceberg read what Petrel wrote, snapshot by snapshot.
    let seen = read_back(&warehouse, &["by_region", "by_region_v3", "flat"]);
    for (table, snapshots_rows) in &history {
        let t = &seen[*table];
        assert_eq!(t["metric_mismatches"], json!([]), "{table}");
        assert_eq!(
            &spark_rows(&t["spark"]),
            snapshots_rows.last().expect("rows"),
            "Spark reads {table}"
        );
        assert_eq!(
            t["pyiceberg"].as_array().map(Vec::len),
            Some(snapshots_rows.last().expect("rows").len()),
            "PyIceberg reads {table}"
        );
        let snapshots = t["snapshots"].as_array().expect("snapshots");
        let operations: Vec<&str> = snapshots
            .iter()
            .map(|s| s["operation"].as_str().expect("operation"))
            .collect();
        assert_eq!(operations, ["append", "overwrite", "overwrite"], "{table}");
        let summary = &snapshots[1]["summary"];
        assert_eq!(summary["added-data-files"], "2", "{table}: {summary}");
        assert_eq!(summary["deleted-data-files"], "1", "{table}: {summary}");
        assert_eq!(summary["deleted-records"], "2", "{table}: {summary}");
        assert_eq!(
            summary["changed-partition-count"], "2",
            "{table}: {summary}"
        );
        assert_eq!(summary["total-records"], "5", "{table}: {summary}");
        assert_eq!(summary["total-data-files"], "4", "{table}: {summary}");
        let files = t["files"].as_array().expect("files");
        assert_eq!(files.len(), 4, "{table}: a, b, c and d, one file each");
    }
    let lineage = &seen["by_region_v3"]["row_lineage"];
    assert_eq!(lineage["rows"], 5);
    assert_eq!(lineage["row_ids"], 5);
    assert_eq!(
        lineage["distinct"], 5,
        "every row keeps a distinct _row_id after manifests were rewritten"
    );
    let flat = &seen["flat"];
    assert_eq!(flat["spark"]["count"], 0, "Spark reads the emptied table");
    let operations: Vec<&str> = flat["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["operation"].as_str().expect("operation"))
        .collect();
    assert_eq!(operations, ["append", "append", "overwrite", "overwrite"]);
    assert_eq!(
        duckdb_rows(&seen["by_region"], &["id", "region", "amount"]).len(),
        5
    );
}

/// Spark deletes rows with deletion vectors; Petrel's `INSERT OVERWRITE` of one partition then
/// removes that partition's data file and its deletion vector, and keeps the others'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwrite_removes_the_replaced_partitions_delete_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.dv (id BIGINT, region STRING, amount BIGINT) \
         PARTITIONED BY (region) TBLPROPERTIES ('format-version'='3')",
    )
    .await;
    let first = [
        (1, "a", 10),
        (2, "a", 20),
        (3, "b", 30),
        (4, "b", 40),
        (5, "c", 50),
    ];
    write_count(
        &ctx,
        &format!("INSERT INTO iceberg.db.dv VALUES {}", values(&first)),
    )
    .await;
    // Spark deletes one row in a and one in b: merge-on-read, so two deletion vectors.
    let seen = read_back_with(
        &warehouse,
        &["dv"],
        &["DELETE FROM iceberg.db.dv WHERE id IN (1, 3)"],
        false,
    );
    let summary = &seen["dv"]["snapshots"][1]["summary"];
    assert_eq!(summary["added-dvs"], "2", "{summary}");
    let mut model = Model::default();
    model.insert(&[(2, "a", 20), (4, "b", 40), (5, "c", 50)]);
    assert_eq!(
        rows(&ctx, "SELECT * FROM iceberg.db.dv").await,
        model.rows()
    );

    let second = [(6, "b", 60), (7, "b", 70)];
    write_count(
        &ctx,
        &format!("INSERT OVERWRITE iceberg.db.dv VALUES {}", values(&second)),
    )
    .await;
    model.overwrite(&second);
    assert_eq!(
        rows(&ctx, "SELECT * FROM iceberg.db.dv").await,
        model.rows()
    );

    let seen = read_back(&warehouse, &["dv"]);
    let dv = &seen["dv"];
    assert_eq!(
        spark_rows(&dv["spark"]),
        model.rows(),
        "Spark reads the rows"
    );
    let snapshots = dv["snapshots"].as_array().expect("snapshots");
    let summary = &snapshots[2]["summary"];
    assert_eq!(snapshots[2]["operation"], "overwrite");
    assert_eq!(summary["deleted-data-files"], "1", "{summary}");
    assert_eq!(summary["deleted-records"], "2", "{summary}");
    assert_eq!(summary["removed-delete-files"], "1", "{summary}");
    assert_eq!(summary["removed-dvs"], "1", "{summary}");
    assert_eq!(summary["removed-position-deletes"], "1", "{summary}");
    assert_eq!(summary["total-delete-files"], "1", "{summary}");
    assert_eq!(summary["total-position-deletes"], "1", "{summary}");
    assert_eq!(summary["total-records"], "5", "{summary}");
    assert_eq!(
        duckdb_rows(dv, &["id", "region", "amount"]),
        model
            .rows()
            .iter()
            .map(|(id, region, amount)| json!([id, region, amount]).to_string())
            .collect::<Vec<_>>(),
        "DuckDB reads the rows"
    );
}
