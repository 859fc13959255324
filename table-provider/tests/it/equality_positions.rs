//! Equality deletes kept as positions (`deletes::merge_on_read`, `EqualityMode`): the first
//! unfiltered scan of a data file with equality deletes records the positions they delete
//! (`equality_positions_recorded`), later scans apply the cached positions instead of probing
//! (`equality_positions_cached`; with every file's positions cached the scan reads no key
//! column and builds no set), and every result — the whole table, every recorded query
//! (projections without the keys, filters, counts), every snapshot — stays what the
//! generator's own model of the delete rules says (`tests/pyiceberg/gen_deletes.py`, the
//! `pyiceberg-deletes` dataset also used by `merge_on_read`).

use crate::common;

use std::sync::{Arc, OnceLock};

use common::{Generated, assert_result, find_scan, query, run_plan, session};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::prelude::SessionContext;
use petrel_table_provider::SqlCatalog;
use serde_json::Value;

fn generated() -> &'static Generated {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    GENERATED.get_or_init(|| common::generated("pyiceberg-deletes"))
}

fn ctx(g: &Generated) -> SessionContext {
    let name = g.expected["catalog_name"].as_str().expect("catalog_name");
    let catalog =
        Arc::new(SqlCatalog::open_sqlite(g.root.join("catalog.db"), name).expect("sql catalog"));
    session(vec![("mor", catalog)])
}

fn table<'a>(g: &'a Generated, name: &str) -> &'a Value {
    g.expected["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name} in expected.json"))
}

/// Runs `sql`, checks its rows against `expected`, returns the scan's metrics.
async fn run(ctx: &SessionContext, sql: &str, expected: &Value) -> MetricsSet {
    let (plan, batches) = run_plan(ctx, sql).await;
    assert_result(sql, &batches, expected);
    find_scan(&plan)
        .and_then(|scan| scan.metrics())
        .unwrap_or_else(|| panic!("no scan metrics in {sql}"))
}

fn value(m: &MetricsSet, key: &str) -> usize {
    m.sum_by_name(key).map_or(0, |v| v.as_usize())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equality_deletes_become_cached_positions_with_unchanged_results() {
    let g = generated();
    // Whole files, and files DataFusion splits into byte ranges across partitions (each range
    // records its row groups; the file is cached once all are covered).
    for split in [false, true] {
        for name in [
            "eq_nulls",
            "eq_two_strings",
            "many_small_deletes",
            "eq_partitioned",
            "eq_and_pos_same_file",
        ] {
            let ctx = ctx(g);
            if split {
                ctx.sql("SET datafusion.optimizer.repartition_file_min_size = 1")
                    .await
                    .expect("set")
                    .collect()
                    .await
                    .expect("set");
            }
            let t = table(g, name);
            let sql = format!("SELECT * FROM mor.db.{name}");
            let first = run(&ctx, &sql, &t["current"]).await;
            let recorded = value(&first, "equality_positions_recorded");
            assert_eq!(
                value(&first, "equality_positions_cached"),
                0,
                "{name}: {first}"
            );
            // A data file with position deletes too is probed (rows the position deletes remove
            // are never probed, so its positions would be incomplete).
            if name == "eq_and_pos_same_file" {
                assert_eq!(recorded, 0, "{name}: {first}");
            } else {
                assert!(recorded > 0, "{name}: {first}");
                assert_eq!(
                    value(&first, "rows_deleted_by_equality"),
                    t["metrics"]["rows_deleted_by_equality"]
                        .as_u64()
                        .expect("rows") as usize,
                    "{name}: {first}"
                );
            }

            // The second scan applies the recorded positions: nothing probed, nothing recorded.
            let second = run(&ctx, &sql, &t["current"]).await;
            assert_eq!(
                value(&second, "equality_positions_cached"),
                recorded,
                "{name}: {second}"
            );
            assert_eq!(
                value(&second, "equality_positions_recorded"),
                0,
                "{name}: {second}"
            );
            // With every file's positions cached the scan is laid out without the key columns
            // and builds no set.
            if recorded > 0 {
                assert_eq!(
                    value(&second, "equality_delete_keys"),
                    0,
                    "{name}: {second}"
                );
            }
            // The rows the cached positions remove still count as deleted by equality.
            assert_eq!(
                value(&second, "rows_deleted_by_equality"),
                t["metrics"]["rows_deleted_by_equality"]
                    .as_u64()
                    .expect("rows") as usize,
                "{name}: {second}"
            );

            // Everything else on the same cache: projections without the keys, filters, counts,
            // limits, and every snapshot (whose equality groups differ, so never a wrong entry).
            let full = format!("mor.db.{name}");
            for q in t["queries"].as_array().expect("queries") {
                let sql = q["sql"].as_str().expect("sql").replace("{t}", &full);
                let batches = query(&ctx, &sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                assert_result(&sql, &batches, &q["result"]);
            }
            for s in t["snapshots"].as_array().expect("snapshots") {
                let id = s["snapshot_id"].as_i64().expect("snapshot_id");
                let sql = format!("SELECT * FROM {full} FOR VERSION AS OF {id}");
                for _ in 0..2 {
                    let batches = query(&ctx, &sql)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                    assert_result(&sql, &batches, &s["result"]);
                }
            }
        }
    }
}
