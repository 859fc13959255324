//! CancelFlightInfo, PollFlightInfo and admission, against the in-process server (so the tests
//! can see the engine's work slots, memory pool and plan cache):
//!
//! - cancel answers per the Flight spec: a running query CANCELLED (its DoGet stream ends with
//!   gRPC CANCELLED, its slot and memory are returned), an issued but unfetched one CANCELLED
//!   (its DoGet refused), a finished one NOT_CANCELLABLE, an unknown one the gRPC error
//!   NOT_FOUND, a metadata FlightInfo NOT_CANCELLABLE;
//! - a prepared statement's DoGet is cancelled both ways clients run it (the handle as the
//!   ticket, and GetFlightInfo's ticket);
//! - PollFlightInfo of a query over a 40-file table reports rising progress, ends with the
//!   endpoint, and the endpoint's DoGet returns the result; a polled query can be cancelled;
//!   GetSchema and PollFlightInfo leave no plan in the plan cache; GetFlightInfo of a statement
//!   or of a prepared statement without parameters keeps one that its DoGet takes;
//! - CreatePreparedStatement's plan serves the handle's GetFlightInfo (one plan per ADBC-style
//!   query, counted by the server's planning metric) while its table is unchanged, and a commit
//!   by another catalog instance in between is seen (that plan is dropped, the query replanned);
//! - with every work slot taken, each planning RPC, the catalog-reading metadata DoGets and
//!   the DoPuts that plan (a parameter bind, a statement or prepared update, a bulk ingest)
//!   answer RESOURCE_EXHAUSTED after the queue timeout, writing nothing, while GetSqlInfo,
//!   GetCatalogs and the cancel keep succeeding.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, Int32Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetTables, CommandPreparedStatementQuery, CommandStatementQuery, ProstMessageExt,
    SqlInfo,
};
use arrow_flight::{
    Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor,
    FlightInfo, PollInfo, Ticket,
};
use futures::{StreamExt, TryStreamExt};
use petrel_server::auth::{Authenticator, Identity};
use petrel_server::config::CatalogConfig;
use petrel_server::engine::{CatalogSource, EngineOptions, QueryEngine};
use petrel_server::memory::ServerMemory;
use petrel_server::proto::petrel::SessionDefaults;
use petrel_server::tickets::{TicketSigner, Tickets, statement_ticket};
use prost::Message;
use tempfile::TempDir;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Status};

const SECRET: &[u8] = b"cancel-poll-admission-test-secret";
/// A query that streams for as long as it is read.
const ENDLESS: &str = "SELECT * FROM generate_series(1, 100000000000)";

struct InProcess {
    engine: Arc<QueryEngine>,
    channel: Channel,
    _dir: TempDir,
}

impl InProcess {
    async fn start(slots: usize, queue_timeout: Duration) -> Self {
        let dir = TempDir::new().unwrap();
        let warehouse = dir.path().join("warehouse");
        std::fs::create_dir_all(&warehouse).unwrap();
        let catalog = petrel_server::server::open_catalog(&CatalogConfig::Filesystem {
            name: "iceberg".into(),
            warehouse,
            storage: Default::default(),
        })
        .await
        .unwrap();
        let engine = Arc::new(QueryEngine::new(
            vec![("iceberg".into(), CatalogSource::Iceberg(catalog))],
            EngineOptions {
                target_partitions: Some(2),
                memory: ServerMemory::new(Some(2 << 30), Some(1 << 30)),
                max_concurrent_queries: slots,
                queue_timeout,
                ..Default::default()
            },
        ));
        let auth = Arc::new(
            Authenticator::new(&[], None, Duration::from_secs(3600))
                .unwrap()
                .with_ticket_signer(TicketSigner::new(SECRET).unwrap()),
        );
        let service = petrel_server::server::service(
            Arc::clone(&engine),
            SessionDefaults {
                catalog: "iceberg".into(),
                schema: "db".into(),
            },
            auth,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            Server::builder()
                .add_service(service)
                .serve_with_incoming(petrel_server::server::incoming(listener)),
        );
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self {
            engine,
            channel,
            _dir: dir,
        }
    }

    fn client(&self) -> FlightSqlServiceClient<Channel> {
        FlightSqlServiceClient::new(self.channel.clone())
    }

