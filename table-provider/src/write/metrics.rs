//! Exact Iceberg column metrics of a data file, computed from its Arrow batches.
//!
//! What Iceberg Java records in a data file's manifest entry, computed the way Java computes it
//! but from the Arrow values Petrel writes (never from Parquet footer statistics, which
//! parquet-rs truncates and marks inexact):
//!
//! - [`MetricsMode`] / [`MetricsConfig`]: `write.metadata.metrics.*`, resolved as Java's
//!   `MetricsConfig.from` (core/.../MetricsConfig.java) resolves it.
//! - [`MetricsCollector`]: per primitive leaf column (top level and inside structs; nothing for
//!   anything inside a list or a map, as `ParquetMetrics.MetricsVisitor`): value counts (nulls and
//!   NaNs included), null counts, NaN counts (float/double only) and lower/upper bounds, truncated
//!   for strings and binary as `UnicodeUtil` / `BinaryUtil` truncate them.
//!
//! Orders of the bounds (Java's `Comparators.forType`):
//! - numbers, dates, times, timestamps: numeric; floats with `Float.compare` (−0.0 < 0.0, NaN
//!   excluded and counted);
//! - decimals by unscaled value (one column has one scale);
//! - strings: Java compares UTF-16 code units but ranks a high surrogate above every BMP unit
//!   (`Comparators.CharSeqComparator`), which is code-point order, which is UTF-8 byte order;
//! - binary and fixed: unsigned lexicographic bytes;
//! - uuid: Java 1.10 readers compare with `java.util.UUID.compareTo` (signed most-significant
//!   long, then signed least-significant long), parquet-mr, Rust and the RFC compare unsigned
//!   bytes. A bound is only written when the minimum and the maximum are the same under both
//!   orders, so it is correct for every reader; otherwise the column has no uuid bounds.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use arrow::array::{Array, ArrayRef, ArrowNativeTypeOp, AsArray, PrimitiveArray, RecordBatch};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type,
    Int64Type, SchemaRef, Time64MicrosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampNanosecondType,
};
use iceberg::spec::{Datum, NestedFieldRef, PrimitiveType, Schema, SortOrder, StructType, Type};

use crate::error::{Error, Result};
use crate::spec::field_id_of;

/// `write.metadata.metrics.default`: the mode of every column without an override.
pub const DEFAULT_MODE_PROPERTY: &str = "write.metadata.metrics.default";
/// `write.metadata.metrics.column.<full dotted column name>`: one column's mode.
pub const COLUMN_MODE_PROPERTY_PREFIX: &str = "write.metadata.metrics.column.";
/// `write.metadata.metrics.max-inferred-column-defaults`: without an explicit default, tables
/// with more columns than this only get metrics for this many.
pub const MAX_INFERRED_COLUMN_DEFAULTS_PROPERTY: &str =
    "write.metadata.metrics.max-inferred-column-defaults";
/// Java's `METRICS_MAX_INFERRED_COLUMN_DEFAULTS_DEFAULT`.
pub const MAX_INFERRED_COLUMN_DEFAULTS_DEFAULT: usize = 100;
/// Java's `DEFAULT_WRITE_METRICS_MODE_DEFAULT`, `truncate(16)`.
pub const DEFAULT_MODE: MetricsMode = MetricsMode::Truncate(16);

/// How much a column's metrics record (Iceberg's `MetricsModes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricsMode {
    /// No metrics at all: no counts, no bounds.
    None,
    /// Value, null and NaN counts; no bounds.
    Counts,
    /// Counts and bounds; string bounds truncated to this many code points, binary bounds to
    /// this many bytes (other types exact). `Truncate(0)` records no bounds (Java's
    /// `truncateLength <= 0`), though parsing never produces it.
    Truncate(usize),
    /// Counts and exact bounds.
    Full,
}

impl MetricsMode {
    /// Whether the mode records lower/upper bounds.
    pub fn has_bounds(self) -> bool {
        match self {
            MetricsMode::None | MetricsMode::Counts => false,
            MetricsMode::Truncate(n) => n > 0,
            MetricsMode::Full => true,
        }
    }
}

impl fmt::Display for MetricsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsMode::None => f.write_str("none"),
            MetricsMode::Counts => f.write_str("counts"),
            MetricsMode::Truncate(n) => write!(f, "truncate({n})"),
            MetricsMode::Full => f.write_str("full"),
        }
    }
}

impl FromStr for MetricsMode {
    type Err = Error;

    /// Java's `MetricsModes.fromString`: `none`, `counts`, `full` (`equalsIgnoreCase`), or
    /// `truncate(N)` matched against the lower-cased string, N a positive Java `int`.
    fn from_str(s: &str) -> Result<Self> {
        if java_equals_ignore_case(s, "none") {
            return Ok(MetricsMode::None);
        }
        if java_equals_ignore_case(s, "counts") {
            return Ok(MetricsMode::Counts);
        }
        if java_equals_ignore_case(s, "full") {
            return Ok(MetricsMode::Full);
        }
        let lower = s.to_lowercase();
        let length = lower
            .strip_prefix("truncate(")
            .and_then(|rest| rest.strip_suffix(')'))
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            // Integer.parseInt: anything beyond i32::MAX is a NumberFormatException.
            .and_then(|digits| digits.parse::<i32>().ok());
        match length {
            Some(n) if n > 0 => Ok(MetricsMode::Truncate(n as usize)),
            Some(_) => Err(Error::InvalidArgument(format!(
                "invalid metrics mode {s:?}: truncate length should be positive"
            ))),
            None => Err(Error::InvalidArgument(format!(
                "invalid metrics mode {s:?}"
            ))),
        }
    }
}

/// `String.equalsIgnoreCase`: same length in UTF-16 units, and each pair of units equal, or
/// equal after a simple upper-case mapping, or after upper- then lower-case mapping.
fn java_equals_ignore_case(a: &str, b: &str) -> bool {
    fn simple(mapped: impl Iterator<Item = char>, c: char) -> char {
        let mut mapped = mapped;
        match (mapped.next(), mapped.next()) {
            (Some(m), None) => m,
            _ => c,
        }
    }
    let upper = |c: char| simple(c.to_uppercase(), c);
    let lower = |c: char| simple(c.to_lowercase(), c);
    a.encode_utf16().count() == b.encode_utf16().count()
        && a.chars().count() == b.chars().count()
        && a.chars()
            .zip(b.chars())
            .all(|(x, y)| x == y || upper(x) == upper(y) || lower(upper(x)) == lower(upper(y)))
}

/// The table's metrics configuration, resolved as Java's `MetricsConfig.from(props, schema,
/// sortOrder)`:
///
/// 1. `write.metadata.metrics.default`, if set, is the default of every column (an invalid value
///    is logged and `truncate(16)` used).
/// 2. Otherwise, when the schema has at most `max-inferred-column-defaults` (default 100,
///    negative or unparsable → 100) projected ids (primitive and struct fields, list elements and
///    map keys/values with primitive values), the default is `truncate(16)`.
/// 3. Otherwise the first that-many metrics-eligible (primitive) ids, breadth-first per struct
///    (`limitFieldIds`), get `truncate(16)` and the default becomes `none`.
/// 4. Columns of the sort order whose transform preserves order get `truncate(16)` if the
///    default is `none` or `counts`, else the default.
/// 5. `write.metadata.metrics.column.<full column name>` overrides; an invalid value is logged
///    and the default of steps 1–3 used.
///
/// A column's mode is looked up by its full dotted name (`MetricsUtil.metricsMode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    default_mode: MetricsMode,
    column_modes: HashMap<String, MetricsMode>,
    id_to_name: HashMap<i32, String>,
}

impl Default for MetricsConfig {
    /// Java's `MetricsConfig.getDefault()`: `truncate(16)` everywhere.
    fn default() -> Self {
        Self {
            default_mode: DEFAULT_MODE,
            column_modes: HashMap::new(),
            id_to_name: HashMap::new(),
        }
    }
}

impl MetricsConfig {
    /// The configuration of a table without a sort order.
    pub fn from_properties(props: &HashMap<String, String>, schema: &Schema) -> Self {
        Self::from_properties_and_sort_order(props, schema, None)
    }

    /// The configuration of a table with `sort_order` (Java's `MetricsConfig.forTable`).
    pub fn from_properties_and_sort_order(
        props: &HashMap<String, String>,
        schema: &Schema,
        sort_order: Option<&SortOrder>,
    ) -> Self {
        let max_inferred = max_inferred_column_defaults(props);
        let mut column_modes = HashMap::new();

        let default_mode = if let Some(configured) = props.get(DEFAULT_MODE_PROPERTY) {
            parse_mode(configured, DEFAULT_MODE, "default")
        } else if projected_id_count(schema.as_struct()) <= max_inferred {
            DEFAULT_MODE
        } else {
            for id in limit_field_ids(schema.as_struct(), max_inferred) {
                if let Some(name) = schema.name_by_field_id(id) {
                    column_modes.insert(name.to_string(), DEFAULT_MODE);
                }
            }
            MetricsMode::None
        };

        if let Some(order) = sort_order {
            let sorted_mode = match default_mode {
                MetricsMode::None | MetricsMode::Counts => DEFAULT_MODE,
                other => other,
            };
            for field in &order.fields {
                if field.transform.preserves_order()
                    && let Some(name) = schema.name_by_field_id(field.source_id)
                {
                    column_modes.insert(name.to_string(), sorted_mode);
                }
            }
        }

        for (key, value) in props {
            if let Some(column) = key.strip_prefix(COLUMN_MODE_PROPERTY_PREFIX) {
                let mode = parse_mode(value, default_mode, &format!("column {column}"));
                column_modes.insert(column.to_string(), mode);
            }
        }

        let id_to_name = schema
            .field_id_to_name_map()
            .iter()
            .map(|(id, name)| (*id, name.clone()))
            .collect();
        Self {
            default_mode,
            column_modes,
            id_to_name,
        }
    }

    /// The mode of the column with this field id: the mode of its full name, else the default.
    pub fn mode(&self, field_id: i32) -> MetricsMode {
        self.id_to_name
            .get(&field_id)
            .and_then(|name| self.column_modes.get(name))
            .copied()
            .unwrap_or(self.default_mode)
    }

    /// The mode of columns without an override.
    pub fn default_mode(&self) -> MetricsMode {
        self.default_mode
    }
}

fn parse_mode(value: &str, fallback: MetricsMode, context: &str) -> MetricsMode {
    value.parse().unwrap_or_else(|e| {
        tracing::warn!("Ignoring invalid metrics mode ({context}): {value}: {e}; using {fallback}");
        fallback
    })
}

