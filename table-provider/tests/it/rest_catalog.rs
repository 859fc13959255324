//! The REST catalog against a real Iceberg REST server (`rustberg`, see
//! `common::rustberg`; skipped with a printed reason when it is not installed, unless
//! `PETREL_REQUIRE_REST` is set):
//!
//! - PyIceberg writes through the server, Petrel reads its rows;
//! - Petrel creates, inserts and deletes through the server (commits with requirements, the
//!   server arbitrating), PyIceberg reads exactly the model's rows;
//! - eight sessions inserting at once lose nothing (one snapshot and its rows per INSERT);
//! - a wrong token is a clear error naming the catalog and the refusal, quickly.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::rustberg::{API_KEY, Rustberg};
use common::{query, run_ddl, session, sorted_rows};
use petrel_table_provider::{Catalog, Namespace, RestCatalog, TableIdent, io::StoreRegistry};
use serde_json::{Value, json};

fn db() -> Namespace {
    Namespace::new(vec!["db".into()])
}

/// Runs `tests/pyiceberg/rest_catalog.py` with the project's Python environment.
fn pyiceberg(server: &Rustberg, args: &[&str]) -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("PETREL_VENV_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../.venv/bin/python"));
    let output = std::process::Command::new(&python)
        .arg(root.join("tests/pyiceberg/rest_catalog.py"))
        .arg(&server.uri)
        .arg(API_KEY)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup-python.sh)", python.display()));
    assert!(
        output.status.success(),
        "rest_catalog.py {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("rest_catalog.py prints JSON")
}

fn json_rows(rows: &[(i64, &str)]) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|(id, name)| json!([id, name]).to_string())
        .collect();
    out.sort();
    out
}