    fn raw(&self) -> FlightServiceClient<Channel> {
        FlightServiceClient::new(self.channel.clone())
    }

    async fn update(&self, sql: &str) {
        self.client()
            .execute_update(sql.into(), None)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

fn status(e: arrow_flight::error::FlightError) -> Status {
    match e {
        arrow_flight::error::FlightError::Tonic(s) => *s,
        other => Status::unknown(other.to_string()),
    }
}

async fn cancel(raw: &mut FlightServiceClient<Channel>, info: &FlightInfo) -> Result<i32, Status> {
    let req = CancelFlightInfoRequest {
        info: Some(info.clone()),
    };
    let mut resp = raw
        .do_action(Action {
            r#type: "CancelFlightInfo".into(),
            body: req.encode_to_vec().into(),
        })
        .await?
        .into_inner();
    let body = resp.message().await?.expect("a result").body;
    Ok(CancelFlightInfoResult::decode(body).unwrap().status)
}

fn statement_descriptor(sql: &str) -> FlightDescriptor {
    FlightDescriptor::new_cmd(
        CommandStatementQuery {
            query: sql.into(),
            transaction_id: None,
        }
        .as_any()
        .encode_to_vec(),
    )
}

/// Reads `stream` to its end; the status it ended with (Ok for a complete result).
async fn drain(
    mut stream: impl futures::Stream<Item = Result<RecordBatch, arrow_flight::error::FlightError>>
    + Unpin,
) -> Result<usize, Status> {
    let mut rows = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("the stream ends soon")
        {
            None => return Ok(rows),
            Some(Ok(b)) => rows += b.num_rows(),
            Some(Err(e)) => {
                let s = status(e);
                assert!(stream.next().await.is_none(), "nothing after the error {s}");
                return Err(s);
            }
        }
    }
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_answers_as_the_flight_spec_says() {
    let server = InProcess::start(4, Duration::from_secs(5)).await;
    let (mut client, mut raw) = (server.client(), server.raw());

    // Running, holding memory (a sort buffering an endless input): CANCELLED; the stream ends
    // with CANCELLED; the slot and the memory are returned.
    let info = client
        .execute(format!("{ENDLESS} ORDER BY value DESC"), None)
        .await
        .unwrap();
    let stream = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let reader = tokio::spawn(drain(stream));
    let memory = server.engine.options().memory.clone();
    wait_until("the sort holds memory", || memory.reserved() > 1 << 20).await;
    assert_eq!(server.engine.admission().available(), 3);
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::Cancelled as i32
    );
    let ended = reader.await.unwrap().unwrap_err();
    assert_eq!(ended.code(), Code::Cancelled, "{ended}");
    wait_until("the memory is returned", || memory.reserved() == 0).await;
    wait_until("the slot is returned", || {
        server.engine.admission().available() == 4
    })
    .await;
    // Cancelled again: the spec allows CANCELLED; its DoGet is refused.
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::Cancelled as i32
    );
    let e = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(status(e).code(), Code::Cancelled);

