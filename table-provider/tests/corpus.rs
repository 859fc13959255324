//! Reads every table of the fixture corpus (Spark, the Iceberg Java API, PyIceberg and a
//! PyIceberg fork wrote them) at every snapshot and ref, and runs the recorded queries,
//! comparing with what Spark computed (`expected/<table>.json`). The corpus was written at
//! another location and moved, so every read also exercises moved-table path mapping.
//!
//! Most of these tables carry deletes (position deletes from Spark's DELETE / UPDATE / MERGE,
//! deletes across partition evolution, v3 deletion vectors, equality deletes from the Java API
//! and from a PyIceberg fork, keys re-inserted after their delete): every one is merged on read.

mod common;

use std::sync::Arc;

use common::{assert_result, corpus_dir, query, session};
use petrel_table_provider::FileSystemCatalog;
use serde_json::Value;

fn tables() -> Vec<(String, Value)> {
    let index: Value = serde_json::from_slice(
        &std::fs::read(corpus_dir().join("index.json"))
            .expect("corpus index.json (PETREL_CORPUS?)"),
    )
    .expect("index json");
    index["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| {
            let name = t["table"].as_str().expect("name").to_string();
            let path = corpus_dir().join("expected").join(format!("{name}.json"));
            let expected = serde_json::from_slice(&std::fs::read(path).expect("expected json"))
                .expect("expected json parses");
            (name, expected)
        })
        .collect()
}

/// Whether the snapshot `id` of `expected` has live delete files.
fn has_deletes(expected: &Value, id: i64) -> bool {
    expected["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .find(|s| s["snapshot_id"].as_i64() == Some(id))
        .and_then(|s| s["summary"]["total-delete-files"].as_str())
        .is_some_and(|n| n != "0")
}

async fn check(ctx: &datafusion::prelude::SessionContext, what: &str, sql: &str, expected: &Value) {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{what}: {sql} failed: {e}"));
    assert_result(what, &batches, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_matches_spark_at_every_snapshot_and_ref() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let mut compared = 0;
    let mut merged = 0;
    for (table, expected) in tables() {
        let fq = format!("iceberg.db.{table}");
        let current_id = expected["refs"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == "main"))
            .and_then(|r| r["snapshot_id"].as_i64())
            .expect("main ref");
        let current_deletes = has_deletes(&expected, current_id);
        let mut cases: Vec<(String, String, bool, Value)> = vec![(
            format!("{table} current"),
            format!("SELECT * FROM {fq}"),
            current_deletes,
            expected["current"].clone(),
        )];
        for s in expected["snapshots"].as_array().expect("snapshots") {
            let id = s["snapshot_id"].as_i64().expect("id");
            cases.push((
                format!("{table} snapshot {id}"),
                format!("SELECT * FROM {fq} VERSION AS OF {id}"),
                has_deletes(&expected, id),
                s["version_as_of"].clone(),
            ));
            cases.push((
                format!("{table} snapshot {id} (Trino syntax)"),
                format!("SELECT * FROM {fq} FOR VERSION AS OF {id}"),
                has_deletes(&expected, id),
                s["version_as_of"].clone(),
            ));
            // As of the commit time: the same snapshot.
            let committed = s["committed_at"].as_str().expect("committed_at");
            cases.push((
                format!("{table} timestamp {committed}"),
                format!("SELECT * FROM {fq} FOR TIMESTAMP AS OF TIMESTAMP '{committed}'"),
                has_deletes(&expected, id),
                s["version_as_of"].clone(),
            ));
        }
        for r in expected["refs"].as_array().expect("refs") {
            let name = r["name"].as_str().expect("ref name");
            let id = r["snapshot_id"].as_i64().expect("ref id");
            cases.push((
                format!("{table} ref {name}"),
                format!("SELECT * FROM {fq} VERSION AS OF '{name}'"),
                has_deletes(&expected, id),
                r["version_as_of"].clone(),
            ));
        }
        for q in expected["queries"].as_array().expect("queries") {
            cases.push((
                format!("{table} query {}", q["id"]),
                q["sql"].as_str().expect("sql").to_string(),
                current_deletes,
                q["result"].clone(),
            ));
        }
        for (what, sql, with_deletes, result) in cases {
            check(&ctx, &what, &sql, &result).await;
            compared += 1;
            merged += usize::from(with_deletes);
        }
    }
    eprintln!("corpus: {compared} results matched Spark ({merged} of them merge-on-read)");
    assert_eq!(compared, 137, "every corpus check ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_errors_name_the_table_and_snapshot() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let err = query(
        &ctx,
        "SELECT * FROM iceberg.db.pyiceberg_cow VERSION AS OF 42",
    )
    .await
    .expect_err("unknown snapshot");
    assert!(
        err.to_string()
            .contains("db.pyiceberg_cow has no snapshot with id 42"),
        "{err}"
    );
    let err = query(
        &ctx,
        "SELECT * FROM iceberg.db.pyiceberg_cow VERSION AS OF 'nope'",
    )
    .await
    .expect_err("unknown ref");
    assert!(
        err.to_string().contains("no branch or tag named \"nope\""),
        "{err}"
    );
    let err = query(&ctx, "SELECT * FROM iceberg.db.pyiceberg_cow FOR TIMESTAMP AS OF TIMESTAMP '2000-01-01 00:00:00'")
        .await
        .expect_err("before first snapshot");
    assert!(
        err.to_string().contains("no snapshot at or before"),
        "{err}"
    );
    let err = query(&ctx, "SELECT * FROM iceberg.db.no_such_table")
        .await
        .expect_err("missing");
    assert!(err.to_string().contains("no_such_table"), "{err}");
}
