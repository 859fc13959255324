//! PollFlightInfo: a query that runs in the background while the client polls its progress,
//! and whose results it fetches when they are ready.
//!
//! The first PollFlightInfo of a `CommandStatementQuery` plans the statement (under a work
//! slot: `admission`) and starts executing it on the server, keeping that slot until the
//! result is complete. It answers at once with the result schema, no endpoint yet, the
//! progress so far and a retry descriptor (an `Any` of [`POLL_TYPE_URL`] holding the query's
//! sealed statement ticket, bound to the caller like every ticket). Each poll with that
//! descriptor answers the progress; the poll after the query finished answers the complete
//! FlightInfo — one endpoint, the row and byte counts, no retry descriptor, progress 1.0 — and
//! the endpoint's DoGet streams the kept result (once: a second DoGet of the same ticket runs
//! the statement again, as any statement ticket can).
//!
//! Progress is the fraction of the plan's file ranges (the Iceberg data files DataFusion's
//! Parquet scans read, split into byte ranges when large) that the scans have opened so far,
//! from the scans' own metrics (`files_ranges_pruned_statistics`: every range opened is counted
//! there as matched or pruned), capped below 1.0 until the result is complete. A plan that reads
//! no files (`generate_series`, VALUES) reports no progress until it completes (the spec: "if
//! unknown, do not set").
//!
//! Cancelling: CancelFlightInfo with a FlightInfo from a poll names the query through its
//! descriptor (running: the retry descriptor) or its endpoint (complete), and stops it like a
//! DoGet (`cancellation`); the next poll answers CANCELLED.
//!
//! Bounds: a running poll holds a work slot, so polls are bounded by `max_concurrent_queries`.
//! Results are kept in memory counted in the server's memory pool within the per-query limit
//! (a result larger than that fails with RESOURCE_EXHAUSTED: stream it with GetFlightInfo and
//! DoGet instead), at most [`RESULTS_KEPT`] of them, and each for [`POLL_TTL`] after the last
//! poll (a running query nobody polls for that long is cancelled).
//!
//! Writes and prepared statements are answered complete by the first poll (a write runs there,
//! once, as GetFlightInfo runs it); so are metadata commands.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow_flight::sql::{Any, CommandStatementQuery, ProstMessageExt, TicketStatementQuery};
use arrow_flight::{FlightDescriptor, FlightInfo, PollInfo};
use bytes::Bytes;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricValue;
use futures::StreamExt;
use prost::Message;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::admission::Admitted;
use crate::cancellation::Registration;
use crate::engine::Planned;
use crate::error::{Error, df_status, to_status};
use crate::executor::{QueryExecutor, is_write, parameter_schema};
use crate::flight_sql::statement::{DoGetStream, encode, flight_info};
use crate::locks::lock;
use crate::proto::petrel::{SessionDefaults, StatementTicket};
use crate::tickets::{Tickets, statement_ticket};

/// The type URL of a poll's retry descriptor.
pub const POLL_TYPE_URL: &str = "type.googleapis.com/petrel.v1.PollQuery";
/// How long a poll waits for the client's next poll (and a result for its DoGet).
pub const POLL_TTL: Duration = Duration::from_secs(120);
/// Polled queries (running or with a result waiting) kept at most.
pub const RESULTS_KEPT: usize = 256;

/// The progress shown while running is capped here (1.0 means complete).
const RUNNING_CAP: f64 = 0.99;
/// A poll waits this long for the query to finish before answering with its progress (so a
/// quick query is complete at the first poll, and a client polling in a tight loop does not
/// spin).
const POLL_WAIT: Duration = Duration::from_millis(100);

enum State {
    Running,
    Done {
        batches: Vec<RecordBatch>,
        rows: usize,
        bytes: usize,
        /// The result's memory, counted in the pool until the result is fetched or expires.
        _memory: MemoryReservation,
    },
    Failed(Status),
}

struct Job {
    ticket: StatementTicket,
    schema: SchemaRef,
    state: Mutex<State>,
    /// The physical plan, once built (its scans' metrics are the progress).
    plan: Mutex<Option<Arc<dyn ExecutionPlan>>>,
    token: CancellationToken,
    touched: Mutex<Instant>,
    /// Becomes true when the state is final.
    finished: tokio::sync::watch::Receiver<bool>,
}

