//! Maintenance statements as DataFusion plans, so that they run where any statement runs: once,
//! when the plan is executed; never while it is planned, prepared or explained (as
//! `crate::ddl::plan` does for DDL).
//!
//! [`maintenance_plan`] parses a statement, checks it (procedure known, arguments bound to its
//! parameters, catalog an Iceberg catalog) and returns a `LogicalPlan::Extension`
//! ([`MaintenanceNode`]) whose schema is the procedure's output (Spark's columns), or `count`
//! for a branch / tag statement. `crate::query_planner::PetrelQueryPlanner` plans it (through
//! [`MaintenancePlanner`]) into a `crate::statement_exec::StatementExec` (`MaintenanceExec`), which parses the statement again and runs
//! it when executed.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use arrow::array::{RecordBatch, UInt64Array};
use async_trait::async_trait;
use datafusion::common::{DFSchema, DFSchemaRef, Result as DFResult};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};
use futures::future::BoxFuture;

use super::args::ProcedureArgs;
use super::context::ProcedureContext;
use super::parser::{MaintenanceStatement, parse_maintenance};
use super::procedure;
use super::refs::execute_ref_statement;
use crate::dml::count_schema;
use crate::error::{Error, Result};
use crate::statement_exec::StatementExec;

/// A maintenance statement in a logical plan (kept as its SQL text; parsed again to run).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MaintenanceNode {
    sql: String,
    /// Whether it is a `CALL` (else a branch / tag statement).
    call: bool,
    schema: DFSchemaRef,
}

impl PartialOrd for MaintenanceNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.sql.partial_cmp(&other.sql)
    }
}

impl MaintenanceNode {
    /// The statement's SQL text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// Whether it is a `CALL` (which returns the procedure's rows) rather than a branch / tag
    /// statement (which returns `count`, as DDL does).
    pub fn is_call(&self) -> bool {
        self.call
    }
}

impl UserDefinedLogicalNodeCore for MaintenanceNode {
    fn name(&self) -> &str {
        "IcebergMaintenance"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        Vec::new()
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        Vec::new()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "IcebergMaintenance: {}", self.sql)
    }

    fn with_exprs_and_inputs(
        &self,
        _exprs: Vec<Expr>,
        _inputs: Vec<LogicalPlan>,
    ) -> DFResult<Self> {
        Ok(self.clone())
    }
}

/// The plan of `sql` if it is a maintenance statement (see [`super::parser`]), checked against
/// `state`'s catalogs.
pub fn maintenance_plan(state: &SessionState, sql: &str) -> Result<Option<LogicalPlan>> {
    let Some(statement) = parse_maintenance(sql)? else {
        return Ok(None);
    };
    let (call, schema) = match statement {
        MaintenanceStatement::Call(call) => {
            let procedure = procedure(&call.name)?;
            ProcedureArgs::bind(procedure.name, procedure.params, call.args)?;
            ProcedureContext::new(state, call.catalog.as_deref())?;
            (true, (procedure.output)())
        }
        MaintenanceStatement::Ref(_) => (false, count_schema()),
    };
    Ok(Some(LogicalPlan::Extension(Extension {
        node: Arc::new(MaintenanceNode {
            sql: sql.to_string(),
            call,
            schema: Arc::new(DFSchema::try_from(schema)?),
        }),
    })))
}

/// The maintenance node of a plan, if it is one.
pub fn as_maintenance(plan: &LogicalPlan) -> Option<&MaintenanceNode> {
    match plan {
        LogicalPlan::Extension(e) => e.node.as_any().downcast_ref::<MaintenanceNode>(),
        _ => None,
    }
}

/// Plans [`MaintenanceNode`]s as [`StatementExec`]s running the statement.
#[derive(Debug, Default)]
pub struct MaintenancePlanner;

#[async_trait]
impl ExtensionPlanner for MaintenancePlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        _physical_inputs: &[Arc<dyn ExecutionPlan>],
        session_state: &SessionState,
    ) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<MaintenanceNode>() else {
            return Ok(None);
        };
        Ok(Some(Arc::new(StatementExec::new(
            "MaintenanceExec",
            node.sql.clone(),
            session_state.clone(),
            Arc::clone(node.schema.inner()),
            run_maintenance,
        ))))
    }
}

/// Runs a maintenance statement (the [`StatementExec`] of a [`MaintenanceNode`]).
fn run_maintenance(state: SessionState, sql: String) -> BoxFuture<'static, Result<RecordBatch>> {
    Box::pin(async move { run_statement(&state, &sql).await })
}

/// Parses and runs a maintenance statement.
async fn run_statement(state: &SessionState, sql: &str) -> Result<RecordBatch> {
    match parse_maintenance(sql)? {
        Some(MaintenanceStatement::Call(call)) => {
            let procedure = procedure(&call.name)?;
            let args = ProcedureArgs::bind(procedure.name, procedure.params, call.args)?;
            let ctx = ProcedureContext::new(state, call.catalog.as_deref())?;
            let batch = (procedure.run)(&ctx, args).await?;
            if batch.schema() != (procedure.output)() {
                return Err(Error::InvalidArgument(format!(
                    "procedure {}: its rows do not match its declared output",
                    procedure.name
                )));
            }
            Ok(batch)
        }
        Some(MaintenanceStatement::Ref(statement)) => {
            execute_ref_statement(state, statement).await?;
            Ok(RecordBatch::try_new(
                count_schema(),
                vec![Arc::new(UInt64Array::from(vec![0u64]))],
            )?)
        }
        None => Err(Error::InvalidArgument(format!(
            "not a maintenance statement: {sql}"
        ))),
    }
}
