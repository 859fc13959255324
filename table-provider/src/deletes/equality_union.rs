//! Equality groups over the same key columns, probed as one.
//!
//! A stream of upserts (Flink CDC, Petrel's own upsert ingest) commits one equality group per
//! commit, and each applies to every older data file: a data file of a table upserted N times
//! has up to N groups, and probing each of its batches against each group's set costs N lookups
//! a row (with 300 commits, 41% of a first scan's CPU). So the groups of a scan over the same
//! key columns are joined into one index: each distinct key, with the groups (the union's
//! members) holding it. A row is looked up once, and is deleted when one of its key's groups
//! applies to the row's data file. Which groups apply differs from file to file (sequence
//! numbers, partitions, the metrics rule), so each data file probes with its own set of members
//! ([`Members`]: usually all of them).
//!
//! A union is joined from its groups' sets (no delete file is read again), in memory linear in
//! their keys, and kept in the delete cache under its members: the next scan of the same
//! snapshot takes it. Fewer than [`MIN_UNION_GROUPS`] groups are probed one by one, as before.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{RowConverter, SortField};
use hashbrown::HashMap;

use super::cache::EqualityKey;
use super::equality::{EqualityDeleteSet, SetKey};
use crate::error::{Error, Result};

/// Groups over the same key columns are joined when a scan has at least this many.
pub(crate) const MIN_UNION_GROUPS: usize = 4;

/// The groups of a scan over the same key columns, joined (module docs).
#[derive(Debug)]
pub(crate) struct EqualityUnion {
    /// The groups joined, sorted: a group's place here is its member number.
    members: Vec<EqualityKey>,
    index: UnionIndex,
    /// Per distinct key (by its number in the index), where its members start in `holders`;
    /// one more entry at the end.
    starts: Vec<u32>,
    /// The members holding each key, key after key.
    holders: Vec<u32>,
}

/// Each distinct key of a union and its number.
#[derive(Debug)]
enum UnionIndex {
    /// One integer key column; `null`: the number of the null key, when a member deletes it.
    Long {
        keys: HashMap<i64, u32>,
        null: Option<u32>,
    },
    /// Any other key, in arrow's row format over the canonical key types.
    Rows {
        converter: RowConverter,
        keys: HashMap<Box<[u8]>, u32>,
    },
}

/// Which members of a union apply to one data file.
#[derive(Debug, Clone)]
pub(crate) enum Members {
    /// Every one.
    All,
    /// Member `m` applies when bit `m` is set.
    Some(Vec<u64>),
}

impl Members {
    /// `members` of a union of `count` members: [`Members::All`] when they are all of them.
    pub(crate) fn of(count: usize, members: impl Iterator<Item = u32>) -> Self {
        let mut bits = vec![0u64; count.div_ceil(64)];
        for member in members {
            if let Some(word) = bits.get_mut((member >> 6) as usize) {
                *word |= 1 << (member & 63);
            }
        }
        let applying: usize = bits.iter().map(|w| w.count_ones() as usize).sum();
        if applying == count {
            Members::All
        } else {
            Members::Some(bits)
        }
    }

    fn has(&self, member: u32) -> bool {
        match self {
            Members::All => true,
            Members::Some(bits) => bits
                .get((member >> 6) as usize)
                .is_some_and(|w| (w >> (member & 63)) & 1 == 1),
        }
    }
}

