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
use petrel_table_provider::catalog::CachingCatalog;
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

/// Milliseconds of a duration.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The nearest-rank `q` quantile of sorted `values`.
fn quantile<T: Copy>(sorted: &[T], q: f64) -> T {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One query planned (SQL to physical plan) then run: (planning time, planning requests, scan
/// time, scan requests); asserts the count of rows.
async fn plan_and_scan(
    ctx: &datafusion::prelude::SessionContext,
    kind: CountedStore,
    rows: i64,
) -> (Duration, u64, Duration, u64) {
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
    let planning = started.elapsed();
    let planned = object_store_requests(kind);
    let started = Instant::now();
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .expect("scan");
    let scan = started.elapsed();
    let scan_requests = object_store_requests(kind).since(&planned).total();
    let count = batches[0]
        .column(1)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .expect("count")
        .value(0);
    assert_eq!(count, rows);
    (
        planning,
        planned.since(&before).total(),
        scan,
        scan_requests,
    )
}

/// Medians of runs of [`plan_and_scan`]: planning ms, planning requests, scan ms, scan requests.
fn medians(runs: &[(Duration, u64, Duration, u64)]) -> (f64, u64, f64, u64) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5)
    };
    let median_u = |mut v: Vec<u64>| {
        v.sort();
        quantile(&v, 0.5)
    };
    (
        median(runs.iter().map(|r| ms(r.0)).collect()),
        median_u(runs.iter().map(|r| r.1).collect()),
        median(runs.iter().map(|r| ms(r.2)).collect()),
        median_u(runs.iter().map(|r| r.3).collect()),
    )
}

/// The S3 latency benchmark (`scripts/bench-s3.sh`; ignored in normal runs): a table of
/// `PETREL_S3_BENCH_INSERTS` appends (default 20) × 5 partitions written once locally and once
/// on moto behind `scripts/delay-proxy.py` (20 ms per request), then:
///
/// - cold: a fresh catalog and session per run (cold metadata, manifest and footer caches);
///   warm: one catalog and session, after one run (what a server sees) — planning (SQL to
///   physical plan) and a full scan, wall time and object-store requests, and a table load
///   alone (catalog call only), medians of 5 runs; on the local table, on the S3 table with
///   moto answering directly (its own cost) and behind the proxy;
/// - warm again through a `CachingCatalog` (`table_cache_ms`): no table load per query;
/// - point queries (`SELECT * … WHERE id = k`, 50 keys, warm catalogs) on the same S3 table
///   through a filesystem catalog over `s3://` and through a REST catalog (rustberg, the table
///   registered by its metadata file, its API behind a delay proxy of the same delay; rustberg
///   reads moto directly), plus the local table for reference, each also with a table cache:
///   p50 and p99.
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
    let s3_name = format!("S3 + {delay_ms} ms");
    let setups = [
        ("local", local_root.clone(), moto.properties()),
        (
            "S3 without delay",
            "s3://bench/warehouse".to_string(),
            moto.properties(),
        ),
        (
            s3_name.as_str(),
            "s3://bench/warehouse".to_string(),
            slow.clone(),
        ),
    ];
    // Write the same table locally and on S3 (writes go straight to moto, not through the
    // proxy).
    for (_, root, _) in &setups[..2] {
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
    let kind_of = |name: &str| {
        if name.starts_with("S3") {
            CountedStore::Remote
        } else {
            CountedStore::Local
        }
    };
    println!(
        "\n| warehouse | caches | planning ms | planning requests | table load alone ms | \
         full scan ms | full scan requests |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut planning = std::collections::HashMap::new();
    let ident = petrel_table_provider::TableIdent::new(Namespace::new(vec!["db".into()]), "t");
    for (name, root, props) in &setups {
        let kind = kind_of(name);
        let mut cold = Vec::new();
        let mut cold_loads = Vec::new();
        for _ in 0..5 {
            let ctx = session(vec![("iceberg", make(root, props))]);
            cold.push(plan_and_scan(&ctx, kind, rows).await);
            // The table load alone, on another fresh catalog.
            let catalog = make(root, props);
            let started = Instant::now();
            catalog.load_table(&ident).await.expect("load");
            cold_loads.push(ms(started.elapsed()));
        }
        let (warm, warm_loads) = warm_runs(make(root, props), &ident, kind, rows).await;
        // Warm with `table_cache_ms`: the table load itself is answered from memory.
        let cache = CachingCatalog::new(make(root, props), Duration::from_secs(3600));
        let (cached, cached_loads) = warm_runs(Arc::new(cache), &ident, kind, rows).await;
        for (caches, runs, mut loads) in [
            ("cold", &cold, cold_loads),
            ("warm", &warm, warm_loads),
            (TABLE_CACHE, &cached, cached_loads),
        ] {
            let (plan_ms, plan_requests, scan_ms, scan_requests) = medians(runs);
            loads.sort_by(f64::total_cmp);
            let load_ms = quantile(&loads, 0.5);
            planning.insert((name.to_string(), caches), plan_ms);
            println!(
                "| {name} | {caches} | {plan_ms:.1} | {plan_requests} | {load_ms:.1} | \
                 {scan_ms:.1} | {scan_requests} |"
            );
        }
    }
    for caches in ["cold", "warm", TABLE_CACHE] {
        let (s3, local) = (
            planning[&(s3_name.clone(), caches)],
            planning[&("local".to_string(), caches)],
        );
        println!(
            "\nPlanning, {caches}: {s3_name} ÷ local = {:.2}×",
            s3 / local
        );
    }

    point_queries(&moto, &slow, delay_ms, &local_root, rows).await;
}

/// Five warm runs of [`plan_and_scan`] on one catalog and session (after one run to fill the
/// caches), each followed by a table load alone: the runs and the loads' milliseconds.
async fn warm_runs(
    catalog: Arc<dyn Catalog>,
    ident: &petrel_table_provider::TableIdent,
    kind: CountedStore,
    rows: i64,
) -> (Vec<(Duration, u64, Duration, u64)>, Vec<f64>) {
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    plan_and_scan(&ctx, kind, rows).await;
    let (mut runs, mut loads) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        runs.push(plan_and_scan(&ctx, kind, rows).await);
        let started = Instant::now();
        catalog.load_table(ident).await.expect("load");
        loads.push(ms(started.elapsed()));
    }
    (runs, loads)
}

