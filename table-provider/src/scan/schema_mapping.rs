//! Field-id schema mapping: how a data file's columns become the scan schema's.
//!
//! DataFusion's Parquet scan adapts each file to the table schema through a
//! [`PhysicalExprAdapterFactory`]. Petrel's adapter matches columns by Iceberg field id (the
//! `PARQUET:field_id` of each file column, or `schema.name-mapping.default` for files written
//! without ids), never by name, so renamed, reordered, dropped and re-added columns read
//! right. A column missing from a file reads as its `initial-default` (v3) or null; promoted
//! primitives (int→long, float→double, decimal widening) are cast; nested types are rebuilt
//! child by child by field id ([`FieldIdCastExpr`]).

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, ListArray, MapArray, RecordBatch, StructArray, new_null_array,
};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, Result as DFResult, ScalarValue, internal_err};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{CastColumnExpr, Column, Literal};
use datafusion::physical_expr_adapter::{PhysicalExprAdapter, PhysicalExprAdapterFactory};
use iceberg::spec::{NameMapping, Schema as IcebergSchema};

use crate::spec::{field_id_of, literal_to_scalar};

/// Creates the field-id expression adapters for the files of one scan.
#[derive(Debug)]
pub struct FieldIdAdapterFactory {
    schema: Arc<IcebergSchema>,
    name_mapping: Option<Arc<NameMapping>>,
}

impl FieldIdAdapterFactory {
    /// Adapts files to `schema` (the scan's Iceberg schema); `name_mapping` gives ids to
    /// columns of files written without them.
    pub fn new(schema: Arc<IcebergSchema>, name_mapping: Option<Arc<NameMapping>>) -> Self {
        Self {
            schema,
            name_mapping,
        }
    }
}

impl PhysicalExprAdapterFactory for FieldIdAdapterFactory {
    fn create(
        &self,
        logical_file_schema: SchemaRef,
        physical_file_schema: SchemaRef,
    ) -> DFResult<Arc<dyn PhysicalExprAdapter>> {
        let mut by_id = HashMap::new();
        for (index, field) in physical_file_schema.fields().iter().enumerate() {
            let id = field_id_of(field).or_else(|| {
                self.name_mapping.as_ref().and_then(|m| {
                    m.fields()
                        .iter()
                        .find(|mf| mf.names().iter().any(|n| n == field.name()))
                        .and_then(|mf| mf.field_id())
                })
            });
            if let Some(id) = id {
                by_id.entry(id).or_insert(index);
            }
        }
        Ok(Arc::new(FieldIdAdapter {
            logical: logical_file_schema,
            physical: physical_file_schema,
            by_id,
            schema: Arc::clone(&self.schema),
        }))
    }
}

/// Rewrites scan expressions for one file.
#[derive(Debug)]
pub(crate) struct FieldIdAdapter {
    logical: SchemaRef,
    physical: SchemaRef,
    by_id: HashMap<i32, usize>,
    schema: Arc<IcebergSchema>,
}

impl PhysicalExprAdapter for FieldIdAdapter {
    fn rewrite(&self, expr: Arc<dyn PhysicalExpr>) -> DFResult<Arc<dyn PhysicalExpr>> {
        expr.transform(|e| match e.as_any().downcast_ref::<Column>() {
            Some(column) => self.rewrite_column(column).map(Transformed::yes),
            None => Ok(Transformed::no(e)),
        })
        .data()
    }
}

impl FieldIdAdapter {
    fn rewrite_column(&self, column: &Column) -> DFResult<Arc<dyn PhysicalExpr>> {
        let logical = self.logical.field_with_name(column.name())?;
        let id = field_id_of(logical);
        let Some(index) = id.and_then(|id| self.by_id.get(&id).copied()) else {
            return self.missing_column(logical, id);
        };
        let physical = self.physical.field(index);
        let input: Arc<dyn PhysicalExpr> = Arc::new(Column::new(physical.name(), index));
        if physical.data_type() == logical.data_type() {
            return Ok(input);
        }
        if physical.data_type().is_nested() || logical.data_type().is_nested() {
            return Ok(Arc::new(FieldIdCastExpr {
                input,
                target: Arc::new(logical.clone()),
            }));
        }
        Ok(Arc::new(CastColumnExpr::new(
            input,
            Arc::new(physical.clone()),
            Arc::new(logical.clone()),
            None,
        )))
    }

