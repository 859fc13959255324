//! Statements Petrel plans itself, before DataFusion's SQL planner sees the text (DataFusion
//! cannot parse or plan them): Spark's DDL for Iceberg tables ([`crate::ddl`]), `CALL`
//! procedures and branch / tag statements ([`crate::procedures`]), `MERGE INTO` and `EXPLAIN
//! MERGE` ([`crate::row_level::merge_plan`]), and the catalog statements BI tools send that
//! DataFusion lacks (`SHOW TABLES IN`, `SHOW CREATE TABLE`, … [`crate::catalog_views`], read
//! plans, not writes). Each
//! becomes a `LogicalPlan` whose execution runs the statement, so it runs where any statement
//! runs: once, when executed, never while planned, prepared or explained.
//!
//! The server and the tests call [`plan_statement`] first and fall back to DataFusion's planner
//! when it returns `None`; [`is_petrel_write`] says whether a plan is one of these writes. A
//! `CALL` is not one: it returns the procedure's rows (Spark's output columns), so it runs on
//! the query path, when its plan is executed ([`is_procedure_call`]).

use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;

use crate::catalog_views::catalog_view_plan;
use crate::ddl::{as_ddl, ddl_plan};
use crate::error::Result;
use crate::procedures::{as_maintenance, maintenance_plan};
use crate::row_level::{as_merge, merge_plan};

/// The plan of `sql` if it is a statement Petrel plans itself (see the module docs), planned
/// against `state`'s catalogs; `None` for anything DataFusion plans.
pub async fn plan_statement(state: &SessionState, sql: &str) -> Result<Option<LogicalPlan>> {
    if let Some(plan) = ddl_plan(sql)? {
        return Ok(Some(plan));
    }
    if let Some(plan) = maintenance_plan(state, sql)? {
        return Ok(Some(plan));
    }
    if let Some(plan) = merge_plan(state, sql).await? {
        return Ok(Some(plan));
    }
    if let Some(plan) = catalog_view_plan(state, sql).await? {
        return Ok(Some(plan));
    }
    Ok(None)
}

/// Whether `plan` is one of the writes [`plan_statement`] plans (DDL and the like), which run
/// once and only through a write path.
pub fn is_petrel_write(plan: &LogicalPlan) -> bool {
    as_ddl(plan).is_some()
        || as_merge(plan).is_some()
        || as_maintenance(plan).is_some_and(|m| !m.is_call())
}

/// Whether `plan` is a `CALL` of a procedure: it changes tables but returns rows, so it runs
/// where a query runs (once per execution of its plan).
pub fn is_procedure_call(plan: &LogicalPlan) -> bool {
    as_maintenance(plan).is_some_and(|m| m.is_call())
}
