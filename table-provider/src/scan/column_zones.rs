//! Zone maps of cached columns: the min, max and null count of each batch a column holds in
//! the decoded-column cache (`column_cache`), so that a scan with filters served from the
//! cache skips the batches its filters rule out, as the Parquet reader skips row groups and
//! pages by their statistics (a point query on a sorted key keeps one batch of the file).
//!
//! Only types on whose order `min`/`max` and DataFusion's comparisons agree get zones:
//! integers, decimals, dates, times, timestamps, booleans, strings and binaries (byte order).
//! Floating-point columns get none (NaN and -0.0 order one way in `min`/`max` and another in
//! comparisons; see `nan_safe_stats`), nor do nested and dictionary columns: no batch is
//! skipped by a filter on them, and the filter above the scan still applies to every row.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, UInt64Array};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;

/// One cached column's zones: per batch, its min, max and null count.
#[derive(Debug)]
pub(crate) struct ColumnZones {
    mins: ArrayRef,
    maxs: ArrayRef,
    nulls: ArrayRef,
}

impl ColumnZones {
    /// The zones of a column whose batches hold `chunks` of `data_type`; `None` for a type
    /// without zones (module docs) or no batches.
    pub(crate) fn of(chunks: &[ArrayRef], data_type: &DataType) -> Option<Self> {
        if chunks.is_empty() || !has_zones(data_type) {
            return None;
        }
        let mut mins = Vec::with_capacity(chunks.len());
        let mut maxs = Vec::with_capacity(chunks.len());
        let mut nulls = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let mut min = MinAccumulator::try_new(data_type).ok()?;
            let mut max = MaxAccumulator::try_new(data_type).ok()?;
            min.update_batch(std::slice::from_ref(chunk)).ok()?;
            max.update_batch(std::slice::from_ref(chunk)).ok()?;
            mins.push(min.evaluate().ok()?);
            maxs.push(max.evaluate().ok()?);
            nulls.push(chunk.null_count() as u64);
        }
        let mins = ScalarValue::iter_to_array(mins).ok()?;
        let maxs = ScalarValue::iter_to_array(maxs).ok()?;
        (mins.data_type() == data_type && maxs.data_type() == data_type).then(|| Self {
            mins,
            maxs,
            nulls: Arc::new(UInt64Array::from(nulls)),
        })
    }

    /// The memory the zones take.
    pub(crate) fn memory_size(&self) -> usize {
        self.mins.get_array_memory_size()
            + self.maxs.get_array_memory_size()
            + self.nulls.get_array_memory_size()
    }
}

/// Whether columns of `data_type` get zones (module docs).
fn has_zones(data_type: &DataType) -> bool {
    use DataType::*;
    matches!(
        data_type,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Decimal32(..)
            | Decimal64(..)
            | Decimal128(..)
            | Decimal256(..)
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(..)
            | Boolean
            | Utf8
            | LargeUtf8
            | Utf8View
            | Binary
            | LargeBinary
            | BinaryView
            | FixedSizeBinary(_)
    )
}

/// The batches of one cached file as pruning containers: one per batch, with the zones of
/// the columns that have them (by name in `schema`, the scan's batches' schema).
pub(crate) struct BatchZones<'a> {
    schema: &'a SchemaRef,
    zones: Vec<Option<&'a ColumnZones>>,
    rows: ArrayRef,
}

impl<'a> BatchZones<'a> {
    /// Batches of `rows` rows each whose columns (in `schema` order) have `zones`.
    pub(crate) fn new(
        schema: &'a SchemaRef,
        zones: Vec<Option<&'a ColumnZones>>,
        rows: &[usize],
    ) -> Self {
        let rows: UInt64Array = rows.iter().map(|n| Some(*n as u64)).collect();
        Self {
            schema,
            zones,
            rows: Arc::new(rows),
        }
    }

