//! `petrel serve --config` with a SQL catalog on a real PostgreSQL 15
//! (`scripts/start-postgres.sh`): a table created and written over Flight SQL is served back,
//! also by a second server reading the same database; a wrong password stops the server at
//! startup with an error naming the catalog and the host, not the password.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, StringArray};
use arrow::util::display::array_value_to_string;
use common::postgres::{Postgres, unique_catalog_name};
use common::{Petrel, query};

/// A config serving catalog `pg` from `uri` (rows `catalog_name`), new tables in `warehouse`.
fn write_config(dir: &Path, uri: &str, catalog_name: &str, warehouse: &Path) -> String {
    let config = dir.join("petrel.toml");
    std::fs::write(
        &config,
        format!(
            "[[catalog]]\nname = \"pg\"\ntype = \"sql\"\nuri = {uri:?}\ncatalog_name = {catalog_name:?}\nwarehouse = {:?}\n",
            warehouse.to_string_lossy()
        ),
    )
    .expect("write config");
    config.to_string_lossy().into_owned()
}

/// `(id, name)` rows of `SELECT id, name … ORDER BY id`.
async fn id_name_rows(server: &Petrel, sql: &str) -> Vec<(i64, String)> {
    let mut client = server.client().await;
    let batches = query(&mut client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows = Vec::new();
    for batch in &batches {
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("id column");
        let names = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .map(|a| (0..a.len()).map(|i| a.value(i).to_string()).collect())
            .unwrap_or_else(|| {
                (0..batch.num_rows())
                    .map(|i| array_value_to_string(batch.column(1), i).expect("name"))
                    .collect::<Vec<_>>()
            });
        rows.extend((0..ids.len()).map(|i| (ids.value(i), names[i].clone())));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_postgres_sql_catalog_over_flight_sql() {
    let pg = Postgres::start();
    let dir = tempfile::TempDir::new().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("warehouse");
    let config = write_config(
        dir.path(),
        &pg.uri,
        &unique_catalog_name("served"),
        &warehouse,
    );
    let server = Petrel::start(&["--config", &config]);
    let mut client = server.client().await;
    for sql in [
        "CREATE SCHEMA pg.shop",
        "CREATE TABLE pg.shop.items (id BIGINT, name STRING)",
        "INSERT INTO pg.shop.items VALUES (2, 'b'), (1, 'a'), (3, 'c')",
        "DELETE FROM pg.shop.items WHERE id = 2",
        "INSERT INTO pg.shop.items VALUES (4, 'ü')",
    ] {
        query(&mut client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let expected = vec![(1, "a".to_string()), (3, "c".into()), (4, "ü".into())];
    let select = "SELECT id, name FROM pg.shop.items ORDER BY id";
    assert_eq!(id_name_rows(&server, select).await, expected);

    // The catalog's state lives in PostgreSQL: a second server sees it.
    let second = Petrel::start(&["--config", &config]);
    assert_eq!(id_name_rows(&second, select).await, expected);
    let count = "SELECT count(*), min(name) FROM pg.shop.items";
    let mut client = second.client().await;
    let batches = query(&mut client, count).await.expect("count");
    assert_eq!(
        array_value_to_string(batches[0].column(0), 0).expect("count"),
        "3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_stops_the_server_with_a_clear_error() {
    let pg = Postgres::start();
    let dir = tempfile::TempDir::new().expect("tempdir");
    let config = write_config(
        dir.path(),
        &pg.uri_with_password("Wr0ngSecret"),
        "c",
        dir.path(),
    );
    let started = Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["serve", "--bind", "127.0.0.1:0", "--config", &config])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .output()
        .expect("run petrel");
    assert!(!output.status.success());
    assert!(started.elapsed() < Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("catalog pg"), "{stderr}");
    assert!(stderr.contains(&pg.host_port()), "{stderr}");
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(!stderr.contains("Wr0ngSecret"), "{stderr}");
}
