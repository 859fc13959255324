//! Flight SQL benchmark: Petrel's streaming throughput against a raw Arrow Flight DoGet of
//! the same in-memory batches (same process, same run, loopback), and point-query latency
//! with concurrent clients.
//!
//! ```text
//! cargo bench -p petrel-server --bench flight_sql
//! PETREL_BENCH_ROWS=1000000 PETREL_BENCH_CLIENTS=16 cargo bench -p petrel-server --bench flight_sql
//! ```
//!
//! 1. **Throughput**: a 10-million-row, 4-column table (Int64, Float64, Int32, Utf8) held in
//!    memory. The raw server answers DoGet by encoding those batches with arrow-flight's
//!    `FlightDataEncoder`; Petrel answers `SELECT * FROM t` (GetFlightInfo plans it, DoGet
//!    streams it through DataFusion from a `MemTable` of the same batches). Each is read to
//!    the end by one client, three times; the best run counts.
//! 2. **Point queries**: `PETREL_BENCH_CLIENTS` (16) clients, each on its own connection,
//!    run `SELECT * FROM pyiceberg_cow WHERE id = <n>` (a real Iceberg table of the fixture
//!    corpus: planning, manifest pruning, Parquet read) as GetFlightInfo + DoGet, 50 times
//!    each; p50 / p99 of the end-to-end latency. The same against a 10,000-row in-memory
//!    table shows the server's own per-query cost.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use datafusion::catalog::{
    CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider,
};
use datafusion::datasource::MemTable;
use futures::{Stream, StreamExt, TryStreamExt};
use petrel_server::auth::Authenticator;
use petrel_server::config::CatalogConfig;
use petrel_server::engine::{CatalogSource, EngineOptions, QueryEngine};
use petrel_server::proto::petrel::SessionDefaults;
use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};

const BATCH_ROWS: usize = 65_536;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn make_batches(rows: usize) -> (SchemaRef, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Float64, false),
        Field::new("category", DataType::Int32, false),
        Field::new("label", DataType::Utf8, false),
    ]));
    let labels = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];
    let mut batches = Vec::new();
    let mut start = 0usize;
    while start < rows {
        let n = BATCH_ROWS.min(rows - start);
        let ids = Int64Array::from_iter_values((start..start + n).map(|i| i as i64));
        let values = Float64Array::from_iter_values((start..start + n).map(|i| i as f64 * 0.5));
        let cats = Int32Array::from_iter_values((start..start + n).map(|i| (i % 97) as i32));
        let labs =
            StringArray::from_iter_values((start..start + n).map(|i| labels[i % labels.len()]));
        let cols: Vec<ArrayRef> = vec![
            Arc::new(ids),
            Arc::new(values),
            Arc::new(cats),
            Arc::new(labs),
        ];
        batches.push(RecordBatch::try_new(Arc::clone(&schema), cols).expect("batch"));
        start += n;
    }
    (schema, batches)
}

