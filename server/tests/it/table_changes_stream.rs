//! The live change stream over Flight SQL, against the real `petrel` binary: a client reads
//! `table_changes('iceberg.db.t', <start>, NULL, true, 100)` while another commits INSERTs,
//! DELETEs and UPDATEs; it receives every change exactly once, in commit order, disconnects,
//! resumes from the last snapshot it has whole and misses nothing and repeats nothing; then
//! CancelFlightInfo ends the stream. The reference is the model of the statements (which rows
//! each one inserts and deletes) and the bounded `table_changes` of the same range.
//!
//! And a stream started by PollFlightInfo: it runs in the background and never completes, so
//! every poll answers "running" while commits arrive; CancelFlightInfo ends it. An open stream
//! holds its work slot (`server/src/admission.rs`) for as long as it is open, and gives it back
//! when its client disconnects without a cancel. Named arguments (`stream => true`) are refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int32Type, Int64Type};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
use arrow_flight::{
    Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor,
    FlightInfo, PollInfo,
};
use futures::StreamExt;
use prost::Message;
use tonic::transport::Channel;

use crate::common::{self, Petrel};

/// One change as the model and the client see it: (id, v, change type).
type Change = (i64, String, String);

/// The changes in `batch` with their snapshot ids.
fn changes(batch: &RecordBatch) -> Vec<(i64, Change)> {
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let v = batch.column(1).as_string::<i32>();
    let kind = batch.column(2).as_string::<i32>();
    let _ordinal = batch.column(3).as_primitive::<Int32Type>();
    let snapshot = batch.column(4).as_primitive::<Int64Type>();
    (0..batch.num_rows())
        .map(|i| {
            (
                snapshot.value(i),
                (
                    ids.value(i),
                    if v.is_null(i) {
                        String::new()
                    } else {
                        v.value(i).to_string()
                    },
                    kind.value(i).to_string(),
                ),
            )
        })
        .collect()
}