impl Job {
    fn progress(&self) -> Option<f64> {
        let plan = lock(&self.plan).clone()?;
        let (mut planned, mut opened) = (0usize, 0usize);
        file_ranges(&plan, &mut planned, &mut opened);
        (planned > 0).then(|| (opened as f64 / planned as f64).min(RUNNING_CAP))
    }
}

/// File ranges planned and opened by the Parquet scans under `plan`.
fn file_ranges(plan: &Arc<dyn ExecutionPlan>, planned: &mut usize, opened: &mut usize) {
    if let Some(source) = plan.as_any().downcast_ref::<DataSourceExec>()
        && let Some(config) = source
            .data_source()
            .as_any()
            .downcast_ref::<FileScanConfig>()
    {
        *planned += config.file_groups.iter().map(|g| g.len()).sum::<usize>();
        if let Some(metrics) = plan.metrics() {
            for metric in metrics.iter() {
                if let MetricValue::PruningMetrics {
                    name,
                    pruning_metrics,
                } = metric.value()
                    && name == "files_ranges_pruned_statistics"
                {
                    *opened += pruning_metrics.pruned() + pruning_metrics.matched();
                }
            }
        }
    }
    for child in plan.children() {
        file_ranges(child, planned, opened);
    }
}

/// The polled queries of this server, by query id.
#[derive(Default)]
pub struct Polls {
    jobs: Mutex<HashMap<Bytes, Arc<Job>>>,
}

impl std::fmt::Debug for Polls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Polls")
            .field("jobs", &lock(&self.jobs).len())
            .finish()
    }
}

/// The retry descriptor of the polled query `ticket`.
fn retry_descriptor(
    tickets: Tickets<'_>,
    ticket: &StatementTicket,
) -> Result<FlightDescriptor, Status> {
    let sealed = tickets.statement(ticket);
    let any = Any::decode(sealed.ticket).map_err(|e| to_status(&e))?;
    Ok(FlightDescriptor::new_cmd(
        Any {
            type_url: POLL_TYPE_URL.to_string(),
            value: any.value,
        }
        .encode_to_vec(),
    ))
}

/// The statement ticket inside a poll's retry descriptor (`None`: not a retry descriptor).
pub(crate) fn open_retry_descriptor(
    tickets: Tickets<'_>,
    descriptor: &FlightDescriptor,
) -> Option<Result<StatementTicket, Status>> {
    let any = Any::decode(descriptor.cmd.clone()).ok()?;
    if any.type_url != POLL_TYPE_URL {
        return None;
    }
    Some(
        TicketStatementQuery::decode(any.value)
            .map_err(|_| Status::invalid_argument("malformed poll descriptor"))
            .and_then(|t| tickets.open_statement(&t.statement_handle)),
    )
}

/// `info` with its expiration time [`POLL_TTL`] from now.
fn expiring(mut info: PollInfo) -> PollInfo {
    let at = (SystemTime::now() + POLL_TTL)
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let mut ts = info.expiration_time.take().unwrap_or_default();
    ts.seconds = i64::try_from(at.as_secs()).unwrap_or(i64::MAX);
    ts.nanos = i32::try_from(at.subsec_nanos()).unwrap_or(0);
    info.expiration_time = Some(ts);
    info
}