/// Java throws on an unparsable value (`Integer.parseInt`); a writer here logs and uses 100.
fn max_inferred_column_defaults(props: &HashMap<String, String>) -> usize {
    let Some(value) = props.get(MAX_INFERRED_COLUMN_DEFAULTS_PROPERTY) else {
        return MAX_INFERRED_COLUMN_DEFAULTS_DEFAULT;
    };
    match value.parse::<i32>() {
        Ok(n) if n >= 0 => n as usize,
        _ => {
            tracing::warn!(
                "Invalid value for {MAX_INFERRED_COLUMN_DEFAULTS_PROPERTY}: {value}, falling back \
                 to {MAX_INFERRED_COLUMN_DEFAULTS_DEFAULT}"
            );
            MAX_INFERRED_COLUMN_DEFAULTS_DEFAULT
        }
    }
}

/// `TypeUtil.getProjectedIds(schema).size()` (`GetProjectedIds` with struct ids).
fn projected_id_count(schema: &StructType) -> usize {
    /// Returns Java's "result is non-null": true for everything but primitives.
    fn visit(ty: &Type, ids: &mut HashSet<i32>) -> bool {
        match ty {
            Type::Primitive(_) => false,
            Type::Struct(s) => {
                for field in s.fields() {
                    visit(&field.field_type, ids);
                    if matches!(*field.field_type, Type::Primitive(_) | Type::Struct(_)) {
                        ids.insert(field.id);
                    }
                }
                true
            }
            Type::List(l) => {
                if !visit(&l.element_field.field_type, ids) {
                    ids.insert(l.element_field.id);
                }
                true
            }
            Type::Map(m) => {
                visit(&m.key_field.field_type, ids);
                if !visit(&m.value_field.field_type, ids) {
                    ids.insert(m.key_field.id);
                    ids.insert(m.value_field.id);
                }
                true
            }
        }
    }
    let mut ids = HashSet::new();
    for field in schema.fields() {
        visit(&field.field_type, &mut ids);
        if matches!(*field.field_type, Type::Primitive(_) | Type::Struct(_)) {
            ids.insert(field.id);
        }
    }
    ids.len()
}

/// Java's `MetricsConfig.limitFieldIds`: at each struct its primitive fields first, then its
/// children in order; list elements and map keys/values when primitive; stop at `limit`.
fn limit_field_ids(schema: &StructType, limit: usize) -> Vec<i32> {
    fn visit_struct(s: &StructType, limit: usize, ids: &mut Vec<i32>) {
        for field in s.fields() {
            if ids.len() >= limit {
                break;
            }
            if field.field_type.is_primitive() {
                ids.push(field.id);
            }
        }
        for field in s.fields() {
            if ids.len() >= limit {
                break;
            }
            visit_type(&field.field_type, limit, ids);
        }
    }
    fn visit_type(ty: &Type, limit: usize, ids: &mut Vec<i32>) {
        match ty {
            Type::Primitive(_) => {}
            Type::Struct(s) => visit_struct(s, limit, ids),
            Type::List(l) => {
                if ids.len() < limit && l.element_field.field_type.is_primitive() {
                    ids.push(l.element_field.id);
                }
                visit_type(&l.element_field.field_type, limit, ids);
            }
            Type::Map(m) => {
                if ids.len() < limit && m.key_field.field_type.is_primitive() {
                    ids.push(m.key_field.id);
                }
                if ids.len() < limit && m.value_field.field_type.is_primitive() {
                    ids.push(m.value_field.id);
                }
                visit_type(&m.key_field.field_type, limit, ids);
                visit_type(&m.value_field.field_type, limit, ids);
            }
        }
    }
    let mut ids = Vec::new();
    visit_struct(schema, limit, &mut ids);
    ids
}

/// One data file's column metrics, keyed by Iceberg field id, ready for `DataFileBuilder`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileMetrics {
    /// Values per column, nulls and NaNs included (a null struct counts as a null leaf).
    pub value_counts: HashMap<i32, u64>,
    /// Nulls per column (the leaf or any enclosing struct null).
    pub null_value_counts: HashMap<i32, u64>,
    /// NaNs per float/double column.
    pub nan_value_counts: HashMap<i32, u64>,
    /// Lower bounds, typed as the column's Iceberg type.
    pub lower_bounds: HashMap<i32, Datum>,
    /// Upper bounds, typed as the column's Iceberg type.
    pub upper_bounds: HashMap<i32, Datum>,
}

/// Collects one data file's metrics from the batches written to it.
#[derive(Debug)]
pub struct MetricsCollector {
    leaves: Vec<Leaf>,
    num_columns: usize,
}

/// One primitive column with metrics, and where it sits in a batch.
#[derive(Debug)]
struct Leaf {
    field_id: i32,
    name: String,
    /// Top-level column index, then child indices through structs.
    path: Vec<usize>,
    /// The Arrow type the batches carry for it.
    arrow_type: DataType,
    ty: PrimitiveType,
    mode: MetricsMode,
    value_count: u64,
    null_count: u64,
    nan_count: u64,
    acc: Acc,
}

/// Running lower/upper bounds of the non-null, non-NaN values seen.
#[derive(Debug)]
enum Acc {
    /// No bounds recorded (mode without bounds).
    Skip,
    Bool(Option<(bool, bool)>),
    /// int, date.
    Int(Option<(i32, i32)>),
    /// long, time, timestamps.
    Long(Option<(i64, i64)>),
    Float(Option<(f32, f32)>),
    Double(Option<(f64, f64)>),
    Decimal(Option<(i128, i128)>),
    /// string (UTF-8), binary, fixed: unsigned byte order.
    Bytes(Option<(Vec<u8>, Vec<u8>)>),
    /// uuid under both orders: unsigned bytes and Java's signed (msb, lsb).
    Uuid {
        unsigned: Option<([u8; 16], [u8; 16])>,
        signed: Option<([u8; 16], [u8; 16])>,
    },
}

impl MetricsCollector {
    /// `arrow_schema` is the batches' schema: Petrel's Arrow form of the Iceberg schema, each
    /// field carrying its Iceberg field id (`PARQUET:field_id`). Every primitive leaf outside
    /// lists and maps whose mode is not `none` is collected.
    pub fn new(schema: &Schema, arrow_schema: &SchemaRef, config: &MetricsConfig) -> Result<Self> {
        let mut leaves = Vec::new();
        for (index, field) in arrow_schema.fields().iter().enumerate() {
            collect_leaves(schema, config, field, vec![index], &mut leaves)?;
        }
        Ok(Self {
            leaves,
            num_columns: arrow_schema.fields().len(),
        })
    }

    /// Adds one batch's values.
    pub fn update(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_columns() != self.num_columns {
            return Err(Error::InvalidArgument(format!(
                "metrics: batch has {} columns, the file's schema {}",
                batch.num_columns(),
                self.num_columns
            )));
        }
        for leaf in &mut self.leaves {
            leaf.update(batch)?;
        }
        Ok(())
    }

    /// The file's metrics.
    pub fn finish(self) -> FileMetrics {
        let mut metrics = FileMetrics::default();
        for leaf in self.leaves {
            leaf.finish(&mut metrics);
        }
        metrics
    }
}

fn collect_leaves(
    schema: &Schema,
    config: &MetricsConfig,
    field: &arrow::datatypes::Field,
    path: Vec<usize>,
    leaves: &mut Vec<Leaf>,
) -> Result<()> {
    let field_id = field_id_of(field).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "metrics: Arrow field {:?} carries no Iceberg field id",
            field.name()
        ))
    })?;
    // Row lineage columns (`_row_id`, …) are no table columns: no metrics.
    if crate::row_level::lineage::is_lineage_field(field_id) {
        return Ok(());
    }
    let iceberg_field: &NestedFieldRef = schema.field_by_id(field_id).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "metrics: Arrow field {:?} has field id {field_id}, which the table schema lacks",
            field.name()
        ))
    })?;
    let name = schema
        .name_by_field_id(field_id)
        .unwrap_or(field.name().as_str())
        .to_string();
    match iceberg_field.field_type.as_ref() {
        // Java keeps no metrics for anything inside a list or a map.
        Type::List(_) | Type::Map(_) => Ok(()),
        Type::Struct(_) => match field.data_type() {
            DataType::Struct(children) => {
                for (i, child) in children.iter().enumerate() {
                    let mut child_path = path.clone();
                    child_path.push(i);
                    collect_leaves(schema, config, child, child_path, leaves)?;
                }
                Ok(())
            }
            other => Err(type_mismatch(
                &name,
                field_id,
                other,
                &iceberg_field.field_type,
            )),
        },
        Type::Primitive(ty) => {
            let mode = config.mode(field_id);
            if mode == MetricsMode::None {
                return Ok(());
            }
            let value_type = match field.data_type() {
                DataType::Dictionary(_, value) => value.as_ref(),
                other => other,
            };
            if !arrow_holds(value_type, ty) {
                return Err(type_mismatch(
                    &name,
                    field_id,
                    field.data_type(),
                    &iceberg_field.field_type,
                ));
            }
            let acc = if mode.has_bounds() {
                Acc::new(ty)
            } else {
                Acc::Skip
            };
            leaves.push(Leaf {
                field_id,
                name,
                path,
                arrow_type: field.data_type().clone(),
                ty: ty.clone(),
                mode,
                value_count: 0,
                null_count: 0,
                nan_count: 0,
                acc,
            });
            Ok(())
        }
    }
}

fn type_mismatch(name: &str, field_id: i32, arrow: &DataType, iceberg: &Type) -> Error {
    Error::InvalidArgument(format!(
        "metrics: column {name} (field id {field_id}) has Arrow type {arrow}, which does not \
         hold Iceberg type {iceberg}"
    ))
}