/// A minimal Flight server that streams the same batches from memory on any DoGet.
#[derive(Debug, Clone)]
struct RawFlight {
    schema: SchemaRef,
    batches: Arc<Vec<RecordBatch>>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl FlightService for RawFlight {
    type HandshakeStream = BoxStream<HandshakeResponse>;
    type ListFlightsStream = BoxStream<FlightInfo>;
    type DoGetStream = BoxStream<FlightData>;
    type DoPutStream = BoxStream<PutResult>;
    type DoActionStream = BoxStream<arrow_flight::Result>;
    type ListActionsStream = BoxStream<ActionType>;
    type DoExchangeStream = BoxStream<FlightData>;

    async fn handshake(
        &self,
        _r: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn list_flights(
        &self,
        _r: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn get_flight_info(
        &self,
        _r: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn poll_flight_info(
        &self,
        _r: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn get_schema(
        &self,
        _r: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn do_get(&self, _r: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        let batches = Arc::clone(&self.batches);
        let input = futures::stream::iter((0..batches.len()).map(move |i| Ok(batches[i].clone())));
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(Arc::clone(&self.schema))
            .build(input)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(stream)))
    }
    async fn do_put(
        &self,
        _r: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn do_exchange(
        &self,
        _r: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn do_action(
        &self,
        _r: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("raw"))
    }
    async fn list_actions(
        &self,
        _r: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Err(Status::unimplemented("raw"))
    }
}

async fn listen() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let a = l.local_addr().expect("addr");
    (l, a)
}

async fn channel(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect")
}

/// The fixture corpus's warehouse (the `corpus` dataset of `scripts/test-data.sh`), if it can
/// be had.
fn corpus_warehouse() -> Option<PathBuf> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/test-data.sh");
    let output = std::process::Command::new("bash")
        .arg(script)
        .arg("corpus")
        .output()
        .ok()?;
    let stdout = String::from_utf8(output.stdout).ok()?;
    let dir = PathBuf::from(stdout.lines().last()?.trim()).join("warehouse");
    (output.status.success() && dir.exists()).then_some(dir)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let rows = env_usize("PETREL_BENCH_ROWS", 10_000_000);
    let clients = env_usize("PETREL_BENCH_CLIENTS", 16);
    let per_client = env_usize("PETREL_BENCH_QUERIES", 50);
    let (schema, batches) = make_batches(rows);
    let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();

    // Raw Flight server.
    let raw = RawFlight {
        schema: Arc::clone(&schema),
        batches: Arc::new(batches.clone()),
    };
    let (raw_listener, raw_addr) = listen().await;
    tokio::spawn(
        Server::builder()
            .add_service(FlightServiceServer::new(raw))
            .serve_with_incoming(petrel_server::server::incoming(raw_listener)),
    );

    // Petrel over the same batches (MemTable) plus, when found, the fixture corpus.
    let mem_schema = MemorySchemaProvider::new();
    mem_schema
        .register_table(
            "t".into(),
            Arc::new(MemTable::try_new(Arc::clone(&schema), vec![batches]).expect("memtable")),
        )
        .expect("register");
    let small = make_batches(10_000);
    mem_schema
        .register_table(
            "small".into(),
            Arc::new(MemTable::try_new(small.0, vec![small.1]).expect("memtable")),
        )
        .expect("register");
    let mem_catalog = MemoryCatalogProvider::new();
    mem_catalog
        .register_schema("public", Arc::new(mem_schema))
        .expect("schema");
    let mut catalogs = vec![(
        "bench".to_string(),
        CatalogSource::DataFusion(Arc::new(mem_catalog) as Arc<dyn CatalogProvider>),
    )];
    let corpus = corpus_warehouse();
    if let Some(wh) = &corpus {
        let cfg = CatalogConfig::Filesystem {
            name: "iceberg".into(),
            warehouse: wh.clone(),
            storage: Default::default(),
        };
        let cat = petrel_server::server::open_catalog(&cfg)
            .await
            .expect("corpus catalog");
        catalogs.push(("iceberg".into(), CatalogSource::Iceberg(cat)));
    }
    let engine = Arc::new(QueryEngine::new(
        catalogs,
        EngineOptions {
            max_concurrent_queries: clients.max(16),
            ..Default::default()
        },
    ));
    let auth = Arc::new(Authenticator::new(&[], None, Duration::from_secs(3600)).expect("auth"));
    let svc = petrel_server::server::service(
        engine,
        SessionDefaults {
            catalog: "bench".into(),
            schema: "public".into(),
        },
        auth,
    );
    let (petrel_listener, petrel_addr) = listen().await;
    tokio::spawn(
        Server::builder()
            .add_service(svc)
            .serve_with_incoming(petrel_server::server::incoming(petrel_listener)),
    );

    println!("## Flight SQL benchmark");
    println!();
    println!(
        "{rows} rows × 4 columns (Int64, Float64, Int32, Utf8), {:.0} MiB in memory, batches of {BATCH_ROWS} rows, loopback, {} cores",
        bytes as f64 / (1 << 20) as f64,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!();

    // ---- throughput ---------------------------------------------------------------------
    let mut raw_best = f64::MAX;
    let mut petrel_best = f64::MAX;
    for _ in 0..3 {
        let mut client =
            arrow_flight::flight_service_client::FlightServiceClient::new(channel(raw_addr).await)
                .max_decoding_message_size(64 << 20);
        let t = Instant::now();
        let stream = client
            .do_get(Ticket {
                ticket: "all".into(),
            })
            .await
            .expect("raw do_get")
            .into_inner();
        let mut decoded = arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(
            stream.map_err(arrow_flight::error::FlightError::from),
        );
        let mut n = 0;
        while let Some(b) = decoded.next().await {
            n += b.expect("raw batch").num_rows();
        }
        assert_eq!(n, rows);
        raw_best = raw_best.min(t.elapsed().as_secs_f64());

        let mut client = FlightSqlServiceClient::new(channel(petrel_addr).await);
        let t = Instant::now();
        let info = client
            .execute("SELECT * FROM t".into(), None)
            .await
            .expect("execute");
        let mut n = 0;
        for ep in info.endpoint {
            let mut s = client
                .do_get(ep.ticket.expect("ticket"))
                .await
                .expect("do_get");
            while let Some(b) = s.next().await {
                n += b.expect("petrel batch").num_rows();
            }
        }
        assert_eq!(n, rows);
        petrel_best = petrel_best.min(t.elapsed().as_secs_f64());
    }
    println!("| stream {rows} rows | seconds | rows/s | MiB/s | vs raw |");
    println!("|---|---|---|---|---|");
    for (name, secs) in [
        ("raw Flight DoGet", raw_best),
        ("Petrel Flight SQL", petrel_best),
    ] {
        println!(
            "| {name} | {secs:.3} | {:.2} M | {:.0} | {:.2} |",
            rows as f64 / secs / 1e6,
            bytes as f64 / (1 << 20) as f64 / secs,
            raw_best / secs
        );
    }
    println!();

    // ---- point-query latency ------------------------------------------------------------
    println!(
        "| point query, {clients} concurrent clients × {per_client} | p50 ms | p99 ms | max ms | queries/s |"
    );
    println!("|---|---|---|---|---|");
    let mut targets = vec![(
        "bench.public.small",
        "in-memory table (10,000 rows): server + DataFusion overhead".to_string(),
        (0..10_000).collect::<Vec<i64>>(),
    )];
    if corpus.is_some() {
        targets.push((
            "iceberg.db.pyiceberg_cow",
            "Iceberg table `pyiceberg_cow` (2910 rows, 29 data files, 6 snapshots)".to_string(),
            (100..3000).collect(),
        ));
    }
    for (table, label, ids) in targets {
        let ids = Arc::new(ids);
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for c in 0..clients {
            let ch = channel(petrel_addr).await;
            let ids = Arc::clone(&ids);
            tasks.spawn(async move {
                let mut client = FlightSqlServiceClient::new(ch);
                let mut lat = Vec::with_capacity(per_client);
                for q in 0..per_client {
                    let id = ids[(c * 7919 + q * 104_729) % ids.len()];
                    let t = Instant::now();
                    let info = client
                        .execute(format!("SELECT * FROM {table} WHERE id = {id}"), None)
                        .await
                        .expect("execute");
                    let mut n = 0;
                    for ep in info.endpoint {
                        let batches: Vec<RecordBatch> = client
                            .do_get(ep.ticket.expect("ticket"))
                            .await
                            .expect("do_get")
                            .try_collect()
                            .await
                            .expect("batches");
                        n += batches.iter().map(|b| b.num_rows()).sum::<usize>();
                    }
                    assert!(n <= 1);
                    lat.push(t.elapsed());
                }
                lat
            });
        }
        let mut all = Vec::new();
        while let Some(r) = tasks.join_next().await {
            all.extend(r.expect("client task"));
        }
        let wall = started.elapsed().as_secs_f64();
        all.sort();
        println!(
            "| {label} | {:.1} | {:.1} | {:.1} | {:.0} |",
            percentile(&all, 0.50).as_secs_f64() * 1e3,
            percentile(&all, 0.99).as_secs_f64() * 1e3,
            all.last().expect("latencies").as_secs_f64() * 1e3,
            all.len() as f64 / wall
        );
    }
}
