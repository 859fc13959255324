//! Equality-delete sets: the deleted keys of one group of equality delete files, probed per
//! batch.
//!
//! Only the equality columns are read from delete files (their other columns, often wide
//! payloads, never are). A single integer key is kept as a bitset over the keys' range when
//! the keys are dense enough for it to be no larger than a hash set (ids, sequence numbers:
//! one bit a value in range, probed without hashing), else as a `HashSet<i64>` (8 bytes a key
//! plus the table's control bytes) with the same keys sorted beside it, so that a batch whose
//! values' range holds none of the keys, or a few, is answered without hashing (an upsert's
//! few keys against files written in key order); any other key as arrow row-format bytes in one arena with
//! a hash table of offsets. Nulls compare equal to nulls, as the spec says. Key columns are
//! first cast to a canonical type (int→long, float→double, any decimal to 38 digits, strings
//! and binaries to one width) so that promoted columns still match.

use std::hash::BuildHasher;

use arrow::array::BooleanBufferBuilder;
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{RowConverter, SortField};
use futures::TryStreamExt;
use hashbrown::{DefaultHashBuilder, HashSet, HashTable};
use parquet::arrow::ProjectionMask;
use parquet::arrow::async_reader::{
    AsyncFileReader, ParquetObjectReader, ParquetRecordBatchStreamBuilder,
};

use crate::error::{Error, Result};
use crate::io::TableIo;
use crate::spec::field_id_of;

/// The type key columns are compared in.
pub(crate) fn canonical_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::Float32 | DataType::Float64 => DataType::Float64,
        DataType::Decimal128(_, s) => DataType::Decimal128(38, *s),
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// Casts key columns to their canonical types.
pub(crate) fn canonical_columns(columns: &[ArrayRef]) -> Result<Vec<ArrayRef>> {
    columns
        .iter()
        .map(|c| {
            let target = canonical_type(c.data_type());
            if &target == c.data_type() {
                Ok(std::sync::Arc::clone(c))
            } else {
                Ok(arrow::compute::cast(c, &target)?)
            }
        })
        .collect()
}

/// Reads the equality columns (`field_ids`, in that order) of one equality delete file, and
/// the bytes of column chunks fetched. Only those column chunks are fetched: other columns
/// (often wide payloads) never are.
pub(crate) async fn read_equality_keys(
    io: &TableIo,
    table: &str,
    path: &str,
    file_size: u64,
    field_ids: &[i32],
) -> Result<(Vec<ArrayRef>, u64)> {
    let corrupt =
        |e: &dyn std::fmt::Display| Error::corrupt(table, "equality delete file", path, e);
    let (store, _, object) = io.resolve(path)?;
    let reader = ParquetObjectReader::new(store, object).with_file_size(file_size);
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| corrupt(&e))?;
    let schema = std::sync::Arc::clone(builder.schema());
    let roots = field_roots(&schema, field_ids)
        .map_err(|id| corrupt(&format!("has no column with field id {id}")))?;
    let fetched = super::position::projected_bytes(builder.metadata(), &roots);
    let chunks = read_roots(builder, &roots).await.map_err(|e| corrupt(&e))?;
    let mut columns = Vec::with_capacity(field_ids.len());
    for (root, parts) in roots.iter().zip(&chunks) {
        let parts: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
        let column = if parts.is_empty() {
            arrow::array::new_empty_array(schema.field(*root).data_type())
        } else {
            arrow::compute::concat(&parts)?
        };
        columns.push(column);
    }
    Ok((canonical_columns(&columns)?, fetched))
}

/// The root columns of `schema` with field ids `field_ids`, in that order; `Err` names the
/// first field id no column has.
pub(crate) fn field_roots(
    schema: &arrow::datatypes::Schema,
    field_ids: &[i32],
) -> std::result::Result<Vec<usize>, i32> {
    field_ids
        .iter()
        .map(|id| {
            schema
                .fields()
                .iter()
                .position(|f| field_id_of(f) == Some(*id))
                .ok_or(*id)
        })
        .collect()
}

