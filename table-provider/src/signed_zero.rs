//! `-0.0 = 0.0`: float comparisons with a zero constant as Spark and PostgreSQL make them.
//!
//! DataFusion compares floats in IEEE 754's total order: `-0.0 < 0.0`, so `f = 0.0` misses the
//! rows holding `-0.0`, `f < 0.0` finds them, and `f <> 0.0` keeps them. Spark, PostgreSQL and
//! Iceberg's writers' users treat the two zeros as one number. NaN already agrees: every one of
//! these orders puts NaN above every number and makes `NaN = NaN` true.
//!
//! [`SignedZeroEquality`] rewrites each comparison of an expression with a float zero constant
//! into the total-order comparison that means the same as in Spark:
//!
//! | query         | becomes                        |
//! |---------------|--------------------------------|
//! | `f = 0`       | `f >= -0.0 AND f <= 0.0`       |
//! | `f <> 0`      | `f < -0.0 OR f > 0.0`          |
//! | `f < 0`       | `f < -0.0`                     |
//! | `f <= 0`      | `f <= 0.0`                     |
//! | `f > 0`       | `f > 0.0`                      |
//! | `f >= 0`      | `f >= -0.0`                    |
//! | `f [NOT] IN (…, 0, …)` | both zeros in the list |
//! | `f [NOT] BETWEEN 0 AND 0` | `BETWEEN -0.0 AND 0.0` |
//!
//! (either zero constant; the constant may stand on either side). The results are plain
//! comparisons with constants, so statistics pruning still applies — and it stays sound when a
//! writer recorded a zero bound with the other sign. The rule is idempotent.
//!
//! Not covered (they keep DataFusion's total order): comparisons between two float
//! expressions, joins on float keys, GROUP BY and DISTINCT on floats.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, LogicalPlan, Operator, lit};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The optimizer rule (see the module docs). Register it with
/// `SessionStateBuilder::with_optimizer_rule`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SignedZeroEquality;

impl SignedZeroEquality {
    /// The rule.
    pub fn new() -> Self {
        Self
    }
}

impl OptimizerRule for SignedZeroEquality {
    fn name(&self) -> &str {
        "signed_zero_equality"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        plan.map_expressions(|expr| expr.transform_up(rewrite_expr))
    }
}

/// Which zero a float constant is, if it is one.
fn float_zero(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(v @ ScalarValue::Float64(Some(x)), _) if *x == 0.0 => Some(v),
        Expr::Literal(v @ ScalarValue::Float32(Some(x)), _) if *x == 0.0 => Some(v),
        _ => None,
    }
}

/// A zero of the same type as `like`, with the given sign.
fn zero(like: &ScalarValue, negative: bool) -> Expr {
    let sign = if negative { -1.0 } else { 1.0 };
    match like {
        ScalarValue::Float32(_) => lit(ScalarValue::Float32(Some(0.0f32 * sign as f32))),
        _ => lit(ScalarValue::Float64(Some(0.0f64 * sign))),
    }
}

fn cmp(left: Expr, op: Operator, right: Expr) -> Expr {
    Expr::BinaryExpr(BinaryExpr::new(Box::new(left), op, Box::new(right)))
}

