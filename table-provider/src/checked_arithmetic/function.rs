//! [`CheckedArithmetic`]: `+`, `-` and `*` of integers and decimals as functions that fail on
//! overflow instead of wrapping around.
//!
//! DataFusion plans these operators with Arrow's wrapping kernels (`BinaryExpr` checks only
//! when built `with_fail_on_overflow`, which its planner never does), and Arrow's decimal
//! kernels check the 128-bit range, not the result's precision. [`super::CheckArithmetic`]
//! turns each such operator into one of these functions after type coercion; they evaluate
//! Arrow's checked kernels on the same operands, so the result type (DataFusion's coercion of
//! the operator) and every answer that fits are unchanged. Batches of integers too small to
//! overflow take the wrapping kernels, which cost less, and decimal results are compared with
//! their precision through a bound first (`magnitudes.rs`).

use std::any::Any;
use std::sync::Arc;

use arrow::compute::kernels::numeric::{add, add_wrapping, mul, mul_wrapping, sub, sub_wrapping};
use arrow::datatypes::{DataType, Decimal128Type, Decimal256Type, DecimalType, Field, FieldRef};
use arrow::error::ArrowError;
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::interval_arithmetic::{Interval, apply_operator};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Operator, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::physical_expr_common::datum::apply;

use super::magnitudes::{decimals_fit, integers_cannot_overflow};

/// An arithmetic operator that fails on overflow (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CheckedArithmetic {
    op: Operator,
    name: &'static str,
    signature: Signature,
}

impl CheckedArithmetic {
    /// The checked form of `op`, one of `+`, `-` and `*`; `None` for any other operator.
    pub fn new(op: Operator) -> Option<Self> {
        let name = match op {
            Operator::Plus => "petrel_checked_add",
            Operator::Minus => "petrel_checked_subtract",
            Operator::Multiply => "petrel_checked_multiply",
            _ => return None,
        };
        Some(Self {
            op,
            name,
            // The operands are coerced before the operator becomes this function.
            signature: Signature::any(2, Volatility::Immutable),
        })
    }

    /// The operator this function checks.
    pub fn op(&self) -> Operator {
        self.op
    }

    fn operands<'a, T>(&self, args: &'a [T]) -> Result<(&'a T, &'a T)> {
        match args {
            [left, right] => Ok((left, right)),
            _ => plan_err!("{} takes two arguments, got {}", self.name, args.len()),
        }
    }

    /// `result` unless a decimal in it has more digits than its type holds.
    fn within_precision(&self, result: ColumnarValue) -> Result<ColumnarValue> {
        let fits = match &result {
            ColumnarValue::Array(array) => decimals_fit(array),
            ColumnarValue::Scalar(scalar) => scalar_fits(scalar),
        };
        if fits {
            return Ok(result);
        }
        Err(DataFusionError::ArrowError(
            Box::new(ArrowError::ArithmeticOverflow(format!(
                "{} overflows {}: the result has more digits than the type holds; cast an \
                 operand to a wider decimal or a double",
                self.op,
                sql_type(&result.data_type()),
            ))),
            None,
        ))
    }
}

fn scalar_fits(scalar: &ScalarValue) -> bool {
    match scalar {
        ScalarValue::Decimal128(Some(v), p, _) => {
            Decimal128Type::is_valid_decimal_precision(*v, *p)
        }
        ScalarValue::Decimal256(Some(v), p, _) => {
            Decimal256Type::is_valid_decimal_precision(*v, *p)
        }
        _ => true,
    }
}

/// `DECIMAL(p,s)` for decimals, Arrow's name otherwise.
fn sql_type(data_type: &DataType) -> String {
    match data_type {
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("DECIMAL({p},{s})"),
        other => other.to_string(),
    }
}

impl ScalarUDFImpl for CheckedArithmetic {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let (left, right) = self.operands(arg_types)?;
        BinaryTypeCoercer::new(left, &self.op, right).get_result_type()
    }

    /// Nullable when an operand is, as the operator's result is.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let (left, right) = self.operands(args.arg_fields)?;
        let data_type = self.return_type(&[left.data_type().clone(), right.data_type().clone()])?;
        let nullable = left.is_nullable() || right.is_nullable();
        Ok(Arc::new(Field::new(self.name, data_type, nullable)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (left, right) = self.operands(&args.args)?;
        // Integer operands whose magnitudes cannot overflow the result: DataFusion's own
        // (wrapping) kernels, unchecked. (Arrow's decimal kernels are checked either way.)
        if integers_cannot_overflow(self.op, left, right, args.return_field.data_type()) {
            return match self.op {
                Operator::Plus => apply(left, right, add_wrapping),
                Operator::Minus => apply(left, right, sub_wrapping),
                _ => apply(left, right, mul_wrapping),
            };
        }
        let result = match self.op {
            Operator::Plus => apply(left, right, add)?,
            Operator::Minus => apply(left, right, sub)?,
            _ => apply(left, right, mul)?,
        };
        self.within_precision(result)
    }

    /// The operator's interval arithmetic, for statistics and join pruning.
    fn evaluate_bounds(&self, inputs: &[&Interval]) -> Result<Interval> {
        let (left, right) = self.operands(inputs)?;
        apply_operator(&self.op, left, right)
    }

    /// `a + b` and `a - b` keep their operands' order as the operators do (`a + 1` is sorted
    /// when `a` is); a product is unordered, as `BinaryExpr` has it.
    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        let (left, right) = self.operands(inputs)?;
        Ok(match self.op {
            Operator::Plus => left.sort_properties.add(&right.sort_properties),
            Operator::Minus => left.sort_properties.sub(&right.sort_properties),
            _ => SortProperties::Unordered,
        })
    }
}
