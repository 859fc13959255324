//! Row-level writes under concurrency (issue #10, "Conflict validation"):
//!
//! - concurrent UPDATEs of the same rows from several sessions end in the state of some serial
//!   order of the ones that reported success (each row's value moved once per success, every
//!   updated row tagged by the same last statement), in format 2 and 3, merge-on-read and
//!   copy-on-write, on the filesystem and the SQLite catalog; the losers fail with the
//!   conflict error and commit nothing;
//! - serializable isolation (Iceberg's default): a DELETE / UPDATE / MERGE planned, then raced
//!   by an append, then executed, retries over appends that cannot hold rows matching its
//!   filter (another partition, column bounds outside it) and fails with the conflict error
//!   over one that may; under `snapshot` isolation it succeeds;
//! - a DELETE racing `CALL iceberg.system.rewrite_data_files` of the same files, planned before
//!   and for real: either fails cleanly or succeeds, and the rows are the model's (nothing
//!   resurrected, nothing lost);
//!
//! and Spark 3.5 + Iceberg 1.10 reads the filesystem tables at the model's rows.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{
    query, read_back_with, result_rows, run_ddl, session, snapshot_count, sorted_rows,
    warehouse_with_db,
};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use petrel_table_provider::{Catalog, SqlCatalog};
use serde_json::{Value, json};

/// The text every conflict error carries (`Error::ConcurrentModification`).
const CONFLICT: &str = "conflicting concurrent commit";

/// A table's rows `(k, region, v, tag)`, keyed by `(region, k)`; a key may repeat (appends).
type Model = Vec<(i64, String, i64, String)>;

fn model_rows(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = model
        .iter()
        .map(|(k, region, v, tag)| json!([k, region, v, tag]).to_string())
        .collect();
    out.sort();
    out
}

async fn rows(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = format!("SELECT k, region, v, tag FROM iceberg.db.{table}");
    sorted_rows(ctx, &sql).await
}