async fn run(client: &mut FlightSqlServiceClient<Channel>, sql: &str) {
    common::query(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The statements the writer commits, each one snapshot, with the changes each makes.
fn writes() -> Vec<(String, Vec<Change>)> {
    let mut out = Vec::new();
    let change = |id: i64, v: &str, kind: &str| (id, v.to_string(), kind.to_string());
    for i in 1..=8i64 {
        out.push((
            format!(
                "INSERT INTO iceberg.db.t VALUES ({}, 'a{i}'), ({}, 'b{i}')",
                i * 10,
                i * 10 + 1
            ),
            vec![
                change(i * 10, &format!("a{i}"), "INSERT"),
                change(i * 10 + 1, &format!("b{i}"), "INSERT"),
            ],
        ));
        if i % 3 == 0 {
            out.push((
                format!("DELETE FROM iceberg.db.t WHERE id = {}", i * 10),
                vec![change(i * 10, &format!("a{i}"), "DELETE")],
            ));
            out.push((
                format!(
                    "UPDATE iceberg.db.t SET v = 'u{i}' WHERE id = {}",
                    i * 10 + 1
                ),
                vec![
                    change(i * 10 + 1, &format!("b{i}"), "DELETE"),
                    change(i * 10 + 1, &format!("u{i}"), "INSERT"),
                ],
            ));
        }
    }
    out
}

/// Reads `stream` until `until` says stop (given the changes so far, by snapshot in order of
/// arrival); fails after 60 s.
async fn read_until(
    stream: &mut (
             impl futures::Stream<Item = Result<RecordBatch, arrow_flight::error::FlightError>> + Unpin
         ),
    seen: &mut Vec<(i64, Vec<Change>)>,
    until: impl Fn(&[(i64, Vec<Change>)]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !until(seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        let batch = tokio::time::timeout(left, stream.next())
            .await
            .expect("changes arrive in time")
            .expect("the stream stays open")
            .expect("no error");
        for (snapshot, change) in changes(&batch) {
            match seen.last_mut() {
                Some((s, list)) if *s == snapshot => list.push(change),
                _ => seen.push((snapshot, vec![change])),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sees_every_commit_once_in_order_and_resumes() {
    let warehouse = tempfile::TempDir::new().unwrap();
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&["--warehouse", wh, "--default-schema", "db"]);
    let mut writer = server.client().await;
    run(&mut writer, "CREATE SCHEMA iceberg.db").await;
    run(
        &mut writer,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, v STRING) USING iceberg \
         TBLPROPERTIES ('format-version'='2')",
    )
    .await;
    run(&mut writer, "INSERT INTO iceberg.db.t VALUES (0, 'start')").await;
    let first = common::query(
        &mut writer,
        "SELECT max(_commit_snapshot_id) FROM table_changes('iceberg.db.t', NULL)",
    )
    .await
    .unwrap();
    let start = first[0].column(0).as_primitive::<Int64Type>().value(0);

    let stream_sql = |from: i64| {
        format!(
            "SELECT id, v, _change_type, _change_ordinal, _commit_snapshot_id FROM table_changes('iceberg.db.t', {from}, NULL, true, 100)"
        )
    };
    let mut reader = server.client().await;
    let info = reader.execute(stream_sql(start), None).await.unwrap();
    let mut stream = reader
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();

    // The writer commits while the reader reads.
    let plan = writes();
    let statements: Vec<String> = plan.iter().map(|(s, _)| s.clone()).collect();
    let mut writer_task = server.client().await;
    let writing = tokio::spawn(async move {
        for sql in statements {
            run(&mut writer_task, &sql).await;
            tokio::time::sleep(Duration::from_millis(120)).await;
        }
    });

    // Read the first half, then disconnect: keep the snapshots known to be whole (a later one
    // has begun), resume from the last of them.
    let mut seen = Vec::new();
    let half = plan.len() / 2;
    read_until(&mut stream, &mut seen, |s| s.len() > half).await;
    drop(stream);
    drop(reader);
    seen.pop();
    let position = seen.last().map_or(start, |(s, _)| *s);

    let mut reader = server.client().await;
    let info = reader.execute(stream_sql(position), None).await.unwrap();
    let mut stream = reader
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    read_until(&mut stream, &mut seen, |s| s.len() >= plan.len()).await;
    writing.await.unwrap();

    // Exactly the model's changes, one snapshot per statement, in commit order.
    assert_eq!(
        seen.len(),
        plan.len(),
        "one snapshot per statement: {seen:?}"
    );
    for ((snapshot, got), (sql, expected)) in seen.iter().zip(&plan) {
        let (mut got, mut expected) = (got.clone(), expected.clone());
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "snapshot {snapshot}: {sql}");
    }
    let mut distinct: Vec<i64> = seen.iter().map(|(s, _)| *s).collect();
    distinct.dedup();
    assert_eq!(distinct.len(), plan.len(), "no snapshot twice");
    // The bounded feed of the same range: the same snapshots in the same order.
    let bounded = common::query(
        &mut writer,
        &format!("SELECT DISTINCT _change_ordinal, _commit_snapshot_id FROM table_changes('iceberg.db.t', {start}) ORDER BY 1"),
    )
    .await
    .unwrap();
    let order: Vec<i64> = bounded
        .iter()
        .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(order, seen.iter().map(|(s, _)| *s).collect::<Vec<_>>());
    let mut snapshots_of: BTreeMap<i64, usize> = BTreeMap::new();
    for (s, list) in &seen {
        *snapshots_of.entry(*s).or_default() += list.len();
    }
    assert_eq!(snapshots_of.len(), plan.len());

    // CancelFlightInfo ends the open stream: CANCELLED, and the stream ends with it.
    let mut raw = FlightServiceClient::new(server.channel().await);
    let request = CancelFlightInfoRequest { info: Some(info) };
    let mut response = raw
        .do_action(Action {
            r#type: "CancelFlightInfo".into(),
            body: request.encode_to_vec().into(),
        })
        .await
        .unwrap()
        .into_inner();
    let body = response.message().await.unwrap().expect("a result").body;
    let status = CancelFlightInfoResult::decode(body).unwrap().status;
    assert_eq!(status, CancelStatus::Cancelled as i32);
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.next().await {
                None => return None,
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Some(common::to_status(e)),
            }
        }
    })
    .await
    .expect("the stream ends after the cancel");
    assert_eq!(end.map(|s| s.code()), Some(tonic::Code::Cancelled));
}

async fn poll(
    raw: &mut FlightServiceClient<Channel>,
    d: FlightDescriptor,
) -> Result<PollInfo, tonic::Status> {
    raw.poll_flight_info(d).await.map(|r| r.into_inner())
}

async fn cancel(raw: &mut FlightServiceClient<Channel>, info: &FlightInfo) -> i32 {
    let request = CancelFlightInfoRequest {
        info: Some(info.clone()),
    };
    let mut response = raw
        .do_action(Action {
            r#type: "CancelFlightInfo".into(),
            body: request.encode_to_vec().into(),
        })
        .await
        .unwrap()
        .into_inner();
    let body = response.message().await.unwrap().expect("a result").body;
    CancelFlightInfoResult::decode(body).unwrap().status
}

/// PollFlightInfo on a live stream: each poll answers "running" (a retry descriptor, no
/// endpoint), also after commits; CancelFlightInfo with the poll's FlightInfo answers CANCELLED
/// and the next poll answers CANCELLED. Each open stream holds one work slot: with two slots and
/// two polled streams open, a third query waits out the queue timeout and fails
/// RESOURCE_EXHAUSTED; once one stream is cancelled, queries run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_stream_runs_until_cancelled_and_holds_its_slot() {
    let warehouse = tempfile::TempDir::new().unwrap();
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&[
        "--warehouse",
        wh,
        "--default-schema",
        "db",
        "--max-concurrent-queries",
        "2",
        "--queue-timeout-secs",
        "1",
    ]);
    let mut writer = server.client().await;
    run(&mut writer, "CREATE SCHEMA iceberg.db").await;
    run(
        &mut writer,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, v STRING) USING iceberg",
    )
    .await;
    run(&mut writer, "INSERT INTO iceberg.db.t VALUES (0, 'start')").await;
    let stream_sql = "SELECT id FROM table_changes('iceberg.db.t', NULL, NULL, true, 100)";
    let descriptor = FlightDescriptor::new_cmd(
        CommandStatementQuery {
            query: stream_sql.into(),
            transaction_id: None,
        }
        .as_any()
        .encode_to_vec(),
    );

    let mut raw = FlightServiceClient::new(server.channel().await);
    let first = poll(&mut raw, descriptor.clone()).await.unwrap();
    let retry = first
        .flight_descriptor
        .clone()
        .expect("a running stream: a retry descriptor");
    assert!(
        first.info.as_ref().unwrap().endpoint.is_empty(),
        "no endpoint while running"
    );
    for n in 1..=2 {
        run(
            &mut writer,
            &format!("INSERT INTO iceberg.db.t VALUES ({n}, 'more')"),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let again = poll(&mut raw, retry.clone()).await.unwrap();
        assert!(
            again.flight_descriptor.is_some(),
            "still running after commit {n}"
        );
        assert!(again.info.as_ref().unwrap().endpoint.is_empty());
    }

    // A second polled stream takes the other slot: a third query cannot get one.
    let second = poll(&mut raw, descriptor).await.unwrap();
    let started = Instant::now();
    let refused = common::query(&mut writer, "SELECT 1").await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "it waited the queue timeout"
    );

    // Cancelling a stream gives its slot back; its next poll answers CANCELLED.
    let status = cancel(&mut raw, first.info.as_ref().unwrap()).await;
    assert_eq!(status, CancelStatus::Cancelled as i32);
    let after = poll(&mut raw, retry).await.unwrap_err();
    assert_eq!(after.code(), tonic::Code::Cancelled, "{after}");
    let one = common::query(&mut writer, "SELECT 1 AS one").await.unwrap();
    assert_eq!(one[0].column(0).as_primitive::<Int64Type>().value(0), 1);
    let status = cancel(&mut raw, second.info.as_ref().unwrap()).await;
    assert_eq!(status, CancelStatus::Cancelled as i32);
}

