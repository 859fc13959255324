//! Bulk ingest: `CommandStatementIngest` over DoPut (ADBC's `adbc_ingest`).
//!
//! The uploaded Arrow stream becomes one append to an Iceberg table, written by the same plan
//! as `INSERT INTO`: a one-shot DataFusion source fed by the DoPut stream, a projection that
//! matches and casts the columns, and `IcebergTableProvider::insert_into`
//! (IcebergWriteExec → CoalescePartitionsExec → IcebergCommitExec). So ingest has INSERT's
//! writers, NOT NULL checks, metrics, file cleanup on failure and commit loop, and commits one
//! snapshot. The answer is the number of rows written (`DoPutUpdateResult.record_count`).
//!
//! **Streaming.** Nothing collects the upload: the source hands DataFusion the decoded DoPut
//! stream, so batches are written as they arrive and HTTP/2 flow control holds the client back
//! while the writers are busy. Only the first batch is read before planning (to learn the
//! schema when a client sends it with the first batch rather than alone).
//!
//! **Target.** `table` in `schema` (a namespace, dotted for nested levels; default: the
//! session's schema) of `catalog` (default: the session's catalog), which must be one of the
//! server's Iceberg catalogs. The modes, as ADBC maps them onto `TableDefinitionOptions`
//! (`if_not_exist` / `if_exists`):
//!
//! | ADBC mode       | table missing        | table exists                       |
//! |-----------------|----------------------|------------------------------------|
//! | `create`        | Create               | Fail (ALREADY_EXISTS)              |
//! | `append`        | Fail (NOT_FOUND)     | Append                             |
//! | `replace`       | Create               | Replace (one commit, history kept) |
//! | `create_append` | Create               | Append                             |
//!
//! The protocol's remaining combination, FAIL / REPLACE, replaces a table that exists and fails
//! otherwise; FAIL / FAIL (never writes) and an UNSPECIFIED option are refused.
//!
//! A new table's schema is the upload's Arrow schema with fresh field ids
//! (`spec::arrow_schema_to_iceberg`: small integers widen to int, every timestamp unit becomes
//! microseconds, dictionaries their values, non-nullable fields required); the table is
//! unpartitioned, format version 2, with the defaults of `CREATE TABLE`
//! (`ddl::default_table_metadata`), at the catalog's default location. If the write then fails,
//! the new table is dropped again (with its files): a failed `create` leaves nothing behind.
//!
//! **Appending** matches the upload's columns to the table's **by name** (order is free; an
//! exact name first, else a unique case-insensitive match). A table column the upload lacks is
//! written as NULL if it is optional and is an error if it is required; an upload column the
//! table lacks is an error. Types are cast as `INSERT` casts (`Expr::cast_to`: whatever Arrow
//! can cast; values that do not convert fail the statement). Every mismatch is
//! INVALID_ARGUMENT naming the column and the table, found before anything is written; a
//! failure while writing deletes the files already written. Either way nothing is committed.
//!
//! **Replace** replaces the table in one commit, as Iceberg's `REPLACE TABLE … AS SELECT`
//! (Java's `newReplaceTableTransaction`; see `petrel_table_provider::commit::replace`): the
//! table keeps its uuid, location, properties, snapshots and history; the upload's schema
//! becomes its current schema (a schema id of its own unless an earlier schema of the table is
//! the same; a column whose name the current schema has keeps that column's field id, the
//! others get fresh ids above `last-column-id`, as Java's `buildReplacement` assigns them), the unpartitioned spec and the unsorted order become current, and the
//! upload's rows are the first snapshot of the `main` branch (no parent: its totals count only
//! them) — all in the same new metadata version, through the commit loop. Nothing is dropped
//! or recreated: older snapshots stay readable by time travel (with their own schema), and an
//! upload or write that fails leaves the table exactly as it was (no commit, the files written
//! deleted). Readers scanning the old version meanwhile keep reading its files. An empty upload
//! commits an empty snapshot (the table is then empty, with the new schema). `upsert=true` is
//! refused with replace (INVALID_ARGUMENT).
//!
//! **Upserts.** The command option `upsert=true` (in `CommandStatementIngest.options`; `false`
//! is the default, any other value is INVALID_ARGUMENT) makes the ingest an upsert, as a table
//! with `write.upsert.enabled=true` makes every ingest: rows replace the table's rows with the
//! same key (its identifier fields; a table without them is refused), written with
//! equality-delete files (`petrel_table_provider::write::upsert`). An upsert's upload is kept one
//! ordered stream (no round-robin repartitioning), so a key repeated in the upload keeps its
//! last row. (ADBC's Flight SQL driver sends no ingest options: other clients, or a raw
//! `CommandStatementIngest`, set it.)
//!
//! Refused: `temporary` tables (UNIMPLEMENTED: Iceberg tables are catalog tables), a
//! `transaction_id` (INVALID_ARGUMENT: each statement commits on its own), a mode left
//! unspecified (INVALID_ARGUMENT, as the protocol asks), and any ingest on a `--read-only`
//! server (PERMISSION_DENIED). Authentication and the session's defaults are the service's,
//! as for `CommandStatementUpdate`.

