//! Rewriting every expression of a plan, bottom up, keeping each output column's name: what an
//! analyzer rule that swaps operators or functions for Petrel's own does after type coercion
//! (`output_limits::BoundFunctionOutputs`, `checked_arithmetic::CheckArithmetic`).

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// `plan` with `rewrite` applied to every expression of every node (subqueries included), each
/// sub-expression after its children; `rewrite` is given the schema the node's expressions
/// are over. Output columns keep their names (an alias restores a rewritten one's).
pub(crate) fn rewrite_expressions(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    let rewrite_node = |node: LogicalPlan| {
        let schema = merge_schema(&node.inputs());
        let names = NamePreserver::new(&node);
        node.map_expressions(|expr| {
            let name = names.save(&expr);
            let rewritten = expr.transform_up(|e| rewrite(e, &schema))?;
            Ok(rewritten.update_data(|e| name.restore(e)))
        })
    };
    Ok(plan.transform_up_with_subqueries(rewrite_node)?.data)
}
