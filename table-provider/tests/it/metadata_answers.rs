//! Aggregates answered from manifests (`scan::metadata_stats` + DataFusion's
//! `AggregateStatistics`): every answer equals the same query forced through a full scan (a
//! session without that rule), on every corpus table at every snapshot and on Petrel-written
//! tables with NULLs, NaN, long strings, partitions and deletes; the plan holds no scan (no
//! data file opened) exactly where the metadata proves the answer, and keeps the scan where it
//! must not (equality deletes, NaN, truncated strings, filters on non-partition columns).

use crate::common;

use std::sync::Arc;

use arrow::datatypes::DataType;
use arrow::util::pretty::pretty_format_batches;
use common::{
    corpus_dir, corpus_tables, find_scan, query, run_ddl, warehouse_with_db, write_count,
};
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::prelude::{SessionConfig, SessionContext};
use petrel_table_provider::rewrite_time_travel;
use petrel_table_provider::{
    Catalog, FileSystemCatalog, IcebergCatalogProvider, NarrowStructColumns, PetrelQueryPlanner,
    RowLevelDml, SignedZeroEquality,
};

/// A Petrel session; `metadata = false` drops `AggregateStatistics` (every aggregate scans).
fn session(catalog: Arc<dyn Catalog>, metadata: bool) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(4);
    let mut rules = PhysicalOptimizer::new().rules;
    if !metadata {
        rules.retain(|r| r.name() != "aggregate_statistics");
    }
    rules.push(Arc::new(NarrowStructColumns::new()));
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_optimizer_rule(Arc::new(SignedZeroEquality::new()))
        .with_analyzer_rule(Arc::new(RowLevelDml::new()))
        .with_query_planner(Arc::new(PetrelQueryPlanner))
        .with_physical_optimizer_rules(rules)
        .build();
    let ctx = SessionContext::new_with_state(state);
    // The server's `min` / `max` (their answers from statistics are the built-ins').
    for f in petrel_table_provider::petrel_functions() {
        ctx.register_udaf(f);
    }
    ctx.register_catalog("iceberg", Arc::new(IcebergCatalogProvider::new(catalog)));
    ctx
}

/// Both sessions over one catalog.
struct Sessions {
    metadata: SessionContext,
    scan: SessionContext,
}

impl Sessions {
    fn new(catalog: Arc<dyn Catalog>) -> Self {
        Self {
            metadata: session(Arc::clone(&catalog), true),
            scan: session(catalog, false),
        }
    }

