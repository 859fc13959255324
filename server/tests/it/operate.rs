//! Operating the server, against the real binary (`--metrics-addr`, `--log-format json`,
//! `--slow-query-ms 0`, one user):
//!
//! - the gRPC health service answers SERVING for the server and for the Flight service;
//! - the Prometheus endpoint's counters move by exactly what each query did: queries by
//!   status and error code, rows and Flight bytes streamed (summed from the FlightData the
//!   client received), planning and execution histograms, the Iceberg scan's data files total /
//!   pruned / scanned against the demo table's known files, and on a merge-on-read table the
//!   position delete file applied, then taken from the delete cache (cache hits and misses);
//! - the JSON log has a `query` line and a `slow query` line (inside the query's span) with the
//!   query id and the scan's Iceberg metrics;
//! - a bad-password call is logged as `authentication failed` by user name, and no log line
//!   holds the password, the `authorization` header, or the bearer token;
//! - on SIGTERM a health watcher is told NOT_SERVING, and the server exits cleanly.

use crate::common;

use std::time::Duration;

use arrow::array::{Array, Int64Array};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::{FlightData, HandshakeRequest};
use base64::Engine;
use common::{Petrel, metrics_addr, scrape, value};
use futures::TryStreamExt;
use tonic::Request;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const PASSWORD: &str = "correct-horse-7f3a9";
const WRONG: &str = "wrong-guess-91c2e";

/// How much each series moved between two scrapes.
struct Delta<'a> {
    before: &'a str,
    after: &'a str,
}

