//! Sizes of function arguments, row by row: the inputs of the bounds in `bounds`.
//!
//! An argument is a column (one value per row) or a scalar (one value for every row). [`Arg`]
//! reads either by row index, so a bound is written once for both.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ColumnarValue;

/// One argument of a call, readable by row.
pub(super) struct Arg {
    /// The argument as an array: the column, or the scalar as one row.
    array: ArrayRef,
    /// One value for every row.
    scalar: bool,
}

impl Arg {
    pub(super) fn new(value: &ColumnarValue) -> Result<Self> {
        Ok(match value {
            ColumnarValue::Array(array) => Self {
                array: ArrayRef::clone(array),
                scalar: false,
            },
            ColumnarValue::Scalar(scalar) => Self {
                array: scalar.to_array_of_size(1)?,
                scalar: true,
            },
        })
    }

    /// The array index of `row`.
    fn index(&self, row: usize) -> usize {
        if self.scalar { 0 } else { row }
    }

    /// Bytes of the value at `row` (0 for NULL): a string's or binary's length, else the
    /// Arrow size of the row's slice (a list's elements, a struct's fields).
    pub(super) fn bytes_at(&self, row: usize) -> usize {
        let i = self.index(row);
        if self.array.is_null(i) {
            return 0;
        }
        let array = &self.array;
        match array.data_type() {
            DataType::Utf8 => array.as_string::<i32>().value(i).len(),
            DataType::LargeUtf8 => array.as_string::<i64>().value(i).len(),
            DataType::Utf8View => array.as_string_view().value(i).len(),
            DataType::Binary => array.as_binary::<i32>().value(i).len(),
            DataType::LargeBinary => array.as_binary::<i64>().value(i).len(),
            DataType::BinaryView => array.as_binary_view().value(i).len(),
            _ => array_bytes(&array.slice(i, 1)),
        }
    }

    /// The text at `row` (None: NULL or not a string).
    pub(super) fn str_at(&self, row: usize) -> Option<&str> {
        let i = self.index(row);
        if self.array.is_null(i) {
            return None;
        }
        let array = &self.array;
        match array.data_type() {
            DataType::Utf8 => Some(array.as_string::<i32>().value(i)),
            DataType::LargeUtf8 => Some(array.as_string::<i64>().value(i)),
            DataType::Utf8View => Some(array.as_string_view().value(i)),
            _ => None,
        }
    }

    /// The number of elements of the list at `row`, counted down to the leaves of nested
    /// lists (0 for NULL or a value that is not a list).
    pub(super) fn leaves_at(&self, row: usize) -> usize {
        let i = self.index(row);
        if self.array.is_null(i) {
            return 0;
        }
        leaves(&self.array.slice(i, 1))
    }

    /// The average size of one element of the lists of this argument (1 when it has none).
    pub(super) fn average_element_bytes(&self) -> usize {
        let elements = match self.array.data_type() {
            DataType::List(_) => Some(self.array.as_list::<i32>().values()),
            DataType::LargeList(_) => Some(self.array.as_list::<i64>().values()),
            DataType::FixedSizeList(_, _) => Some(self.array.as_fixed_size_list().values()),
            _ => None,
        };
        match elements {
            Some(values) if !values.is_empty() => {
                (array_bytes(values.as_ref()) / values.len()).max(1)
            }
            _ => 1,
        }
    }
}

/// An integer argument (a count, a length), cast to `Int64`, readable by row.
pub(super) struct Integers {
    /// One value for every row.
    scalar: bool,
    values: arrow::array::Int64Array,
}

impl Integers {
    pub(super) fn new(value: &ColumnarValue) -> Result<Self> {
        let Arg { array, scalar } = Arg::new(value)?;
        let values = cast(&array, &DataType::Int64)?.as_primitive().clone();
        Ok(Self { scalar, values })
    }

    /// The value at `row` (None: NULL).
    pub(super) fn at(&self, row: usize) -> Option<i64> {
        let i = if self.scalar { 0 } else { row };
        self.values.is_valid(i).then(|| self.values.value(i))
    }

    /// The value at `row` as a count: negative and NULL are 0.
    pub(super) fn count_at(&self, row: usize) -> usize {
        self.at(row)
            .map_or(0, |v| usize::try_from(v.max(0)).unwrap_or(usize::MAX))
    }
}

/// The bytes an argument contributes to a call over `rows` rows: a column's values as sliced,
/// or a scalar's once per row it is copied into.
pub(super) fn value_bytes(value: &ColumnarValue, rows: usize) -> usize {
    match value {
        ColumnarValue::Array(array) => array_bytes(array.as_ref()),
        ColumnarValue::Scalar(scalar) => scalar_bytes(scalar).saturating_mul(rows),
    }
}

