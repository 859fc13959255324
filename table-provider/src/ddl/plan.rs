//! DDL as DataFusion plans, so that it runs where any statement runs (once, when the plan is
//! executed; never while it is planned, prepared or explained).
//!
//! [`ddl_plan`] turns a statement into a `LogicalPlan::Extension` ([`DdlNode`], output `count`
//! UInt64: rows inserted by `CREATE TABLE … AS`, else 0). A session plans it with
//! `crate::query_planner::PetrelQueryPlanner` (DataFusion's planner plus [`DdlPlanner`]) into a `crate::statement_exec::StatementExec` (`DdlExec`), which runs
//! [`super::execute_ddl`] against the session's Iceberg catalogs when executed.

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
use datafusion::prelude::SessionContext;
use futures::future::BoxFuture;

use super::execute::execute_ddl;
use super::parser::parse_ddl;
use crate::dml::count_schema;
use crate::error::{Error, Result};
use crate::statement_exec::StatementExec;

/// A DDL statement in a logical plan (kept as its SQL text; parsed again to run).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DdlNode {
    sql: String,
    schema: DFSchemaRef,
}

impl PartialOrd for DdlNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.sql.partial_cmp(&other.sql)
    }
}

impl DdlNode {
    /// The statement's SQL text.
    pub fn sql(&self) -> &str {
        &self.sql
    }
}

impl UserDefinedLogicalNodeCore for DdlNode {
    fn name(&self) -> &str {
        "IcebergDdl"
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
        write!(f, "IcebergDdl: {}", self.sql)
    }

    fn with_exprs_and_inputs(
        &self,
        _exprs: Vec<Expr>,
        _inputs: Vec<LogicalPlan>,
    ) -> DFResult<Self> {
        Ok(self.clone())
    }
}

/// The plan of DDL statement `sql` if it is one Petrel runs (see [`super::parser`]).
pub fn ddl_plan(sql: &str) -> crate::error::Result<Option<LogicalPlan>> {
    if parse_ddl(sql)?.is_none() {
        return Ok(None);
    }
    let schema = Arc::new(DFSchema::try_from(count_schema())?);
    Ok(Some(LogicalPlan::Extension(Extension {
        node: Arc::new(DdlNode {
            sql: sql.to_string(),
            schema,
        }),
    })))
}

/// The DDL node of a plan, if it is one.
pub fn as_ddl(plan: &LogicalPlan) -> Option<&DdlNode> {
    match plan {
        LogicalPlan::Extension(e) => e.node.as_any().downcast_ref::<DdlNode>(),
        _ => None,
    }
}

/// Plans [`DdlNode`]s as [`StatementExec`]s running the DDL.
#[derive(Debug, Default)]
pub struct DdlPlanner;

#[async_trait]
impl ExtensionPlanner for DdlPlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        _physical_inputs: &[Arc<dyn ExecutionPlan>],
        session_state: &SessionState,
    ) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<DdlNode>() else {
            return Ok(None);
        };
        Ok(Some(Arc::new(StatementExec::new(
            "DdlExec",
            node.sql.clone(),
            session_state.clone(),
            count_schema(),
            run_ddl,
        ))))
    }
}

/// Runs a DDL statement (the [`StatementExec`] of a [`DdlNode`]).
fn run_ddl(state: SessionState, sql: String) -> BoxFuture<'static, Result<RecordBatch>> {
    Box::pin(async move {
        let ctx = SessionContext::new_with_state(state);
        let statement = parse_ddl(&sql)?
            .ok_or_else(|| Error::InvalidArgument(format!("not a DDL statement: {sql}")))?;
        let rows = execute_ddl(&ctx, statement).await?;
        Ok(RecordBatch::try_new(
            count_schema(),
            vec![Arc::new(UInt64Array::from(vec![rows]))],
        )?)
    })
}
