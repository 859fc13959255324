//! The files a table's metadata reaches: for every snapshot its manifest list, the manifests
//! it lists and the live (added or existing) content files of those manifests — data files,
//! position-delete files and deletion-vector Puffin files, equality-delete files — plus the
//! statistics files of its snapshots. What Iceberg Java's `ReachableFileCleanup` (behind
//! `expire_snapshots`) and `DeleteOrphanFiles` (behind `remove_orphan_files`) compare.
//!
//! Locations are keyed by their normalised form ([`normalize_location`]: `/a`, `file:/a` and
//! `file:///a` are one file) and keep the spelling the metadata wrote. A [`ManifestReader`]
//! parses each manifest once, so comparing the files reachable before and after a change reads
//! the manifests both share once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataContentType, ManifestList, ManifestStatus, TableMetadata};

use crate::error::{Error, Result};
use crate::io::{TableIo, normalize_location};

/// How many manifests or manifest lists are read at once.
const CONCURRENT_READS: usize = 8;

/// Files reached from a table's snapshots, each by kind: normalised location → location as
/// written.
#[derive(Debug, Clone, Default)]
pub struct ReachableFiles {
    /// Manifest lists.
    pub manifest_lists: HashMap<String, String>,
    /// Manifests (data and delete manifests).
    pub manifests: HashMap<String, String>,
    /// Data files.
    pub data_files: HashMap<String, String>,
    /// Position-delete files (Parquet) and deletion-vector files (Puffin).
    pub position_deletes: HashMap<String, String>,
    /// Equality-delete files.
    pub equality_deletes: HashMap<String, String>,
    /// Statistics and partition-statistics files.
    pub statistics: HashMap<String, String>,
}

impl ReachableFiles {
    /// Every file of every kind.
    pub fn all(&self) -> impl Iterator<Item = (&String, &String)> {
        self.manifest_lists
            .iter()
            .chain(&self.manifests)
            .chain(&self.data_files)
            .chain(&self.position_deletes)
            .chain(&self.equality_deletes)
            .chain(&self.statistics)
    }
}

/// The live content files of one manifest: (location, content).
type ManifestFiles = Arc<Vec<(String, DataContentType)>>;

/// Reads manifest lists and manifests of one table, each manifest once.
#[derive(Debug)]
pub struct ManifestReader {
    table: String,
    io: TableIo,
    manifests: HashMap<String, ManifestFiles>,
}

impl ManifestReader {
    /// A reader of `table`'s files through `io`.
    pub fn new(table: String, io: TableIo) -> Self {
        Self {
            table,
            io,
            manifests: HashMap::new(),
        }
    }

    /// The files reachable from every snapshot of `metadata`.
    pub async fn reachable(&mut self, metadata: &TableMetadata) -> Result<ReachableFiles> {
        let mut files = ReachableFiles::default();
        for stats in metadata.statistics_iter() {
            insert(&mut files.statistics, &stats.statistics_path);
        }
        for stats in metadata.partition_statistics_iter() {
            insert(&mut files.statistics, &stats.statistics_path);
        }
        let lists: Vec<String> = metadata
            .snapshots()
            .map(|s| s.manifest_list().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        let version = metadata.format_version();
        let table = &self.table;
        let io = &self.io;
        let parsed: Vec<(String, Vec<String>)> = futures::stream::iter(lists)
            .map(|list| async move {
                let corrupt = |e: &dyn std::fmt::Display| {
                    Error::corrupt(table.as_str(), "manifest list", &list, e.to_string())
                };
                let bytes = io.read(&list).await.map_err(|e| corrupt(&e))?;
                let parsed =
                    ManifestList::parse_with_version(&bytes, version).map_err(|e| corrupt(&e))?;
                let manifests = parsed
                    .entries()
                    .iter()
                    .map(|m| m.manifest_path.clone())
                    .collect();
                Ok::<_, Error>((list, manifests))
            })
            .buffer_unordered(CONCURRENT_READS)
            .try_collect()
            .await?;
        let mut wanted = Vec::new();
        for (list, manifests) in parsed {
            insert(&mut files.manifest_lists, &list);
            for manifest in manifests {
                if insert(&mut files.manifests, &manifest) {
                    wanted.push(manifest);
                }
            }
        }
        let missing: Vec<String> = wanted
            .iter()
            .filter(|m| !self.manifests.contains_key(&normalize_location(m)))
            .cloned()
            .collect();
        let read: Vec<(String, ManifestFiles)> = futures::stream::iter(missing)
            .map(|manifest| async move {
                let corrupt = |e: &dyn std::fmt::Display| {
                    Error::corrupt(table.as_str(), "manifest", &manifest, e.to_string())
                };
                let bytes = io.read(&manifest).await.map_err(|e| corrupt(&e))?;
                let parsed = crate::spec::parse_manifest(&bytes).map_err(|e| corrupt(&e))?;
                let live: Vec<(String, DataContentType)> = parsed
                    .entries()
                    .iter()
                    .filter(|e| e.status() != ManifestStatus::Deleted)
                    .map(|e| (e.file_path().to_string(), e.content_type()))
                    .collect();
                Ok::<_, Error>((normalize_location(&manifest), Arc::new(live)))
            })
            .buffer_unordered(CONCURRENT_READS)
            .try_collect()
            .await?;
        self.manifests.extend(read);
        for manifest in &wanted {
            let Some(live) = self.manifests.get(&normalize_location(manifest)) else {
                continue;
            };
            for (path, content) in live.iter() {
                let kind = match content {
                    DataContentType::Data => &mut files.data_files,
                    DataContentType::PositionDeletes => &mut files.position_deletes,
                    DataContentType::EqualityDeletes => &mut files.equality_deletes,
                };
                insert(kind, path);
            }
        }
        Ok(files)
    }
}

/// Adds `location` under its normalised key; whether it was new.
fn insert(files: &mut HashMap<String, String>, location: &str) -> bool {
    let key = normalize_location(location);
    if files.contains_key(&key) {
        return false;
    }
    files.insert(key, location.to_string());
    true
}

/// The locations of `before` that `after` does not hold (as `before` spells them), sorted.
pub fn not_in(before: &HashMap<String, String>, after: &HashMap<String, String>) -> Vec<String> {
    let after: HashSet<&String> = after.keys().collect();
    let mut gone: Vec<String> = before
        .iter()
        .filter(|(key, _)| !after.contains(key))
        .map(|(_, location)| location.clone())
        .collect();
    gone.sort();
    gone
}
