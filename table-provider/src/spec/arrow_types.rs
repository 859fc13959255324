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

/// An Arrow schema (a query's result, an ingested batch's) as a new Iceberg schema, field ids
/// assigned from 1 depth first. Narrow integers widen to `int`, unsigned ones to the next signed
/// type, timestamps of any unit become microsecond `timestamp` / `timestamptz` (Iceberg's
/// common precision; the nanosecond types need format 3), dictionaries their value type.
/// Columns that cannot be stored (`NULL` without a type, `UInt64`, intervals) are errors naming
/// the column.
pub fn arrow_schema_to_iceberg(schema: &Schema) -> Result<IcebergSchema> {
    let mut next_id = 0;
    let fields = schema
        .fields()
        .iter()
        .map(|f| arrow_field_to_iceberg(f, &mut next_id))
        .collect::<Result<Vec<_>>>()?;
    IcebergSchema::builder()
        .with_fields(fields)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("schema: {e}")))
}

fn arrow_field_to_iceberg(field: &Field, next_id: &mut i32) -> Result<Arc<NestedField>> {
    *next_id += 1;
    let id = *next_id;
    let ty = arrow_type_to_iceberg(field.name(), field.data_type(), next_id)?;
    Ok(Arc::new(if field.is_nullable() {
        NestedField::optional(id, field.name(), ty)
    } else {
        NestedField::required(id, field.name(), ty)
    }))
}

fn arrow_type_to_iceberg(name: &str, data_type: &DataType, next_id: &mut i32) -> Result<Type> {
    let primitive = |p: PrimitiveType| Ok(Type::Primitive(p));
    match data_type {
        DataType::Boolean => primitive(PrimitiveType::Boolean),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            primitive(PrimitiveType::Int)
        }
        DataType::Int64 | DataType::UInt32 => primitive(PrimitiveType::Long),
        DataType::Float16 | DataType::Float32 => primitive(PrimitiveType::Float),
        DataType::Float64 => primitive(PrimitiveType::Double),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s)
            if *p <= 38 && *s >= 0 =>
        {
            primitive(PrimitiveType::Decimal {
                precision: u32::from(*p),
                scale: *s as u32,
            })
        }
        DataType::Date32 | DataType::Date64 => primitive(PrimitiveType::Date),
        DataType::Time32(_) | DataType::Time64(_) => primitive(PrimitiveType::Time),
        DataType::Timestamp(_, None) => primitive(PrimitiveType::Timestamp),
        DataType::Timestamp(_, Some(_)) => primitive(PrimitiveType::Timestamptz),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            primitive(PrimitiveType::String)
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            primitive(PrimitiveType::Binary)
        }
        DataType::FixedSizeBinary(n) if *n > 0 => primitive(PrimitiveType::Fixed(*n as u64)),
        DataType::Dictionary(_, value) => arrow_type_to_iceberg(name, value, next_id),
        DataType::List(element)
        | DataType::LargeList(element)
        | DataType::ListView(element)
        | DataType::LargeListView(element)
        | DataType::FixedSizeList(element, _) => {
            *next_id += 1;
            let id = *next_id;
            let ty = arrow_type_to_iceberg(name, element.data_type(), next_id)?;
            Ok(Type::List(iceberg::spec::ListType::new(Arc::new(
                NestedField::list_element(id, ty, !element.is_nullable()),
            ))))
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(Error::InvalidArgument(format!(
                    "column {name}: malformed map"
                )));
            };
            let (Some(key), Some(value)) = (kv.first(), kv.get(1)) else {
                return Err(Error::InvalidArgument(format!(
                    "column {name}: malformed map"
                )));
            };
            *next_id += 2;
            let (key_id, value_id) = (*next_id - 1, *next_id);
            let key_type = arrow_type_to_iceberg(name, key.data_type(), next_id)?;
            let value_type = arrow_type_to_iceberg(name, value.data_type(), next_id)?;
            Ok(Type::Map(iceberg::spec::MapType::new(
                Arc::new(NestedField::map_key_element(key_id, key_type)),
                Arc::new(NestedField::map_value_element(
                    value_id,
                    value_type,
                    !value.is_nullable(),
                )),
            )))
        }
        DataType::Struct(fields) => Ok(Type::Struct(iceberg::spec::StructType::new(
            fields
                .iter()
                .map(|f| arrow_field_to_iceberg(f, next_id))
                .collect::<Result<Vec<_>>>()?,
        ))),
        other => Err(Error::InvalidArgument(format!(
            "column {name}: Arrow type {other} has no Iceberg type (cast it, e.g. to BIGINT, \
             DECIMAL(38, 0) or STRING)"
        ))),
    }
}
