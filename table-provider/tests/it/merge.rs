//! `MERGE INTO t USING <table | subquery> s ON … WHEN …` with Spark's semantics, on
//! partitioned and unpartitioned tables, format 2 and 3, merge-on-read and copy-on-write, in a
//! filesystem and a SQL catalog: updates, deletes and inserts in one statement with
//! conditional clauses taken in order, `UPDATE SET *` / `INSERT *` by name from a subquery,
//! WHEN MATCHED only, WHEN NOT MATCHED only (an append, also into a table without
//! snapshots), WHEN NOT MATCHED BY SOURCE, a target row matched twice (an error, nothing committed), a MERGE that changes
//! nothing (no snapshot) and `EXPLAIN MERGE` (explained, not run). Every result is compared
//! with a model computed here; then Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB read every
//! table back, with the snapshot operations and delete files each mode writes.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::AsArray;
use common::{
    duckdb_rows, pyiceberg_rows, query, read_back, result_rows, run_ddl, session, snapshot_count,
    snapshot_operations, sorted_rows, warehouse_with_db, write_count,
};
use datafusion::prelude::SessionContext;
use petrel_table_provider::{Catalog, Namespace, SqlCatalog, TableIdent};
use serde_json::json;

/// id → (region, amount).
type Model = BTreeMap<i64, (String, Option<i64>)>;

/// A source row: (id, region, amount, op).
type SourceRow = (i64, &'static str, Option<i64>, &'static str);

const SOURCE: &[SourceRow] = &[
    (1, "x", Some(10), "delete"),
    (2, "x", Some(20), "u"),
    (3, "y", Some(33), "u"),
    (6, "y", Some(60), "u"),
    (12, "x", Some(1200), "u"),
    (13, "x", Some(0), "delete"),
    (15, "y", Some(150), "u"),
    (100, "z", Some(5), "u"),
    (101, "z", None, "u"),
    (102, "x", Some(7), "gone"),
];

/// The second source's rows: (amount, note, region, id) — its columns in another order than
/// the target's, with one more.
const SOURCE2: &[(Option<i64>, &str, &str, i64)] = &[
    (Some(0), "a", "w", 0),
    (Some(12), "b", "w", 4),
    (Some(15), "c", "w", 5),
    (Some(24), "d", "w", 8),
    (Some(600), "e", "w", 200),
    (Some(603), "f", "w", 201),
    (None, "g", "w", 202),
];

fn sql_value(v: Option<i64>) -> String {
    v.map_or_else(|| "NULL".into(), |v| v.to_string())
}

async fn rows(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = format!("SELECT id, region, amount FROM {table}");
    sorted_rows(ctx, &sql).await
}

fn model_rows(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = model
        .iter()
        .map(|(id, (region, amount))| json!([id, region, amount]).to_string())
        .collect();
    out.sort();
    out
}

/// One target table of the test.
struct Target {
    catalog: &'static str,
    table: &'static str,
    partitioned: bool,
    version: u8,
    copy_on_write: bool,
}

