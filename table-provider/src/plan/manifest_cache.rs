//! A bounded cache of parsed manifests and manifest lists, keyed by logical path.
//!
//! Iceberg never rewrites a manifest or manifest list in place, so a parsed one stays valid
//! for as long as it is cached. Entries are weighed by an estimate of the memory the parsed
//! manifest holds ([`manifest_size`]: per data file its path, column statistics, bounds — string
//! and binary bounds by their length — split offsets and partition values; [`list_size`]: per
//! manifest its path and partition summaries), so a wide table's manifests count for what they
//! hold rather than a fixed amount per entry; the cache evicts the least recently used past its
//! capacity. Lookups are counted ([`ManifestCache::stats`]).

use std::sync::Arc;

use iceberg::spec::{Datum, FormatVersion, Literal, Manifest, ManifestList, PrimitiveLiteral};
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

/// Bytes a primitive value holds beyond its fixed size.
fn literal_extra(literal: &PrimitiveLiteral) -> usize {
    match literal {
        PrimitiveLiteral::String(s) => s.len(),
        PrimitiveLiteral::Binary(b) => b.len(),
        _ => 0,
    }
}

fn datum_size(d: &Datum) -> usize {
    64 + literal_extra(d.literal())
}

/// An estimate of the memory a parsed manifest holds.
pub(crate) fn manifest_size(m: &Manifest) -> usize {
    let files: usize = m
        .entries()
        .iter()
        .map(|e| {
            let f = e.data_file();
            let counts = f.column_sizes().len()
                + f.value_counts().len()
                + f.null_value_counts().len()
                + f.nan_value_counts().len();
            let bounds: usize = f
                .lower_bounds()
                .values()
                .chain(f.upper_bounds().values())
                .map(datum_size)
                .sum();
            let partition: usize = f
                .partition()
                .fields()
                .iter()
                .map(|v| match v {
                    Some(Literal::Primitive(p)) => 48 + literal_extra(p),
                    _ => 48,
                })
                .sum();
            384 + f.file_path().len()
                + counts * 32
                + bounds
                + partition
                + f.split_offsets().map_or(0, |s| s.len() * 8)
                + f.key_metadata().map_or(0, <[u8]>::len)
        })
        .sum();
    4096 + files
}

/// An estimate of the memory a parsed manifest list holds.
pub(crate) fn list_size(l: &ManifestList) -> usize {
    let manifests: usize = l
        .entries()
        .iter()
        .map(|m| {
            let summaries: usize = m.partitions.as_ref().map_or(0, |p| {
                p.iter()
                    .map(|s| {
                        64 + s.lower_bound.as_ref().map_or(0, |b| b.len())
                            + s.upper_bound.as_ref().map_or(0, |b| b.len())
                    })
                    .sum()
            });
            256 + m.manifest_path.len() + summaries + m.key_metadata.as_ref().map_or(0, Vec::len)
        })
        .sum();
    1024 + manifests
}

impl ManifestCache {
    /// A cache holding about `capacity_bytes` of manifest files (0 disables caching).
    pub fn new(capacity_bytes: u64) -> Self {
        // Before any manifest is parsed: Avro name checks without regular expressions.
        crate::spec::avro_names::install();
        Self {
            manifests: Cache::builder()
                .max_capacity(capacity_bytes)
                .weigher(|_, m: &Arc<Manifest>| weight(manifest_size(m)))
                .build(),
            lists: Cache::builder()
                .max_capacity(capacity_bytes / 8)
                .weigher(|_, l: &Arc<ManifestList>| weight(list_size(l)))
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
            crate::spec::parse_manifest(&bytes)
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Manifest,
        ManifestContentType, ManifestEntry, ManifestMetadata, ManifestStatus, NestedField,
        PartitionSpec, PrimitiveType, Schema, Struct, Type,
    };

    use super::manifest_size;

    /// A manifest of one data file of a `columns`-wide table with `bound` as every column's
    /// lower and upper bound.
    fn manifest(columns: i32, bound: &str) -> Manifest {
        let fields = (1..=columns).map(|i| {
            Arc::new(NestedField::optional(
                i,
                format!("c{i}"),
                Type::Primitive(PrimitiveType::String),
            ))
        });
        let schema = Schema::builder().with_fields(fields).build().unwrap();
        let spec = PartitionSpec::builder(schema.clone()).build().unwrap();
        let bounds: HashMap<i32, Datum> =
            (1..=columns).map(|i| (i, Datum::string(bound))).collect();
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("s3://bucket/t/data/f.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(1)
            .file_size_in_bytes(10)
            .lower_bounds(bounds.clone())
            .upper_bounds(bounds)
            .build()
            .unwrap();
        let entry = ManifestEntry::builder()
            .status(ManifestStatus::Added)
            .snapshot_id(1)
            .data_file(file)
            .build();
        let metadata = ManifestMetadata::builder()
            .schema(Arc::new(schema))
            .schema_id(0)
            .partition_spec(spec)
            .format_version(FormatVersion::V2)
            .content(ManifestContentType::Data)
            .build();
        Manifest::new(metadata, vec![entry])
    }

    #[test]
    fn a_manifest_weighs_what_its_statistics_hold() {
        let narrow = manifest_size(&manifest(1, "a"));
        let wide = manifest_size(&manifest(200, &"x".repeat(100)));
        assert!(narrow < 8 * 1024, "{narrow}");
        // 400 bounds of 100 bytes each at least; a fixed 512 bytes per entry was the old weight.
        assert!(wide > 400 * 164, "{wide}");
    }
}
