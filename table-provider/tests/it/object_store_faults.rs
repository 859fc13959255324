//! An S3 server that drops connections, cuts responses and stalls (issue #12: "makes queries
//! slower or fail with a clear error, never return wrong rows"): moto behind
//! `scripts/delay-proxy.py` in fault mode (seeded; see the script's header), Petrel's stores
//! with 3 s request / 1 s connect timeouts (`aws_timeout`, `aws_connect_timeout` among the
//! catalog's storage properties).
//!
//! - Reads: a partitioned format-2 table with known rows (three INSERTs, a merge-on-read
//!   DELETE) answers seven queries (count, sums, GROUP BY, a filter, a pruned partition, time
//!   travel to before the DELETE, every row) many times, each with a fresh catalog (cold
//!   caches), through a mildly faulty proxy and a harsh one. Each answer is exactly the model's
//!   rows or an error naming the store (the bucket or the endpoint); none takes longer than
//!   [`HANG_BOUND`].
//! - Commits: INSERTs through a faulty proxy (every method, PUTs of the metadata file
//!   included) each commit once or fail; afterwards a clean catalog reads exactly the rows of
//!   the INSERTs that reported success (an unknown outcome may be either), each once, one
//!   snapshot per commit.
//!
//! The outcome counts and the proxy's fault counts are printed; faults must have happened.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::moto::{Moto, venv};
use common::{query, rows_json, run_ddl, session, write_count};
use futures::StreamExt;
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, TableIdent};
use serde_json::{Value, json};

const BUCKET: &str = "faults";
/// A query or commit taking longer than this is a hang (a request may take 3 s and is tried 4
/// times; a query makes a few rounds of requests one after the other).
const HANG_BOUND: Duration = Duration::from_secs(60);