const TARGETS: &[Target] = &[
    Target {
        catalog: "iceberg",
        table: "merge_part_v2_mor",
        partitioned: true,
        version: 2,
        copy_on_write: false,
    },
    Target {
        catalog: "iceberg",
        table: "merge_flat_v3_mor",
        partitioned: false,
        version: 3,
        copy_on_write: false,
    },
    Target {
        catalog: "iceberg",
        table: "merge_part_v3_cow",
        partitioned: true,
        version: 3,
        copy_on_write: true,
    },
    Target {
        catalog: "sqlcat",
        table: "merge_sql_flat_v2_cow",
        partitioned: false,
        version: 2,
        copy_on_write: true,
    },
    Target {
        catalog: "sqlcat",
        table: "merge_sql_part_v3_mor",
        partitioned: true,
        version: 3,
        copy_on_write: false,
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merges_follow_spark_semantics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, fs) = warehouse_with_db(dir.path()).await;
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(dir.path().join("sqlwh").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    sql.create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("namespace");
    let ctx = session(vec![
        ("iceberg", Arc::clone(&fs)),
        ("sqlcat", Arc::clone(&sql)),
    ]);

    // The sources, in the filesystem catalog.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.src (id BIGINT, region STRING, amount BIGINT, op STRING)",
    )
    .await;
    let values: Vec<String> = SOURCE
        .iter()
        .map(|(id, region, amount, op)| {
            format!("({id}, '{region}', {}, '{op}')", sql_value(*amount))
        })
        .collect();
    query(
        &ctx,
        &format!("INSERT INTO iceberg.db.src VALUES {}", values.join(", ")),
    )
    .await
    .expect("src");
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.src2 (amount BIGINT, note STRING, region STRING, id BIGINT)",
    )
    .await;
    let values: Vec<String> = SOURCE2
        .iter()
        .map(|(amount, note, region, id)| {
            format!("({}, '{note}', '{region}', {id})", sql_value(*amount))
        })
        .collect();
    query(
        &ctx,
        &format!("INSERT INTO iceberg.db.src2 VALUES {}", values.join(", ")),
    )
    .await
    .expect("src2");

    let mut models = BTreeMap::new();
    let mut metadata_files = BTreeMap::new();
    for target in TARGETS {
        let Target {
            catalog: catalog_name,
            table,
            partitioned,
            version,
            copy_on_write,
        } = *target;
        let catalog = if catalog_name == "iceberg" { &fs } else { &sql };
        let name = format!("{catalog_name}.db.{table}");
        let mode = if copy_on_write {
            ", 'write.merge.mode'='copy-on-write'"
        } else {
            ""
        };
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE {name} (id BIGINT NOT NULL, region STRING, amount BIGINT) {} \
                 TBLPROPERTIES ('format-version'='{version}'{mode})",
                if partitioned {
                    "PARTITIONED BY (region)"
                } else {
                    ""
                }
            ),
        )
        .await;
        let mut model = Model::new();
        let mut values = Vec::new();
        for id in 0..20i64 {
            let region = ["x", "y"][(id % 2) as usize];
            let amount = (id % 7 != 6).then_some(id);
            values.push(format!("({id}, '{region}', {})", sql_value(amount)));
            model.insert(id, (region.to_string(), amount));
        }
        query(
            &ctx,
            &format!("INSERT INTO {name} VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert");
        let mut expected_snapshots = 1;

        // Update, delete and insert in one MERGE; each row takes the first clause that holds
        // (a NULL condition does not), unmatched source rows no clause takes are ignored.
        let n = write_count(
            &ctx,
            &format!(
                "MERGE INTO {name} t USING iceberg.db.src AS s ON t.id = s.id \
                 WHEN MATCHED AND s.op = 'delete' THEN DELETE \
                 WHEN MATCHED AND t.amount > 10 THEN UPDATE SET amount = s.amount, region = s.region \
                 WHEN MATCHED THEN UPDATE SET t.amount = t.amount + 100 \
                 WHEN NOT MATCHED AND s.amount IS NOT NULL THEN \
                   INSERT (id, region, amount) VALUES (s.id, s.region, s.amount)"
            ),
        )
        .await;
        let mut changed = 0;
        for &(id, region, amount, op) in SOURCE {
            match model.get_mut(&id) {
                Some(_) if op == "delete" => {
                    model.remove(&id);
                }
                Some(row) if row.1.is_some_and(|a| a > 10) => {
                    *row = (region.to_string(), amount);
                }
                Some(row) => row.1 = row.1.map(|a| a + 100),
                None if amount.is_some() => {
                    model.insert(id, (region.to_string(), amount));
                }
                None => continue,
            }
            changed += 1;
        }
        assert_eq!(n, changed, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // `*` forms from a subquery: columns by name, the extra source column ignored.
        let n = write_count(
            &ctx,
            &format!(
                "MERGE INTO {name} USING (SELECT amount, note, region, id FROM iceberg.db.src2 \
                 WHERE id % 2 = 0) s ON {table}.id = s.id \
                 WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            ),
        )
        .await;
        let mut changed = 0;
        for &(amount, _, region, id) in SOURCE2.iter().filter(|r| r.3 % 2 == 0) {
            model.insert(id, (region.to_string(), amount));
            changed += 1;
        }
        assert_eq!(n, changed, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // WHEN MATCHED only, deleting: merge-on-read writes deletes alone.
        let n = write_count(
            &ctx,
            &format!(
                "MERGE INTO {name} AS t USING iceberg.db.src s ON t.id = s.id + 1 \
                 WHEN MATCHED AND s.op = 'u' THEN DELETE"
            ),
        )
        .await;
        let mut changed = 0;
        for &(id, _, _, op) in SOURCE {
            if op == "u" && model.remove(&(id + 1)).is_some() {
                changed += 1;
            }
        }
        assert!(changed > 0);
        assert_eq!(n, changed, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // WHEN NOT MATCHED only: an append; a column not named is NULL.
        let n = write_count(
            &ctx,
            &format!(
                "MERGE INTO {name} t USING iceberg.db.src s ON t.id = s.id \
                 WHEN NOT MATCHED AND s.op <> 'gone' THEN INSERT (region, id) \
                 VALUES ('n', s.id + 1000)"
            ),
        )
        .await;
        let mut changed = 0;
        for &(id, _, _, op) in SOURCE {
            if op != "gone" && !model.contains_key(&id) {
                model.insert(id + 1000, ("n".into(), None));
                changed += 1;
            }
        }
        assert!(changed > 0);
        assert_eq!(n, changed, "{table}");
        expected_snapshots += 1;
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");

        // A target row matched by two source rows: Spark's error, nothing committed.
        let err = query(
            &ctx,
            &format!(
                "MERGE INTO {name} t USING (SELECT id FROM iceberg.db.src UNION ALL \
                 SELECT id FROM iceberg.db.src) s ON t.id = s.id \
                 WHEN MATCHED THEN UPDATE SET amount = 0"
            ),
        )
        .await
        .expect_err("a target row matched twice");
        assert!(
            err.to_string().contains(
                "matched a single row from the target table with multiple rows of the source"
            ),
            "{err}"
        );

        // Nothing changes: no snapshot.
        assert_eq!(
            write_count(
                &ctx,
                &format!(
                    "MERGE INTO {name} t USING iceberg.db.src s ON t.id = s.id \
                     WHEN MATCHED AND s.amount < 0 THEN DELETE \
                     WHEN NOT MATCHED AND s.id < 0 THEN INSERT *"
                ),
            )
            .await,
            0
        );

        // EXPLAIN explains, and runs nothing.
        let explained = query(
            &ctx,
            &format!(
                "EXPLAIN MERGE INTO {name} t USING iceberg.db.src s ON t.id = s.id \
                 WHEN MATCHED THEN DELETE"
            ),
        )
        .await
        .expect("explain");
        let text: String = explained
            .iter()
            .flat_map(|b| {
                let plans = b.column(1).as_string::<i32>();
                (0..b.num_rows())
                    .map(|i| plans.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(text.contains("IcebergMerge"), "{text}");
        assert!(text.contains("IcebergMergeExec"), "{text}");

        assert_eq!(
            snapshot_count(catalog.as_ref(), table).await,
            expected_snapshots,
            "{table}"
        );
        assert_eq!(rows(&ctx, &name).await, model_rows(&model), "{table}");
        let ident = TableIdent::new(Namespace::new(vec!["db".into()]), table);
        let location = catalog
            .load_table(&ident)
            .await
            .expect("load")
            .metadata_location()
            .to_string();
        metadata_files.insert(table, location);
        models.insert(table, (model, target));
    }

    // Into a table without snapshots, WHEN NOT MATCHED only: a NULL for a NOT NULL column
    // fails and commits nothing, then INSERT * appends.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.merge_fresh (id BIGINT NOT NULL, region STRING, amount BIGINT) \
         TBLPROPERTIES ('format-version'='3')",
    )
    .await;
    let err = query(
        &ctx,
        "MERGE INTO iceberg.db.merge_fresh t USING iceberg.db.src s ON t.id = s.id \
         WHEN NOT MATCHED THEN INSERT (region) VALUES (s.region)",
    )
    .await
    .expect_err("NOT NULL");
    assert!(err.to_string().to_lowercase().contains("null"), "{err}");
    assert_eq!(snapshot_count(fs.as_ref(), "merge_fresh").await, 0);
    let n = write_count(
        &ctx,
        "MERGE INTO iceberg.db.merge_fresh t USING iceberg.db.src s ON t.id = s.id \
         WHEN NOT MATCHED AND s.op = 'u' THEN INSERT *",
    )
    .await;
    let mut fresh = Model::new();
    for &(id, region, amount, op) in SOURCE {
        if op == "u" {
            fresh.insert(id, (region.to_string(), amount));
        }
    }
    assert_eq!(n, fresh.len() as u64);
    assert_eq!(
        rows(&ctx, "iceberg.db.merge_fresh").await,
        model_rows(&fresh)
    );
    // WHEN NOT MATCHED BY SOURCE: the target rows no source row matches, clauses in order.
    let n = write_count(
        &ctx,
        "MERGE INTO iceberg.db.merge_fresh t USING (SELECT * FROM iceberg.db.src \
         WHERE op = 'delete' OR id = 2) s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET region = 'm' \
         WHEN NOT MATCHED BY SOURCE AND t.amount > 30 THEN DELETE \
         WHEN NOT MATCHED BY SOURCE THEN UPDATE SET amount = t.amount + 1",
    )
    .await;
    let before = std::mem::take(&mut fresh);
    for (id, (region, amount)) in before {
        if id == 2 {
            fresh.insert(id, ("m".into(), amount));
        } else if amount.is_none_or(|a| a <= 30) {
            fresh.insert(id, (region, amount.map(|a| a + 1)));
        }
    }
    assert_eq!(n, 7);
    assert_eq!(
        rows(&ctx, "iceberg.db.merge_fresh").await,
        model_rows(&fresh)
    );

    // Spark, PyIceberg and DuckDB read every table as the model says.
    let specs: Vec<String> = TARGETS
        .iter()
        .map(|t| {
            if t.catalog == "iceberg" {
                t.table.to_string()
            } else {
                format!(
                    "{}={}",
                    t.table,
                    metadata_files[t.table].trim_start_matches("file://")
                )
            }
        })
        .chain(["merge_fresh".to_string()])
        .collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let seen = read_back(&warehouse, &specs);
    let t = &seen["merge_fresh"];
    assert_eq!(
        result_rows(&t["spark"], &["id", "region", "amount"]),
        model_rows(&fresh)
    );
    let operations = snapshot_operations(t);
    assert_eq!(operations, ["append", "overwrite"]);
    for (table, (model, target)) in &models {
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
        // A delete-only MERGE is a `delete` in merge-on-read (a row delta adding only delete
        // files, as Iceberg Java names it), an `overwrite` in copy-on-write.
        let deleting = if target.copy_on_write {
            "overwrite"
        } else {
            "delete"
        };
        assert_eq!(
            operations,
            ["append", "overwrite", "overwrite", deleting, "append"],
            "{table}"
        );
        // Live delete files: none in copy-on-write, position deletes (v2) or deletion vectors
        // (v3) in merge-on-read.
        let files: Vec<(i64, &str)> = t["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| {
                (
                    f["content"].as_i64().expect("content"),
                    f["file_path"].as_str().expect("path"),
                )
            })
            .collect();
        let deletes: Vec<&str> = files
            .iter()
            .filter(|(content, _)| *content != 0)
            .map(|(_, path)| *path)
            .collect();
        if target.copy_on_write {
            assert!(deletes.is_empty(), "{table}: {files:?}");
        } else {
            let suffix = if target.version == 2 {
                ".parquet"
            } else {
                ".puffin"
            };
            assert!(!deletes.is_empty(), "{table}: {files:?}");
            assert!(
                deletes.iter().all(|f| f.ends_with(suffix)),
                "{table}: {files:?}"
            );
        }
    }
}

/// What Spark refuses is refused with a message naming the problem, and nothing is committed;
/// a lone unconditional `WHEN MATCHED THEN DELETE` needs no cardinality check (Spark's
/// exception): a target row matched twice is deleted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_mistakes_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, fs) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&fs))]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, region STRING, amount BIGINT)",
    )
    .await;
    query(
        &ctx,
        "INSERT INTO iceberg.db.t VALUES (1, 'x', 10), (2, 'y', 20), (3, 'x', 30)",
    )
    .await
    .expect("insert");
    run_ddl(&ctx, "CREATE TABLE iceberg.db.s (id BIGINT, note STRING)").await;
    query(&ctx, "INSERT INTO iceberg.db.s VALUES (1, 'a'), (4, 'b')")
        .await
        .expect("insert");
    let merge = "MERGE INTO iceberg.db.t t USING iceberg.db.s s ON t.id = s.id";
    for (sql, needle) in [
        (
            format!("{merge} WHEN NOT MATCHED THEN INSERT (id, amount) VALUES (s.id, t.amount)"),
            "WHEN NOT MATCHED",
        ),
        (
            format!("{merge} WHEN MATCHED THEN UPDATE SET nope = 1"),
            "no column nope",
        ),
        (
            format!("{merge} WHEN MATCHED THEN DELETE WHEN MATCHED AND s.id = 1 THEN DELETE"),
            "only the last one can omit the condition",
        ),
        (
            format!("{merge} WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *"),
            "UPDATE SET * needs a source row",
        ),
        (
            format!("{merge} WHEN NOT MATCHED THEN INSERT *"),
            "the source has no column region",
        ),
        (
            format!("EXPLAIN ANALYZE {merge} WHEN MATCHED THEN DELETE"),
            "would run the MERGE",
        ),
        (
            "MERGE INTO iceberg.information_schema.tables t USING iceberg.db.s s \
             ON t.table_name = s.note WHEN MATCHED THEN DELETE"
                .to_string(),
            "only Iceberg tables",
        ),
    ] {
        let err = query(&ctx, &sql).await.expect_err(&sql);
        assert!(err.to_string().contains(needle), "{sql}: {err}");
    }
    assert_eq!(snapshot_count(fs.as_ref(), "t").await, 1);

    let n = write_count(
        &ctx,
        "MERGE INTO iceberg.db.t t USING (SELECT id FROM iceberg.db.s UNION ALL \
         SELECT id FROM iceberg.db.s) s ON t.id = s.id WHEN MATCHED THEN DELETE",
    )
    .await;
    assert_eq!(n, 1);
    assert_eq!(
        rows(&ctx, "iceberg.db.t").await,
        vec![r#"[2,"y",20]"#, r#"[3,"x",30]"#]
    );
}
