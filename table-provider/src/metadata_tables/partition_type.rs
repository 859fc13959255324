//! The `partition` column of the files, entries, partitions and position-deletes tables: the
//! union of every partition spec's fields (Iceberg Java's `Partitioning.partitionType`), ordered
//! by partition field id, named as the newest spec names them, typed by each transform's result
//! type, every field nullable. A file's partition tuple (in its own spec's order) is placed into
//! it by field id; fields its spec lacks are null.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, StructArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::ScalarValue;
use iceberg::spec::{Literal, Struct, TableMetadata, Type};

use crate::error::{Error, Result};
use crate::spec::{iceberg_type_to_arrow, literal_to_scalar};

/// One field of the union partition type.
#[derive(Debug, Clone)]
struct UnionField {
    name: String,
    ty: Type,
}

/// The union partition type of a table, and where each spec's fields go in it.
#[derive(Debug, Clone)]
pub(crate) struct PartitionType {
    /// Union fields by partition field id (ordered).
    fields: BTreeMap<i32, UnionField>,
    /// Per spec id: each of its fields' position in the union.
    positions: HashMap<i32, Vec<usize>>,
    arrow: Fields,
}

impl PartitionType {
    /// The union of every spec of `metadata`.
    pub(crate) fn of(metadata: &TableMetadata) -> Result<Self> {
        let schema = metadata.current_schema();
        let mut fields: BTreeMap<i32, UnionField> = BTreeMap::new();
        let mut specs: Vec<_> = metadata.partition_specs_iter().collect();
        // Newest spec first: its names win (Java's rule).
        specs.sort_by_key(|s| std::cmp::Reverse(s.spec_id()));
        for spec in &specs {
            for field in spec.fields() {
                if fields.contains_key(&field.field_id) {
                    continue;
                }
                let source = metadata
                    .schemas_iter()
                    .find_map(|s| s.field_by_id(field.source_id))
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "partition field {} has source column id {} that no schema has",
                            field.name, field.source_id
                        ))
                    })?;
                let ty = field
                    .transform
                    .result_type(&source.field_type)
                    .map_err(|e| {
                        Error::InvalidArgument(format!("partition field {}: {e}", field.name))
                    })?;
                fields.insert(
                    field.field_id,
                    UnionField {
                        name: field.name.clone(),
                        ty,
                    },
                );
            }
        }
        let _ = schema;
        let order: Vec<i32> = fields.keys().copied().collect();
        let positions = specs
            .iter()
            .map(|spec| {
                let at = spec
                    .fields()
                    .iter()
                    .map(|f| order.iter().position(|id| *id == f.field_id).unwrap_or(0))
                    .collect();
                (spec.spec_id(), at)
            })
            .collect();
        let arrow = fields
            .values()
            .map(|f| Ok(Field::new(&f.name, iceberg_type_to_arrow(&f.ty)?, true)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            fields,
            positions,
            arrow: Fields::from(arrow),
        })
    }

    /// Whether no spec has a field (the table was never partitioned): the metadata tables then
    /// have no `partition` column, as in Spark.
    pub(crate) fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The position in the union, and the partition field id, of the field named `name`.
    pub(crate) fn field_named(&self, name: &str) -> Option<(usize, i32)> {
        self.fields
            .iter()
            .enumerate()
            .find(|(_, (_, f))| f.name == name)
            .map(|(pos, (id, _))| (pos, *id))
    }

    /// The Iceberg type of the union field with partition field id `field_id`.
    pub(crate) fn field_type(&self, field_id: i32) -> Option<&Type> {
        self.fields.get(&field_id).map(|f| &f.ty)
    }

    /// The column's Arrow type.
    pub(crate) fn data_type(&self) -> DataType {
        DataType::Struct(self.arrow.clone())
    }

    /// A file's partition tuple (of spec `spec_id`) as values of the union, in union order.
    pub(crate) fn values(&self, spec_id: i32, partition: &Struct) -> Result<Vec<ScalarValue>> {
        let types: Vec<&Type> = self.fields.values().map(|f| &f.ty).collect();
        let mut out: Vec<Option<&Literal>> = vec![None; types.len()];
        let positions = self.positions.get(&spec_id).ok_or_else(|| {
            Error::InvalidArgument(format!("a file names unknown partition spec {spec_id}"))
        })?;
        for (value, &at) in partition.fields().iter().zip(positions) {
            if let Some(slot) = out.get_mut(at) {
                *slot = value.as_ref();
            }
        }
        out.iter()
            .zip(types)
            .map(|(value, ty)| literal_to_scalar(*value, ty))
            .collect()
    }

    /// The column of `tuples` (each from [`Self::values`]; `None` for a null struct).
    pub(crate) fn array(&self, tuples: &[Option<Vec<ScalarValue>>]) -> Result<ArrayRef> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.arrow.len());
        for (i, field) in self.arrow.iter().enumerate() {
            let values = tuples.iter().map(|t| match t {
                Some(t) => t[i].clone(),
                None => ScalarValue::try_from(field.data_type()).unwrap_or(ScalarValue::Null),
            });
            let array = if tuples.is_empty() {
                arrow::array::new_empty_array(field.data_type())
            } else {
                ScalarValue::iter_to_array(values)?
            };
            columns.push(array);
        }
        let nulls = NullBuffer::from(tuples.iter().map(Option::is_some).collect::<Vec<_>>());
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        if self.arrow.is_empty() {
            return Ok(Arc::new(StructArray::new_empty_fields(tuples.len(), nulls)));
        }
        Ok(Arc::new(StructArray::try_new(
            self.arrow.clone(),
            columns,
            nulls,
        )?))
    }
}
