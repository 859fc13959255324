//! Rewriting every expression of a plan, bottom up, keeping each output column's name: what an
//! analyzer rule that swaps operators or functions for Petrel's own does after type coercion
//! (`output_limits::BoundFunctionOutputs`, `checked_arithmetic::CheckArithmetic`).
//!
//! Such a rewrite turns a chain of operators (`a + b + c + …`, `s || s || …`), which the SQL
//! parser takes at any length, into calls nested as deep as the chain is long. DataFusion 53
//! names a call by formatting its arguments, and computes a call's type through its arguments'
//! named fields, at every level: planning a chain of n calls costs n³ (400 `||` took 12 s,
//! 2,000 would take half an hour). A rewritten call may therefore nest at most
//! [`MAX_CALL_DEPTH`] calls; a deeper one fails the statement at once with a plan error
//! (INVALID_ARGUMENT) saying how to write it, and the rules read the types of operands through
//! [`operand_type`], which takes an operator-as-call's type from its operands' without naming
//! anything.

use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result, plan_err};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Operator};

use crate::checked_arithmetic::CheckedArithmetic;
use crate::output_limits::STRING_CONCAT;

/// The most function calls a rewritten call may nest, itself included (a chain of 128
/// operators plans in well under a second).
pub(crate) const MAX_CALL_DEPTH: usize = 128;

/// `plan` with `rewrite` applied to every expression of every node (subqueries included), each
/// sub-expression after its children; `rewrite` is given the schema the node's expressions
/// are over. Output columns keep their names (an alias restores a rewritten one's). A rewritten
/// expression nesting more than [`MAX_CALL_DEPTH`] calls fails the rewrite.
pub(crate) fn rewrite_expressions(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    let rewrite_node = |node: LogicalPlan| {
        let schema = merge_schema(&node.inputs());
        let names = NamePreserver::new(&node);
        node.map_expressions(|expr| {
            let name = names.save(&expr);
            let rewritten = expr.transform_up(|e| {
                let rewritten = rewrite(e, &schema)?;
                if rewritten.transformed {
                    within_call_depth(&rewritten.data)?;
                }
                Ok(rewritten)
            })?;
            Ok(rewritten.update_data(|e| name.restore(e)))
        })
    };
    Ok(plan.transform_up_with_subqueries(rewrite_node)?.data)
}

/// An error when `expr` nests more than [`MAX_CALL_DEPTH`] function calls.
fn within_call_depth(expr: &Expr) -> Result<()> {
    let depth = call_depth(expr)?;
    if depth > MAX_CALL_DEPTH {
        return plan_err!(
            "an expression nests more than {MAX_CALL_DEPTH} function calls and checked \
             operators (a chain of more than {MAX_CALL_DEPTH} `+`, `-`, `*` or `||`): split it \
             into parts computed in a subquery, or add the terms in groups"
        );
    }
    Ok(())
}

/// The most function calls nested in `expr` (`f(g(x)) + 1` nests 2).
fn call_depth(expr: &Expr) -> Result<usize> {
    let mut deepest = 0;
    expr.apply_children(|child| {
        deepest = deepest.max(call_depth(child)?);
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(deepest + usize::from(matches!(expr, Expr::ScalarFunction(_))))
}

/// The type of `expr`, as `get_type` gives it, but computing operators and the calls that stand
/// for them (`petrel_checked_*`, `petrel_string_concat`) from their operands' types: DataFusion
/// names each nested call to type it, which costs the square of a chain's depth.
pub(crate) fn operand_type(expr: &Expr, schema: &DFSchema) -> Result<DataType> {
    let (left, op, right) = match expr {
        Expr::BinaryExpr(b) => (b.left.as_ref(), b.op, b.right.as_ref()),
        Expr::ScalarFunction(ScalarFunction { func, args }) => {
            let op = match func.inner().as_any().downcast_ref::<CheckedArithmetic>() {
                Some(checked) => Some(checked.op()),
                None => (func.name() == STRING_CONCAT).then_some(Operator::StringConcat),
            };
            match (op, args.as_slice()) {
                (Some(op), [left, right]) => (left, op, right),
                _ => return expr.get_type(schema),
            }
        }
        _ => return expr.get_type(schema),
    };
    let (left, right) = (operand_type(left, schema)?, operand_type(right, schema)?);
    BinaryTypeCoercer::new(&left, &op, &right).get_result_type()
}
