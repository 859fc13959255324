//! The SQL catalog's SQLite backend: one rusqlite connection behind a mutex, its blocking
//! calls on tokio's blocking pool.
//!
//! The compare-and-set runs in a `BEGIN IMMEDIATE` transaction (the write lock is taken
//! before the UPDATE reads the row).

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, Transaction, TransactionBehavior, params_from_iter};

use super::backend::{CREATE_TABLES, PROBE_TYPE_COLUMN, Param, Row, SqlBackend, Updated};

/// A SQLite database file holding the catalog's tables.
#[derive(Debug)]
pub(super) struct SqliteBackend {
    path: String,
    conn: Arc<Mutex<Connection>>,
}

/// The catalog's SQL (numbered `$N` placeholders) as SQLite writes it (`?N`).
fn sqlite_sql(sql: &str) -> String {
    sql.replace('$', "?")
}

impl SqliteBackend {
    /// Opens (creating if missing) the database at `path` and its catalog tables; also
    /// whether `iceberg_tables` has the `iceberg_type` column.
    pub(super) fn open(path: &Path) -> Result<(Self, bool), String> {
        let conn = Connection::open(path).map_err(|e| e.to_string())?;
        conn.execute_batch(CREATE_TABLES)
            .map_err(|e| e.to_string())?;
        let has_type_column = conn.prepare(PROBE_TYPE_COLUMN).is_ok();
        Ok((
            Self {
                path: path.display().to_string(),
                conn: Arc::new(Mutex::new(conn)),
            },
            has_type_column,
        ))
    }

    /// Runs `f` with the connection on the blocking pool. The outer error is a task that
    /// failed (it may have run `f` in part or whole).
    async fn run<T, F>(&self, f: F) -> Result<Result<T, String>, String>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, String> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let guard = conn
                .lock()
                .map_err(|_| "connection poisoned by an earlier panic".to_string())?;
            f(&guard)
        })
        .await
        .map_err(|e| format!("catalog task failed: {e}"))
    }
}

/// Reads every column of a row as text or NULL.
fn text_row(row: &rusqlite::Row<'_>, columns: usize) -> rusqlite::Result<Row> {
    (0..columns)
        .map(|i| row.get::<_, Option<String>>(i))
        .collect()
}

#[async_trait]
impl SqlBackend for SqliteBackend {
    fn describe(&self) -> &str {
        &self.path
    }

    async fn execute_batch(&self, sql: &str) -> Result<(), String> {
        let sql = sqlite_sql(sql);
        self.run(move |conn| conn.execute_batch(&sql).map_err(|e| e.to_string()))
            .await?
    }

    async fn execute(&self, sql: &str, params: &[Param]) -> Result<u64, String> {
        let sql = sqlite_sql(sql);
        let params = params.to_vec();
        self.run(move |conn| {
            conn.execute(&sql, params_from_iter(params.iter()))
                .map(|n| n as u64)
                .map_err(|e| e.to_string())
        })
        .await?
    }

    async fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>, String> {
        let sql = sqlite_sql(sql);
        let params = params.to_vec();
        self.run(move |conn| {
            let mut stmt = conn.prepare(&sql).map_err(|e| e.to_string())?;
            let columns = stmt.column_count();
            let rows = stmt
                .query_map(params_from_iter(params.iter()), |row| {
                    text_row(row, columns)
                })
                .map_err(|e| e.to_string())?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| e.to_string())
        })
        .await?
    }

    async fn update_in_transaction(&self, sql: &str, params: &[Param]) -> Result<Updated, String> {
        let sql = sqlite_sql(sql);
        let params = params.to_vec();
        let outcome = self
            .run(move |conn| {
                let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
                    .map_err(|e| e.to_string())?;
                Ok(match tx.execute(&sql, params_from_iter(params.iter())) {
                    Ok(n @ (0 | 1)) => match tx.commit() {
                        Ok(()) => Updated::Rows(n as u64),
                        Err(e) => Updated::Unknown(format!("COMMIT failed: {e}")),
                    },
                    // The primary key makes this impossible; rolled back on drop.
                    Ok(n) => return Err(format!("the UPDATE matched {n} rows (rolled back)")),
                    Err(e) => Updated::Unknown(format!("UPDATE failed: {e}")),
                })
            })
            .await;
        match outcome {
            Ok(result) => result,
            Err(task) => Ok(Updated::Unknown(task)),
        }
    }
}
