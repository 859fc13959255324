//! Logging: one `tracing` stack for the whole process (the table provider logs through
//! `tracing` too, and `log` records of dependencies are forwarded to it), to stderr, as text or
//! JSON lines (`log_format`, `--log-format text|json`), filtered by `RUST_LOG` (default `info`
//! for Petrel, `warn` for dependencies).
//!
//! Every query leaves one line: `query` (info) when its results were streamed, cancelled or
//! dropped by the client, `query failed` (warn) when it failed at any step (planning in
//! GetFlightInfo, preparing, binding, execution). Both carry the query id (hex; a failure
//! before a ticket existed gets a fresh one), the user (`anonymous` without authentication)
//! and the SQL text; a failure adds the gRPC status code (`code`) and message (`error`). A query
//! that took `slow_query_ms` or more adds a `slow query` line with its Iceberg scans
//! (`query_report`). Events during a query's execution are inside its `query` span (fields
//! `query_id`, `user`), which JSON lines list under `span` / `spans`.
//!
//! Never logged: bound parameter values, passwords, `authorization` headers, bearer tokens,
//! session cookies (a failed password check logs the user name and peer only).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use tonic::Status;
use tracing_subscriber::EnvFilter;

use crate::metrics::{self, QueryStatus};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (colours only on a terminal).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`, `span`, `spans`).
    Json,
}

/// Default `slow_query_ms`.
pub const DEFAULT_SLOW_QUERY_MS: u64 = 5000;

static SLOW_QUERY_MS: AtomicU64 = AtomicU64::new(DEFAULT_SLOW_QUERY_MS);

/// Sets the slow-query threshold (`slow_query_ms`; 0 logs every query as slow).
pub fn set_slow_query_threshold(ms: u64) {
    SLOW_QUERY_MS.store(ms, Ordering::Relaxed);
}

/// Queries taking this long or longer are logged as slow.
pub fn slow_query_threshold() -> Duration {
    Duration::from_millis(SLOW_QUERY_MS.load(Ordering::Relaxed))
}

/// What is logged when `RUST_LOG` is unset. Ballista's scheduler logs an error for every stage
/// whose metrics it cannot lay over its plan, which Petrel's shipped scans (metrics of the scan
/// rebuilt on the executor) always are: that line is noise, not a failure.
pub const DEFAULT_LOG_FILTER: &str =
    "warn,petrel=info,petrel_server=info,petrel_distributed=info,ballista_scheduler::display=off";

/// Installs the global subscriber (once; later calls are ignored). Text has colours only when
/// stderr is a terminal, so log files and `docker logs` hold plain text.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}

/// A query id as logged: lowercase hex.
pub fn query_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Logs a failed query (see the module docs) and counts it. `query_id` is None for a failure
/// before any ticket existed (creating or binding a prepared statement).
pub fn query_failed(query_id: Option<&[u8]>, user: &str, sql: &str, status: &Status) {
    let id = match query_id {
        Some(id) if !id.is_empty() => query_id_hex(id),
        _ => query_id_hex(&crate::auth::random_bytes(16)),
    };
    metrics::global().query_finished(QueryStatus::of_code(status.code()), Some(status.code()));
    tracing::warn!(
        query_id = %id,
        user = %user,
        code = ?status.code(),
        error = %status.message(),
        sql = %sql,
        "query failed"
    );
}
