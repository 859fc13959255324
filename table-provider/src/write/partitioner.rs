//! Splitting batches by partition: a table's partition spec applied to Arrow arrays.
//!
//! Each partition field's source column (found by field id, inside structs too) goes through
//! the `iceberg` crate's transform function for arrays; rows are grouped by the transformed
//! values (the values themselves for a single integer-valued transform, their Arrow row
//! encoding otherwise), and each group becomes one batch with its partition tuple as an
//! Iceberg `Struct`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray, UInt32Array};
use arrow::compute::{cast, take_record_batch};
use arrow::datatypes::{DataType, Date32Type, Int32Type, Int64Type, SchemaRef, TimeUnit};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::ScalarValue;
use hashbrown::HashMap;
use iceberg::spec::{PartitionField, PartitionSpec, PrimitiveType, Schema, Struct, Type};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};

use crate::error::{Error, Result};
use crate::spec::{field_id_of, scalar_to_literal};

/// One partition field, ready to apply to batches of the written data.
pub(crate) struct FieldTransform {
    /// Indexes from the batch's top level down to the source column (through structs).
    path: Vec<usize>,
    function: BoxedTransformFunction,
    result: PrimitiveType,
    /// Whether the source must become microseconds first (the crate's hour transform).
    to_micros: bool,
}

impl std::fmt::Debug for FieldTransform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FieldTransform")
            .field("path", &self.path)
            .field("result", &self.result)
            .finish_non_exhaustive()
    }
}

impl FieldTransform {
    /// The partition field `field` of a spec of `schema`, over batches of `arrow_schema` (the
    /// Arrow form of `schema`, with field ids; the source column is found by its position there,
    /// so batches whose columns are in the same order but carry no field ids work too).
    pub(crate) fn new(
        schema: &Schema,
        field: &PartitionField,
        arrow_schema: &SchemaRef,
    ) -> Result<Self> {
        let source = schema.field_by_id(field.source_id).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "partition field {} has no source column {}",
                field.name, field.source_id
            ))
        })?;
        let Type::Primitive(source_type) = source.field_type.as_ref() else {
            return Err(Error::InvalidArgument(format!(
                "partition field {} has a non-primitive source {}",
                field.name, source.name
            )));
        };
        let result = match field.transform.result_type(&source.field_type)? {
            Type::Primitive(p) => p,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "partition field {} has result type {other}",
                    field.name
                )));
            }
        };
        let path = path_to(arrow_schema.fields(), field.source_id).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "partition source column {} (field id {}) is not in the written data",
                source.name, field.source_id
            ))
        })?;
        let to_micros = matches!(
            source_type,
            PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs
        ) && matches!(field.transform, iceberg::spec::Transform::Hour);
        Ok(Self {
            path,
            function: create_transform_function(&field.transform)?,
            result,
            to_micros,
        })
    }

    /// The type of the transformed values.
    pub(crate) fn result(&self) -> &PrimitiveType {
        &self.result
    }

    /// The transformed values of the rows of `batch`.
    pub(crate) fn apply(&self, batch: &RecordBatch) -> Result<ArrayRef> {
        let mut array: ArrayRef = Arc::clone(batch.column(self.path[0]));
        for &index in &self.path[1..] {
            let parent = array
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| {
                    Error::InvalidArgument("partition source path is not a struct".into())
                })?;
            // A null parent struct makes its fields null.
            let child = Arc::clone(parent.column(index));
            array = match parent.nulls() {
                Some(nulls) if nulls.null_count() > 0 => {
                    let data = child.to_data().into_builder().nulls(Some(
                        arrow::buffer::NullBuffer::union(Some(nulls), child.nulls())
                            .unwrap_or_else(|| nulls.clone()),
                    ));
                    arrow::array::make_array(data.build()?)
                }
                _ => child,
            };
        }
        let array = match array.data_type() {
            DataType::Utf8View | DataType::LargeUtf8 => cast(&array, &DataType::Utf8)?,
            DataType::BinaryView | DataType::LargeBinary => cast(&array, &DataType::Binary)?,
            DataType::Dictionary(_, value) => cast(&array, value)?,
            DataType::Timestamp(TimeUnit::Nanosecond, tz) if self.to_micros => cast(
                &array,
                &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
            )?,
            _ => array,
        };
        Ok(self.function.transform(array)?)
    }
}

/// The rows of one partition within a batch.
#[derive(Debug)]
pub struct PartitionSlice {
    /// A key equal for equal partition tuples (the transformed values' row encoding).
    pub key: Vec<u8>,
    /// The partition tuple.
    pub values: Struct,
    /// The rows.
    pub batch: RecordBatch,
    /// The memory the rows take: their share of the buffers `batch` may be a slice of.
    pub bytes: usize,
}

