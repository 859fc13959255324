//! The statement cache against the real binary: a query text run again is answered from its
//! kept optimized plan (counted by `petrel_cache_*{cache="statement"}`) with exactly the rows a
//! fresh plan reads, and never where the answer could differ:
//!
//! - the prepared-statement flow ADBC uses (a handle executed twice included) and the plain
//!   statement flow share the kept plan;
//! - the same text under another session schema reads its own table;
//! - a commit by another server process is seen by the next run (the kept plan is dropped and
//!   replanned), as is a dropped and recreated table;
//! - `now()`, time travel, metadata tables, table functions and `EXPLAIN` are never kept.

use crate::common;

use std::time::Duration;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampNanosecondType};
use arrow_flight::sql::client::FlightSqlServiceClient;
use common::{Petrel, fetch, metrics_addr, query, scrape, to_status, value};
use tonic::transport::Channel;

const COUNT_SUM: &str = "SELECT count(*), sum(k) FROM t";

/// The statement cache's series: (hits, misses, entries).
fn statement_cache(addr: &str) -> (f64, f64, f64) {
    let text = scrape(addr);
    let series = |name: &str| {
        value(
            &text,
            &format!("{name}{{cache=\"statement\",catalog=\"\"}}"),
        )
    };
    (
        series("petrel_cache_hits_total"),
        series("petrel_cache_misses_total"),
        series("petrel_cache_entries"),
    )
}