use std::sync::{Arc, Mutex};

use arrow::compute::can_cast_types;
use arrow::datatypes::SchemaRef;
use arrow_flight::error::FlightError;
use arrow_flight::sql::server::PeekableFlightDataStream;
use arrow_flight::sql::{CommandStatementIngest, TableExistsOption, TableNotExistOption};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::common::{Column, DFSchema, DataFusionError, ScalarValue, TableReference};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::provider_as_source;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlanBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use petrel_table_provider::Error as TableError;
use petrel_table_provider::IcebergTableProvider;
use petrel_table_provider::catalog::{Catalog, LoadedTable, Namespace, TableIdent};
use petrel_table_provider::commit::TableReplacement;
use petrel_table_provider::ddl::default_table_metadata;
use petrel_table_provider::spec::arrow_schema_to_iceberg;
use tonic::Status;

use crate::engine::CatalogSource;
use crate::error::{df_status, to_status};
use crate::executor::QueryExecutor;
use crate::proto::petrel::SessionDefaults;
use crate::telemetry::query_failed;
use crate::untrusted_ipc::UntrustedFlightData;

/// What to do with the target table, from `TableDefinitionOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mode {
    /// Create the table when it is missing (else: fail).
    create_if_missing: bool,
    /// What to do when it exists.
    if_exists: IfExists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IfExists {
    Fail,
    Append,
    /// Replace it (new schema, the upload its only rows) in one commit that keeps its history.
    Replace,
}

impl Mode {
    fn from_command(cmd: &CommandStatementIngest) -> Result<Self, Status> {
        let Some(options) = &cmd.table_definition_options else {
            return Err(Status::invalid_argument(
                "bulk ingest needs table_definition_options (if_not_exist, if_exists): \
                 ADBC's modes are create, append, replace and create_append",
            ));
        };
        let missing = TableNotExistOption::try_from(options.if_not_exist)
            .unwrap_or(TableNotExistOption::Unspecified);
        let exists = TableExistsOption::try_from(options.if_exists)
            .unwrap_or(TableExistsOption::Unspecified);
        let create_if_missing = match missing {
            TableNotExistOption::Create => Some(true),
            TableNotExistOption::Fail => Some(false),
            TableNotExistOption::Unspecified => None,
        };
        let if_exists = match exists {
            TableExistsOption::Fail => Some(IfExists::Fail),
            TableExistsOption::Append => Some(IfExists::Append),
            TableExistsOption::Replace => Some(IfExists::Replace),
            TableExistsOption::Unspecified => None,
        };
        match (create_if_missing, if_exists) {
            (Some(false), Some(IfExists::Fail)) => Err(Status::invalid_argument(
                "bulk ingest with if_not_exist = FAIL and if_exists = FAIL can never write; \
                 use ADBC's modes create, append, replace or create_append",
            )),
            (Some(create_if_missing), Some(if_exists)) => Ok(Self {
                create_if_missing,
                if_exists,
            }),
            _ => Err(Status::invalid_argument(format!(
                "bulk ingest: table_definition_options must be specified (got if_not_exist = \
                 {}, if_exists = {})",
                missing.as_str_name(),
                exists.as_str_name()
            ))),
        }
    }

    /// ADBC's name for the mode.
    fn name(self) -> &'static str {
        match (self.create_if_missing, self.if_exists) {
            (true, IfExists::Fail) => "create",
            (false, IfExists::Append) => "append",
            (true, IfExists::Replace) => "replace",
            (true, IfExists::Append) => "create_append",
            (false, IfExists::Replace) => "replace an existing table",
            (false, IfExists::Fail) => "none",
        }
    }
}

