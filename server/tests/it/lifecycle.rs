//! The `petrel` binary's lifecycle and guard rails: the embedded default (and its demo table's
//! history), the log line of a failed query, graceful SIGTERM,
//! auth (Basic handshake → bearer token), TLS and mTLS, cancellation, the per-query memory
//! limit, the concurrency limit, and refusing an unauthenticated non-loopback bind.

use crate::common;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::CommandGetPrimaryKeys;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::{Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus};
use common::{Petrel, corpus_warehouse, fetch, query, rows, tls_channel, tls_files, to_status};
use futures::StreamExt;
use prost::Message;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_default_serves_the_demo_table_and_stops_on_sigterm() {
    let server = Petrel::start(&[]);
    assert!(
        server
            .dir
            .path()
            .join("petrel-warehouse/catalog.db")
            .exists()
    );
    let mut client = server.client().await;
    let b = query(
        &mut client,
        "SELECT species FROM seabirds ORDER BY wingspan_cm DESC LIMIT 1",
    )
    .await
    .unwrap();
    assert_eq!(
        b[0].column(0).as_string::<i32>().value(0),
        "Wandering albatross"
    );
    let b = query(&mut client, "SELECT count(*) FROM petrel.demo.seabirds")
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 10);
    // The identifier field is the primary key.
    let info = client
        .get_primary_keys(CommandGetPrimaryKeys {
            catalog: None,
            db_schema: None,
            table: "seabirds".into(),
        })
        .await
        .unwrap();
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(b[0].column(3).as_string::<i32>().value(0), "id");

    let status = server.terminate();
    assert!(status.success(), "{status}");
}

/// The demo table's history (`server/src/demo.rs`): the README's time-travel examples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_table_has_a_history_with_a_tag_and_a_branch() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    let mut count = async |sql: &str| -> i64 {
        let b = query(&mut client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        b[0].column(0).as_primitive::<Int64Type>().value(0)
    };
    assert_eq!(count("SELECT count(*) FROM petrel.demo.seabirds").await, 10);
    assert_eq!(
        count("SELECT count(*) FROM petrel.demo.seabirds FOR VERSION AS OF 'v1'").await,
        4
    );
    assert_eq!(
        count("SELECT count(*) FROM seabirds VERSION AS OF 'audit'").await,
        11
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM petrel.demo.seabirds \
             FOR TIMESTAMP AS OF TIMESTAMP '2026-07-01 00:00:00'"
        )
        .await,
        7
    );
    // Snapshot ids are random: take the second commit's from the table's metadata file.
    let metadata_dir = server
        .dir
        .path()
        .join("petrel-warehouse/demo/seabirds/metadata");
    let files: Vec<_> = std::fs::read_dir(&metadata_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".metadata.json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    let log = metadata["snapshot-log"].as_array().unwrap();
    assert_eq!(log.len(), 3, "main has three commits: {log:?}");
    let second = log[1]["snapshot-id"].as_i64().unwrap();
    assert_eq!(
        count(&format!(
            "SELECT count(*) FROM seabirds FOR VERSION AS OF {second}"
        ))
        .await,
        7
    );
    // The branch's commit is not on main.
    let b = query(
        &mut client,
        "SELECT species FROM seabirds VERSION AS OF 'audit' WHERE id = 11",
    )
    .await
    .unwrap();
    assert_eq!(b[0].column(0).as_string::<i32>().value(0), "Fea's petrel");
    let b = query(&mut client, "SELECT count(*) FROM seabirds WHERE id = 11")
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 0);
}

