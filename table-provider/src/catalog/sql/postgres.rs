//! The SQL catalog's PostgreSQL backend: `tokio-postgres` (plain TCP or a Unix socket, no
//! TLS) with a small pool of connections shared by every query of the server.
//!
//! Connections are made on demand up to [`MAX_CONNECTIONS`] and kept while they work; a
//! closed one is dropped and replaced on the next call. Connecting (TCP, startup and
//! authentication) is bounded by the URI's `connect_timeout` or [`DEFAULT_CONNECT_TIMEOUT`],
//! so an unreachable or silent server is an error, not a hang.
//!
//! The compare-and-set is `BEGIN; UPDATE …; COMMIT` at READ COMMITTED: a concurrent UPDATE of
//! the same row waits for the first to end and then re-checks its WHERE clause against the
//! row as committed, so of several swaps from the same base exactly one changes the row.
//!
//! Messages name the database as `postgresql://user@host:port/db`: never the password.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::config::Host;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls};

use super::backend::{Param, Row, SqlBackend, Updated};

/// Most connections one catalog opens at once (further calls wait for one).
const MAX_CONNECTIONS: usize = 16;

/// Connect timeout when the URI sets none.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL database holding the catalog's tables.
#[derive(Debug)]
pub(super) struct PostgresBackend {
    /// `postgresql://user@host:port/db`.
    describe: String,
    config: Config,
    connect_timeout: Duration,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
}

/// A connection taken from the pool; back to the pool on drop unless it is closed.
struct Pooled<'a> {
    client: Option<Client>,
    backend: &'a PostgresBackend,
    _permit: OwnedSemaphorePermit,
}

impl Pooled<'_> {
    fn client(&mut self) -> Result<&mut Client, String> {
        self.client
            .as_mut()
            .ok_or_else(|| "connection already returned".to_string())
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
            && let Ok(mut idle) = self.backend.idle.lock()
        {
            idle.push(client);
        }
    }
}

/// A tokio-postgres error with its cause (`Display` alone says only "db error").
fn error_message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// `postgresql://user@host:port/db` of a parsed URI (no password).
fn describe(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let db = config.get_dbname().or(config.get_user()).unwrap_or("");
    format!("postgresql://{user}{}/{db}", hosts.join(","))
}

impl PostgresBackend {
    /// A backend for `uri` (`postgresql://user:password@host:port/db`, or libpq's
    /// `key=value` form). Nothing is connected yet. The error names no password.
    pub(super) fn new(uri: &str) -> Result<Self, String> {
        let mut config = Config::from_str(uri).map_err(|e| {
            format!(
                "invalid PostgreSQL URI (expected postgresql://user:password@host:port/db): {}",
                error_message(&e)
            )
        })?;
        if config.get_hosts().is_empty() {
            return Err("the PostgreSQL URI names no host".into());
        }
        let connect_timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        config.connect_timeout(connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("petrel");
        }
        Ok(Self {
            describe: describe(&config),
            config,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        })
    }

    /// A working connection: an idle one, else a new one.
    async fn get(&self) -> Result<Pooled<'_>, String> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| "connection pool closed".to_string())?;
        let idle = loop {
            let next = self
                .idle
                .lock()
                .map_err(|_| "connection pool poisoned by an earlier panic".to_string())?
                .pop();
            match next {
                Some(client) if client.is_closed() => continue,
                other => break other,
            }
        };
        let client = match idle {
            Some(client) => client,
            None => self.connect().await?,
        };
        Ok(Pooled {
            client: Some(client),
            backend: self,
            _permit: permit,
        })
    }

    /// A new connection, its IO driven by a task of its own.
    async fn connect(&self) -> Result<Client, String> {
        // The config's timeout bounds each TCP connect; this one the whole handshake.
        let connecting = self.config.connect(NoTls);
        let (client, connection) = tokio::time::timeout(self.connect_timeout * 2, connecting)
            .await
            .map_err(|_| {
                format!(
                    "cannot connect: no answer within {} s",
                    (self.connect_timeout * 2).as_secs()
                )
            })?
            .map_err(|e| format!("cannot connect: {}", error_message(&e)))?;
        let describe = self.describe.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(database = %describe, "catalog database connection ended: {}", error_message(&e));
            }
        });
        Ok(client)
    }
}

/// The parameters as tokio-postgres takes them.
fn sql_params(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// Every column of a row as text or NULL.
fn text_row(row: &tokio_postgres::Row) -> Result<Row, String> {
    (0..row.len())
        .map(|i| {
            row.try_get::<_, Option<String>>(i)
                .map_err(|e| error_message(&e))
        })
        .collect()
}

#[async_trait]
impl SqlBackend for PostgresBackend {
    fn describe(&self) -> &str {
        &self.describe
    }

    async fn execute_batch(&self, sql: &str) -> Result<(), String> {
        let mut conn = self.get().await?;
        conn.client()?
            .batch_execute(sql)
            .await
            .map_err(|e| error_message(&e))
    }

    async fn execute(&self, sql: &str, params: &[Param]) -> Result<u64, String> {
        let mut conn = self.get().await?;
        conn.client()?
            .execute(sql, &sql_params(params))
            .await
            .map_err(|e| error_message(&e))
    }

    async fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>, String> {
        let mut conn = self.get().await?;
        let rows = conn
            .client()?
            .query(sql, &sql_params(params))
            .await
            .map_err(|e| error_message(&e))?;
        rows.iter().map(text_row).collect()
    }

    async fn update_in_transaction(&self, sql: &str, params: &[Param]) -> Result<Updated, String> {
        let mut conn = self.get().await?;
        let tx = conn
            .client()?
            .transaction()
            .await
            .map_err(|e| format!("BEGIN failed: {}", error_message(&e)))?;
        // Dropping `tx` uncommitted rolls it back.
        Ok(match tx.execute(sql, &sql_params(params)).await {
            Ok(n @ (0 | 1)) => match tx.commit().await {
                Ok(()) => Updated::Rows(n),
                Err(e) => Updated::Unknown(format!("COMMIT failed: {}", error_message(&e))),
            },
            Ok(n) => return Err(format!("the UPDATE matched {n} rows (rolled back)")),
            Err(e) => Updated::Unknown(format!("UPDATE failed: {}", error_message(&e))),
        })
    }
}