    // Issued by GetFlightInfo, not fetched yet: CANCELLED, and its DoGet is refused.
    let info = client
        .execute("SELECT 1 AS one".into(), None)
        .await
        .unwrap();
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::Cancelled as i32
    );
    let e = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(status(e).code(), Code::Cancelled);

    // Finished: NOT_CANCELLABLE (and it was not cancelled: fetching again works).
    let info = client
        .execute("SELECT 2 AS two".into(), None)
        .await
        .unwrap();
    let s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 1);
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::NotCancellable as i32
    );
    let s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 1);

    // Unknown: a genuine ticket (signed with the server's secret) this server never issued.
    let signer = TicketSigner::new(SECRET).unwrap();
    let unknown = Tickets::new(&signer, &Identity::Anonymous).statement(&statement_ticket(
        "SELECT 3",
        SessionDefaults::default(),
        Default::default(),
    ));
    let mut forged = info.clone();
    forged.endpoint[0].ticket = Some(unknown);
    let e = cancel(&mut raw, &forged).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");

    // A metadata FlightInfo: nothing to cancel.
    let catalogs = client.get_catalogs().await.unwrap();
    assert_eq!(
        cancel(&mut raw, &catalogs).await.unwrap(),
        CancelStatus::NotCancellable as i32
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statements_doget_is_cancelled() {
    let server = InProcess::start(4, Duration::from_secs(5)).await;
    let (mut client, mut raw) = (server.client(), server.raw());
    let mut prepared = client.prepare(ENDLESS.into(), None).await.unwrap();

    // The handle itself as the ticket (clients that DoGet a CommandPreparedStatementQuery).
    let created = {
        let req = ActionCreatePreparedStatementRequest {
            query: ENDLESS.into(),
            transaction_id: None,
        };
        let mut resp = raw
            .do_action(Action {
                r#type: "CreatePreparedStatement".into(),
                body: req.as_any().encode_to_vec().into(),
            })
            .await
            .unwrap()
            .into_inner();
        let any =
            arrow_flight::sql::Any::decode(resp.message().await.unwrap().unwrap().body).unwrap();
        any.unpack::<arrow_flight::sql::ActionCreatePreparedStatementResult>()
            .unwrap()
            .unwrap()
    };
    let ticket = Ticket {
        ticket: CommandPreparedStatementQuery {
            prepared_statement_handle: created.prepared_statement_handle.clone(),
        }
        .as_any()
        .encode_to_vec()
        .into(),
    };
    let mut stream = client.do_get(ticket.clone()).await.unwrap();
    assert!(
        stream.next().await.unwrap().unwrap().num_rows() > 0,
        "running"
    );
    let info = FlightInfo::new()
        .with_endpoint(arrow_flight::FlightEndpoint::new().with_ticket(ticket.clone()));
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::Cancelled as i32
    );
    assert_eq!(drain(stream).await.unwrap_err().code(), Code::Cancelled);
    // Nothing running any more: NOT_CANCELLABLE; the handle runs again.
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::NotCancellable as i32
    );
    let mut again = client.do_get(ticket).await.unwrap();
    assert!(
        again.next().await.unwrap().unwrap().num_rows() > 0,
        "runs again"
    );
    drop(again);

    // GetFlightInfo's ticket (arrow-rs, ADBC, JDBC): its query id is in the ticket.
    let info = prepared.execute().await.unwrap();
    let mut stream = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert!(
        stream.next().await.unwrap().unwrap().num_rows() > 0,
        "running"
    );
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::Cancelled as i32
    );
    assert_eq!(drain(stream).await.unwrap_err().code(), Code::Cancelled);
}

/// A table of 40 data files (one per partition) of 2,000 rows each.
async fn forty_file_table(server: &InProcess) {
    server.update("CREATE SCHEMA iceberg.db").await;
    server
        .update("CREATE TABLE db.t (k INT, s STRING) USING iceberg PARTITIONED BY (k)")
        .await;
    server
        .update(
            "INSERT INTO db.t SELECT CAST(value % 40 AS INT), repeat('petrel', 20) \
             FROM generate_series(1, 80000)",
        )
        .await;
}

