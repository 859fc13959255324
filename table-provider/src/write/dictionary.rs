//! Per-file dictionary decisions: whether dictionary encoding pays for a column, judged on the
//! first rows a data file gets, as parquet-mr judges it after a column's first page.
//!
//! parquet-rs dictionary-encodes a column chunk until its dictionary reaches the dictionary page
//! size limit, whatever the values. In a file whose dictionaries never reach that limit (the many
//! small files of a partitioned table) every value of a (nearly) unique column goes through the
//! dictionary for nothing: CPU for the hash lookups, and a larger file. parquet-mr (Iceberg
//! Java's writer) falls back to plain encoding after a column's first page when the dictionary
//! does not pay, `encoded size + dictionary size >= raw size`
//! (`DictionaryValuesWriter.isCompressionSatisfying`). Petrel applies the same test to the first
//! rows of each file (at most a page's worth, [`SAMPLE_ROWS`]) and writes the columns that fail it
//! without a dictionary.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use hashbrown::HashSet;
use parquet::schema::types::ColumnPath;

/// At most this many rows are judged: parquet-mr's first page holds at most
/// `write.parquet.page-row-limit` rows (20,000 by default).
pub(crate) const SAMPLE_ROWS: usize = 20_000;

/// The Parquet column paths of `batch`'s primitive columns (top level and inside structs) for
/// which dictionary encoding does not pay on the batch's first rows.
pub(crate) fn plain_columns(batch: &RecordBatch) -> Vec<ColumnPath> {
    let rows = batch.num_rows().min(SAMPLE_ROWS);
    let mut plain = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let mut path = vec![field.name().clone()];
        collect(&mut path, column.slice(0, rows).as_ref(), &mut plain);
    }
    plain
}

fn collect(path: &mut Vec<String>, array: &dyn Array, plain: &mut Vec<ColumnPath>) {
    if let DataType::Struct(fields) = array.data_type() {
        for (field, child) in fields.iter().zip(array.as_struct().columns()) {
            path.push(field.name().clone());
            collect(path, child.as_ref(), plain);
            path.pop();
        }
        return;
    }
    if dictionary_pays(array) == Some(false) {
        plain.push(ColumnPath::new(path.clone()));
    }
}

/// What the test needs to know about a column's values.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    /// Non-null values.
    values: usize,
    /// Their size plain-encoded.
    raw_bytes: usize,
    /// Distinct values.
    distinct: usize,
    /// The distinct values' size plain-encoded: the dictionary page.
    dictionary_bytes: usize,
}

impl Summary {
    /// parquet-mr's test: the dictionary's indexes (bit-packed at the width the number of
    /// distinct values needs) plus the dictionary page are smaller than the plain values.
    fn dictionary_pays(&self) -> Option<bool> {
        if self.values == 0 {
            return None;
        }
        let bit_width = usize::BITS - self.distinct.saturating_sub(1).leading_zeros();
        // One byte for the RLE/bit-packing hybrid's bit width.
        let encoded = (self.values * bit_width as usize).div_ceil(8) + 1;
        Some(encoded + self.dictionary_bytes < self.raw_bytes)
    }
}

/// Whether dictionary encoding pays for `array`'s non-null values; `None` for what is not judged
/// (booleans, which parquet never dictionary-encodes; lists and maps; a column of nulls).
pub(crate) fn dictionary_pays(array: &dyn Array) -> Option<bool> {
    summarize(array)?.dictionary_pays()
}

fn summarize(array: &dyn Array) -> Option<Summary> {
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    Some(match array.data_type() {
        DataType::Utf8 => byte_values(
            array
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(str::as_bytes)),
            4,
        ),
        DataType::LargeUtf8 => byte_values(
            array
                .as_string::<i64>()
                .iter()
                .map(|v| v.map(str::as_bytes)),
            4,
        ),
        DataType::Utf8View => byte_values(
            array.as_string_view().iter().map(|v| v.map(str::as_bytes)),
            4,
        ),
        DataType::Binary => byte_values(array.as_binary::<i32>().iter(), 4),
        DataType::LargeBinary => byte_values(array.as_binary::<i64>().iter(), 4),
        DataType::BinaryView => byte_values(array.as_binary_view().iter(), 4),
        DataType::FixedSizeBinary(_) => byte_values(array.as_fixed_size_binary().iter(), 0),
        DataType::Boolean => return None,
        data_type if data_type.is_primitive() => {
            let width = data_type.primitive_width()?;
            let data = array.to_data();
            let buffer = data.buffers().first()?;
            let start = data.offset() * width;
            let values = buffer.as_slice().get(start..start + data.len() * width)?;
            // Parquet has no physical type narrower than 4 bytes (INT32).
            let size = width.max(4);
            match width {
                4 => fixed::<4>(values, nulls, size),
                8 => fixed::<8>(values, nulls, size),
                16 => fixed::<16>(values, nulls, size),
                _ => byte_values(
                    values
                        .chunks_exact(width)
                        .enumerate()
                        .map(|(i, v)| is_valid(nulls, i).then_some(v)),
                    size - width,
                ),
            }
        }
        _ => return None,
    })
}

fn is_valid(nulls: Option<&NullBuffer>, i: usize) -> bool {
    nulls.is_none_or(|n| n.is_valid(i))
}

