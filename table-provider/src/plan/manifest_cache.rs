//! A bounded cache of parsed manifests and manifest lists, keyed by logical path.
//!
//! Iceberg never rewrites a manifest or manifest list in place, so a parsed one stays valid
//! for as long as it is cached. Entries are weighed by their file size; the cache evicts the
//! least recently used past its capacity. Lookups are counted ([`ManifestCache::stats`]).

use std::sync::Arc;

use iceberg::spec::{FormatVersion, Manifest, ManifestList};
use moka::sync::Cache;

use crate::cache_stats::{CacheCounters, CacheStats, moka_stats};
use crate::error::{Error, Result};
use crate::io::TableIo;

/// Default capacity: about this many bytes of manifest files.
pub const DEFAULT_MANIFEST_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// Parsed manifests and manifest lists shared by every scan of a process.
#[derive(Debug, Clone)]
pub struct ManifestCache {
    manifests: Cache<String, Arc<Manifest>>,
    lists: Cache<String, Arc<ManifestList>>,
    capacity_bytes: u64,
    manifest_lookups: CacheCounters,
    list_lookups: CacheCounters,
}

impl Default for ManifestCache {
    fn default() -> Self {
        Self::new(DEFAULT_MANIFEST_CACHE_BYTES)
    }
}

fn weight(bytes: usize) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX).max(1)
}

impl ManifestCache {
    /// A cache holding about `capacity_bytes` of manifest files (0 disables caching).
    pub fn new(capacity_bytes: u64) -> Self {
        Self {
            manifests: Cache::builder()
                .max_capacity(capacity_bytes)
                .weigher(|_, m: &Arc<Manifest>| weight(m.entries().len() * 512))
                .build(),
            lists: Cache::builder()
                .max_capacity(capacity_bytes / 8)
                .weigher(|_, l: &Arc<ManifestList>| weight(l.entries().len() * 256))
                .build(),
            capacity_bytes,
            manifest_lookups: CacheCounters::default(),
            list_lookups: CacheCounters::default(),
        }
    }

    /// The state of the manifest cache and of the manifest-list cache (weights are the
    /// estimates the capacity is in).
    pub fn stats(&self) -> [CacheStats; 2] {
        [
            moka_stats(
                "manifest",
                &self.manifests,
                self.capacity_bytes,
                &self.manifest_lookups,
            ),
            moka_stats(
                "manifest_list",
                &self.lists,
                self.capacity_bytes / 8,
                &self.list_lookups,
            ),
        ]
    }

    /// Drops everything (benchmarks measure cold planning with it).
    pub fn clear(&self) {
        self.manifests.invalidate_all();
        self.lists.invalidate_all();
    }

    /// A cached manifest, if present.
    pub fn get_manifest(&self, path: &str) -> Option<Arc<Manifest>> {
        self.manifest_lookups.observe(self.manifests.get(path))
    }

    /// The manifest list at `path`, read and parsed on a miss.
    pub async fn manifest_list(
        &self,
        io: &TableIo,
        table: &str,
        path: &str,
        version: FormatVersion,
    ) -> Result<Arc<ManifestList>> {
        if let Some(list) = self.list_lookups.observe(self.lists.get(path)) {
            return Ok(list);
        }
        let bytes = io
            .read(path)
            .await
            .map_err(|e| Error::corrupt(table, "manifest list", path, e))?;
        let list = ManifestList::parse_with_version(&bytes, version)
            .map_err(|e| Error::corrupt(table, "manifest list", path, e))?;
        let list = Arc::new(list);
        self.lists.insert(path.to_string(), Arc::clone(&list));
        Ok(list)
    }

    /// The manifest at `path`, read and parsed (on the blocking pool) on a miss.
    pub async fn manifest(&self, io: &TableIo, table: &str, path: &str) -> Result<Arc<Manifest>> {
        if let Some(m) = self.manifest_lookups.observe(self.manifests.get(path)) {
            return Ok(m);
        }
        let bytes = io
            .read(path)
            .await
            .map_err(|e| Error::corrupt(table, "manifest", path, e))?;
        let parsed = datafusion::common::runtime::SpawnedTask::spawn_blocking(move || {
            Manifest::parse_avro(&bytes)
        })
        .join()
        .await
        .map_err(|e| Error::corrupt(table, "manifest", path, e))?
        .map_err(|e| Error::corrupt(table, "manifest", path, e))?;
        let manifest = Arc::new(parsed);
        self.manifests
            .insert(path.to_string(), Arc::clone(&manifest));
        Ok(manifest)
    }
}