impl Delta<'_> {
    fn of(&self, series: &str) -> f64 {
        value(self.after, series) - value(self.before, series)
    }

    #[track_caller]
    fn assert(&self, series: &str, expected: f64) {
        assert_eq!(self.of(series), expected, "{series}");
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// GetFlightInfo + DoGet of `sql` through the raw Flight client: the rows of column 0 (as
/// i64) and the Flight bytes received (header + body of every message).
async fn run_counting(
    client: &mut FlightSqlServiceClient<Channel>,
    channel: Channel,
    sql: &str,
) -> (Vec<i64>, u64) {
    let token = client.token().expect("signed in").clone();
    let info = client.execute(sql.to_string(), None).await.expect("plan");
    let ticket = info.endpoint[0].ticket.clone().expect("ticket");
    let mut raw = FlightServiceClient::new(channel);
    let mut request = Request::new(ticket);
    request
        .metadata_mut()
        .insert("authorization", bearer(&token).parse().unwrap());
    let data: Vec<FlightData> = raw
        .do_get(request)
        .await
        .expect("do_get")
        .into_inner()
        .try_collect()
        .await
        .expect("stream");
    let bytes = data
        .iter()
        .map(|d| (d.data_header.len() + d.data_body.len()) as u64)
        .sum();
    let batches = arrow_flight::utils::flight_data_to_batches(&data).expect("decode");
    let mut ids = Vec::new();
    for b in &batches {
        let col = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        ids.extend((0..col.len()).map(|i| col.value(i)));
    }
    (ids, bytes)
}

/// The JSON log lines whose message is `message`.
fn json_lines(log: &str, message: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("every JSON line parses"))
        .filter(|v| v["fields"]["message"] == message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_logs() {
    let hash = petrel_server::auth::hash_password(PASSWORD).unwrap();
    let user = format!("alice:{hash}");
    let server = Petrel::start(&[
        "--user",
        &user,
        "--metrics-addr",
        "127.0.0.1:0",
        "--log-format",
        "json",
        "--slow-query-ms",
        "0",
    ]);
    let addr = metrics_addr(&server);

    // Health: the server and the Flight service are SERVING.
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "arrow.flight.protocol.FlightService"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health check")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "service {service:?}");
    }

    let mut client = server.client().await;
    client.handshake("alice", PASSWORD).await.expect("sign in");
    let token = client.token().expect("a token").clone();

    // A merge-on-read v2 table with one position delete file (writes are queries too: they
    // are counted before the first scrape).
    for sql in [
        "CREATE TABLE ops (id BIGINT, v STRING) TBLPROPERTIES ('format-version'='2', \
         'write.delete.mode'='merge-on-read')",
        "INSERT INTO ops VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "DELETE FROM ops WHERE id = 2",
    ] {
        client.execute_update(sql.into(), None).await.expect(sql);
    }

    // 1. The demo table: three appends of ids 1-4, 5-7 and 8-10, one data file each, in three
    // manifests; `id >= 8` keeps one file by its column metrics.
    let m0 = scrape(&addr);
    let (ids, bytes) = run_counting(
        &mut client,
        server.channel().await,
        "SELECT id, species FROM seabirds WHERE id >= 8",
    )
    .await;
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, vec![8, 9, 10]);
    let m1 = scrape(&addr);
    let d = Delta {
        before: &m0,
        after: &m1,
    };
    d.assert("petrel_queries_total{status=\"ok\"}", 1.0);
    d.assert("petrel_queries_total{status=\"user_error\"}", 0.0);
    d.assert("petrel_queries_total{status=\"server_error\"}", 0.0);
    d.assert("petrel_queries_total{status=\"cancelled\"}", 0.0);
    d.assert("petrel_streamed_rows_total", 3.0);
    d.assert("petrel_streamed_bytes_total", bytes as f64);
    d.assert("petrel_planning_seconds_count{stage=\"sql\"}", 1.0);
    d.assert("petrel_planning_seconds_count{stage=\"physical\"}", 1.0);
    d.assert("petrel_query_execution_seconds_count", 1.0);
    d.assert("petrel_slow_queries_total", 1.0);
    d.assert("petrel_iceberg_scans_total", 1.0);
    d.assert("petrel_iceberg_manifests_total", 3.0);
    d.assert("petrel_iceberg_data_files_total", 3.0);
    d.assert(
        "petrel_iceberg_data_files_pruned_total{by=\"metrics\"}",
        2.0,
    );
    d.assert(
        "petrel_iceberg_data_files_pruned_total{by=\"partition\"}",
        0.0,
    );
    d.assert("petrel_iceberg_data_files_scanned_total", 1.0);
    d.assert("petrel_iceberg_delete_files_planned_total", 0.0);
    assert_eq!(value(&m1, "petrel_work_slots"), 16.0);
    assert_eq!(value(&m1, "petrel_work_slots_available"), 16.0);
    assert!(value(&m1, "petrel_memory_pool_limit_bytes") > 0.0);
    assert_eq!(value(&m1, "petrel_memory_pool_reserved_bytes"), 0.0);
    assert!(value(&m1, "petrel_sessions_active") >= 0.0);
    assert!(
        value(
            &m1,
            "petrel_cache_entries{cache=\"manifest\",catalog=\"petrel\"}"
        ) >= 3.0
    );

    // 2. The merge-on-read table: its delete file is read, then (same query again) taken from
    // the delete cache.
    let delete_cache = "{cache=\"delete_positions\",catalog=\"petrel\"}";
    let mut scrapes = vec![m1];
    for _ in 0..2 {
        let (ids, _) = run_counting(
            &mut client,
            server.channel().await,
            "SELECT id FROM ops ORDER BY id",
        )
        .await;
        assert_eq!(ids, vec![1, 3]);
        scrapes.push(scrape(&addr));
    }
    for (i, pair) in scrapes.windows(2).enumerate() {
        let d = Delta {
            before: &pair[0],
            after: &pair[1],
        };
        let cached = i as f64; // the first read misses, the second hits
        d.assert("petrel_queries_total{status=\"ok\"}", 1.0);
        d.assert("petrel_streamed_rows_total", 2.0);
        d.assert("petrel_iceberg_delete_files_planned_total", 1.0);
        d.assert(
            "petrel_iceberg_delete_files_applied_total{kind=\"position\"}",
            1.0,
        );
        d.assert(
            "petrel_iceberg_delete_files_applied_total{kind=\"equality\"}",
            0.0,
        );
        d.assert("petrel_iceberg_rows_deleted_total", 1.0);
        d.assert("petrel_iceberg_delete_files_from_cache_total", cached);
        d.assert(&format!("petrel_cache_hits_total{delete_cache}"), cached);
        d.assert(
            &format!("petrel_cache_misses_total{delete_cache}"),
            1.0 - cached,
        );
    }

    // 2b. A whole scan of the plain table: its three files are read, read again (and kept),
    // then (same query a third time) their columns come from the decoded-column cache. The
    // file of ids 8-10 was read before (by step 1's filtered scan): it is kept by the first
    // run and served from the second.
    let column_cache = "{cache=\"column\",catalog=\"\"}";
    let mut scrapes = vec![scrape(&addr)];
    for _ in 0..3 {
        // (No ORDER BY: a sort right above the scan is pushed below IcebergScanExec, onto the
        // Parquet scan itself, and such a scan reads its files as before.)
        let (mut ids, _) = run_counting(
            &mut client,
            server.channel().await,
            "SELECT id FROM seabirds",
        )
        .await;
        ids.sort_unstable();
        assert_eq!(ids, (1..=10).collect::<Vec<i64>>());
        scrapes.push(scrape(&addr));
    }
    for (i, pair) in scrapes.windows(2).enumerate() {
        let d = Delta {
            before: &pair[0],
            after: &pair[1],
        };
        let served = [0.0, 1.0, 3.0][i];
        d.assert(&format!("petrel_cache_hits_total{column_cache}"), served);
        d.assert(
            &format!("petrel_cache_misses_total{column_cache}"),
            3.0 - served,
        );
    }
    // (The merge-on-read table's one file was kept by its second read above.)
    let entries = |scrape| value(scrape, &format!("petrel_cache_entries{column_cache}"));
    assert_eq!(entries(&scrapes[1]), entries(&scrapes[0]) + 1.0);
    assert_eq!(entries(&scrapes[2]), entries(&scrapes[0]) + 3.0);

    // 3. A query naming no table is the user's error, by code.
    let before = scrape(&addr);
    let err = client
        .execute("SELECT * FROM no_such_table".into(), None)
        .await
        .expect_err("unknown table");
    assert!(err.to_string().contains("no_such_table"), "{err}");
    let after = scrape(&addr);
    let d = Delta {
        before: &before,
        after: &after,
    };
    d.assert("petrel_queries_total{status=\"user_error\"}", 1.0);
    d.assert("petrel_queries_total{status=\"ok\"}", 0.0);
    d.assert("petrel_query_errors_total{code=\"NotFound\"}", 1.0);

    // 4. A bad password over Handshake.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("alice:{WRONG}"));
    let mut raw = FlightServiceClient::new(server.channel().await);
    let mut request = Request::new(futures::stream::iter([HandshakeRequest::default()]));
    request
        .metadata_mut()
        .insert("authorization", format!("Basic {basic}").parse().unwrap());
    let refused = raw.handshake(request).await.expect_err("a wrong password");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // The log: JSON lines only (besides the two start-up lines on stderr).
    let log = server.log();
    let queries = json_lines(&log, "query");
    let slow = json_lines(&log, "slow query");
    let demo_query = |v: &&serde_json::Value| {
        v["fields"]["sql"] == "SELECT id, species FROM seabirds WHERE id >= 8"
    };
    let line = queries.iter().find(demo_query).expect("the query line");
    let id = line["fields"]["query_id"].as_str().expect("a query id");
    assert_eq!(id.len(), 32, "{line}");
    assert_eq!(line["fields"]["rows"], 3, "{line}");
    assert_eq!(line["fields"]["user"], "alice", "{line}");
    let s = slow.iter().find(demo_query).expect("the slow-query line");
    assert_eq!(s["fields"]["query_id"], id, "{s}");
    assert_eq!(
        s["span"]["query_id"], id,
        "the line is inside the query's span: {s}"
    );
    assert_eq!(s["fields"]["data_files_total"], 3, "{s}");
    assert_eq!(s["fields"]["data_files_pruned"], 2, "{s}");
    assert_eq!(s["fields"]["data_files_scanned"], 1, "{s}");
    assert_eq!(s["fields"]["manifests_total"], 3, "{s}");
    assert_eq!(s["fields"]["delete_files_applied"], 0, "{s}");
    let snapshots = s["fields"]["snapshots"].as_str().unwrap();
    assert!(snapshots.contains("seabirds@"), "{s}");
    let ops = slow
        .iter()
        .find(|v| v["fields"]["sql"] == "SELECT id FROM ops ORDER BY id")
        .expect("the merge-on-read query's slow line");
    assert_eq!(ops["fields"]["delete_files_applied"], 1, "{ops}");
    assert_eq!(ops["fields"]["delete_files_planned"], 1, "{ops}");
    // Failed sign-in: by user name; nothing secret anywhere in the log.
    let failed = json_lines(&log, "authentication failed");
    assert_eq!(failed.len(), 1, "{log}");
    assert_eq!(failed[0]["fields"]["user"], "alice");
    for secret in [
        WRONG,
        PASSWORD,
        basic.as_str(),
        token.as_str(),
        "Basic ",
        "Bearer ",
    ] {
        assert!(!log.contains(secret), "the log holds {secret:?}:\n{log}");
    }

    // Shutdown: a health watcher sees NOT_SERVING as soon as the signal arrives.
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("status").expect("a status");
    assert_eq!(first.status, ServingStatus::Serving as i32);
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let next = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("a status change within 10 s")
        .expect("status")
        .expect("a status");
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    drop((watch, health, client, raw));
    assert!(server.terminate().success(), "a clean exit");
}