/// Every row of `builder`'s file, projected to the root columns `roots`: per root (in the
/// order given), its arrays, one per batch.
pub(crate) async fn read_roots<T: AsyncFileReader + Unpin + Send + 'static>(
    builder: ParquetRecordBatchStreamBuilder<T>,
    roots: &[usize],
) -> parquet::errors::Result<Vec<Vec<ArrayRef>>> {
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    // The projected batches order columns as the file does.
    let mut sorted = roots.to_vec();
    sorted.sort_unstable();
    let slots: Vec<usize> = roots
        .iter()
        .map(|root| sorted.iter().position(|r| r == root).unwrap_or_default())
        .collect();
    let mut batches = builder.with_projection(mask).build()?;
    let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); roots.len()];
    while let Some(batch) = batches.try_next().await? {
        for (column, slot) in columns.iter_mut().zip(&slots) {
            column.push(std::sync::Arc::clone(batch.column(*slot)));
        }
    }
    Ok(columns)
}

/// The deleted keys of a group of equality delete files.
#[derive(Debug)]
pub(crate) enum EqualityDeleteSet {
    /// One integer key column.
    Long { keys: LongKeys, null_deleted: bool },
    /// Any other key: row-format bytes.
    Rows {
        converter: RowConverter,
        arena: Vec<u8>,
        offsets: Vec<usize>,
        table: HashTable<u32>,
        hasher: DefaultHashBuilder,
    },
}

/// One key of a set, as [`EqualityDeleteSet::for_each_key`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetKey<'a> {
    /// A single integer key.
    Long(i64),
    /// A null single integer key (deleted: nulls equal nulls).
    Null,
    /// Any other key, in arrow's row format over the canonical key types.
    Row(&'a [u8]),
}

/// A set of 64-bit integer keys.
#[derive(Debug)]
pub(crate) enum LongKeys {
    /// Keys spread thinly: a hash set, and the same keys sorted (a batch is first narrowed to
    /// the keys within its values' range: often none or a few, see [`LongKeys::probe`]).
    Hashed {
        keys: HashSet<i64>,
        sorted: Vec<i64>,
    },
    /// Keys dense in `min ..= min + span - 1`: bit `k - min` is set for each key `k`.
    Dense { min: i64, span: u64, bits: Vec<u64> },
}

/// A bitset is chosen when it needs at most this many bits per key (16 bytes a key, about
/// what a hash set of `i64` holds per key at its usual load).
const DENSE_BITS_PER_KEY: u128 = 128;

/// A batch whose values' range holds at most this many keys of a hash set is probed by
/// comparing each value with those keys (a vectorised pass per key) instead of hashing it.
const FEW_KEYS: usize = 8;

/// A sorted batch is searched key by key when it has at least this many rows per key in its
/// range (two binary searches a key against a probe of every row).
const RUN_ROWS_PER_KEY: usize = 16;

impl LongKeys {
    /// The set of the non-null values of `columns`.
    fn build(columns: &[&arrow::array::Int64Array]) -> Self {
        let count: usize = columns.iter().map(|c| c.len() - c.null_count()).sum();
        let min = columns.iter().filter_map(|c| arrow::compute::min(*c)).min();
        let max = columns.iter().filter_map(|c| arrow::compute::max(*c)).max();
        if let (Some(min), Some(max)) = (min, max) {
            let span = (max as i128 - min as i128 + 1) as u128;
            if span <= DENSE_BITS_PER_KEY * count as u128 {
                let span = span as u64;
                let mut bits = vec![0u64; span.div_ceil(64) as usize];
                for column in columns {
                    for k in column.iter().flatten() {
                        let at = k.wrapping_sub(min) as u64;
                        bits[(at >> 6) as usize] |= 1 << (at & 63);
                    }
                }
                return LongKeys::Dense { min, span, bits };
            }
        }
        let mut keys = HashSet::with_capacity(count);
        for column in columns {
            keys.extend(column.iter().flatten());
        }
        keys.shrink_to_fit();
        let mut sorted: Vec<i64> = keys.iter().copied().collect();
        sorted.sort_unstable();
        LongKeys::Hashed { keys, sorted }
    }