/// Each row's partition group, numbered in the order the groups first appear.
struct Grouping {
    /// The group of each row.
    of_row: Vec<u32>,
    /// The first row of each group.
    firsts: Vec<usize>,
    /// The number of rows of each group.
    counts: Vec<u32>,
}

impl Grouping {
    /// The groups of `keys`, one key per row.
    fn of<K: Copy + Eq + std::hash::Hash>(keys: impl ExactSizeIterator<Item = K>) -> Self {
        let mut groups: HashMap<K, u32> = HashMap::new();
        let mut grouping = Self {
            of_row: Vec::with_capacity(keys.len()),
            firsts: Vec::new(),
            counts: Vec::new(),
        };
        let mut previous: Option<(K, u32)> = None;
        for (i, key) in keys.enumerate() {
            let group = match previous {
                Some((last, group)) if last == key => group,
                _ => *groups.entry(key).or_insert_with(|| {
                    grouping.firsts.push(i);
                    grouping.counts.push(0);
                    (grouping.firsts.len() - 1) as u32
                }),
            };
            previous = Some((key, group));
            grouping.counts[group as usize] += 1;
            grouping.of_row.push(group);
        }
        grouping
    }

    /// Where each group starts in partition order, and the rows in that order (a stable
    /// counting sort by group).
    fn partition_order(&self) -> (Vec<usize>, Vec<u32>) {
        let mut offsets = Vec::with_capacity(self.counts.len());
        let mut next = 0usize;
        for &count in &self.counts {
            offsets.push(next);
            next += count as usize;
        }
        let mut cursor = offsets.clone();
        let mut order = vec![0u32; self.of_row.len()];
        for (row, &group) in self.of_row.iter().enumerate() {
            let at = &mut cursor[group as usize];
            order[*at] = row as u32;
            *at += 1;
        }
        (offsets, order)
    }
}

/// The partition key of each row of a batch.
enum GroupKeys {
    /// A single transform with integer values (`bucket`, `truncate` of an integer, the time
    /// transforms, `identity` of an int, long or date): the values themselves, grouped without
    /// a row encoding.
    Integers(Vec<Option<i64>>),
    /// Any other spec: the transformed values' Arrow row encoding.
    Rows(Rows),
}

impl GroupKeys {
    fn of(transformed: &[ArrayRef]) -> Result<Self> {
        if let [array] = transformed {
            let integers: Option<Vec<Option<i64>>> = match array.data_type() {
                DataType::Int32 => array
                    .as_primitive_opt::<Int32Type>()
                    .map(|a| a.iter().map(|v| v.map(i64::from)).collect()),
                DataType::Date32 => array
                    .as_primitive_opt::<Date32Type>()
                    .map(|a| a.iter().map(|v| v.map(i64::from)).collect()),
                DataType::Int64 => array
                    .as_primitive_opt::<Int64Type>()
                    .map(|a| a.iter().collect()),
                _ => None,
            };
            if let Some(integers) = integers {
                return Ok(Self::Integers(integers));
            }
        }
        let converter = RowConverter::new(
            transformed
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect(),
        )?;
        Ok(Self::Rows(converter.convert_columns(transformed)?))
    }

    fn grouping(&self) -> Grouping {
        match self {
            Self::Integers(values) => Grouping::of(values.iter().copied()),
            Self::Rows(rows) => Grouping::of(rows.iter().map(|row| row.data())),
        }
    }

    /// Bytes equal for rows of equal keys (within one write: one spec, one kind of key).
    fn bytes(&self, row: usize) -> Vec<u8> {
        match self {
            Self::Integers(values) => match values[row] {
                None => vec![0],
                Some(v) => std::iter::once(1).chain(v.to_be_bytes()).collect(),
            },
            Self::Rows(rows) => rows.row(row).data().to_vec(),
        }
    }
}

/// Splits batches of a table's Arrow schema by its partition spec.
#[derive(Debug)]
pub struct Partitioner {
    fields: Vec<FieldTransform>,
}

