//! [`CheckArithmetic`]: the analyzer rule that makes `+`, `-`, `*` and unary `-` of integers
//! and decimals fail on overflow.
//!
//! After type coercion, each of these operators whose operands are both integers or both
//! decimals becomes a call of [`super::CheckedArithmetic`], unless the magnitudes its operands
//! can have prove it cannot overflow (`proven_safe.rs`); `-x` of a signed integer becomes
//! `0 - x` checked (`-x` of the smallest value wraps to itself in DataFusion). Every output
//! column keeps its name. Floats, dates, timestamps and intervals keep DataFusion's
//! operators: they do not wrap (floats reach infinity) or are checked already.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator, ScalarUDF, lit};
use datafusion::optimizer::AnalyzerRule;

use super::{CheckedArithmetic, proven_safe};
use crate::expr_rewrites::operand_type;

/// Replaces wrapping arithmetic with checked arithmetic (see the module docs).
#[derive(Debug)]
pub struct CheckArithmetic {
    checked: HashMap<Operator, Arc<ScalarUDF>>,
}

impl Default for CheckArithmetic {
    fn default() -> Self {
        Self::new()
    }
}

impl CheckArithmetic {
    /// The rule, with the functions of [`super::checked_arithmetic_functions`].
    pub fn new() -> Self {
        let checked = super::checked_arithmetic_functions()
            .into_iter()
            .filter_map(|f| {
                let op = f.inner().as_any().downcast_ref::<CheckedArithmetic>()?.op();
                Some((op, Arc::new(f)))
            })
            .collect();
        Self { checked }
    }

    fn rewrite_expr(&self, expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        match expr {
            Expr::BinaryExpr(b) => match self.checked.get(&b.op) {
                Some(checked) if needs_check(&b, schema) => {
                    let BinaryExpr { left, right, .. } = b;
                    Ok(Transformed::yes(checked.call(vec![*left, *right])))
                }
                _ => Ok(Transformed::no(Expr::BinaryExpr(b))),
            },
            Expr::Negative(operand) => {
                let zero = match operand_type(&operand, schema) {
                    Ok(t) if t.is_signed_integer() => ScalarValue::new_zero(&t).ok(),
                    _ => None,
                };
                match (zero, self.checked.get(&Operator::Minus)) {
                    (Some(zero), Some(subtract)) => {
                        Ok(Transformed::yes(subtract.call(vec![lit(zero), *operand])))
                    }
                    _ => Ok(Transformed::no(Expr::Negative(operand))),
                }
            }
            other => Ok(Transformed::no(other)),
        }
    }
}

/// Whether the operator can wrap around: both operands are integers, or both decimals (the
/// operands the wrapping kernels serve), and their magnitudes do not prove it safe (`proven_safe.rs`;
/// it then stays DataFusion's own). An operand whose type cannot be told here leaves the
/// operator as it is.
fn needs_check(b: &BinaryExpr, schema: &DFSchema) -> bool {
    let (Ok(l), Ok(r)) = (
        operand_type(&b.left, schema),
        operand_type(&b.right, schema),
    ) else {
        return false;
    };
    let wrapping = (l.is_integer() && r.is_integer()) || (is_decimal(&l) && is_decimal(&r));
    let Ok(result) = BinaryTypeCoercer::new(&l, &b.op, &r).get_result_type() else {
        return wrapping;
    };
    wrapping && !proven_safe::cannot_overflow(b.op, &b.left, &b.right, &result, schema)
}

fn is_decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
}

impl AnalyzerRule for CheckArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        crate::expr_rewrites::rewrite_expressions(plan, |e, schema| self.rewrite_expr(e, schema))
    }

    fn name(&self) -> &str {
        "petrel_check_arithmetic"
    }
}
