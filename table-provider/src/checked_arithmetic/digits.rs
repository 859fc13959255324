//! Arithmetic that cannot overflow, proven from its operands' types and literals before it runs.
//!
//! Most arithmetic of real queries cannot overflow by its types alone: TPC-H Q1's
//! `l_extendedprice * (1 - l_discount)` multiplies a `DECIMAL(15,2)` by `1 - DECIMAL(15,2)`
//! (at most 14 integer digits and scale 2), 31 digits for a `DECIMAL(38,4)` result; an `INT`
//! column times 1,000 has at most 14 digits in a `BIGINT`. DataFusion's result types do not say
//! so (the literal `1` is a `DECIMAL(20,0)`, so `1 - l_discount` is `DECIMAL(23,2)` and the
//! product's 39 digits are capped at 38). [`cannot_overflow`] bounds the digits each operand
//! can have (a literal's own, a column's type's, a cast's smaller of the two, and arithmetic's
//! from its operands), and [`super::CheckArithmetic`] leaves an operator it proves safe as
//! DataFusion's own: no check at run time, and every optimizer rule still sees the operator.

use arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::{Cast, ScalarFunction};
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, Operator};

use super::CheckedArithmetic;

/// What a value's magnitude is under: 10^`integer` (which may be negative, for fractions under
/// 0.1), with `scale` digits after the point (10^(integer + scale) unscaled).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Digits {
    integer: i32,
    scale: i32,
}

impl Digits {
    fn of(op: Operator, left: Digits, right: Digits) -> Option<Digits> {
        match op {
            Operator::Plus | Operator::Minus => Some(Digits {
                integer: left.integer.max(right.integer) + 1,
                scale: left.scale.max(right.scale),
            }),
            Operator::Multiply => Some(Digits {
                integer: left.integer + right.integer,
                scale: left.scale + right.scale,
            }),
            _ => None,
        }
    }

    /// These digits brought to `scale` (more digits after the point, or none when fewer, which
    /// rounds: not bounded here).
    fn at_scale(self, scale: i32) -> Option<Digits> {
        (scale >= self.scale).then_some(Digits {
            integer: self.integer,
            scale,
        })
    }
}

/// Whether `left op right`, of type `result`, cannot overflow by the digits its operands can
/// have. `false` when that cannot be told (unsigned results, whose differences may be negative,
/// among them).
pub(super) fn cannot_overflow(
    op: Operator,
    left: &Expr,
    right: &Expr,
    result: &DataType,
    schema: &DFSchema,
) -> bool {
    let (Some(l), Some(r)) = (digits(left, schema), digits(right, schema)) else {
        return false;
    };
    let Some(bound) = Digits::of(op, l, r) else {
        return false;
    };
    match *result {
        // Every value of at most p digits fits `DECIMAL(p, s)`.
        DataType::Decimal128(p, s) => {
            bound.scale == i32::from(s) && bound.integer + bound.scale <= i32::from(p)
        }
        // Every value of at most 18 digits fits a BIGINT, of 9 an INT, …
        DataType::Int64 => bound.scale == 0 && bound.integer <= 18,
        DataType::Int32 => bound.scale == 0 && bound.integer <= 9,
        DataType::Int16 => bound.scale == 0 && bound.integer <= 4,
        DataType::Int8 => bound.scale == 0 && bound.integer <= 2,
        _ => false,
    }
}

