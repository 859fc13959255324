//! `petrel_string_concat(a, b)`: the `a || b` of two strings, as a function, so that its calls
//! can be bounded like `concat`'s ([`super::BoundedOutput`]).
//!
//! DataFusion evaluates `||` of strings as a binary operator, which no function registry
//! reaches; a CTE that doubles a string level after level (`SELECT s || s FROM previous`)
//! grew a value without bound. [`super::BoundFunctionOutputs`] turns each `||` of strings
//! into this function after type coercion; it evaluates DataFusion's own operator on its
//! arguments, so results (NULL if either side is NULL, the coerced type) are unchanged.

use std::any::Any;
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Operator, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};

/// The function's name in plans (and in a cluster's function registries).
pub const STRING_CONCAT: &str = "petrel_string_concat";

/// `a || b` of two strings (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StringConcat {
    signature: Signature,
}

impl Default for StringConcat {
    fn default() -> Self {
        Self {
            // The operands are coerced before the operator becomes this function.
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for StringConcat {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        STRING_CONCAT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [left, right] => {
                BinaryTypeCoercer::new(left, &Operator::StringConcat, right).get_result_type()
            }
            _ => plan_err!(
                "{STRING_CONCAT} takes two arguments, got {}",
                arg_types.len()
            ),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return plan_err!(
                "{STRING_CONCAT} takes two arguments, got {}",
                args.args.len()
            );
        };
        // The operator over a batch of the arguments that are columns; scalars stay literals,
        // as they would in the operator's own plan.
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        let mut operand = |value: &ColumnarValue| -> Arc<dyn PhysicalExpr> {
            match value {
                ColumnarValue::Scalar(s) => Arc::new(Literal::new(s.clone())),
                ColumnarValue::Array(a) => {
                    let name = format!("operand{}", fields.len());
                    let expr = Arc::new(Column::new(&name, fields.len()));
                    fields.push(Field::new(name, a.data_type().clone(), true));
                    columns.push(Arc::clone(a));
                    expr
                }
            }
        };
        let (left, right) = (operand(left), operand(right));
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(args.number_rows)),
        )?;
        BinaryExpr::new(left, Operator::StringConcat, right).evaluate(&batch)
    }
}