    /// Runs `sql` in both sessions, asserts equal results; returns whether the metadata
    /// session answered without a scan.
    async fn check(&self, sql: &str) -> bool {
        let rewritten = rewrite_time_travel(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let plan = self
            .metadata
            .sql(&rewritten)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let answered = find_scan(&plan).is_none();
        let scan_plan = self
            .scan
            .sql(&rewritten)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert!(find_scan(&scan_plan).is_some(), "{sql}: forced scan");
        let got = query(&self.metadata, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let want = query(&self.scan, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let show = |b: &[arrow::record_batch::RecordBatch]| {
            pretty_format_batches(b).expect("format").to_string()
        };
        assert_eq!(show(&got), show(&want), "{sql} (metadata={answered})");
        answered
    }
}

/// Columns whose min/max the test compares (top-level, non-nested, not binary).
async fn columns(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = rewrite_time_travel(&format!("SELECT * FROM {table} LIMIT 0")).expect("rewrite");
    let frame = ctx.sql(&sql).await.expect("schema");
    frame
        .schema()
        .fields()
        .iter()
        .filter(|f| {
            !f.data_type().is_nested()
                && !matches!(
                    f.data_type(),
                    DataType::Binary | DataType::FixedSizeBinary(_) | DataType::BinaryView
                )
        })
        .map(|f| f.name().clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_aggregates_from_metadata_equal_a_full_scan() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let s = Sessions::new(catalog);
    let (mut counts_answered, mut bounds_answered, mut cases) = (0, 0, 0);
    for (table, expected) in corpus_tables(&corpus_dir()) {
        let fq = format!("iceberg.db.{table}");
        let mut versions = vec![String::new()];
        for snap in expected["snapshots"].as_array().expect("snapshots") {
            versions.push(format!(" VERSION AS OF {}", snap["snapshot_id"]));
        }
        for version in &versions {
            let from = format!("{fq}{version}");
            let answered = s.check(&format!("SELECT count(*) FROM {from}")).await;
            counts_answered += usize::from(answered);
            cases += 1;
            // Position deletes covering one data file (Spark 3.5 / Iceberg 1.10 writes them
            // file-scoped) and deletion vectors are subtracted: no scan.
            if ["v2_mor", "v3_dv", "v2_evolved", "pyiceberg_cow"].contains(&table.as_str()) {
                assert!(answered, "{from}: count(*) from metadata");
            }
            // Equality deletes always scan.
            if table.contains("eq") && version.is_empty() {
                assert!(
                    !answered,
                    "{from}: count(*) with equality deletes must scan"
                );
            }
            for c in columns(&s.scan, &from).await {
                let sql = format!("SELECT min(\"{c}\"), max(\"{c}\"), count(\"{c}\") FROM {from}");
                bounds_answered += usize::from(s.check(&sql).await);
                cases += 1;
            }
        }
    }
    eprintln!(
        "corpus: {cases} aggregates compared, {counts_answered} count(*) and {bounds_answered} \
         min/max/count(c) answered from metadata"
    );
    assert!(counts_answered > 0 && bounds_answered > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn petrel_written_aggregates_from_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let s = Sessions::new(catalog);
    let ctx = &s.metadata;
    run_ddl(
        ctx,
        "CREATE TABLE iceberg.db.t (id BIGINT, p STRING, f DOUBLE, g DOUBLE, short STRING, \
         long STRING, d DATE, ts TIMESTAMP, dec DECIMAL(10, 2), n INT) \
         PARTITIONED BY (p) TBLPROPERTIES ('write.delete.mode'='merge-on-read')",
    )
    .await;
    write_count(
        ctx,
        "INSERT INTO iceberg.db.t VALUES \
         (1, 'a', 1.5, 2.0, 'x', 'aaaaaaaaaaaaaaaaaaaaaaaaa1', DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00', 1.25, NULL), \
         (2, 'a', -3.0, CAST('NaN' AS DOUBLE), NULL, 'aaaaaaaaaaaaaaaaaaaaaaaaa2', NULL, NULL, NULL, NULL), \
         (NULL, 'b', NULL, 1.0, 'yy', NULL, DATE '2023-05-06', TIMESTAMP '2020-02-02 00:00:00', -7.5, NULL), \
         (4, 'b', 8.0, 0.5, 'abc', 'zzzzzzzzzzzzzzzzzzzzzzzzz', DATE '2025-12-31', TIMESTAMP '2030-01-01 00:00:00', 99.99, NULL)",
    )
    .await;
    write_count(
        ctx,
        "INSERT INTO iceberg.db.t VALUES (10, 'c', 0.0, 3.0, 'q', 'b', DATE '2024-06-01', TIMESTAMP '2024-06-01 00:00:00', 0.01, NULL)",
    )
    .await;
    let t = "iceberg.db.t";
    // Whole table: count(*), exact bounds (numbers, dates, timestamps, decimals, short
    // strings, all-NULL column `n` → count only).
    assert!(s.check(&format!("SELECT count(*) FROM {t}")).await);
    for c in ["id", "f", "short", "d", "ts", "dec"] {
        let sql = format!("SELECT min({c}), max({c}), count({c}) FROM {t}");
        assert!(s.check(&sql).await, "{sql} from metadata");
    }
    assert!(s.check(&format!("SELECT count(n) FROM {t}")).await);
    // All NULL: min/max would be NULL; the rule needs a value, so it scans.
    assert!(!s.check(&format!("SELECT min(n), max(n) FROM {t}")).await);
    // NaN in g: max is NaN in DataFusion's order, not the bound: scan.
    assert!(!s.check(&format!("SELECT max(g) FROM {t}")).await);
    // Strings of 16+ characters may be truncated bounds: scan.
    assert!(
        !s.check(&format!("SELECT min(long), max(long) FROM {t}"))
            .await
    );
    // A filter the partition decides exactly: metadata; on another column: scan.
    assert!(
        s.check(&format!(
            "SELECT count(*), min(id), max(f) FROM {t} WHERE p = 'a'"
        ))
        .await
    );
    assert!(
        s.check(&format!("SELECT count(*) FROM {t} WHERE p IN ('b', 'c')"))
            .await
    );
    assert!(
        !s.check(&format!("SELECT count(*) FROM {t} WHERE id > 1"))
            .await
    );
    s.check(&format!("SELECT count(*) FROM {t} LIMIT 1")).await;
    // DISTINCT and GROUP BY are not statistics.
    assert!(
        !s.check(&format!("SELECT count(DISTINCT id) FROM {t}"))
            .await
    );
    assert!(
        !s.check(&format!(
            "SELECT p, count(*) FROM {t} GROUP BY p ORDER BY p"
        ))
        .await
    );

    // A merge-on-read delete: count(*) minus the deleted positions when the delete covers
    // one file; min/max scan (a deleted row may be the bound).
    write_count(ctx, &format!("DELETE FROM {t} WHERE id = 4")).await;
    s.check(&format!("SELECT count(*) FROM {t}")).await;
    assert!(!s.check(&format!("SELECT min(id), max(id) FROM {t}")).await);
    assert!(
        s.check(&format!("SELECT count(*) FROM {t} WHERE p = 'c'"))
            .await
    );
    // Schema evolution (a column old files lack), partition evolution and time travel: the
    // corpus test (v2_evolved at every snapshot).
    s.check(&format!(
        "SELECT min(id), max(id), count(*) FROM {t} WHERE p = 'c'"
    ))
    .await;
}