/// The warm runs of [`s3_latency_bench`] through a [`CachingCatalog`] (`table_cache_ms`).
const TABLE_CACHE: &str = "warm, table cache";

/// The point-query part of [`s3_latency_bench`]: the S3 table through a filesystem catalog and
/// through rustberg (skipped, with the reason printed, when rustberg is not installed).
async fn point_queries(
    moto: &Moto,
    slow: &std::collections::HashMap<String, String>,
    delay_ms: u64,
    local_root: &str,
    rows: i64,
) {
    use common::rustberg::{API_KEY, Rustberg};
    use petrel_table_provider::{RestCatalog, RestCatalogConfig, TableIdent};

    let fs_catalog = |root: &str, props: &std::collections::HashMap<String, String>| {
        let stores = StoreRegistry::with_properties(props).expect("config");
        Arc::new(FileSystemCatalog::with_stores(root, stores).expect("catalog")) as Arc<dyn Catalog>
    };
    let s3_fs = fs_catalog("s3://bench/warehouse", slow);
    let db = Namespace::new(vec!["db".into()]);
    let ident = TableIdent::new(db.clone(), "t");
    let metadata_location = s3_fs
        .load_table(&ident)
        .await
        .expect("the S3 table")
        .metadata_location()
        .to_string();
    let mut catalogs: Vec<(String, CountedStore, Arc<dyn Catalog>)> = vec![
        (
            "filesystem, local".into(),
            CountedStore::Local,
            fs_catalog(local_root, &moto.properties()),
        ),
        (
            format!("filesystem over s3:// (+ {delay_ms} ms)"),
            CountedStore::Remote,
            s3_fs,
        ),
    ];
    // rustberg's own S3 requests go to moto directly (a catalog beside its storage); Petrel's
    // requests to it pass a delay proxy as its S3 requests do.
    let storage = format!(
        r#"[storage.properties]
"s3.endpoint" = "{endpoint}"
"s3.path-style-access" = "true"
"s3.region" = "us-east-1"
"s3.access-key-id" = "env:RUSTBERG_S3_KEY"
"s3.secret-access-key" = "env:RUSTBERG_S3_SECRET"
"#,
        endpoint = moto.endpoint
    );
    let env = [
        ("RUSTBERG_S3_KEY", moto.access_key.as_str()),
        ("RUSTBERG_S3_SECRET", moto.secret_key.as_str()),
    ];
    let server = Rustberg::start_with(
        Some("s3://bench/warehouse"),
        "location_scope = \"warehouse\"",
        &storage,
        &env,
        None,
    );
    let rest_proxy = server
        .as_ref()
        .map(|server| common::moto::DelayProxy::start_at(&server.uri, delay_ms));
    if let Some(rest_proxy) = &rest_proxy {
        let mut config = RestCatalogConfig::new("iceberg", &rest_proxy.endpoint);
        config.token = Some(API_KEY.to_string());
        // Petrel's own S3 settings (the proxy), no vended keys.
        config.vended_credentials = false;
        let stores = StoreRegistry::with_properties(slow).expect("config");
        let rest = RestCatalog::connect(config, stores)
            .await
            .expect("connect to rustberg");
        rest.create_namespace(&db, false).await.expect("namespace");
        rest.register_table(&ident, &metadata_location)
            .await
            .expect("register the S3 table");
        catalogs.push((
            format!("REST (rustberg, + {delay_ms} ms) over s3:// (+ {delay_ms} ms)"),
            CountedStore::Remote,
            Arc::new(rest),
        ));
    }
    // The same catalogs with `table_cache_ms`: no table load per query.
    for c in 0..catalogs.len() {
        let (name, kind, catalog) = catalogs[c].clone();
        catalogs.push((
            format!("{name}, table cache"),
            kind,
            Arc::new(CachingCatalog::new(catalog, Duration::from_secs(3600))),
        ));
    }
    let contexts: Vec<_> = catalogs
        .iter()
        .map(|(_, _, catalog)| session(vec![("iceberg", Arc::clone(catalog))]))
        .collect();
    let point = |ctx: &datafusion::prelude::SessionContext, k: i64| {
        let ctx = ctx.clone();
        async move {
            let sql = format!("SELECT * FROM iceberg.db.t WHERE id = {k}");
            let started = Instant::now();
            let batches = ctx
                .sql(&sql)
                .await
                .expect("sql")
                .collect()
                .await
                .expect("point query");
            let took = started.elapsed();
            let found: usize = batches.iter().map(|b| b.num_rows()).sum();
            assert_eq!(found, 1, "{sql}");
            let shown = arrow::util::pretty::pretty_format_batches(&batches)
                .expect("format")
                .to_string();
            assert!(shown.contains(&format!("payload-{k} ")), "{sql}: {shown}");
            took
        }
    };
    // Warm: each catalog has loaded the table, planned and read a file before.
    for ctx in &contexts {
        for k in [0, rows / 2, rows - 1] {
            point(ctx, k).await;
        }
    }
    const QUERIES: i64 = 50;
    let mut times = vec![Vec::new(); contexts.len()];
    let mut requests = vec![Vec::new(); contexts.len()];
    for i in 0..QUERIES {
        let k = (i * 7919 + 13) % rows;
        for (c, ctx) in contexts.iter().enumerate() {
            let before = object_store_requests(catalogs[c].1);
            times[c].push(point(ctx, k).await);
            requests[c].push(object_store_requests(catalogs[c].1).since(&before).total());
        }
    }
    println!(
        "\nPoint queries, {QUERIES} keys, warm catalogs:\n\n\
         | catalog | p50 ms | p99 ms | object-store requests (median) |"
    );
    println!("|---|---:|---:|---:|");
    for (c, (name, _, _)) in catalogs.iter().enumerate() {
        times[c].sort();
        requests[c].sort();
        println!(
            "| {name} | {:.1} | {:.1} | {} |",
            ms(quantile(&times[c], 0.5)),
            ms(quantile(&times[c], 0.99)),
            quantile(&requests[c], 0.5)
        );
    }
    if server.is_none() {
        println!("\n(REST: skipped, rustberg is not installed; see above)");
    }
}
