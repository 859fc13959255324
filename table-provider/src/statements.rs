//! Statements Petrel plans itself, before DataFusion's SQL planner sees the text (DataFusion
//! cannot parse or plan them): Spark's DDL for Iceberg tables ([`crate::ddl`]); MERGE INTO and
//! `CALL` procedures join here. Each becomes a `LogicalPlan` whose execution runs the statement,
//! so it runs where any statement runs: once, when executed, never while planned, prepared or
//! explained.
//!
//! The server and the tests call [`plan_statement`] first and fall back to DataFusion's planner
//! when it returns `None`; [`is_petrel_write`] says whether a plan is one of these writes.

use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;

use crate::ddl::{as_ddl, ddl_plan};
use crate::error::Result;

/// The plan of `sql` if it is a statement Petrel plans itself (see the module docs), planned
/// against `state`'s catalogs; `None` for anything DataFusion plans.
pub async fn plan_statement(_state: &SessionState, sql: &str) -> Result<Option<LogicalPlan>> {
    if let Some(plan) = ddl_plan(sql)? {
        return Ok(Some(plan));
    }
    Ok(None)
}

/// Whether `plan` is one of the writes [`plan_statement`] plans (DDL and the like), which run
/// once and only through a write path.
pub fn is_petrel_write(plan: &LogicalPlan) -> bool {
    as_ddl(plan).is_some()
}