/// The heap bytes of a literal's value: a string's or binary's length, a nested value's Arrow
/// size; 0 for the fixed-width values, whose copies are as small as any column's.
pub(super) fn scalar_bytes(scalar: &ScalarValue) -> usize {
    match scalar {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.len(),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => b.len(),
        ScalarValue::List(a) => array_bytes(a.as_ref()),
        ScalarValue::LargeList(a) => array_bytes(a.as_ref()),
        ScalarValue::FixedSizeList(a) => array_bytes(a.as_ref()),
        ScalarValue::Struct(a) => array_bytes(a.as_ref()),
        ScalarValue::Map(a) => array_bytes(a.as_ref()),
        _ => 0,
    }
}

/// The bytes of an array's values as sliced: a string's or binary's bytes (a view array's
/// too, which Arrow's slice size leaves out), a list's elements (only those of its rows, which
/// Arrow's slice size counts whole), a struct's fields; fixed-width values by their width.
fn array_bytes(array: &dyn Array) -> usize {
    let rows = array.len();
    // A view's low 32 bits are its value's length; summed as u64 (8192 rows of u32 cannot
    // overflow it), which the compiler vectorizes.
    let views = |views: &[u128]| {
        let lengths: u64 = views.iter().map(|view| u64::from(*view as u32)).sum();
        usize::try_from(lengths)
            .unwrap_or(usize::MAX)
            .saturating_add(rows.saturating_mul(16))
    };
    match array.data_type() {
        DataType::Utf8 => offsets_bytes(array.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => offsets_bytes(array.as_string::<i64>().value_offsets()),
        DataType::Binary => offsets_bytes(array.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => offsets_bytes(array.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => views(array.as_string_view().views()),
        DataType::BinaryView => views(array.as_binary_view().views()),
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            offsets_bytes(list.value_offsets())
                .saturating_add(elements_bytes(list.values(), list.value_offsets()))
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            offsets_bytes(list.value_offsets())
                .saturating_add(elements_bytes(list.values(), list.value_offsets()))
        }
        DataType::Map(_, _) => {
            let map = array.as_map();
            let entries: &dyn Array = map.entries();
            let (start, end) = offset_range(map.value_offsets());
            array_bytes(&entries.slice(start, end.saturating_sub(start)))
        }
        DataType::FixedSizeList(_, _) => array_bytes(array.as_fixed_size_list().values().as_ref()),
        DataType::Struct(_) => array
            .as_struct()
            .columns()
            .iter()
            .fold(rows, |sum, c| sum.saturating_add(array_bytes(c.as_ref()))),
        _ => array
            .to_data()
            .get_slice_memory_size()
            .unwrap_or_else(|_| array.get_array_memory_size()),
    }
}

/// The value bytes a string or binary array's offsets span, and the offsets themselves.
fn offsets_bytes<O: arrow::array::OffsetSizeTrait>(offsets: &[O]) -> usize {
    let (start, end) = offset_range(offsets);
    end.saturating_sub(start)
        .saturating_add(offsets.len().saturating_mul(size_of::<O>()))
}

/// The bytes of the elements of `values` that a list's `offsets` cover.
fn elements_bytes<O: arrow::array::OffsetSizeTrait>(values: &ArrayRef, offsets: &[O]) -> usize {
    let (start, end) = offset_range(offsets);
    array_bytes(values.slice(start, end.saturating_sub(start)).as_ref())
}

/// Elements of the lists in `array`, nested lists counted down to their leaves; a value that
/// is not a list counts as one.
fn leaves(array: &ArrayRef) -> usize {
    let (values, range) = match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            (list.values(), offset_range(list.value_offsets()))
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            (list.values(), offset_range(list.value_offsets()))
        }
        // A sliced fixed-size list's values are sliced with it.
        DataType::FixedSizeList(_, _) => {
            let values = array.as_fixed_size_list().values();
            (values, (0, values.len()))
        }
        _ => return array.len(),
    };
    leaves(&values.slice(range.0, range.1.saturating_sub(range.0)))
}

/// The element range a list array's offsets cover.
pub(super) fn offset_range<O: arrow::array::OffsetSizeTrait>(offsets: &[O]) -> (usize, usize) {
    let at = |o: Option<&O>| o.map_or(0, |o| o.as_usize());
    (at(offsets.first()), at(offsets.last()))
}