    fn zones(&self, column: &Column) -> Option<&ColumnZones> {
        let index = self.schema.index_of(&column.name).ok()?;
        self.zones.get(index).copied().flatten()
    }
}

impl PruningStatistics for BatchZones<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.zones(column).map(|z| Arc::clone(&z.mins))
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.zones(column).map(|z| Arc::clone(&z.maxs))
    }

    fn num_containers(&self) -> usize {
        self.rows.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.zones(column).map(|z| Arc::clone(&z.nulls))
    }

    fn row_counts(&self, _column: &Column) -> Option<ArrayRef> {
        Some(Arc::clone(&self.rows))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, IsNullExpr, col, lit};
    use datafusion::physical_optimizer::pruning::PruningPredicate;
    use datafusion::physical_plan::PhysicalExpr;

    fn int_chunks(ranges: &[(i64, i64)]) -> Vec<ArrayRef> {
        ranges
            .iter()
            .map(|(a, b)| Arc::new(Int64Array::from_iter_values(*a..*b)) as ArrayRef)
            .collect()
    }

    fn keep(
        schema: &SchemaRef,
        zones: Vec<Option<&ColumnZones>>,
        rows: &[usize],
        expr: Arc<dyn PhysicalExpr>,
    ) -> Vec<bool> {
        let pruning = PruningPredicate::try_new(expr, Arc::clone(schema)).expect("pruning");
        pruning
            .prune(&BatchZones::new(schema, zones, rows))
            .expect("prune")
    }

    #[test]
    fn integer_and_string_zones_skip_batches_a_filter_rules_out() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        let ids = int_chunks(&[(0, 100), (100, 200), (200, 300)]);
        let names: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("a"), Some("b")])),
            Arc::new(StringArray::from(vec![None::<&str>, None])),
            Arc::new(StringArray::from(vec![Some("m"), None])),
        ];
        let id_zones = ColumnZones::of(&ids, &DataType::Int64).expect("int zones");
        let name_zones = ColumnZones::of(&names, &DataType::Utf8).expect("string zones");
        let zones = || vec![Some(&id_zones), Some(&name_zones)];
        let rows = [100, 100, 100];
        let id = col("id", &schema).expect("id");
        let name = col("name", &schema).expect("name");
        let eq = |c: &Arc<dyn PhysicalExpr>, v: ScalarValue| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(Arc::clone(c), Operator::Eq, lit(v)))
        };
        assert_eq!(
            keep(
                &schema,
                zones(),
                &rows,
                eq(&id, ScalarValue::Int64(Some(150)))
            ),
            [false, true, false]
        );
        assert_eq!(
            keep(
                &schema,
                zones(),
                &rows,
                eq(&id, ScalarValue::Int64(Some(300)))
            ),
            [false, false, false]
        );
        // The all-null batch has no min or max: kept (the filter above drops its rows).
        assert_eq!(
            keep(&schema, zones(), &rows, eq(&name, ScalarValue::from("m"))),
            [false, true, true]
        );
        // The all-null batch is kept for IS NULL, the batch without nulls is not.
        let is_null: Arc<dyn PhysicalExpr> = Arc::new(IsNullExpr::new(Arc::clone(&name)));
        assert_eq!(
            keep(&schema, zones(), &rows[..], is_null),
            [false, true, true]
        );
        // A column without zones prunes nothing.
        assert_eq!(
            keep(
                &schema,
                vec![None, Some(&name_zones)],
                &rows,
                eq(&id, ScalarValue::Int64(Some(150)))
            ),
            [true, true, true]
        );
    }

    #[test]
    fn floats_and_nested_types_get_no_zones() {
        let floats: Vec<ArrayRef> = vec![Arc::new(Float64Array::from(vec![1.0, f64::NAN]))];
        assert!(ColumnZones::of(&floats, &DataType::Float64).is_none());
        let list = DataType::new_list(DataType::Int64, true);
        assert!(!has_zones(&list));
        assert!(ColumnZones::of(&[], &DataType::Int64).is_none());
    }
}
