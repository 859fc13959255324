//! `INSERT` of nested values — struct, list, map and nestings of them, with nulls at every
//! level — into an Iceberg table: from `VALUES`, from a `SELECT` of the same table and from a
//! `SELECT` without `FROM`. Petrel reads back exactly the rows the statements wrote, and Spark
//! 3.5 + Iceberg 1.10 reads the same rows.

use crate::common;

use common::{
    assert_result, duckdb_rows, query, read_back, rows_json, run_ddl, session, warehouse_with_db,
    write_count,
};
use serde_json::{Value, json};

/// The rows the statements below write, in `id` order, as the corpus format writes them.
fn model() -> Vec<Value> {
    let first = vec![
        json!([1, ["a", "b"], {"x": 1.5, "y": -2.0}, {"k": 1, "j": 2},
               [{"name": "n1", "qty": 3}, {"name": null, "qty": null}],
               {"inner": {"v": 10}, "l": [1, 2, 3]}]),
        json!([2, [], {"x": null, "y": 0.5}, {}, [], {"inner": null, "l": []}]),
        json!([3, null, null, null, null, null]),
        json!([4, [null, "c"], {"x": 3.0, "y": 4.0}, {"z": null}, [null],
               {"inner": {"v": null}, "l": [null, 7]}]),
    ];
    let mut rows = first.clone();
    // INSERT … SELECT id + 100, … FROM the same table.
    for row in first {
        let mut row = row;
        row[0] = json!(row[0].as_i64().expect("id") + 100);
        rows.push(row);
    }
    // INSERT … SELECT without FROM.
    rows.push(json!([1000, ["z"], {"x": 9.0, "y": 9.5}, {"m": 5},
                     [{"name": "only", "qty": 1}], {"inner": {"v": -1}, "l": [42]}]));
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_struct_list_and_map_values_that_spark_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.nested (id BIGINT NOT NULL, tags ARRAY<STRING>, \
         point STRUCT<x: DOUBLE, y: DOUBLE>, attrs MAP<STRING, INT>, \
         items ARRAY<STRUCT<name: STRING, qty: INT>>, \
         deep STRUCT<inner: STRUCT<v: BIGINT>, l: ARRAY<BIGINT>>) \
         PARTITIONED BY (bucket(2, id))",
    )
    .await;
    let n = write_count(&ctx,
        "INSERT INTO iceberg.db.nested VALUES \
         (1, ['a', 'b'], named_struct('x', 1.5, 'y', -2.0), map(['k', 'j'], [1, 2]), \
          [named_struct('name', 'n1', 'qty', 3), named_struct('name', CAST(NULL AS STRING), 'qty', CAST(NULL AS INT))], \
          named_struct('inner', named_struct('v', 10), 'l', [1, 2, 3])), \
         (2, [], named_struct('x', NULL, 'y', 0.5), map([], []), [], \
          named_struct('inner', NULL, 'l', [])), \
         (3, NULL, NULL, NULL, NULL, NULL), \
         (4, [NULL, 'c'], named_struct('x', 3.0, 'y', 4.0), map(['z'], [NULL]), [NULL], \
          named_struct('inner', named_struct('v', NULL), 'l', [NULL, 7]))",
    )
    .await;
    assert_eq!(n, 4);
    let n = write_count(
        &ctx,
        "INSERT INTO iceberg.db.nested \
         SELECT id + 100, tags, point, attrs, items, deep FROM iceberg.db.nested",
    )
    .await;
    assert_eq!(n, 4);
    let n = write_count(
        &ctx,
        "INSERT INTO iceberg.db.nested SELECT 1000, ['z'], named_struct('x', 9.0, 'y', 9.5), \
         map(['m'], [5]), [named_struct('name', 'only', 'qty', 1)], \
         named_struct('inner', named_struct('v', -1), 'l', [42])",
    )
    .await;
    assert_eq!(n, 1);

    let batches = query(&ctx, "SELECT * FROM iceberg.db.nested ORDER BY id")
        .await
        .expect("read back");
    let petrel: Vec<Value> = rows_json(&batches, &[])
        .into_iter()
        .map(Value::Array)
        .collect();
    assert_eq!(petrel, model(), "Petrel reads the rows it wrote");

    let seen = read_back(&warehouse, &["nested"]);
    let spark = &seen["nested"]["spark"];
    assert_eq!(spark["count"].as_u64(), Some(model().len() as u64));
    assert_result("Spark reads Petrel's nested rows", &batches, spark);
    assert_eq!(seen["nested"]["metric_mismatches"], json!([]));
    // PyIceberg and DuckDB read every row (compared by id: their nested values are normalised
    // differently from the corpus format).
    let ids: Vec<String> = model()
        .iter()
        .map(|r| Value::Array(vec![r[0].clone()]).to_string())
        .collect();
    let mut pyiceberg: Vec<String> = seen["nested"]["pyiceberg"]
        .as_array()
        .expect("pyiceberg rows")
        .iter()
        .map(|r| {
            let row: Value = serde_json::from_str(r.as_str().expect("row text")).expect("row");
            Value::Array(vec![row["id"].clone()]).to_string()
        })
        .collect();
    pyiceberg.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(pyiceberg, want, "PyIceberg reads every row");
    assert_eq!(
        duckdb_rows(&seen["nested"], &["id"]),
        want,
        "DuckDB reads every row"
    );
}