fn pyiceberg_rows(seen: &Value) -> Vec<String> {
    let mut out: Vec<String> = seen["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(Value::to_string)
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyiceberg_writes_through_rest_and_petrel_reads() {
    let Some(server) = Rustberg::start() else {
        return;
    };
    let first = [(1, "a"), (2, "b"), (3, "c")];
    let second = [(4, "d"), (5, "ü")];
    pyiceberg(&server, &["write", "pyi.t", &json!(first).to_string()]);
    pyiceberg(&server, &["write", "pyi.t", &json!(second).to_string()]);
    let rest: Arc<dyn Catalog> = Arc::new(server.catalog("lake").await);
    let namespaces = rest.list_namespaces().await.expect("namespaces");
    assert!(
        namespaces.contains(&Namespace::new(vec!["pyi".into()])),
        "{namespaces:?}"
    );
    let ctx = session(vec![("lake", Arc::clone(&rest))]);
    let mut model: Vec<(i64, &str)> = first.to_vec();
    model.extend(second);
    assert_eq!(
        sorted_rows(&ctx, "SELECT id, name FROM lake.pyi.t").await,
        json_rows(&model)
    );
    let ident = TableIdent::new(Namespace::new(vec!["pyi".into()]), "t");
    let table = rest.load_table(&ident).await.expect("load");
    assert_eq!(table.metadata().snapshots().count(), 2);
    let first_snapshot = table
        .metadata()
        .snapshots()
        .min_by_key(|s| s.sequence_number())
        .expect("snapshot")
        .snapshot_id();
    assert_eq!(
        sorted_rows(
            &ctx,
            &format!("SELECT id, name FROM lake.pyi.t VERSION AS OF {first_snapshot}")
        )
        .await,
        json_rows(&first)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn petrel_writes_through_rest_and_pyiceberg_reads() {
    let Some(server) = Rustberg::start() else {
        return;
    };
    let rest: Arc<dyn Catalog> = Arc::new(server.catalog("iceberg").await);
    // Multi-level namespaces: a parent and its child.
    let nested = Namespace::new(vec!["db".into(), "inner".into()]);
    rest.create_namespace(&db(), false).await.expect("db");
    rest.create_namespace(&nested, false)
        .await
        .expect("db.inner");
    let err = rest
        .create_namespace(&db(), false)
        .await
        .expect_err("exists");
    assert!(err.to_string().contains("already exists"), "{err}");
    rest.create_namespace(&db(), true)
        .await
        .expect("if not exists");
    assert_eq!(
        rest.list_namespaces().await.expect("namespaces"),
        vec![db(), nested.clone()]
    );
    assert!(rest.namespace_exists(&nested).await.expect("exists"));
    assert!(
        !rest
            .namespace_exists(&Namespace::new(vec!["nope".into()]))
            .await
            .expect("exists")
    );

    let ctx = session(vec![("iceberg", Arc::clone(&rest))]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id BIGINT, name STRING) \
         TBLPROPERTIES ('write.delete.mode'='merge-on-read')",
    )
    .await;
    let mut model: Vec<(i64, &str)> = Vec::new();
    for chunk in [
        [(1, "a"), (2, "b"), (3, "c")],
        [(4, "d"), (5, "e"), (6, "f")],
    ] {
        let values: Vec<String> = chunk
            .iter()
            .map(|(id, name)| format!("({id}, '{name}')"))
            .collect();
        query(
            &ctx,
            &format!("INSERT INTO iceberg.db.t VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert");
        model.extend(chunk);
    }
    query(&ctx, "DELETE FROM iceberg.db.t WHERE id IN (2, 5)")
        .await
        .expect("delete");
    model.retain(|(id, _)| *id != 2 && *id != 5);
    assert_eq!(
        sorted_rows(&ctx, "SELECT id, name FROM iceberg.db.t").await,
        json_rows(&model)
    );
    let seen = pyiceberg(&server, &["read", "db.t"]);
    assert_eq!(pyiceberg_rows(&seen), json_rows(&model));
    assert_eq!(seen["snapshots"], 3, "two appends and a delete: {seen}");

    // Drops: a namespace with a table is not empty; the table, then the namespaces, go.
    let err = rest.drop_namespace(&db()).await.expect_err("not empty");
    assert!(err.to_string().contains("not empty"), "{err}");
    rest.drop_table(&TableIdent::new(db(), "t"), false)
        .await
        .expect("drop table");
    let err = rest
        .load_table(&TableIdent::new(db(), "t"))
        .await
        .expect_err("dropped");
    assert!(err.is_not_found(), "{err}");
    rest.drop_namespace(&nested).await.expect("drop db.inner");
    rest.drop_namespace(&db()).await.expect("drop db");
    assert!(rest.list_namespaces().await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_inserts_through_rest_lose_nothing() {
    let Some(server) = Rustberg::start() else {
        return;
    };
    const WRITERS: i64 = 8;
    const ROWS: i64 = 25;
    let setup: Arc<dyn Catalog> = Arc::new(server.catalog("iceberg").await);
    setup.create_namespace(&db(), false).await.expect("db");
    run_ddl(
        &session(vec![("iceberg", Arc::clone(&setup))]),
        "CREATE TABLE iceberg.db.c (writer BIGINT, n BIGINT) TBLPROPERTIES \
         ('commit.retry.num-retries'='30', 'commit.retry.min-wait-ms'='5', \
         'commit.retry.max-wait-ms'='200')",
    )
    .await;
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        // Each session has its own connection to the catalog, as separate servers would.
        let catalog: Arc<dyn Catalog> = Arc::new(server.catalog("iceberg").await);
        tasks.push(tokio::spawn(async move {
            let ctx = session(vec![("iceberg", catalog)]);
            let values: Vec<String> = (0..ROWS).map(|n| format!("({writer}, {n})")).collect();
            query(
                &ctx,
                &format!("INSERT INTO iceberg.db.c VALUES {}", values.join(", ")),
            )
            .await
            .map_err(|e| e.to_string())
        }));
    }
    for task in tasks {
        task.await.expect("task").expect("insert");
    }
    let ident = TableIdent::new(db(), "c");
    let table = setup.load_table(&ident).await.expect("load");
    assert_eq!(table.metadata().snapshots().count() as i64, WRITERS);
    let ctx = session(vec![("iceberg", setup)]);
    let counts = sorted_rows(
        &ctx,
        "SELECT writer, count(*), count(DISTINCT n) FROM iceberg.db.c GROUP BY writer",
    )
    .await;
    let expected: Vec<String> = {
        let mut e: Vec<String> = (0..WRITERS)
            .map(|w| json!([w, ROWS, ROWS]).to_string())
            .collect();
        e.sort();
        e
    };
    assert_eq!(counts, expected);
    let seen = pyiceberg(&server, &["read", "db.c"]);
    assert_eq!(
        seen["rows"].as_array().expect("rows").len() as i64,
        WRITERS * ROWS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_a_clear_error_without_a_hang() {
    let Some(server) = Rustberg::start() else {
        return;
    };
    let mut config = server.config("lake");
    config.token = Some("rb_not-the-key-0000000000000000".into());
    let started = Instant::now();
    let err = RestCatalog::connect(config, StoreRegistry::default())
        .await
        .expect_err("a wrong token is refused");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(
        text.contains("catalog lake") && text.contains("not authenticated"),
        "{text}"
    );
    assert!(
        !text.contains("rb_not-the-key"),
        "the token leaks into {text}"
    );

    // Nothing listens: a clear error too, as fast.
    let mut config = server.config("gone");
    config.uri = "http://127.0.0.1:9".into();
    let err = RestCatalog::connect(config, StoreRegistry::default())
        .await
        .expect_err("nothing listens");
    assert!(err.to_string().contains("cannot connect"), "{err}");
}
