//! Exact statistics of a planned scan, from the manifests alone: what lets DataFusion's
//! `AggregateStatistics` rule answer `count(*)`, `count(c)`, `min(c)` and `max(c)` without
//! opening a data file.
//!
//! [`metadata_statistics`] walks the (cached) manifests of the plan's snapshot and sums, over
//! the data files the plan selected:
//!
//! - rows: `record_count` minus deleted positions. A data file's deleted positions are known
//!   only when exactly one positional delete applies to it and it covers that file alone: a
//!   deletion vector (its cardinality) or a file-scoped position delete file
//!   (`referenced_data_file`, or equal `file_path` bounds). Two or more (they may overlap), a
//!   partition-scoped position delete file, or any equality delete: the row count is unknown.
//! - per top-level column, with no delete at all in the scan: null counts (`null_value_counts`;
//!   a file without counts for the column leaves it unknown) and min/max from `lower_bounds` /
//!   `upper_bounds` when every file's bounds are exact: numbers, dates, timestamps, decimals and
//!   booleans always; floats only when the file's `nan_value_counts` says 0 (bounds exclude
//!   NaN, `max` would be NaN); strings only when both bounds are ASCII, shorter than 16
//!   characters (Iceberg's default `truncate(16)`; a bound as long may be truncated) and the
//!   table sets no `write.metadata.metrics.*` mode. A file whose column is all NULL adds no
//!   bound; a file without counts or bounds for the column makes min/max unknown.
//!
//! Everything not proven is `Absent`: the rule then leaves the aggregate to the scan. The
//! statistics describe the rows the scan returns, which are those of the selected files: a
//! filter that is not exact stays above the scan in a `FilterExec`, which makes them inexact.

use std::collections::{HashMap, HashSet};

use arrow::datatypes::{DataType, Schema};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};
use iceberg::spec::{
    DataContentType, DataFile, Datum, ManifestContentType, ManifestStatus, PrimitiveLiteral,
    PrimitiveType,
};

use crate::catalog::LoadedTable;
use crate::error::Result;
use crate::io::normalize_location;
use crate::plan::{DeleteKind, ManifestCache, ScanPlan};
use crate::spec::field_id_of;

/// Field id of the `file_path` column of position delete files.
const POS_FILE_PATH_FIELD_ID: i32 = 2_147_483_546;

/// Iceberg's default string bound length (`truncate(16)`): shorter bounds are whole values.
const DEFAULT_TRUNCATE: usize = 16;

