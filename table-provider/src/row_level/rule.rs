//! [`RowLevelDml`]: the analyzer rule that plans `DELETE` and `UPDATE` on Iceberg tables as
//! queries over a positional scan (see the module docs of `row_level`).

use std::sync::Arc;

use datafusion::catalog::default_table_source::{provider_as_source, source_as_provider};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result as DFResult, TableReference};
use datafusion::logical_expr::{
    DmlStatement, Expr, Extension, LogicalPlan, LogicalPlanBuilder, WriteOp, col,
};
use datafusion::optimizer::AnalyzerRule;

use super::delete_node::{DeleteNode, RowLevelOp};
use crate::error::Error;
use crate::provider::IcebergTableProvider;
use crate::scan::{FILE_PATH_COLUMN, POSITION_COLUMN};

/// Rewrites `Dml(Delete)` and `Dml(Update)` of an Iceberg table into a [`DeleteNode`].
/// Register with `SessionStateBuilder::with_analyzer_rule` (it runs after DataFusion's own
/// analyzer rules, so the WHERE clause is already type-checked), together with the
/// `DeletePlanner` extension planner (`PetrelQueryPlanner`).
#[derive(Debug, Default, Clone, Copy)]
pub struct RowLevelDml;

impl RowLevelDml {
    /// The rule.
    pub fn new() -> Self {
        Self
    }
}

impl AnalyzerRule for RowLevelDml {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DFResult<LogicalPlan> {
        plan.transform_down(|node| match node {
            LogicalPlan::Dml(dml) if dml.op == WriteOp::Delete => rewrite_delete(dml),
            LogicalPlan::Dml(dml) if dml.op == WriteOp::Update => rewrite_update(dml),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "row_level_dml"
    }
}

/// The DELETE as a [`DeleteNode`] when its target is an Iceberg table (else unchanged).
fn rewrite_delete(dml: DmlStatement) -> DFResult<Transformed<LogicalPlan>> {
    let Some(provider) = source_as_provider(&dml.target)
        .ok()
        .and_then(|p| p.as_any().downcast_ref::<IcebergTableProvider>().cloned())
    else {
        return Ok(Transformed::no(LogicalPlan::Dml(dml)));
    };
    // The positional scan records the filters it is planned with: the conflict filter.
    let provider = provider.recording_read_filter();
    let table = provider.table().ident().to_string();
    let (predicate, scan_name) = where_clause(&dml.input, &table)?;
    let positional = provider_as_source(Arc::new(provider.positional()));
    let mut rows = LogicalPlanBuilder::scan(scan_name, positional, None)?;
    if let Some(predicate) = predicate {
        rows = rows.filter(predicate)?;
    }
    let rows = rows
        .project(vec![col(FILE_PATH_COLUMN), col(POSITION_COLUMN)])?
        .build()?;
    let node = DeleteNode::try_new(RowLevelOp::Delete, Arc::new(provider), Arc::new(rows))?;
    Ok(Transformed::yes(LogicalPlan::Extension(Extension {
        node: Arc::new(node),
    })))
}

/// The UPDATE as a [`DeleteNode`] ([`RowLevelOp::Update`]) when its target is an Iceberg table
/// (else unchanged): its new values (DataFusion's projection of the assignments, each column
/// cast to its type) over the positional scan, with each row's file path and position.
fn rewrite_update(dml: DmlStatement) -> DFResult<Transformed<LogicalPlan>> {
    let Some(provider) = source_as_provider(&dml.target)
        .ok()
        .and_then(|p| p.as_any().downcast_ref::<IcebergTableProvider>().cloned())
    else {
        return Ok(Transformed::no(LogicalPlan::Dml(dml)));
    };
    // The positional scan records the filters it is planned with: the conflict filter.
    let provider = provider.recording_read_filter();
    let table = provider.table().ident().to_string();
    let LogicalPlan::Projection(projection) = dml.input.as_ref() else {
        return Err(unsupported(&table, &dml.input));
    };
    let (predicate, scan_name) = where_clause(&projection.input, &table).map_err(|_| {
        DataFusionError::from(Error::Unsupported {
            table: table.clone(),
            message: "UPDATE … FROM is not supported yet: use UPDATE t SET … WHERE … (with \
                      subqueries)"
                .into(),
        })
    })?;
    let positional = provider_as_source(Arc::new(provider.positional()));
    let mut rows = LogicalPlanBuilder::scan(scan_name, positional, None)?;
    if let Some(predicate) = predicate {
        rows = rows.filter(predicate)?;
    }
    let mut values = projection.expr.clone();
    values.push(col(FILE_PATH_COLUMN));
    values.push(col(POSITION_COLUMN));
    let rows = rows.project(values)?.build()?;
    let node = DeleteNode::try_new(RowLevelOp::Update, Arc::new(provider), Arc::new(rows))?;
    Ok(Transformed::yes(LogicalPlan::Extension(Extension {
        node: Arc::new(node),
    })))
}

/// The WHERE clause of a DELETE's input (`Filter` over the table's scan, or the bare scan) and
/// the name the scan gave the table (what the clause's columns are qualified with).
fn where_clause(input: &LogicalPlan, table: &str) -> DFResult<(Option<Expr>, TableReference)> {
    match input {
        LogicalPlan::TableScan(scan) => Ok((None, scan.table_name.clone())),
        LogicalPlan::Filter(filter) => match filter.input.as_ref() {
            LogicalPlan::TableScan(scan) => {
                Ok((Some(filter.predicate.clone()), scan.table_name.clone()))
            }
            other => Err(unsupported(table, other)),
        },
        other => Err(unsupported(table, other)),
    }
}

fn unsupported(table: &str, input: &LogicalPlan) -> DataFusionError {
    let message = match input {
        LogicalPlan::Limit(_) => {
            "DELETE … LIMIT is not supported: it would delete arbitrary rows (Spark has no such \
             form); narrow the WHERE clause instead"
                .to_string()
        }
        other => format!(
            "this form of DELETE is not supported ({}): use DELETE FROM t [WHERE …]",
            other.display()
        ),
    };
    Error::Unsupported {
        table: table.to_string(),
        message,
    }
    .into()
}