impl EqualityUnion {
    /// Joins `groups` (each group's cache identity and set, sorted by identity), whose key
    /// columns have the canonical types `key_types`.
    pub(crate) fn build(
        groups: &[(EqualityKey, Arc<EqualityDeleteSet>)],
        key_types: &[DataType],
    ) -> Result<Self> {
        let members = groups.iter().map(|(key, _)| key.clone()).collect();
        let long = key_types == [DataType::Int64];
        // Each (key number, member) pair, member after member; grouped by key below.
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut distinct: u32 = 0;
        let mut longs: HashMap<i64, u32> = HashMap::new();
        let mut null: Option<u32> = None;
        let mut rows: HashMap<Box<[u8]>, u32> = HashMap::new();
        let mut mismatch = false;
        let too_many = || Error::InvalidArgument("more than 4 billion equality-delete keys".into());
        for (member, (_, set)) in groups.iter().enumerate() {
            let member = u32::try_from(member).map_err(|_| too_many())?;
            let mut overflow = false;
            set.for_each_key(|key| {
                let next = distinct;
                let number = match key {
                    SetKey::Long(k) if long => *longs.entry(k).or_insert(next),
                    SetKey::Null if long => *null.get_or_insert(next),
                    SetKey::Row(bytes) if !long => match rows.get(bytes) {
                        Some(number) => *number,
                        None => {
                            rows.insert(bytes.into(), next);
                            next
                        }
                    },
                    _ => {
                        mismatch = true;
                        return;
                    }
                };
                if number == next {
                    match distinct.checked_add(1) {
                        Some(more) => distinct = more,
                        None => overflow = true,
                    }
                }
                pairs.push((number, member));
            });
            if overflow {
                return Err(too_many());
            }
        }
        if mismatch {
            return Err(Error::InvalidArgument(format!(
                "equality delete keys of types {key_types:?} do not match their sets"
            )));
        }
        u32::try_from(pairs.len()).map_err(|_| too_many())?;
        let index = if long {
            longs.shrink_to_fit();
            UnionIndex::Long { keys: longs, null }
        } else {
            rows.shrink_to_fit();
            let fields = key_types
                .iter()
                .map(|t| SortField::new(t.clone()))
                .collect();
            UnionIndex::Rows {
                converter: RowConverter::new(fields)?,
                keys: rows,
            }
        };
        // Grouped by key number with a counting sort (no list per key), each key's members
        // left in member order.
        let mut starts = vec![0u32; distinct as usize + 1];
        for (number, _) in &pairs {
            starts[*number as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut next_slot: Vec<u32> = starts[..distinct as usize].to_vec();
        let mut holders = vec![0u32; pairs.len()];
        for (number, member) in pairs {
            let slot = &mut next_slot[number as usize];
            holders[*slot as usize] = member;
            *slot += 1;
        }
        Ok(Self {
            members,
            index,
            starts,
            holders,
        })
    }

    /// The member number of the group with identity `key`, if it is one.
    pub(crate) fn member_of(&self, key: &EqualityKey) -> Option<u32> {
        self.members
            .binary_search(key)
            .ok()
            .and_then(|m| u32::try_from(m).ok())
    }

    /// How many groups it joins.
    pub(crate) fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Bytes held (for the delete cache and the memory pool).
    pub(crate) fn memory_size(&self) -> usize {
        let index = match &self.index {
            UnionIndex::Long { keys, .. } => keys.allocation_size(),
            UnionIndex::Rows { converter, keys } => {
                converter.size()
                    + keys.allocation_size()
                    + keys.keys().map(|k| k.len()).sum::<usize>()
            }
        };
        index
            + (self.starts.capacity() + self.holders.capacity()) * std::mem::size_of::<u32>()
            + self.members.capacity() * std::mem::size_of::<EqualityKey>()
    }

    /// Which rows of `keys` (canonical key columns of a data batch) the members `applying`
    /// delete.
    pub(crate) fn deleted(&self, keys: &[ArrayRef], applying: &Members) -> Result<BooleanBuffer> {
        let len = keys.first().map_or(0, |k| k.len());
        let held = |number: u32| {
            let from = self.starts[number as usize] as usize;
            let to = self.starts[number as usize + 1] as usize;
            self.holders[from..to].iter().any(|m| applying.has(*m))
        };
        Ok(match &self.index {
            UnionIndex::Long { keys: index, null } => {
                let null_deleted = null.is_some_and(held);
                if keys[0].data_type() == &DataType::Null {
                    // The key column is not in the scan's schema: every value is null.
                    return Ok(BooleanBuffer::collect_bool(len, |_| null_deleted));
                }
                let column = keys[0].as_primitive_opt::<Int64Type>().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "equality key column has type {}, expected a long",
                        keys[0].data_type()
                    ))
                })?;
                let values = column.values();
                match column.nulls().filter(|n| n.null_count() > 0) {
                    None => BooleanBuffer::collect_bool(len, |i| {
                        index.get(&values[i]).is_some_and(|n| held(*n))
                    }),
                    Some(nulls) => BooleanBuffer::collect_bool(len, |i| {
                        if nulls.is_null(i) {
                            null_deleted
                        } else {
                            index.get(&values[i]).is_some_and(|n| held(*n))
                        }
                    }),
                }
            }
            UnionIndex::Rows {
                converter,
                keys: index,
            } => {
                let rows = converter.convert_columns(keys)?;
                BooleanBuffer::collect_bool(len, |i| {
                    index.get(rows.row(i).as_ref()).is_some_and(|n| held(*n))
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, NullArray, StringArray};

    use super::*;
    use crate::deletes::equality::canonical_columns;

    fn key(n: usize) -> EqualityKey {
        EqualityKey::new(vec![1], vec![(format!("file:///d/{n}.parquet"), n as u64)])
    }

    /// Groups `sets` (each a list of delete files' key columns), joined, and each group's
    /// member number.
    fn union_of(sets: Vec<Vec<Vec<ArrayRef>>>, types: &[DataType]) -> (EqualityUnion, Vec<u32>) {
        let mut groups: Vec<(EqualityKey, Arc<EqualityDeleteSet>)> = sets
            .into_iter()
            .enumerate()
            .map(|(n, files)| {
                let files: Vec<Vec<ArrayRef>> = files
                    .iter()
                    .map(|f| canonical_columns(f).unwrap())
                    .collect();
                (key(n), Arc::new(EqualityDeleteSet::build(&files).unwrap()))
            })
            .collect();
        let keys: Vec<EqualityKey> = groups.iter().map(|(k, _)| k.clone()).collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let union = EqualityUnion::build(&groups, types).unwrap();
        let members = keys.iter().map(|k| union.member_of(k).unwrap()).collect();
        (union, members)
    }

    /// The members `members` of `union`.
    fn only(union: &EqualityUnion, members: &[u32]) -> Members {
        Members::of(union.member_count(), members.iter().copied())
    }

    fn probe(union: &EqualityUnion, keys: Vec<ArrayRef>, applying: &Members) -> Vec<bool> {
        let keys = canonical_columns(&keys).unwrap();
        union.deleted(&keys, applying).unwrap().iter().collect()
    }

    #[test]
    fn a_long_key_is_deleted_by_the_groups_holding_it_that_apply() {
        let long = |v: Vec<Option<i64>>| -> ArrayRef { Arc::new(Int64Array::from(v)) };
        // Group 0: 1, 2 and null; group 1: 2, 3 (dense); group 2: 1,000,000 (sparse).
        let (union, m) = union_of(
            vec![
                vec![vec![long(vec![Some(1), Some(2), None])]],
                vec![vec![long(vec![Some(2), Some(3)])]],
                vec![vec![long(vec![Some(1_000_000)])]],
            ],
            &[DataType::Int64],
        );
        assert_eq!(union.member_count(), 3);
        let rows = || {
            long(vec![
                Some(1),
                Some(2),
                Some(3),
                None,
                Some(1_000_000),
                Some(4),
            ])
        };
        assert_eq!(
            probe(&union, vec![rows()], &Members::All),
            [true, true, true, true, true, false]
        );
        assert_eq!(
            probe(&union, vec![rows()], &only(&union, &[m[1]])),
            [false, true, true, false, false, false]
        );
        assert_eq!(
            probe(&union, vec![rows()], &only(&union, &[m[0], m[2]])),
            [true, true, false, true, true, false]
        );
        assert_eq!(probe(&union, vec![rows()], &only(&union, &[])), [false; 6]);
        // A key column missing from the scan reads as nulls.
        let nulls: ArrayRef = Arc::new(NullArray::new(2));
        assert_eq!(
            probe(&union, vec![Arc::clone(&nulls)], &only(&union, &[m[0]])),
            [true, true]
        );
        assert_eq!(
            probe(&union, vec![nulls], &only(&union, &[m[1], m[2]])),
            [false, false]
        );
    }

    #[test]
    fn row_keys_are_deleted_by_the_groups_holding_them_that_apply() {
        let pair = |ids: Vec<i64>, names: Vec<&str>| -> Vec<ArrayRef> {
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
            ]
        };
        // Group 0: (1, a) in two files; group 1: (1, b), (2, a).
        let (union, m) = union_of(
            vec![
                vec![pair(vec![1], vec!["a"]), pair(vec![1], vec!["a"])],
                vec![pair(vec![1, 2], vec!["b", "a"])],
            ],
            &[DataType::Int64, DataType::Utf8],
        );
        let rows = || pair(vec![1, 1, 2, 2], vec!["a", "b", "a", "b"]);
        assert_eq!(
            probe(&union, rows(), &Members::All),
            [true, true, true, false]
        );
        assert_eq!(
            probe(&union, rows(), &only(&union, &[m[0]])),
            [true, false, false, false]
        );
        assert_eq!(
            probe(&union, rows(), &only(&union, &[m[1]])),
            [false, true, true, false]
        );
    }
}