async fn poll(
    raw: &mut FlightServiceClient<Channel>,
    d: FlightDescriptor,
) -> Result<PollInfo, Status> {
    raw.poll_flight_info(d).await.map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_reports_progress_and_ends_with_the_endpoint() {
    let server = InProcess::start(4, Duration::from_secs(5)).await;
    forty_file_table(&server).await;
    let (mut client, mut raw) = (server.client(), server.raw());
    // Slow per row (a 2.4 KB string hashed for each of the 80,000 rows), read file by file.
    let slow = "SELECT count(*) AS n FROM db.t WHERE sha256(repeat(s, 20)) <> ''";

    let mut info = poll(&mut raw, statement_descriptor(slow)).await.unwrap();
    let mut seen = Vec::new();
    while let Some(next) = info.flight_descriptor.clone() {
        assert!(
            info.info.as_ref().unwrap().endpoint.is_empty(),
            "no endpoint while running"
        );
        assert!(info.expiration_time.is_some());
        seen.extend(info.progress);
        tokio::time::sleep(Duration::from_millis(30)).await;
        info = poll(&mut raw, next).await.unwrap();
    }
    assert_eq!(info.progress, Some(1.0));
    let done = info.info.unwrap();
    assert_eq!(done.endpoint.len(), 1);
    assert_eq!(done.total_records, 1);
    eprintln!("progress seen while running: {seen:?}");
    let middle: Vec<f64> = seen
        .iter()
        .copied()
        .filter(|p| *p > 0.0 && *p < 1.0)
        .collect();
    assert!(middle.len() >= 2, "progress while running: {seen:?}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "rises: {seen:?}");
    let b: Vec<RecordBatch> = client
        .do_get(done.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 80_000);
    assert_eq!(
        cancel(&mut raw, &done).await.unwrap(),
        CancelStatus::NotCancellable as i32,
        "finished"
    );

    // A polled query is cancelled through the FlightInfo a poll returned; the next poll says
    // CANCELLED.
    let running = poll(&mut raw, statement_descriptor(slow)).await.unwrap();
    let retry = running.flight_descriptor.clone().expect("still running");
    assert_eq!(
        cancel(&mut raw, running.info.as_ref().unwrap())
            .await
            .unwrap(),
        CancelStatus::Cancelled as i32
    );
    let e = poll(&mut raw, retry).await.unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    wait_until("the slot is returned", || {
        server.engine.admission().available() == 4
    })
    .await;

    // Neither GetSchema nor PollFlightInfo leaves a plan behind; GetFlightInfo keeps one for
    // its DoGet (which takes it).
    let quick = "SELECT k, s FROM db.t WHERE k = 3";
    raw.get_schema(statement_descriptor(quick)).await.unwrap();
    assert_eq!(server.engine.plans_kept(), 0, "GetSchema");
    let p = poll(&mut raw, statement_descriptor(quick)).await.unwrap();
    assert_eq!(server.engine.plans_kept(), 0, "PollFlightInfo");
    let mut d = p.flight_descriptor;
    let mut p = p.info;
    while let Some(next) = d {
        let r = poll(&mut raw, next).await.unwrap();
        d = r.flight_descriptor;
        p = r.info;
    }
    let rows: usize = client
        .do_get(p.unwrap().endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 2_000);
    assert_eq!(server.engine.plans_kept(), 0, "PollFlightInfo");
    let info = client.execute(quick.into(), None).await.unwrap();
    assert_eq!(
        server.engine.plans_kept(),
        1,
        "GetFlightInfo keeps its plan"
    );
    let s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 2_000);
    assert_eq!(server.engine.plans_kept(), 0, "its DoGet took it");

    // So does a prepared statement's GetFlightInfo without parameters (ADBC runs every query
    // that way): one plan answers the parameter check, the schema and the DoGet.
    let mut prepared = client.prepare(quick.into(), None).await.unwrap();
    let info = prepared.execute().await.unwrap();
    assert_eq!(
        server.engine.plans_kept(),
        1,
        "a prepared statement's GetFlightInfo keeps its plan"
    );
    let s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 2_000);
    assert_eq!(server.engine.plans_kept(), 0, "its DoGet took it");
    // With bound parameters nothing is kept: each row is bound and planned when it runs.
    let mut bound = client
        .prepare("SELECT k, s FROM db.t WHERE k = $1".into(), None)
        .await
        .unwrap();
    bound
        .set_parameters(
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("0", DataType::Int32, false)])),
                vec![Arc::new(Int32Array::from(vec![3, 5]))],
            )
            .unwrap(),
        )
        .unwrap();
    let info = bound.execute().await.unwrap();
    assert_eq!(server.engine.plans_kept(), 0, "bound parameters");
    let s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 4_000, "k = 3, then k = 5");
}

/// SQL plans made by this process so far (`petrel_planning_seconds_count{stage="sql"}`; nextest
/// runs each test in its own process).
fn sql_plans(engine: &Arc<QueryEngine>) -> u64 {
    let text = petrel_server::metrics::render(&petrel_server::metrics::Sources {
        engine: Arc::clone(engine),
        sessions: Arc::new(petrel_server::session::SessionStore::new(
            SessionDefaults::default(),
        )),
    });
    let line = text
        .lines()
        .find(|l| l.starts_with("petrel_planning_seconds_count{stage=\"sql\"}"))
        .expect("the planning metric");
    line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
}