/// Runs one `CommandStatementIngest`: the rows of `stream` into the command's table under
/// `session`, for `user`. Returns the rows written.
pub(crate) async fn ingest(
    engine: &dyn QueryExecutor,
    cmd: CommandStatementIngest,
    session: SessionDefaults,
    stream: PeekableFlightDataStream,
    user: &str,
) -> Result<i64, Status> {
    let query_id = crate::auth::random_bytes(16);
    let mut description = format!("bulk ingest into {}", cmd.table);
    // run_write logs its own outcome; everything before it is logged here.
    let mut logged = false;
    let result = async {
        let mode = check_command(engine, &cmd)?;
        let upsert = upsert_option(&cmd)?;
        let ctx = engine.context(&session)?;
        let target = Target::resolve(engine, &ctx, &cmd)?;
        description = format!("bulk ingest ({}) into {}", mode.name(), target.display());
        let upload = Upload::open(stream).await.map_err(|s| target.name_in(s))?;
        let mut prepared = target.prepare(mode, &upload.schema).await?;
        let replacement = prepared.take_replacement();
        if replacement.is_some() && upsert {
            return Err(Status::invalid_argument(format!(
                "bulk ingest into {}: upsert=true cannot be combined with mode {} (a replaced \
                 table has no rows to upsert)",
                target.display(),
                mode.name()
            )));
        }
        let written = match plan_ingest(&ctx, &target, upload, upsert, replacement).await {
            Ok(frame) => {
                logged = true;
                engine.run_write(frame, &query_id, user, &description).await
            }
            Err(status) => Err(status),
        };
        match written {
            Ok(rows) => i64::try_from(rows).map_err(|_| Status::internal("row count exceeds i64")),
            Err(status) => {
                prepared.undo(&target).await;
                Err(target.name_in(status))
            }
        }
    }
    .await;
    if let Err(status) = &result
        && !logged
    {
        query_failed(Some(&query_id), user, &description, status);
    }
    result
}

/// Refusals that need no table: read-only server, transactions, temporary tables, no mode, no
/// table name.
fn check_command(engine: &dyn QueryExecutor, cmd: &CommandStatementIngest) -> Result<Mode, Status> {
    if engine.options().read_only {
        return Err(Status::permission_denied(
            "this server is read-only (read_only / --read-only): bulk ingest is refused",
        ));
    }
    if cmd.transaction_id.is_some() {
        return Err(Status::invalid_argument(
            "transactions are not supported (each bulk ingest commits on its own)",
        ));
    }
    if cmd.temporary {
        return Err(Status::unimplemented(
            "temporary tables are not supported: bulk ingest writes Iceberg tables of a catalog",
        ));
    }
    let mode = Mode::from_command(cmd)?;
    if cmd.table.is_empty() {
        return Err(Status::invalid_argument("bulk ingest needs a table name"));
    }
    Ok(mode)
}

/// The `upsert` option of the command (`true` / `false`, any case; default false).
fn upsert_option(cmd: &CommandStatementIngest) -> Result<bool, Status> {
    let Some((_, value)) = cmd
        .options
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("upsert"))
    else {
        return Ok(false);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Status::invalid_argument(format!(
            "bulk ingest option upsert={value:?}: expected true or false"
        ))),
    }
}

/// The table an ingest writes: an Iceberg catalog of the server and a name in it.
struct Target {
    catalog_name: String,
    catalog: Arc<dyn Catalog>,
    ident: TableIdent,
}

