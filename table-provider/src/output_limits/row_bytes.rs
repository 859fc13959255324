//! Bytes of a batch's rows, as an operator that copies rows would copy them: the inputs of
//! the bounds [`super::CopyGuardExec`] checks.
//!
//! Only values of variable width count (strings, binaries, lists, maps, and structs and
//! dictionaries holding them): a row of fixed-width columns is a few hundred bytes at most,
//! while one string may be a gigabyte. A value's bytes are its data, exactly for strings and
//! binaries (offset and view arrays alike) and for lists down to their leaves; a dictionary's
//! value counts its dictionary entry.

use arrow::array::{Array, ArrayRef, AsArray, OffsetSizeTrait, RecordBatch};
use arrow::datatypes::DataType;

use super::sizes::offset_range;

/// The bytes of the largest row of `batch` (at most: the sum of each column's largest value).
pub(super) fn largest_row_bytes(batch: &RecordBatch) -> usize {
    largest_row_bytes_except(batch, &[])
}

/// [`largest_row_bytes`] of `batch`'s columns but `skip`.
pub(super) fn largest_row_bytes_except(batch: &RecordBatch, skip: &[usize]) -> usize {
    batch
        .columns()
        .iter()
        .enumerate()
        .filter(|(index, _)| !skip.contains(index))
        .map(|(_, column)| largest_value_bytes(column.as_ref()))
        .fold(0usize, usize::saturating_add)
}

/// The elements of all rows' lists in `column` together, `depth` levels down.
pub(super) fn total_elements(column: &ArrayRef, depth: usize) -> usize {
    elements(column.as_ref(), 0, column.len(), depth.max(1))
}

/// The bytes of each row of `batch`'s columns but `skip`, added into `rows` (one per row).
pub(super) fn add_row_bytes(batch: &RecordBatch, skip: &[usize], rows: &mut [usize]) {
    for (index, column) in batch.columns().iter().enumerate() {
        if skip.contains(&index) || !is_variable_width(column.data_type()) {
            continue;
        }
        let array = column.as_ref();
        if let Some(lengths) = Lengths::of(array) {
            lengths.add_to(rows);
        } else if let Some(entry) = dictionary_entry_bytes(array) {
            rows.iter_mut().for_each(|b| *b = b.saturating_add(entry));
        } else {
            for (row, bytes) in rows.iter_mut().enumerate() {
                *bytes = bytes.saturating_add(range_bytes(array, row, row + 1));
            }
        }
    }
}

/// The number of elements of each row's list in `column` (0 for NULL or a non-list), `depth`
/// levels down (`unnest` of a list of lists with depth 2 makes a row per innermost element).
pub(super) fn list_lengths(column: &ArrayRef, depth: usize) -> Vec<usize> {
    let mut lengths = vec![0; column.len()];
    match column.data_type() {
        DataType::List(_) if depth <= 1 => {
            Lengths::Offsets32(column.as_list::<i32>().value_offsets()).add_to(&mut lengths)
        }
        DataType::LargeList(_) if depth <= 1 => {
            Lengths::Offsets64(column.as_list::<i64>().value_offsets()).add_to(&mut lengths)
        }
        _ => {
            for (row, length) in lengths.iter_mut().enumerate() {
                *length = elements(column.as_ref(), row, row + 1, depth.max(1));
            }
        }
    }
    lengths
}

/// The elements of rows `start..end` of `array`, `depth` list levels down.
fn elements(array: &dyn Array, start: usize, end: usize, depth: usize) -> usize {
    if depth == 0 {
        return end - start;
    }
    match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let (from, to) = rows_range(list.value_offsets(), start, end);
            elements(list.values().as_ref(), from, to, depth - 1)
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let (from, to) = rows_range(list.value_offsets(), start, end);
            elements(list.values().as_ref(), from, to, depth - 1)
        }
        DataType::FixedSizeList(_, size) => {
            let size = usize::try_from(*size).unwrap_or(0);
            let list = array.as_fixed_size_list();
            elements(list.values().as_ref(), start * size, end * size, depth - 1)
        }
        _ => 0,
    }
}

/// Whether values of `data_type` can be of any size.
pub(super) fn is_variable_width(data_type: &DataType) -> bool {
    match data_type {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::List(_)
        | DataType::LargeList(_)
        | DataType::ListView(_)
        | DataType::LargeListView(_)
        | DataType::FixedSizeList(..)
        | DataType::Map(..) => true,
        DataType::Struct(fields) => fields.iter().any(|f| is_variable_width(f.data_type())),
        DataType::Union(fields, _) => fields.iter().any(|(_, f)| is_variable_width(f.data_type())),
        DataType::Dictionary(_, values) => is_variable_width(values),
        DataType::RunEndEncoded(_, values) => is_variable_width(values.data_type()),
        _ => false,
    }
}

