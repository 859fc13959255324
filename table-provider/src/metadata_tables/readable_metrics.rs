//! The `readable_metrics` column of the files and entries tables (Iceberg Java's
//! `MetricsUtil.readableMetricsStruct`): one field per primitive column of the table's current
//! schema, named by its full dotted name (`st.x`, `tags.element`, `mp.key`) and sorted by it,
//! each a struct of the file's `column_size`, `value_count`, `null_value_count`,
//! `nan_value_count` and its `lower_bound` / `upper_bound` decoded to the column's type.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StructArray};
use arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::ScalarValue;
use iceberg::spec::{DataFile, Datum, Literal, NestedField, Schema, Type};

use crate::error::Result;
use crate::spec::{iceberg_type_to_arrow, literal_to_scalar};

/// A leaf column of the table: its dotted name, field id and type.
#[derive(Debug, Clone)]
struct Leaf {
    name: String,
    id: i32,
    ty: Type,
    arrow: DataType,
}

/// The readable-metrics type of a schema, and how to fill it.
#[derive(Debug, Clone)]
pub(crate) struct ReadableMetrics {
    leaves: Vec<Leaf>,
    fields: Fields,
}

fn collect(field: &NestedField, prefix: &str, out: &mut Vec<(String, i32, Type)>) {
    let name = if prefix.is_empty() {
        field.name.clone()
    } else {
        format!("{prefix}.{}", field.name)
    };
    match field.field_type.as_ref() {
        Type::Primitive(_) => out.push((name, field.id, (*field.field_type).clone())),
        Type::Struct(s) => {
            for f in s.fields() {
                collect(f, &name, out);
            }
        }
        Type::List(l) => collect(&l.element_field, &name, out),
        Type::Map(m) => {
            collect(&m.key_field, &name, out);
            collect(&m.value_field, &name, out);
        }
    }
}

fn metric_fields(bound: &DataType) -> Fields {
    Fields::from(vec![
        Field::new("column_size", DataType::Int64, true),
        Field::new("value_count", DataType::Int64, true),
        Field::new("null_value_count", DataType::Int64, true),
        Field::new("nan_value_count", DataType::Int64, true),
        Field::new("lower_bound", bound.clone(), true),
        Field::new("upper_bound", bound.clone(), true),
    ])
}

impl ReadableMetrics {
    /// The readable metrics of `schema`'s columns.
    pub(crate) fn of(schema: &Schema) -> Result<Self> {
        let mut found = Vec::new();
        for f in schema.as_struct().fields() {
            collect(f, "", &mut found);
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let leaves = found
            .into_iter()
            .map(|(name, id, ty)| {
                let arrow = iceberg_type_to_arrow(&ty)?;
                Ok(Leaf {
                    name,
                    id,
                    ty,
                    arrow,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let fields = leaves
            .iter()
            .map(|l| Field::new(&l.name, DataType::Struct(metric_fields(&l.arrow)), true))
            .collect::<Vec<_>>();
        Ok(Self {
            leaves,
            fields: Fields::from(fields),
        })
    }

    /// The column's type.
    pub(crate) fn data_type(&self) -> DataType {
        DataType::Struct(self.fields.clone())
    }

    /// The column for `files`.
    pub(crate) fn array(&self, files: &[&DataFile]) -> Result<ArrayRef> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.leaves.len());
        for leaf in &self.leaves {
            let count = |m: fn(&DataFile) -> &std::collections::HashMap<i32, u64>| {
                Arc::new(Int64Array::from_iter(
                    files.iter().map(|f| m(f).get(&leaf.id).map(|v| *v as i64)),
                )) as ArrayRef
            };
            let bound = |m: fn(&DataFile) -> &std::collections::HashMap<i32, Datum>| {
                let values = files
                    .iter()
                    .map(|f| bound_scalar(m(f).get(&leaf.id), &leaf.ty))
                    .collect::<Result<Vec<_>>>()?;
                if values.is_empty() {
                    return Ok(arrow::array::new_empty_array(&leaf.arrow));
                }
                Ok::<_, crate::error::Error>(ScalarValue::iter_to_array(values)?)
            };
            let children = vec![
                count(DataFile::column_sizes),
                count(DataFile::value_counts),
                count(DataFile::null_value_counts),
                count(DataFile::nan_value_counts),
                bound(DataFile::lower_bounds)?,
                bound(DataFile::upper_bounds)?,
            ];
            columns.push(Arc::new(StructArray::try_new(
                metric_fields(&leaf.arrow),
                children,
                None,
            )?));
        }
        if columns.is_empty() {
            return Ok(Arc::new(StructArray::new_empty_fields(files.len(), None)));
        }
        Ok(Arc::new(StructArray::try_new(
            self.fields.clone(),
            columns,
            None,
        )?))
    }
}

/// A bound as a value of the column's current type (a bound written before a type promotion,
/// int → long or float → double, is widened).
fn bound_scalar(datum: Option<&Datum>, ty: &Type) -> Result<ScalarValue> {
    let literal = datum.map(|d| Literal::Primitive(d.literal().clone()));
    literal_to_scalar(literal.as_ref(), ty)
}