impl Target {
    fn resolve(
        engine: &dyn QueryExecutor,
        ctx: &SessionContext,
        cmd: &CommandStatementIngest,
    ) -> Result<Self, Status> {
        let defaults = ctx.state().config().options().catalog.clone();
        let catalog_name = cmd
            .catalog
            .clone()
            .filter(|c| !c.is_empty())
            .unwrap_or(defaults.default_catalog);
        let schema = cmd
            .schema
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(defaults.default_schema);
        let catalog = match engine.catalogs().iter().find(|(n, _)| *n == catalog_name) {
            Some((_, CatalogSource::Iceberg(c))) => Arc::clone(c),
            Some(_) => {
                return Err(Status::invalid_argument(format!(
                    "catalog {catalog_name} is not an Iceberg catalog: bulk ingest writes only \
                     Iceberg tables"
                )));
            }
            None => {
                return Err(Status::not_found(format!(
                    "catalog {catalog_name} does not exist (catalogs: {})",
                    engine
                        .catalogs()
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        Ok(Self {
            catalog_name,
            catalog,
            ident: TableIdent::new(Namespace::from_dotted(&schema), cmd.table.clone()),
        })
    }

    fn display(&self) -> String {
        format!("{}.{}", self.catalog_name, self.ident)
    }

    /// The name DataFusion resolves (no SQL parsing: any characters are fine).
    fn reference(&self) -> TableReference {
        TableReference::full(
            self.catalog_name.clone(),
            self.ident.namespace.dotted(),
            self.ident.name.clone(),
        )
    }

    fn status(&self, e: &TableError) -> Status {
        self.name_in(to_status(e))
    }

    /// `status` with this table named in its message (once).
    fn name_in(&self, status: Status) -> Status {
        let table = self.display();
        if status.message().contains(&table) {
            return status;
        }
        Status::new(
            status.code(),
            format!("bulk ingest into {table}: {}", status.message()),
        )
    }

    async fn load(&self) -> Result<Option<LoadedTable>, Status> {
        match self.catalog.load_table(&self.ident).await {
            Ok(t) => Ok(Some(t)),
            Err(TableError::NotFound(_)) => Ok(None),
            Err(e) => Err(self.status(&e)),
        }
    }

    /// Makes the table ready for the append `mode` asks for: checks that it exists or not,
    /// creates it (replacing the old one) from `schema`.
    async fn prepare(&self, mode: Mode, schema: &SchemaRef) -> Result<Prepared, Status> {
        let exists = self.load().await?.is_some();
        if !exists {
            if !mode.create_if_missing {
                return Err(Status::not_found(format!(
                    "table {} does not exist (ingest mode {}; use create or create_append)",
                    self.display(),
                    mode.name()
                )));
            }
            return match self.create(schema).await {
                Ok(_) => Ok(Prepared::Created),
                // Another writer created it meanwhile: append to theirs.
                Err(e)
                    if mode.if_exists == IfExists::Append
                        && e.code() == tonic::Code::AlreadyExists =>
                {
                    Ok(Prepared::Existing)
                }
                Err(e) => Err(e),
            };
        }
        match mode.if_exists {
            IfExists::Fail => Err(Status::already_exists(format!(
                "table {} already exists (ingest mode {}; use append, create_append or replace)",
                self.display(),
                mode.name()
            ))),
            IfExists::Append => Ok(Prepared::Existing),
            IfExists::Replace => {
                let iceberg = self.new_schema(schema)?;
                Ok(Prepared::Replacing(Some(Box::new(
                    TableReplacement::unpartitioned(iceberg),
                ))))
            }
        }
    }

    /// The upload's schema as an Iceberg schema (fresh field ids).
    fn new_schema(&self, schema: &SchemaRef) -> Result<iceberg::spec::Schema, Status> {
        arrow_schema_to_iceberg(schema).map_err(|e| {
            Status::invalid_argument(format!(
                "bulk ingest cannot create table {} from the uploaded schema: {e}",
                self.display()
            ))
        })
    }

    async fn new_schema_and_location(
        &self,
        schema: &SchemaRef,
    ) -> Result<(iceberg::spec::Schema, String), Status> {
        let iceberg = self.new_schema(schema)?;
        let location = self
            .catalog
            .default_table_location(&self.ident)
            .await
            .map_err(|e| self.status(&e))?;
        Ok((iceberg, location))
    }

    async fn create(&self, schema: &SchemaRef) -> Result<LoadedTable, Status> {
        let (iceberg, location) = self.new_schema_and_location(schema).await?;
        self.register(iceberg, location).await
    }

    async fn register(
        &self,
        schema: iceberg::spec::Schema,
        location: String,
    ) -> Result<LoadedTable, Status> {
        let metadata = default_table_metadata(schema, location).map_err(|e| self.status(&e))?;
        match self.catalog.create_table(&self.ident, metadata).await {
            Ok(t) => Ok(t),
            Err(TableError::AlreadyExists(_)) => Err(Status::already_exists(format!(
                "table {} already exists",
                self.display()
            ))),
            Err(TableError::NotFound(_)) => Err(Status::not_found(format!(
                "bulk ingest into {}: schema (namespace) {} does not exist in catalog {}",
                self.display(),
                self.ident.namespace,
                self.catalog_name
            ))),
            Err(e) => Err(self.status(&e)),
        }
    }
}

/// What [`Target::prepare`] did or asks for, so that a failed write can be undone.
enum Prepared {
    /// The table existed: a failed append commits nothing (the writers delete their files).
    Existing,
    /// The table exists and the write replaces it (taken by the plan: [`Self::take_replacement`]).
    /// A failed replacement commits nothing, as a failed append.
    Replacing(Option<Box<TableReplacement>>),
    /// This ingest created the table: no other table's files are at its location.
    Created,
}

impl Prepared {
    /// The replacement the write is to commit, if the table is replaced.
    fn take_replacement(&mut self) -> Option<TableReplacement> {
        match self {
            Prepared::Replacing(replacement) => replacement.take().map(|r| *r),
            _ => None,
        }
    }

    /// Drops a table this ingest created, after its write failed.
    async fn undo(self, target: &Target) {
        let Prepared::Created = self else {
            return;
        };
        if let Err(e) = target.catalog.drop_table(&target.ident, true).await {
            tracing::warn!(table = %target.display(), error = %e, "dropping the table of a failed bulk ingest");
        }
    }
}

/// The DoPut upload: its schema and its batches as a stream.
struct Upload {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
}

impl Upload {
    async fn open(stream: PeekableFlightDataStream) -> Result<Self, Status> {
        // A message with no IPC header carries only the descriptor.
        let data = stream
            .try_filter(|fd| futures::future::ready(!fd.data_header.is_empty()))
            .map_err(FlightError::from);
        let mut decoded = UntrustedFlightData::new(data);
        let first = match decoded.next().await {
            Some(Ok(batch)) => Some(batch),
            Some(Err(e)) => return Err(decode_error(e)),
            None => None,
        };
        let Some(schema) = decoded
            .schema()
            .cloned()
            .or_else(|| first.as_ref().map(|b| b.schema()))
        else {
            return Err(Status::invalid_argument(
                "bulk ingest: the upload carried no Arrow schema",
            ));
        };
        let rest = decoded.map_err(|e| DataFusionError::External(Box::new(decode_error(e))));
        let batches = futures::stream::iter(first.map(Ok)).chain(rest);
        Ok(Self {
            schema: Arc::clone(&schema),
            stream: Box::pin(RecordBatchStreamAdapter::new(schema, batches)),
        })
    }
}

fn decode_error(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(status) => *status,
        other => {
            Status::invalid_argument(format!("cannot decode the uploaded Arrow data: {other}"))
        }
    }
}

/// The upload as a DataFusion partition that can be executed once.
struct OneShot {
    schema: SchemaRef,
    stream: Mutex<Option<SendableRecordBatchStream>>,
}

impl std::fmt::Debug for OneShot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneShot")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl PartitionStream for OneShot {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let taken = self.stream.lock().ok().and_then(|mut s| s.take());
        match taken {
            Some(stream) => stream,
            None => Box::pin(RecordBatchStreamAdapter::new(
                Arc::clone(&self.schema),
                futures::stream::once(async {
                    Err(DataFusionError::Internal(
                        "the bulk-ingest upload can be read only once".into(),
                    ))
                }),
            )),
        }
    }
}

/// `INSERT INTO target SELECT <matched, cast columns> FROM upload`, as a plan; with a
/// `replacement`, the insert goes into the table as replaced and commits the replacement.
async fn plan_ingest(
    ctx: &SessionContext,
    target: &Target,
    upload: Upload,
    upsert: bool,
    replacement: Option<TableReplacement>,
) -> Result<DataFrame, Status> {
    let mut provider = ctx
        .table_provider(target.reference())
        .await
        .map_err(|e| target.name_in(df_status(e)))?;
    let mut state = ctx.state();
    let iceberg = provider
        .as_any()
        .downcast_ref::<IcebergTableProvider>()
        .cloned();
    if let Some(replacement) = replacement {
        let Some(iceberg) = &iceberg else {
            return Err(Status::internal(format!(
                "bulk ingest into {}: the table to replace is not an Iceberg table",
                target.display()
            )));
        };
        let replaced = iceberg
            .replacing(replacement)
            .map_err(|e| target.status(&e))?;
        provider = Arc::new(replaced);
    } else if let Some(iceberg) = iceberg {
        if upsert {
            provider = Arc::new(iceberg.upsert());
        }
        if upsert || iceberg.upserts() {
            // A key's last row is the last in the upload: keep it one ordered stream.
            state
                .config_mut()
                .options_mut()
                .optimizer
                .enable_round_robin_repartition = false;
        }
    }
    let source = StreamingTable::try_new(
        Arc::clone(&upload.schema),
        vec![Arc::new(OneShot {
            schema: Arc::clone(&upload.schema),
            stream: Mutex::new(Some(upload.stream)),
        })],
    )
    .map_err(df_status)?;
    let scan = LogicalPlanBuilder::scan("upload", provider_as_source(Arc::new(source)), None)
        .map_err(df_status)?
        .build()
        .map_err(df_status)?;
    let columns = matched_columns(&target.display(), scan.schema(), &provider.schema())?;
    let input = LogicalPlanBuilder::from(scan)
        .project(columns)
        .map_err(df_status)?
        .build()
        .map_err(df_status)?;
    let plan = LogicalPlanBuilder::insert_into(
        input,
        target.reference(),
        provider_as_source(provider),
        InsertOp::Append,
    )
    .map_err(df_status)?
    .build()
    .map_err(df_status)?;
    Ok(DataFrame::new(state, plan))
}

/// One expression per table column, in the table's order: the upload's column of that name
/// cast to the table's type (as INSERT casts), or NULL for an optional column the upload lacks.
fn matched_columns(
    table: &str,
    upload: &DFSchema,
    target: &arrow::datatypes::Schema,
) -> Result<Vec<Expr>, Status> {
    let names: Vec<&str> = upload.fields().iter().map(|f| f.name().as_str()).collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(Status::invalid_argument(format!(
                "bulk ingest into {table}: the upload has two columns named {name}"
            )));
        }
    }
    let table_columns = || {
        target
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Which upload column each table column takes: the same name, else the one name that
    // differs only in case.
    let mut taken = vec![false; names.len()];
    let mut sources = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let exact = names.iter().position(|n| n == field.name());
        let found = match exact {
            Some(i) => Some(i),
            None => {
                let folded: Vec<usize> = (0..names.len())
                    .filter(|&i| !taken[i] && names[i].eq_ignore_ascii_case(field.name()))
                    .filter(|&i| !target.fields().iter().any(|f| f.name() == names[i]))
                    .collect();
                match folded.as_slice() {
                    [] => None,
                    [i] => Some(*i),
                    _ => {
                        return Err(Status::invalid_argument(format!(
                            "bulk ingest into {table}: column {} matches several upload columns \
                             that differ only in case",
                            field.name()
                        )));
                    }
                }
            }
        };
        if let Some(i) = found {
            taken[i] = true;
        }
        sources.push(found);
    }
    if let Some(i) = taken.iter().position(|t| !t) {
        return Err(Status::invalid_argument(format!(
            "bulk ingest into {table}: the upload's column {} is not a column of the table (its \
             columns: {})",
            names[i],
            table_columns()
        )));
    }
    let mut exprs = Vec::with_capacity(sources.len());
    for (field, source) in target.fields().iter().zip(sources) {
        let ty = field.data_type();
        let expr = match source {
            Some(i) => {
                let from = upload.field(i).data_type();
                if from != ty && !can_cast_types(from, ty) {
                    return Err(Status::invalid_argument(format!(
                        "bulk ingest into {table}: column {} is {from} in the upload and cannot \
                         be cast to the table's {ty}",
                        field.name()
                    )));
                }
                Expr::Column(Column::from(upload.qualified_field(i)))
                    .cast_to(ty, upload)
                    .map_err(|e| {
                        Status::invalid_argument(format!(
                            "bulk ingest into {table}: column {}: {e}",
                            field.name()
                        ))
                    })?
            }
            None if field.is_nullable() => Expr::Literal(ScalarValue::Null, None)
                .cast_to(ty, &DFSchema::empty())
                .map_err(df_status)?,
            None => {
                return Err(Status::invalid_argument(format!(
                    "bulk ingest into {table}: the upload has no column {}, which the table \
                     requires (NOT NULL)",
                    field.name()
                )));
            }
        };
        exprs.push(expr.alias(field.name()));
    }
    Ok(exprs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow_flight::sql::TableDefinitionOptions;

    fn command(
        if_not_exist: TableNotExistOption,
        if_exists: TableExistsOption,
    ) -> CommandStatementIngest {
        CommandStatementIngest {
            table_definition_options: Some(TableDefinitionOptions {
                if_not_exist: if_not_exist as i32,
                if_exists: if_exists as i32,
            }),
            table: "t".into(),
            ..Default::default()
        }
    }

    #[test]
    fn upsert_option_is_true_or_false() {
        let mut cmd = command(TableNotExistOption::Fail, TableExistsOption::Append);
        assert!(!upsert_option(&cmd).expect("default"));
        cmd.options.insert("UPSERT".into(), " True ".into());
        assert!(upsert_option(&cmd).expect("true"));
        cmd.options.insert("UPSERT".into(), "yes".into());
        let status = upsert_option(&cmd).expect_err("yes");
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().contains("upsert=\"yes\""),
            "{}",
            status.message()
        );
    }

