//! [`QueryExecutor`]: what the Flight SQL service needs from whatever plans and runs its
//! statements. The service (`flight_sql`) depends on this trait only; `engine::QueryEngine`
//! (DataFusion in this process, with the policy, parameters, admission and cancellation of
//! their own files) implements it, and the binary (`server`) wires the two together. Another
//! executor — a distributed engine, or a test double — can stand in without changing the
//! service.
//!
//! Statements travel as DataFusion `DataFrame`s between planning and execution, so an executor
//! plans with DataFusion; where it runs the plan is its own affair.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlan;
use futures::stream::BoxStream;
use petrel_table_provider::statements::is_petrel_write;
use tonic::Status;

use crate::admission::Admission;
use crate::cancellation::{Cancellations, Registration};
use crate::engine::{CatalogSource, EngineOptions, Planned};
use crate::error::df_status;
use crate::proto::petrel::{PreparedStatementHandle, SessionDefaults, StatementTicket};
use crate::sql_text::order_placeholders;

/// Plans and runs the statements of the Flight SQL service; see the module docs.
#[async_trait]
pub trait QueryExecutor: Send + Sync + std::fmt::Debug {
    /// The configured catalogs, in order (the first is the default).
    fn catalogs(&self) -> &[(String, CatalogSource)];

    /// The executor's limits.
    fn options(&self) -> &EngineOptions;

    /// The work slots every RPC that does work takes.
    fn admission(&self) -> &Admission;

    /// Running queries and the fate of recent ones (CancelFlightInfo).
    fn cancellations(&self) -> &Arc<Cancellations>;

    /// Plans kept for their DoGet now.
    fn plans_kept(&self) -> usize;

    /// A fresh context for one statement under `session` (catalog reads of metadata calls).
    fn context(&self, session: &SessionDefaults) -> Result<SessionContext, Status>;

    /// Parses and plans `sql` (no parameters bound).
    async fn plan_sql(&self, sql: &str, session: &SessionDefaults) -> Result<DataFrame, Status>;

    /// Plans `sql` and binds one row of `params` (if given).
    async fn plan(
        &self,
        sql: &str,
        session: &SessionDefaults,
        params: Option<Vec<ScalarValue>>,
    ) -> Result<Planned, Status>;

    /// Keeps the plan of `ticket`'s statement for its DoGet.
    fn keep_plan(&self, ticket: &StatementTicket, planned: Planned);

    /// Keeps a CreatePreparedStatement's plan (a read without parameters) for the
    /// GetFlightInfo of the same handle.
    fn keep_prepared_plan(&self, handle: &PreparedStatementHandle, planned: Planned);

    /// The plan kept for `handle` by its CreatePreparedStatement, removed, if it may still be
    /// used (young, and every table it reads unchanged since); `None`: plan again.
    async fn take_prepared_plan(&self, handle: &PreparedStatementHandle) -> Option<Planned>;

    /// Plans the write `sql` with every bound parameter row (IPC bytes) as one statement.
    async fn plan_write(
        &self,
        sql: &str,
        session: &SessionDefaults,
        parameters: &[u8],
    ) -> Result<DataFrame, Status>;

    /// Runs a planned write once and returns the rows it wrote.
    async fn run_write(
        &self,
        frame: DataFrame,
        query_id: &[u8],
        user: &str,
        sql: &str,
    ) -> Result<u64, Status>;

    /// Runs a ticket's statement for `user` (once per bound parameter row); `registration` is
    /// its entry in the cancellation registry.
    async fn execute(
        &self,
        ticket: StatementTicket,
        user: &str,
        registration: Registration,
    ) -> Result<(SchemaRef, BoxStream<'static, Result<RecordBatch, Status>>), Status>;
}

/// Whether a planned statement is a write (one the policy allowed: DML on an Iceberg table,
/// or one of Petrel's own writes). Writes run once, through [`QueryExecutor::run_write`],
/// never from a DoGet ticket.
pub fn is_write(frame: &DataFrame) -> bool {
    matches!(frame.logical_plan(), LogicalPlan::Dml(_)) || is_petrel_write(frame.logical_plan())
}

/// The statement's parameters as a schema (fields `$1`, `$2`, …; type Null when DataFusion
/// cannot infer it).
pub fn parameter_schema(frame: &DataFrame) -> Result<Schema, Status> {
    let types = frame
        .logical_plan()
        .get_parameter_types()
        .map_err(df_status)?;
    let mut ids: Vec<String> = types.keys().cloned().collect();
    order_placeholders(&mut ids);
    Ok(Schema::new(
        ids.into_iter()
            .map(|id| {
                let ty = types.get(&id).cloned().flatten().unwrap_or(DataType::Null);
                Field::new(id, ty, true)
            })
            .collect::<Vec<_>>(),
    ))
}
