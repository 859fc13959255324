//! What a query reports when it ends: its one log line, its metrics, and (when slow) the
//! slow-query log.
//!
//! A [`QueryReport`] is made when execution starts (DoGet of a statement, or a write run once).
//! It owns the query's `tracing` span (`query{query_id, user}`: the events of planning and
//! reading, the table provider's included, carry the query id), and a [`ScanCollector`] that
//! [`execute`] fills with the physical plans run. [`QueryReport::stream`] wraps the result
//! stream; when that stream ends, fails or is dropped, the report is finished exactly once:
//!
//! - the `query` line (info: outcome `complete`, `cancelled`, `dropped by the client`) or the
//!   `query failed` line (`telemetry::query_failed`), as before;
//! - `petrel_queries_total{status}`, the execution histogram, and the Iceberg counters from
//!   the plan's scans (`metrics::Metrics::scanned`);
//! - a `slow query` warning when it took `slow_query_ms` or more
//!   ([`crate::telemetry::slow_query_threshold`]): the SQL (at most [`SLOW_SQL_CHARS`]
//!   characters), duration, rows, bytes, and per scan its table, snapshot id, manifests and
//!   data files total / pruned, and delete files planned / applied.
//!
//! `bytes` here is the Arrow data size of the result batches (their buffers as sliced), about
//! what Flight sends; the exact Flight bytes are counted for all DoGets together
//! (`petrel_streamed_bytes_total`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use arrow::array::{Array, RecordBatch};
use bytes::Bytes;
use datafusion::dataframe::DataFrame;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use futures::stream::{BoxStream, Stream, StreamExt};
use tonic::Status;
use tracing::{Instrument, Span};

use crate::error::df_status;
use crate::metrics::{self, QueryStatus, Stage};
use crate::scan_stats::{ScanCollector, ScanStats};
use crate::telemetry::{query_failed, query_id_hex, slow_query_threshold};

/// The SQL text in a slow-query line is cut to this many characters.
pub const SLOW_SQL_CHARS: usize = 2000;

/// Plans `frame` physically in the query's span (timed as planning stage `physical`: Iceberg
/// scan planning), records the plan for the report, and starts it with the query's memory
/// `pool` (`memory::ServerMemory::query_pool`; see [`query_task`]).
pub async fn execute(
    frame: DataFrame,
    pool: &Arc<dyn MemoryPool>,
    observer: &Observer,
) -> Result<SendableRecordBatchStream, Status> {
    let started = Instant::now();
    let frame = optimize(frame, observer)?;
    execute_optimized(frame, pool, observer, started).await
}

/// The frame with its logical plan optimized (DataFusion's analyzer and optimizer rules: the
/// first half of `DataFrame::create_physical_plan`).
pub fn optimize(frame: DataFrame, observer: &Observer) -> Result<DataFrame, Status> {
    let (state, plan) = frame.into_parts();
    let optimized = {
        let _entered = observer.span.enter();
        crate::engine_panics::guarded("optimizing", || state.optimize(&plan).map_err(df_status))?
    };
    Ok(DataFrame::new(state, optimized))
}

/// [`execute`] for a frame whose plan is already optimized ([`optimize`], or a kept plan:
/// `statement_cache`): plans it physically and starts it. `started`: when planning began
/// (optimizing included), for `petrel_planning_seconds{stage="physical"}`.
pub async fn execute_optimized(
    frame: DataFrame,
    pool: &Arc<dyn MemoryPool>,
    observer: &Observer,
    started: Instant,
) -> Result<SendableRecordBatchStream, Status> {
    let task = query_task(&frame, pool)?;
    let plan = crate::engine_panics::guarded_async("planning", async {
        physical_plan(frame, true)
            .instrument(observer.span.clone())
            .await
            .map_err(df_status)
    })
    .await?;
    metrics::global().planned(Stage::Physical, started.elapsed());
    observer.scans.add(Arc::clone(&plan));
    let _entered = observer.span.enter();
    datafusion::physical_plan::execute_stream(plan, task).map_err(df_status)
}