    fn missing_column(&self, logical: &Field, id: Option<i32>) -> DFResult<Arc<dyn PhysicalExpr>> {
        let iceberg_field = id.and_then(|id| self.schema.field_by_id(id));
        let value = match iceberg_field {
            Some(f) => literal_to_scalar(f.initial_default.as_ref(), &f.field_type)?,
            None => ScalarValue::try_from(logical.data_type())?,
        };
        if value.is_null() && !logical.is_nullable() {
            // The file breaks its table's schema: a broken file (INTERNAL), not a user error.
            let message = format!(
                "required column {} (field id {}) is missing from the data file and has no initial-default",
                logical.name(),
                id.map_or("?".to_string(), |i| i.to_string())
            );
            return Err(DataFusionError::External(Box::new(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                message,
            ))));
        }
        Ok(Arc::new(Literal::new(value)))
    }
}

/// Casts a nested column to the scan type, matching struct children by field id (by name
/// when a side has no ids), filling missing children with nulls and casting primitives.
#[derive(Debug)]
pub struct FieldIdCastExpr {
    input: Arc<dyn PhysicalExpr>,
    target: FieldRef,
}

impl PartialEq for FieldIdCastExpr {
    fn eq(&self, other: &Self) -> bool {
        self.input.as_ref() == other.input.as_ref() && self.target == other.target
    }
}

impl Eq for FieldIdCastExpr {}

impl Hash for FieldIdCastExpr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.input.as_ref().hash(state);
        self.target.hash(state);
    }
}

impl fmt::Display for FieldIdCastExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "field_id_cast({} AS {})",
            self.input,
            self.target.data_type()
        )
    }
}

impl PhysicalExpr for FieldIdCastExpr {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn return_field(&self, _input_schema: &Schema) -> DFResult<FieldRef> {
        Ok(Arc::clone(&self.target))
    }

    fn evaluate(&self, batch: &RecordBatch) -> DFResult<ColumnarValue> {
        let input = self.input.evaluate(batch)?.into_array(batch.num_rows())?;
        Ok(ColumnarValue::Array(adapt_array(
            &input,
            self.target.data_type(),
        )?))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> DFResult<Arc<dyn PhysicalExpr>> {
        match children.pop() {
            Some(input) if children.is_empty() => Ok(Arc::new(FieldIdCastExpr {
                input,
                target: Arc::clone(&self.target),
            })),
            _ => internal_err!("field_id_cast takes exactly one child"),
        }
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CAST({} AS {})", self.input, self.target.data_type())
    }
}

/// Rebuilds `array` as `target`, nested children matched by field id.
pub fn adapt_array(array: &ArrayRef, target: &DataType) -> DFResult<ArrayRef> {
    if array.data_type() == target {
        return Ok(Arc::clone(array));
    }
    match (array.data_type(), target) {
        (DataType::Struct(source_fields), DataType::Struct(target_fields)) => {
            let source = array.as_struct();
            let columns = target_fields
                .iter()
                .map(|tf| match find_child(source_fields, tf) {
                    Some(i) => adapt_array(source.column(i), tf.data_type()),
                    None => Ok(new_null_array(tf.data_type(), source.len())),
                })
                .collect::<DFResult<Vec<_>>>()?;
            Ok(Arc::new(StructArray::try_new(
                target_fields.clone(),
                columns,
                source.nulls().cloned(),
            )?))
        }
        (DataType::List(_), DataType::List(target_item)) => {
            let list = array.as_list::<i32>();
            let values = adapt_array(list.values(), target_item.data_type())?;
            Ok(Arc::new(ListArray::try_new(
                Arc::clone(target_item),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )?))
        }
        (DataType::LargeList(_), DataType::List(_)) => {
            let narrowed = arrow::compute::cast(
                array,
                &DataType::List(Arc::new(Field::new_list_field(
                    array.as_list::<i64>().value_type(),
                    true,
                ))),
            )?;
            adapt_array(&narrowed, target)
        }
        (DataType::Map(_, _), DataType::Map(target_entries, sorted)) => {
            let map = array.as_map();
            let entries: ArrayRef = Arc::new(map.entries().clone());
            let entries = adapt_array(&entries, target_entries.data_type())?;
            Ok(Arc::new(MapArray::try_new(
                Arc::clone(target_entries),
                map.offsets().clone(),
                entries.as_struct().clone(),
                map.nulls().cloned(),
                *sorted,
            )?))
        }
        _ => Ok(arrow::compute::cast(array, target)?),
    }
}

fn find_child(source: &arrow::datatypes::Fields, target: &Field) -> Option<usize> {
    match field_id_of(target) {
        Some(id) if source.iter().any(|f| field_id_of(f).is_some()) => {
            source.iter().position(|f| field_id_of(f) == Some(id))
        }
        _ => source.iter().position(|f| f.name() == target.name()),
    }
}
