//! `UPDATE t SET … WHERE …` in merge-on-read (format 2 and 3) and copy-on-write mode: exactly
//! the rows the WHERE clause selects get their new values (a subquery, a partition column
//! moving rows between partitions, NULL-valued predicates keeping rows), one `overwrite`
//! snapshot per statement that changes rows and none otherwise; a NOT NULL violation commits
//! nothing. Checked against a model, then read back by Spark 3.5 + Iceberg 1.10 and DuckDB.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{
    duckdb_rows, pyiceberg_rows, query, read_back, result_rows, run_ddl, session, snapshot_count,
    snapshot_operations, sorted_rows, warehouse_with_db, write_count,
};
use datafusion::prelude::SessionContext;
use serde_json::json;

async fn rows(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = format!("SELECT id, region, amount FROM {table}");
    sorted_rows(ctx, &sql).await
}

/// id → (region, amount).
type Model = BTreeMap<i64, (String, Option<i64>)>;

fn model_rows(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = model
        .iter()
        .map(|(id, (region, amount))| json!([id, region, amount]).to_string())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_change_exactly_the_selected_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.vip (id BIGINT)").await;
    query(&ctx, "INSERT INTO iceberg.db.vip VALUES (3), (4), (500)")
        .await
        .expect("vip");
    let tables = [
        ("upd_mor_v2", "'format-version'='2'"),
        ("upd_mor_v3", "'format-version'='3'"),
        (
            "upd_cow",
            "'format-version'='2', 'write.update.mode'='copy-on-write'",
        ),
    ];
    let mut models = BTreeMap::new();
    for (table, props) in tables {
        let name = format!("iceberg.db.{table}");
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE {name} (id BIGINT NOT NULL, region STRING, amount BIGINT) \
                 PARTITIONED BY (region) TBLPROPERTIES ({props})"
            ),
        )
        .await;
        let mut model = Model::new();
        let mut values = Vec::new();
        for id in 0..30i64 {
            let region = ["x", "y"][(id % 2) as usize];
            let amount = (id % 7 != 6).then_some(id);
            values.push(format!(
                "({id}, '{region}', {})",
                amount.map_or("NULL".into(), |a| a.to_string())
            ));
            model.insert(id, (region.to_string(), amount));
        }
        query(
            &ctx,
            &format!("INSERT INTO {name} VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert");
        let mut expected_snapshots = 1;

        // A column of the selected rows; NULL amounts (amount > 20 is NULL) keep theirs.
        let n = write_count(
            &ctx,
            &format!("UPDATE {name} SET amount = amount * 10 WHERE amount > 20"),
        )
        .await;
        let mut changed = 0;
        for (_, amount) in model.values_mut() {
            if let Some(a) = amount.filter(|a| *a > 20) {
                *amount = Some(a * 10);
                changed += 1;
            }
        }
        assert_eq!(n, changed, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // The partition column: rows move from x to y.
        let n = write_count(
            &ctx,
            &format!("UPDATE {name} SET region = 'y' WHERE region = 'x' AND id < 10"),
        )
        .await;
        let mut changed = 0;
        for (id, (region, _)) in model.iter_mut() {
            if region == "x" && *id < 10 {
                *region = "y".into();
                changed += 1;
            }
        }
        assert_eq!(n, changed, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // A subquery, and several columns at once.
        let n = write_count(
            &ctx,
            &format!(
                "UPDATE {name} SET amount = -1, region = 'z' \
                 WHERE id IN (SELECT id FROM iceberg.db.vip)"
            ),
        )
        .await;
        for id in [3, 4] {
            model.insert(id, ("z".into(), Some(-1)));
        }
        assert_eq!(n, 2, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // Nothing selected: no snapshot. A NOT NULL violation: nothing committed.
        assert_eq!(
            write_count(&ctx, &format!("UPDATE {name} SET amount = 0 WHERE false")).await,
            0
        );
        let err = query(&ctx, &format!("UPDATE {name} SET id = NULL WHERE id = 5"))
            .await
            .expect_err("NOT NULL");
        assert!(err.to_string().to_lowercase().contains("null"), "{err}");
        assert_eq!(
            snapshot_count(catalog.as_ref(), table).await,
            expected_snapshots
        );
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");
        models.insert(table, model);
    }

    let seen = read_back(&warehouse, &["upd_mor_v2", "upd_mor_v3", "upd_cow"]);
    for (table, model) in &models {
        let t = &seen[*table];
        assert_eq!(
            result_rows(&t["spark"], &["id", "region", "amount"]),
            model_rows(model),
            "Spark reads {table}"
        );
        assert_eq!(
            duckdb_rows(t, &["id", "region", "amount"]),
            model_rows(model),
            "DuckDB reads {table}"
        );
        let pyiceberg = pyiceberg_rows(t, &["id", "region", "amount"]);
        assert_eq!(pyiceberg, model_rows(model), "PyIceberg reads {table}");
        let operations = snapshot_operations(t);
        assert_eq!(
            operations,
            ["append", "overwrite", "overwrite", "overwrite"],
            "{table}"
        );
        let files: Vec<&str> = t["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["file_path"].as_str().expect("path"))
            .collect();
        let deletes = files.iter().any(|f| f.contains("-deletes."));
        assert_eq!(deletes, *table != "upd_cow", "{table}: {files:?}");
    }
}