/// A live stream whose client goes away (drops the DoGet stream and its connection, no cancel)
/// gives its work slot back: with one slot, a query waits out the 1 s queue timeout while the
/// stream is open, and gets the slot within 5 s of the disconnect; the stream's query is then
/// finished (CancelFlightInfo answers NOT_CANCELLABLE) and logged as dropped by the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnected_stream_releases_its_slot() {
    let warehouse = tempfile::TempDir::new().unwrap();
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&[
        "--warehouse",
        wh,
        "--default-schema",
        "db",
        "--max-concurrent-queries",
        "1",
        "--queue-timeout-secs",
        "1",
    ]);
    let mut writer = server.client().await;
    run(&mut writer, "CREATE SCHEMA iceberg.db").await;
    run(
        &mut writer,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, v STRING) USING iceberg",
    )
    .await;
    run(&mut writer, "INSERT INTO iceberg.db.t VALUES (1, 'a')").await;

    // The reader has its own connection; it reads the existing row, then waits for more.
    let stream_sql = "SELECT id FROM table_changes('iceberg.db.t', NULL, NULL, true, 100)";
    let mut reader = server.client().await;
    let info = reader.execute(stream_sql.into(), None).await.unwrap();
    let mut stream = reader
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the first change arrives")
        .expect("the stream is open")
        .expect("no error");
    assert_eq!(first.num_rows(), 1);
    assert_eq!(first.column(0).as_primitive::<Int64Type>().value(0), 1);

    // The open stream holds the only slot.
    let refused = common::query(&mut writer, "SELECT 1").await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");

    // The client goes away without a word.
    drop(stream);
    drop(reader);
    let gone = Instant::now();
    let mut attempts = 0;
    let one = loop {
        attempts += 1;
        match common::query(&mut writer, "SELECT 1 AS one").await {
            Ok(batches) => break batches,
            Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                assert!(
                    gone.elapsed() < Duration::from_secs(5),
                    "the slot is still held {:?} after the disconnect ({attempts} attempts)",
                    gone.elapsed()
                );
            }
            Err(e) => panic!("SELECT 1: {e}"),
        }
    };
    let waited = gone.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "slot back after {waited:?}"
    );
    assert_eq!(one[0].column(0).as_primitive::<Int64Type>().value(0), 1);
    println!("slot back {waited:?} after the disconnect ({attempts} attempt(s))");

    // The stream's query is over: nothing to cancel, and the log says the client dropped it.
    let mut raw = FlightServiceClient::new(server.channel().await);
    assert_eq!(
        cancel(&mut raw, &info).await,
        CancelStatus::NotCancellable as i32
    );
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains("table_changes") && l.contains("dropped by the client")),
        "no 'dropped by the client' line for the stream in the log:\n{log}"
    );
    // And a new stream gets the slot (then leaves it by a cancel).
    let mut again = server.client().await;
    let info = again.execute(stream_sql.into(), None).await.unwrap();
    let mut stream = again
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let batch = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the change arrives")
        .expect("the stream is open")
        .expect("no error");
    assert_eq!(batch.num_rows(), 1);
    assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 1);
    assert_eq!(
        cancel(&mut raw, &info).await,
        CancelStatus::Cancelled as i32
    );
}

