//! Spark 3.5 + Iceberg 1.10 and Petrel on the same tables in S3 (issue #12), against a real S3
//! server (moto) and a real Iceberg REST server (rustberg, its warehouse in the same bucket).
//! Petrel creates a partitioned table through each catalog — a filesystem catalog over
//! `s3://lake/warehouse` and the REST catalog — inserts, deletes (merge-on-read: position delete
//! files) and updates. Spark (`tests/spark/s3_read_back.py`, Hadoop's S3A from
//! `scripts/setup-spark-s3.sh`) then appends a row to the filesystem catalog's table, and reads
//! both: exactly the model's rows, Petrel's snapshots (and Spark's own), the delete files, every
//! data file's bounds and null counts matching its rows. Petrel reads Spark's row beside its own
//! and appends after Spark's commit.
//!
//! Spark reads the REST catalog's table by the metadata file the catalog names (what Petrel
//! committed there) and does not write to it: Spark's REST catalog client cannot run here (the
//! Iceberg Spark runtime on PyPI leaves out the shaded HttpClient 5 it needs; see the script).
//! Without rustberg installed, the REST half is skipped with the reason printed (as in the other
//! REST tests; `PETREL_REQUIRE_REST` makes that a failure).

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::moto::Moto;
use common::rustberg::Rustberg;
use common::{run_ddl, session, sorted_rows, spark_script, write_count};
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, RestCatalog, TableIdent};
use serde_json::{Value, json};

/// One row of the `birds` tables: `(name, seen, wingspan, price)` by `id`.
type Model = BTreeMap<i64, (String, String, f64, String)>;

/// The row Petrel inserts for `id`: dates over three months, so `months(seen)` has several
/// partitions beside `bucket(4, id)`.
fn bird(id: i64) -> (String, String, f64, String) {
    (
        format!("bird-{id}"),
        format!("2024-{:02}-{:02}", 1 + id % 3, 1 + id % 28),
        id as f64 * 0.5,
        format!("{}.{:02}", id * 3, id % 100),
    )
}

/// Petrel's writes to `<catalog>.db.birds`, and the model of its rows after them.
async fn petrel_writes(ctx: &datafusion::prelude::SessionContext, catalog: &str) -> Model {
    let table = format!("{catalog}.db.birds");
    run_ddl(
        ctx,
        &format!(
            "CREATE TABLE {table} (id BIGINT NOT NULL, name STRING, seen DATE, wingspan DOUBLE, \
             price DECIMAL(9, 2)) PARTITIONED BY (bucket(4, id), months(seen))"
        ),
    )
    .await;
    let mut model = Model::new();
    for ids in [1..=30, 31..=60] {
        let values: Vec<String> = ids
            .clone()
            .map(|id| {
                let (name, seen, wingspan, price) = bird(id);
                format!(
                    "({id}, '{name}', DATE '{seen}', {wingspan:?}, \
                     CAST('{price}' AS DECIMAL(9, 2)))"
                )
            })
            .collect();
        let n = write_count(
            ctx,
            &format!("INSERT INTO {table} VALUES {}", values.join(", ")),
        )
        .await;
        assert_eq!(n, 30, "{table}");
        model.extend(ids.map(|id| (id, bird(id))));
    }
    // Petrel creates merge-on-read tables: the DELETE writes position delete files.
    assert_eq!(
        write_count(ctx, &format!("DELETE FROM {table} WHERE id % 7 = 0")).await,
        8
    );
    model.retain(|id, _| id % 7 != 0);
    assert_eq!(
        write_count(
            ctx,
            &format!("UPDATE {table} SET name = 'renamed', price = price + 1 WHERE id > 50")
        )
        .await,
        9
    );
    for (_, row) in model.range_mut(51..) {
        row.0 = "renamed".into();
        let cents: i64 = row.3.replace('.', "").parse().expect("price");
        row.3 = format!("{}.{:02}", (cents + 100) / 100, (cents + 100) % 100);
    }
    model
}

/// The model's rows as Spark's JSON objects (keys sorted, as `s3_read_back.py` prints them).
fn spark_rows(model: &Model) -> Vec<Value> {
    let mut rows: Vec<Value> = model
        .iter()
        .map(|(id, (name, seen, wingspan, price))| {
            json!({"id": id, "name": name, "price": price, "seen": seen, "wingspan": wingspan})
        })
        .collect();
    rows.sort_by_key(Value::to_string);
    rows
}

