//! Row-level writes through the real binary with arrow-rs's Flight SQL client, where the
//! protocol matters (the statements themselves are tested in the table provider):
//!
//! - an UPDATE sent on the query path (GetFlightInfo, then DoGet) runs once, in GetFlightInfo:
//!   its ticket answers the count each time it is fetched, and nothing runs again;
//! - a row-level conflict lost to a concurrent commit reaches the client as gRPC ABORTED: two
//!   clients DELETE different rows of the same data file of a merge-on-read table at once
//!   (format 2: file-scoped position deletes; format 3: deletion vectors); exactly one
//!   succeeds, the other fails with the conflict error naming the table, and the table holds
//!   the winner's result, with one snapshot more and no file of the loser left behind.
//!
//! (Prepared UPDATE and MERGE with bound parameters run through the real ADBC driver:
//! `server/tests/python/test_update_merge.py`.)

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use arrow_flight::sql::client::FlightSqlServiceClient;
use common::{Petrel, fetch, query, to_status};
use tonic::Code;
use tonic::transport::Channel;

type Client = FlightSqlServiceClient<Channel>;

async fn run(client: &mut Client, sql: &str) {
    client
        .execute_update(sql.into(), None)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The table's rows as (id, v), ordered by id.
async fn id_v_rows(client: &mut Client, table: &str) -> Vec<(i64, i64)> {
    let batches = query(client, &format!("SELECT id, v FROM {table} ORDER BY id"))
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let ids = b.column(0).as_primitive::<Int64Type>();
        let vs = b.column(1).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((ids.value(i), vs.value(i)));
        }
    }
    out
}

/// `SELECT count(*) ...` as a number.
async fn count_of(client: &mut Client, sql: &str) -> i64 {
    let batches = query(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

/// The count a write's ticket answers.
fn write_count(batches: &[RecordBatch]) -> u64 {
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    let b = &batches[0];
    assert_eq!(b.schema().field(0).name(), "count");
    assert!(b.column(0).is_valid(0));
    b.column(0).as_primitive::<UInt64Type>().value(0)
}

/// Files under `dir`, recursively, relative names with `ext`.
fn files_with(dir: &Path, ext: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                pending.push(p);
            } else if p.to_string_lossy().ends_with(ext) {
                out.push(p.strip_prefix(dir).unwrap().to_string_lossy().to_string());
            }
        }
    }
    out.sort();
    out
}

