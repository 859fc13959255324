//! [`PartitionKeyExpr`]: one partition field's transform of its source column as a DataFusion
//! physical expression (`truncate[10](i)`, `bucket[16](k)`, `day(ts)`, ...), so that a plan can
//! hash-distribute rows on a table's partition key: the rows of one table partition then reach
//! one writer task (`write.distribution-mode=hash`, see [`super::distribution`]).
//!
//! The values are those the writer's partitioner computes (the same [`FieldTransform`]: the
//! `iceberg` crate's transform functions over Arrow arrays), so rows the partitioner puts in one
//! partition have equal keys here and hash alike.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Schema as ArrowSchema, SchemaRef};
use datafusion::common::Result as DFResult;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_plan::PhysicalExpr;
use iceberg::spec::{PartitionField, Schema, Transform, Type};

use super::partitioner::FieldTransform;
use crate::error::{Error, Result};

/// One partition field's transformed values of the written rows.
#[derive(Debug)]
pub struct PartitionKeyExpr {
    /// The spec the field belongs to (with the field id: what the expression is).
    spec_id: i32,
    /// The partition field's id.
    field_id: i32,
    transform: Transform,
    /// The source column's name, for display.
    source: String,
    data_type: DataType,
    function: FieldTransform,
}

impl PartitionKeyExpr {
    /// The partition field `field` of spec `spec_id` of `schema`, over rows of `arrow_schema`
    /// (the Arrow form of `schema` the write writes, with field ids).
    pub fn new(
        spec_id: i32,
        schema: &Schema,
        field: &PartitionField,
        arrow_schema: &SchemaRef,
    ) -> Result<Self> {
        let function = FieldTransform::new(schema, field, arrow_schema)?;
        let data_type =
            iceberg::arrow::type_to_arrow_type(&Type::Primitive(function.result().clone()))?;
        let source = schema
            .name_by_field_id(field.source_id)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "partition field {} has no source column {}",
                    field.name, field.source_id
                ))
            })?
            .to_string();
        Ok(Self {
            spec_id,
            field_id: field.field_id,
            transform: field.transform,
            source,
            data_type,
            function,
        })
    }
}

impl fmt::Display for PartitionKeyExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.transform, self.source)
    }
}

impl PartialEq for PartitionKeyExpr {
    fn eq(&self, other: &Self) -> bool {
        self.spec_id == other.spec_id
            && self.field_id == other.field_id
            && self.transform == other.transform
            && self.source == other.source
    }
}

impl Eq for PartitionKeyExpr {}

impl Hash for PartitionKeyExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.spec_id.hash(state);
        self.field_id.hash(state);
        self.transform.hash(state);
        self.source.hash(state);
    }
}

impl PhysicalExpr for PartitionKeyExpr {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn data_type(&self, _input_schema: &ArrowSchema) -> DFResult<DataType> {
        Ok(self.data_type.clone())
    }

    fn nullable(&self, _input_schema: &ArrowSchema) -> DFResult<bool> {
        Ok(true)
    }

    fn evaluate(&self, batch: &RecordBatch) -> DFResult<ColumnarValue> {
        Ok(ColumnarValue::Array(self.function.apply(batch)?))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        Vec::new()
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> DFResult<Arc<dyn PhysicalExpr>> {
        Ok(self)
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{
        Array, Date32Array, Int32Array, Int64Array, StringArray, StringViewArray,
        TimestampMicrosecondArray,
    };
    use iceberg::spec::{NestedField, PartitionSpec, PrimitiveType};

    use super::*;
    use crate::spec::iceberg_schema_to_arrow;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "s", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
            ])
            .build()
            .unwrap()
    }

    fn keys(spec: &PartitionSpec, schema: &Schema) -> Vec<PartitionKeyExpr> {
        let arrow_schema = Arc::new(iceberg_schema_to_arrow(schema).unwrap());
        spec.fields()
            .iter()
            .map(|f| PartitionKeyExpr::new(spec.spec_id(), schema, f, &arrow_schema).unwrap())
            .collect()
    }

    #[test]
    fn keys_are_the_transformed_values() {
        let schema = schema();
        let spec = PartitionSpec::builder(schema.clone())
            .add_partition_field("id", "id_trunc", Transform::Truncate(10))
            .unwrap()
            .add_partition_field("s", "s", Transform::Identity)
            .unwrap()
            .add_partition_field("ts", "ts_day", Transform::Day)
            .unwrap()
            .add_partition_field("id", "id_bucket", Transform::Bucket(16))
            .unwrap()
            .build()
            .unwrap();
        let keys = keys(&spec, &schema);
        let names: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "truncate[10](id)",
                "identity(s)",
                "day(ts)",
                "bucket[16](id)"
            ]
        );
        let day = 86_400_000_000i64;
        // The batch as a plan may produce it: no field ids, strings as views.
        let input = Arc::new(ArrowSchema::new(vec![
            arrow::datatypes::Field::new("id", DataType::Int64, false),
            arrow::datatypes::Field::new("s", DataType::Utf8View, true),
            arrow::datatypes::Field::new(
                "ts",
                DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
                true,
            ),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&input),
            vec![
                Arc::new(Int64Array::from(vec![1, 19, -1])),
                Arc::new(StringViewArray::from(vec![Some("a"), None, Some("b")])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(day),
                    Some(2 * day + 5),
                    None,
                ])),
            ],
        )
        .unwrap();
        let array = |i: usize| match keys[i].evaluate(&batch).unwrap() {
            ColumnarValue::Array(a) => {
                assert_eq!(a.data_type(), &keys[i].data_type(&input).unwrap());
                a
            }
            ColumnarValue::Scalar(_) => panic!("a scalar"),
        };
        let trunc = array(0);
        let trunc = trunc.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(trunc.values().to_vec(), vec![0, 10, -10]);
        let s = array(1);
        let s = s.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![Some("a"), None, Some("b")]
        );
        let days = array(2);
        let days = days.as_any().downcast_ref::<Date32Array>().unwrap();
        assert_eq!(
            days.iter().collect::<Vec<_>>(),
            vec![Some(1), Some(2), None]
        );
        let bucket = array(3);
        let bucket = bucket.as_any().downcast_ref::<Int32Array>().unwrap();
        let expected = iceberg::transform::create_transform_function(&Transform::Bucket(16))
            .unwrap()
            .transform(Arc::new(Int64Array::from(vec![1, 19, -1])))
            .unwrap();
        let expected = expected.as_any().downcast_ref::<Int32Array>().unwrap();
        assert_eq!(bucket, expected);
        // Equal for the same field of the same spec, different otherwise.
        let again = self::keys(&spec, &schema);
        assert!(keys[0] == again[0]);
        assert!(keys[0] != again[3]);
    }
}