/// Whether values of Arrow type `dt` are values of Iceberg type `ty` as Petrel maps them.
fn arrow_holds(dt: &DataType, ty: &PrimitiveType) -> bool {
    use PrimitiveType as P;
    match (ty, dt) {
        (P::Boolean, DataType::Boolean)
        | (P::Int, DataType::Int32)
        | (P::Long, DataType::Int64)
        | (P::Float, DataType::Float32)
        | (P::Double, DataType::Float64)
        | (P::Date, DataType::Date32)
        | (P::Time, DataType::Time64(TimeUnit::Microsecond))
        | (P::Timestamp, DataType::Timestamp(TimeUnit::Microsecond, None))
        | (P::Timestamptz, DataType::Timestamp(TimeUnit::Microsecond, Some(_)))
        | (P::TimestampNs, DataType::Timestamp(TimeUnit::Nanosecond, None))
        | (P::TimestamptzNs, DataType::Timestamp(TimeUnit::Nanosecond, Some(_)))
        | (P::String, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
        | (P::Binary, DataType::Binary | DataType::LargeBinary | DataType::BinaryView)
        | (P::Uuid, DataType::FixedSizeBinary(16)) => true,
        (P::Decimal { scale, .. }, DataType::Decimal128(_, s)) => {
            i64::from(*s) == i64::from(*scale)
        }
        (P::Fixed(n), DataType::FixedSizeBinary(m)) => u64::try_from(*m).ok() == Some(*n),
        _ => false,
    }
}

impl Acc {
    fn new(ty: &PrimitiveType) -> Self {
        use PrimitiveType as P;
        match ty {
            P::Boolean => Acc::Bool(None),
            P::Int | P::Date => Acc::Int(None),
            P::Long
            | P::Time
            | P::Timestamp
            | P::Timestamptz
            | P::TimestampNs
            | P::TimestamptzNs => Acc::Long(None),
            P::Float => Acc::Float(None),
            P::Double => Acc::Double(None),
            P::Decimal { .. } => Acc::Decimal(None),
            P::String | P::Binary | P::Fixed(_) => Acc::Bytes(None),
            P::Uuid => Acc::Uuid {
                unsigned: None,
                signed: None,
            },
        }
    }
}

/// Widens `(lo, hi)` by `v` in the order `less`.
fn widen<T: Copy>(bounds: &mut Option<(T, T)>, v: T, less: impl Fn(&T, &T) -> bool) {
    match bounds {
        None => *bounds = Some((v, v)),
        Some((lo, hi)) => {
            if less(&v, lo) {
                *lo = v;
            }
            if less(hi, &v) {
                *hi = v;
            }
        }
    }
}

/// Widens `bounds` by a batch's least and greatest values (`None`: the batch had no value).
fn widen_range<T: Copy>(
    bounds: &mut Option<(T, T)>,
    range: Option<(T, T)>,
    less: impl Fn(&T, &T) -> bool,
) {
    if let Some((lo, hi)) = range {
        widen(bounds, lo, &less);
        widen(bounds, hi, &less);
    }
}

/// The least and greatest of the valid `values` in their total order (Arrow's min / max
/// kernels, which vectorize), `None` when every value is null. For floats, the caller makes
/// sure there is no NaN: the total order puts NaNs outside every number.
fn range<T: ArrowPrimitiveType>(
    values: &ScalarBuffer<T::Native>,
    nulls: Option<&NullBuffer>,
) -> Result<Option<(T::Native, T::Native)>> {
    let array = PrimitiveArray::<T>::try_new(values.clone(), nulls.cloned())?;
    Ok(arrow::compute::min(&array).zip(arrow::compute::max(&array)))
}

/// One batch of a float column: widens `bounds` (when the column records them) by its values
/// other than NaN, in `Float.compare` order (−0.0 < 0.0), and returns how many NaNs it holds.
fn update_float<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
    nulls: Option<&NullBuffer>,
    bounds: Option<&mut Option<(T::Native, T::Native)>>,
    is_nan: impl Fn(T::Native) -> bool,
) -> Result<u64> {
    let nans = count_valid(values.values(), nulls, &is_nan);
    let Some(bounds) = bounds else {
        return Ok(nans);
    };
    // Arrow's order of floats is the total order: `Float.compare` for everything but NaN.
    let less = |x: &T::Native, y: &T::Native| x.is_lt(*y);
    if nans == 0 {
        widen_range(bounds, range::<T>(values.values(), nulls)?, less);
    } else {
        for v in valid(values.len(), nulls).map(|i| values.value(i)) {
            if !is_nan(v) {
                widen(bounds, v, less);
            }
        }
    }
    Ok(nans)
}

/// How many of the valid `values` satisfy `test`.
fn count_valid<T: Copy>(values: &[T], nulls: Option<&NullBuffer>, test: impl Fn(T) -> bool) -> u64 {
    match nulls {
        None => values.iter().filter(|&&v| test(v)).count() as u64,
        Some(nulls) => nulls.valid_indices().filter(|&i| test(values[i])).count() as u64,
    }
}

/// The least and greatest byte strings of one batch (unsigned byte order), each with its
/// [`prefix_key`]: most comparisons are decided by the keys, without a `memcmp` call.
#[derive(Default)]
struct BytesRange<'a> {
    bounds: Option<(Keyed<'a>, Keyed<'a>)>,
}

/// A byte string with its [`prefix_key`].
type Keyed<'a> = (&'a [u8], u128);

impl<'a> BytesRange<'a> {
    fn add(&mut self, v: &'a [u8]) {
        let key = prefix_key(v);
        match &mut self.bounds {
            None => self.bounds = Some(((v, key), (v, key))),
            Some((lo, hi)) => {
                if key < lo.1 || (key == lo.1 && v < lo.0) {
                    *lo = (v, key);
                }
                if key > hi.1 || (key == hi.1 && v > hi.0) {
                    *hi = (v, key);
                }
            }
        }
    }
}

/// The first 16 bytes of `v`, zero-padded, as a big-endian number. Keys order as their strings
/// wherever they differ (a zero pad byte only ties with a zero byte or another pad, and a
/// string that runs out first, all else equal, is the smaller); equal keys decide nothing.
fn prefix_key(v: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    let n = v.len().min(16);
    head[..n].copy_from_slice(&v[..n]);
    u128::from_be_bytes(head)
}

fn widen_bytes(bounds: &mut Option<(Vec<u8>, Vec<u8>)>, v: &[u8]) {
    match bounds {
        None => *bounds = Some((v.to_vec(), v.to_vec())),
        Some((lo, hi)) => {
            if v < lo.as_slice() {
                lo.clear();
                lo.extend_from_slice(v);
            }
            if v > hi.as_slice() {
                hi.clear();
                hi.extend_from_slice(v);
            }
        }
    }
}

/// `java.util.UUID.compareTo`: signed most-significant long, then signed least-significant long.
fn uuid_java_less(a: &[u8; 16], b: &[u8; 16]) -> bool {
    let key = |u: &[u8; 16]| {
        let (msb, lsb) = u.split_at(8);
        let mut m = [0u8; 8];
        let mut l = [0u8; 8];
        m.copy_from_slice(msb);
        l.copy_from_slice(lsb);
        (i64::from_be_bytes(m), i64::from_be_bytes(l))
    };
    key(a) < key(b)
}

fn downcast_error(name: &str, dt: &DataType) -> Error {
    Error::InvalidArgument(format!(
        "metrics: column {name}: unexpected Arrow array of type {dt}"
    ))
}

/// Indices of valid slots under `nulls`.
fn valid(len: usize, nulls: Option<&NullBuffer>) -> impl Iterator<Item = usize> + '_ {
    (0..len).filter(move |&i| nulls.is_none_or(|n| n.is_valid(i)))
}

impl Leaf {
    fn update(&mut self, batch: &RecordBatch) -> Result<()> {
        // Walk to the leaf, gathering the enclosing structs' nulls.
        let mut array: ArrayRef = std::sync::Arc::clone(batch.column(self.path[0]));
        let mut ancestors: Option<NullBuffer> = None;
        for &child in &self.path[1..] {
            let parent = array
                .as_struct_opt()
                .ok_or_else(|| downcast_error(&self.name, array.data_type()))?;
            ancestors = NullBuffer::union(ancestors.as_ref(), parent.logical_nulls().as_ref());
            let next = parent
                .columns()
                .get(child)
                .ok_or_else(|| downcast_error(&self.name, array.data_type()))?;
            array = std::sync::Arc::clone(next);
        }
        if array.data_type() != &self.arrow_type {
            return Err(Error::InvalidArgument(format!(
                "metrics: column {} (field id {}) is {} in this batch, {} in the file's schema",
                self.name,
                self.field_id,
                array.data_type(),
                self.arrow_type
            )));
        }
        if let DataType::Dictionary(_, value_type) = array.data_type() {
            array = arrow::compute::cast(&array, value_type)?;
        }
        let nulls = NullBuffer::union(ancestors.as_ref(), array.logical_nulls().as_ref());
        let len = array.len();
        self.value_count += len as u64;
        self.null_count += nulls.as_ref().map_or(0, |n| n.null_count()) as u64;
        let nulls = nulls.as_ref();

        let name = self.name.as_str();
        let err = || downcast_error(name, array.data_type());
        match (&mut self.acc, &self.ty) {
            // Floats count NaNs even without bounds (counts mode).
            (acc, PrimitiveType::Float) => {
                let values = array.as_primitive_opt::<Float32Type>().ok_or_else(err)?;
                let bounds = match acc {
                    Acc::Float(b) => Some(b),
                    _ => None,
                };
                self.nan_count += update_float(values, nulls, bounds, f32::is_nan)?;
            }
            (acc, PrimitiveType::Double) => {
                let values = array.as_primitive_opt::<Float64Type>().ok_or_else(err)?;
                let bounds = match acc {
                    Acc::Double(b) => Some(b),
                    _ => None,
                };
                self.nan_count += update_float(values, nulls, bounds, f64::is_nan)?;
            }
            (Acc::Skip, _) => {}
            (Acc::Bool(b), _) => {
                let values = array.as_boolean_opt().ok_or_else(err)?;
                for i in valid(len, nulls) {
                    widen(b, values.value(i), |x, y| x < y);
                }
            }
            (Acc::Int(b), ty) => {
                let values = match ty {
                    PrimitiveType::Date => {
                        array.as_primitive_opt::<Date32Type>().map(|a| a.values())
                    }
                    _ => array.as_primitive_opt::<Int32Type>().map(|a| a.values()),
                }
                .ok_or_else(err)?;
                widen_range(b, range::<Int32Type>(values, nulls)?, |x, y| x < y);
            }
            (Acc::Long(b), ty) => {
                let values = match ty {
                    PrimitiveType::Long => {
                        array.as_primitive_opt::<Int64Type>().map(|a| a.values())
                    }
                    PrimitiveType::Time => array
                        .as_primitive_opt::<Time64MicrosecondType>()
                        .map(|a| a.values()),
                    PrimitiveType::Timestamp | PrimitiveType::Timestamptz => array
                        .as_primitive_opt::<TimestampMicrosecondType>()
                        .map(|a| a.values()),
                    _ => array
                        .as_primitive_opt::<TimestampNanosecondType>()
                        .map(|a| a.values()),
                }
                .ok_or_else(err)?;
                widen_range(b, range::<Int64Type>(values, nulls)?, |x, y| x < y);
            }
            (Acc::Decimal(b), _) => {
                let values = array.as_primitive_opt::<Decimal128Type>().ok_or_else(err)?;
                widen_range(
                    b,
                    range::<Decimal128Type>(values.values(), nulls)?,
                    |x, y| x < y,
                );
            }
            (Acc::Bytes(b), _) => {
                let mut batch = BytesRange::default();
                for_each_bytes(&array, nulls, |v| batch.add(v)).ok_or_else(err)?;
                if let Some(((lo, _), (hi, _))) = batch.bounds {
                    widen_bytes(b, lo);
                    widen_bytes(b, hi);
                }
            }
            (Acc::Uuid { unsigned, signed }, _) => {
                let values = array.as_fixed_size_binary_opt().ok_or_else(err)?;
                for i in valid(len, nulls) {
                    let v: [u8; 16] = values.value(i).try_into().map_err(|_| err())?;
                    widen(unsigned, v, |x, y| x < y);
                    widen(signed, v, uuid_java_less);
                }
            }
            (Acc::Float(_) | Acc::Double(_), _) => return Err(err()),
        }
        Ok(())
    }