/// A server over a fresh warehouse with `iceberg.db.t (id BIGINT, v BIGINT)`, merge-on-read,
/// format `version`, holding ids 0..rows with v = id * 10 in one data file.
async fn one_file_table(version: u8, rows: i64) -> (Petrel, tempfile::TempDir) {
    let warehouse = tempfile::TempDir::new().unwrap();
    let wh = warehouse.path().to_str().unwrap().to_string();
    let server = Petrel::start(&["--warehouse", &wh]);
    let mut client = server.client().await;
    run(&mut client, "CREATE SCHEMA iceberg.db").await;
    run(
        &mut client,
        &format!(
            "CREATE TABLE iceberg.db.t (id BIGINT NOT NULL, v BIGINT) TBLPROPERTIES \
             ('format-version'='{version}', 'write.delete.mode'='merge-on-read', \
             'write.update.mode'='merge-on-read')"
        ),
    )
    .await;
    run(
        &mut client,
        &format!(
            "INSERT INTO iceberg.db.t SELECT value, value * 10 FROM generate_series(0, {})",
            rows - 1
        ),
    )
    .await;
    assert_eq!(
        count_of(&mut client, "SELECT count(*) FROM iceberg.db.\"t$files\"").await,
        1,
        "one data file"
    );
    (server, warehouse)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_on_the_query_path_runs_once() {
    let (server, _warehouse) = one_file_table(2, 10).await;
    let mut client = server.client().await;
    let snapshots = "SELECT count(*) FROM iceberg.db.\"t$snapshots\"";
    assert_eq!(count_of(&mut client, snapshots).await, 1);

    // What ADBC's cursor.execute sends: GetFlightInfo runs the UPDATE, each DoGet of its
    // ticket answers the count.
    let info = client
        .execute(
            "UPDATE iceberg.db.t SET v = v + 1 WHERE id < 3 OR id = 9".into(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(info.total_records, 1);
    let first = fetch(&mut client, &info).await.unwrap();
    let second = fetch(&mut client, &info).await.unwrap();
    assert_eq!((write_count(&first), write_count(&second)), (4, 4));
    assert_eq!(count_of(&mut client, snapshots).await, 2, "one commit");
    let expected: Vec<(i64, i64)> = (0..10)
        .map(|i| (i, if i < 3 || i == 9 { i * 10 + 1 } else { i * 10 }))
        .collect();
    assert_eq!(id_v_rows(&mut client, "iceberg.db.t").await, expected);
    // UPDATE is an `overwrite` snapshot (Spark's operation).
    let batches = query(
        &mut client,
        "SELECT operation FROM iceberg.db.\"t$snapshots\" ORDER BY committed_at",
    )
    .await
    .unwrap();
    let ops: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let c = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
            (0..c.len())
                .map(|i| c.as_string::<i32>().value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(ops, ["append", "overwrite"]);
}

/// The slow statement's runtime lower bound comes from an uncorrelated aggregate over this
/// many generated rows (several seconds in a debug build), evaluated after the statement read
/// the table.
const SLOW_ROWS: u64 = 100_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_level_conflict_is_aborted() {
    for version in [2u8, 3] {
        let (server, warehouse) = one_file_table(version, 1000).await;
        let mut reader = server.client().await;
        let snapshots = "SELECT count(*) FROM iceberg.db.\"t$snapshots\"";

        // The slow DELETE (even ids) reads the table first, then spends seconds on its
        // filter; the quick one (id 1) starts meanwhile and commits first. Both delete from
        // the one data file.
        let slow = format!(
            "DELETE FROM iceberg.db.t WHERE id % 2 = 0 AND \
             (SELECT max(value) FROM generate_series(1, {SLOW_ROWS})) = {SLOW_ROWS}"
        );
        let quick = "DELETE FROM iceberg.db.t WHERE id = 1";
        let mut a = server.client().await;
        let mut b = server.client().await;
        let started = Instant::now();
        let slow_task = {
            let slow = slow.clone();
            tokio::spawn(async move {
                let r = a.execute_update(slow, None).await.map_err(to_status);
                (r, started.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let quick_result = b
            .execute_update(quick.into(), None)
            .await
            .map_err(to_status);
        let quick_took = started.elapsed();
        let (slow_result, slow_took) = slow_task.await.unwrap();
        eprintln!(
            "v{version}: slow {slow_result:?} after {slow_took:?}, quick {quick_result:?} \
             after {quick_took:?}"
        );

        let even: Vec<i64> = (0..1000).filter(|i| i % 2 == 0).collect();
        let (winner_deleted, loser) = match (&slow_result, &quick_result) {
            (Err(e), Ok(n)) => {
                assert_eq!(*n, 1);
                (vec![1], e)
            }
            (Ok(n), Err(e)) => {
                assert_eq!(*n, 500);
                (even.clone(), e)
            }
            _ => panic!(
                "v{version}: exactly one DELETE must succeed: slow {slow_result:?} (after \
                 {slow_took:?}), quick {quick_result:?} (after {quick_took:?})"
            ),
        };
        assert_eq!(loser.code(), Code::Aborted, "v{version}: {loser}");
        assert!(
            loser.message().contains("conflicting concurrent commit")
                && loser.message().contains("db.t"),
            "v{version}: {loser}"
        );
        let secret = warehouse.path().to_string_lossy().to_string();
        assert!(!loser.message().contains(&secret), "v{version}: {loser}");

        // The winner's result, one commit, and nothing of the loser's left behind.
        let expected: Vec<(i64, i64)> = (0..1000)
            .filter(|i| !winner_deleted.contains(i))
            .map(|i| (i, i * 10))
            .collect();
        assert_eq!(id_v_rows(&mut reader, "iceberg.db.t").await, expected);
        assert_eq!(count_of(&mut reader, snapshots).await, 2, "v{version}");
        let data = warehouse.path().join("db/t/data");
        let deletes = if version == 2 {
            files_with(&data, ".parquet").len() - 1
        } else {
            assert_eq!(files_with(&data, ".parquet").len(), 1, "v{version}");
            files_with(&data, ".puffin").len()
        };
        assert_eq!(deletes, 1, "v{version}: one delete file, the winner's");
        drop(reader);
        server.terminate();
    }
}