/// The physical plan of `frame`: `DataFrame::create_physical_plan`, without optimizing again a
/// plan that is `optimized` already (a kept plan: `statement_cache`).
pub async fn physical_plan(
    frame: DataFrame,
    optimized: bool,
) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
    if !optimized {
        return frame.create_physical_plan().await;
    }
    let (state, plan) = frame.into_parts();
    state
        .query_planner()
        .create_physical_plan(&plan, &state)
        .await
}

/// The task context a statement's plan runs in: the frame's session (configuration,
/// functions) with a runtime whose memory pool is the query's `pool` (the session's runtime
/// shares its caches, object stores and disk manager, and has the server-wide pool:
/// `engine`). Every operator, scan and write of the plan reserves from the task context's pool.
pub fn query_task(
    frame: &DataFrame,
    pool: &Arc<dyn MemoryPool>,
) -> Result<Arc<TaskContext>, Status> {
    let task = frame.task_ctx();
    let runtime = RuntimeEnvBuilder::from_runtime_env(&task.runtime_env())
        .with_memory_pool(Arc::clone(pool))
        .build_arc()
        .map_err(df_status)?;
    Ok(Arc::new(task.with_runtime(runtime)))
}

/// What [`execute`] needs of a report: its span and its plan collector (cheap to clone, for
/// the statements run once per parameter row).
#[derive(Debug, Clone)]
pub struct Observer {
    span: Span,
    scans: ScanCollector,
}

/// One query's report (module docs).
#[derive(Debug)]
pub struct QueryReport {
    id: Bytes,
    user: String,
    sql: String,
    span: Span,
    scans: ScanCollector,
    started: Instant,
}

/// How a query's stream ended.
#[derive(Debug)]
enum Outcome {
    Complete,
    Dropped,
    Failed(Status),
}

impl QueryReport {
    /// A report for the query `id` of `user` running `sql`, starting now.
    pub fn new(id: &[u8], user: &str, sql: &str) -> Self {
        let hex = query_id_hex(id);
        let span = tracing::info_span!("query", query_id = %hex, user = %user);
        Self {
            id: Bytes::copy_from_slice(id),
            user: user.to_string(),
            sql: sql.to_string(),
            span,
            scans: ScanCollector::default(),
            started: Instant::now(),
        }
    }

    /// The query's span (enter it, or instrument futures with it, while working for it).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// What [`execute`] uses to observe the query's plans.
    pub fn observer(&self) -> Observer {
        Observer {
            span: self.span.clone(),
            scans: self.scans.clone(),
        }
    }

    /// `inner` reported: polled in the query's span, counted, and finished when it ends.
    pub fn stream(
        self,
        inner: BoxStream<'static, Result<RecordBatch, Status>>,
    ) -> BoxStream<'static, Result<RecordBatch, Status>> {
        ReportedStream {
            inner,
            report: Some(self),
            rows: 0,
            bytes: 0,
        }
        .boxed()
    }

    /// Finishes the report of a write that ran once and wrote `result` rows.
    pub fn write_finished(self, result: &Result<u64, Status>) {
        match result {
            Ok(rows) => self.finish(*rows, 0, Outcome::Complete),
            Err(status) => self.finish(0, 0, Outcome::Failed(status.clone())),
        }
    }

    fn finish(self, rows: u64, bytes: u64, outcome: Outcome) {
        let _entered = self.span.enter();
        let elapsed = self.started.elapsed();
        let scans = self.scans.finish();
        let m = metrics::global();
        m.scanned(&scans);
        m.executed(elapsed);
        let outcome_text = match &outcome {
            Outcome::Complete => "complete",
            Outcome::Dropped => "dropped by the client",
            Outcome::Failed(status) if status.code() == tonic::Code::Cancelled => "cancelled",
            Outcome::Failed(_) => "failed",
        };
        match &outcome {
            // A cancel ends the stream with CANCELLED: logged as before, as a finished query.
            Outcome::Failed(status) if status.code() != tonic::Code::Cancelled => {
                query_failed(Some(&self.id), &self.user, &self.sql, status);
            }
            _ => {
                let status = match outcome {
                    Outcome::Complete => QueryStatus::Ok,
                    _ => QueryStatus::Cancelled,
                };
                let code = (status == QueryStatus::Cancelled).then_some(tonic::Code::Cancelled);
                m.query_finished(status, code);
                tracing::info!(
                    query_id = %query_id_hex(&self.id),
                    user = %self.user,
                    sql = %self.sql,
                    rows,
                    bytes,
                    elapsed_ms = elapsed.as_millis() as u64,
                    outcome = outcome_text,
                    "query"
                );
            }
        }
        if elapsed >= slow_query_threshold() {
            m.slow_query();
            log_slow(&self, elapsed, rows, bytes, outcome_text, &scans);
        }
    }
}