    fn finish(self, metrics: &mut FileMetrics) {
        let id = self.field_id;
        metrics.value_counts.insert(id, self.value_count);
        metrics.null_value_counts.insert(id, self.null_count);
        if matches!(self.ty, PrimitiveType::Float | PrimitiveType::Double) {
            metrics.nan_value_counts.insert(id, self.nan_count);
        }
        let truncate = match self.mode {
            MetricsMode::Truncate(n) => Some(n),
            _ => None,
        };
        let (lower, upper) = bounds(self.acc, &self.ty, truncate);
        if let Some(lower) = lower {
            metrics.lower_bounds.insert(id, lower);
        }
        if let Some(upper) = upper {
            metrics.upper_bounds.insert(id, upper);
        }
    }
}

/// Calls `f` with the bytes of every valid string/binary/fixed value; `None` if `array` is none
/// of those.
fn for_each_bytes<'a>(
    array: &'a ArrayRef,
    nulls: Option<&NullBuffer>,
    mut f: impl FnMut(&'a [u8]),
) -> Option<()> {
    let len = array.len();
    macro_rules! each {
        ($values:expr, $bytes:expr) => {{
            let values = $values?;
            for i in valid(len, nulls) {
                f($bytes(values.value(i)));
            }
        }};
    }
    match array.data_type() {
        DataType::Utf8 => each!(array.as_string_opt::<i32>(), str::as_bytes),
        DataType::LargeUtf8 => each!(array.as_string_opt::<i64>(), str::as_bytes),
        DataType::Utf8View => each!(array.as_string_view_opt(), str::as_bytes),
        DataType::Binary => each!(array.as_binary_opt::<i32>(), std::convert::identity),
        DataType::LargeBinary => each!(array.as_binary_opt::<i64>(), std::convert::identity),
        DataType::BinaryView => each!(array.as_binary_view_opt(), std::convert::identity),
        DataType::FixedSizeBinary(_) => {
            each!(array.as_fixed_size_binary_opt(), std::convert::identity)
        }
        _ => return None,
    }
    Some(())
}

/// The Iceberg lower and upper bound of a finished accumulator, truncated (strings and binary
/// only) to `truncate`. A bound that cannot be written is `None`.
fn bounds(acc: Acc, ty: &PrimitiveType, truncate: Option<usize>) -> (Option<Datum>, Option<Datum>) {
    use PrimitiveType as P;
    let pair = |lo: Option<Datum>, hi: Option<Datum>| (lo, hi);
    match acc {
        Acc::Skip => (None, None),
        Acc::Bool(b) => b.map_or((None, None), |(lo, hi)| {
            pair(Some(Datum::bool(lo)), Some(Datum::bool(hi)))
        }),
        Acc::Int(b) => b.map_or((None, None), |(lo, hi)| match ty {
            P::Date => pair(Some(Datum::date(lo)), Some(Datum::date(hi))),
            _ => pair(Some(Datum::int(lo)), Some(Datum::int(hi))),
        }),
        Acc::Long(b) => b.map_or((None, None), |(lo, hi)| {
            let datum = |v: i64| match ty {
                P::Time => Datum::time_micros(v).ok(),
                P::Timestamp => Some(Datum::timestamp_micros(v)),
                P::Timestamptz => Some(Datum::timestamptz_micros(v)),
                P::TimestampNs => Some(Datum::timestamp_nanos(v)),
                P::TimestamptzNs => Some(Datum::timestamptz_nanos(v)),
                _ => Some(Datum::long(v)),
            };
            pair(datum(lo), datum(hi))
        }),
        Acc::Float(b) => b.map_or((None, None), |(lo, hi)| {
            pair(Some(Datum::float(lo)), Some(Datum::float(hi)))
        }),
        Acc::Double(b) => b.map_or((None, None), |(lo, hi)| {
            pair(Some(Datum::double(lo)), Some(Datum::double(hi)))
        }),
        Acc::Decimal(b) => b.map_or((None, None), |(lo, hi)| {
            // Typed as the column's decimal(p, s); 16 big-endian bytes of the unscaled value.
            let datum = |v: i128| Datum::try_from_bytes(&v.to_be_bytes(), ty.clone()).ok();
            pair(datum(lo), datum(hi))
        }),
        Acc::Bytes(b) => b.map_or((None, None), |(lo, hi)| match ty {
            P::String => {
                let (Ok(lo), Ok(hi)) = (String::from_utf8(lo), String::from_utf8(hi)) else {
                    return (None, None);
                };
                match truncate {
                    Some(n) => pair(
                        Some(Datum::string(truncate_string_min(&lo, n))),
                        truncate_string_max(&hi, n).map(Datum::string),
                    ),
                    None => pair(Some(Datum::string(lo)), Some(Datum::string(hi))),
                }
            }
            P::Binary => match truncate {
                Some(n) => pair(
                    Some(Datum::binary(truncate_binary_min(&lo, n).iter().copied())),
                    truncate_binary_max(&hi, n).map(Datum::binary),
                ),
                None => pair(Some(Datum::binary(lo)), Some(Datum::binary(hi))),
            },
            // fixed: never truncated (Java truncates only string and binary).
            _ => pair(Some(Datum::fixed(lo)), Some(Datum::fixed(hi))),
        }),
        Acc::Uuid { unsigned, signed } => match (unsigned, signed) {
            (Some(u), Some(s)) if u == s => pair(
                Some(Datum::uuid(uuid::Uuid::from_bytes(u.0))),
                Some(Datum::uuid(uuid::Uuid::from_bytes(u.1))),
            ),
            _ => (None, None),
        },
    }
}

