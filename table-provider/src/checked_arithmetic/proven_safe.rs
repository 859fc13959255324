//! Arithmetic that cannot overflow, proven from its operands' types and literals before it runs.
//!
//! Most arithmetic of real queries cannot overflow by its types alone: TPC-H Q1's
//! `l_extendedprice * (1 - l_discount)` multiplies a `DECIMAL(15,2)` by `1 - DECIMAL(15,2)`
//! (at most 14 integer digits and scale 2), 31 digits for a `DECIMAL(38,4)` result; an `INT`
//! column times 1,000 has at most 14 digits in a `BIGINT`. DataFusion's result types do not say
//! so (the literal `1` is a `DECIMAL(20,0)`, so `1 - l_discount` is `DECIMAL(23,2)` and the
//! product's 39 digits are capped at 38). [`cannot_overflow`] bounds the magnitude each operand
//! can have (a literal's own, a column's type's, a cast's smaller of the two, and arithmetic's
//! from its operands: `1 + 1 + … + 1` is its count), and [`super::CheckArithmetic`] leaves an
//! operator it proves safe as DataFusion's own: no check at run time, and every optimizer rule
//! still sees the operator. Bounds are doubles, taken as exact under 99% of a type's range.

use arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ExprSchema, ScalarValue};
use datafusion::logical_expr::expr::{Cast, ScalarFunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use super::CheckedArithmetic;
use super::magnitudes::MARGIN;

/// What a value's magnitude is under (`magnitude`, in the value's own units: 12.5 is 12.5,
/// whatever its scale), and its scale (digits after the point; 0 for integers).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bound {
    magnitude: f64,
    scale: i32,
}

impl Bound {
    fn of(op: Operator, left: Bound, right: Bound) -> Option<Bound> {
        match op {
            Operator::Plus | Operator::Minus => Some(Bound {
                magnitude: left.magnitude + right.magnitude,
                scale: left.scale.max(right.scale),
            }),
            Operator::Multiply => Some(Bound {
                magnitude: left.magnitude * right.magnitude,
                scale: left.scale + right.scale,
            }),
            _ => None,
        }
    }
}

/// Whether `left op right`, of type `result`, cannot overflow by the magnitudes its operands
/// can have. `false` when that cannot be told (unsigned results, whose differences may be
/// negative, among them).
pub(super) fn cannot_overflow(
    op: Operator,
    left: &Expr,
    right: &Expr,
    result: &DataType,
    schema: &DFSchema,
) -> bool {
    let (Some(l), Some(r)) = (bound(left, schema), bound(right, schema)) else {
        return false;
    };
    let Some(bound) = Bound::of(op, l, r) else {
        return false;
    };
    let limit = match *result {
        // Unscaled, a `DECIMAL(p, s)` holds magnitudes under 10^p.
        DataType::Decimal128(p, s) if bound.scale == i32::from(s) => {
            10f64.powi(i32::from(p) - i32::from(s))
        }
        DataType::Int64 if bound.scale == 0 => i64::MAX as f64,
        DataType::Int32 if bound.scale == 0 => f64::from(i32::MAX),
        DataType::Int16 if bound.scale == 0 => f64::from(i16::MAX),
        DataType::Int8 if bound.scale == 0 => f64::from(i8::MAX),
        _ => return false,
    };
    bound.magnitude.is_finite() && bound.magnitude < limit * MARGIN
}