/// The digits a value of `expr` can have, if bounded here.
fn digits(expr: &Expr, schema: &DFSchema) -> Option<Digits> {
    match expr {
        Expr::Literal(value, _) => literal_digits(value),
        Expr::Alias(alias) => digits(&alias.expr, schema),
        Expr::Negative(operand) => digits(operand, schema),
        Expr::Cast(Cast { expr, data_type }) => {
            let target = type_digits(data_type)?;
            match digits(expr, schema).and_then(|d| d.at_scale(target.scale)) {
                Some(inner) if inner.integer < target.integer => Some(inner),
                _ => Some(target),
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            Digits::of(*op, digits(left, schema)?, digits(right, schema)?)
                .or_else(|| type_digits(&expr.get_type(schema).ok()?))
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) => {
            match (
                func.inner().as_any().downcast_ref::<CheckedArithmetic>(),
                args.as_slice(),
            ) {
                (Some(checked), [left, right]) => {
                    Digits::of(checked.op(), digits(left, schema)?, digits(right, schema)?)
                }
                _ => type_digits(&expr.get_type(schema).ok()?),
            }
        }
        _ => type_digits(&expr.get_type(schema).ok()?),
    }
}

/// The digits of a signed integer or decimal type's values.
fn type_digits(data_type: &DataType) -> Option<Digits> {
    let (integer, scale) = match *data_type {
        DataType::Int8 => (3, 0),
        DataType::Int16 => (5, 0),
        DataType::Int32 => (10, 0),
        DataType::Int64 => (19, 0),
        DataType::Decimal128(p, s) => (i32::from(p) - i32::from(s), i32::from(s)),
        _ => return None,
    };
    Some(Digits { integer, scale })
}

/// A literal's own digits: `1` has one, whatever its type.
fn literal_digits(value: &ScalarValue) -> Option<Digits> {
    let (unscaled, scale) = match value {
        ScalarValue::Int8(Some(v)) => (i128::from(*v), 0),
        ScalarValue::Int16(Some(v)) => (i128::from(*v), 0),
        ScalarValue::Int32(Some(v)) => (i128::from(*v), 0),
        ScalarValue::Int64(Some(v)) => (i128::from(*v), 0),
        ScalarValue::Decimal128(Some(v), _, s) => (*v, i32::from(*s)),
        _ => return type_digits(&value.data_type()),
    };
    // Digits of the unscaled value: |v| < 10^count.
    let count = unscaled
        .unsigned_abs()
        .checked_ilog10()
        .map_or(0, |d| d as i32 + 1);
    Some(Digits {
        integer: count - scale,
        scale,
    })
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::{cast, col, lit};

    use super::*;

    fn schema() -> DFSchema {
        DFSchema::try_from(Schema::new(vec![
            Field::new("price", DataType::Decimal128(15, 2), true),
            Field::new("discount", DataType::Decimal128(15, 2), true),
            Field::new("n", DataType::Int32, true),
            Field::new("big", DataType::Int64, true),
        ]))
        .expect("schema")
    }

    #[test]
    fn digits_bound_types_literals_casts_and_arithmetic() {
        let schema = schema();
        let one = cast(lit(1i64), DataType::Decimal128(20, 0));
        // 1 - discount: 14 integer digits, scale 2 (its type says 21).
        let kept = one.clone() - col("discount");
        assert_eq!(
            digits(&kept, &schema),
            Some(Digits {
                integer: 14,
                scale: 2
            })
        );
        // price × (1 - discount): 27 + 4 = 31 digits; DECIMAL(38,4) holds them.
        let q1 = DataType::Decimal128(38, 4);
        assert!(cannot_overflow(
            Operator::Multiply,
            &col("price"),
            &kept,
            &q1,
            &schema
        ));
        // × (1 + tax) once more: 41 + 6 digits do not fit.
        let twice = col("price") * kept.clone();
        let q1b = DataType::Decimal128(38, 6);
        assert!(!cannot_overflow(
            Operator::Multiply,
            &twice,
            &kept,
            &q1b,
            &schema
        ));
        // INT × 1000 in a BIGINT: 14 digits; BIGINT × 2 may overflow; INT + INT in an INT may.
        let int64 = DataType::Int64;
        let n64 = cast(col("n"), DataType::Int64);
        assert!(cannot_overflow(
            Operator::Multiply,
            &n64,
            &lit(1000i64),
            &int64,
            &schema
        ));
        assert!(!cannot_overflow(
            Operator::Multiply,
            &col("big"),
            &lit(2i64),
            &int64,
            &schema
        ));
        assert!(!cannot_overflow(
            Operator::Plus,
            &col("n"),
            &col("n"),
            &DataType::Int32,
            &schema
        ));
        // Unsigned results are never proven (a difference may be negative).
        assert!(!cannot_overflow(
            Operator::Minus,
            &lit(1i64),
            &lit(2i64),
            &DataType::UInt64,
            &schema
        ));
        // Literals count their own digits: 0.05 is under 10^-1.
        assert_eq!(
            literal_digits(&ScalarValue::Decimal128(Some(5), 10, 2)),
            Some(Digits {
                integer: -1,
                scale: 2
            })
        );
    }
}