/// Values of `W` bytes, each `size` bytes plain-encoded.
fn fixed<const W: usize>(values: &[u8], nulls: Option<&NullBuffer>, size: usize) -> Summary {
    let mut seen: HashSet<[u8; W]> = HashSet::with_capacity(values.len() / W);
    let mut count = 0;
    for (i, value) in values.chunks_exact(W).enumerate() {
        if is_valid(nulls, i) {
            count += 1;
            let mut key = [0u8; W];
            key.copy_from_slice(value);
            seen.insert(key);
        }
    }
    Summary {
        values: count,
        raw_bytes: count * size,
        distinct: seen.len(),
        dictionary_bytes: seen.len() * size,
    }
}

/// Variable-length values, each its length plus `prefix` bytes plain-encoded (Parquet's 4-byte
/// length of a BYTE_ARRAY).
fn byte_values<'a>(values: impl Iterator<Item = Option<&'a [u8]>>, prefix: usize) -> Summary {
    let mut seen: HashSet<&[u8]> = HashSet::new();
    let mut summary = Summary::default();
    for value in values.flatten() {
        summary.values += 1;
        summary.raw_bytes += value.len() + prefix;
        if seen.insert(value) {
            summary.dictionary_bytes += value.len() + prefix;
        }
    }
    summary.distinct = seen.len();
    summary
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray, StructArray,
    };
    use arrow::datatypes::{Field, Fields};

    use super::*;

    #[test]
    fn unique_values_are_written_plain() {
        let ids = Int64Array::from_iter_values(0..8192);
        assert_eq!(dictionary_pays(&ids), Some(false));
        let names = StringArray::from_iter_values((0..8192).map(|i| format!("name-{i:06}")));
        assert_eq!(dictionary_pays(&names), Some(false));
    }

    #[test]
    fn repeated_values_keep_their_dictionary() {
        let small = Int32Array::from_iter_values((0..8192).map(|i| i % 10));
        assert_eq!(dictionary_pays(&small), Some(true));
        let names =
            StringArray::from_iter_values((0..8192).map(|i| format!("name-{:06}", i % 3000)));
        assert_eq!(dictionary_pays(&names), Some(true));
    }

    #[test]
    fn the_test_is_parquet_mr_s() {
        // 8 values, 4 distinct doubles: indexes 8 × 2 bits = 2 bytes + 1, dictionary 32 bytes:
        // 35 < 64 plain bytes.
        let doubles = Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
        let summary = summarize(&doubles).unwrap();
        assert_eq!(
            summary,
            Summary {
                values: 8,
                raw_bytes: 64,
                distinct: 4,
                dictionary_bytes: 32
            }
        );
        assert_eq!(summary.dictionary_pays(), Some(true));
        // 3 values, all distinct: indexes 3 × 2 bits = 1 byte + 1, dictionary 24 bytes:
        // 26 ≥ 24 plain bytes.
        let doubles = Float64Array::from(vec![1.0, 2.0, 3.0]);
        assert_eq!(dictionary_pays(&doubles), Some(false));
    }

    #[test]
    fn nulls_are_not_values() {
        let mostly_null = Int64Array::from(vec![None, Some(7), None, Some(7), Some(7), None]);
        let summary = summarize(&mostly_null).unwrap();
        assert_eq!((summary.values, summary.distinct), (3, 1));
        assert_eq!(
            dictionary_pays(&Int64Array::from(vec![None::<i64>; 4])),
            None
        );
        assert_eq!(
            dictionary_pays(&BooleanArray::from(vec![true, false])),
            None
        );
    }

    #[test]
    fn narrow_integers_count_as_parquet_int32() {
        let bytes = arrow::array::Int8Array::from(vec![1i8, 2, 3]);
        let summary = summarize(&bytes).unwrap();
        assert_eq!((summary.raw_bytes, summary.dictionary_bytes), (12, 12));
    }

    #[test]
    fn columns_inside_structs_are_judged_by_their_path() {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..100));
        let kinds: ArrayRef = Arc::new(Int32Array::from_iter_values((0..100).map(|i| i % 2)));
        let point = StructArray::new(
            Fields::from(vec![
                Field::new("x", DataType::Int64, false),
                Field::new("k", DataType::Int32, false),
            ]),
            vec![Arc::clone(&ids), Arc::clone(&kinds)],
            None,
        );
        let batch = RecordBatch::try_from_iter(vec![
            ("id", ids),
            ("kind", kinds),
            ("point", Arc::new(point) as ArrayRef),
        ])
        .unwrap();
        let plain: Vec<String> = plain_columns(&batch)
            .iter()
            .map(ColumnPath::string)
            .collect();
        assert_eq!(plain, vec!["id", "point.x"]);
    }

    #[test]
    fn only_the_first_rows_are_judged() {
        // Unique in the first SAMPLE_ROWS rows, repeated after.
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..SAMPLE_ROWS as i64).chain(std::iter::repeat_n(0, 5 * SAMPLE_ROWS)),
        ));
        let batch = RecordBatch::try_from_iter(vec![("id", ids)]).unwrap();
        assert_eq!(plain_columns(&batch).len(), 1);
    }
}