/// A failed query leaves one `query failed` line with its id, user, gRPC code and message,
/// and never the values bound to its parameters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_queries_are_logged_without_parameter_values() {
    let hash = petrel_server::auth::hash_password("pw").unwrap();
    let user = format!("erin:{hash}");
    let server = Petrel::start(&["--user", &user]);
    let mut client = server.client().await;
    client.handshake("erin", "pw").await.unwrap();

    let e = query(&mut client, "SELECT * FROM no_such_table")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = query(&mut client, "SELEC 1").await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let mut stmt = client
        .prepare("SELECT species FROM seabirds WHERE id = $1".into(), None)
        .await
        .unwrap();
    stmt.set_parameters(
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("0", DataType::Utf8, false)])),
            vec![Arc::new(StringArray::from(vec!["secret-value-42"]))],
        )
        .unwrap(),
    )
    .unwrap();
    let e = to_status(stmt.execute().await.unwrap_err());
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        query(&mut client, "SELECT count(*) FROM seabirds")
            .await
            .is_ok()
    );

    // The log is written as the calls fail; give the last line a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = server.log();
        if log.matches("query failed").count() >= 3 || Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let failed: Vec<&str> = log.lines().filter(|l| l.contains("query failed")).collect();
    assert_eq!(failed.len(), 3, "{log}");
    for line in &failed {
        assert!(line.contains("user=erin"), "{line}");
        assert!(line.contains("query_id="), "{line}");
    }
    assert!(
        failed[0].contains("NotFound") && failed[0].contains("no_such_table"),
        "{}",
        failed[0]
    );
    assert!(failed[1].contains("InvalidArgument"), "{}", failed[1]);
    assert!(
        failed[2].contains("InvalidArgument") && failed[2].contains("$1"),
        "{}",
        failed[2]
    );
    assert!(!log.contains("secret-value-42"), "{log}");
    // The successful query is logged as one too, with its user.
    assert!(
        log.lines()
            .any(|l| l.contains(" query ") && l.contains("outcome") && l.contains("erin")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_basic_handshake_then_bearer() {
    let hash = petrel_server::auth::hash_password("s3cret").unwrap();
    let user = format!("alice:{hash}");
    let server = Petrel::start(&["--user", &user]);

    // No credentials.
    let mut anon = server.client().await;
    let e = query(&mut anon, "SELECT 1").await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e}");
    // Wrong password.
    // (arrow-rs's client wraps the handshake status in an Arrow error.)
    let e = anon
        .handshake("alice", "wrong")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("valid authentication credentials")
            && e.contains("invalid user name or password"),
        "{e}"
    );
    // A forged token.
    anon.set_token("v1.YWxpY2U.99999999999.x.AAAA".into());
    let e = query(&mut anon, "SELECT 1").await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e}");

    let mut client = server.client().await;
    client.handshake("alice", "s3cret").await.unwrap();
    assert!(client.token().is_some());
    let b = query(&mut client, "SELECT count(*) FROM seabirds")
        .await
        .unwrap();
    assert_eq!(rows(&b), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let files = tls_files(dir.path());
    let server = Petrel::start(&[
        "--tls-cert",
        files.server_cert.to_str().unwrap(),
        "--tls-key",
        files.server_key.to_str().unwrap(),
    ]);
    let channel = tls_channel(&server.addr, &files, false).await.unwrap();
    let mut client = FlightSqlServiceClient::new(channel);
    let b = query(&mut client, "SELECT 42 AS answer").await.unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 42);
    // Plain text against a TLS port fails.
    let mut plain = server.client().await;
    assert!(query(&mut plain, "SELECT 1").await.is_err());
    drop(server);

    let mtls = Petrel::start(&[
        "--tls-cert",
        files.server_cert.to_str().unwrap(),
        "--tls-key",
        files.server_key.to_str().unwrap(),
        "--tls-client-ca",
        files.ca.to_str().unwrap(),
    ]);
    let channel = tls_channel(&mtls.addr, &files, true).await.unwrap();
    let mut client = FlightSqlServiceClient::new(channel);
    assert!(query(&mut client, "SELECT 1").await.is_ok());
    // Without a client certificate the handshake is refused.
    let refused = match tls_channel(&mtls.addr, &files, false).await {
        Err(_) => true,
        Ok(ch) => query(&mut FlightSqlServiceClient::new(ch), "SELECT 1")
            .await
            .is_err(),
    };
    assert!(refused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_flight_info_stops_a_running_query() {
    let server = Petrel::start(&["--max-concurrent-queries", "1"]);
    let mut client = server.client().await;
    let info = client
        .execute(
            "SELECT count(*) FROM generate_series(1, 100000000000) a".into(),
            None,
        )
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = client.do_get(ticket).await.unwrap();
    let reader = tokio::spawn(async move { stream.next().await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut raw = FlightServiceClient::new(server.channel().await);
    let req = CancelFlightInfoRequest {
        info: Some(info.clone()),
    };
    let mut resp = raw
        .do_action(Action {
            r#type: "CancelFlightInfo".into(),
            body: req.encode_to_vec().into(),
        })
        .await
        .unwrap()
        .into_inner();
    let result =
        CancelFlightInfoResult::decode(resp.message().await.unwrap().unwrap().body).unwrap();
    assert_eq!(result.status, CancelStatus::Cancelled as i32);

    let started = Instant::now();
    let first = tokio::time::timeout(Duration::from_secs(20), reader)
        .await
        .expect("the stream ends soon after the cancel")
        .unwrap();
    let err = to_status(first.expect("an item").expect_err("cancelled"));
    assert_eq!(err.code(), Code::Cancelled, "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));

    // The slot is free again (max 1 concurrent query) and the ticket stays cancelled.
    let b = query(&mut client, "SELECT 1").await.unwrap();
    assert_eq!(rows(&b), 1);
    let e = fetch(&mut client, &info).await.unwrap_err();
    assert_eq!(e.code(), Code::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stream_releases_the_query() {
    let server = Petrel::start(&["--max-concurrent-queries", "1", "--queue-timeout-secs", "5"]);
    let mut client = server.client().await;
    let info = client
        .execute(
            "SELECT * FROM generate_series(1, 100000000000)".into(),
            None,
        )
        .await
        .unwrap();
    let mut s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert!(s.next().await.unwrap().unwrap().num_rows() > 0);
    drop(s);
    // The single execution slot must come back quickly.
    let b = query(&mut client, "SELECT 1").await.unwrap();
    assert_eq!(rows(&b), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_fails_the_query_not_the_server() {
    let wh = corpus_warehouse();
    let server = Petrel::start(&[
        "--warehouse",
        wh.to_str().unwrap(),
        "--query-memory-limit",
        "2MiB",
    ]);
    let mut client = server.client().await;
    let e = query(
        &mut client,
        "SELECT a.name, b.name FROM pyiceberg_cow a JOIN pyiceberg_cow b ON a.id % 3 = b.id % 3 ORDER BY 1, 2",
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    let b = query(&mut client, "SELECT count(*) FROM pyiceberg_cow")
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 2910);
}

/// The per-query limit holds for writes too: an INSERT and a CREATE TABLE AS (a statement
/// Petrel runs itself, in the session that planned it) whose join needs more than the limit
/// fail with RESOURCE_EXHAUSTED and write nothing. (Each statement's pool is attached when it
/// executes, not to the session state that plans it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_holds_for_inserts_and_create_table_as() {
    let server = Petrel::start(&["--query-memory-limit", "2MiB"]);
    let mut client = server.client().await;
    let join =
        "SELECT a.value AS v FROM range(1000000) a JOIN range(1000000) b ON a.value = b.value";
    client
        .execute_update("CREATE TABLE petrel.demo.sink (v BIGINT)".into(), None)
        .await
        .unwrap();
    let e = to_status(
        client
            .execute_update(format!("INSERT INTO petrel.demo.sink {join}"), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    let e = to_status(
        client
            .execute_update(format!("CREATE TABLE petrel.demo.copied AS {join}"), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    let b = query(&mut client, "SELECT count(*) FROM petrel.demo.sink")
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 0);
    // Under the limit, the same statements run.
    let small = "SELECT a.value AS v FROM range(1000) a JOIN range(1000) b ON a.value = b.value";
    let n = client
        .execute_update(format!("INSERT INTO petrel.demo.sink {small}"), None)
        .await
        .unwrap();
    assert_eq!(n, 1000);
}

#[test]
fn refuses_unauthenticated_non_loopback_bind() {
    let out = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["serve", "--bind", "0.0.0.0:0"])
        .current_dir(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without authentication"), "{err}");
}

#[test]
fn hash_password_prints_a_phc_string() {
    let out = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["hash-password", "--password", "pw"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("$argon2id$"));
}