    #[test]
    fn modes_as_adbc_maps_them() {
        use TableExistsOption as E;
        use TableNotExistOption as N;
        let name = |n, e| Mode::from_command(&command(n, e)).map(Mode::name);
        assert_eq!(name(N::Create, E::Fail).ok(), Some("create"));
        assert_eq!(name(N::Fail, E::Append).ok(), Some("append"));
        assert_eq!(name(N::Create, E::Replace).ok(), Some("replace"));
        assert_eq!(name(N::Create, E::Append).ok(), Some("create_append"));
        assert_eq!(
            name(N::Fail, E::Replace).ok(),
            Some("replace an existing table")
        );
        for (n, e) in [
            (N::Fail, E::Fail),
            (N::Unspecified, E::Append),
            (N::Create, E::Unspecified),
        ] {
            let status = name(n, e).err().map(|s| s.code());
            assert_eq!(status, Some(tonic::Code::InvalidArgument), "{n:?} {e:?}");
        }
        let mut none = command(N::Create, E::Fail);
        none.table_definition_options = None;
        assert!(Mode::from_command(&none).is_err());
    }

    fn upload(fields: Vec<Field>) -> DFSchema {
        DFSchema::try_from_qualified_schema("upload", &Schema::new(fields)).unwrap()
    }

