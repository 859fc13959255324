//! Logging: `tracing` to stderr, filtered by `RUST_LOG` (default `info` for Petrel, `warn`
//! for dependencies).
//!
//! Every query leaves one line: `query` (info) when its results were streamed, cancelled or
//! dropped by the client, `query failed` (warn) when it failed at any step (planning in
//! GetFlightInfo, preparing, binding, execution). Both carry the query id (hex; a failure
//! before a ticket existed gets a fresh one), the user (`anonymous` without authentication)
//! and the SQL text; a failure adds the gRPC status code (`code`) and message (`error`). Bound
//! parameter values are never logged.

use std::io::IsTerminal;

use tonic::Status;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (once; later calls are ignored). Colours only when stderr
/// is a terminal, so log files and `docker logs` hold plain text.
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,petrel=info,petrel_server=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// A query id as logged: lowercase hex.
pub fn query_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Logs a failed query (see the module docs). `query_id` is None for a failure before any
/// ticket existed (creating or binding a prepared statement).
pub fn query_failed(query_id: Option<&[u8]>, user: &str, sql: &str, status: &Status) {
    let id = match query_id {
        Some(id) if !id.is_empty() => query_id_hex(id),
        _ => query_id_hex(&crate::auth::random_bytes(16)),
    };
    tracing::warn!(
        query_id = %id,
        user = %user,
        code = ?status.code(),
        error = %status.message(),
        sql = %sql,
        "query failed"
    );
}
