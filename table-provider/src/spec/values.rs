//! Iceberg values (`Datum`, `Literal`) as DataFusion scalars.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use iceberg::spec::{Datum, Literal, PrimitiveLiteral, PrimitiveType, Type};

use super::arrow_types::iceberg_type_to_arrow;
use crate::error::{Error, Result};

/// A typed Iceberg datum as a scalar of the Arrow type Petrel maps its type to.
pub fn datum_to_scalar(datum: &Datum) -> Result<ScalarValue> {
    primitive_to_scalar(datum.literal(), datum.data_type())
}

/// A literal of Iceberg type `ty` (an `initial-default`, say) as a scalar.
pub fn literal_to_scalar(literal: Option<&Literal>, ty: &Type) -> Result<ScalarValue> {
    let data_type = iceberg_type_to_arrow(ty)?;
    match (literal, ty) {
        (None, _) => Ok(ScalarValue::try_from(&data_type)?),
        (Some(Literal::Primitive(p)), Type::Primitive(pt)) => primitive_to_scalar(p, pt),
        (Some(other), _) => Err(Error::InvalidArgument(format!(
            "default value {other:?} of type {ty} is not supported"
        ))),
    }
}

fn primitive_to_scalar(literal: &PrimitiveLiteral, ty: &PrimitiveType) -> Result<ScalarValue> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    let utc = || Some(Arc::<str>::from("UTC"));
    Ok(match (ty, literal) {
        (T::Boolean, L::Boolean(v)) => ScalarValue::Boolean(Some(*v)),
        (T::Int, L::Int(v)) => ScalarValue::Int32(Some(*v)),
        (T::Long, L::Long(v)) => ScalarValue::Int64(Some(*v)),
        (T::Long, L::Int(v)) => ScalarValue::Int64(Some(i64::from(*v))),
        (T::Float, L::Float(v)) => ScalarValue::Float32(Some(v.0)),
        (T::Double, L::Double(v)) => ScalarValue::Float64(Some(v.0)),
        (T::Double, L::Float(v)) => ScalarValue::Float64(Some(f64::from(v.0))),
        (T::Decimal { precision, scale }, L::Int128(v)) => {
            ScalarValue::Decimal128(Some(*v), *precision as u8, *scale as i8)
        }
        (T::Date, L::Int(v)) => ScalarValue::Date32(Some(*v)),
        (T::Time, L::Long(v)) => ScalarValue::Time64Microsecond(Some(*v)),
        (T::Timestamp, L::Long(v)) => ScalarValue::TimestampMicrosecond(Some(*v), None),
        (T::Timestamptz, L::Long(v)) => ScalarValue::TimestampMicrosecond(Some(*v), utc()),
        (T::TimestampNs, L::Long(v)) => ScalarValue::TimestampNanosecond(Some(*v), None),
        (T::TimestamptzNs, L::Long(v)) => ScalarValue::TimestampNanosecond(Some(*v), utc()),
        (T::String, L::String(v)) => ScalarValue::Utf8(Some(v.clone())),
        (T::Uuid, L::UInt128(v)) => {
            ScalarValue::FixedSizeBinary(16, Some(v.to_be_bytes().to_vec()))
        }
        (T::Fixed(n), L::Binary(v)) => ScalarValue::FixedSizeBinary(*n as i32, Some(v.clone())),
        (T::Binary, L::Binary(v)) => ScalarValue::Binary(Some(v.clone())),
        (ty, literal) => {
            return Err(Error::InvalidArgument(format!(
                "value {literal:?} does not fit Iceberg type {ty}"
            )));
        }
    })
}

/// A scalar of the Arrow type Petrel maps Iceberg type `ty` to (as a partition transform or a
/// column produces it) as an Iceberg literal; `None` for null.
pub fn scalar_to_literal(scalar: &ScalarValue, ty: &PrimitiveType) -> Result<Option<Literal>> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    if scalar.is_null() {
        return Ok(None);
    }
    let literal = match (ty, scalar) {
        (T::Boolean, ScalarValue::Boolean(Some(v))) => L::Boolean(*v),
        (T::Int, ScalarValue::Int32(Some(v))) | (T::Date, ScalarValue::Date32(Some(v))) => {
            L::Int(*v)
        }
        (T::Long, ScalarValue::Int64(Some(v)))
        | (T::Time, ScalarValue::Time64Microsecond(Some(v)))
        | (T::Timestamp | T::Timestamptz, ScalarValue::TimestampMicrosecond(Some(v), _))
        | (T::TimestampNs | T::TimestamptzNs, ScalarValue::TimestampNanosecond(Some(v), _)) => {
            L::Long(*v)
        }
        (T::Float, ScalarValue::Float32(Some(v))) => L::Float((*v).into()),
        (T::Double, ScalarValue::Float64(Some(v))) => L::Double((*v).into()),
        (T::Decimal { .. }, ScalarValue::Decimal128(Some(v), _, _)) => L::Int128(*v),
        (
            T::String,
            ScalarValue::Utf8(Some(v))
            | ScalarValue::LargeUtf8(Some(v))
            | ScalarValue::Utf8View(Some(v)),
        ) => L::String(v.clone()),
        (T::Uuid, ScalarValue::FixedSizeBinary(16, Some(v))) => {
            let bytes: [u8; 16] = v
                .as_slice()
                .try_into()
                .map_err(|_| Error::InvalidArgument(format!("uuid value of {} bytes", v.len())))?;
            L::UInt128(u128::from_be_bytes(bytes))
        }
        (
            T::Fixed(_) | T::Binary,
            ScalarValue::FixedSizeBinary(_, Some(v))
            | ScalarValue::Binary(Some(v))
            | ScalarValue::LargeBinary(Some(v))
            | ScalarValue::BinaryView(Some(v)),
        ) => L::Binary(v.clone()),
        (ty, scalar) => {
            return Err(Error::InvalidArgument(format!(
                "value {scalar} does not fit Iceberg type {ty}"
            )));
        }
    };
    Ok(Some(Literal::Primitive(literal)))
}