    /// Distinct keys.
    fn len(&self) -> usize {
        match self {
            LongKeys::Hashed { keys, .. } => keys.len(),
            LongKeys::Dense { bits, .. } => bits.iter().map(|w| w.count_ones() as usize).sum(),
        }
    }

    /// Bytes held.
    fn memory_size(&self) -> usize {
        match self {
            LongKeys::Hashed { keys, sorted } => {
                keys.allocation_size() + sorted.capacity() * std::mem::size_of::<i64>()
            }
            LongKeys::Dense { bits, .. } => bits.capacity() * std::mem::size_of::<u64>(),
        }
    }

    /// Calls `each` with every key.
    fn for_each(&self, mut each: impl FnMut(i64)) {
        match self {
            LongKeys::Hashed { sorted, .. } => sorted.iter().for_each(|k| each(*k)),
            LongKeys::Dense { min, bits, .. } => {
                for (w, word) in bits.iter().enumerate() {
                    let mut word = *word;
                    while word != 0 {
                        let bit = word.trailing_zeros() as u64;
                        each(min.wrapping_add(((w as u64) << 6 | bit) as i64));
                        word &= word - 1;
                    }
                }
            }
        }
    }

    /// Which of `values` are keys (`nulls`: rows that are null, answered `null_deleted`).
    ///
    /// The batch's values' order and range are taken first: data files are often written in
    /// key order (ids loaded in batches, tables sorted by their key), so a batch spans a
    /// narrow range that holds no key of an upsert's set, or a few. A sorted batch's range is
    /// its ends; only an unsorted one takes a pass for it. Then:
    /// - no key in the range (a bitset's words over it all zero): nothing is probed;
    /// - sorted values with at most one key per [`RUN_ROWS_PER_KEY`] rows in their range: each
    ///   key's rows are found by binary search;
    /// - at most [`FEW_KEYS`] keys of a hash set in the range: one comparison pass per key;
    /// - else every row is looked up (the bitset's words are looked through first only when
    ///   there are fewer of them than an eighth of the rows).
    ///
    /// Null slots' values count in the range and the sort order like any value (they can only
    /// make the batch take a later case) and are answered from `nulls` at the end.
    fn probe(
        &self,
        values: &[i64],
        nulls: Option<&arrow::buffer::NullBuffer>,
        null_deleted: bool,
    ) -> BooleanBuffer {
        let len = values.len();
        let ascends = ascending(values);
        let (lo, hi) = match (ascends, values.first(), values.last()) {
            (true, Some(first), Some(last)) => (*first, *last),
            _ => values
                .iter()
                .fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v))),
        };
        // Sorted values (a file written in key order) with few keys in their range: each
        // key's rows are found by binary search, not by probing every row.
        let runs = |keys: usize| ascends && keys <= len / RUN_ROWS_PER_KEY;
        let found = match self {
            LongKeys::Hashed { keys, sorted } => {
                let within = &sorted[sorted.partition_point(|k| *k < lo)..];
                let within = &within[..within.partition_point(|k| *k <= hi)];
                match within {
                    [] => BooleanBuffer::new_unset(len),
                    some if runs(some.len()) => equal_runs(values, some.iter().copied()),
                    few if few.len() <= FEW_KEYS => equal_to_any(values, few),
                    _ => BooleanBuffer::collect_bool(len, |i| keys.contains(&values[i])),
                }
            }
            LongKeys::Dense { min, span, bits } => {
                let probe = || {
                    BooleanBuffer::collect_bool(len, |i| {
                        let at = values[i].wrapping_sub(*min) as u64;
                        at < *span && (bits[(at >> 6) as usize] >> (at & 63)) & 1 == 1
                    })
                };
                match dense_words_within(*min, *span, lo, hi) {
                    None => BooleanBuffer::new_unset(len),
                    // More words than a probe is worth looking through first.
                    Some(range) if range.len() >= len / 8 => probe(),
                    Some(range) => {
                        let words = &bits[range.clone()];
                        let count: usize = words.iter().map(|w| w.count_ones() as usize).sum();
                        if count == 0 {
                            BooleanBuffer::new_unset(len)
                        } else if runs(count) {
                            // Bit `at` of the range is key `min + 64 × range.start + at`.
                            let base = *min as i128 + ((range.start as i128) << 6);
                            let keys = set_bits(words).map(|at| (base + at as i128) as i64);
                            equal_runs(values, keys)
                        } else {
                            probe()
                        }
                    }
                }
            }
        };
        match nulls {
            None => found,
            Some(nulls) if null_deleted => &found | &!nulls.inner(),
            Some(nulls) => &found & nulls.inner(),
        }
    }
}

