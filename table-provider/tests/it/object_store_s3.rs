//! Tables on S3 (issue #12, object storage), against a real S3 server (moto, see
//! `common::moto`):
//!
//! - the fixture corpus copied into a bucket reads through a filesystem catalog over `s3://`
//!   with the same results Spark recorded, every check the local corpus test runs;
//! - Petrel's writes to an S3 table (CREATE, INSERT, DELETE, UPDATE, MERGE, rewrite_data_files)
//!   are read by PyIceberg (pyarrow's S3 FileIO) at exactly the model's rows;
//! - concurrent INSERTs from several sessions (each its own catalog over the same warehouse,
//!   committing with S3's conditional put) all land: one snapshot and its rows each;
//! - wrong keys fail with an error naming the table and the store, quickly;
//! - a server that is gone fails a query with an error, never wrong rows.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::moto::{Moto, upload_dir};
use common::{
    check_corpus, corpus_dir, query, run_ddl, session, snapshot_count, sorted_rows, write_count,
};
use petrel_table_provider::io::{CountedStore, StoreRegistry, object_store_requests};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace};
use serde_json::{Value, json};

/// A filesystem catalog over `s3://<bucket>/warehouse` on `moto`, with the server's keys.
fn s3_catalog(moto: &Moto, bucket: &str) -> FileSystemCatalog {
    let stores = StoreRegistry::with_properties(&moto.properties()).expect("store config");
    FileSystemCatalog::with_stores(&format!("s3://{bucket}/warehouse"), stores)
        .expect("catalog over s3")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_on_s3_matches_spark() {
    let moto = Moto::start();
    moto.create_bucket("corpus");
    let stores = StoreRegistry::with_properties(&moto.properties()).expect("store config");
    let (store, _, prefix) = stores.resolve("s3a://corpus/warehouse").expect("resolve");
    let copied = upload_dir(&corpus_dir().join("warehouse"), &store, &prefix).await;
    assert!(copied > 100, "{copied} files copied");

    // s3a:// and s3:// are one store.
    let catalog =
        FileSystemCatalog::with_stores("s3a://corpus/warehouse", stores).expect("catalog over s3a");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let before = object_store_requests(CountedStore::Remote);
    let (compared, merged) = check_corpus(&ctx, &corpus_dir()).await;
    let requests = object_store_requests(CountedStore::Remote).since(&before);
    eprintln!(
        "corpus on S3: {compared} results matched Spark ({merged} merge-on-read); requests: {requests:?}"
    );
    assert_eq!(compared, 137, "every corpus check ran");
    assert!(requests.get > 0, "the reads went to S3: {requests:?}");
}

/// PyIceberg's rows of the table whose current metadata file is `metadata` (pyarrow's S3
/// FileIO at the moto endpoint), each row a JSON array of `columns`, sorted.
fn pyiceberg_rows(moto: &Moto, metadata: &str, columns: &[&str]) -> Vec<String> {
    let script = r#"
import json, sys
from pyiceberg.table import StaticTable
endpoint, metadata, columns = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
import os
table = StaticTable.from_metadata(metadata, properties={
    "s3.endpoint": endpoint,
    "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
    "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
    "s3.region": "us-east-1",
    "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
})
for row in table.scan().to_arrow().to_pylist():
    print(json.dumps([row[c] for c in columns]))
"#;
    let out = moto.python(script, &[metadata, &columns.join(",")]);
    let mut rows: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("row").to_string())
        .collect();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_s3_read_by_pyiceberg() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let catalog: Arc<dyn Catalog> = Arc::new(s3_catalog(&moto, "lake"));
    catalog
        .create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("namespace on s3");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.birds (id BIGINT NOT NULL, name STRING, n INT) \
         PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('format-version'='2', \
         'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    )
    .await;
    // The model: id -> (name, n).
    let mut model: std::collections::BTreeMap<i64, (String, i32)> = Default::default();
    for chunk in [(1..=5), (6..=10)] {
        let values: Vec<String> = chunk
            .clone()
            .map(|i| format!("({i}, 'bird{i}', {})", i * 10))
            .collect();
        let n = write_count(
            &ctx,
            &format!("INSERT INTO iceberg.db.birds VALUES {}", values.join(", ")),
        )
        .await;
        assert_eq!(n, 5);
        for i in chunk {
            model.insert(i, (format!("bird{i}"), (i * 10) as i32));
        }
    }
    assert_eq!(
        write_count(&ctx, "DELETE FROM iceberg.db.birds WHERE id IN (2, 7)").await,
        2
    );
    model.remove(&2);
    model.remove(&7);
    assert_eq!(
        write_count(&ctx, "UPDATE iceberg.db.birds SET n = n + 1 WHERE id > 8").await,
        2
    );
    for id in [9, 10] {
        model.entry(id).and_modify(|(_, n)| *n += 1);
    }
    query(
        &ctx,
        "MERGE INTO iceberg.db.birds t USING (SELECT 3 AS id, 'heron' AS name UNION ALL \
         SELECT 11 AS id, 'tern' AS name) s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET name = s.name \
         WHEN NOT MATCHED THEN INSERT (id, name, n) VALUES (s.id, s.name, 0)",
    )
    .await
    .expect("merge on s3");
    model
        .entry(3)
        .and_modify(|(name, _)| *name = "heron".into());
    model.insert(11, ("tern".into(), 0));
    query(
        &ctx,
        "CALL iceberg.system.rewrite_data_files(table => 'db.birds')",
    )
    .await
    .expect("rewrite_data_files on s3");

    let mut expected: Vec<String> = model
        .iter()
        .map(|(id, (name, n))| json!([id, name, n]).to_string())
        .collect();
    expected.sort();
    assert_eq!(
        sorted_rows(&ctx, "SELECT id, name, n FROM iceberg.db.birds").await,
        expected,
        "Petrel's rows"
    );
    let table = catalog
        .load_table(&petrel_table_provider::TableIdent::new(
            Namespace::new(vec!["db".into()]),
            "birds",
        ))
        .await
        .expect("load");
    let metadata = table.metadata_location().to_string();
    assert!(
        metadata.starts_with("s3://lake/warehouse/db/birds/metadata/v"),
        "{metadata}"
    );
    assert_eq!(
        pyiceberg_rows(&moto, &metadata, &["id", "name", "n"]),
        expected,
        "PyIceberg's rows of {metadata}"
    );
    // Another catalog over the same bucket lists what this one made.
    let other = s3_catalog(&moto, "lake");
    assert_eq!(
        other.list_namespaces().await.expect("namespaces"),
        vec![Namespace::new(vec!["db".into()])]
    );
    let tables = other
        .list_tables(&Namespace::new(vec!["db".into()]))
        .await
        .expect("tables");
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].name, "birds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_inserts_on_s3_all_land() {
    const SESSIONS: usize = 4;
    const INSERTS: usize = 3;
    let moto = Moto::start();
    moto.create_bucket("busy");
    let first: Arc<dyn Catalog> = Arc::new(s3_catalog(&moto, "busy"));
    first
        .create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("namespace");
    run_ddl(
        &session(vec![("iceberg", Arc::clone(&first))]),
        "CREATE TABLE iceberg.db.events (sid INT, i INT) TBLPROPERTIES \
         ('commit.retry.num-retries'='50', 'commit.retry.min-wait-ms'='10', \
         'commit.retry.max-wait-ms'='200')",
    )
    .await;
    let mut tasks = Vec::new();
    for s in 0..SESSIONS {
        // Each session its own catalog (no shared cache or lock): only S3 arbitrates.
        let catalog: Arc<dyn Catalog> = Arc::new(s3_catalog(&moto, "busy"));
        tasks.push(tokio::spawn(async move {
            let ctx = session(vec![("iceberg", catalog)]);
            for i in 0..INSERTS {
                let sql = format!("INSERT INTO iceberg.db.events VALUES ({s}, {i}), ({s}, {i})");
                write_count(&ctx, &sql).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("session");
    }
    // Each INSERT wrote its row twice.
    let mut expected = Vec::new();
    for s in 0..SESSIONS {
        for i in 0..INSERTS {
            expected.push(json!([s, i]).to_string());
            expected.push(json!([s, i]).to_string());
        }
    }
    expected.sort();
    let ctx = session(vec![("iceberg", Arc::new(s3_catalog(&moto, "busy")))]);
    assert_eq!(
        sorted_rows(&ctx, "SELECT sid, i FROM iceberg.db.events").await,
        expected
    );
    assert_eq!(
        snapshot_count(&s3_catalog(&moto, "busy"), "events").await,
        SESSIONS * INSERTS,
        "one snapshot per INSERT"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_keys_name_the_table_and_the_store() {
    let moto = Moto::start_with_auth("guarded");
    let catalog: Arc<dyn Catalog> = Arc::new(s3_catalog(&moto, "guarded"));
    catalog
        .create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("the right keys work");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (x INT)").await;
    write_count(&ctx, "INSERT INTO iceberg.db.t VALUES (1), (2)").await;
    assert_eq!(
        sorted_rows(&ctx, "SELECT x FROM iceberg.db.t").await,
        ["[1]", "[2]"]
    );

    let mut wrong = moto.properties();
    wrong.insert("s3.secret-access-key".into(), "not-the-secret".into());
    let stores = StoreRegistry::with_properties(&wrong).expect("config");
    let bad = FileSystemCatalog::with_stores("s3://guarded/warehouse", stores).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(bad))]);
    let started = Instant::now();
    let err = query(&ctx, "SELECT x FROM iceberg.db.t")
        .await
        .expect_err("wrong secret")
        .to_string();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.contains("db.t"), "names the table: {err}");
    assert!(err.contains("s3://guarded"), "names the bucket: {err}");
    assert!(err.contains(&moto.endpoint), "names the endpoint: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_server_fails_queries_clearly() {
    let moto = Moto::start();
    moto.create_bucket("gone");
    let catalog: Arc<dyn Catalog> = Arc::new(s3_catalog(&moto, "gone"));
    catalog
        .create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("namespace");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (x INT)").await;
    write_count(&ctx, "INSERT INTO iceberg.db.t VALUES (1), (2), (3)").await;
    // Plan while the server is up, then take it away before the data files are read.
    let frame = ctx
        .sql("SELECT sum(x) FROM iceberg.db.t")
        .await
        .expect("plan");
    let endpoint = moto.endpoint.clone();
    drop(moto);
    let started = Instant::now();
    let err = frame.collect().await.expect_err("no server").to_string();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    let port = endpoint.rsplit(':').next().expect("port");
    assert!(
        err.contains(port) || err.to_lowercase().contains("connect"),
        "names the unreachable store: {err}"
    );
}

/// The S3 latency benchmark (`scripts/bench-s3.sh`; ignored in normal runs): a table of
/// `PETREL_S3_BENCH_INSERTS` appends (default 20) × 5 partitions written once locally and once
/// on moto behind `scripts/delay-proxy.py` (20 ms per request), then with a fresh catalog
/// (cold caches) per run: planning (SQL to physical plan) and a full scan, wall time and object
/// store requests, medians of 5 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: scripts/bench-s3.sh"]
async fn s3_latency_bench() {
    let inserts: usize = std::env::var("PETREL_S3_BENCH_INSERTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let delay_ms: u64 = std::env::var("PETREL_S3_BENCH_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let moto = Moto::start();
    moto.create_bucket("bench");
    let proxy = common::moto::DelayProxy::start(&moto, delay_ms);
    let mut slow = moto.properties();
    slow.insert("s3.endpoint".into(), proxy.endpoint.clone());
    let local_dir = tempfile::tempdir().expect("tempdir");
    let local_root = local_dir.path().join("warehouse");
    std::fs::create_dir_all(&local_root).expect("mkdir");
    let local_root = local_root.to_str().expect("utf8").to_string();
    let make = |root: &str, props: &std::collections::HashMap<String, String>| {
        let stores = StoreRegistry::with_properties(props).expect("config");
        Arc::new(FileSystemCatalog::with_stores(root, stores).expect("catalog")) as Arc<dyn Catalog>
    };
    let setups = [
        ("local", local_root.clone(), moto.properties()),
        ("s3+20ms", "s3://bench/warehouse".to_string(), slow.clone()),
    ];
    // Write the same table to both (writes go straight to moto, not through the proxy).
    for (_, root, _) in &setups {
        let catalog = make(root, &moto.properties());
        catalog
            .create_namespace(&Namespace::new(vec!["db".into()]), false)
            .await
            .expect("namespace");
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        run_ddl(
            &ctx,
            "CREATE TABLE iceberg.db.t (id BIGINT, part INT, payload STRING) \
             PARTITIONED BY (part)",
        )
        .await;
        for n in 0..inserts {
            let values: Vec<String> = (0..500)
                .map(|i| {
                    let id = n * 500 + i;
                    format!("({id}, {}, 'payload-{id}')", id % 5)
                })
                .collect();
            write_count(
                &ctx,
                &format!("INSERT INTO iceberg.db.t VALUES {}", values.join(", ")),
            )
            .await;
        }
    }
    let rows = (inserts * 500) as i64;
    println!("| warehouse | planning ms | planning requests | full scan ms | full scan requests |");
    println!("|---|---:|---:|---:|---:|");
    for (name, root, props) in &setups {
        let kind = if name.starts_with("s3") {
            CountedStore::Remote
        } else {
            CountedStore::Local
        };
        let mut plans = Vec::new();
        let mut scans = Vec::new();
        let (mut plan_requests, mut scan_requests) = (0, 0);
        for _ in 0..5 {
            let ctx = session(vec![("iceberg", make(root, props))]);
            let sql = "SELECT sum(length(payload)), count(id) FROM iceberg.db.t";
            let before = object_store_requests(kind);
            let started = Instant::now();
            let plan = ctx
                .sql(sql)
                .await
                .expect("sql")
                .create_physical_plan()
                .await
                .expect("plan");
            plans.push(started.elapsed());
            let planned = object_store_requests(kind);
            plan_requests = planned.since(&before).total();
            let started = Instant::now();
            let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
                .await
                .expect("scan");
            scans.push(started.elapsed());
            scan_requests = object_store_requests(kind).since(&planned).total();
            let count = batches[0]
                .column(1)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .expect("count")
                .value(0);
            assert_eq!(count, rows);
        }
        plans.sort();
        scans.sort();
        println!(
            "| {name} | {:.1} | {plan_requests} | {:.1} | {scan_requests} |",
            plans[2].as_secs_f64() * 1000.0,
            scans[2].as_secs_f64() * 1000.0
        );
    }
}
