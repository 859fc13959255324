//! The SQL catalog on a real PostgreSQL 15 (`scripts/start-postgres.sh`, see
//! [`common::postgres`]): the tables it creates are PyIceberg's; DDL and writes through Petrel
//! read back as a model says; PyIceberg's `SqlCatalog` (SQLAlchemy + psycopg2) on the same
//! database reads Petrel's tables and Petrel reads PyIceberg's commits; concurrent committers
//! lose nothing; the fixture corpus registered into PostgreSQL reads as Spark computed; a
//! server that refuses, rejects the password or never answers is a clear, prompt error.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::postgres::{Postgres, unique_catalog_name};
use common::{check_corpus, corpus_dir, corpus_tables, query, session, sorted_rows, write_count};
use petrel_table_provider::{
    Catalog, Error, FileSystemCatalog, Namespace, SqlCatalog, TableIdent, io::StoreRegistry,
};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A Petrel SQL catalog `name` on the server's database, with `warehouse`.
async fn pg_catalog(uri: &str, name: &str, warehouse: &Path) -> SqlCatalog {
    SqlCatalog::connect_postgres(uri, name, StoreRegistry::default())
        .await
        .unwrap_or_else(|e| panic!("connect {name}: {e}"))
        .with_warehouse(warehouse.to_str().expect("utf8"))
        .expect("warehouse")
}

/// The Python of the repository's virtualenv (PETREL_PYTHON overrides it).
fn python() -> PathBuf {
    if let Some(py) = std::env::var_os("PETREL_PYTHON") {
        return PathBuf::from(py);
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let py = repo.join(".venv/bin/python");
    if !py.exists() {
        let status = std::process::Command::new("bash")
            .arg(repo.join("scripts/setup-python.sh"))
            .status()
            .expect("run scripts/setup-python.sh");
        assert!(status.success(), "scripts/setup-python.sh failed");
    }
    py
}

/// Runs `script` with PyIceberg's `SqlCatalog` named `name` on `sqlalchemy_uri`; its stdout's
/// last line as JSON.
fn pyiceberg(sqlalchemy_uri: &str, name: &str, warehouse: &Path, script: &str) -> Value {
    let prelude = format!(
        "import json, sys\n\
         import pyarrow as pa\n\
         from pyiceberg.catalog.sql import SqlCatalog\n\
         catalog = SqlCatalog({name:?}, uri={sqlalchemy_uri:?}, warehouse='file://{}')\n",
        warehouse.display()
    );
    let output = std::process::Command::new(python())
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "pyiceberg failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf8");
    serde_json::from_str(stdout.lines().last().expect("a line")).expect("json")
}

/// A model table: id → (name, qty), as sorted JSON row texts like [`sorted_rows`].
fn model_rows(model: &BTreeMap<i64, (String, i32)>) -> Vec<String> {
    let mut rows: Vec<String> = model
        .iter()
        .map(|(id, (name, qty))| json!([id, name, qty]).to_string())
        .collect();
    rows.sort();
    rows
}

/// PyIceberg's rows (`[[id, name, qty], ...]`) as sorted JSON row texts.
fn python_rows(rows: &Value) -> Vec<String> {
    let mut out: Vec<String> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(Value::to_string)
        .collect();
    out.sort();
    out
}

