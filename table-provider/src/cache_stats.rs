//! Hit and miss counts of Petrel's process-wide caches (parsed manifests, parsed delete
//! files), and a snapshot of a cache's state for monitoring.
//!
//! The caches are `moka` caches, which count nothing themselves; each lookup records a hit or
//! a miss here. A server exports the snapshots (`petrel-server`'s metrics endpoint); hit rates
//! are `hits / (hits + misses)`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Lookups of one cache: shared by the cache's clones.
#[derive(Debug, Clone, Default)]
pub struct CacheCounters {
    inner: Arc<[AtomicU64; 2]>,
}

impl CacheCounters {
    /// Records a lookup that found its entry (`true`) or did not.
    pub fn record(&self, hit: bool) {
        self.inner[usize::from(!hit)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `found` as a hit when it is `Some`, a miss otherwise, and returns it.
    pub fn observe<T>(&self, found: Option<T>) -> Option<T> {
        self.record(found.is_some());
        found
    }

    /// Lookups that found their entry.
    pub fn hits(&self) -> u64 {
        self.inner[0].load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.inner[1].load(Ordering::Relaxed)
    }
}

/// One cache's state at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheStats {
    /// The cache's name (`manifest`, `manifest_list`, `delete_positions`, `delete_equality`,
    /// `table`).
    pub name: &'static str,
    /// Entries held.
    pub entries: u64,
    /// Their weight: bytes, approximately (the unit the capacity is in).
    pub bytes: u64,
    /// The capacity in the same unit.
    pub capacity_bytes: u64,
    /// Lookups that found their entry, since the cache was made.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
}

/// The stats of a `moka` cache with its counters (pending evictions applied first, so the
/// counts are current).
pub(crate) fn moka_stats<K, V>(
    name: &'static str,
    cache: &moka::sync::Cache<K, V>,
    capacity_bytes: u64,
    counters: &CacheCounters,
) -> CacheStats
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    cache.run_pending_tasks();
    CacheStats {
        name,
        entries: cache.entry_count(),
        bytes: cache.weighted_size(),
        capacity_bytes,
        hits: counters.hits(),
        misses: counters.misses(),
    }
}