/// Java's `UnicodeUtil.truncateStringMin`: the first `n` code points.
pub fn truncate_string_min(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

/// Java's `UnicodeUtil.truncateStringMax`: `s` itself if it has at most `n` code points, else the
/// shortest prefix of at most `n` code points, its last code point incremented (U+D7FF → U+E000,
/// U+10FFFF overflows and carries left), that is above every string starting with the first `n`
/// code points; `None` if every code point overflows.
pub fn truncate_string_max(s: &str, n: usize) -> Option<String> {
    let Some((end, _)) = s.char_indices().nth(n) else {
        return Some(s.to_string());
    };
    let prefix: Vec<char> = s[..end].chars().collect();
    for i in (0..prefix.len()).rev() {
        let next = match prefix[i] as u32 {
            0xD7FF => char::from_u32(0xE000),
            0x10FFFF => None,
            c => char::from_u32(c + 1),
        };
        if let Some(next) = next {
            let mut out: String = prefix[..i].iter().collect();
            out.push(next);
            return Some(out);
        }
    }
    None
}

/// Java's `BinaryUtil.truncateBinaryMin`: the first `n` bytes.
pub fn truncate_binary_min(b: &[u8], n: usize) -> &[u8] {
    &b[..n.min(b.len())]
}

/// Java's `BinaryUtil.truncateBinaryMax`: `b` itself if at most `n` bytes long, else the first `n`
/// bytes with the last byte that is not 0xFF incremented and everything after it dropped; `None`
/// if all `n` bytes are 0xFF.
pub fn truncate_binary_max(b: &[u8], n: usize) -> Option<Vec<u8>> {
    if n >= b.len() {
        return Some(b.to_vec());
    }
    let i = b[..n].iter().rposition(|&byte| byte != 0xFF)?;
    let mut out = b[..=i].to_vec();
    out[i] += 1;
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        BinaryArray, BinaryViewArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray,
        FixedSizeBinaryArray, Float32Array, Float64Array, Int32Array, Int64Array, LargeBinaryArray,
        LargeStringArray, StringArray, StringViewArray, StructArray, Time64MicrosecondArray,
        TimestampMicrosecondArray, TimestampNanosecondArray, new_null_array,
    };
    use arrow::datatypes::{Field, Schema as ArrowSchema};
    use iceberg::spec::{
        ListType, MapType, NestedField, NullOrder, PrimitiveLiteral, SortDirection, SortField,
        Transform,
    };

    use super::*;
    use crate::spec::{FIELD_ID_KEY, iceberg_schema_to_arrow};

    fn prim(p: PrimitiveType) -> Type {
        Type::Primitive(p)
    }

    fn schema(fields: Vec<NestedField>) -> Schema {
        Schema::builder()
            .with_fields(fields.into_iter().map(Arc::new))
            .build()
            .unwrap()
    }

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn arrow_field(name: &str, dt: DataType, id: i32) -> Field {
        Field::new(name, dt, true)
            .with_metadata(HashMap::from([(FIELD_ID_KEY.to_string(), id.to_string())]))
    }

    /// Collects `batches` (columns in schema order) with Petrel's Arrow form of `schema`.
    fn collect(
        schema: &Schema,
        config: &MetricsConfig,
        batches: Vec<Vec<ArrayRef>>,
    ) -> FileMetrics {
        let arrow: SchemaRef = Arc::new(iceberg_schema_to_arrow(schema).unwrap());
        collect_with(schema, &arrow, config, batches)
    }

    fn collect_with(
        schema: &Schema,
        arrow: &SchemaRef,
        config: &MetricsConfig,
        batches: Vec<Vec<ArrayRef>>,
    ) -> FileMetrics {
        let mut collector = MetricsCollector::new(schema, arrow, config).unwrap();
        for columns in batches {
            let batch = RecordBatch::try_new(Arc::clone(arrow), columns).unwrap();
            collector.update(&batch).unwrap();
        }
        collector.finish()
    }

    fn counts(m: &FileMetrics, id: i32) -> (Option<u64>, Option<u64>, Option<u64>) {
        (
            m.value_counts.get(&id).copied(),
            m.null_value_counts.get(&id).copied(),
            m.nan_value_counts.get(&id).copied(),
        )
    }

    fn bounds_of(m: &FileMetrics, id: i32) -> (Option<Datum>, Option<Datum>) {
        (
            m.lower_bounds.get(&id).cloned(),
            m.upper_bounds.get(&id).cloned(),
        )
    }

    fn config_with(pairs: &[(&str, &str)], schema: &Schema) -> MetricsConfig {
        MetricsConfig::from_properties(&props(pairs), schema)
    }

    // ---------------------------------------------------------------- modes

    #[test]
    fn modes_parse_as_java_does() {
        let ok = [
            ("none", MetricsMode::None),
            ("NONE", MetricsMode::None),
            ("Counts", MetricsMode::Counts),
            ("full", MetricsMode::Full),
            ("FULL", MetricsMode::Full),
            ("truncate(16)", MetricsMode::Truncate(16)),
            ("TRUNCATE(1)", MetricsMode::Truncate(1)),
            ("Truncate(007)", MetricsMode::Truncate(7)),
            ("truncate(2147483647)", MetricsMode::Truncate(2147483647)),
            // String.equalsIgnoreCase: U+017F (long s) upper-cases to 'S'.
            ("count\u{17F}", MetricsMode::Counts),
        ];
        for (s, mode) in ok {
            assert_eq!(s.parse::<MetricsMode>().unwrap(), mode, "{s}");
        }
        let bad = [
            "",
            " full",
            "full ",
            "truncate(0)",
            "truncate(-1)",
            "truncate()",
            "truncate( 3)",
            "truncate(+3)",
            "truncate(2147483648)",
            "truncate(16",
            "trunc(16)",
            "counts()",
            "bogus",
        ];
        for s in bad {
            assert!(s.parse::<MetricsMode>().is_err(), "{s:?} should be invalid");
        }
        for mode in [
            MetricsMode::None,
            MetricsMode::Counts,
            MetricsMode::Full,
            MetricsMode::Truncate(16),
        ] {
            assert_eq!(mode.to_string().parse::<MetricsMode>().unwrap(), mode);
        }
        assert_eq!(MetricsMode::Truncate(16).to_string(), "truncate(16)");
        assert!(!MetricsMode::Truncate(0).has_bounds());
        assert!(!MetricsMode::Counts.has_bounds());
        assert!(MetricsMode::Truncate(1).has_bounds());
    }

    // ---------------------------------------------------------------- config

    /// 1 a int, 2 s struct<3 x int, 4 y string>, 5 b string, 6 l list<7 int>, 8 c long,
    /// 9 m map<10 string, 11 struct<12 v int>>: projected ids 1,2,3,4,5,7,8,12 = 8 (a map
    /// with a struct value contributes neither key nor value id, as GetProjectedIds).
    fn wide_schema() -> Schema {
        schema(vec![
            NestedField::optional(1, "a", prim(PrimitiveType::Int)),
            NestedField::optional(
                2,
                "s",
                Type::Struct(StructType::new(vec![
                    Arc::new(NestedField::optional(3, "x", prim(PrimitiveType::Int))),
                    Arc::new(NestedField::optional(4, "y", prim(PrimitiveType::String))),
                ])),
            ),
            NestedField::optional(5, "b", prim(PrimitiveType::String)),
            NestedField::optional(
                6,
                "l",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    7,
                    prim(PrimitiveType::Int),
                    false,
                )))),
            ),
            NestedField::optional(8, "c", prim(PrimitiveType::Long)),
            NestedField::optional(
                9,
                "m",
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(
                        10,
                        prim(PrimitiveType::String),
                    )),
                    Arc::new(NestedField::map_value_element(
                        11,
                        Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(
                            12,
                            "v",
                            prim(PrimitiveType::Int),
                        ))])),
                        false,
                    )),
                )),
            ),
        ])
    }

    fn modes(config: &MetricsConfig, ids: &[i32]) -> Vec<MetricsMode> {
        ids.iter().map(|id| config.mode(*id)).collect()
    }

    #[test]
    fn projected_ids_and_limit_follow_java() {
        let s = wide_schema();
        assert_eq!(projected_id_count(s.as_struct()), 8);
        // Breadth-first per struct: top-level primitives, then s's, then l's element, then m.
        assert_eq!(limit_field_ids(s.as_struct(), 3), vec![1, 5, 8]);
        assert_eq!(limit_field_ids(s.as_struct(), 4), vec![1, 5, 8, 3]);
        assert_eq!(limit_field_ids(s.as_struct(), 6), vec![1, 5, 8, 3, 4, 7]);
        assert_eq!(
            limit_field_ids(s.as_struct(), 100),
            vec![1, 5, 8, 3, 4, 7, 10, 12]
        );
        assert_eq!(limit_field_ids(s.as_struct(), 0), Vec::<i32>::new());
    }

    #[test]
    fn default_config_is_truncate_16_everywhere() {
        let s = wide_schema();
        let config = config_with(&[], &s);
        assert_eq!(config.default_mode(), MetricsMode::Truncate(16));
        assert!(
            modes(&config, &[1, 3, 4, 5, 7, 8, 12, 999])
                .iter()
                .all(|m| *m == MetricsMode::Truncate(16))
        );
        assert_eq!(MetricsConfig::default().mode(1), MetricsMode::Truncate(16));
    }

    #[test]
    fn default_property_and_column_overrides() {
        let s = wide_schema();
        let config = config_with(
            &[
                ("write.metadata.metrics.default", "counts"),
                ("write.metadata.metrics.column.a", "full"),
                ("write.metadata.metrics.column.s.y", "truncate(4)"),
                ("write.metadata.metrics.column.b", "none"),
                ("write.metadata.metrics.column.c", "bogus"),
                ("write.metadata.metrics.column.no_such_column", "full"),
            ],
            &s,
        );
        assert_eq!(config.default_mode(), MetricsMode::Counts);
        assert_eq!(
            modes(&config, &[1, 3, 4, 5, 8]),
            vec![
                MetricsMode::Full,
                MetricsMode::Counts,
                MetricsMode::Truncate(4),
                MetricsMode::None,
                // invalid override: the resolved default
                MetricsMode::Counts,
            ]
        );
    }

    #[test]
    fn invalid_default_falls_back_to_truncate_16() {
        let s = wide_schema();
        for bad in ["truncate(0)", "fulll", "truncate(-3)", ""] {
            let config = config_with(
                &[
                    ("write.metadata.metrics.default", bad),
                    ("write.metadata.metrics.column.b", "nope"),
                ],
                &s,
            );
            assert_eq!(config.default_mode(), MetricsMode::Truncate(16), "{bad:?}");
            assert_eq!(config.mode(5), MetricsMode::Truncate(16));
        }
    }

    #[test]
    fn wide_tables_get_inferred_defaults_for_the_first_columns_only() {
        let s = wide_schema();
        // 8 projected ids <= 8: the default everywhere.
        let config = config_with(
            &[("write.metadata.metrics.max-inferred-column-defaults", "8")],
            &s,
        );
        assert_eq!(config.default_mode(), MetricsMode::Truncate(16));
        assert_eq!(config.mode(4), MetricsMode::Truncate(16));

        // 8 > 4: ids 1, 5, 8, 3 get truncate(16), everything else none.
        let config = config_with(
            &[("write.metadata.metrics.max-inferred-column-defaults", "4")],
            &s,
        );
        assert_eq!(config.default_mode(), MetricsMode::None);
        let t16 = MetricsMode::Truncate(16);
        assert_eq!(
            modes(&config, &[1, 5, 8, 3, 4, 7, 12]),
            vec![
                t16,
                t16,
                t16,
                t16,
                MetricsMode::None,
                MetricsMode::None,
                MetricsMode::None
            ]
        );

        // An override of a column beyond the limit applies; an invalid one falls back to the
        // resolved default, `none` here.
        let config = config_with(
            &[
                ("write.metadata.metrics.max-inferred-column-defaults", "4"),
                ("write.metadata.metrics.column.s.y", "full"),
                ("write.metadata.metrics.column.a", "bad"),
            ],
            &s,
        );
        assert_eq!(config.mode(4), MetricsMode::Full);
        assert_eq!(config.mode(1), MetricsMode::None);

        // An explicit default applies to all columns, however many.
        let config = config_with(
            &[
                ("write.metadata.metrics.max-inferred-column-defaults", "1"),
                ("write.metadata.metrics.default", "full"),
            ],
            &s,
        );
        assert_eq!(modes(&config, &[1, 4, 12]), vec![MetricsMode::Full; 3]);
    }

    #[test]
    fn invalid_max_inferred_column_defaults() {
        let s = wide_schema();
        for (value, expected_default) in [
            ("-1", MetricsMode::Truncate(16)),  // negative → 100
            ("abc", MetricsMode::Truncate(16)), // Java throws; logged here → 100
            ("0", MetricsMode::None),           // 8 ids > 0: no column has metrics
        ] {
            let config = config_with(
                &[("write.metadata.metrics.max-inferred-column-defaults", value)],
                &s,
            );
            assert_eq!(config.default_mode(), expected_default, "{value}");
            assert_eq!(config.mode(1), expected_default, "{value}");
        }
    }

    #[test]
    fn sorted_columns_are_promoted() {
        let s = wide_schema();
        let field = |id: i32, transform: Transform| SortField {
            source_id: id,
            transform,
            direction: SortDirection::Ascending,
            null_order: NullOrder::First,
        };
        let order = SortOrder {
            order_id: 1,
            fields: vec![
                field(1, Transform::Identity),
                field(5, Transform::Bucket(4)),
                field(8, Transform::Truncate(10)),
                field(3, Transform::Identity),
            ],
        };
        let config = MetricsConfig::from_properties_and_sort_order(
            &props(&[
                ("write.metadata.metrics.default", "none"),
                ("write.metadata.metrics.column.x", "counts"),
                ("write.metadata.metrics.column.s.x", "counts"),
            ]),
            &s,
            Some(&order),
        );
        assert_eq!(
            modes(&config, &[1, 5, 8, 3, 4]),
            vec![
                MetricsMode::Truncate(16),
                MetricsMode::None, // bucket does not preserve order
                MetricsMode::Truncate(16),
                MetricsMode::Counts, // the user's override wins
                MetricsMode::None,
            ]
        );
        // With a default that has bounds, sorted columns get the default.
        let config = MetricsConfig::from_properties_and_sort_order(
            &props(&[("write.metadata.metrics.default", "full")]),
            &s,
            Some(&order),
        );
        assert_eq!(config.mode(1), MetricsMode::Full);
    }

    // ---------------------------------------------------------------- collector

    #[test]
    fn ints_and_longs_accumulate_over_batches() {
        let s = schema(vec![
            NestedField::optional(1, "i", prim(PrimitiveType::Int)),
            NestedField::required(2, "l", prim(PrimitiveType::Long)),
        ]);
        let m = collect(
            &s,
            &MetricsConfig::default(),
            vec![
                vec![
                    Arc::new(Int32Array::from(vec![Some(3), None, Some(-7)])),
                    Arc::new(Int64Array::from(vec![5, i64::MIN, 0])),
                ],
                vec![
                    Arc::new(Int32Array::from(vec![None, Some(10)])),
                    Arc::new(Int64Array::from(vec![i64::MAX, 1])),
                ],
            ],
        );
        assert_eq!(counts(&m, 1), (Some(5), Some(2), None));
        assert_eq!(
            bounds_of(&m, 1),
            (Some(Datum::int(-7)), Some(Datum::int(10)))
        );
        assert_eq!(counts(&m, 2), (Some(5), Some(0), None));
        assert_eq!(
            bounds_of(&m, 2),
            (Some(Datum::long(i64::MIN)), Some(Datum::long(i64::MAX)))
        );
        assert!(m.nan_value_counts.is_empty());
    }

    fn f32_bits(d: &Datum) -> u32 {
        match d.literal() {
            PrimitiveLiteral::Float(v) => v.0.to_bits(),
            other => panic!("not a float: {other:?}"),
        }
    }

    fn f64_bits(d: &Datum) -> u64 {
        match d.literal() {
            PrimitiveLiteral::Double(v) => v.0.to_bits(),
            other => panic!("not a double: {other:?}"),
        }
    }

    #[test]
    fn floats_nan_and_signed_zeros() {
        let s = schema(vec![
            NestedField::optional(1, "both_zeros", prim(PrimitiveType::Float)),
            NestedField::optional(2, "neg_zero", prim(PrimitiveType::Float)),
            NestedField::optional(3, "pos_zero_nan_null", prim(PrimitiveType::Float)),
            NestedField::optional(4, "nan_only", prim(PrimitiveType::Double)),
            NestedField::optional(5, "infinities", prim(PrimitiveType::Double)),
            NestedField::optional(6, "zeros_d", prim(PrimitiveType::Double)),
        ]);
        let m = collect(
            &s,
            &MetricsConfig::default(),
            vec![
                vec![
                    Arc::new(Float32Array::from(vec![Some(0.0), Some(-0.0), None])),
                    Arc::new(Float32Array::from(vec![Some(-0.0), None, Some(-0.0)])),
                    Arc::new(Float32Array::from(vec![Some(0.0), Some(f32::NAN), None])),
                    Arc::new(Float64Array::from(vec![
                        Some(f64::NAN),
                        None,
                        Some(-f64::NAN),
                    ])),
                    Arc::new(Float64Array::from(vec![
                        Some(1.5),
                        Some(f64::NEG_INFINITY),
                        Some(f64::NAN),
                    ])),
                    Arc::new(Float64Array::from(vec![Some(0.0), Some(0.0), Some(0.0)])),
                ],
                vec![
                    Arc::new(Float32Array::from(vec![Some(0.0), None, None])),
                    Arc::new(Float32Array::from(vec![None, None, None])),
                    Arc::new(Float32Array::from(vec![Some(f32::NAN), None, None])),
                    Arc::new(Float64Array::from(vec![Some(f64::NAN), None, None])),
                    Arc::new(Float64Array::from(vec![Some(f64::INFINITY), None, None])),
                    Arc::new(Float64Array::from(vec![Some(-0.0), None, Some(0.0)])),
                ],
            ],
        );
        let (lo, hi) = bounds_of(&m, 1);
        assert_eq!(f32_bits(&lo.unwrap()), (-0.0f32).to_bits());
        assert_eq!(f32_bits(&hi.unwrap()), 0.0f32.to_bits());
        assert_eq!(counts(&m, 1), (Some(6), Some(3), Some(0)));

        let (lo, hi) = bounds_of(&m, 2);
        assert_eq!(f32_bits(&lo.unwrap()), (-0.0f32).to_bits());
        assert_eq!(f32_bits(&hi.unwrap()), (-0.0f32).to_bits());

        let (lo, hi) = bounds_of(&m, 3);
        assert_eq!(f32_bits(&lo.unwrap()), 0.0f32.to_bits());
        assert_eq!(f32_bits(&hi.unwrap()), 0.0f32.to_bits());
        assert_eq!(counts(&m, 3), (Some(6), Some(3), Some(2)));

        // Only NaN and null: counts, NaN count, no bounds.
        assert_eq!(bounds_of(&m, 4), (None, None));
        assert_eq!(counts(&m, 4), (Some(6), Some(3), Some(3)));

        let (lo, hi) = bounds_of(&m, 5);
        assert_eq!(f64_bits(&lo.unwrap()), f64::NEG_INFINITY.to_bits());
        assert_eq!(f64_bits(&hi.unwrap()), f64::INFINITY.to_bits());
        assert_eq!(counts(&m, 5), (Some(6), Some(2), Some(1)));

        let (lo, hi) = bounds_of(&m, 6);
        assert_eq!(f64_bits(&lo.unwrap()), (-0.0f64).to_bits());
        assert_eq!(f64_bits(&hi.unwrap()), 0.0f64.to_bits());
        assert_eq!(lo_type(&m, 6), PrimitiveType::Double);
    }

    fn lo_type(m: &FileMetrics, id: i32) -> PrimitiveType {
        m.lower_bounds[&id].data_type().clone()
    }

    #[test]
    fn counts_mode_keeps_nan_counts_without_bounds() {
        let s = schema(vec![
            NestedField::optional(1, "f", prim(PrimitiveType::Float)),
            NestedField::optional(2, "s", prim(PrimitiveType::String)),
        ]);
        let config = config_with(&[("write.metadata.metrics.default", "counts")], &s);
        let m = collect(
            &s,
            &config,
            vec![vec![
                Arc::new(Float32Array::from(vec![Some(1.0), Some(f32::NAN), None])),
                Arc::new(StringArray::from(vec![Some("a"), None, None])),
            ]],
        );
        assert_eq!(counts(&m, 1), (Some(3), Some(1), Some(1)));
        assert_eq!(counts(&m, 2), (Some(3), Some(2), None));
        assert!(m.lower_bounds.is_empty() && m.upper_bounds.is_empty());
    }

    #[test]
    fn none_mode_records_nothing() {
        let s = schema(vec![
            NestedField::optional(1, "a", prim(PrimitiveType::Int)),
            NestedField::optional(2, "b", prim(PrimitiveType::Double)),
            NestedField::optional(3, "c", prim(PrimitiveType::String)),
        ]);
        let config = config_with(
            &[
                ("write.metadata.metrics.default", "none"),
                ("write.metadata.metrics.column.c", "full"),
            ],
            &s,
        );
        let long = "x".repeat(40);
        let m = collect(
            &s,
            &config,
            vec![vec![
                Arc::new(Int32Array::from(vec![1])),
                Arc::new(Float64Array::from(vec![f64::NAN])),
                Arc::new(StringArray::from(vec![long.as_str()])),
            ]],
        );
        assert_eq!(m.value_counts, HashMap::from([(3, 1)]));
        assert_eq!(m.null_value_counts, HashMap::from([(3, 0)]));
        assert!(m.nan_value_counts.is_empty());
        // full: untruncated
        assert_eq!(
            bounds_of(&m, 3),
            (Some(Datum::string(&long)), Some(Datum::string(&long)))
        );
    }

    #[test]
    fn decimals_by_unscaled_value_typed_as_the_column() {
        let s = schema(vec![
            NestedField::optional(
                1,
                "d38",
                prim(PrimitiveType::Decimal {
                    precision: 38,
                    scale: 2,
                }),
            ),
            NestedField::optional(
                2,
                "d9",
                prim(PrimitiveType::Decimal {
                    precision: 9,
                    scale: 3,
                }),
            ),
        ]);
        let big = 10i128.pow(37) + 12345;
        let m = collect(
            &s,
            &MetricsConfig::default(),
            vec![vec![
                Arc::new(
                    Decimal128Array::from(vec![Some(-big), Some(12345), None, Some(-1), Some(big)])
                        .with_precision_and_scale(38, 2)
                        .unwrap(),
                ),
                Arc::new(
                    Decimal128Array::from(vec![Some(-5), Some(999_999_999), Some(0), None, None])
                        .with_precision_and_scale(9, 3)
                        .unwrap(),
                ),
            ]],
        );
        let (lo, hi) = bounds_of(&m, 1);
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        let d38 = PrimitiveType::Decimal {
            precision: 38,
            scale: 2,
        };
        assert_eq!(lo.data_type(), &d38);
        assert_eq!(lo.literal(), &PrimitiveLiteral::Int128(-big));
        assert_eq!(hi.literal(), &PrimitiveLiteral::Int128(big));
        let (lo, hi) = bounds_of(&m, 2);
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        assert_eq!(
            hi.data_type(),
            &PrimitiveType::Decimal {
                precision: 9,
                scale: 3
            }
        );
        assert_eq!(lo.literal(), &PrimitiveLiteral::Int128(-5));
        assert_eq!(hi.literal(), &PrimitiveLiteral::Int128(999_999_999));
        assert_eq!(counts(&m, 2), (Some(5), Some(2), None));
    }

    #[test]
    fn dates_times_and_timestamps() {
        let s = schema(vec![
            NestedField::optional(1, "d", prim(PrimitiveType::Date)),
            NestedField::optional(2, "t", prim(PrimitiveType::Time)),
            NestedField::optional(3, "ts", prim(PrimitiveType::Timestamp)),
            NestedField::optional(4, "tstz", prim(PrimitiveType::Timestamptz)),
            NestedField::optional(5, "ts_ns", prim(PrimitiveType::TimestampNs)),
            NestedField::optional(6, "tstz_ns", prim(PrimitiveType::TimestamptzNs)),
        ]);
        let m = collect(
            &s,
            &MetricsConfig::default(),
            vec![vec![
                Arc::new(Date32Array::from(vec![Some(19_000), None, Some(-5)])),
                Arc::new(Time64MicrosecondArray::from(vec![
                    Some(86_399_999_999),
                    Some(0),
                    None,
                ])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(-1),
                    Some(1),
                    None,
                ])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![None, Some(7), Some(3)])
                        .with_timezone("UTC"),
                ),
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(-1_000_000_001),
                    Some(5),
                    None,
                ])),
                Arc::new(
                    TimestampNanosecondArray::from(vec![Some(9), Some(9), None])
                        .with_timezone("UTC"),
                ),
            ]],
        );
        assert_eq!(
            bounds_of(&m, 1),
            (Some(Datum::date(-5)), Some(Datum::date(19_000)))
        );
        assert_eq!(
            bounds_of(&m, 2),
            (
                Some(Datum::time_micros(0).unwrap()),
                Some(Datum::time_micros(86_399_999_999).unwrap())
            )
        );
        assert_eq!(
            bounds_of(&m, 3),
            (
                Some(Datum::timestamp_micros(-1)),
                Some(Datum::timestamp_micros(1))
            )
        );
        assert_eq!(
            bounds_of(&m, 4),
            (
                Some(Datum::timestamptz_micros(3)),
                Some(Datum::timestamptz_micros(7))
            )
        );
        assert_eq!(
            bounds_of(&m, 5),
            (
                Some(Datum::timestamp_nanos(-1_000_000_001)),
                Some(Datum::timestamp_nanos(5))
            )
        );
        assert_eq!(
            bounds_of(&m, 6),
            (
                Some(Datum::timestamptz_nanos(9)),
                Some(Datum::timestamptz_nanos(9))
            )
        );
        for id in 1..=6 {
            assert_eq!(counts(&m, id), (Some(3), Some(1), None), "field {id}");
        }
        assert_eq!(lo_type(&m, 4), PrimitiveType::Timestamptz);
        assert_eq!(lo_type(&m, 6), PrimitiveType::TimestamptzNs);
    }

    #[test]
    fn booleans() {
        let s = schema(vec![
            NestedField::optional(1, "t", prim(PrimitiveType::Boolean)),
            NestedField::optional(2, "tf", prim(PrimitiveType::Boolean)),
            NestedField::optional(3, "nulls", prim(PrimitiveType::Boolean)),
        ]);
        let m = collect(
            &s,
            &MetricsConfig::default(),
            vec![vec![
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(true)])),
                Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
                Arc::new(BooleanArray::from(vec![None, None, None])),
            ]],
        );
        assert_eq!(
            bounds_of(&m, 1),
            (Some(Datum::bool(true)), Some(Datum::bool(true)))
        );
        assert_eq!(
            bounds_of(&m, 2),
            (Some(Datum::bool(false)), Some(Datum::bool(true)))
        );
        assert_eq!(bounds_of(&m, 3), (None, None));
        assert_eq!(counts(&m, 3), (Some(3), Some(3), None));
    }

    fn string_bounds(values: &[Option<&str>], mode: &str) -> (Option<Datum>, Option<Datum>) {
        let s = schema(vec![NestedField::optional(
            1,
            "s",
            prim(PrimitiveType::String),
        )]);
        let config = config_with(&[("write.metadata.metrics.default", mode)], &s);
        let m = collect(
            &s,
            &config,
            vec![vec![Arc::new(StringArray::from(values.to_vec()))]],
        );
        bounds_of(&m, 1)
    }

    fn strs(lo: Option<&str>, hi: Option<&str>) -> (Option<Datum>, Option<Datum>) {
        (lo.map(Datum::string), hi.map(Datum::string))
    }

    #[test]
    fn string_bounds_truncated_by_code_points() {
        // 本 U+672C increments to 札 U+672D.
        assert_eq!(
            string_bounds(&[Some("日本語")], "truncate(2)"),
            strs(Some("日本"), Some("日札"))
        );
        assert_eq!(
            string_bounds(&[Some("日本語"), Some("日本"), None], "truncate(2)"),
            strs(Some("日本"), Some("日札"))
        );
        // The default, truncate(16): 20 ASCII characters.
        assert_eq!(
            string_bounds(&[Some("abcdefghijklmnopqrst"), Some("b")], "truncate(16)"),
            strs(Some("abcdefghijklmnop"), Some("b"))
        );
        // Short strings are their own bounds.
        assert_eq!(
            string_bounds(&[Some("ab"), Some("aa")], "truncate(16)"),
            strs(Some("aa"), Some("ab"))
        );
        // Supplementary characters are one code point each.
        assert_eq!(
            string_bounds(&[Some("😀😀")], "truncate(1)"),
            strs(Some("😀"), Some("😁"))
        );
        // U+10FFFF overflows and carries left.
        assert_eq!(
            string_bounds(&[Some("a\u{10FFFF}b")], "truncate(2)"),
            strs(Some("a\u{10FFFF}"), Some("b"))
        );
        // Nothing to carry into: a lower bound but no upper bound.
        assert_eq!(
            string_bounds(&[Some("\u{10FFFF}\u{10FFFF}x"), Some("z")], "truncate(2)"),
            strs(Some("z"), None)
        );
        assert_eq!(
            string_bounds(&[Some("\u{10FFFF}\u{10FFFF}x")], "truncate(2)"),
            strs(Some("\u{10FFFF}\u{10FFFF}"), None)
        );
        // U+D7FF increments past the surrogates to U+E000.
        assert_eq!(
            string_bounds(&[Some("\u{D7FF}\u{D7FF}")], "truncate(1)"),
            strs(Some("\u{D7FF}"), Some("\u{E000}"))
        );
        // Only nulls: no bounds.
        assert_eq!(string_bounds(&[None, None], "truncate(16)"), (None, None));
        // Empty string is a value.
        assert_eq!(
            string_bounds(&[Some(""), Some("a")], "truncate(16)"),
            strs(Some(""), Some("a"))
        );
    }

    #[test]
    fn strings_compare_by_code_point_as_java_does() {
        // UTF-16 code units would put U+1F600 (D83D DE00) before U+FF61; Java's comparator
        // ranks high surrogates above BMP units, i.e. code-point (= UTF-8 byte) order.
        assert_eq!(
            string_bounds(
                &[Some("\u{1F600}"), Some("\u{FF61}"), Some("\u{E000}")],
                "full"
            ),
            strs(Some("\u{E000}"), Some("\u{1F600}"))
        );
        assert_eq!(
            string_bounds(&[Some("é"), Some("z"), Some("Z")], "full"),
            strs(Some("Z"), Some("é"))
        );
    }

    fn binary_bounds(values: &[&[u8]], mode: &str) -> (Option<Datum>, Option<Datum>) {
        let s = schema(vec![NestedField::optional(
            1,
            "b",
            prim(PrimitiveType::Binary),
        )]);
        let config = config_with(&[("write.metadata.metrics.default", mode)], &s);
        let m = collect(
            &s,
            &config,
            vec![vec![Arc::new(BinaryArray::from(values.to_vec()))]],
        );
        bounds_of(&m, 1)
    }

    fn bins(lo: Option<&[u8]>, hi: Option<&[u8]>) -> (Option<Datum>, Option<Datum>) {
        (
            lo.map(|b| Datum::binary(b.to_vec())),
            hi.map(|b| Datum::binary(b.to_vec())),
        )
    }

    #[test]
    fn byte_bounds_where_prefix_keys_tie() {
        // Zero bytes and zero padding give equal keys: the full comparison decides.
        assert_eq!(
            binary_bounds(&[&[0x01, 0x00], &[0x01], &[0x01, 0x00, 0x00]], "full"),
            bins(Some(&[0x01]), Some(&[0x01, 0x00, 0x00]))
        );
        // Values that share their first 16 bytes differ only after them.
        let long = |last: u8| {
            let mut v = vec![0x41; 16];
            v.extend([last, 0x00]);
            v
        };
        let (a, b, c) = (long(0x02), long(0x01), long(0x03));
        assert_eq!(
            binary_bounds(&[&a, &b, &c, &a], "full"),
            bins(Some(&b), Some(&c))
        );
        // Many values over a small alphabet (ties everywhere): the bounds are the plain minimum
        // and maximum.
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let values: Vec<Vec<u8>> = (0..2_000)
            .map(|_| {
                let len = next() % 20;
                (0..len).map(|_| [0x00, 0x01, 0xFF][next() % 3]).collect()
            })
            .collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let lo = refs.iter().min().copied();
        let hi = refs.iter().max().copied();
        assert_eq!(binary_bounds(&refs, "full"), bins(lo, hi));
    }

    #[test]
    fn binary_bounds_unsigned_and_truncated() {
        // Unsigned: 0x80 > 0x7F; a prefix sorts first.
        assert_eq!(
            binary_bounds(&[&[0x80], &[0x7F, 0x00], &[0x7F]], "full"),
            bins(Some(&[0x7F]), Some(&[0x80]))
        );
        // truncate(3): the upper bound increments the last byte that is not 0xFF.
        assert_eq!(
            binary_bounds(&[&[0x01, 0x02, 0xFF, 0x00]], "truncate(3)"),
            bins(Some(&[0x01, 0x02, 0xFF]), Some(&[0x01, 0x03]))
        );
        assert_eq!(
            binary_bounds(
                &[&[0x00, 0x00, 0x00, 0x00, 0x01], &[0x10, 0x20, 0x30, 0x40]],
                "truncate(3)"
            ),
            bins(Some(&[0x00, 0x00, 0x00]), Some(&[0x10, 0x20, 0x31]))
        );
        // All 0xFF: no upper bound.
        assert_eq!(
            binary_bounds(&[&[0xFF; 5]], "truncate(3)"),
            bins(Some(&[0xFF, 0xFF, 0xFF]), None)
        );
        // Short values unchanged, even all 0xFF.
        assert_eq!(
            binary_bounds(&[&[0xFF, 0xFF], &[]], "truncate(3)"),
            bins(Some(&[]), Some(&[0xFF, 0xFF]))
        );
    }

    #[test]
    fn fixed_is_never_truncated() {
        let s = schema(vec![NestedField::optional(
            1,
            "f",
            prim(PrimitiveType::Fixed(6)),
        )]);
        let config = config_with(&[("write.metadata.metrics.default", "truncate(2)")], &s);
        let values: Vec<Option<&[u8]>> = vec![
            Some(&[9, 9, 9, 9, 9, 9]),
            None,
            Some(&[0x80, 0, 0, 0, 0, 1]),
        ];
        let m = collect(
            &s,
            &config,
            vec![vec![Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(values.into_iter(), 6)
                    .unwrap(),
            )]],
        );
        assert_eq!(
            bounds_of(&m, 1),
            (
                Some(Datum::fixed(vec![9, 9, 9, 9, 9, 9])),
                Some(Datum::fixed(vec![0x80, 0, 0, 0, 0, 1]))
            )
        );
        assert_eq!(lo_type(&m, 1), PrimitiveType::Fixed(6));
        assert_eq!(counts(&m, 1), (Some(3), Some(1), None));
    }

    fn uuid_bounds(values: &[[u8; 16]]) -> (Option<Datum>, Option<Datum>) {
        let s = schema(vec![NestedField::optional(
            1,
            "u",
            prim(PrimitiveType::Uuid),
        )]);
        let m = collect(
            &s,
            &MetricsConfig::default(),
            vec![vec![Arc::new(
                FixedSizeBinaryArray::try_from_iter(values.iter()).unwrap(),
            )]],
        );
        bounds_of(&m, 1)
    }

    fn uuid_bytes(first: u8, ninth: u8) -> [u8; 16] {
        let mut b = [0x11u8; 16];
        b[0] = first;
        b[8] = ninth;
        b
    }

    fn uuid_datum(b: [u8; 16]) -> Option<Datum> {
        Some(Datum::uuid(uuid::Uuid::from_bytes(b)))
    }

    #[test]
    fn uuid_bounds_only_where_signed_and_unsigned_orders_agree() {
        // Same sign of the most significant long: both orders agree.
        let (a, b) = (uuid_bytes(0x10, 0x80), uuid_bytes(0x20, 0x80));
        assert_eq!(uuid_bounds(&[b, a]), (uuid_datum(a), uuid_datum(b)));
        // RFC variant (10xx in byte 8): least significant longs are all negative and compare
        // alike under both orders.
        let (a, b) = (uuid_bytes(0x10, 0x80), uuid_bytes(0x10, 0xBF));
        assert_eq!(uuid_bounds(&[b, a]), (uuid_datum(a), uuid_datum(b)));
        // 0x90.. is the largest unsigned but the smallest signed: no bounds.
        let c = uuid_bytes(0x90, 0x80);
        assert_eq!(uuid_bounds(&[a, c]), (None, None));
        // Same msb, lsb differing in sign: no bounds.
        assert_eq!(
            uuid_bounds(&[uuid_bytes(0x10, 0x00), uuid_bytes(0x10, 0x80)]),
            (None, None)
        );
        // One value: its own bounds, whatever its sign.
        assert_eq!(uuid_bounds(&[c]), (uuid_datum(c), uuid_datum(c)));
        assert!(uuid_java_less(&c, &a) && c > a);
    }

    #[test]
    fn structs_have_leaf_metrics_lists_and_maps_none() {
        let s = schema(vec![
            NestedField::required(1, "id", prim(PrimitiveType::Int)),
            NestedField::optional(
                2,
                "s",
                Type::Struct(StructType::new(vec![
                    Arc::new(NestedField::optional(3, "x", prim(PrimitiveType::Int))),
                    Arc::new(NestedField::required(4, "f", prim(PrimitiveType::Double))),
                    Arc::new(NestedField::optional(
                        13,
                        "inner",
                        Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(
                            14,
                            "w",
                            prim(PrimitiveType::String),
                        ))])),
                    )),
                ])),
            ),
            NestedField::optional(
                5,
                "l",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    6,
                    prim(PrimitiveType::Int),
                    false,
                )))),
            ),
            NestedField::optional(
                7,
                "m",
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(8, prim(PrimitiveType::String))),
                    Arc::new(NestedField::map_value_element(
                        9,
                        prim(PrimitiveType::Int),
                        false,
                    )),
                )),
            ),
        ]);
        let arrow: SchemaRef = Arc::new(iceberg_schema_to_arrow(&s).unwrap());
        let DataType::Struct(s_fields) = arrow.field(1).data_type().clone() else {
            panic!("struct expected")
        };
        let DataType::Struct(inner_fields) = s_fields[2].data_type().clone() else {
            panic!("struct expected")
        };
        // Row 1's struct is null, its children hold values that must not count.
        let inner = StructArray::new(
            inner_fields,
            vec![Arc::new(StringArray::from(vec![
                Some("b"),
                Some("zzz"),
                None,
            ]))],
            Some(NullBuffer::from(vec![true, true, false])),
        );
        let s_array = StructArray::new(
            s_fields,
            vec![
                Arc::new(Int32Array::from(vec![Some(1), Some(100), None])),
                Arc::new(Float64Array::from(vec![0.5, f64::NAN, 2.0])),
                Arc::new(inner),
            ],
            Some(NullBuffer::from(vec![true, false, true])),
        );
        let m = collect_with(
            &s,
            &arrow,
            &MetricsConfig::default(),
            vec![vec![
                Arc::new(Int32Array::from(vec![1, 2, 3])),
                Arc::new(s_array),
                new_null_array(arrow.field(2).data_type(), 3),
                new_null_array(arrow.field(3).data_type(), 3),
            ]],
        );
        assert_eq!(counts(&m, 3), (Some(3), Some(2), None));
        assert_eq!(bounds_of(&m, 3), (Some(Datum::int(1)), Some(Datum::int(1))));
        assert_eq!(counts(&m, 4), (Some(3), Some(1), Some(0)));
        let (lo, hi) = bounds_of(&m, 4);
        assert_eq!(
            (lo.unwrap(), hi.unwrap()),
            (Datum::double(0.5), Datum::double(2.0))
        );
        assert_eq!(counts(&m, 14), (Some(3), Some(2), None));
        assert_eq!(bounds_of(&m, 14), strs(Some("b"), Some("b")));
        let mut ids: Vec<i32> = m.value_counts.keys().copied().collect();
        ids.sort();
        assert_eq!(ids, vec![1, 3, 4, 14]);
        for map in [&m.null_value_counts, &m.value_counts] {
            assert!(map.keys().all(|id| [1, 3, 4, 14].contains(id)));
        }
        assert!(m.lower_bounds.keys().all(|id| [1, 3, 4, 14].contains(id)));
        assert_eq!(m.nan_value_counts, HashMap::from([(4, 0)]));
    }

    #[test]
    fn sliced_batches() {
        let s = schema(vec![NestedField::optional(
            1,
            "i",
            prim(PrimitiveType::Int),
        )]);
        let arrow: SchemaRef = Arc::new(iceberg_schema_to_arrow(&s).unwrap());
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow),
            vec![Arc::new(Int32Array::from(vec![
                Some(-50),
                Some(2),
                None,
                Some(3),
                Some(99),
            ]))],
        )
        .unwrap();
        let mut c = MetricsCollector::new(&s, &arrow, &MetricsConfig::default()).unwrap();
        c.update(&batch.slice(1, 3)).unwrap();
        let m = c.finish();
        assert_eq!(counts(&m, 1), (Some(3), Some(1), None));
        assert_eq!(bounds_of(&m, 1), (Some(Datum::int(2)), Some(Datum::int(3))));
    }

    #[test]
    fn view_large_and_dictionary_arrays() {
        let s = schema(vec![
            NestedField::optional(1, "sv", prim(PrimitiveType::String)),
            NestedField::optional(2, "ls", prim(PrimitiveType::String)),
            NestedField::optional(3, "bv", prim(PrimitiveType::Binary)),
            NestedField::optional(4, "lb", prim(PrimitiveType::Binary)),
            NestedField::optional(5, "dict", prim(PrimitiveType::String)),
        ]);
        let arrow: SchemaRef = Arc::new(ArrowSchema::new(vec![
            arrow_field("sv", DataType::Utf8View, 1),
            arrow_field("ls", DataType::LargeUtf8, 2),
            arrow_field("bv", DataType::BinaryView, 3),
            arrow_field("lb", DataType::LargeBinary, 4),
            arrow_field(
                "dict",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                5,
            ),
        ]));
        let dict: DictionaryArray<Int32Type> =
            vec![Some("pear"), None, Some("apple"), Some("pear")]
                .into_iter()
                .collect();
        let m = collect_with(
            &s,
            &arrow,
            &config_with(&[("write.metadata.metrics.default", "truncate(3)")], &s),
            vec![vec![
                Arc::new(StringViewArray::from(vec![
                    Some("a long string beyond twelve bytes"),
                    None,
                    Some("b"),
                    Some("ab"),
                ])),
                Arc::new(LargeStringArray::from(vec![
                    Some("xyz1"),
                    Some("xyz"),
                    None,
                    None,
                ])),
                Arc::new(BinaryViewArray::from(vec![
                    Some(&b"\x00\x01"[..]),
                    Some(&b"\xFF\xFF\xFF\xFF"[..]),
                    None,
                    None,
                ])),
                Arc::new(LargeBinaryArray::from(vec![
                    Some(&b"\x05"[..]),
                    Some(&b""[..]),
                    None,
                    None,
                ])),
                Arc::new(dict),
            ]],
        );
        assert_eq!(bounds_of(&m, 1), strs(Some("a l"), Some("b")));
        // "xyz1" truncated to "xyz", its last code point incremented: 'z' + 1 = '{'.
        assert_eq!(bounds_of(&m, 2), strs(Some("xyz"), Some("xy{")));
        assert_eq!(bounds_of(&m, 3), bins(Some(&[0, 1]), None));
        assert_eq!(bounds_of(&m, 4), bins(Some(&[]), Some(&[5])));
        assert_eq!(bounds_of(&m, 5), strs(Some("app"), Some("peb")));
        assert_eq!(counts(&m, 5), (Some(4), Some(1), None));
        assert_eq!(counts(&m, 1), (Some(4), Some(1), None));
    }

    #[test]
    fn schema_errors_are_clear() {
        let s = schema(vec![NestedField::optional(
            1,
            "i",
            prim(PrimitiveType::Int),
        )]);
        let config = MetricsConfig::default();
        let no_id: SchemaRef = Arc::new(ArrowSchema::new(vec![Field::new(
            "i",
            DataType::Int32,
            true,
        )]));
        let e = MetricsCollector::new(&s, &no_id, &config).unwrap_err();
        assert!(e.to_string().contains("no Iceberg field id"), "{e}");

        let unknown: SchemaRef =
            Arc::new(ArrowSchema::new(vec![arrow_field("i", DataType::Int32, 7)]));
        let e = MetricsCollector::new(&s, &unknown, &config).unwrap_err();
        assert!(e.to_string().contains("field id 7"), "{e}");

        let wrong: SchemaRef =
            Arc::new(ArrowSchema::new(vec![arrow_field("i", DataType::Int64, 1)]));
        let e = MetricsCollector::new(&s, &wrong, &config).unwrap_err();
        assert!(e.to_string().contains("Arrow type Int64"), "{e}");

        // A batch whose column type differs from the schema given to `new`.
        let arrow: SchemaRef =
            Arc::new(ArrowSchema::new(vec![arrow_field("i", DataType::Int32, 1)]));
        let mut c = MetricsCollector::new(&s, &arrow, &config).unwrap();
        let other: SchemaRef = Arc::new(ArrowSchema::new(vec![arrow_field(
            "i",
            DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Int32)),
            1,
        )]));
        let dict: DictionaryArray<arrow::datatypes::Int8Type> = DictionaryArray::new(
            arrow::array::Int8Array::from(vec![0]),
            Arc::new(Int32Array::from(vec![5])),
        );
        let batch = RecordBatch::try_new(other, vec![Arc::new(dict)]).unwrap();
        let e = c.update(&batch).unwrap_err();
        assert!(e.to_string().contains("in this batch"), "{e}");

        // Timestamp without zone for a timestamptz column.
        let s = schema(vec![NestedField::optional(
            1,
            "t",
            prim(PrimitiveType::Timestamptz),
        )]);
        let wrong: SchemaRef = Arc::new(ArrowSchema::new(vec![arrow_field(
            "t",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            1,
        )]));
        assert!(MetricsCollector::new(&s, &wrong, &config).is_err());
    }

    #[test]
    fn truncation_helpers_match_java_tests() {
        // TestUnicodeUtil
        assert_eq!(truncate_string_min("abcde", 3), "abc");
        assert_eq!(truncate_string_min("abc", 5), "abc");
        assert_eq!(truncate_string_min("", 3), "");
        assert_eq!(truncate_string_min("a😀b", 2), "a😀");
        assert_eq!(truncate_string_max("abcde", 3).as_deref(), Some("abd"));
        assert_eq!(truncate_string_max("abc", 3).as_deref(), Some("abc"));
        assert_eq!(truncate_string_max("", 3).as_deref(), Some(""));
        assert_eq!(truncate_string_max("a\u{10FFFF}c", 2).as_deref(), Some("b"));
        assert_eq!(
            truncate_string_max("\u{D7FF}extra", 1).as_deref(),
            Some("\u{E000}")
        );
        assert_eq!(truncate_string_max("\u{10FFFF}\u{10FFFF}", 1), None);
        // TestBinaryUtil-style
        assert_eq!(truncate_binary_min(&[1, 2, 3], 2), &[1, 2]);
        assert_eq!(truncate_binary_min(&[1, 2, 3], 5), &[1, 2, 3]);
        assert_eq!(truncate_binary_max(&[1, 2, 3], 2), Some(vec![1, 3]));
        assert_eq!(truncate_binary_max(&[1, 0xFF, 3], 2), Some(vec![2]));
        assert_eq!(truncate_binary_max(&[0xFF, 0xFF, 3], 2), None);
        assert_eq!(
            truncate_binary_max(&[0xFF, 0xFF], 2),
            Some(vec![0xFF, 0xFF])
        );
    }
}