/// Runs the prepared statement `sql` as ADBC does (CreatePreparedStatement, GetFlightInfo of the
/// handle, DoGet); its one row as (count, sum) and the SQL plans the server made for it.
async fn prepared_count_and_sum(server: &InProcess, sql: &str) -> ((i64, i64), u64) {
    let before = sql_plans(&server.engine);
    let mut client = server.client();
    let mut prepared = client.prepare(sql.into(), None).await.unwrap();
    let info = prepared.execute().await.unwrap();
    let batches: Vec<RecordBatch> = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    prepared.close().await.unwrap();
    let b = &batches[0];
    let row = (
        b.column(0).as_primitive::<Int64Type>().value(0),
        b.column(1).as_primitive::<Int64Type>().value(0),
    );
    (row, sql_plans(&server.engine) - before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_plan_serves_its_execution_only_while_its_table_is_current() {
    let server = InProcess::start(4, Duration::from_secs(5)).await;
    server.update("CREATE SCHEMA iceberg.db").await;
    server
        .update("CREATE TABLE db.p (k BIGINT) USING iceberg")
        .await;
    server.update("INSERT INTO db.p VALUES (1), (2), (3)").await;
    let sql = "SELECT count(*), sum(k) FROM db.p";

    // Nothing changed between CreatePreparedStatement and GetFlightInfo: one plan serves the
    // statement's schema, its execution and its DoGet.
    assert_eq!(prepared_count_and_sum(&server, sql).await, ((3, 6), 1));
    assert_eq!(server.engine.plans_kept(), 0, "the DoGet took the plan");

    // Another catalog instance over the same warehouse (its own caches, as another Petrel
    // process has) commits between CreatePreparedStatement and GetFlightInfo: the execution
    // sees the new row.
    let warehouse = server._dir.path().join("warehouse");
    let other = Arc::new(QueryEngine::new(
        vec![(
            "iceberg".into(),
            CatalogSource::Iceberg(
                petrel_server::server::open_catalog(&CatalogConfig::Filesystem {
                    name: "iceberg".into(),
                    warehouse,
                    storage: Default::default(),
                })
                .await
                .unwrap(),
            ),
        )],
        EngineOptions::default(),
    ));
    let session = SessionDefaults {
        catalog: "iceberg".into(),
        schema: "db".into(),
    };
    let mut client = server.client();
    let mut prepared = client.prepare(sql.into(), None).await.unwrap();
    let insert = "INSERT INTO db.p VALUES (10)";
    let frame = other.plan_write(insert, &session, &[]).await.unwrap();
    assert_eq!(
        other.run_write(frame, b"w", "test", insert).await.unwrap(),
        1
    );
    let after_commit = sql_plans(&server.engine);
    let info = prepared.execute().await.unwrap();
    let batches: Vec<RecordBatch> = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let b = &batches[0];
    assert_eq!(
        (
            b.column(0).as_primitive::<Int64Type>().value(0),
            b.column(1).as_primitive::<Int64Type>().value(0),
        ),
        (4, 16),
        "the row committed after CreatePreparedStatement is read"
    );
    assert_eq!(
        sql_plans(&server.engine) - after_commit,
        1,
        "planned again after the commit (once: GetFlightInfo's plan serves the DoGet)"
    );
    assert_eq!(server.engine.plans_kept(), 0);

    // And the next query reads the same state with one plan again.
    assert_eq!(prepared_count_and_sum(&server, sql).await, ((4, 16), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_server_refuses_planning_and_answers_the_rest() {
    let server = InProcess::start(1, Duration::from_millis(500)).await;
    server.update("CREATE SCHEMA iceberg.db").await;
    server
        .update("CREATE TABLE db.w (k BIGINT) USING iceberg")
        .await;
    let (mut client, mut raw) = (server.client(), server.raw());
    // Prepared while a slot is free (preparing takes one): a query to bind a parameter to, and
    // an INSERT to run as a prepared update.
    let mut to_bind = client
        .prepare("SELECT k FROM db.w WHERE k = $1".into(), None)
        .await
        .unwrap();
    let mut prepared_insert = client
        .prepare("INSERT INTO db.w VALUES (1)".into(), None)
        .await
        .unwrap();
    // One query holds the only slot.
    let info = client.execute(ENDLESS.into(), None).await.unwrap();
    let mut stream = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert!(stream.next().await.unwrap().unwrap().num_rows() > 0);
    assert_eq!(server.engine.admission().available(), 0);

    let busy = |what: &str, r: Result<(), Status>| {
        let e = r.expect_err(what);
        assert_eq!(e.code(), Code::ResourceExhausted, "{what}: {e}");
        assert!(e.message().contains("server busy"), "{what}: {e}");
    };
    let started = Instant::now();
    busy(
        "GetFlightInfo",
        client
            .execute("SELECT 1".into(), None)
            .await
            .map(|_| ())
            .map_err(status),
    );
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "it waited in line first"
    );
    busy(
        "GetSchema",
        raw.get_schema(statement_descriptor("SELECT 1"))
            .await
            .map(|_| ()),
    );
    busy(
        "PollFlightInfo",
        poll(&mut raw, statement_descriptor("SELECT 1"))
            .await
            .map(|_| ()),
    );
    busy(
        "CreatePreparedStatement",
        client
            .prepare("SELECT 1".into(), None)
            .await
            .map(|_| ())
            .map_err(status),
    );
    let tables = client
        .get_tables(CommandGetTables {
            include_schema: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let r = match client
        .do_get(tables.endpoint[0].ticket.clone().unwrap())
        .await
    {
        Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()).map_err(status),
        Err(e) => Err(status(e)),
    };
    busy("GetTables", r);
    let schemas = client
        .get_db_schemas(CommandGetDbSchemas::default())
        .await
        .unwrap();
    let r = match client
        .do_get(schemas.endpoint[0].ticket.clone().unwrap())
        .await
    {
        Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()).map_err(status),
        Err(e) => Err(status(e)),
    };
    busy("GetDbSchemas", r);
    // The DoPuts that plan: a parameter bind, a statement update, a prepared update, a bulk
    // ingest. Each waits in line, then is refused; nothing is written.
    to_bind
        .set_parameters(
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, false)])),
                vec![Arc::new(arrow::array::Int64Array::from(vec![1]))],
            )
            .unwrap(),
        )
        .unwrap();
    let started = Instant::now();
    busy(
        "DoPut bind",
        to_bind.execute().await.map(|_| ()).map_err(status),
    );
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "it waited in line first"
    );
    busy(
        "DoPut statement update",
        client
            .execute_update("INSERT INTO db.w VALUES (2)".into(), None)
            .await
            .map(|_| ())
            .map_err(status),
    );
    busy(
        "DoPut prepared update",
        prepared_insert
            .execute_update()
            .await
            .map(|_| ())
            .map_err(status),
    );
    let rows = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)])),
        vec![Arc::new(arrow::array::Int64Array::from(vec![3]))],
    )
    .unwrap();
    busy(
        "DoPut bulk ingest",
        client
            .execute_ingest(
                arrow_flight::sql::CommandStatementIngest {
                    table_definition_options: Some(arrow_flight::sql::TableDefinitionOptions {
                        if_not_exist: arrow_flight::sql::TableNotExistOption::Fail as i32,
                        if_exists: arrow_flight::sql::TableExistsOption::Append as i32,
                    }),
                    table: "w".into(),
                    schema: Some("db".into()),
                    catalog: Some("iceberg".into()),
                    ..Default::default()
                },
                futures::stream::iter([Ok::<_, arrow_flight::error::FlightError>(rows)]),
            )
            .await
            .map(|_| ())
            .map_err(status),
    );

    // Calls that answer from memory keep working, and the running query keeps streaming.
    let info_sql = client
        .get_sql_info(vec![SqlInfo::FlightSqlServerName])
        .await
        .unwrap();
    let s = client
        .do_get(info_sql.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 1);
    let catalogs = client.get_catalogs().await.unwrap();
    let _ = CommandGetCatalogs {};
    let s = client
        .do_get(catalogs.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 1);
    assert!(
        stream.next().await.unwrap().unwrap().num_rows() > 0,
        "still streaming"
    );

    // The cancel is answered too, and frees the slot for planning.
    assert_eq!(
        cancel(&mut raw, &info).await.unwrap(),
        CancelStatus::Cancelled as i32
    );
    assert_eq!(drain(stream).await.unwrap_err().code(), Code::Cancelled);
    let info = client
        .execute("SELECT 1 AS one".into(), None)
        .await
        .unwrap();
    let s = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(drain(s).await.unwrap(), 1);
    // None of the refused writes wrote anything.
    let info = client
        .execute("SELECT count(*) FROM db.w".into(), None)
        .await
        .unwrap();
    let b: Vec<RecordBatch> = client
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 0);
}
