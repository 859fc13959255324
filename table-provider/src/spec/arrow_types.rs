//! The Iceberg → Arrow type mapping Petrel serves.
//!
//! timestamptz is `Timestamp(µs, "UTC")`, timestamp `Timestamp(µs)`, the nanosecond variants
//! likewise; decimal is Decimal128 (never Decimal32/64, which break the Java client); uuid is
//! `FixedSizeBinary(16)`; fixed(n) `FixedSizeBinary(n)`; time is `Time64(µs)`. Every field
//! carries its Iceberg field id as `PARQUET:field_id` metadata, which the scan uses to map file
//! columns by id, and is nullable unless the Iceberg field is required.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use iceberg::spec::{NestedField, PrimitiveType, Schema as IcebergSchema, Type};

use crate::error::{Error, Result};

/// The Arrow field metadata key holding an Iceberg field id (the Parquet crate's key).
pub const FIELD_ID_KEY: &str = "PARQUET:field_id";

/// The Iceberg field id recorded on an Arrow field, if any.
pub fn field_id_of(field: &Field) -> Option<i32> {
    field.metadata().get(FIELD_ID_KEY)?.parse().ok()
}

/// An Iceberg schema as an Arrow schema.
pub fn iceberg_schema_to_arrow(schema: &IcebergSchema) -> Result<Schema> {
    let fields = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| nested_field_to_arrow(f))
        .collect::<Result<Vec<_>>>()?;
    Ok(Schema::new(fields))
}

fn nested_field_to_arrow(field: &NestedField) -> Result<Field> {
    Ok(Field::new(
        &field.name,
        iceberg_type_to_arrow(&field.field_type)?,
        !field.required,
    )
    .with_metadata(HashMap::from([(
        FIELD_ID_KEY.to_string(),
        field.id.to_string(),
    )])))
}

/// An Iceberg type as an Arrow type.
pub fn iceberg_type_to_arrow(ty: &Type) -> Result<DataType> {
    Ok(match ty {
        Type::Primitive(p) => primitive_to_arrow(p)?,
        Type::Struct(s) => DataType::Struct(Fields::from(
            s.fields()
                .iter()
                .map(|f| nested_field_to_arrow(f))
                .collect::<Result<Vec<_>>>()?,
        )),
        Type::List(l) => {
            let mut element = nested_field_to_arrow(&l.element_field)?;
            element.set_name("element");
            DataType::List(Arc::new(element))
        }
        Type::Map(m) => {
            let mut key = nested_field_to_arrow(&m.key_field)?;
            key.set_name("key");
            let mut value = nested_field_to_arrow(&m.value_field)?;
            value.set_name("value");
            let entries = Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![key, value])),
                false,
            );
            DataType::Map(Arc::new(entries), false)
        }
    })
}

fn primitive_to_arrow(p: &PrimitiveType) -> Result<DataType> {
    Ok(match p {
        PrimitiveType::Boolean => DataType::Boolean,
        PrimitiveType::Int => DataType::Int32,
        PrimitiveType::Long => DataType::Int64,
        PrimitiveType::Float => DataType::Float32,
        PrimitiveType::Double => DataType::Float64,
        PrimitiveType::Decimal { precision, scale } => {
            let precision = u8::try_from(*precision).map_err(|_| {
                Error::InvalidArgument(format!("decimal precision {precision} out of range"))
            })?;
            let scale = i8::try_from(*scale).map_err(|_| {
                Error::InvalidArgument(format!("decimal scale {scale} out of range"))
            })?;
            DataType::Decimal128(precision, scale)
        }
        PrimitiveType::Date => DataType::Date32,
        PrimitiveType::Time => DataType::Time64(TimeUnit::Microsecond),
        PrimitiveType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        PrimitiveType::Timestamptz => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        PrimitiveType::TimestampNs => DataType::Timestamp(TimeUnit::Nanosecond, None),
        PrimitiveType::TimestamptzNs => {
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        }
        PrimitiveType::String => DataType::Utf8,
        PrimitiveType::Uuid => DataType::FixedSizeBinary(16),
        PrimitiveType::Fixed(n) => DataType::FixedSizeBinary(
            i32::try_from(*n)
                .map_err(|_| Error::InvalidArgument(format!("fixed length {n} out of range")))?,
        ),
        PrimitiveType::Binary => DataType::Binary,
    })
}
