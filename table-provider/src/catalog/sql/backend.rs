//! What the SQL catalog needs from a database, and the SQL both databases run.
//!
//! [`super::SqlCatalog`] holds the catalog's logic and every statement's text; a
//! [`SqlBackend`] only runs statements: SQLite ([`super::sqlite`]) and PostgreSQL
//! ([`super::postgres`]). Every value the catalog reads or writes is text (or NULL), so the
//! interface is text in, text out.
//!
//! Statements are written with PostgreSQL's numbered placeholders (`$1`, `$2`, a number may
//! repeat); the SQLite backend runs them as SQLite's `?1`, `?2` (same numbering). `$` appears
//! in no other role in the catalog's SQL.

use std::fmt;

use async_trait::async_trait;

/// One bound parameter: text or NULL.
pub(super) type Param = Option<String>;

/// One result row: every column as text or NULL.
pub(super) type Row = Vec<Option<String>>;

/// The catalog's tables, as PyIceberg's `SqlCatalog` creates them (its SQLAlchemy models,
/// schema "v1", which Iceberg Java's `JdbcCatalog` V1 schema matches): `CREATE TABLE` is
/// only run for tables that do not exist, so databases made by older PyIceberg or Java
/// versions (without `iceberg_type`) are left as they are.
pub(super) const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// PyIceberg's probe for the V1 schema: succeeds when `iceberg_tables` has `iceberg_type`.
pub(super) const PROBE_TYPE_COLUMN: &str = "SELECT iceberg_type FROM iceberg_tables LIMIT 0";

/// How the compare-and-set transaction ended once its UPDATE had been sent.
#[derive(Debug)]
pub(super) enum Updated {
    /// The UPDATE changed this many rows (0 or 1) and the transaction committed.
    Rows(u64),
    /// The UPDATE or the COMMIT failed (or the call was lost): it may or may not have
    /// happened.
    Unknown(String),
}

/// A database holding the catalog's tables. Errors are messages that name no password; the
/// catalog adds [`SqlBackend::describe`] and the catalog's name.
#[async_trait]
pub(super) trait SqlBackend: fmt::Debug + Send + Sync {
    /// The database, for messages: a SQLite file's path, or `postgresql://user@host:port/db`
    /// (never a password).
    fn describe(&self) -> &str;

    /// Runs several `;`-separated statements without parameters.
    async fn execute_batch(&self, sql: &str) -> Result<(), String>;

    /// Runs one statement; the number of rows it changed.
    async fn execute(&self, sql: &str, params: &[Param]) -> Result<u64, String>;

    /// Runs one query; its rows, every column read as text.
    async fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>, String>;

    /// Runs one UPDATE in a transaction of its own and commits it when it changed at most one
    /// row (more is rolled back and an error). `Err` means nothing happened (the transaction
    /// could not begin); once the UPDATE was sent, every failure is [`Updated::Unknown`].
    async fn update_in_transaction(&self, sql: &str, params: &[Param]) -> Result<Updated, String>;
}