/// Whether `values` never descend. Compared a block of pairs at a time without stopping inside
/// a block, so that the comparisons vectorise (the standard `is_sorted` stops at each pair); an
/// unsorted batch is told from its first descending block.
fn ascending(values: &[i64]) -> bool {
    const BLOCK: usize = 256;
    let mut start = 0;
    while start + 1 < values.len() {
        let end = (start + BLOCK).min(values.len() - 1);
        let descends = values[start..end]
            .iter()
            .zip(&values[start + 1..=end])
            .fold(false, |descends, (a, b)| descends | (a > b));
        if descends {
            return false;
        }
        start = end;
    }
    true
}

/// Which of `values` equal one of `keys` (a few): one vectorised comparison pass per key.
fn equal_to_any(values: &[i64], keys: &[i64]) -> BooleanBuffer {
    let len = values.len();
    let mut found = BooleanBuffer::new_unset(len);
    for key in keys {
        let equal = BooleanBuffer::collect_bool(len, |i| values[i] == *key);
        found = &found | &equal;
    }
    found
}

/// Which of `values` (sorted) equal one of `keys` (ascending): each key's run of rows found
/// by binary search.
fn equal_runs(values: &[i64], keys: impl Iterator<Item = i64>) -> BooleanBuffer {
    let len = values.len();
    let mut found = BooleanBufferBuilder::new(len);
    let mut at = 0;
    for key in keys {
        let start = at + values[at..].partition_point(|v| *v < key);
        let end = start + values[start..].partition_point(|v| *v <= key);
        found.append_n(start - at, false);
        found.append_n(end - start, true);
        at = end;
    }
    found.append_n(len - at, false);
    found.finish()
}

/// The words of a bitset of keys from `min` (`span` bits) that cover `lo ..= hi`; `None` when
/// the ranges do not meet.
fn dense_words_within(min: i64, span: u64, lo: i64, hi: i64) -> Option<std::ops::Range<usize>> {
    let last = min as i128 + span as i128 - 1;
    let from = (lo as i128).max(min as i128);
    let to = (hi as i128).min(last);
    if from > to {
        return None;
    }
    let first_word = ((from - min as i128) >> 6) as usize;
    let last_word = ((to - min as i128) >> 6) as usize;
    Some(first_word..last_word + 1)
}

/// The offsets of the set bits of `words`, ascending, from the first word's bit 0.
fn set_bits(words: &[u64]) -> impl Iterator<Item = u64> + '_ {
    words.iter().enumerate().flat_map(|(w, word)| {
        let mut word = *word;
        std::iter::from_fn(move || {
            (word != 0).then(|| {
                let bit = word.trailing_zeros() as u64;
                word &= word - 1;
                (w as u64) << 6 | bit
            })
        })
    })
}