impl Partitioner {
    /// A partitioner for `spec` over batches of `arrow_schema` (the Arrow form of `schema`, with
    /// field ids).
    pub fn new(schema: &Schema, spec: &PartitionSpec, arrow_schema: &SchemaRef) -> Result<Self> {
        let fields = spec
            .fields()
            .iter()
            .map(|field| FieldTransform::new(schema, field, arrow_schema))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { fields })
    }

    /// Whether every row goes to the one (empty) partition.
    pub fn is_unpartitioned(&self) -> bool {
        self.fields.is_empty()
    }

    /// The rows of `batch` grouped by partition, in the order each partition first appears.
    ///
    /// The rows are grouped by their transformed values (a fast hash of the values, or of their
    /// row encoding, with a shortcut for a row whose key equals the row before it: clustered
    /// input), then the
    /// batch is reordered partition by partition with one `take` and each partition's rows are
    /// a zero-copy slice of that reordered batch. A slice therefore keeps the whole reordered
    /// batch's buffers alive: [`PartitionSlice::bytes`] is its share of them, and a writer that
    /// keeps slices must not keep them for long (see `RollingFileWriter::flush_if_kept_since`).
    pub fn split(&self, batch: &RecordBatch) -> Result<Vec<PartitionSlice>> {
        if self.fields.is_empty() {
            return Ok(vec![PartitionSlice {
                key: Vec::new(),
                values: Struct::empty(),
                bytes: batch.get_array_memory_size(),
                batch: batch.clone(),
            }]);
        }
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let transformed = self
            .fields
            .iter()
            .map(|f| f.apply(batch))
            .collect::<Result<Vec<_>>>()?;
        let keys = GroupKeys::of(&transformed)?;
        let grouping = keys.grouping();
        let values_at = |row: usize| -> Result<Struct> {
            let values = self
                .fields
                .iter()
                .zip(&transformed)
                .map(|(f, array)| {
                    scalar_to_literal(&ScalarValue::try_from_array(array, row)?, &f.result)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Struct::from_iter(values))
        };
        if grouping.firsts.len() == 1 {
            return Ok(vec![PartitionSlice {
                key: keys.bytes(0),
                values: values_at(0)?,
                bytes: batch.get_array_memory_size(),
                batch: batch.clone(),
            }]);
        }
        let (offsets, order) = grouping.partition_order();
        let reordered = take_record_batch(batch, &UInt32Array::from(order))?;
        let reordered_bytes = reordered.get_array_memory_size();
        let total = batch.num_rows();
        let mut slices = Vec::with_capacity(grouping.firsts.len());
        for (group, &first) in grouping.firsts.iter().enumerate() {
            let len = grouping.counts[group] as usize;
            slices.push(PartitionSlice {
                key: keys.bytes(first),
                values: values_at(first)?,
                bytes: (reordered_bytes * len).div_ceil(total),
                batch: reordered.slice(offsets[group], len),
            });
        }
        Ok(slices)
    }
}

