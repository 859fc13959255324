//! Every integration test of this crate, in one test binary.
//!
//! Each file here was once a binary of its own. Each binary statically links DataFusion (about
//! 250 MB unoptimised), so forty of them filled CI's disk and spent minutes linking. nextest
//! still runs every test in a process of its own, so the tests stay as isolated as before.
//! Add a new test file as a module below; `common` holds the shared helpers.

mod common;

mod cancel_poll_admission;
mod client_examples;
mod errors;
mod flight_sql;
mod fuzz_front_end;
mod hardening_auth;
mod hardening_tickets;
mod lifecycle;
mod malformed_uploads;
mod operate;
mod postgres_catalog;
mod rest_catalog;
mod row_level_flight_sql;
mod s3;
mod sql_info;
mod sql_policy;
mod statement_cache;
mod table_changes_stream;
mod writes;