impl EqualityDeleteSet {
    /// Builds a set from key columns (canonical types, one `Vec` per delete file).
    pub(crate) fn build(files: &[Vec<ArrayRef>]) -> Result<Self> {
        let Some(first) = files.first() else {
            return Ok(EqualityDeleteSet::Long {
                keys: LongKeys::Hashed {
                    keys: HashSet::new(),
                    sorted: Vec::new(),
                },
                null_deleted: false,
            });
        };
        if first.len() == 1 && first[0].data_type() == &DataType::Int64 {
            let columns: Vec<&arrow::array::Int64Array> = files
                .iter()
                .map(|f| f[0].as_primitive::<Int64Type>())
                .collect();
            let null_deleted = columns.iter().any(|c| c.null_count() > 0);
            let keys = LongKeys::build(&columns);
            return Ok(EqualityDeleteSet::Long { keys, null_deleted });
        }
        let fields = first
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields)?;
        let hasher = DefaultHashBuilder::default();
        let mut arena = Vec::new();
        let mut offsets = vec![0usize];
        let mut table: HashTable<u32> = HashTable::new();
        for file in files {
            let rows = converter.convert_columns(file)?;
            for row in rows.iter() {
                let bytes = row.as_ref();
                let hash = hasher.hash_one(bytes);
                let exists = table
                    .find(hash, |&i| {
                        let i = i as usize;
                        &arena[offsets[i]..offsets[i + 1]] == bytes
                    })
                    .is_some();
                if !exists {
                    let index = u32::try_from(offsets.len() - 1).map_err(|_| {
                        Error::InvalidArgument("more than 4 billion equality-delete keys".into())
                    })?;
                    arena.extend_from_slice(bytes);
                    offsets.push(arena.len());
                    table.insert_unique(hash, index, |&i| {
                        let i = i as usize;
                        hasher.hash_one(&arena[offsets[i]..offsets[i + 1]])
                    });
                }
            }
        }
        arena.shrink_to_fit();
        offsets.shrink_to_fit();
        table.shrink_to_fit(|&i| {
            let i = i as usize;
            hasher.hash_one(&arena[offsets[i]..offsets[i + 1]])
        });
        Ok(EqualityDeleteSet::Rows {
            converter,
            arena,
            offsets,
            table,
            hasher,
        })
    }

    /// Number of distinct deleted keys.
    pub(crate) fn len(&self) -> usize {
        match self {
            EqualityDeleteSet::Long { keys, null_deleted } => {
                keys.len() + usize::from(*null_deleted)
            }
            EqualityDeleteSet::Rows { table, .. } => table.len(),
        }
    }

    /// Bytes held (for the memory pool and the benchmark).
    pub(crate) fn memory_size(&self) -> usize {
        match self {
            EqualityDeleteSet::Long { keys, .. } => keys.memory_size(),
            EqualityDeleteSet::Rows {
                arena,
                offsets,
                table,
                converter,
                ..
            } => {
                arena.capacity()
                    + offsets.capacity() * std::mem::size_of::<usize>()
                    + table.allocation_size()
                    + converter.size()
            }
        }
    }

    /// Its keys, one by one (`equality_union` joins sets over the same key columns).
    pub(crate) fn for_each_key(&self, mut each: impl FnMut(SetKey<'_>)) {
        match self {
            EqualityDeleteSet::Long { keys, null_deleted } => {
                keys.for_each(|k| each(SetKey::Long(k)));
                if *null_deleted {
                    each(SetKey::Null);
                }
            }
            EqualityDeleteSet::Rows { arena, offsets, .. } => {
                for bounds in offsets.windows(2) {
                    each(SetKey::Row(&arena[bounds[0]..bounds[1]]));
                }
            }
        }
    }

    /// Which rows of `keys` (canonical key columns of a data batch) this set deletes.
    pub(crate) fn deleted(&self, keys: &[ArrayRef]) -> Result<BooleanBuffer> {
        let len = keys.first().map_or(0, |k| k.len());
        Ok(match self {
            EqualityDeleteSet::Long {
                keys: set,
                null_deleted,
            } => {
                if keys[0].data_type() == &DataType::Null {
                    // The key column is not in the scan's schema: every value is null.
                    return Ok(BooleanBuffer::collect_bool(len, |_| *null_deleted));
                }
                let column = keys[0].as_primitive_opt::<Int64Type>().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "equality key column has type {}, expected a long",
                        keys[0].data_type()
                    ))
                })?;
                let nulls = column.nulls().filter(|n| n.null_count() > 0);
                set.probe(column.values(), nulls, *null_deleted)
            }
            EqualityDeleteSet::Rows {
                converter,
                arena,
                offsets,
                table,
                hasher,
            } => {
                let rows = converter.convert_columns(keys)?;
                BooleanBuffer::collect_bool(len, |i| {
                    let bytes = rows.row(i);
                    let bytes = bytes.as_ref();
                    let hash = hasher.hash_one(bytes);
                    table
                        .find(hash, |&k| {
                            let k = k as usize;
                            &arena[offsets[k]..offsets[k + 1]] == bytes
                        })
                        .is_some()
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, StringArray};

    use super::*;

    fn probe(set: &EqualityDeleteSet, keys: Vec<ArrayRef>) -> Vec<bool> {
        let keys = canonical_columns(&keys).unwrap();
        set.deleted(&keys)
            .unwrap()
            .iter()
            .map(|deleted| !deleted)
            .collect()
    }

    #[test]
    fn long_keys_with_null_equal_to_null() {
        let deletes: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![Some(1), None, Some(5)]))];
        let set = EqualityDeleteSet::build(&[canonical_columns(&deletes).unwrap()]).unwrap();
        assert_eq!(set.len(), 3);
        // int data column (promoted later to long) still matches
        let data: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![
            Some(1),
            Some(2),
            None,
            Some(5),
        ]))];
        assert_eq!(probe(&set, data), vec![false, true, false, false]);
    }

    #[test]
    fn two_column_string_keys() {
        let deletes: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("a"), Some("b"), None])),
            Arc::new(StringArray::from(vec![Some("x"), None, Some("z")])),
        ];
        let set = EqualityDeleteSet::build(&[deletes]).unwrap();
        let data: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![
                Some("a"),
                Some("a"),
                Some("b"),
                None,
                None,
            ])),
            Arc::new(StringArray::from(vec![
                Some("x"),
                Some("y"),
                None,
                Some("z"),
                None,
            ])),
        ];
        assert_eq!(probe(&set, data), vec![false, true, false, false, true]);
    }

    #[test]
    fn long_keys_pick_a_bitset_when_dense_and_answer_like_a_hash_set() {
        let probe_values: Vec<i64> = vec![
            i64::MIN,
            -5,
            -1,
            0,
            1,
            2,
            3,
            99,
            100,
            101,
            1000,
            1001,
            5000,
            i64::MAX,
        ];
        let cases: Vec<(Vec<Option<i64>>, bool)> = vec![
            // Dense: 0..1000 step 2, and a null.
            ((0..1000).step_by(2).map(Some).chain([None]).collect(), true),
            // Negative and dense.
            ((-5..=3).map(Some).collect(), true),
            // Sparse: the extremes of the domain.
            (vec![Some(i64::MIN), Some(0), Some(i64::MAX)], false),
            (vec![Some(1), Some(1_000_000_000)], false),
        ];
        for (keys, dense) in cases {
            let column = arrow::array::Int64Array::from(keys.clone());
            let set = EqualityDeleteSet::build(&[vec![Arc::new(column) as ArrayRef]]).unwrap();
            let EqualityDeleteSet::Long {
                keys: long,
                null_deleted,
            } = &set
            else {
                panic!("expected a long set");
            };
            assert_eq!(matches!(long, LongKeys::Dense { .. }), dense, "{keys:?}");
            assert_eq!(*null_deleted, keys.contains(&None));
            let distinct: std::collections::HashSet<i64> = keys.iter().flatten().copied().collect();
            assert_eq!(long.len(), distinct.len());
            let mut probes: Vec<Option<i64>> = probe_values.iter().copied().map(Some).collect();
            probes.push(None);
            let got = set
                .deleted(&[Arc::new(arrow::array::Int64Array::from(probes.clone())) as ArrayRef])
                .unwrap();
            for (i, p) in probes.iter().enumerate() {
                let want = match p {
                    Some(v) => distinct.contains(v),
                    None => keys.contains(&None),
                };
                assert_eq!(got.value(i), want, "probe {p:?} in {keys:?}");
            }
        }
    }

    /// The block-wise order check sees a descent wherever it is, the pair two blocks share
    /// included, and agrees with the standard library's.
    #[test]
    fn ascending_agrees_with_is_sorted_across_block_edges() {
        for len in [0, 1, 2, 3, 255, 256, 257, 511, 512, 513, 1_000] {
            let sorted: Vec<i64> = (0..len as i64).map(|i| i / 3 - 40).collect();
            assert!(ascending(&sorted), "sorted, {len} values");
            // One descent at every pair in turn: the blocks' first, last and shared pairs.
            for at in 1..len {
                let mut values = sorted.clone();
                values[at] = values[at - 1] - 1;
                assert_eq!(
                    ascending(&values),
                    values.is_sorted(),
                    "descent at {at} of {len}"
                );
                assert!(!ascending(&values), "descent at {at} of {len}");
            }
        }
        assert!(ascending(&[i64::MIN, i64::MIN, 0, i64::MAX, i64::MAX]));
        assert!(!ascending(&[i64::MAX, i64::MIN]));
    }

    /// Sets of every shape probed with batches narrow and wide, sorted and not, against a
    /// model: the narrowing to a batch's range (none, a few or many keys of a hash set; a
    /// bitset's empty words) must answer exactly as a plain lookup.
    #[test]
    fn long_keys_narrowed_to_a_batch_answer_like_a_plain_lookup() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let sets: Vec<Vec<i64>> = vec![
            vec![42],
            (0..5).map(|i| i * 1_000_003).collect(),
            (0..20).map(|i| i * 250_000 + 17).collect(),
            (0..2_000).map(|i| i * 2_500).collect(),
            (10_000..10_500).collect(),
            (0..300).map(|i| i * 64 + 5).collect(),
            vec![i64::MIN, -1, 0, i64::MAX],
        ];
        for keys in sets {
            let column = arrow::array::Int64Array::from(keys.clone());
            let set = EqualityDeleteSet::build(&[vec![Arc::new(column) as ArrayRef]]).unwrap();
            let model: std::collections::HashSet<i64> = keys.iter().copied().collect();
            let (lo, hi) = (keys[0], keys[keys.len() - 1]);
            for round in 0..60 {
                let len = [0, 1, 7, 64, 1000, 8192][round % 6];
                let start = lo.saturating_add((next() % 6_000_000) as i64 - 500_000);
                let values: Vec<i64> = match round % 5 {
                    // Sorted with repeats (four rows a key, as an order's lines), around a key.
                    4 => {
                        let key = keys[(next() % keys.len() as u64) as usize];
                        (0..len as i64)
                            .map(|i| key.saturating_add(i / 4 - len as i64 / 8))
                            .collect()
                    }
                    // Sorted and narrow, as a file written in key order.
                    0 => (0..len as i64).map(|i| start.saturating_add(i)).collect(),
                    // Narrow around a key.
                    1 => {
                        let key = keys[(next() % keys.len() as u64) as usize];
                        (0..len as i64)
                            .map(|i| key.saturating_add(i - len as i64 / 2))
                            .collect()
                    }
                    // Spread over the set's range.
                    2 => (0..len)
                        .map(|_| {
                            let span = (hi as i128 - lo as i128 + 1) as u128;
                            (lo as i128 + (next() as u128 % span) as i128) as i64
                        })
                        .collect(),
                    // The keys themselves, with others in between.
                    _ => (0..len)
                        .map(|i| {
                            let key = keys[i % keys.len()];
                            if i % 2 == 0 { key } else { key.wrapping_add(1) }
                        })
                        .collect(),
                };
                let got = set
                    .deleted(
                        &[Arc::new(arrow::array::Int64Array::from(values.clone())) as ArrayRef],
                    )
                    .unwrap();
                assert_eq!(got.len(), values.len());
                for (i, v) in values.iter().enumerate() {
                    assert_eq!(
                        got.value(i),
                        model.contains(v),
                        "value {v} of {} keys",
                        keys.len()
                    );
                }
            }
        }
    }
}
