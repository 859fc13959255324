//! Parsed delete files shared by the scans of a process.
//!
//! Delete files never change once written, and the same ones apply to query after query until
//! compaction rewrites the table; dashboards re-run the same queries. So the positions of a
//! position delete file (per data file), a deletion vector, and the key set of an equality
//! group are kept in a bounded cache (weighed by their memory, least recently used evicted;
//! Iceberg's Spark executors keep a delete cache for the same reason). Keys are the files'
//! resolved physical locations with their sizes, so two copies of a table at different places
//! never share entries. Failures are not cached. Lookups are counted ([`DeleteCache::stats`]).
//!
//! A data file's rows deleted by a given list of equality groups are kept too, as positions
//! (a bitmap, like a deletion vector), keyed by the data file and the groups: later scans apply
//! them as positional deletes, without probing the sets (`deletes::merge_on_read`). This part
//! holds up to a quarter of the capacity more, and so do equality groups joined into one index
//! (`deletes::equality_union`), keyed by their groups. Each data file's latest recorded
//! positions are also found by the data file alone ([`DeleteCache::latest_equality_positions`]):
//! after a commit adds groups to a file, its positions are extended by the new groups only
//! (`deletes::equality_extension`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use moka::sync::Cache;
use roaring::RoaringTreemap;

use super::equality::EqualityDeleteSet;
use super::equality_union::EqualityUnion;
use crate::cache_stats::{CacheCounters, CacheStats, moka_stats};

/// Default capacity: about this many bytes of parsed deletes.
pub const DEFAULT_DELETE_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// A positional delete source, parsed.
#[derive(Debug)]
pub(crate) enum PositionSource {
    /// A position delete file: deleted positions (sorted, distinct) by normalised data file
    /// path.
    File(HashMap<String, Arc<[u64]>>),
    /// A deletion vector: the positions of its one data file.
    Vector(RoaringTreemap),
}

impl PositionSource {
    /// Bytes held, approximately.
    fn memory_size(&self) -> usize {
        match self {
            PositionSource::File(by_path) => by_path
                .iter()
                .map(|(path, positions)| path.len() + 64 + positions.len() * 8)
                .sum(),
            PositionSource::Vector(bitmap) => bitmap.serialized_size(),
        }
    }
}

/// A positional source: the physical location, file size, and blob offset of a deletion
/// vector.
pub(crate) type PositionKey = (String, u64, Option<u64>);

/// An equality group: its field ids and its files' (physical location, size), sorted. One per
/// group and scan, shared by the keys of every data file the group applies to, and hashed once
/// (a table upserted by many commits has thousands of (data file, group) pairs per scan: their
/// keys hash a number per group, not every path).
#[derive(Debug, Clone)]
pub(crate) struct EqualityKey(Arc<GroupIdentity>);

/// What an [`EqualityKey`] holds: its hash first, so that keys order by it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupIdentity {
    hash: u64,
    field_ids: Vec<i32>,
    files: Vec<(String, u64)>,
}

impl EqualityKey {
    pub(crate) fn new(field_ids: Vec<i32>, files: Vec<(String, u64)>) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        (&field_ids, &files).hash(&mut hasher);
        Self(Arc::new(GroupIdentity {
            hash: hasher.finish(),
            field_ids,
            files,
        }))
    }
}

impl Hash for EqualityKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl PartialEq for EqualityKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for EqualityKey {}

impl PartialOrd for EqualityKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EqualityKey {
    /// By hash first (a data file's groups are sorted into its key), then content.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// An equality group as a data file's positions key names it: its identity, and which of its
/// key columns the scan schema has (a missing one reads as null). Resolved once per scan and
/// shared by every data file the group applies to.
pub(crate) type GroupEntry = (EqualityKey, Arc<[bool]>);

/// A data file (physical location, size) and the equality groups applying to it, sorted.
pub(crate) type EqualityPositionsKey = ((String, u64), Vec<GroupEntry>);

/// Equality groups joined into one index: their identities, sorted.
pub(crate) type UnionKey = Arc<[EqualityKey]>;

/// A data file's equality-deleted positions as last recorded: the groups (with their present
/// key columns, sorted, as in [`EqualityPositionsKey`]) and the positions they delete.
#[derive(Debug)]
pub(crate) struct RecordedPositions {
    pub(crate) groups: Vec<GroupEntry>,
    pub(crate) positions: Arc<RoaringTreemap>,
}

/// Parsed delete files shared by every scan of a process (module docs).
#[derive(Debug, Clone)]
pub struct DeleteCache {
    positions: Cache<PositionKey, Arc<PositionSource>>,
    equality: Cache<EqualityKey, Arc<EqualityDeleteSet>>,
    equality_positions: Cache<EqualityPositionsKey, Arc<RoaringTreemap>>,
    /// The latest of `equality_positions` per data file (physical location, size).
    latest_positions: Cache<(String, u64), Arc<RecordedPositions>>,
    unions: Cache<UnionKey, Arc<EqualityUnion>>,
    capacity_bytes: u64,
    position_lookups: CacheCounters,
    equality_lookups: CacheCounters,
}

impl Default for DeleteCache {
    fn default() -> Self {
        Self::new(DEFAULT_DELETE_CACHE_BYTES)
    }
}

fn weight(bytes: usize) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX).max(1)
}