/// `scripts/delay-proxy.py` in fault mode in front of a moto server.
struct FaultProxy {
    child: Child,
    /// `http://127.0.0.1:PORT` of the proxy.
    endpoint: String,
    stats: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl FaultProxy {
    /// Starts the proxy for `moto` with fault options `faults` (no delay).
    fn start(moto: &Moto, faults: &[&str]) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/delay-proxy.py");
        let target = moto.endpoint.rsplit(':').next().expect("port").to_string();
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let dir = tempfile::tempdir().expect("tempdir");
        let stats = dir.path().join("stats.json");
        let mut child = Command::new(venv().join("bin/python"))
            .arg(script)
            .args([port.to_string(), target, "0".into()])
            .args(faults)
            .arg("--stats")
            .arg(&stats)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn fault proxy");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!("fault proxy exited with {status}");
            }
            assert!(Instant::now() < deadline, "fault proxy did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            stats: stats.clone(),
            _dir: dir,
        }
    }

    /// The proxy's counts so far (`requests`, `passed`, `drop`, `cut`, `stall`, `stall_body`,
    /// `by_method`).
    fn stats(&self) -> Value {
        std::fs::read(&self.stats)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| json!({"requests": 0}))
    }

    /// How many faults of every kind it made.
    fn faults(&self) -> u64 {
        let stats = self.stats();
        ["drop", "cut", "stall", "stall_body"]
            .iter()
            .map(|k| stats[k].as_u64().unwrap_or(0))
            .sum()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Storage properties reaching moto through `proxy`, with short timeouts.
fn through(moto: &Moto, proxy: &FaultProxy) -> HashMap<String, String> {
    let mut properties = moto.properties();
    properties.insert("s3.endpoint".into(), proxy.endpoint.clone());
    properties.insert("aws_timeout".into(), "3s".into());
    properties.insert("aws_connect_timeout".into(), "1s".into());
    properties
}

/// A fresh filesystem catalog over the bucket's warehouse (its own caches).
fn catalog(properties: &HashMap<String, String>) -> Arc<dyn Catalog> {
    let stores = StoreRegistry::with_properties(properties).expect("store config");
    Arc::new(
        FileSystemCatalog::with_stores(&format!("s3://{BUCKET}/warehouse"), stores)
            .expect("catalog over s3"),
    )
}

/// How one run of a query or a commit ended.
#[derive(Debug, Default)]
struct Outcomes {
    ok: usize,
    /// Errors naming the store: (what ran, the message).
    clean_errors: Vec<(String, String)>,
    /// Errors that do not say which store failed.
    unclear_errors: Vec<(String, String)>,
    /// Answers other than the model's: (what ran, got, expected).
    wrong: Vec<(String, String, String)>,
    /// Runs that took longer than [`HANG_BOUND`].
    hangs: Vec<String>,
    slowest: Duration,
}

impl Outcomes {
    fn summary(&self) -> String {
        format!(
            "ok {}, clean errors {}, unclear errors {}, wrong answers {}, hangs {}, slowest {:.1} s",
            self.ok,
            self.clean_errors.len(),
            self.unclear_errors.len(),
            self.wrong.len(),
            self.hangs.len(),
            self.slowest.as_secs_f64()
        )
    }

    /// Asserts no wrong answer, no hang and no error that hides the store.
    fn assert_sound(&self, phase: &str) {
        assert!(
            self.wrong.is_empty(),
            "{phase}: wrong answers: {:#?}",
            self.wrong
        );
        assert!(self.hangs.is_empty(), "{phase}: hangs: {:?}", self.hangs);
        assert!(
            self.unclear_errors.is_empty(),
            "{phase}: errors not naming the store: {:#?}",
            self.unclear_errors
        );
    }
}

/// Whether an error message names the store: the bucket's URL or the endpoint.
fn names_store(message: &str, endpoint: &str) -> bool {
    message.contains(&format!("s3://{BUCKET}")) || message.contains(endpoint)
}

/// The table's rows: (id, part, v) for every id of 0..600 but multiples of 7 (deleted).
fn model() -> Vec<(i64, i32, String)> {
    (0..600)
        .filter(|id| id % 7 != 0)
        .map(|id| (id, (id % 3) as i32, format!("v{id}")))
        .collect()
}

/// The queries and their answers, computed from the model.
fn cases(before_delete: i64) -> Vec<(&'static str, String, Vec<Value>)> {
    let rows = model();
    let t = "iceberg.db.t";
    let sum = |rows: &[(i64, i32, String)]| rows.iter().map(|r| r.0).sum::<i64>();
    let groups: Vec<Value> = (0..3)
        .map(|p| {
            let of: Vec<_> = rows.iter().filter(|r| r.1 == p).cloned().collect();
            json!([p, of.len(), sum(&of)])
        })
        .collect();
    let part1: Vec<_> = rows.iter().filter(|r| r.1 == 1).cloned().collect();
    vec![
        (
            "count",
            format!("SELECT count(*) FROM {t}"),
            vec![json!([rows.len()])],
        ),
        (
            "sum/min/max",
            format!("SELECT sum(id), min(id), max(id) FROM {t}"),
            vec![json!([sum(&rows), 1, 599])],
        ),
        (
            "group by",
            format!("SELECT part, count(*), sum(id) FROM {t} GROUP BY part ORDER BY part"),
            groups,
        ),
        (
            "filter",
            format!("SELECT id, v FROM {t} WHERE id BETWEEN 100 AND 130 ORDER BY id"),
            rows.iter()
                .filter(|r| (100..=130).contains(&r.0))
                .map(|r| json!([r.0, r.2]))
                .collect(),
        ),
        (
            "partition",
            format!("SELECT count(*), sum(id) FROM {t} WHERE part = 1"),
            vec![json!([part1.len(), sum(&part1)])],
        ),
        (
            "time travel",
            format!("SELECT count(*), sum(id) FROM {t} VERSION AS OF {before_delete}"),
            vec![json!([600, (0..600).sum::<i64>()])],
        ),
        (
            "every row",
            format!("SELECT id, part, v FROM {t} ORDER BY id"),
            rows.iter().map(|r| json!([r.0, r.1, r.2])).collect(),
        ),
    ]
}

/// Runs every case `rounds` times through `properties` (four at a time, each with a fresh
/// catalog) and sorts the outcomes.
async fn run_queries(
    properties: &HashMap<String, String>,
    endpoint: &str,
    cases: &[(&'static str, String, Vec<Value>)],
    rounds: usize,
) -> Outcomes {
    let runs: Vec<_> = (0..rounds)
        .flat_map(|round| cases.iter().map(move |case| (round, case)))
        .collect();
    let results: Vec<_> = futures::stream::iter(runs)
        .map(|(round, (name, sql, expected))| async move {
            let ctx = session(vec![("iceberg", catalog(properties))]);
            let started = Instant::now();
            let result = tokio::time::timeout(HANG_BOUND, query(&ctx, sql)).await;
            (
                format!("{name} (round {round})"),
                expected,
                result,
                started.elapsed(),
            )
        })
        .buffer_unordered(4)
        .collect()
        .await;
    let mut outcomes = Outcomes::default();
    for (what, expected, result, took) in results {
        outcomes.slowest = outcomes.slowest.max(took);
        match result {
            Err(_) => outcomes.hangs.push(what),
            Ok(Ok(batches)) => {
                let got: Vec<Value> = rows_json(&batches, &[])
                    .into_iter()
                    .map(Value::Array)
                    .collect();
                if &got == expected {
                    outcomes.ok += 1;
                } else {
                    let show = |rows: &[Value]| {
                        let text = Value::Array(rows.to_vec()).to_string();
                        text.chars().take(300).collect::<String>()
                    };
                    outcomes.wrong.push((what, show(&got), show(expected)));
                }
            }
            Ok(Err(e)) => {
                let message = e.to_string();
                if names_store(&message, endpoint) {
                    outcomes.clean_errors.push((what, message));
                } else {
                    outcomes.unclear_errors.push((what, message));
                }
            }
        }
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faulty_s3_gives_right_rows_or_clear_errors() {
    let started = Instant::now();
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let clean = moto.properties();
    let setup = catalog(&clean);
    setup
        .create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("namespace");
    let ctx = session(vec![("iceberg", Arc::clone(&setup))]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, part INT, v STRING) \
         PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2', \
         'write.delete.mode'='merge-on-read')",
    )
    .await;
    for chunk in 0..3 {
        let values: Vec<String> = (chunk * 200..(chunk + 1) * 200)
            .map(|id| format!("({id}, {}, 'v{id}')", id % 3))
            .collect();
        let sql = format!("INSERT INTO iceberg.db.t VALUES {}", values.join(", "));
        assert_eq!(write_count(&ctx, &sql).await, 200);
    }
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "t");
    let before_delete = setup
        .load_table(&ident)
        .await
        .expect("load")
        .metadata()
        .current_snapshot_id()
        .expect("a snapshot");
    assert_eq!(
        write_count(&ctx, "DELETE FROM iceberg.db.t WHERE id % 7 = 0").await,
        86
    );
    let cases = cases(before_delete);
    // The answers hold without faults.
    let baseline = run_queries(&clean, &moto.endpoint, &cases, 1).await;
    assert_eq!(baseline.ok, cases.len(), "{baseline:#?}");
    eprintln!("setup: {:.1} s", started.elapsed().as_secs_f64());

    // Reads: mild faults (most queries succeed through retries), then harsh ones (many fail).
    let mild = FaultProxy::start(
        &moto,
        &[
            "--seed",
            "1",
            "--drop",
            "0.05",
            "--cut",
            "0.05",
            "--stall",
            "0.005",
            "--stall-body",
            "0.005",
            "--stall-ms",
            "4000",
        ],
    );
    let phase = Instant::now();
    let outcomes = run_queries(&through(&moto, &mild), &mild.endpoint, &cases, 4).await;
    eprintln!(
        "reads, mild faults: {} in {:.1} s; proxy: {}",
        outcomes.summary(),
        phase.elapsed().as_secs_f64(),
        mild.stats()
    );
    for (what, message) in outcomes.clean_errors.iter().take(3) {
        eprintln!("  e.g. {what}: {message}");
    }
    outcomes.assert_sound("mild faults");
    assert!(outcomes.ok > 0, "some queries succeed through the retries");
    assert!(mild.faults() > 0, "the proxy made faults: {}", mild.stats());

    let harsh = FaultProxy::start(
        &moto,
        &[
            "--seed",
            "2",
            "--drop",
            "0.2",
            "--cut",
            "0.15",
            "--stall",
            "0.01",
            "--stall-ms",
            "4000",
        ],
    );
    let phase = Instant::now();
    let outcomes = run_queries(&through(&moto, &harsh), &harsh.endpoint, &cases, 2).await;
    eprintln!(
        "reads, harsh faults: {} in {:.1} s; proxy: {}",
        outcomes.summary(),
        phase.elapsed().as_secs_f64(),
        harsh.stats()
    );
    for (what, message) in outcomes.clean_errors.iter().take(3) {
        eprintln!("  e.g. {what}: {message}");
    }
    outcomes.assert_sound("harsh faults");
    assert!(
        !outcomes.clean_errors.is_empty(),
        "harsh faults fail some queries: {}",
        outcomes.summary()
    );

    // Commits through faults on every method.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.c (k INT, note STRING) TBLPROPERTIES ('format-version'='2')",
    )
    .await;
    let writes = FaultProxy::start(
        &moto,
        &[
            "--seed",
            "3",
            "--drop",
            "0.08",
            "--cut",
            "0.08",
            "--stall",
            "0.02",
            "--stall-ms",
            "4000",
        ],
    );
    let faulty = through(&moto, &writes);
    let phase = Instant::now();
    let mut commits = Outcomes::default();
    let mut committed = Vec::new();
    let mut unknown = Vec::new();
    for k in 0..12 {
        let ctx = session(vec![("iceberg", catalog(&faulty))]);
        let sql = format!("INSERT INTO iceberg.db.c VALUES ({k}, 'k{k}')");
        let begun = Instant::now();
        let result = tokio::time::timeout(HANG_BOUND, query(&ctx, &sql)).await;
        commits.slowest = commits.slowest.max(begun.elapsed());
        match result {
            Err(_) => commits.hangs.push(sql),
            Ok(Ok(batches)) => {
                let count = batches[0]
                    .column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::UInt64Array>()
                    .map(|c| c.value(0));
                assert_eq!(count, Some(1), "{sql}");
                commits.ok += 1;
                committed.push(k);
            }
            Ok(Err(e)) => {
                let message = e.to_string();
                if message.contains("commit state unknown") {
                    unknown.push(k);
                }
                if names_store(&message, &writes.endpoint) {
                    commits.clean_errors.push((sql, message));
                } else {
                    commits.unclear_errors.push((sql, message));
                }
            }
        }
    }
    eprintln!(
        "commits: {} ({} of unknown outcome) in {:.1} s; proxy: {}",
        commits.summary(),
        unknown.len(),
        phase.elapsed().as_secs_f64(),
        writes.stats()
    );
    for (what, message) in commits.clean_errors.iter().take(3) {
        eprintln!("  e.g. {what}: {message}");
    }
    commits.assert_sound("commits");
    assert!(commits.ok > 0, "some commits succeed through the faults");
    let put_faults = writes.stats()["by_method"]["PUT"].clone();
    assert!(
        put_faults.as_object().is_some_and(|f| !f.is_empty()),
        "the proxy broke some PUTs of the commits: {}",
        writes.stats()
    );
    let dropped: u64 = [&mild, &harsh, &writes]
        .iter()
        .map(|p| p.stats()["drop"].as_u64().unwrap_or(0))
        .sum();
    assert!(dropped > 0, "some requests were dropped");

    // Read back through a clean catalog: each reported commit once, nothing else (an unknown
    // outcome may have landed, once).
    let reader = catalog(&clean);
    let ctx = session(vec![("iceberg", Arc::clone(&reader))]);
    let batches = query(&ctx, "SELECT k, note FROM iceberg.db.c ORDER BY k")
        .await
        .expect("clean read");
    let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
    for row in rows_json(&batches, &[]) {
        let k = row[0].as_i64().expect("k");
        assert_eq!(row[1], json!(format!("k{k}")), "row {row:?}");
        *seen.entry(k).or_default() += 1;
    }
    let landed: Vec<i64> = seen.keys().copied().collect();
    assert!(
        seen.values().all(|n| *n == 1),
        "a commit applied twice: {seen:?}"
    );
    let extra: Vec<i64> = landed
        .iter()
        .filter(|k| !committed.contains(k) && !unknown.contains(k))
        .copied()
        .collect();
    let lost: Vec<i64> = committed
        .iter()
        .filter(|k| !seen.contains_key(k))
        .copied()
        .collect();
    assert!(
        extra.is_empty() && lost.is_empty(),
        "rows of failed commits {extra:?}, lost rows of committed ones {lost:?} \
         (committed {committed:?}, unknown {unknown:?}, read {landed:?})"
    );
    let table = reader
        .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), "c"))
        .await
        .expect("load c");
    assert_eq!(
        table.metadata().snapshots().count(),
        landed.len(),
        "one snapshot per landed commit"
    );
    eprintln!(
        "fault test: {:.1} s in all",
        started.elapsed().as_secs_f64()
    );
}