/// The bound of the values of `expr`, if bounded here.
fn bound(expr: &Expr, schema: &DFSchema) -> Option<Bound> {
    match expr {
        Expr::Literal(value, _) => literal_bound(value),
        Expr::Alias(alias) => bound(&alias.expr, schema),
        Expr::Negative(operand) => bound(operand, schema),
        Expr::Cast(Cast { expr, data_type }) => {
            let target = type_bound(data_type)?;
            match bound(expr, schema) {
                // (A cast to fewer digits after the point rounds: the target's bound then.)
                Some(inner) if inner.scale <= target.scale => Some(Bound {
                    magnitude: inner.magnitude.min(target.magnitude),
                    scale: target.scale,
                }),
                _ => Some(target),
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            Bound::of(*op, bound(left, schema)?, bound(right, schema)?)
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) => {
            match (
                func.inner().as_any().downcast_ref::<CheckedArithmetic>(),
                args.as_slice(),
            ) {
                (Some(checked), [left, right]) => {
                    Bound::of(checked.op(), bound(left, schema)?, bound(right, schema)?)
                }
                _ => None,
            }
        }
        Expr::Column(column) => type_bound(schema.field_from_column(column).ok()?.data_type()),
        _ => None,
    }
}

/// The bound of a signed integer or decimal type's values.
fn type_bound(data_type: &DataType) -> Option<Bound> {
    let (magnitude, scale) = match *data_type {
        DataType::Int8 => (f64::from(i8::MAX), 0),
        DataType::Int16 => (f64::from(i16::MAX), 0),
        DataType::Int32 => (f64::from(i32::MAX), 0),
        DataType::Int64 => (i64::MAX as f64, 0),
        DataType::Decimal128(p, s) => (10f64.powi(i32::from(p) - i32::from(s)), i32::from(s)),
        _ => return None,
    };
    Some(Bound { magnitude, scale })
}

/// A literal's own magnitude: `1` is 1, whatever its type.
fn literal_bound(value: &ScalarValue) -> Option<Bound> {
    let (magnitude, scale) = match value {
        ScalarValue::Int8(Some(v)) => (f64::from(*v), 0),
        ScalarValue::Int16(Some(v)) => (f64::from(*v), 0),
        ScalarValue::Int32(Some(v)) => (f64::from(*v), 0),
        ScalarValue::Int64(Some(v)) => (*v as f64, 0),
        ScalarValue::Decimal128(Some(v), _, s) => {
            (*v as f64 / 10f64.powi(i32::from(*s)), i32::from(*s))
        }
        _ => return type_bound(&value.data_type()),
    };
    Some(Bound {
        magnitude: magnitude.abs(),
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
    fn bounds_of_types_literals_casts_and_arithmetic() {
        let schema = schema();
        let one = cast(lit(1i64), DataType::Decimal128(20, 0));
        // 1 - discount: under 1 + 10^13, scale 2 (its type says 10^21).
        let kept = one.clone() - col("discount");
        assert_eq!(
            bound(&kept, &schema),
            Some(Bound {
                magnitude: 1.0 + 1e13,
                scale: 2
            })
        );
        // price × (1 - discount): under 10^26 at scale 4; DECIMAL(38,4) holds 10^34.
        let q1 = DataType::Decimal128(38, 4);
        assert!(cannot_overflow(
            Operator::Multiply,
            &col("price"),
            &kept,
            &q1,
            &schema
        ));
        // × (1 + tax) once more: 10^39 does not fit DECIMAL(38,6).
        let twice = col("price") * kept.clone();
        let q1b = DataType::Decimal128(38, 6);
        assert!(!cannot_overflow(
            Operator::Multiply,
            &twice,
            &kept,
            &q1b,
            &schema
        ));
        // INT × 1000 in a BIGINT fits; BIGINT × 2 and INT + INT in an INT may not.
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
        // A long sum of literals is its count.
        let ones = (1..2000).fold(lit(1i64), |sum, _| sum + lit(1i64));
        assert!(cannot_overflow(
            Operator::Plus,
            &ones,
            &lit(1i64),
            &int64,
            &schema
        ));
        // Unsigned results are never proven (a difference may be negative).
        let uint64 = DataType::UInt64;
        assert!(!cannot_overflow(
            Operator::Minus,
            &lit(1i64),
            &lit(2i64),
            &uint64,
            &schema
        ));
        // Literals count their own magnitude: 0.05 is 0.05.
        assert_eq!(
            literal_bound(&ScalarValue::Decimal128(Some(5), 10, 2)),
            Some(Bound {
                magnitude: 0.05,
                scale: 2
            })
        );
    }
}
