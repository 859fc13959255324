//! # petrel-server: the Flight SQL front door of Petrel
//!
//! The binary `petrel` (see `main.rs`, the composition root) serves Apache Iceberg tables over
//! Arrow Flight SQL. This crate is organised so that one request can be followed top to bottom:
//!
//! ```text
//! gRPC request
//!   │  flight_sql::service   FlightService wrapper: auth check on every call, GetSchema,
//!   │                        PollFlightInfo, CancelFlightInfo, session options; delegates the rest
//!   ▼
//! flight_sql::PetrelFlightSql  arrow-flight's FlightSqlService, one file per command family:
//!   │   statement.rs (query → FlightInfo → DoGet), prepared.rs (stateless handles, DoPut params),
//!   │   ingest.rs (bulk ingest), metadata.rs (catalogs, schemas, tables, keys), poll.rs,
//!   │   cancel.rs, sql_info.rs, xdbc.rs
//!   ▼
//! engine::QueryEngine     DataFusion SessionState with one IcebergCatalogProvider per catalog;
//!   │                     policy (what SQL may do), server memory pool with a per-query limit,
//!   │                     admission (work slots), cancellation (running queries)
//!   ▼
//! petrel_table_provider   catalogs, scan planning, Iceberg → Arrow
//! ```
//!
//! - [`config`]: clap flags (each with a `PETREL_*` env var) merged over an optional TOML file.
//! - [`auth`]: Basic → bearer-token handshake, Argon2 password hashes (remembered briefly,
//!   failures budgeted per peer), HMAC-signed tokens.
//! - [`session`]: Flight session options (current catalog and schema) keyed by cookie.
//! - [`error`]: the one function that maps any error to a gRPC [`tonic::Status`].
//! - [`tickets`]: Petrel's protobuf tickets and prepared-statement handles (`proto/`), signed
//!   with the server's ticket secret and bound to their user.
//! - [`sql_text`]: `?` → `$N` placeholders and Superset's bare timestamps, before parsing.
//! - [`telemetry`]: `tracing` to stderr as text or JSON; one log line per finished query.
//! - [`query_report`]: what a query reports when it ends: log line, metrics, slow-query log.
//! - [`scan_stats`]: the Iceberg metrics of a query's scans, read from its physical plans.
//! - [`metrics`]: Prometheus metrics and their HTTP endpoint (`metrics_addr`).
//! - [`demo`]: the embedded default warehouse with a demo table.
//! - [`information_schema`]: truthful numeric precisions in `information_schema.columns`.
//! - [`admission`]: the work slots every RPC that does work takes (queries, writes, planning,
//!   catalog-reading metadata calls).
//! - [`cancellation`]: running queries and the fate of recent ones, for CancelFlightInfo.
//! - [`policy`]: what SQL may do (queries; Iceberg DDL, writes and procedures unless
//!   `--read-only`), an allow-list decided on the logical plan.
//! - [`untrusted_ipc`]: Arrow IPC from clients decoded without trusting it (no panics, no
//!   allocations a message merely declares).
//! - [`engine_panics`]: DataFusion's panics while planning or running a statement answered as
//!   INTERNAL errors.
//! - [`server`]: binds, TLS, graceful shutdown.

pub mod admission;
pub mod auth;
pub mod cancellation;
pub mod cluster_commands;
pub mod config;
pub mod demo;
pub mod engine;
pub mod engine_panics;
pub mod error;
pub mod executor;
pub mod flight_sql;
pub mod information_schema;
mod locks;
pub mod memory;
pub mod metrics;
pub mod parameters;
mod plan_cache;
mod plan_freshness;
pub mod policy;
pub mod query_report;
pub mod scan_stats;
pub mod server;
pub mod session;
pub mod spill;
pub mod sql_limits;
pub mod sql_text;
mod statement_cache;
pub mod telemetry;
pub mod tickets;
pub mod untrusted_ipc;

/// Generated protobuf code (`proto/*.proto`).
pub mod proto {
    /// Petrel's own messages: tickets and prepared-statement handles.
    #[allow(missing_docs, unreachable_pub, clippy::all)]
    pub mod petrel {
        include!(concat!(env!("OUT_DIR"), "/petrel.v1.rs"));
    }
    /// Flight RPC session-option messages missing from arrow-flight 58.
    #[allow(missing_docs, unreachable_pub, clippy::all)]
    pub mod flight_session {
        include!(concat!(env!("OUT_DIR"), "/arrow.flight.protocol.rs"));
    }
}

/// The server's name as reported by GetSqlInfo.
pub const SERVER_NAME: &str = "Petrel";
/// The server's version as reported by GetSqlInfo and `petrel --version`.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