/// Named arguments to `table_changes` (DataFusion would drop them silently, turning a stream
/// into a bounded feed) are refused with INVALID_ARGUMENT naming the positional form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_table_changes_arguments_are_refused() {
    let warehouse = tempfile::TempDir::new().unwrap();
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&["--warehouse", wh, "--default-schema", "db"]);
    let mut client = server.client().await;
    run(&mut client, "CREATE SCHEMA iceberg.db").await;
    run(
        &mut client,
        "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, v STRING) USING iceberg",
    )
    .await;
    run(&mut client, "INSERT INTO iceberg.db.t VALUES (1, 'a')").await;
    for (sql, shown) in [
        (
            "SELECT * FROM table_changes('iceberg.db.t', NULL, NULL, stream => true)",
            "`stream => …`",
        ),
        (
            "SELECT * FROM table_changes('db.t', NULL, NULL, true, poll_ms => 100)",
            "`poll_ms => …`",
        ),
    ] {
        let started = Instant::now();
        let err = common::query(&mut client, sql).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{sql}: {err}");
        assert_eq!(
            err.message(),
            format!(
                "invalid argument: table_changes takes positional arguments only, not named \
                 ones such as {shown}: write table_changes('ns.t', start, end, true [, \
                 poll_ms]) (end NULL and true for a live stream; poll_ms optional)"
            ),
            "{sql}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{sql}: refused at once"
        );
    }
    // The positional form of the same range, bounded: the one row.
    let rows = common::query(
        &mut client,
        "SELECT id FROM table_changes('iceberg.db.t', NULL, NULL, false)",
    )
    .await
    .unwrap();
    assert_eq!(common::rows(&rows), 1);
}