/// A plain client on the server (the test's own look at the database).
async fn admin(uri: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(uri, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// The columns of the catalog tables in the database `uri` names:
/// `table.column type(length) NULL|NOT NULL`, and the primary keys.
async fn catalog_schema(uri: &str) -> (Vec<String>, Vec<String>) {
    let client = admin(uri).await;
    let columns = client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, \
                    character_maximum_length, is_nullable::text \
             FROM information_schema.columns \
             WHERE table_schema = 'public' \
               AND table_name IN ('iceberg_tables', 'iceberg_namespace_properties') \
             ORDER BY table_name, ordinal_position",
            &[],
        )
        .await
        .expect("columns")
        .iter()
        .map(|r| {
            let nullable: String = r.get(4);
            format!(
                "{}.{} {}({}) {}",
                r.get::<_, String>(0),
                r.get::<_, String>(1),
                r.get::<_, String>(2),
                r.get::<_, Option<i32>>(3).unwrap_or(0),
                if nullable == "YES" {
                    "NULL"
                } else {
                    "NOT NULL"
                }
            )
        })
        .collect();
    let keys = client
        .query(
            "SELECT tc.table_name::text, kcu.column_name::text \
             FROM information_schema.table_constraints tc \
             JOIN information_schema.key_column_usage kcu \
               ON tc.constraint_name = kcu.constraint_name AND tc.table_name = kcu.table_name \
             WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = 'public' \
             ORDER BY tc.table_name, kcu.ordinal_position",
            &[],
        )
        .await
        .expect("keys")
        .iter()
        .map(|r| format!("{}.{}", r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect();
    (columns, keys)
}

/// A new empty database on the server, owned by the test user; its URI.
async fn fresh_database(pg: &Postgres, prefix: &str) -> String {
    let name = unique_catalog_name(prefix);
    admin(&pg.uri)
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    format!("{}/{name}", pg.uri.rsplit_once('/').expect("uri").0)
}

/// On an empty database Petrel creates the catalog tables exactly as PyIceberg's `SqlCatalog`
/// does on another (same columns, types, lengths, nullability, primary keys), and opening the
/// catalog again leaves them as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_the_catalog_tables_as_pyiceberg_does() {
    let pg = Postgres::start();
    let dir = TempDir::new().expect("tempdir");
    let petrel_db = fresh_database(&pg, "petrel_made").await;
    let python_db = fresh_database(&pg, "pyiceberg_made").await;

    pg_catalog(&petrel_db, "c", dir.path()).await;
    pyiceberg(
        &python_db.replacen("postgresql://", "postgresql+psycopg2://", 1),
        "c",
        dir.path(),
        "catalog.list_namespaces()\nprint(json.dumps({}))\n",
    );
    let petrel = catalog_schema(&petrel_db).await;
    let python = catalog_schema(&python_db).await;
    assert_eq!(petrel, python);
    assert_eq!(
        petrel.0,
        [
            "iceberg_namespace_properties.catalog_name character varying(255) NOT NULL",
            "iceberg_namespace_properties.namespace character varying(255) NOT NULL",
            "iceberg_namespace_properties.property_key character varying(255) NOT NULL",
            "iceberg_namespace_properties.property_value character varying(1000) NOT NULL",
            "iceberg_tables.catalog_name character varying(255) NOT NULL",
            "iceberg_tables.table_namespace character varying(255) NOT NULL",
            "iceberg_tables.table_name character varying(255) NOT NULL",
            "iceberg_tables.metadata_location character varying(1000) NULL",
            "iceberg_tables.previous_metadata_location character varying(1000) NULL",
            "iceberg_tables.iceberg_type character varying(5) NULL",
        ]
    );
    // Opening again (tables present) changes nothing and works.
    let again = pg_catalog(&petrel_db, "c", dir.path()).await;
    assert!(again.list_namespaces().await.expect("list").is_empty());
    assert_eq!(catalog_schema(&petrel_db).await, python);
}

/// DDL, INSERT and DELETE through Petrel on PostgreSQL read back as the model says; PyIceberg
/// on the same database reads the same rows, appends and deletes on top, and Petrel (a new
/// connection) reads PyIceberg's commits and its own table; DROP leaves nothing listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn petrel_and_pyiceberg_share_a_postgres_catalog() {
    let pg = Postgres::start();
    let dir = TempDir::new().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("warehouse");
    let name = unique_catalog_name("shared");
    let catalog: Arc<dyn Catalog> = Arc::new(pg_catalog(&pg.uri, &name, &warehouse).await);
    let ctx = session(vec![("pg", Arc::clone(&catalog))]);

    query(&ctx, "CREATE SCHEMA pg.shop").await.expect("schema");
    query(
        &ctx,
        "CREATE TABLE pg.shop.items (id BIGINT, name STRING, qty INT)",
    )
    .await
    .expect("create table");
    let mut model: BTreeMap<i64, (String, i32)> = BTreeMap::new();
    let first = [(1, "a", 10), (2, "b", 20), (3, "c", 30), (4, "d", 40)];
    let values: Vec<String> = first
        .iter()
        .map(|(id, n, q)| format!("({id}, '{n}', {q})"))
        .collect();
    let inserted = write_count(
        &ctx,
        &format!("INSERT INTO pg.shop.items VALUES {}", values.join(", ")),
    )
    .await;
    assert_eq!(inserted, 4);
    model.extend(first.iter().map(|(id, n, q)| (*id, (n.to_string(), *q))));
    assert_eq!(
        write_count(&ctx, "DELETE FROM pg.shop.items WHERE qty > 25").await,
        2
    );
    model.retain(|_, (_, qty)| *qty <= 25);
    write_count(&ctx, "INSERT INTO pg.shop.items VALUES (5, 'e', 50)").await;
    model.insert(5, ("e".into(), 50));
    let select = "SELECT id, name, qty FROM pg.shop.items";
    assert_eq!(sorted_rows(&ctx, select).await, model_rows(&model));

    // PyIceberg reads Petrel's rows, then appends and deletes (copy-on-write) on top, and
    // creates a table of its own.
    let seen = pyiceberg(
        &pg.sqlalchemy_uri(),
        &name,
        &warehouse,
        "from pyiceberg.expressions import EqualTo\n\
         t = catalog.load_table('shop.items')\n\
         before = [[r['id'], r['name'], r['qty']] for r in t.scan().to_arrow().to_pylist()]\n\
         snapshots = len(t.metadata.snapshots)\n\
         schema = pa.schema([('id', pa.int64()), ('name', pa.string()), ('qty', pa.int32())])\n\
         t.append(pa.table({'id': [6, 7], 'name': ['f', 'ü'], 'qty': [60, 70]}, schema=schema))\n\
         t.delete(EqualTo('id', 1))\n\
         catalog.create_namespace('py')\n\
         own = catalog.create_table('py.made', schema=schema)\n\
         own.append(pa.table({'id': [100], 'name': ['py'], 'qty': [1]}, schema=schema))\n\
         print(json.dumps({'before': before, 'snapshots': snapshots,\n\
                           'tables': sorted('.'.join(i) for i in catalog.list_tables('shop')),\n\
                           'namespaces': sorted('.'.join(n) for n in catalog.list_namespaces())}))\n",
    );
    assert_eq!(python_rows(&seen["before"]), model_rows(&model));
    assert_eq!(seen["snapshots"], 3, "Petrel's INSERT, DELETE, INSERT");
    assert_eq!(seen["tables"], json!(["shop.items"]));
    assert_eq!(seen["namespaces"], json!(["py", "shop"]));
    model.insert(6, ("f".into(), 60));
    model.insert(7, ("ü".into(), 70));
    model.remove(&1);

    // A new catalog (new connections, no cache) reads PyIceberg's commits.
    let fresh: Arc<dyn Catalog> = Arc::new(pg_catalog(&pg.uri, &name, &warehouse).await);
    let ctx = session(vec![("pg", Arc::clone(&fresh))]);
    assert_eq!(sorted_rows(&ctx, select).await, model_rows(&model));
    assert_eq!(
        sorted_rows(&ctx, "SELECT id, name, qty FROM pg.py.made").await,
        vec![json!([100, "py", 1]).to_string()]
    );
    // And writes after them: the metadata versions continue.
    write_count(&ctx, "INSERT INTO pg.shop.items VALUES (8, 'h', 80)").await;
    model.insert(8, ("h".into(), 80));
    let again = pyiceberg(
        &pg.sqlalchemy_uri(),
        &name,
        &warehouse,
        "t = catalog.load_table('shop.items')\n\
         rows = [[r['id'], r['name'], r['qty']] for r in t.scan().to_arrow().to_pylist()]\n\
         print(json.dumps({'rows': rows, 'location': t.metadata_location}))\n",
    );
    assert_eq!(python_rows(&again["rows"]), model_rows(&model));
    let location = again["location"].as_str().expect("location");
    let file = location.rsplit('/').next().expect("file");
    // 00000 create, 3 Petrel commits, PyIceberg's append and delete, Petrel's insert.
    assert!(file.starts_with("00006-"), "{location}");

    // Dropping: tables, then namespaces; PyIceberg lists nothing of this catalog.
    query(&ctx, "DROP TABLE pg.shop.items").await.expect("drop");
    query(&ctx, "DROP TABLE pg.py.made").await.expect("drop");
    query(&ctx, "DROP SCHEMA pg.shop")
        .await
        .expect("drop schema");
    query(&ctx, "DROP SCHEMA pg.py").await.expect("drop schema");
    let left = pyiceberg(
        &pg.sqlalchemy_uri(),
        &name,
        &warehouse,
        "print(json.dumps({'namespaces': [list(n) for n in catalog.list_namespaces()]}))\n",
    );
    assert_eq!(left["namespaces"], json!([]));
    assert!(fresh.list_namespaces().await.expect("list").is_empty());
}

/// Eight committers, each with its own catalog (its own connections, as eight servers would
/// have), add five properties each to one table, retrying from a reload after each lost race:
/// every property arrives, the metadata log has every commit once, and no loser's metadata
/// file is left. Then eight sessions INSERT concurrently through SQL (Iceberg's commit retry):
/// every row is there exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_committers_lose_nothing() {
    let pg = Postgres::start();
    let dir = TempDir::new().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    let name = unique_catalog_name("race");
    let first = pg_catalog(&pg.uri, &name, &warehouse).await;
    let ctx = session(vec![("pg", Arc::new(first.clone()) as Arc<dyn Catalog>)]);
    query(&ctx, "CREATE SCHEMA pg.db").await.expect("schema");
    query(
        &ctx,
        "CREATE TABLE pg.db.t (writer INT, k INT) \
         TBLPROPERTIES ('commit.retry.num-retries' = '50', 'commit.retry.min-wait-ms' = '10', \
         'commit.retry.max-wait-ms' = '200')",
    )
    .await
    .expect("create");
    let ident = TableIdent::new(Namespace::from_dotted("db"), "t");

    const WRITERS: usize = 8;
    const COMMITS: usize = 5;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let catalog = pg_catalog(&pg.uri, &name, &warehouse).await;
        let ident = ident.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for k in 0..COMMITS {
                loop {
                    let base = catalog.load_table(&ident).await.expect("load");
                    let metadata = iceberg::spec::TableMetadataBuilder::new_from_metadata(
                        (**base.metadata()).clone(),
                        Some(base.metadata_location().to_string()),
                    )
                    .set_properties([(format!("w{w}.{k}"), "1".to_string())].into())
                    .expect("properties")
                    .build()
                    .expect("metadata")
                    .metadata;
                    match catalog.commit_table(&base, metadata).await {
                        Ok(_) => break,
                        Err(Error::CommitConflict { .. }) => conflicts += 1,
                        Err(other) => panic!("writer {w}: {other}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for task in tasks {
        conflicts += task.await.expect("task");
    }
    eprintln!("{WRITERS} writers x {COMMITS} commits: {conflicts} lost races retried");
    let table = first.load_table(&ident).await.expect("load");
    for w in 0..WRITERS {
        for k in 0..COMMITS {
            assert_eq!(
                table.metadata().properties().get(&format!("w{w}.{k}")),
                Some(&"1".to_string()),
                "w{w}.{k}"
            );
        }
    }
    let commits = WRITERS * COMMITS;
    assert_eq!(table.metadata().metadata_log().len(), commits);
    let metadata_dir = warehouse.join("db/t/metadata");
    let files = std::fs::read_dir(&metadata_dir)
        .expect("metadata dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".metadata.json"))
        .count();
    assert_eq!(files, commits + 1, "no loser's metadata file is left");

    // Eight sessions (each its own catalog) INSERT at once through SQL.
    let mut inserts = Vec::new();
    for w in 0..WRITERS {
        let catalog: Arc<dyn Catalog> = Arc::new(pg_catalog(&pg.uri, &name, &warehouse).await);
        inserts.push(tokio::spawn(async move {
            let ctx = session(vec![("pg", catalog)]);
            let sql = format!("INSERT INTO pg.db.t VALUES ({w}, 0), ({w}, 1), ({w}, 2)");
            write_count(&ctx, &sql).await
        }));
    }
    for insert in inserts {
        assert_eq!(insert.await.expect("task"), 3);
    }
    let mut expected: Vec<String> = (0..WRITERS)
        .flat_map(|w| (0..3).map(move |k| json!([w, k]).to_string()))
        .collect();
    expected.sort();
    let ctx = session(vec![("pg", Arc::new(first) as Arc<dyn Catalog>)]);
    assert_eq!(
        sorted_rows(&ctx, "SELECT writer, k FROM pg.db.t").await,
        expected
    );
}

/// Every table of the fixture corpus, registered into a PostgreSQL catalog by its current
/// metadata file, reads with the results Spark computed (as the local corpus test does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_registered_in_postgres_matches_spark() {
    let pg = Postgres::start();
    let dir = TempDir::new().expect("tempdir");
    let warehouse = corpus_dir().join("warehouse");
    let local = FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog");
    let catalog = pg_catalog(&pg.uri, &unique_catalog_name("corpus"), dir.path()).await;
    let db = Namespace::from_dotted("db");
    catalog.create_namespace(&db).await.expect("namespace");
    let tables = corpus_tables(&corpus_dir());
    for (table, _) in &tables {
        let ident = TableIdent::new(db.clone(), table.clone());
        let current = local.load_table(&ident).await.expect("local table");
        catalog
            .register_table(&ident, current.metadata_location())
            .await
            .unwrap_or_else(|e| panic!("register {ident}: {e}"));
    }
    assert_eq!(
        catalog.list_tables(&db).await.expect("list").len(),
        tables.len()
    );
    let ctx = session(vec![("iceberg", Arc::new(catalog) as Arc<dyn Catalog>)]);
    let (compared, merged) = check_corpus(&ctx, &corpus_dir()).await;
    eprintln!(
        "corpus through PostgreSQL: {compared} results matched Spark ({merged} merge-on-read)"
    );
    assert_eq!(compared, 137, "every corpus check ran");
}

/// Opening the catalog against a server that rejects the password, a database that does not
/// exist, a closed port, or a server that accepts the connection and never answers: each is a
/// prompt error naming the catalog and the host, never the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_failures_are_prompt_clear_errors() {
    let pg = Postgres::start();
    let host = pg.host_port();
    let open = |uri: String| async move {
        let started = Instant::now();
        let result = SqlCatalog::connect_postgres(&uri, "lake", StoreRegistry::default()).await;
        let message = match result {
            Ok(_) => panic!("{uri}: connected"),
            Err(e) => e.to_string(),
        };
        (message, started.elapsed())
    };

    let (message, _) = open(pg.uri_with_password("Wr0ngSecret")).await;
    assert!(message.contains("catalog lake"), "{message}");
    assert!(message.contains(&host), "{message}");
    assert!(
        message.contains("password authentication failed"),
        "{message}"
    );
    assert!(!message.contains("Wr0ngSecret"), "{message}");

    let missing = format!("{}/no_such_db", pg.uri.rsplit_once('/').expect("uri").0);
    let (message, _) = open(missing).await;
    assert!(message.contains("no_such_db"), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert!(!message.contains(":petrel@"), "{message}");

    // A closed port: refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let (message, took) = open(format!(
        "postgresql://petrel:S3cret@127.0.0.1:{port}/petrel"
    ))
    .await;
    assert!(message.contains("catalog lake"), "{message}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("cannot connect"), "{message}");
    assert!(!message.contains("S3cret"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // A server that accepts and never speaks: the connect timeout ends the wait.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let (message, took) = open(format!(
        "postgresql://petrel:S3cret@127.0.0.1:{port}/petrel?connect_timeout=1"
    ))
    .await;
    held.abort();
    assert!(message.contains("catalog lake"), "{message}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(!message.contains("S3cret"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}: {message}");

    // A URI that is not one.
    let (message, _) = open("postgresql://petrel:S3cret@127.0.0.1:notaport/db".into()).await;
    assert!(message.contains("catalog lake"), "{message}");
    assert!(!message.contains("S3cret"), "{message}");
}
