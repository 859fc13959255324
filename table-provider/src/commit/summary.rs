//! Snapshot summaries as Iceberg Java writes them (`SnapshotSummary.Builder`): `added-*`,
//! `deleted-*` and `removed-*` keys only when non-zero, `total-*` keys as the parent's totals
//! plus what was added minus what was removed (omitted when the parent has no such total, so a
//! reader never sees a wrong one).
//!
//! Delete files as Iceberg Java 1.10 counts them (checked against Spark's snapshots): a deletion
//! vector is a delete file and counts in `*-dvs`, not in `*-position-delete-files`; its size in
//! `*-files-size` is its blob's (`content_size_in_bytes`), not the shared Puffin file's.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Snapshot, Struct};

use super::producer::DeleteFile;
use super::removal::RemovedFile;

/// What a snapshot adds, for its summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AddedFiles {
    /// Data files added.
    pub data_files: u64,
    /// Rows in them.
    pub records: u64,
    /// Bytes of every added file, as Java counts them (a deletion vector counts its blob,
    /// `content_size_in_bytes`, not the whole Puffin file).
    pub files_size: u64,
    /// Delete files added (deletion vectors included).
    pub delete_files: u64,
    /// Position delete files added (deletion vectors not included: Java counts them apart).
    pub position_delete_files: u64,
    /// Deletion vectors added.
    pub deletion_vectors: u64,
    /// Equality delete files added.
    pub equality_delete_files: u64,
    /// Position deletes in them (a deletion vector's cardinality).
    pub position_deletes: u64,
    /// Equality deletes in them.
    pub equality_deletes: u64,
    /// The partitions they are in, by spec id (an unpartitioned table has one).
    pub partition_set: HashSet<(i32, Struct)>,
}

impl AddedFiles {
    /// Totals of `files`, data files of partition spec `spec_id`, and of `deletes`, delete files
    /// each of its own spec.
    pub fn of(files: &[DataFile], spec_id: i32, deletes: &[DeleteFile]) -> Self {
        let mut out = Self {
            data_files: files.len() as u64,
            records: files.iter().map(DataFile::record_count).sum(),
            files_size: files.iter().map(DataFile::file_size_in_bytes).sum(),
            partition_set: files
                .iter()
                .map(|f| (spec_id, f.partition().clone()))
                .collect(),
            ..Self::default()
        };
        for DeleteFile { spec_id, file } in deletes {
            out.files_size += content_size(file);
            out.partition_set
                .insert((*spec_id, file.partition().clone()));
            match file.content_type() {
                DataContentType::Data => {}
                DataContentType::PositionDeletes => {
                    out.delete_files += 1;
                    if is_deletion_vector(file) {
                        out.deletion_vectors += 1;
                    } else {
                        out.position_delete_files += 1;
                    }
                    out.position_deletes += file.record_count();
                }
                DataContentType::EqualityDeletes => {
                    out.delete_files += 1;
                    out.equality_delete_files += 1;
                    out.equality_deletes += file.record_count();
                }
            }
        }
        out
    }
}

/// Whether `file` is a deletion vector (position deletes in a Puffin file).
pub fn is_deletion_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() == DataFileFormat::Puffin
}

/// A file's size as snapshot summaries count it (Java's `ScanTaskUtil.contentSizeInBytes`): a
/// deletion vector's blob size, any other file's size.
pub fn content_size(file: &DataFile) -> u64 {
    match file.content_size_in_bytes() {
        Some(size) if is_deletion_vector(file) => size.max(0) as u64,
        _ => file.file_size_in_bytes(),
    }
}

/// What a snapshot removes, for its summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RemovedFiles {
    /// Data files removed.
    pub data_files: u64,
    /// Rows in them.
    pub records: u64,
    /// Bytes of every removed file (a deletion vector's blob size).
    pub files_size: u64,
    /// Delete files removed (deletion vectors included).
    pub delete_files: u64,
    /// Position delete files removed (deletion vectors not included).
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
                    if file.deletion_vector {
                        out.deletion_vectors += 1;
                    } else {
                        out.position_delete_files += 1;
                    }
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

/// The summary properties of a snapshot on top of `parent` that adds `added` (data and delete
/// files, their partitions counted in `added.partition_set`) and removes `removed_files`.
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
    for (key, value) in [
        ("added-data-files", added.data_files),
        ("added-records", added.records),
        ("added-files-size", added.files_size),
        ("added-delete-files", added.delete_files),
        ("added-position-delete-files", added.position_delete_files),
        ("added-dvs", added.deletion_vectors),
        ("added-equality-delete-files", added.equality_delete_files),
        ("added-position-deletes", added.position_deletes),
        ("added-equality-deletes", added.equality_deletes),
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
        (
            "total-delete-files",
            added.delete_files,
            removed.delete_files,
        ),
        (
            "total-position-deletes",
            added.position_deletes,
            removed.position_deletes,
        ),
        (
            "total-equality-deletes",
            added.equality_deletes,
            removed.equality_deletes,
        ),
    ] {
        if let Some(total) = parent_total(key) {
            put(key, (total + added_value).saturating_sub(removed_value));
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, Literal};

    use super::*;

    fn delete(path: &str, format: DataFileFormat, records: u64, size: u64, blob: i64) -> DataFile {
        let mut builder = DataFileBuilder::default();
        builder
            .content(DataContentType::PositionDeletes)
            .file_path(path.to_string())
            .file_format(format)
            .partition(Struct::from_iter([Some(Literal::long(1))]))
            .record_count(records)
            .file_size_in_bytes(size);
        if format == DataFileFormat::Puffin {
            builder
                .referenced_data_file(Some(format!("{path}.parquet")))
                .content_offset(Some(4))
                .content_size_in_bytes(Some(blob));
        }
        builder.build().expect("delete file")
    }

    #[test]
    fn deletion_vectors_count_apart_from_position_delete_files() {
        let deletes = [
            delete("a.puffin", DataFileFormat::Puffin, 3, 900, 40),
            delete("b.puffin", DataFileFormat::Puffin, 2, 900, 42),
            delete("c-deletes.parquet", DataFileFormat::Parquet, 5, 1000, 0),
        ]
        .map(|file| DeleteFile { spec_id: 0, file });
        let added = AddedFiles::of(&[], 0, &deletes);
        let summary = snapshot_summary(&added, &[], None);
        let get = |key: &str| summary.get(key).map(String::as_str);
        assert_eq!(get("added-delete-files"), Some("3"));
        assert_eq!(get("added-dvs"), Some("2"));
        assert_eq!(get("added-position-delete-files"), Some("1"));
        assert_eq!(get("added-position-deletes"), Some("10"));
        // Blob sizes for deletion vectors, file sizes for the rest.
        assert_eq!(get("added-files-size"), Some("1082"));
        assert_eq!(get("added-data-files"), None);
        assert_eq!(get("changed-partition-count"), Some("1"));
        assert_eq!(get("total-delete-files"), Some("3"));
        assert_eq!(get("total-position-deletes"), Some("10"));
        assert_eq!(get("total-files-size"), Some("1082"));
        assert_eq!(get("total-data-files"), Some("0"));
    }
}