/// The bytes of the largest value of `array` (0 when its type is of fixed width).
pub(super) fn largest_value_bytes(array: &dyn Array) -> usize {
    if let Some(lengths) = Lengths::of(array) {
        return lengths.largest();
    }
    if let Some(entry) = dictionary_entry_bytes(array) {
        return if array.is_empty() { 0 } else { entry };
    }
    if !is_variable_width(array.data_type()) {
        return 0;
    }
    (0..array.len())
        .map(|row| range_bytes(array, row, row + 1))
        .max()
        .unwrap_or(0)
}

/// The lengths of a string or binary array's values: its offsets, or its views (a view's low
/// 32 bits are its value's length). Every flat layout read one way.
enum Lengths<'a> {
    Offsets32(&'a [i32]),
    Offsets64(&'a [i64]),
    Views(&'a [u128]),
}

impl<'a> Lengths<'a> {
    /// The lengths of `array`'s values, if it is a string or binary array.
    fn of(array: &'a dyn Array) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Utf8 => Self::Offsets32(array.as_string::<i32>().value_offsets()),
            DataType::LargeUtf8 => Self::Offsets64(array.as_string::<i64>().value_offsets()),
            DataType::Binary => Self::Offsets32(array.as_binary::<i32>().value_offsets()),
            DataType::LargeBinary => Self::Offsets64(array.as_binary::<i64>().value_offsets()),
            DataType::Utf8View => Self::Views(array.as_string_view().views()),
            DataType::BinaryView => Self::Views(array.as_binary_view().views()),
            _ => return None,
        })
    }

    /// The largest length (one vectorised pass).
    fn largest(&self) -> usize {
        // Offsets only grow, so each difference is a value's length.
        fn largest<O: OffsetSizeTrait>(offsets: &[O]) -> usize {
            offsets
                .iter()
                .zip(offsets.iter().skip(1))
                .map(|(start, end)| *end - *start)
                .max()
                .map_or(0, |span| span.as_usize())
        }
        match self {
            Self::Offsets32(offsets) => largest(offsets),
            Self::Offsets64(offsets) => largest(offsets),
            Self::Views(views) => views.iter().map(|v| *v as u32).max().unwrap_or(0) as usize,
        }
    }

    /// Adds each value's length to its row's entry of `rows`.
    fn add_to(&self, rows: &mut [usize]) {
        fn add<O: OffsetSizeTrait>(offsets: &[O], rows: &mut [usize]) {
            for (bytes, pair) in rows.iter_mut().zip(offsets.windows(2)) {
                *bytes =
                    bytes.saturating_add(pair[1].as_usize().saturating_sub(pair[0].as_usize()));
            }
        }
        match self {
            Self::Offsets32(offsets) => add(offsets, rows),
            Self::Offsets64(offsets) => add(offsets, rows),
            Self::Views(views) => {
                for (bytes, view) in rows.iter_mut().zip(views.iter()) {
                    *bytes = bytes.saturating_add(*view as u32 as usize);
                }
            }
        }
    }

    /// The lengths of rows `start..end` together.
    fn sum(&self, start: usize, end: usize) -> usize {
        match self {
            Self::Offsets32(offsets) => span(rows_range(offsets, start, end)),
            Self::Offsets64(offsets) => span(rows_range(offsets, start, end)),
            Self::Views(views) => views
                .get(start..end)
                .map_or(0, |v| v.iter().map(|v| *v as u32 as usize).sum()),
        }
    }
}

/// The bytes a dictionary array's value may have: its largest dictionary entry (computed once
/// for the whole column); None for other arrays.
fn dictionary_entry_bytes(array: &dyn Array) -> Option<usize> {
    matches!(array.data_type(), DataType::Dictionary(..))
        .then(|| largest_value_bytes(array.as_any_dictionary().values().as_ref()))
}

/// The data bytes of rows `start..end` of `array`.
fn range_bytes(array: &dyn Array, start: usize, end: usize) -> usize {
    if start >= end {
        return 0;
    }
    if let Some(lengths) = Lengths::of(array) {
        return lengths.sum(start, end);
    }
    let fixed = |width: usize| (end - start).saturating_mul(width);
    match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let (from, to) = rows_range(list.value_offsets(), start, end);
            range_bytes(list.values().as_ref(), from, to)
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let (from, to) = rows_range(list.value_offsets(), start, end);
            range_bytes(list.values().as_ref(), from, to)
        }
        DataType::FixedSizeList(_, size) => {
            let size = usize::try_from(*size).unwrap_or(0);
            let values = array.as_fixed_size_list().values();
            range_bytes(values.as_ref(), start * size, end * size)
        }
        DataType::Map(..) => {
            let map = array.as_map();
            let (from, to) = rows_range(map.value_offsets(), start, end);
            map.entries()
                .columns()
                .iter()
                .map(|c| range_bytes(c.as_ref(), from, to))
                .fold(0, usize::saturating_add)
        }
        DataType::Struct(_) => array
            .as_struct()
            .columns()
            .iter()
            .map(|c| range_bytes(c.as_ref(), start, end))
            .fold(0, usize::saturating_add),
        DataType::Dictionary(..) => fixed(dictionary_entry_bytes(array).unwrap_or(0)),
        data_type => match data_type.primitive_width() {
            Some(width) => fixed(width),
            // Views of lists, unions, run-end encoded values: their whole data, as an upper
            // bound (rare in query plans).
            None => array
                .to_data()
                .get_slice_memory_size()
                .unwrap_or(usize::MAX),
        },
    }
}