impl DeleteCache {
    /// A cache holding about `capacity_bytes` of parsed deletes (0 disables it).
    pub fn new(capacity_bytes: u64) -> Self {
        Self {
            positions: Cache::builder()
                .max_capacity(capacity_bytes / 2)
                .weigher(|_, s: &Arc<PositionSource>| weight(s.memory_size()))
                .build(),
            equality: Cache::builder()
                .max_capacity(capacity_bytes / 2)
                .weigher(|_, s: &Arc<EqualityDeleteSet>| weight(s.memory_size()))
                .build(),
            equality_positions: Cache::builder()
                .max_capacity(capacity_bytes / 4)
                .weigher(
                    |(path, groups): &EqualityPositionsKey, b: &Arc<RoaringTreemap>| {
                        weight(b.serialized_size() + path.0.len() + groups.len() * 128)
                    },
                )
                .build(),
            latest_positions: Cache::builder()
                .max_capacity(capacity_bytes / 4)
                .weigher(|path: &(String, u64), r: &Arc<RecordedPositions>| {
                    weight(r.positions.serialized_size() + path.0.len() + r.groups.len() * 128)
                })
                .build(),
            unions: Cache::builder()
                .max_capacity(capacity_bytes / 4)
                .weigher(|groups: &UnionKey, u: &Arc<EqualityUnion>| {
                    weight(u.memory_size() + groups.len() * 8)
                })
                .build(),
            capacity_bytes,
            position_lookups: CacheCounters::default(),
            equality_lookups: CacheCounters::default(),
        }
    }

    /// The state of the positional part (position delete files, deletion vectors) and of the
    /// equality part.
    pub fn stats(&self) -> [CacheStats; 2] {
        [
            moka_stats(
                "delete_positions",
                &self.positions,
                self.capacity_bytes / 2,
                &self.position_lookups,
            ),
            moka_stats(
                "delete_equality",
                &self.equality,
                self.capacity_bytes / 2,
                &self.equality_lookups,
            ),
        ]
    }

    /// Drops everything (benchmarks measure cold reads with it).
    pub fn clear(&self) {
        self.positions.invalidate_all();
        self.equality.invalidate_all();
        self.equality_positions.invalidate_all();
        self.latest_positions.invalidate_all();
        self.unions.invalidate_all();
    }

    pub(crate) fn position_source(&self, key: &PositionKey) -> Option<Arc<PositionSource>> {
        self.position_lookups.observe(self.positions.get(key))
    }

    pub(crate) fn insert_position_source(&self, key: PositionKey, source: Arc<PositionSource>) {
        self.positions.insert(key, source);
    }

    pub(crate) fn equality_set(&self, key: &EqualityKey) -> Option<Arc<EqualityDeleteSet>> {
        self.equality_lookups.observe(self.equality.get(key))
    }

    pub(crate) fn insert_equality_set(&self, key: EqualityKey, set: Arc<EqualityDeleteSet>) {
        self.equality.insert(key, set);
    }

    /// The positions of a data file its equality groups delete, when a scan recorded them.
    pub(crate) fn equality_positions(
        &self,
        key: &EqualityPositionsKey,
    ) -> Option<Arc<RoaringTreemap>> {
        self.equality_positions.get(key)
    }

    pub(crate) fn insert_equality_positions(
        &self,
        key: EqualityPositionsKey,
        positions: Arc<RoaringTreemap>,
    ) {
        let latest = RecordedPositions {
            groups: key.1.clone(),
            positions: Arc::clone(&positions),
        };
        self.latest_positions
            .insert(key.0.clone(), Arc::new(latest));
        self.equality_positions.insert(key, positions);
    }

    /// The equality-deleted positions last recorded for data file `file` (physical location,
    /// size), whatever groups they were recorded for.
    pub(crate) fn latest_equality_positions(
        &self,
        file: &(String, u64),
    ) -> Option<Arc<RecordedPositions>> {
        self.latest_positions.get(file)
    }

    /// The union of equality groups `key`, when a scan joined them.
    pub(crate) fn equality_union(&self, key: &UnionKey) -> Option<Arc<EqualityUnion>> {
        self.unions.get(key)
    }

    pub(crate) fn insert_equality_union(&self, key: UnionKey, union: Arc<EqualityUnion>) {
        self.unions.insert(key, union);
    }
}