/// The model's rows as Petrel's `sorted_rows` texts of `SELECT id, name, seen, wingspan, price`.
fn petrel_rows(model: &Model) -> Vec<String> {
    let mut rows: Vec<String> = model
        .iter()
        .map(|(id, (name, seen, wingspan, price))| {
            json!([id, name, seen, wingspan, price]).to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// Spark's view of `table` against `model`: its rows, the snapshots (Petrel's two appends, its
/// delete and its update, then, if `spark_appended`, Spark's append of one row), the delete
/// files Petrel's DELETE wrote, and every data file's metrics.
fn check_spark_view(seen: &Value, table: &str, model: &Model, spark_appended: bool) {
    let view = &seen[table];
    let mut rows: Vec<Value> = view["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{table}: no rows in {view}"))
        .iter()
        .map(|r| serde_json::from_str(r.as_str().expect("row text")).expect("row json"))
        .collect();
    rows.sort_by_key(Value::to_string);
    assert_eq!(rows, spark_rows(model), "{table}: Spark's rows");
    let operations: Vec<&str> = view["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["operation"].as_str().expect("operation"))
        .collect();
    let mut expected_operations = vec!["append", "append", "delete", "overwrite"];
    // The update adds its 9 rows again (and deletes the old ones by position).
    let mut expected_added = vec![30, 30, 0, 9];
    if spark_appended {
        expected_operations.push("append");
        expected_added.push(1);
    }
    assert_eq!(operations, expected_operations, "{table}: {view}");
    let added: Vec<i64> = view["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["added_records"].as_i64().expect("added"))
        .collect();
    assert_eq!(added, expected_added, "{table}: added-records");
    let files = view["files"].as_array().expect("files");
    let deletes = files.iter().filter(|f| f["content"] == 1).count();
    assert!(
        deletes > 0,
        "{table}: no position delete files in {files:?}"
    );
    let data_rows: i64 = files
        .iter()
        .filter(|f| f["content"] == 0)
        .map(|f| f["record_count"].as_i64().expect("record_count"))
        .sum();
    // 60 inserted, 9 rewritten by the update (and 1 appended by Spark): deleted rows stay in
    // their files until a rewrite.
    assert_eq!(
        data_rows,
        69 + i64::from(spark_appended),
        "{table}: rows in data files"
    );
    assert!(
        files.iter().all(|f| f["file_path"]
            .as_str()
            .expect("path")
            .starts_with("s3://lake/")),
        "{table}: every file in the bucket: {files:?}"
    );
    assert_eq!(
        view["metric_mismatches"],
        json!([]),
        "{table}: Spark's readable_metrics against the rows"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_reads_petrel_tables_on_s3_and_petrel_reads_spark_appends() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let stores = StoreRegistry::with_properties(&moto.properties()).expect("store config");
    let filesystem: Arc<dyn Catalog> = Arc::new(
        FileSystemCatalog::with_stores("s3://lake/warehouse", stores.clone())
            .expect("catalog over s3"),
    );
    let db = Namespace::new(vec!["db".into()]);
    filesystem
        .create_namespace(&db, false)
        .await
        .expect("namespace on s3");
    let mut catalogs = vec![("iceberg", Arc::clone(&filesystem))];
    let rustberg = Rustberg::start_on_moto(&moto, "s3://lake/rest/", "");
    let mut rest = None;
    if let Some(server) = &rustberg {
        let catalog: Arc<dyn Catalog> = Arc::new(
            RestCatalog::connect(server.config("rest"), stores.clone())
                .await
                .expect("connect to rustberg"),
        );
        catalog
            .create_namespace(&db, false)
            .await
            .expect("namespace");
        catalogs.push(("rest", Arc::clone(&catalog)));
        rest = Some(catalog);
    }
    let ctx = session(catalogs);
    let mut model = petrel_writes(&ctx, "iceberg").await;
    let mut tables = vec!["iceberg.db.birds".to_string()];
    let mut rest_model = None;
    if let Some(rest) = &rest {
        rest_model = Some(petrel_writes(&ctx, "rest").await);
        let metadata = rest
            .load_table(&TableIdent::new(db.clone(), "birds"))
            .await
            .expect("load through rest")
            .metadata_location()
            .to_string();
        assert!(
            metadata.starts_with("s3://lake/rest/"),
            "rustberg's warehouse: {metadata}"
        );
        tables.push(format!("rest.db.birds={metadata}"));
    }

    // Spark appends one row to the filesystem catalog's table, then reads both tables.
    let mut args: Vec<std::ffi::OsString> = vec![
        "--jars".into(),
        common::spark_s3_jars().into(),
        "--endpoint".into(),
        moto.endpoint.clone().into(),
        "--access-key".into(),
        moto.access_key.clone().into(),
        "--secret-key".into(),
        moto.secret_key.clone().into(),
        "--warehouse".into(),
        "s3://lake/warehouse".into(),
        "--sql".into(),
        "INSERT INTO iceberg.db.birds VALUES (100, 'from-spark', DATE '2024-02-29', 12.5, 99.99)"
            .into(),
    ];
    args.extend(tables.iter().map(Into::into));
    let seen = spark_script("s3_read_back.py", &args);
    model.insert(
        100,
        (
            "from-spark".into(),
            "2024-02-29".into(),
            12.5,
            "99.99".into(),
        ),
    );
    check_spark_view(&seen, "iceberg.db.birds", &model, true);
    if let Some(rest_model) = &rest_model {
        check_spark_view(&seen, "rest.db.birds", rest_model, false);
        assert_eq!(
            sorted_rows(
                &ctx,
                "SELECT id, name, seen, wingspan, price FROM rest.db.birds"
            )
            .await,
            petrel_rows(rest_model),
            "Petrel's rows through the REST catalog"
        );
    }

    // Petrel reads Spark's row beside its own, and appends after Spark's commit.
    let select = "SELECT id, name, seen, wingspan, price FROM iceberg.db.birds";
    assert_eq!(
        sorted_rows(&ctx, select).await,
        petrel_rows(&model),
        "Petrel's rows after Spark's append"
    );
    assert_eq!(
        write_count(
            &ctx,
            "INSERT INTO iceberg.db.birds VALUES \
             (101, 'after-spark', DATE '2024-03-01', 1.0, CAST('0.01' AS DECIMAL(9, 2)))"
        )
        .await,
        1
    );
    model.insert(
        101,
        (
            "after-spark".into(),
            "2024-03-01".into(),
            1.0,
            "0.01".into(),
        ),
    );
    assert_eq!(
        sorted_rows(&ctx, select).await,
        petrel_rows(&model),
        "Petrel's rows after its append on Spark's"
    );
}
