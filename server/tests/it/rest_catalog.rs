//! `petrel serve --config` with an Iceberg REST catalog (`type = "rest"`) on a real REST server,
//! `rustberg` (`common::rustberg`; skipped with a printed reason when it is not installed,
//! unless `PETREL_REQUIRE_REST` is set), queried over Flight SQL:
//!
//! - a `file://` warehouse: DDL, INSERT, DELETE and SELECT through the binary; PyIceberg, a
//!   client of its own, reads exactly the model's rows through the same REST server;
//! - an `s3://` warehouse on moto with IAM authentication on and rustberg vending STS
//!   credentials: the server's own AWS keys are wrong, so every read and write goes through
//!   the keys vended per table; the data files are in the bucket (listed with boto3).

use crate::common;

use std::path::{Path, PathBuf};

use arrow::array::{Array, Int64Array, StringArray};
use common::moto::Moto;
use common::rustberg::{API_KEY, Rustberg};
use common::{Petrel, query};
use serde_json::Value;

/// A config serving the REST catalog at `uri` as `rest`, with `properties`.
fn write_config(dir: &Path, uri: &str, properties: &[(&str, &str)]) -> String {
    let mut text = format!(
        "[[catalog]]\nname = \"rest\"\ntype = \"rest\"\nuri = {uri:?}\ntoken = {API_KEY:?}\n"
    );
    if !properties.is_empty() {
        text.push_str("[catalog.properties]\n");
        for (k, v) in properties {
            text.push_str(&format!("{k:?} = {v:?}\n"));
        }
    }
    let config = dir.join("petrel.toml");
    std::fs::write(&config, text).expect("write config");
    config.to_string_lossy().into_owned()
}

/// `(id, name)` rows of a query, in answer order.
async fn id_name_rows(server: &Petrel, sql: &str) -> Vec<(i64, String)> {
    let mut client = server.client().await;
    let batches = query(&mut client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", server.log()));
    let mut rows = Vec::new();
    for b in &batches {
        let ids = b
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("ids");
        let names = b
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("names");
        rows.extend((0..b.num_rows()).map(|i| (ids.value(i), names.value(i).to_string())));
    }
    rows
}

async fn run_all(server: &Petrel, statements: &[&str]) {
    let mut client = server.client().await;
    for sql in statements {
        query(&mut client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", server.log()));
    }
}

/// PyIceberg's rows of `table` through the REST server (sorted `[id, name]` JSON texts).
fn pyiceberg_rows(server: &Rustberg, table: &str) -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../table-provider");
    let python = std::env::var_os("PETREL_VENV_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../.venv/bin/python"));
    let output = std::process::Command::new(&python)
        .arg(root.join("tests/pyiceberg/rest_catalog.py"))
        .args([server.uri.as_str(), API_KEY, "read", table])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup-python.sh)", python.display()));
    assert!(
        output.status.success(),
        "rest_catalog.py read {table}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let mut rows: Vec<String> = seen["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(Value::to_string)
        .collect();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_rest_catalog_over_flight_sql() {
    let Some(rustberg) = Rustberg::start() else {
        return;
    };
    let dir = tempfile::TempDir::new().expect("tempdir");
    let config = write_config(dir.path(), &rustberg.uri, &[]);
    let server = Petrel::start_in(dir, &["--config", &config]);
    run_all(
        &server,
        &[
            "CREATE SCHEMA rest.shop",
            "CREATE TABLE rest.shop.items (id BIGINT, name STRING)",
            "INSERT INTO rest.shop.items VALUES (2, 'b'), (1, 'a'), (3, 'c')",
            "DELETE FROM rest.shop.items WHERE id = 2",
            "INSERT INTO rest.shop.items VALUES (4, 'd')",
        ],
    )
    .await;
    let model = [(1, "a"), (3, "c"), (4, "d")];
    assert_eq!(
        id_name_rows(&server, "SELECT id, name FROM rest.shop.items ORDER BY id").await,
        model.map(|(i, n)| (i, n.to_string()))
    );
    assert_eq!(
        pyiceberg_rows(&rustberg, "shop.items"),
        model.map(|(i, n)| serde_json::json!([i, n]).to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_rest_catalog_with_vended_credentials_on_s3() {
    let moto = Moto::start_with_auth("served");
    let Some(rustberg) = Rustberg::start_vending(&moto, "s3://served/wh") else {
        return;
    };
    let dir = tempfile::TempDir::new().expect("tempdir");
    let config = write_config(
        dir.path(),
        &rustberg.uri,
        &[
            ("s3.endpoint", &moto.endpoint),
            ("s3.path-style-access", "true"),
            ("client.region", "us-east-1"),
        ],
    );
    // The server's own keys are ones moto refuses.
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIAPETRELWRONGKEY00".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "wrong".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
    ];
    let server = Petrel::start_with_env(dir, &["--config", &config], &env);
    run_all(
        &server,
        &[
            "CREATE SCHEMA rest.db",
            "CREATE TABLE rest.db.t (id BIGINT, name STRING)",
            "INSERT INTO rest.db.t VALUES (1, 'one'), (2, 'two'), (3, 'three')",
            "DELETE FROM rest.db.t WHERE id = 2",
        ],
    )
    .await;
    assert_eq!(
        id_name_rows(&server, "SELECT id, name FROM rest.db.t ORDER BY id").await,
        [(1, "one".to_string()), (3, "three".to_string())]
    );
    let listed = moto.python(
        "import sys, boto3\n\
         s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1')\n\
         for o in s3.list_objects_v2(Bucket='served', Prefix='wh/db/t/')['Contents']:\n\
         \x20   print(o['Key'])",
        &[],
    );
    let parquet = listed.lines().filter(|k| k.ends_with(".parquet")).count();
    // The INSERT's data file and the DELETE's (a delete file or a rewritten data file).
    assert_eq!(parquet, 2, "{listed}");
}
