//! [`BoundFunctionOutputs`]: the analyzer rule that makes every call of a growing function in
//! a plan a bounded one.
//!
//! SQL calls by name find the bounded functions in the registry, but DataFusion's planners
//! also build calls of built-ins directly: `[a, b]` is `make_array`, `list || list`
//! `array_concat`. And `a || b` of strings is an operator, not a function. After type
//! coercion, this rule swaps those built-ins for the bounded functions of the same name and
//! turns each `||` of strings into the bounded `petrel_string_concat`, keeping every output
//! column's name.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;

use super::BoundedOutput;

/// Replaces unbounded calls of growing functions (see the module docs).
#[derive(Debug)]
pub struct BoundFunctionOutputs {
    /// The bounded functions by name (`petrel_string_concat` among them).
    bounded: HashMap<String, Arc<ScalarUDF>>,
    string_concat: Arc<ScalarUDF>,
}

impl BoundFunctionOutputs {
    /// The rule for the functions of [`super::bounded_scalar_functions`]: `functions`.
    pub fn new(functions: Vec<ScalarUDF>) -> Self {
        let bounded: HashMap<String, Arc<ScalarUDF>> = functions
            .into_iter()
            .map(|f| (f.name().to_string(), Arc::new(f)))
            .collect();
        let string_concat = bounded
            .get(super::STRING_CONCAT)
            .cloned()
            .unwrap_or_else(|| Arc::new(ScalarUDF::new_from_impl(super::StringConcat::default())));
        Self {
            bounded,
            string_concat,
        }
    }

    fn rewrite_expr(&self, expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        match expr {
            Expr::ScalarFunction(f) if !BoundedOutput::wraps(&f.func) => {
                match self.bounded.get(f.func.name()) {
                    Some(bounded) => Ok(Transformed::yes(Expr::ScalarFunction(
                        ScalarFunction::new_udf(Arc::clone(bounded), f.args),
                    ))),
                    None => Ok(Transformed::no(Expr::ScalarFunction(f))),
                }
            }
            Expr::BinaryExpr(b) if b.op == Operator::StringConcat && is_text(&b, schema) => {
                let BinaryExpr { left, right, .. } = b;
                Ok(Transformed::yes(
                    self.string_concat.call(vec![*left, *right]),
                ))
            }
            other => Ok(Transformed::no(other)),
        }
    }
}

/// Whether `||` here joins strings (lists were made `array_concat` by the SQL planner). An
/// operand whose type cannot be told here (a column of an outer query) leaves it as it is.
fn is_text(b: &BinaryExpr, schema: &DFSchema) -> bool {
    let text = |e: &Expr| {
        crate::expr_rewrites::operand_type(e, schema)
            .is_ok_and(|t| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View))
    };
    text(&b.left) && text(&b.right)
}

impl AnalyzerRule for BoundFunctionOutputs {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        crate::expr_rewrites::rewrite_expressions(plan, |e, schema| self.rewrite_expr(e, schema))
    }

    fn name(&self) -> &str {
        "petrel_bound_function_outputs"
    }
}