/// Creates `db.table` with `props` and inserts `rows` (one INSERT per chunk of `per_file`
/// rows, so several data files), returning the model.
async fn create(
    ctx: &SessionContext,
    table: &str,
    partitioned: bool,
    props: &str,
    rows: &[(i64, &str)],
    per_file: usize,
) -> Model {
    let partition = if partitioned {
        " PARTITIONED BY (region)"
    } else {
        ""
    };
    run_ddl(
        ctx,
        &format!(
            "CREATE TABLE iceberg.db.{table} (k BIGINT NOT NULL, region STRING, v BIGINT, \
             tag STRING){partition} TBLPROPERTIES ({props}, 'commit.retry.min-wait-ms'='5', \
             'commit.retry.num-retries'='20')"
        ),
    )
    .await;
    let mut model = Model::new();
    for chunk in rows.chunks(per_file) {
        let values: Vec<String> = chunk
            .iter()
            .map(|(k, region)| {
                model.push((*k, region.to_string(), k * 10, "init".into()));
                format!("({k}, '{region}', {}, 'init')", k * 10)
            })
            .collect();
        let sql = format!(
            "INSERT INTO iceberg.db.{table} VALUES {}",
            values.join(", ")
        );
        query(ctx, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    model
}

/// The physical plan of a write statement, planned now (its snapshot read now) to run later.
async fn plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    let state = ctx.state();
    let logical = match petrel_table_provider::statements::plan_statement(&state, sql).await {
        Ok(Some(plan)) => plan,
        Ok(None) => ctx
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .logical_plan()
            .clone(),
        Err(e) => panic!("{sql}: {e}"),
    };
    state
        .create_physical_plan(&logical)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs a planned write; its count or the error's text.
async fn run(ctx: &SessionContext, plan: Arc<dyn ExecutionPlan>) -> Result<u64, String> {
    let batches = collect(plan, ctx.task_ctx())
        .await
        .map_err(|e| e.to_string())?;
    Ok(batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .expect("count")
        .value(0))
}

fn assert_conflict(what: &str, result: Result<u64, String>) {
    match result {
        Err(e) => assert!(e.contains(CONFLICT), "{what}: not the conflict error: {e}"),
        Ok(n) => panic!("{what}: succeeded ({n} rows) instead of conflicting"),
    }
}

/// The UPDATE tables: (name, properties).
const UPDATE_TABLES: [(&str, &str); 4] = [
    (
        "upd_mor_v2",
        "'format-version'='2', 'write.update.mode'='merge-on-read'",
    ),
    (
        "upd_mor_v3",
        "'format-version'='3', 'write.update.mode'='merge-on-read'",
    ),
    (
        "upd_cow_v2",
        "'format-version'='2', 'write.update.mode'='copy-on-write'",
    ),
    (
        "upd_cow_v3",
        "'format-version'='3', 'write.update.mode'='copy-on-write'",
    ),
];

/// `sessions` sessions each run `UPDATE … SET v = v + 1, tag = <its own> WHERE k < 100` at
/// once, `rounds` times; the table ends as some serial order of the successes leaves it.
async fn concurrent_updates(
    catalog: &Arc<dyn Catalog>,
    table: &str,
    props: &str,
    rounds: usize,
    sessions: usize,
) -> Model {
    let ctx = session(vec![("iceberg", Arc::clone(catalog))]);
    let keys: Vec<(i64, &str)> = (0..150).map(|k| (k, "r")).collect();
    let mut model = create(&ctx, table, false, props, &keys, 50).await;
    let mut successes = 0i64;
    let mut last_tags = Vec::new();
    for round in 0..rounds {
        let mut tasks = Vec::new();
        for i in 0..sessions {
            let ctx = session(vec![("iceberg", Arc::clone(catalog))]);
            let tag = format!("r{round}s{i}");
            let sql =
                format!("UPDATE iceberg.db.{table} SET v = v + 1, tag = '{tag}' WHERE k < 100");
            tasks.push(tokio::spawn(async move {
                let result = query(&ctx, &sql).await.map_err(|e| e.to_string());
                (tag, result)
            }));
        }
        let mut won = Vec::new();
        for task in tasks {
            let (tag, result) = task.await.expect("task");
            match result {
                Ok(batches) => {
                    let count = batches[0]
                        .column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::UInt64Array>()
                        .expect("count")
                        .value(0);
                    assert_eq!(count, 100, "{table}: {tag}");
                    won.push(tag);
                }
                Err(e) => assert!(e.contains(CONFLICT), "{table}: {tag}: {e}"),
            }
        }
        assert!(!won.is_empty(), "{table} round {round}: someone wins");
        successes += won.len() as i64;
        last_tags = won;
    }
    // Every success moved every selected row once, and the rows were all last updated by the
    // same statement, one of the last round's winners.
    let after = rows(&ctx, table).await;
    let tag = after
        .iter()
        .find_map(|r| {
            let row: Value = serde_json::from_str(r).expect("row");
            (row[0].as_i64() == Some(0)).then(|| row[3].as_str().expect("tag").to_string())
        })
        .expect("row 0");
    assert!(
        last_tags.contains(&tag),
        "{table}: last tag {tag} of a winner of the last round {last_tags:?}"
    );
    for (k, _, v, t) in &mut model {
        if *k < 100 {
            *v += successes;
            *t = tag.clone();
        }
    }
    assert_eq!(after, model_rows(&model), "{table}: {successes} successes");
    eprintln!(
        "{table}: {successes} of {} UPDATEs succeeded",
        rounds * sessions
    );
    assert_eq!(
        snapshot_count(catalog.as_ref(), table).await,
        3 + successes as usize,
        "{table}: one snapshot per successful UPDATE, none for the losers"
    );
    model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_updates_and_compactions_end_in_a_serial_order() {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, fs) = warehouse_with_db(dir.path()).await;
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(dir.path().join("sqlwh").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    let sql_ctx = session(vec![("iceberg", Arc::clone(&sql))]);
    run_ddl(&sql_ctx, "CREATE SCHEMA iceberg.db").await;
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    for (table, props) in UPDATE_TABLES {
        let model = concurrent_updates(&fs, table, props, 2, 4).await;
        models.insert(table.to_string(), model);
        concurrent_updates(&sql, table, props, 2, 3).await;
    }

    // A DELETE racing a compaction of the same files.
    let ctx = session(vec![("iceberg", Arc::clone(&fs))]);
    let ctx2 = session(vec![("iceberg", Arc::clone(&fs))]);
    for (table, props) in [
        (
            "race_mor_v2",
            "'format-version'='2', 'write.delete.mode'='merge-on-read'",
        ),
        (
            "race_mor_v3",
            "'format-version'='3', 'write.delete.mode'='merge-on-read'",
        ),
        (
            "race_cow_v2",
            "'format-version'='2', 'write.delete.mode'='copy-on-write'",
        ),
    ] {
        let keys: Vec<(i64, &str)> = (0..30).map(|k| (k, "r")).collect();
        let mut model = create(&ctx, table, false, props, &keys, 10).await;
        let call = format!(
            "CALL iceberg.system.rewrite_data_files(table => 'db.{table}', \
             options => map('rewrite-all', 'true'))"
        );
        // Planned before the compaction, run after it: its files are gone, it fails cleanly.
        let delete = plan(&ctx, &format!("DELETE FROM iceberg.db.{table} WHERE k < 5")).await;
        query(&ctx2, &call)
            .await
            .unwrap_or_else(|e| panic!("{call}: {e}"));
        assert_conflict(
            &format!("{table}: DELETE after compaction"),
            run(&ctx, delete).await,
        );
        assert_eq!(rows(&ctx, table).await, model_rows(&model), "{table}");

        // Racing for real: whichever wins, the rows are the model's.
        for round in 0..3i64 {
            let values: Vec<String> = (0..10i64)
                .map(|i| {
                    let k = 100 * (round + 1) + i;
                    model.push((k, "r".into(), k * 10, "init".into()));
                    format!("({k}, 'r', {}, 'init')", k * 10)
                })
                .collect();
            query(
                &ctx,
                &format!(
                    "INSERT INTO iceberg.db.{table} VALUES {}",
                    values.join(", ")
                ),
            )
            .await
            .expect("insert");
            let victims = [round * 3, 100 * (round + 1) + 3];
            let delete = format!(
                "DELETE FROM iceberg.db.{table} WHERE k = {} OR k = {}",
                victims[0], victims[1]
            );
            let (c1, c2) = (ctx.clone(), ctx2.clone());
            let call2 = call.clone();
            let deleting =
                tokio::spawn(async move { query(&c1, &delete).await.map_err(|e| e.to_string()) });
            let compacting =
                tokio::spawn(async move { query(&c2, &call2).await.map_err(|e| e.to_string()) });
            let (deleted, compacted) = (
                deleting.await.expect("task"),
                compacting.await.expect("task"),
            );
            if let Err(e) = &compacted {
                assert!(
                    e.contains(CONFLICT),
                    "{table} round {round}: compaction: {e}"
                );
            }
            match deleted {
                Ok(_) => model.retain(|(k, ..)| !victims.contains(k)),
                Err(e) => assert!(e.contains(CONFLICT), "{table} round {round}: DELETE: {e}"),
            }
            assert_eq!(
                rows(&ctx, table).await,
                model_rows(&model),
                "{table} round {round}: deleted {:?}, compacted {:?}",
                deleted_ok(&model, &victims),
                compacted.is_ok()
            );
        }
        models.insert(table.to_string(), model);
    }

    eprintln!("Petrel part: {:?}", started.elapsed());
    let names: Vec<&str> = models.keys().map(String::as_str).collect();
    // The rows now (no time travel to every snapshot: that doubles Spark's time).
    let seen = read_back_with(&warehouse, &names, &[], false);
    for (table, model) in &models {
        assert_eq!(
            result_rows(&seen[table.as_str()]["spark"], &["k", "region", "v", "tag"]),
            model_rows(model),
            "Spark reads {table}"
        );
    }
}

fn deleted_ok(model: &Model, victims: &[i64]) -> bool {
    !model.iter().any(|(k, ..)| victims.contains(k))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_conflict_only_when_they_may_match_the_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, fs) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&fs))]);
    let other = session(vec![("iceberg", Arc::clone(&fs))]);
    let keys: Vec<(i64, &str)> = (0..100)
        .map(|k| (k, "a"))
        .chain((0..100).map(|k| (k, "b")))
        .collect();
    for (table, props) in [
        (
            "c_mor_v2",
            "'format-version'='2', 'write.delete.mode'='merge-on-read', \
             'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'",
        ),
        (
            "c_cow_v3",
            "'format-version'='3', 'write.delete.mode'='copy-on-write', \
             'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write'",
        ),
    ] {
        let mut model = create(&ctx, table, true, props, &keys, 100).await;
        let name = format!("iceberg.db.{table}");
        let append = |k: i64, region: &'static str| {
            let other = other.clone();
            let name = name.clone();
            async move {
                let sql = format!(
                    "INSERT INTO {name} VALUES ({k}, '{region}', {}, 'new')",
                    k * 10
                );
                query(&other, &sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        };
        let new_row = |k: i64, region: &str| (k, region.to_string(), k * 10, "new".to_string());

        // Another partition: retried over, the DELETE succeeds.
        let delete = plan(
            &ctx,
            &format!("DELETE FROM {name} WHERE region = 'a' AND k < 10"),
        )
        .await;
        append(1000, "b").await;
        model.push(new_row(1000, "b"));
        assert_eq!(run(&ctx, delete).await, Ok(10), "{table}: append to b");
        model.retain(|(k, r, ..)| !(r == "a" && *k < 10));
        assert_eq!(rows(&ctx, table).await, model_rows(&model), "{table}");

        // The same partition, outside the filter's range by column bounds: succeeds.
        let delete = plan(
            &ctx,
            &format!("DELETE FROM {name} WHERE region = 'a' AND k >= 10 AND k < 20"),
        )
        .await;
        append(5000, "a").await;
        model.push(new_row(5000, "a"));
        assert_eq!(run(&ctx, delete).await, Ok(10), "{table}: append of k 5000");
        model.retain(|(k, r, ..)| !(r == "a" && (10..20).contains(k)));
        assert_eq!(rows(&ctx, table).await, model_rows(&model), "{table}");

        // Rows that may match: the DELETE fails and commits nothing.
        let before = snapshot_count(fs.as_ref(), table).await;
        let delete = plan(
            &ctx,
            &format!("DELETE FROM {name} WHERE region = 'a' AND k >= 20 AND k < 30"),
        )
        .await;
        append(25, "a").await;
        model.push(new_row(25, "a"));
        assert_conflict(
            &format!("{table}: DELETE over a matching append"),
            run(&ctx, delete).await,
        );
        assert_eq!(
            snapshot_count(fs.as_ref(), table).await,
            before + 1,
            "only the append"
        );
        assert_eq!(rows(&ctx, table).await, model_rows(&model), "{table}");

        // UPDATE: the same rule for its filter.
        let update = format!("UPDATE {name} SET v = v + 1 WHERE region = 'b' AND k < 10");
        let planned = plan(&ctx, &update).await;
        append(3, "a").await;
        model.push(new_row(3, "a"));
        assert_eq!(
            run(&ctx, planned).await,
            Ok(10),
            "{table}: UPDATE, append to a"
        );
        for (k, r, v, _) in &mut model {
            if r == "b" && *k < 10 {
                *v += 1;
            }
        }
        let planned = plan(&ctx, &update).await;
        append(4, "b").await;
        model.push(new_row(4, "b"));
        assert_conflict(
            &format!("{table}: UPDATE over a matching append"),
            run(&ctx, planned).await,
        );
        assert_eq!(rows(&ctx, table).await, model_rows(&model), "{table}");

        // MERGE: its target-side ON condition is the filter.
        let merge = format!(
            "MERGE INTO {name} t USING (SELECT 40 AS k) s ON t.k = s.k AND t.region = 'b' \
             WHEN MATCHED THEN UPDATE SET v = 0"
        );
        let planned = plan(&ctx, &merge).await;
        append(40, "a").await;
        model.push(new_row(40, "a"));
        assert_eq!(
            run(&ctx, planned).await,
            Ok(1),
            "{table}: MERGE, append to a"
        );
        for (k, r, v, _) in &mut model {
            if r == "b" && *k == 40 {
                *v = 0;
            }
        }
        let planned = plan(&ctx, &merge).await;
        append(41, "b").await;
        model.push(new_row(41, "b"));
        assert_conflict(
            &format!("{table}: MERGE over a matching append"),
            run(&ctx, planned).await,
        );
        assert_eq!(rows(&ctx, table).await, model_rows(&model), "{table}");
    }

    // Snapshot isolation: the matching append does not conflict (the DELETE does not see it).
    let mut model = create(
        &ctx,
        "c_snapshot",
        true,
        "'format-version'='2', 'write.delete.mode'='merge-on-read', \
         'write.delete.isolation-level'='snapshot'",
        &keys,
        100,
    )
    .await;
    let delete = plan(
        &ctx,
        "DELETE FROM iceberg.db.c_snapshot WHERE region = 'a' AND k < 30",
    )
    .await;
    query(
        &other,
        "INSERT INTO iceberg.db.c_snapshot VALUES (25, 'a', 250, 'new')",
    )
    .await
    .expect("append");
    model.push((25, "a".into(), 250, "new".into()));
    assert_eq!(run(&ctx, delete).await, Ok(30), "snapshot isolation");
    model.retain(|(k, r, _, tag)| !(r == "a" && *k < 30 && tag == "init"));
    assert_eq!(rows(&ctx, "c_snapshot").await, model_rows(&model));

    // An unknown isolation level is refused by name.
    let bad = create(
        &ctx,
        "c_bad",
        false,
        "'write.delete.isolation-level'='linearizable'",
        &[(1, "a")],
        1,
    )
    .await;
    let e = query(&ctx, "DELETE FROM iceberg.db.c_bad WHERE k = 1")
        .await
        .expect_err("unknown level");
    assert!(
        e.to_string().contains("write.delete.isolation-level"),
        "{e}"
    );
    assert_eq!(rows(&ctx, "c_bad").await, model_rows(&bad));
}