/// Statistics of the rows `plan` reads from `table` (columns as in `schema`, the table's
/// Arrow schema; only those at the indexes `requested` are computed, the others are unknown),
/// or `None` when not even the row count is exact.
pub(crate) async fn metadata_statistics(
    table: &LoadedTable,
    cache: &ManifestCache,
    plan: &ScanPlan,
    schema: &Schema,
    requested: &[usize],
) -> Result<Option<Statistics>> {
    let Some(snapshot_id) = plan.snapshot_id else {
        return Ok(None);
    };
    let metadata = table.metadata();
    let Some(snapshot) = metadata.snapshot_by_id(snapshot_id) else {
        return Ok(None);
    };
    // Data file (as the manifests name it) → its positional delete (if any).
    let mut selected: HashMap<&str, Option<&crate::plan::DeleteFileRef>> = HashMap::new();
    for task in plan.tasks() {
        if task
            .deletes
            .iter()
            .any(|d| matches!(d.kind, DeleteKind::Equality { .. }))
            || task.deletes.len() > 1
        {
            return Ok(None);
        }
        selected.insert(task.file.path.as_str(), task.deletes.first().map(|d| &**d));
    }
    let any_deletes = selected.values().any(Option::is_some);
    let name = table.ident().to_string();
    let io = table.io();
    let list = cache
        .manifest_list(
            io,
            &name,
            snapshot.manifest_list(),
            metadata.format_version(),
        )
        .await?;

    // Position delete files (not DVs) the selected files need: which are file-scoped.
    let wanted: HashSet<&str> = selected
        .values()
        .flatten()
        .filter(|d| d.kind == DeleteKind::Position)
        .map(|d| d.path.as_str())
        .collect();
    let mut scoped: HashMap<String, String> = HashMap::new();
    if !wanted.is_empty() {
        for mf in list.entries() {
            if mf.content != ManifestContentType::Deletes {
                continue;
            }
            let manifest = cache.manifest(io, &name, &mf.manifest_path).await?;
            for entry in manifest.entries() {
                let file = entry.data_file();
                if entry.status() == ManifestStatus::Deleted
                    || file.content_type() != DataContentType::PositionDeletes
                    || !wanted.contains(file.file_path())
                {
                    continue;
                }
                if let Some(target) = referenced_file(file) {
                    scoped.insert(file.file_path().to_string(), normalize_location(&target));
                }
            }
        }
    }

    let strings_whole = !metadata
        .properties()
        .keys()
        .any(|k| k.starts_with("write.metadata.metrics."));
    // (A `count(*)` requests no column: none is summed.)
    let mut columns: Vec<Column> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let field_id = field_id_of(f).filter(|_| requested.contains(&i));
            Column::new(field_id, f.data_type(), !any_deletes)
        })
        .collect();
    let mut rows: u64 = 0;
    let mut found = 0usize;
    for mf in list.entries() {
        if mf.content != ManifestContentType::Data {
            continue;
        }
        let manifest = cache.manifest(io, &name, &mf.manifest_path).await?;
        for entry in manifest.entries() {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            let file = entry.data_file();
            let Some(delete) = selected.get(file.file_path()) else {
                continue;
            };
            found += 1;
            let deleted = match delete {
                None => 0,
                Some(d) => match &d.kind {
                    DeleteKind::DeletionVector { .. } => d.record_count,
                    DeleteKind::Position
                        if scoped.get(&d.path).map(String::as_str)
                            == Some(normalize_location(file.file_path()).as_str()) =>
                    {
                        d.record_count
                    }
                    _ => return Ok(None),
                },
            };
            let Some(live) = file.record_count().checked_sub(deleted) else {
                return Ok(None);
            };
            rows += live;
            for column in &mut columns {
                column.add(file, strings_whole);
            }
        }
    }
    // Every selected file seen once (a file listed twice would be counted twice).
    if found != selected.len() {
        return Ok(None);
    }
    Ok(Some(Statistics {
        num_rows: Precision::Exact(rows as usize),
        total_byte_size: Precision::Absent,
        column_statistics: columns.into_iter().map(Column::finish).collect(),
    }))
}

/// One column's statistics, summed over files.
struct Column {
    field_id: Option<i32>,
    data_type: DataType,
    /// Sum of null counts; `None` once unknown.
    nulls: Option<u64>,
    /// Bounds so far (`None` inside: no non-null value yet); outer `None` once unknown.
    bounds: Option<Option<(Datum, Datum)>>,
}

impl Column {
    fn new(field_id: Option<i32>, data_type: &DataType, exact: bool) -> Self {
        // Nested columns have no bounds of their own.
        let field_id = field_id.filter(|_| !data_type.is_nested());
        let known = exact && field_id.is_some();
        Self {
            field_id,
            data_type: data_type.clone(),
            nulls: known.then_some(0),
            bounds: known.then_some(None),
        }
    }

    fn add(&mut self, file: &DataFile, strings_whole: bool) {
        let Some(id) = self.field_id else {
            return;
        };
        let values = file.value_counts().get(&id).copied();
        let nulls = file.null_value_counts().get(&id).copied();
        self.nulls = match (self.nulls, nulls) {
            (Some(sum), Some(n)) => Some(sum + n),
            _ => None,
        };
        let Some(bounds) = &mut self.bounds else {
            return;
        };
        // All NULL (or no rows): adds no bound.
        if matches!((values, nulls), (Some(v), Some(n)) if v == n) {
            return;
        }
        let exact = |d: &Datum| exact_bound(d, file, id, strings_whole);
        let (Some(lower), Some(upper)) = (
            file.lower_bounds().get(&id).filter(|d| exact(d)),
            file.upper_bounds().get(&id).filter(|d| exact(d)),
        ) else {
            self.bounds = None;
            return;
        };
        *bounds = Some(match bounds.take() {
            None => (lower.clone(), upper.clone()),
            Some((min, max)) => {
                let (Some(lo), Some(hi)) = (lower.partial_cmp(&min), upper.partial_cmp(&max))
                else {
                    self.bounds = None;
                    return;
                };
                (
                    if lo.is_lt() { lower.clone() } else { min },
                    if hi.is_gt() { upper.clone() } else { max },
                )
            }
        });
    }