fn rewrite_expr(expr: Expr) -> Result<Transformed<Expr>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(
                op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
            ) && (float_zero(&left).is_some() != float_zero(&right).is_some()) =>
        {
            // The zero on the right: `0 < f` is `f > 0`.
            let (value, z, op) = match float_zero(&right) {
                Some(z) => (*left, z.clone(), op),
                None => match (float_zero(&left).cloned(), op.swap()) {
                    (Some(z), Some(swapped)) => (*right, z, swapped),
                    _ => {
                        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                            left,
                            op,
                            right,
                        })));
                    }
                },
            };
            let rewritten = match op {
                Operator::Eq => cmp(value.clone(), Operator::GtEq, zero(&z, true)).and(cmp(
                    value,
                    Operator::LtEq,
                    zero(&z, false),
                )),
                Operator::NotEq => cmp(value.clone(), Operator::Lt, zero(&z, true)).or(cmp(
                    value,
                    Operator::Gt,
                    zero(&z, false),
                )),
                Operator::Lt => cmp(value, Operator::Lt, zero(&z, true)),
                Operator::LtEq => cmp(value, Operator::LtEq, zero(&z, false)),
                Operator::Gt => cmp(value, Operator::Gt, zero(&z, false)),
                Operator::GtEq => cmp(value, Operator::GtEq, zero(&z, true)),
                // IS [NOT] DISTINCT FROM and the rest keep their meaning.
                other => return Ok(Transformed::no(cmp(value, other, lit(z)))),
            };
            let unchanged = matches!(&rewritten, Expr::BinaryExpr(b)
                if b.op == op && float_zero(&b.right).is_some_and(|r| same_bits(r, &z)));
            Ok(if unchanged {
                Transformed::no(rewritten)
            } else {
                Transformed::yes(rewritten)
            })
        }
        Expr::InList(InList {
            expr,
            mut list,
            negated,
        }) if list.iter().any(|e| float_zero(e).is_some()) => {
            let Some(like) = list.iter().find_map(float_zero).cloned() else {
                return Ok(Transformed::no(Expr::InList(InList {
                    expr,
                    list,
                    negated,
                })));
            };
            let mut changed = false;
            for negative in [true, false] {
                let z = zero(&like, negative);
                let present = list.iter().any(|e| {
                    float_zero(e)
                        .zip(float_zero(&z))
                        .is_some_and(|(a, b)| same_bits(a, b))
                });
                if !present {
                    list.push(z);
                    changed = true;
                }
            }
            let expr = Expr::InList(InList {
                expr,
                list,
                negated,
            });
            Ok(if changed {
                Transformed::yes(expr)
            } else {
                Transformed::no(expr)
            })
        }
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) if float_zero(&low).is_some() || float_zero(&high).is_some() => {
            let mut changed = false;
            let mut widen = |bound: Box<Expr>, negative: bool| -> Box<Expr> {
                match float_zero(&bound) {
                    Some(z) if is_negative(z) != negative => {
                        changed = true;
                        Box::new(zero(z, negative))
                    }
                    _ => bound,
                }
            };
            let low = widen(low, true);
            let high = widen(high, false);
            let expr = Expr::Between(Between {
                expr,
                negated,
                low,
                high,
            });
            Ok(if changed {
                Transformed::yes(expr)
            } else {
                Transformed::no(expr)
            })
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Whether a float scalar has its sign bit set (`-0.0` does).
fn is_negative(v: &ScalarValue) -> bool {
    match v {
        ScalarValue::Float64(Some(x)) => x.is_sign_negative(),
        ScalarValue::Float32(Some(x)) => x.is_sign_negative(),
        _ => false,
    }
}

/// Whether two float scalars are the same bits (tells the zeros apart).
fn same_bits(a: &ScalarValue, b: &ScalarValue) -> bool {
    match (a, b) {
        (ScalarValue::Float64(Some(x)), ScalarValue::Float64(Some(y))) => {
            x.to_bits() == y.to_bits()
        }
        (ScalarValue::Float32(Some(x)), ScalarValue::Float32(Some(y))) => {
            x.to_bits() == y.to_bits()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float32Array, Float64Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::SessionContext;

    use super::*;

    /// f: -0.0, 0.0, NaN, -inf, inf, -1.5, 2.5, NULL (and g the same as float).
    fn context(with_rule: bool) -> SessionContext {
        let f = vec![
            Some(-0.0),
            Some(0.0),
            Some(f64::NAN),
            Some(f64::NEG_INFINITY),
            Some(f64::INFINITY),
            Some(-1.5),
            Some(2.5),
            None,
        ];
        let g: Vec<Option<f32>> = f.iter().map(|v| v.map(|x| x as f32)).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("f", DataType::Float64, true),
            Field::new("g", DataType::Float32, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..f.len() as i64)),
                Arc::new(Float64Array::from(f)),
                Arc::new(Float32Array::from(g)),
            ],
        )
        .unwrap();
        let mut state = SessionStateBuilder::new().with_default_features();
        if with_rule {
            state = state.with_optimizer_rule(Arc::new(SignedZeroEquality::new()));
        }
        let ctx = SessionContext::new_with_state(state.build());
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
        )
        .unwrap();
        ctx
    }

    async fn ids(ctx: &SessionContext, predicate: &str) -> Vec<i64> {
        let batches = ctx
            .sql(&format!("SELECT id FROM t WHERE {predicate} ORDER BY id"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    /// The premise: DataFusion alone tells the zeros apart.
    #[tokio::test]
    async fn datafusion_alone_orders_the_zeros() {
        let ctx = context(false);
        assert_eq!(ids(&ctx, "f = 0.0").await, [1]);
        assert_eq!(ids(&ctx, "f < 0.0").await, [0, 3, 5]);
    }

    /// Spark's answers (ids as in `context`): -0.0 and 0.0 are one number; NaN equals itself
    /// and is above everything; NULL matches nothing.
    #[tokio::test]
    async fn zero_comparisons_mean_what_they_mean_in_spark() {
        let ctx = context(true);
        let neg_zero = "CAST('-0.0' AS DOUBLE)";
        for (predicate, expected) in [
            ("f = 0.0".to_string(), vec![0, 1]),
            (format!("f = {neg_zero}"), vec![0, 1]),
            ("0.0 = f".to_string(), vec![0, 1]),
            ("f <> 0.0".to_string(), vec![2, 3, 4, 5, 6]),
            ("f < 0.0".to_string(), vec![3, 5]),
            (format!("{neg_zero} > f"), vec![3, 5]),
            ("f <= 0.0".to_string(), vec![0, 1, 3, 5]),
            ("f > 0.0".to_string(), vec![2, 4, 6]),
            (format!("f >= {neg_zero}"), vec![0, 1, 2, 4, 6]),
            ("f >= 0".to_string(), vec![0, 1, 2, 4, 6]),
            ("f IN (0.0, 2.5)".to_string(), vec![0, 1, 6]),
            (format!("f NOT IN ({neg_zero})"), vec![2, 3, 4, 5, 6]),
            ("f BETWEEN 0.0 AND 3.0".to_string(), vec![0, 1, 6]),
            ("f BETWEEN -2.0 AND 0.0".to_string(), vec![0, 1, 5]),
            ("f NOT BETWEEN 0.0 AND 0.0".to_string(), vec![2, 3, 4, 5, 6]),
            ("NOT (f = 0.0)".to_string(), vec![2, 3, 4, 5, 6]),
            ("g = 0.0".to_string(), vec![0, 1]),
            ("g = CAST(0.0 AS FLOAT)".to_string(), vec![0, 1]),
            ("g < 0".to_string(), vec![3, 5]),
            ("f = CAST('NaN' AS DOUBLE)".to_string(), vec![2]),
            ("f > 1e300".to_string(), vec![2, 4]),
        ] {
            assert_eq!(ids(&ctx, &predicate).await, expected, "{predicate}");
        }
    }

    #[tokio::test]
    async fn the_rule_is_idempotent() {
        let ctx = context(true);
        let plan = ctx
            .sql("SELECT id FROM t WHERE f = 0.0 OR f IN (0.0) OR f BETWEEN 0.0 AND 0.0")
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        let once = plan.clone();
        let again = plan
            .transform_up(|p| {
                SignedZeroEquality.rewrite(p, &datafusion::optimizer::OptimizerContext::new())
            })
            .unwrap();
        assert!(!again.transformed, "{once}");
    }
}