impl Polls {
    /// Polled queries kept now (running or with a result waiting).
    pub fn len(&self) -> usize {
        lock(&self.jobs).len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops what nobody polled or fetched for [`POLL_TTL`] (cancelling it if still running).
    fn expire(&self) {
        let mut jobs = lock(&self.jobs);
        jobs.retain(|_, job| {
            let keep = lock(&job.touched).elapsed() < POLL_TTL;
            if !keep {
                job.token.cancel();
            }
            keep
        });
    }

    /// Starts `planned` (the statement of `ticket`, a query) in the background under `slot`
    /// and `registration`, with the query's memory `pool`; answers the first poll.
    pub(crate) async fn start(
        &self,
        tickets: Tickets<'_>,
        ticket: StatementTicket,
        planned: Planned,
        slot: Admitted,
        registration: Registration,
        pool: Arc<dyn MemoryPool>,
    ) -> Result<PollInfo, Status> {
        self.expire();
        {
            let jobs = lock(&self.jobs);
            if jobs.len() >= RESULTS_KEPT {
                return Err(Error::Busy(format!(
                    "{RESULTS_KEPT} polled queries are running or waiting to be fetched; fetch \
                     or cancel some, or use GetFlightInfo"
                ))
                .into());
            }
        }
        let (finished, finished_rx) = tokio::sync::watch::channel(false);
        let job = Arc::new(Job {
            ticket: ticket.clone(),
            schema: Arc::clone(&planned.schema),
            state: Mutex::new(State::Running),
            plan: Mutex::new(None),
            token: registration.token().clone(),
            touched: Mutex::new(Instant::now()),
            finished: finished_rx,
        });
        lock(&self.jobs).insert(ticket.query_id.clone(), Arc::clone(&job));
        let runner = Arc::clone(&job);
        tokio::spawn(async move {
            let state = run(&runner, planned, &pool).await;
            *lock(&runner.state) = state;
            // The slot and the registration (recorded finished, or cancelled) go here.
            drop((slot, registration));
            let _ = finished.send(true);
        });
        self.answer(tickets, &job).await
    }

    /// Answers a poll with the retry descriptor of `ticket`'s query.
    pub(crate) async fn poll(
        &self,
        tickets: Tickets<'_>,
        ticket: &StatementTicket,
    ) -> Result<PollInfo, Status> {
        self.expire();
        let job = lock(&self.jobs).get(&ticket.query_id).cloned();
        let Some(job) = job.filter(|j| j.ticket == *ticket) else {
            return Err(Status::not_found(
                "no such polled query on this server (it expired after 120 s without a poll, \
                 its result was fetched, or another server started it): poll the statement again",
            ));
        };
        *lock(&job.touched) = Instant::now();
        self.answer(tickets, &job).await
    }

    async fn answer(&self, tickets: Tickets<'_>, job: &Arc<Job>) -> Result<PollInfo, Status> {
        let mut finished = job.finished.clone();
        let _ = tokio::time::timeout(POLL_WAIT, finished.wait_for(|done| *done)).await;
        let state = lock(&job.state);
        match &*state {
            State::Running => {
                let descriptor = retry_descriptor(tickets, &job.ticket)?;
                let info = FlightInfo::new()
                    .try_with_schema(&job.schema)
                    .map_err(|e| to_status(&e))?
                    .with_descriptor(descriptor.clone())
                    .with_total_records(-1)
                    .with_total_bytes(-1);
                drop(state);
                Ok(expiring(PollInfo {
                    info: Some(info),
                    flight_descriptor: Some(descriptor),
                    progress: job.progress(),
                    expiration_time: None,
                }))
            }
            State::Done { rows, bytes, .. } => {
                let info = flight_info(
                    &job.schema,
                    tickets.statement(&job.ticket),
                    retry_descriptor(tickets, &job.ticket)?,
                )?
                .with_total_records(*rows as i64)
                .with_total_bytes(*bytes as i64);
                Ok(expiring(PollInfo {
                    info: Some(info),
                    flight_descriptor: None,
                    progress: Some(1.0),
                    expiration_time: None,
                }))
            }
            State::Failed(status) => {
                let status = status.clone();
                drop(state);
                lock(&self.jobs).remove(&job.ticket.query_id);
                Err(status)
            }
        }
    }

    /// The kept result of exactly `ticket`'s polled query, taken (its memory is freed when
    /// the stream ends); `None` when there is none (the DoGet then runs the ticket).
    pub(crate) fn take_result(&self, ticket: &StatementTicket) -> Option<DoGetStream> {
        let mut jobs = lock(&self.jobs);
        let job = jobs.get(&ticket.query_id).filter(|j| j.ticket == *ticket)?;
        if !matches!(&*lock(&job.state), State::Done { .. }) {
            return None;
        }
        let job = jobs.remove(&ticket.query_id)?;
        drop(jobs);
        let state = std::mem::replace(&mut *lock(&job.state), State::Running);
        let State::Done {
            batches,
            _memory: memory,
            ..
        } = state
        else {
            return None;
        };
        let schema = Arc::clone(&job.schema);
        // The reservation lives as long as the stream (the batches' memory with it).
        let stream = futures::stream::iter(batches)
            .map(move |batch| {
                let _ = &memory;
                Ok(batch)
            })
            .boxed();
        Some(encode(schema, stream))
    }
}

/// Executes `planned` with the query's memory `pool`, keeping its batches within it; the job's
/// final state.
async fn run(job: &Job, planned: Planned, pool: &Arc<dyn MemoryPool>) -> State {
    let cancelled = || {
        State::Failed(
            Error::Cancelled("query cancelled (CancelFlightInfo / CancelQuery)".into()).into(),
        )
    };
    let task = match crate::query_report::query_task(&planned.frame, pool) {
        Ok(task) => task,
        Err(status) => return State::Failed(status),
    };
    let plan = tokio::select! {
        plan = crate::query_report::physical_plan(planned.frame, planned.optimized) => match plan {
            Ok(plan) => plan,
            Err(e) => return State::Failed(df_status(e)),
        },
        _ = job.token.cancelled() => return cancelled(),
    };
    *lock(&job.plan) = Some(Arc::clone(&plan));
    let mut stream = match datafusion::physical_plan::execute_stream(plan, Arc::clone(&task)) {
        Ok(s) => s,
        Err(e) => return State::Failed(df_status(e)),
    };
    let memory = MemoryConsumer::new("polled query result").register(task.memory_pool());
    let (mut batches, mut rows, mut bytes) = (Vec::new(), 0usize, 0usize);
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = job.token.cancelled() => return cancelled(),
        };
        match next {
            None => break,
            Some(Err(e)) => return State::Failed(df_status(e)),
            Some(Ok(batch)) => {
                let size = batch.get_array_memory_size();
                if let Err(e) = memory.try_grow(size) {
                    return State::Failed(
                        Error::Busy(format!(
                            "the result of this polled query does not fit in the query memory \
                             limit ({e}); fetch it as a stream with GetFlightInfo and DoGet"
                        ))
                        .into(),
                    );
                }
                rows += batch.num_rows();
                bytes += size;
                batches.push(batch);
            }
        }
    }
    State::Done {
        batches,
        rows,
        bytes,
        _memory: memory,
    }
}