/// The indexes from the top level to the field with `id` (through structs).
fn path_to(fields: &arrow::datatypes::Fields, id: i32) -> Option<Vec<usize>> {
    for (i, field) in fields.iter().enumerate() {
        if field_id_of(field) == Some(id) {
            return Some(vec![i]);
        }
        if let DataType::Struct(children) = field.data_type()
            && let Some(mut rest) = path_to(children, id)
        {
            rest.insert(0, i);
            return Some(rest);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use iceberg::spec::{Literal, NestedField, PrimitiveType, Transform, Type};

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

    /// A partitioner of [`schema`] by `fields` (source column, name, transform), and the
    /// Arrow schema of its batches.
    fn partitioner(fields: &[(&str, &str, Transform)]) -> (Partitioner, SchemaRef) {
        let schema = schema();
        let spec = fields
            .iter()
            .fold(
                PartitionSpec::builder(schema.clone()),
                |spec, (source, name, transform)| {
                    spec.add_partition_field(*source, *name, *transform)
                        .unwrap()
                },
            )
            .build()
            .unwrap();
        let arrow_schema = Arc::new(iceberg_schema_to_arrow(&schema).unwrap());
        let partitioner = Partitioner::new(&schema, &spec, &arrow_schema).unwrap();
        (partitioner, arrow_schema)
    }

    /// The `id` column of a slice.
    fn ids_of(slice: &PartitionSlice) -> Vec<i64> {
        slice
            .batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec()
    }

    #[test]
    fn rows_group_by_their_transformed_values() {
        let (partitioner, arrow_schema) = partitioner(&[
            ("s", "s", Transform::Identity),
            ("ts", "ts_day", Transform::Day),
            ("id", "id_trunc", Transform::Truncate(10)),
        ]);
        let day = 86_400_000_000i64;
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 13, 4, -1])),
                Arc::new(StringArray::from(vec![
                    Some("a/b"),
                    Some("a/b"),
                    Some("a/b"),
                    None,
                    Some("a/b"),
                ])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![day, day + 5, day + 7, day, -1])
                        .with_timezone_opt(None::<String>),
                ),
            ],
        )
        .unwrap();
        let slices = partitioner.split(&batch).unwrap();
        let summary: Vec<(Vec<Option<Literal>>, Vec<i64>)> = slices
            .iter()
            .map(|s| (s.values.iter().map(|v| v.cloned()).collect(), ids_of(s)))
            .collect();
        let string = |v: &str| Some(Literal::string(v));
        assert_eq!(
            summary,
            vec![
                (
                    vec![
                        string("a/b"),
                        Some(Literal::date(1)),
                        Some(Literal::long(0))
                    ],
                    vec![1, 2]
                ),
                (
                    vec![
                        string("a/b"),
                        Some(Literal::date(1)),
                        Some(Literal::long(10))
                    ],
                    vec![13]
                ),
                (
                    vec![None, Some(Literal::date(1)), Some(Literal::long(0))],
                    vec![4]
                ),
                // Floor semantics before the epoch and below zero.
                (
                    vec![
                        string("a/b"),
                        Some(Literal::date(-1)),
                        Some(Literal::long(-10))
                    ],
                    vec![-1]
                ),
            ]
        );
    }

    #[test]
    fn null_integer_keys_form_their_own_partition() {
        let (partitioner, arrow_schema) = partitioner(&[("ts", "ts_hour", Transform::Hour)]);
        let hour = 3_600_000_000i64;
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
                Arc::new(StringArray::from(vec![Some("a"); 5])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![
                        Some(hour),
                        None,
                        Some(hour + 1),
                        Some(-1),
                        None,
                    ])
                    .with_timezone_opt(None::<String>),
                ),
            ],
        )
        .unwrap();
        let slices = partitioner.split(&batch).unwrap();
        let got: Vec<(Option<Literal>, Vec<i64>)> = slices
            .iter()
            .map(|s| (s.values.iter().next().unwrap().cloned(), ids_of(s)))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(Literal::int(1)), vec![1, 3]),
                (None, vec![2, 5]),
                (Some(Literal::int(-1)), vec![4]),
            ]
        );
        // Distinct keys for distinct partitions, the null one included.
        let keys: std::collections::HashSet<&Vec<u8>> = slices.iter().map(|s| &s.key).collect();
        assert_eq!(keys.len(), 3);
    }

    #[test]
    fn unpartitioned_tables_take_whole_batches() {
        let (partitioner, arrow_schema) = partitioner(&[]);
        assert!(partitioner.is_unpartitioned());
        let batch = RecordBatch::new_empty(Arc::clone(&arrow_schema));
        let slices = partitioner.split(&batch).unwrap();
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].values, Struct::empty());
    }

    #[test]
    fn interleaved_rows_become_slices_of_one_reordered_batch() {
        let (partitioner, arrow_schema) =
            partitioner(&[("id", "id_bucket", Transform::Truncate(3))]);
        // ids 0..30 in the order 0, 3, 6, ..., 27, 1, 4, ...: partitions of truncate(3) change
        // on every row, and runs of equal keys (0, 1, 2 -> 0) come from the shortcut too.
        let ids: Vec<i64> = (0..3)
            .flat_map(|r| (0..10).map(move |k| k * 3 + r))
            .collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(StringArray::from(
                    ids.iter()
                        .map(|i| Some(format!("s{i}")))
                        .collect::<Vec<_>>(),
                )),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![0; 30]).with_timezone_opt(None::<String>),
                ),
            ],
        )
        .unwrap();
        let slices = partitioner.split(&batch).unwrap();
        let got: Vec<(Option<Literal>, Vec<i64>, Vec<String>)> = slices
            .iter()
            .map(|s| {
                let names = s.batch.column(1).as_string::<i32>();
                (
                    s.values.iter().next().unwrap().cloned(),
                    ids_of(s),
                    names.iter().map(|n| n.unwrap().to_string()).collect(),
                )
            })
            .collect();
        let expected: Vec<(Option<Literal>, Vec<i64>, Vec<String>)> = (0..10)
            .map(|k| {
                // Rows of each partition in input order: 3k, then 3k + 1, then 3k + 2.
                let ids = vec![3 * k, 3 * k + 1, 3 * k + 2];
                let names = ids.iter().map(|i| format!("s{i}")).collect();
                (Some(Literal::long(3 * k)), ids, names)
            })
            .collect();
        assert_eq!(got, expected);
        // Every slice is a view of one reordered batch, and their shares add up to it.
        let whole = slices[0].batch.column(0).to_data().buffers()[0].data_ptr();
        for slice in &slices {
            assert_eq!(
                slice.batch.column(0).to_data().buffers()[0].data_ptr(),
                whole
            );
        }
        let total: usize = slices.iter().map(|s| s.bytes).sum();
        let reordered = slices[0].batch.column(0).get_array_memory_size()
            + slices[0].batch.column(1).get_array_memory_size()
            + slices[0].batch.column(2).get_array_memory_size();
        assert!(
            total >= reordered && total <= reordered + slices.len(),
            "{total} vs {reordered}"
        );
        // An empty batch of a partitioned table has no slices.
        let empty = RecordBatch::new_empty(Arc::clone(&arrow_schema));
        assert!(partitioner.split(&empty).unwrap().is_empty());
    }
}
