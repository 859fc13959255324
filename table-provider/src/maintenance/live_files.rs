//! The live files of one snapshot, read from its manifests, and which delete files may apply to
//! which data files: what a compaction needs to choose files and to find the delete files that
//! no data file needs any more.
//!
//! Applicability follows the spec's rules, conservatively (a delete file is said to apply
//! whenever a reader could apply it):
//!
//! - a position delete naming one data file (`referenced_data_file`, every deletion vector)
//!   applies to that file only;
//! - any other position-delete file applies to the data files of its spec and partition whose
//!   data sequence number is at most its own;
//! - an equality-delete file applies to the data files whose data sequence number is smaller
//!   than its own, of its spec and partition, or of every partition when its spec is
//!   unpartitioned (a global delete).

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, ManifestContentType, Struct};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::io::normalize_location;
use crate::plan::ManifestCache;

/// A live file of the snapshot: a data file or a delete file.
#[derive(Debug, Clone)]
pub(super) struct LiveFile {
    /// The file as its manifest describes it.
    pub(super) file: DataFile,
    /// The partition spec of its partition tuple.
    pub(super) spec_id: i32,
    /// Its data sequence number (inherited from its manifest when the entry left it null).
    pub(super) sequence_number: i64,
}

impl LiveFile {
    /// Its spec and partition.
    pub(super) fn partition_key(&self) -> (i32, Struct) {
        (self.spec_id, self.file.partition().clone())
    }

    /// For a delete file: the one data file it names, if it names one.
    pub(super) fn referenced_data_file(&self) -> Option<String> {
        self.file.referenced_data_file()
    }
}

/// The live data and delete files of one snapshot.
#[derive(Debug, Default)]
pub(super) struct LiveFiles {
    /// Data files, in manifest order.
    pub(super) data: Vec<LiveFile>,
    /// Delete files (position deletes, deletion vectors, equality deletes).
    pub(super) deletes: Vec<LiveFile>,
    /// The ids of the unpartitioned specs (their equality deletes are global).
    unpartitioned_specs: HashSet<i32>,
}

/// Reads the manifests of `table`'s snapshot `snapshot_id`, through `cache`.
pub(super) async fn live_files(
    table: &LoadedTable,
    cache: &ManifestCache,
    snapshot_id: i64,
) -> Result<LiveFiles> {
    let name = table.ident().to_string();
    let metadata = table.metadata();
    let snapshot = metadata
        .snapshot_by_id(snapshot_id)
        .ok_or_else(|| Error::NotFound(format!("table {name}: snapshot {snapshot_id}")))?;
    let list = cache
        .manifest_list(
            table.io(),
            &name,
            snapshot.manifest_list(),
            metadata.format_version(),
        )
        .await?;
    let mut live = LiveFiles {
        unpartitioned_specs: metadata
            .partition_specs_iter()
            .filter(|s| s.fields().is_empty())
            .map(|s| s.spec_id())
            .collect(),
        ..LiveFiles::default()
    };
    for manifest_file in list.entries() {
        if !manifest_file.has_added_files() && !manifest_file.has_existing_files() {
            continue;
        }
        let manifest = cache
            .manifest(table.io(), &name, &manifest_file.manifest_path)
            .await?;
        let spec_id = manifest.metadata().partition_spec().spec_id();
        let deletes = matches!(manifest.metadata().content(), ManifestContentType::Deletes);
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = LiveFile {
                file: entry.data_file().clone(),
                spec_id,
                sequence_number: entry
                    .sequence_number()
                    .unwrap_or(manifest_file.sequence_number),
            };
            if deletes {
                live.deletes.push(file);
            } else {
                live.data.push(file);
            }
        }
    }
    Ok(live)
}

/// The data files of a snapshot indexed for [`DataFileIndex::any_applies`].
pub(super) struct DataFileIndex<'a> {
    by_path: HashSet<String>,
    by_partition: HashMap<(i32, Struct), Vec<&'a LiveFile>>,
    all: Vec<&'a LiveFile>,
    unpartitioned_specs: &'a HashSet<i32>,
}

impl<'a> DataFileIndex<'a> {
    /// Indexes the data files of `live` that `keep` accepts.
    pub(super) fn new(live: &'a LiveFiles, keep: impl Fn(&LiveFile) -> bool) -> Self {
        let all: Vec<&LiveFile> = live.data.iter().filter(|f| keep(f)).collect();
        let mut by_partition: HashMap<(i32, Struct), Vec<&LiveFile>> = HashMap::new();
        for file in &all {
            by_partition
                .entry(file.partition_key())
                .or_default()
                .push(file);
        }
        Self {
            by_path: all
                .iter()
                .map(|f| normalize_location(f.file.file_path()))
                .collect(),
            by_partition,
            all,
            unpartitioned_specs: &live.unpartitioned_specs,
        }
    }

    /// Whether delete file `delete` may apply to one of the indexed data files.
    pub(super) fn any_applies(&self, delete: &LiveFile) -> bool {
        self.candidates(delete)
            .any(|data| applies(delete, data, self.unpartitioned_specs))
    }

    /// The indexed data files `delete` may apply to.
    pub(super) fn applying_to(&self, delete: &LiveFile) -> Vec<&'a LiveFile> {
        self.candidates(delete)
            .filter(|data| applies(delete, data, self.unpartitioned_specs))
            .collect()
    }

    fn candidates(&self, delete: &LiveFile) -> Box<dyn Iterator<Item = &'a LiveFile> + '_> {
        let global = delete.file.content_type() == DataContentType::EqualityDeletes
            && self.unpartitioned_specs.contains(&delete.spec_id);
        if let Some(path) = delete.referenced_data_file()
            && delete.file.content_type() == DataContentType::PositionDeletes
            && !self.by_path.contains(&normalize_location(&path))
        {
            return Box::new(std::iter::empty());
        }
        if global {
            Box::new(self.all.iter().copied())
        } else {
            Box::new(
                self.by_partition
                    .get(&delete.partition_key())
                    .into_iter()
                    .flatten()
                    .copied(),
            )
        }
    }
}

/// Whether delete file `delete` may apply to data file `data` (see the module docs).
fn applies(delete: &LiveFile, data: &LiveFile, unpartitioned_specs: &HashSet<i32>) -> bool {
    match delete.file.content_type() {
        DataContentType::Data => false,
        DataContentType::PositionDeletes => match delete.referenced_data_file() {
            Some(path) => normalize_location(&path) == normalize_location(data.file.file_path()),
            None => {
                delete.partition_key() == data.partition_key()
                    && data.sequence_number <= delete.sequence_number
            }
        },
        DataContentType::EqualityDeletes => {
            data.sequence_number < delete.sequence_number
                && (unpartitioned_specs.contains(&delete.spec_id)
                    || delete.partition_key() == data.partition_key())
        }
    }
}