/// Plans a `CommandStatementQuery` for a first poll: a query (`Ok(Some)`) is started by
/// [`Polls::start`]; a write (`Ok(None)`) is left to GetFlightInfo, which runs it once.
pub(crate) async fn plan_query(
    engine: &dyn QueryExecutor,
    cmd: &CommandStatementQuery,
    session: SessionDefaults,
) -> Result<Option<(StatementTicket, Planned, Admitted)>, Status> {
    if cmd.transaction_id.is_some() {
        return Err(Status::invalid_argument("transactions are not supported"));
    }
    let ticket = statement_ticket(&cmd.query, session.clone(), Bytes::new());
    let slot = engine.admission().admit("PollFlightInfo").await?;
    let planned = engine.plan(&cmd.query, &session, None).await?;
    if is_write(&planned.frame) {
        return Ok(None);
    }
    if !parameter_schema(&planned.frame)?.fields().is_empty() {
        return Err(Status::invalid_argument(
            "the statement has parameters ($1 or ?): use a prepared statement and bind values",
        ));
    }
    Ok(Some((ticket, planned, slot)))
}

/// Whether `descriptor` is a `CommandStatementQuery` (the command a poll runs in the
/// background), and the command.
pub(crate) fn statement_query(descriptor: &FlightDescriptor) -> Option<CommandStatementQuery> {
    let any = Any::decode(descriptor.cmd.clone()).ok()?;
    if any.type_url != CommandStatementQuery::type_url() {
        return None;
    }
    any.unpack::<CommandStatementQuery>().ok().flatten()
}