/// The `slow query` line (module docs).
fn log_slow(
    report: &QueryReport,
    elapsed: Duration,
    rows: u64,
    bytes: u64,
    outcome: &str,
    scans: &[ScanStats],
) {
    let sum = |f: fn(&ScanStats) -> u64| scans.iter().map(f).sum::<u64>();
    let snapshots: Vec<String> = scans
        .iter()
        .map(|s| {
            format!(
                "{}@{}",
                s.table,
                s.snapshot_id
                    .map_or_else(|| "none".to_string(), |id| id.to_string())
            )
        })
        .collect();
    let details: Vec<String> = scans.iter().map(ScanStats::summary).collect();
    tracing::warn!(
        query_id = %query_id_hex(&report.id),
        user = %report.user,
        sql = %truncate(&report.sql, SLOW_SQL_CHARS),
        duration_ms = elapsed.as_millis() as u64,
        rows,
        bytes,
        outcome,
        snapshots = %snapshots.join(","),
        manifests_total = sum(|s| s.plan.manifests_total as u64),
        manifests_pruned = sum(|s| s.plan.manifests_pruned as u64),
        data_files_total = sum(|s| s.plan.data_files_seen as u64),
        data_files_pruned = sum(|s| s.data_files_pruned() as u64),
        data_files_scanned = sum(|s| s.plan.files_selected as u64),
        delete_files_planned = sum(|s| s.plan.delete_files as u64),
        delete_files_applied = sum(ScanStats::delete_files_applied),
        row_groups_pruned = sum(|s| s.row_groups_pruned),
        scans = %details.join("; "),
        "slow query"
    );
}

/// `text` cut to `max` characters, marked with `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The Arrow data size of a batch's columns, as sliced.
fn batch_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
        .sum()
}

/// A result stream that finishes its report when it ends (module docs).
struct ReportedStream {
    inner: BoxStream<'static, Result<RecordBatch, Status>>,
    /// Taken when finished.
    report: Option<QueryReport>,
    rows: u64,
    bytes: u64,
}

impl Stream for ReportedStream {
    type Item = Result<RecordBatch, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(span) = self.report.as_ref().map(|r| r.span.clone()) else {
            return Poll::Ready(None);
        };
        let next = {
            let _entered = span.enter();
            self.inner.poll_next_unpin(cx)
        };
        match &next {
            Poll::Ready(Some(Ok(batch))) => {
                self.rows += batch.num_rows() as u64;
                self.bytes += batch_bytes(batch);
            }
            Poll::Ready(Some(Err(status))) => {
                let status = status.clone();
                self.end(Outcome::Failed(status));
            }
            Poll::Ready(None) => self.end(Outcome::Complete),
            Poll::Pending => {}
        }
        next
    }
}

impl ReportedStream {
    fn end(&mut self, outcome: Outcome) {
        if let Some(report) = self.report.take() {
            report.finish(self.rows, self.bytes, outcome);
        }
    }
}

impl Drop for ReportedStream {
    fn drop(&mut self) {
        self.end(Outcome::Dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("héllo", 2), "hé…");
    }
}