    fn table() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("Name", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
        ])
    }

    fn message(result: Result<Vec<Expr>, Status>) -> String {
        result
            .err()
            .map(|s| s.message().to_string())
            .unwrap_or_default()
    }

    #[test]
    fn columns_match_by_name_and_cast_as_insert_does() {
        // Any order, a case-insensitive name, a narrower integer; a missing optional column
        // is NULL.
        let exprs = matched_columns(
            "c.s.t",
            &upload(vec![
                Field::new("name", DataType::LargeUtf8, true),
                Field::new("id", DataType::Int32, true),
            ]),
            &table(),
        )
        .unwrap();
        let shown: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            shown,
            [
                "CAST(upload.id AS Int64) AS id",
                "CAST(upload.name AS Utf8) AS Name",
                "CAST(NULL AS Float64) AS score"
            ]
        );
    }

    #[test]
    fn mismatches_name_the_column_and_the_table() {
        let t = table();
        let id = Field::new("id", DataType::Int64, false);
        let unknown = matched_columns(
            "c.s.t",
            &upload(vec![id.clone(), Field::new("extra", DataType::Int8, true)]),
            &t,
        );
        assert_eq!(
            message(unknown),
            "bulk ingest into c.s.t: the upload's column extra is not a column of the table (its \
             columns: id, Name, score)"
        );
        let missing = matched_columns(
            "c.s.t",
            &upload(vec![Field::new("score", DataType::Float64, true)]),
            &t,
        );
        assert_eq!(
            message(missing),
            "bulk ingest into c.s.t: the upload has no column id, which the table requires (NOT NULL)"
        );
        let uncastable = matched_columns(
            "c.s.t",
            &upload(vec![
                Field::new("id", DataType::Date32, true)
                    .with_data_type(DataType::new_list(DataType::Int64, true)),
            ]),
            &t,
        );
        assert!(message(uncastable).starts_with("bulk ingest into c.s.t: column id is List("));
        let twice = matched_columns(
            "c.s.t",
            &upload(vec![id.clone(), Field::new("ID", DataType::Int64, true)]),
            &t,
        );
        assert!(message(twice).contains("the upload's column ID is not a column"));
    }
}