/// Runs `sql` as ADBC does (CreatePreparedStatement, GetFlightInfo of the handle, DoGet,
/// ClosePreparedStatement).
async fn prepared(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, tonic::Status> {
    let mut statement = client.prepare(sql.into(), None).await.map_err(to_status)?;
    let info = statement.execute().await.map_err(to_status)?;
    let batches = fetch(client, &info).await?;
    statement.close().await.map_err(to_status)?;
    Ok(batches)
}

/// The one row of `count(*), sum(k)`.
fn count_sum(batches: &[RecordBatch]) -> (i64, i64) {
    assert_eq!(common::rows(batches), 1, "{batches:?}");
    let b = batches.iter().find(|b| b.num_rows() == 1).expect("a row");
    let sum = b.column(1).as_primitive::<Int64Type>();
    (
        b.column(0).as_primitive::<Int64Type>().value(0),
        if sum.is_null(0) { 0 } else { sum.value(0) },
    )
}

async fn update(client: &mut FlightSqlServiceClient<Channel>, sql: &str) {
    client
        .execute_update(sql.into(), None)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A client whose session's default schema is `schema` (the session cookie on every call).
async fn client_in_schema(server: &Petrel, schema: &str) -> FlightSqlServiceClient<Channel> {
    let cookie = common::session_cookie(server, "schema", schema).await;
    let mut client = FlightSqlServiceClient::new(server.channel().await);
    client.set_header("cookie", cookie);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_queries_reuse_their_plan_only_while_it_answers_the_same() {
    let dir = tempfile::TempDir::new().unwrap();
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).unwrap();
    let wh = warehouse.to_str().unwrap();
    let server = Petrel::start(&[
        "--warehouse",
        wh,
        "--default-schema",
        "a",
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    let metrics = metrics_addr(&server);
    let mut client = server.client().await;
    for sql in [
        "CREATE SCHEMA iceberg.a",
        "CREATE SCHEMA iceberg.b",
        "CREATE TABLE iceberg.a.t (k BIGINT)",
        "CREATE TABLE iceberg.b.t (k BIGINT)",
        "INSERT INTO iceberg.a.t VALUES (1), (2), (3)",
        "INSERT INTO iceberg.b.t VALUES (7)",
    ] {
        update(&mut client, sql).await;
    }

    // First run: planned from the text (a miss), its optimized plan kept after it ran.
    let (hits, misses, _) = statement_cache(&metrics);
    let rows = prepared(&mut client, COUNT_SUM).await.unwrap();
    assert_eq!(count_sum(&rows), (3, 6));
    let after_first = statement_cache(&metrics);
    assert_eq!(after_first, (hits, misses + 1.0, 1.0), "a miss, then kept");
    // Again, prepared (ADBC's way) and as a plain statement: both take the kept plan.
    assert_eq!(
        count_sum(&prepared(&mut client, COUNT_SUM).await.unwrap()),
        (3, 6)
    );
    assert_eq!(
        count_sum(&query(&mut client, COUNT_SUM).await.unwrap()),
        (3, 6)
    );
    assert_eq!(
        statement_cache(&metrics),
        (hits + 2.0, misses + 1.0, 1.0),
        "two hits"
    );
    // One handle executed twice (an ADBC cursor running the same text again): its second
    // execution plans again, and takes the kept plan too.
    let mut handle = client.prepare(COUNT_SUM.into(), None).await.unwrap();
    for _ in 0..2 {
        let info = handle.execute().await.unwrap();
        assert_eq!(count_sum(&fetch(&mut client, &info).await.unwrap()), (3, 6));
    }
    handle.close().await.unwrap();
    assert_eq!(
        statement_cache(&metrics),
        (hits + 4.0, misses + 1.0, 1.0),
        "CreatePreparedStatement's and the second execution's"
    );

    // The same text under another default schema reads that schema's table.
    let mut in_b = client_in_schema(&server, "b").await;
    assert_eq!(
        count_sum(&prepared(&mut in_b, COUNT_SUM).await.unwrap()),
        (1, 7)
    );
    assert_eq!(
        count_sum(&prepared(&mut in_b, COUNT_SUM).await.unwrap()),
        (1, 7)
    );
    assert_eq!(
        statement_cache(&metrics),
        (hits + 5.0, misses + 2.0, 2.0),
        "one plan per session schema"
    );

    // Another server process commits to a.t: the next run reads the new row.
    let other = Petrel::start(&["--warehouse", wh, "--default-schema", "a"]);
    update(&mut other.client().await, "INSERT INTO a.t VALUES (10)").await;
    drop(other);
    assert_eq!(
        count_sum(&prepared(&mut client, COUNT_SUM).await.unwrap()),
        (4, 16),
        "the other process's commit is read"
    );
    assert_eq!(
        count_sum(&query(&mut client, COUNT_SUM).await.unwrap()),
        (4, 16)
    );
    // And this server's own commits, on every path.
    update(&mut client, "INSERT INTO a.t VALUES (100)").await;
    assert_eq!(
        count_sum(&query(&mut client, COUNT_SUM).await.unwrap()),
        (5, 116)
    );
    assert_eq!(
        count_sum(&prepared(&mut client, COUNT_SUM).await.unwrap()),
        (5, 116)
    );
    assert_eq!(
        statement_cache(&metrics).2,
        2.0,
        "the stale plan was replaced"
    );

    // A dropped table is not found, however its query was kept; recreated, it is read anew.
    update(&mut client, "DROP TABLE iceberg.b.t").await;
    let gone = prepared(&mut in_b, COUNT_SUM).await.unwrap_err();
    assert!(
        gone.message().contains("t") && gone.message().contains("not found"),
        "{gone}"
    );
    assert_eq!(
        statement_cache(&metrics).2,
        1.0,
        "the dropped table's plan is gone"
    );
    update(&mut client, "CREATE TABLE iceberg.b.t (k BIGINT)").await;
    assert_eq!(
        count_sum(&prepared(&mut in_b, COUNT_SUM).await.unwrap()),
        (0, 0)
    );
    update(&mut client, "INSERT INTO iceberg.b.t VALUES (5), (6)").await;
    assert_eq!(
        count_sum(&prepared(&mut in_b, COUNT_SUM).await.unwrap()),
        (2, 11)
    );

    // Never kept: a stable function (folded by the optimizer), time travel, a metadata table,
    // a table function, EXPLAIN.
    let entries = statement_cache(&metrics).2;
    let now = |b: &[RecordBatch]| {
        b[0].column(0)
            .as_primitive::<TimestampNanosecondType>()
            .value(0)
    };
    let first = now(&prepared(&mut client, "SELECT now()").await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = now(&prepared(&mut client, "SELECT now()").await.unwrap());
    assert!(
        second > first,
        "now() is evaluated per run: {first} then {second}"
    );
    let snapshots = query(
        &mut client,
        "SELECT snapshot_id FROM iceberg.a.t.snapshots ORDER BY committed_at",
    )
    .await
    .unwrap();
    let first_snapshot = snapshots[0].column(0).as_primitive::<Int64Type>().value(0);
    let travel = format!("SELECT count(*), sum(k) FROM t FOR VERSION AS OF {first_snapshot}");
    for _ in 0..2 {
        assert_eq!(
            count_sum(&prepared(&mut client, &travel).await.unwrap()),
            (3, 6)
        );
    }
    for sql in [
        "SELECT count(*) FROM iceberg.a.t.snapshots",
        "SELECT count(*) FROM generate_series(1, 5)",
        "EXPLAIN SELECT count(*) FROM t",
    ] {
        for _ in 0..2 {
            assert!(
                common::rows(&prepared(&mut client, sql).await.unwrap()) > 0,
                "{sql}"
            );
        }
    }
    assert_eq!(
        statement_cache(&metrics).2,
        entries,
        "none of these was kept"
    );
}