/// The element range rows `start..end` cover by their `offsets` (`sizes::offset_range` of
/// those rows' offsets).
fn rows_range<O: OffsetSizeTrait>(offsets: &[O], start: usize, end: usize) -> (usize, usize) {
    offsets.get(start..=end).map_or((0, 0), offset_range)
}

/// The length of an element range.
fn span((from, to): (usize, usize)) -> usize {
    to.saturating_sub(from)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        DictionaryArray, Int32Array, LargeStringArray, ListArray, StringArray, StringViewArray,
        StructArray,
    };
    use arrow::datatypes::{Field, Int32Type, Int64Type, Schema};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, c)| Field::new(*name, c.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, c)| c).collect(),
        )
        .expect("batch")
    }

    #[test]
    fn largest_values_are_exact_for_every_string_layout() {
        let values = ["a", "", "hello world", "xyz"];
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(values.to_vec())),
            Arc::new(LargeStringArray::from(values.to_vec())),
            Arc::new(StringViewArray::from(values.to_vec())),
        ];
        for array in arrays {
            assert_eq!(largest_value_bytes(array.as_ref()), 11, "{array:?}");
            // A slice sees only its own rows.
            assert_eq!(largest_value_bytes(array.slice(2, 2).as_ref()), 11);
            assert_eq!(largest_value_bytes(array.slice(3, 1).as_ref()), 3);
        }
        assert_eq!(largest_value_bytes(&Int32Array::from(vec![1, 2])), 0);
    }

    #[test]
    fn lists_structs_and_dictionaries_count_their_leaves() {
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), Some(2), Some(3)]),
            None,
            Some(vec![Some(4)]),
        ]);
        assert_eq!(largest_value_bytes(&list), 24);
        let names: ArrayRef = Arc::new(StringArray::from(vec!["ab", "abcdef"]));
        let ids: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let structs = StructArray::from(vec![
            (Arc::new(Field::new("n", DataType::Utf8, true)), names),
            (Arc::new(Field::new("i", DataType::Int32, true)), ids),
        ]);
        assert_eq!(largest_value_bytes(&structs), 10);
        let dictionary: DictionaryArray<Int32Type> = vec!["short", "a much longer value", "short"]
            .into_iter()
            .collect();
        assert_eq!(largest_value_bytes(&dictionary), 19);
        // Every row may hold the largest entry (counted once per column, not once per row).
        let mut rows = vec![0; 3];
        add_row_bytes(&batch(vec![("d", Arc::new(dictionary))]), &[], &mut rows);
        assert_eq!(rows, vec![19, 19, 19]);
    }

    #[test]
    fn rows_add_up_their_columns_and_lists_count_elements() {
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["abc", "", "abcdefgh"]));
        let views: ArrayRef = Arc::new(StringViewArray::from(vec!["a", "bb", "ccc"]));
        let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![]),
            Some(vec![Some(3), Some(4), Some(5)]),
        ]));
        let batch = batch(vec![("s", strings), ("v", views), ("l", Arc::clone(&list))]);
        assert_eq!(largest_row_bytes(&batch), 8 + 3 + 24);
        let mut rows = vec![0; 3];
        add_row_bytes(&batch, &[2], &mut rows);
        assert_eq!(rows, vec![4, 2, 11]);
        assert_eq!(list_lengths(&list, 1), vec![2, 0, 3]);
        assert_eq!(total_elements(&list, 1), 5);
        assert_eq!(largest_row_bytes_except(&batch, &[2]), 8 + 3);
        let nested: ArrayRef = Arc::new(
            ListArray::try_new(
                Arc::new(Field::new("item", list.data_type().clone(), true)),
                arrow::buffer::OffsetBuffer::new(vec![0, 2, 3].into()),
                list,
                None,
            )
            .expect("list of lists"),
        );
        assert_eq!(list_lengths(&nested, 1), vec![2, 1]);
        assert_eq!(list_lengths(&nested, 2), vec![2, 3]);
        assert_eq!(total_elements(&nested, 2), 5);
        assert_eq!(total_elements(&nested.slice(1, 1), 2), 3);
    }
}