    fn finish(self) -> ColumnStatistics {
        let mut stats = ColumnStatistics::new_unknown();
        if let Some(nulls) = self.nulls {
            stats.null_count = Precision::Exact(nulls as usize);
        }
        if let Some(Some((min, max))) = &self.bounds
            && let (Some(min), Some(max)) =
                (scalar(min, &self.data_type), scalar(max, &self.data_type))
        {
            stats.min_value = Precision::Exact(min);
            stats.max_value = Precision::Exact(max);
        }
        stats
    }
}

/// Whether bound `d` of column `id` in `file` is a value of the column, not truncated.
fn exact_bound(d: &Datum, file: &DataFile, id: i32, strings_whole: bool) -> bool {
    match (d.data_type(), d.literal()) {
        (PrimitiveType::Float | PrimitiveType::Double, _) => {
            file.nan_value_counts().get(&id) == Some(&0)
        }
        (PrimitiveType::String, PrimitiveLiteral::String(s)) => {
            strings_whole && s.is_ascii() && s.len() < DEFAULT_TRUNCATE
        }
        (
            PrimitiveType::Boolean
            | PrimitiveType::Int
            | PrimitiveType::Long
            | PrimitiveType::Date
            | PrimitiveType::Decimal { .. }
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::TimestampNs
            | PrimitiveType::TimestamptzNs,
            _,
        ) => true,
        _ => false,
    }
}

/// `d` as a value of the Arrow type `dt` (`None`: a combination not handled).
fn scalar(d: &Datum, dt: &DataType) -> Option<ScalarValue> {
    use PrimitiveLiteral as L;
    Some(match (d.literal(), dt) {
        (L::Boolean(b), DataType::Boolean) => ScalarValue::Boolean(Some(*b)),
        (L::Int(v), DataType::Int32) => ScalarValue::Int32(Some(*v)),
        (L::Int(v), DataType::Date32) => ScalarValue::Date32(Some(*v)),
        (L::Long(v), DataType::Int64) => ScalarValue::Int64(Some(*v)),
        (L::Long(v), DataType::Timestamp(unit, tz)) => {
            use arrow::datatypes::TimeUnit;
            match unit {
                TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(Some(*v), tz.clone()),
                TimeUnit::Nanosecond => ScalarValue::TimestampNanosecond(Some(*v), tz.clone()),
                _ => return None,
            }
        }
        (L::Float(v), DataType::Float32) => ScalarValue::Float32(Some(v.0)),
        (L::Double(v), DataType::Float64) => ScalarValue::Float64(Some(v.0)),
        (L::Int128(v), DataType::Decimal128(p, s)) => ScalarValue::Decimal128(Some(*v), *p, *s),
        (L::String(s), DataType::Utf8) => ScalarValue::Utf8(Some(s.clone())),
        (L::String(s), DataType::LargeUtf8) => ScalarValue::LargeUtf8(Some(s.clone())),
        (L::String(s), DataType::Utf8View) => ScalarValue::Utf8View(Some(s.clone())),
        _ => return None,
    })
}

/// The one data file a position delete file covers, when it says so (as the delete index
/// matches it).
fn referenced_file(file: &DataFile) -> Option<String> {
    if let Some(r) = file.referenced_data_file() {
        return Some(r);
    }
    let lower = file.lower_bounds().get(&POS_FILE_PATH_FIELD_ID)?;
    let upper = file.upper_bounds().get(&POS_FILE_PATH_FIELD_ID)?;
    match (lower.literal(), upper.literal()) {
        (PrimitiveLiteral::String(l), PrimitiveLiteral::String(u)) if l == u => Some(l.clone()),
        _ => None,
    }
}
