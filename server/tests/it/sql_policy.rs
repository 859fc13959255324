//! The SQL policy, as sqllogictest files (`server/tests/slt/*.slt`) run against the real
//! `petrel` binary over Flight SQL: what SQL may do (queries, Iceberg DDL and writes) and what
//! it may not (COPY, CREATE EXTERNAL TABLE, SET, file-reading functions, DataFusion DDL, writes
//! to other tables, writes hidden in EXPLAIN ANALYZE), with CTE variants.
//!
//! Each file runs twice: as plain statements (CommandStatementQuery: GetFlightInfo, DoGet) and
//! as prepared statements (CreatePreparedStatement, then its query), so a refusal holds on both
//! paths. Errors are `<gRPC code>: <message>`, so a record can assert the code. No error message
//! may name the server's warehouse directory.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow_flight::sql::client::FlightSqlServiceClient;
use async_trait::async_trait;
use common::{Petrel, fetch, to_status};
use sqllogictest::{DBOutput, DefaultColumnType, Runner};
use tonic::transport::Channel;

/// How the runner sends each statement.
#[derive(Debug, Clone, Copy)]
enum Path_ {
    Statement,
    Prepared,
}

/// A Flight SQL connection as a sqllogictest database.
struct FlightSqlDb {
    client: FlightSqlServiceClient<Channel>,
    path: Path_,
    /// Text no error may contain (the warehouse directory), and the errors that did.
    secret: String,
    leaks: Arc<Mutex<Vec<String>>>,
}

#[derive(Debug)]
struct StatusError(String);

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StatusError {}

impl FlightSqlDb {
    async fn batches(&mut self, sql: &str) -> Result<Vec<RecordBatch>, tonic::Status> {
        match self.path {
            Path_::Statement => {
                let info = self
                    .client
                    .execute(sql.to_string(), None)
                    .await
                    .map_err(to_status)?;
                fetch(&mut self.client, &info).await
            }
            Path_::Prepared => {
                let mut prepared = self
                    .client
                    .prepare(sql.to_string(), None)
                    .await
                    .map_err(to_status)?;
                let info = prepared.execute().await.map_err(to_status)?;
                let out = fetch(&mut self.client, &info).await;
                let _ = prepared.close().await;
                out
            }
        }
    }
}

#[async_trait]
impl sqllogictest::AsyncDB for FlightSqlDb {
    type Error = StatusError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, StatusError> {
        let batches = match self.batches(sql).await {
            Ok(b) => b,
            Err(status) => {
                let text = format!("{:?}: {}", status.code(), status.message());
                if text.contains(&self.secret) {
                    self.leaks
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(format!("{sql} -> {text}"));
                }
                return Err(StatusError(text));
            }
        };
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        let mut types = Vec::new();
        for batch in &batches {
            types = batch
                .schema()
                .fields()
                .iter()
                .map(|f| {
                    if f.data_type().is_integer() {
                        DefaultColumnType::Integer
                    } else if f.data_type().is_floating() {
                        DefaultColumnType::FloatingPoint
                    } else {
                        DefaultColumnType::Text
                    }
                })
                .collect();
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StatusError(e.to_string()))?;
            for row in 0..batch.num_rows() {
                rows.push(
                    formatters
                        .iter()
                        .map(|f| f.value(row).to_string())
                        .collect(),
                );
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

fn slt_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", dir.display());
    files
}

/// Runs every `.slt` file whose name starts with `prefix` on `server`, on both paths.
async fn run_files(server: &Petrel, prefix: &str) {
    let secret = server.dir.path().to_string_lossy().into_owned();
    let leaks = Arc::new(Mutex::new(Vec::new()));
    for file in slt_files() {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.starts_with(prefix) {
            continue;
        }
        for path in [Path_::Statement, Path_::Prepared] {
            let channel = server.channel().await;
            let secret = secret.clone();
            let leaks = Arc::clone(&leaks);
            let mut runner = Runner::new(move || {
                let client = FlightSqlServiceClient::new(channel.clone());
                let db = FlightSqlDb {
                    client,
                    path,
                    secret: secret.clone(),
                    leaks: Arc::clone(&leaks),
                };
                async move { Ok::<_, StatusError>(db) }
            });
            // Each run starts from a fresh namespace: the file names it `${path}`.
            runner.set_var("path".into(), format!("{path:?}").to_lowercase());
            runner
                .run_file_async(&file)
                .await
                .unwrap_or_else(|e| panic!("{} ({path:?}): {}", file.display(), e.display(true)));
        }
    }
    let leaks = leaks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert!(leaks.is_empty(), "errors naming the warehouse: {leaks:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_policy_allows_queries_and_iceberg_writes_and_refuses_the_rest() {
    let server = Petrel::start(&[]);
    run_files(&server, "policy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_refuses_every_write() {
    let server = Petrel::start(&["--read-only"]);
    run_files(&server, "read_only").await;
}
