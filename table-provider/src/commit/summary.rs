//! Snapshot summaries as Iceberg Java writes them (`SnapshotSummary.Builder`): `added-*`,
//! `deleted-*` and `removed-*` keys only when non-zero, `total-*` keys as the parent's totals
//! plus what was added minus what was removed (omitted when the parent has no such total, so a
//! reader never sees a wrong one).

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, Snapshot, Struct};

use super::removal::RemovedFile;

/// What a snapshot adds, for its summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AddedFiles {
    /// Data files added.
    pub data_files: u64,
    /// Rows in them.
    pub records: u64,
    /// Their bytes.
    pub files_size: u64,
    /// The partitions they are in, by spec id (an unpartitioned table has one).
    pub partition_set: HashSet<(i32, Struct)>,
}

impl AddedFiles {
    /// Totals of `files`, data files of partition spec `spec_id`.
    pub fn of(files: &[DataFile], spec_id: i32) -> Self {
        Self {
            data_files: files.len() as u64,
            records: files.iter().map(DataFile::record_count).sum(),
            files_size: files.iter().map(DataFile::file_size_in_bytes).sum(),
            partition_set: files
                .iter()
                .map(|f| (spec_id, f.partition().clone()))
                .collect(),
        }
    }
}

/// What a snapshot removes, for its summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RemovedFiles {
    /// Data files removed.
    pub data_files: u64,
    /// Rows in them.
    pub records: u64,
    /// Bytes of every removed file.
    pub files_size: u64,
    /// Delete files removed.
    pub delete_files: u64,
    /// Position delete files (deletion vectors included) removed.
    pub position_delete_files: u64,
    /// Deletion vectors removed.
    pub deletion_vectors: u64,
    /// Equality delete files removed.
    pub equality_delete_files: u64,
    /// Position deletes in them.
    pub position_deletes: u64,
    /// Equality deletes in them.
    pub equality_deletes: u64,
}

impl RemovedFiles {
    /// Totals of `files`.
    pub fn of(files: &[RemovedFile]) -> Self {
        let mut out = Self::default();
        for file in files {
            out.files_size += file.file_size_in_bytes;
            match file.content {
                DataContentType::Data => {
                    out.data_files += 1;
                    out.records += file.record_count;
                }
                DataContentType::PositionDeletes => {
                    out.delete_files += 1;
                    out.position_delete_files += 1;
                    out.deletion_vectors += u64::from(file.deletion_vector);
                    out.position_deletes += file.record_count;
                }
                DataContentType::EqualityDeletes => {
                    out.delete_files += 1;
                    out.equality_delete_files += 1;
                    out.equality_deletes += file.record_count;
                }
            }
        }
        out
    }
}

/// The summary properties of a snapshot on top of `parent` that adds `added` (data files,
/// their partitions counted in `added.partitions`) and removes `removed`.
pub fn snapshot_summary(
    added: &AddedFiles,
    removed_files: &[RemovedFile],
    parent: Option<&Snapshot>,
) -> HashMap<String, String> {
    let removed = RemovedFiles::of(removed_files);
    let mut summary = HashMap::new();
    let mut put = |key: &str, value: u64| {
        summary.insert(key.to_string(), value.to_string());
    };
    if added.data_files > 0 {
        put("added-data-files", added.data_files);
        put("added-records", added.records);
        put("added-files-size", added.files_size);
    }
    for (key, value) in [
        ("deleted-data-files", removed.data_files),
        ("deleted-records", removed.records),
        ("removed-files-size", removed.files_size),
        ("removed-delete-files", removed.delete_files),
        (
            "removed-position-delete-files",
            removed.position_delete_files,
        ),
        ("removed-dvs", removed.deletion_vectors),
        (
            "removed-equality-delete-files",
            removed.equality_delete_files,
        ),
        ("removed-position-deletes", removed.position_deletes),
        ("removed-equality-deletes", removed.equality_deletes),
    ] {
        if value > 0 {
            put(key, value);
        }
    }
    let mut changed: HashSet<(i32, &Struct)> = added
        .partition_set
        .iter()
        .map(|(spec, p)| (*spec, p))
        .collect();
    changed.extend(
        removed_files
            .iter()
            .map(|f| (f.partition.0, &f.partition.1)),
    );
    if !changed.is_empty() {
        put("changed-partition-count", changed.len() as u64);
    }
    let parent_total = |key: &str| -> Option<u64> {
        match parent {
            None => Some(0),
            Some(p) => p.summary().additional_properties.get(key)?.parse().ok(),
        }
    };
    for (key, added_value, removed_value) in [
        ("total-data-files", added.data_files, removed.data_files),
        ("total-records", added.records, removed.records),
        ("total-files-size", added.files_size, removed.files_size),
        ("total-delete-files", 0, removed.delete_files),
        ("total-position-deletes", 0, removed.position_deletes),
        ("total-equality-deletes", 0, removed.equality_deletes),
    ] {
        if let Some(total) = parent_total(key) {
            put(key, (total + added_value).saturating_sub(removed_value));
        }
    }
    summary
}
