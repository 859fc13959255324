//! Snapshot summaries as Iceberg Java writes them (`SnapshotSummary.Builder`): `added-*` keys
//! only when non-zero, `total-*` keys as the parent's totals plus what was added (omitted when
//! the parent has no such total, so a reader never sees a wrong one).

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataFile, Snapshot, Struct};

/// What an append adds, for its summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AddedFiles {
    /// Data files added.
    pub data_files: u64,
    /// Rows in them.
    pub records: u64,
    /// Their bytes.
    pub files_size: u64,
    /// Distinct partitions they are in (an unpartitioned table counts one).
    pub partitions: u64,
}

impl AddedFiles {
    /// Totals of `files`.
    pub fn of(files: &[DataFile]) -> Self {
        let partitions: HashSet<&Struct> = files.iter().map(DataFile::partition).collect();
        Self {
            data_files: files.len() as u64,
            records: files.iter().map(DataFile::record_count).sum(),
            files_size: files.iter().map(DataFile::file_size_in_bytes).sum(),
            partitions: partitions.len() as u64,
        }
    }
}

/// The summary properties of an append on top of `parent`.
pub fn append_summary(added: &AddedFiles, parent: Option<&Snapshot>) -> HashMap<String, String> {
    let mut summary = HashMap::new();
    let mut put = |key: &str, value: u64| {
        summary.insert(key.to_string(), value.to_string());
    };
    if added.data_files > 0 {
        put("added-data-files", added.data_files);
        put("added-records", added.records);
        put("added-files-size", added.files_size);
        put("changed-partition-count", added.partitions);
    }
    let parent_total = |key: &str| -> Option<u64> {
        match parent {
            None => Some(0),
            Some(p) => p.summary().additional_properties.get(key)?.parse().ok(),
        }
    };
    for (key, added_value) in [
        ("total-data-files", added.data_files),
        ("total-records", added.records),
        ("total-files-size", added.files_size),
        ("total-delete-files", 0),
        ("total-position-deletes", 0),
        ("total-equality-deletes", 0),
    ] {
        if let Some(total) = parent_total(key) {
            put(key, total + added_value);
        }
    }
    summary
}
